"""Numba ``direct`` on long 1-D lines: the plane kernel over segments of the output.

One line's window holds every input channel's whole line (HiFi-GAN 256->128 L65536:
64 MB, far out of cache) and is one piece of work (one thread;
:func:`convtranspose._kernels.schedules.line_segmented`).  Segment ``[y0, y1)`` of the
output reads inputs ``[x0, x1)`` only, and is the layer ``AxisPlan(x1 - x0, K, s, d,
offset + y0 - x0 * s, y1 - y0)`` of that slice; the segments (a multiple of the stride
long) run on the threads in turn, each writing its own slice of the output.

The inner segments share one plan, so a line of hundreds of segments has a few
distinct plans (the first and last segments differ by the padding and cropping of
the ends).  :class:`LineSegments` sets up each plan's plane kernel once
(:func:`.planes.plane_runner`: tables, schedule, compiled kernel) and keeps it, so
that a segment costs its kernel call alone, and a prepared layer's call sets up
nothing.  Channels first, the kernel reads the segment's inputs and writes its outputs
where they are (the whole line's channel steps in its tables); otherwise the segment's
data is copied out and, unless it is a contiguous run of the output, its result copied
in.  Setting the kernel up for every segment and the two copies took 9-12% of HiFi-GAN
256->128 L65536's call (``benchmarks/results/line-segments-zen4.json``).
"""

from __future__ import annotations

import threading

import numpy as np

from ..._plan.geometry import three_axes
from ..._plan.rules import AxisPlan
from ..._runtime.threads import parallel_for
from ..schedules import KEEP, line_segment_inputs
from .modes import store_mode
from .planes import plane_runner, plane_source, stored


def _segment_plans(axis: AxisPlan, ci: int) -> tuple[tuple, ...]:
    """Per segment ``(y0, y1, x0, x1, plan)``: its outputs, the inputs they read and its
    own layer (None where no input reaches the segment)."""
    size, kernel, stride = axis.input_size, axis.kernel_size, axis.stride
    reach = (kernel - 1) * axis.dilation  # output y reads inputs (y + offset - reach) / s on
    length = stride * line_segment_inputs(ci, stride)
    segments = []
    for y0 in range(0, axis.output_size, length):
        y1 = min(axis.output_size, y0 + length)
        x0 = min(size, max(0, -(-(y0 + axis.offset - reach) // stride)))
        x1 = max(x0, min(size, (y1 - 1 + axis.offset) // stride + 1))
        plan = None if x1 == x0 else AxisPlan(x1 - x0, kernel, stride, axis.dilation,
                                              axis.offset + y0 - x0 * stride, y1 - y0)
        segments.append((y0, y1, x0, x1, plan))
    return tuple(segments)


class LineSegments:
    """A long 1-D layer's plane kernel over its segments, each distinct segment plan's
    kernel set up on first use and kept.

    Parameters
    ----------
    weights : ndarray
        ``(G, Ci, Co, K)``.
    axis : AxisPlan
        The line's axis.
    dtype : dtype
        The sums' type.
    target, threads
        The machine and the threads the segments are shared among.
    channels_last : bool
        The data's and the output's layout (``(N, X, C)`` or ``(N, C, X)``).
    strided : bool
        Whether the plane kernel reads and writes with the channel stride
        (:func:`convtranspose._kernels.schedules.plane_strided`).
    derived : dict
        The filter's memo, where the plane kernel keeps its reordered weights.
    bias : ndarray, optional
        ``(G*Co,)``, added as float16 or bfloat16 results are rounded (as the plane
        kernel takes it).
    """

    def __init__(self, weights, axis, dtype, target, threads, channels_last, strided, derived,
                 bias=None):
        self._weights, self._dtype, self._target = weights, dtype, target
        self._threads, self._channels_last, self._strided = threads, channels_last, strided
        self._derived, self._bias = derived, bias
        self._segments = _segment_plans(axis, weights.shape[1])
        self._runners: dict = {}
        self._lock = threading.Lock()

    def __call__(self, data: np.ndarray, out: np.ndarray) -> None:
        """Fill ``out`` (the layout of ``data``, C-contiguous) with the layer's result."""
        mode = store_mode(out.dtype, self._dtype)
        # Channels first, the kernel reads and writes each segment in place: the flat
        # buffers from its first input and output on, with the whole line's channel steps.
        in_place = (not self._channels_last and data.dtype == self._dtype
                    and data.flags.c_contiguous)

        def work(first, stop):
            for i in range(first, stop):
                self._segment(data, out, mode, in_place, *self._segments[i])

        work(0, 1)  # fills `derived` (the reordered weights) before the threads share it
        if len(self._segments) > 1:
            parallel_for(lambda first, stop: work(first + 1, stop + 1),
                         len(self._segments) - 1, self._threads)

    def _segment(self, data, out, mode, in_place, y0, y1, x0, x1, plan) -> None:
        channels_last, dtype, bias = self._channels_last, self._dtype, self._bias
        if in_place and plan is not None:
            run = self._runner(data.shape[0], plan, False, mode, KEEP,
                               (data.shape[-1], out.shape[-1]))
            run(data.reshape(-1)[x0:], stored(out, mode)[y0:])
            return
        into = out[..., y0:y1, :] if channels_last else out[..., y0:y1]
        if plan is None:  # no input reaches it: zero sums (plus the bias when rounding here)
            sums = np.zeros(into.shape, dtype)
            if bias is not None and out.dtype != dtype:
                sums += np.asarray(bias, dtype).reshape((-1,) if channels_last else (-1, 1))
            into[...] = sums
            return
        part = data[..., x0:x1, :] if channels_last else data[..., x0:x1]
        source, pairs, load_mode = plane_source(part, self._weights, dtype, self._derived,
                                                self._target)
        run = self._runner(part.shape[0], plan, pairs, mode, load_mode)
        # One sample's channels-last segment is a C-contiguous run of the output.
        result = into if into.flags.c_contiguous else np.empty(into.shape, out.dtype)
        run(source, stored(result, mode))
        if result is not into:
            into[...] = result

    def _runner(self, batch, plan, pairs, mode, load_mode, channel_steps=None):
        key = (batch, plan, pairs, mode, load_mode, channel_steps)
        run = self._runners.get(key)
        if run is None:
            with self._lock:
                run = self._runners.get(key)
                if run is None:
                    run = self._runners[key] = plane_runner(
                        batch, self._weights, three_axes((plan,)), self._dtype, self._target,
                        1, self._strided, self._derived, pairs, mode, self._bias, load_mode,
                        channel_steps)
        return run
