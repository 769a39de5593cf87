"""The stride-phase decomposition of one axis, shared by the algorithms and the estimates.

Output element ``o`` of an axis with stride ``s`` belongs to phase ``o mod s``; a phase
only receives the taps ``k`` with ``k*d = o + offset (mod s)``, each from input
``o // s + shift``.  Adjacent phases with the same shifts form a class
(:class:`PhaseClass`); :func:`axis_phases` lists them with the zero padding their
shifts need.  Pure integers (NumPy only for index ranges).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from .._runtime.caches import kept
from .rules import AxisPlan


@dataclass(frozen=True)
class PhaseClass:
    """Adjacent output phases ``[first, first + count)`` of one axis sharing input shifts.

    ``taps[i][slot]`` is the kernel index that phase ``first + i`` takes from input
    ``j + shifts[slot]`` for its ``j``-th output ``o = j*s + first + i``.
    """

    first: int
    count: int
    shifts: tuple[int, ...]
    taps: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class AxisPhases:
    stride: int
    whole_blocks: int  # Y // s: blocks of s outputs entirely inside the output
    blocks: int  # ceil(Y / s): output positions j computed per phase
    remainder: int  # Y % s: phases present in the last, partial block
    pad_low: int  # input zeros needed before x = 0 so that every shift is in range
    pad_high: int
    classes: tuple[PhaseClass, ...]


@kept("kernel schedules", maxsize=1024)
def axis_phases(axis: AxisPlan) -> AxisPhases:
    s, d, size = axis.stride, axis.dilation, axis.input_size
    blocks = -(-axis.output_size // s)
    present = min(s, axis.output_size)  # phases with at least one output
    # Each tap feeds exactly one phase, ``(k*d - offset) mod s``: bucketing the taps
    # costs O(K), where testing every (phase, tap) pair cost O(s * K) (minutes for a
    # stride of 10**6).
    by_phase: dict[int, list[tuple[int, int]]] = {}
    for k in range(axis.kernel_size):
        phase = (k * d - axis.offset) % s
        if phase >= present:
            continue
        shift = (phase + axis.offset - k * d) // s
        if shift + blocks - 1 < 0 or shift > size - 1:
            continue  # this tap only ever reads zeros
        by_phase.setdefault(phase, []).append((shift, k))
    runs: list[list[Any]] = []  # [first, count, shifts, taps per phase]: adjacent phases
    # with equal shifts

    def add(first: int, count: int, shifts: tuple[int, ...], taps: list) -> None:
        if runs and runs[-1][2] == shifts:
            runs[-1][1] += count
            runs[-1][3].extend(taps)  # lists, not tuples: merging stays linear
        else:
            runs.append([first, count, shifts, taps])

    following = 0
    for phase in sorted(by_phase):
        if phase > following:  # phases that receive no tap
            add(following, phase - following, (), [()] * (phase - following))
        pairs = sorted(by_phase[phase])
        add(phase, 1, tuple(shift for shift, _ in pairs), [tuple(k for _, k in pairs)])
        following = phase + 1
    if following < present:
        add(following, present - following, (), [()] * (present - following))
    classes = tuple(PhaseClass(first, count, shifts, tuple(taps))
                    for first, count, shifts, taps in runs)
    all_shifts = [shift for c in classes for shift in c.shifts] or [0]
    return AxisPhases(
        stride=s,
        whole_blocks=axis.output_size // s,
        blocks=blocks,
        remainder=axis.output_size % s,
        pad_low=max(0, -min(all_shifts)),
        pad_high=max(0, max(all_shifts) + blocks - size),
        classes=classes,
    )


def some_output_unreached(phases: tuple[AxisPhases, ...]) -> bool:
    """Whether some output phase receives no tap at all (so stays zero)."""
    return any(math.prod(len(c.shifts) for c in combo) == 0
               for combo in itertools.product(*(p.classes for p in phases)))


def live_classes(phases: tuple[AxisPhases, ...]):
    """(classes of the first axis, combinations of the others' classes) that have taps."""
    lead_classes = [c for c in phases[0].classes if c.shifts]
    rest_combos = [combo for combo in itertools.product(*(p.classes for p in phases[1:]))
                   if all(c.shifts for c in combo)]
    return lead_classes, rest_combos


def taps_per_output(axes) -> int:
    """The most filter taps one output sums over all spatial axes: along an axis of
    ``K`` taps, stride ``s`` and dilation ``d``, the taps meeting one output are those
    with ``k * d`` in one class modulo ``s``, which are every ``s / gcd(s, d)``-th tap."""
    return math.prod(-(-axis.kernel_size // (axis.stride // math.gcd(axis.stride,
                                                                    axis.dilation)))
                     for axis in axes)


def tap_windows(axis: AxisPlan) -> tuple[tuple[slice, slice] | None, ...]:
    """Per kernel tap, the (input, output) slices it connects along one axis.

    Tap ``k`` sends input ``x`` to output ``o = x*s + k*d - offset``; the slices
    keep the ``x`` whose ``o`` lies in ``[0, Y)``.  ``None`` marks a tap that lands
    entirely outside the output.
    """
    s = axis.stride
    windows: list[tuple[slice, slice] | None] = []
    for k in range(axis.kernel_size):
        first = k * axis.dilation - axis.offset  # output index of input 0
        lo = max(0, -(first // s))  # the first x with x*s + first >= 0
        hi = min(axis.input_size - 1, (axis.output_size - 1 - first) // s)
        if lo > hi:
            windows.append(None)
        else:
            # One input reached: step 1, since a stride beyond 2**63 is no slice step.
            step = s if hi > lo else 1
            windows.append((slice(lo, hi + 1), slice(first + lo * s, first + hi * s + 1, step)))
    return tuple(windows)


#: Positions, strides, dilations and sizes up to this bound are safe in the kernels'
#: int64 index arithmetic (a position plus a stride, times an element size, stays far
#: below 2**63).  Beyond it a problem runs ``direct-numpy``, which computes its windows
#: with Python integers (:func:`beyond_int64_kernels`).
INT64_KERNEL_BOUND = 1 << 40


def beyond_int64_kernels(axes) -> bool:
    """Whether some axis has a stride, dilation, offset, full or output size past
    :data:`INT64_KERNEL_BOUND` (the shape rules accept integers of any size)."""
    bound = INT64_KERNEL_BOUND
    return any(axis.stride > bound or axis.dilation > bound or abs(axis.offset) > bound
               or axis.full_size > bound or axis.output_size > bound for axis in axes)


def three_axes(axes) -> tuple[AxisPlan, ...]:
    """The axes padded to three with unit axes.

    The last one stays last (the contiguous one); in 2-D the unit axis goes second,
    so that the first axis (cut into bands, or split between lines) is a real one.
    """
    unit = AxisPlan(1, 1, 1, 1, 0, 1)
    if len(axes) == 1:
        return (unit, unit, axes[0])
    return (axes[0],) + (unit,) * (3 - len(axes)) + tuple(axes[1:])


def axis_taps(axis: AxisPlan) -> list[tuple[int, int, int, int]]:
    """The taps of one axis that read inside ``grad``: ``(k, shift, low, high)`` with
    ``shift = k*d - offset`` the index read for ``x = 0`` and ``[low, high)`` the ``x``
    whose reads ``x*s + shift`` fall in ``[0, Y)`` (Python integers: any size)."""
    s, size = axis.stride, axis.output_size
    taps = []
    for k in range(axis.kernel_size):
        shift = k * axis.dilation - axis.offset
        low = max(0, -(shift // s))  # the first x with x*s + shift >= 0
        high = min(axis.input_size, (size - 1 - shift) // s + 1)
        if low < high:
            taps.append((k, shift, low, high))
    return taps


def tap_zeros(axis: AxisPlan) -> tuple[int, int]:
    """``(before, after)``: the zeros ``grad`` needs on either side of ``axis`` so that
    every output's every tap reads inside it (the taps' shifts are ``k*d - offset``,
    output ``x`` reading ``x*s + shift``)."""
    shifts = [k * axis.dilation - axis.offset for k in range(axis.kernel_size)]
    reach = (axis.input_size - 1) * axis.stride + max(shifts)
    return max(0, -min(shifts)), max(0, reach - (axis.output_size - 1))


def disjoint_taps(axes) -> bool:
    """Whether every output is reached by one tap at most: taps that span less than a
    stride on every axis (U-Net's k2 s2)."""
    return all((axis.kernel_size - 1) * axis.dilation < axis.stride for axis in axes)


def tap_reads(axis: AxisPlan) -> tuple[int, list[tuple[int, int]]]:
    """Along one axis, the (output, tap) pairs whose input lies inside (each tap's
    window, :func:`tap_windows`: only these are multiplied, the kernels gather the taps
    that read inside), and per phase that any tap reaches, how many of its outputs
    have every tap inside and how many taps each of them has.  In O(taps)."""
    reads = sum(window[0].stop - window[0].start
                for window in tap_windows(axis) if window is not None)
    runs = []
    for c in axis_phases(axis).classes:
        if not c.shifts:
            continue  # a phase no tap reaches is only zeroed
        low, high = max(0, -min(c.shifts)), axis.input_size - max(c.shifts)
        for phase in range(c.first, c.first + c.count):
            count = -(-(axis.output_size - phase) // axis.stride)
            runs.append((max(0, min(count, high) - low), len(c.shifts)))
    return reads, runs
