"""OpenVINO Convolution-1 and GroupConvolution-1: the forward convolution whose adjoint
ConvolutionBackpropData is, as canonical plans.

Per spatial axis, with data size ``X``, kernel ``K``, stride ``s``, dilation ``d``,
``K' = (K - 1) * d + 1`` and pads ``pb``/``pe``::

    out[o] = sum over k of data[o*s + k*d - pb] * filter[k]     (data read as 0 outside)
    Y = floor((X + pb + pe - K') / s) + 1                       (explicit pads)
    Y = ceil(X / s), total = max((Y - 1)*s + K' - X, 0)           (same_upper, same_lower)

``same_upper`` puts the odd pad at the end (``pb = total // 2``), ``same_lower`` at the
beginning; ``valid`` pads nothing.  This is the adjoint of the canonical transposed
convolution with input size ``Y``, output size ``X`` and ``offset = pb``
(:attr:`ConvolutionPlan.axes`), so one set of kernels computes both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    AxisPlan,
    as_choice,
    as_shape,
    check_output_size,
    check_ranks,
    check_spatial,
    describe,
    per_axis,
)

if TYPE_CHECKING:
    from .._typing import PerAxis, ShapeLike

__all__ = ["ConvolutionPlan", "convolution", "convolution_culprit", "group_convolution"]

_AUTO_PAD = {
    None: "explicit", "explicit": "explicit", "notset": "explicit",
    "same_upper": "same_upper", "same_lower": "same_lower", "valid": "valid",
}


@dataclass(frozen=True)
class ConvolutionPlan:
    """Everything a forward convolution's shapes and attributes resolve to.

    Attributes
    ----------
    op : str
        ``"convolution"`` or ``"group_convolution"``.
    data_shape, filter_shape, output_shape : tuple of int
        Whole shapes: data ``[N, C_IN, X...]``, filter ``[C_OUT, C_IN, K...]`` or
        ``[G, C_OUT/G, C_IN/G, K...]``, output ``[N, C_OUT, Y...]``.
    strides, dilations, pads_begin, pads_end : tuple of int
        Per spatial axis; the pads as OpenVINO resolves them (computed for ``same_*``,
        0 for ``valid``).
    auto_pad : str
        ``"explicit"``, ``"same_upper"``, ``"same_lower"`` or ``"valid"``.
    groups : int
    axes : tuple of AxisPlan
        The transposed convolution this convolution is the adjoint of, per axis:
        ``AxisPlan(Y, K, s, d, offset=pads_begin, output_size=X)``.
    formulas : tuple of str
        Per axis, the rule that gave ``Y`` with the numbers filled in.
    """

    op: str
    data_shape: tuple[int, ...]
    filter_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    auto_pad: str
    groups: int
    axes: tuple[AxisPlan, ...]
    formulas: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def spatial_rank(self) -> int:
        return len(self.axes)

    @property
    def data_format(self) -> str:
        """``"NCX"``: OpenVINO's Convolution and GroupConvolution are channels first."""
        return "NCX"

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        return tuple(axis.kernel_size for axis in self.axes)

    @property
    def canonical_filter_shape(self) -> tuple[int, ...]:
        """``(G, C_OUT/G, C_IN/G, K...)``: the filter of the transposed convolution this
        is the adjoint of, in canonical ``(G, Ci, Co, K...)`` order (the same memory)."""
        groups = self.groups
        return (groups, self.output_shape[1] // groups,
                self.data_shape[1] // groups) + self.kernel_shape

    def __str__(self) -> str:
        return describe(self)


def _axis(i, x, k, s, d, mode, pb, pe):
    """``(AxisPlan, pads_begin, pads_end, formula)`` of one spatial axis."""
    dilated = (k - 1) * d + 1
    if mode in ("same_upper", "same_lower"):
        size = -(-x // s)
        total = max((size - 1) * s + dilated - x, 0)
        pb = total // 2 if mode == "same_upper" else total - total // 2
        pe = total - pb
        rule = (f"{mode}: Y = ceil(X / s) = ceil({x} / {s}) = {size}; total pad"
                f" max((Y-1)*s + K' - X, 0) = {total}, pads {pb}/{pe}")
    else:
        if mode == "valid":
            pb = pe = 0
        span = x + pb + pe - dilated
        if span < 0:
            raise ConvTransposeError(
                f"the dilated kernel ({dilated} = ({k}-1)*{d}+1) is longer than the padded"
                f" data along spatial axis {i} ({x} + {pb} + {pe} = {x + pb + pe}); the"
                f" output would be empty: pad the data or use a smaller kernel or dilation")
        size = span // s + 1
        rule = (f"Y = floor((X + pb + pe - K') / s) + 1 = floor(({x} + {pb} + {pe} -"
                f" {dilated}) / {s}) + 1 = {size}")
    return AxisPlan(size, k, s, d, pb, x), pb, pe, rule


def _convolution(op, data, filter, strides, pads_begin, pads_end, dilations, auto_pad,
                 grouped) -> ConvolutionPlan:
    data = as_shape("data shape", data)
    filter_ = as_shape("filter shape", filter)
    layout = "[G, C_OUT/G, C_IN/G, K...]" if grouped else "[C_OUT, C_IN, K...]"
    rank = check_ranks(data, filter_, 1 if grouped else 0, layout)
    check_spatial("data", data, data[2:])
    mode = as_choice("auto_pad", auto_pad, _AUTO_PAD)
    strides = per_axis("strides", strides, rank, 1, 1)
    dilations = per_axis("dilations", dilations, rank, 1, 1)
    pads_begin = per_axis("pads_begin", pads_begin, rank, 0, 0)
    pads_end = per_axis("pads_end", pads_end, rank, 0, 0)
    if grouped:
        groups, c_out, c_in = filter_[:3]
        expected, described = groups * c_in, f"{groups} groups * {c_in} input channels"
    else:
        groups, (c_out, c_in) = 1, filter_[:2]
        expected, described = c_in, f"{c_in} input channels"
    if data[1] != expected:
        raise ConvTransposeError(
            f"data has {data[1]} channels but filter expects {described} = {expected}"
            f" (filter shape {filter_})")
    kernel = filter_[-rank:]
    check_spatial("filter", filter_, kernel)
    if groups == 0:
        raise ConvTransposeError(f"filter has 0 groups (filter shape {filter_})")
    axes, begins, ends, formulas = [], [], [], []
    for i in range(rank):
        axis, pb, pe, rule = _axis(i, data[2 + i], kernel[i], strides[i], dilations[i], mode,
                                   pads_begin[i], pads_end[i])
        axes.append(axis)
        begins.append(pb)
        ends.append(pe)
        formulas.append(rule)
    output = (data[0], groups * c_out) + tuple(axis.input_size for axis in axes)
    plan = ConvolutionPlan(op, data, filter_, output, strides, dilations, tuple(begins),
                           tuple(ends), mode, groups, tuple(axes), tuple(formulas))
    check_output_size(output, lambda: convolution_culprit(plan))
    return plan


def convolution_culprit(plan: ConvolutionPlan) -> tuple[str, object]:
    """The argument (and its value) that makes ``plan``'s output as large as it is: the
    pads where they lengthen its longest axis more than twice the data and the dilated
    kernel together (an output axis is at most ``X + pads_begin + pads_end`` long), else
    the filter where it has more output than input channels, else the data."""
    longest = max(range(plan.spatial_rank), key=lambda i: plan.axes[i].input_size)
    axis = plan.axes[longest]
    pads = plan.pads_begin[longest] + plan.pads_end[longest]
    if pads > 2 * (axis.output_size + axis.dilated_kernel_size):
        return "pads_begin and pads_end", (plan.pads_begin, plan.pads_end)
    if plan.output_shape[1] > plan.data_shape[1]:
        return "filter", f"<array of shape {plan.filter_shape}>"
    return "data", f"<array of shape {plan.data_shape}>"


def convolution(data: ShapeLike, filter: ShapeLike, *, strides: PerAxis = None,
                pads_begin: PerAxis = None, pads_end: PerAxis = None,
                dilations: PerAxis = None, auto_pad: str = "explicit") -> ConvolutionPlan:
    """Plan OpenVINO Convolution-1 from shapes.

    Takes the shapes of ``data`` ``[N, C_IN, X...]`` and ``filter`` ``[C_OUT, C_IN, K...]``
    and the keywords of :func:`convtranspose.convolution`.

    Raises
    ------
    ConvTransposeError
        An invalid shape or attribute, naming it.
    ResultTooLargeError
        An output of more than 2**60 elements (a :class:`ConvTransposeError` too), naming
        the argument (:func:`convolution_culprit`) and the bytes at 8 an element.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.convolution((1, 3, 224, 224), (64, 3, 7, 7), strides=2, pads_begin=3,
    ...                           pads_end=3)
    >>> plan.output_shape
    (1, 64, 112, 112)
    """
    return _convolution("convolution", data, filter, strides, pads_begin, pads_end,
                        dilations, auto_pad, grouped=False)


def group_convolution(data: ShapeLike, filter: ShapeLike, *, strides: PerAxis = None,
                      pads_begin: PerAxis = None, pads_end: PerAxis = None,
                      dilations: PerAxis = None,
                      auto_pad: str = "explicit") -> ConvolutionPlan:
    """Plan OpenVINO GroupConvolution-1 from shapes.

    Takes the shapes of ``data`` ``[N, G*C_IN, X...]`` and ``filter``
    ``[G, C_OUT, C_IN, K...]`` (per group) and the keywords of
    :func:`convtranspose.group_convolution`; raises as :func:`convolution`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> shapes.group_convolution((1, 32, 56, 56), (32, 1, 1, 3, 3), strides=2,
    ...                          auto_pad="same_upper").output_shape
    (1, 32, 28, 28)
    """
    return _convolution("group_convolution", data, filter, strides, pads_begin, pads_end,
                        dilations, auto_pad, grouped=True)
