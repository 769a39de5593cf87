"""Numba ``direct``'s row kernel (channels first, last-axis stride 1 or 2).

Compiled per layer with the last axis and the channel counts as constants
(:func:`_rows_source`, a generated template): each output row is summed in registers
(a few output channels times a few vectors per phase of the last axis), straight from a
window of the input rows its band of output rows reads, the phases interleaved as they
are stored: no accumulator array, no junk border columns.  Where each phase's vectors
would waste lanes, an even kernel's two phases are summed in the same vectors instead
(:func:`~convtranspose._kernels.schedules.merged_taps`).  Which layers take it:
:func:`~convtranspose._kernels.schedules.rows_apply`.
"""

from __future__ import annotations

import math

import numpy as np

from ..._plan.rules import AxisPlan
from ..._runtime.caches import kept
from ..._runtime.threads import PIECES_PER_THREAD
from ..schedules import (
    BFLOAT16,
    FLOAT16,
    KEEP,
    ROWS_WINDOW_BYTES,
    axis_tap_lists,
    frozen_all,
    half_load,
    merged_taps,
    merged_vectors,
    output_row_taps,
    phase_vectors,
    row_bands,
    rows_block,
    rows_lanes,
    rows_merged,
    rows_window_width,
)
from .launch import array_kind, parallel_kernel
from .modes import bfloat16_pair_bits, store_mode
from .planes import direct_planes


def _rows_source(lanes: int, last: AxisPlan, ci: int, co: int, co_block: int, vectors: int,
                 data: int = KEEP, result: int = KEEP, biased: bool = False,
                 merged: bool = False) -> str:
    """Source of the channels-first row kernel for the last axis ``last``, ``ci`` input
    and ``co`` output channels per group, ``co_block`` output channels per pass.
    ``data`` (the plane kernel's load modes, :func:`half_load`): ``FLOAT16``, the data
    are float16 bits, widened as the window is filled; ``BFLOAT16``, bfloat16 bits,
    packed as the window is filled, input channels ``2u`` and ``2u + 1`` in one
    ``uint32`` (zeros for a missing ``2u + 1``), and multiplied a pair at a time
    (:func:`vector_dot_pairs`, 16 lanes, weights packed alike).  ``result`` (its store
    modes, :func:`store_mode`): the float32 sums are rounded to the float16 or
    bfloat16 bits of ``out`` as they are stored; ``biased``:
    the bias is added to the sums before (before the one rounding).

    The last axis and the channel counts are compiled in: a row's taps of the last
    axis are straight-line code, and only the first two axes' taps (a table per output
    row) and the input channels are looped over.  Per item (a (sample, group) plane, a
    band of its output rows (:func:`row_bands`) and a range of its blocks of output
    channels) the input rows the band reads are copied, every input channel's, into a
    window whose rows have zeros around the input (:func:`rows_window_width`).
    Output row ``q`` is then summed in passes of ``vectors`` vectors per phase of the
    last axis and ``co_block`` channels (:func:`rows_block`), all in registers: phase
    ``p`` computes outputs ``s * j + p`` from window elements ``j + shift`` (contiguous
    in ``j``), one broadcast weight per channel and tap; a phase without taps (a
    dilation's) is a zero vector, not accumulators.  The phases are stored
    interleaved.  The last pass takes the vectors left, and its last, partial vector
    of outputs is stored shifted back to end at the row's end (:func:`vector_shift_in`).
    Weights are laid out ``(G, blocks, K1 * K2, Ci, K3, co_block)`` (:func:`_rows_weights`).

    ``merged`` (:func:`rows_merged`): the window holds every input twice, and a pass
    sums ``vectors`` vectors of consecutive outputs of both phases, each pair of taps
    (:func:`merged_taps`) one load of the window times alternating weights, laid
    out ``(G, blocks, K1 * K2, Ci, pairs, co_block, 2)``.  The row's last vector is
    half a vector where that holds its outputs.
    """
    per_phase = axis_tap_lists(last)
    stride, out3, size3 = len(per_phase), last.output_size, last.input_size
    k3_count = last.kernel_size
    pairs = data == BFLOAT16
    units = -(-ci // 2) if pairs else ci  # window rows (channels or pairs) per input row
    total = merged_vectors(last, lanes) if merged else phase_vectors(last, lanes)
    passes = -(-total // vectors)
    last_start = (passes - 1) * vectors * lanes  # the last pass's first j (merged: y)
    left, width = rows_window_width(last, lanes, merged)
    blocks = -(-co // co_block)
    tap_weights = units * k3_count * co_block  # weights per tap of the first two axes

    load = "vector_load_float16" if data == FLOAT16 else "vector_load"
    store, reload = {KEEP: ("vector_store", "vector_load"),
                     FLOAT16: ("vector_store_float16", "vector_load_float16"),
                     BFLOAT16: ("vector_store_bfloat16", "vector_load_bfloat16")}[result]
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
        for t, (delta, _, _) in enumerate(merged_taps(last)):
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


@kept("compiled kernels", maxsize=64)
def rows_kernel(lanes: int, last: AxisPlan, ci: int, co: int, co_block: int, vectors: int,
                 data: int = KEEP, result: int = KEEP, biased: bool = False,
                 merged: bool = False):
    from .codegen import compile_source

    return compile_source(_rows_source(lanes, last, ci, co, co_block, vectors, data, result,
                                       biased, merged), "rows")


def _rows_weights(weights, co_block: int, dtype, pairs: bool = False,
                  merged: tuple[tuple[int, int, int], ...] | None = None) -> np.ndarray:
    """(G, Ci, Co, K1, K2, K3) -> flat (G, Co blocks, K1 * K2, Ci, K3, co_block), zeros
    past Co; with ``pairs`` (bfloat16 weights) the bits of input channels ``2u`` and
    ``2u + 1`` packed in one ``uint32`` (zeros for a missing ``2u + 1``), ``Ci / 2``
    of them; with ``merged`` (:func:`merged_taps`), ``K3`` as (tap pairs, co_block,
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


def rows_runner(batch, weights, axes3, dtype, target, threads, derived, data=KEEP,
                result=KEEP, bias=None):
    """``run(data, out)``: the row kernel (:func:`rows_apply`) into ``out`` of ``dtype``,
    with the reordered weights (kept in ``derived``), the tables and the kernel
    prepared.  ``data`` (:func:`half_load`): the data are float16, or bfloat16
    multiplied in pairs (:func:`bfloat16_pair_bits` must hold); ``result``
    (:func:`store_mode`): ``out`` is float16 or bfloat16, the sums rounded into it
    bit for bit as ``astype`` rounds the float32 result; ``bias`` (``(G*Co,)`` or None)
    is added to the sums before."""
    groups, ci, co = weights.shape[:3]
    lanes = rows_lanes(dtype, target.vector_bytes)
    merged = rows_merged(axes3[2], lanes, co, data, target.vector_bytes)
    co_block, vectors = rows_block(co, axes3[2], lanes, merged, target.vector_bytes)
    pairs = data == BFLOAT16
    biased = bias is not None
    shift = np.ascontiguousarray(bias, dtype) if biased else np.empty(0, dtype)
    kernel = rows_kernel(lanes, axes3[2], ci, co, co_block, vectors, data, result, biased,
                          merged)
    key = ("rows", "pairs" if pairs else np.dtype(dtype).str, co_block, merged)
    w = derived.get(key)
    if w is None:
        w = derived[key] = frozen_all(_rows_weights(weights, co_block, dtype, pairs,
                                                 merged_taps(axes3[2]) if merged else None))[0]
    tables = output_row_taps(axes3)
    rows_in = axes3[0].input_size * axes3[1].input_size
    rows_out = axes3[0].output_size * axes3[1].output_size
    width = rows_window_width(axes3[2], lanes, merged)[1]
    units, window_dtype = (-(-ci // 2), np.uint32) if pairs else (ci, dtype)
    length, first, stop, window_rows = row_bands(
        axes3, ROWS_WINDOW_BYTES // (units * width * np.dtype(window_dtype).itemsize))
    planes = batch * groups
    block_weights = w.size // (groups * -(-co // co_block))
    # A plane's blocks of output channels in ranges, for work on every thread (each
    # item fills its window).
    items = planes * first.size
    ranges = max(1, min(-(-co // co_block), -(-PIECES_PER_THREAD * threads // items)))
    geometry = (groups, ranges, block_weights, window_rows, rows_in, rows_out)

    data_bits = data != KEEP

    addresses: dict = {}

    def run(data, out):
        source, flat = np.ascontiguousarray(data).reshape(-1), out.reshape(-1)
        source = source.view(np.uint16) if data_bits else source
        flat = flat.view(np.uint16) if result != KEEP else flat
        # A window per thread, not per piece; only the data and the result vary in type
        # from call to call.
        parallel_kernel(kernel, (source, w, flat, shift, *tables, length, first, stop,
                                 *geometry), items * ranges, threads,
                        scratch=(4, units * window_rows * width, window_dtype),
                        kept=(addresses, (array_kind(source), array_kind(flat))))

    return run


def direct_rows(data, weights, axes3, dtype, out, target, threads, derived, bias=None):
    """The row kernel, or the plane kernel for bfloat16 operands it cannot multiply in
    pairs exactly (:func:`bfloat16_pair_bits`)."""
    load_mode = half_load(data.dtype, target.f16c)  # rows_apply ruled out float16 without F16C
    if (load_mode == BFLOAT16
            and bfloat16_pair_bits(data, weights, dtype, 16, derived, target) is None):
        direct_planes(data, weights, axes3, dtype, out, target, threads, False, derived, bias)
        return
    rows_runner(data.shape[0], weights, axes3, dtype, target, threads, derived, load_mode,
                store_mode(out.dtype, dtype), bias)(data, out)
