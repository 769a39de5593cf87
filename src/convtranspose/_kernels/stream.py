"""``stream``: the filter read once, as it is stored, for layers of few input positions.

A layer whose filter is large next to its input (DCGAN's 1024->512 on 4x4 pixels: a
32 MiB filter, 16 positions) is bound by reading the filter.  The other algorithms
read it several times per call or read a reordered copy: the weights memo compares
the caller's filter with the copy it keeps (both read once more), and BLAS products
with 16 columns run far below their large-product rate (OpenBLAS: 22 GFLOP/s on an
Intel Xeon, where a stream of the filter allows several times that).  Here one product
per group, ``columns (P, M) = inputs (P, Ci) @ filter (Ci, M)``, reads each filter row
where the caller keeps it (a block of rows at a time copied into a panel that stays in
L1), in numba register blocks of a few positions by four vectors of columns
(:func:`convtranspose._kernels._numba.block_sources.block_source`), split among threads by
columns; then each tap's columns are added into the output, as :mod:`.col2im` does
(with its compiled scatter).  ``M`` is ``Co * taps`` for a filter stored with the taps
last (ONNX, OpenVINO), or ``Co`` per tap for one stored taps first (oneDNN's ``XIO``);
other layouts are copied first.  Multiplies only the (input, tap) pairs that exist:
exact with non-finite operands.
"""

from __future__ import annotations

import math

import numpy as np

from .._runtime import blas as _blas
from .._runtime.caches import kept
from .._runtime.machine import l1_data_cache_bytes
from .common import element_offset, flat_span, input_glxc, move_axis, output_glyc, zero_output

#: Rows (input positions) per register block: with four vectors of columns, 24
#: accumulators of the 32 AVX-512 registers (AVX2: 16 accumulators, two vectors).
_BLOCK_POSITIONS = 6
#: How far along each filter row, in chunks of columns, a panel row's copy asks for
#: the row's lines (``prefetch``).  A large filter's rows lie pages apart and are read a
#: chunk (256 bytes) at a time each; the hardware's prefetchers alone, or asking one
#: chunk ahead, left the DCGAN-up 1024->512 layer's product at 5-6 GB/s of filter on
#: an AMD EPYC Zen 4, where the copy stalled the multiply-adds; two, four or eight
#: chunks ahead took the layer's prepared call from 4.1 to 2.9-3.0 ms there
#: (``benchmarks/results/stream-zen4.json``).
_PREFETCH_CHUNKS = 4


@kept("compiled kernels", maxsize=None)
def _pieces_kernel(lanes: int, vectors: int, positions: int, tail_positions: int,
                   itemsize: int):
    from ._numba.block_sources import block_source
    from ._numba.codegen import compile_source, compile_template
    from ._numba.vectors import prefetch, vector_load, vector_store

    block = compile_source(block_source(lanes, vectors, positions, accumulate=True), "block")
    tail = (compile_source(block_source(lanes, vectors, tail_positions, accumulate=True),
                           "block") if tail_positions else block)
    chunk = lanes * vectors
    return compile_template("stream", dict(
        np=np, block=block, tail=tail, chunk=chunk, lanes=lanes,
        positions=positions, tail_positions=tail_positions,
        row_block=_panel_rows(chunk * itemsize), vector_load=vector_load,
        vector_store=vector_store, prefetch=prefetch, prefetch_chunks=_PREFETCH_CHUNKS,
        line=64 // itemsize))["pieces"]


def _panel_rows(chunk_bytes: int) -> int:
    """Filter rows the product takes at a time: as many as a panel one chunk wide
    holds in half of L1 (the other half for the prefetched lines and the inputs).  In
    blocks, because chunk by chunk over all of a large filter's rows each chunk read
    256 bytes from each of Ci pages, a TLB miss each (``stream-xeon.json``); the more
    rows a block, the fewer passes over the sums (64 rows and 32 took the same time,
    128 1.15x, on the DCGAN-up 1024->512 layer on an AMD EPYC Zen 4:
    ``stream-zen4.json``)."""
    return max(8, l1_data_cache_bytes() // 2 // chunk_bytes)


def _filter_matrices(weights: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, list, bool]:
    """The filter as ``(Ci, M)`` matrices with contiguous columns, the array whose
    memory they view, and whether they are one per tap (``M = Co``: stored taps first)
    rather than one per group (``M = Co * taps``: stored taps last, or copied so)."""
    groups, ci, co = weights.shape[:3]
    kernel = weights.shape[3:]
    taps = math.prod(kernel)
    if weights.dtype == dtype and weights.flags.c_contiguous:
        return weights, list(weights.reshape(groups, ci, co * taps)), False
    item = weights.itemsize
    if (weights.dtype == dtype and groups == 1 and weights.strides[2] == item
            and weights.strides[1] == co * item
            and all(step >= 0 and step % item == 0 for step in weights.strides)):
        # (K..., Ci, Co) storage
        matrices = [weights[0][(slice(None), slice(None)) + tap] for tap in np.ndindex(*kernel)]
        return weights, matrices, True
    copy = np.ascontiguousarray(weights, dtype)
    return copy, list(copy.reshape(groups, ci, co * taps)), False


def _stream(data, weights, axes, dtype, channels_last, out, *, target):
    """Fill ``out`` with the streamed products (the module docstring)."""
    groups, ci, co = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    taps = math.prod(kernel)
    batch = data.shape[0]
    spatial = tuple(axis.input_size for axis in axes)
    positions = batch * math.prod(spatial)
    rows = np.ascontiguousarray(input_glxc(data, groups, channels_last), dtype).reshape(
        groups, positions, ci)
    stored, matrices, taps_first = _filter_matrices(weights, dtype)
    if taps_first:  # columns (1, P, K..., Co): one product per tap
        sums = _rows_apart(1, positions, taps * co, dtype)
        columns = sums.reshape(1, positions, taps, co)
        _products(rows, stored, sums, [(0, matrix, columns[0, :, k])
                                       for k, matrix in enumerate(matrices)], target)
        columns = columns.reshape((groups, batch) + spatial + kernel + (co,))
    else:  # columns (G, P, Co, K...)
        columns = sums = _rows_apart(groups, positions, co * taps, dtype)
        _products(rows, stored, sums, [(g, matrix, columns[g])
                                       for g, matrix in enumerate(matrices)], target)
        columns = move_axis(columns.reshape((groups, batch) + spatial + (co,) + kernel),
                            2 + len(spatial), -1)
    # columns (G, N, X..., K..., Co), a view.  Every tap's columns are added in one
    # compiled pass (numba's three axes at most, as this algorithm's), tap by tap as a
    # NumPy add per tap would (the same sums): 0.45x that loop's time where the
    # output's channels are a plane apart (``benchmarks/results/stream-xeon.json``,
    # tap_adds).  ``out`` is C-contiguous, as the scatter needs.
    from ._numba.scatter import col2im_scatter

    zero_output(out, target.threads)
    col2im_scatter(columns, out, output_glyc(out, groups, channels_last), axes, target)


def _rows_apart(groups: int, positions: int, width: int, dtype) -> np.ndarray:
    """Zeros ``(groups, positions, width)`` whose rows lie one cache line more than
    ``width`` apart: rows a multiple of 4 KiB long would put every position's sums at
    one column into one set of L1 (and of a 512 KiB L2), and a block of positions
    would evict its own sums (``benchmarks/results/stream-zen3.json``)."""
    pad = 64 // np.dtype(dtype).itemsize
    return np.zeros((groups, positions, width + pad), dtype)[..., :width]


def _products(rows: np.ndarray, stored: np.ndarray, sums: np.ndarray, jobs,
              target) -> None:
    """``columns[...] += rows[g] @ matrix`` for every ``(g, matrix, columns)`` of
    ``jobs``: ``rows`` (G, P, Ci) contiguous, each ``matrix`` (Ci, M) a view of
    ``stored`` and each ``columns`` (P, M) one of ``sums``, both with contiguous
    columns and rows a whole number of elements apart.  numba register blocks for
    float32 and float64 over whole chunks of columns, every job's chunks shared among
    threads in one parallel loop (on numba's threads where they run: a pool's helper
    woken right after a native loop shares a CPU with its still-spinning worker); NumPy
    for the rest."""
    positions, ci = rows.shape[1:]
    matrix = jobs[0][1]
    lanes = max(1, target.vector_bytes // matrix.itemsize)
    vectors = 4 if target.vector_bytes >= 64 else 2
    chunk = lanes * vectors
    numba = target.numba and matrix.dtype.kind == "f" and matrix.itemsize in (4, 8)
    table = []
    for g, matrix, columns in jobs:
        whole = matrix.shape[1] // chunk * chunk if numba and positions else 0
        if whole:
            # A job's columns in one piece per thread (whole chunks): a piece reads its
            # columns of every filter row, and the wider the piece, the longer the runs
            # of each row that the prefetchers stream.  Pieces of 256 columns took
            # 1.25-1.3x the time (``benchmarks/results/stream-xeon.json``, piece_width).
            per_piece = -(-whole // (chunk * target.threads)) * chunk
            item = matrix.itemsize
            job = [g * ci * positions, element_offset(matrix, stored),
                   element_offset(columns, sums),
                   columns.strides[0] // item, matrix.strides[0] // item, ci]
            table += [job + [m0, min(whole, m0 + per_piece)]
                      for m0 in range(0, whole, per_piece)]
        if whole < matrix.shape[1]:
            # On one BLAS thread: OpenBLAS's own workers spin for about 0.1 s after a
            # threaded product, taking a core from whatever runs next
            # (``blas-threads-xeon.json``); measured planning timed every two-thread
            # candidate after this one 1.5-3x slow on a 512->3 head and kept a
            # one-thread one (``prepared-calls-zen4.json``, planning_choices).
            with _blas.one_thread:
                columns[:, whole:] += rows[g] @ matrix[:, whole:]
    if not table:
        return
    from ._numba.launch import parallel_kernel

    block_rows = min(_BLOCK_POSITIONS, positions)
    pieces = _pieces_kernel(lanes, vectors, block_rows, positions % block_rows,
                            matrix.itemsize)
    # The inputs as (Ci, P) per group: the positions of a block broadcast from one
    # line; made once for every job of a group (a filter stored taps first has a job
    # per tap, and transposing the rows for each took a fifth of a vocoder-up 512->256
    # k16 s8 call: ``benchmarks/results/stream-xeon.json``, inputs_once).
    inputs = np.ascontiguousarray(rows.transpose(0, 2, 1)).reshape(-1)
    parallel_kernel(pieces, (inputs, flat_span(stored), flat_span(sums),
                             np.array(table, np.int64), positions), len(table), target.threads)
