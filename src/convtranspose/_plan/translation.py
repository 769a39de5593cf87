"""Each dialect's attributes for a canonical ``(offset, Y)`` per axis: the rules behind
``ct.translate`` (pure integer code, like the dialects themselves).

For each target, :func:`solve` first looks for attributes that give the source's
``(offset, Y)`` on every axis; where there are none, it picks the nearest attributes
whose output window ``[offset_t, offset_t + Y_t)`` covers every position of the
source's window that holds data (``[offset, offset + Y)`` within ``[0, F)``), and the
crop or zero pad that turns one window into the other.  Every answer is re-planned by
the target's own rules, so a translation can never claim what the target does not do.

A grouped layer to a target without groups is solved for one group (:func:`per_group`),
and a dilation the target cannot take for the kernel dilated with zeros
(:func:`undilated`): neither changes the windows, and :func:`filter_steps` adds the
``dilate`` and ``split_groups`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .._errors import ConvTransposeError
from . import jax, onednn, onnx, openvino, pytorch, tensorflow, tensorrt
from .rules import ConvTransposePlan, filter_axes
from .translation_tf import (
    CHANNELS_LAST_TARGETS,
    TF_FAMILY,
    jax_attributes,
    tf_family_attributes,
)

__all__ = ["Solution", "solve", "data_axes", "filter_steps", "output_axes", "NO_BIAS",
           "SPLIT_TARGETS", "per_group", "undilated", "channel_range"]

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
    split: int = 1  # target layers, one per group (1: the target takes the groups)
    kernel_dilations: tuple | None = None  # the kernel is dilated by these with zeros


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


#: Targets without groups: a grouped layer becomes one target layer per group, and why.
SPLIT_TARGETS = {
    "tf_conv_transpose": "has no groups (its CPU kernels refuse a grouped filter: \"Gradients"
                         " for grouped convolutions are not supported on CPU\")",
    "keras_conv_transpose": "has no groups (Conv*DTranspose takes no groups argument)",
    "tflite_transpose_conv": "has no groups (TRANSPOSE_CONV's weights hold every input"
                             " channel)",
    "jax_conv_transpose": "has no groups (lax.conv_transpose has no feature_group_count;"
                          " lax.conv_general_dilated with lhs_dilation=strides and"
                          " feature_group_count=G is one op, but not this dialect)",
}


def solve(target: str, plan: ConvTransposePlan, has_bias: bool) -> Solution:
    """The target's attributes (and any group split, kernel dilation, crop or pad)
    computing ``plan``'s output.

    A grouped layer to a target without groups is solved for one group (each target
    layer's attributes); a dilation the target cannot take is solved for the kernel
    dilated with zeros.  Neither changes the windows: ``F``, offset and ``Y`` depend on
    the dilated kernel size only.
    """
    groups = plan.groups
    if target == "convolution_backprop_data" and groups > 1:
        raise ConvTransposeError(
            f"convolution_backprop_data has no groups but the layer has groups={groups};"
            f" translate to group_convolution_backprop_data instead")
    split = groups if target in SPLIT_TARGETS and groups > 1 else 1
    layer = per_group(plan) if split > 1 else plan
    dilate = _kernel_dilation_needed(target, plan)
    if dilate:
        layer = undilated(layer)
    windows = _windows(plan)
    attributes, why = _attributes(target, layer, windows)
    target_plan = _replan(target, layer, attributes, has_bias)
    crop = _crop(windows, zip(target_plan.offset, target_plan.output_size))
    notes = []
    if split > 1:
        notes.append(_split_note(target, plan))
    if dilate:
        notes.append(_dilation_note(target, plan))
    if any(pair != (0, 0) for pair in crop):
        notes.append(_note(target, plan, crop, why))
    bias_after = has_bias and (target in NO_BIAS or any(b < 0 or e < 0 for b, e in crop))
    if has_bias and target in NO_BIAS:
        notes.append(f"{target} has no bias; workaround: add the bias after it")
    return Solution(target_plan, attributes, crop, bias_after, tuple(notes), split,
                    plan.dilations if dilate else None)


def _kernel_dilation_needed(target: str, plan: ConvTransposePlan) -> bool:
    """TFLite has no dilation; Keras refuses it with strides > 1."""
    if max(plan.dilations) == 1:
        return False
    return target == "tflite_transpose_conv" or (
        target == "keras_conv_transpose" and max(plan.strides) > 1)


def _split_note(target: str, plan: ConvTransposePlan) -> str:
    g, ci, co = plan.groups, plan.in_channels // plan.groups, plan.out_channels // plan.groups
    return (f"{target} {SPLIT_TARGETS[target]}; workaround: {g} layers, layer g taking input"
            f" channels {channel_range(ci)} and filter[g] and giving output channels"
            f" {channel_range(co)}, their outputs concatenated along the channel axis")


def channel_range(count: int) -> str:
    """Group g's channels ``[count*g, count*(g+1))`` as text."""
    return "[g, g + 1)" if count == 1 else f"[{count}g, {count}g + {count})"


def _dilation_note(target: str, plan: ConvTransposePlan) -> str:
    why = ("has no dilation" if target == "tflite_transpose_conv" else
           f"refuses strides > 1 with dilation_rate > 1 (strides={list(plan.strides)})")
    sizes = [a.dilated_kernel_size for a in plan.axes]
    return (f"{target} {why}; workaround: the kernel dilated by {list(plan.dilations)}"
            f" (d - 1 zeros between taps, kernel size (K - 1) * d + 1 = {sizes}) with"
            f" dilation 1, which computes the same")


def per_group(plan: ConvTransposePlan) -> ConvTransposePlan:
    """One group of ``plan`` as a layer of its own (groups 1, an ``IOX`` filter)."""
    g = plan.groups
    ci, co = plan.in_channels // g, plan.out_channels // g
    axis = -1 if plan.channels_last else 1

    def channels(shape, count):
        shape = list(shape)
        shape[axis] = count
        return tuple(shape)

    return replace(plan, groups=1, data_shape=channels(plan.data_shape, ci),
                   output_shape=channels(plan.output_shape, co),
                   filter_shape=(ci, co) + plan.kernel_shape, filter_layout="IOX")


def undilated(plan: ConvTransposePlan) -> ConvTransposePlan:
    """``plan`` with its kernel dilated by zeros: kernel size ``K'``, dilation 1."""
    rank = plan.spatial_rank
    axes = tuple(replace(a, kernel_size=a.dilated_kernel_size, dilation=1) for a in plan.axes)
    filter_shape = list(plan.filter_shape)
    for position, axis in zip(filter_axes(plan.filter_layout, rank)[2], axes):
        filter_shape[position] = axis.kernel_size
    return replace(plan, axes=axes, dilations=(1,) * rank, filter_shape=tuple(filter_shape))


def _attributes(target: str, plan: ConvTransposePlan, windows) -> tuple[dict, str]:
    """The target's attributes for ``plan``'s windows (nearest when not exact), and what
    keeps them from being exact."""
    rank, groups = plan.spatial_rank, plan.groups
    if target == "torch_conv_transpose":
        caps = [max(s, d) - 1 for s, d in zip(plan.strides, plan.dilations)]
        rules = _explicit(windows, caps, symmetric=True)
        return dict(stride=plan.strides, padding=tuple(r[0] for r in rules),
                    output_padding=tuple(r[2] for r in rules), groups=groups,
                    dilation=plan.dilations), (
            "pads symmetrically, never negatively, with output_padding below stride or"
            " dilation")
    if target == "tensorrt_deconvolution":
        if rank not in (2, 3):
            raise ConvTransposeError(
                f"tensorrt_deconvolution is 2-D or 3-D but the layer has {rank} spatial"
                f" axes; workaround: add a spatial axis of size 1 (data, filter and output)")
        rules = _explicit(windows, [0] * rank)
        return dict(stride_nd=plan.strides, pre_padding=tuple(r[0] for r in rules),
                    post_padding=tuple(r[1] for r in rules), num_groups=groups,
                    dilation_nd=plan.dilations), "has no output_padding and no negative padding"
    if target == "conv_transpose":
        return _onednn_attributes(plan, windows)
    if target in TF_FAMILY:
        return tf_family_attributes(target, plan, windows)
    if target == "jax_conv_transpose":
        return jax_attributes(plan, windows), "expresses every window"
    if target == "onnx_conv_transpose":
        return _onnx_attributes(plan, windows)
    rules = _explicit(windows, [None] * rank)
    return dict(strides=plan.strides, pads_begin=tuple(r[0] for r in rules),
                pads_end=tuple(r[1] for r in rules), dilations=plan.dilations,
                output_padding=tuple(r[2] for r in rules)), (
        "cannot start the output before the full result (pads_begin >= 0)")


def _onednn_attributes(plan: ConvTransposePlan, windows) -> tuple[dict, str]:
    rules = _explicit(windows, [s - 1 for s in plan.strides])
    attributes = dict(strides=plan.strides, pads_begin=tuple(r[0] for r in rules),
                      pads_end=tuple(r[1] for r in rules), dilations=plan.dilations,
                      output_padding=tuple(r[2] for r in rules), groups=plan.groups,
                      data_format=plan.data_format, filter_format=_iox_like(plan))
    if not all(r[3] for r in rules) and all(w[1] == 0 for w in windows):
        # VALID with output_shape starts at 0 and takes any size (zeros past F)
        attributes = {k: v for k, v in attributes.items()
                      if k not in ("pads_begin", "pads_end", "output_padding")}
        attributes.update(auto_pad="valid", output_shape=tuple(w[2] for w in windows))
    return attributes, "cannot pad negatively nor take output_padding >= stride"


def _onnx_attributes(plan: ConvTransposePlan, windows) -> tuple[dict, str]:
    # Explicit pads and output_padding below the stride, the form torch.onnx.export
    # writes: onnxruntime refuses output_padding >= stride ("may be too large for
    # stride") and an output_shape whose derived pads would be negative ("inconsistent
    # with input spatial dimensions"), so a window no such pads give is a crop or pad.
    rules = _explicit(windows, [s - 1 for s in plan.strides])
    return dict(strides=plan.strides, dilations=plan.dilations, group=plan.groups,
                pads=tuple(r[0] for r in rules) + tuple(r[1] for r in rules),
                output_padding=tuple(r[2] for r in rules)), (
        "cannot start the output before the full result nor take output_padding >= stride"
        " (onnxruntime refuses both)")


def _iox_like(plan: ConvTransposePlan) -> str:
    """oneDNN's filter_format closest to the source's filter layout."""
    return plan.filter_layout if plan.filter_layout in ("XIO", "OIX", "IOX", "XOI") else "IOX"


def _target_shapes(target: str, plan: ConvTransposePlan):
    """The target's data and filter shapes for the source layer."""
    ci, co, kernel = plan.in_channels, plan.out_channels // plan.groups, plan.kernel_shape
    data = (plan.batch, ci) + _spatial(plan)
    if (target in ("conv_transpose", "jax_conv_transpose") and plan.channels_last
            or target in CHANNELS_LAST_TARGETS):
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
                 split: int = 1, dilations: tuple | None = None) -> tuple:
    """The steps taking the source's filter to the target's.

    Transpose and reshape steps: source filter -> ``(G, Ci, Co, K...)`` -> the target's
    layout; with ``split`` > 1 (``target`` is one group's plan) the group axis stays in
    front, one filter per target layer.  Then with ``flip`` a spatial flip of the
    kernel axes (JAX's correlation kernel on one side only), with ``dilations`` the
    kernel dilated with zeros (a factor per axis), and with ``split`` a
    ``("split_groups", (G,))`` step: layer ``g`` takes ``filter[g]``.
    """
    rank = source.spatial_rank
    steps = []
    if source.filter_layout != "GIOX":
        axes = source._filter_to_canonical
        if axes != tuple(range(len(axes))):
            steps.append(("transpose", axes))
    lead = 1 if split > 1 else 0
    if split > 1:
        steps.append(("reshape", source.canonical_filter_shape))
        steps.append(("transpose", (0,) + tuple(1 + p for p in _order(target, rank))))
    elif target.filter_layout == "GIOX":
        steps.append(("reshape", source.canonical_filter_shape))
    else:
        steps.append(("reshape", (source.in_channels, source.out_channels // source.groups)
                      + source.kernel_shape))
        steps.append(("transpose", _order(target, rank)))
    kernel = tuple(lead + a for a in (range(3, 3 + rank) if target.filter_layout == "GIOX"
                                      else filter_axes(target.filter_layout, rank)[2]))
    if flip:
        steps.append(("flip", kernel))
    if dilations is not None:
        factors = [1] * (lead + len(target.filter_shape))
        for axis, d in zip(kernel, dilations):
            factors[axis] = d
        steps.append(("dilate", tuple(factors)))
    if split > 1:
        steps.append(("split_groups", (split,)))
    return _simplify(steps, source.filter_shape)


def _order(target: ConvTransposePlan, rank: int) -> tuple[int, ...]:
    """The transpose from ``(I, O, K...)`` to the target's (non-grouped) filter layout:
    position p holds canonical axis ``order[p]``."""
    i_axis, o_axis, kernel_axes = filter_axes(target.filter_layout, rank)
    positions = {i_axis: 0, o_axis: 1}
    positions.update({axis: 2 + n for n, axis in enumerate(kernel_axes)})
    return tuple(positions[p] for p in range(rank + 2))


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
