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
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.threads import parallel_for

__all__ = ["COLUMNS", "group_products", "pack_signed", "panel_source", "u8s8_products"]

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
