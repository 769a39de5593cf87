"""``depthwise`` along the lines of channels-first planes of two axes
(:func:`~convtranspose._kernels.depthwise_schedule.takes_lines`).

Each (sample, channel) plane is summed on its own, in blocks of 8 output rows of one
stride phase times one vector of outputs along the line, from copies of the plane's
input in the calling thread's scratch that hold, at each output, the input one of its
taps reads (the kernel is ``templates/depthwise_lines.py``, its tables
:class:`~convtranspose._kernels.depthwise_schedule.LinesPlan`).  The channel
chunks of :mod:`.depthwise` would need the data and the result transposed between the
caller's planes and vectors of channels; here both stay as they are.  One compiled
kernel per vector width (numba adds the dtype) serves every such layer.
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..depthwise_schedule import LinesPlan, lines_plan
from ..schedules import frozen_all
from .direct import direct_threads
from .launch import parallel_kernel

__all__ = ["LinesLayer", "lines_kernel", "weight_vectors"]


@kept("compiled kernels", maxsize=None)
def lines_kernel(lanes: int):
    """The lines kernel for vectors of ``lanes`` elements (compiled on first use)."""
    from . import vectors
    from .codegen import compile_template

    names = ("vector_fma", "vector_interleave", "vector_load", "vector_load_first",
             "vector_load_spread", "vector_store", "vector_store_first", "vector_zero")
    return compile_template("depthwise_lines", dict(
        np=np, lanes=lanes, **{name: getattr(vectors, name) for name in names}))["kernel"]


def weight_vectors(weights, plan: LinesPlan, dtype) -> np.ndarray:
    """The filter ``(G, 1, M, K1, K2)`` as the kernel's weight vectors ``(G * M, K1,
    taps, lanes)``, flat: lane ``l`` of window copy ``m`` holds the tap of the last axis
    that lane's phase meets there (:attr:`LinesPlan.column_taps`), zero for none."""
    channels, k1, k2 = weights.shape[0] * weights.shape[2], weights.shape[3], weights.shape[4]
    padded = np.zeros((channels, k1, k2 + 1), dtype)  # tap -1: the zero
    padded[:, :, :k2] = np.asarray(weights, dtype).reshape(channels, k1, k2)
    return np.take(padded, plan.column_taps.reshape(-1), axis=2).reshape(-1)


class LinesLayer:
    """The lines kernel set up for one layer (the same contract as
    :class:`~.depthwise.DepthwiseLayer`): calling it fills an output from data."""

    __slots__ = ("_dtype", "_kernel", "_tables", "_items", "_scratch", "_threads")

    def __init__(self, batch, weights, axes, dtype, target):
        groups, _, multiplier = weights.shape[:3]
        plan = lines_plan(groups, multiplier, axes, target.lanes(dtype))
        self._dtype = np.dtype(dtype)
        self._kernel = lines_kernel(target.lanes(dtype))
        self._tables = frozen_all(
            weight_vectors(weights, plan, dtype), np.array(plan.sizes, np.int64),
            plan.row_first, plan.row_taps, plan.row_shifts, plan.column_reads)
        self._scratch = plan.scratch
        self._items = batch * groups
        self._threads = direct_threads(batch, weights.shape, axes, target)

    def __call__(self, data, out) -> None:
        """Fill ``out`` (channels first, the sums' dtype) from ``data``."""
        (source,) = frozen_all(np.ascontiguousarray(data, self._dtype).reshape(-1).view())
        result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        weights, *tables = self._tables
        parallel_kernel(self._kernel, (source, weights, result.reshape(-1), *tables),
                        self._items, self._threads, scratch=(3, self._scratch, self._dtype))
        if result is not out:
            np.copyto(out, result)
