"""``pointwise``: a layer whose every axis has one tap (a 1x1 layer, with any stride,
padding or crop, and every 1x1 forward convolution) is one matrix product per group.

Input position ``x`` reaches output position ``x*s - offset`` alone, so the layer is
``out[n, :, x*s - offset] = W_g^T data[n, :, x]`` per group ``g`` over the inputs that
land inside the output, and zero elsewhere.  With stride 1, no offset and as many
outputs as inputs, the products are written straight into the output.  Otherwise,
channels last on the packed kernels, each product row is stored at its place in the
output by the same native loop that sets the outputs no input reaches to zero (one
pass over the output, on every thread); else the products go into a buffer of the box
of outputs reached, copied into a strided view of the zeroed output.  No im2col, no
padded copy, no scatter-add: where the ``phase`` and ``gemm`` algorithms copy the data
into windows and the result out of their products.  Every product term is one the sum
has: exact with non-finite operands.
"""

from __future__ import annotations

import math

import numpy as np

from .._plan.geometry import tap_windows
from .._plan.rules import AxisPlan
from .._runtime.caches import kept
from .._runtime.memo import derived_from
from .common import zero_output
from .gemm import run_gemms
from .packed import filter_product, packed_filter, packs_product, rows_product

__all__ = ["SPAN_TABLE_BYTES", "in_place", "prepare_pointwise", "reached", "takes_layer"]


def takes_layer(axes: tuple[AxisPlan, ...]) -> bool:
    """Whether every axis has one tap (kernel size 1)."""
    return all(axis.kernel_size == 1 for axis in axes)


def in_place(axes: tuple[AxisPlan, ...]) -> bool:
    """Whether output position ``o`` of every axis is input position ``o``: stride 1, no
    offset, as many outputs as inputs (the products then fill the output directly)."""
    return all(axis.stride == 1 and axis.offset == 0 and axis.output_size == axis.input_size
               for axis in axes)


def _matrices(weights: np.ndarray, dtype, channels_last: bool, threads: int,
              positions: int) -> tuple[np.ndarray, object]:
    """The filter as ``(G, Ci, Co)`` (channels last) or ``(G, Co, Ci)`` in ``dtype``,
    contiguous, kept with the filter: a copy, never a view of the caller's filter (the
    memo gives it to every filter of the same bits, prepared calls included); and,
    where products of ``positions`` rows or columns (:func:`_product_positions`) run
    through the packed kernels on ``threads`` threads (:func:`~.packed.packs_product`),
    those matrices packed (else None), kept beside them."""
    derived = derived_from(weights, "pointwise", np.dtype(dtype).str, channels_last)
    matrices = derived.get("matrices")
    if matrices is None:
        groups, ci, co = weights.shape[:3]
        square = weights.reshape(groups, ci, co)
        matrices = np.array(square if channels_last else square.swapaxes(1, 2), dtype,
                            order="C", copy=True)
        matrices.flags.writeable = False
        derived["matrices"] = matrices
    if not packs_product(2.0 * matrices.shape[1] * matrices.shape[2] * positions, threads,
                         matrices.dtype):
        return matrices, None
    return matrices, packed_filter(derived, matrices, channels_last)


def _product_positions(batch: int, axes: tuple[AxisPlan, ...], channels_last: bool) -> int:
    """The data positions of one product: every sample's channels last (one product
    per group), one sample's channels first (one per sample and group)."""
    return reached(axes) * (batch if channels_last else 1)


def _products(source, matrices, into, channels_last: bool, threads: int, packed=None) -> None:
    """``into`` = the products of C-contiguous ``source`` ``(N, G*Ci, P...)`` (or channels
    last) and ``matrices``, one BLAS product per group (per sample too, channels
    first), or the packed kernels' products where ``packed`` holds the packed matrices
    (:func:`_matrices`); ``into`` is C-contiguous ``(N, G*Co, P...)`` (or
    channels last)."""
    groups = matrices.shape[0]
    ci, co = (matrices.shape[1:] if channels_last else matrices.shape[:0:-1])
    batch = source.shape[0]
    positions = source.size // max(1, batch * groups * ci)
    if channels_last:
        # (N*P, G, Ci) @ (Ci, Co) per group, into the (N*P, G, Co) output's columns.
        rows = source.reshape(batch * positions, groups, ci)
        out_rows = into.reshape(batch * positions, groups, co)
        if packed is not None:
            rows_product(packed, rows, threads, out_rows)
            return
        calls = [[(rows[:, g], matrices[g], out_rows[:, g], False)] for g in range(groups)]
        flops_each = 2.0 * batch * positions * ci * co
    else:
        # (Co, Ci) @ (Ci, P) per sample and group, into the (N, G, Co, P) output.
        planes = source.reshape(batch, groups, ci, positions)
        out_planes = into.reshape(batch, groups, co, positions)
        if packed is not None:
            filter_product(packed, planes, threads, out_planes)
            return
        calls = [[(matrices[g], planes[n, g], out_planes[n, g], False)]
                 for n in range(batch) for g in range(groups)]
        flops_each = 2.0 * positions * ci * co
    run_gemms(calls, flops_each, threads)


def _pointwise(data, weights, axes, dtype, channels_last, out, *, target):
    """Fill ``out`` with one product per group (module docstring)."""
    batch = data.shape[0]
    matrices, packed = _matrices(weights, dtype, channels_last, target.threads,
                                 _product_positions(batch, axes, channels_last))
    rows = _strided_rows(batch, axes, out.shape[-1]) if channels_last and packed else None
    _products_into(matrices, data, _boxes(axes, channels_last), dtype, channels_last, out,
                   target.threads, packed, rows, _spread_stores(axes, channels_last, target))


def prepare_pointwise(batch, weights, axes, dtype, channels_last, target):
    """``compute(data, out)``: ``pointwise`` for this layer with its matrices and the
    boxes of inputs and outputs made once, for
    :class:`convtranspose._kernels.direct.DirectCall` (``out`` C-contiguous, of
    ``dtype``).  Exact with any operands, as the general path."""
    matrices, packed = _matrices(weights, dtype, channels_last, target.threads,
                                 _product_positions(batch, axes, channels_last))
    boxes = _boxes(axes, channels_last)
    rows = (_strided_rows(batch, axes, weights.shape[0] * weights.shape[2])
            if channels_last and packed else None)
    product = _prepared_product(batch, axes, matrices, packed, boxes, channels_last,
                                target.threads)
    spread_product = _prepared_spread(batch, axes, matrices, packed, boxes, channels_last,
                                      target)
    spread = _spread_stores(axes, channels_last, target)

    def compute(data, out):
        if out.flags.c_contiguous and data.dtype == dtype:
            if product is not None and data.flags.c_contiguous:
                product(data, out)
                return
            if spread_product is not None:
                spread_product(data, out)
                return
        with np.errstate(all="ignore"):
            _products_into(matrices, data, boxes, dtype, channels_last, out, target.threads,
                           packed, rows, spread)

    return compute


def _prepared_product(batch, axes, matrices, packed, boxes, channels_last, threads):
    """``run(data, out)``: the packed product of a channels-first layer filled in place
    (:func:`in_place`) with its set-up made once
    (:func:`._numba.packed.prepare_packed_product`), for C-contiguous data and output
    of the packed dtype: the same kernel as :func:`_products`, so the same bits; None
    for other layers, or where nothing is multiplied."""
    if boxes is not None or channels_last or packed is None:
        return None
    groups, rows, depth = matrices.shape
    shape = (batch, groups, depth, reached(axes))
    if 0 in shape or rows == 0:
        return None
    from ._numba.packed import prepare_packed_product

    return prepare_packed_product(packed, shape, matrices.dtype, threads)


def _prepared_spread(batch, axes, matrices, packed, boxes, channels_last, target):
    """``run(data, out)``: a strided channels-first layer's packed product and its
    stores into the whole C-contiguous output (:func:`_spread_stores`), for data of the
    packed dtype, with the product's and the stores' set-up made once
    (:func:`._numba.packed.prepare_packed_product`, :func:`._numba.scatter.spread_planes_call`):
    in one parallel loop where the threads divide the batch, each thread storing the
    planes of the samples it multiplied (:func:`._numba.launch.parallel_pair`), else
    one after the other.  The same product and stores as :func:`_products_into`: the
    same bits.  None for other layers, or where nothing is multiplied."""
    if not boxes or channels_last or packed is None:
        return None
    groups, rows, depth = matrices.shape
    shape = (batch, groups, depth, reached(axes))
    if 0 in shape or rows == 0:
        return None
    from ._numba.launch import array_kind, parallel_pair
    from ._numba.packed import prepare_packed_product
    from ._numba.scatter import spread_planes_call

    dtype = matrices.dtype
    product = prepare_packed_product(packed, shape, dtype, target.threads)
    sums_shape = (batch, groups, rows, shape[3])
    out_shape = (batch, groups * rows) + tuple(axis.output_size for axis in axes)
    store = spread_planes_call(out_shape, dtype.itemsize, axes, target)
    addresses: dict = {}  # the loop's code addresses by the data's and output's types

    def run(data, out):
        source = np.ascontiguousarray(data[boxes[0]]).reshape(shape)
        sums = np.empty(sums_shape, dtype)
        # Only the data and the output vary in type from call to call.
        kinds = (array_kind(source), array_kind(out))
        if not parallel_pair(product.kernel, product.arguments(source, sums), product.units,
                             product.scratch, store.kernel, store.arguments(sums, out),
                             store.items, batch, product.threads, (addresses, kinds)):
            product(source, sums)
            store(sums, out)

    return run


def _boxes(axes: tuple[AxisPlan, ...], channels_last: bool) -> tuple | None:
    """Where the products go: None when they fill the output in place
    (:func:`in_place`); else the index of the inputs that reach the output and that of
    the (strided) outputs they reach, or ``()`` where no input reaches it."""
    if in_place(axes):
        return None
    windows = [tap_windows(axis)[0] for axis in axes]
    if any(window is None for window in windows):
        return ()
    lead = (slice(None),) if channels_last else (slice(None), slice(None))
    tail = (slice(None),) if channels_last else ()
    return (lead + tuple(w[0] for w in windows) + tail,
            lead + tuple(w[1] for w in windows) + tail)


def _spread_stores(axes: tuple[AxisPlan, ...], channels_last: bool, target):
    """``store(product, out)`` for a channels-first layer not filled in place: writes
    every element of the C-contiguous ``out`` once, the product of the input that
    reaches it, else zero, from the products ``(N, G*Co, X...)`` of the inputs that land
    inside it (:func:`._numba.scatter.spread_planes_call`).  Zeroing the output and
    copying the products into its strided view sent the output through the cache
    twice: a 1x1 stride-4 layer of 8 samples and 128 channels spent 45 of its 84 us
    there (AMD Zen 4).  Made on the first call and kept for the next ones (same
    shapes); None for other layers."""
    if channels_last or in_place(axes):
        return None
    kept_run = []

    def store(product: np.ndarray, out: np.ndarray) -> None:
        if not kept_run:
            from ._numba.scatter import spread_planes_call

            kept_run.append(spread_planes_call(out.shape, out.itemsize, axes, target))
        kept_run[0](product, out)

    return store


def _products_into(matrices, data, boxes, dtype, channels_last, out, threads,
                   packed=None, rows=None, spread=None) -> None:
    """``out`` = the layer of the filter ``matrices`` (:func:`_matrices`, packed or
    not) on ``data``, through ``boxes`` (:func:`_boxes`); channels last with packed
    matrices, a C-contiguous strided ``out`` is written in one pass of the packed
    kernel through ``rows`` (:func:`_strided_rows`); channels first, in one pass of
    ``spread`` (:func:`_spread_stores`) from the products of the inputs that land."""
    if boxes is None and out.flags.c_contiguous:
        source = data if data.dtype == dtype and data.flags.c_contiguous else (
            np.ascontiguousarray(data, dtype))
        _products(source, matrices, out, channels_last, threads, packed)
        return
    if boxes and rows is not None and out.flags.c_contiguous:
        from ._numba.packed import packed_rows_product

        source = np.ascontiguousarray(data[boxes[0]], dtype)
        groups, ci = matrices.shape[:2]
        packed_rows_product(packed, source.reshape(-1, groups, ci), out, threads, *rows)
        return
    if boxes and spread is not None and out.flags.c_contiguous:
        source = np.ascontiguousarray(data[boxes[0]], dtype)
        product = np.empty(source.shape[:1] + out.shape[1:2] + source.shape[2:], dtype)
        _products(source, matrices, product, channels_last, threads, packed)
        spread(product, out)
        return
    if boxes is None:  # in place, into an output of other strides
        boxes = (Ellipsis, Ellipsis)
    zero_output(out, threads)
    if not boxes:
        return  # no input reaches the output
    source = np.ascontiguousarray(data[boxes[0]], dtype)
    box = out[boxes[1]]
    product = np.empty(box.shape, dtype)
    _products(source, matrices, product, channels_last, threads, packed)
    box[...] = product


@kept("kernel schedules", maxsize=32)
def _strided_rows(batch: int, axes: tuple[AxisPlan, ...],
                  channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Where a channels-last strided layer's products go in its C-contiguous output
    ``(N, Y..., channels)``: the first element of each product row (samples and the
    reached inputs' positions in C order, so increasing) and the spans ``(first,
    length)`` between and around them, the outputs no input reaches, which are zeros;
    each read-only int64, made in a few passes over the rows (:data:`SPAN_TABLE_BYTES`
    per row at most).  None where no input reaches the output or it is filled in place."""
    boxes = _boxes(axes, False)
    if not boxes:
        return None
    sizes = [axis.output_size for axis in axes]
    c_rows = np.arange(batch, dtype=np.int64) * (math.prod(sizes) * channels)
    step = channels
    steps = []
    for size in reversed(sizes):
        steps.append(step)
        step *= size
    for window, size, step in zip(boxes[1][2:], sizes, reversed(steps)):
        places = np.arange(*window.indices(size), dtype=np.int64) * step
        c_rows = np.add.outer(c_rows, places).reshape(-1)
    starts = np.concatenate(([0], c_rows + channels))
    lengths = np.concatenate((c_rows, [batch * math.prod(sizes) * channels])) - starts
    zeros = np.stack([starts, lengths], axis=1)[lengths > 0]
    for array in (c_rows, zeros):
        array.flags.writeable = False
    return c_rows, zeros


#: The most bytes :func:`_strided_rows` holds per product row at once (its row offsets,
#: the spans' starts and lengths, their stacked copy and the mask).
SPAN_TABLE_BYTES = 48


def reached(axes: tuple[AxisPlan, ...]) -> int:
    """How many output positions an input reaches (the products' rows per sample)."""
    windows = [tap_windows(axis)[0] for axis in axes]
    return 0 if any(w is None for w in windows) else math.prod(
        w[0].stop - w[0].start for w in windows)
