"""Layout copies: channels-first data copied channels last in register blocks.

``direct-blocked`` reads channels-first data whose channel planes lie far apart through
a channels-last copy (:func:`channels_last_copy`), made in blocks of ``lanes x lanes``
elements transposed by interleaving.
"""

from __future__ import annotations

import math

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.threads import PARALLEL_COPY_BYTES
from ..common import move_axis
from .launch import parallel_kernel


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
def transpose_kernel(lanes: int):
    """``kernel(src, dst, rows, cols, start, stop)``: ``(B, rows, cols)`` into ``(B, cols,
    rows)`` (flat C-order buffers), for the bands of ``lanes`` rows with flat index (b,
    band) in [start, stop): whole blocks in registers (a last band of fewer rows with
    zeros in the others, stored masked), the columns past them one element at a
    time."""
    from .codegen import compile_source, compile_template

    return compile_template("transpose", dict(
        np=np, lanes=lanes, step=np.uint64(lanes), tile=tile_transposer(lanes),
        partial_tile=compile_source(_partial_tile_source(lanes), "partial_tile"),
    ))["kernel"]


def _layout_copy(data: np.ndarray, dtype, target, to_last: bool) -> np.ndarray:
    """``data`` ``(N, C, X...)`` as ``(N, X..., C)`` (``to_last``) or ``(N, X..., C)`` as
    ``(N, C, X...)``: a new C-contiguous array of ``dtype``, float32 and float64 in
    register blocks (:func:`transpose_kernel`), other data by NumPy."""
    dtype = np.dtype(dtype)
    if to_last:
        shape, view = (data.shape[0],) + data.shape[2:] + data.shape[1:2], move_axis(data, 1, -1)
    else:
        shape, view = data.shape[:1] + data.shape[-1:] + data.shape[1:-1], move_axis(data, -1, 1)
    result = np.empty(shape, dtype)
    if data.dtype != dtype or dtype not in (np.float32, np.float64) or not (
            data.flags.c_contiguous and dtype.isnative) or data.ndim < 3:
        np.copyto(result, view, casting="unsafe")
        return result
    lanes = target.lanes(dtype)
    channels, pixels = (data.shape[1], math.prod(data.shape[2:])) if to_last else (
        data.shape[-1], math.prod(data.shape[1:-1]))
    rows, cols = (channels, pixels) if to_last else (pixels, channels)
    kernel = transpose_kernel(lanes)
    source, flat = data.reshape(-1), result.reshape(-1)
    threads = target.threads if data.nbytes >= PARALLEL_COPY_BYTES else 1
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


def channels_first_copy(data: np.ndarray, dtype, target) -> np.ndarray:
    """``data`` ``(N, X..., C)`` as a new C-contiguous ``(N, C, X...)`` array of
    ``dtype``: :func:`channels_last_copy`'s reverse, with its rules."""
    return _layout_copy(data, dtype, target, False)
