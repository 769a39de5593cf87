"""Layout copies: channels-first data copied channels last in register blocks.

``direct-blocked`` reads channels-first data whose channel planes lie far apart through
a channels-last copy (:func:`channels_last_copy`), made in blocks of ``lanes x lanes``
elements transposed by interleaving.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.threads import SPLIT_SIZES, copy_threads
from ..common import move_axis
from .launch import native_loops_run, parallel_kernel

#: Seconds of rest before each timed copy: numba's threads sleep less than a
#: millisecond after a loop (waking them took 53-55 us after 1 ms against 10-12 us
#: back to back on an AMD Zen 3, ``benchmarks/results/native-threads-zen3.json``), and
#: a copy is split only where that pays even when they must be woken (a layer's first
#: copy after a pause).
_SPLIT_PAUSE = 0.002
#: Channels of the timed copies: a layer's usual count, a whole number of blocks at
#: any vector width.
_SPLIT_CHANNELS = 64


def _interleaved(lanes: int) -> tuple[list[str], str]:
    """Source lines that transpose the block held in ``r0_0 ... r0_<lanes-1>`` in
    registers, and the prefix of the transposed rows' names (``<prefix><i>``).

    Interleaving rows ``i`` and ``i + lanes/2`` into rows ``2i`` and ``2i + 1``,
    log2(lanes) times over, transposes the block (a perfect shuffle per round).
    """
    half, rounds = lanes // 2, lanes.bit_length() - 1
    lines = [f"    r{k + 1}_{i} = vector_interleave(r{k}_{i // 2}, r{k}_{i // 2 + half}, {i % 2})"
             for k in range(rounds) for i in range(lanes)]
    return lines, f"r{rounds}_"


def _tile_transpose_source(lanes: int) -> str:
    """Source of ``tile``: a ``lanes x lanes`` block of ``src`` (rows ``src_step`` apart)
    stored transposed into ``dst`` (rows ``dst_step`` apart), all in registers
    (:func:`_interleaved`)."""
    lines = ["def tile(src, src_at, src_step, dst, dst_at, dst_step):"]
    lines += [f"    r0_{i} = vector_load(src, src_at + {i} * src_step, {lanes})"
              for i in range(lanes)]
    transposing, row = _interleaved(lanes)
    lines += transposing
    lines += [f"    vector_store(dst, dst_at + {i} * dst_step, {row}{i})" for i in range(lanes)]
    return "\n".join(lines)


def _partial_tile_source(lanes: int) -> str:
    """Source of ``partial_tile``: :func:`_tile_transpose_source`'s block of ``rows``
    (1 to ``lanes - 1``) rows of ``src``, the others zeros in registers (nothing past
    the rows is read), each transposed row stored in its first ``rows`` elements
    (masked stores: nothing else is written)."""
    lines = ["def partial_tile(src, src_at, src_step, rows, dst, dst_at, dst_step):",
             f"    r0_0 = vector_load(src, src_at, {lanes})"]
    lines += [f"    r0_{i} = (vector_load(src, src_at + {i} * src_step, {lanes}) if rows > {i}"
              f" else vector_zero(src, {lanes}))" for i in range(1, lanes)]
    transposing, row = _interleaved(lanes)
    lines += transposing
    lines += [f"    vector_store_first(dst, dst_at + {i} * dst_step, rows, {row}{i})"
              for i in range(lanes)]
    return "\n".join(lines)


@kept("compiled kernels", maxsize=None)
def tile_transposer(lanes: int):
    """The compiled ``tile`` of :func:`_tile_transpose_source`."""
    from .codegen import compile_source

    return compile_source(_tile_transpose_source(lanes), "tile")


@kept("compiled kernels", maxsize=None)
def partial_tile_transposer(lanes: int):
    """The compiled ``partial_tile`` of :func:`_partial_tile_source`."""
    from .codegen import compile_source

    return compile_source(_partial_tile_source(lanes), "partial_tile")


@kept("compiled kernels", maxsize=None)
def first_store_kernel(lanes: int):
    """``store_first(out, at, out_step, first_out, first_at, plane, pixels_count,
    channels)``: the sums of ``pixels_count`` pixels, rows ``out_step`` apart from
    ``at``, and their first ``channels`` channels stored as rows of pixels ``plane``
    apart from ``first_at`` (whole blocks transposed in registers)."""
    from .codegen import compile_template

    return compile_template("first_store", dict(
        lanes=lanes, tile=tile_transposer(lanes), partial_tile=partial_tile_transposer(lanes),
    ))["store_first"]


def uses_masked_tiles(target) -> bool:
    """Whether the layout copies take a band of fewer than a vector's channels through
    ``partial_tile``'s masked stores (64-byte vectors: AVX-512's masks), or element by
    element: with AVX2's ``vmaskmovps`` the element loop took 0.47-0.82x the time of a
    channels-last copy and 0.65-0.96x of a padded one on an AMD EPYC Zen 2 (3-67
    channels, ``benchmarks/results/forward-kernels-zen2.json``, ``few_channel_copies``)."""
    return target.vector_bytes >= 64


@kept("compiled kernels", maxsize=None)
def transpose_kernel(lanes: int, masked_tiles: bool):
    """``kernel(src, dst, rows, cols, start, stop)``: ``(B, rows, cols)`` into ``(B, cols,
    rows)`` (flat C-order buffers), for the bands of ``lanes`` rows with flat index (b,
    band) in [start, stop): whole blocks in registers (a last band of fewer rows with
    zeros in the others, stored masked where ``masked_tiles``, else element by element:
    :func:`uses_masked_tiles`), the columns past them one element at a time."""
    from .codegen import compile_template

    return compile_template("transpose", dict(
        np=np, lanes=lanes, step=np.uint64(lanes), tile=tile_transposer(lanes),
        partial_tile=partial_tile_transposer(lanes), masked_tiles=masked_tiles,
    ))["kernel"]


def _in_register_blocks(data: np.ndarray, dtype: np.dtype) -> bool:
    """Whether the layout copies transpose ``data`` into ``dtype`` in register blocks:
    C-contiguous float32 or float64 data of that native dtype (NumPy copies the rest)."""
    return (data.dtype == dtype and dtype in (np.float32, np.float64)
            and data.flags.c_contiguous and dtype.isnative)


def _layout_copy(data: np.ndarray, dtype, target, to_last: bool,
                 threads: int | None = None) -> np.ndarray:
    """``data`` ``(N, C, X...)`` as ``(N, X..., C)`` (``to_last``) or ``(N, X..., C)`` as
    ``(N, C, X...)``: a new C-contiguous array of ``dtype``, float32 and float64 in
    register blocks (:func:`transpose_kernel`) on ``threads`` (default
    :func:`copy_threads`), other data by NumPy."""
    dtype = np.dtype(dtype)
    if to_last:
        shape, view = (data.shape[0],) + data.shape[2:] + data.shape[1:2], move_axis(data, 1, -1)
    else:
        shape, view = data.shape[:1] + data.shape[-1:] + data.shape[1:-1], move_axis(data, -1, 1)
    result = np.empty(shape, dtype)
    if not _in_register_blocks(data, dtype) or data.ndim < 3:
        np.copyto(result, view, casting="unsafe")
        return result
    lanes = target.lanes(dtype)
    channels, pixels = (data.shape[1], math.prod(data.shape[2:])) if to_last else (
        data.shape[-1], math.prod(data.shape[1:-1]))
    rows, cols = (channels, pixels) if to_last else (pixels, channels)
    kernel = transpose_kernel(lanes, uses_masked_tiles(target))
    source, flat = data.reshape(-1), result.reshape(-1)
    if threads is None:
        threads = copy_threads(data.nbytes, target.threads)
    parallel_kernel(kernel, (source, flat, rows, cols), data.shape[0] * -(-rows // lanes),
                    threads)
    return result


def channels_last_copy(data: np.ndarray, dtype, target) -> np.ndarray:
    """``data`` ``(N, C, X...)`` as a new C-contiguous ``(N, X..., C)`` array of ``dtype``.

    float32 and float64 data of that dtype is transposed in register blocks, several
    times faster than NumPy's copy of the transposed view, which reads the channels
    one element at a time (``benchmarks/results/direct-blocked-zen4.json``); other
    data is copied by NumPy.
    """
    return _layout_copy(data, dtype, target, True)


@kept("compiled kernels", maxsize=None)
def _padded_transpose_kernel(lanes: int, masked_tiles: bool):
    """The compiled kernel of ``templates/padded_transpose.py``; ``masked_tiles`` as
    :func:`uses_masked_tiles` gives it."""
    from .codegen import compile_template

    return compile_template("padded_transpose", dict(
        lanes=lanes, tile=tile_transposer(lanes), partial_tile=partial_tile_transposer(lanes),
        masked_tiles=masked_tiles,
    ))["kernel"]


def zero_bordered(items: int, spatial, pads, channels: int, dtype):
    """``(array, inside)``: a new ``(items, Y1', Y2', Y3', channels)`` array with
    ``pads[a] = (before, after)`` zeros on either side of spatial axis ``a`` of sizes
    ``spatial``, and the index of the rest, left for the caller to fill.  Only the
    borders are written: a zeroed allocation would clear the whole array again (heap
    memory that NumPy reuses is not fresh from the system)."""
    shape = (items,) + tuple(b + size + a for (b, a), size in zip(pads, spatial)) + (channels,)
    array = np.empty(shape, dtype)
    for axis, ((before, after), size) in enumerate(zip(pads, spatial), start=1):
        for border in (slice(0, before), slice(before + size, before + size + after)):
            array[(slice(None),) * axis + (border,)] = 0
    inside = (slice(None),) + tuple(slice(b, b + size) for (b, _), size in zip(pads, spatial))
    return array, inside


def padded_channels_last_copy(data: np.ndarray, pads, dtype, target) -> np.ndarray:
    """``data`` ``(N, C, Y1, Y2, Y3)`` as a new C-contiguous channels-last array of
    ``dtype`` with ``pads[a] = (before, after)`` zeros on either side of spatial axis
    ``a``: in one pass of register-block transposes for float32 and float64 data of
    that dtype, on the threads a copy of its size pays for (:func:`copy_threads`),
    else :func:`channels_last_copy` and a padded copy of that."""
    dtype = np.dtype(dtype)
    spatial = data.shape[2:]
    result, inside = zero_bordered(data.shape[0], spatial, pads, data.shape[1], dtype)
    if not _in_register_blocks(data, dtype):
        result[inside] = channels_last_copy(data, dtype, target)
        return result
    lanes = target.lanes(dtype)
    sizes = np.array(data.shape + result.shape[1:4] + tuple(b for b, _ in pads), np.int64)
    kernel = _padded_transpose_kernel(lanes, uses_masked_tiles(target))
    parallel_kernel(kernel, (data.reshape(-1), result.reshape(-1), sizes),
                    data.shape[0] * spatial[0] * spatial[1] * -(-data.shape[1] // lanes),
                    copy_threads(data.nbytes, target.threads))
    return result


def channels_first_copy(data: np.ndarray, dtype, target) -> np.ndarray:
    """``data`` ``(N, X..., C)`` as a new C-contiguous ``(N, C, X...)`` array of
    ``dtype``: :func:`channels_last_copy`'s reverse, with its rules."""
    return _layout_copy(data, dtype, target, False)


def split_threshold(sizes, alone, split) -> int | None:
    """The smallest of ``sizes`` (ascending) from which on every split copy took less
    than the same copy on one thread (``split[i] < alone[i]``), or None where the
    largest did not."""
    threshold = None
    for size, one, several in reversed(list(zip(sizes, alone, split))):
        if several >= one:
            break
        threshold = size
    return threshold


def split_sizes(measured: dict) -> dict[bool, int | None]:
    """The sizes split copies pay from (:func:`split_threshold`) in the times
    :func:`measure_copy_split` gives: ``{False: after a rest, True: right after a
    native loop}``."""
    sizes = measured["sizes"]
    return {False: split_threshold(sizes, measured["alone"], measured["cold"]),
            True: split_threshold(sizes, measured["alone_warm"], measured["warm"])}


def measure_copy_split(target, rounds: int = 5) -> dict | None:
    """Time channels-last copies of :data:`SPLIT_SIZES` bytes of float32 (``(1, 64,
    pixels)``) at ``target``'s vector width on one thread and on its threads of numba's
    native threads: ``"alone"`` and ``"cold"`` each after a rest (:data:`_SPLIT_PAUSE`),
    ``"alone_warm"`` and ``"warm"`` right after an untimed copy of the same data the
    same way.  Each round times every size every way, so that a noisy spell of a
    shared machine touches one round of every size rather than every round of one;
    the fastest of ``rounds``.  ``{"sizes", "alone", "cold", "alone_warm", "warm"}``
    (seconds), or None where a split copy did not run on numba's threads (their loop
    is not compiled yet, or not allowed here: the pool's costs are another matter)."""
    threads = target.threads
    sources = [np.ones((1, _SPLIT_CHANNELS, size // (4 * _SPLIT_CHANNELS)), np.float32)
               for size in SPLIT_SIZES]
    before = native_loops_run()
    _layout_copy(sources[0], np.float32, target, True, threads)  # compiles nothing
    if native_loops_run() == before:
        return None
    ways = {"alone": (1, _SPLIT_PAUSE), "cold": (threads, _SPLIT_PAUSE),
            "alone_warm": (1, 0), "warm": (threads, 0)}
    best = {way: [math.inf] * len(SPLIT_SIZES) for way in ways}
    for _ in range(rounds):
        for index, data in enumerate(sources):
            for way, (count, pause) in ways.items():
                if pause:
                    time.sleep(pause)
                else:
                    _layout_copy(data, np.float32, target, True, count)
                start = time.perf_counter()
                _layout_copy(data, np.float32, target, True, count)
                best[way][index] = min(best[way][index], time.perf_counter() - start)
    return {"sizes": list(SPLIT_SIZES), **best}
