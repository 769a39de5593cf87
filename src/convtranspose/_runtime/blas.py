"""Direct calls into the BLAS bundled with NumPy (optional, located at first use).

``np.matmul`` cannot accumulate into its output (BLAS's ``beta = 1``) and copies
any operand whose rows are not packed the way it expects.  The ``gemm``
algorithms of :mod:`convtranspose._kernels` need both: they add the products of
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
import glob
import os
import threading

import numpy as np

from .caches import kept
from .config import NO_BLAS_ENV, switch

__all__ = ["TOUCH_PRODUCT", "at_most", "available", "buffers_touched", "corename", "gemm",
           "gemm_address", "gemm_arguments", "one_thread", "threads", "touch_buffers"]


_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@kept("the BLAS library's entry points", maxsize=None)
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


@kept("the BLAS library's entry points", maxsize=None)
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


@kept("the BLAS library's entry points", maxsize=None)
def thread_setter():
    """OpenBLAS's ``openblas_set_num_threads_local``, or None."""
    return _function(("openblas_set_num_threads_local",), [ctypes.c_int], ctypes.c_int)


@kept("the BLAS library's entry points", maxsize=None)
def thread_getter():
    """OpenBLAS's ``openblas_get_num_threads``, or None."""
    return _function(("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                      "openblas_get_num_threads"), [], ctypes.c_int)


def threads() -> int:
    """The number of threads OpenBLAS runs a product on now (0 if unknown)."""
    function = thread_getter()
    return function() if function is not None else 0


class _Limits:
    """The thread limits of the library code running now, applied to OpenBLAS.

    Within a library call OpenBLAS runs on at most the call's thread count (or on one
    thread, for small products), and the count the user gave OpenBLAS comes back
    afterwards.  Despite its name, OpenBLAS's ``openblas_set_num_threads_local`` sets
    the process-wide count in its pthreads builds (NumPy's): two threads that each set
    their limit and restore what they got back race, and can leave every later product
    on one thread (``benchmarks/results/thread-steering.json``).  So one object keeps
    the limits of all callers: the first to enter records OpenBLAS's count, each entry
    and exit sets the smallest limit in force (never more than the recorded count, so
    OpenBLAS starts no threads), and the last to leave restores the recorded count.
    The count is only set when it changes: a limit at or above OpenBLAS's own costs one
    query.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._limits: list[int] = []
        self._recorded = 0  # OpenBLAS's count when the first limit came into force
        self._applied = 0  # the count set now: the smallest limit, at most _recorded
        self._calls = None  # (getter, setter) once looked up; () without them

    def _lookup(self):
        if not self._calls:
            getter, setter = thread_getter(), thread_setter()
            calls = (getter, setter) if getter is not None and setter is not None else ()
            if calls:  # touched before any caller can find the calls and go on
                _touch_once(setter)
            self._calls = calls
        return self._calls

    def enter(self, limit: int, may_skip: bool = False) -> bool:
        """Put ``limit`` in force; False when nothing is to be undone: OpenBLAS is not
        there, or (``may_skip``) no limit is in force and OpenBLAS's count is at most
        ``limit``, so that the count, which only the last limit to end raises again, to
        at most what it is now, stays within ``limit`` throughout."""
        calls = self._calls or self._lookup()
        if not calls:
            return False
        limits = self._limits
        with self._lock:
            if limits:
                if limit < self._applied:
                    calls[1](limit)
                    self._applied = limit
            elif limit == 1 and not may_skip:  # setting 1 never starts threads
                self._recorded, self._applied = calls[1](1), 1
            else:
                count = calls[0]()
                if may_skip and limit >= count:
                    return False
                self._recorded = self._applied = count
                if limit < count:
                    calls[1](limit)
                    self._applied = limit
            limits.append(limit)
        return True

    def leave(self, limit: int) -> None:
        calls = self._calls
        if not calls:
            return
        limits = self._limits
        with self._lock:
            limits.remove(limit)
            if limit <= self._applied:  # it may have been the smallest
                wanted = min(limits) if limits else self._recorded
                if wanted > self._recorded:
                    wanted = self._recorded
                if wanted != self._applied:
                    calls[1](wanted)
                    self._applied = wanted


_limits = _Limits()

#: The product (rows, inner, columns) that :func:`touch_buffers` runs on each thread:
#: columns and inner size wider than the panels OpenBLAS packs (its GEMM_P and GEMM_Q
#: blocking), so that its packing writes every page of a buffer's panels.  On a KVM AMD
#: EPYC Zen 1 narrower products left pages its ``sgemm`` kernels still read ahead into
#: (``benchmarks/results/blas-first-products-zen1.json``, ``touch_product_trials``).
TOUCH_PRODUCT = (64, 1024, 1024)
_touch_lock = threading.Lock()
_touched = 0


def touch_buffers(count: int, setter) -> int:
    """Write the pages of ``count`` of OpenBLAS's work buffers: one float32 product of
    :data:`TOUCH_PRODUCT` on each of ``count`` threads at once (so that each takes
    another buffer), OpenBLAS held at one thread by ``setter``
    (``openblas_set_num_threads_local``) and given its count back after.

    Why: until a product has written a buffer's pages, OpenBLAS's ``sgemm`` kernels read
    ahead into pages of it that are not mapped, and on a virtual machine each such
    read costs a page-table walk that finds nothing.  On a KVM AMD EPYC Zen 1, products
    on one thread ran at a third of their speed (``128 x 512 x 48``: 520-600 us against
    150-190) until some wider product had run in the process, and the products that
    :func:`~convtranspose._kernels.common.split_gemms` splits between threads as slowly
    on buffers no wider product had touched
    (``benchmarks/results/blas-first-products-zen1.json``).  Returns ``count``.
    """
    rows, inner, columns = TOUCH_PRODUCT
    left, right = np.zeros((rows, inner), np.float32), np.zeros((inner, columns), np.float32)
    start = threading.Barrier(count)

    def product():
        try:
            start.wait(timeout=1.0)  # all at once: each call takes a buffer of its own
        except threading.BrokenBarrierError:
            pass
        np.matmul(left, right)

    recorded = setter(1)
    try:
        helpers = [threading.Thread(target=product, daemon=True) for _ in range(count - 1)]
        for helper in helpers:
            helper.start()
        product()
        for helper in helpers:
            helper.join()
    finally:
        setter(recorded)
    return count


def _touch_once(setter) -> None:
    """:func:`touch_buffers` for the process's thread count, once per process, before
    the first limit is put in force (the library's first BLAS product)."""
    global _touched
    with _touch_lock:
        if not _touched:
            from .threads import process_threads

            count = process_threads()
            try:
                touch_buffers(count, setter)
            except (RuntimeError, MemoryError):  # no thread or memory to spare: the
                pass  # products run as they would have, and it is not tried again
            _touched = count


def buffers_touched() -> int:
    """How many of OpenBLAS's buffers :func:`touch_buffers` was asked to write in this
    process (0 before the library's first BLAS product, or without OpenBLAS)."""
    return _touched


class _Limit:
    """``with at_most(n):`` BLAS runs on at most ``n`` threads (see :class:`_Limits`)."""

    __slots__ = ("_count", "_may_skip", "_entered")

    def __init__(self, count: int, may_skip: bool):
        self._count, self._may_skip = count, may_skip

    def __enter__(self):
        entered = _limits.enter(self._count, self._may_skip)
        if self._may_skip:  # a fresh object per use: it can keep what to undo
            self._entered = entered
        return self

    def __exit__(self, *exc_info):
        if not self._may_skip or self._entered:
            _limits.leave(self._count)
        return False


def at_most(count: int) -> _Limit:
    """A context in which OpenBLAS runs a product on at most ``count`` threads.

    Enter it from the thread that starts the work (never per worker thread): OpenBLAS's
    count is process-wide, and it is restored when the last context in force ends.
    Costs one lock and one query of OpenBLAS's count when that is within ``count``.
    """
    return _Limit(count, True)


#: ``with one_thread:`` BLAS runs on one thread (for small products); one object for
#: every user, so it never skips (it has nowhere to keep, per use, what to undo).
one_thread = _Limit(1, False)


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


def _packable(matrix: np.ndarray) -> np.ndarray:
    """``matrix``, or a packed copy when no axis of it is packed: a broadcast view
    (``np.broadcast_to``: stride 0) or a strided slice of an input.  Only ``a`` and
    ``b`` are copied; ``c`` is written in place and must be a BLAS operand."""
    try:
        _operand(matrix)
    except ValueError:
        return np.ascontiguousarray(matrix)
    return matrix


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, accumulate: bool = False) -> None:
    """``c[...] = a @ b`` (or ``c += a @ b`` with ``accumulate``), in place.

    ``a`` ``(m, k)``, ``b`` ``(k, n)`` and ``c`` ``(m, n)`` are 2-D views of one
    dtype with any strides in which one axis is packed (the other may be any
    multiple of the item size, at least the packed extent), so row-shifted and
    column-sliced views of larger buffers are passed without a copy; an ``a`` or
    ``b`` with no packed axis (a broadcast view) is copied first.  ``c`` must
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
    arguments, _ = gemm_arguments(a, b, c, accumulate)
    _gemm_functions()[c.dtype](*arguments)


def gemm_arguments(a: np.ndarray, b: np.ndarray, c: np.ndarray,
                   accumulate: bool) -> tuple[tuple, tuple]:
    """The arguments of the ``cblas_?gemm`` call that :func:`gemm` makes for non-empty
    operands (order, transposes, sizes, 1.0, addresses and leading dimensions, beta),
    and the arrays they point into (copies of ``a`` or ``b`` among them), which must
    stay alive until the call returns."""
    m, k = a.shape
    n = b.shape[1]
    trans_c, ldc = _operand(c)
    if trans_c == _TRANS:
        # C^T = B^T A^T: the same call with the operands swapped.
        a, b, m, n = b.T, a.T, n, m
    a, b = _packable(a), _packable(b)
    trans_a, lda = _operand(a)
    trans_b, ldb = _operand(b)
    return ((_ROW_MAJOR, trans_a, trans_b, m, n, k, 1.0, a.ctypes.data, lda, b.ctypes.data,
             ldb, 1.0 if accumulate else 0.0, c.ctypes.data, ldc), (a, b, c))


def gemm_address(dtype) -> int:
    """The address of the ``cblas_?gemm`` for ``dtype`` (:func:`available`), to call
    from compiled code."""
    return ctypes.cast(_gemm_functions()[np.dtype(dtype)], ctypes.c_void_p).value
