"""``window``: every phase of every axis in one GEMM.

The input windows spanning all the phases' shifts are copied once (a single strided
copy of a padded input), the phases' taps become one ``(window*Ci, phases*Co)`` matrix
(zeros where a phase has no tap at a shift), and one interleaving copy writes the
output.  Extra FLOPs (up to ``(K/s + 1)**D / (K/s)**D``) in exchange for a handful of
NumPy calls: for small layers and for stride 1 (no waste).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._plan.geometry import AxisPhases, PhaseClass, axis_phases
from .._plan.rules import AxisPlan
from .._runtime.caches import kept
from .._runtime.threads import copy, parallel_copy
from .common import (
    class_matrix,
    input_glxc,
    output_glyc,
    require_finite,
    scatter_phases,
    threaded_matmul,
    zero_output,
)
from .phase import chunks


def _window_class(axis: AxisPlan, phases: AxisPhases) -> PhaseClass | None:
    """All live phases of one axis as one class over every shift any of them uses.

    Phases ``[first, first + count)`` span the phases that have taps; slot ``m``
    reads input ``j + shifts[0] + m``.  A phase without a tap at a slot takes the
    kernel index ``K`` (a zero tap appended to the filter).  None when no phase has
    a tap.
    """
    live = [c for c in phases.classes if c.shifts]
    if not live:
        return None
    low = min(c.shifts[0] for c in live)
    high = max(c.shifts[-1] for c in live)
    first = live[0].first
    count = live[-1].first + live[-1].count - first
    table = [[axis.kernel_size] * (high - low + 1) for _ in range(count)]
    for c in live:
        for i, taps in enumerate(c.taps):
            for shift, k in zip(c.shifts, taps):
                table[c.first + i - first][shift - low] = k
    return PhaseClass(first, count, tuple(range(low, high + 1)),
                      tuple(tuple(row) for row in table))


@kept("kernel schedules", maxsize=256)
def window_plan(axes: tuple[AxisPlan, ...]):
    """(per-axis phases, per-axis window classes or None, whether an output stays zero)."""
    phases = tuple(axis_phases(axis) for axis in axes)
    combo = tuple(_window_class(axis, p) for axis, p in zip(axes, phases))
    if any(c is None for c in combo):
        return phases, None, True
    unreached = any(c.first > 0 or c.first + c.count < min(p.stride, axis.output_size)
                    for axis, p, c in zip(axes, phases, combo))
    return phases, combo, unreached


def _window(data, weights, axes, dtype, channels_last, out, *, target):
    """Every phase in one GEMM over full input windows (``window``, module docstring).

    Rows are ``(n, j...)``, the depth ``(slots..., Ci)`` and the width ``(phases...,
    Co)`` (channels contiguous in every copy), one product per group.
    """
    # Taps meet the padded input, and inputs the matrix's zeros (no weights memo here:
    # the matrix is rebuilt on every call, which costs more than the check).
    require_finite(weights, dtype)
    require_finite(data, dtype)
    groups, ci, co = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    rank = len(axes)
    batch = data.shape[0]
    phases, combo, unreached = window_plan(tuple(axes))
    if unreached:
        zero_output(out, target.threads)
    if combo is None:
        return
    blocks = tuple(p.blocks for p in phases)
    sizes = tuple(len(c.shifts) for c in combo)
    counts = tuple(c.count for c in combo)
    depth, width = math.prod(sizes) * ci, math.prod(counts) * co
    # Padded input (G, N, H..., Ci) with H = J + window - 1 and padded[t] = x[t + shift_0].
    padded = np.zeros((groups, batch) + tuple(b + w - 1 for b, w in zip(blocks, sizes)) + (ci,),
                      dtype)
    into, take = [slice(None), slice(None)], [slice(None), slice(None)]
    for axis, b, w, c in zip(axes, blocks, sizes, combo):
        low = c.shifts[0]
        t0, t1 = max(0, -low), min(b + w - 1, axis.input_size - low)
        into.append(slice(t0, max(t0, t1)))
        take.append(slice(t0 + low, max(t0, t1) + low))
    parallel_copy(copy, padded[tuple(into)], input_glxc(data, groups, channels_last)[tuple(take)])
    # Zero tap K appended on every kernel axis: (G, K+1..., Ci, Co).
    taps_first = np.zeros((groups,) + tuple(k + 1 for k in kernel) + (ci, co), dtype)
    taps_first[(slice(None),) + tuple(slice(0, k) for k in kernel)] = np.moveaxis(
        weights, (1, 2), (-2, -1))
    slots = list(itertools.product(*(range(w) for w in sizes)))
    matrix = class_matrix(taps_first, combo, slots, counts, dtype)  # (G, depth, width)
    strides = padded.strides
    windows = as_strided(padded, padded.shape[:2] + blocks + sizes + (ci,),
                         strides[:2] + strides[2:-1] + strides[2:-1] + strides[-1:],
                         writeable=False)
    into = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    row_bytes = groups * math.prod(blocks[1:]) * (depth + width) * dtype.itemsize
    for n0, n1, j0, j1 in chunks(batch, blocks[0], row_bytes):
        sub_blocks = (j1 - j0,) + blocks[1:]
        rows = (n1 - n0) * math.prod(sub_blocks)
        columns = np.empty((groups, n1 - n0) + sub_blocks + sizes + (ci,), dtype)
        parallel_copy(copy, columns, windows[:, n0:n1, j0:j1])
        product = threaded_matmul(columns.reshape(groups, rows, depth), matrix, target.threads)
        product = product.reshape((groups, n1 - n0) + sub_blocks + counts + (co,))
        scatter_phases(into[:, n0:n1], product, combo, phases, rank, j0)
