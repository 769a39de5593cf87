"""The stride-phase decomposition of one axis, shared by the algorithms and the estimates.

Output element ``o`` of an axis with stride ``s`` belongs to phase ``o mod s``; a phase
only receives the taps ``k`` with ``k*d = o + offset (mod s)``, each from input
``o // s + shift``.  Adjacent phases with the same shifts form a class
(:class:`_PhaseClass`); :func:`_axis_phases` lists them with the zero padding their
shifts need.  Pure integers (NumPy only for index ranges).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ._plan import AxisPlan


@dataclass(frozen=True)
class _PhaseClass:
    """Adjacent output phases ``[first, first + count)`` of one axis sharing input shifts.

    ``taps[i][slot]`` is the kernel index that phase ``first + i`` takes from input
    ``j + shifts[slot]`` for its ``j``-th output ``o = j*s + first + i``.
    """

    first: int
    count: int
    shifts: tuple[int, ...]
    taps: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class _AxisPhases:
    stride: int
    whole_blocks: int  # Y // s: blocks of s outputs entirely inside the output
    blocks: int  # ceil(Y / s): output positions j computed per phase
    remainder: int  # Y % s: phases present in the last, partial block
    pad_low: int  # input zeros needed before x = 0 so that every shift is in range
    pad_high: int
    classes: tuple[_PhaseClass, ...]


def _axis_phases(axis: AxisPlan) -> _AxisPhases:
    s, d, size = axis.stride, axis.dilation, axis.input_size
    blocks = -(-axis.output_size // s)
    per_phase = []
    for phase in range(min(s, axis.output_size)):
        pairs = []
        for k in range(axis.kernel_size):
            numerator = phase + axis.offset - k * d
            if numerator % s:
                continue
            shift = numerator // s
            if shift + blocks - 1 < 0 or shift > size - 1:
                continue  # this tap only ever reads zeros
            pairs.append((shift, k))
        pairs.sort()
        per_phase.append(pairs)
    classes = []
    for phase, pairs in enumerate(per_phase):
        shifts = tuple(shift for shift, _ in pairs)
        taps = tuple(k for _, k in pairs)
        if classes and classes[-1].shifts == shifts:
            last = classes[-1]
            classes[-1] = _PhaseClass(last.first, last.count + 1, shifts, last.taps + (taps,))
        else:
            classes.append(_PhaseClass(phase, 1, shifts, (taps,)))
    all_shifts = [shift for c in classes for shift in c.shifts] or [0]
    return _AxisPhases(
        stride=s,
        whole_blocks=axis.output_size // s,
        blocks=blocks,
        remainder=axis.output_size % s,
        pad_low=max(0, -min(all_shifts)),
        pad_high=max(0, max(all_shifts) + blocks - size),
        classes=tuple(classes),
    )


def _some_output_unreached(phases: tuple[_AxisPhases, ...]) -> bool:
    """Whether some output phase receives no tap at all (so stays zero)."""
    return any(math.prod(len(c.shifts) for c in combo) == 0
               for combo in itertools.product(*(p.classes for p in phases)))


def _live_classes(phases: tuple[_AxisPhases, ...]):
    """(classes of the first axis, combinations of the others' classes) that have taps."""
    lead_classes = [c for c in phases[0].classes if c.shifts]
    rest_combos = [combo for combo in itertools.product(*(p.classes for p in phases[1:]))
                   if all(c.shifts for c in combo)]
    return lead_classes, rest_combos


def _tap_windows(axis: AxisPlan) -> tuple[tuple[slice, slice] | None, ...]:
    """Per kernel tap, the (input, output) slices it connects along one axis.

    Tap ``k`` sends input ``x`` to output ``o = x*s + k*d - offset``; the slices
    keep the ``x`` whose ``o`` lies in ``[0, Y)``.  ``None`` marks a tap that lands
    entirely outside the output.
    """
    s, windows = axis.stride, []
    for k in range(axis.kernel_size):
        first = k * axis.dilation - axis.offset  # output index of input 0
        lo = max(0, -(first // s))  # the first x with x*s + first >= 0
        hi = min(axis.input_size - 1, (axis.output_size - 1 - first) // s)
        if lo > hi:
            windows.append(None)
        else:
            windows.append((slice(lo, hi + 1), slice(first + lo * s, first + hi * s + 1, s)))
    return tuple(windows)


def _three_axes(axes) -> tuple[AxisPlan, ...]:
    """The axes padded to three with unit axes.

    The last one stays last (the contiguous one); in 2-D the unit axis goes second,
    so that the first axis (cut into bands, or split between lines) is a real one.
    """
    unit = AxisPlan(1, 1, 1, 1, 0, 1)
    if len(axes) == 1:
        return (unit, unit, axes[0])
    return (axes[0],) + (unit,) * (3 - len(axes)) + tuple(axes[1:])
