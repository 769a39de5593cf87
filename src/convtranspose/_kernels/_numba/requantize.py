"""The quantized dialects' requantization of exact integer sums, in one compiled pass.

Each kernel repeats, element by element and in the same order, the operations the
NumPy code of its dialect performs on whole arrays (float32 steps for ONNX's
``QuantizeLinear``, int64 steps for TFLite's fixed point), so the bytes are the same;
one pass instead of five to ten array passes (ONNX's rule on a 64x128x128 result: 1.8
ms in NumPy, 0.45 ms here; TFLite's rule was most of its dialect's call, which became 5
to 6 times faster: ``ab`` in ``benchmarks/results/suite-quantized-xeon-quick.json``).
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from .kernel_cache import cached_njit

__all__ = ["corrected_rows", "corrected_sum_rows", "fixed_point_64_rows", "fixed_point_rows",
           "fixed_point_table",
           "onednn_rows", "requantize_rows", "torch_rows"]


@cached_njit(nogil=True)
def requantize_rows(acc, multiplier, per_row, y_scale, zero_point, low, high, out, first,
                    stop):  # pragma: no cover - compiled
    """Rows ``[first, stop)`` of ``out[r, i] = saturate(rint(float32(acc[r, i]) * mult /
    y_scale) + zero_point)`` for C-contiguous ``acc`` and ``out`` ``(R, L)``: ``mult`` is
    ``multiplier[r % M]`` where ``per_row`` (channels first: a row is one channel's
    positions), else ``multiplier[i]`` (channels last: a row is one position's channels).

    Each step is the float32 operation NumPy's ``astype``, ``*=``, ``/=``, ``rint``
    (half to even), ``+=`` and ``clip`` perform, in that order, so the bytes are the
    same; the clip as ``minimum(maximum(v, low), high)`` (no NaN reaches it: the
    caller's multipliers are finite).  The clipped value, an integer in the result's
    range, is stored through int32: one vector conversion, where a float-to-byte store
    is not vectorised as well."""
    channels = multiplier.shape[0]
    for r in range(first, stop):
        for i in range(acc.shape[1]):
            scale = multiplier[r % channels] if per_row else multiplier[i]
            value = np.rint(np.float32(acc[r, i]) * scale / y_scale) + zero_point
            out[r, i] = np.int32(min(max(value, low), high))


@cached_njit(nogil=True)
def corrected_rows(acc, share, factor, bias, multiplier, y_scale, zero_point, low, high, out,
                   starts, run):  # pragma: no cover - compiled
    """Rows ``[start, start + run)`` for each of ``starts`` of :func:`requantize_rows`
    (channels last: ``acc`` and ``out`` ``(R, M)``, C-contiguous) of the sums ``acc[r,
    i] - factor * share[r % P, i] + bias[i]`` before the same float32 steps: the sums
    of :meth:`convtranspose._kernels.int8.BlockedSums.sums` corrected for their shift
    and the data's zero point (``share`` ``(P, M)``: the sums of ones of each of the
    ``P`` output places of a sample), plus the bias, in the pass that requantizes them.
    A pass over all rows, or a piece of them, is one start; the blocked kernel's
    threads give the output lines each has just summed, while their sums are in its
    caches (:meth:`convtranspose._kernels.int8.BlockedSums.requantized`).

    Each sum is taken in ``bias``'s type: int64 (exact), or int32 where the caller
    knows that every corrected sum lies in int32's range; its int32 steps may wrap on
    the way, but wrap modulo 2**32, so the sum is the same.  The int32 steps take
    every lane of a vector where int64's take half: the pass in half the time
    (``benchmarks/results/quantized-calls-xeon.json``, int32_corrections)."""
    places = share.shape[0]
    for start in starts:
        for r in range(start, start + run):
            place = r % places
            for i in range(acc.shape[1]):
                whole = bias.dtype.type(np.int64(acc[r, i]) - factor * np.int64(share[place, i])
                                        + bias[i])
                value = np.rint(np.float32(whole) * multiplier[i] / y_scale) + zero_point
                out[r, i] = np.int32(min(max(value, low), high))


@cached_njit(nogil=True)
def corrected_sum_rows(acc, share, factor, bias, out, first, stop):  # pragma: no cover
    """Rows ``[first, stop)`` of ``out[r, i] = acc[r, i] - factor * share[r % P, i] +
    bias[i]`` (channels last, C-contiguous ``(R, M)``; ``out`` may be ``acc``): the
    correction of :func:`corrected_rows` alone, in int64, stored in ``out``'s type
    (the caller's bound keeps every value in it)."""
    places = share.shape[0]
    for r in range(first, stop):
        place = r % places
        for i in range(acc.shape[1]):
            out[r, i] = np.int64(acc[r, i]) - factor * np.int64(share[place, i]) + bias[i]


@cached_njit(nogil=True)
def _wrap32(value):  # pragma: no cover - compiled
    return ((value + 2 ** 31) & 0xFFFFFFFF) - 2 ** 31


def fixed_point_table(bias: np.ndarray, multiplier: np.ndarray,
                      shift: np.ndarray) -> np.ndarray:
    """:func:`fixed_point_rows`' constants per output channel, int32 ``(6, M)``: the left
    shift ``max(shift, 0)``, the right shift ``max(-shift, 0)``, the multiplier, the
    right shift's mask ``2**right - 1`` and half of it, and the bias wrapped to 32 bits
    (the sum is wrapped before it is scaled, so only its low 32 bits count).  The
    multipliers lie in int32 and the shifts in ``[-31, 30]``, as TFLite's
    ``QuantizeMultiplier`` gives them for an int32 accumulator."""
    right = np.maximum(-shift, 0).astype(np.int64)
    mask = (np.int64(1) << right) - 1
    return np.ascontiguousarray(np.stack([
        np.maximum(shift, 0), right, multiplier, mask, mask >> 1,
        bias.astype(np.int64) & 0xFFFFFFFF]).astype(np.uint32).view(np.int32))


@cached_njit(nogil=True)
def fixed_point_rows(acc, share, factor, table, zero_point, low, high, out, starts,
                     run):  # pragma: no cover - compiled
    """Rows ``[start, start + run)`` for each of ``starts`` (as in
    :func:`corrected_rows`) of TFLite's int32 requantization of the sums ``acc[r, m] -
    factor * share[r % P, m] + bias[m]`` (``acc`` ``(R, M)`` of integers, channels last;
    the correction as in :func:`corrected_rows`): ``clamp(wrap32(
    MultiplyByQuantizedMultiplier(wrap32(sum), multiplier[m], shift[m]) + zero_point),
    low, high)``, with the double rounding of
    :func:`convtranspose._frontends.fixed_point.multiply_by_quantized_multiplier`, from
    the per-channel constants of :func:`fixed_point_table`.

    The same integer operations, so the same values, in int32 lanes but the product:
    the sum and the left shift wrap modulo 2**32 as the C++ int32 steps do (numba
    widens each step; the truncations keep it in 32 bits), the product of the two int32
    values is taken in int64 (a signed 32 x 32-bit multiply, ``vpmuldq``), and after
    its rounding shift by 31 every value lies in int32.  Half as many int64 steps as
    the rule step for step in int64 (``benchmarks/results/quantized-calls-zen4.json``,
    ``int32_fixed_point``)."""
    places = share.shape[0]
    factor32, zero32 = np.int32(factor), np.int32(zero_point)
    low32, high32 = np.int32(low), np.int32(high)
    for start in starts:
        for r in range(start, start + run):
            place = r % places
            for m in range(acc.shape[1]):
                x = np.int32(acc[r, m] - factor32 * share[place, m] + table[5, m])
                x = np.int32(x << (table[0, m] & 31))
                scale = table[2, m]
                # SaturatingRoundingDoublingHighMul: ties toward +infinity; the one
                # product past int32 saturates.
                product = np.int32((np.int64(x) * np.int64(scale) + 2 ** 30) >> 31)
                if x == -2 ** 31 and scale == -2 ** 31:
                    product = np.int32(2 ** 31 - 1)
                # RoundingDivideByPOT: ties away from zero.
                threshold = np.int32(table[4, m] + (product < 0))
                quotient = np.int32(product >> (table[1, m] & 31))
                value = np.int32(quotient + (np.int32(product & table[3, m]) > threshold))
                value = np.int32(value + zero32)
                out[r, m] = min(max(value, low32), high32)


@cached_njit(nogil=True)
def fixed_point_64_rows(acc, share, factor, bias, multiplier, shift, zero_point, low, high,
                        out, starts, run):  # pragma: no cover - compiled
    """Rows ``[start, start + run)`` for each of ``starts`` of TFLite's int64
    requantization (its int16 x int8 kernels) of the sums ``acc`` ``(R, M)`` corrected
    as in :func:`fixed_point_rows` (``acc`` below): ``clamp(wrap32(wrap32((acc *
    reduced[m] + 2**(14 - shift[m])) >> (15 - shift[m])) + zero_point), low, high)``
    with the multiplier cut to 15 bits, ``reduced = (multiplier + 2**15) >> 16``
    (``0x7FFF`` from ``0x7FFF0000`` up), as
    :func:`convtranspose._frontends.fixed_point.multiply_by_quantized_multiplier_64`
    does, step for step in int64 (the same integer operations, so the same values)."""
    places = share.shape[0]
    for start in starts:
        for r in range(start, start + run):
            place = r % places
            for m in range(acc.shape[1]):
                whole = np.int64(acc[r, m]) - factor * np.int64(share[place, m]) + bias[m]
                reduced = (multiplier[m] + (1 << 15)) >> 16 if multiplier[m] < 0x7FFF0000 else (
                    np.int64(0x7FFF))
                total = 15 - shift[m]
                value = _wrap32((whole * reduced + (np.int64(1) << (total - 1))) >> total)
                value = _wrap32(value + zero_point)
                out[r, m] = min(max(value, low), high)


#: float32 constants of the x86 store: float64 ones would widen every step and keep
#: the loop scalar.
_INT32_MIN_F32, _INT32_LIMIT_F32 = np.float32(-2.0 ** 31), np.float32(2.0 ** 31)
_INT16_MIN_F32, _INT16_MAX_F32 = np.float32(-32768), np.float32(32767)
_ZERO_F32, _UINT8_MAX_F32 = np.float32(0), np.float32(255)


@cached_njit(nogil=True, inline="always")
def _x86_store(rounded, zero):  # pragma: no cover - compiled
    """torch's x86 store of a rounded float32: cvtps2dq (out of range: INT32_MIN),
    int16 saturation, the zero point, int16 saturation, uint8 saturation."""
    wide = rounded if abs(rounded) < _INT32_LIMIT_F32 else _INT32_MIN_F32
    wide = min(max(wide, _INT16_MIN_F32), _INT16_MAX_F32) + zero
    wide = min(max(wide, _INT16_MIN_F32), _INT16_MAX_F32)
    return min(max(wide, _ZERO_F32), _UINT8_MAX_F32)


@cached_njit(nogil=True, inline="always")
def _fbgemm_value(whole, scale, offset, integer_bias, destination, zero):  # pragma: no cover
    return np.rint((np.float32(whole) + offset) * scale)


@cached_njit(nogil=True, inline="always")
def _qnnpack_value(whole, scale, offset, integer_bias, destination,
                   zero):  # pragma: no cover - compiled
    return np.rint(np.float32(_wrap32(whole + integer_bias)) * scale)


@cached_njit(nogil=True, inline="always")
def _onednn_value(whole, scale, offset, integer_bias, destination,
                  zero):  # pragma: no cover - compiled
    real = (np.float32(whole) * scale + offset) * destination + zero
    real = _ZERO_F32 if real < 0 else real  # comparisons: a NaN stays, as in np.clip
    real = _UINT8_MAX_F32 if real > 255 else real
    return np.rint(real) - zero


@kept("compiled kernels", maxsize=None)
def torch_rows(engine: int):
    """``rows(acc, share, factor, per_row, scale, offset, integer_bias, destination,
    zero_point, out, starts, run)`` for ``engine`` (``templates/torch_rows.py`` with the
    engine's value function), compiled on first use: rows ``[start, start + run)`` for
    each of ``starts`` of torch's quantized result of the exact sums ``acc[r, i] -
    factor * share[r % P, i]`` (``acc`` ``(R, L)`` C-contiguous, the correction as in
    :func:`corrected_rows`; channel ``r % M`` where ``per_row``, else ``i``), on
    ``engine`` 0 (fbgemm: ``rint((float32(acc) + offset[m]) * scale[m])``), 1 (qnnpack:
    ``rint(float32(wrap32(acc + integer_bias[m])) * scale[m])``) or 2 (oneDNN:
    ``rint(clip((float32(acc) * scale[m] + offset[m]) * destination + zero_point, 0,
    255)) - zero_point``), then the x86 store of
    :func:`convtranspose._frontends.torch_quantized._x86_store`: each step the float32
    or integer operation the NumPy code performs, in its order (oneDNN's clip as
    comparisons, which keep a NaN as ``np.clip`` does; ``zero_point`` a float32).
    Without a bias ``offset`` and ``integer_bias`` are zeros: adding them changes no
    integer's float32 (never -0.0), nor oneDNN's result after the store."""
    from .codegen import compile_template

    value = (_fbgemm_value, _qnnpack_value, _onednn_value)[engine]
    return compile_template("torch_rows", dict(
        np=np, value=value, wrap32=_wrap32, x86_store=_x86_store))["rows"]


@cached_njit(nogil=True)
def onednn_rows(acc, share, factor, per_row, src_scale, wei_scales, bias, dst_scale, divide,
                dst_zero_point, adds, saturate, low, high, out, starts,
                run):  # pragma: no cover - compiled
    """Rows ``[start, start + run)`` for each of ``starts`` of oneDNN's steps after the
    int32 sums ``acc`` ``(R, L)`` (C-contiguous; channel ``r % M`` where ``per_row``,
    else ``i``), less ``factor * share[r % P, i]`` and wrapped to int32 as oneDNN's
    accumulators wrap (the correction of :func:`corrected_rows`; ``factor`` 0 for sums
    already wrapped): ``float32(acc) * src_scale * wei_scales[m]``, ``+ bias[m]``
    (``adds & 1``), ``* dst_scale`` (the reciprocal, JIT) or ``/ dst_scale`` where
    ``divide``, ``+ dst_zero_point`` (``adds & 2``); then, with ``saturate`` (an
    integer ``out``), clipped to ``[low, high]`` and rounded half to even.  Each step the float32 operation
    :func:`convtranspose._frontends.onednn_quantized.onednn_requantize` performs on the
    whole array, in its order.  A scale that is not set comes as 1: multiplying or
    dividing by 1 leaves every float32 as it is, where an unset addend is skipped
    (adding 0 would turn a product that underflowed to -0.0 into +0.0).  No NaN
    reaches the clip: the scales are finite."""
    # Step by step over a row, each step a loop of its own without branches, so that
    # LLVM vectorizes it: with the steps' choices inside one loop over the values it
    # did not, and the pass took 10x corrected_rows' time
    # (benchmarks/results/quantized-calls-zen4.json, onednn_rows_by_steps).  Each value
    # sees the same float32 operations in the same order.
    channels, places, width = wei_scales.shape[0], share.shape[0], acc.shape[1]
    values = np.empty(width, np.float32)
    for start in starts:
        for r in range(start, start + run):
            place = r % places
            for i in range(width):
                whole = _wrap32(np.int64(acc[r, i]) - factor * np.int64(share[place, i]))
                values[i] = np.float32(whole) * src_scale
            if per_row:
                m = r % channels
                scale = wei_scales[m]
                for i in range(width):
                    values[i] = values[i] * scale
                if adds & 1:
                    offset = bias[m]
                    for i in range(width):
                        values[i] = values[i] + offset
            else:
                for i in range(width):
                    values[i] = values[i] * wei_scales[i]
                if adds & 1:
                    for i in range(width):
                        values[i] = values[i] + bias[i]
            if divide:
                for i in range(width):
                    values[i] = values[i] / dst_scale
            else:
                for i in range(width):
                    values[i] = values[i] * dst_scale
            if adds & 2:
                for i in range(width):
                    values[i] = values[i] + dst_zero_point
            if saturate:
                for i in range(width):
                    out[r, i] = np.rint(min(max(values[i], low), high))
            else:
                for i in range(width):
                    out[r, i] = values[i]
