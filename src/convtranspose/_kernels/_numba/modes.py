"""How the numba kernels read their data and store their sums: as they are, or as float16
or bfloat16 bits (widened as read, rounded as stored, bit for bit as NumPy casts), and
when bfloat16 operands may be multiplied in pairs (``vdpbf16ps``) exactly.
"""

from __future__ import annotations

import numpy as np

from ..schedules import BFLOAT16, FLOAT16, KEEP
from .casts import bfloat16_bits, bfloat16_value, float16_bits, float16_value
from .kernel_cache import cached_njit


@cached_njit(nogil=True)
def smallest_bfloat16_exponent(bits):  # pragma: no cover - compiled
    """The smallest exponent field of the nonzero bfloat16 ``bits`` (0: a subnormal; 255: none)."""
    smallest = np.uint16(255)
    for index in range(bits.size):
        magnitude = bits[index] & np.uint16(0x7FFF)
        if magnitude:
            smallest = min(smallest, magnitude >> np.uint16(7))
    return smallest


@cached_njit(nogil=True)
def plain_windows(length, like):  # pragma: no cover - compiled
    """The plane kernel's windows: one array both filled and read (``like``'s dtype,
    the sums')."""
    windows = np.zeros(length, like.dtype)
    return windows, windows


@cached_njit(nogil=True)
def pair_windows(length, like):  # pragma: no cover - compiled
    """Windows of bfloat16 channel pairs: filled by halves (``uint16``), read as ``uint32``."""
    halves = np.zeros(2 * length, np.uint16)
    return halves, halves.view(np.uint32)


@cached_njit(nogil=True, inline="always")
def _store_sum(out, at, value, shift, biased):  # pragma: no cover - compiled
    out[at] = value


@cached_njit(nogil=True, inline="always")
def _store_float16(out, at, value, shift, biased):  # pragma: no cover - compiled
    # The bias is added in float32 before the one rounding, as the float32 path adds
    # it to its result; without one nothing is added, not even a zero (-0.0 + 0.0 is
    # +0.0).
    out[at] = float16_bits(np.float32(value) + np.float32(shift) if biased
                           else np.float32(value))


@cached_njit(nogil=True, inline="always")
def _store_bfloat16(out, at, value, shift, biased):  # pragma: no cover - compiled
    out[at] = bfloat16_bits(np.float32(value) + np.float32(shift) if biased
                            else np.float32(value))


STORES = {KEEP: _store_sum, FLOAT16: _store_float16, BFLOAT16: _store_bfloat16}


@cached_njit(nogil=True, inline="always")
def _load_value(value):  # pragma: no cover - compiled
    return value


#: How the plane kernel's window fill reads the data, per ``mode``: values as they
#: are, or the float32 values of float16 or bfloat16 bits (half data is never widened
#: into a float32 copy first).
LOADS = {KEEP: _load_value, FLOAT16: float16_value, BFLOAT16: bfloat16_value}


#: The smallest sum of two nonzero bfloat16 operands' exponent fields (biased by 127)
#: for which ``vdpbf16ps`` is exact: every product, and so every partial sum, is then a
#: multiple of 2**-126 (8-bit significands: ``2**(e_a - 134) * 2**(e_b - 134)``), so
#: zero or normal, never a subnormal the instruction would flush to zero
#: (``benchmarks/results/half-precision.json``).
_PAIRS_EXPONENT_SUM = 142


def _pairs_exact(smallest_data: int, smallest_weight: int) -> bool:
    """Whether ``vdpbf16ps`` sums operands with these smallest nonzero exponent fields
    (:func:`smallest_bfloat16_exponent`) exactly: no subnormal operand (the
    instruction reads it as zero) and no partial sum that could be subnormal
    (:data:`_PAIRS_EXPONENT_SUM`).  Infinities and NaNs do not matter: the
    instruction propagates them like an FMA.
    """
    return (smallest_data > 0 and smallest_weight > 0
            and smallest_data + smallest_weight >= _PAIRS_EXPONENT_SUM)


def bfloat16_pair_bits(data, weights, dtype, lanes, derived, target) -> np.ndarray | None:
    """The data's bits (flat ``uint16``) if the plane kernel multiplies these operands as
    bfloat16 pairs (``vdpbf16ps``), else None.

    For bfloat16 data and weights summed in float32 on CPUs with AVX512_BF16, when
    :func:`_pairs_exact` holds: twice the float32 kernel's multiply-adds per
    instruction, with the same products and float32 roundings (only the order of the
    additions differs, as between any two algorithms).  One pass over the data's
    bits checks :func:`_pairs_exact` (the weights' is kept in ``derived``).
    """
    if not (dtype == np.float32 and lanes == 16 and data.dtype.name == "bfloat16"
            and weights.dtype.name == "bfloat16"):
        return None
    if not target.bfloat16_pairs:
        return None
    key = ("pairs exact",)
    if key not in derived:
        derived[key] = smallest_bfloat16_exponent(
            np.ascontiguousarray(weights).view(np.uint16).reshape(-1))
    bits = np.ascontiguousarray(data).view(np.uint16).reshape(-1)
    exact = _pairs_exact(int(smallest_bfloat16_exponent(bits)), int(derived[key]))
    return bits if exact else None


def store_mode(out_dtype: np.dtype, dtype: np.dtype) -> int:
    """The plane and ``direct-blocked`` kernels' ``mode`` for a result of ``out_dtype``
    from ``dtype`` sums."""
    if out_dtype == dtype:
        return KEEP
    return FLOAT16 if out_dtype == np.float16 else BFLOAT16
