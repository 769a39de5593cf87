"""OpenVINO ConvolutionBackpropData-1 and GroupConvolutionBackpropData-1: their
attributes, defaults and rules, as canonical plans."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    ConvTransposePlan,
    as_choice,
    as_shape,
    build_plan,
    check_ranks,
    check_spatial,
    checked_axis,
    optional_output_shape,
    shared_attributes,
)

if TYPE_CHECKING:
    from .._typing import PerAxis, ShapeLike

__all__ = ["convolution_backprop_data", "group_convolution_backprop_data"]


_OPENVINO_AUTO_PAD = {
    None: "explicit", "explicit": "explicit", "notset": "explicit",
    "same_upper": "same_upper", "same_lower": "same_lower", "valid": "valid",
}


def _openvino(op, data, filter, output_shape, strides, pads_begin, pads_end, dilations,
              auto_pad, output_padding, grouped):
    data = as_shape("data shape", data)
    filter_ = as_shape("filter shape", filter)
    layout = "[G, C_IN, C_OUT, K...]" if grouped else "[C_IN, C_OUT, K...]"
    rank = check_ranks(data, filter_, 1 if grouped else 0, layout)
    check_spatial("data", data, data[2:])
    mode = as_choice("auto_pad", auto_pad, _OPENVINO_AUTO_PAD)
    strides, dilations, pads_begin, pads_end, output_padding = shared_attributes(
        rank, strides, dilations, pads_begin, pads_end, output_padding)
    target = optional_output_shape(output_shape, rank)

    if grouped:
        groups, c_in, c_out = filter_[:3]
        if data[1] != groups * c_in:
            raise ConvTransposeError(
                f"data has {data[1]} channels but filter expects {groups} groups *"
                f" {c_in} input channels = {groups * c_in} (filter shape {filter_})"
            )
    else:
        groups, (c_in, c_out) = 1, filter_[:2]
        if data[1] != c_in:
            raise ConvTransposeError(
                f"data has {data[1]} channels but filter expects {c_in} input channels"
                f" (filter shape {filter_})"
            )
    kernel = filter_[-rank:]
    check_spatial("filter", filter_, kernel)

    axes, reported_begin, reported_end = [], [], []
    for i in range(rank):
        x, k, s, d, op_ = data[2 + i], kernel[i], strides[i], dilations[i], output_padding[i]
        full = (x - 1) * s + (k - 1) * d + 1
        if target is None:
            if mode == "explicit":
                pb, pe = pads_begin[i], pads_end[i]
                offset, size = pb, full + op_ - pb - pe
                rule = f"Y = F + output_padding - pads_begin - pads_end = {full} + {op_} - {pb} - {pe}"
            else:
                pb = pe = offset = 0
                size = full + op_
                rule = f"{mode} without output_shape: pads 0, Y = F + output_padding = {full} + {op_}"
        else:
            size = target[i]
            total = max(full + op_ - size, 0)
            if mode == "explicit":
                offset, pb, pe = pads_begin[i], pads_begin[i], pads_end[i]
                rule = f"explicit with output_shape: offset = pads_begin = {pb} (pads_end unused)"
            elif mode == "valid":
                offset = pb = pe = 0
                rule = "valid with output_shape: offset 0"
            else:
                offset = total - total // 2 if mode == "same_upper" else total // 2
                pb, pe = offset, total - offset
                where = "beginning" if mode == "same_upper" else "end"
                rule = (
                    f"total = max(F + output_padding - output_shape, 0) = max({full} + {op_} - {size}, 0)"
                    f" = {total}; {mode}: odd extra pad at the {where}, pads {pb}/{pe}"
                )
        reported_begin.append(pb)
        reported_end.append(pe)
        axes.append(checked_axis(i, x, k, s, d, offset, size, rule))

    output = (data[0], groups * c_out) + tuple(a.output_size for a, _ in axes)
    return build_plan(op, data, filter_, output, strides, dilations, reported_begin, reported_end,
                      output_padding, mode, groups, "NCX", "GIOX" if grouped else "IOX", axes)


def convolution_backprop_data(data: ShapeLike, filter: ShapeLike,
                              output_shape: ShapeLike | None = None, *, strides: PerAxis = None,
                              pads_begin: PerAxis = None, pads_end: PerAxis = None,
                              dilations: PerAxis = None, auto_pad: str = "explicit",
                              output_padding: PerAxis = None) -> ConvTransposePlan:
    """Plan OpenVINO ConvolutionBackpropData-1 from shapes.

    Takes the shapes of ``data`` ``[N, C_IN, X...]`` and ``filter`` ``[C_IN, C_OUT, K...]``
    and the same keywords as :func:`convtranspose.convolution_backprop_data`.

    Returns
    -------
    ConvTransposePlan

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.convolution_backprop_data((1, 20, 224, 224), (20, 10, 3, 3),
    ...                                         strides=2, pads_begin=1, pads_end=1)
    >>> plan.output_shape
    (1, 10, 447, 447)
    """
    return _openvino("convolution_backprop_data", data, filter, output_shape, strides,
                     pads_begin, pads_end, dilations, auto_pad, output_padding, grouped=False)


def group_convolution_backprop_data(data: ShapeLike, filter: ShapeLike,
                                    output_shape: ShapeLike | None = None, *,
                                    strides: PerAxis = None, pads_begin: PerAxis = None,
                                    pads_end: PerAxis = None, dilations: PerAxis = None,
                                    auto_pad: str = "explicit",
                                    output_padding: PerAxis = None) -> ConvTransposePlan:
    """Plan OpenVINO GroupConvolutionBackpropData-1 from shapes.

    Takes the shapes of ``data`` ``[N, G*C_IN, X...]`` and ``filter``
    ``[G, C_IN, C_OUT, K...]``, and the same keywords as
    :func:`convtranspose.group_convolution_backprop_data`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> shapes.group_convolution_backprop_data((1, 20, 224, 224), (4, 5, 2, 3, 3),
    ...     strides=2, pads_begin=1, pads_end=1).output_shape
    (1, 8, 447, 447)
    """
    return _openvino("group_convolution_backprop_data", data, filter, output_shape, strides,
                     pads_begin, pads_end, dilations, auto_pad, output_padding, grouped=True)
