"""PyTorch ``conv_transpose1d/2d/3d`` and ``nn.ConvTranspose*d.forward(input, output_size)``:
their arguments, layouts and rules, as canonical plans.

PyTorch pads symmetrically (``padding`` removes that many elements at both ends),
``output_padding`` adds elements at the end and must be smaller than the stride or the
dilation, and the module's ``output_size`` chooses ``output_padding`` in
``[0, stride - 1]`` (the module then ignores its own ``output_padding``).  An empty
spatial axis, and an output size of 0, are taken only with an empty batch; an empty
weight is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    ConvTransposePlan,
    as_index,
    as_sequence,
    as_shape,
    build_plan,
    check_spatial,
    checked_axis,
    per_axis,
)

if TYPE_CHECKING:

    from .._typing import PerAxis, ShapeLike

__all__ = ["torch_conv_transpose", "torch_per_axis"]


def torch_per_axis(name: str, value: object, rank: int, minimum: int) -> tuple[int, ...]:
    """An int, or a sequence of one value or of ``rank`` values, as ``rank`` values.

    PyTorch expands a one-element list to every axis (``stride=[2]`` in 2-D is
    ``(2, 2)``); every other length must be the spatial rank.
    """
    if value is None:
        raise ConvTransposeError(f"{name} must be an int or a sequence of ints, got None")
    if not isinstance(value, (int, bool)) and not hasattr(value, "__index__"):
        items = as_sequence(name, value)
        if len(items) == 1:
            value = items[0]
    return per_axis(name, value, rank, 0, minimum)


def _torch_output_padding(output_size, data, rank, strides, padding, dilations, kernel):
    """The ``output_padding`` ``nn.ConvTranspose*d`` derives from ``output_size``.

    ``output_size`` holds the spatial sizes or the whole ``(N, C_out, ...)`` shape; each
    size must lie in ``[min, min + stride - 1]`` with ``min`` the size at output_padding 0.
    """
    items = as_sequence("output_size", output_size)
    if len(items) == rank + 2:
        items = items[2:]
    if len(items) != rank:
        raise ConvTransposeError(
            f"output_size has {len(items)} values {tuple(items)} but must have {rank} (the"
            f" spatial sizes) or {rank + 2} (the whole output shape) for input shape {data}")
    sizes = tuple(as_index(f"output_size[{i}]", v) for i, v in enumerate(items))
    minimum = [(data[2 + i] - 1) * strides[i] - 2 * padding[i]
               + (kernel[i] - 1) * dilations[i] + 1 for i in range(rank)]
    maximum = [m + s - 1 for m, s in zip(minimum, strides)]
    for i, size in enumerate(sizes):
        if not minimum[i] <= size <= maximum[i]:
            raise ConvTransposeError(
                f"output_size {list(sizes)} is out of range: along spatial axis {i} it must lie"
                f" in [{minimum[i]}, {maximum[i]}] ((X-1)*stride - 2*padding + (K-1)*dilation"
                f" + 1 up to stride - 1 more) for input shape {data}; valid sizes range from"
                f" {minimum} to {maximum}")
    return tuple(size - low for size, low in zip(sizes, minimum))


def _check_channels(data, filter_, groups: int) -> None:
    """PyTorch's refusals of a weight: empty, or channels that do not match the input's."""
    if 0 in filter_[:2]:
        raise ConvTransposeError(
            f"weight shape {filter_} has no {'input' if filter_[0] == 0 else 'output'}"
            f" channels: PyTorch refuses an empty weight (\"expected weight to be at least 1"
            f" at dimension 0\", \"non-empty ... weight tensor expected\")")
    if filter_[0] != data[1]:
        raise ConvTransposeError(
            f"input has {data[1]} channels but weight of shape {filter_} expects"
            f" {filter_[0]} (weight is (C_in, C_out/groups, K...))")
    if data[1] % groups:
        raise ConvTransposeError(
            f"input channels {data[1]} (weight dimension 0) are not divisible by"
            f" groups={groups}")


def torch_conv_transpose(input: ShapeLike, weight: ShapeLike, bias: ShapeLike | None = None,
                         stride: PerAxis = 1, padding: PerAxis = 0, output_padding: PerAxis = 0,
                         groups: int = 1, dilation: PerAxis = 1,
                         output_size: ShapeLike | None = None) -> ConvTransposePlan:
    """Plan PyTorch's transposed convolution from shapes.

    Takes the shapes of ``input`` ``(N, C_in, X...)``, ``weight``
    ``(C_in, C_out/groups, K...)`` and optionally ``bias`` ``(C_out,)``, and the same
    arguments as :func:`convtranspose.torch_conv_transpose`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.torch_conv_transpose((1, 4, 5, 5), (4, 3, 3, 3), stride=2, padding=1,
    ...                                    output_size=[10, 10])
    >>> plan.output_shape, plan.output_padding
    ((1, 3, 10, 10), (1, 1))
    """
    data = as_shape("input shape", input)
    filter_ = as_shape("weight shape", weight)
    if len(filter_) < 3:
        raise ConvTransposeError(
            f"weight must have rank 3 or more (C_in, C_out/groups, K...), got shape {filter_}")
    rank = len(filter_) - 2
    if len(data) != rank + 2:
        unbatched = " (unbatched input is not supported: add a batch axis, input[None])" \
            if len(data) == rank + 1 else ""
        raise ConvTransposeError(
            f"input has rank {len(data)} (shape {data}) but weight of shape {filter_} needs"
            f" input of rank {rank + 2}, (N, C_in, X...){unbatched}")
    strides = torch_per_axis("stride", stride, rank, 1)
    padding = torch_per_axis("padding", padding, rank, 0)
    dilations = torch_per_axis("dilation", dilation, rank, 1)
    extra: tuple[int, ...] = torch_per_axis("output_padding", output_padding, rank, 0)
    groups = as_index("groups", groups)
    if groups <= 0:
        raise ConvTransposeError(f"groups must be positive, got {groups}")
    if data[0] and 0 in data[2:]:
        raise ConvTransposeError(
            f"input shape {data} has an empty spatial axis: PyTorch takes one only with an"
            f" empty batch (\"Only zero batch or zero channel inputs are supported\")")
    kernel = filter_[2:]
    check_spatial("weight", filter_, kernel)
    _check_channels(data, filter_, groups)
    out_channels = filter_[1] * groups
    if bias is not None and as_shape("bias shape", bias) != (out_channels,):
        raise ConvTransposeError(
            f"bias has shape {as_shape('bias shape', bias)} but must be ({out_channels},), one"
            f" value per output channel")
    if output_size is not None:
        extra = _torch_output_padding(output_size, data, rank, strides, padding,
                                               dilations, kernel)
    for i, (op_, s, d) in enumerate(zip(extra, strides, dilations)):
        if op_ >= s and op_ >= d:
            raise ConvTransposeError(
                f"output_padding[{i}] is {op_} but must be smaller than either stride[{i}] ="
                f" {s} or dilation[{i}] = {d}")

    axes = []
    for i in range(rank):
        x, k, s, d, p, op_ = data[2 + i], kernel[i], strides[i], dilations[i], padding[i], \
            extra[i]
        full = (x - 1) * s + (k - 1) * d + 1
        axes.append(checked_axis(i, x, k, s, d, p, full + op_ - 2 * p,
                                 f"Y = F + output_padding - 2*padding = {full} + {op_} - 2*{p}",
                                 empty=data[0] == 0))
    output = (data[0], out_channels) + tuple(a.output_size for a, _ in axes)
    return build_plan("torch_conv_transpose", data, filter_, output, strides, dilations, padding,
                      padding, extra, "explicit", groups, "NCX", "IOX", axes)
