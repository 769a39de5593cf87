"""Filter products on numba's threads through a packed copy of the filter matrix.

Below :data:`~.common.SERIAL_GEMM_FLOPS` OpenBLAS runs a product on one thread (waking
its threads costs more than they save), and splitting one between native threads
makes concurrent OpenBLAS calls (``NATIVE_SPLIT_GEMM_FLOPS``).  ``pointwise`` and
``col2im-ncx`` multiply a constant filter matrix by the data (``pointwise`` channels
last: the data rows by the matrix); on more than one thread they run such products
through the packed micro-kernels of :mod:`._numba.packed` instead, with the filter
packed once and kept with it (the weights memo, or the prepared layer).  Measured
planning times each algorithm on one thread (BLAS) and on all of them (this), so each
machine keeps what is faster there.
"""

from __future__ import annotations

import numpy as np

from .common import SERIAL_GEMM_FLOPS, native_threads_run

__all__ = ["filter_product", "packed_filter", "packs_product", "rows_product"]


def packs_product(flops: float, threads: int, dtype, shape: tuple[int, int] | None = None
                  ) -> bool:
    """Whether a filter product of ``flops`` (its largest single product) in ``dtype``
    runs through the packed kernel on ``threads`` threads: more than one, numba's
    native threads usable, float32 or float64, and under ``SERIAL_GEMM_FLOPS`` or, for
    channels-first products of ``shape`` ``(K, P)`` (the reduction, and the positions of
    every product of the call), fewer positions than one chunk of the packed kernel
    (:func:`._numba.packed.one_chunk`).

    Within one chunk the packed kernel reads each weight from memory once and uses it
    for every position while it sits in L1, where OpenBLAS packs the whole filter again
    on every call: on an AMD EPYC Zen 3, products of 2048-16384 rows and 16-192
    positions (K = 64-2048) took 0.47-0.96x OpenBLAS's time on both threads (DCGAN-up
    1024->512's 8192 x 1024 by 16 positions: 3.2 against 5.6 ms), and at 256 positions
    with K >= 512, one whole chunk, 0.98-1.25x; in float64, whose chunks hold half as
    many positions, 0.27-0.90x below one chunk
    (``benchmarks/results/packed-products-zen3.json``, ``few_positions``)."""
    if np.dtype(dtype) not in (np.float32, np.float64) or not native_threads_run(threads):
        return False
    if flops < SERIAL_GEMM_FLOPS:
        return True
    if shape is None:
        return False
    from ._numba.packed import one_chunk

    return one_chunk(*shape, dtype)


def packed_filter(derived: dict, matrix: np.ndarray, channels_last: bool = False):
    """``matrix`` packed for the micro-kernel, kept in ``derived``: the dict of what the
    weights memo keeps with the filter that ``matrix`` comes from
    (:func:`~convtranspose._runtime.memo.derived_from`), whose key says how.
    ``matrix`` is ``(G, M, K)`` for :func:`filter_product`
    (:func:`._numba.packed.pack_matrix`), or ``channels_last`` ``(G, K, M)`` for
    :func:`rows_product` (:func:`._numba.packed.pack_columns`)."""
    packed = derived.get("packed")
    if packed is None:
        from ._numba.packed import pack_columns, pack_matrix

        pack = pack_columns if channels_last else pack_matrix
        derived["packed"] = packed = pack(np.asarray(matrix))
    return packed


def filter_product(packed, data: np.ndarray, threads: int,
                   out: np.ndarray | None = None) -> np.ndarray:
    """``out[n, g] = A[g] @ data[n, g]`` for the matrix ``A`` of ``packed``: ``data``
    ``(N, G, K, P)`` (any strides, copied when not C-contiguous), ``out`` C-contiguous
    ``(N, G, M, P)`` of the packed dtype (new when None)."""
    from ._numba.packed import packed_product

    dtype = packed.data.dtype
    data = np.ascontiguousarray(data, dtype)
    if out is None:
        out = np.empty(data.shape[:2] + (packed.rows, data.shape[3]), dtype)
    packed_product(packed, data, out, threads)
    return out


def rows_product(packed, data: np.ndarray, threads: int, out: np.ndarray) -> None:
    """``out[r, g] = data[r, g] @ A[g]`` for the matrix ``A`` of ``packed``
    (:func:`packed_filter` channels last): ``data`` ``(R, G, K)`` (copied when not
    C-contiguous), ``out`` C-contiguous ``(R, G, M)`` of the packed dtype."""
    from ._numba.packed import packed_rows_product

    packed_rows_product(packed, np.ascontiguousarray(data, packed.data.dtype), out, threads)
