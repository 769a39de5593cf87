"""``col2im``'s stores in one compiled pass.

For a few output channels, the scatter-add, where NumPy's strided adds restart their
loop every few elements (:func:`scatter_call`).  Where the columns and the output are
both channels first, by output rows instead, where a strided copy or add per tap would
pass over each row once per tap of the last axis: rows of taps that reach disjoint
outputs written whole (:func:`disjoint_rows_call`), other taps' products added into each
row in the per-tap adds' order (:func:`added_rows_call`); both as a :class:`RowsStore`,
which a caller may also launch beside the product that makes the columns.
``pointwise``'s strided channels-first layers likewise write each output plane once:
zeros, then the products at their places (:func:`spread_planes_call`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..._plan.geometry import axis_taps, three_axes
from ..._runtime.caches import kept
from ..common import element_offset, flat_span
from ..schedules import DIRECT_PARALLEL_MACS, frozen_all
from .kernel_cache import cached_njit
from .launch import parallel_kernel
from .planes import BAND_ELEMENTS


@cached_njit(nogil=True)
def _tap_inputs(size, tap, stride, dilation, offset, out_low, out_high):  # pragma: no cover
    """The inputs ``x`` one tap sends to outputs in ``[out_low, out_high)``, and its shift.

    Output ``y = x * stride + shift`` with ``shift = tap * dilation - offset``.
    """
    shift = tap * dilation - offset
    low = max(0, -((shift - out_low) // stride))  # ceil((out_low - shift) / stride)
    high = min(size, (out_high - 1 - shift) // stride + 1)
    return low, max(low, high), shift


@cached_njit(nogil=True)
def scatter_kernel(columns, col_steps, target, out_steps, geometry, co, n, rows_per_item,
                    start, stop):  # pragma: no cover - compiled
    # columns (G, n, X1, X2, X3, K1, K2, K3, Co) and the output (G, n, Y1, Y2, Y3, Co)
    # as flat buffers with element steps (col_steps[8] and out_steps[5] the channels');
    # geometry[a] = (X, K, stride, dilation,
    # offset, Y).  Item (g, sample, block of rows_per_item output rows of axis 1):
    # items own disjoint outputs, and each adds its taps in tap order.
    s1, s2, s3 = geometry[0, 2], geometry[1, 2], geometry[2, 2]
    c2, c3, c4, c5 = col_steps[2], col_steps[3], col_steps[4], col_steps[8]
    o2, o3, o4, o5 = out_steps[2], out_steps[3], out_steps[4], out_steps[5]
    blocks = (geometry[0, 5] + rows_per_item - 1) // rows_per_item
    for item in range(start, stop):
        block = item % blocks
        g, sample = (item // blocks) // n, (item // blocks) % n
        y_low = block * rows_per_item
        y_high = min(geometry[0, 5], y_low + rows_per_item)
        col_base = g * col_steps[0] + sample * col_steps[1]
        out_base = g * out_steps[0] + sample * out_steps[1]
        for k1 in range(geometry[0, 1]):
            lo1, hi1, t1 = _tap_inputs(geometry[0, 0], k1, s1, geometry[0, 3], geometry[0, 4],
                                       y_low, y_high)
            for k2 in range(geometry[1, 1]):
                lo2, hi2, t2 = _tap_inputs(geometry[1, 0], k2, s2, geometry[1, 3],
                                           geometry[1, 4], 0, geometry[1, 5])
                for k3 in range(geometry[2, 1]):
                    lo3, hi3, t3 = _tap_inputs(geometry[2, 0], k3, s3, geometry[2, 3],
                                               geometry[2, 4], 0, geometry[2, 5])
                    tap = col_base + k1 * col_steps[5] + k2 * col_steps[6] + k3 * col_steps[7]
                    for x1 in range(lo1, hi1):
                        for x2 in range(lo2, hi2):
                            src = tap + x1 * c2 + x2 * c3 + lo3 * c4
                            dst = (out_base + (x1 * s1 + t1) * o2 + (x2 * s2 + t2) * o3
                                   + (lo3 * s3 + t3) * o4)
                            # A constant unit channel step lets LLVM vectorise the
                            # channel loop (benchmarks/results/blas-algorithms.json),
                            # with unsigned indices: numba wraps negative signed ones,
                            # a check that keeps the loop scalar.
                            if o5 == 1 and c5 == 1:
                                for _ in range(hi3 - lo3):
                                    at, read = np.uint64(dst), np.uint64(src)
                                    for c in range(np.uint64(co)):
                                        target[at + c] += columns[read + c]
                                    src += c4
                                    dst += s3 * o4
                            else:
                                for _ in range(hi3 - lo3):
                                    for c in range(co):
                                        target[dst + c * o5] += columns[src + c * c5]
                                    src += c4
                                    dst += s3 * o4


def col2im_scatter(columns, out, region, axes, target) -> None:
    """Add col2im's ``columns`` into ``region`` tap by tap, as the NumPy adds do.

    ``columns`` is ``(G, n, X..., K..., Co)`` with non-negative strides (the byte
    products' padded columns are skipped, not copied away; channels a step apart are
    added one by one, contiguous ones in vectors where ``region``'s are too); ``region`` a view
    ``(G, n, Y..., Co)`` of the C-contiguous ``out``; ``axes`` send input ``x`` of tap
    ``k`` to output ``x * stride + k * dilation - offset``.  Every output element gets
    its taps' products in tap order, as from the NumPy loop, so the sums are the same
    bits; but in one compiled pass over blocks of output rows (cache-sized, split
    between threads) instead of a strided NumPy add per tap, whose inner loop restarts
    every ``Co`` elements.  ``target``: the machine.
    """
    scatter_call(columns, out, region, axes, target)(columns, out)


def scatter_call(columns, out, region, axes, target):
    """``run(columns, out, flat=None)``: :func:`col2im_scatter` of these arrays' layout
    with its steps and blocks worked out once, for arrays of the same shapes and strides
    (and ``region`` at the same place in ``out``): a prepared col2im's every call.
    ``flat``: the elements ``columns`` spans, from its first, as one flat array, where
    the caller has it (:func:`~convtranspose._kernels.common.flat_span` finds them otherwise), as for the rows kernels."""
    rank = len(axes)
    axes3 = three_axes(axes)  # the first real axis first: its output rows make the blocks

    itemsize = out.itemsize
    groups, n, co = region.shape[0], region.shape[1], region.shape[-1]
    steps = [s // itemsize for s in columns.strides]
    col_steps = np.array(steps[:2] + _spread(steps[2:2 + rank], rank)
                         + _spread(steps[2 + rank:2 + 2 * rank], rank) + steps[-1:], np.int64)
    steps = [s // itemsize for s in region.strides]
    out_steps = np.array(steps[:2] + _spread(steps[2:2 + rank], rank) + steps[-1:], np.int64)
    start = element_offset(region, out)
    geometry = np.array([(a.input_size, a.kernel_size, a.stride, a.dilation, a.offset,
                          a.output_size) for a in axes3], np.int64)
    row_elements = co * math.prod(a.output_size for a in axes3[1:])
    rows_per_item = max(1, BAND_ELEMENTS // max(1, row_elements))
    items = groups * n * -(-axes3[0].output_size // rows_per_item)
    big = columns.size >= DIRECT_PARALLEL_MACS // 16  # a scalar add: about 16 multiply-adds
    threads = target.threads if big else 1

    def run(columns, out, flat=None):
        flat_out = out.reshape(-1)[start:]
        flat_columns = flat_span(columns) if flat is None else flat
        if threads == 1:
            scatter_kernel(flat_columns, col_steps, flat_out, out_steps, geometry, co, n,
                           rows_per_item, 0, items)
            return
        parallel_kernel(scatter_kernel, (flat_columns, col_steps, flat_out, out_steps,
                                         geometry, co, n, rows_per_item), items, threads)

    return run


@cached_njit(nogil=True)
def disjoint_rows_kernel(columns, col_steps, target, out_steps, first, second, reads, groups,
                         co, start, stop):  # pragma: no cover - compiled
    # columns (n, G, Co, X1, X2, K1, K2) and the output (n, G, Co, Y1, Y2, Y3) as flat
    # buffers with element steps (the output's last one 1); `first` (R, 3): the output
    # rows of axis 1 this call writes, with the input and tap reaching each, (y1, x1,
    # k1), -1 where none does; `second` (Y2, 2): (x2, k2) of every row of axis 2, -1
    # where no tap reaches it; `reads` (Y3,): where the columns hold output y3's product
    # from a row's start (its x3 and k3 steps), -1 where no tap reaches it.  Item (sample, group,
    # channel, row of `first`): every element of its Y2 x Y3 outputs, a tap's product
    # where one reaches it, else zero.  The taps are disjoint (each output has one at
    # most), so these are the bits of a copy per tap.  Each output is read from a
    # table, in unsigned indices: a loop per tap of the last axis runs a few elements
    # (k4 s4: three) for its set-up, and numba wraps negative signed indices, a check
    # per element; together they took 3-6x the time (benchmarks/results/col2im-rows-zen3.json).
    rows = first.shape[0]
    width = np.uint64(reads.shape[0])
    for item in range(start, stop):
        r = item % rows
        rest = item // rows
        c = rest % co
        g = (rest // co) % groups
        sample = rest // co // groups
        unreached = first[r, 1] < 0
        col_base = (sample * col_steps[0] + g * col_steps[1] + c * col_steps[2]
                    + first[r, 1] * col_steps[3] + first[r, 2] * col_steps[5])
        out_base = (sample * out_steps[0] + g * out_steps[1] + c * out_steps[2]
                    + first[r, 0] * out_steps[3])
        for y2 in range(second.shape[0]):
            at = np.uint64(out_base + y2 * out_steps[4])
            x2 = second[y2, 0]
            if x2 < 0 or unreached:
                for y3 in range(width):
                    target[at + y3] = 0
                continue
            source = col_base + x2 * col_steps[4] + second[y2, 1] * col_steps[6]
            for y3 in range(width):
                read = reads[y3]
                if read < 0:
                    target[at + y3] = 0
                else:
                    target[at + y3] = columns[np.uint64(source + read)]


def _axis_sources(axis) -> np.ndarray:
    """``(Y, 2)``: the input and tap reaching each output of ``axis`` (taps that reach
    disjoint outputs), ``-1`` where none does."""
    sources = np.full((axis.output_size, 2), -1, np.int64)
    for k, shift, low, high in axis_taps(axis):
        x = np.arange(low, high)
        sources[x * axis.stride + shift] = np.stack([x, np.full_like(x, k)], axis=1)
    return sources


@kept("kernel schedules", maxsize=256)
def _row_tables(axes3, whole: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`disjoint_rows_kernel`'s ``first`` and ``second`` tables and the sources of
    the last axis (:func:`_axis_sources`) for three axes; shared, read-only."""
    sources = _axis_sources(axes3[0])
    rows = np.arange(len(sources)) if whole else np.flatnonzero(sources[:, 0] >= 0)
    first = np.ascontiguousarray(np.column_stack([rows, sources[rows]]))
    return frozen_all(first, _axis_sources(axes3[1]), _axis_sources(axes3[2]))


def unreached_rows(axes) -> tuple[int, ...]:
    """The outputs of the first axis that no tap reaches (taps that reach disjoint
    outputs), whose planes :func:`disjoint_rows_call`'s calls without ``whole`` leave to
    the caller: none for one spatial axis, whose rows the calls write whole."""
    if len(axes) == 1:
        return ()
    return tuple(int(y) for y in np.flatnonzero(_axis_sources(axes[0])[:, 0] < 0))


def disjoint_rows_call(columns, out, region, axes, target, whole: bool = False):
    """A :class:`RowsStore`, ``run(columns, out, flat=None)``: channels-first col2im's
    stores of taps that reach disjoint outputs, in one compiled pass instead of a
    strided copy per tap (``flat`` as in :func:`scatter_call`).

    ``columns`` is ``(n, G, Co, X..., K...)`` (any non-negative strides), ``region`` a
    view ``(n, G, Co, Y...)`` of the C-contiguous ``out``, ``axes`` the chunk's (input
    ``x`` of tap ``k`` reaches output ``x * stride + k * dilation - offset``, each
    output from one tap at most).  Every output row of the first axis that some input
    of the chunk reaches is written whole: its tap's product or zero (a copy per tap
    sends each output line through the cache once per tap of the last axis; U-Net's k2
    s2 twice, a k4 s4 3-D layer 64 times).  With one spatial axis, the chunk must hold
    whole samples; rows no input reaches (:func:`unreached_rows`) are zeroed with
    ``whole`` (the chunk holds whole samples), else not written.  Arrays of the same
    shapes and strides take the same ``run``.
    """
    axes3 = three_axes(axes)
    n, groups, co = region.shape[:3]
    lead, x_steps, k_steps, out_steps, start = _rows_layout(columns, out, region, len(axes))
    col_steps = np.array(lead + x_steps[:2] + k_steps[:2], np.int64)
    first, second, last = _row_tables(axes3, whole)
    reads = np.where(last[:, 0] < 0, -1, last[:, 0] * x_steps[2] + last[:, 1] * k_steps[2])
    return RowsStore(disjoint_rows_kernel, col_steps, out_steps, start,
                     (first, second, reads, groups, co), n * groups * co * len(first),
                     _store_threads(columns, target))


@cached_njit(nogil=True)
def added_rows_kernel(columns, col_steps, target, out_steps, rows1, at1, sources1, at2,
                      sources2, taps3, sizes, start, stop):  # pragma: no cover - compiled
    # columns (n, G, Co, X1, X2, K1, K2, K3) and the output (n, G, Co, Y1, Y2, Y3) as
    # flat buffers with element steps (the columns' x3 step and the output's last one
    # are 1); `rows1` (R,): the output rows of axis 1 this call adds to; `at1` (Y1 + 1,)
    # and `sources1` (E, 2): the (x1, k1) reaching output y1 are sources1[at1[y1]:
    # at1[y1 + 1]], by tap; `at2`, `sources2` the same for axis 2; `taps3` (T, 4): axis
    # 3's (k, shift, low, high) (:func:`axis_taps`); sizes = (G, Co, stride 3).  Item
    # (sample, group, channel, row of `rows1`): adds every tap's products into its Y2 x
    # Y3 outputs, each output's in tap order (k1, then k2, then k3), as the NumPy add
    # per tap does within a chunk: the same bits.  Unsigned indices: numba wraps
    # negative signed ones, a check per element.
    groups, co, step = sizes[0], sizes[1], np.uint64(sizes[2])
    rows = rows1.shape[0]
    for item in range(start, stop):
        r = item % rows
        rest = item // rows
        c = rest % co
        g = (rest // co) % groups
        sample = rest // co // groups
        y1 = rows1[r]
        col_base = sample * col_steps[0] + g * col_steps[1] + c * col_steps[2]
        out_base = (sample * out_steps[0] + g * out_steps[1] + c * out_steps[2]
                    + y1 * out_steps[3])
        for e1 in range(at1[y1], at1[y1 + 1]):
            base1 = col_base + sources1[e1, 0] * col_steps[3] + sources1[e1, 1] * col_steps[5]
            for y2 in range(at2.shape[0] - 1):
                row = np.uint64(out_base + y2 * out_steps[4])
                for e2 in range(at2[y2], at2[y2 + 1]):
                    base2 = (base1 + sources2[e2, 0] * col_steps[4]
                             + sources2[e2, 1] * col_steps[6])
                    for t in range(taps3.shape[0]):
                        low = taps3[t, 2]
                        src = np.uint64(base2 + taps3[t, 0] * col_steps[7] + low)
                        dst = row + np.uint64(low * sizes[2] + taps3[t, 1])
                        for j in range(np.uint64(taps3[t, 3] - low)):
                            target[dst + j * step] += columns[src + j]


def _axis_lists(axis) -> tuple[np.ndarray, np.ndarray]:
    """``(at, sources)``: the inputs and taps reaching output ``y`` of ``axis`` are
    ``sources[at[y]:at[y + 1]]``, ``(x, k)`` pairs by tap."""
    pairs = sorted((x * axis.stride + shift, k, x) for k, shift, low, high in axis_taps(axis)
                   for x in range(low, high))
    counts = np.bincount([y for y, _, _ in pairs], minlength=axis.output_size)
    at = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    sources = np.array([(x, k) for _, k, x in pairs], np.int64).reshape(-1, 2)
    return at, sources


@kept("kernel schedules", maxsize=256)
def _added_tables(axes3) -> tuple[np.ndarray, ...]:
    """:func:`added_rows_kernel`'s ``rows1``, ``at1``, ``sources1``, ``at2``,
    ``sources2`` and ``taps3`` for three axes; shared, read-only."""
    at1, sources1 = _axis_lists(axes3[0])
    rows1 = np.flatnonzero(np.diff(at1)).astype(np.int64)
    at2, sources2 = _axis_lists(axes3[1])
    taps3 = np.array(axis_taps(axes3[2]), np.int64).reshape(-1, 4)
    return frozen_all(rows1, at1, sources1, at2, sources2, taps3)


def added_rows_call(columns, out, region, axes, target):
    """A :class:`RowsStore`, ``run(columns, out, flat=None)``: channels-first col2im's
    adds of every tap's columns into the (zeroed) output, in one compiled pass over the
    output rows that the chunk's inputs reach, each row's taps added while it is in
    cache, in the NumPy adds' order (``flat`` as in :func:`scatter_call`).

    ``columns`` is ``(n, G, Co, X..., K...)`` with the last input axis contiguous,
    ``region`` a view ``(n, G, Co, Y...)`` of the C-contiguous ``out`` (the last axis
    contiguous), ``axes`` the chunk's.  Arrays of the same shapes and strides take the
    same ``run``.
    """
    axes3 = three_axes(axes)
    n, groups, co = region.shape[:3]
    lead, x_steps, k_steps, out_steps, start = _rows_layout(columns, out, region, len(axes))
    # A last input axis of one position is never stepped along, whatever its stride
    # (NumPy gives a unit axis any stride, as a transposed product's columns have).
    if x_steps[2] != 1 and columns.shape[2 + len(axes)] > 1:
        raise ValueError("the added rows kernel needs the columns' last input axis contiguous")
    col_steps = np.array(lead + x_steps[:2] + k_steps, np.int64)
    tables = _added_tables(axes3)
    sizes = np.array([groups, co, axes3[2].stride], np.int64)
    return RowsStore(added_rows_kernel, col_steps, out_steps, start, (*tables, sizes),
                     n * groups * co * len(tables[0]), _store_threads(columns, target))


class RowsStore(NamedTuple):
    """A rows kernel's stores (:func:`disjoint_rows_call`, :func:`added_rows_call`) for
    columns and an output of given shapes and strides: ``store(columns, out,
    flat=None)`` runs them; ``kernel`` over ``range(items)`` (sample-major) with
    :meth:`arguments` is the same run, for a caller that launches it with another
    kernel (:func:`.launch.parallel_pair`)."""

    kernel: object
    col_steps: np.ndarray
    out_steps: np.ndarray
    start: int
    tables: tuple
    items: int
    threads: int

    def arguments(self, flat: np.ndarray, out: np.ndarray) -> tuple:
        """The kernel's arguments but the items' bounds, for the columns' flat buffer
        (:func:`_flat`) and ``out``."""
        return (flat, self.col_steps, out.reshape(-1)[self.start:], self.out_steps
                ) + self.tables

    def __call__(self, columns, out, flat=None) -> None:
        if self.items:
            parallel_kernel(self.kernel, self.arguments(
                flat_span(columns) if flat is None else flat, out), self.items, self.threads)


def _store_threads(columns: np.ndarray, target) -> int:
    """The rows kernels' threads on their own: one for columns too few to be worth a
    fork-join."""
    return target.threads if columns.size >= DIRECT_PARALLEL_MACS // 16 else 1


def _rows_layout(columns, out, region, rank: int) -> tuple[list, list, list, np.ndarray, int]:
    """The element steps the rows kernels index by: the columns' ``(n, G, Co)`` steps and
    their input and tap steps among three axes (:func:`_spread`), the output's ``(n, G,
    Co, Y1, Y2)`` steps (its last axis contiguous), and where ``region`` starts in
    ``out``."""
    itemsize = out.itemsize
    steps = [s // itemsize for s in columns.strides]
    out_spatial = _spread([s // itemsize for s in region.strides[3:]], rank)
    if out_spatial[2] != 1:
        raise ValueError("the rows kernels need the output's last axis contiguous")
    out_steps = np.array([s // itemsize for s in region.strides[:3]] + out_spatial[:2],
                         np.int64)
    start = element_offset(region, out)
    return (steps[:3], _spread(steps[3:3 + rank], rank), _spread(steps[3 + rank:], rank),
            out_steps, start)


def _spread(steps, rank: int) -> list:
    """The real axes' steps at their places among three (:func:`three_axes`), 0 for the
    unit axes."""
    padded = [0, 0, 0]
    for slot, step in zip({1: (2,), 2: (0, 2), 3: (0, 1, 2)}[rank], steps):
        padded[slot] = step
    return padded


@cached_njit(nogil=True)
def spread_planes_kernel(product, out, places, plane_size, start,
                         stop):  # pragma: no cover - compiled
    # product (P, X...) of the inputs that land inside the output and out (P, Y...) as
    # flat C-contiguous buffers; `places`: where each input of a plane lands, as an
    # offset within its plane; `plane_size`: Y elements.  Item: plane, set to zero
    # whole (one loop LLVM vectorizes), then its inputs' products stored at their
    # places in one loop over the table: nested strided loops of a few elements per
    # line took 1.5x its time.  Elements are indexed unsigned: numba checks each signed
    # index for wrapping, which keeps LLVM from vectorizing the zeros.
    size = np.uint64(plane_size)
    count = np.uint64(places.shape[0])
    for plane in range(start, stop):
        at = np.uint64(plane) * size
        for y in range(size):
            out[at + y] = 0
        source = np.uint64(plane) * count
        for k in range(count):
            out[at + np.uint64(places[k])] = product[source + k]


@kept("kernel schedules", maxsize=64)
def _spread_places(axes) -> np.ndarray:
    """:func:`spread_planes_kernel`'s table for axes of one tap each (read-only): where
    each input of a plane that lands inside the output lands, in C order, as an offset
    within its plane (8 bytes per output position at most)."""
    outputs = []
    for axis in axes:
        y = np.arange(axis.input_size, dtype=np.int64) * axis.stride - axis.offset
        outputs.append(y[(y >= 0) & (y < axis.output_size)])
    places = np.meshgrid(*outputs, indexing="ij")
    shape = tuple(axis.output_size for axis in axes)
    return frozen_all(np.ravel_multi_index(tuple(places), shape).reshape(-1).astype(np.int64))[0]


class PlanesStore(NamedTuple):
    """:func:`spread_planes_kernel`'s stores for outputs of one shape
    (:func:`spread_planes_call`): ``store(product, out)`` runs them; ``kernel`` over
    ``range(items)`` (one item per plane, sample-major) with :meth:`arguments` is the
    same run, for a caller that launches it with the product that makes ``product``
    (:func:`.launch.parallel_pair`)."""

    places: np.ndarray
    plane_size: int
    items: int
    threads: int
    kernel: object = spread_planes_kernel

    def arguments(self, product: np.ndarray, out: np.ndarray) -> tuple:
        """The kernel's arguments but the items' bounds (C-contiguous arrays)."""
        return (product.reshape(-1), out.reshape(-1), self.places, self.plane_size)

    def __call__(self, product: np.ndarray, out: np.ndarray) -> None:
        if self.items and self.plane_size:
            parallel_kernel(self.kernel, self.arguments(product, out), self.items,
                            self.threads)


def spread_planes_call(shape: tuple, itemsize: int, axes, target) -> PlanesStore:
    """``store(product, out)``: a layer of one tap per axis, channels first, from the
    products ``(N, C, X...)`` (C-contiguous) of the inputs that land inside the output
    into the C-contiguous output ``(N, C, Y...)`` of ``shape``, with elements of
    ``itemsize`` bytes, which it writes whole in one pass:
    each plane zeroed, then its inputs' products stored at their places.  Zeroing the
    output and copying the products into its strided view passes over it twice (NumPy's
    strided copy restarting its loop every few elements).  On its own, the planes are
    split between the threads as the layout copies are
    (:func:`.transpose.copy_threads`).  Outputs of the same shape take the same
    store."""
    from .transpose import copy_threads

    return PlanesStore(_spread_places(tuple(axes)),
                       math.prod(axis.output_size for axis in axes), shape[0] * shape[1],
                       copy_threads(math.prod(shape) * itemsize, target.threads))
