"""``col2im-nxc`` and ``col2im-ncx``: one GEMM, then an add per tap.

One GEMM gives every tap's contribution (``taps * Co`` values per input position), then
a strided add per live tap puts them in place (numba's compiled scatter for a few
channels, :mod:`._numba.scatter`).  Cheapest when ``Co * taps`` is small next to
``Ci * taps / stride**D``.  Multiplies only the (input, tap) pairs that exist: exact
with non-finite operands.
"""

from __future__ import annotations

import math

import numpy as np

from .._plan.geometry import tap_windows
from .._plan.rules import AxisPlan
from .._runtime.memo import derived_from, frozen
from .._runtime.threads import add, copy, parallel_copy
from .common import input_glxc, output_glyc, threaded_matmul
from .phase import chunks
from .schedules import numba_scatters


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


def _col2im(data, weights, axes, dtype, channels_last, out, internal_last, *, target):
    """One GEMM for every tap's contribution, then one strided add per live tap.

    The columns buffer (``taps * Co`` values per input position) is built for a chunk
    of samples, or of one sample's first spatial axis, at a time.
    """
    groups, ci, co = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    batch = data.shape[0]
    spatial = tuple(axis.input_size for axis in axes)
    taps = math.prod(kernel)
    matrix, tap_major = _col2im_matrix(weights, dtype, internal_last)
    scatter = None
    if (tap_major and out.flags.c_contiguous
            and numba_scatters(internal_last, co, len(axes), dtype.kind == "f" and target.numba)):
        from ._numba.scatter import col2im_scatter as scatter
    # Taps that span less than a stride (U-Net's k2 s2) reach every output at most
    # once, so their columns are copied, not added to zeros.
    disjoint = scatter is None and all(
        (axis.kernel_size - 1) * axis.dilation < axis.stride for axis in axes)
    if not disjoint or not all(_disjoint_taps_cover(axis) for axis in axes):
        out.fill(0)
    store = copy if disjoint else add
    if internal_last:
        into = output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
        source = input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    else:
        into = np.moveaxis(output_glyc(out, groups, channels_last), (0, -1), (1, 2))
        source = np.moveaxis(input_glxc(data, groups, channels_last), (0, -1), (1, 2))
        # into (N, G, Co, Y...), source (N, G, Ci, X...): views, NCX-natural.
    row_bytes = groups * math.prod(spatial[1:]) * (taps * co + ci) * dtype.itemsize
    first = axes[0]
    for n0, n1, x0, x1 in chunks(batch, spatial[0], row_bytes, out.nbytes):
        n = n1 - n0
        sub = (x1 - x0,) + spatial[1:]
        # Tap k sends chunk input x' (= x - x0) to output x'*s + k*d - (offset - x0*s).
        sub_axes = (AxisPlan(x1 - x0, first.kernel_size, first.stride, first.dilation,
                             first.offset - x0 * first.stride, first.output_size),) + axes[1:]
        windows = [tap_windows(axis) for axis in sub_axes]
        live = [(tap, tuple(w[k] for w, k in zip(windows, tap))) for tap in np.ndindex(*kernel)
                if all(w[k] is not None for w, k in zip(windows, tap))]
        if not live:
            continue
        if internal_last:
            rows = np.ascontiguousarray(source[:, n0:n1, x0:x1], dtype).reshape(groups, -1, ci)
            columns = threaded_matmul(rows, matrix, target.threads).reshape(
                (groups, n) + sub + (kernel + (co,) if tap_major else (co,) + kernel))
            if scatter is not None:
                scatter(columns, out, into[:, n0:n1], sub_axes, target)
                continue
            for tap, window in live:
                src = (slice(None), slice(None)) + tuple(w[0] for w in window) + (
                    tap if tap_major else (slice(None),) + tap)
                dst = (slice(None), slice(n0, n1)) + tuple(w[1] for w in window)
                parallel_copy(store, into[dst], columns[src])
        else:
            rows = source[n0:n1, :, :, x0:x1]
            if rows.dtype != dtype or not _blasable_rows(rows):
                rows = np.ascontiguousarray(rows, dtype)
            columns = threaded_matmul(matrix, rows.reshape((n, groups, ci, -1)), target.threads)
            columns = columns.reshape((n, groups) + (kernel + (co,) if tap_major
                                                     else (co,) + kernel) + sub)
            for tap, window in live:
                middle = tap + (slice(None),) if tap_major else (slice(None),) + tap
                src = (slice(None), slice(None)) + middle + tuple(w[0] for w in window)
                dst = (slice(n0, n1), slice(None), slice(None)) + tuple(w[1] for w in window)
                parallel_copy(store, into[dst], columns[src])


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
