"""The working memory of the numba algorithms (``direct``, ``direct-blocked``, and the
numba part of ``stream``), estimated from the problem's shape for :mod:`.scratch`.

Part of it is NumPy's (copies of the operands, the filter's reordered layouts, the row
kernel's windows); part is allocated inside compiled code by numba's runtime (with
``PyMem_RawMalloc``, so tracemalloc sees it too).  Every allocation inside
:mod:`convtranspose._kernels._numba` and its templates, and the term counting it:

- ``_numba/planes.py`` ``_blocked_weights``: the filter per block of output channels
  (kept with the filter): :func:`_plane_weights_bytes`;
- ``_numba/modes.py`` ``plain_windows``/``pair_windows`` (the plane kernel's windows)
  and ``templates/planes.py`` ``acc``, ``reads``, ``starts``: :func:`_plane_call_bytes`;
- ``templates/channels_last.py`` ``found``, ``row_reads``, ``row_taps``, ``reads``,
  ``taps``: :func:`_position_call_bytes`;
- ``templates/blocked.py`` ``found``, ``row_reads``, ``row_taps``, ``group_reads``,
  ``group_taps``, ``reads``, ``taps``, ``shifts``, ``edge_reads``, ``edge_taps``,
  ``tile``: :func:`_blocked_call_bytes`;
- ``templates/stream.py`` ``reads``, ``taps`` (one entry each): :func:`stream_bytes`.

The row kernel (``_numba/rows.py``), the layout copy (``_numba/transpose.py``), the
scatter and the casts allocate nothing in compiled code.  A compiled kernel allocates its
buffers on entry and frees them on return, and
:func:`convtranspose._runtime.threads.parallel_for` runs at most one call per thread at a
time: the per-call terms count once per thread that can be running.  tracemalloc
(``tests/kernels/test_scratch.py``) and the peak RSS of fresh processes
(``tests/kernels/test_numba_memory.py``) check the sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._plan.geometry import axis_phases, three_axes
from .._plan.rules import AxisPlan
from .schedules import (
    ROWS_WINDOW_BYTES,
    blocked_segments,
    blocked_shape,
    direct_worth_threads,
    line_segment_inputs,
    line_segmented,
    planes_block_shape,
    rows_co_block,
)

__all__ = ["GROUP_TILE_ELEMENTS", "direct_blocked_bytes", "direct_bytes", "stream_bytes"]

#: The widest vectors of any target (AVX-512): the most lanes a kernel's blocks take.
_VECTOR_BYTES = 64
#: The plane kernel's band and line-segment sizes (``_numba/planes.py``), copied here so
#: that estimating never imports numba; ``tests/kernels/test_numba_memory.py`` checks they agree.
BAND_ELEMENTS = 1 << 16
#: ``direct-blocked``'s tile of lines (``_numba/blocked.py``), likewise.
GROUP_TILE_ELEMENTS = 1 << 15


def _threads(batch: int, weights_shape: Sequence[int], axes, threads: int) -> int:
    """The threads numba ``direct`` and ``direct-blocked`` run on (``_numba/direct.py``
    ``direct_threads``): all of them, or one for a layer too small to share out."""
    groups, ci, co = weights_shape[:3]
    out_size = batch * groups * co * math.prod(axis.output_size for axis in axes)
    return threads if direct_worth_threads(out_size, ci, axes) else 1


def _window(axis: AxisPlan) -> tuple[int, int]:
    """``(blocks, window)`` of one axis in the plane kernel (``_window_tables``): the
    outputs per phase and the window positions every tap of every phase reads."""
    phases = axis_phases(axis)
    shifts = [shift for c in phases.classes for shift in c.shifts] or [0]
    return phases.blocks, phases.blocks + max(shifts) - min(shifts)


def _most_taps(axes3: Sequence[AxisPlan]) -> tuple[int, int]:
    """``(rows, all)``: the most taps of one phase over the first two axes and over all
    three, the length of the kernels' tap lists (one tap per axis of the phase)."""
    most = [max([len(c.shifts) for c in axis_phases(axis).classes] + [1]) for axis in axes3]
    return most[0] * most[1], most[0] * most[1] * most[2]


def _plane_call_bytes(axes3: Sequence[AxisPlan], planes: int, ci: int, co: int,
                      itemsize: int, threads: int) -> int:
    """The plane kernel's buffers of every call that may run at once: its windows (every
    input channel's window of a band of the first axis, plus a block's overrun), its
    accumulators (a band's run per phase of the last axis, ``co_block`` channels) and its
    two tap lists; bands as ``plane_runner`` cuts them."""
    (blocks1, w1), (_, w2), (_, w3) = (_window(axis) for axis in axes3)
    plane = w2 * w3
    lanes, co_block, vectors = planes_block_shape(itemsize, co, _VECTOR_BYTES)
    block = lanes * vectors
    stride3 = axes3[2].stride
    phases3 = min(stride3, axes3[2].output_size)
    min_bands = -(-2 * threads // max(1, planes)) if threads > 1 else 1
    _, most = _most_taps(axes3)
    largest = 0
    # Units of the window: one input channel in the sums' type, or (bfloat16 pairs,
    # float32 sums) two channels' bits in 4 bytes, whose bands are longer.
    for units, unit_bytes in [(ci, itemsize)] + ([(-(-ci // 2), 4)] if itemsize == 4 else []):
        widest = BAND_ELEMENTS // (plane * (units + co_block * stride3))
        fewest = max(min_bands, -(-blocks1 // max(1, widest)))
        band = -(-blocks1 // min(fewest, blocks1))
        windows = unit_bytes * (units * (band + w1 - blocks1) * plane + block + vectors * plane)
        # A run: a band's flat positions, or whole vectors per output row.
        acc = itemsize * co_block * phases3 * (band * w2 * (w3 + lanes) + block)
        calls = min(threads, planes * -(-blocks1 // band))
        largest = max(largest, calls * (windows + acc + 2 * 8 * most))
    return largest


def _plane_weights_bytes(weights_shape: Sequence[int], itemsize: int) -> int:
    """The plane kernel's filter (``_blocked_weights``, numba): every tap's weights per
    block of ``co_block`` output channels, zeros past ``Co`` (bfloat16 pairs: two input
    channels' bits per 4 bytes, no more)."""
    groups, ci, co = weights_shape[:3]
    co_block = planes_block_shape(itemsize, co, _VECTOR_BYTES)[1]
    return groups * ci * -(-co // co_block) * co_block * math.prod(weights_shape[3:]) * itemsize


def _position_call_bytes(axes3: Sequence[AxisPlan], threads: int) -> int:
    """The per-position kernel's tap lists (``templates/channels_last.py``) of every call
    that may run at once: ``found`` (4 int64 per row of taps), two more per row, two per
    tap."""
    rows, most = _most_taps(axes3)
    return threads * 8 * (6 * rows + 2 * most)


def _blocked_width(co: int, last: AxisPlan, itemsize: int) -> int:
    """The sums per output of ``direct-blocked``'s tile and filter: ``Co`` in whole
    chunks of vectors (``schedules.blocked_shape``), the wider of AVX2's and AVX-512's."""
    widths = []
    for vector_bytes in (32, _VECTOR_BYTES):
        lanes, vectors, _, _ = blocked_shape(itemsize, co, last, vector_bytes)
        widths.append(lanes * vectors)
    return max(widths)


def _blocked_call_bytes(batch: int, axes3: Sequence[AxisPlan], groups: int, co: int,
                        itemsize: int, threads: int) -> int:
    """``direct-blocked``'s tap lists and tile (``templates/blocked.py``) of every call
    that may run at once.  The tile holds a group of whole lines, up to
    :data:`GROUP_TILE_ELEMENTS` sums (one line when longer), or with lines cut into
    segments (fewer lines than threads: ``schedules.blocked_segments``) one segment; a
    line is ``Y3`` outputs of :func:`_blocked_width` sums."""
    rows, most = _most_taps(axes3)
    lines = groups * batch * axes3[0].output_size * axes3[1].output_size
    segments = blocked_segments(lines, axes3[2], threads)
    line = -(-axes3[2].output_size // segments) * _blocked_width(co, axes3[2], itemsize)
    tile = (max(GROUP_TILE_ELEMENTS, line) if segments == 1 else line) * itemsize
    return min(threads, lines * segments) * (tile + 8 * (8 * rows + 5 * most))


def _segment_bytes(axis: AxisPlan, batch: int, groups: int, ci: int, co: int,
                   itemsize: int, threads: int) -> int:
    """A long 1-D line cut into segments (``_numba/line_segments.py``), one per thread at a
    time: each segment's result and contiguous data (NumPy) and its plane-kernel call."""
    inputs = line_segment_inputs(ci, axis.stride)
    length = axis.stride * inputs
    reach = -(-(axis.kernel_size - 1) * axis.dilation // axis.stride) + 2
    # The segment's own layer, with every input its outputs may read.
    segment = AxisPlan(min(axis.input_size, inputs + reach), axis.kernel_size, axis.stride,
                       axis.dilation, axis.offset % axis.stride, length)
    numpy = batch * groups * (co * length + ci * segment.input_size) * itemsize
    return threads * (numpy + _plane_call_bytes(three_axes((segment,)), batch * groups, ci,
                                                co, itemsize, 1))


def direct_bytes(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
                 itemsize: int, threads: int) -> int:
    """An upper estimate of numba ``direct``'s working memory beyond its result, in bytes
    of sums of ``itemsize``, on ``threads`` threads (whichever of its kernels runs).

    NumPy's: a contiguous copy of the data in the sums' type (strided or narrower
    data); the filter's finiteness check (a byte per weight); the plane kernel's
    contiguous filter, or the row kernel's padded, blocked and merged layouts
    (``_rows_weights``); the row kernel's windows (at most ``ROWS_WINDOW_BYTES`` a
    thread).  numba's: the module docstring's terms.  ``out`` is C-contiguous
    (:func:`convtranspose._execute.transposed.transposed_convolution`), so it is written in place.
    """
    groups, ci, co = weights_shape[:3]
    taps = math.prod(weights_shape[3:])
    data = batch * groups * ci * math.prod(a.input_size for a in axes) * itemsize
    weights = groups * ci * co * taps * itemsize
    threads = _threads(batch, weights_shape, axes, threads)
    co_rows = rows_co_block(co)
    # bfloat16 pairs: the bits widened to uint32 and their halves combined, then the
    # padded, blocked and merged layouts; for other types the last three.
    rows_weights = 4 * groups * (ci + 1) * -(-co // co_rows) * co_rows * taps * max(itemsize, 4)
    plane_weights = weights + _plane_weights_bytes(weights_shape, itemsize)
    numpy = (weights // itemsize + max(rows_weights, plane_weights)
             + threads * ROWS_WINDOW_BYTES)
    if len(axes) > 3:
        return numpy + data  # direct-numpy runs instead
    axes3 = three_axes(axes)
    if len(axes) == 1 and line_segmented(axes[0], ci):
        # each segment copies its own part of the data
        compiled = _segment_bytes(axes[0], batch, groups, ci, co, itemsize, threads)
    else:
        compiled = data + _plane_call_bytes(axes3, batch * groups, ci, co, itemsize, threads)
    return numpy + compiled + _position_call_bytes(axes3, threads)


def direct_blocked_bytes(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
                         itemsize: int, threads: int) -> int:
    """An upper estimate of ``direct-blocked``'s working memory beyond its result, in bytes
    of sums of ``itemsize``, on ``threads`` threads.

    NumPy's (``_numba/blocked.py``): the filter as ``(G, K..., Ci, width)`` and a copy of
    the caller's where its view cannot be reshaped; the data copied channels last (or
    contiguous, in the sums' type).  numba's: :func:`_blocked_call_bytes`.  ``out`` is
    written in place, as in :func:`direct_bytes`.
    """
    groups, ci, co = weights_shape[:3]
    taps = math.prod(weights_shape[3:])
    data = batch * groups * ci * math.prod(a.input_size for a in axes) * itemsize
    if len(axes) > 3:
        return data + groups * ci * co * taps * itemsize  # phase runs instead
    axes3 = three_axes(axes)
    threads = _threads(batch, weights_shape, axes, threads)
    # Either the groups one by one or, blocks across groups
    # (``blocked_groups.blocked_group_span``), side by side as one group of G * Co channels,
    # from the filter reordered so (one more copy of it).
    each = []
    for parts, channels in ((groups, co), (1, groups * co)):
        width = _blocked_width(channels, axes3[2], itemsize)
        each.append(parts * ci * taps * width * itemsize
                    + _blocked_call_bytes(batch, axes3, parts, channels, itemsize, threads))
    side_by_side = groups * ci * co * taps * itemsize if groups > 1 else 0
    return data + groups * ci * co * taps * itemsize + side_by_side + max(each)


def stream_bytes(threads: int) -> int:
    """``stream``'s product kernel (``templates/stream.py``): a one-entry ``reads`` and
    ``taps`` list (int64) a call, a call per thread at a time (its NumPy buffers are
    :mod:`.scratch`'s)."""
    return threads * 2 * 8
