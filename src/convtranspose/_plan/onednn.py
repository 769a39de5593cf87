"""oneDNN Graph ConvTranspose-1: its attributes, layouts and rules, as canonical plans."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    ConvTransposePlan,
    as_choice,
    as_index,
    as_shape,
    build_plan,
    check_ranks,
    check_spatial,
    checked_axis,
    filter_axes,
    optional_output_shape,
    shared_attributes,
)

if TYPE_CHECKING:
    from .._typing import PerAxis, ShapeLike

__all__ = ["conv_transpose"]


_ONEDNN_AUTO_PAD = {
    None: "none", "none": "none", "same_upper": "same_upper",
    "same_lower": "same_lower", "valid": "valid",
}
_DATA_FORMATS = {"ncx": "NCX", "nxc": "NXC"}
_FILTER_FORMATS = {"xio": "XIO", "oix": "OIX", "iox": "IOX", "xoi": "XOI"}


def conv_transpose(input: ShapeLike, filter: ShapeLike, bias: ShapeLike | None = None, *,
                   strides: PerAxis = None, pads_begin: PerAxis = None,
                   pads_end: PerAxis = None, dilations: PerAxis = None, auto_pad: str = "none",
                   output_padding: PerAxis = None, groups: int = 1, data_format: str = "NXC",
                   filter_format: str = "XIO", weights_format: str | None = None,
                   output_shape: ShapeLike | None = None) -> ConvTransposePlan:
    """Plan oneDNN Graph ConvTranspose-1 from shapes.

    Takes the shapes of ``input``, ``filter`` and (optionally) ``bias``, and the same
    keywords as :func:`convtranspose.conv_transpose`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.conv_transpose((1, 8, 8, 16), (4, 4, 16, 3), strides=2,
    ...                              pads_begin=1, pads_end=1)
    >>> plan.output_shape, plan.pads_begin
    ((1, 16, 16, 3), (1, 1))
    """
    data = as_shape("input shape", input)
    filter_ = as_shape("filter shape", filter)
    data_format = as_choice("data_format", data_format, _DATA_FORMATS)
    layout = as_choice("filter_format", filter_format, _FILTER_FORMATS)
    if weights_format is not None:
        layout = as_choice("weights_format", weights_format, _FILTER_FORMATS)
    rank = check_ranks(data, filter_, 0, layout)
    mode = as_choice("auto_pad", auto_pad, _ONEDNN_AUTO_PAD)
    strides, dilations, pads_begin, pads_end, output_padding = shared_attributes(
        rank, strides, dilations, pads_begin, pads_end, output_padding)
    target = optional_output_shape(output_shape, rank)
    groups = as_index("groups", groups)
    if groups <= 0:
        raise ConvTransposeError(f"groups must be positive, got {groups}")
    for i, (op_, s) in enumerate(zip(output_padding, strides)):
        if op_ >= s:
            raise ConvTransposeError(
                f"output_padding[{i}] is {op_} but must be smaller than strides[{i}] = {s}"
                " (oneDNN cannot represent it)"
            )

    channels = data[-1] if data_format == "NXC" else data[1]
    spatial = data[1:-1] if data_format == "NXC" else data[2:]
    check_spatial("input", data, spatial)
    i_axis, o_axis, kernel_axes = filter_axes(layout, rank)
    kernel = tuple(filter_[a] for a in kernel_axes)
    check_spatial("filter", filter_, kernel)
    out_channels = _check_channels(filter_, i_axis, o_axis, channels, groups, layout, bias)

    axes, reported_begin, reported_end = [], [], []
    for i in range(rank):
        x, k, s, d, op_ = spatial[i], kernel[i], strides[i], dilations[i], output_padding[i]
        pb, pe, size, rule = _axis_rule(mode, None if target is None else target[i],
                                        pads_begin[i], pads_end[i], x, k, s, d, op_)
        reported_begin.append(pb)
        reported_end.append(pe)
        axes.append(checked_axis(i, x, k, s, d, pb, size, rule))

    sizes = tuple(a.output_size for a, _ in axes)
    output = ((data[0],) + sizes + (out_channels,) if data_format == "NXC"
              else (data[0], out_channels) + sizes)
    return build_plan("conv_transpose", data, filter_, output, strides, dilations, reported_begin,
                      reported_end, output_padding, mode, groups, data_format, layout, axes)


def _check_channels(filter_, i_axis, o_axis, channels, groups, layout, bias) -> int:
    """The output channel count, after the filter's, the groups' and the bias's checks."""
    if filter_[i_axis] != channels:
        raise ConvTransposeError(
            f"input has {channels} channels but the {layout} filter expects"
            f" {filter_[i_axis]} input channels (filter shape {filter_})"
        )
    if channels % groups:
        raise ConvTransposeError(
            f"input channels {channels} are not divisible by groups={groups}"
        )
    out_channels = filter_[o_axis] * groups
    if bias is not None:
        bias_shape = as_shape("bias shape", bias)
        if bias_shape != (out_channels,):
            raise ConvTransposeError(
                f"bias has shape {bias_shape} but must be ({out_channels},), one value per"
                f" output channel"
            )
    return out_channels


def _axis_rule(mode: str, size, pad_begin: int, pad_end: int, x: int, k: int, s: int, d: int,
               output_padding: int) -> tuple[int, int, int, str]:
    """``(pads_begin, pads_end, Y, rule)`` of one axis: ``size`` is its ``output_shape``
    entry (None without one); explicit pads count only in mode ``none``."""
    op_ = output_padding
    full = (x - 1) * s + (k - 1) * d + 1
    dilated = (k - 1) * d + 1
    if size is not None:
        total = max(full + op_ - size, 0)
        pb = {"same_upper": total // 2, "valid": 0}.get(mode, total - total // 2)
        pe = 0 if mode == "valid" else total - pb
        return pb, pe, size, (f"output_shape given: total = max(F + output_padding -"
                              f" output_shape, 0) = {total}; {mode}: pads {pb}/{pe}")
    if mode == "none":
        size = full + op_ - pad_begin - pad_end
        return pad_begin, pad_end, size, (f"Y = F + output_padding - pads_begin - pads_end ="
                                          f" {full} + {op_} - {pad_begin} - {pad_end}")
    if mode == "valid":
        return 0, 0, full + op_, f"valid: pads 0, Y = F + output_padding = {full} + {op_}"
    total = max(dilated - s, 0)
    pb = total // 2 if mode == "same_upper" else total - total // 2
    pe = total - pb
    where = "end" if mode == "same_upper" else "beginning"
    return pb, pe, full + op_ - total, (
        f"total = max(K' - s, 0) = max({dilated} - {s}, 0) = {total}; {mode}: odd extra pad"
        f" at the {where}, pads {pb}/{pe}; Y = F + output_padding - total")
