"""Shape rules: every dialect's attributes become one canonical plan.

This module holds the plan types and the validation every dialect shares; each
dialect's own rules live in :mod:`convtranspose._plan.dialects`.  It is pure integer code
(it never imports NumPy), so shape inference can run anywhere, and every dialect quirk
lives in a few small functions that can be tested exhaustively.

The canonical computation (``docs/semantics.md``) per spatial axis, with data
size ``X``, kernel size ``K``, stride ``s`` and dilation ``d``::

    K' = (K - 1) * d + 1                      dilated kernel extent
    F  = (X - 1) * s + K'                     length of the uncropped "full" result
    full[t] = sum over x, k with t = x*s + k*d of data[x] * filter[k]
    out[o]  = full[o + offset] for o in [0, Y); 0 where o + offset is outside [0, F)

so a dialect only chooses ``(offset, Y)`` per axis; :class:`AxisPlan` holds them.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import sys
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConvTransposeError, ResultTooLargeError
from .._runtime.caches import kept

__all__ = ["AxisPlan", "ConvTransposePlan"]


@dataclass(frozen=True)
class AxisPlan:
    """The canonical description of one spatial axis.

    Attributes
    ----------
    input_size, kernel_size, stride, dilation : int
        ``X``, ``K``, ``s`` and ``d`` of the axis.
    offset : int
        Index into the full result of output element 0 (may be negative: the output
        then starts with zeros).
    output_size : int
        ``Y``, the number of output elements along the axis.
    """

    input_size: int
    kernel_size: int
    stride: int
    dilation: int
    offset: int
    output_size: int

    @property
    def dilated_kernel_size(self) -> int:
        """``K' = (K - 1) * d + 1``."""
        return (self.kernel_size - 1) * self.dilation + 1

    @property
    def full_size(self) -> int:
        """``F = (X - 1) * s + K'``, the length of the uncropped result."""
        return (self.input_size - 1) * self.stride + self.dilated_kernel_size

    def __hash__(self) -> int:
        # Axes key the kernel's caches, hashed several times per call: the generated
        # hash of six fields each time was a tenth of a tiny layer's call.
        value = self.__dict__.get("_hash")
        if value is None:
            value = hash((self.input_size, self.kernel_size, self.stride, self.dilation,
                          self.offset, self.output_size))
            object.__setattr__(self, "_hash", value)
        return value


@dataclass(frozen=True)
class ConvTransposePlan:
    """Everything a transposed convolution's shapes and attributes resolve to.

    Produced by the functions of :mod:`convtranspose.shapes`; the array functions
    compute exactly this plan, so shape inference and compute cannot disagree.

    Attributes
    ----------
    op : str
        The dialect function that made the plan.
    data_shape, filter_shape, output_shape : tuple of int
        Whole shapes in the dialect's own layouts (batch and channels included).
    strides, dilations, output_padding : tuple of int
        Per spatial axis, defaults filled in.
    pads_begin, pads_end : tuple of int
        The resolved pads, as the owning runtime reports them.
    auto_pad : str
        The padding mode, normalised to lower case (``"explicit"``, ``"none"``,
        ``"notset"``, ``"same_upper"``, ``"same_lower"``, ``"valid"``).
    groups : int
    data_format : {"NCX", "NXC"}
        Channels first or channels last, for data and output.
    filter_layout : {"GIOX", "IOX", "OIX", "XIO", "XOI", "OXI"}
        How the filter's axes map to (groups, input channels, output channels,
        kernel): ``GIOX`` is OpenVINO's grouped layout; in the others ``I`` is the
        total input channel count and ``O`` the output channels per group.
    axes : tuple of AxisPlan
        The canonical per-axis plan.
    formulas : tuple of str
        Per axis, the rule that gave its offset and size with the numbers filled in.
    """

    op: str
    data_shape: tuple[int, ...]
    filter_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    output_padding: tuple[int, ...]
    auto_pad: str
    groups: int
    data_format: str
    filter_layout: str
    axes: tuple[AxisPlan, ...]
    formulas: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def offset(self) -> tuple[int, ...]:
        """Per axis, the index into the full result of output element 0."""
        return tuple(axis.offset for axis in self.axes)

    @property
    def output_size(self) -> tuple[int, ...]:
        """Per axis, the output size ``Y`` (the spatial part of ``output_shape``)."""
        return tuple(axis.output_size for axis in self.axes)

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        return tuple(axis.kernel_size for axis in self.axes)

    @property
    def spatial_rank(self) -> int:
        return len(self.axes)

    @property
    def channels_last(self) -> bool:
        return self.data_format == "NXC"

    @property
    def batch(self) -> int:
        return self.data_shape[0]

    @property
    def in_channels(self) -> int:
        return self.data_shape[-1] if self.channels_last else self.data_shape[1]

    @property
    def out_channels(self) -> int:
        return self.output_shape[-1] if self.channels_last else self.output_shape[1]

    @functools.cached_property
    def canonical_filter_shape(self) -> tuple[int, ...]:
        """``(groups, in_channels // groups, out_channels // groups, *kernel_shape)``."""
        return (
            self.groups,
            self.in_channels // self.groups,
            self.out_channels // self.groups,
        ) + self.kernel_shape

    @functools.cached_property
    def _filter_to_canonical(self) -> tuple[int, ...]:
        """The transpose taking the filter to ``(I, O, K...)`` (then reshaped to canonical)."""
        i_axis, o_axis, kernel_axes = filter_axes(self.filter_layout, self.spatial_rank)
        return (i_axis, o_axis) + kernel_axes

    def __str__(self) -> str:
        return describe(self)



def describe(plan) -> str:
    """A plan as text: its op and whole shapes, the resolved pads, and per axis the rule
    with its numbers.  Any plan type with those attributes (the transposed convolution's
    and the forward convolution's) prints this way."""
    lines = [
        f"{plan.op}: data {plan.data_shape} * filter {plan.filter_shape}"
        f" -> output {plan.output_shape}",
        f"  pads_begin={list(plan.pads_begin)} pads_end={list(plan.pads_end)}"
        f" auto_pad={plan.auto_pad} groups={plan.groups}",
    ]
    lines += [f"  axis {i}: {text}" for i, text in enumerate(plan.formulas)]
    return "\n".join(lines)

# ---------------------------------------------------------------------------
# Argument normalisation


def as_index(name: str, value: Any) -> int:
    """``value`` as a Python int; bools, floats and strings are refused."""
    if isinstance(value, bool):
        raise ConvTransposeError(f"{name} must be an integer, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ConvTransposeError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}"
        ) from None


def as_sequence(name: str, value: Any) -> list[Any]:
    """The items of a sequence or 1-D integer array, checked without NumPy."""
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind is not None and kind not in "iu":
        raise ConvTransposeError(f"{name} must hold integers, got dtype {value.dtype}")
    if getattr(value, "ndim", 1) != 1:
        raise ConvTransposeError(
            f"{name} must be 1-D, got an array of shape {tuple(value.shape)}"
        )
    if isinstance(value, (str, bytes)):
        raise ConvTransposeError(f"{name} must be a sequence of integers, got {value!r}")
    if isinstance(value, (Mapping, Set)):  # unordered or keyed: no per-axis order to read
        raise ConvTransposeError(
            f"{name} must be a sequence of integers (list, tuple or 1-D array), got"
            f" the {type(value).__name__} {value!r}"
        )
    try:
        return list(value)
    except TypeError:
        raise ConvTransposeError(
            f"{name} must be an integer or a sequence of integers, got {value!r}"
        ) from None


def as_shape(name: str, value: object) -> tuple[int, ...]:
    dims = tuple(as_index(f"{name}[{i}]", v) for i, v in enumerate(as_sequence(name, value)))
    negative = [d for d in dims if d < 0]
    if negative:
        raise ConvTransposeError(f"{name} {dims} has a negative dimension {negative[0]}")
    return dims


def per_axis(
    name: str, value: Any, rank: int, default: int, minimum: int
) -> tuple[int, ...]:
    """An int-or-sequence attribute as one value per spatial axis.

    ``None`` and an empty sequence mean the spec's ``default``; an int applies to
    every axis.  Every value must be at least ``minimum``.
    """
    if value is None:
        return (default,) * rank
    if isinstance(value, bool):
        raise ConvTransposeError(f"{name} must be an int or a sequence of ints, got {value!r}")
    try:
        values = (operator.index(value),) * rank
    except TypeError:
        items = as_sequence(name, value)
        if not items:
            return (default,) * rank
        if len(items) != rank:
            raise ConvTransposeError(
                f"{name} has {len(items)} values {tuple(items)} but the data has {rank}"
                f" spatial axes; give one value per spatial axis or a single int"
            )
        values = tuple(as_index(f"{name}[{i}]", v) for i, v in enumerate(items))
    for i, v in enumerate(values):
        if v < minimum:
            rule = "positive" if minimum == 1 else "non-negative"
            raise ConvTransposeError(f"{name}[{i}] is {v} but must be {rule}: {name}={value!r}")
    return values


_PerAxis5 = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...],
                  tuple[int, ...]]


def shared_attributes(rank, strides, dilations, pads_begin, pads_end, output_padding) -> _PerAxis5:
    """The per-axis attributes every dialect shares, with the specs' defaults and ranges."""
    return (
        per_axis("strides", strides, rank, 1, 1),
        per_axis("dilations", dilations, rank, 1, 1),
        per_axis("pads_begin", pads_begin, rank, 0, 0),
        per_axis("pads_end", pads_end, rank, 0, 0),
        per_axis("output_padding", output_padding, rank, 0, 0),
    )


def optional_output_shape(value: object, rank: int,
                          name: str = "output_shape") -> tuple[int, ...] | None:
    """The optional spatial output shape: one positive int per spatial axis."""
    if value is None:
        return None
    items = as_sequence(name, value)
    sizes = tuple(as_index(f"{name}[{i}]", v) for i, v in enumerate(items))
    if len(sizes) != rank:
        raise ConvTransposeError(
            f"{name} has {len(sizes)} values {sizes} but the data has {rank} spatial axes;"
            f" {name} gives the spatial dimensions only"
        )
    for i, v in enumerate(sizes):
        if v <= 0:
            raise ConvTransposeError(f"{name}[{i}] is {v} but must be positive: {name}={sizes}")
    return sizes


def as_choice(name: str, value: object, choices: Mapping[Any, str]) -> str:
    """Map a case-insensitive string (or None) onto its canonical spelling."""
    key = value.lower() if isinstance(value, str) else value
    try:
        return choices[key]
    except (KeyError, TypeError):
        accepted = ", ".join(repr(c) for c in choices if c is not None)
        raise ConvTransposeError(f"{name} must be one of {accepted}, got {value!r}") from None


def check_ranks(data: tuple[int, ...], filter_: tuple[int, ...], extra_filter_axes: int,
                filter_layout: str) -> int:
    """The spatial rank, after checking both tensors have enough axes and agree."""
    if len(data) < 3:
        raise ConvTransposeError(
            f"data must have rank 3 or more (batch, channels, spatial axes), got shape {data}"
        )
    if len(filter_) != len(data) + extra_filter_axes:
        raise ConvTransposeError(
            f"filter has rank {len(filter_)} (shape {filter_}) but data has rank {len(data)}"
            f" (shape {data}); a {filter_layout} filter needs rank {len(data) + extra_filter_axes}"
        )
    return len(data) - 2


def check_spatial(name: str, shape: tuple[int, ...], sizes: tuple[int, ...]) -> None:
    for i, size in enumerate(sizes):
        if size == 0:
            raise ConvTransposeError(
                f"{name} spatial axis {i} has size 0 in shape {shape}; spatial sizes must be positive"
            )


def checked_axis(
    i: int, x: int, k: int, s: int, d: int, offset: int, size: int, rule: str,
    empty: bool = False,
) -> tuple[AxisPlan, str]:
    """One axis and its rule as text; an output size of 0 only where ``empty`` (the
    dialects whose runtimes return empty results: TensorFlow's family, PyTorch's empty
    batch)."""
    axis = AxisPlan(x, k, s, d, offset, size)
    full = f"F = ({x}-1)*{s} + ({k}-1)*{d}+1 = {axis.full_size}"
    if size < 0 or (size == 0 and not empty):
        raise ConvTransposeError(
            f"the output size along spatial axis {i} would be {size} ({full}; {rule}),"
            f" but it must be {'non-negative' if empty else 'positive'}"
        )
    return axis, f"{full}; {rule}; Y = {size}, offset = {offset}"


#: The largest element count NumPy can allocate at 8 bytes per element (the widest
#: accumulation type): beyond it NumPy raises its own ValueError.
_MAX_ELEMENTS = sys.maxsize // 8


def check_output_size(output: tuple[int, ...],
                      culprit: Callable[[], tuple[str, object]]) -> None:
    """Refuse an output of more than :data:`_MAX_ELEMENTS` elements (about 2**60): past
    the largest array NumPy can index at 8 bytes an element.

    The shape rules of every transposed-convolution dialect and of the forward
    convolution raise the memory check's error here: a
    :class:`~convtranspose.ResultTooLargeError` (a ``ConvTransposeError`` and a
    ``MemoryError``) naming the argument and its value (``culprit()``) and the bytes
    at 8 an element, ``limit`` None.
    """
    elements = 1
    for dim in output:
        elements *= dim
    if elements > _MAX_ELEMENTS:
        argument, value = culprit()
        raise ResultTooLargeError(
            f"{argument} makes the output shape {output}: {elements} elements"
            f" ({elements * 8} bytes at 8 bytes each), which overflows the largest array"
            f" NumPy can index ({_MAX_ELEMENTS} elements of 8 bytes); {argument}={value!r}",
            argument=argument, nbytes=elements * 8, limit=None)


def build_plan(
    op, data, filter_, output, strides, dilations, pads_begin, pads_end, output_padding,
    auto_pad, groups, data_format, filter_layout, axes_rules,
) -> ConvTransposePlan:
    plan = ConvTransposePlan(
        op=op, data_shape=data, filter_shape=filter_, output_shape=output,
        strides=strides, dilations=dilations, pads_begin=tuple(pads_begin),
        pads_end=tuple(pads_end), output_padding=output_padding, auto_pad=auto_pad,
        groups=groups, data_format=data_format, filter_layout=filter_layout,
        axes=tuple(a for a, _ in axes_rules), formulas=tuple(r for _, r in axes_rules),
    )
    check_output_size(output, lambda: size_culprit(plan))
    return plan


def size_culprit(plan: ConvTransposePlan) -> tuple[str, object]:
    """The argument (and its value) that makes ``plan``'s result as large as it is: the
    attribute that lengthens the longest axis most (an output beyond the natural size
    comes from ``output_shape``), else the operand with the most batch or channels."""
    if not plan.axes:
        return _operand_culprit(plan)
    longest = max(range(plan.spatial_rank), key=lambda i: plan.axes[i].output_size)
    axis = plan.axes[longest]
    parts = {"strides": (axis.input_size - 1) * axis.stride,
             "dilations": (axis.kernel_size - 1) * axis.dilation,
             "output_padding": plan.output_padding[longest],
             "output_shape": axis.output_size - axis.full_size - plan.output_padding[longest]}
    name = max(parts, key=lambda part: parts[part])
    if parts[name] > 2 * (axis.input_size + axis.kernel_size):
        if name == "output_shape":
            return name, tuple(a.output_size for a in plan.axes)
        return name, getattr(plan, name)
    return _operand_culprit(plan)


def _operand_culprit(plan: ConvTransposePlan) -> tuple[str, object]:
    if plan.out_channels > plan.in_channels:
        return "filter", f"<array of shape {plan.filter_shape}>"
    return "data", f"<array of shape {plan.data_shape}>"


@kept("resolved plans and prepared calls", maxsize=64)
def with_unit_axis(plan: ConvTransposePlan) -> ConvTransposePlan:
    """A plan of no spatial axis (JAX's 0-D ``conv_transpose``, a matrix product) as the
    same product over one axis of size 1 (kernel 1, stride 1, offset 0): every shape
    gains a trailing 1, the position of the axis in its ``NCX`` data and ``IOX`` or
    ``OIX`` filter layouts."""
    return dataclasses.replace(
        plan, data_shape=plan.data_shape + (1,), filter_shape=plan.filter_shape + (1,),
        output_shape=plan.output_shape + (1,), strides=(1,), dilations=(1,),
        pads_begin=(0,), pads_end=(0,), output_padding=(0,),
        axes=(AxisPlan(1, 1, 1, 1, 0, 1),),
        formulas=("no spatial axis: one of size 1, kernel 1, stride 1; Y = 1, offset = 0",))


def filter_axes(layout: str, rank: int) -> tuple[int, int, tuple[int, ...]]:
    """Positions of the I axis, the O axis and the kernel axes in a filter layout."""
    positions: dict[str, int] = {}
    kernel: tuple[int, ...] = ()
    at = 0
    for letter in layout:  # "X" stands for the rank kernel axes, in order
        if letter == "X":
            kernel, at = tuple(range(at, at + rank)), at + rank
        else:
            positions[letter], at = at, at + 1
    return positions["I"], positions["O"], kernel
