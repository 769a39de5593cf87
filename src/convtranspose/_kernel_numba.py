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

import numba
import numpy as np

from ._kernel import _axis_phases, _input_glxc, _output_glyc
from ._plan import AxisPlan

__all__ = ["direct_phase"]


@numba.njit(parallel=True, fastmath=False, cache=False)
def _direct_kernel(padded, weights, out, strides, tap_k, tap_shift, tap_count):  # pragma: no cover
    # padded (N, G, Ci, P1, P2, P3); weights (G, Ci, Co, K1, K2, K3); out (N, G, Co, Y1, Y2, Y3)
    batch, groups, ci_count = padded.shape[0], padded.shape[1], padded.shape[2]
    co_count = weights.shape[2]
    size1, size2, size3 = out.shape[3], out.shape[4], out.shape[5]
    s1, s2, s3 = strides[0], strides[1], strides[2]
    for flat in numba.prange(batch * groups * co_count):
        n = flat // (groups * co_count)
        g = (flat // co_count) % groups
        co = flat % co_count
        row = np.empty(size3 // s3 + 1, out.dtype)
        for p1 in range(min(s1, size1)):
            for p2 in range(min(s2, size2)):
                for p3 in range(min(s3, size3)):
                    blocks3 = (size3 - p3 + s3 - 1) // s3
                    for j1 in range((size1 - p1 + s1 - 1) // s1):
                        for j2 in range((size2 - p2 + s2 - 1) // s2):
                            row[:blocks3] = 0
                            for ci in range(ci_count):
                                for m1 in range(tap_count[0, p1]):
                                    k1 = tap_k[0, p1, m1]
                                    x1 = j1 + tap_shift[0, p1, m1]
                                    for m2 in range(tap_count[1, p2]):
                                        k2 = tap_k[1, p2, m2]
                                        x2 = j2 + tap_shift[1, p2, m2]
                                        for m3 in range(tap_count[2, p3]):
                                            k3 = tap_k[2, p3, m3]
                                            x3 = tap_shift[2, p3, m3]
                                            w = weights[g, ci, co, k1, k2, k3]
                                            source = padded[n, g, ci, x1, x2]
                                            for j3 in range(blocks3):
                                                row[j3] += w * source[x3 + j3]
                            target = out[n, g, co, j1 * s1 + p1, j2 * s2 + p2]
                            for j3 in range(blocks3):
                                target[j3 * s3 + p3] = row[j3]


def _tables(axes: tuple[AxisPlan, ...]):
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
                    tap_shift[a, phase, m] = shift + p.pad_low
    return phases, tap_k, tap_shift, tap_count


def direct_phase(data, weights, axes, dtype, channels_last, out):
    """Fill ``out`` (any layout) with the transposed convolution, numba-compiled."""
    groups, ci, co = weights.shape[:3]
    unit = AxisPlan(1, 1, 1, 1, 0, 1)
    axes3 = (unit,) * (3 - len(axes)) + tuple(axes)
    phases, tap_k, tap_shift, tap_count = _tables(axes3)
    batch = data.shape[0]
    source = np.moveaxis(_input_glxc(data, groups, channels_last), -1, 1)  # (G, Ci, N, X...)
    source = source.transpose((2, 0, 1) + tuple(range(3, source.ndim)))  # (N, G, Ci, X...)
    source = source.reshape((batch, groups, ci) + tuple(a.input_size for a in axes3))
    padded = np.zeros((batch, groups, ci) + tuple(
        a.input_size + p.pad_low + p.pad_high for a, p in zip(axes3, phases)), dtype)
    padded[(Ellipsis,) + tuple(slice(p.pad_low, p.pad_low + a.input_size)
                               for a, p in zip(axes3, phases))] = source
    kernel3 = tuple(a.kernel_size for a in axes3)
    w = np.ascontiguousarray(weights, dtype).reshape((groups, ci, co) + kernel3)
    sizes = tuple(a.output_size for a in axes3)
    if channels_last:
        result = np.empty((batch, groups, co) + sizes, dtype)
    else:
        result = out.reshape((batch, groups, co) + sizes)
    strides = np.array([a.stride for a in axes3], np.int64)
    _direct_kernel(padded, w, result, strides, tap_k, tap_shift, tap_count)
    if channels_last:
        target = _output_glyc(out, groups, True)  # (G, N, Y..., Co)
        np.copyto(target, np.moveaxis(result.reshape((batch, groups, co) + tuple(
            a.output_size for a in axes)), (0, 1, 2), (1, 0, -1)))
