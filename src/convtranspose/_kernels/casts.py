"""Widening half-precision inputs to float32 and rounding float32 results back, fast.

float16 and bfloat16 layers accumulate in float32 and round once at the end
(``docs/semantics.md``, "Numbers").  NumPy's float16 casts are scalar loops unless its
build assumes F16C (measured on an AVX2 machine: 3.2 ns per element float32 ->
float16, 2 ns back; rounding the grouped benchmark layer's 6.4M outputs took 21 ms,
as long as the convolution).  With numba and a CPU with F16C, :func:`widen` and
:func:`narrow` run the hardware's vector conversions instead (:mod:`convtranspose._kernels._numba.casts`,
0.35 ns per element on one thread), split between threads for large arrays.
bfloat16 results are rounded by a numba loop too (ml_dtypes: 0.56 ns per element);
bfloat16 inputs are widened by ml_dtypes, already at memory speed.  The bits are
always those of ``array.astype(dtype)``: same rounding, same NaN payloads.
Without numba (or F16C) they are that call.
"""

from __future__ import annotations

import numpy as np

from .._runtime.target import Target
from .._runtime.threads import parallel_for

__all__ = ["narrow", "rounds_in_kernels", "widen"]

#: Arrays with fewer elements are converted on the calling thread.
_PARALLEL_ELEMENTS = 1 << 18


def _kind(dtype: np.dtype) -> str | None:
    """"float16", "bfloat16" or None (a dtype this module leaves to NumPy)."""
    if dtype.itemsize != 2:  # the usual case, before the slower comparisons
        return None
    if dtype == np.float16:
        return "float16"
    if dtype.name == "bfloat16":
        return "bfloat16"
    return None


def _compiled(kind: str, target: Target):
    """The numba conversions, or None when ``target`` leaves ``kind`` to NumPy."""
    if not target.numba or (kind == "float16" and not target.f16c):
        return None  # without numba, or x86 before F16C (2012): left to NumPy
    from ._numba import casts

    return casts


def rounds_in_kernels(dtype: np.dtype, result_dtype: np.dtype, target: Target) -> bool:
    """Whether numba kernels may round their ``dtype`` sums straight into ``result_dtype``
    (with :mod:`convtranspose._kernels._numba.casts`'s conversions, whose bits are NumPy's).
    """
    kind = _kind(result_dtype)
    return kind is not None and dtype == np.float32 and _compiled(kind, target) is not None


def _run(function, source: np.ndarray, destination: np.ndarray, target: Target) -> None:
    """``function(source, destination, start, stop)`` over the flat arrays, threaded when
    large."""
    size = source.size
    threads = target.threads if size >= _PARALLEL_ELEMENTS else 1
    parallel_for(lambda start, stop: function(source, destination, start, stop), size, threads)


def widen(array: np.ndarray, target: Target) -> np.ndarray:
    """``array`` (float16 or bfloat16) as float32; the array itself for other dtypes.

    A fresh C-contiguous array (the shape of ``array``) when converted.
    """
    kind = _kind(array.dtype)
    if kind is None:
        return array
    # ml_dtypes widens bfloat16 at memory speed already.
    compiled = _compiled(kind, target) if kind == "float16" and array.size >= 64 else None
    if compiled is None:
        return array.astype(np.float32)
    source = np.ascontiguousarray(array).reshape(-1).view(np.uint16)
    result = np.empty(array.shape, np.float32)
    _run(compiled.widen_float16, source, result.reshape(-1), target)
    return result


def narrow(result: np.ndarray, dtype: np.dtype, out: np.ndarray | None,
           target: Target) -> np.ndarray:
    """``result.astype(dtype, copy=False)``, bit for bit, fast for float32 -> half precision.

    Written into ``out`` if given (C-contiguous, of the result's shape and ``dtype``).
    Silent, whichever way it runs: an overflow to infinity is the defined result
    (NumPy's cast would warn, the compiled conversion cannot).
    """
    kind = _kind(np.dtype(dtype))
    compiled = None
    if kind is not None and result.dtype == np.float32 and result.size >= 64:
        compiled = _compiled(kind, target)
    if compiled is None:
        with np.errstate(over="ignore", invalid="ignore"):
            if out is None:
                return result.astype(dtype, copy=False)
            np.copyto(out, result, casting="unsafe")
            return out
    source = np.ascontiguousarray(result).reshape(-1)
    rounded = np.empty(result.shape, dtype) if out is None else out
    bits = rounded.reshape(-1).view(np.uint16)
    if kind == "float16":
        _run(compiled.narrow_float16, source, bits, target)
    else:
        _run(compiled.narrow_bfloat16, source, bits, target)
    return rounded
