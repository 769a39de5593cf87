"""BLAS products split between numba's native threads, and single products called from
compiled code.

:func:`convtranspose._kernels.common.split_gemms` cuts each product into one block per
thread, each block a call of NumPy's OpenBLAS on one BLAS thread.  On the library's
Python pool that costs a fork-join of Python threads (128-145 us back to back on an
AMD Zen 3, ``benchmarks/results/native-threads-zen3.json``), which is why there only
products of :data:`~convtranspose._kernels.common.SERIAL_GEMM_FLOPS` and more are split
(here, from :data:`~convtranspose._kernels.common.NATIVE_SPLIT_GEMM_FLOPS`).  Here
the blocks' ``cblas_?gemm`` calls run in one compiled parallel loop on numba's threads
(:mod:`.launch`), the BLAS function called through its address: a table of the calls'
arguments, one row per block, each thread running its rows in order (so the calls of a
unit that accumulate into one result keep their order).

OpenBLAS's thread count is process-wide in NumPy's builds: the caller holds it at one
(:data:`convtranspose._runtime.blas.one_thread`) while the loop runs, so that no block
starts OpenBLAS's own threads.

:func:`serial_gemm` makes one product on the calling thread the same way, its
arguments worked out in compiled code: through :mod:`ctypes`
(:func:`~convtranspose._runtime.blas.gemm`) the arguments took 7 us and the call's
conversions 1-2 us more, beside a 7 us product of a small layer
(``benchmarks/results/native-threads-zen3.json``, ``serial_gemm``).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from ..._runtime import blas as _blas
from ..compiling import (
    KernelNotCompiled,
    compile_helpers_elsewhere,
    compiles_deferred,
    deferring_compiles,
)
from .kernel_cache import cached_njit
from .launch import count_native_loop, native_threads, steered_workers, swap_num_threads

__all__ = ["compile_entries", "native_gemms", "serial_gemm"]

#: Columns of the table of calls: the thread that makes it, then ``cblas_?gemm``'s
#: integer arguments after the order (transposes, sizes, addresses, leading
#: dimensions), then 1 where it accumulates.
_COLUMNS = 13


@intrinsic
def _cblas_gemm(typingctx, address, row, one):
    """Call the ``cblas_?gemm`` at ``address`` (row-major) with the arguments in table
    ``row`` (:data:`_COLUMNS`); ``one`` is 1 in the dtype of the product."""
    def codegen(context, builder, signature, values):
        address_value, row_value, one_value = values
        row_type = signature.args[1]
        scalar = context.get_value_type(signature.args[2])
        index, pointer = ir.IntType(64), ir.IntType(8).as_pointer()
        row_array = context.make_array(row_type)(context, builder, row_value)

        def item(column):
            return builder.load(builder.gep(row_array.data, [ir.Constant(index, column)]))

        def address_of(column):
            return builder.inttoptr(item(column), pointer)

        enum = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [
            enum, enum, enum, index, index, index, scalar, pointer, index, pointer, index,
            scalar, pointer, index])
        function = builder.inttoptr(address_value, function_type.as_pointer())
        beta = builder.select(builder.icmp_signed("!=", item(12), ir.Constant(index, 0)),
                              one_value, ir.Constant(scalar, 0.0))
        builder.call(function, [
            ir.Constant(enum, 101), builder.trunc(item(1), enum), builder.trunc(item(2), enum),
            item(3), item(4), item(5), one_value, address_of(6), item(7), address_of(8),
            item(9), beta, address_of(10), item(11)])
        return context.get_dummy_value()

    return types.none(address, row, one), codegen


@cached_njit(parallel=True, nogil=True)
def _gemm_parts(address, threads, table, one):  # pragma: no cover
    previous = swap_num_threads(threads)
    for part in prange(threads):
        for row in range(table.shape[0]):
            if table[row, 0] == part:
                _cblas_gemm(address, table[row], one)
    swap_num_threads(previous)


def native_gemms(units: list, threads: int, column_align: int) -> bool:
    """Run ``units`` as :func:`~convtranspose._kernels.common.split_gemms` does, each
    product's block ``part`` on native thread ``part`` (the blocks of
    :func:`~convtranspose._kernels.common.split_gemms`, column blocks starting at
    multiples of ``column_align``; an ``a`` or ``b`` without a packed axis copied first);
    False (nothing run) where the native threads cannot (:func:`.launch.native_threads`),
    a product has no BLAS here, nothing to multiply or a result without a packed axis,
    or its code is not compiled and compiling is deferred."""
    if threads < 2 or not native_threads(threads):
        return False
    calls = [arguments for unit in units for arguments in unit]
    dtype = calls[0][2].dtype if calls else None
    entry = _ENTRIES.get(dtype) or _entries(dtype)
    if entry is None or not _blas.available(dtype):  # (switched off since)
        return False
    address, blocks, one, _ = entry
    # The calls' blocks as a table of cblas arguments, one row per block, filled in
    # compiled code: in Python (blas.gemm_arguments per block) it took 45 us of a
    # 0.4 MFLOP product's 160 us split on an AMD EPYC Zen 1.
    table = np.empty((threads * len(calls), _COLUMNS), np.int64)
    rows, copies = 0, []
    for a, b, c, accumulate in calls:
        if not (a.dtype == b.dtype == c.dtype == dtype and a.ndim == b.ndim == c.ndim == 2):
            return False
        written = blocks(a, b, c, bool(accumulate), threads, column_align, table, rows)
        if written < 0:
            # An ``a`` or ``b`` without a packed axis (a broadcast view) is copied, as
            # blas.gemm copies it; a block refused again is refused.
            a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
            copies.append((a, b))
            written = blocks(a, b, c, bool(accumulate), threads, column_align, table, rows)
            if written < 0:
                return False
        rows += written
    try:
        with _blas.one_thread, steered_workers(threads):
            _gemm_parts(address, threads, table[:rows], one)
    except KernelNotCompiled:
        return False
    del calls, copies  # (the arrays the table points into lived until here)
    count_native_loop()
    return True


#: cblas's transpose flags (row-major), as :mod:`convtranspose._runtime.blas` uses them.
_NO_TRANS, _TRANS = 111, 112


@cached_njit(nogil=True)
def _leading(count, stride, item, packed):  # pragma: no cover
    # blas._leading in compiled code: 0 where the rows cannot be a BLAS operand.
    if count == 1:
        return max(1, packed)
    if stride % item or stride // item < max(1, packed):
        return 0
    return stride // item


@cached_njit(nogil=True)
def _operand(rows, columns, row_stride, column_stride, item):  # pragma: no cover
    # blas._operand in compiled code: (transpose flag, leading dimension), (0, 0) where
    # no axis is packed.
    if column_stride == item or columns == 1:
        leading = _leading(rows, row_stride, item, columns)
        if leading:
            return _NO_TRANS, leading
    if row_stride == item or rows == 1:
        leading = _leading(columns, column_stride, item, rows)
        if leading:
            return _TRANS, leading
    return 0, 0


@cached_njit(nogil=True)
def _arguments_row(a, b, c, accumulate, row):  # pragma: no cover
    # blas.gemm_arguments in compiled code, into a row of the table of calls (all but
    # its thread column), for operands with a packed axis each; False otherwise.
    m, k = a.shape
    n = b.shape[1]
    item = c.itemsize
    trans_c, ldc = _operand(m, n, c.strides[0], c.strides[1], item)
    if trans_c == 0:
        return False
    if trans_c == _TRANS:  # C^T = B^T A^T: the same call with the operands swapped
        trans_a, lda = _operand(n, k, b.strides[1], b.strides[0], item)
        trans_b, ldb = _operand(k, m, a.strides[1], a.strides[0], item)
        first, second, rows, columns = b.ctypes.data, a.ctypes.data, n, m
    else:
        trans_a, lda = _operand(m, k, a.strides[0], a.strides[1], item)
        trans_b, ldb = _operand(k, n, b.strides[0], b.strides[1], item)
        first, second, rows, columns = a.ctypes.data, b.ctypes.data, m, n
    if trans_a == 0 or trans_b == 0:
        return False
    row[1], row[2], row[3], row[4], row[5] = trans_a, trans_b, rows, columns, k
    row[6], row[7], row[8], row[9] = first, lda, second, ldb
    row[10], row[11], row[12] = c.ctypes.data, ldc, accumulate
    return True


@cached_njit(nogil=True)
def _one_gemm(address, a, b, c, accumulate, one):  # pragma: no cover
    # blas.gemm for operands with a packed axis each; False (nothing done) otherwise.
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or c.shape[0] != m or c.shape[1] != n:
        return False
    if m == 0 or n == 0:
        return True
    if k == 0:
        if not accumulate:
            c[:, :] = 0
        return True
    row = np.zeros(_COLUMNS, np.int64)
    if not _arguments_row(a, b, c, accumulate, row):
        return False
    _cblas_gemm(address, row, one)
    return True


@cached_njit(nogil=True)
def _block_rows(a, b, c, accumulate, parts, column_align, table, start):  # pragma: no cover
    # common._block's blocks of one product, one per part (rows of c when it has at
    # least as many rows as columns, else columns from multiples of column_align), as
    # rows of the table from ``start``: how many were written (empty blocks are
    # skipped), -1 where a block is no BLAS call (mismatched shapes, no depth, an
    # operand without a packed axis).
    rows, columns = c.shape
    if a.shape[0] != rows or b.shape[1] != columns or a.shape[1] != b.shape[0]:
        return -1
    written = start
    for part in range(parts):
        if rows >= columns:
            lo, hi = rows * part // parts, rows * (part + 1) // parts
            block_a, block_b, block_c = a[lo:hi], b, c[lo:hi]
        else:
            units = -(-columns // column_align)
            lo = min(columns, units * part // parts * column_align)
            hi = min(columns, units * (part + 1) // parts * column_align)
            block_a, block_b, block_c = a, b[:, lo:hi], c[:, lo:hi]
        if block_c.size == 0:
            continue
        if a.shape[1] == 0 or not _arguments_row(block_a, block_b, block_c, accumulate,
                                                 table[written]):
            return -1
        table[written, 0] = part
        written += 1
    return written - start


#: Per dtype with a BLAS: the address of ``cblas_?gemm``, the compiled entries of
#: :func:`_one_gemm` and :func:`_block_rows` for 2-D arrays of any strides (one compiled
#: variant each, no type dispatch per call), and 1 in the dtype.  Filled by
#: :func:`_entries`.
_ENTRIES: dict = {}
#: ``ready()`` of the background process compiling these kernels for a call that found
#: them neither compiled nor in the kernel cache (None: none is; False: one did, and what
#: it left undone compiles where it is needed).
_elsewhere: Callable[[], bool] | None | bool = None


def _compiled_entries(dtype) -> tuple:
    """Compile (or load) the kernels of ``dtype`` and keep their entries in
    :data:`_ENTRIES`; raises :class:`KernelNotCompiled` where compiling is deferred."""
    scalar = numba.from_dtype(dtype)
    array = types.Array(scalar, 2, "A")
    one_gemm = (types.int64, array, array, array, types.boolean, scalar)
    block_rows = (array, array, array, types.boolean, types.int64, types.int64,
                  types.Array(types.int64, 2, "C"), types.int64)
    _one_gemm.compile(one_gemm)
    _block_rows.compile(block_rows)
    _gemm_parts.compile((types.int64, types.int64, types.Array(types.int64, 2, "C"), scalar))
    entries = (_blas.gemm_address(dtype), _block_rows.overloads[block_rows].entry_point,
               dtype.type(1), _one_gemm.overloads[one_gemm].entry_point)
    _ENTRIES[dtype] = entries
    return entries


def _entries(dtype) -> tuple | None:
    """``(address, _block_rows' entry, one, _one_gemm's entry)`` for ``dtype``, kept in
    :data:`_ENTRIES`; None where there is no BLAS for it, or its code is not compiled
    and compiling is deferred or has been handed to the background process (asked
    again next time).

    A call that finds them neither compiled nor in the kernel cache does not compile
    them while its caller waits, where a background process can: the products run
    through ctypes and the library's threads meanwhile.  On an AMD EPYC Zen 4 the
    README's first example took 1.4-4.8 s more in the call of a grouped layer whose
    measured planning timed ``window`` and compiled these kernels there.
    """
    global _elsewhere
    if dtype not in (np.float32, np.float64) or not _blas.available(dtype):
        return None
    if callable(_elsewhere):
        if not _elsewhere():
            return None
        _elsewhere = False  # ready: they load below (or, had it failed, compile here)
    try:
        with deferring_compiles():
            return _compiled_entries(dtype)
    except KernelNotCompiled:
        pass
    if compiles_deferred():
        return None
    if _elsewhere is None:
        _elsewhere = compile_helpers_elsewhere("native-gemm")
        if _elsewhere is not None:
            return None
    try:
        return _compiled_entries(dtype)
    except KernelNotCompiled:
        return None


def compile_entries() -> None:
    """Compile the kernels of every dtype with a BLAS here (the background process's
    helper job, :mod:`convtranspose._execute.background_worker`)."""
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        if _blas.available(dtype):
            _compiled_entries(dtype)


def serial_gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, accumulate: bool = False) -> bool:
    """:func:`~convtranspose._runtime.blas.gemm` on the calling thread from compiled code;
    False (nothing done) where it cannot: an operand without a packed axis (which that
    function copies), shapes or dtypes that do not match (which it refuses), no BLAS
    for the dtype, or the product's code not compiled while compiling is deferred."""
    dtype = c.dtype
    entry = _ENTRIES.get(dtype) or _entries(dtype)
    if entry is None:
        return False
    if a.dtype != dtype or b.dtype != dtype or a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        return False
    address, _, one, call = entry
    return call(address, a, b, c, bool(accumulate), one)
