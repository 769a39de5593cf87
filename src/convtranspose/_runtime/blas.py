"""Direct calls into the BLAS bundled with NumPy (optional, located at first use).

``np.matmul`` cannot accumulate into its output (BLAS's ``beta = 1``) and copies
any operand whose rows are not packed the way it expects.  The ``gemm``
algorithms of :mod:`convtranspose.kernels` need both: they add the products of
several row-shifted views of one buffer into one strided result.  This module
finds the ``cblas_?gemm`` of the OpenBLAS that NumPy's wheels bundle (the
``scipy-openblas`` build, 64-bit integers) and calls it through :mod:`ctypes`,
which releases the GIL during the call.

When that library is not there (NumPy built against MKL, Accelerate, or a
system BLAS under another name) :func:`available` is False and the kernel uses
its pure-NumPy algorithms instead; nothing else changes.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading

import numpy as np

from .environment import switch

__all__ = ["NO_BLAS_ENV", "available", "corename", "gemm", "one_thread", "threads"]

#: Environment variable: set to 1 to never call BLAS directly (the kernel then uses
#: its NumPy-only algorithms).
NO_BLAS_ENV = "CONVTRANSPOSE_NO_BLAS"

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@functools.cache
def _library():
    """NumPy's bundled OpenBLAS as a ctypes library, or None."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _function(names, argtypes, restype):
    """The first of ``names`` the library exports, typed for ctypes, or None."""
    library = _library()
    for name in names:
        function = getattr(library, name, None) if library is not None else None
        if function is not None:
            function.argtypes, function.restype = argtypes, restype
            return function
    return None


def corename() -> str:
    """The kernel family NumPy's OpenBLAS chose for this CPU (e.g. ``'SkylakeX'``), or ''.

    OpenBLAS picks it when it is loaded, from the CPU or from the environment
    variable ``OPENBLAS_CORETYPE``, which forces it (for instance to ``Haswell``:
    AVX2 kernels, about half the sgemm speed of ``SkylakeX`` on an AVX-512 CPU).
    """
    function = _function(("scipy_openblas_get_corename64_", "openblas_get_corename64_",
                          "openblas_get_corename"), [], ctypes.c_char_p)
    if function is None:
        return ""
    return (function() or b"").decode("ascii", "replace")


@functools.cache
def _gemm_functions():
    """``{dtype: cblas ?gemm}`` with argument types set, or an empty dict."""
    library = _library()
    functions = {}
    if library is None:
        return functions
    index = ctypes.c_int64
    for dtype, scalar, names in (
        (np.dtype(np.float32), ctypes.c_float, ("scipy_cblas_sgemm64_", "cblas_sgemm64_")),
        (np.dtype(np.float64), ctypes.c_double, ("scipy_cblas_dgemm64_", "cblas_dgemm64_")),
    ):
        function = _function(names, [ctypes.c_int, ctypes.c_int, ctypes.c_int, index, index,
                                     index, scalar, ctypes.c_void_p, index, ctypes.c_void_p,
                                     index, scalar, ctypes.c_void_p, index], None)
        if function is not None:
            functions[dtype] = function
    return functions


def available(dtype) -> bool:
    """Whether :func:`gemm` can multiply matrices of this dtype."""
    return usable() and supports(dtype)


def usable() -> bool:
    """Whether :func:`gemm` is there and not switched off (``CONVTRANSPOSE_NO_BLAS``)."""
    return switch(NO_BLAS_ENV) in ("", "0") and bool(_gemm_functions())


def supports(dtype) -> bool:
    """Whether the library found has a ``gemm`` for this dtype."""
    return np.dtype(dtype) in _gemm_functions()


@functools.cache
def _thread_setter():
    """OpenBLAS's ``openblas_set_num_threads_local``, or None."""
    return _function(("openblas_set_num_threads_local",), [ctypes.c_int], ctypes.c_int)


def threads() -> int:
    """The number of threads OpenBLAS runs a product on now (0 if unknown)."""
    function = _function(("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                          "openblas_get_num_threads"), [], ctypes.c_int)
    return function() if function is not None else 0


class _OneThread:
    """``with one_thread:`` BLAS runs on one thread (for small products).

    Despite its name, OpenBLAS's ``openblas_set_num_threads_local`` sets the
    process-wide count in its pthreads builds (NumPy's): two threads that each set
    1 and restore what they got back race, and can leave every later product on
    one thread (``benchmarks/results/thread-steering.json``).  So the count is set
    once for all concurrent users: the first to enter records it and sets 1, the
    last to leave restores it.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._users = 0
        self._previous = 1

    def __enter__(self):
        setter = _thread_setter()
        with self._lock:
            if self._users == 0 and setter is not None:
                self._previous = setter(1)
            self._users += 1
        return self

    def __exit__(self, *exc_info):
        setter = _thread_setter()
        with self._lock:
            self._users -= 1
            if self._users == 0 and setter is not None:
                setter(self._previous)
        return False


#: Enter from the thread that starts the work (never per worker thread).
one_thread = _OneThread()


def _leading(count: int, stride: int, item: int, packed: int) -> int | None:
    """Leading dimension for ``count`` rows ``stride`` bytes apart of ``packed`` elements."""
    if count == 1:
        return max(1, packed)
    if stride % item or stride // item < max(1, packed):
        return None
    return stride // item


def _operand(matrix: np.ndarray) -> tuple[int, int]:
    """(transpose flag, leading dimension) of a 2-D view, for row-major BLAS."""
    rows, cols = matrix.shape
    item = matrix.itemsize
    row_stride, col_stride = matrix.strides
    if col_stride == item or cols == 1:
        leading = _leading(rows, row_stride, item, cols)
        if leading is not None:
            return _NO_TRANS, leading
    if row_stride == item or rows == 1:
        leading = _leading(cols, col_stride, item, rows)
        if leading is not None:
            return _TRANS, leading
    raise ValueError(f"matrix with shape {matrix.shape} and strides {matrix.strides} "
                     "is not a BLAS operand (one axis must be packed)")


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, accumulate: bool = False) -> None:
    """``c[...] = a @ b`` (or ``c += a @ b`` with ``accumulate``), in place.

    ``a`` ``(m, k)``, ``b`` ``(k, n)`` and ``c`` ``(m, n)`` are 2-D views of one
    dtype with any strides in which one axis is packed (the other may be any
    multiple of the item size, at least the packed extent), so row-shifted and
    column-sliced views of larger buffers are passed without a copy.  ``c`` must
    not overlap ``a`` or ``b``.
    """
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or c.shape != (m, n) or not (a.dtype == b.dtype == c.dtype):
        raise ValueError(f"gemm of {a.shape} {a.dtype} @ {b.shape} {b.dtype} "
                         f"into {c.shape} {c.dtype}")
    if m == 0 or n == 0:
        return
    if k == 0:
        if not accumulate:
            c[...] = 0
        return
    trans_c, ldc = _operand(c)
    if trans_c == _TRANS:
        # C^T = B^T A^T: the same call with the operands swapped.
        a, b, m, n = b.T, a.T, n, m
    trans_a, lda = _operand(a)
    trans_b, ldb = _operand(b)
    _gemm_functions()[c.dtype](
        _ROW_MAJOR, trans_a, trans_b, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb,
        1.0 if accumulate else 0.0, c.ctypes.data, ldc)
