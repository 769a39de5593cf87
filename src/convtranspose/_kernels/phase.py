"""``phase-nxc`` and ``phase-ncx``: the sub-pixel decomposition.

Adjacent phases with the same shifts form a class (:mod:`convtranspose._plan.geometry`): one
im2col of the shifted inputs and one dense GEMM (phases and output channels as the
GEMM's columns) computes the whole class, and the result is copied once into a strided
view of the output.  No scatter-add, no zero-inserted input, FLOPs only for taps that
exist.  Multiplies zeros of the padded input by taps: with a possibly non-finite filter
it raises :class:`~._common.NonFinite`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._plan.geometry import axis_phases, some_output_unreached
from .._runtime.memo import derived_from, frozen
from .._runtime.threads import copy, parallel_copy
from .common import (
    SCRATCH_BYTES,
    class_matrix,
    input_glxc,
    move_axis,
    output_glyc,
    require_finite,
    scatter_phases,
    taps_first_weights,
    threaded_matmul,
    zero_output,
)


def chunks(batch: int, first_blocks: int, bytes_per_block_row: int,
           budget: int | None = None):
    """(n0, n1, j0, j1) pieces of work whose scratch stays under ``budget`` bytes
    (:data:`SCRATCH_BYTES` if None).

    Whole samples are grouped while they fit; a sample too large on its own is split
    along the blocks of its first spatial axis.
    """
    budget = SCRATCH_BYTES if budget is None else budget
    if first_blocks == 0:
        return
    per_sample = bytes_per_block_row * first_blocks
    if per_sample <= budget:
        step = max(1, min(batch, budget // max(per_sample, 1)))
        for n0 in range(0, batch, step):
            yield n0, min(batch, n0 + step), 0, first_blocks
        return
    rows = max(1, budget // max(bytes_per_block_row, 1))
    for n0 in range(batch):
        for j0 in range(0, first_blocks, rows):
            yield n0, n0 + 1, j0, min(first_blocks, j0 + rows)


def _phase(data, weights, axes, dtype, channels_last, out, internal_last, *, target):
    """Sub-pixel decomposition: one im2col + GEMM per class of phases (module docstring).

    With ``internal_last`` the GEMM is ``(n, j...) x (slots, Ci) @ (slots, Ci) x
    (phases..., Co)`` (channels contiguous in every copy); otherwise its transpose
    ``(phases..., Co) x (slots, Ci) @ (slots, Ci) x (n, j...)`` (spatial axes
    contiguous), whatever the layouts of ``data`` and ``out``.
    """
    groups, ci, co = weights.shape[:3]
    batch = data.shape[0]
    co_first = internal_last and not channels_last
    derived = derived_from(weights, "phase", axes, dtype, internal_last, co_first)
    require_finite(weights, dtype, derived)  # taps meet the padding
    phases = tuple(axis_phases(axis) for axis in axes)
    if some_output_unreached(phases):
        zero_output(out, target.threads)
    padded = _padded_source(data, axes, phases, dtype, groups, channels_last, internal_last)
    into = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    blocks = tuple(p.blocks for p in phases)
    for combo in itertools.product(*(p.classes for p in phases)):
        slots = list(itertools.product(*(range(len(c.shifts)) for c in combo)))
        if not slots:
            continue
        matrix = derived.get(combo)
        if matrix is None:
            # Rows-major products for a channels-first output keep the phases innermost,
            # so that the copy into the output moves runs of adjacent phases.
            matrix = class_matrix(taps_first_weights(weights, derived), combo, slots,
                                  tuple(c.count for c in combo), dtype, co_first)
            if not internal_last:  # (G, depth, width) -> (G, width, depth)
                matrix = np.ascontiguousarray(matrix.transpose(0, 2, 1))
            derived[combo] = matrix = frozen(matrix)
        depth, width = len(slots) * ci, math.prod(c.count for c in combo) * co
        row_bytes = groups * math.prod(blocks[1:]) * (depth + width) * dtype.itemsize
        for n0, n1, j0, j1 in chunks(batch, blocks[0], row_bytes):
            product = _class_product(padded, matrix, phases, combo, slots, (n0, n1, j0, j1),
                                     co, co_first, internal_last, target.threads)
            scatter_phases(into[:, n0:n1], product, combo, phases, len(axes), j0)


def _padded_source(data, axes, phases, dtype, groups, channels_last, internal_last):
    """The data as ``(G, N, X..., Ci)`` (``internal_last``) or ``(G, Ci, N, X...)``,
    C-contiguous in ``dtype``, with the zeros every class's shifts read around it."""
    source = input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if not internal_last:
        source = move_axis(source, -1, 1)  # (G, Ci, N, X...)
    spatial_at = 2 if internal_last else 3  # index of the first spatial axis
    if any(p.pad_low or p.pad_high for p in phases):
        shape = list(source.shape)
        interior = [slice(None)] * len(shape)
        for index, (axis, p) in enumerate(zip(axes, phases)):
            shape[spatial_at + index] = axis.input_size + p.pad_low + p.pad_high
            interior[spatial_at + index] = slice(p.pad_low, p.pad_low + axis.input_size)
        padded = np.zeros(shape, dtype)
        parallel_copy(copy, padded[tuple(interior)], source)
        return padded
    if source.dtype != dtype or not source.flags.c_contiguous:
        padded = np.empty(source.shape, dtype)
        parallel_copy(copy, padded, source)
        return padded
    return source


def _class_product(padded, matrix, phases, combo, slots, piece, co, co_first, internal_last,
                   threads):
    """One class's products for the samples ``[n0, n1)`` and first-axis blocks ``[j0, j1)``
    (``piece``), as a ``(G, n, j..., phases..., Co)`` view: the im2col of its shifted
    windows of ``padded`` times the class's ``matrix``."""
    n0, n1, j0, j1 = piece
    rank = len(phases)
    groups = padded.shape[0]
    ci = padded.shape[-1] if internal_last else padded.shape[1]
    first = 2 if internal_last else 3  # the first spatial axis of `padded`
    sub_blocks = (j1 - j0,) + tuple(p.blocks for p in phases[1:])
    rows = (n1 - n0) * math.prod(sub_blocks)
    counts = tuple(c.count for c in combo)
    depth = len(slots) * ci

    def window(slot):
        index = [slice(None)] * padded.ndim
        index[first - 1] = slice(n0, n1)
        for a, (p, c, s_, b) in enumerate(zip(phases, combo, slot, sub_blocks)):
            low = p.pad_low + c.shifts[s_] + (j0 if a == 0 else 0)
            index[first + a] = slice(low, low + b)
        return tuple(index)

    if internal_last:
        # columns (G, n, j..., slots, Ci) -> product (G, n, j..., phases..., Co)
        if len(slots) == 1:
            columns = np.ascontiguousarray(padded[window(slots[0])])
        else:
            columns = np.empty((groups, n1 - n0) + sub_blocks + (len(slots), ci), padded.dtype)
            for index, slot in enumerate(slots):
                parallel_copy(copy, columns[..., index, :], padded[window(slot)])
        product = threaded_matmul(columns.reshape(groups, rows, depth), matrix, threads)
        if co_first:
            product = product.reshape((groups, n1 - n0) + sub_blocks + (co,) + counts)
            return move_axis(product, 2 + rank, -1)
        return product.reshape((groups, n1 - n0) + sub_blocks + counts + (co,))
    # columns (G, slots, Ci, n, j...) -> product (G, phases..., Co, n, j...)
    if len(slots) == 1:
        columns = np.ascontiguousarray(padded[window(slots[0])])
    else:
        columns = np.empty((groups, len(slots), ci, n1 - n0) + sub_blocks, padded.dtype)
        for index, slot in enumerate(slots):
            parallel_copy(copy, columns[:, index], padded[window(slot)])
    product = threaded_matmul(matrix, columns.reshape(groups, depth, rows), threads)
    product = product.reshape((groups,) + counts + (co, n1 - n0) + sub_blocks)
    # view as (G, n, j..., phases..., Co)
    return product.transpose((0, rank + 2) + tuple(range(rank + 3, 2 * rank + 3))
                             + tuple(range(1, rank + 1)) + (rank + 1,))
