"""``depthwise``'s schedule: which layers it computes, the geometry of its padded copy
and the scratch that copy takes (pure integer arithmetic, for the kernel, the cost
model and the memory check alike; the algorithm is :mod:`.depthwise`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._plan.geometry import axis_phases, three_axes
from .._plan.rules import AxisPlan
from .numba_scratch import direct_blocked_bytes

__all__ = ["DEPTHWISE_ACCUMULATORS", "LINES_UNROLLED_TAPS", "LinesPlan", "block_shape",
           "chunk_multiply_adds", "copy_step", "depthwise_bytes", "is_depthwise",
           "last_axis_padding", "lines_multiply_adds", "lines_plan", "takes_lines"]

#: Vector accumulators a block keeps in registers: eight, the weight vectors and a load
#: fit AVX2's sixteen registers.  Times against ``direct``:
#: ``benchmarks/results/depthwise-xeon.json``.
DEPTHWISE_ACCUMULATORS = 8
#: Bytes of a cache line on the x86 CPUs the library targets.
CACHE_LINE = 64
#: The most row taps a phase of the lines kernel may have for its unrolled blocks
#: (:attr:`LinesPlan.unrolled_taps`): the block keeps that many weight vectors in
#: registers beside its eight accumulators and one input vector, which with seven fits
#: AVX2's sixteen registers.
LINES_UNROLLED_TAPS = 7


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


def takes_lines(weights_shape: Sequence[int], axes: Sequence[AxisPlan], channels_last: bool,
                lanes: int) -> bool:
    """Whether ``depthwise`` sums this layer along its lines (vectors of outputs along
    the last axis, :mod:`._numba.depthwise_lines`) rather than across channels:
    channels-first data, two axes, and a stride of the last axis that divides the
    vectors' ``lanes`` (every vector's lanes then have the same phases).  The channels
    stay in their planes, with no transposing copy of the data or of the result."""
    return (is_depthwise(weights_shape) and not channels_last and len(axes) == 2
            and lanes % axes[1].stride == 0)


def _rounded(value: int, lanes: int) -> int:
    return -(-value // lanes) * lanes


@dataclass(frozen=True)
class LinesPlan:
    """What the lines kernel (``templates/depthwise_lines.py``) takes for one layer.

    Output row ``y = p + q * s1`` sums over the row taps of phase ``p``: entries
    ``[row_first[p], row_first[p + 1])`` of ``row_taps`` (the tap) and ``row_shifts``
    (the window row the tap reads for ``q = 0``; ``q`` rows further for the others).
    Along the line, output ``x`` takes the ``m``-th tap of its phase from the ``m``-th
    window copy at ``x``: the copy's lane ``l`` of vector ``v`` is the staged input at
    ``column_reads[(v * taps + m) * lanes + l]`` (a zero of the stage's margin where
    that lane's phase has fewer taps), and ``column_taps[m, l]`` is the tap it meets
    (-1: none, a weight of zero).  ``sizes``: groups, multiplier, X1, X2, Y1, Y2, K1,
    the window copies (``taps``), their rows, the line (Y2 in whole vectors), the
    stage's line, its margin, the input row of window row 0, s2 (1: reads in one
    vector), the phases of the first axis, s1.  ``scratch``: elements per thread.

    ``unrolled_taps``: the row taps of every phase, where the kernel's blocks are
    unrolled over them, else 0 (blocks of one loop over the taps, over window copies).
    Unrolled, a block loads each window row once per tap of the line and multiplies it
    into every output row it reaches, from weight vectors held in registers (a load per
    output row, not per multiply-add), and reads the staged rows themselves, each tap
    of the line at its shift, with no window copies: the copies cost more than loads
    that straddle cache lines save (``depthwise-lines-xeon.json``, ``unrolled_rows``).
    The stage then holds the whole window, zero rows included.  Taken where the line's
    stride is 1 and every phase of the first axis has as many taps, reading
    consecutive window rows, at most :data:`LINES_UNROLLED_TAPS` (with larger strides
    along the line, gathered window copies stay, and unrolled blocks over them took
    0.97-1.10x the time).
    """

    sizes: tuple[int, ...]
    row_first: np.ndarray
    row_taps: np.ndarray
    row_shifts: np.ndarray
    column_reads: np.ndarray
    column_taps: np.ndarray
    scratch: int
    unrolled_taps: int

    @property
    def taps(self) -> int:
        """The window copies: the most taps of the last axis any of its phases has."""
        return self.sizes[7]


def _axis_taps(axis: AxisPlan, phase: int) -> list[tuple[int, int]]:
    """``(tap, input of output 0 of the phase's outputs)`` for each tap that reaches
    the outputs ``phase + q * stride``: their inputs are ``q + shift``."""
    start = phase + axis.offset
    return [(k, (start - k * axis.dilation) // axis.stride) for k in range(axis.kernel_size)
            if (start - k * axis.dilation) % axis.stride == 0]


def lines_plan(groups: int, multiplier: int, axes: Sequence[AxisPlan],
               lanes: int) -> LinesPlan:
    """The :class:`LinesPlan` of a layer :func:`takes_lines` takes."""
    first, last = axes
    phases = min(first.stride, first.output_size)
    rows = [_axis_taps(first, p) for p in range(phases)]
    shifts = [shift for taps in rows for _, shift in taps] or [0]
    top = max(0, -min(shifts))
    blocks = _rounded(-(-first.output_size // first.stride), DEPTHWISE_ACCUMULATORS)
    window_rows = blocks + max(0, max(shifts)) + top
    line = _rounded(last.output_size, lanes)
    columns = [_axis_taps(last, p) for p in range(last.stride)]  # by x % s2
    taps = max(1, max(len(c) for c in columns))
    column_taps = np.full((taps, lanes), -1, np.int64)
    inputs = np.zeros((line // lanes, taps, lanes), np.int64)
    reached = np.zeros_like(inputs, bool)
    for lane in range(lanes):
        for m, (k, shift) in enumerate(columns[lane % last.stride]):
            column_taps[m, lane] = k
            first_input = lane // last.stride + shift  # of the lane in vector 0
            inputs[:, m, lane] = np.arange(0, line, lanes) // last.stride + first_input
            reached[:, m, lane] = True
    low = int(inputs[reached].min(initial=0))
    margin = _rounded(max(1, -low), lanes)
    stage_line = margin + _rounded(max(last.input_size, int(inputs.max(initial=0)) + 1), lanes)
    reads = np.where(reached, inputs + margin, 0).reshape(-1)
    unrolled = _unrolled_taps(rows) if last.stride == 1 else 0
    sizes = (groups, multiplier, first.input_size, last.input_size, first.output_size,
             last.output_size, first.kernel_size, taps, window_rows, line, stage_line, margin,
             -top, last.stride, phases, first.stride)
    # A vector's reads may run a vector past the stage (their lanes unused), and the
    # window starts up to a vector in, for alignment.  Two stages: one item ahead.
    if unrolled:
        scratch = 2 * window_rows * stage_line + 2 * lanes
    else:
        scratch = taps * window_rows * line + 2 * first.input_size * stage_line + 2 * lanes
    first_taps = np.cumsum([0] + [len(taps_) for taps_ in rows])
    return LinesPlan(sizes, first_taps.astype(np.int64),
                     np.array([k for taps_ in rows for k, _ in taps_], np.int64),
                     np.array([shift + top for taps_ in rows for _, shift in taps_], np.int64),
                     reads, column_taps, scratch, unrolled)


def _unrolled_taps(rows: list[list[tuple[int, int]]]) -> int:
    """:attr:`LinesPlan.unrolled_taps` of the phases' ``(tap, shift)`` lists: every
    phase has the same taps, which in rising order reach window rows one apart,
    falling (so with stride s and no dilation: K a multiple of s)."""
    most = max((len(taps) for taps in rows), default=0)  # no phase: no output rows
    consecutive = all(shift - next_shift == 1 for taps in rows
                      for (_, shift), (_, next_shift) in zip(taps, taps[1:]))
    even = all(len(taps) == most for taps in rows)
    return most if consecutive and even and 0 < most <= LINES_UNROLLED_TAPS else 0


def chunk_multiply_adds(axes3: Sequence[AxisPlan], outputs: int) -> int:
    """The channel-chunk kernel's multiply-adds per channel: every tap of each output's
    phase, the outputs along the last axis in whole blocks of ``outputs``."""
    per_axis = []
    for index, axis in enumerate(axes3):
        total = 0
        for c in axis_phases(axis).classes:
            for phase in range(c.first, c.first + c.count):
                count = -(-(axis.output_size - phase) // axis.stride)
                if index == 2:
                    count = -(-count // outputs) * outputs
                total += count * len(c.shifts)
        per_axis.append(total)
    return math.prod(per_axis)


def lines_multiply_adds(batch: int, groups: int, multiplier: int, axes: Sequence[AxisPlan],
                        lanes: int) -> int:
    """The lines kernel's multiply-adds, in lanes: for every phase of the first axis,
    its row taps times the window copies for every output of its 8-row blocks of whole
    vectors."""
    first, last = axes
    taps = max(len(_axis_taps(last, p)) for p in range(last.stride)) or 1
    rows = sum(len(_axis_taps(first, p)) * _rounded(-(-(first.output_size - p) // first.stride),
                                                    DEPTHWISE_ACCUMULATORS)
               for p in range(min(first.stride, first.output_size)))
    return batch * groups * multiplier * rows * _rounded(last.output_size, lanes) * taps


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
    vectors = 0
    if takes_lines(weights_shape, axes, False, 16):  # vectors of 16 lanes at most
        plan = lines_plan(groups, co, axes, 16)
        per_thread = max(per_thread, plan.scratch)
        vectors = groups * co * axes[0].kernel_size * plan.taps * 16  # the weight vectors
    return itemsize * (copy + padded_channels * taps + data + vectors + threads * per_thread)
