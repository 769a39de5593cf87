"""The pure plan of ``disjoint`` (:mod:`.disjoint`): which layers it takes, where each
output reads, the kernel's tables and weight vectors, its scratch.  Integer rules and
NumPy only: the estimates and the scratch rules read them without numba."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._plan.geometry import axis_taps, disjoint_taps, three_axes
from .._plan.rules import AxisPlan
from .._runtime.machine import l2_cache_bytes

__all__ = ["CHANNEL_BLOCK", "DisjointPlan", "axis_sources", "block_entries", "disjoint_bytes",
           "disjoint_plan", "packed_weights", "takes_layer"]


def takes_layer(axes: Sequence[AxisPlan]) -> bool:
    """Whether every tap of the layer reaches outputs of its own (at most three axes):
    no dilated kernel longer than its stride (:func:`~.._plan.geometry.disjoint_taps`)."""
    return len(axes) <= 3 and disjoint_taps(axes)


def axis_sources(axis: AxisPlan) -> tuple[np.ndarray, np.ndarray]:
    """Per output of a disjoint ``axis`` (:func:`takes_layer`), the input it reads and
    the tap it reads it with (int64; both -1 where no tap reaches it): each tap's
    inputs ``x`` in ``[low, high)`` reach outputs ``x * s + shift``
    (:func:`~.._plan.geometry.axis_taps`), and no two taps the same output."""
    sources = np.full(axis.output_size, -1, np.int64)
    taps = np.full(axis.output_size, -1, np.int64)
    for tap, shift, low, high in axis_taps(axis):
        inputs = np.arange(low, high, dtype=np.int64)
        sources[inputs * axis.stride + shift] = inputs
        taps[inputs * axis.stride + shift] = tap
    return sources, taps


#: Items (samples x groups x bands of rows x chunks of output channels) per thread at
#: least, where the layer has them: each item copies its input lines once, so fewer,
#: larger items copy less, but the last items of a share wait for the slowest thread.
ITEMS_PER_THREAD = 4
#: The kernel sums this many output channels at a time (one input load serves them).
CHANNEL_BLOCK = 4


def block_entries(lanes: int, itemsize: int) -> int:
    """Line vectors per block of the kernel: 4 with 32 vector registers (AVX-512: 16
    accumulators, 4 weight vectors and an input), 2 with 16 (AVX2: 8, 4 and 1), so
    that LLVM keeps them all in registers."""
    return 4 if lanes * itemsize >= 64 else 2


class DisjointPlan(NamedTuple):
    """What the kernel (``templates/disjoint.py``) takes for one layer.

    ``sizes``: Ci, Co, G, X0..X2, Y0..Y2, K0, the line (Y2 in whole vectors), the chunks
    of output channels and their size, the weight vectors per input channel and tap of
    the first axis (K1 times the lane patterns), the bands of rows of the first axis and
    the most input rows one reads. ``rows0``/``taps0``: :func:`axis_sources` of the
    first axis; ``reads2``: per place of the line, the input it reads (-1: none, past Y2
    too). Band ``b`` holds output rows ``[band_first[b], band_first[b + 1])`` of the
    first axis, which read input rows ``band_rows[b]`` from ``band_x0[b]``. The line
    vectors of the rows of the second axis that some tap reaches come in groups that
    share their weight vectors: group ``k`` holds entries ``[group_first[k],
    group_first[k + 1])`` and reads weight vectors ``group_weights[k]`` (a tap of the
    second axis times the patterns plus a pattern); entry ``e`` reads the copied input
    lines at ``entry_reads[e]`` and stores ``entry_columns[e]`` outputs at
    ``entry_places[e]`` of a plane's row. ``patterns``: the lanes' taps of the last axis
    (-1: none), one row per pattern. ``items``: samples x groups x bands x chunks;
    ``scratch``: elements per thread (the input lines of a band, repeated along the
    output line; a tile of one output row of four channels; a vector's alignment)."""

    sizes: np.ndarray
    rows0: np.ndarray
    taps0: np.ndarray
    reads2: np.ndarray
    band_first: np.ndarray
    band_x0: np.ndarray
    band_rows: np.ndarray
    group_first: np.ndarray
    group_weights: np.ndarray
    entry_reads: np.ndarray
    entry_places: np.ndarray
    entry_columns: np.ndarray
    patterns: np.ndarray
    items: int
    scratch: int

    def tables(self) -> tuple[np.ndarray, ...]:
        """The kernel's tables after the weight vectors, in its order."""
        return (self.sizes, self.rows0, self.taps0, self.reads2, self.band_first,
                self.band_x0, self.band_rows, self.group_first, self.group_weights,
                self.entry_reads, self.entry_places, self.entry_columns)


def disjoint_plan(batch: int, weights_shape: Sequence[int], axes: Sequence[AxisPlan],
                  lanes: int, threads: int, itemsize: int, cache_bytes: int) -> DisjointPlan:
    """The kernel's plan for a disjoint layer (:func:`takes_layer`) of ``batch`` samples
    with vectors of ``lanes`` elements of ``itemsize`` bytes, its items shared out on
    ``threads`` threads, each item's input copies within half of ``cache_bytes`` (the
    L2 cache) where one output row allows."""
    groups, ci, co = weights_shape[:3]
    axes3 = three_axes(axes)
    (rows0, taps0), (rows1, taps1), (reads, taps2) = (axis_sources(a) for a in axes3)
    y1, y2 = axes3[1].output_size, axes3[2].output_size
    line = -(-y2 // lanes) * lanes
    reads2 = np.full(line, -1, np.int64)
    reads2[:y2] = reads
    lane_taps = np.full(line, -1, np.int64)
    lane_taps[:y2] = taps2
    patterns, pattern_of = np.unique(lane_taps.reshape(-1, lanes), axis=0, return_inverse=True)
    pattern_of = pattern_of.reshape(-1)
    # Every vector of every reached row, grouped by the weight vectors it reads.
    reached = np.flatnonzero(rows1 >= 0)
    vector = np.arange(line // lanes, dtype=np.int64)
    weights_of = (taps1[reached, None] * len(patterns) + pattern_of[None, :]).reshape(-1)
    order = np.argsort(weights_of, kind="stable")
    group_weights, counts = np.unique(weights_of[order], return_counts=True)
    entry_reads = (rows1[reached, None] * line + vector * lanes).reshape(-1)[order]
    entry_places = (reached[:, None] * y2 + vector * lanes).reshape(-1)[order]
    entry_columns = np.broadcast_to(np.minimum(lanes, y2 - vector * lanes),
                                    (len(reached), len(vector))).reshape(-1)[order]
    e_row = axes3[1].input_size * line
    band_first, band_x0, band_rows = _bands(rows0, max(1, cache_bytes // 2 // max(
        1, ci * e_row * itemsize)))
    images, bands = batch * groups, len(band_x0)
    blocks = -(-co // CHANNEL_BLOCK)
    chunks = max(1, min(blocks, -(-ITEMS_PER_THREAD * threads // max(1, images * bands))))
    chunk = -(-blocks // chunks) * CHANNEL_BLOCK
    chunks = -(-co // chunk) if co else 1
    sizes = np.array([ci, co, groups, *(a.input_size for a in axes3),
                      *(a.output_size for a in axes3), axes3[0].kernel_size, line, chunks,
                      chunk, axes3[1].kernel_size * len(patterns), bands,
                      int(band_rows.max(initial=0))], np.int64)
    group_first = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    tile = CHANNEL_BLOCK * -(-y1 * y2 // lanes) * lanes
    return DisjointPlan(
        sizes, rows0, taps0, reads2, band_first, band_x0, band_rows, group_first,
        group_weights.astype(np.int64), entry_reads.astype(np.int64),
        entry_places.astype(np.int64), entry_columns.astype(np.int64),
        patterns.astype(np.int64), images * bands * chunks,
        ci * int(sizes[15]) * e_row + tile + lanes)


def _bands(rows0: np.ndarray, most_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Consecutive rows ``y0`` in bands that read at most ``most_rows`` input rows each
    (at least one output row a band): the first row of each band and one past the
    last, and each band's first input row and count of them (int64)."""
    first, x0s, counts = [0], [], []
    low = high = -1
    for y0, x0 in enumerate(rows0.tolist()):
        if x0 >= 0 and low >= 0 and max(high, x0) - min(low, x0) >= most_rows:
            first.append(y0)
            x0s.append(low)
            counts.append(high - low + 1)
            low = high = -1
        if x0 >= 0:
            low, high = (x0, x0) if low < 0 else (min(low, x0), max(high, x0))
    if len(rows0):
        first.append(len(rows0))
        x0s.append(max(low, 0))
        counts.append(high - low + 1 if low >= 0 else 0)
    else:
        first = [0]
    return (np.array(first, np.int64), np.array(x0s, np.int64), np.array(counts, np.int64))


def packed_weights(weights: np.ndarray, axes: Sequence[AxisPlan], plan: DisjointPlan,
                   dtype) -> np.ndarray:
    """The filter ``(G, Ci, Co, K...)`` as the kernel's weight vectors, flat and
    read-only: ``(G, Co, K0, K1, patterns, Ci, lanes)``, lane ``l`` of pattern ``p``
    holding tap ``patterns[p, l]`` of the last axis (zero for -1)."""
    groups, ci, co = weights.shape[:3]
    kernel3 = tuple(a.kernel_size for a in three_axes(axes))
    padded = np.zeros((groups, ci, co, kernel3[0], kernel3[1], kernel3[2] + 1), dtype)
    padded[..., :-1] = np.asarray(weights, dtype).reshape(groups, ci, co, *kernel3)
    taken = np.take(padded, plan.patterns, axis=5)  # tap -1: the zero
    packed = np.ascontiguousarray(taken.transpose(0, 2, 3, 4, 5, 1, 6)).reshape(-1)
    packed.flags.writeable = False
    return packed


def disjoint_bytes(batch, axes, weights_shape, itemsize, threads) -> int:
    """The scratch of ``disjoint`` (:data:`.scratch.SCRATCH_RULES`): each thread's input
    lines of a band (:func:`_bands`' bound, for this machine's L2 cache) and tile, the
    weight vectors, a channels-first copy of data and result, and the plan's tables."""
    groups, ci, co = weights_shape[:3]
    axes3 = three_axes(axes)
    lanes = max(1, 64 // itemsize)  # the widest vectors: the most lanes past the line
    line = -(-axes3[2].output_size // lanes) * lanes
    patterns = min(line // lanes, axes3[2].stride + 4)
    data = batch * groups * ci * math.prod(a.input_size for a in axes) * itemsize
    result = batch * groups * co * math.prod(a.output_size for a in axes) * itemsize
    vectors = groups * ci * co * axes3[0].kernel_size * axes3[1].kernel_size * patterns * lanes
    row_copies = ci * axes3[1].input_size * line  # of one input row
    rows = min(axes3[0].input_size,
               max(1, l2_cache_bytes() // 2 // max(1, row_copies * itemsize)))
    tile = CHANNEL_BLOCK * (axes3[1].output_size * line + lanes)
    per_thread = (rows * row_copies + tile + lanes) * itemsize
    tables = 8 * (4 * axes3[0].output_size + 3 * axes3[1].output_size * line // lanes + line)
    return threads * per_thread + vectors * itemsize + data + result + tables
