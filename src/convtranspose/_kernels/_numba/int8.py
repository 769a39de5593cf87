"""Exact 8-bit products with AVX512-VNNI: unsigned bytes times signed bytes into int32.

``u8s8_products(a, packed, ...)`` computes ``a @ w`` for ``a`` ``(M, K)`` of uint8 and
``w`` ``(K, J)`` of int8, in int32, exactly: ``vpdpbusd`` multiplies four byte pairs per
lane and adds them to an int32 lane (64 multiply-adds per instruction, against 16 of a
float32 FMA).  The kernel keeps ``_ROWS x _VECTORS`` vectors of sums in registers:
per group of four ``K`` values, each of ``_ROWS`` rows of ``a`` is broadcast (its four
bytes as one int32) and each of ``_VECTORS`` weight vectors (16 columns of four bytes)
loaded once.  The weights are packed by :func:`pack_signed` as ``(J / 16, K / 4, 16,
4)``; ``K`` and ``J`` are padded with zero weights.  Only imported with numba, and
called only where the CPU has AVX512-VNNI (:func:`convtranspose._runtime.machine.has_vnni`).

The channels-first data's casts into int32 words run here too: four bytes per word for
the VNNI products (:func:`word_bytes`), two int16 halves for ``pmaddwd``'s
(:func:`word_halves`); and channels-last data's, shifted into bytes or halves
(:func:`shifted_into` by NumPy, :func:`shifted_pixels_pass` compiled).
"""

from __future__ import annotations

import math

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.threads import parallel_for
from .kernel_cache import cached_njit
from .launch import parallel_kernel
from .transpose import copy_threads

__all__ = ["COLUMNS", "channel_words_pass", "group_products", "pack_signed", "panel_source",
           "shifted_into", "shifted_pixels_pass", "u8s8_products", "word_bytes",
           "word_halves"]

#: Rows of ``a`` and vectors of 16 columns whose sums a block keeps in registers: 16
#: accumulators, 4 weight vectors and a broadcast row, of the 32 AVX-512 registers.
_ROWS, _VECTORS = 4, 4
#: Columns a block computes: the packed weights' columns are padded to a multiple.
COLUMNS = 16 * _VECTORS
#: Rows of ``a`` per piece of work that a thread takes.
_PIECE_ROWS = 64


def panel_source(rows: int = _ROWS, vectors: int = _VECTORS) -> str:
    """Source of the kernel: blocks of ``rows`` rows x ``vectors * 16`` columns, then the
    rows past the last whole block one at a time."""
    def block(count: int) -> list[str]:
        sums = [[f"s_{r}_{v}" for v in range(vectors)] for r in range(count)]
        lines = [f"            {name} = vector_zero(cols, 16)" for row in sums for name in row]
        lines += ["            for q in range(k4):"]
        lines += [f"                w_{v} = vector_load(w32, w_at + {v} * k4 * 16 + q * 16, 16)"
                  for v in range(vectors)]
        for r, row in enumerate(sums):
            lines.append(f"                x = vector_splat_at(a32, (m + {r}) * k4 + q, 16)")
            lines += [f"                {name} = vector_dot_bytes(x, w_{v}, {name})"
                      for v, name in enumerate(row)]
        lines += [f"            vector_store(cols, (m + {r}) * width + j0 + {v * 16}, {name})"
                  for r, row in enumerate(sums) for v, name in enumerate(row)]
        return lines

    lines = ["def panel(a32, w32, cols, k4, width, m_first, m_stop):",
             f"    for j0 in range(0, width, {vectors * 16}):",
             "        w_at = j0 * k4",
             "        m = m_first",
             f"        while m + {rows} <= m_stop:"]
    lines += block(rows)
    lines += [f"            m += {rows}",
              "        while m < m_stop:"]
    lines += block(1)
    lines += ["            m += 1"]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def _panel():
    from .codegen import compile_source

    return compile_source(panel_source(), "panel")


def pack_signed(weights: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``weights`` ``(K, J)`` of int8 packed for :func:`u8s8_products`: ``(int32 words,
    K / 4 rounded up, J rounded up to COLUMNS)``, zero beyond ``K`` and ``J``."""
    k, j = weights.shape
    k4, width = -(-k // 4), -(-j // COLUMNS) * COLUMNS
    padded = np.zeros((k4 * 4, width), np.int8)
    padded[:k, :j] = weights
    packed = padded.reshape(k4, 4, width // 16, 16).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(packed).view(np.int32).reshape(-1), k4, width


def u8s8_products(a: np.ndarray, packed: np.ndarray, k4: int, width: int,
                  threads: int) -> np.ndarray:
    """``a @ w`` (int32, ``(M, width)``) for ``a`` ``(M, k4 * 4)`` of uint8 (C-contiguous)
    and ``w`` packed by :func:`pack_signed`, on up to ``threads`` threads."""
    return group_products(a[None], [packed], k4, width, threads).reshape(a.shape[0], width)


def group_products(a: np.ndarray, packed: list, k4: int, width: int,
                   threads: int) -> np.ndarray:
    """``a[g] @ w[g]`` for every group ``g``: ``a`` ``(G, M, k4 * 4)`` of uint8
    (C-contiguous) and ``packed[g]`` packed by :func:`pack_signed`, in one pass over
    (group, piece of rows) on up to ``threads`` threads (a layer of many small groups
    does not wait for each group's threads in turn).  Returns the flat int32 sums
    ``(G * M * width,)``, to be viewed as ``(G, M, width)``."""
    groups, rows = a.shape[:2]
    a32 = a.view(np.int32).reshape(groups, -1)
    cols = np.empty(groups * rows * width, np.int32)
    per_group = cols.reshape(groups, -1)
    panel = _panel()
    pieces = -(-rows // _PIECE_ROWS)

    def work(first, stop):
        # One panel call per group the range covers: its pieces are consecutive rows.
        for g in range(first // pieces, (stop - 1) // pieces + 1):
            low, high = max(first, g * pieces) - g * pieces, min(stop, (g + 1) * pieces) - g * pieces
            panel(a32[g], packed[g], per_group[g], k4, width, low * _PIECE_ROWS,
                  min(rows, high * _PIECE_ROWS))

    if pieces:
        parallel_for(work, groups * pieces, threads)
    return cols


#: Pixels per item of the channel word kernels (:func:`_channel_words`): a scratch
#: block of ``lanes`` words of this many pixels (16 KiB for 16 lanes) stays in L1
#: between its fill and its transpose.
_CHUNK_PIXELS = 256


@kept("compiled kernels", maxsize=None)
def words_kernel(lanes: int, halves: bool):
    """``kernel(source, out, shift, groups, ci, words, pixels, start, stop)`` of
    ``templates/channel_words.py``: four bytes per word, or two int16 halves where
    ``halves``, transposed in blocks of ``lanes x lanes`` words."""
    from .codegen import compile_template
    from .transpose import tile_transposer

    return compile_template("channel_words", dict(
        np=np, lanes=lanes, chunk=_CHUNK_PIXELS, step=np.uint64(_CHUNK_PIXELS),
        halves=halves, tile=tile_transposer(lanes),
    ))["kernel"]


def _channel_words(data: np.ndarray, shift: int, groups: int, ci: int, words: int,
                   lanes: int, threads: int, halves: bool) -> np.ndarray:
    """Channels-first ``data`` ``(N, G*Ci, X...)`` as uint32 words ``(N, P, G * words)``
    (:func:`words_kernel`): each block of word planes made along the pixels, where
    LLVM vectorizes the loop, then transposed in registers.  Storing each pixel's
    words one at a time instead took 1.1-1.7x as long on the quantized suite's layers
    on an Intel Xeon (``benchmarks/results/int8-kernels-xeon.json``, channel_words)."""
    batch, pixels = data.shape[0], math.prod(data.shape[2:])
    out = np.empty((batch, pixels, groups * words), np.uint32)
    threads = copy_threads(out.nbytes, threads)  # the layout copies' rule
    parallel_kernel(*channel_words_pass(np.ascontiguousarray(data), out, shift, groups, ci,
                                        lanes, halves), threads)
    return out


def channel_words_pass(data: np.ndarray, out: np.ndarray, shift: int, groups: int, ci: int,
                       lanes: int, halves: bool) -> tuple:
    """``(kernel, arguments, items)``: :func:`_channel_words`' pass of C-contiguous
    ``data`` ``(N, G*Ci, X...)`` into ``out`` ``(N, P, G * words)`` uint32, as
    ``kernel(*arguments, start, stop)`` over items ``[0, items)``."""
    batch, pixels, width = out.shape
    items = batch * -(-width // lanes) * -(-pixels // _CHUNK_PIXELS)
    return words_kernel(lanes, halves), (
        data.reshape(-1), out.reshape(-1), np.int64(shift), groups, ci, width // groups,
        pixels), items


def word_bytes(data: np.ndarray, channels_last: bool, groups: int, ci: int, row: int,
               shift: int, threads: int, lanes: int) -> np.ndarray:
    """``data + shift`` (integers, C-contiguous, every value then in ``[0, 255]``) as
    bytes ``(N, X..., G, row)``: each pixel's channels of a group, zero from ``Ci`` to
    ``row`` (a multiple of 4).  Channels-first data (``(N, G*Ci, X...)``) as words of
    four channels (:func:`_channel_words`, blocks of ``lanes`` words: the target's
    float32 lanes); channels-last data by NumPy."""
    pixels_shape = data.shape[1:-1] if channels_last else data.shape[2:]
    batch = data.shape[0]
    if channels_last:
        out = np.empty((batch,) + tuple(pixels_shape) + (groups, row), np.uint8)
        if row > ci:
            out[..., ci:] = 0
        shifted_into(data, out, shift, groups, ci)
        return out
    words = _channel_words(data, shift, groups, ci, row // 4, lanes, threads, False)
    return words.view(np.uint8).reshape((batch,) + tuple(pixels_shape) + (groups, row))


def shifted_into(data: np.ndarray, out: np.ndarray, shift: int, groups: int, ci: int) -> None:
    """``data + shift`` for channels-last ``data`` ``(N, X..., G*Ci)`` into the first
    ``Ci`` of each group's parts of ``out`` ``(N, X..., G, parts)`` (bytes, or int16
    halves), cast as they are stored."""
    source = data.reshape(data.shape[:-1] + (groups, ci))
    # The shift in a type that holds it and every value of the data (a Python int takes
    # the data's: 128 does not fit int8).
    typed = np.asarray(shift, np.promote_types(data.dtype, np.min_scalar_type(shift)))
    np.add(source, typed, out=out[..., :ci], casting="unsafe")


@cached_njit(nogil=True)
def _shifted_pixels(source, out, shift, groups, ci, parts, start,
                    stop):  # pragma: no cover - compiled
    # Pixels [start, stop): each group's Ci values plus the shift into the first Ci of
    # its parts, cast as stored (the values then fit); the parts past Ci stay as they are.
    for pixel in range(start, stop):
        for group in range(pixel * groups, (pixel + 1) * groups):
            read, write = group * ci, group * parts
            for channel in range(ci):
                out[write + channel] = source[read + channel] + shift


def shifted_pixels_pass(source: np.ndarray, out: np.ndarray, shift: int, groups: int,
                        ci: int) -> tuple:
    """``(kernel, arguments, items)``: :func:`shifted_into` as a compiled pass over the
    pixels ``[0, items)``, ``kernel(*arguments, start, stop)``, of the flat data
    ``source`` (channels last, ``G*Ci`` values per pixel) into ``out`` ``(N, X..., G,
    parts)``.  A small layer's call runs it in one compiled call with its sums
    (:class:`convtranspose._kernels.chained_sums.ChainedSums`), where NumPy's
    :func:`shifted_into` is a call of its own."""
    parts = out.shape[-1]
    return _shifted_pixels, (source, out.reshape(-1), np.int64(shift), groups, ci,
                             parts), source.size // (groups * ci)


def word_halves(data: np.ndarray, groups: int, ci: int, pairs: int, threads: int,
                lanes: int) -> np.ndarray:
    """Channels-first integer ``data`` ``(N, G*Ci, X...)``, every value within int16, as
    int32 words ``(N, X..., G * pairs)`` of two int16 halves each (input channels ``2c``
    and ``2c + 1`` of a group, zero past ``Ci``; :func:`_channel_words`, blocks of
    ``lanes`` words)."""
    words = _channel_words(data, 0, groups, ci, pairs, lanes, threads, True)
    return words.reshape(data.shape[:1] + data.shape[2:] + (groups * pairs,)).view(np.int32)
