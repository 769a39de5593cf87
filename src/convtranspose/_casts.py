"""Widening half-precision inputs to float32 and rounding float32 results back, fast.

float16 and bfloat16 layers accumulate in float32 and round once at the end
(SEMANTICS.md, "Numbers").  NumPy's float16 casts are scalar loops unless its
build assumes F16C (measured on an AVX2 machine: 3.2 ns per element float32 ->
float16, 2 ns back; rounding the grouped benchmark layer's 6.4M outputs took 21 ms,
as long as the convolution).  With numba and a CPU with F16C, :func:`widen` and
:func:`narrow` run the hardware's vector conversions instead (:mod:`._casts_numba`,
0.35 ns per element on one thread), split between threads for large arrays.
bfloat16 results are rounded by a numba loop too (ml_dtypes: 0.56 ns per element);
bfloat16 inputs are widened by ml_dtypes, already at memory speed.  The bits are
always those of ``array.astype(dtype)``: same rounding, same NaN payloads.
Without numba (or F16C) they are that call.
"""

from __future__ import annotations

import numpy as np

from ._environment import switch

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


def _compiled(kind: str):
    """The numba module, or None when the conversion of ``kind`` is left to NumPy."""
    from ._kernel import NO_NUMBA_ENV, _numba_installed

    if switch(NO_NUMBA_ENV) not in ("", "0") or not _numba_installed():
        return None
    from . import _casts_numba

    if kind == "float16" and not _casts_numba.host_has_f16c():
        return None  # x86 before F16C (2012): left to NumPy
    return _casts_numba


def rounds_in_kernels(dtype: np.dtype, result_dtype: np.dtype) -> bool:
    """Whether numba kernels may round their ``dtype`` sums straight into ``result_dtype``
    (with :mod:`._casts_numba`'s conversions, whose bits are NumPy's).
    """
    kind = _kind(result_dtype)
    return kind is not None and dtype == np.float32 and _compiled(kind) is not None


def _run(function, source: np.ndarray, target: np.ndarray) -> None:
    """``function(source, target, start, stop)`` over the flat arrays, threaded when large."""
    from ._kernel_numba import _THREADS, _parallel

    size = source.size
    threads = _THREADS if size >= _PARALLEL_ELEMENTS else 1
    _parallel(lambda start, stop: function(source, target, start, stop), size, threads)


def widen(array: np.ndarray) -> np.ndarray:
    """``array`` (float16 or bfloat16) as float32; the array itself for other dtypes.

    A fresh C-contiguous array (the shape of ``array``) when converted.
    """
    kind = _kind(array.dtype)
    if kind is None:
        return array
    # ml_dtypes widens bfloat16 at memory speed already.
    compiled = _compiled(kind) if kind == "float16" and array.size >= 64 else None
    if compiled is None:
        return array.astype(np.float32)
    source = np.ascontiguousarray(array).reshape(-1).view(np.uint16)
    result = np.empty(array.shape, np.float32)
    _run(compiled.widen_float16, source, result.reshape(-1))
    return result


def narrow(result: np.ndarray, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """``result.astype(dtype, copy=False)``, bit for bit, fast for float32 -> half precision.

    Written into ``out`` if given (C-contiguous, of the result's shape and ``dtype``).
    Silent, whichever way it runs: an overflow to infinity is the defined result
    (NumPy's cast would warn, the compiled conversion cannot).
    """
    kind = _kind(np.dtype(dtype))
    compiled = None
    if kind is not None and result.dtype == np.float32 and result.size >= 64:
        compiled = _compiled(kind)
    if compiled is None:
        with np.errstate(over="ignore", invalid="ignore"):
            if out is None:
                return result.astype(dtype, copy=False)
            np.copyto(out, result, casting="unsafe")
            return out
    source = np.ascontiguousarray(result).reshape(-1)
    rounded = np.empty(result.shape, dtype) if out is None else out
    target = rounded.reshape(-1).view(np.uint16)
    if kind == "float16":
        _run(compiled.narrow_float16, source, target)
    else:
        _run(compiled.narrow_bfloat16, source, target)
    return rounded
