"""TensorRT ``IDeconvolutionLayer`` (``INetworkDefinition.add_deconvolution_nd``): its
attributes and padding modes, as canonical plans.

TensorRT documents, for deconvolution (``DK = 1 + D * (F - 1)``, ``B`` pre-padding and
``A`` post-padding, both cropped from the output)::

    EXPLICIT_ROUND_DOWN, EXPLICIT_ROUND_UP   O = (I - 1) * S + DK - (B + A)
    SAME_UPPER    O = min(I * S, (I - 1) * S + DK), P = max(DK - S, 0), B = P // 2, A = P - B
    SAME_LOWER    the same O and P, A = P // 2, B = P - A

so per axis ``offset = B``; the two explicit modes agree (no division to round), and
no mode can add ``output_padding``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    ConvTransposePlan,
    as_index,
    as_shape,
    build_plan,
    check_spatial,
    checked_axis,
    per_axis,
)

if TYPE_CHECKING:

    from .._typing import PerAxis, ShapeLike

__all__ = ["tensorrt_deconvolution", "PADDING_MODES"]

PADDING_MODES = ("EXPLICIT_ROUND_DOWN", "EXPLICIT_ROUND_UP", "SAME_UPPER", "SAME_LOWER")


def _pads(mode, dilated, strides, pre, post):
    """Per axis ``(B, A)``: the pre- and post-padding cropped from the full result."""
    if mode.startswith("EXPLICIT"):
        return list(zip(pre, post))
    pairs = []
    for k, s in zip(dilated, strides):
        total = max(k - s, 0)
        small, large = total // 2, total - total // 2
        pairs.append((small, large) if mode == "SAME_UPPER" else (large, small))
    return pairs


def tensorrt_deconvolution(input: ShapeLike, kernel: ShapeLike, bias: ShapeLike | None = None,
                           *, num_output_maps: int | None = None, stride_nd: PerAxis = 1,
                           padding_nd: PerAxis = 0, pre_padding: PerAxis = None,
                           post_padding: PerAxis = None,
                           padding_mode: str = "EXPLICIT_ROUND_DOWN", num_groups: int = 1,
                           dilation_nd: PerAxis = 1) -> ConvTransposePlan:
    """Plan a TensorRT deconvolution layer from shapes.

    Takes the shapes of ``input`` ``(N, C_in, X...)``, ``kernel``
    ``(C_in, C_out / num_groups, K...)`` and optionally ``bias`` ``(C_out,)``, and the
    same attributes as :func:`convtranspose.tensorrt_deconvolution`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.tensorrt_deconvolution((1, 4, 5, 5), (4, 2, 3, 3), stride_nd=2,
    ...                                      padding_mode="SAME_LOWER")
    >>> plan.output_shape, plan.pads_begin, plan.pads_end
    ((1, 2, 10, 10), (1, 1), (0, 0))
    """
    data, filter_ = as_shape("input shape", input), as_shape("kernel shape", kernel)
    rank = len(filter_) - 2
    if rank not in (2, 3) or len(data) != rank + 2:
        raise ConvTransposeError(
            f"tensorrt_deconvolution is 2-D or 3-D: kernel shape {filter_} must be (C_in,"
            f" C_out/num_groups, K...) with 2 or 3 kernel axes and input (shape {data}) of"
            f" rank {rank + 2} (N, C, spatial); reshape 1-D layers to 2-D")
    if padding_mode not in PADDING_MODES:
        raise ConvTransposeError(
            f"padding_mode must be one of {', '.join(PADDING_MODES)}, got {padding_mode!r}"
            f" (the CAFFE modes were removed from TensorRT)")
    strides = per_axis("stride_nd", stride_nd, rank, 1, 1)
    dilations = per_axis("dilation_nd", dilation_nd, rank, 1, 1)
    symmetric = per_axis("padding_nd", padding_nd, rank, 0, 0)
    pre = symmetric if pre_padding is None else per_axis("pre_padding", pre_padding, rank, 0, 0)
    post = symmetric if post_padding is None else per_axis("post_padding", post_padding,
                                                           rank, 0, 0)
    groups = as_index("num_groups", num_groups)
    if groups <= 0:
        raise ConvTransposeError(f"num_groups must be positive, got {groups}")
    check_spatial("input", data, data[2:])
    check_spatial("kernel", filter_, filter_[2:])
    if filter_[0] != data[1]:
        raise ConvTransposeError(
            f"the input has {data[1]} channels but the kernel of shape {filter_} expects"
            f" {filter_[0]} (the kernel is (C_in, C_out/num_groups, K...))")
    if data[1] % groups:
        raise ConvTransposeError(
            f"input channels {data[1]} are not divisible by num_groups={groups}")
    out_channels = filter_[1] * groups
    if num_output_maps is not None and as_index("num_output_maps", num_output_maps) != out_channels:
        raise ConvTransposeError(
            f"num_output_maps is {num_output_maps} but the kernel of shape {filter_} with"
            f" num_groups={groups} gives {out_channels} output maps")
    if bias is not None and as_shape("bias shape", bias) != (out_channels,):
        raise ConvTransposeError(
            f"bias has shape {as_shape('bias shape', bias)} but must be ({out_channels},), one"
            f" value per output map")
    dilated = [(k - 1) * d + 1 for k, d in zip(filter_[2:], dilations)]
    pairs = _pads(padding_mode, dilated, strides, pre, post)
    axes = []
    for i, (x, k, s, d, (b, a)) in enumerate(zip(data[2:], filter_[2:], strides, dilations,
                                                  pairs)):
        full = (x - 1) * s + dilated[i]
        axes.append(checked_axis(i, x, k, s, d, b, full - b - a,
                                 f"{padding_mode}: O = (I-1)*S + DK - (B + A) = {full} - ({b} + {a})"))
    output = (data[0], out_channels) + tuple(axis.output_size for axis, _ in axes)
    return build_plan("tensorrt_deconvolution", data, filter_, output, strides, dilations,
                      [p[0] for p in pairs], [p[1] for p in pairs], (0,) * rank,
                      padding_mode.lower(), groups, "NCX", "IOX", axes)
