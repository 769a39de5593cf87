"""``col2im-nxc`` and ``col2im-ncx``: one GEMM, then an add per tap.

One GEMM gives every tap's contribution (``taps * Co`` values per input position), then
a strided add per live tap puts them in place (numba's compiled scatter for a few
channels, :mod:`._numba.scatter`).  Cheapest when ``Co * taps`` is small next to
``Ci * taps / stride**D``.  Multiplies only the (input, tap) pairs that exist: exact
with non-finite operands.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._plan.geometry import disjoint_taps, tap_windows
from .._plan.rules import AxisPlan
from .._runtime.caches import kept
from .._runtime.memo import derived_from, frozen
from .._runtime.threads import add, copy, parallel_copy
from . import phase as _phase
from .common import input_glxc, output_glyc, threaded_matmul, zero_output
from .packed import filter_product, packed_filter, packs_product
from .phase import chunks
from .schedules import numba_scatters

#: Whether channels-first col2im stores its columns by output rows in numba's rows
#: kernels (:mod:`._numba.scatter`); False keeps a NumPy copy or add per tap, whose bits
#: the rows kernels reproduce (the tests compare the two).
ROWS_KERNELS = True


def rows_kernels_store(channels_last: bool, rank: int, numba_float: bool) -> bool:
    """Whether ``col2im-ncx`` stores its columns with the rows kernels: channels-first
    data and output (C-contiguous), numba on float32 or float64, at most three spatial
    axes; its call and its cost estimate both ask."""
    return ROWS_KERNELS and numba_float and not channels_last and rank <= 3


def products_in_place(channels_last: bool, axes, numba_float: bool, batch: int,
                      ci: int, internal_last: bool = False) -> bool:
    """Whether ``col2im``'s products store each sum straight into its output place (the
    packed kernels' spread stores, no columns); its call and its cost estimate both ask.
    ``col2im-ncx`` on channels-first data where the rows kernels would store the columns
    (:func:`rows_kernels_store`), or ``col2im-nxc`` (``internal_last``) on channels-last
    data, with numba on float32 or float64 and at most three axes; every output reached
    by one tap at most, every tap reaching every input (no output cropped away: U-Net's
    k2 s2, k4 s4, a 1x1 kernel with a stride), and the filter no larger than the columns
    saved (``Ci <= N * P``): the packed filter is kept with the filter, which the
    weights memo then compares on each call, as the columns are written and read once
    (U-Net-up 1024->512 on 14x28, Ci = 1024 > 392 positions, in place: 1.2x the time,
    ``benchmarks/results/col2im-in-place-xeon.json``, filter_larger_than_columns)."""
    if internal_last != channels_last or not rows_kernels_store(False, len(axes), numba_float):
        return False
    positions = math.prod(axis.input_size for axis in axes)
    return (disjoint_taps(axes) and ci <= batch * positions
            and all(window is not None and window[0].start == 0
                    and window[0].stop == axis.input_size
                    for axis in axes for window in tap_windows(axis)))


def _col2im_matrix(weights, dtype, internal_last: bool) -> tuple[np.ndarray, bool]:
    """The filter as col2im's GEMM operand, and whether its columns are tap-major.

    A C-contiguous filter of the sums' dtype (the ONNX and PyTorch layout) is the
    operand as it is, a view, its columns channel-major: ``(G, Ci, Co*taps)`` when
    ``internal_last`` (columns ``(G, rows, Co, K...)``), else its transpose ``(G,
    Co*taps, Ci)`` (columns ``(n, G, Co, K..., X...)``).  The product then reads the
    filter once, and nothing compares it with a kept copy: for a large filter on few
    inputs that is most of the call (DCGAN 1024->512 on 4x4, a 32 MiB filter: 3.3 ms of
    comparing against 2.2 of product, ``benchmarks/results/col2im-filter-xeon.json``).
    Another filter is reordered tap-major once and kept with it (the weights memo):
    ``(G, Ci, taps*Co)`` (columns ``(G, rows, K..., Co)``), else ``(G, taps*Co, Ci)``
    (columns ``(n, G, K..., Co, X...)``).
    """
    if weights.dtype == dtype and weights.flags.c_contiguous:
        groups, ci = weights.shape[:2]
        matrix = weights.reshape(groups, ci, -1)
        return (matrix if internal_last else matrix.transpose(0, 2, 1)), False
    derived = derived_from(weights, "col2im", dtype, internal_last)
    matrix = derived.get("matrix")
    if matrix is None:
        groups, ci, co = weights.shape[:3]
        rank, taps = weights.ndim - 3, math.prod(weights.shape[3:])
        if internal_last:
            matrix = np.moveaxis(weights, 2, -1).reshape(groups, ci, taps * co)
        else:
            matrix = weights.transpose((0,) + tuple(range(3, 3 + rank)) + (2, 1)).reshape(
                groups, taps * co, ci)
        derived["matrix"] = matrix = frozen(matrix.astype(dtype))
    return matrix, True


class _Chunk(NamedTuple):
    """One chunk of samples ``[n0, n1)`` (and of the first spatial axis, ``[x0, x1)``):
    the shape its columns take, its axes (input positions counted from ``x0``), and per
    live tap the (columns, output) index tuples of its store."""

    n0: int
    n1: int
    x0: int
    x1: int
    columns_shape: tuple[int, ...]
    axes: tuple[AxisPlan, ...]
    stores: tuple[tuple[tuple, tuple], ...]


class _Steps(NamedTuple):
    """What col2im does for one layer shape, worked out once (:func:`_steps`): whether
    it zeroes the output first, whether taps copy (disjoint) or add, whether numba
    scatters the columns, or which rows kernel stores them (``rows``: ``"disjoint"``
    writes disjoint taps' output rows whole, ``"added"`` adds into them; ``""`` none; or
    ``"in place"``: the packed products store every sum in its output place through the
    tables ``spread``, :func:`products_in_place`), the
    order of the columns' axes that either reads them in, the first axis's output rows
    that no tap reaches where ``rows`` zeroes them apart, whether every chunk holds whole
    samples (then ``rows`` zeroes them as it goes), and its chunks."""

    fill: bool
    disjoint: bool
    scatter: bool
    rows: str
    scatter_order: tuple[int, ...]
    zero_rows: tuple[int, ...]
    whole_samples: bool
    chunks: tuple[_Chunk, ...]
    spread: tuple | None = None


@kept("kernel schedules", maxsize=256)
def _steps(batch: int, weights_shape: tuple[int, ...], axes: tuple[AxisPlan, ...],
           itemsize: int, internal_last: bool, tap_major: bool, scatter: bool,
           budget: int, rows_kernel: bool, in_place: bool = False) -> _Steps:
    """col2im's chunks and stores for a layer (``budget``: the columns' scratch bytes;
    ``rows_kernel``: whether numba may store the columns by output rows, channels first);
    shared, read-only."""
    groups, ci, co = weights_shape[:3]
    kernel = tuple(weights_shape[3:])
    if in_place:  # no columns, so no chunks of them
        covered = all(_disjoint_taps_cover(axis) for axis in axes)
        tables = (_spread_rows(batch, groups, co, kernel, axes, tap_major) if internal_last
                  else _spread_tables(co, kernel, axes, tap_major))
        return _Steps(not covered, True, False, "in place", (), (), True, (), tables)
    spatial = tuple(axis.input_size for axis in axes)
    # Taps that span less than a stride (U-Net's k2 s2) reach every output at most
    # once, so their columns are copied, not added to zeros.
    disjoint = not scatter and disjoint_taps(axes)
    fill = not disjoint or not all(_disjoint_taps_cover(axis) for axis in axes)
    row_bytes = groups * math.prod(spatial[1:]) * (math.prod(kernel) * co + ci) * itemsize
    first = axes[0]
    steps = []
    for n0, n1, x0, x1 in chunks(batch, spatial[0], row_bytes, budget):
        sub = (x1 - x0,) + spatial[1:]
        # Tap k sends chunk input x' (= x - x0) to output x'*s + k*d - (offset - x0*s).
        sub_axes = (AxisPlan(x1 - x0, first.kernel_size, first.stride, first.dilation,
                             first.offset - x0 * first.stride, first.output_size),) + axes[1:]
        windows = [tap_windows(axis) for axis in sub_axes]
        live = [(tap, tuple(w[k] for w, k in zip(windows, tap))) for tap in np.ndindex(*kernel)
                if all(w[k] is not None for w, k in zip(windows, tap))]
        if not live:
            continue
        taps_shape = kernel + (co,) if tap_major else (co,) + kernel
        if internal_last:
            shape = (groups, n1 - n0) + sub + taps_shape
            stores = tuple(((slice(None), slice(None)) + tuple(w[0] for w in window)
                            + (tap if tap_major else (slice(None),) + tap),
                            (slice(None), slice(n0, n1)) + tuple(w[1] for w in window))
                           for tap, window in live)
        else:
            shape = (n1 - n0, groups) + taps_shape + sub
            stores = tuple(((slice(None), slice(None))
                            + (tap + (slice(None),) if tap_major else (slice(None),) + tap)
                            + tuple(w[0] for w in window),
                            (slice(n0, n1), slice(None), slice(None))
                            + tuple(w[1] for w in window))
                           for tap, window in live)
        steps.append(_Chunk(n0, n1, x0, x1, shape, sub_axes, stores))
    rank = len(axes)
    # Channels first, a copy or an add per tap sends each output line through the cache
    # once per tap of the last axis; the rows kernels take each line once: taps that
    # reach disjoint outputs write it whole, others add into the zeroed output.
    whole = all(step.x1 - step.x0 == spatial[0] for step in steps)
    if rows_kernel and not internal_last and steps and disjoint_taps(axes) and (
            rank > 1 or whole):
        from ._numba.scatter import unreached_rows

        # Chunks of whole samples zero the rows no tap reaches as they go; chunks of a
        # first axis leave them to one fill (along one spatial axis, the chunks' zeros
        # would overwrite each other's rows).
        return _Steps(False, True, False, "disjoint", _rows_order(rank, tap_major),
                      () if whole else unreached_rows(axes), whole, tuple(steps))
    if rows_kernel and not internal_last:
        return _Steps(True, False, False, "added", _rows_order(rank, tap_major), (), whole,
                      tuple(steps))
    return _Steps(fill, disjoint, scatter, "", _scatter_order(rank, internal_last, tap_major),
                  (), whole, tuple(steps))


def _tap_and_input_places(axes, kernel: tuple[int, ...], unit: int):
    """Per tap and per input position (each flat, C order), its part of an output
    element's index, for an output whose spatial axes are C-ordered in steps of ``unit``
    elements: tap ``k`` sends input ``x`` to output ``x*s + k*d - offset`` along each axis,
    so the index is the tap's part plus the input's."""
    outputs = tuple(axis.output_size for axis in axes)
    taps = np.zeros(kernel, np.int64)
    places = np.zeros(tuple(axis.input_size for axis in axes), np.int64)
    for a, axis in enumerate(axes):
        stride = math.prod(outputs[a + 1:]) * unit
        shape = [1] * len(axes)
        shape[a] = -1
        taps = taps + ((np.arange(axis.kernel_size) * axis.dilation - axis.offset)
                       * stride).reshape(shape)
        places = places + (np.arange(axis.input_size) * axis.stride * stride).reshape(shape)
    return taps.reshape(-1), places.reshape(-1)


def _filter_columns(taps: np.ndarray, co: int, channel_step: int, tap_major: bool):
    """Per filter row or column, ``(Co, K...)`` (or ``(K..., Co)`` ``tap_major``), its
    part of an output element's index: its tap's and its channel's (``channel_step``
    elements apart)."""
    channels = np.arange(co, dtype=np.int64) * channel_step
    return (np.add.outer(taps, channels) if tap_major
            else np.add.outer(channels, taps)).reshape(-1)


def _spread_tables(co: int, kernel: tuple[int, ...], axes, tap_major: bool):
    """The packed product's :class:`~._numba.packed.Spread` for a channels-first layer
    whose products go in place: filter row ``m`` and input position ``p`` go to output
    element ``row_base[m] + pos_map[p]`` of their sample and group."""
    from ._numba.packed import Spread, paired_runs

    plane = math.prod(axis.output_size for axis in axes)
    taps, places = _tap_and_input_places(axes, kernel, 1)
    return Spread(frozen(_filter_columns(taps, co, plane, tap_major)), frozen(places),
                  co * plane, frozen(paired_runs(places)))


def _spread_rows(batch: int, groups: int, co: int, kernel: tuple[int, ...], axes,
                 tap_major: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """The packed rows product's ``(c_rows, columns_at, run)`` for a channels-last layer
    whose products go in place: data row ``(n, x...)`` and column ``(g, Co, K...)`` (or
    ``(g, K..., Co)`` ``tap_major``) go to output element ``c_rows[row] +
    columns_at[column]`` of ``(N, Y..., G*Co)``; aligned runs of ``run`` columns (a tap's
    channels, tap-major) lie side by side there."""
    position = groups * co
    taps, places = _tap_and_input_places(axes, kernel, position)
    samples = np.arange(batch, dtype=np.int64) * math.prod(
        axis.output_size for axis in axes) * position
    columns = np.add.outer(np.arange(groups, dtype=np.int64) * co,
                           _filter_columns(taps, co, 1, tap_major))
    return (frozen(np.add.outer(samples, places).reshape(-1)), frozen(columns.reshape(-1)),
            co if tap_major else 1)


def _rows_order(rank: int, tap_major: bool) -> tuple[int, ...]:
    """The transpose that turns a channels-first chunk's columns, ``(n, G, K..., Co,
    X...)`` or ``(n, G, Co, K..., X...)``, into the rows kernel's ``(n, G, Co, X...,
    K...)``."""
    taps, channel = (2, 2 + rank) if tap_major else (3, 2)
    return (0, 1, channel) + tuple(3 + rank + a for a in range(rank)) + tuple(
        taps + a for a in range(rank))


def _scatter_order(rank: int, internal_last: bool, tap_major: bool) -> tuple[int, ...]:
    """The transpose that turns a chunk's columns into the scatter's ``(G, n, X..., K...,
    Co)``: they are ``(G, n, X..., K..., Co)`` or ``(G, n, X..., Co, K...)``
    (``internal_last``, tap-major or not), else ``(n, G, K..., Co, X...)`` or ``(n, G,
    Co, K..., X...)``."""
    span = range(rank)
    if internal_last:
        taps = 2 + rank + (0 if tap_major else 1)
        channel = 2 + 2 * rank if tap_major else 2 + rank
        return (0, 1) + tuple(2 + a for a in span) + tuple(taps + a for a in span) + (channel,)
    taps = 2 if tap_major else 3
    channel = 2 + rank if tap_major else 2
    return (1, 0) + tuple(3 + rank + a for a in span) + tuple(taps + a for a in span) + (
        channel,)


def _packed_matrix(weights, matrix, tap_major: bool, axes, internal_last: bool, target,
                   batch: int, kept: bool = True, in_place: bool = False):
    """The channels-first GEMM operand packed where its products run through the packed
    kernel (:func:`~.packed.packs_product`: one sample's positions per product, and
    past ``SERIAL_GEMM_FLOPS`` all ``batch`` samples' positions in one chunk; always
    ``in_place``, then kept with the filter); else None.  Of 16 samples, layers whose
    products alone ran faster packed (0.86x OpenBLAS's time) ran 1.07x and 1.23x as
    long (DCGAN N16 512->256 8x8, DCGAN-up N16 128->64 16x16;
    ``benchmarks/results/packed-products-zen3.json``, ``few_positions``).  ``kept``: kept
    with the filter, for prepared calls; else packed anew, for a call of the general
    path, which would otherwise compare the filter with the kept copy each time, as a
    contiguous filter never pays (:func:`_col2im_matrix`).  Both paths take the same
    products, so a layer's first call and its repeated, prepared ones give the same
    bits."""
    positions = math.prod(a.input_size for a in axes)
    if in_place:
        kept = True  # packing a large filter costs more than comparing it
    elif internal_last or not packs_product(
            2.0 * matrix.shape[1] * matrix.shape[2] * positions, target.threads,
            matrix.dtype, (matrix.shape[2], batch * positions)):
        return None
    derived = (derived_from(weights, "col2im-packed", matrix.dtype.str, tap_major,
                            internal_last) if kept else {})
    return packed_filter(derived, matrix, internal_last)


def _col2im(data, weights, axes, dtype, channels_last, out, internal_last, *, target):
    """One GEMM for every tap's contribution, then one strided add per live tap.

    The columns buffer (``taps * Co`` values per input position) is built for a chunk
    of samples, or of one sample's first spatial axis, at a time.
    """
    matrix, tap_major = _col2im_matrix(weights, dtype, internal_last)
    steps = _layer_steps(data.shape[0], weights.shape, axes, dtype, out.flags.c_contiguous,
                         channels_last, internal_last, tap_major, target)
    packed = _packed_matrix(weights, matrix, tap_major, axes, internal_last, target,
                            data.shape[0], kept=False, in_place=steps.rows == "in place")
    products = (_prepared_products(steps, data.shape[0], axes, packed, target)
                if packed is not None and not internal_last else None)
    if products is None or not products(data, out, {}):
        _run_steps(steps, data, matrix, out, channels_last, internal_last, target,
                   packed=packed)


def prepare_col2im(batch, weights, axes, dtype, channels_last, target, internal_last):
    """``compute(data, out)``: col2im for this layer with its GEMM operand and its steps
    worked out once, for :class:`convtranspose._kernels.direct.DirectCall` (``out``
    C-contiguous, of ``dtype``).  Exact with any operands, as the general path."""
    matrix, tap_major = _col2im_matrix(weights, dtype, internal_last)
    steps = _layer_steps(batch, weights.shape, axes, dtype, True, channels_last, internal_last,
                         tap_major, target)
    packed = _packed_matrix(weights, matrix, tap_major, axes, internal_last, target, batch,
                            in_place=steps.rows == "in place")
    scatters: dict = {}
    products = (_prepared_products(steps, batch, axes, packed, target)
                or _prepared_in_place(steps, batch, axes, packed, target)
                if packed is not None and not internal_last else None)

    def compute(data, out):
        if products is not None and products(data, out, scatters):
            return
        with np.errstate(all="ignore"):  # as the general path: inf - inf adds silently
            _run_steps(steps, data, matrix, out, channels_last, internal_last, target,
                       scatters, packed)

    return compute


def _prepared_products(steps: _Steps, batch: int, axes, packed, target):
    """``run(data, out, scatters)``: :func:`_run_steps` for channels-first col2im whose
    packed product covers the whole batch in one chunk and whose columns a rows kernel
    stores, with the product's set-up made once
    (:func:`._numba.packed.prepare_packed_product`), the store's at the first call
    (``scatters[0]``), and nothing but the two kernels per call: in one parallel loop
    where the threads divide the batch, each thread storing the samples it multiplied
    (:func:`._numba.launch.parallel_pair`), else one after the other.  False (nothing
    done) for data that is not C-contiguous of the packed dtype.  The same products and
    stores as that path: the same bits.  None where the layer is not of that kind."""
    if steps.rows not in ("disjoint", "added") or len(steps.chunks) != 1 or steps.zero_rows:
        return None
    chunk = steps.chunks[0]
    if (chunk.n0, chunk.n1, chunk.x0, chunk.x1) != (0, batch, 0, axes[0].input_size):
        return None
    from ._numba.launch import array_kind, parallel_pair
    from ._numba.packed import prepare_packed_product

    dtype = packed.data.dtype
    positions = math.prod(axis.input_size for axis in axes)
    rows_shape = (batch, packed.groups, packed.depth, positions)
    product = prepare_packed_product(packed, rows_shape, dtype, target.threads)
    sums_shape = (batch, packed.groups, packed.rows, positions)
    addresses: dict = {}  # the loop's code addresses by the data's and output's types

    def run(data, out, scatters) -> bool:
        if data.dtype != dtype or not data.flags.c_contiguous:
            return False
        if steps.fill:
            zero_output(out, target.threads)
        columns = np.empty(sums_shape, dtype)
        store = scatters.get(0)
        if store is None:
            store = scatters[0] = _rows_store(steps, chunk, rows_view(columns), out,
                                              packed.groups, target)
        data, flat = data.reshape(rows_shape), columns.reshape(-1)
        # Only the data and the output vary in type from call to call.
        kinds = (array_kind(data), array_kind(out))
        if not parallel_pair(product.kernel, product.arguments(data, columns), product.units,
                             product.scratch, store.kernel, store.arguments(flat, out),
                             store.items, batch, product.threads, (addresses, kinds)):
            product(data, columns)
            store(rows_view(columns), out, flat)
        return True

    def rows_view(columns):
        # The columns as the rows kernel reads them: a view, made only where a call
        # needs it (the paired loop takes the flat buffer).
        return columns.reshape(chunk.columns_shape).transpose(steps.scatter_order)

    return run


def _prepared_in_place(steps: _Steps, batch: int, axes, packed, target):
    """``run(data, out, scatters)``: :func:`_products_in_place` for channels-first
    col2im whose products go in place, with the product's set-up made once; False
    (nothing done) for data that is not C-contiguous of the packed dtype.  The same
    product: the same bits.  None where the layer is not of that kind or has nothing
    to multiply (the general path zeroes its output)."""
    positions = math.prod(axis.input_size for axis in axes)
    if steps.rows != "in place" or not batch * positions * packed.rows * packed.depth:
        return None
    from ._numba.packed import prepare_packed_product

    dtype = packed.data.dtype
    rows_shape = (batch, packed.groups, packed.depth, positions)
    product = prepare_packed_product(packed, rows_shape, dtype, target.threads, steps.spread)

    def run(data, out, scatters) -> bool:
        if data.dtype != dtype or not data.flags.c_contiguous:
            return False
        if steps.fill:
            zero_output(out, target.threads)
        product(data.reshape(rows_shape), out)
        return True

    return run


def _rows_store(steps: _Steps, chunk: _Chunk, columns, out, groups: int, target):
    """The rows kernel's store of ``columns`` (as the rows kernels read them) of
    ``chunk`` into the channels-first ``out``."""
    from ._numba.scatter import added_rows_call, disjoint_rows_call

    into = _channels_first(out, groups)[chunk.n0:chunk.n1]
    if steps.rows == "disjoint":
        return disjoint_rows_call(columns, out, into, chunk.axes, target, steps.whole_samples)
    return added_rows_call(columns, out, into, chunk.axes, target)


def _channels_first(out, groups: int):
    """A channels-first output ``(N, G*Co, Y...)`` as ``(N, G, Co, Y...)``: a view (an
    axis split in two)."""
    return out.reshape((out.shape[0], groups, -1) + out.shape[2:])


def _layer_steps(batch, weights_shape, axes, dtype, out_contiguous, channels_last,
                 internal_last, tap_major, target) -> _Steps:
    """:func:`_steps` for one call or prepared layer (the scatter's switch and the scratch
    budget as they are now).  The rows kernel takes a C-contiguous channels-first output
    of float32 or float64 and at most three spatial axes."""
    scatter = out_contiguous and numba_scatters(weights_shape[2], len(axes),
                                                dtype.kind == "f" and target.numba)
    numba_float = target.numba and dtype.kind == "f" and dtype.itemsize in (4, 8)
    rows = out_contiguous and rows_kernels_store(channels_last, len(axes), numba_float)
    in_place = out_contiguous and products_in_place(channels_last, axes, numba_float, batch,
                                                    weights_shape[1], internal_last)
    return _steps(batch, tuple(weights_shape), tuple(axes), dtype.itemsize, internal_last,
                  tap_major, scatter, _phase.SCRATCH_BYTES, rows, in_place)


def _run_steps(steps: _Steps, data, matrix, out, channels_last, internal_last, target,
               scatters: dict | None = None, packed=None):
    """col2im's products and stores for one call (:func:`_steps`).  ``scatters``: a
    prepared layer's scatter calls by chunk, made at its first call (its arrays keep
    their shapes and strides from call to call).  ``packed``: ``matrix`` packed
    (:func:`_packed_matrix`), whose kernel then runs the channels-first products."""
    groups, ci = matrix.shape[0], matrix.shape[1 if internal_last else 2]
    dtype = matrix.dtype
    if steps.fill:
        zero_output(out, target.threads)
    if steps.rows == "in place":
        _products_in_place(steps, data, packed, out, groups, ci, dtype, internal_last, target)
        return
    store = copy if steps.disjoint else add
    glyc = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    source = input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if internal_last:
        into = glyc
    else:  # (N, G, Co, Y...) and (N, G, Ci, X...): views, NCX-natural
        last = glyc.ndim - 1
        order = (1, 0, last) + tuple(range(2, last))
        into, source = glyc.transpose(order), source.transpose(order)
    if steps.zero_rows:
        into[:, :, :, list(steps.zero_rows)] = 0
    for index, chunk in enumerate(steps.chunks):
        n0, n1, x0, x1 = chunk.n0, chunk.n1, chunk.x0, chunk.x1
        if internal_last:
            rows = np.ascontiguousarray(source[:, n0:n1, x0:x1], dtype).reshape(groups, -1, ci)
            columns = threaded_matmul(rows, matrix, target.threads).reshape(chunk.columns_shape)
        elif packed is None and n1 - n0 > 1 and steps.rows:
            # One product over the chunk's samples, (Co*K, Ci) @ (Ci, n*P) per group: a
            # product per sample has OpenBLAS pack the filter again for each (DCGAN
            # 512->256 on 8x8, 16 samples: 44 of a 60 ms call in products).  Only where
            # a rows kernel stores the columns, which reads them samples apart as fast;
            # NumPy's adds into channels-last data took 1.17x the time from them
            # (benchmarks/results/col2im-rows-zen3.json, one_product_per_chunk).
            rows = np.ascontiguousarray(source[n0:n1, :, :, x0:x1].transpose(
                (1, 2, 0) + tuple(range(3, source.ndim))), dtype).reshape(groups, ci, -1)
            product = threaded_matmul(matrix, rows, target.threads)
            columns = product.reshape(groups, product.shape[1], n1 - n0, -1).transpose(
                2, 0, 1, 3).reshape(chunk.columns_shape)
        else:
            rows = source[n0:n1, :, :, x0:x1]
            if rows.dtype != dtype or not _blasable_rows(rows):  # (filter_product copies)
                rows = np.ascontiguousarray(rows, dtype)
            rows = rows.reshape((n1 - n0, groups, ci, -1))
            columns = (threaded_matmul(matrix, rows, target.threads) if packed is None
                       else filter_product(packed, rows, target.threads)
                       ).reshape(chunk.columns_shape)
        if steps.scatter or steps.rows:
            # The columns as the scatter reads them, (G, n, X..., K..., Co), or the rows
            # kernel, (n, G, Co, X..., K...): a view.
            columns = columns.transpose(steps.scatter_order)
            scatter = None if scatters is None else scatters.get(index)
            if scatter is None:
                from ._numba.scatter import scatter_call

                scatter = (_rows_store(steps, chunk, columns, out, groups, target) if steps.rows
                           else scatter_call(columns, out, glyc[:, n0:n1], chunk.axes, target))
                if scatters is not None:
                    scatters[index] = scatter
            scatter(columns, out)
            continue
        for src, dst in chunk.stores:
            parallel_copy(store, into[dst], columns[src])


def _products_in_place(steps: _Steps, data, packed, out, groups: int, ci: int, dtype,
                       internal_last: bool, target) -> None:
    """The packed products stored in their output places (``steps.rows`` "in place")."""
    from ._numba.packed import packed_product, packed_rows_product

    if not ci:
        zero_output(out, target.threads)
    elif internal_last:  # channels last: (N, X..., G*Ci) as rows (N*P, G, Ci)
        rows = np.ascontiguousarray(data, dtype).reshape(-1, groups, ci)
        # Aligned runs of a vector's columns side by side in the output (a tap's
        # channels) take one store each, not a scatter.
        c_rows, columns_at, run = steps.spread
        packed_rows_product(packed, rows, out, target.threads, c_rows, None, columns_at,
                            run % packed.lanes == 0)
    else:  # channels first: (N, G*Ci, X...) as (N, G, Ci, P)
        rows = np.ascontiguousarray(data, dtype).reshape(data.shape[0], groups, ci, -1)
        packed_product(packed, rows, out, target.threads, steps.spread)


def _disjoint_taps_cover(axis: AxisPlan) -> bool:
    """Whether taps that reach disjoint outputs of ``axis`` together reach all of them."""
    outputs = range(axis.output_size)
    reached = sum(len(outputs[window[1]]) for window in tap_windows(axis) if window is not None)
    return reached == axis.output_size


def _blasable_rows(rows: np.ndarray) -> bool:
    """Whether ``(n, G, Ci, X...)`` reshapes to ``(n, G, Ci, prod X)`` with unit inner stride."""
    item = rows.itemsize
    expected = item
    for size, stride in zip(rows.shape[:2:-1], rows.strides[:2:-1]):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return rows.shape[3] <= 1 or rows.strides[3] == expected
