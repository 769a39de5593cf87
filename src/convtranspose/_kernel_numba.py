"""The ``direct`` algorithm compiled with numba (optional: ``pip install convtranspose[fast]``).

Imported only when the kernel chooses ``direct`` and numba is installed, never at
``import convtranspose``.  For each output phase (module docstring of
:mod:`convtranspose._kernel`) and each output row, the row is accumulated from
the few taps of that phase reading contiguous, zero-padded input rows, then
stored with the phase's stride: no GEMM, no scratch beyond one row, every output
element written once.  Results are identical to the NumPy algorithms up to the
order of float additions.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ._kernel import _axis_phases, _input_glxc, _output_glyc
from ._plan import AxisPlan

__all__ = ["direct_phase"]

_THREADS = max(1, min(os.cpu_count() or 1, 8))


@numba.njit(nogil=True, cache=False)
def _direct_kernel(padded, weights, out, strides, tap_k, tap_shift, tap_count, start, stop):  # pragma: no cover
    # padded (N, X1, X2, X3, Ci, G); weights (K1, K2, K3, Ci, Co, G); out (N, Y1, Y2, Y3, Co, G),
    # any strides (views of the caller's arrays in their own layouts). Computes the output
    # rows (n, y1) with flat index n*Y1 + y1 in [start, stop); the innermost loop runs over
    # the groups, contiguous in channels-last layouts.
    ci_count, groups = padded.shape[4], padded.shape[5]
    limit1, limit2, limit3 = padded.shape[1], padded.shape[2], padded.shape[3]
    co_count = weights.shape[4]
    size1, size2, size3 = out.shape[1], out.shape[2], out.shape[3]
    s1, s2, s3 = strides[0], strides[1], strides[2]
    line = np.empty((size3, co_count, groups), out.dtype)
    for flat in range(start, stop):
        n = flat // size1
        y1 = flat % size1
        p1 = y1 % s1
        j1 = y1 // s1
        for y2 in range(size2):
            p2 = y2 % s2
            j2 = y2 // s2
            for y3 in range(size3):
                p3 = y3 % s3
                j3 = y3 // s3
                acc = line[y3]
                acc[:, :] = 0
                for m1 in range(tap_count[0, p1]):
                    k1 = tap_k[0, p1, m1]
                    x1 = j1 + tap_shift[0, p1, m1]
                    if x1 < 0 or x1 >= limit1:
                        continue
                    for m2 in range(tap_count[1, p2]):
                        k2 = tap_k[1, p2, m2]
                        x2 = j2 + tap_shift[1, p2, m2]
                        if x2 < 0 or x2 >= limit2:
                            continue
                        for m3 in range(tap_count[2, p3]):
                            k3 = tap_k[2, p3, m3]
                            x3 = j3 + tap_shift[2, p3, m3]
                            if x3 < 0 or x3 >= limit3:
                                continue
                            for ci in range(ci_count):
                                for co in range(co_count):
                                    for g in range(groups):
                                        acc[co, g] += (weights[k1, k2, k3, ci, co, g]
                                                       * padded[n, x1, x2, x3, ci, g])
            for y3 in range(size3):
                for co in range(co_count):
                    for g in range(groups):
                        out[n, y1, y2, y3, co, g] = line[y3, co, g]


@numba.njit(nogil=True, cache=False)
def _direct_rows_kernel(source, weights, out, strides, tap_k, tap_shift, tap_count, lows,
                        highs, start, stop):  # pragma: no cover
    # source (N, G, Ci, X1, X2, X3); weights (G, Ci, Co, K1, K2, K3); out (N, G, Co, Y1, Y2, Y3):
    # channels-first, the last axis contiguous.  Computes the (n, g, co) planes with flat
    # index in [start, stop).  Each output line (y1, y2) is accumulated phase by phase in
    # `line[p3, j3]` (contiguous, vectorised multiply-adds over j3), then interleaved once.
    groups, ci_count = source.shape[1], source.shape[2]
    co_count = weights.shape[2]
    size1, size2, size3 = out.shape[3], out.shape[4], out.shape[5]
    limit1, limit2 = source.shape[3], source.shape[4]
    s1, s2, s3 = strides[0], strides[1], strides[2]
    blocks3 = (size3 + s3 - 1) // s3
    line = np.empty((s3, blocks3), out.dtype)
    for flat in range(start, stop):
        n = flat // (groups * co_count)
        g = (flat // co_count) % groups
        co = flat % co_count
        for y1 in range(size1):
            p1 = y1 % s1
            j1 = y1 // s1
            for y2 in range(size2):
                p2 = y2 % s2
                j2 = y2 // s2
                line[:, :] = 0
                for ci in range(ci_count):
                    for m1 in range(tap_count[0, p1]):
                        x1 = j1 + tap_shift[0, p1, m1]
                        if x1 < 0 or x1 >= limit1:
                            continue
                        k1 = tap_k[0, p1, m1]
                        for m2 in range(tap_count[1, p2]):
                            x2 = j2 + tap_shift[1, p2, m2]
                            if x2 < 0 or x2 >= limit2:
                                continue
                            k2 = tap_k[1, p2, m2]
                            for p3 in range(min(s3, size3)):
                                for m3 in range(tap_count[2, p3]):
                                    w = weights[g, ci, co, k1, k2, tap_k[2, p3, m3]]
                                    shift = tap_shift[2, p3, m3]
                                    low = lows[p3, m3]
                                    high = highs[p3, m3]
                                    # Slices, so that the loop index is provably >= 0
                                    # (no wrap-around checks: the loop vectorises).
                                    segment = line[p3, low:high]
                                    row = source[n, g, ci, x1, x2, low + shift:high + shift]
                                    for t in range(high - low):
                                        segment[t] += w * row[t]
                destination = out[n, g, co, y1, y2]
                for p3 in range(min(s3, size3)):
                    phase_line = line[p3]
                    stored = destination[p3::s3]
                    for t in range(stored.shape[0]):
                        stored[t] = phase_line[t]


@numba.njit(nogil=True, cache=False)
def _transpose_kernel(source, target, start, stop):  # pragma: no cover
    # target[n, b, a] = source[n, a, b] for n in [start, stop), in cache-sized tiles.
    rows, cols = source.shape[1], source.shape[2]
    for n in range(start, stop):
        for a0 in range(0, rows, 32):
            for b0 in range(0, cols, 32):
                for b in range(b0, min(cols, b0 + 32)):
                    for a in range(a0, min(rows, a0 + 32)):
                        target[n, b, a] = source[n, a, b]


def _tables(axes: tuple[AxisPlan, ...], padded: bool = True):
    phases = [_axis_phases(axis) for axis in axes]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    stride_max = max(axis.stride for axis in axes)
    tap_k = np.zeros((3, stride_max, widest), np.int64)
    tap_shift = np.zeros((3, stride_max, widest), np.int64)
    tap_count = np.zeros((3, stride_max), np.int64)
    for a, p in enumerate(phases):
        for c in p.classes:
            for i in range(c.count):
                phase = c.first + i
                tap_count[a, phase] = len(c.shifts)
                for m, (shift, k) in enumerate(zip(c.shifts, c.taps[i])):
                    tap_k[a, phase, m] = k
                    tap_shift[a, phase, m] = shift + (p.pad_low if padded else 0)
    return phases, tap_k, tap_shift, tap_count


def _with_unit_axes(array: np.ndarray, spatial_at: int, rank: int) -> np.ndarray:
    """Insert length-1 spatial axes in front so that there are three."""
    shape = array.shape[:spatial_at] + (1,) * (3 - rank) + array.shape[spatial_at:]
    return array.reshape(shape)


def _parallel(function, count: int, threads: int) -> None:
    """``function(start, stop)`` over ``range(count)`` split between threads (numba nogil)."""
    threads = max(1, min(threads, count))
    bounds = [count * i // threads for i in range(threads + 1)]
    if threads == 1:
        function(0, count)
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: function(bounds[i], bounds[i + 1]), range(threads)))


def _direct_channels_first(data, weights, axes3, dtype, out, threads):
    groups, ci, co = weights.shape[:3]
    batch = data.shape[0]
    phases, tap_k, tap_shift, tap_count = _tables(axes3, padded=False)
    last = axes3[-1]
    # Per (phase, tap) of the last axis: the j3 range whose input j3 + shift exists.
    lows = np.zeros(tap_k.shape[1:], np.int64)
    highs = np.zeros(tap_k.shape[1:], np.int64)
    for p3 in range(min(last.stride, last.output_size)):
        count = -(-(last.output_size - p3) // last.stride)
        for m in range(tap_count[2, p3]):
            shift = tap_shift[2, p3, m]
            lows[p3, m] = max(0, -shift)
            highs[p3, m] = max(lows[p3, m], min(count, last.input_size - shift))
    source = data.reshape((batch, groups, ci) + tuple(a.input_size for a in axes3))
    if source.dtype != dtype or not source.flags.c_contiguous:
        source = np.ascontiguousarray(source, dtype)
    target = out.reshape((batch, groups, co) + tuple(a.output_size for a in axes3))
    kernel3 = tuple(a.kernel_size for a in axes3)
    w = np.ascontiguousarray(weights, dtype).reshape((groups, ci, co) + kernel3)
    strides = np.array([a.stride for a in axes3], np.int64)
    _parallel(lambda a, b: _direct_rows_kernel(source, w, target, strides, tap_k, tap_shift,
                                               tap_count, lows, highs, a, b),
              batch * groups * co, threads)


def direct_phase(data, weights, axes, dtype, channels_last, out):
    """Fill ``out`` (any layout) with the transposed convolution, numba-compiled."""
    groups, ci, co = weights.shape[:3]
    rank = len(axes)
    unit = AxisPlan(1, 1, 1, 1, 0, 1)
    axes3 = (unit,) * (3 - rank) + tuple(axes)
    phases, tap_k, tap_shift, tap_count = _tables(axes3, padded=False)
    batch = data.shape[0]
    sizes = tuple(a.output_size for a in axes3)
    big = out.size * max(1, ci) * math.prod(a.kernel_size for a in axes) >= 1 << 18
    threads = _THREADS if big else 1
    if not channels_last and data.shape[-1] >= 8:
        # Long enough lines: vectorise along them, in the caller's layout.
        _direct_channels_first(data, weights, axes3, dtype, out, threads)
        return
    if channels_last:
        source = data
    else:
        # One tiled transpose to channels-last: the kernel reads channel vectors.
        flat = data.reshape(batch, data.shape[1], -1)
        if flat.dtype != dtype or not flat.flags.c_contiguous:
            flat = np.ascontiguousarray(flat, dtype)
        source = np.empty((batch, flat.shape[2], flat.shape[1]), dtype)
        _parallel(lambda a, b: _transpose_kernel(flat, source, a, b), batch, threads)
        source = source.reshape((batch,) + data.shape[2:] + (data.shape[1],))
    # Views (N, X1, X2, X3, Ci, G) and (N, Y1, Y2, Y3, Co, G).
    source = np.moveaxis(_input_glxc(source, groups, True), 0, -1)  # (N, X..., Ci, G)
    source = _with_unit_axes(source, 1, rank)
    if source.dtype != dtype:
        source = source.astype(dtype)
    if channels_last:
        result = out
    else:
        result = np.empty((batch,) + tuple(a.output_size for a in axes) + (groups * co,), dtype)
    target = np.moveaxis(_output_glyc(result, groups, True), 0, -1)  # (N, Y..., Co, G)
    target = _with_unit_axes(target, 1, rank)
    kernel3 = tuple(a.kernel_size for a in axes3)
    # (G, Ci, Co, K...) -> (K1, K2, K3, Ci, Co, G)
    w = np.ascontiguousarray(np.moveaxis(weights.reshape((groups, ci, co) + kernel3), 0, -1)
                             .transpose(2, 3, 4, 0, 1, 5), dtype)
    strides = np.array([a.stride for a in axes3], np.int64)
    _parallel(lambda a, b: _direct_kernel(source, w, target, strides, tap_k, tap_shift,
                                          tap_count, a, b),
              batch * sizes[0], threads)
    if not channels_last:
        # One tiled transpose back to channels-first.
        flat = result.reshape(batch, -1, groups * co)
        _parallel(lambda a, b: _transpose_kernel(flat, out.reshape(batch, groups * co, -1), a, b),
                  batch, threads)
