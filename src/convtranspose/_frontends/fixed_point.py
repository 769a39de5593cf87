"""TFLite's fixed-point requantization, reproduced bit for bit in NumPy integers.

TFLite (LiteRT) turns each real multiplier ``input_scale * weights_scale /
output_scale`` into a 32-bit significand and a power-of-two shift
(``QuantizeMultiplier``), then scales every integer accumulator by them without a
floating-point operation (``MultiplyByQuantizedMultiplier``).  Its default build
("double rounding", the one the pip packages ship) rounds twice: once in gemmlowp's
``SaturatingRoundingDoublingHighMul`` (the ARM ``VQRDMULH`` instruction) and once in
``RoundingDivideByPOT`` (a rounding arithmetic right shift).  The 64-bit accumulator of
the int16 x int8 kernels has its own rule (a 15-bit multiplier, one rounding).  Each
function below states its rule; docs/quantization.md has them side by side.

All arithmetic is on int64 arrays.  Where TFLite's C++ wraps (a 32-bit sum or
product that overflows), the result is wrapped to 32 bits here too, so that the
values equal the runtime's on the two's-complement machines it runs on.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import ConvTransposeError

__all__ = ["activation_range", "multiply_by_quantized_multiplier",
           "multiply_by_quantized_multiplier_64", "quantize_multiplier", "wrap32"]

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def wrap32(values: np.ndarray) -> np.ndarray:
    """int64 ``values`` wrapped to int32 (two's complement), kept as int64."""
    return ((values + 2 ** 31) & 0xFFFFFFFF) - 2 ** 31


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``QuantizeMultiplier``: ``real ~= multiplier * 2**(shift - 31)``.

    ``frexp`` splits ``real`` into ``q`` in ``[0.5, 1)`` and the exponent ``shift``;
    the multiplier is ``q * 2**31`` rounded half away from zero (``TfLiteRound``; the
    product is exact in a double).  A multiplier that rounds up to ``2**31`` is halved
    and the shift raised by one; a shift below -31 flushes the multiplier to 0 (shift
    0), as TFLite does for multipliers below about ``2**-32``.

    Returns
    -------
    (multiplier, shift) : tuple of int
        ``0 <= multiplier < 2**31``; ``shift`` negative for a right shift.
    """
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)
    scaled = fraction * 2.0 ** 31
    whole = math.floor(scaled)
    multiplier = whole + (1 if scaled - whole >= 0.5 else 0)  # half away from zero
    if multiplier == 2 ** 31:
        multiplier //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return multiplier, shift


def _saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` of int32 values.

    gemmlowp computes ``(a * b + nudge) / 2**31`` with C's division (toward zero) and
    ``nudge`` ``2**30`` for a non-negative product, ``1 - 2**30`` otherwise: that is
    ``a * b / 2**31`` rounded to nearest with ties toward +infinity (``-0.5`` gives 0,
    ``-1.5`` gives -1), so here one floor shift, ``(a * b + 2**30) >> 31`` (for a
    negative product ``trunc((p + 1 - 2**30) / 2**31) = floor((p + 2**30) / 2**31)``).
    ``a == b == INT32_MIN``, the one product that does not fit, saturates to
    ``INT32_MAX``.
    """
    high = a * b  # below 2**62 in magnitude: exact in int64
    high += 2 ** 30
    high >>= 31
    saturated = (a == INT32_MIN) & (b == INT32_MIN)
    if saturated.any():
        high = np.where(saturated, INT32_MAX, high)
    return high


def _rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded to nearest, ties
    away from zero (the remainder compared with half the divisor, one more for a
    negative ``x``)."""
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    result = x >> exponent
    result += remainder > threshold
    return result


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: np.ndarray,
                                     shift: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier(int32 x, multiplier, shift)`` (double rounding).

    ``x * 2**max(shift, 0)`` (wrapped to 32 bits, as the C++ product wraps), its
    :func:`_saturating_rounding_doubling_high_mul` with ``multiplier``, then
    :func:`_rounding_divide_by_pot` by ``2**max(-shift, 0)``.  Arrays broadcast (a
    per-channel multiplier and shift along the last axis); ``x`` holds int32 values.
    """
    x = np.asarray(x, np.int64)
    shift = np.asarray(shift, np.int64)
    if shift.size and shift.max() > 0:  # a left shift, where the int32 product wraps
        x = wrap32(x << np.maximum(shift, 0))
    return _rounding_divide_by_pot(
        _saturating_rounding_doubling_high_mul(x, np.asarray(multiplier, np.int64)),
        np.maximum(-shift, 0))


def multiply_by_quantized_multiplier_64(x: np.ndarray, multiplier: np.ndarray,
                                        shift: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier(int64 x, multiplier, shift)``, the int16 x int8
    kernels' rule.

    The multiplier is cut to 15 bits, ``(multiplier + 2**15) >> 16`` (``0x7FFF`` from
    ``0x7FFF0000`` up, where that would reach ``2**15``); the result is ``(x * reduced
    + 2**(14 - shift)) >> (15 - shift)`` in int64 (an arithmetic shift: rounding half
    up), truncated to int32 as C++ converts it.  ``shift`` must be at most 14.
    """
    x = np.asarray(x, np.int64)
    multiplier = np.asarray(multiplier, np.int64)
    total = 15 - np.asarray(shift, np.int64)
    reduced = np.where(multiplier < 0x7FFF0000, (multiplier + (1 << 15)) >> 16, 0x7FFF)
    return wrap32((x * reduced + (np.int64(1) << (total - 1))) >> total)


#: The fused activations a quantized TRANSPOSE_CONV clamps to, as the real interval.
ACTIVATIONS = {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0),
               "RELU_N1_TO_1": (-1.0, 1.0)}


def _quantized_bound(value: float, scale: np.float32, zero_point: int) -> int:
    """TFLite's ``Quantize`` of an activation bound: ``zero_point + round(float32(value)
    / scale)``, the division in float32 and ``TfLiteRound`` half away from zero."""
    quotient = float(np.float32(value) / scale)
    rounded = math.copysign(math.floor(abs(quotient) + 0.5), quotient)
    if not INT32_MIN <= rounded <= INT32_MAX:
        raise ConvTransposeError(
            f"the activation bound {value} is {quotient} output units from the zero point;"
            f" TFLite refuses a bound beyond int32")
    return zero_point + int(rounded)


def activation_range(activation: str, scale: np.float32, zero_point: int,
                     dtype: np.dtype) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized``: the output type's range narrowed to the
    fused activation's interval quantized with the output's scale and zero point."""
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    lower, upper = ACTIVATIONS[activation]
    if lower is not None:
        low = max(low, _quantized_bound(lower, scale, zero_point))
    if upper is not None:
        high = min(high, _quantized_bound(upper, scale, zero_point))
    return low, high
