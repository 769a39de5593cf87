"""``depthwise`` along the lines of channels-first planes: two axes, stride 1 on both
(:func:`~convtranspose._kernels.depthwise_schedule.takes_lines`).

Each (sample, channel) plane is summed on its own, in blocks of 8 output rows times one
vector of outputs along the line, from shifted copies of the plane's input in the
calling thread's scratch (the kernel is ``templates/depthwise_lines.py``).  The channel
chunks of :mod:`.depthwise` would need the data and the result transposed between the
caller's planes and vectors of channels; here both stay as they are.  One compiled
kernel per vector width (numba adds the dtype) serves every such layer.
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..depthwise_schedule import lines_sizes
from ..schedules import frozen_all
from .direct import direct_threads
from .launch import parallel_kernel

__all__ = ["LinesLayer", "lines_kernel"]


@kept("compiled kernels", maxsize=None)
def lines_kernel(lanes: int):
    """The lines kernel for vectors of ``lanes`` elements (compiled on first use)."""
    from . import vectors
    from .codegen import compile_template

    names = ("vector_fma", "vector_load", "vector_load_first", "vector_splat_at",
             "vector_store", "vector_store_first", "vector_zero")
    return compile_template("depthwise_lines", dict(
        np=np, lanes=lanes, **{name: getattr(vectors, name) for name in names}))["kernel"]


class LinesLayer:
    """The lines kernel set up for one layer (the same contract as
    :class:`~.depthwise.DepthwiseLayer`): calling it fills an output from data."""

    __slots__ = ("_dtype", "_kernel", "_weights", "_sizes", "_items", "_scratch",
                 "_threads")

    def __init__(self, batch, weights, axes, dtype, target):
        groups, _, multiplier = weights.shape[:3]
        lanes = target.lanes(dtype)
        sizes, self._scratch = lines_sizes(groups, multiplier, axes, lanes)
        self._dtype = np.dtype(dtype)
        self._kernel = lines_kernel(lanes)
        (self._weights, self._sizes) = frozen_all(
            np.ascontiguousarray(weights, dtype).reshape(-1), np.array(sizes, np.int64))
        self._items = batch * groups
        self._threads = direct_threads(batch, weights.shape, axes, target)

    def __call__(self, data, out) -> None:
        """Fill ``out`` (channels first, the sums' dtype) from ``data``."""
        (source,) = frozen_all(np.ascontiguousarray(data, self._dtype).reshape(-1).view())
        result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        parallel_kernel(self._kernel, (source, self._weights, result.reshape(-1), self._sizes),
                        self._items, self._threads, scratch=(3, self._scratch, self._dtype))
        if result is not out:
            np.copyto(out, result)
