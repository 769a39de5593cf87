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
from .._runtime.caches import kept
from .._runtime.config import ALGORITHM_ENV, NO_BLAS_ENV, NO_NUMBA_ENV, switch
from .._runtime.memo import derived_from, frozen
from .._runtime.target import host
from .common import require_finite

#: OpenBLAS splits a product of more multiply-adds than this, and a dot product of more
#: elements than the second, between its threads (``interface/gemm.c``: 65536 times
#: GEMM_MULTITHREAD_THRESHOLD, 4 by default; ``kernel/x86_64/?dot.c``); smaller ones
#: run on the calling thread whatever OpenBLAS's thread count.
_BLAS_SERIAL_MULTIPLY_ADDS, _BLAS_SERIAL_DOT = 65536 * 4, 10000

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
    np.matmul(data.reshape(batch, -1).astype(dtype, copy=False), matrix, out=products)
    return all(map(math.isfinite, products[:, 0].tolist()))


def _dense(data, weights, axes, dtype, channels_last, out, *, target):
    """The whole layer as one matrix product (``target`` plays no part)."""
    matrix = dense_matrix(weights, axes, dtype, channels_last, out[0].size)
    if not _dense_product(data, matrix, dtype, out):
        require_finite(data, dtype)


def switch_state() -> tuple[str, str, str]:
    return switch(ALGORITHM_ENV), switch(NO_NUMBA_ENV), switch(NO_BLAS_ENV)


class DenseCall:
    """A layer that :func:`transposed_convolution` computes with ``dense``, prepared.

    Calling it with data and a filter as at preparation (same shapes and dtype,
    filter of the same bytes, the same environment switches) returns what
    :func:`transposed_convolution` returns without bias, in one product with the
    kept matrix: no algorithm choice or filter memo, each of which costs about as
    much as the product in a call made after the process slept
    (``benchmarks/results/small-layer-calls.json``).  Returns None when it cannot vouch for the result (another filter
    or switch, or an output that is not finite: the general path then decides,
    exactly).
    """

    __slots__ = ("_filter_bytes", "_matrix", "_shape", "_dtype", "_switches", "_safe_squares",
                 "_threaded")

    def __init__(self, filter_bytes: bytes, matrix: np.ndarray, shape: tuple[int, ...],
                 dtype: np.dtype):
        self._filter_bytes, self._matrix = filter_bytes, matrix
        self._shape, self._dtype = shape, dtype
        self._switches = switch_state()
        # Whether OpenBLAS may split this layer's dot and product between its threads:
        # then they run on at most the library's thread count.
        inputs = shape[0] * matrix.shape[0]
        self._threaded = (inputs * matrix.shape[1] > _BLAS_SERIAL_MULTIPLY_ADDS
                          or inputs > _BLAS_SERIAL_DOT)
        # Inputs below this magnitude cannot overflow any output (a quarter of the
        # largest float over the largest column sum of |matrix|); 0 if no bound.
        with np.errstate(over="ignore", invalid="ignore"):
            column_sum = float(np.abs(matrix).sum(axis=0, dtype=np.float64).max(initial=0.0))
        largest = float(np.finfo(dtype).max)
        safe_input = largest / 4 / max(column_sum, 1.0) if math.isfinite(column_sum) else 0.0
        # The data's sum of squares below this proves every input below safe_input:
        # the largest square is at most the exact sum, which the computed one (n
        # non-negative terms, relative error below n * eps) underestimates by far
        # less than the factor 4 (a Python product: inf rather than OverflowError).
        self._safe_squares = (safe_input / 2) * (safe_input / 2)

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        if filter.tobytes() != self._filter_bytes or switch_state() != self._switches:
            return None
        if self._threaded:
            with _blas.at_most(host().threads):
                return self._compute(data, out)
        return self._compute(data, out)

    def _compute(self, data: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
        if out is None:
            out = np.empty(self._shape, self._dtype)
        # One BLAS dot, which raises no floating-point flags (a NaN or an overflow to
        # inf fails the comparison): a third of the time of a min and a max.
        if float(np.vdot(data, data)) < self._safe_squares:
            # No product can overflow or be NaN, so NumPy has no error flag to report:
            # the error-state context of the general path (a cost in cold calls) is moot,
            # and so is the finiteness check of _dense_product.
            batch = self._shape[0]
            np.matmul(data.reshape(batch, -1), self._matrix, out=out.reshape(batch, -1))
            return out
        with np.errstate(over="ignore", invalid="ignore"):  # as transposed_convolution
            finite = _dense_product(data, self._matrix, self._dtype, out)
        return out if finite else None
