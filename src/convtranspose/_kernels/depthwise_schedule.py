"""``depthwise``'s schedule: which layers it computes, the geometry of its padded copy
and the scratch that copy takes (pure integer arithmetic, for the kernel, the cost
model and the memory check alike; the algorithm is :mod:`.depthwise`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._plan.geometry import axis_phases, three_axes
from .._plan.rules import AxisPlan
from .numba_scratch import direct_blocked_bytes

__all__ = ["DEPTHWISE_OUTPUTS", "DEPTHWISE_VECTORS", "depthwise_bytes", "is_depthwise",
           "last_axis_padding"]

#: Outputs along the last axis a block keeps in registers (one vector of channels
#: each): eight accumulators, one weight vector and a load fit AVX2's sixteen
#: registers.  Times against ``direct``: ``benchmarks/results/depthwise-xeon.json``.
DEPTHWISE_OUTPUTS = 8
#: Vectors of channels a block holds per output.
DEPTHWISE_VECTORS = 1


def is_depthwise(weights_shape: Sequence[int]) -> bool:
    """Whether a ``(G, Ci, Co, K...)`` filter has one input channel per group (any
    channel multiplier ``Co``): the layers the ``depthwise`` kernel computes."""
    return weights_shape[1] == 1


def last_axis_padding(axis: AxisPlan, outputs: int = DEPTHWISE_OUTPUTS) -> tuple[int, int]:
    """``(pad, length)``: zeros before the last axis's inputs in the padded copy, and the
    copy's positions along that axis.

    A block of ``outputs`` outputs of phase ``p`` starting at ``j0`` reads positions
    ``j0 + r + shift + pad`` for every tap's shift, ``r < outputs``, including the
    outputs past the phase's last (computed, not stored): the copy spans them all.
    """
    shifts = [shift for c in axis_phases(axis).classes for shift in c.shifts] or [0]
    pad = max(0, -min(shifts))
    blocks = -(-axis.output_size // axis.stride)  # the most outputs any phase has
    reach = -(-blocks // outputs) * outputs + max(0, max(shifts))
    return pad, pad + max(axis.input_size, reach)


def depthwise_bytes(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
                    itemsize: int, threads: int) -> int:
    """An upper estimate of ``depthwise``'s working memory beyond its result, in bytes of
    sums of ``itemsize``, on ``threads`` threads.

    The padded copy and the packed filter (channels padded to whole vectors of the
    widest registers, 64 bytes), a widened or converted copy of the data, and per
    thread a line tile and the tap lists.  Other layers run ``direct-blocked``
    (:func:`~.numba_scratch.direct_blocked_bytes`).
    """
    if not is_depthwise(weights_shape) or len(axes) > 3:
        return direct_blocked_bytes(batch, axes, weights_shape, itemsize, threads)
    groups, _, co = weights_shape[:3]
    axes3 = three_axes(axes)
    width = max(1, 64 // itemsize) * DEPTHWISE_VECTORS
    padded_channels = -(-groups * co // width) * width
    taps = math.prod(a.kernel_size for a in axes3)
    length = last_axis_padding(axes3[2])[1]
    copy = padded_channels * batch * axes3[0].input_size * axes3[1].input_size * length
    data = batch * groups * math.prod(a.input_size for a in axes3)
    per_thread = axes3[2].output_size * width + 6 * taps + 64
    return itemsize * (copy + padded_channels * taps + data + threads * per_thread)
