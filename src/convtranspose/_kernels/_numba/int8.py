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
(:func:`word_halves`).
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.machine import l1_data_cache_bytes
from ..._runtime.threads import PARALLEL_COPY_BYTES, parallel_for
from .kernel_cache import cached_njit
from .launch import parallel_kernel

__all__ = ["COLUMNS", "group_products", "pack_signed", "panel_source", "u8s8_products",
           "word_bytes", "word_halves"]

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


#: The most pixels an item of :func:`_channels_first_words` or
#: :func:`_channels_first_halves` takes (:func:`_run_pixels`).
_WORD_PIXELS = 64


def _run_pixels(words: int) -> int:
    """Pixels per item of the channels-first word passes: their rows of ``words`` int32
    words fill at most half of L1, so that they stay there while every word of the run
    is stored (64 pixels of 256 words, 64 KiB, ran slower than NumPy's cast of the
    transposed view; ``benchmarks/results/int8-kernels-xeon.json``, word_halves)."""
    return max(1, min(_WORD_PIXELS, l1_data_cache_bytes() // 2 // (4 * words)))


@cached_njit(nogil=True)
def _run_item(item, pixels, run, width, out):  # pragma: no cover - compiled
    # Item `item` of a channels-first word pass: its sample, first pixel and pixel
    # count, and the rows of words from its first pixel on.
    runs = (pixels + run - 1) // run
    n, first = item // runs, item % runs * run
    return n, first, min(pixels - first, run), out[(n * pixels + first) * width:]


@cached_njit(nogil=True)
def _channels_first_words(source, out, shift, groups, ci, words, pixels, run, start,
                          stop):  # pragma: no cover - compiled
    # source: flat (N, G*Ci, P); out: flat uint32 (N, P, G, words), word w holding
    # channels 4w .. 4w + 3 of its group (byte i of the little-endian word: channel
    # 4w + i), zero bytes past Ci.  Items (n, run of `run` pixels) with flat index in
    # [start, stop): per word, four channel planes read along the run and each pixel's
    # word stored once.
    width = groups * words
    for item in range(start, stop):
        n, first, count, rows = _run_item(item, pixels, run, width, out)
        for g in range(groups):
            for w in range(words):
                plane = ((n * groups + g) * ci + 4 * w) * pixels + first
                at = g * words + w
                if 4 * w + 4 <= ci:
                    # (Four plane slices: LLVM keeps their pointers apart from the rows'.)
                    c0 = source[plane:plane + count]
                    c1 = source[plane + pixels:plane + pixels + count]
                    c2 = source[plane + 2 * pixels:plane + 2 * pixels + count]
                    c3 = source[plane + 3 * pixels:plane + 3 * pixels + count]
                    for p in range(count):
                        rows[at + p * width] = (
                            np.uint32(np.uint8(c0[p] + shift))
                            | np.uint32(np.uint8(c1[p] + shift)) << np.uint32(8)
                            | np.uint32(np.uint8(c2[p] + shift)) << np.uint32(16)
                            | np.uint32(np.uint8(c3[p] + shift)) << np.uint32(24))
                else:
                    for p in range(count):
                        word = np.uint32(0)
                        for i in range(ci - 4 * w):
                            word |= np.uint32(np.uint8(source[plane + i * pixels + p] + shift)
                                              ) << np.uint32(8 * i)
                        rows[at + p * width] = word


def word_bytes(data: np.ndarray, channels_last: bool, groups: int, ci: int, row: int,
               shift: int, threads: int) -> np.ndarray:
    """``data + shift`` (integers, C-contiguous, every value then in ``[0, 255]``) as
    bytes ``(N, X..., G, row)``: each pixel's channels of a group, zero from ``Ci`` to
    ``row`` (a multiple of 4).  Channels-first data (``(N, G*Ci, X...)``) in one compiled
    pass that stores four channels' bytes as one word (NumPy's copy of the transposed
    view stores byte by byte, about twice as long); channels-last data by NumPy."""
    pixels_shape = data.shape[1:-1] if channels_last else data.shape[2:]
    batch, pixels = data.shape[0], int(np.prod(pixels_shape))
    out = np.empty((batch,) + tuple(pixels_shape) + (groups, row), np.uint8)
    if channels_last:
        if row > ci:
            out[..., ci:] = 0
        source = data.reshape(data.shape[:-1] + (groups, ci))
        # The shift in a type that holds it and every value of the data (a Python int
        # takes the data's: 128 does not fit int8).
        typed = np.asarray(shift, np.promote_types(data.dtype, np.min_scalar_type(shift)))
        np.add(source, typed, out=out[..., :ci], casting="unsafe")
        return out
    source, flat = data.reshape(-1), out.reshape(-1).view(np.uint32)
    if out.nbytes < PARALLEL_COPY_BYTES:  # the layout copies' rule
        threads = 1
    run = _run_pixels(groups * row // 4)
    parallel_kernel(_channels_first_words, (source, flat, np.int64(shift), groups, ci,
                                            row // 4, pixels, run),
                    batch * -(-pixels // run), threads)
    return out


@cached_njit(nogil=True)
def _channels_first_halves(source, out, groups, ci, pairs, pixels, run, start,
                           stop):  # pragma: no cover - compiled
    # source: flat (N, G*Ci, P) integers within int16; out: flat uint32 (N, P, G,
    # pairs), word w holding channel 2w (low half) and 2w + 1 (high half; zero past
    # Ci) of its group.  Items (n, run of `run` pixels) with flat index in [start,
    # stop): per word, two channel planes read along the run and each pixel's word
    # stored once.
    width = groups * pairs
    for item in range(start, stop):
        n, first, count, rows = _run_item(item, pixels, run, width, out)
        for g in range(groups):
            for w in range(pairs):
                plane = ((n * groups + g) * ci + 2 * w) * pixels + first
                at = g * pairs + w
                low = source[plane:plane + count]
                if 2 * w + 2 <= ci:
                    high = source[plane + pixels:plane + pixels + count]
                    for p in range(count):
                        rows[at + p * width] = (
                            np.uint32(np.uint16(np.int16(low[p])))
                            | np.uint32(np.uint16(np.int16(high[p]))) << np.uint32(16))
                else:
                    for p in range(count):
                        rows[at + p * width] = np.uint32(np.uint16(np.int16(low[p])))


def word_halves(data: np.ndarray, groups: int, ci: int, pairs: int,
                threads: int) -> np.ndarray:
    """Channels-first integer ``data`` ``(N, G*Ci, X...)``, every value within int16, as
    int32 words ``(N, X..., G * pairs)`` of two int16 halves each (input channels ``2c``
    and ``2c + 1`` of a group, zero past ``Ci``), in one compiled pass (:func:`_run_pixels`
    per piece of work): 0.3-0.55x the time of NumPy's cast of the transposed view on
    the quantized suite's layers (``benchmarks/results/int8-kernels-xeon.json``,
    word_halves)."""
    pixels = int(np.prod(data.shape[2:]))
    out = np.empty((data.shape[0],) + data.shape[2:] + (groups * pairs,), np.uint32)
    run = _run_pixels(groups * pairs)
    source = np.ascontiguousarray(data).reshape(-1)
    if out.nbytes < PARALLEL_COPY_BYTES:  # the layout copies' rule
        threads = 1
    parallel_kernel(_channels_first_halves, (source, out.reshape(-1), groups, ci, pairs,
                                             pixels, run),
                    data.shape[0] * -(-pixels // run), threads)
    return out.view(np.int32)
