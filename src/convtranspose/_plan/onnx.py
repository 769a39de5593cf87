"""ONNX ConvTranspose (opset 11 and later): its attributes and rules, as canonical plans."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    ConvTransposePlan,
    as_choice,
    as_index,
    as_sequence,
    as_shape,
    build_plan,
    check_ranks,
    check_spatial,
    checked_axis,
    optional_output_shape,
    per_axis,
    shared_attributes,
)

if TYPE_CHECKING:
    from .._typing import PerAxis, ShapeLike

__all__ = ["onnx_conv_transpose"]

#: ``pads_rule``: how pads derived from a total split.  "current" is the ConvTranspose
#: text since onnx PR #3440 (2021); "pre-2021" the text it replaced in place, within the
#: same opset 11, so a model means one or the other by the date of the tool that wrote it.
_PADS_RULES = {"current": "current", "pre-2021": "pre-2021", "pre2021": "pre-2021"}


_ONNX_AUTO_PAD = {
    None: "notset", "notset": "notset", "same_upper": "same_upper",
    "same_lower": "same_lower", "valid": "valid",
}


def onnx_conv_transpose(X: ShapeLike, W: ShapeLike, B: ShapeLike | None = None, *,
                        auto_pad: str = "NOTSET", dilations: PerAxis = None, group: int = 1,
                        kernel_shape: ShapeLike | None = None, output_padding: PerAxis = None,
                        output_shape: ShapeLike | None = None, pads: ShapeLike | None = None,
                        strides: PerAxis = None,
                        pads_rule: str = "current") -> ConvTransposePlan:
    """Plan ONNX ConvTranspose (opset 11+) from shapes.

    Takes the shapes of ``X`` ``(N, C, D...)``, ``W`` ``(C, M/group, K...)`` and
    optionally ``B`` ``(M,)``, and the same keywords as
    :func:`convtranspose.onnx_conv_transpose`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.onnx_conv_transpose((1, 1, 3, 3), (1, 2, 3, 3), strides=[3, 2],
    ...                                   output_shape=[10, 8])
    >>> plan.output_shape, plan.pads_begin, plan.pads_end   # onnx's test_convtranspose_output_shape
    ((1, 2, 10, 8), (0, 0), (-1, -1))
    """
    data = as_shape("X shape", X)
    filter_ = as_shape("W shape", W)
    rank = check_ranks(data, filter_, 0, "(C, M/group, K...)")
    check_spatial("X", data, data[2:])
    mode = as_choice("auto_pad", auto_pad, _ONNX_AUTO_PAD)
    pre_2021 = as_choice("pads_rule", pads_rule, _PADS_RULES) == "pre-2021"
    strides, dilations, _, _, output_padding = shared_attributes(
        rank, strides, dilations, None, None, output_padding)
    group = as_index("group", group)
    if group <= 0:
        raise ConvTransposeError(f"group must be positive, got {group}")
    pads_begin, pads_end = _pads(pads, rank)
    target = output_shape
    if target is not None:
        items = as_sequence("output_shape", target)
        if len(items) == rank + 2:  # a whole shape (N, M, spatial...): keep the spatial part
            items = items[2:]
        target = optional_output_shape(items, rank)

    kernel = filter_[2:]
    check_spatial("filter", filter_, kernel)
    if kernel_shape is not None:
        declared = as_shape("kernel_shape", kernel_shape)
        if declared != kernel:
            raise ConvTransposeError(
                f"kernel_shape is {declared} but W has spatial shape {kernel} (W shape {filter_})"
            )
    if filter_[0] != data[1]:
        raise ConvTransposeError(
            f"X has {data[1]} channels but W expects {filter_[0]} input channels"
            f" (W shape {filter_})"
        )
    if data[1] % group:
        raise ConvTransposeError(f"X channels {data[1]} are not divisible by group={group}")
    out_channels = filter_[1] * group
    if B is not None:
        bias_shape = as_shape("B shape", B)
        if bias_shape != (out_channels,):
            raise ConvTransposeError(
                f"B has shape {bias_shape} but must be ({out_channels},), one value per output channel"
            )

    axes, reported_begin, reported_end = [], [], []
    for i in range(rank):
        x, k, s, d, op_ = data[2 + i], kernel[i], strides[i], dilations[i], output_padding[i]
        pb, pe, size, rule = _axis_rule(mode, None if target is None else target[i],
                                        pads_begin[i], pads_end[i], x, k, s, d, op_, pre_2021)
        reported_begin.append(pb)
        reported_end.append(pe)
        axes.append(checked_axis(i, x, k, s, d, pb, size, rule))

    output = (data[0], out_channels) + tuple(a.output_size for a, _ in axes)
    return build_plan("onnx_conv_transpose", data, filter_, output, strides, dilations,
                      reported_begin, reported_end, output_padding, mode, group, "NCX", "IOX",
                      axes)


def _pads(pads, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``pads`` (all begins, then all ends) as ``(begins, ends)``; zeros when absent."""
    if pads is None:
        return (0,) * rank, (0,) * rank
    items = as_sequence("pads", pads)
    if len(items) != 2 * rank:
        raise ConvTransposeError(
            f"pads has {len(items)} values {tuple(items)} but must have 2 * {rank} ="
            f" {2 * rank}: all begins, then all ends"
        )
    both = per_axis("pads", items, 2 * rank, 0, 0)
    return both[:rank], both[rank:]


def _axis_rule(mode: str, size, pad_begin: int, pad_end: int, x: int, k: int, s: int, d: int,
               output_padding: int, pre_2021: bool = False) -> tuple[int, int, int, str]:
    """``(pads_begin, pads_end, Y, rule)`` of one axis: ``size`` is its ``output_shape``
    entry (None without one).  With ``output_shape``, VALID derives its pads like NOTSET
    (the ONNX text's "Else" branch; onnx shape inference and onnxruntime agree:
    ``docs/semantics.md``); the total is never clamped, so pads may be negative."""
    op_ = output_padding
    full = (x - 1) * s + (k - 1) * d + 1
    if mode == "valid" and size is None:
        return 0, 0, full + op_, f"VALID: pads 0, Y = F + output_padding = {full} + {op_}"
    if size is None and mode == "notset":
        size = full + op_ - pad_begin - pad_end
        return pad_begin, pad_end, size, (f"Y = F + output_padding - pads_begin - pads_end ="
                                          f" {full} + {op_} - {pad_begin} - {pad_end}")
    source = "output_shape" if size is not None else f"X*s = {x}*{s}"
    size = size if size is not None else x * s
    total = full + op_ - size
    # The text since 2021: SAME_UPPER pads total//2 first (the odd pad at the end), every
    # other mode the rest first.  The text before (and onnxruntime before 1.13) swapped them.
    odd_pad_last = (mode == "same_upper") != pre_2021
    pb = total // 2 if odd_pad_last else total - total // 2
    pe = total - pb
    text = " (pre-2021 text)" if pre_2021 else ""
    return pb, pe, size, (f"Y = {source}; total = F + output_padding - Y = {full} + {op_} -"
                          f" {size} = {total}; {mode.upper()}{text}: pads {pb}/{pe}")
