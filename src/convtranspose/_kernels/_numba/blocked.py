"""``direct-blocked``'s numba kernel: output channels held in vector registers.

Consecutive output lines (all of the last axis for one group) of one phase of the first
axes, which read the same taps, go together.  Per phase of the last axis, their outputs
whose taps all read inside the input go in blocks of 4-9, taken across the lines
(:func:`cross_block_source`: no short block at a line's end), that keep their output
channels (with AVX2's 16 registers, a chunk of 2-3 vectors of them) in vector registers
while every tap and input channel adds one broadcast input times one weight row; the
outputs at the line ends go in blocks across the lines too, one column of them with its
own taps at a time.  A grouped layer whose groups each have a few whole vectors of
output channels takes them side by side (:func:`span_weights`): one group of all their
channels, whose blocks span several groups, each vector multiplying its own group's
inputs (``span``, :mod:`.block_sources`).  Any layout: channels-last lines are stored
directly, channels-first ones through a transposed tile.  float16 and bfloat16 results
are rounded from the tile as each line is stored.  The block sources are generated per
block shape and product (:mod:`.block_sources`, :data:`.block_sources.PRODUCTS`: float
multiply-adds, or VNNI byte products or int16 pair products for the exact integer sums
of :mod:`convtranspose._kernels.int8`), and the kernel is compiled per dtype, block
shape, product, store mode and group span only: channel counts, taps, strides and sizes
are run-time values, so that layers of one block shape share its compiled code
(``benchmarks/results/kernel-reuse-xeon.json``).
"""

from __future__ import annotations

import math

import numpy as np

from ..._plan.geometry import axis_phases, three_axes
from ..._plan.rules import AxisPlan
from ..._runtime.caches import kept
from ..._runtime.machine import l1_data_cache_bytes, l2_cache_bytes
from ..._runtime.threads import PIECES_PER_THREAD, parallel_parts
from ..blocked_channels import blocked_channel_block, blocked_channel_passes
from ..blocked_groups import blocked_group_span, blocked_vector_bytes
from ..common import move_axis
from ..schedules import FLOAT16, KEEP, blocked_segments, blocked_shape, frozen_all
from ..tiles import aligned
from .block_sources import block_source, cross_block_source, single_source
from .casts import bfloat16_bits, float16_bits
from .channels_last import gather_row_taps
from .direct import direct_threads
from .kernel_cache import cached_njit
from .launch import native_threads, parallel_kernel
from .lines import fused_lines_kernel, passes_kernel
from .modes import store_mode
from .transpose import channels_last_copy, tile_transposer

#: ``direct-blocked`` reads channels-first data whose channel planes are at least this
#: large through a channels-last copy (:func:`channels_last_copy`): a block reads every
#: input channel of a few pixels, and so many distant planes miss the TLB and defeat
#: the prefetchers; planes of a few KB are read faster in place than copied
#: (``benchmarks/results/direct-blocked-zen3.json``).
_FAR_CHANNELS_BYTES = 1 << 14
#: So does data of smaller planes where each phase sums at least this many taps and a
#: group at least :data:`_COPIED_LEAST_CHANNELS` input channels: each block then reads
#: a long run of (tap, channel) pairs, one input line per pair in place, one per 16
#: channels copied.  On an AMD EPYC Zen 3, stride-1 k5 and k7 layers of 64-256
#: channels took 0.69-1.0x the time copied, on one thread and on two (N4 128->128 14x14
#: k7: 15.4 -> 10.7 ms), while layers of fewer taps or channels came out either way,
#: by layer and thread count (``benchmarks/results/direct-blocked-zen3.json``,
#: ``copies_for_many_taps``).
_COPIED_LEAST_PHASE_TAPS = 25
_COPIED_LEAST_CHANNELS = 64

@cached_njit(nogil=True)
def _rounded_line(bits, tile, bias, mode, line, out_3, out_c, co, width, tile_at, y_first,
                  y_stop, channel0):  # pragma: no cover - compiled
    """Round a line buffer's outputs ``[y_first, y_stop)`` (output ``y3`` at ``tile_at + y3 *
    width``) into ``bits`` (uint16), plus ``bias``.

    The bias is added in float32 before the one rounding, as the float32 path adds
    it to its float32 result; without one (``bias`` empty) nothing is added, not
    even a zero (``-0.0 + 0.0`` is ``+0.0``).  The inner loops write consecutive
    elements: an output's channels (channels last, ``out_c == 1``), else a channel's
    outputs along the line (``out_3 == 1``).
    """
    if out_c == 1:
        for y3 in range(y_first, y_stop):
            at, read = line + y3 * out_3, tile_at + y3 * width
            if mode == FLOAT16 and bias.size:
                for o in range(co):
                    bits[at + o] = float16_bits(
                        np.float32(tile[read + o]) + np.float32(bias[channel0 + o]))
            elif mode == FLOAT16:
                for o in range(co):
                    bits[at + o] = float16_bits(np.float32(tile[read + o]))
            elif bias.size:
                for o in range(co):
                    bits[at + o] = bfloat16_bits(
                        np.float32(tile[read + o]) + np.float32(bias[channel0 + o]))
            else:
                for o in range(co):
                    bits[at + o] = bfloat16_bits(np.float32(tile[read + o]))
        return
    for o in range(co):
        at, read = line + o * out_c, tile_at + o
        shift = np.float32(bias[channel0 + o]) if bias.size else np.float32(0)
        if mode == FLOAT16 and bias.size:
            for y3 in range(y_first, y_stop):
                bits[at + y3 * out_3] = float16_bits(np.float32(tile[read + y3 * width]) + shift)
        elif mode == FLOAT16:
            for y3 in range(y_first, y_stop):
                bits[at + y3 * out_3] = float16_bits(np.float32(tile[read + y3 * width]))
        elif bias.size:
            for y3 in range(y_first, y_stop):
                bits[at + y3 * out_3] = bfloat16_bits(np.float32(tile[read + y3 * width]) + shift)
        else:
            for y3 in range(y_first, y_stop):
                bits[at + y3 * out_3] = bfloat16_bits(np.float32(tile[read + y3 * width]))


@cached_njit(nogil=True, inline="always")
def _phase_taps(row_reads, row_taps, rows, p3, j_first, j_stop, size3, in_3, tap_k, tap_shift,
                tap_count, tap_size, reads, taps, shifts):  # pragma: no cover - compiled
    """The taps of phase ``p3`` of the last axis for a line whose taps of the first two
    axes are ``row_reads`` / ``row_taps``: every tap's read, weight row and shift in
    ``reads``, ``taps`` and ``shifts``.  Returns their count and ``[first, last)``, the
    outputs of ``[j_first, j_stop)`` whose taps all read inside the input."""
    count = np.int64(0)  # not a literal: see templates/blocked.py
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
GROUP_TILE_ELEMENTS = 1 << 15


#: The most lines a group of ``direct-blocked`` holds.
_GROUP_MAX_LINES = 64


@kept("compiled kernels", maxsize=None)
def _blocked_kernel(lanes: int, chunk: int, pixels: int, mode: int, product: str,
                    span: int = 0):
    """The ``direct-blocked`` kernel for one block shape, store mode, product
    (:data:`.block_sources.PRODUCTS`) and group span (vectors per group of blocks
    across groups, :func:`~convtranspose._kernels.blocked_groups.blocked_group_span`; 0:
    blocks of one group), compiled on first use.

    Blocks hold ``chunk`` vectors of ``lanes`` channels of ``pixels`` outputs; the
    kernel runs them once per chunk of each output's channels, however many (a run-time
    size), so that every layer of one dtype, block shape and ``mode`` shares this
    kernel.  ``mode``: ``KEEP`` writes ``out`` (the sums' dtype), ``FLOAT16`` or
    ``BFLOAT16`` round into ``bits`` (uint16); the other is an empty placeholder of its
    type.  (A kernel for every mode would compile the rounding into the sums' kernel
    too: a second of its eight.)
    """
    from .codegen import compile_source, compile_template

    block = compile_source(block_source(lanes, chunk, pixels, product=product, span=span),
                           "block")
    cross = compile_source(cross_block_source(lanes, chunk, pixels, product=product,
                                              span=span), "block")
    cross_on = compile_source(cross_block_source(lanes, chunk, pixels, accumulate=True,
                                                 product=product, span=span), "block")
    transpose = tile_transposer(lanes)
    # The outputs at the line ends take a chunk at a time too, in four independent sets
    # of accumulators (fewer where a block has fewer pixels): no more accumulators than
    # a block's, which fit the registers.
    splits = max(1, min(4, pixels))
    single = compile_source(single_source(lanes, chunk, splits, product, span), "single")

    return compile_template("blocked", dict(
        np=np, KEEP=KEEP, _GROUP_MAX_LINES=_GROUP_MAX_LINES, _phase_taps=_phase_taps,
        _rounded_line=_rounded_line, gather_row_taps=gather_row_taps, block=block,
        cross=cross, cross_on=cross_on, single=single,
        transpose=transpose, lanes=lanes, pixels=pixels, chunk_width=lanes * chunk, store=mode,
    ))["kernel"]


@kept("kernel schedules", maxsize=256)
def phase_tables(axes3: tuple[AxisPlan, ...]):
    """Per axis and phase: tap count, each tap's input shift and kernel index (read-only)."""
    phases = [axis_phases(axis) for axis in axes3]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    # Phases are ``y mod stride`` of outputs ``y < Y``: a stride past Y needs Y rows.
    stride_max = max(min(axis.stride, axis.output_size) for axis in axes3)
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
    return frozen_all(tap_k, tap_shift, tap_count)


@kept("kernel schedules", maxsize=256)
def _line_order(axis1: AxisPlan, axis2: AxisPlan) -> np.ndarray:
    """The outputs of the first two axes in phase order (``y = p + j*s`` by ``p``, then ``j``)."""
    order = [np.concatenate([np.arange(p, a.output_size, a.stride) for p in range(a.stride)])
             for a in (axis1, axis2)]
    return frozen_all(np.concatenate(order).astype(np.int64))[0]


def _phase_taps_most(tap_count: np.ndarray) -> int:
    """The most taps any phase sums (the product of each axis's most)."""
    return math.prod(max(1, int(row.max(initial=0))) for row in tap_count)


def _channel_block(ci: int, tap_count: np.ndarray, chunk_width: int, itemsize: int,
                   into_output: bool) -> int:
    """Input channels summed at a time (:func:`blocked_channel_block`, for the most taps
    any phase has).  All of them where the blocks write straight into a channels-last
    output: adding each channel block there reads and writes the output's rows again,
    and such layers ran even or up to 1.08x slower in blocks
    (``benchmarks/results/blocked-channel-blocks-xeon.json``)."""
    if into_output:
        return ci
    return blocked_channel_block(ci, _phase_taps_most(tap_count), chunk_width, itemsize,
                                 l1_data_cache_bytes())


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


def line_pieces(lines: int, plane_lines: int, segments: int, threads: int) -> int:
    """Into how many pieces the threads split the ``lines``: as many as
    :func:`~convtranspose._runtime.threads.parallel_for` cuts by default, but, where
    lines are whole (one segment each), about one plane of ``plane_lines`` (every line
    of one group and sample) or more each, a multiple of ``threads`` pieces in all (so
    that three planes on two threads are not two pieces' work on one of them).
    A group of lines with the same taps, whose outputs go in blocks across the lines,
    never spans two pieces: pieces of one line each (a 14x14 layer of 4 samples on two
    threads) left every group one line, its line ends one output at a time and its
    weights read once per line (``benchmarks/results/blocked-pieces-xeon.json``)."""
    most = threads * PIECES_PER_THREAD
    if segments > 1:
        return most
    planes = max(1, lines // max(1, plane_lines))
    return min(most, -(-planes // threads) * threads)


def pass_weights(weights, derived, dtype, kernel3, channels: tuple[int, int], width: int,
                  chunk_width: int):
    """Output channels ``[c0, c1)`` of the weights, zero-padded to ``width`` and packed
    per block of ``chunk_width`` of them: ``(width // chunk_width, G, K1, K2, K3, Ci,
    chunk_width)``, so that a block reads its weight rows one after another (rows of the
    whole ``width`` put them a row apart: DCGAN 256->128, two blocks of channels, took
    1.1x as long, ``benchmarks/results/blocked-packing-xeon.json``), from a 64-byte
    boundary: a block's vector loads then never straddle two cache lines (NumPy aligns
    to 16 bytes).  Kept in ``derived`` (a tenth of a large layer's time:
    direct-blocked-zen4.json)."""
    co = weights.shape[2]
    c0, c1 = channels
    key = ("blocked", np.dtype(dtype).str, width, chunk_width) + (
        (c0, c1) if (c0, c1) != (0, co) else ())
    w = derived.get(key)
    if w is None:
        packed = _packed_pass(weights, dtype, kernel3, channels, width, chunk_width)
        w = aligned(packed.shape, dtype)
        w[...] = packed
        w = derived[key] = frozen_all(w)[0]
    return w


def _packed_pass(weights, dtype, kernel3, channels: tuple[int, int], width: int,
                 chunk_width: int) -> np.ndarray:
    """Output channels ``channels`` of the weights packed as :func:`pass_weights`
    keeps them (a NumPy array of any alignment)."""
    groups, ci, co = weights.shape[:3]
    c0, c1 = channels
    rows = np.zeros((groups,) + kernel3 + (ci, width), dtype)
    part = weights.reshape((groups, ci, co) + kernel3)[:, :, c0:c1]
    rows[..., :c1 - c0] = np.moveaxis(part, (1, 2), (-2, -1))
    return np.moveaxis(rows.reshape(rows.shape[:-1] + (width // chunk_width, chunk_width)),
                       -2, 0)


def stacked_pass_weights(weights, derived, dtype, kernel3, passes, width: int,
                         chunk_width: int) -> np.ndarray:
    """Every pass of ``passes`` (of one width) packed as :func:`pass_weights` packs one,
    as the rows of one array: ``(len(passes), size)``, each row starting at a 64-byte
    boundary (rows padded with zeros to whole cache lines).  Kept in ``derived``."""
    key = ("blocked stack", np.dtype(dtype).str, width, chunk_width, tuple(passes))
    stack = derived.get(key)
    if stack is None:
        packed = [_packed_pass(weights, dtype, kernel3, channels, width, chunk_width)
                  for channels in passes]
        line = 64 // np.dtype(dtype).itemsize
        stack = aligned((len(passes), -(-packed[0].size // line) * line), dtype, np.zeros)
        for row, part in zip(stack, packed):
            row[:part.size] = part.reshape(-1)
        stack = derived[key] = frozen_all(stack)[0]
    return stack


def _pass_stack(weights, derived, dtype, axes3, passes, threads: int, vector_bytes: int):
    """The stacked weights (:func:`stacked_pass_weights`) of passes of one width, at
    least one per thread, or None.  Such passes run as one kernel over all of them,
    each thread taking whole passes (every line of their output channels): each pass's
    weights read by one thread for all its lines, in one fork-join on numba's threads.
    Sharing each pass's lines between two threads instead took an N1 256->256 14x14
    k7 s1 layer 10.2-10.5 ms where one thread took 12.1-13.6 and whole passes per
    thread 6.1-8.0 (AMD EPYC Zen 4; ``benchmarks/results/blocked-pieces-zen4.json``)."""
    if len({c1 - c0 for c0, c1 in passes}) != 1 or not len(passes) >= threads > 1:
        return None
    lanes, vectors, chunk, _ = blocked_shape(np.dtype(dtype).itemsize,
                                             passes[0][1] - passes[0][0], axes3[2],
                                             vector_bytes)
    return stacked_pass_weights(weights, derived, dtype, tuple(a.kernel_size for a in axes3),
                                passes, lanes * vectors, lanes * chunk)


def span_weights(weights: np.ndarray) -> np.ndarray:
    """A grouped filter ``(G, Ci, Co, K...)`` as the one group of its groups side by
    side, ``(1, Ci, G * Co, K...)``: output channel ``g * Co + o`` is group ``g``'s
    ``o`` (blocks across groups, whose vectors each read their own group's inputs)."""
    groups, ci, co = weights.shape[:3]
    return np.ascontiguousarray(move_axis(weights, 0, 1)).reshape(
        (1, ci, groups * co) + weights.shape[3:])


def channel_passes(weights_shape, axes3, itemsize: int, target) -> list[tuple[int, int]]:
    """Output channel ranges computed one after another (one group only; a single range
    otherwise): :func:`~convtranspose._kernels.blocked_channels.blocked_channel_passes`."""
    groups, ci, co = weights_shape[:3]
    lanes = max(1, target.vector_bytes // itemsize)
    passes = 1 if groups > 1 else blocked_channel_passes(ci, co, axes3, itemsize, lanes,
                                                         l2_cache_bytes())
    vectors = -(-co // lanes)
    step = -(-vectors // passes) * lanes  # whole vectors per pass
    return [(c0, min(co, c0 + step)) for c0 in range(0, co, step)]


class BlockedLayer:
    """``direct-blocked`` set up for one layer: every pass's kernel, packed weights and
    sizes, the steps and the thread split, made once; calling it fills an output.

    ``direct_blocked`` makes one per call; a prepared call
    (:func:`convtranspose._kernels.direct_blocked.prepare_blocked`) keeps it, so that
    a repeated call of a small layer runs the kernel and little else (the set-up took
    about 60 us of a 0.3 ms U-Net layer's call, ``benchmarks/results/prepared-calls-xeon.json``).
    ``mode`` is the store mode of the outputs it fills (:func:`.modes.store_mode`);
    ``product`` the blocks' product (:data:`.block_sources.PRODUCTS`): with
    ``vector_dot_bytes`` (``vector_dot_words``), ``weights`` and the data are int32 words of four bytes (two
    int16 halves), ``Ci`` counts words and the sums are int32.  A grouped layer whose
    groups each have one 16- or 32-byte vector of output channels runs at that width
    (:func:`~convtranspose._kernels.blocked_groups.blocked_vector_bytes`).
    """

    __slots__ = ("_dtype", "_mode", "_target", "_copied", "_copy_steps",
                 "_in_steps", "_passes", "_run_args", "_threads", "_count", "_pieces",
                 "_by_passes", "_lines", "_stack")

    def __init__(self, batch, weights, axes, dtype, channels_last, mode, derived, target,
                 product="vector_fma"):
        groups, ci, co = weights.shape[:3]
        axes3 = three_axes(axes)
        itemsize = np.dtype(dtype).itemsize
        derived = {} if derived is None else derived
        if product == "vector_fma":
            target = target.replace(vector_bytes=blocked_vector_bytes(
                groups, co, itemsize, axes3[2], target.vector_bytes))
        self._dtype, self._mode, self._target = dtype, mode, target
        inputs = tuple(a.input_size for a in axes3)
        self._copy_steps = _steps((batch, groups * ci) + inputs, True)
        self._in_steps = _steps((batch, groups * ci) + inputs, channels_last)
        out_steps = _steps((batch, groups * co) + tuple(a.output_size for a in axes3),
                           channels_last)
        self._threads = threads = direct_threads(batch, weights.shape, axes, target)
        span = (blocked_group_span(groups, co, itemsize, axes3[2], target.vector_bytes)
                if product == "vector_fma" else 0)
        span_sizes = (ci, co) if span else (0, 1)
        if span:  # the groups side by side: one group of G * Co channels (blocks across)
            weights, derived = span_weights(weights), derived.setdefault("group span", {})
            groups, co = 1, groups * co
        lines = groups * batch * axes3[0].output_size * axes3[1].output_size
        segments = blocked_segments(lines, axes3[2], threads)
        self._count = lines * segments
        self._pieces = line_pieces(lines, axes3[0].output_size * axes3[1].output_size,
                                   segments, threads)
        self._run_args = (out_steps, _line_order(axes3[0], axes3[1]),
                          *phase_tables(axes3), segments)
        tap_count = self._run_args[4]
        # Channels-first data with large planes, or many taps and channels, is read
        # through a channels-last copy.
        self._copied = not channels_last and ci > 1 and (
            math.prod(inputs) * itemsize >= _FAR_CHANNELS_BYTES
            or ci >= _COPIED_LEAST_CHANNELS
            and _phase_taps_most(tap_count) >= _COPIED_LEAST_PHASE_TAPS)
        self._passes = []
        passes = [(0, co)] if span else channel_passes(weights.shape, axes3, itemsize, target)
        kernel3 = tuple(a.kernel_size for a in axes3)
        self._stack = (None if span else _pass_stack(weights, derived, dtype, axes3, passes,
                                                     threads, target.vector_bytes))
        for index, (c0, c1) in enumerate(passes):
            # A pass writes channels [c0, c1) of group 0: its views start at channel c0.
            lanes, vectors, chunk, pixels = blocked_shape(itemsize, c1 - c0, axes3[2],
                                                          target.vector_bytes)
            w = (self._stack[index] if self._stack is not None else pass_weights(
                weights, derived, dtype, kernel3, (c0, c1), lanes * vectors, lanes * chunk)
                 ).reshape(-1)
            sizes = np.array((batch, groups, ci, c1 - c0) + inputs
                             + tuple(a.output_size for a in axes3)
                             + tuple(a.kernel_size for a in axes3[1:])
                             + (math.prod(a.kernel_size for a in axes3),)
                             + tuple(a.stride for a in axes3)
                             + (lanes * vectors, GROUP_TILE_ELEMENTS,
                                _channel_block(ci, tap_count, lanes * chunk, itemsize,
                                               channels_last and c1 - c0 == lanes * vectors
                                               and mode == KEEP)) + span_sizes, np.int64)
            self._passes.append((c0 * out_steps[4], c0, c1, (w, sizes),
                                 _blocked_kernel(lanes, chunk, pixels, mode, product, span)))
        # With a pass for every thread, the threads take whole passes (every line of
        # their output channels) instead of sharing each pass's lines: one fork-join,
        # and each pass's weights read by one thread for all its lines.  On an Intel
        # Xeon every layer measured of 3-16 passes ran faster: 1.4-1.6x a single-plane
        # stride-1 k7 layer, 1.15-1.35x three uneven passes on two threads, 1.05-1.1x
        # sixteen planes (``benchmarks/results/blocked-pieces-xeon.json``,
        # passes_between_threads).  Passes of one width do so in one kernel (the stack
        # above); passes of several widths on the library's pool, where numba's native
        # threads cannot run them (see __call__).
        self._by_passes = len(self._passes) >= threads > 1
        # Whole channels-last lines of one group in one pass, shared between threads:
        # each piece of work writes its lines' every sum, so a caller may take them as
        # each piece ends, on its thread (on one thread, all are taken at once anyway).
        self._lines = ((self._run_args[1],) + tuple(a.output_size for a in axes3)
                       if groups == 1 and segments == 1 and len(self._passes) == 1
                       and channels_last and threads > 1 else None)

    def _pass_arguments(self, index: int, source, flat_out, bits, bias, in_steps) -> tuple:
        """``(kernel, arguments)`` of pass ``index`` (over the units ``[0, count)``)."""
        at, c0, c1, (w, sizes), kernel = self._passes[index]
        return kernel, (source, w, flat_out[at:] if flat_out.size else flat_out,
                        bits[at:] if bits.size else bits,
                        bias[c0:c1] if bias.size else bias, sizes, in_steps, *self._run_args)

    def single_pass(self, data: np.ndarray, out: np.ndarray) -> tuple | None:
        """``(kernel, arguments, count)``: a call's whole work as one kernel on one thread,
        ``kernel(*arguments, 0, count)``, for ``data`` (the layer's dtype, C-contiguous,
        read-only) and ``out`` (C-contiguous, the layer's store mode ``KEEP``); None where
        the layer runs in several passes or threads, reads the data through a copy or
        stores rounded sums."""
        if (len(self._passes) != 1 or min(self._threads, self._count) > 1
                or self._mode != KEEP or self._copied):
            return None
        no_bits, no_bias = np.empty(0, np.uint16), frozen_all(np.empty(0, self._dtype))[0]
        kernel, arguments = self._pass_arguments(0, data.reshape(-1), out.reshape(-1),
                                                 no_bits, no_bias, self._in_steps)
        return kernel, arguments, self._count

    @property
    def fusable(self) -> bool:
        """Whether a call may take each piece's lines as it ends (``after``): whole
        lines of one group in one pass, on several threads."""
        return self._lines is not None

    def __call__(self, data, out, bias=None, after=None) -> None:
        """Fill ``out`` (the set-up's layout, shape and store mode) from ``data``, plus
        ``bias`` where ``out`` is rounded (``(G*Co,)``, read only then).  ``after``, for a
        :attr:`fusable` layer and a C-contiguous ``out`` only: a compiled rows kernel's
        call (:class:`~convtranspose._kernels.requantize.RowsCall`: ``after.kernel(
        *after.arguments, starts, pixels)``) on the output lines each piece of work
        wrote (each ``pixels`` pixels of every output channel from a pixel of
        ``starts``), run on the thread that wrote them as soon as it did, in one
        compiled kernel with the sums (:func:`.lines.fused_lines_kernel`)."""
        dtype, in_steps = self._dtype, self._in_steps
        if self._copied:
            data = channels_last_copy(data, dtype, self._target)
            in_steps = self._copy_steps
        if data.dtype != dtype or not data.flags.c_contiguous:
            data = np.ascontiguousarray(data, dtype)
        result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        flat_out = result.reshape(-1)
        if self._mode == KEEP:
            bits, bias = np.empty(0, np.uint16), np.empty(0, dtype)
        else:
            bits, flat_out = flat_out.view(np.uint16), np.empty(0, dtype)
            bias = np.empty(0, dtype) if bias is None else np.ascontiguousarray(bias, dtype)
        # Read-only views of the operands the kernel reads, whatever the caller's flags: a
        # writable and a read-only array are two numba types, each compiling the kernel.
        source, bias = frozen_all(data.reshape(-1).view(), bias.view())
        count = self._count

        def pass_arguments(index: int) -> tuple:
            return self._pass_arguments(index, source, flat_out, bits, bias, in_steps)

        def run_pass(index: int, start: int, stop: int) -> None:
            kernel, arguments = pass_arguments(index)
            kernel(*arguments, start, stop)

        if self._stack is not None:
            kernel, arguments = pass_arguments(0)
            stack, width = self._stack, self._passes[0][2] - self._passes[0][1]
            arguments = (arguments[0], stack.reshape(-1), flat_out, bits, bias) + arguments[5:]
            steps = (stack[0].size, width * self._run_args[0][4], width, count)
            parallel_kernel(passes_kernel(kernel, len(arguments)), arguments + steps,
                            count * len(self._passes), self._threads, len(self._passes))
        elif self._by_passes and not native_threads(self._threads):
            # Passes of several widths go whole to the threads on the pool only where
            # numba's threads cannot share each pass's lines: right after a native loop
            # (the int8 kernels' words pass, another layer), numba's workers spin on the
            # other CPUs, and the pool's helpers waited for them: the int8 DCGAN N4
            # 256->128 layer took 5.3-13.8 ms on two threads, 10.2 on one, and 5.3-5.5
            # with the passes on numba's threads (AMD Zen 2;
            # ``benchmarks/results/passes-on-threads-zen2.json``).
            parallel_parts(lambda index: run_pass(index, 0, count), len(self._passes),
                           self._threads)
        elif after is not None:
            kernel, arguments = pass_arguments(0)
            fused = fused_lines_kernel(kernel, len(arguments), after.kernel,
                                       len(after.arguments))
            parallel_kernel(fused, arguments + after.arguments + self._lines, count,
                            self._threads, self._pieces)
        else:
            for index in range(len(self._passes)):
                parallel_kernel(*pass_arguments(index), count, self._threads, self._pieces)
        if result is not out:
            np.copyto(out, result)


def direct_blocked(data, weights, axes, dtype, channels_last, out, bias, derived, target):
    """Fill ``out`` (the layout of ``data``) with the register-blocked direct kernel.

    ``out`` has the accumulation ``dtype``, or is float16 or bfloat16 (with float32
    ``dtype``): then the sums, plus ``bias`` (``(G*Co,)``, read only then), are
    rounded once into it, bit for bit as ``astype`` rounds the float32 result.
    The reordered weights are kept in ``derived`` (the weights memo), if given;
    ``target``: the machine (:class:`~convtranspose._runtime.target.Target`).  Layers
    whose weights per output line would not stay in L2 run in passes over their output
    channels (:func:`channel_passes`).
    """
    layer = blocked_layer(data.shape[0], weights, axes, dtype, channels_last,
                          store_mode(out.dtype, dtype), derived, target)
    layer(data, out, bias)


#: Set-ups (:class:`BlockedLayer`) kept per filter, the most recently made last: a layer
#: called at a few batch sizes or tile shapes keeps each.
_LAYERS_KEPT = 8


def blocked_layer(batch, weights, axes, dtype, channels_last, mode, derived,
                  target, product="vector_fma") -> BlockedLayer:
    """The :class:`BlockedLayer` of these arguments, kept in ``derived`` (the weights
    memo's dict of this filter, if given) so that a repeated call, and each timed run
    of measured planning, pays the kernel and not the set-up again (about 60 us of a
    0.3 ms layer's call: planning timed ``direct-blocked`` with it and ranked it below
    algorithms it beats in repeated calls)."""
    if derived is None:
        return BlockedLayer(batch, weights, axes, dtype, channels_last, mode, None, target,
                            product)
    kept = derived.setdefault("blocked layers", {})
    key = (batch, tuple(axes), np.dtype(dtype).str, channels_last, mode, target, product)
    layer = kept.get(key)
    if layer is None:
        layer = BlockedLayer(batch, weights, axes, dtype, channels_last, mode, derived, target,
                             product)
        while len(kept) >= _LAYERS_KEPT:
            kept.pop(next(iter(kept), None), None)  # another thread may drop it first
        kept[key] = layer
    return layer
