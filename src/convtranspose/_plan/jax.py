"""JAX ``lax.conv_transpose``: its arguments, dimension numbers and padding rules, as
canonical plans.

``lax.conv_transpose`` is a forward convolution (a correlation) of the stride-dilated
input padded by ``(a, b)`` per axis, so per axis ``offset = K' - 1 - a`` and
``Y = F + a + b - 2 (K' - 1)``; its kernel is the canonical filter flipped in space
unless ``transpose_kernel=True`` (which flips it back and swaps its I and O axes).
An empty spatial axis (``X = 0``) dilates to no element, so there ``Y = a + b - K' + 1``
(zeros).  With no spatial axis (``lhs`` ``(N, C)``, ``rhs`` ``(I, O)``, ``strides=()``)
it is the matrix product ``lhs @ rhs``: a plan with no axes.
"""

from __future__ import annotations

import operator
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
    from typing import Any

    from .._typing import PerAxis, ShapeLike

__all__ = ["jax_conv_transpose", "jax_layouts"]

_DEFAULT_SPECS = {0: ("NC", "IO", "NC"), 1: ("NHC", "HIO", "NHC"), 2: ("NHWC", "HWIO", "NHWC"),
                  3: ("NHWDC", "HWDIO", "NHWDC")}


def jax_layouts(dimension_numbers, rank: int, transpose_kernel: bool) -> tuple[str, str]:
    """``(data_format, filter_layout)`` of the plan for JAX string dimension numbers.

    Supported: data and output specs alike with C second or last, kernel specs with
    I and O both first or both last, spatial letters in one order in all three.
    """
    if dimension_numbers is None:
        if rank not in _DEFAULT_SPECS:
            raise ConvTransposeError(
                f"dimension_numbers is required for {rank} spatial axes (JAX has defaults"
                f" for 0 to 3 only)")
        dimension_numbers = _DEFAULT_SPECS[rank]
    specs = as_sequence("dimension_numbers", dimension_numbers)
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise ConvTransposeError(
            f"dimension_numbers must be three strings (lhs, rhs, out), e.g. ('NCHW', 'OIHW',"
            f" 'NCHW'); got {dimension_numbers!r}")
    lhs, rhs, out = specs
    if out != lhs:
        raise ConvTransposeError(
            f"dimension_numbers: an output spec {out!r} other than the input's {lhs!r} is not"
            f" supported; transpose the result instead")
    lhs_spatial = lhs.replace("N", "").replace("C", "")
    rhs_spatial = rhs.replace("I", "").replace("O", "")
    if (len(lhs) != rank + 2 or len(rhs) != rank + 2 or len(set(lhs)) != len(lhs)
            or "N" not in lhs or "C" not in lhs or "I" not in rhs or "O" not in rhs
            or lhs_spatial != rhs_spatial or lhs[0] != "N" or lhs.index("C") not in (1, rank + 1)
            or rhs.index("I") + rhs.index("O") not in (1, 2 * rank + 1)):
        raise ConvTransposeError(
            f"dimension_numbers {tuple(specs)} is not supported for {rank} spatial axes: the"
            f" data spec must be N, C, spatial or N, spatial, C, the kernel spec I and O"
            f" both first or both last, and the spatial letters in one order")
    data_format = "NCX" if lhs.index("C") == 1 else "NXC"
    # transpose_kernel=True: JAX swaps the kernel's I and O, so its O axis holds the
    # input channels of the transposed convolution.
    io = rhs.replace(rhs_spatial, "X") if rhs_spatial else rhs + "X"
    if transpose_kernel:
        io = io.translate(str.maketrans("IO", "OI"))
    return data_format, io


def _is_int(value) -> bool:
    """Whether ``value`` is a single integer (a bool included), not a sequence."""
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _padding_pairs(padding, rank, dilated, strides, consistent):
    """Per axis ``(a, b)``: the zeros JAX pads the stride-dilated input with."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "VALID"):
            raise ConvTransposeError(f"padding must be 'SAME', 'VALID' or pairs, got {padding!r}")
        pairs = []
        for k, s in zip(dilated, strides):
            if mode == "SAME":
                total = k + s - 2
                a = k - 1 if s > k - 1 else -(-total // 2)
            else:
                total = k + s - 2 + max(k - s, 0)
                a = k - 1
            pairs.append((a, total - a))
        return pairs
    items = as_sequence("padding", padding)
    if len(items) != rank:
        raise ConvTransposeError(
            f"padding has {len(items)} pairs but the input has {rank} spatial axes")
    pairs = []
    for i, item in enumerate(items):
        pair = as_sequence(f"padding[{i}]", item)
        if len(pair) != 2:
            raise ConvTransposeError(f"padding[{i}] must be a (before, after) pair, got {item!r}")
        lo, hi = (as_index(f"padding[{i}]", v) for v in pair)
        # use_consistent_padding: the pair is the forward convolution's padding
        pairs.append((dilated[i] - 1 - lo, dilated[i] - 1 - hi) if consistent else (lo, hi))
    return pairs


def jax_conv_transpose(lhs: ShapeLike, rhs: ShapeLike, strides: PerAxis, padding: Any,
                       rhs_dilation: PerAxis = None, dimension_numbers: Any = None,
                       transpose_kernel: bool = False, use_consistent_padding: bool = False,
                       ) -> ConvTransposePlan:
    """Plan JAX ``lax.conv_transpose`` from shapes.

    Takes the shapes of ``lhs`` and ``rhs`` and the same arguments as
    :func:`convtranspose.jax_conv_transpose`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.jax_conv_transpose((1, 5, 5, 4), (3, 3, 4, 2), (2, 2), "SAME")
    >>> plan.output_shape, plan.offset
    ((1, 10, 10, 2), (0, 0))
    """
    data = as_shape("lhs shape", lhs)
    filter_ = as_shape("rhs shape", rhs)
    if len(data) != len(filter_) or len(data) < 2:
        raise ConvTransposeError(
            f"lhs shape {data} and rhs shape {filter_} must have the same rank, 2 or more"
            f" (2: no spatial axis, the matrix product)")
    rank = len(data) - 2
    data_format, layout = jax_layouts(dimension_numbers, rank, bool(transpose_kernel))
    for name, value in (("strides", strides), ("rhs_dilation", rhs_dilation)):
        if value is None and name == "strides" or _is_int(value):
            raise ConvTransposeError(
                f"{name} must be a sequence of one int per spatial axis ({rank} here), as"
                f" lax.conv_transpose takes it (it refuses a single int); got {name}={value!r}")
    strides = per_axis("strides", strides, rank, 1, 1)
    dilations = per_axis("rhs_dilation", rhs_dilation, rank, 1, 1)
    spatial = data[1:-1] if data_format == "NXC" else data[2:]
    channels = data[-1] if data_format == "NXC" else data[1]
    spatial_first = layout.startswith("X")
    kernel = filter_[:rank] if spatial_first else filter_[2:]
    io = filter_[rank:] if spatial_first else filter_[:2]
    in_channels, out_channels = io[layout.replace("X", "").index("I")], \
        io[layout.replace("X", "").index("O")]
    check_spatial("rhs", filter_, kernel)
    if in_channels != channels:
        which = "O" if transpose_kernel else "I"
        raise ConvTransposeError(
            f"lhs has {channels} feature channels but rhs shape {filter_} has {in_channels}"
            f" along its {which} axis (transpose_kernel={bool(transpose_kernel)})")
    dilated = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    pairs = _padding_pairs(padding, rank, dilated, strides, bool(use_consistent_padding))
    axes = []
    for i, (x, k, s, d, (a, b)) in enumerate(zip(spatial, kernel, strides, dilations, pairs)):
        full = (x - 1) * s + dilated[i]
        if x:
            size, rule = full + a + b - 2 * (dilated[i] - 1), (
                f"Y = F + a + b - 2(K'-1) = {full} + {a} + {b} - {2 * (dilated[i] - 1)}")
        else:  # the dilated input has no element: the window slides over the pads alone
            size, rule = a + b - dilated[i] + 1, (
                f"X = 0 dilates to no element: Y = a + b - K' + 1 = {a} + {b} - {dilated[i]}"
                f" + 1")
        axes.append(checked_axis(i, x, k, s, d, dilated[i] - 1 - a, size,
                                 f"pads ({a}, {b}) of the dilated input: offset = K'-1-a ="
                                 f" {dilated[i] - 1 - a}, {rule}"))
    sizes = tuple(a.output_size for a, _ in axes)
    output = ((data[0],) + sizes + (out_channels,) if data_format == "NXC"
              else (data[0], out_channels) + sizes)
    mode = padding.lower() if isinstance(padding, str) else "explicit"
    return build_plan("jax_conv_transpose", data, filter_, output, strides, dilations,
                      [p[0] for p in pairs], [p[1] for p in pairs], (0,) * rank, mode, 1,
                      data_format, layout, axes)
