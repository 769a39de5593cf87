"""The one N-D grouped kernel that computes every dialect's canonical plan.

Input: data ``(N, G*Ci, X...)`` (or channels last ``(N, X..., G*Ci)``), weights
``(G, Ci, Co, K...)`` and one :class:`~convtranspose._plan.AxisPlan` per spatial axis.
Output: ``(N, G*Co, Y...)`` (or channels last), in the accumulation dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ._plan import AxisPlan

__all__ = ["transposed_convolution"]


def _tap_windows(axis: AxisPlan) -> list[tuple[slice, slice] | None]:
    """Per kernel tap, the (input, output) slices it connects along one axis.

    Tap ``k`` sends input ``x`` to output ``o = x*s + k*d - offset``; the slices
    keep the ``x`` whose ``o`` lies in ``[0, Y)``.  ``None`` marks a tap that lands
    entirely outside the output.
    """
    s, windows = axis.stride, []
    for k in range(axis.kernel_size):
        first = k * axis.dilation - axis.offset  # output index of input 0
        lo = max(0, -(first // s))  # the first x with x*s + first >= 0
        hi = min(axis.input_size - 1, (axis.output_size - 1 - first) // s)
        if lo > hi:
            windows.append(None)
        else:
            windows.append((slice(lo, hi + 1), slice(first + lo * s, first + hi * s + 1, s)))
    return windows


def transposed_convolution(
    data: np.ndarray,
    weights: np.ndarray,
    axes: Sequence[AxisPlan],
    *,
    dtype: np.dtype,
    channels_last: bool = False,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """Compute the canonical transposed convolution (GEMM, then col2im).

    Parameters
    ----------
    data : ndarray
        ``(N, G*Ci, X...)``, or ``(N, X..., G*Ci)`` when ``channels_last``.
    weights : ndarray
        ``(G, Ci, Co, K...)``.
    axes : sequence of AxisPlan
        One per spatial axis; gives ``X``, ``K``, stride, dilation, offset and ``Y``.
    dtype : numpy dtype
        The accumulation dtype; the result has it.
    channels_last : bool
        Layout of ``data`` and of the result.
    bias : ndarray, optional
        ``(G*Co,)``, added to every output position.

    Returns
    -------
    ndarray
        ``(N, G*Co, Y...)``, or ``(N, Y..., G*Co)`` when ``channels_last``; never a
        view of an input.
    """
    groups, in_per_group, out_per_group = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    if channels_last:
        data = np.moveaxis(data, -1, 1)
    batch, spatial = data.shape[0], tuple(data.shape[2:])
    out_spatial = tuple(axis.output_size for axis in axes)
    taps = math.prod(kernel)

    columns_in = data.reshape(batch, groups, in_per_group, math.prod(spatial)).astype(dtype, copy=False)
    weight_rows = weights.reshape(groups, in_per_group, out_per_group * taps).astype(dtype, copy=False)
    out = np.zeros((batch, groups, out_per_group) + out_spatial, dtype)

    windows = [_tap_windows(axis) for axis in axes]
    live_taps = [
        (tap, tuple(w[k] for w, k in zip(windows, tap)))
        for tap in np.ndindex(*kernel)
        if all(w[k] is not None for w, k in zip(windows, tap))
    ]
    for g in range(groups):
        # (Co*taps, Ci) @ (N, Ci, P) -> (N, Co*taps, P): every tap's contribution at once.
        columns = np.matmul(weight_rows[g].T, columns_in[:, g])
        columns = columns.reshape((batch, out_per_group) + kernel + spatial)
        out_group = out[:, g]
        for tap, window in live_taps:
            source = (slice(None), slice(None)) + tap + tuple(src for src, _ in window)
            target = (slice(None), slice(None)) + tuple(dst for _, dst in window)
            out_group[target] += columns[source]

    out = out.reshape((batch, groups * out_per_group) + out_spatial)
    if bias is not None:
        out += bias.astype(dtype, copy=False).reshape((-1,) + (1,) * len(axes))
    if channels_last:
        out = np.ascontiguousarray(np.moveaxis(out, 1, -1))
    return out
