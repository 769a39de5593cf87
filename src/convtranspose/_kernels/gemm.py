"""``gemm-nxc`` and ``gemm-ncx``: stride phases as accumulating BLAS products.

The classes of :mod:`.phase`, but each tap of the first axis is a row shift of one
window buffer, so its product accumulates into the class's result straight from a view
(BLAS ``beta = 1``, :mod:`convtranspose._runtime.blas`); only the other axes' shifts
are copied.  Requires BLAS callable for the dtype (else the registry runs ``phase``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._plan.geometry import axis_phases, live_classes, some_output_unreached
from .._runtime import blas as _blas
from .._runtime.memo import derived_from, frozen
from .._runtime.threads import copy, parallel_copy, parallel_parts
from .common import (
    PARALLEL_FLOPS,
    class_matrix,
    gemm_call,
    input_glxc,
    output_glyc,
    require_finite,
    scatter_phases,
    split_gemms,
    splits_product,
    taps_first_weights,
    zero_output,
)

#: Scratch of the ``gemm`` algorithms (input windows plus one class's products) per
#: chunk of the first spatial axis; at most the output's size, too, unless that is
#: below :data:`_GEMM_MIN_SCRATCH_BYTES` (DCGAN 512->256, output 4 MB: 12.6 MB of
#: scratch in one chunk with two classes' windows alive at once, 3.7 MB in two chunks).
_GEMM_SCRATCH_BYTES = 8 << 20


#: Small layers keep whole chunks: a chunk per block of a small output would be
#: many small products, each a few Python calls.
_GEMM_MIN_SCRATCH_BYTES = 1 << 20


def _merged_rows(array: np.ndarray, start: int, stop: int) -> np.ndarray | None:
    """``array`` with axes ``[start, stop)`` merged into one, as a view; None if impossible."""
    shape, strides = array.shape, array.strides
    live = [(size, step) for size, step in zip(shape[start:stop], strides[start:stop]) if size > 1]
    stride = live[-1][1] if live else array.itemsize
    expected = stride
    for size, step in reversed(live):
        if step != expected:
            return None
        expected = step * size
    return as_strided(array, shape[:start] + (math.prod(shape[start:stop]),) + shape[stop:],
                      strides[:start] + (stride,) + strides[stop:], writeable=False)


def _gemm_windows(source, lead_range, rest, rest_combo, slots, dtype, internal_last):
    """The input windows of one class of the axes after the first, for BLAS.

    ``source`` is the data as ``(X_1, N, X_2..., G, Ci)`` (``internal_last``) or
    ``(G, Ci, X_1, N, X_2...)``; the result is ``(H, N, J_2..., G, S, Ci)`` or
    ``(G, S, Ci, H, N, J_2...)`` where ``H`` covers inputs ``lead_range`` of the
    first axis (zeros outside the data), ``J_a`` the blocks of axis ``a`` and ``S``
    the class's slots: slot ``s`` of block ``j`` holds input ``j + shift_s``.  A view
    of ``source`` when that is already the layout (the range inside the data, one slot).
    """
    lo, hi = lead_range
    lead_size = source.shape[0] if internal_last else source.shape[2]
    blocks = tuple(p.blocks for p in rest)
    spatial_at = 2 if internal_last else 4  # first axis after (H, N) in `source`
    sizes = source.shape[spatial_at:spatial_at + len(rest)]
    if (len(slots) == 1 and 0 <= lo and hi <= lead_size and source.dtype == dtype
            and all(c.shifts[0] == 0 for c in rest_combo) and blocks == sizes):
        inside = source[lo:hi] if internal_last else source[:, :, lo:hi]
        view = np.expand_dims(inside, -2 if internal_last else 1)
        first = 0 if internal_last else 3
        rows = _merged_rows(view, first, first + 1 + len(blocks) + 1)
        # BLAS needs Ci packed (rows x Ci operands) or the rows packed (Ci x rows).
        packed = (view.shape[-1] == 1 or view.strides[-1] == view.itemsize if internal_last
                  else rows is not None and rows.strides[first] == view.itemsize)
        if rows is not None and packed:
            return view
    groups = source.shape[-2] if internal_last else source.shape[0]
    ci = source.shape[-1] if internal_last else source.shape[1]
    if internal_last:
        windows = np.zeros((hi - lo, source.shape[1]) + blocks + (groups, len(slots), ci), dtype)
    else:
        windows = np.zeros((groups, len(slots), ci, hi - lo, source.shape[3]) + blocks, dtype)
    h0, h1 = max(lo, 0), min(hi, lead_size)
    if h0 >= h1:
        return windows
    for index, slot in enumerate(slots):
        into, take = [slice(h0 - lo, h1 - lo), slice(None)], [slice(h0, h1), slice(None)]
        for p, c, s, size in zip(rest, rest_combo, slot, sizes):
            shift = c.shifts[s]
            j0, j1 = max(0, -shift), min(p.blocks, size - shift)
            into.append(slice(j0, j1))
            take.append(slice(j0 + shift, j1 + shift))
        if any(window.start >= window.stop for window in into[2:]):
            continue  # this slot only reads zeros
        if internal_last:
            destination = windows[tuple(into) + (slice(None), index)]
            parallel_copy(copy, destination, source[tuple(take)])
        else:
            destination = windows[(slice(None), index, slice(None)) + tuple(into)]
            parallel_copy(copy, destination, source[(slice(None), slice(None)) + tuple(take)])
    return windows


def run_gemms(calls, flops_each: float, threads: int) -> None:
    """Run ``calls`` (lists of ``gemm`` argument tuples, one list per independent unit),
    on one BLAS thread each: large products cut into a block per thread
    (:func:`~.common.split_gemms`), small ones in order on the calling thread or units
    split between the threads when there are several.
    """
    gemm = gemm_call()

    def work(units):
        for unit in units:
            for arguments in unit:
                gemm(*arguments)

    if splits_product(flops_each, threads):
        split_gemms(calls, threads)
        return
    total = flops_each * sum(len(unit) for unit in calls)
    with _blas.one_thread:
        if threads == 1 or len(calls) < 2 or total < 4 * PARALLEL_FLOPS:
            work(calls)
            return
        threads = min(threads, len(calls))
        parts = [calls[i::threads] for i in range(threads)]
        parallel_parts(lambda i: work(parts[i]), threads, threads)


def _phase_gemm(data, weights, axes, dtype, channels_last, out, internal_last, *, target):
    """Stride phases as accumulating BLAS products over row-shifted windows (``gemm-*``).

    Like :func:`~.phase._phase`, but the slots of the first spatial axis are not
    copied: the windows of the other axes are laid out with the first axis outermost
    (``(X_1, N, J_2..., G, S, Ci)``), so that shifting the first axis by one input
    is an offset of one block of rows; each class of the first axis is then one
    BLAS product per slot and group, accumulated into the class's result (``beta =
    1``), which is copied once into a strided view of the output.
    """
    groups, ci = weights.shape[:2]
    rank = len(axes)
    matrices = derived_from(weights, "gemm", axes, dtype)
    require_finite(weights, dtype, matrices)  # taps meet the zeros around the windows
    phases = tuple(axis_phases(axis) for axis in axes)
    lead, rest = phases[0], phases[1:]
    if some_output_unreached(phases):
        zero_output(out, target.threads)
    lead_classes, rest_combos = live_classes(phases)
    if not lead_classes or not rest_combos:
        return
    source = _gemm_source(data, dtype, groups, channels_last, internal_last)
    low_shift = min(c.shifts[0] for c in lead_classes)
    high_shift = max(c.shifts[-1] for c in lead_classes)
    step = _blocks_per_chunk(weights.shape, phases, lead_classes, rest_combos, dtype,
                             data.shape[0], out.nbytes, high_shift - low_shift)
    for j0 in range(0, lead.blocks, step):
        j1 = min(lead.blocks, j0 + step)
        lead_range = (j0 + low_shift, j1 + high_shift)
        for rest_combo in rest_combos:
            slots = list(itertools.product(*(range(len(c.shifts)) for c in rest_combo)))
            windows = _gemm_windows(source, lead_range, rest, rest_combo, slots, dtype,
                                    internal_last)
            depth = len(slots) * ci
            if internal_last:
                inputs = _merged_rows(windows, 0, rank + 1)
                inputs = inputs.reshape(inputs.shape[0], groups, depth)
            else:
                inputs = _merged_rows(windows, 3, rank + 4)
                inputs = inputs.reshape(groups, depth, inputs.shape[-1])
            for lead_class in lead_classes:
                _lead_class(out, inputs, weights, matrices, phases, lead_class, rest_combo,
                            (j0, j1), lead_range, dtype, channels_last, internal_last,
                            target.threads)
            del windows, inputs  # before the next combination's are made


def _gemm_source(data, dtype, groups: int, channels_last: bool, internal_last: bool):
    """The data as ``(X_1, N, X..., G, Ci)`` (``internal_last``) or ``(G, Ci, X_1, N,
    X...)``, a view of ``data`` in ``dtype`` (cast once, contiguously, if need be: the
    windows copy runs of Ci elements, and NumPy's casting copies are several times slower
    than plain ones on short runs)."""
    if data.dtype != dtype:
        data = data.astype(dtype)
    rank = data.ndim - 2
    source = input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if internal_last:
        return source.transpose((2, 1) + tuple(range(3, rank + 2)) + (0, rank + 2))
    return source.transpose((0, rank + 2, 2, 1) + tuple(range(3, rank + 2)))


def _blocks_per_chunk(weights_shape, phases, lead_classes, rest_combos, dtype, batch: int,
                      out_bytes: int, shift_span: int) -> int:
    """Blocks of the first axis per chunk: a chunk's windows (its blocks plus the shifts'
    span) and one class's products stay under the scratch budget."""
    groups, ci, co = weights_shape[:3]
    pitch = batch * math.prod(p.blocks for p in phases[1:])  # rows per first-axis block
    widest_slots = max(math.prod(len(c.shifts) for c in combo) for combo in rest_combos)
    widest = max(math.prod(c.count for c in combo) for combo in rest_combos) * max(
        c.count for c in lead_classes)
    window_row = pitch * groups * widest_slots * ci * dtype.itemsize
    product_row = pitch * groups * widest * co * dtype.itemsize
    budget = (min(_GEMM_SCRATCH_BYTES, max(out_bytes, _GEMM_MIN_SCRATCH_BYTES))
              - shift_span * window_row)
    return max(1, budget // max(1, window_row + product_row))


def _lead_class(out, inputs, weights, matrices, phases, lead_class, rest_combo, chunk,
                lead_range, dtype, channels_last, internal_last, threads):
    """One class of the first axis with one combination of the others' classes, for the
    first-axis blocks ``chunk``: its products from the row-shifted ``inputs``, written
    into ``out`` (straight from BLAS where a 1-D channels-last result allows)."""
    groups, ci, co = weights.shape[:3]
    rank = len(phases)
    lead = phases[0]
    batch = out.shape[0]
    rest_shape = (batch,) + tuple(p.blocks for p in phases[1:])
    pitch = math.prod(rest_shape)  # rows per block of the first axis
    j0, j1 = chunk
    combo = (lead_class,) + rest_combo
    counts = tuple(c.count for c in combo)
    depth = math.prod(len(c.shifts) for c in rest_combo) * ci
    width = math.prod(counts) * co
    key = (lead_class, rest_combo)
    if key not in matrices:
        all_slots = list(itertools.product(*(range(len(c.shifts)) for c in combo)))
        matrices[key] = frozen(class_matrix(
            taps_first_weights(weights, matrices), combo, all_slots, counts, dtype
        ).reshape(groups, len(lead_class.shifts), depth, width))
    matrix = matrices[key]
    j_rest = j0  # blocks from here on go through a products buffer
    if rank == 1 and internal_last and channels_last and (groups == 1 or lead_class.count == 1):
        j_rest = max(j0, min(j1, lead.whole_blocks))
        _gemms_into_output(out, inputs, matrix, lead_class, lead.stride, (j0, j_rest),
                           (j0 - lead_range[0]) * pitch, batch, co, threads)
    if j_rest == j1:
        return
    shape = ((j1 - j_rest,) + rest_shape + (groups,) + counts + (co,) if internal_last else
             (groups,) + counts + (co, j1 - j_rest) + rest_shape)
    first_rows = [(j_rest + shift - lead_range[0]) * pitch for shift in lead_class.shifts]
    products = _class_products(inputs, matrix, first_rows, (j1 - j_rest) * pitch, shape,
                               internal_last, threads)
    if internal_last:
        order = (rank + 1, 1, 0) + tuple(range(2, rank + 1)) + tuple(
            range(rank + 2, 2 * rank + 3))
    else:
        order = (0, rank + 3, rank + 2) + tuple(range(rank + 4, 2 * rank + 3)) + tuple(
            range(1, rank + 2))
    into = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    scatter_phases(into, products.transpose(order), combo, phases, rank, j_rest)


def _class_products(inputs, matrix, first_rows, rows, shape, internal_last, threads):
    """One class's products, accumulated over its slots of the first axis, in a new
    array of ``shape``.

    ``matrix`` is ``(G, S, depth, width)``; slot ``s`` multiplies ``rows`` rows of
    ``inputs`` (``(rows, G, depth)`` if ``internal_last``, else ``(G, depth, rows)``)
    from row ``first_rows[s]`` on.  The result is ``(rows, G, width)`` or ``(G, width,
    rows)`` in memory.
    """
    groups, _, depth, width = matrix.shape
    products = np.empty(shape, matrix.dtype)
    flat = products.reshape((rows, groups, width) if internal_last else (groups, width, rows))
    flops = 2.0 * rows * depth * width
    parts = 1 if splits_product(flops, threads) else max(1, threads // groups)
    calls = []
    for g, part in itertools.product(range(groups), range(parts)):
        r0, r1 = rows * part // parts, rows * (part + 1) // parts
        unit = []
        for slot, first in enumerate(first_rows):
            if internal_last:
                unit.append((inputs[first + r0:first + r1, g], matrix[g, slot],
                             flat[r0:r1, g], slot > 0))
            else:
                unit.append((matrix[g, slot].T, inputs[g, :, first + r0:first + r1],
                             flat[g, :, r0:r1], slot > 0))
        calls.append(unit)
    run_gemms(calls, flops / parts, threads)
    return products


def _gemms_into_output(out, inputs, matrix, lead_class, stride, j_range, row_offset, batch, co,
                       threads):
    """A class's products for whole blocks ``j_range`` of a 1-D layer, written by BLAS
    straight into the channels-last output (no products buffer, no scatter).

    Output ``j*stride + lead_class.first + i`` of phase ``i`` of the class holds the
    class's ``count * Co`` columns of row ``j`` side by side, so for one sample and
    group the rows are a strided matrix BLAS can write (``ldc = stride * G * Co``).
    ``inputs`` is ``(rows, G, depth)`` with rows ``(h, n)``, ``h`` counted from the
    chunk's first input (``row_offset`` rows before block ``j_range[0]``).
    """
    j0, j1 = j_range
    if j1 <= j0:
        return
    groups = matrix.shape[0]
    width = lead_class.count * co
    item = out.itemsize
    row_stride = stride * out.strides[1]
    calls = []
    for n, g in itertools.product(range(batch), range(groups)):
        start = out[n, j0 * stride + lead_class.first, g * co:]
        into = as_strided(start, (j1 - j0, width), (row_stride, item), writeable=True)
        unit = []
        for slot, shift in enumerate(lead_class.shifts):
            first = row_offset + shift * batch + n
            rows = inputs[first:first + (j1 - j0) * batch:batch, g]
            unit.append((rows, matrix[g, slot], into, slot > 0))
        calls.append(unit)
    run_gemms(calls, 2.0 * (j1 - j0) * matrix.shape[2] * width, threads)
