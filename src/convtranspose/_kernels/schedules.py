"""Pure integer schedules of the numba kernels: block shapes, bands, segments, which kernel
takes a layer.

The kernels (:mod:`._numba`) and the cost model (:mod:`convtranspose._choose.choice`) both
read them; nothing here imports numba, so the cost model can price the numba kernels
without compiling anything.  Machine facts (vector width, F16C, bfloat16 pairs) come as
arguments or a :class:`~convtranspose._runtime.target.Target`.  The measurements behind
the constants are named beside each one (``benchmarks/results/``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .._plan.geometry import axis_phases, three_axes
from .._plan.rules import AxisPlan
from .._runtime.caches import kept
from .._runtime.target import Target

#: ``col2im`` adds its columns with numba
#: (:func:`convtranspose._kernels._numba.scatter.col2im_scatter`) below this many output
#: channels per group, where NumPy's strided adds restart their loop every few elements
#: (about twice as fast on DCGAN 128->3 NXC); runs this long NumPy adds vectorised
#: (``benchmarks/results/blas-algorithms.json``).
SCATTER_MAX_CHANNELS = 16


def numba_scatters(co: int, rank: int, numba: bool) -> bool:
    """Whether ``col2im`` (either layout) adds its columns with numba (usable: ``numba``)."""
    return numba and co < SCATTER_MAX_CHANNELS and rank <= 3


#: Layers of the numba direct kernels with fewer multiply-adds than this run on the
#: calling thread: waking a helper thread on a loaded machine costs about as much as
#: this much work, so a second thread makes such layers slower, not faster
#: (``benchmarks/results/thread-steering.json``, ``plane-kernel.json``).
DIRECT_PARALLEL_MACS = 1 << 22


#: Output channels per register block of the numba plane kernel (fewer when the layer
#: has fewer; zero weights pad a short last block); see :func:`planes_block_shape`
#: (``benchmarks/results/plane-kernel.json``).
PLANE_CO_BLOCK = 3


#: Channels-last layers with fewer channels than this (per side, G * max(Ci, Co)) are
#: computed by the numba plane kernel: vectors along so few channels are too short
#: (``benchmarks/results/plane-kernel.json``).
DIRECT_CHANNELS_LAST_MIN_WIDTH = 8


def direct_per_position(groups: int, ci: int, co: int, channels_last: bool) -> bool:
    """Whether numba ``direct`` takes its per-position kernel (else the plane kernel).

    Channels-last layers with many groups of few channels, which the plane kernel
    would read and write with large strides; at most 4 products per group, or the
    per-position kernel's channel loops have run-time bounds and do not vectorise
    (FCN-2x 21->21 channels-last runs about 3x slower there than in the plane kernel;
    ``benchmarks/results/plane-kernel.json``).
    """
    return (channels_last and groups * max(ci, co) >= DIRECT_CHANNELS_LAST_MIN_WIDTH
            and ci * co <= 4)


def direct_rounds(weights_shape: tuple[int, ...], axes: Sequence[AxisPlan],
                  channels_last: bool) -> bool:
    """Whether numba ``direct`` rounds half results as it stores them: its plane kernel
    does, the per-position kernel (and the NumPy fallback beyond 3-D) does not."""
    return len(axes) <= 3 and not direct_per_position(*weights_shape[:3], channels_last)


def direct_worth_threads(out_size: int, ci: int, axes: Sequence[AxisPlan]) -> bool:
    """Whether a numba direct layer has enough multiply-adds for helper threads."""
    taps = math.prod(axis.kernel_size for axis in axes)
    return (out_size * max(1, ci) * taps
            >= DIRECT_PARALLEL_MACS * math.prod(axis.stride for axis in axes))


#: The plane kernel's blocks keep at least this many accumulators (channels times
#: vectors) when :func:`plane_schedule` shortens them: Zen 3's two FMA pipes with a
#: latency of 4 cycles need 8 independent sums to stay busy (Zen 4's one 512-bit FMA
#: per cycle needs 4) (``benchmarks/results/plane-kernel.json``).
PLANE_MIN_ACCUMULATORS = 8


@kept("kernel schedules", maxsize=256)
def plane_schedule(blocks: int, plane: int, tail: int, widest_band: int, min_bands: int,
                   lanes: int, most_vectors: int, co_block: int = PLANE_CO_BLOCK,
                   row_segments: int = 0) -> tuple[int, int, int, int]:
    """``(band, vectors, positions, segments)``: how the numba plane kernel covers one
    phase's runs.

    A plane's ``blocks`` output rows (of the first axis) are cut into bands of ``band``
    rows, at most ``widest_band`` (cache) and at least ``min_bands`` bands (threads); a
    band of ``b`` rows is one run of ``(b - 1) * plane + tail`` window positions, which
    the kernel covers with whole register blocks of ``lanes * vectors`` positions.
    The choice computes the fewest ``positions`` per phase and plane (ties: longer
    blocks, then fewer bands), among equal bands and blocks of half to all of
    ``most_vectors`` that keep :data:`PLANE_MIN_ACCUMULATORS` for ``co_block`` output
    channels.  For example DCGAN 256->128 (16 lanes, window rows of 18): blocks of 128
    positions on bands of 13 and 3 rows (runs of 232 and 52 positions) would compute
    384 positions per phase for its 256 outputs; two bands of 8 rows in blocks of 80
    compute 320, and run about 1.2x faster (``benchmarks/results/plane-kernel.json``).

    ``row_segments`` (2-D layers, whose window rows are ``plane`` apart): the kernel
    may instead take blocks of whole output rows, ``row_segments`` vectors each (the
    outputs of a row, rounded up to whole vectors), so that no border column is
    computed; a band of ``b`` rows then costs ``b`` rows rounded up to whole blocks.
    ``segments`` is 0 for flat runs, else ``row_segments`` (ties: flat runs).
    DCGAN 256->128 (16 outputs per row, 16 lanes): 256 positions per phase instead
    of 320.
    """
    fewest = max(min_bands, -(-blocks // max(1, widest_band)))
    shortest = min(most_vectors, max(-(-most_vectors // 2),
                                     -(-PLANE_MIN_ACCUMULATORS // max(1, co_block))))
    best = None
    for bands in range(min(fewest, blocks), min(fewest + 2, blocks) + 1):
        band = -(-blocks // bands)
        sizes = [band] * (blocks // band) + ([blocks % band] if blocks % band else [])
        for vectors in range(shortest, most_vectors + 1):
            length = lanes * vectors
            positions = sum(-(-((size - 1) * plane + tail) // length) * length
                            for size in sizes)
            key = (positions, 0, -vectors, len(sizes))
            if best is None or key < best[0]:
                best = (key, band, vectors, positions, 0)
            if row_segments and vectors % row_segments == 0:
                rows = vectors // row_segments
                positions = sum(-(-size // rows) * length for size in sizes)
                key = (positions, 1, -vectors, len(sizes))
                if key < best[0]:
                    best = (key, band, vectors, positions, row_segments)
    return best[1:]


#: The plane kernel takes half vectors (8 float32 lanes on AVX-512, which keeps its 32
#: registers) when whole ones would compute at least this many times the positions:
#: half vectors with as many accumulators run the same positions about 1.2x slower,
#: and pay where they save more (DCGAN 512->256, whose rows of 8 outputs take 80
#: positions per phase in whole vectors and 64 in halves)
#: (``benchmarks/results/plane-kernel.json``).
HALF_VECTOR_WASTE = 1.2


def plane_lanes(schedule, lanes: int, halves: bool) -> tuple[int, tuple[int, int, int, int]]:
    """``(lanes, schedule(lanes))`` for the plane kernel, or half the lanes where that pays.

    ``schedule(lanes)`` is the :func:`plane_schedule` of the layer's plane for that many
    lanes; ``halves``: the kernel may take half vectors (32 vector registers, and no
    bfloat16 pairs, whose instruction takes whole ones).  Half vectors are taken when
    whole ones compute at least :data:`HALF_VECTOR_WASTE` times their positions.
    """
    whole = schedule(lanes)
    if halves and lanes % 2 == 0:
        half = schedule(lanes // 2)
        if half[2] and whole[2] >= HALF_VECTOR_WASTE * half[2]:
            return lanes // 2, half
    return lanes, whole


#: A long 1-D line is cut into segments whose window (every input channel's inputs)
#: and accumulators hold about this many elements, like the bands of a 2-D plane
#: (``benchmarks/results/plane-kernel.json``).
LINE_SEGMENT_ELEMENTS = 1 << 16


def line_segment_inputs(ci: int, stride: int) -> int:
    """Inputs per segment of a long 1-D line in the numba plane kernel
    (:class:`convtranspose._kernels._numba.line_segments.LineSegments`)."""
    return max(64, LINE_SEGMENT_ELEMENTS // (ci + PLANE_CO_BLOCK * stride))


def line_segmented(axis: AxisPlan, ci: int) -> bool:
    """Whether the plane kernel cuts this 1-D layer's line into segments (at least
    three): one line's window would hold every input channel's whole line, out of
    cache and one piece of work (HiFi-GAN 256->128 L65536: 64 MB, about 10x slower;
    ``benchmarks/results/plane-kernel.json``)."""
    return axis.input_size > 2 * line_segment_inputs(ci, axis.stride)


#: ``direct-blocked`` cuts the lines of a layer with fewer lines than threads into
#: segments of at least this many outputs per phase of the last axis
#: (``benchmarks/results/direct-blocked-zen4.json``).
BLOCKED_SEGMENT_OUTPUTS = 256


def blocked_segments(lines: int, last_axis: AxisPlan, threads: int) -> int:
    """Into how many runs of the last axis ``direct-blocked`` cuts each of its ``lines``.

    One, unless there are fewer lines than ``threads`` (a 1-D layer of one sample,
    such as HiFi-GAN's, is one line and would run on one core): then enough segments
    for about eight pieces of work per thread, fewer where a segment would hold less
    than :data:`BLOCKED_SEGMENT_OUTPUTS` outputs per phase.
    """
    if lines >= threads:
        return 1
    longest = last_axis.output_size // (BLOCKED_SEGMENT_OUTPUTS * last_axis.stride)
    return max(1, min(-(-8 * threads // lines), longest))


@kept("kernel schedules", maxsize=64)
def planes_block_shape(itemsize: int, co: int, vector_bytes: int) -> tuple[int, int, int]:
    """(lanes, output channels per block, most vectors per channel) of the plane kernel.

    :func:`convtranspose._kernels.schedules.plane_schedule` takes blocks of half to all of those
    vectors (keeping at least eight accumulators), whichever covers the layer's runs
    with the fewest positions.

    About three quarters of the vector registers hold accumulators (24 of AVX-512's
    32, 12 of AVX2's 16); the rest the channels' broadcast factors and one window
    vector.  With AVX2, 3 channels x 4 vectors ran at about twice the rate of a pass
    per channel, ahead of 2 x 6 and 1 x 8, and 4 x 3 spills
    (``benchmarks/results/plane-kernel.json``).  Layers of one or two output channels
    take blocks of that many (one channel: 8 vectors); a short last block is padded
    with zero factors.
    """
    lanes = max(1, vector_bytes // itemsize)
    accumulators = 24 if vector_bytes == 64 else 12
    co_block = min(PLANE_CO_BLOCK, co)
    return lanes, co_block, accumulators // co_block if co_block > 1 else 8


#: ``mode`` of the plane, row and ``direct-blocked`` kernels: float32 (or float64) sums
#: stored as they are, or rounded to float16 or bfloat16 bits.
KEEP, FLOAT16, BFLOAT16 = 0, 1, 2


def frozen_all(*arrays):
    for array in arrays:
        array.flags.writeable = False
    return arrays


def half_load(data_dtype: np.dtype, f16c: bool) -> int:
    """The plane kernel's ``load_mode`` for data of this dtype: half data is read from
    its bits (float16 only where the CPU converts it, ``f16c``), anything else as it is."""
    if data_dtype == np.float16 and f16c:
        return FLOAT16
    return BFLOAT16 if data_dtype.name == "bfloat16" else KEEP


#: The row kernel's window (the input rows of a band of output rows, every input
#: channel's, padded) holds at most this many bytes: it stays in the core's L2, and
#: the threads' windows under the output's size
#: (``benchmarks/results/row-kernel-zen4.json``).
ROWS_WINDOW_BYTES = 1 << 18


#: The row kernel is taken for layers with channels when the vectors along its rows
#: compute at most this many times the row's outputs (DCGAN 512->256's rows of 8
#: outputs per phase in 16 lanes compute 2x, and run about 1.5x slower there than in
#: the plane kernel; ``benchmarks/results/row-kernel-zen4.json``).
ROWS_MAX_WASTE = 1.25


#: Last-axis strides at which layers with channels take the row kernel (depthwise ones:
#: 1 and 2): on random layers (``benchmarks/row_kernel.py``) it takes about 0.8x the
#: plane kernel's time at stride 2 and about the same time, on average, at stride 1
#: (``benchmarks/results/row-kernel-zen4.json``).
ROWS_CHANNEL_STRIDES = (2,)


@kept("kernel schedules", maxsize=256)
def axis_tap_lists(axis: AxisPlan) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per output phase of ``axis``, its taps as ``(input shift, kernel index)`` pairs."""
    return tuple(tuple(zip(c.shifts, c.taps[i])) for c in axis_phases(axis).classes
                 for i in range(c.count))


def rows_lanes(dtype, vector_bytes: int) -> int:
    return vector_bytes // np.dtype(dtype).itemsize


def phase_vectors(last: AxisPlan, lanes: int) -> int:
    """Vectors of ``lanes`` outputs per phase along a row of the last axis."""
    return -(-(-(-last.output_size // last.stride)) // lanes)


@kept("kernel schedules", maxsize=256)
def merged_taps(last: AxisPlan) -> tuple[tuple[int, int, int], ...] | None:
    """The taps of ``last``'s two phases in pairs, ``(delta, k_even, k_odd)`` each,
    where the row kernel can sum both phases in the same vectors; None elsewhere.

    Output ``2j + p`` of phase ``p`` reads input ``j + shift`` for each of its taps.
    Paired in order of their shifts, an even phase's tap of shift ``a`` and an odd one's
    of ``b`` in ``{a, a + 1}`` both read input ``(y + delta) // 2`` from output ``y``,
    with ``delta = a + b``: from a window holding every input twice (``E[n] = x[n // 2]``),
    one load at ``y + delta`` gives the pair's inputs for consecutive outputs ``y``, and
    alternating weights (:func:`convtranspose._kernels._numba.vectors.vector_splat_pair`) their
    products.  So stride 2, and as many taps in either phase (kernels of even size,
    dilation 1)."""
    per_phase = axis_tap_lists(last)
    if last.stride != 2 or len(per_phase) != 2 or not per_phase[0] or (
            len(per_phase[0]) != len(per_phase[1])):
        return None
    pairs = []
    for (even_shift, even_k), (odd_shift, odd_k) in zip(sorted(per_phase[0]),
                                                        sorted(per_phase[1])):
        if odd_shift - even_shift not in (0, 1):
            return None
        pairs.append((even_shift + odd_shift, even_k, odd_k))
    return tuple(pairs)


def rows_merged(last: AxisPlan, lanes: int, co: int, data: int, vector_bytes: int) -> bool:
    """Whether the row kernel sums ``last``'s two phases in the same vectors
    (:func:`merged_taps`): with AVX-512's registers, more than one output channel per
    group, data not multiplied in bfloat16 pairs, and rows that then take fewer lanes
    (:func:`_merged_lanes`).  Merged rows pay where they save lanes (grouped 28^2 ->
    56^2: 56 outputs fill three vectors and a half, where the phases apart take 2 x 2
    vectors for 2 x 28), and lose a few percent where the lanes are as many either
    way (a separate broadcast per pair of weights, a window twice as long) and on
    depthwise layers, bound by their loads (``benchmarks/results/row-kernel-zen4.json``)."""
    return (vector_bytes == 64 and co > 1 and data != BFLOAT16
            and merged_taps(last) is not None
            and _merged_lanes(last, lanes) < 2 * phase_vectors(last, lanes) * lanes)


def merged_vectors(last: AxisPlan, lanes: int) -> int:
    """Vectors of ``lanes`` consecutive outputs along a row of the last axis."""
    return -(-last.output_size // lanes)


def _merged_lanes(last: AxisPlan, lanes: int) -> int:
    """Lanes a row of both phases takes (:func:`merged_taps`): whole vectors, the last
    one half a vector (half the cost with AVX-512 on Zen 4) where that holds its outputs
    (``benchmarks/results/row-kernel-zen4.json``)."""
    whole, rest = divmod(last.output_size, lanes)
    return whole * lanes + (0 if not rest else lanes // 2 if rest <= lanes // 2 else lanes)


@kept("kernel schedules", maxsize=256)
def rows_window_width(last: AxisPlan, lanes: int, merged: bool = False) -> tuple[int, int]:
    """(zeros before the input, row width) of the row kernel's window rows: every tap
    of every phase reads inside them for whole vectors of each phase's outputs (of
    the row's outputs, from inputs held twice, if ``merged``: :func:`merged_taps`)."""
    if merged:
        deltas = [delta for delta, _, _ in merged_taps(last)]
        left = max(0, -min(deltas))
        return left, left + max(2 * last.input_size,
                                max(deltas) + merged_vectors(last, lanes) * lanes)
    shifts = [shift for taps in axis_tap_lists(last) for shift, _ in taps] or [0]
    left = max(0, -min(shifts))
    return left, left + max(last.input_size, max(shifts) + phase_vectors(last, lanes) * lanes)


def rows_apply(weights_shape, axes3: tuple[AxisPlan, ...], channels_last: bool, data_dtype,
               dtype, out_dtype, target: Target) -> bool:
    """Whether numba ``direct`` takes its row kernel
    (:func:`convtranspose._kernels._numba.rows._rows_source`) for this layer.

    Channels first; data, sums and result all float32 or all float64, or float32 sums
    of float16 or bfloat16 data or into a float16 or bfloat16 result (:func:`_rows_take`;
    bfloat16 data the plane kernel's way, in pairs); a last axis of stride 1 or 2 with at least
    a vector of outputs; one output row's inputs within :data:`ROWS_WINDOW_BYTES`; and,
    but for depthwise layers, a last-axis stride in :data:`ROWS_CHANNEL_STRIDES` and rows
    that waste at most :data:`ROWS_MAX_WASTE`.  Where it is taken it runs depthwise
    layers in about half the plane kernel's time and most others in 0.7-0.95x
    (``benchmarks/results/row-kernel-zen4.json``).
    """
    dtype = np.dtype(dtype)
    if (channels_last or dtype not in (np.float32, np.float64) or axes3[2].stride > 2
            or not _rows_take(data_dtype, dtype, True, target)
            or not _rows_take(out_dtype, dtype, False, target)):
        return False
    lanes = rows_lanes(dtype, target.vector_bytes)
    last = axes3[2]
    if last.output_size < lanes:
        return False
    merged = rows_merged(last, lanes, weights_shape[2],
                         half_load(np.dtype(data_dtype), target.f16c), target.vector_bytes)
    row_bytes = weights_shape[1] * rows_window_width(last, lanes, merged)[1] * dtype.itemsize
    computed = last.stride * phase_vectors(last, lanes) * lanes  # outputs per row
    fits = row_bands(axes3, ROWS_WINDOW_BYTES // row_bytes) is not None
    return fits and (tuple(weights_shape[1:3]) == (1, 1) or (
        last.stride in ROWS_CHANNEL_STRIDES and computed <= ROWS_MAX_WASTE * last.output_size))


def _rows_take(array_dtype, dtype: np.dtype, data: bool, target: Target) -> bool:
    """Whether the row kernel reads (``data``) or writes arrays of ``array_dtype`` with
    sums of ``dtype``: its own, or float16 where the CPU converts it in vectors (F16C)
    with float32 sums; bfloat16 results too, and bfloat16 data where the CPU multiplies
    its pairs (AVX512_BF16)."""
    array_dtype = np.dtype(array_dtype)
    if array_dtype == dtype:
        return True
    if dtype != np.float32:
        return False
    if array_dtype == np.float16:
        return target.f16c
    if array_dtype.name != "bfloat16":
        return False
    return not data or (rows_lanes(dtype, target.vector_bytes) == 16 and target.bfloat16_pairs)


def rows_co_block(co: int) -> int:
    """Output channels per pass of the row kernel: 4 (3 where that pads none and 4
    would), all of them when fewer."""
    return min(co, 3 if co % 4 and co % 3 == 0 else 4)


def rows_block(co: int, last: AxisPlan, lanes: int, merged: bool,
               vector_bytes: int) -> tuple[int, int]:
    """``(co_block, vectors)`` of the row kernel: output channels per pass and vectors
    of outputs per phase of ``last`` per pass (of the row's outputs, if ``merged``:
    :func:`merged_taps`, 24 accumulators).

    The accumulators (``co_block`` x phases with taps x ``vectors``) take most of the
    registers: up to 24 of AVX-512's 32 (:func:`rows_co_block` channels).  With AVX2's
    16, where both phases have taps, there are at least 4 output channels and a phase
    has at least two vectors of outputs: 2 channels x 2 vectors per phase, 8
    accumulators, and per tap and input channel 2 vector loads and 2 broadcasts for 4
    multiply-adds, where 4 channels x 1 vector needs 5; otherwise up to 12
    accumulators.  Two phases of 3 x 2 or 2 x 3 (twelve accumulators) ran slower than
    either: LLVM spills them (``benchmarks/results/row-kernel-zen3.json``).
    """
    if merged:
        co_block = rows_co_block(co)
        return co_block, max(1, min(merged_vectors(last, lanes), 24 // co_block))
    live = sum(1 for taps in axis_tap_lists(last) if taps) or 1  # phases with sums
    total = phase_vectors(last, lanes)
    if vector_bytes < 64 and live == 2 and co >= 4 and total >= 2:
        return 2, 2
    budget = 24 if vector_bytes == 64 else 12
    co_block = rows_co_block(co)
    return co_block, max(1, min(total, budget // (live * co_block)))


@kept("kernel schedules", maxsize=256)
def output_row_taps(axes3: tuple[AxisPlan, ...]):
    """Per output row ``q = y1 * Y2 + y2``: how many input rows it reads, which (``x1
    * X2 + x2``) and the index ``k1 * K2 + k2`` of each one's tap; read-only."""
    first, second, _ = axes3
    taps1, taps2 = axis_tap_lists(first), axis_tap_lists(second)
    rows_out = first.output_size * second.output_size
    widest = max(1, max(map(len, taps1), default=0) * max(map(len, taps2), default=0))
    count = np.zeros(rows_out, np.int64)
    row_in = np.zeros((rows_out, widest), np.int64)
    row_k = np.zeros((rows_out, widest), np.int64)
    for y1, y2 in itertools.product(range(first.output_size), range(second.output_size)):
        q = y1 * second.output_size + y2
        phase1, phase2 = y1 % first.stride, y2 % second.stride
        for shift1, k1 in taps1[phase1] if phase1 < len(taps1) else ():
            x1 = y1 // first.stride + shift1
            for shift2, k2 in taps2[phase2] if phase2 < len(taps2) else ():
                x2 = y2 // second.stride + shift2
                if 0 <= x1 < first.input_size and 0 <= x2 < second.input_size:
                    row_in[q, count[q]] = x1 * second.input_size + x2
                    row_k[q, count[q]] = k1 * second.kernel_size + k2
                    count[q] += 1
    return frozen_all(count, row_in, row_k)


@kept("kernel schedules", maxsize=256)
def row_bands(axes3: tuple[AxisPlan, ...], most_rows: int):
    """``(length, first, stop, rows)``: output rows in bands of ``length`` whose input
    rows ``[first[b], stop[b])`` (per channel) number at most ``most_rows``, the longest
    such bands (halving from all rows), and the most input rows a band reads (at least
    1: a window's rows); None when a single output row reads more."""
    count, row_in, _ = output_row_taps(axes3)
    rows_out = count.size
    used = np.arange(row_in.shape[1]) < count[:, None]
    low = np.where(used, row_in, np.iinfo(np.int64).max).min(axis=1)
    high = np.where(used, row_in + 1, 0).max(axis=1)
    length = rows_out
    while True:
        starts = np.arange(0, rows_out, length)
        first = np.minimum.reduceat(low, starts)
        stop = np.maximum.reduceat(high, starts)
        empty = stop == 0  # bands reading no input
        first[empty], stop[empty] = 0, 0
        rows = int((stop - first).max())
        if rows <= most_rows:
            return length, *frozen_all(first, stop), max(1, rows)
        if length == 1:
            return None
        length = -(-length // 2)


def plane_strided(groups: int, ci: int, co: int, channels_last: bool) -> bool:
    """Whether the plane kernel reads and writes this layer with the channel stride:
    channels-last layers of more than one channel (with one, the memory layout is
    that of channels first)."""
    return channels_last and (groups * ci > 1 or groups * co > 1)


def blocked_shape(itemsize: int, co: int, last_axis: AxisPlan,
                  vector_bytes: int) -> tuple[int, int, int, int]:
    """(lanes, vectors per pixel, vectors per block, pixels per block) of ``direct-blocked``.

    With 32 vector registers (AVX-512), a block holds all of a pixel's vectors (up to
    four) for ``min(8, 16 // vectors)`` pixels (one more or fewer are candidates where
    that is 8): about 16 accumulators from two vectors per pixel on, enough independent
    FMAs to hide their latency, with room for the weight rows (fewer ran slower, more
    made LLVM stop unrolling the channel loop).  Wider pixels are taken in chunks of 4 vectors (4-5
    pixels) or 2 (6-8 pixels): a block of one pixel's 16 vectors runs about half as
    fast, and chunks of 4 vectors by 3 pixels (12 accumulators, 4 weight vectors
    loaded per 12 multiply-adds) about 1.2x slower than 4 x 5 even on lines of 16
    outputs per phase, which they cover with less waste
    (``benchmarks/results/direct-blocked-zen4.json``).  With 16 (AVX2), accumulators,
    the block's weight vectors and the broadcast input must fit in 16 registers, or
    LLVM spills them: a block holds a chunk of 2 vectors (5-6 pixels), of 3 (4
    pixels) when a pixel has an odd multiple of 3 vectors, or a pixel's one vector
    (5-6 pixels), the pixel's vectors padded to a multiple of the chunk.  2 x 6 and
    3 x 4 run at about twice the rate of 4 x 3 (which spills) and of 1 x 12 (one
    weight vector per twelve broadcasts), and 8 x 1 halves its rate once its weights
    leave L1 (``benchmarks/results/direct-blocked-zen3.json``).
    Within the candidates, the block that wastes least on the lines of
    ``last_axis``: each phase's run of outputs whose taps all read inside is covered
    by whole blocks (the last overlapping its predecessor), its other outputs cost
    about two each, and a pixel's vectors are padded to whole chunks; between equal
    wastes, the most accumulators, then the widest chunk (fewer loads per
    multiply-add).
    """
    lanes = max(1, vector_bytes // itemsize)
    vectors = -(-co // lanes)
    if vector_bytes == 64 and vectors <= 4:
        base = max(1, min(8, 16 // vectors))
        candidates = [(vectors, p) for p in range(base - base // 8, base + base // 8 + 1)]
    elif vector_bytes == 64:
        candidates = [(4, 4), (4, 5), (2, 6), (2, 7), (2, 8)]
    elif vectors == 1:
        candidates = [(1, 5), (1, 6)]
    elif vectors % 2 and vectors % 3 == 0:
        candidates = [(3, 4)]
    else:
        candidates = [(2, 5), (2, 6)]
    runs = []
    for c in axis_phases(last_axis).classes:
        shifts = c.shifts or (0,)
        for phase in range(c.first, c.first + c.count):
            count = -(-(last_axis.output_size - phase) // last_axis.stride)
            inside = min(count, last_axis.input_size - max(shifts)) - max(0, -min(shifts))
            runs.append((count, max(0, inside)))

    def waste(pixels):
        total = 0
        for count, inside in runs:
            covered = -(-inside // pixels) * pixels if inside >= pixels else 0
            total += covered + 2 * (count - (inside if inside >= pixels else 0))
        return total

    def padded(chunk):
        return -(-vectors // chunk) * chunk

    chunk, pixels = min(candidates,
                        key=lambda c: (waste(c[1]) * padded(c[0]), -c[0] * c[1], -c[0]))
    return lanes, padded(chunk), chunk, pixels


def rows_take_layer(axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                     channels_last: bool, target: Target) -> bool:
    """Whether numba ``direct`` gives this float32 layer to its row kernel
    (:func:`rows_apply`; the cost model prices half-precision data alike)."""
    if len(axes) > 3:
        return False
    f32 = "float32"
    return rows_apply(weights_shape, three_axes(axes), channels_last, f32, f32, f32, target)
