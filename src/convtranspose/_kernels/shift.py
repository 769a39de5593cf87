"""``shift-nxc`` and ``shift-ncx``: every tap one accumulating BLAS product.

Every tap of every axis is a row shift of one zero-padded copy of the input, so each
tap is one accumulating BLAS product straight from a view (no im2col at all); rows past
the blocks' ends are computed and dropped, so it suits large spatial extents.
Requires BLAS callable for the dtype (else the registry runs ``phase``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._plan.geometry import AxisPhases, axis_phases, some_output_unreached
from .._plan.rules import AxisPlan
from .._runtime.memo import derived_from, frozen
from .._runtime.threads import copy, parallel_copy
from .common import (
    SERIAL_GEMM_FLOPS,
    class_matrix,
    input_glxc,
    output_glyc,
    require_finite,
    scatter_phases,
    taps_first_weights,
)
from .gemm import run_gemms

#: Bytes of input rows plus products per chunk of the ``shift`` algorithms: a
#: chunk's rows stay in cache while every tap's product is added to them.
_SHIFT_CHUNK_BYTES = 2 << 20


def shift_grid(axes: tuple[AxisPlan, ...], phases: tuple[AxisPhases, ...]):
    """(padded sizes, rows per step of each axis, rows of slack) of the ``shift`` grid."""
    sizes = tuple(a.input_size + p.pad_low + p.pad_high for a, p in zip(axes, phases))
    pitches = tuple(math.prod(sizes[a + 1:]) for a in range(len(sizes)))
    slack = sum((max(s for c in p.classes for s in c.shifts) + p.pad_low) * pitch
                for p, pitch in zip(phases, pitches) if any(c.shifts for c in p.classes))
    return sizes, pitches, slack


def _shift_gemm(data, weights, axes, dtype, channels_last, out, internal_last, *, target):
    """Every tap as one accumulating BLAS product over a row-shifted view (``shift-*``).

    The input is copied once onto a grid padded so that every shift of every axis
    stays inside it.  Row ``r`` of the grid (``(n, x_1, ..., x_D)`` flattened) then
    stands for block ``j = x`` of every phase, and slot shifts ``t_a`` read grid row
    ``r + sum((t_a + pad_a) * pitch_a)``: each class's product over a chunk of rows
    is one GEMM per slot, added up in place (``beta = 1``) straight from views of
    the grid.  Rows with some ``x_a >= blocks_a`` are computed and dropped.
    """
    groups, ci, co = weights.shape[:3]
    batch = data.shape[0]
    matrices = derived_from(weights, "shift", axes, dtype)
    require_finite(weights, dtype, matrices)  # taps meet the grid's padding
    phases = tuple(axis_phases(axis) for axis in axes)
    if some_output_unreached(phases):
        out.fill(0)
    combos = [combo for combo in itertools.product(*(p.classes for p in phases))
              if all(c.shifts for c in combo)]
    if not combos:
        return
    sizes, pitches, slack = shift_grid(axes, phases)
    grid = _padded_grid(data, axes, phases, sizes, slack, dtype, groups, channels_last,
                        internal_last)
    into = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    plane = pitches[0]  # grid rows per step of the first axis
    widest = max(math.prod(c.count for c in combo) for combo in combos) * co
    step = max(1, _SHIFT_CHUNK_BYTES // (plane * groups * (ci + widest) * dtype.itemsize))
    last_plane = (batch - 1) * sizes[0] + phases[0].blocks  # planes past it are all padding
    for q0 in range(0, last_plane, step):
        q1 = min(batch * sizes[0], q0 + step)
        for combo in combos:
            all_slots = list(itertools.product(*(range(len(c.shifts)) for c in combo)))
            width = math.prod(c.count for c in combo) * co
            matrix = matrices.get(combo)
            if matrix is None:
                matrix = class_matrix(taps_first_weights(weights, matrices), combo, all_slots,
                                      tuple(c.count for c in combo), dtype
                                      ).reshape(groups, len(all_slots), ci, width)
                matrices[combo] = matrix = frozen(matrix)
            offsets = [sum((c.shifts[t] + p.pad_low) * pitch
                           for c, t, p, pitch in zip(combo, slot, phases, pitches))
                       for slot in all_slots]
            products = _grid_products(grid, matrix, offsets, (q0 * plane, (q1 - q0) * plane),
                                      internal_last, target.threads)
            _scatter_chunk(into, products, combo, phases, sizes, (q0, q1), co, internal_last)


def _padded_grid(data, axes, phases, sizes, slack, dtype, groups, channels_last, internal_last):
    """The input copied onto the zero-padded grid: ``(rows + slack, G, Ci)`` when
    ``internal_last``, else ``(G, Ci, rows + slack)``."""
    ci = data.shape[-1 if channels_last else 1] // groups
    grid_rows = data.shape[0] * math.prod(sizes)
    interior = tuple(slice(p.pad_low, p.pad_low + a.input_size) for a, p in zip(axes, phases))
    source = input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if internal_last:
        grid = np.zeros((grid_rows + slack, groups, ci), dtype)
        spatial = grid[:grid_rows].reshape((data.shape[0],) + sizes + (groups, ci))
        parallel_copy(copy, spatial[(slice(None),) + interior],
                      np.moveaxis(source, 0, -2))  # (N, X..., G, Ci)
    else:
        grid = np.zeros((groups, ci, grid_rows + slack), dtype)
        spatial = grid[:, :, :grid_rows].reshape((groups, ci, data.shape[0]) + sizes)
        parallel_copy(copy, spatial[(slice(None),) * 3 + interior],
                      np.moveaxis(source, -1, 1))  # (G, Ci, N, X...)
    return grid


def _grid_products(grid, matrix, offsets, rows_range, internal_last, threads):
    """A class's products for grid rows ``[base, base + rows)`` (``rows_range``): per
    group, one accumulating GEMM per slot from the rows ``offset`` further on."""
    base, rows = rows_range
    groups, _, ci, width = matrix.shape
    if internal_last:
        products = np.empty((rows, groups, width), grid.dtype)
    else:
        products = np.empty((groups, width, rows), grid.dtype)
    flops = 2.0 * rows * ci * width
    parts = 1 if flops >= SERIAL_GEMM_FLOPS else max(1, threads // groups)
    calls = []
    for g, part in itertools.product(range(groups), range(parts)):
        r0, r1 = rows * part // parts, rows * (part + 1) // parts
        if internal_last:
            calls.append([(grid[base + offset + r0:base + offset + r1, g],
                           matrix[g, index], products[r0:r1, g], index > 0)
                          for index, offset in enumerate(offsets)])
        else:
            calls.append([(matrix[g, index].T,
                           grid[g, :, base + offset + r0:base + offset + r1],
                           products[g, :, r0:r1], index > 0)
                          for index, offset in enumerate(offsets)])
    run_gemms(calls, flops / parts, threads)
    return products


def _scatter_chunk(into, products, combo, phases, sizes, planes, co, internal_last):
    """A chunk's products of one class, grid planes ``[q0, q1)``, into their phases of the
    output, sample by sample (rows of padding dropped)."""
    q0, q1 = planes
    rank = len(phases)
    groups = into.shape[0]
    counts = tuple(c.count for c in combo)
    # (G, planes, x_2.., phases.., Co) over this chunk's planes
    if internal_last:
        view = products.reshape((q1 - q0,) + sizes[1:] + (groups,) + counts + (co,))
        view = np.moveaxis(view, rank, 0)
    else:
        view = products.reshape((groups,) + counts + (co, q1 - q0) + sizes[1:])
        view = view.transpose((0,) + tuple(range(rank + 2, 2 * rank + 2))
                              + tuple(range(1, rank + 2)))
    blocks_rest = tuple(slice(0, p.blocks) for p in phases[1:])
    for n in range(q0 // sizes[0], -(-q1 // sizes[0])):
        x0 = max(q0 - n * sizes[0], 0)
        x1 = min(q1 - n * sizes[0], phases[0].blocks)
        if x0 >= x1:
            continue
        piece = view[(slice(None), slice(n * sizes[0] + x0 - q0, n * sizes[0] + x1 - q0))
                     + blocks_rest]
        scatter_phases(into[:, n:n + 1], piece[:, None], combo, phases, rank, x0)
