"""Target attributes for the dialects whose output size is tied to the input (TensorFlow,
Keras 3, TFLite) and for JAX: the part of ``ct.translate``'s rules behind those targets.

TensorFlow, Keras and TFLite cannot choose ``(offset, Y)`` freely: ``Y`` must map back to
the input ``X`` through the forward convolution's rule and the offset follows from the
padding mode (``_plan/tensorflow.py``)::

    VALID     Y in [F, F + s - 1]                 offset = 0
    SAME      Y in [(X-1)*s + 1, X*s]             offset = max(F - Y, 0) // 2
    explicit  Y + a + b in [F, F + s - 1]         offset = a >= 0   (tf.nn, 2-D only)

and Keras derives ``Y`` from ``padding`` and ``output_padding`` (None, or one value per
axis below the stride).  Each rule yields a few candidate ``(value, offset, Y)`` per axis;
the chosen mode is the one whose best candidates reproduce the source's window exactly,
or else cover every position of it that holds data with the least crop and zero pad.
JAX's explicit pairs (negative allowed) express every window exactly.
"""

from __future__ import annotations

from .._errors import ConvTransposeError
from .rules import ConvTransposePlan
from .tensorflow import keras_output_size

__all__ = ["TF_FAMILY", "CHANNELS_LAST_TARGETS", "tf_family_attributes", "jax_attributes",
           "jax_specs"]

TF_FAMILY = ("tf_conv_transpose", "keras_conv_transpose", "tflite_transpose_conv")
#: Targets that always take channels-last data: TFLite has no other layout, and
#: TensorFlow's default CPU kernels (``Conv2DCustomBackpropInputOp`` and its 1-D and 3-D
#: kin, also under Keras) refuse channels-first data ("only supports NHWC"), so a
#: channels-first layer goes there with its data and output transposed.
CHANNELS_LAST_TARGETS = TF_FAMILY
_TF_FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}
_WHY = ("ties the output size to the input by the forward convolution's rule (SAME:"
        " X = ceil(Y/s), offset = max(F - Y, 0) // 2; VALID: Y in [F, F + s - 1], offset 0)")


def _cost(window, offset_t, size_t):
    """None if the target window misses a position of the source's that holds data,
    else how many elements must be cropped or zero padded."""
    _, offset, size, need_begin, need_end = window
    if need_end > need_begin and (offset_t > need_begin or offset_t + size_t < need_end):
        return None
    return abs(offset_t - offset) + abs(offset_t + size_t - offset - size)


def _tf_candidates(mode, window, x, s):
    """``(value, offset_t, Y_t)`` one axis can take under a TensorFlow padding mode."""
    full, offset = window[0], window[1]
    if mode == "VALID":
        return [(y, 0, y) for y in range(full, full + s)]
    if mode == "SAME":
        return [(y, max(full - y, 0) // 2, y) for y in range((x - 1) * s + 1, x * s + 1)]
    result = []  # explicit (a, b): Y in [1, F + s - 1 - a]
    for a in sorted({max(offset, 0), 0, max(window[3], 0)}):
        high = full + s - 1 - a
        wanted = max(offset + window[2], window[4]) - a
        y = min(max(wanted, 1), high)
        if y >= 1:
            result.append(((a, max(full - y - a, 0), y), a, y))
    return result


def _keras_candidates(mode, extra, window, x, k, s, d):
    """``(output_padding, offset_t, Y_t)`` one axis can take under a Keras padding mode
    with ``output_padding`` None (``extra`` False) or explicit."""
    full = window[0]
    result = []
    for op_ in (range(s) if extra else (None,)):
        y = keras_output_size(x, k, s, d, mode, op_)
        if mode == "same" and not (x - 1) * s + 1 <= y <= x * s:
            continue  # TensorFlow refuses the size Keras computes
        result.append((op_, 0 if mode == "valid" else max(full - y, 0) // 2, y))
    return result


def _best(candidates_per_axis, windows):
    """Per axis the best covering candidate and the total cost, or None."""
    chosen, total = [], 0
    for candidates, window in zip(candidates_per_axis, windows):
        scored = [(c, _cost(window, c[1], c[2])) for c in candidates]
        scored = [(c, cost) for c, cost in scored if cost is not None]
        if not scored:
            return None
        best = min(scored, key=lambda item: item[1])
        chosen.append(best[0])
        total += best[1]
    return chosen, total


def _refuse_unsupported(target, plan: ConvTransposePlan):
    """What no split or kernel rewrite can carry (groups and dilation were removed from
    ``plan`` by :func:`~.translation.solve` before)."""
    rank = plan.spatial_rank
    if target == "tflite_transpose_conv" and rank != 2:
        raise ConvTransposeError(
            f"tflite_transpose_conv is 2-D but the layer has {rank} spatial axes;"
            f" workaround: add a spatial axis of size 1 (data, filter and output)")


def tf_family_attributes(target: str, plan: ConvTransposePlan, windows):
    """The target's attributes (nearest when not exact) and why it may not be exact."""
    _refuse_unsupported(target, plan)
    rank = plan.spatial_rank
    geometry = [(a.input_size, a.kernel_size, a.stride, a.dilation) for a in plan.axes]
    options = []  # (mode, extra, per-axis candidates)
    if target == "keras_conv_transpose":
        for mode in ("same", "valid"):
            for extra in (False, True):
                options.append((mode, extra, [_keras_candidates(mode, extra, w, *g)
                                              for w, g in zip(windows, geometry)]))
    else:
        modes = ["SAME", "VALID"] + (["explicit"] if target == "tf_conv_transpose"
                                     and rank == 2 else [])
        for mode in modes:
            options.append((mode, False, [_tf_candidates(mode, w, x, s)
                                          for w, (x, _, s, _) in zip(windows, geometry)]))
    best = None
    for mode, extra, candidates in options:
        found = _best(candidates, windows)
        if found is not None and (best is None or found[1] < best[3]):
            best = (mode, extra, found[0], found[1])
    assert best is not None  # VALID covers the whole full result
    mode, extra, chosen, _ = best
    # every TF-family target takes channels-last data (CHANNELS_LAST_TARGETS)
    output_shape = [plan.batch] + [c[2] for c in chosen] + [plan.out_channels]
    if target == "keras_conv_transpose":
        return dict(strides=plan.strides, padding=mode,
                    output_padding=tuple(c[0] for c in chosen) if extra else None,
                    data_format="channels_last", dilation_rate=plan.dilations), (
            _WHY + "; Keras derives Y from padding and output_padding")
    if target == "tflite_transpose_conv":
        return dict(output_shape=output_shape, padding=mode, stride_h=plan.strides[0],
                    stride_w=plan.strides[1]), _WHY
    padding: object = mode
    if mode == "explicit":
        padding = [(0, 0)] + [c[0][:2] for c in chosen] + [(0, 0)]
    return dict(output_shape=output_shape, strides=plan.strides, padding=padding,
                data_format=_TF_FORMATS[rank][0], dilations=plan.dilations), (
        _WHY + "; explicit padding is 2-D only")


def jax_specs(rank: int, channels_last: bool) -> tuple[str, str, str]:
    """JAX dimension numbers in the source's data layout: ``NHWC, HWIO`` or ``NCHW, IOHW``."""
    letters = "HWDEFGJKLM"[:rank]
    data = "N" + letters + "C" if channels_last else "NC" + letters
    return data, letters + "IO" if channels_last else "IO" + letters, data


def jax_attributes(plan: ConvTransposePlan, windows) -> dict:
    """``lax.conv_transpose`` pads ``(a, b)`` of the dilated input: ``offset = K' - 1 - a``,
    ``Y = F + a + b - 2 (K' - 1)``, so every window is exact (pads may be negative)."""
    pairs = []
    for axis, (full, offset, size, _, _) in zip(plan.axes, windows):
        edge = axis.dilated_kernel_size - 1
        a = edge - offset
        pairs.append((a, size - full - a + 2 * edge))
    return dict(strides=plan.strides, padding=tuple(pairs), rhs_dilation=plan.dilations,
                dimension_numbers=jax_specs(plan.spatial_rank, plan.channels_last),
                transpose_kernel=False)
