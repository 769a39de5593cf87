"""``direct-blocked``: register-blocked multiply-adds per output line, for groups of a
few dozen channels (numba; the kernel is :mod:`._numba.blocked`).

Per output line (all of the last axis for one group) and phase of the last axis,
blocks of outputs whose taps all read inside the input keep their output channels
in vector registers while every tap and input channel adds one broadcast input times
one weight row; no im2col and no scatter.  Multiplies only the (input, tap) pairs
that exist: exact with non-finite operands.
"""

from __future__ import annotations

from .._runtime.memo import derived_from
from .casts import widen
from .schedules import KEEP


def _direct_blocked(data, weights, axes, dtype, channels_last, out, *, target):
    """Fill ``out`` with the register-blocked numba kernel (float dtypes, up to 3-D)."""
    from ._numba.blocked import direct_blocked

    direct_blocked(data, weights, axes, dtype, channels_last, out, None,
                   derived_from(weights, "direct-blocked"), target)


def _direct_blocked_rounded(data, weights, axes, dtype, channels_last, out, bias,
                            target) -> bool:
    """``direct-blocked`` rounding its float32 sums plus ``bias`` into a float16 or
    bfloat16 ``out`` as it stores each line (half-precision data widened first)."""
    from ._numba.blocked import direct_blocked

    direct_blocked(widen(data, target), weights, axes, dtype, channels_last, out, bias,
                   derived_from(weights, "direct-blocked"), target)
    return True


def prepare_blocked(batch, weights, axes, dtype, channels_last, target):
    """``compute(data, out)``: ``direct-blocked`` for this layer with its passes, packed
    weights and thread split set up once (:class:`._numba.blocked.BlockedLayer`), for
    :class:`convtranspose._kernels.direct.DirectCall`; ``out`` has ``dtype``.  Exact
    with any operands: it multiplies no border."""
    from ._numba.blocked import blocked_layer

    return blocked_layer(batch, weights, axes, dtype, channels_last, KEEP,
                         derived_from(weights, "direct-blocked"), target)


def prepare_blocked_rounded(batch, weights, axes, dtype, channels_last, data_dtype,
                            result_dtype, bias, target):
    """``compute(data, out)`` of :func:`_direct_blocked_rounded` for this layer, its
    passes, packed weights and thread split set up once: the data (of ``data_dtype``)
    widened, the sums plus ``bias`` rounded into ``out`` of ``result_dtype``."""
    from ._numba.blocked import blocked_layer
    from ._numba.modes import store_mode

    layer = blocked_layer(batch, weights, axes, dtype, channels_last,
                          store_mode(result_dtype, dtype),
                          derived_from(weights, "direct-blocked"), target)

    def compute(data, out):
        layer(widen(data, target), out, bias)

    return compute
