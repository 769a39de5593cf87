"""Zeroing an output before an algorithm adds into it, on numba's threads.

Outputs that strides leave mostly unreached (stride 3-4, a one-tap kernel) are zeroed
whole before the products land: half of such a layer's time went to NumPy's
one-thread fill (``benchmarks/results/layer-profiles-zen2.json``).  The fill reads
nothing and writes as a copy does, so it splits between threads by the layout copies'
measured rule (:func:`~convtranspose._runtime.threads.copy_threads`).
"""

from __future__ import annotations

import numpy as np

from ..._runtime.threads import copy_threads
from .kernel_cache import cached_njit
from .launch import parallel_kernel

#: Bytes per item of the split fill: many items per thread, and each item a stretch
#: that the compiled loop writes as one ``memset``.
_CHUNK_BYTES = 1 << 16


@cached_njit(nogil=True)
def _zero_chunks(flat, chunk, start, stop):  # pragma: no cover - compiled
    # flat: the output's bytes; zeros into chunks [start, stop) of `chunk` bytes each,
    # as one slice (numba's slice fill compiles to a memset; a loop over the bytes
    # stored them one at a time, 7x slower).
    flat[start * chunk:min(stop * chunk, flat.size)] = 0


def zero_fill(out: np.ndarray, threads: int) -> None:
    """``out.fill(0)``, on up to ``threads`` of numba's threads where ``out`` is
    C-contiguous and :func:`~convtranspose._runtime.threads.copy_threads` splits a copy
    of its size (every element type the algorithms write is zero in all-zero bytes)."""
    threads = copy_threads(out.nbytes, threads) if out.flags.c_contiguous else 1
    if threads == 1:
        out.fill(0)
        return
    flat = out.reshape(-1).view(np.uint8)
    parallel_kernel(_zero_chunks, (flat, _CHUNK_BYTES), -(-flat.size // _CHUNK_BYTES),
                    threads)
