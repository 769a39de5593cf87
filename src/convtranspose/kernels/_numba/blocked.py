"""``direct-blocked``'s numba kernel: output channels held in vector registers.

Per output line (all of the last axis for one group) and phase of the last axis,
blocks of 4-9 outputs whose taps all read inside the input keep their output channels
(with AVX2's 16 registers, a chunk of 2-3 vectors of them) in vector registers while
every tap and input channel adds one broadcast input times one weight row; the outputs
at the line ends go in blocks across consecutive lines of one phase, with their own
taps.  Any layout: channels-last lines are stored directly, channels-first ones through
a transposed tile.  float16 and bfloat16 results are rounded from the tile as each line
is stored.  The block sources are generated per shape (:func:`_block_source`).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from ..._geometry import _axis_phases, _three_axes
from ..._plan import AxisPlan
from ..._runtime.threads import parallel_for
from ..schedules import _FLOAT16, _KEEP, _frozen, blocked_segments, blocked_shape
from .casts import bfloat16_bits, float16_bits
from .channels_last import _row_taps
from .direct import _threads
from .modes import _store_mode
from .transpose import _tile_transposer, channels_last_copy

#: ``direct-blocked`` reads channels-first data whose channel planes are at least this
#: large through a channels-last copy (:func:`channels_last_copy`): a block reads every
#: input channel of a few pixels, and so many distant planes miss the TLB and defeat
#: the prefetchers; planes of a few KB are read faster in place than copied
#: (``benchmarks/results/direct-blocked-zen3.json``).
_FAR_CHANNELS_BYTES = 1 << 14


def _block_source(lanes: int, vectors: int, pixels: int) -> str:
    """Source of the register-blocked kernel for ``pixels`` outputs of ``vectors * lanes`` channels.

    Every accumulator is its own vector variable (``pixels * vectors`` of them, all
    in registers); per tap and input channel, the channel's weight row is loaded
    once and multiplied into every pixel's accumulators with that pixel's input
    value broadcast.  The channels are those from ``column`` of weight rows
    ``row_width`` long (a slice of wider rows when those need too many registers).
    """
    accumulators = [[f"acc_{p}_{v}" for v in range(vectors)] for p in range(pixels)]
    lines = ["def block(source, weights, dest, dest_at, dest_step, reads, taps, count, read_at,",
             "          pixel_step, channel_step, channels, column, row_width):"]
    lines += [f"    {name} = vector_zero(weights, {lanes})" for row in accumulators for name in row]
    lines += ["    for m in range(count):",
              "        read = reads[m] + read_at",
              "        tap = taps[m] + column",
              "        for _ in range(channels):"]
    lines += [f"            w_{v} = vector_load(weights, tap + {v * lanes}, {lanes})"
              for v in range(vectors)]
    for p, row in enumerate(accumulators):
        lines.append(f"            x = vector_splat_at(source, read + {p} * pixel_step, {lanes})")
        lines += [f"            {name} = vector_fma(x, w_{v}, {name})"
                  for v, name in enumerate(row)]
    lines += ["            tap += row_width",
              "            read += channel_step"]
    for p, row in enumerate(accumulators):
        lines += [f"    vector_store(dest, dest_at + {p} * dest_step + {v * lanes}, {name})"
                  for v, name in enumerate(row)]
    return "\n".join(lines) + "\n"


def _single_source(lanes: int, vectors: int, splits: int = 4) -> str:
    """Source of the kernel for one output (with its own taps) of ``vectors * lanes`` channels.

    For the outputs at the ends of a line, whose taps differ from their neighbours':
    ``splits`` sets of accumulators take the input channels in turn (independent
    FMA chains, so their latency overlaps) and are summed at the end.
    """
    sets = [[f"acc_{k}_{v}" for v in range(vectors)] for k in range(splits)]
    lines = ["def single(source, weights, dest, dest_at, reads, taps, count, read_at,",
             "           channel_step, channels):"]
    lines += [f"    {name} = vector_zero(weights, {lanes})" for row in sets for name in row]
    lines += ["    for m in range(count):",
              "        read = reads[m] + read_at",
              "        tap = taps[m]",
              f"        for _ in range(channels // {splits}):"]
    for k, row in enumerate(sets):
        lines.append(f"            x = vector_splat_at(source, read + {k} * channel_step, {lanes})")
        lines += [f"            {name} = vector_fma(x, vector_load(weights, tap + "
                  f"{k * vectors * lanes + v * lanes}, {lanes}), {name})"
                  for v, name in enumerate(row)]
    lines += [f"            tap += {splits * vectors * lanes}",
              f"            read += {splits} * channel_step",
              f"        for _ in range(channels % {splits}):",
              f"            x = vector_splat_at(source, read, {lanes})"]
    lines += [f"            {name} = vector_fma(x, vector_load(weights, tap + {v * lanes}, "
              f"{lanes}), {name})" for v, name in enumerate(sets[0])]
    lines += [f"            tap += {vectors * lanes}",
              "            read += channel_step"]
    for v in range(vectors):
        total = sets[0][v]
        for row in sets[1:]:
            total = f"vector_add({total}, {row[v]})"
        lines.append(f"    vector_store(dest, dest_at + {v * lanes}, {total})")
    return "\n".join(lines) + "\n"


@numba.njit(nogil=True, cache=False)
def _rounded_line(bits, tile, bias, mode, line, out_3, out_c, co, width, y_first, y_stop,
                  channel0):  # pragma: no cover - compiled
    """Round a line buffer's outputs ``[y_first, y_stop)`` into ``bits`` (uint16), plus ``bias``.

    The bias is added in float32 before the one rounding, as the float32 path adds
    it to its float32 result; without one (``bias`` empty) nothing is added, not
    even a zero (``-0.0 + 0.0`` is ``+0.0``).  Compiled for float64 lines too (the
    kernel's signature), where it never runs.
    """
    for o in range(co):
        at = line + o * out_c
        if bias.size:
            shift = np.float32(bias[channel0 + o])
            if mode == _FLOAT16:
                for y3 in range(y_first, y_stop):
                    bits[at + y3 * out_3] = float16_bits(np.float32(tile[y3 * width + o]) + shift)
            else:
                for y3 in range(y_first, y_stop):
                    bits[at + y3 * out_3] = bfloat16_bits(np.float32(tile[y3 * width + o]) + shift)
        elif mode == _FLOAT16:
            for y3 in range(y_first, y_stop):
                bits[at + y3 * out_3] = float16_bits(np.float32(tile[y3 * width + o]))
        else:
            for y3 in range(y_first, y_stop):
                bits[at + y3 * out_3] = bfloat16_bits(np.float32(tile[y3 * width + o]))


@numba.njit(nogil=True, cache=False, inline="always")
def _phase_taps(row_reads, row_taps, rows, p3, j_first, j_stop, size3, in_3, tap_k, tap_shift,
                tap_count, tap_size, reads, taps, shifts):  # pragma: no cover - compiled
    """The taps of phase ``p3`` of the last axis for a line whose taps of the first two
    axes are ``row_reads`` / ``row_taps``: every tap's read, weight row and shift in
    ``reads``, ``taps`` and ``shifts``.  Returns their count and ``[first, last)``, the
    outputs of ``[j_first, j_stop)`` whose taps all read inside the input."""
    count = 0
    first, last = j_first, j_stop
    for m3 in range(tap_count[2, p3]):
        shift = tap_shift[2, p3, m3]
        first, last = max(first, -shift), min(last, size3 - shift)
        for r in range(rows):
            reads[count] = row_reads[r] + shift * in_3
            taps[count] = (row_taps[r] + tap_k[2, p3, m3]) * tap_size
            shifts[count] = shift
            count += 1
    first = min(first, j_stop)
    return count, first, max(first, last)


#: ``direct-blocked`` keeps a group's lines (for their line ends, taken together) in a
#: tile of at most this many sums when it cannot write them straight into the output
#: (channels first, or rounded): 128 KB of float32, in L2 beside the weights
#: (``benchmarks/results/direct-blocked-zen4.json``).
_GROUP_TILE_ELEMENTS = 1 << 15


#: The most lines a group of ``direct-blocked`` holds.
_GROUP_MAX_LINES = 64


@functools.lru_cache(maxsize=None)
def _blocked_kernel(lanes: int, vectors: int, chunk: int, pixels: int):
    """The ``direct-blocked`` kernel for one block shape (compiled on first use).

    Blocks hold ``chunk`` of the ``vectors`` vectors of each output's channels (the
    block kernel runs once per chunk).

    One compiled kernel for every ``mode``: ``out`` (the sums' dtype) is written
    with ``_KEEP``, ``bits`` (uint16) with ``_FLOAT16``/``_BFLOAT16``; the other is
    an empty placeholder of its type.
    """
    from .codegen import compile_source

    block = compile_source(_block_source(lanes, chunk, pixels), "block")
    transpose = _tile_transposer(lanes)
    # Four independent sets of accumulators where registers allow, one on AVX2 for
    # wide outputs (8 vectors: 32 accumulators would spill).
    splits = max(1, min(4, chunk * pixels // vectors))
    single = compile_source(_single_source(lanes, vectors, splits), "single")
    width, chunk_width = lanes * vectors, lanes * chunk

    @numba.njit(nogil=True, cache=False, inline="always")
    def phase_ends(source, weights, dest, reads, taps, shifts, count, first, last, j_first,
                   j_stop, p3, line_at, step, s3, lines, line_step, read_step, in_3, in_c, ci,
                   size3, edge_reads, edge_taps):  # pragma: no cover - compiled
        # The outputs j * s3 + p3, j in [j_first, j_stop), of `lines` lines that the
        # lines' blocks leave: those with taps outside the input's last axis.  Line k
        # reads at reads + k * read_step and is written at line_at + k * line_step.
        # Each such output is a column across the lines with the same taps: blocks
        # take `pixels` lines at a time (its weights loaded once per block, not once
        # per output), and fewer lines than a block go one output at a time.
        blocked = last - first >= pixels  # the lines' blocks took [first, last)
        for jj in range(j_first, j_stop):
            if blocked and first <= jj < last:
                continue
            edges = 0
            for m in range(count):
                if 0 <= jj + shifts[m] < size3:
                    edge_reads[edges] = reads[m]
                    edge_taps[edges] = taps[m]
                    edges += 1
            at = line_at + (jj * s3 + p3) * step
            if lines < pixels:
                for k in range(lines):
                    single(source, weights, dest, at + k * line_step, edge_reads, edge_taps,
                           edges, jj * in_3 + k * read_step, in_c, ci)
                continue
            k = 0
            while k < lines:
                k = min(k, lines - pixels)  # the last block overlaps its predecessor
                for column in range(0, width, chunk_width):
                    block(source, weights, dest, at + k * line_step + column, line_step,
                          edge_reads, edge_taps, edges, jj * in_3 + k * read_step, read_step,
                          in_c, ci, column, width)
                k += pixels

    @numba.njit(nogil=True, cache=False)
    def line_ends(source, weights, dest, group_reads, group_taps, rows, line_at, step, lines,
                  line_step, read_step, in_3, in_c, ci, size3, out3, s3, tap_k, tap_shift,
                  tap_count, tap_size, reads, taps, shifts, edge_reads,
                  edge_taps):  # pragma: no cover - compiled
        # phase_ends of a group of `lines` whole lines.
        for p3 in range(min(s3, out3)):
            j_stop = (out3 - p3 + s3 - 1) // s3
            count, first, last = _phase_taps(group_reads, group_taps, rows, p3, 0, j_stop,
                                             size3, in_3, tap_k, tap_shift, tap_count,
                                             tap_size, reads, taps, shifts)
            phase_ends(source, weights, dest, reads, taps, shifts, count, first, last, 0,
                       j_stop, p3, line_at, step, s3, lines, line_step, read_step, in_3,
                       in_c, ci, size3, edge_reads, edge_taps)

    @numba.njit(nogil=True, cache=False)
    def store_line(out, bits, bias, mode, tile, line, out_3, out_c, co, y_first, y_stop,
                   g):  # pragma: no cover - compiled
        # A line's outputs [y_first, y_stop) from its tile (`width` sums per output) into
        # the output: rounded, or channels last, or channels first.
        if mode != _KEEP:
            _rounded_line(bits, tile, bias, mode, line, out_3, out_c, co, width, y_first,
                          y_stop, g * co)
        elif out_c == 1:
            for y3 in range(y_first, y_stop):
                for o in range(co):
                    out[line + y3 * out_3 + o] = tile[y3 * width + o]
        else:
            # Channels first: blocks of lanes x lanes transposed in registers, the
            # channels and outputs past the last whole block one at a time.
            y_whole = y_first + (y_stop - y_first) // lanes * lanes if out_3 == 1 else y_first
            o_whole = co - co % lanes
            for y3 in range(y_first, y_whole, lanes):
                for o in range(0, o_whole, lanes):
                    transpose(tile, y3 * width + o, width, out, line + o * out_c + y3, out_c)
            for o in range(co):
                for y3 in range(y_whole if o < o_whole else y_first, y_stop):
                    out[line + o * out_c + y3 * out_3] = tile[y3 * width + o]

    @numba.njit(nogil=True, cache=False)
    def close_group(source, weights, out, bits, bias, mode, dest, direct, group_reads,
                    group_taps, rows, group_line, lines, line_step, read_step, in_3, in_c, ci,
                    size3, out3, out_3, out_c, co, s3, g, tap_k, tap_shift, tap_count,
                    tap_size, reads, taps, shifts, edge_reads,
                    edge_taps):  # pragma: no cover - compiled
        # A group's line ends, then (lines kept in the tile, line k at k * out3 * width)
        # its lines stored.
        tile_line = out3 * width
        if direct:
            line_ends(source, weights, out, group_reads, group_taps, rows, group_line, out_3,
                      lines, line_step, read_step, in_3, in_c, ci, size3, out3, s3, tap_k,
                      tap_shift, tap_count, tap_size, reads, taps, shifts, edge_reads,
                      edge_taps)
            return
        line_ends(source, weights, dest, group_reads, group_taps, rows, 0, width, lines,
                  tile_line, read_step, in_3, in_c, ci, size3, out3, s3, tap_k, tap_shift,
                  tap_count, tap_size, reads, taps, shifts, edge_reads, edge_taps)
        for k in range(lines):
            store_line(out, bits, bias, mode, dest[k * tile_line:(k + 1) * tile_line],
                       group_line + k * line_step, out_3, out_c, co, 0, out3, g)

    @numba.njit(nogil=True, cache=False)
    def kernel(source, weights, out, bits, bias, mode, sizes, in_steps, out_steps, line_order,
               tap_k, tap_shift, tap_count, segments, start, stop):  # pragma: no cover
        # Flat buffers in any layout: element (n, x1, x2, x3, channel) of the source is at
        # n*in_steps[0] + x1*in_steps[1] + x2*in_steps[2] + x3*in_steps[3] +
        # channel*in_steps[4], the output likewise with out_steps; weights (G, K1, K2, K3,
        # Ci, width), zero beyond Co; bias (G*Co,) or empty, added by rounding modes only.
        # sizes = (N, G, Ci, Co, X1, X2, X3, Y1, Y2, Y3, K2,
        # K3, K, S1, S2, S3).  Computes the output lines (g, n, y1, y2) (the group's Co
        # channels), each cut into `segments` runs of Y3 (so that a layer of fewer
        # lines than threads keeps every thread busy), with flat index (line, segment)
        # in [start, stop): per phase of the last axis, blocks of `pixels` outputs
        # whose taps all read inside the input, then the remaining outputs with their
        # own taps (phase_ends: one at a time, or where whole lines go straight into
        # the output, a group of lines' together).  Every output element is written
        # (those of overlapping blocks twice, with equal values).
        batch, ci, co = sizes[0], sizes[2], sizes[3]
        size1, size2, size3 = sizes[4], sizes[5], sizes[6]
        out1, out2, out3 = sizes[7], sizes[8], sizes[9]
        k2_count, k3_count, k_volume = sizes[10], sizes[11], sizes[12]
        s1, s2, s3 = sizes[13], sizes[14], sizes[15]
        in_n, in_1, in_2, in_3, in_c = (in_steps[0], in_steps[1], in_steps[2], in_steps[3],
                                        in_steps[4])
        out_n, out_1, out_2, out_3, out_c = (out_steps[0], out_steps[1], out_steps[2],
                                             out_steps[3], out_steps[4])
        direct = out_c == 1 and co == width and mode == _KEEP
        widest = tap_k.shape[2]
        found = np.empty((widest * widest, 4), np.int64)
        row_reads = np.empty(widest * widest, np.int64)
        row_taps = np.empty(widest * widest, np.int64)
        reads = np.empty(widest ** 3, np.int64)
        taps = np.empty(widest ** 3, np.int64)
        shifts = np.empty(widest ** 3, np.int64)
        edge_reads = np.empty(widest ** 3, np.int64)
        edge_taps = np.empty(widest ** 3, np.int64)
        tap_size = ci * width
        # Whole lines (not segments): the line ends of consecutive lines of one phase
        # (along the second axis, or the first where the second is a unit axis, as in
        # 2-D layers) whose reads differ by whole input rows wait for their group's end
        # and go together (line_ends).  Lines not written straight into the output are
        # kept in the tile until then: up to _GROUP_TILE_ELEMENTS of it.
        grouped = segments == 1
        tile_line = out3 * width
        capacity = _GROUP_MAX_LINES
        if direct:
            tile_size = 0  # unused
        elif grouped:
            capacity = max(1, min(capacity, _GROUP_TILE_ELEMENTS // tile_line))
            tile_size = capacity * tile_line
        else:  # a segment's tile holds that segment alone, its first output at 0
            tile_size = -(-out3 // segments) * width
        tile = np.empty(tile_size, weights.dtype)
        dest = out if direct else tile
        line_step = s2 * out_2 if out2 > 1 else s1 * out_1
        read_step = in_2 if out2 > 1 else in_1
        group_reads = np.empty(widest * widest, np.int64)
        group_taps = np.empty(widest * widest, np.int64)
        group_rows, group_line, group_lines, group_g = 0, 0, 0, 0
        for item in range(start, stop):
            flat, segment = item // segments, item % segments
            y_first = out3 * segment // segments
            y_stop = out3 * (segment + 1) // segments
            # Lines in phase order: consecutive lines use the same taps (weights stay in L1).
            y2 = line_order[out1 + flat % out2]
            y1 = line_order[(flat // out2) % out1]
            n = (flat // (out1 * out2)) % batch
            g = flat // (batch * out1 * out2)
            p1, j1 = y1 % s1, y1 // s1
            p2, j2 = y2 % s2, y2 // s2
            rows = _row_taps(found, j1, j2, p1, p2, tap_shift, tap_count, size1, size2)
            for r in range(rows):
                x1, x2, m1, m2 = found[r, 0], found[r, 1], found[r, 2], found[r, 3]
                row_reads[r] = n * in_n + x1 * in_1 + x2 * in_2 + g * ci * in_c
                row_taps[r] = g * k_volume + (tap_k[0, p1, m1] * k2_count
                                              + tap_k[1, p2, m2]) * k3_count
            line = n * out_n + y1 * out_1 + y2 * out_2 + g * co * out_c
            if grouped:
                joins = 0 < group_lines < capacity and rows == group_rows and (
                    line == group_line + group_lines * line_step)
                for r in range(rows if joins else 0):
                    if (row_taps[r] != group_taps[r]
                            or row_reads[r] != group_reads[r] + group_lines * read_step):
                        joins = False
                        break
                if joins:
                    group_lines += 1
                else:
                    if group_lines:
                        close_group(source, weights, out, bits, bias, mode, dest, direct,
                                    group_reads, group_taps, group_rows, group_line,
                                    group_lines, line_step, read_step, in_3, in_c, ci, size3,
                                    out3, out_3, out_c, co, s3, group_g, tap_k, tap_shift,
                                    tap_count, tap_size, reads, taps, shifts, edge_reads,
                                    edge_taps)
                    group_rows, group_line, group_lines, group_g = rows, line, 1, g
                    group_reads[:rows] = row_reads[:rows]
                    group_taps[:rows] = row_taps[:rows]
            line_at = (line if direct else (group_lines - 1) * tile_line if grouped
                       else -y_first * width)
            step = out_3 if direct else width
            for p3 in range(min(s3, out3)):
                # The phase's outputs j * s3 + p3 in the segment.
                j_first = max(0, y_first - p3 + s3 - 1) // s3
                j_stop = max(0, y_stop - p3 + s3 - 1) // s3
                count, first, last = _phase_taps(row_reads, row_taps, rows, p3, j_first,
                                                 j_stop, size3, in_3, tap_k, tap_shift,
                                                 tap_count, tap_size, reads, taps, shifts)
                # Blocks of `pixels` outputs over those whose taps all read inside the
                # input; the last block ends there (overlapping its predecessor: a few
                # outputs computed twice, but never a short block).  The others, at
                # the line's ends and in lines shorter than a block: line_ends.
                j = first
                while j < last and last - first >= pixels:
                    j = min(j, last - pixels)
                    at = line_at + (j * s3 + p3) * step
                    for column in range(0, width, chunk_width):
                        block(source, weights, dest, at + column, s3 * step, reads, taps,
                              count, j * in_3, in_3, in_c, ci, column, width)
                    j += pixels
                if not grouped:
                    phase_ends(source, weights, dest, reads, taps, shifts, count, first, last,
                               j_first, j_stop, p3, line_at, step, s3, 1, 0, 0, in_3, in_c, ci,
                               size3, edge_reads, edge_taps)
            if not grouped and not direct:
                store_line(out, bits, bias, mode, tile, line + y_first * out_3, out_3, out_c,
                           co, 0, y_stop - y_first, g)
        if group_lines:
            close_group(source, weights, out, bits, bias, mode, dest, direct, group_reads,
                        group_taps, group_rows, group_line, group_lines, line_step, read_step,
                        in_3, in_c, ci, size3, out3, out_3, out_c, co, s3, group_g, tap_k,
                        tap_shift, tap_count, tap_size, reads, taps, shifts, edge_reads,
                        edge_taps)

    return kernel


@functools.lru_cache(maxsize=256)
def _blocked_tables(axes3: tuple[AxisPlan, ...]):
    """Per axis and phase: tap count, each tap's input shift and kernel index (read-only)."""
    phases = [_axis_phases(axis) for axis in axes3]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    stride_max = max(axis.stride for axis in axes3)
    tap_k = np.zeros((3, stride_max, widest), np.int64)
    tap_shift = np.zeros((3, stride_max, widest), np.int64)
    tap_count = np.zeros((3, stride_max), np.int64)
    for a, p in enumerate(phases):
        for c in p.classes:
            for i in range(c.count):
                phase = c.first + i
                tap_count[a, phase] = len(c.shifts)
                for m, (shift, k) in enumerate(zip(c.shifts, c.taps[i])):
                    tap_k[a, phase, m] = k
                    tap_shift[a, phase, m] = shift
    return _frozen(tap_k, tap_shift, tap_count)


@functools.lru_cache(maxsize=256)
def _line_order(axis1: AxisPlan, axis2: AxisPlan) -> np.ndarray:
    """The outputs of the first two axes in phase order (``y = p + j*s`` by ``p``, then ``j``)."""
    order = [np.concatenate([np.arange(p, a.output_size, a.stride) for p in range(a.stride)])
             for a in (axis1, axis2)]
    return _frozen(np.concatenate(order).astype(np.int64))[0]


def _steps(shape5: tuple[int, ...], channels_last: bool) -> np.ndarray:
    """Element steps (n, axis 1, axis 2, axis 3, channel) of a C-contiguous array.

    ``shape5`` is (N, channels, A1, A2, A3) in logical order; the array is laid out
    as (N, A1, A2, A3, channels) when ``channels_last``, else as given.
    """
    batch, channels, a1, a2, a3 = shape5
    if channels_last:
        return np.array((a1 * a2 * a3 * channels, a2 * a3 * channels, a3 * channels, channels,
                         1), np.int64)
    return np.array((channels * a1 * a2 * a3, a2 * a3, a3, 1, a1 * a2 * a3), np.int64)


def direct_blocked(data, weights, axes, dtype, channels_last, out, bias, derived, target):
    """Fill ``out`` (the layout of ``data``) with the register-blocked direct kernel.

    ``out`` has the accumulation ``dtype``, or is float16 or bfloat16 (with float32
    ``dtype``): then the sums, plus ``bias`` (``(G*Co,)``, read only then), are
    rounded once into it, bit for bit as ``astype`` rounds the float32 result.
    The reordered weights are kept in ``derived`` (the weights memo), if given;
    ``target``: the machine (:class:`~convtranspose._runtime.target.Target`).
    """
    groups, ci, co = weights.shape[:3]
    axes3 = _three_axes(axes)
    kernel3 = tuple(a.kernel_size for a in axes3)
    lanes, vectors, chunk, pixels = blocked_shape(np.dtype(dtype).itemsize, co, axes3[2],
                                                  target.vector_bytes)
    width = lanes * vectors
    derived = {} if derived is None else derived
    key = ("blocked", np.dtype(dtype).str, width)
    w = derived.get(key)
    if w is None:  # a tenth of a large layer's time, so kept (direct-blocked-zen4.json)
        # (G, Ci, Co, K...) -> (G, K1, K2, K3, Ci, width), zero-padded channels.
        w = np.zeros((groups,) + kernel3 + (ci, width), dtype)
        w[..., :co] = np.moveaxis(weights.reshape((groups, ci, co) + kernel3), (1, 2), (-2, -1))
        w = derived[key] = _frozen(w)[0]
    data_last = channels_last
    if not channels_last and ci > 1 and data[0, 0].nbytes >= _FAR_CHANNELS_BYTES:
        data, data_last = channels_last_copy(data, dtype, target), True
    if data.dtype != dtype or not data.flags.c_contiguous:
        data = np.ascontiguousarray(data, dtype)
    result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    flat_out = result.reshape(-1)
    mode = _store_mode(out.dtype, dtype)
    if mode == _KEEP:
        bits, bias = np.empty(0, np.uint16), np.empty(0, dtype)
    else:
        bits, flat_out = flat_out.view(np.uint16), np.empty(0, dtype)
        bias = np.empty(0, dtype) if bias is None else np.ascontiguousarray(bias, dtype)
    batch = data.shape[0]
    sizes = np.array((batch, groups, ci, co) + tuple(a.input_size for a in axes3)
                     + tuple(a.output_size for a in axes3)
                     + (kernel3[1], kernel3[2], math.prod(kernel3))
                     + tuple(a.stride for a in axes3), np.int64)
    in_steps = _steps((batch, groups * ci) + tuple(a.input_size for a in axes3), data_last)
    out_steps = _steps((batch, groups * co) + tuple(a.output_size for a in axes3), channels_last)
    tables = _blocked_tables(axes3)
    kernel = _blocked_kernel(lanes, vectors, chunk, pixels)
    source, flat_weights = data.reshape(-1), w.reshape(-1)
    lines = groups * batch * axes3[0].output_size * axes3[1].output_size
    threads = _threads(batch, weights.shape, axes, target)
    segments = blocked_segments(lines, axes3[2], threads)
    order = _line_order(axes3[0], axes3[1])
    parallel_for(lambda a, b: kernel(source, flat_weights, flat_out, bits, bias, mode, sizes,
                                  in_steps, out_steps, order, *tables, segments, a, b),
              lines * segments, threads)
    if result is not out:
        np.copyto(out, result)
