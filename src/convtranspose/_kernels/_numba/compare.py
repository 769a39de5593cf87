"""Whether two arrays hold the same bytes, compiled with numba: the weights memo's
comparison of a caller's filter with the copy it keeps
(:func:`convtranspose._runtime.memo.same_bits`).

A call costs numba's dispatch of two arrays (0.5 us on an AMD Zen 2) plus the reads,
where NumPy's comparison costs 5-8 us before it reads a byte and ``memcmp`` through
ctypes 2 us to find the two data addresses
(``benchmarks/results/filter-comparison-zen2.json``).
"""

from __future__ import annotations

import numpy as np

from .kernel_cache import cached_njit

__all__ = ["PIECE_BYTES", "bytes_differ"]

#: Bytes XOR-ed together before the loop asks whether any differed: the inner loop
#: stays free of branches (it vectorises), and a difference ends the comparison
#: within a piece.
PIECE_BYTES = 4096


@cached_njit(nogil=True)
def bytes_differ(first, second):  # pragma: no cover - compiled
    """Whether two flat uint8 arrays of one size differ in any byte."""
    size = first.size
    whole = size - size % 8
    # Eight bytes at a time (numba widens uint8 arithmetic to int64, which keeps a
    # byte loop from vectorising), the last few bytes one by one.
    words, others = first[:whole].view(np.uint64), second[:whole].view(np.uint64)
    step = PIECE_BYTES // 8
    for start in range(0, words.size, step):
        # Slices indexed from 0: with indices from a range that does not start at 0
        # numba cannot prove them non-negative, and its wrap-around check keeps the
        # loop from vectorising.
        a, b = words[start:start + step], others[start:start + step]
        differing = np.uint64(0)
        for i in range(a.size):
            differing |= a[i] ^ b[i]
        if differing:
            return True
    for i in range(whole, size):
        if first[i] != second[i]:
            return True
    return False
