"""Each dialect's attributes for a canonical ``(offset, Y)`` per axis: the rules behind
``ct.translate`` (pure integer code, like the dialects themselves).

For each target, :func:`solve` first looks for attributes that give the source's
``(offset, Y)`` on every axis; where there are none, it picks the nearest attributes
whose output window ``[offset_t, offset_t + Y_t)`` covers every position of the
source's window that holds data (``[offset, offset + Y)`` within ``[0, F)``), and the
crop or zero pad that turns one window into the other.  Every answer is re-planned by
the target's own rules, so a translation can never claim what the target does not do.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import ConvTransposeError
from .._plan import ConvTransposePlan, _filter_axes
from . import jax, onednn, onnx, openvino, pytorch, tensorflow, tensorrt
from .translation_tf import TF_FAMILY, jax_attributes, tf_family_attributes

__all__ = ["Solution", "solve", "data_axes", "filter_steps", "output_axes", "NO_BIAS"]

#: Targets without a bias input: the source's bias is added after them.
NO_BIAS = ("convolution_backprop_data", "group_convolution_backprop_data",
           "tf_conv_transpose", "jax_conv_transpose")


@dataclass(frozen=True)
class Solution:
    plan: ConvTransposePlan
    attributes: dict
    crop: tuple
    bias_after: bool
    notes: tuple


def _windows(plan: ConvTransposePlan):
    """Per axis ``(F, offset, Y, needed_begin, needed_end)``: the positions of the full
    result the source's output reads."""
    result = []
    for a in plan.axes:
        full = a.full_size
        begin, end = max(a.offset, 0), min(a.offset + a.output_size, full)
        result.append((full, a.offset, a.output_size, begin, max(end, begin)))
    return result


def _explicit(windows, max_padding, symmetric=False):
    """Per axis ``(pad_begin, pad_end, output_padding, exact)`` for an explicit-pads rule
    ``offset = pad_begin``, ``Y = F + output_padding - pad_begin - pad_end`` with
    ``output_padding <= max_padding[i]`` (None: unbounded), pads never negative."""
    result = []
    for i, (full, offset, size, need_begin, need_end) in enumerate(windows):
        cap = max_padding[i]
        cap = size + full if cap is None else cap  # never more than the output
        if symmetric:  # offset p, end F + op - p: p <= offset, and the end must reach need_end
            p = max(0, min(offset, full + cap - need_end))
            op_ = min(max(offset + size - (full - p), 0), cap)
            if full + op_ - 2 * p <= 0:
                p, op_ = 0, 0
            result.append((p, p, op_, p == offset and full + op_ - p == offset + size))
            continue
        begin = max(offset, 0)
        remainder = offset + size - full  # output_padding - pads_end for an exact end
        op_ = min(max(remainder, 0), cap)
        end = max(-remainder, 0) if remainder < 0 else 0
        if full + op_ - begin - end <= 0:  # nothing of the full result is read
            begin, end, op_ = 0, 0, 0
        exact = begin == offset and full + op_ - end == offset + size
        result.append((begin, end, op_, exact))
    return result


def _crop(windows, offsets_sizes):
    """Per axis ``(drop at begin, drop at end)`` from the target's window to the source's."""
    return tuple((offset - t_offset, (t_offset + t_size) - (offset + size))
                 for (_, offset, size, _, _), (t_offset, t_size) in zip(windows, offsets_sizes))


def _note(target: str, plan: ConvTransposePlan, crop, why: str) -> str:
    parts = []
    for i, (begin, end) in enumerate(crop):
        for amount, where in ((begin, "first"), (end, "last")):
            if amount > 0:
                parts.append(f"drop the {where} {amount} along spatial axis {i}")
            elif amount < 0:
                parts.append(f"add {-amount} zeros {'before' if where == 'first' else 'after'}"
                             f" spatial axis {i}")
    return f"{target} {why}; workaround: " + ", ".join(parts)


def solve(target: str, plan: ConvTransposePlan, has_bias: bool) -> Solution:
    """The target's attributes (and any crop or pad) computing ``plan``'s output."""
    windows = _windows(plan)
    rank = plan.spatial_rank
    groups = plan.groups
    notes = []
    if target == "convolution_backprop_data" and groups > 1:
        raise ConvTransposeError(
            f"convolution_backprop_data has no groups but the layer has groups={groups};"
            f" translate to group_convolution_backprop_data instead")
    if target == "torch_conv_transpose":
        caps = [max(s, d) - 1 for s, d in zip(plan.strides, plan.dilations)]
        rules = _explicit(windows, caps, symmetric=True)
        attributes = dict(stride=plan.strides, padding=tuple(r[0] for r in rules),
                          output_padding=tuple(r[2] for r in rules), groups=groups,
                          dilation=plan.dilations)
        why = ("pads symmetrically, never negatively, with output_padding below stride or"
               " dilation")
    elif target == "tensorrt_deconvolution":
        if rank not in (2, 3):
            raise ConvTransposeError(
                f"tensorrt_deconvolution is 2-D or 3-D but the layer has {rank} spatial"
                f" axes; workaround: add a spatial axis of size 1 (data, filter and output)")
        rules = _explicit(windows, [0] * rank)
        attributes = dict(stride_nd=plan.strides, pre_padding=tuple(r[0] for r in rules),
                          post_padding=tuple(r[1] for r in rules), num_groups=groups,
                          dilation_nd=plan.dilations)
        why = "has no output_padding and no negative padding"
    elif target == "conv_transpose":
        rules = _explicit(windows, [s - 1 for s in plan.strides])
        attributes = dict(strides=plan.strides, pads_begin=tuple(r[0] for r in rules),
                          pads_end=tuple(r[1] for r in rules), dilations=plan.dilations,
                          output_padding=tuple(r[2] for r in rules), groups=groups,
                          data_format=plan.data_format, filter_format=_iox_like(plan))
        why = "cannot pad negatively nor take output_padding >= stride"
        if not all(r[3] for r in rules) and all(w[1] == 0 for w in windows):
            # VALID with output_shape starts at 0 and takes any size (zeros past F)
            attributes = {k: v for k, v in attributes.items()
                          if k not in ("pads_begin", "pads_end", "output_padding")}
            attributes.update(auto_pad="valid", output_shape=tuple(w[2] for w in windows))
    elif target in TF_FAMILY:
        attributes, why = tf_family_attributes(target, plan, windows)
    elif target == "jax_conv_transpose":
        attributes, why = jax_attributes(plan, windows), "expresses every window"
    elif target == "onnx_conv_transpose":
        rules = _explicit(windows, [None] * rank)
        attributes = dict(strides=plan.strides, dilations=plan.dilations, group=groups,
                          pads=tuple(r[0] for r in rules) + tuple(r[1] for r in rules),
                          output_padding=tuple(r[2] for r in rules))
        if not all(r[3] for r in rules):
            negative = _onnx_negative_pads(windows)
            if negative is not None:
                rules, attributes = negative, dict(attributes, pads=None, output_shape=tuple(
                    w[2] for w in windows), output_padding=tuple(r[2] for r in negative))
                attributes.pop("pads")
        why = "cannot start the output before the full result with this output size"
    else:
        rules = _explicit(windows, [None] * rank)
        attributes = dict(strides=plan.strides, pads_begin=tuple(r[0] for r in rules),
                          pads_end=tuple(r[1] for r in rules), dilations=plan.dilations,
                          output_padding=tuple(r[2] for r in rules))
        why = "cannot start the output before the full result (pads_begin >= 0)"
    target_plan = _replan(target, plan, attributes, has_bias)
    crop = _crop(windows, zip(target_plan.offset, target_plan.output_size))
    if any(pair != (0, 0) for pair in crop):
        notes.append(_note(target, plan, crop, why))
    bias_after = has_bias and (target in NO_BIAS or any(b < 0 or e < 0 for b, e in crop))
    if has_bias and target in NO_BIAS:
        notes.append(f"{target} has no bias; workaround: add the bias after it")
    return Solution(target_plan, attributes, crop, bias_after, tuple(notes))


def _onnx_negative_pads(windows):
    """ONNX with ``output_shape`` and NOTSET: ``pads_begin = total - total // 2`` for
    ``total = F + output_padding - Y``, never clamped, so the output may start before
    the full result.  Per axis ``(pb, pe, output_padding, True)`` if every axis works."""
    result = []
    for full, offset, size, _, _ in windows:
        for total in (2 * offset, 2 * offset - 1):
            op_ = size - full + total
            if op_ >= 0 and total - total // 2 == offset:
                result.append((offset, total - offset, op_, True))
                break
        else:
            return None
    return result


def _iox_like(plan: ConvTransposePlan) -> str:
    """oneDNN's filter_format closest to the source's filter layout."""
    return plan.filter_layout if plan.filter_layout in ("XIO", "OIX", "IOX", "XOI") else "IOX"


def _target_shapes(target: str, plan: ConvTransposePlan):
    """The target's data and filter shapes for the source layer."""
    ci, co, kernel = plan.in_channels, plan.out_channels // plan.groups, plan.kernel_shape
    data = (plan.batch, ci) + _spatial(plan)
    if (target in ("conv_transpose", "jax_conv_transpose") + TF_FAMILY and plan.channels_last
            or target == "tflite_transpose_conv"):
        data = (plan.batch,) + _spatial(plan) + (ci,)
    if target in ("tf_conv_transpose", "keras_conv_transpose"):
        return data, kernel + (co, ci)
    if target == "tflite_transpose_conv":
        return data, (co,) + kernel + (ci,)
    if target == "jax_conv_transpose":
        return data, kernel + (ci, co) if plan.channels_last else (ci, co) + kernel
    if target == "group_convolution_backprop_data":
        return data, (plan.groups, ci // plan.groups, co) + kernel
    if target == "conv_transpose":
        layout = _iox_like(plan)
        return data, {"IOX": (ci, co) + kernel, "OIX": (co, ci) + kernel,
                      "XIO": kernel + (ci, co), "XOI": kernel + (co, ci)}[layout]
    return data, (ci, co) + kernel


def _spatial(plan: ConvTransposePlan) -> tuple[int, ...]:
    return tuple(a.input_size for a in plan.axes)


def _replan(target, plan, attributes, has_bias) -> ConvTransposePlan:
    data, filter_ = _target_shapes(target, plan)
    bias = (plan.out_channels,) if has_bias and target not in NO_BIAS else None
    if target == "torch_conv_transpose":
        return pytorch.torch_conv_transpose(data, filter_, bias, **attributes)
    if target == "tensorrt_deconvolution":
        return tensorrt.tensorrt_deconvolution(data, filter_, bias, **attributes)
    if target == "conv_transpose":
        return onednn.conv_transpose(data, filter_, bias, **attributes)
    if target == "onnx_conv_transpose":
        return onnx.onnx_conv_transpose(data, filter_, bias, **attributes)
    if target == "jax_conv_transpose":
        return jax.jax_conv_transpose(data, filter_, **attributes)
    if target == "tf_conv_transpose":
        return tensorflow.tf_conv_transpose(data, filter_, **attributes)
    if target == "keras_conv_transpose":
        return tensorflow.keras_conv_transpose(data, filter_, bias, **attributes)
    if target == "tflite_transpose_conv":
        attributes = dict(attributes)
        return tensorflow.tflite_transpose_conv(attributes.pop("output_shape"), filter_, data,
                                                bias, **attributes)
    resolver = getattr(openvino, target)
    return resolver(data, filter_, None, **attributes)


def data_axes(source: ConvTransposePlan, target: ConvTransposePlan):
    """The transpose taking the source's data layout to the target's (None: the same)."""
    if source.channels_last == target.channels_last:
        return None
    rank = source.spatial_rank
    if source.channels_last:  # NXC -> NCX
        return (0, rank + 1) + tuple(range(1, rank + 1))
    return (0,) + tuple(range(2, rank + 2)) + (1,)


def output_axes(source: ConvTransposePlan, target: ConvTransposePlan):
    """The transpose taking the target's output layout back to the source's."""
    return data_axes(target, source)


def filter_steps(source: ConvTransposePlan, target: ConvTransposePlan, flip: bool = False,
                 ) -> tuple:
    """Transpose and reshape steps: source filter -> ``(G, Ci, Co, K...)`` -> target's,
    then with ``flip`` a spatial flip of the target's kernel axes (JAX's correlation
    kernel on one side only)."""
    rank = source.spatial_rank
    steps = []
    if source.filter_layout != "GIOX":
        axes = source._filter_to_canonical
        if axes != tuple(range(len(axes))):
            steps.append(("transpose", axes))
    canonical = target.canonical_filter_shape
    if target.filter_layout == "GIOX":
        steps.append(("reshape", canonical))
    else:
        i_axis, o_axis, kernel_axes = _filter_axes(target.filter_layout, rank)
        # from (I, O, K...) to the target's order: position p holds canonical axis order[p]
        positions = {i_axis: 0, o_axis: 1}
        positions.update({axis: 2 + n for n, axis in enumerate(kernel_axes)})
        order = tuple(positions[p] for p in range(rank + 2))
        steps.append(("reshape", (source.in_channels, source.out_channels // source.groups)
                      + source.kernel_shape))
        if order != tuple(range(rank + 2)):
            steps.append(("transpose", order))
    if flip:
        kernel = (tuple(range(3, 3 + rank)) if target.filter_layout == "GIOX"
                  else _filter_axes(target.filter_layout, rank)[2])
        steps.append(("flip", kernel))
    return _simplify(steps, source.filter_shape)


def _simplify(steps, shape) -> tuple:
    """Drop reshapes to the shape the array already has; merge consecutive transposes."""
    result: list = []
    for step, value in steps:
        value = tuple(value)
        if step == "transpose":
            shape = tuple(shape[a] for a in value)
            if result and result[-1][0] == "transpose":  # a then value: axes a[value[i]]
                first = result.pop()[1]
                value = tuple(first[a] for a in value)
            if value == tuple(range(len(value))):
                continue
        elif step == "reshape":
            if value == tuple(shape):
                continue
            shape = value
        result.append((step, value))
    return tuple(result)
