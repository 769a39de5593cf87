"""float32 <-> float16 and bfloat16 conversions compiled with numba (optional extra ``fast``).

Imported by :mod:`convtranspose._kernels.casts` (whole-array casts) and by the numba
kernels that widen or round as they go (:mod:`.modes`, :mod:`.blocked`), and only
when numba is installed.
Every function here gives the bits NumPy's own casts (ml_dtypes' for bfloat16) give,
for every input bit pattern: round to nearest, ties to even, overflow to infinity,
subnormals kept; the NaN rules, where the hardware and the libraries differ, are
spelled out per function.  Flat C-contiguous arrays, element range ``[start,
stop)``, so that callers can split the work between threads.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..._runtime.machine import host_has_f16c
from .kernel_cache import cached_njit

__all__ = ["bfloat16_bits", "bfloat16_value", "float16_bits", "float16_value",
           "host_has_f16c", "narrow_bfloat16", "narrow_float16", "software_float16_bits",
           "widen_bfloat16", "widen_float16"]


@intrinsic
def _to_half(typingctx, value):
    """The float16 bits of a float32 (LLVM ``fptrunc``: F16C's ``vcvtps2ph``, vectorised)."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _from_half(typingctx, bits):
    """The float32 value of float16 bits (LLVM ``fpext``: F16C's ``vcvtph2ps``)."""
    if bits != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _bits(typingctx, value):
    """The bits of a float32 as a uint32."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def _float_of_bits(typingctx, bits):
    """The float32 whose bits are the uint32 ``bits``."""
    if bits != types.uint32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@cached_njit(nogil=True, inline="always")
def float16_value(bits):  # pragma: no cover - compiled
    """The float32 value of float16 ``bits`` (exact; NaNs come out quiet, their sign and
    payload kept: the hardware's widening, where NumPy would keep a signalling NaN
    signalling).  Only where :func:`~convtranspose._runtime.machine.host_has_f16c`."""
    return _from_half(bits)


@cached_njit(nogil=True, inline="always")
def bfloat16_value(bits):  # pragma: no cover - compiled
    """The float32 value of bfloat16 ``bits`` (exact: the top half of its bits)."""
    return _float_of_bits(np.uint32(np.uint32(bits) << np.uint32(16)))


@cached_njit(nogil=True, inline="always")
def _numpy_nan_half(value):  # pragma: no cover - compiled
    # NumPy keeps a NaN's sign and the top ten bits of its payload, signalling or
    # not (a payload that would vanish becomes 1); the hardware quiets signalling NaNs.
    bits = _bits(value)
    payload = (bits & 0x007FFFFF) >> 13
    return np.uint16(((bits >> 16) & 0x8000) | 0x7C00 | (payload if payload else 1))


@cached_njit(nogil=True, inline="always")
def _hardware_float16_bits(value):  # pragma: no cover - compiled
    # The hardware conversion agrees with NumPy's everywhere but on NaNs.
    if value != value:
        return _numpy_nan_half(value)
    return _to_half(value)


@cached_njit(nogil=True, inline="always")
def software_float16_bits(value):  # pragma: no cover - compiled
    # NumPy's npy_floatbits_to_halfbits, step for step (round half to even).
    bits = _bits(value)
    sign = (bits >> 16) & 0x8000
    exponent = bits & 0x7F800000
    significand = bits & 0x007FFFFF
    if exponent >= 0x47800000:  # overflow, infinity or NaN
        if exponent == 0x7F800000 and significand:
            return _numpy_nan_half(value)
        return np.uint16(sign | 0x7C00)
    if exponent <= 0x38000000:  # a subnormal half or a signed zero
        if exponent < 0x33000000:
            return np.uint16(sign)
        e = exponent >> 23
        significand = (0x00800000 + significand) >> (113 - e)
        if (significand & 0x3FFF) != 0x1000 or bits & 0x7FF:
            significand += 0x1000
        return np.uint16(sign + (significand >> 13))
    if (significand & 0x3FFF) != 0x1000:
        significand += 0x1000
    # A carry out of the significand increments the exponent, up to infinity: correct.
    return np.uint16(sign + ((exponent - 0x38000000) >> 13) + (significand >> 13))


#: ``float16_bits(value)``: the float16 bits NumPy rounds the float32 ``value`` to
#: (with the hardware's conversion where there is one).
float16_bits = _hardware_float16_bits if host_has_f16c() else software_float16_bits


@cached_njit(nogil=True, inline="always")
def bfloat16_bits(value):  # pragma: no cover - compiled
    """The bfloat16 bits ml_dtypes rounds the float32 ``value`` to.

    Round to nearest even on the top half; any NaN becomes the quiet NaN 0x7FC0
    with the sign kept (ml_dtypes' rule).
    """
    bits = _bits(value)
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return np.uint16(((bits >> 16) & 0x8000) | 0x7FC0)
    return np.uint16((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)


@cached_njit(nogil=True)
def narrow_float16(source, target, start, stop):  # pragma: no cover - compiled
    """``target[i]`` = float16 bits of the float32 ``source[i]``, NumPy's rounding."""
    # Slices indexed from 0: with indices from range(start, stop) numba cannot prove
    # them non-negative, and its wrap-around check keeps the loop from vectorising.
    source, target = source[start:stop], target[start:stop]
    # A first pass with the hardware only (it vectorises), remembering whether some
    # result is a NaN; only then a second pass redoes NaNs the NumPy way.
    worst = np.uint16(0)
    for i in range(source.size):
        half = _to_half(source[i])
        target[i] = half
        worst = max(worst, half & np.uint16(0x7FFF))
    if worst > 0x7C00:
        for i in range(source.size):
            if source[i] != source[i]:
                target[i] = _numpy_nan_half(source[i])


@cached_njit(nogil=True)
def widen_float16(source, target, start, stop):  # pragma: no cover - compiled
    """``target[i]`` = the float32 of float16 bits ``source[i]``, as NumPy widens them.

    Exact, like every widening; NumPy keeps a signalling NaN signalling, the
    hardware quiets it, so NaNs are redone the NumPy way (sign, all-ones exponent,
    payload shifted up).
    """
    source, target = source[start:stop], target[start:stop]
    worst = np.uint16(0)
    for i in range(source.size):
        half = source[i]
        target[i] = _from_half(half)
        worst = max(worst, half & np.uint16(0x7FFF))
    if worst > 0x7C00:
        bits = target.view(np.uint32)
        for i in range(source.size):
            half = source[i]
            if half & 0x7FFF > 0x7C00:
                bits[i] = (np.uint32(half & 0x8000) << 16) | np.uint32(0x7F800000) | (
                    np.uint32(half & 0x03FF) << 13)


@cached_njit(nogil=True)
def narrow_bfloat16(source, target, start, stop):  # pragma: no cover - compiled
    """``target[i]`` = bfloat16 bits of the float32 ``source[i]``, ml_dtypes' rounding."""
    source, target = source[start:stop], target[start:stop]
    for i in range(source.size):
        target[i] = bfloat16_bits(source[i])


@cached_njit(nogil=True)
def widen_bfloat16(source, target, start, stop):  # pragma: no cover - compiled
    """``target[i]`` = the float32 bits of bfloat16 bits ``source[i]`` (exact: a shift)."""
    source, target = source[start:stop], target[start:stop]
    for i in range(source.size):
        target[i] = np.uint32(source[i]) << 16
