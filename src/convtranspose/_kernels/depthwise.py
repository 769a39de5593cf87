"""``depthwise``: one input channel per group, its output channels in vector lanes
(numba; the kernel is :mod:`._numba.depthwise`).

A compiled pass copies the input into a zero-padded buffer of chunks of ``width``
consecutive output channels (a cache line), each lane holding the input channel its
output channel reads (so a channel multiplier above 1 is covered by repeating the
input channel in its lanes): ``(chunks, N, X1, X2, X3 padded, width)`` for
channels-first data, ``(N, X1, X2, X3 padded, step)`` for channels-last data, a
position's chunks side by side (:func:`~.depthwise_schedule.copy_step`).  The kernel
keeps a block of outputs along the last axis times a chunk in vector registers
(:func:`~.depthwise_schedule.block_shape`) and adds input vectors times weight vectors
per tap, every tap of the last axis's phase read from the padded buffer (no bounds
tests), the taps of the first two axes only where they read inside the input.
Channels-last outputs of whole chunks are stored straight into the caller's array;
the others through a line tile.

Channels-first layers of two axes whose last stride divides the vectors' lanes
(:func:`~.depthwise_schedule.takes_lines`) are summed along their lines instead
(:mod:`._numba.depthwise_lines`): each plane on its own, blocks of 8 output rows x a
vector along the line, with no transposing copy of the data or of the result.

Both kernels share their items among all of the target's threads: their time goes to
moving memory, which the multiply-add count that keeps other small direct layers on
one thread (:func:`~.schedules.direct_worth_threads`) does not see (layers of a few
million multiply-adds moving megabytes took 0.59-0.80x the time on two threads, those
of 40-100 us 1.2-1.4x: ``benchmarks/results/depthwise-lines-xeon.json``,
``all_threads``).  Measured planning, the default, also times them on one thread and
keeps the faster.

The padding's zeros meet every weight of the last axis's taps: the filter must be
finite (:class:`~.common.NonFinite` otherwise; the exact fallback then runs).  Layers
with more than one input channel per group are not depthwise: forced here, they run
``direct-blocked``'s kernel (exact, any group shape).
"""

from __future__ import annotations

from .._runtime.memo import derived_from
from .casts import widen
from .common import kept_finite, require_finite
from .depthwise_schedule import is_depthwise

__all__ = ["prepare_depthwise"]


def _depthwise(data, weights, axes, dtype, channels_last, out, *, target):
    """Fill ``out`` with the depthwise kernel (float dtypes, up to 3-D); other layers with
    ``direct-blocked``'s.  Raises :class:`~.common.NonFinite` for a filter that may not be
    finite (the padding's zeros meet every weight)."""
    if not is_depthwise(weights.shape):
        from ._numba.blocked import direct_blocked

        direct_blocked(data, weights, axes, dtype, channels_last, out, None,
                       derived_from(weights, "direct-blocked"), target)
        return
    from ._numba.depthwise import depthwise_layer

    derived = derived_from(weights, "depthwise")
    require_finite(weights, dtype, derived)
    layer = depthwise_layer(data.shape[0], weights, axes, dtype, channels_last, derived,
                            target)
    layer(widen(data, target), out)


def prepare_depthwise(batch, weights, axes, dtype, channels_last, target):
    """``compute(data, out)``: ``depthwise`` for this layer set up once
    (:class:`._numba.depthwise.DepthwiseLayer`), for
    :class:`convtranspose._kernels.direct.DirectCall`, or None for a layer it does not
    compute itself or a filter that is not finite (its zeros meet the padding)."""
    derived = derived_from(weights, "depthwise")
    if not is_depthwise(weights.shape) or not kept_finite(weights, derived):
        return None
    from ._numba.depthwise import depthwise_layer

    return depthwise_layer(batch, weights, axes, dtype, channels_last, derived, target)
