"""BLAS products split between numba's native threads.

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
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from ..._runtime import blas as _blas
from ..compiling import KernelNotCompiled
from .kernel_cache import cached_njit
from .launch import count_native_loop, native_threads, steered_workers, swap_num_threads

__all__ = ["native_gemms"]

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


def _table(units: list, threads: int, block, dtype) -> tuple[np.ndarray, list] | None:
    """The calls of ``units`` cut by ``block`` (``block(arguments, part, threads)``) as a
    table, and the arrays it points into; None where a block has nothing to multiply
    or another dtype than ``dtype`` (the pool's
    :func:`~convtranspose._runtime.blas.gemm` handles those cases)."""
    rows, kept = [], []
    for part in range(threads):
        for unit in units:
            for arguments in unit:
                a, b, c, accumulate = block(arguments, part, threads)
                if not c.size:
                    continue
                if a.shape[1] == 0 or not a.dtype == b.dtype == c.dtype == dtype:
                    return None
                call, arrays = _blas.gemm_arguments(a, b, c, accumulate)
                rows.append((part,) + call[1:6] + call[7:11] + call[12:] + (int(accumulate),))
                kept.append(arrays)
    return np.array(rows, np.int64).reshape(-1, _COLUMNS), kept


def native_gemms(units: list, threads: int, block) -> bool:
    """Run ``units`` as :func:`~convtranspose._kernels.common.split_gemms` does, each
    product's block ``part`` on native thread ``part``; False (nothing run) where the
    native threads cannot (:func:`.launch.native_threads`), a product has no BLAS here
    or nothing to multiply, or the loop is not compiled and compiling is deferred."""
    if threads < 2 or not native_threads(threads):
        return False
    dtype = next((arguments[2].dtype for unit in units for arguments in unit), None)
    if dtype is None or not _blas.available(dtype):
        return False
    made = _table(units, threads, block, dtype)
    if made is None:
        return False
    table, kept = made
    try:
        with _blas.one_thread, steered_workers(threads):
            _gemm_parts(_blas.gemm_address(dtype), threads, table, dtype.type(1))
    except KernelNotCompiled:
        return False
    del kept  # (the arrays the table points into lived until here)
    count_native_loop()
    return True
