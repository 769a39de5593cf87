"""``direct`` and ``direct-numpy``: per-tap multiply-adds, no GEMM.

For depthwise and few-channel groups, where a GEMM would have tiny operands.
``direct`` is numba's (:mod:`._numba.direct`: plane, row and per-position kernels with
accumulators in vector registers); ``direct-numpy`` broadcasts with NumPy and runs where
numba cannot (integers, more than three spatial axes, numba not usable).
:class:`DirectCall` is a layer of any algorithm with a ``prepare`` entry, set up for
repeated calls.
"""

from __future__ import annotations

import itertools

import numpy as np

from .._plan.geometry import tap_windows
from .._runtime.memo import compared_as_bytes, derived_from, same_bits
from .._runtime.target import host_state, is_host
from .common import (
    NonFinite,
    input_glxc,
    kept_finite,
    output_glyc,
    require_finite,
    zero_output,
)
from .dense import switch_state
from .schedules import direct_rounds


class DirectCall:
    """A layer that :func:`transposed_convolution` computes with an algorithm of a
    ``prepare`` entry in the registry (numba ``direct``, ``direct-blocked``,
    ``depthwise``, ``col2im-*``, ``pointwise``), prepared.

    The same contract as :class:`DenseCall`: for data and a filter as at preparation
    (float32 or float64, the filter of the same bits, the same environment switches)
    it returns what :func:`transposed_convolution` returns without bias, calling the
    algorithm with everything but the data set up (:func:`convtranspose._kernels.prepare`).
    Any data gives the exact sums (``direct``'s and ``depthwise``'s filter is finite, so
    its taps meet the zero borders; the others multiply only the pairs that exist);
    None only for another filter, switch or target (its kernels and threads were set up
    for one).
    """

    __slots__ = ("_filter", "_filter_bytes", "_compute", "_shape", "_dtype", "_switches",
                 "_host_state")

    def __init__(self, filter: np.ndarray, compute, shape: tuple[int, ...], dtype: np.dtype,
                 target):
        # ``filter``: the read-only filter ``compute`` was set up from, a prepared layer's
        # own (nobody can write it: told by identity) or a copy of the caller's, which
        # each call compares the caller's with, bit for bit.  Filters that
        # :func:`same_bits` compares as bytes objects keep theirs: one bytes copy a call
        # instead of two (a 32 KiB filter 2.3 -> 1.3 us on an AMD Zen 4,
        # ``benchmarks/results/filter-comparison-zen4.json``, ``kept_bytes``).
        self._filter = filter
        self._filter_bytes = filter.tobytes() if compared_as_bytes(filter) else None
        self._compute, self._shape, self._dtype = compute, shape, dtype
        # ``switch_state`` reads the switches :func:`host` reads, so with it the host's
        # target is told by the rest of what it depends on (none: set up for another).
        self._switches = switch_state()
        self._host_state = host_state() if is_host(target) else None

    def tells_by_identity(self, filter: np.ndarray) -> bool:
        """Whether calls with ``filter`` compare nothing of it: the filter it was set up
        from, a prepared layer's own."""
        return filter is self._filter

    def _same_bits(self, filter: np.ndarray) -> bool:
        """Whether ``filter`` (of the set-up filter's shape and dtype) holds its bits."""
        if self._filter_bytes is None:
            return same_bits(self._filter, filter)
        return filter.tobytes() == self._filter_bytes

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        if (switch_state() != self._switches or host_state() != self._host_state
                or filter is not self._filter and not self._same_bits(filter)):
            return None
        if out is None:
            out = np.empty(self._shape, self._dtype)
        self._compute(data, out)
        return out


def _direct_numba(data, weights, axes, dtype, channels_last, out, *, target):
    """Per-tap multiply-adds in vector registers (numba; see :mod:`._numba.direct`)."""
    from ._numba.direct import direct_phase

    derived = derived_from(weights, "direct")
    require_finite(weights, dtype, derived)  # taps meet the zero-bordered windows
    direct_phase(data, weights, axes, dtype, channels_last, out, derived, None, target)


def _prepare_direct_numba(batch, weights, axes, dtype, channels_last, target):
    """``compute(data, out)`` of numba ``direct`` for this layer
    (:func:`._numba.direct.prepare_direct`), or None for a filter that is not finite
    (its taps meet the zero borders) or a layer it takes no prepared path for."""
    derived = derived_from(weights, "direct")
    if not kept_finite(weights, derived):
        return None
    from ._numba.direct import prepare_direct

    return prepare_direct(batch, weights, axes, dtype, channels_last, derived, target)


def _direct_numba_rounded(data, weights, axes, dtype, channels_last, out, bias, target) -> bool:
    """Numba ``direct`` rounding its float32 sums plus ``bias`` into a float16 or bfloat16
    ``out`` as it stores them; False where its kernel for this layer cannot round
    (:func:`~.schedules.direct_rounds`) or the filter may not be finite (the general
    path then takes the exact fallback).  Half-precision data is read as it is: the plane
    and row kernels widen it as they fill their windows (or multiply bfloat16 pairs)."""
    if not direct_rounds(weights.shape, axes, channels_last):
        return False
    from ._numba.direct import direct_phase

    derived = derived_from(weights, "direct")
    try:
        require_finite(weights, dtype, derived)
    except NonFinite:
        return False
    direct_phase(data, weights, axes, dtype, channels_last, out, derived, bias, target)
    return True


def _prepare_direct_numba_rounded(batch, weights, axes, dtype, channels_last, data_dtype,
                                  result_dtype, bias, target):
    """``compute(data, out)`` of :func:`_direct_numba_rounded` for this layer (its
    kernels set up once, :func:`._numba.direct.prepare_direct_rounded`), or None where
    that declines every call: a kernel that does not round, or a filter that may not
    be finite."""
    if not direct_rounds(weights.shape, axes, channels_last):
        return None
    derived = derived_from(weights, "direct")
    if not kept_finite(weights, derived):
        return None
    from ._numba.direct import prepare_direct_rounded

    return prepare_direct_rounded(batch, weights, axes, dtype, channels_last, derived, target,
                                  data_dtype, result_dtype, bias)


def _direct_numpy(data, weights, axes, dtype, channels_last, out, *, target):
    """Per-tap products with NumPy (any dtype, rank and geometry).

    Only the taps that reach the output are visited, and their windows are computed
    with Python integers: this is the algorithm for strides, dilations and pads of any
    size (:func:`convtranspose._plan.geometry.beyond_int64_kernels`).  Exact with non-finite
    operands: it multiplies only the (input, tap) pairs that exist.
    """
    groups, ci, co = weights.shape[:3]
    live = [[(k, window) for k, window in enumerate(tap_windows(axis)) if window is not None]
            for axis in axes]
    zero_output(out, target.threads)
    target = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    source = np.ascontiguousarray(input_glxc(data, groups, channels_last), dtype)
    w = weights.astype(dtype, copy=False)
    # (G, 1..., Ci, Co): one (Ci, Co) matrix per group, broadcast over batch and space.
    matrix_shape = (groups,) + (1,) * len(axes) + (ci, co)
    for combination in itertools.product(*live):
        tap = tuple(k for k, _ in combination)
        src = source[(slice(None), slice(None)) + tuple(x for _, (x, _) in combination)]
        dst = target[(slice(None), slice(None)) + tuple(y for _, (_, y) in combination)]
        tap_weights = w[(slice(None), slice(None), slice(None)) + tap]  # (G, Ci, Co)
        dst += np.matmul(src, tap_weights.reshape(matrix_shape))
