"""The ``direct`` and ``direct-blocked`` algorithms compiled with numba (optional extra ``fast``).

Imported only when the kernel chooses ``direct`` and numba is installed, never at
``import convtranspose``.  No GEMM: each output phase (module docstring of
:mod:`convtranspose._kernel`) sums its few taps directly.

Channels first (:func:`_planes_kernel`)
    Per (batch, group) plane, in cache-sized bands of the first axis, the input is
    copied into a zero-bordered window in which every tap of every phase reads in
    range; flattened, one tap of one phase is then a single long multiply-add over
    all output positions of the phase, computed in register blocks of a few vectors
    of positions times up to three output channels (:mod:`._numba_vectors`), and the
    phases of the last axis are interleaved into the output rows.  In 2-D a block
    may instead take whole output rows (no border columns), whichever computes fewer
    positions.  bfloat16 operands summed in float32 are multiplied as pairs of input
    channels with ``vdpbf16ps`` where that is exact (:func:`_bfloat16_pairs`); other
    float16 and bfloat16 data is widened as the windows are filled, and float16 and
    bfloat16 results are rounded as they are stored (no float32 copy of either).
    Channels-last layers with fewer than 8 channels use it too, reading and writing
    with the channel stride.
Channels first, by rows (:func:`_rows_source`)
    float32 and float64 layers whose last axis has stride 1 or 2 (:func:`rows_apply`):
    compiled per layer with the last axis and the channel counts as constants, each
    output row summed in registers (a few output channels times a few vectors per phase
    of the last axis), straight from a window of the input rows its band of output rows
    reads, the phases interleaved as they are stored: no accumulator array, no junk
    border columns.  Where each phase's vectors would waste lanes, an even kernel's two
    phases are summed in the same vectors instead (:func:`_merged_taps`).
Channels last (:func:`_channels_last_kernel`)
    Per output position, up to four taps per pass over the channel vector, written
    straight into the output; compiled per (Ci, Co) so that the channel loops
    vectorise (depthwise layers: in explicit vectors).

Register-blocked (:func:`direct_blocked`, the ``direct-blocked`` algorithm)
    For groups of a few dozen channels, where a GEMM per phase has skinny operands:
    per output line (all of the last axis for one group) and phase of the last
    axis, blocks of 4-9 outputs whose taps all read inside the input keep their
    output channels (with AVX2's 16 registers, a chunk of 2-3 vectors of them) in
    vector registers (:mod:`._numba_vectors`) while every tap and input channel
    adds one broadcast input times one weight row; the outputs
    at the line ends are computed one at a time with their own taps.  Any layout:
    channels-last lines are stored directly, channels-first ones through a
    transposed line buffer.  float16 and bfloat16 results are rounded from that
    buffer as each line is stored (no float32 result, no separate rounding pass).

Layout copies (:func:`channels_last_copy`)
    Channels-first data that ``direct-blocked`` reads channels-last is copied in
    register blocks of ``lanes x lanes`` elements, transposed by interleaving.

col2im's scatter-add (:func:`col2im_scatter`)
    For ``col2im-nxc`` with a few output channels: its GEMM's columns are added
    into the output tap by tap, per block of output rows, in one compiled pass.

The direct kernels write every output element exactly once.  The work is split
into pieces that the calling thread and helper threads take in turn.  Results
equal the NumPy algorithms up to the order of float additions (the scatter's, bit
for bit).  Compiled on first use in each process (``cache=False``: nothing is
written to disk).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ._casts_numba import (bfloat16_bits, bfloat16_value, float16_bits, float16_value,
                           host_has_f16c)
from ._kernel import (DIRECT_PARALLEL_MACS, PLANE_CO_BLOCK, _axis_phases, blocked_segments,
                      direct_per_position, direct_worth_threads, line_segment_inputs,
                      line_segmented, plane_lanes, plane_schedule)
from ._plan import AxisPlan

__all__ = ["blocked_shape", "col2im_scatter", "direct_blocked", "direct_phase",
           "prepare_direct"]

_THREADS = max(1, min(os.cpu_count() or 1, 8))
_PIECES_PER_THREAD = 8
#: Channels-first planes are computed in bands whose window and accumulator hold
#: about this many elements (cache-sized).
_BAND_ELEMENTS = 1 << 16
#: The plane kernel sums the input channels in chunks whose windows hold about this
#: many elements: each block of a run reads every channel's window, and hundreds of
#: windows (a page or more each) overflow the TLB.  One thread, GMAC/s, chunks of 8 K
#: against none: DCGAN 256->128 per sample 30 against 25, 512->256 24 against 15.
#: 32 K (128 KB: L2, 32 pages) against 8 K, Zen 4, one thread, the whole layer: grouped
#: g8 24.1 -> 21.8 ms, dilated 3.1-3.4 -> 2.7-2.8, 3D k2 6.8-7.3 -> 6.0-6.5, stride-1
#: 2.95 -> 2.85, DCGAN 256->128 42 -> 41, 512->256 and FCN-32x unchanged: fewer
#: chunks, fewer passes that reload and store the accumulators (the whole sum in
#: one pass when a group has at most 32 K window elements).
_CHUNK_WINDOW_ELEMENTS = 1 << 15
#: ``direct-blocked`` reads channels-first data whose channel planes are at least this
#: large through a channels-last copy: a block reads every input channel of a few
#: pixels, and so many distant planes miss the TLB and defeat the prefetchers (3D
#: 64->32 32^3 k3, 128 KB planes: 77-90 ms without the copy, 40-61 with it; 16 KB
#: planes, alternating A/B: stride-1 64->64 64^2 3.3-6.0 -> 3.1-4.8 ms, 3D 128->64
#: 16^3 k2 8.6-11.9 -> 8.0-9.2; 3 KB planes (grouped 28^2) lost with the copy).  Those
#: copies were NumPy's (8.4 MB: 6.6 ms); :func:`channels_last_copy` takes 0.8 ms.
_FAR_CHANNELS_BYTES = 1 << 14
_pool = None


@numba.njit(nogil=True, cache=False, inline="always")
def _row_taps(found, j1, j2, p1, p2, tap_shift, tap_count, size1,
              size2):  # pragma: no cover - compiled
    """The taps of the first two axes that read inside the input for output row ``(j1,
    j2)`` of phases ``(p1, p2)``: ``found[r] = (x1, x2, m1, m2)``; returns their count."""
    rows = 0
    for m1 in range(tap_count[0, p1]):
        x1 = j1 + tap_shift[0, p1, m1]
        if x1 < 0 or x1 >= size1:
            continue
        for m2 in range(tap_count[1, p2]):
            x2 = j2 + tap_shift[1, p2, m2]
            if x2 < 0 or x2 >= size2:
                continue
            found[rows, 0], found[rows, 1], found[rows, 2], found[rows, 3] = x1, x2, m1, m2
            rows += 1
    return rows


@functools.lru_cache(maxsize=None)
def _channels_last_kernel(ci: int, co: int, lanes: int):
    """The channels-last kernel compiled for ``Ci = ci`` and ``Co = co`` (constants).

    Constant channel counts let LLVM unroll the per-group channel loops and
    vectorise over the groups with constant strides (5x faster than runtime
    ones).  ``ci = co = 0`` compiles one kernel reading them at run time, for
    shapes outside the cost model's range for ``direct`` (at most 4 per group).
    Depthwise layers (``ci = co = 1``) sum their taps in vectors of ``lanes``
    elements (:mod:`._numba_vectors`), four taps per pass over the channels.
    """
    from ._numba_vectors import vector_fma, vector_load, vector_store, vector_zero

    constant = ci > 0
    ci_constant = np.uint64(ci)
    co_constant = np.uint64(co)
    depthwise = ci == 1 and co == 1
    one = np.uint64(1)
    step = np.uint64(lanes)

    # Passes of four taps over a position's channels, then single taps: the first
    # pass stores its sums, later ones add to them (separate loops: the choice inside
    # the loop made the kernel 1.4x slower).  Explicit vectors with the taps as plain
    # values, where LLVM vectorised the old loops itself: depthwise NXC k4 s2 (8 x 256
    # x 28^2), one thread, alternating: 3.39 -> 3.10 ms (k3 s1 2.27 -> 1.99).
    @numba.njit(nogil=True, cache=False, inline="always")
    def plus_four(total, source, weights, r0, w0, r1, w1, r2, w2, r3, w3, c):
        # total + four taps at channel c (a vector).  Their offsets come as values, not
        # from the arrays, which LLVM cannot tell from the output (it may reload them).
        total = vector_fma(vector_load(source, r0 + c, lanes), vector_load(weights, w0 + c, lanes),
                           total)
        total = vector_fma(vector_load(source, r1 + c, lanes), vector_load(weights, w1 + c, lanes),
                           total)
        total = vector_fma(vector_load(source, r2 + c, lanes), vector_load(weights, w2 + c, lanes),
                           total)
        return vector_fma(vector_load(source, r3 + c, lanes), vector_load(weights, w3 + c, lanes),
                          total)

    @numba.njit(nogil=True, cache=False, inline="always")
    def four_taps(source, weights, out, reads, taps, done, dest, vector_end, width):
        r0, w0 = reads[done], taps[done]
        r1, w1 = reads[done + 1], taps[done + 1]
        r2, w2 = reads[done + 2], taps[done + 2]
        r3, w3 = reads[done + 3], taps[done + 3]
        if done == 0:
            for c in range(np.uint64(0), vector_end, step):
                vector_store(out, dest + c, plus_four(vector_zero(out, lanes), source, weights,
                                                      r0, w0, r1, w1, r2, w2, r3, w3, c))
        else:
            for c in range(np.uint64(0), vector_end, step):
                vector_store(out, dest + c, plus_four(vector_load(out, dest + c, lanes), source,
                                                      weights, r0, w0, r1, w1, r2, w2, r3, w3, c))
        for c in range(vector_end, width):
            total = (weights[w0 + c] * source[r0 + c] + weights[w1 + c] * source[r1 + c]
                     + weights[w2 + c] * source[r2 + c] + weights[w3 + c] * source[r3 + c])
            out[dest + c] = total if done == 0 else out[dest + c] + total

    @numba.njit(nogil=True, cache=False, inline="always")
    def last_tap(source, weights, out, read, tap, first, dest, vector_end, width):
        # A single tap: one of the up to three left after the passes of four.
        if first:
            for c in range(np.uint64(0), vector_end, step):
                vector_store(out, dest + c, vector_fma(
                    vector_load(source, read + c, lanes), vector_load(weights, tap + c, lanes),
                    vector_zero(out, lanes)))
            for c in range(vector_end, width):
                out[dest + c] = weights[tap + c] * source[read + c]
        else:
            for c in range(np.uint64(0), vector_end, step):
                vector_store(out, dest + c, vector_fma(
                    vector_load(source, read + c, lanes), vector_load(weights, tap + c, lanes),
                    vector_load(out, dest + c, lanes)))
            for c in range(vector_end, width):
                out[dest + c] += weights[tap + c] * source[read + c]

    @numba.njit(nogil=True, cache=False)
    def kernel(source, weights, out, sizes, strides, tap_k, tap_shift, tap_count, start,
               stop):  # pragma: no cover
        # Flat C-order buffers: source (N, X1, X2, X3, G*Ci), weights (K1, K2, K3, Ci, Co, G),
        # out (N, Y1, Y2, Y3, G*Co); sizes = (G, Ci, Co, X1, X2, X3, Y1, Y2, Y3).  Computes the
        # output rows (n, y1, y2) with flat index in [start, stop): every output position
        # sums the taps of its phase, each one multiply-add over the channel vector
        # (contiguous when Ci = Co = 1), written straight into the output.
        groups = sizes[0]
        size1, size2, size3 = sizes[3], sizes[4], sizes[5]
        out1, out2, out3 = sizes[6], sizes[7], sizes[8]
        s1, s2, s3 = strides[0], strides[1], strides[2]
        # Unsigned indices in the vector loops (see _planes_kernel).
        group_count = np.uint64(groups)
        vector_end = group_count - group_count % step
        ci_stride = ci_constant if constant else np.uint64(sizes[1])
        co_stride = co_constant if constant else np.uint64(sizes[2])
        width_in = group_count * ci_stride
        width_out = group_count * co_stride
        widest = tap_k.shape[2]
        # The taps of the first two axes are the same along a whole output row.
        found = np.empty((widest * widest, 4), np.int64)
        row_reads = np.empty(widest * widest, np.uint64)
        row_taps = np.empty(widest * widest, np.uint64)
        reads = np.empty(widest ** 3, np.uint64)
        taps = np.empty(widest ** 3, np.uint64)
        for flat in range(start, stop):
            y2 = flat % out2
            y1 = (flat // out2) % out1
            n = flat // (out1 * out2)
            p1, j1 = y1 % s1, y1 // s1
            p2, j2 = y2 % s2, y2 // s2
            rows = _row_taps(found, j1, j2, p1, p2, tap_shift, tap_count, size1, size2)
            for r in range(rows):
                x1, x2, m1, m2 = found[r, 0], found[r, 1], found[r, 2], found[r, 3]
                row_reads[r] = np.uint64((n * size1 + x1) * size2 + x2) * np.uint64(
                    size3) * width_in
                row_taps[r] = tap_k[0, p1, m1] + tap_k[1, p2, m2]
            for y3 in range(out3):
                p3, j3 = y3 % s3, y3 // s3
                dest = np.uint64(flat * out3 + y3) * width_out
                count = 0
                for m3 in range(tap_count[2, p3]):
                    x3 = j3 + tap_shift[2, p3, m3]
                    if x3 < 0 or x3 >= size3:
                        continue
                    read, tap = np.uint64(x3) * width_in, tap_k[2, p3, m3]
                    for row in range(rows):
                        reads[count] = row_reads[row] + read
                        taps[count] = row_taps[row] + tap
                        count += 1
                if count == 0 or not depthwise:
                    for c in range(width_out):
                        out[dest + c] = 0
                if depthwise:
                    done = 0
                    while count - done >= 4:
                        four_taps(source, weights, out, reads, taps, done, dest, vector_end,
                                  group_count)
                        done += 4
                    while done < count:
                        last_tap(source, weights, out, reads[done], taps[done], done == 0, dest,
                                 vector_end, group_count)
                        done += 1
                    continue
                for m in range(count):
                    read, w_at = reads[m], taps[m]
                    for g in range(group_count):
                        for o in range(co_stride):
                            total = (weights[w_at + o * group_count + g]
                                     * source[read + g * ci_stride])
                            for i in range(one, ci_stride):
                                total += (weights[w_at + (i * co_stride + o) * group_count + g]
                                          * source[read + g * ci_stride + i])
                            out[dest + g * co_stride + o] += total

    return kernel


def _plane_block_source(lanes: int, co_block: int, vectors: int, pairs: bool = False,
                        segments: int = 0) -> str:
    """Source of the plane kernel's block: ``vectors * lanes`` window positions of ``co_block`` channels.

    The ``co_block * vectors`` accumulators are vector variables (registers) for
    the whole sum over the phase's taps and input channels: per tap and input
    channel, each output channel's weight is broadcast once and each window vector
    loaded once, then used by every channel (a pass over an accumulator array per
    channel instead loads and stores it every few terms: half the speed).  Weights
    are laid out ``(..., tap, Ci, co_block)``: per tap, ``starts[m]`` is its first
    weight and ``reads[m]`` its first window element (of input channel 0).

    With ``pairs`` each window and weight element is a pair of bfloat16 input
    channels (``uint32``), multiplied and added by :func:`vector_dot_pairs`.  With
    ``segments`` the block covers ``vectors // segments`` window rows ``row_pitch``
    apart, ``segments`` vectors of each (0: one flat run of positions).
    """
    accumulators = [[f"acc_{c}_{v}" for v in range(vectors)] for c in range(co_block)]
    per_row = segments or vectors
    offsets = [(f"{v // per_row} * row_pitch + " if v >= per_row else "") + str(v % per_row * lanes)
               for v in range(vectors)]
    lines = ["def plane_block(windows, weights, acc, acc_at, channel_pitch, reads, starts, taps,",
             "                channels, window_volume, read_at, factor_at, resume, row_pitch):"]
    lines += ["    if resume:"]
    lines += [f"        {name} = vector_load(acc, acc_at + {c} * channel_pitch + {v * lanes}, {lanes})"
              for c, row in enumerate(accumulators) for v, name in enumerate(row)]
    lines += ["    else:"]
    lines += [f"        {name} = vector_zero(acc, {lanes})" for row in accumulators for name in row]
    lines += ["    for m in range(taps):",
              "        read = reads[m] + read_at",
              "        factor = starts[m] + factor_at",
              "        for _ in range(channels):"]
    lines += [f"            w_{c} = vector_splat_at(weights, factor + {c}, {lanes})"
              for c in range(co_block)]
    for v in range(vectors):
        lines.append(f"            x = vector_load(windows, read + {offsets[v]}, {lanes})")
        lines += [f"            {row[v]} = vector_dot_pairs(x, w_{c}, {row[v]})" if pairs
                  else f"            {row[v]} = vector_fma(x, w_{c}, {row[v]})"
                  for c, row in enumerate(accumulators)]
    lines += ["            read += window_volume",
              f"            factor += {co_block}"]
    lines += [f"    vector_store(acc, acc_at + {c} * channel_pitch + {v * lanes}, {name})"
              for c, row in enumerate(accumulators) for v, name in enumerate(row)]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=64)
def planes_block_shape(itemsize: int, co: int) -> tuple[int, int, int]:
    """(lanes, output channels per block, most vectors per channel) of the plane kernel.

    :func:`convtranspose._kernel.plane_schedule` takes blocks of half to all of those
    vectors (keeping at least eight accumulators), whichever covers the layer's runs
    with the fewest positions.

    About three quarters of the vector registers hold accumulators; the rest the
    channels' broadcast factors and one window vector.  Measured on Zen 3 (AVX2,
    16 registers), one thread, FCN-2x 21->21 / DCGAN 128->3 per sample, GMAC/s:
    3 x 4 vectors 27 / 28 (31 / 30 with the weights reordered for the block), 2 x 6
    25 / 19, 4 x 3 13 / 13 (spills), 1 x 8 15 / 12, and the former per-channel
    passes 13.6 / 13.3.  Fewer channels than the
    block are padded with zero factors, so one or two channels take smaller blocks.
    """
    from ._numba_vectors import vector_bytes

    lanes = max(1, vector_bytes() // itemsize)
    accumulators = 24 if vector_bytes() == 64 else 12
    co_block = min(PLANE_CO_BLOCK, co)
    return lanes, co_block, accumulators // co_block if co_block > 1 else 8


@numba.njit(nogil=True, cache=False)
def _blocked_weights(weights, co_block, halves):  # pragma: no cover - compiled
    """(G, Ci, Co, K) -> flat (G, Co blocks, K, Ci / halves, co_block, halves), zeros past Co and Ci.

    Per block of output channels and tap, the weights of every input channel in the
    order the plane kernel's block takes them; ``halves = 2`` keeps the weights of
    input channels ``2u`` and ``2u + 1`` side by side (the pairs of bfloat16 bits
    that ``vdpbf16ps`` multiplies), 1 one channel per element.
    """
    groups, ci_count, co_count, k_volume = weights.shape
    co_blocks = (co_count + co_block - 1) // co_block
    units = (ci_count + halves - 1) // halves
    unit_volume = units * co_block * halves  # elements per tap
    blocked = np.zeros(groups * co_blocks * k_volume * unit_volume, weights.dtype)
    for g in range(groups):
        for ci in range(ci_count):
            for co in range(co_count):
                into = (((((g * co_blocks + co // co_block) * k_volume * units + ci // halves)
                          * co_block + co % co_block) * halves) + ci % halves)
                for k in range(k_volume):
                    blocked[into + k * unit_volume] = weights[g, ci, co, k]
    return blocked


@numba.njit(nogil=True, cache=False)
def _smallest_bfloat16_exponent(bits):  # pragma: no cover - compiled
    """The smallest exponent field of the nonzero bfloat16 ``bits`` (0: a subnormal; 255: none)."""
    smallest = np.uint16(255)
    for index in range(bits.size):
        magnitude = bits[index] & np.uint16(0x7FFF)
        if magnitude:
            smallest = min(smallest, magnitude >> np.uint16(7))
    return smallest


@numba.njit(nogil=True, cache=False)
def _plain_windows(length, like):  # pragma: no cover - compiled
    """The plane kernel's windows: one array both filled and read (``like``'s dtype,
    the sums')."""
    windows = np.zeros(length, like.dtype)
    return windows, windows


@numba.njit(nogil=True, cache=False)
def _pair_windows(length, like):  # pragma: no cover - compiled
    """Windows of bfloat16 channel pairs: filled by halves (``uint16``), read as ``uint32``."""
    halves = np.zeros(2 * length, np.uint16)
    return halves, halves.view(np.uint32)


#: ``mode`` of the plane, row and ``direct-blocked`` kernels: float32 (or float64) sums
#: stored as they are, or rounded to float16 or bfloat16 bits.
_KEEP, _FLOAT16, _BFLOAT16 = 0, 1, 2


@numba.njit(nogil=True, cache=False, inline="always")
def _store_sum(out, at, value, shift, biased):  # pragma: no cover - compiled
    out[at] = value


@numba.njit(nogil=True, cache=False, inline="always")
def _store_float16(out, at, value, shift, biased):  # pragma: no cover - compiled
    # The bias is added in float32 before the one rounding, as the float32 path adds
    # it to its result; without one nothing is added, not even a zero (-0.0 + 0.0 is
    # +0.0).
    out[at] = float16_bits(np.float32(value) + np.float32(shift) if biased
                           else np.float32(value))


@numba.njit(nogil=True, cache=False, inline="always")
def _store_bfloat16(out, at, value, shift, biased):  # pragma: no cover - compiled
    out[at] = bfloat16_bits(np.float32(value) + np.float32(shift) if biased
                            else np.float32(value))


_STORES = {_KEEP: _store_sum, _FLOAT16: _store_float16, _BFLOAT16: _store_bfloat16}


@numba.njit(nogil=True, cache=False, inline="always")
def _load_value(value):  # pragma: no cover - compiled
    return value


#: How the plane kernel's window fill reads the data, per ``mode``: values as they
#: are, or the float32 values of float16 or bfloat16 bits (half data is never widened
#: into a float32 copy first).
_LOADS = {_KEEP: _load_value, _FLOAT16: float16_value, _BFLOAT16: bfloat16_value}


@functools.lru_cache(maxsize=None)
def _planes_kernel(lanes: int, co_block: int, vectors: int, pairs: bool = False,
                   segments: int = 0, mode: int = 0, load_mode: int = 0):
    """The channels-first plane kernel for one block shape (compiled on first use).

    ``pairs``: the bfloat16 kernel (:func:`_bfloat16_pairs`): source is the data's
    ``uint16`` bits, weights ``uint32`` pairs (:func:`_blocked_weights`), and a window
    element holds two input channels (``vdpbf16ps``).  ``segments``: blocks of whole
    output rows, ``segments`` vectors each (2-D layers; see
    :func:`convtranspose._kernel.plane_schedule`); 0: blocks of one flat run.
    ``mode``: ``_KEEP`` stores the sums, ``_FLOAT16``/``_BFLOAT16`` their float16 or
    bfloat16 bits (plus the bias, if any), rounded once as they are stored.
    ``load_mode``: ``_KEEP`` reads the data as it is, ``_FLOAT16``/``_BFLOAT16`` from
    its ``uint16`` bits (:data:`_LOADS`).
    """
    from ._numba_vectors import (compile_source, vector_interleave, vector_load,
                                 vector_store)

    block = compile_source(_plane_block_source(lanes, co_block, vectors, pairs, segments),
                           "plane_block")
    put, load = _STORES[mode], _LOADS[load_mode]
    # Sums stored as they are interleave the two phases of a stride-2 last axis with
    # whole vectors (rounded ones go through `put`, one element at a time).
    interleave_vectors = mode == _KEEP
    vector_run = np.uint64(lanes)
    block_length = lanes * vectors
    row_blocks = segments > 0
    block_rows = vectors // segments if row_blocks else 1
    new_windows = _pair_windows if pairs else _plain_windows
    # Input channel ci fills half (ci & low) of window unit ci >> shift.
    halves, shift, low = (np.uint64(2), np.uint64(1), np.uint64(1)) if pairs else (
        np.uint64(1), np.uint64(0), np.uint64(0))

    @numba.njit(nogil=True, cache=False)
    def kernel(source, weights, out, bias, sizes, geometry, counts, tap_k, tap_offset,
               tap_count, band, channels_last, start, stop):  # pragma: no cover
        # Flat C-order buffers: source (N, G, Ci, X1, X2, X3), weights as _blocked_weights
        # lays them out, out (N, G, Co, Y1, Y2, Y3), or source (N, X1, X2, X3, G, Ci) and
        # out (N, Y1, Y2, Y3, G, Co) when channels_last (for few channels: strided window
        # fills and stores); source holds uint16 bits when `pairs` or `load_mode` says
        # so, out when rounding (`mode`); bias (G * Co, or empty) has the sums' dtype and
        # is added only when rounding; sizes = (G, Ci, Co, X, Y, K) with X, Y, K the spatial
        # volumes.  Each (n, g) plane is cut into bands of `band` output blocks of the
        # first axis (so that window and accumulator stay in cache); computes the (n,
        # band, g) items with flat index in [start, stop) (groups innermost: neighbouring
        # channels close in time).  The compiled kernel keeps _CHUNK_WINDOW_ELEMENTS.
        # Windows, weights and chunks count input channel units: one channel, or a
        # pair of bfloat16 channels when `pairs`.
        #
        # Each input plane is copied into a zero-bordered window (per axis: size
        # geometry[a, 0], starting at input index geometry[a, 1]) in which every tap of
        # every phase reads in range.  Flattened, one tap of one phase is then a single
        # multiply-add `acc[f] += w * window[f + offset]` over all output positions of
        # the phase at once (the window's border columns give junk that is never
        # stored): long contiguous runs, taken in register blocks of `block_length`
        # positions of `co_block` output channels.  The accumulator rows are padded to
        # whole blocks (`pitch`) and the windows by one block, so the last block of a
        # run reads and writes in range.  Indices are computed on flat arrays: views
        # created in inner loops cost more than the work.
        #
        # Row blocks (2-D, `segments`): the accumulator keeps `segments` vectors per
        # output row (`acc_row`; no border columns) and a block covers `block_rows`
        # rows, each read from its own window row; the windows are padded by as many
        # rows, so the last block of a band reads in range.
        groups, ci_count, co_count = sizes[0], sizes[1], sizes[2]
        x_volume, y_volume, k_volume = sizes[3], sizes[4], sizes[5]
        out1, out2, out3 = sizes[6], sizes[7], sizes[8]
        size1, size2, size3 = sizes[9], sizes[10], sizes[11]
        w1, w2, w3 = geometry[0, 0], geometry[1, 0], geometry[2, 0]
        lo1, lo2, lo3 = geometry[0, 1], geometry[1, 1], geometry[2, 1]
        s1, s2, s3 = geometry[0, 2], geometry[1, 2], geometry[2, 2]
        plane = w2 * w3
        blocks1 = geometry[0, 3]
        bands = (blocks1 + band - 1) // band
        span1 = w1 - blocks1  # window rows beyond the band's own blocks
        window_volume = (min(band, blocks1) + span1) * plane
        tail = (geometry[1, 3] - 1) * w3 + geometry[2, 3]
        longest = (min(band, blocks1) - 1) * plane + tail
        # Accumulator positions per output row (of the last axis) and per block of the
        # first axis: the window's, or whole vectors per row.
        acc_row = segments * lanes if row_blocks else w3
        acc_plane = acc_row if row_blocks else plane
        if row_blocks:
            longest = min(band, blocks1) * acc_row
        units = (ci_count + halves - 1) // halves
        ci_chunk = max(1, min(units, _CHUNK_WINDOW_ELEMENTS // window_volume))
        pitch = (longest + block_length - 1) // block_length * block_length
        channel_pitch = s3 * pitch
        fill, windows = new_windows(units * window_volume + block_length + block_rows * plane,
                                    bias)
        acc = np.empty(co_block * channel_pitch, bias.dtype)
        biased = bias.size > 0
        most = tap_k.shape[2] ** 3
        reads = np.empty(most, np.int64)
        starts = np.empty(most, np.int64)
        co_blocks = (co_count + co_block - 1) // co_block
        first2, last2 = max(0, lo2), min(size2, lo2 + w2)
        first3, last3 = max(0, lo3), min(size3, lo3 + w3)
        # Unsigned indices in the copy loops: NumPy's negative-index wrap-around check
        # keeps LLVM from vectorising loops over signed flat indices (5x slower).
        run3 = np.uint64(max(0, last3 - first3))
        half = np.uint64(out3 // 2)
        one = np.uint64(1)
        row_length = np.uint64(out3)
        in_step = np.uint64(groups * ci_count if channels_last else 1)
        phase_pitch = np.uint64(pitch)
        out_step = np.uint64(groups * co_count if channels_last else 1)
        out_stride3 = np.uint64(s3) * out_step  # between outputs of one phase
        for item in range(start, stop):
            g = item % groups
            n = item // (groups * bands)
            flat = n * groups + g
            band_first = ((item // groups) % bands) * band
            band_blocks = min(band, blocks1 - band_first)
            length = band_blocks * acc_row if row_blocks else (band_blocks - 1) * plane + tail
            origin1 = lo1 + band_first  # input index of the window's first row
            first1, last1 = max(0, origin1), min(size1, origin1 + band_blocks + span1)
            # The window's interior is overwritten for every item; the rows outside the
            # input are zeroed (another band may have filled them), other borders stay zero.
            for unit in range(units):
                for r in range(band_blocks + span1):
                    if origin1 + r < first1 or origin1 + r >= last1:
                        row_at = np.uint64(unit * window_volume + r * plane)
                        for t in range(np.uint64(plane)):
                            windows[row_at + t] = 0
            for x1 in range(first1, last1):
                for x2 in range(first2, last2):
                    pixel = (x1 * size2 + x2) * size3 + first3
                    dst = np.uint64((x1 - origin1) * plane + (x2 - lo2) * w3 + first3 - lo3)
                    if channels_last:
                        # Each pixel's channels are contiguous: read them in order (the
                        # windows, in cache, take the scattered writes).
                        src = np.uint64((n * x_volume + pixel) * groups * ci_count
                                        + g * ci_count)
                        for t in range(run3):
                            for ci in range(np.uint64(ci_count)):
                                fill[((ci >> shift) * np.uint64(window_volume) + dst + t) * halves
                                     + (ci & low)] = load(source[src + t * in_step + ci])
                    else:
                        for ci in range(ci_count):
                            src = np.uint64((flat * ci_count + ci) * x_volume + pixel)
                            unit = np.uint64(ci)
                            at = ((unit >> shift) * np.uint64(window_volume) + dst) * halves + (
                                unit & low)
                            for t in range(run3):
                                fill[at + t * halves] = load(source[src + t])
            for block_index in range(co_blocks):
                co0 = block_index * co_block
                block_channels = min(co_block, co_count - co0)
                weights_at = (g * co_blocks + block_index) * k_volume * units * co_block
                for p1 in range(min(s1, out1)):
                    for p2 in range(min(s2, out2)):
                        for p3 in range(min(s3, out3)):
                            count = 0
                            for m1 in range(tap_count[0, p1]):
                                for m2 in range(tap_count[1, p2]):
                                    for m3 in range(tap_count[2, p3]):
                                        k = tap_k[0, p1, m1] + tap_k[1, p2, m2] + tap_k[2, p3, m3]
                                        reads[count] = (tap_offset[0, p1, m1] + tap_offset[1, p2, m2]
                                                        + tap_offset[2, p3, m3])
                                        starts[count] = weights_at + k * units * co_block
                                        count += 1
                            # Input channels in chunks whose windows' pages stay in the
                            # TLB while every block of the run reads them.
                            for ci0 in range(0, units, ci_chunk):
                                chunk = min(ci_chunk, units - ci0)
                                for f0 in range(0, length, block_length):
                                    read_at = f0 // acc_row * plane if row_blocks else f0
                                    block(windows, weights, acc, p3 * pitch + f0, channel_pitch,
                                          reads, starts, count, chunk, window_volume,
                                          read_at + ci0 * window_volume, ci0 * co_block, ci0 > 0,
                                          plane)
                        # Interleave the phases of the last axis into whole output rows:
                        # each phase's run of the accumulator goes to every s3-th output.
                        for c in range(block_channels):
                            if channels_last:
                                out_at = n * y_volume * groups * co_count + g * co_count + co0 + c
                            else:
                                out_at = (flat * co_count + co0 + c) * y_volume
                            channel_bias = (bias[g * co_count + co0 + c] if biased
                                            else bias.dtype.type(0))
                            for j1 in range(band_first, min(counts[0, p1], band_first + band_blocks)):
                                for j2 in range(counts[1, p2]):
                                    row = np.uint64(out_at) + np.uint64(
                                        ((j1 * s1 + p1) * out2 + j2 * s2 + p2) * out3) * out_step
                                    at = np.uint64(c * channel_pitch + (j1 - band_first) * acc_plane
                                                   + j2 * w3)
                                    if s3 == 1 and not channels_last:
                                        for t in range(row_length):
                                            put(out, row + t, acc[at + t], channel_bias, biased)
                                    elif s3 == 2 and not channels_last:
                                        odd = at + phase_pitch
                                        if interleave_vectors and half >= vector_run:
                                            # Whole vectors, the last one overlapping
                                            # its predecessor (the same values again):
                                            # a scalar tail would store most of a
                                            # 28-output row one element at a time.
                                            t = np.uint64(0)
                                            while True:
                                                t = min(t, half - vector_run)
                                                even_v = vector_load(acc, at + t, lanes)
                                                odd_v = vector_load(acc, odd + t, lanes)
                                                vector_store(out, row + t + t, vector_interleave(
                                                    even_v, odd_v, 0))
                                                vector_store(out, row + t + t + vector_run,
                                                             vector_interleave(even_v, odd_v, 1))
                                                t += vector_run
                                                if t >= half:
                                                    break
                                        else:
                                            for t in range(half):
                                                put(out, row + t + t, acc[at + t], channel_bias,
                                                    biased)
                                                put(out, row + t + t + one, acc[odd + t],
                                                    channel_bias, biased)
                                        if out3 % 2:
                                            put(out, row + half + half, acc[at + half],
                                                channel_bias, biased)
                                    else:
                                        for p3 in range(min(s3, out3)):
                                            into = row + np.uint64(p3) * out_step
                                            run = at + np.uint64(p3) * phase_pitch
                                            for t in range(np.uint64(counts[2, p3])):
                                                put(out, into + t * out_stride3, acc[run + t],
                                                    channel_bias, biased)

    return kernel


def _frozen(*arrays):
    for array in arrays:
        array.flags.writeable = False
    return arrays


@functools.lru_cache(maxsize=256)
def _row_tables(axes3: tuple[AxisPlan, ...], groups: int, ci: int, co: int):
    """Tables of :func:`_channels_last_kernel` (cached per shape; read-only).

    Per axis and phase: the tap count, each tap's input shift and its flat weight
    index ``((k1 * K2 + k2) * K3 + k3) * Ci * Co * G`` (summed over the axes).
    """
    phases = [_axis_phases(axis) for axis in axes3]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    stride_max = max(axis.stride for axis in axes3)
    kernel3 = tuple(a.kernel_size for a in axes3)
    scale = (kernel3[1] * kernel3[2] * ci * co * groups, kernel3[2] * ci * co * groups,
             ci * co * groups)
    tap_k = np.zeros((3, stride_max, widest), np.int64)
    tap_shift = np.zeros((3, stride_max, widest), np.int64)
    tap_count = np.zeros((3, stride_max), np.int64)
    for a, p in enumerate(phases):
        for c in p.classes:
            for i in range(c.count):
                phase = c.first + i
                tap_count[a, phase] = len(c.shifts)
                for m, (shift, k) in enumerate(zip(c.shifts, c.taps[i])):
                    tap_k[a, phase, m] = k * scale[a]
                    tap_shift[a, phase, m] = shift
    sizes = np.array((groups, ci, co) + tuple(a.input_size for a in axes3)
                     + tuple(a.output_size for a in axes3), np.int64)
    strides = np.array([a.stride for a in axes3], np.int64)
    return _frozen(sizes, strides, tap_k, tap_shift, tap_count)


def _helper_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _helper_ids.clear()  # only this pool's threads are steered
        _pool = ThreadPoolExecutor(_THREADS - 1, thread_name_prefix="convtranspose-direct")
    return _pool


#: Native ids of the current pool's helper threads (each adds its own as it takes work).
_helper_ids: set[int] = set()
#: Cleared when the system refuses to set a helper's CPU affinity.
_steering = True


def _forget_helpers() -> None:
    # A forked child has none of the parent's threads; its ids may name other threads.
    global _pool
    _pool = None
    _helper_ids.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


@functools.lru_cache(maxsize=1)
def _sched_getcpu():
    """libc's ``sched_getcpu`` (the calling thread's CPU), or None where it is missing."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = ()
    return function


def _steer_helpers_off_caller() -> None:
    """Let the helper threads run on any allowed CPU but the calling thread's.

    Linux wakes a thread on the waker's CPU when that CPU looks lightly loaded, as
    it does after the caller slept: the helper then shares one CPU with the caller
    until the load balancer moves it, milliseconds later, and a call of a few
    milliseconds runs at half speed.  Measured on a 2-vCPU KVM guest, stride-1
    ``direct-blocked`` after a 0.1 s pause: 7-12 ms without this, 6.0-6.5 with it
    (5.4-6.1 back to back).  The peers' worker threads spin for 10-60 ms after a
    call instead of sleeping at once (CPU time measured during a pause after one
    call: torch ~10 ms, onnxruntime 40-56).  Costs a few system calls per parallel
    call.
    """
    global _steering
    getcpu = _sched_getcpu()
    if getcpu is None or not _steering or not _helper_ids:
        return
    try:
        others = os.sched_getaffinity(0) - {getcpu()}
        for helper in tuple(_helper_ids) if others else ():
            try:
                os.sched_setaffinity(helper, others)
            except ProcessLookupError:  # a thread of a pool since dropped
                _helper_ids.discard(helper)
    except OSError:  # not allowed here (a sandbox): the scheduler decides alone
        _steering = False


def _parallel(function, count: int, threads: int) -> None:
    """``function(start, stop)`` over ``range(count)``, on up to ``threads`` threads.

    The range is cut into several pieces per thread that the threads (the calling
    one included) take in turn: on a machine shared with other work, a thread whose
    core is busy does fewer pieces instead of holding up the whole call.
    """
    threads = max(1, min(threads, _THREADS, count))
    if threads == 1:
        function(0, count)
        return
    pieces = min(count, threads * _PIECES_PER_THREAD)
    bounds = [count * i // pieces for i in range(pieces + 1)]
    taken = itertools.count()  # next() is atomic under the GIL

    def work():
        for i in iter(taken.__next__, None):
            if i >= pieces:
                return
            function(bounds[i], bounds[i + 1])

    def helper_work():
        _helper_ids.add(threading.get_native_id())
        work()

    _steer_helpers_off_caller()
    helpers = [_helper_pool().submit(helper_work) for _ in range(threads - 1)]
    work()
    for helper in helpers:
        helper.result()


@functools.lru_cache(maxsize=256)
def _window_tables(axes3: tuple[AxisPlan, ...], groups: int, ci: int, co: int):
    """Tables of :func:`_planes_kernel` (cached per shape; read-only).

    ``geometry[a]`` is (window size, first input index in the window, stride,
    output positions per phase); ``tap_offset`` is each tap's start in the
    flattened window, ``tap_k`` its flat kernel index ``k1 * K2 * K3 + k2 * K3 + k3``
    (summed over the axes); ``counts[a, p]`` the output positions of phase ``p``.
    """
    phases = [_axis_phases(axis) for axis in axes3]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    stride_max = max(axis.stride for axis in axes3)
    kernel3 = tuple(a.kernel_size for a in axes3)
    geometry = np.zeros((3, 4), np.int64)
    for a, (axis, p) in enumerate(zip(axes3, phases)):
        shifts = [shift for c in p.classes for shift in c.shifts] or [0]
        geometry[a] = (p.blocks + max(shifts) - min(shifts), min(shifts), axis.stride, p.blocks)
    window_strides = (geometry[1, 0] * geometry[2, 0], geometry[2, 0], 1)
    kernel_strides = (kernel3[1] * kernel3[2], kernel3[2], 1)
    tap_k = np.zeros((3, stride_max, widest), np.int64)
    tap_offset = np.zeros((3, stride_max, widest), np.int64)
    tap_count = np.zeros((3, stride_max), np.int64)
    counts = np.zeros((3, stride_max), np.int64)
    for a, (axis, p) in enumerate(zip(axes3, phases)):
        for phase in range(min(axis.stride, axis.output_size)):
            counts[a, phase] = -(-(axis.output_size - phase) // axis.stride)
        for c in p.classes:
            for i in range(c.count):
                phase = c.first + i
                tap_count[a, phase] = len(c.shifts)
                for m, (shift, k) in enumerate(zip(c.shifts, c.taps[i])):
                    tap_k[a, phase, m] = k * kernel_strides[a]
                    tap_offset[a, phase, m] = (shift - geometry[a, 1]) * window_strides[a]
    inputs = tuple(a.input_size for a in axes3)
    outputs = tuple(a.output_size for a in axes3)
    sizes = np.array((groups, ci, co, math.prod(inputs), math.prod(outputs), math.prod(kernel3))
                     + outputs + inputs, np.int64)
    return _frozen(sizes, geometry, counts, tap_k, tap_offset, tap_count)


#: The smallest sum of two nonzero bfloat16 operands' exponent fields (biased by 127)
#: for which ``vdpbf16ps`` is exact: every product, and so every partial sum, is then a
#: multiple of 2**-126 (8-bit significands: ``2**(e_a - 134) * 2**(e_b - 134)``), so
#: zero or normal, never a subnormal the instruction would flush to zero.
_PAIRS_EXPONENT_SUM = 142


def _pairs_exact(smallest_data: int, smallest_weight: int) -> bool:
    """Whether ``vdpbf16ps`` sums operands with these smallest nonzero exponent fields
    (:func:`_smallest_bfloat16_exponent`) exactly: no subnormal operand (the
    instruction reads it as zero) and no partial sum that could be subnormal
    (:data:`_PAIRS_EXPONENT_SUM`).  Infinities and NaNs do not matter: the
    instruction propagates them like an FMA.
    """
    return (smallest_data > 0 and smallest_weight > 0
            and smallest_data + smallest_weight >= _PAIRS_EXPONENT_SUM)


def _bfloat16_pairs(data, weights, dtype, lanes, derived) -> np.ndarray | None:
    """The data's bits (flat ``uint16``) if the plane kernel multiplies these operands as
    bfloat16 pairs (``vdpbf16ps``), else None.

    For bfloat16 data and weights summed in float32 on CPUs with AVX512_BF16, when
    :func:`_pairs_exact` holds: twice the float32 kernel's multiply-adds per
    instruction, with the same products and float32 roundings (only the order of the
    additions differs, as between any two algorithms).  One pass over the data's
    bits checks :func:`_pairs_exact` (the weights' is kept in ``derived``).
    """
    if not (dtype == np.float32 and lanes == 16 and data.dtype.name == "bfloat16"
            and weights.dtype.name == "bfloat16"):
        return None
    from ._numba_vectors import has_bfloat16_pairs

    if not has_bfloat16_pairs():
        return None
    key = ("pairs exact",)
    if key not in derived:
        derived[key] = _smallest_bfloat16_exponent(
            np.ascontiguousarray(weights).view(np.uint16).reshape(-1))
    bits = np.ascontiguousarray(data).view(np.uint16).reshape(-1)
    exact = _pairs_exact(int(_smallest_bfloat16_exponent(bits)), int(derived[key]))
    return bits if exact else None


def _store_mode(out_dtype: np.dtype, dtype: np.dtype) -> int:
    """The plane and ``direct-blocked`` kernels' ``mode`` for a result of ``out_dtype``
    from ``dtype`` sums."""
    if out_dtype == dtype:
        return _KEEP
    return _FLOAT16 if out_dtype == np.float16 else _BFLOAT16


def _direct_planes(data, weights, axes3, dtype, out, threads, channels_last, derived,
                   bias=None):
    lanes = planes_block_shape(np.dtype(dtype).itemsize, weights.shape[2])[0]
    source = _bfloat16_pairs(data, weights, dtype, lanes, derived)
    pairs = source is not None
    load_mode = _KEEP if pairs else _half_load(data.dtype)
    if load_mode != _KEEP:
        source = np.ascontiguousarray(data).view(np.uint16).reshape(-1)
    elif not pairs:
        if data.dtype != dtype or not data.flags.c_contiguous:
            data = np.ascontiguousarray(data, dtype)
        source = data.reshape(-1)
    mode = _store_mode(out.dtype, dtype)
    run = _plane_runner(data.shape[0], weights, axes3, dtype, threads, channels_last, derived,
                        pairs, mode, bias, load_mode)
    target = out.reshape(-1)
    run(source, target if mode == _KEEP else target.view(np.uint16))


def _half_load(data_dtype: np.dtype) -> int:
    """The plane kernel's ``load_mode`` for data of this dtype: half data is read from
    its bits (float16 only where the CPU converts it), anything else as it is."""
    if data_dtype == np.float16 and host_has_f16c():
        return _FLOAT16
    return _BFLOAT16 if data_dtype.name == "bfloat16" else _KEEP


def _plane_runner(batch, weights, axes3, dtype, threads, channels_last, derived, pairs,
                  mode=_KEEP, bias=None, load_mode=_KEEP):
    """``run(source, target)``: the plane kernel over flat data (its bits when ``pairs``
    or ``load_mode`` says so) into the flat result (its ``uint16`` bits when rounding to
    ``mode``, the ``bias`` added before), with everything but the data prepared: the
    reordered weights (kept in ``derived``), the tables, the schedule and the kernel.
    """
    from ._numba_vectors import vector_bytes

    groups, ci, co = weights.shape[:3]
    tables = _window_tables(axes3, groups, ci, co)
    lanes, co_block, most_vectors = planes_block_shape(np.dtype(dtype).itemsize, co)
    key = ("planes", "pairs" if pairs else np.dtype(dtype).str, co_block)
    w = derived.get(key)
    if w is None:  # FCN-32x's 1.8 M weights: 3 ms
        if pairs:
            bits = np.ascontiguousarray(weights).view(np.uint16)
            w = _blocked_weights(bits.reshape(groups, ci, co, -1), co_block, 2).view(np.uint32)
        else:
            w = _blocked_weights(np.ascontiguousarray(weights, dtype).reshape(groups, ci, co, -1),
                                 co_block, 1)
        w = derived[key] = _frozen(w)[0]
    units = -(-ci // 2) if pairs else ci  # window elements per position
    geometry = tables[1]
    blocks1 = int(geometry[0, 3])
    plane = int(geometry[1, 0] * geometry[2, 0])
    tail = int((geometry[1, 3] - 1) * geometry[2, 0] + geometry[2, 3])
    # Bands of the first axis: window and accumulator of about _BAND_ELEMENTS, and at
    # least two items per thread (FCN-32x, one plane: 23 ms on one thread or two).
    widest = _BAND_ELEMENTS // (plane * (units + co_block * int(geometry[2, 2])))
    planes = batch * groups
    min_bands = -(-2 * threads // max(1, planes)) if threads > 1 else 1

    def schedule(lanes):
        # 2-D (the unit middle axis: window rows `plane` apart) may take blocks of rows.
        row_segments = -(-int(geometry[2, 3]) // lanes) if geometry[1, 0] == 1 else 0
        return plane_schedule(blocks1, plane, tail, widest, min_bands, lanes, most_vectors,
                              co_block, row_segments)

    # Half vectors where they compute fewer positions (AVX-512's 32 registers keep the
    # accumulators; bfloat16 pairs take whole vectors).
    lanes, (band, vectors, _, segments) = plane_lanes(schedule, lanes,
                                                      vector_bytes() == 64 and not pairs)
    items = planes * -(-blocks1 // band)
    kernel = _planes_kernel(lanes, co_block, vectors, pairs, segments, mode, load_mode)
    added = np.empty(0, dtype) if bias is None or mode == _KEEP else np.ascontiguousarray(
        bias, dtype)

    def run(source, target):
        _parallel(lambda a, b: kernel(source, w, target, added, *tables, band, channels_last,
                                      a, b), items, threads)

    return run


def _direct_line_segments(data, weights, axis, dtype, out, threads, channels_last, strided,
                          derived, bias=None):
    """A long 1-D layer cut into segments of its output, each a plane kernel call.

    One line's window holds every input channel's whole line (HiFi-GAN 256->128 L65536:
    64 MB, far out of cache) and is one piece of work (one thread).  Segment ``[y0,
    y1)`` of the output reads inputs ``[x0, x1)`` only, and is the layer ``AxisPlan(x1 -
    x0, K, s, d, offset + y0 - x0 * s, y1 - y0)`` of that slice; the segments (a
    multiple of the stride long, so the inner ones share one plan) run on the threads
    in turn, each writing its own slice of ``out``.
    """
    size, kernel, stride = axis.input_size, axis.kernel_size, axis.stride
    reach = (kernel - 1) * axis.dilation  # output y reads inputs (y + offset - reach) / s on
    length = stride * line_segment_inputs(weights.shape[1], stride)
    starts = range(0, axis.output_size, length)

    def segment(i):
        y0 = starts[i]
        y1 = min(axis.output_size, y0 + length)
        x0 = min(size, max(0, -(-(y0 + axis.offset - reach) // stride)))
        x1 = max(x0, min(size, (y1 - 1 + axis.offset) // stride + 1))
        into = out[..., y0:y1, :] if channels_last else out[..., y0:y1]
        if x1 == x0:  # no input reaches it: zero sums (plus the bias when rounding here)
            sums = np.zeros(into.shape, dtype)
            if bias is not None and out.dtype != dtype:
                sums += np.asarray(bias, dtype).reshape((-1,) if channels_last else (-1, 1))
            into[...] = sums
            return
        plan = AxisPlan(x1 - x0, kernel, stride, axis.dilation, axis.offset + y0 - x0 * stride,
                        y1 - y0)
        part = data[..., x0:x1, :] if channels_last else data[..., x0:x1]
        result = np.empty(into.shape, out.dtype)
        _direct_planes(part, weights, _three_axes((plan,)), dtype, result, 1, strided, derived,
                       bias)
        into[...] = result

    def work(first, stop):
        for i in range(first, stop):
            segment(i)

    work(0, 1)  # fills `derived` (the reordered weights) before the threads share it
    if len(starts) > 1:
        _parallel(lambda first, stop: work(first + 1, stop + 1), len(starts) - 1, threads)


#: The row kernel's window (the input rows of a band of output rows, every input
#: channel's, padded) holds at most this many bytes: it stays in the core's L2, and
#: the threads' windows under the output's size.
ROWS_WINDOW_BYTES = 1 << 18

#: The row kernel is taken for layers with channels when the vectors along its rows
#: compute at most this many times the row's outputs (DCGAN 512->256's rows of 8
#: outputs per phase in 16 lanes compute 2x, and took 1.5x the plane kernel's time).
ROWS_MAX_WASTE = 1.25

#: Last-axis strides at which layers with channels take the row kernel (depthwise ones:
#: 1 and 2).  ``benchmarks/row_kernel.py --seed 1 --layers 24 --any-stride`` (two
#: threads, alternating with the plane kernel): stride 2 took 0.79x the plane kernel's
#: time (geometric mean of 14 layers, 0.36-1.18x), stride 1 1.03x (10, 0.62-1.71x).
ROWS_CHANNEL_STRIDES = (2,)


@functools.lru_cache(maxsize=256)
def _axis_tap_lists(axis: AxisPlan) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per output phase of ``axis``, its taps as ``(input shift, kernel index)`` pairs."""
    return tuple(tuple(zip(c.shifts, c.taps[i])) for c in _axis_phases(axis).classes
                 for i in range(c.count))


def _rows_lanes(dtype) -> int:
    from ._numba_vectors import vector_bytes

    return vector_bytes() // np.dtype(dtype).itemsize


def _phase_vectors(last: AxisPlan, lanes: int) -> int:
    """Vectors of ``lanes`` outputs per phase along a row of the last axis."""
    return -(-(-(-last.output_size // last.stride)) // lanes)


@functools.lru_cache(maxsize=256)
def _merged_taps(last: AxisPlan) -> tuple[tuple[int, int, int], ...] | None:
    """The taps of ``last``'s two phases in pairs, ``(delta, k_even, k_odd)`` each,
    where the row kernel can sum both phases in the same vectors; None elsewhere.

    Output ``2j + p`` of phase ``p`` reads input ``j + shift`` for each of its taps.
    Paired in order of their shifts, an even phase's tap of shift ``a`` and an odd one's
    of ``b`` in ``{a, a + 1}`` both read input ``(y + delta) // 2`` from output ``y``,
    with ``delta = a + b``: from a window holding every input twice (``E[n] = x[n // 2]``),
    one load at ``y + delta`` gives the pair's inputs for consecutive outputs ``y``, and
    alternating weights (:func:`convtranspose._numba_vectors.vector_splat_pair`) their
    products.  So stride 2, and as many taps in either phase (kernels of even size,
    dilation 1)."""
    per_phase = _axis_tap_lists(last)
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


def _rows_merged(last: AxisPlan, lanes: int, co: int, data: int = _KEEP) -> bool:
    """Whether the row kernel sums ``last``'s two phases in the same vectors
    (:func:`_merged_taps`): with AVX-512's registers, more than one output channel per
    group, data not multiplied in bfloat16 pairs, and rows that then take fewer lanes
    (:func:`_merged_lanes`).  Zen 4, two threads, alternating with the phases apart
    (ms): grouped 28^2 -> 56^2 (56 outputs: three vectors and a half, where the
    phases take 2 x 2 vectors for 2 x 28) 8.55 against 10.12, float16 7.65 against 8.82.
    With as many lanes either way they lost 2-12% (DCGAN 256->128 21.7 against 19.6,
    U-Net 5.80 against 5.64): a separate broadcast per pair of weights and a window
    twice as long; and depthwise ones, bound by their loads, 4% (1.47 against 1.41)."""
    from ._numba_vectors import vector_bytes

    return (vector_bytes() == 64 and co > 1 and data != _BFLOAT16
            and _merged_taps(last) is not None
            and _merged_lanes(last, lanes) < 2 * _phase_vectors(last, lanes) * lanes)


def _merged_vectors(last: AxisPlan, lanes: int) -> int:
    """Vectors of ``lanes`` consecutive outputs along a row of the last axis."""
    return -(-last.output_size // lanes)


def _merged_lanes(last: AxisPlan, lanes: int) -> int:
    """Lanes a row of both phases takes (:func:`_merged_taps`): whole vectors, the last
    one half a vector (half the cost with AVX-512 on Zen 4) where that holds its outputs."""
    whole, rest = divmod(last.output_size, lanes)
    return whole * lanes + (0 if not rest else lanes // 2 if rest <= lanes // 2 else lanes)


@functools.lru_cache(maxsize=256)
def _rows_window_width(last: AxisPlan, lanes: int, merged: bool = False) -> tuple[int, int]:
    """(zeros before the input, row width) of the row kernel's window rows: every tap
    of every phase reads inside them for whole vectors of each phase's outputs (of
    the row's outputs, from inputs held twice, if ``merged``: :func:`_merged_taps`)."""
    if merged:
        deltas = [delta for delta, _, _ in _merged_taps(last)]
        left = max(0, -min(deltas))
        return left, left + max(2 * last.input_size,
                                max(deltas) + _merged_vectors(last, lanes) * lanes)
    shifts = [shift for taps in _axis_tap_lists(last) for shift, _ in taps] or [0]
    left = max(0, -min(shifts))
    return left, left + max(last.input_size, max(shifts) + _phase_vectors(last, lanes) * lanes)


def rows_apply(weights_shape, axes3: tuple[AxisPlan, ...], channels_last: bool, data_dtype,
               dtype, out_dtype) -> bool:
    """Whether numba ``direct`` takes its row kernel (:func:`_rows_source`) for this layer.

    Channels first; data, sums and result all float32 or all float64, or float32 sums
    of float16 or bfloat16 data or into a float16 or bfloat16 result (:func:`_rows_take`;
    bfloat16 data the plane kernel's way, in pairs); a last axis of stride 1 or 2 with at least
    a vector of outputs; one output row's inputs within :data:`ROWS_WINDOW_BYTES`; and,
    but for depthwise layers, a last-axis stride in :data:`ROWS_CHANNEL_STRIDES` and rows
    that waste at most :data:`ROWS_MAX_WASTE`.  Measured against the plane kernel (Zen 4, two
    threads, alternating): depthwise 0.42-0.55x the time, grouped 0.75-0.84x, DCGAN
    256->128 0.83-0.88x, DCGAN 128->3 0.68-0.86x, dilated 0.90-0.95x, U-Net 0.91x, 3D k2
    0.84x, FCN-2x 0.96-1.07x; stride-1 1.04x.
    """
    dtype = np.dtype(dtype)
    if (channels_last or dtype not in (np.float32, np.float64) or axes3[2].stride > 2
            or not _rows_take(data_dtype, dtype, True) or not _rows_take(out_dtype, dtype, False)):
        return False
    lanes = _rows_lanes(dtype)
    last = axes3[2]
    if last.output_size < lanes:
        return False
    merged = _rows_merged(last, lanes, weights_shape[2], _half_load(data_dtype))
    row_bytes = weights_shape[1] * _rows_window_width(last, lanes, merged)[1] * dtype.itemsize
    computed = last.stride * _phase_vectors(last, lanes) * lanes  # outputs per row
    fits = _row_bands(axes3, ROWS_WINDOW_BYTES // row_bytes) is not None
    return fits and (tuple(weights_shape[1:3]) == (1, 1) or (
        last.stride in ROWS_CHANNEL_STRIDES and computed <= ROWS_MAX_WASTE * last.output_size))


def _rows_take(array_dtype, dtype: np.dtype, data: bool) -> bool:
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
        return host_has_f16c()
    if array_dtype.name != "bfloat16":
        return False
    from ._numba_vectors import has_bfloat16_pairs

    return not data or (_rows_lanes(dtype) == 16 and has_bfloat16_pairs())


def rows_co_block(co: int) -> int:
    """Output channels per pass of the row kernel: 4 (3 where that pads none and 4
    would), all of them when fewer."""
    return min(co, 3 if co % 4 and co % 3 == 0 else 4)


def rows_block(co: int, last: AxisPlan, lanes: int, merged: bool = False) -> tuple[int, int]:
    """``(co_block, vectors)`` of the row kernel: output channels per pass and vectors
    of outputs per phase of ``last`` per pass (of the row's outputs, if ``merged``:
    :func:`_merged_taps`, 24 accumulators).

    The accumulators (``co_block`` x phases with taps x ``vectors``) take most of the
    registers: up to 24 of AVX-512's 32 (:func:`rows_co_block` channels).  With AVX2's
    16, two phases of 2 channels x 2 vectors where a phase has two vectors of outputs:
    8 accumulators, and per tap and input channel 2 vector loads and 2 broadcasts for
    4 multiply-adds, where 4 channels x 1 vector needs 5.  Alternating on Zen 3 (two
    threads, ms, 4 x 1 against 2 x 2): DCGAN 256->128 NCX 42.4 / 34.1-36.7 (two runs),
    U-Net NCX 13.7 / 11.8, grouped NCX 19.0 / 18.4.
    Twelve accumulators, the most the registers hold, ran slower still (U-Net 3 x 2
    15.6, 2 x 3 16.2 ms; DCGAN 256->128 3 x 2 57.6): LLVM spills them.
    """
    from ._numba_vectors import vector_bytes

    if merged:
        co_block = rows_co_block(co)
        return co_block, max(1, min(_merged_vectors(last, lanes), 24 // co_block))
    live = sum(1 for taps in _axis_tap_lists(last) if taps) or 1  # phases with sums
    total = _phase_vectors(last, lanes)
    if vector_bytes() < 64 and live == 2 and co >= 4 and total >= 2:
        return 2, 2
    budget = 24 if vector_bytes() == 64 else 12
    co_block = rows_co_block(co)
    return co_block, max(1, min(total, budget // (live * co_block)))


def _rows_source(lanes: int, last: AxisPlan, ci: int, co: int, co_block: int, vectors: int,
                 data: int = _KEEP, result: int = _KEEP, biased: bool = False,
                 merged: bool = False) -> str:
    """Source of the channels-first row kernel for the last axis ``last``, ``ci`` input
    and ``co`` output channels per group, ``co_block`` output channels per pass.
    ``data`` (the plane kernel's load modes, :func:`_half_load`): ``_FLOAT16``, the data
    are float16 bits, widened as the window is filled; ``_BFLOAT16``, bfloat16 bits,
    packed as the window is filled, input channels ``2u`` and ``2u + 1`` in one
    ``uint32`` (zeros for a missing ``2u + 1``), and multiplied a pair at a time
    (:func:`vector_dot_pairs`, 16 lanes, weights packed alike).  ``result`` (its store
    modes, :func:`_store_mode`): the float32 sums are rounded to the float16 or
    bfloat16 bits of ``out`` as they are stored; ``biased``:
    the bias is added to the sums before (before the one rounding).

    The last axis and the channel counts are compiled in: a row's taps of the last
    axis are straight-line code, and only the first two axes' taps (a table per output
    row) and the input channels are looped over.  Per item (a (sample, group) plane, a
    band of its output rows (:func:`_row_bands`) and a range of its blocks of output
    channels) the input rows the band reads are copied, every input channel's, into a
    window whose rows have zeros around the input (:func:`_rows_window_width`).
    Output row ``q`` is then summed in passes of ``vectors`` vectors per phase of the
    last axis and ``co_block`` channels (:func:`rows_block`), all in registers: phase
    ``p`` computes outputs ``s * j + p`` from window elements ``j + shift`` (contiguous
    in ``j``), one broadcast weight per channel and tap; a phase without taps (a
    dilation's) is a zero vector, not accumulators.  The phases are stored
    interleaved.  The last pass takes the vectors left, and its last, partial vector
    of outputs is stored shifted back to end at the row's end (:func:`vector_shift_in`).
    Weights are laid out ``(G, blocks, K1 * K2, Ci, K3, co_block)`` (:func:`_rows_weights`).

    ``merged`` (:func:`_rows_merged`): the window holds every input twice, and a pass
    sums ``vectors`` vectors of consecutive outputs of both phases, each pair of taps
    (:func:`_merged_taps`) one load of the window times alternating weights, laid
    out ``(G, blocks, K1 * K2, Ci, pairs, co_block, 2)``.  The row's last vector is
    half a vector where that holds its outputs.
    """
    per_phase = _axis_tap_lists(last)
    stride, out3, size3 = len(per_phase), last.output_size, last.input_size
    k3_count = last.kernel_size
    pairs = data == _BFLOAT16
    units = -(-ci // 2) if pairs else ci  # window rows (channels or pairs) per input row
    total = _merged_vectors(last, lanes) if merged else _phase_vectors(last, lanes)
    passes = -(-total // vectors)
    last_start = (passes - 1) * vectors * lanes  # the last pass's first j (merged: y)
    left, width = _rows_window_width(last, lanes, merged)
    blocks = -(-co // co_block)
    tap_weights = units * k3_count * co_block  # weights per tap of the first two axes

    load = "vector_load_float16" if data == _FLOAT16 else "vector_load"
    store, reload = {_KEEP: ("vector_store", "vector_load"),
                     _FLOAT16: ("vector_store_float16", "vector_load_float16"),
                     _BFLOAT16: ("vector_store_bfloat16", "vector_load_bfloat16")}[result]
    multiply_add = "vector_dot_pairs" if pairs else "vector_fma"
    lines = ["def rows(source, weights, out, bias, window, row_count, row_in, row_k,",
             "         band_length, band_first, band_stop, groups, ranges, block_weights,",
             "         window_rows, rows_in, rows_out, start, stop):",
             "    bands = band_first.size",
             "    for item in range(start, stop):",
             "        plane, part, band = item // (ranges * bands), item // bands % ranges, "
             "item % bands",
             "        first = band_first[band]",
             f"        read = plane * {ci} * rows_in * {size3}",
             f"        for c in range({units}):",
             "            for row in range(first, band_stop[band]):",
             f"                at = read + ({2 if pairs else 1} * c * rows_in + row) * {size3}",
             f"                to = (c * window_rows + row - first) * {width} + {left}"]
    rows_in_size = f"rows_in * {size3}"  # from one channel's rows to the next's

    def fill(indent: str, offset: str, count: int) -> list[str]:
        if merged:  # each input twice
            loaded = f"{indent}x = {load}(source, at + {offset}, {count})"
            if count == 1:
                return [loaded, f"{indent}vector_store(window, to + 2 * {offset}, x)",
                        f"{indent}vector_store(window, to + 2 * {offset} + 1, x)"]
            return [loaded,
                    f"{indent}vector_store(window, to + 2 * {offset}, vector_interleave(x, x, 0))",
                    f"{indent}vector_store(window, to + 2 * {offset} + {count}, "
                    "vector_interleave(x, x, 1))"]
        if not pairs:
            return [f"{indent}vector_store(window, to + {offset}, {load}(source, at + {offset}, "
                    f"{count}))"]
        pack = (f"vector_pack_pairs(source, at + {offset}, at + {rows_in_size} + {offset}, "
                f"{count})")
        if ci % 2 == 0:
            return [f"{indent}vector_store(window, to + {offset}, {pack})"]
        return [f"{indent}if c < {units - 1}:",
                f"{indent}    vector_store(window, to + {offset}, {pack})",
                f"{indent}else:",  # the last channel alone, zeros for its pair
                f"{indent}    vector_store(window, to + {offset}, vector_widen_halves(source, "
                f"at + {offset}, {count}))"]

    if size3 >= lanes:
        lines.append(f"                for t in range(0, {size3 - lanes + 1}, {lanes}):")
        lines += fill(" " * 20, "t", lanes)
        lines += fill(" " * 16, str(size3 - lanes), lanes)
    else:
        lines.append(f"                for t in range({size3}):")
        lines += fill(" " * 20, "t", 1)
    lines += [f"        for block in range(part * {blocks} // ranges, (part + 1) * {blocks} "
              "// ranges):",
              f"            weight_at = ((plane % groups) * {blocks} + block) * block_weights",
              f"            write = (plane * {co} + block * {co_block}) * rows_out * {out3}",
              "            for q in range(band * band_length, min(rows_out, (band + 1) * "
              "band_length)):",
              f"                line = write + q * {out3}"]

    def tap_loop(indent: str, offset: str) -> tuple[list[str], str]:
        """The head of the loop over an output row's input rows (and input channels),
        its window reads from output ``offset`` of the pass on, and its body's indent."""
        head = [f"{indent}for r in range(row_count[q]):",
                f"{indent}    at = (row_in[q, r] - first) * {width} + {left} + {offset}",
                f"{indent}    k = weight_at + row_k[q, r] * {tap_weights}"]
        inner = indent + "    "
        if units > 1:
            head.append(f"{inner}for _ in range({units}):")
            inner += "    "
        return head, inner

    def next_channel(inner: str) -> list[str]:
        if units == 1:
            return []
        return [f"{inner}at += window_rows * {width}", f"{inner}k += {k3_count * co_block}"]

    def store_channels(indent: str, chunks: list[list[str]], sizes: list[int], start: str,
                       first: int, tail: bool) -> list[str]:
        """Store each output channel's ``chunks`` (vectors of ``sizes`` lanes, plus the
        bias) from output ``start`` of its row on (output ``first`` in the tail pass,
        whose partial last vector is shifted back to end at the row's end)."""
        body = []
        for c, channel_chunks in enumerate(chunks):
            into = indent
            if co % co_block:  # the last block's padding channels are not stored
                body.append(f"{indent}if block * {co_block} + {c} < {co}:")
                into += "    "
            if biased:  # added before the one rounding, as to the float32 result
                body += [f"{into}shift_{size} = vector_splat_at(bias, (plane % groups) * {co} "
                         f"+ block * {co_block} + {c}, {size})" for size in sorted(set(sizes))]
                channel_chunks = [f"vector_add({chunk}, shift_{size})"
                                  for chunk, size in zip(channel_chunks, sizes)]
            channel_line = f"line + {c} * rows_out * {out3}"
            for i, (chunk, size) in enumerate(zip(channel_chunks, sizes)):
                begin = first + i * lanes  # the chunk's place in the row (tail)
                if not tail or begin + size <= out3:
                    body += [f"{into}chunk_{i} = {chunk}",
                             f"{into}{store}(out, {channel_line} + {start} + {i * lanes}, "
                             f"chunk_{i})"]
                elif begin < out3:
                    # The vector before it: the pass's previous one if as wide, or the
                    # outputs stored before it (by the passes before, or this one).
                    before = f"chunk_{i - 1}" if i and sizes[i - 1] == size else (
                        f"{reload}(out, {channel_line} + {begin - size}, {size})")
                    body.append(f"{into}{store}(out, {channel_line} + {out3 - size}, "
                                f"vector_shift_in({before}, {chunk}, {out3 - begin}))")
        return body

    def one_pass(j0: str, indent: str, tail: bool) -> list[str]:
        count = total - (passes - 1) * vectors if tail else vectors  # vectors per phase
        zero = f"vector_zero(bias, {lanes})"  # the sums' dtype, even with no bias
        sums = [[[f"sum_{c}_{p}_{v}" if taps else zero for v in range(count)]
                 for p, taps in enumerate(per_phase)] for c in range(co_block)]
        body = [f"{indent}{name} = {zero}" for channel in sums for row in channel
                for name in row if name != zero]
        head, inner = tap_loop(indent, j0)
        body += head
        for p, taps in enumerate(per_phase):
            for shift, k3 in taps:
                for v in range(count):
                    body.append(f"{inner}x = vector_load(window, at + {shift + v * lanes}, "
                                f"{lanes})")
                    body += [f"{inner}{sums[c][p][v]} = {multiply_add}(x, vector_splat_at("
                             f"weights, k + {k3 * co_block + c}, {lanes}), {sums[c][p][v]})"
                             for c in range(co_block)]
        body += next_channel(inner)
        if stride == 2:
            chunks = [[f"vector_interleave({sums[c][0][v]}, {sums[c][1][v]}, {half})"
                       for v in range(count) for half in (0, 1)] for c in range(co_block)]
        else:
            chunks = [[sums[c][0][v] for v in range(count)] for c in range(co_block)]
        return body + store_channels(indent, chunks, [lanes] * len(chunks[0]),
                                     f"{stride} * {j0}", stride * last_start, tail)

    def merged_pass(y0: str, indent: str, tail: bool) -> list[str]:
        count = total - (passes - 1) * vectors if tail else vectors
        sizes = [lanes] * count
        if tail and 0 < out3 - (last_start + (count - 1) * lanes) <= lanes // 2:
            sizes[-1] = lanes // 2  # as _merged_lanes counts it
        sums = [[f"sum_{c}_{v}" for v in range(count)] for c in range(co_block)]
        body = [f"{indent}{sums[c][v]} = vector_zero(bias, {size})"
                for c in range(co_block) for v, size in enumerate(sizes)]
        head, inner = tap_loop(indent, y0)
        body += head
        for t, (delta, _, _) in enumerate(_merged_taps(last)):
            for v, size in enumerate(sizes):
                body.append(f"{inner}x = vector_load(window, at + {delta + v * lanes}, {size})")
                body += [f"{inner}{sums[c][v]} = vector_fma(x, vector_splat_pair(weights, "
                         f"k + {(t * co_block + c) * 2}, {size}), {sums[c][v]})"
                         for c in range(co_block)]
        body += next_channel(inner)
        return body + store_channels(indent, sums, sizes, y0, last_start, tail)

    run_pass = merged_pass if merged else one_pass
    if last_start:
        lines.append(f"                for j0 in range(0, {last_start}, {vectors * lanes}):")
        lines += run_pass("j0", " " * 20, False)
    lines += run_pass(str(last_start), " " * 16, True)
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=64)
def _rows_kernel(lanes: int, last: AxisPlan, ci: int, co: int, co_block: int, vectors: int,
                 data: int = _KEEP, result: int = _KEEP, biased: bool = False,
                 merged: bool = False):
    from ._numba_vectors import compile_source

    return compile_source(_rows_source(lanes, last, ci, co, co_block, vectors, data, result,
                                       biased, merged), "rows")


@functools.lru_cache(maxsize=256)
def _output_row_taps(axes3: tuple[AxisPlan, ...]):
    """Per output row ``q = y1 * Y2 + y2``: how many input rows it reads, which (``x1
    * X2 + x2``) and the index ``k1 * K2 + k2`` of each one's tap; read-only."""
    first, second, _ = axes3
    taps1, taps2 = _axis_tap_lists(first), _axis_tap_lists(second)
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
    return _frozen(count, row_in, row_k)


@functools.lru_cache(maxsize=256)
def _row_bands(axes3: tuple[AxisPlan, ...], most_rows: int):
    """``(length, first, stop, rows)``: output rows in bands of ``length`` whose input
    rows ``[first[b], stop[b])`` (per channel) number at most ``most_rows``, the longest
    such bands (halving from all rows), and the most input rows a band reads (at least
    1: a window's rows); None when a single output row reads more."""
    count, row_in, _ = _output_row_taps(axes3)
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
            return length, *_frozen(first, stop), max(1, rows)
        if length == 1:
            return None
        length = -(-length // 2)


def _rows_weights(weights, co_block: int, dtype, pairs: bool = False,
                  merged: tuple[tuple[int, int, int], ...] | None = None) -> np.ndarray:
    """(G, Ci, Co, K1, K2, K3) -> flat (G, Co blocks, K1 * K2, Ci, K3, co_block), zeros
    past Co; with ``pairs`` (bfloat16 weights) the bits of input channels ``2u`` and
    ``2u + 1`` packed in one ``uint32`` (zeros for a missing ``2u + 1``), ``Ci / 2``
    of them; with ``merged`` (:func:`_merged_taps`), ``K3`` as (tap pairs, co_block,
    2): each pair's even and odd tap side by side."""
    groups, ci, co = weights.shape[:3]
    k12, k3 = math.prod(weights.shape[3:-1]), weights.shape[-1]
    if pairs:
        bits = np.zeros((groups, ci + ci % 2) + weights.shape[2:], np.uint32)
        bits[:, :ci] = np.ascontiguousarray(weights).view(np.uint16)
        weights, dtype, ci = bits[:, 0::2] | bits[:, 1::2] << 16, np.uint32, bits.shape[1] // 2
    blocks = -(-co // co_block)
    padded = np.zeros((groups, ci, blocks * co_block, k12, k3), dtype)
    padded[:, :, :co] = weights.reshape(groups, ci, co, k12, k3)
    blocked = padded.reshape(groups, ci, blocks, co_block, k12, k3).transpose(0, 2, 4, 1, 5, 3)
    if merged:
        paired = [[even, odd] for _, even, odd in merged]
        blocked = blocked[:, :, :, :, paired].swapaxes(-1, -2)
    return np.ascontiguousarray(blocked).reshape(-1)


def _rows_runner(batch, weights, axes3, dtype, threads, derived, data=_KEEP, result=_KEEP,
                 bias=None):
    """``run(data, out)``: the row kernel (:func:`rows_apply`) into ``out`` of ``dtype``,
    with the reordered weights (kept in ``derived``), the tables and the kernel
    prepared.  ``data`` (:func:`_half_load`): the data are float16, or bfloat16
    multiplied in pairs (:func:`_bfloat16_pairs` must hold); ``result``
    (:func:`_store_mode`): ``out`` is float16 or bfloat16, the sums rounded into it
    bit for bit as ``astype`` rounds the float32 result; ``bias`` (``(G*Co,)`` or None)
    is added to the sums before."""
    groups, ci, co = weights.shape[:3]
    lanes = _rows_lanes(dtype)
    merged = _rows_merged(axes3[2], lanes, co, data)
    co_block, vectors = rows_block(co, axes3[2], lanes, merged)
    pairs = data == _BFLOAT16
    biased = bias is not None
    shift = np.ascontiguousarray(bias, dtype) if biased else np.empty(0, dtype)
    kernel = _rows_kernel(lanes, axes3[2], ci, co, co_block, vectors, data, result, biased,
                          merged)
    key = ("rows", "pairs" if pairs else np.dtype(dtype).str, co_block, merged)
    w = derived.get(key)
    if w is None:
        w = derived[key] = _frozen(_rows_weights(weights, co_block, dtype, pairs,
                                                 _merged_taps(axes3[2]) if merged else None))[0]
    tables = _output_row_taps(axes3)
    rows_in = axes3[0].input_size * axes3[1].input_size
    rows_out = axes3[0].output_size * axes3[1].output_size
    width = _rows_window_width(axes3[2], lanes, merged)[1]
    units, window_dtype = (-(-ci // 2), np.uint32) if pairs else (ci, dtype)
    length, first, stop, window_rows = _row_bands(
        axes3, ROWS_WINDOW_BYTES // (units * width * np.dtype(window_dtype).itemsize))
    planes = batch * groups
    block_weights = w.size // (groups * -(-co // co_block))
    # A plane's blocks of output channels in ranges, for work on every thread (each
    # item fills its window).
    items = planes * first.size
    ranges = max(1, min(-(-co // co_block), -(-_PIECES_PER_THREAD * threads // items)))
    geometry = (groups, ranges, block_weights, window_rows, rows_in, rows_out)

    data_bits = data != _KEEP

    def run(data, out):
        source, target = np.ascontiguousarray(data).reshape(-1), out.reshape(-1)
        source = source.view(np.uint16) if data_bits else source
        target = target.view(np.uint16) if result != _KEEP else target
        windows = threading.local()  # one per thread, not per piece

        def work(a, b):
            if not hasattr(windows, "array"):
                windows.array = np.zeros(units * window_rows * width, window_dtype)
            kernel(source, w, target, shift, windows.array, *tables, length, first, stop,
                   *geometry, a, b)

        _parallel(work, items * ranges, threads)

    return run


def _direct_channels_last(data, weights, axes3, dtype, out, threads):
    groups, ci, co = weights.shape[:3]
    tables = _row_tables(axes3, groups, ci, co)
    kernel3 = tuple(a.kernel_size for a in axes3)
    # (G, Ci, Co, K...) -> (K1, K2, K3, Ci, Co, G)
    w = np.ascontiguousarray(np.moveaxis(weights.reshape((groups, ci, co) + kernel3), 0, -1)
                             .transpose(2, 3, 4, 0, 1, 5), dtype).reshape(-1)
    if data.dtype != dtype or not data.flags.c_contiguous:
        data = np.ascontiguousarray(data, dtype)
    source = data.reshape(-1)
    target = out.reshape(-1)
    from ._numba_vectors import vector_bytes

    lanes = vector_bytes() // np.dtype(dtype).itemsize
    kernel = _channels_last_kernel(ci, co, lanes) if ci * co <= 4 else _channels_last_kernel(
        0, 0, lanes)
    _parallel(lambda a, b: kernel(source, w, target, *tables, a, b),
              data.shape[0] * axes3[0].output_size * axes3[1].output_size, threads)


def _three_axes(axes) -> tuple[AxisPlan, ...]:
    """The axes padded to three with unit axes.

    The last one stays last (the contiguous one); in 2-D the unit axis goes second,
    so that the first axis (cut into bands, or split between lines) is a real one.
    """
    unit = AxisPlan(1, 1, 1, 1, 0, 1)
    if len(axes) == 1:
        return (unit, unit, axes[0])
    return (axes[0],) + (unit,) * (3 - len(axes)) + tuple(axes[1:])


def _plane_strided(groups: int, ci: int, co: int, channels_last: bool) -> bool:
    """Whether the plane kernel reads and writes this layer with the channel stride:
    channels-last layers whose channels are too few for vectors along them (one
    channel: the same memory layout as channels first)."""
    return channels_last and (groups * ci > 1 or groups * co > 1)


def _threads(batch: int, weights_shape: tuple[int, ...], axes) -> int:
    groups, ci, co = weights_shape[:3]
    out_size = batch * groups * co * math.prod(axis.output_size for axis in axes)
    return _THREADS if direct_worth_threads(out_size, ci, axes) else 1


def direct_phase(data, weights, axes, dtype, channels_last, out, derived=None, bias=None):
    """Fill ``out`` (the layout of ``data``) with the transposed convolution.

    ``out`` has the accumulation ``dtype``, or, with the plane kernel (not
    :func:`convtranspose._kernel.direct_per_position`), is float16 or bfloat16 (with
    float32 ``dtype``): then the sums, plus ``bias`` (``(G*Co,)``, read only then),
    are rounded once into it as they are stored, bit for bit as ``astype`` rounds
    the float32 result.  ``derived``: a dict kept with these weights across calls
    (the caller's filter memo), where the plane kernel keeps its reordered weights;
    None: reorder anew.
    """
    groups, ci, co = weights.shape[:3]
    axes3 = _three_axes(axes)
    threads = _threads(data.shape[0], weights.shape, axes)
    target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    if direct_per_position(groups, ci, co, channels_last):
        _direct_channels_last(data, weights, axes3, dtype, target, threads)
    else:
        strided = _plane_strided(groups, ci, co, channels_last)
        derived = {} if derived is None else derived
        if len(axes) == 1 and line_segmented(axes[0], ci):
            _direct_line_segments(data, weights, axes[0], dtype, target, threads, channels_last,
                                  strided, derived, bias)
        elif rows_apply(weights.shape, axes3, channels_last, data.dtype, dtype, target.dtype):
            _direct_rows(data, weights, axes3, dtype, target, threads, derived, bias)
        else:
            _direct_planes(data, weights, axes3, dtype, target, threads, strided, derived, bias)
    if target is not out:
        np.copyto(out, target)


def _direct_rows(data, weights, axes3, dtype, out, threads, derived, bias=None):
    """The row kernel, or the plane kernel for bfloat16 operands it cannot multiply in
    pairs exactly (:func:`_bfloat16_pairs`)."""
    load_mode = _half_load(data.dtype)  # rows_apply ruled out float16 without F16C
    if load_mode == _BFLOAT16 and _bfloat16_pairs(data, weights, dtype, 16, derived) is None:
        _direct_planes(data, weights, axes3, dtype, out, threads, False, derived, bias)
        return
    _rows_runner(data.shape[0], weights, axes3, dtype, threads, derived, load_mode,
                 _store_mode(out.dtype, dtype), bias)(data, out)


def prepare_direct(batch, weights, axes, dtype, channels_last, derived):
    """``compute(data, out)``: :func:`direct_phase` for this layer with the plane or the
    row kernel set up once, or None where it takes another path (the per-position
    kernel, long lines in segments).

    For repeated calls of one layer (:class:`convtranspose._kernel.DirectCall`): the
    general path's Python around a small kernel costs about as much as the kernel
    (FCN-2x 21->21: 40 us around 45).  ``data`` must have ``dtype`` (float32 or
    float64; no bfloat16 pairs), ``out`` be C-contiguous.
    """
    groups, ci, co = weights.shape[:3]
    if direct_per_position(groups, ci, co, channels_last) or (
            len(axes) == 1 and line_segmented(axes[0], ci)):
        return None
    axes3, threads = _three_axes(axes), _threads(batch, weights.shape, axes)
    if rows_apply(weights.shape, axes3, channels_last, dtype, dtype, dtype):
        return _rows_runner(batch, weights, axes3, dtype, threads, derived)
    run = _plane_runner(batch, weights, axes3, dtype, threads,
                        _plane_strided(groups, ci, co, channels_last), derived, False)

    def compute(data, out):
        run(np.ascontiguousarray(data).reshape(-1), out.reshape(-1))

    return compute


# --------------------------------------------------------------------------- layout copies


def _tile_transpose_source(lanes: int) -> str:
    """Source of ``tile``: a ``lanes x lanes`` block of ``src`` (rows ``src_step`` apart)
    stored transposed into ``dst`` (rows ``dst_step`` apart), all in registers.

    Interleaving rows ``i`` and ``i + lanes/2`` into rows ``2i`` and ``2i + 1``,
    log2(lanes) times over, transposes the block (a perfect shuffle per round).
    """
    half = lanes // 2
    lines = ["def tile(src, src_at, src_step, dst, dst_at, dst_step):"]
    lines += [f"    r0_{i} = vector_load(src, src_at + {i} * src_step, {lanes})"
              for i in range(lanes)]
    rounds = lanes.bit_length() - 1
    for k in range(rounds):
        lines += [f"    r{k + 1}_{i} = vector_interleave(r{k}_{i // 2}, "
                  f"r{k}_{i // 2 + half}, {i % 2})" for i in range(lanes)]
    lines += [f"    vector_store(dst, dst_at + {i} * dst_step, r{rounds}_{i})"
              for i in range(lanes)]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _tile_transposer(lanes: int):
    """The compiled ``tile`` of :func:`_tile_transpose_source`."""
    from ._numba_vectors import compile_source

    return compile_source(_tile_transpose_source(lanes), "tile")


@functools.lru_cache(maxsize=None)
def _transpose_kernel(lanes: int):
    """``kernel(src, dst, rows, cols, start, stop)``: ``(B, rows, cols)`` into ``(B, cols,
    rows)`` (flat C-order buffers), for the bands of ``lanes`` rows with flat index (b,
    band) in [start, stop): whole blocks in registers, the edges one element at a time."""
    tile = _tile_transposer(lanes)
    step = np.uint64(lanes)

    @numba.njit(nogil=True, cache=False)
    def kernel(src, dst, rows, cols, start, stop):  # pragma: no cover - compiled
        height, width = np.uint64(rows), np.uint64(cols)
        bands = (rows + lanes - 1) // lanes
        whole = width - width % step
        for item in range(start, stop):
            base = np.uint64(item // bands) * height * width
            first = np.uint64((item % bands) * lanes)
            last = min(first + step, height)
            done = np.uint64(0)
            if last - first == step:
                for c in range(np.uint64(0), whole, step):
                    tile(src, base + first * width + c, width, dst, base + c * height + first,
                         height)
                done = whole
            for c in range(done, width):
                for r in range(first, last):
                    dst[base + c * height + r] = src[base + r * width + c]

    return kernel


#: Layout copies of at least this many bytes are split between the threads.
_PARALLEL_COPY_BYTES = 1 << 22


def channels_last_copy(data: np.ndarray, dtype) -> np.ndarray:
    """``data`` ``(N, C, X...)`` as a new C-contiguous ``(N, X..., C)`` array of ``dtype``.

    float32 and float64 data of that dtype is transposed in register blocks (3D
    64->32 32^3's 8.4 MB input: 0.8 ms on two threads against 6.6 for NumPy's copy of
    the transposed view, which reads the channels one element at a time).
    """
    from ._numba_vectors import vector_bytes

    dtype = np.dtype(dtype)
    result = np.empty((data.shape[0],) + data.shape[2:] + data.shape[1:2], dtype)
    if data.dtype != dtype or dtype not in (np.float32, np.float64) or not (
            data.flags.c_contiguous and dtype.isnative) or data.ndim < 3:
        np.copyto(result, np.moveaxis(data, 1, -1), casting="unsafe")
        return result
    lanes = vector_bytes() // dtype.itemsize
    rows, cols = data.shape[1], math.prod(data.shape[2:])
    kernel = _transpose_kernel(lanes)
    source, target = data.reshape(-1), result.reshape(-1)
    threads = _THREADS if data.nbytes >= _PARALLEL_COPY_BYTES else 1
    _parallel(lambda a, b: kernel(source, target, rows, cols, a, b),
              data.shape[0] * -(-rows // lanes), threads)
    return result


# --------------------------------------------------------------------------- direct-blocked


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


def blocked_shape(itemsize: int, co: int, last_axis: AxisPlan) -> tuple[int, int, int, int]:
    """(lanes, vectors per pixel, vectors per block, pixels per block) of ``direct-blocked``.

    With 32 vector registers (AVX-512), a block holds all of a pixel's vectors (up to
    four) and about 16 accumulators: enough independent FMAs to hide their latency,
    with room for the weight rows (fewer ran slower, more made LLVM stop unrolling the
    channel loop).  Wider pixels are taken in chunks of 4 vectors (4-5 pixels) or 2
    (6-8 pixels): a block of one pixel's 16 vectors took DCGAN 512->256 NXC 47-51 ms,
    2 x 7 22.8-27.0 and 4 x 4 26.1; U-Net NXC 4 x 4 6.26-6.47, 2 x 7 7.51 (Zen 4,
    sessions 19 and 20).  Chunks of 4 vectors by 3 pixels, offered until session 24
    for their lesser waste on lines of 16 outputs per phase, ran 1.16-1.22x slower
    than 4 x 5 (DCGAN 256->128 NXC 31.5 against 25.7 ms, HiFi-GAN k4 NXC 108 against
    93, alternating): 12 accumulators, 4 weight vectors loaded per 12 multiply-adds.
    With 16 (AVX2), accumulators, the block's weight vectors and
    the broadcast input must fit in 16 registers, or LLVM spills them: a block holds a
    chunk of 2 vectors (5-6 pixels), of 3 (4 pixels) when a pixel has an odd multiple
    of 3 vectors, or a pixel's one vector (5-6 pixels), the pixel's vectors padded to
    a multiple of the chunk.  Measured on Zen 3, one thread, GFLOP/s with the weights
    in L1 / L2: 2 x 6 pixels 75 / 77, 3 x 4 81 / -, but 4 x 3 37 / -, 8 x 1 64 / 33,
    1 x 12 38 / - (one weight vector per twelve broadcasts).
    Within the candidates, the block that wastes least on the lines of
    ``last_axis``: each phase's run of outputs whose taps all read inside is covered
    by whole blocks (the last overlapping its predecessor), its other outputs cost
    about two each, and a pixel's vectors are padded to whole chunks; between equal
    wastes, the most accumulators, then the widest chunk (fewer loads per
    multiply-add).
    """
    from ._numba_vectors import vector_bytes

    lanes = max(1, vector_bytes() // itemsize)
    vectors = -(-co // lanes)
    if vector_bytes() == 64 and vectors <= 4:
        base = max(1, min(8, 16 // vectors))
        candidates = [(vectors, p) for p in range(base - base // 8, base + base // 8 + 1)]
    elif vector_bytes() == 64:
        candidates = [(4, 4), (4, 5), (2, 6), (2, 7), (2, 8)]
    elif vectors == 1:
        candidates = [(1, 5), (1, 6)]
    elif vectors % 2 and vectors % 3 == 0:
        candidates = [(3, 4)]
    else:
        candidates = [(2, 5), (2, 6)]
    runs = []
    for c in _axis_phases(last_axis).classes:
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
#: (channels first, or rounded): 128 KB of float32, in L2 beside the weights.
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
    from ._numba_vectors import compile_source

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


def direct_blocked(data, weights, axes, dtype, channels_last, out, bias=None, derived=None):
    """Fill ``out`` (the layout of ``data``) with the register-blocked direct kernel.

    ``out`` has the accumulation ``dtype``, or is float16 or bfloat16 (with float32
    ``dtype``): then the sums, plus ``bias`` (``(G*Co,)``, read only then), are
    rounded once into it, bit for bit as ``astype`` rounds the float32 result.
    The reordered weights are kept in ``derived`` (the weights memo), if given.
    """
    groups, ci, co = weights.shape[:3]
    axes3 = _three_axes(axes)
    kernel3 = tuple(a.kernel_size for a in axes3)
    lanes, vectors, chunk, pixels = blocked_shape(np.dtype(dtype).itemsize, co, axes3[2])
    width = lanes * vectors
    derived = {} if derived is None else derived
    key = ("blocked", np.dtype(dtype).str, width)
    w = derived.get(key)
    if w is None:  # DCGAN 512->256's 2 M weights: 2.5-4 ms, a tenth of the layer
        # (G, Ci, Co, K...) -> (G, K1, K2, K3, Ci, width), zero-padded channels.
        w = np.zeros((groups,) + kernel3 + (ci, width), dtype)
        w[..., :co] = np.moveaxis(weights.reshape((groups, ci, co) + kernel3), (1, 2), (-2, -1))
        w = derived[key] = _frozen(w)[0]
    data_last = channels_last
    if not channels_last and ci > 1 and data[0, 0].nbytes >= _FAR_CHANNELS_BYTES:
        data, data_last = channels_last_copy(data, dtype), True
    if data.dtype != dtype or not data.flags.c_contiguous:
        data = np.ascontiguousarray(data, dtype)
    target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    flat_out = target.reshape(-1)
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
    threads = _threads(batch, weights.shape, axes)
    segments = blocked_segments(lines, axes3[2], threads)
    order = _line_order(axes3[0], axes3[1])
    _parallel(lambda a, b: kernel(source, flat_weights, flat_out, bits, bias, mode, sizes,
                                  in_steps, out_steps, order, *tables, segments, a, b),
              lines * segments, threads)
    if target is not out:
        np.copyto(out, target)


@numba.njit(nogil=True, cache=False)
def _tap_inputs(size, tap, stride, dilation, offset, out_low, out_high):  # pragma: no cover
    """The inputs ``x`` one tap sends to outputs in ``[out_low, out_high)``, and its shift.

    Output ``y = x * stride + shift`` with ``shift = tap * dilation - offset``.
    """
    shift = tap * dilation - offset
    low = max(0, -((shift - out_low) // stride))  # ceil((out_low - shift) / stride)
    high = min(size, (out_high - 1 - shift) // stride + 1)
    return low, max(low, high), shift


@numba.njit(nogil=True, cache=False)
def _scatter_kernel(columns, col_steps, target, out_steps, geometry, co, n, rows_per_item,
                    start, stop):  # pragma: no cover - compiled
    # columns (G, n, X1, X2, X3, K1, K2, K3, Co) and the output (G, n, Y1, Y2, Y3, Co)
    # as flat buffers with element steps; geometry[a] = (X, K, stride, dilation,
    # offset, Y).  Item (g, sample, block of rows_per_item output rows of axis 1):
    # items own disjoint outputs, and each adds its taps in tap order.
    s1, s2, s3 = geometry[0, 2], geometry[1, 2], geometry[2, 2]
    c2, c3, c4 = col_steps[2], col_steps[3], col_steps[4]
    o2, o3, o4, o5 = out_steps[2], out_steps[3], out_steps[4], out_steps[5]
    blocks = (geometry[0, 5] + rows_per_item - 1) // rows_per_item
    for item in range(start, stop):
        block = item % blocks
        g, sample = (item // blocks) // n, (item // blocks) % n
        y_low = block * rows_per_item
        y_high = min(geometry[0, 5], y_low + rows_per_item)
        col_base = g * col_steps[0] + sample * col_steps[1]
        out_base = g * out_steps[0] + sample * out_steps[1]
        for k1 in range(geometry[0, 1]):
            lo1, hi1, t1 = _tap_inputs(geometry[0, 0], k1, s1, geometry[0, 3], geometry[0, 4],
                                       y_low, y_high)
            for k2 in range(geometry[1, 1]):
                lo2, hi2, t2 = _tap_inputs(geometry[1, 0], k2, s2, geometry[1, 3],
                                           geometry[1, 4], 0, geometry[1, 5])
                for k3 in range(geometry[2, 1]):
                    lo3, hi3, t3 = _tap_inputs(geometry[2, 0], k3, s3, geometry[2, 3],
                                               geometry[2, 4], 0, geometry[2, 5])
                    tap = col_base + k1 * col_steps[5] + k2 * col_steps[6] + k3 * col_steps[7]
                    for x1 in range(lo1, hi1):
                        for x2 in range(lo2, hi2):
                            src = tap + x1 * c2 + x2 * c3 + lo3 * c4
                            dst = (out_base + (x1 * s1 + t1) * o2 + (x2 * s2 + t2) * o3
                                   + (lo3 * s3 + t3) * o4)
                            # A constant unit stride vectorises (3D 128->8: 34 -> 20 ms).
                            if o5 == 1:
                                for _ in range(hi3 - lo3):
                                    for c in range(co):
                                        target[dst + c] += columns[src + c]
                                    src += c4
                                    dst += s3 * o4
                            else:
                                for _ in range(hi3 - lo3):
                                    for c in range(co):
                                        target[dst + c * o5] += columns[src + c]
                                    src += c4
                                    dst += s3 * o4


def col2im_scatter(columns, out, target, axes) -> None:
    """Add col2im's ``columns`` into ``target`` tap by tap, as the NumPy adds do.

    ``columns`` is C-contiguous ``(G, n, X..., K..., Co)``; ``target`` a view
    ``(G, n, Y..., Co)`` of the C-contiguous ``out``; ``axes`` send input ``x`` of tap
    ``k`` to output ``x * stride + k * dilation - offset``.  Every output element gets
    its taps' products in tap order, as from the NumPy loop, so the sums are the same
    bits; but in one compiled pass over blocks of output rows (cache-sized, split
    between threads) instead of a strided NumPy add per tap, whose inner loop restarts
    every ``Co`` elements.
    """
    rank = len(axes)
    axes3 = _three_axes(axes)  # the first real axis first: its output rows make the blocks
    slots = {1: (2,), 2: (0, 2), 3: (0, 1, 2)}[rank]

    def spread(steps):  # the real axes' steps at their places among three, 0 for unit axes
        padded = [0, 0, 0]
        for slot, step in zip(slots, steps):
            padded[slot] = step
        return padded

    itemsize = out.itemsize
    groups, n, co = target.shape[0], target.shape[1], target.shape[-1]
    steps = [s // itemsize for s in columns.strides]
    col_steps = np.array(steps[:2] + spread(steps[2:2 + rank])
                         + spread(steps[2 + rank:2 + 2 * rank]) + steps[-1:], np.int64)
    steps = [s // itemsize for s in target.strides]
    out_steps = np.array(steps[:2] + spread(steps[2:2 + rank]) + steps[-1:], np.int64)
    start = (target.__array_interface__["data"][0] - out.__array_interface__["data"][0])
    geometry = np.array([(a.input_size, a.kernel_size, a.stride, a.dilation, a.offset,
                          a.output_size) for a in axes3], np.int64)
    row_elements = co * math.prod(a.output_size for a in axes3[1:])
    rows_per_item = max(1, _BAND_ELEMENTS // max(1, row_elements))
    items = groups * n * -(-axes3[0].output_size // rows_per_item)
    flat_out, flat_columns = out.reshape(-1)[start // itemsize:], columns.reshape(-1)
    big = columns.size >= DIRECT_PARALLEL_MACS // 16  # a scalar add: about 16 multiply-adds
    _parallel(lambda a, b: _scatter_kernel(flat_columns, col_steps, flat_out, out_steps,
                                           geometry, co, n, rows_per_item, a, b),
              items, _THREADS if big else 1)
