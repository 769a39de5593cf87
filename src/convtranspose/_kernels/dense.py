"""``dense``: the whole layer as one matrix, for tiny layers.

The layer as one ``(C_in*X, C_out*Y)`` matrix (index pattern cached per shape) and one
matrix product, in the caller's layout: a handful of NumPy calls, for the lowest call
overhead.  :class:`DenseCall` is the same layer prepared for repeated calls.
"""

from __future__ import annotations

import math

import numpy as np

from .._plan.geometry import tap_windows
from .._plan.rules import AxisPlan
from .._runtime import blas as _blas
from .._runtime import quiet as _quiet
from .._runtime.caches import kept
from .._runtime.config import ALGORITHM_ENV, NO_BLAS_ENV, NO_NUMBA_ENV, switches_reader
from .._runtime.memo import derived_from, frozen, owned
from .common import require_finite

#: OpenBLAS splits a product of more multiply-adds than this between its threads
#: (``interface/gemm.c``: 65536 times GEMM_MULTITHREAD_THRESHOLD, 4 by default); smaller
#: ones run on the calling thread whatever OpenBLAS's thread count.
_BLAS_SERIAL_MULTIPLY_ADDS = 65536 * 4

#: ``np.dot`` without the ``__array_function__`` dispatch (its operands are ndarrays),
#: where NumPy exposes it.
_dot = getattr(np.dot, "_implementation", np.dot)

#: ``dense`` (one matrix product with the whole layer as a matrix) is chosen only
#: when that matrix has at most this many elements: it exists for call overhead.
DENSE_MAX_ELEMENTS = 1 << 16


@kept("kernel schedules", maxsize=128)
def _dense_pattern(axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                   channels_last: bool):
    """(row count, flat index, weight index) of every nonzero of the layer's matrix.

    The flat index is ``row * columns + column`` with row = flat index of one
    sample's input element and column = flat index of one sample's output element,
    both in the caller's layout; no two entries collide (an input and an output
    position determine the tap).
    """
    groups, ci, co = weights_shape[:3]
    kernel = weights_shape[3:]
    spatial_in = tuple(a.input_size for a in axes)
    spatial_out = tuple(a.output_size for a in axes)
    g, i, o = np.meshgrid(np.arange(groups), np.arange(ci), np.arange(co), indexing="ij")
    channel_in, channel_out = (g * ci + i).reshape(-1, 1), (g * co + o).reshape(-1, 1)
    weight_base = ((g * ci + i) * co + o).reshape(-1, 1) * math.prod(kernel)
    rows, cols, taps = [], [], []
    windows = [tap_windows(axis) for axis in axes]
    for tap in np.ndindex(*kernel):
        window = [w[k] for w, k in zip(windows, tap)]
        if any(x is None for x in window):
            continue
        xs = np.meshgrid(*(np.arange(src.start, src.stop) for src, _ in window), indexing="ij")
        ys = np.meshgrid(*(np.arange(dst.start, dst.stop, dst.step) for _, dst in window),
                         indexing="ij")
        x_flat = np.ravel_multi_index(tuple(x.ravel() for x in xs), spatial_in).reshape(1, -1)
        y_flat = np.ravel_multi_index(tuple(y.ravel() for y in ys), spatial_out).reshape(1, -1)
        if channels_last:
            rows.append(x_flat * (groups * ci) + channel_in)
            cols.append(y_flat * (groups * co) + channel_out)
        else:
            rows.append(channel_in * math.prod(spatial_in) + x_flat)
            cols.append(channel_out * math.prod(spatial_out) + y_flat)
        taps.append(np.broadcast_to(weight_base + np.ravel_multi_index(tap, kernel),
                                    rows[-1].shape))
    row_count = groups * ci * math.prod(spatial_in)
    if not rows:
        empty = np.zeros(0, np.intp)
        return row_count, empty, empty
    flat = (np.concatenate([r.ravel() for r in rows]) * (groups * co * math.prod(spatial_out))
            + np.concatenate([c.ravel() for c in cols]))
    return row_count, flat, np.concatenate([t.ravel() for t in taps])


def dense_matrix(weights, axes, dtype, channels_last, out_size):
    """The layer as a ``(C_in*X, C_out*Y)`` matrix (memoised with the filter)."""
    derived = derived_from(weights, "dense", axes, dtype, channels_last)
    matrix = derived.get("matrix")
    if matrix is None:
        values = np.ascontiguousarray(weights, dtype)
        rows, flat, taps = _dense_pattern(axes, weights.shape, channels_last)
        matrix = np.zeros((rows, out_size), dtype)
        matrix.reshape(-1)[flat] = values.reshape(-1)[taps]
        derived["matrix"] = frozen(matrix)
    return matrix


def _dense_product(data, matrix, dtype, out) -> bool:
    """``out`` = every sample times ``matrix``; whether that proves the data finite.

    Inputs meet the zeros of the matrix (taps meet only inputs).  Every output sums
    a product with every input of its sample, so a non-finite input makes all of
    them non-finite (a BLAS that skipped zero entries would be exact anyway): one
    finite output per sample proves its inputs finite, cheaper than a pass over them.
    """
    batch = data.shape[0]
    products = out.reshape(batch, -1)
    # np.dot rather than np.matmul: the same BLAS product without the ufunc machinery
    # (0.7 us less in a tiny layer's call); every dense product goes through _dot, so
    # the prepared call and the general path agree bit for bit.
    _dot(data.reshape(batch, -1).astype(dtype, copy=False), matrix, out=products)
    return _finite_samples(products)


def _finite_samples(products: np.ndarray) -> bool:
    """Whether the first output of every sample (a row of ``products``) is finite."""
    return not products.size or all(map(math.isfinite, products[:, 0].tolist()))


def _dense(data, weights, axes, dtype, channels_last, out, *, target):
    """The whole layer as one matrix product (``target`` plays no part)."""
    matrix = dense_matrix(weights, axes, dtype, channels_last, out[0].size)
    with _blas.one_thread:  # see DenseCall._general
        finite = _dense_product(data, matrix, dtype, out)
    if not finite:
        require_finite(data, dtype)


#: The environment switches a prepared call depends on, as set now: a tuple that a
#: prepared call compares with the one it was made under (equal exactly when no switch
#: changed); read on every call, in a tenth of a microsecond.
switch_state = switches_reader(ALGORITHM_ENV, NO_NUMBA_ENV, NO_BLAS_ENV)


class DenseCall:
    """A layer that :func:`transposed_convolution` computes with ``dense``, prepared.

    Calling it with data and a filter as at preparation (same shapes and dtype,
    filter of the same bytes, the same environment switches) returns what
    :func:`transposed_convolution` returns without bias, in one product with the
    kept matrix: no algorithm choice or filter memo, each of which costs about as
    much as the product in a call made after the process slept
    (``benchmarks/results/small-layer-calls.json``).  Returns None when it cannot vouch
    for the result (another filter or switch, or data that may not be finite: the
    general path then decides, exactly).
    """

    __slots__ = ("_filter", "_filter_bytes", "_matrix", "_shape", "_rows", "_dtype",
                 "_switches", "_threaded")  # _rows: the data's and the result's matrices

    def __init__(self, filter: np.ndarray, matrix: np.ndarray, shape: tuple[int, ...],
                 dtype: np.dtype):
        # A prepared layer's own filter (nobody can write it) is told by identity; any
        # other by its bytes.
        self._filter = filter if owned(filter) else None
        self._filter_bytes, self._matrix = filter.tobytes(), matrix
        self._shape, self._dtype = shape, dtype
        self._rows = (shape[0], matrix.shape[0]), (shape[0], matrix.shape[1])
        self._switches = switch_state()
        # Whether OpenBLAS would split this layer's product between its threads: then
        # it runs on one (_general), under the general error state.
        self._threaded = (shape[0] * matrix.size > _BLAS_SERIAL_MULTIPLY_ADDS
                          or not _quiet.CHEAP)

    def tells_by_identity(self, filter: np.ndarray) -> bool:
        """Whether calls with ``filter`` compare nothing of it: a prepared layer's own
        filter that it was set up from."""
        return filter is self._filter

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        if ((filter is not self._filter and filter.tobytes() != self._filter_bytes)
                or switch_state() != self._switches):
            return None
        if self._threaded:
            return self._general(data, np.empty(self._shape, self._dtype) if out is None
                                 else out)
        # _dense_product spelled out (the data has the matrix's dtype): its error state
        # is the general path's, set without np.errstate.
        token = _quiet.silence()
        try:
            data_rows, out_rows = self._rows
            if out is None:  # the product's own array: no np.empty (a quarter of a us)
                out = _dot(data.reshape(data_rows), self._matrix).reshape(self._shape)
            else:
                _dot(data.reshape(data_rows), self._matrix, out=out.reshape(out_rows))
        finally:
            _quiet.restore(token)
        if self._shape[0] == 1 and out.size:  # one finite output proves the data finite
            return out if math.isfinite(out.item(0)) else None
        return out if _finite_samples(out.reshape(out_rows)) else None

    def _general(self, data: np.ndarray, out: np.ndarray) -> np.ndarray | None:
        """The product through :func:`_dense_product` under ``np.errstate``, on one BLAS
        thread: a dense product is at most :data:`DENSE_MAX_ELEMENTS` multiply-adds per
        sample, and OpenBLAS's threads would spin for 0.1 s after it, slowing whatever
        runs next (``benchmarks/results/blas-threads-xeon.json``)."""
        with _blas.one_thread, np.errstate(all="ignore"):
            finite = _dense_product(data, self._matrix, self._dtype, out)
        return out if finite else None
