"""``depthwise``'s schedule: which layers it computes, the geometry of its padded copy
and the scratch that copy takes (pure integer arithmetic, for the kernel, the cost
model and the memory check alike; the algorithm is :mod:`.depthwise`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._plan.geometry import axis_phases, three_axes
from .._plan.rules import AxisPlan
from .numba_scratch import direct_blocked_bytes

__all__ = ["DEPTHWISE_ACCUMULATORS", "block_shape", "copy_step", "depthwise_bytes",
           "is_depthwise", "last_axis_padding"]

#: Vector accumulators a block keeps in registers: eight, the weight vectors and a load
#: fit AVX2's sixteen registers.  Times against ``direct``:
#: ``benchmarks/results/depthwise-xeon.json``.
DEPTHWISE_ACCUMULATORS = 8
#: Bytes of a cache line on the x86 CPUs the library targets.
CACHE_LINE = 64


def block_shape(lanes: int, itemsize: int) -> tuple[int, int]:
    """``(outputs, vectors)`` of a block for vectors of ``lanes`` elements of
    ``itemsize`` bytes: ``outputs`` along the last axis times ``vectors`` vectors of
    channels.

    A chunk of channels spans a whole cache line, so that every load of the copy and
    every channels-last store of a block takes whole lines (chunks of half a line read
    and wrote each line twice, a block apart: 1.2-1.6x the kernel's time with AVX2,
    ``benchmarks/results/depthwise-zen3.json``); the outputs share the accumulators.
    """
    vectors = max(1, CACHE_LINE // (lanes * itemsize))
    return max(1, DEPTHWISE_ACCUMULATORS // vectors), vectors


def is_depthwise(weights_shape: Sequence[int]) -> bool:
    """Whether a ``(G, Ci, Co, K...)`` filter has one input channel per group (any
    channel multiplier ``Co``): the layers the ``depthwise`` kernel computes."""
    return weights_shape[1] == 1


#: Bytes between addresses that share a set of the level-1 data cache on x86: such a
#: cache is indexed by the address within a 4 KiB page (its size over its ways is at
#: most a page), so positions a multiple of 4 KiB apart compete for one set's ways.
SET_SPAN = 4096


def copy_step(channels: int, width: int, itemsize: int, channels_last: bool) -> int:
    """Elements between consecutive positions of ``depthwise``'s padded copy.

    Channels first, a chunk's ``width`` lanes.  Channels last, every channel padded to
    whole chunks, plus one chunk where that span is a multiple of :data:`SET_SPAN`: a
    block's outputs read positions one step apart, which would all fall in one set.
    """
    if not channels_last:
        return width
    step = -(-channels // width) * width
    return step + width if step * itemsize % SET_SPAN == 0 else step


def last_axis_padding(axis: AxisPlan, outputs: int) -> tuple[int, int]:
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

    The padded copy and the packed filter (channels padded to whole cache lines, and
    one line more per position: :func:`copy_step`), a widened or converted copy of the data, and per
    thread a line tile and the tap lists.  Other layers run ``direct-blocked``
    (:func:`~.numba_scratch.direct_blocked_bytes`).
    """
    if not is_depthwise(weights_shape) or len(axes) > 3:
        return direct_blocked_bytes(batch, axes, weights_shape, itemsize, threads)
    groups, _, co = weights_shape[:3]
    axes3 = three_axes(axes)
    width = max(1, CACHE_LINE // itemsize)
    padded_channels = -(-groups * co // width) * width + width  # copy_step's, at most
    taps = math.prod(a.kernel_size for a in axes3)
    length = last_axis_padding(axes3[2], DEPTHWISE_ACCUMULATORS)[1]
    copy = padded_channels * batch * axes3[0].input_size * axes3[1].input_size * length
    data = batch * groups * math.prod(a.input_size for a in axes3)
    per_thread = axes3[2].output_size * width + 6 * taps + 64
    return itemsize * (copy + padded_channels * taps + data + threads * per_thread)
