"""``depthwise`` along the lines of channels-first planes of two axes
(:func:`~convtranspose._kernels.depthwise_schedule.takes_lines`).

Each (sample, channel) plane is summed on its own, in blocks of 8 output rows of one
stride phase times one vector of outputs along the line, from copies of the plane's
input in the calling thread's scratch that hold, at each output, the input one of its
taps reads, or, with stride 1 along the line, from the staged plane itself, each tap at
its shift, in blocks unrolled over the row taps (the kernel is
``templates/depthwise_lines.py``, its tables
:class:`~convtranspose._kernels.depthwise_schedule.LinesPlan`).  The channel chunks of
:mod:`.depthwise` would need the data and the result transposed between the caller's
planes and vectors of channels; here both stay as they are.  One compiled kernel per
vector width and unrolled tap count (numba adds the dtype) serves every such layer.
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..depthwise_schedule import DEPTHWISE_ACCUMULATORS, LinesPlan, lines_plan
from ..schedules import frozen_all
from .launch import array_kind, parallel_kernel

__all__ = ["LinesLayer", "lines_kernel", "unrolled_rows_source", "weight_vectors"]


def unrolled_rows_source(lanes: int, taps: int) -> str:
    """Source of ``unrolled_rows``: the ``count`` output rows ``p1 + q * s1`` of one
    plane's phase of ``taps`` (at least one) row taps, in blocks of 8 rows x one vector
    of ``lanes`` along the line.

    The phase's taps (``row_taps``/``row_shifts`` from ``first``) read window rows one
    apart, falling, the last from row ``low``: per tap ``m`` of the line the block
    loads the taps' weight vectors once, then each window row once, multiplying it
    into every output row it reaches; accumulators and weight vectors stay in
    registers.  The window is the stage (from ``stage``, rows ``stage_line`` apart);
    the line's tap ``m`` reads it from ``reads[m * lanes]`` on (the line's stride is
    1: ``reads`` holds each tap's shift).

    One function per tap count, and a kernel holds one (its phases all have that
    many taps): a kernel holding two such blocks (a branch per tap count, in the
    function or around two of them), or reading the taps' offsets from a table it
    made, took 1.4x as long on 7x14 planes (``depthwise-lines-xeon.json``,
    ``unrolled_rows``).
    """
    rows = DEPTHWISE_ACCUMULATORS
    lines = ["def unrolled_rows(scratch, weights, out, stage, stage_line, reads, weights_at,",
             "                  row_taps, row_shifts, first, taps, out_at, p1, s1, count, out2,",
             "                  line):"]
    lines += [f"    low = row_shifts[first + {taps - 1}]",
              f"    for q0 in range(0, count, {rows}):",
              f"        valid = min({rows}, count - q0)",
              f"        for x2 in range(0, line, {lanes}):"]
    lines += [f"            a{q} = vector_zero(scratch, {lanes})" for q in range(rows)]
    lines += ["            for m in range(taps):",
              f"                p = stage + (low + q0) * stage_line + reads[m * {lanes}] + x2"]
    lines += [f"                w{t} = vector_load(weights, weights_at + (row_taps[first + "
              f"{t}] * taps + m) * {lanes}, {lanes})" for t in range(taps)]
    for j in range(rows + taps - 1):
        lines.append(f"                v = vector_load(scratch, p + {j} * stage_line, {lanes})")
        # Tap t reads window row q + taps - 1 - t for output row q.
        reached = [(j - taps + 1 + t, t) for t in range(taps) if 0 <= j - taps + 1 + t < rows]
        lines += [f"                a{q} = vector_fma(v, w{t}, a{q})" for q, t in reached]
    lines += [f"            columns = min({lanes}, out2 - x2)",
              "            o = out_at + (p1 + q0 * s1) * out2 + x2",
              "            vector_store_first(out, o, columns, a0)"]
    for q in range(1, rows):
        lines += [f"            if valid > {q}:",
                  f"                vector_store_first(out, o + {q} * s1 * out2, columns, a{q})"]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def lines_kernel(lanes: int, unrolled_taps: int = 0):
    """The lines kernel for vectors of ``lanes`` elements (compiled on first use), in the
    form of a plan's ``unrolled_taps``
    (:class:`~convtranspose._kernels.depthwise_schedule.LinesPlan`): its blocks
    unrolled over that many row taps, or, for 0, one loop over the taps."""
    from . import vectors
    from .codegen import compile_source, compile_template

    names = ("vector_fma", "vector_interleave", "vector_load", "vector_load_first",
             "vector_load_spread", "vector_store", "vector_store_first", "vector_zero")
    rows = (compile_source(unrolled_rows_source(lanes, unrolled_taps), "unrolled_rows",
                           inline=True) if unrolled_taps else None)
    return compile_template("depthwise_lines", dict(
        np=np, lanes=lanes, UNROLLED=unrolled_taps, unrolled_rows=rows,
        **{name: getattr(vectors, name) for name in names}))["kernel"]


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

    __slots__ = ("_dtype", "_kernel", "_tables", "_items", "_scratch", "_threads",
                 "_addresses")

    def __init__(self, batch, weights, axes, dtype, target):
        groups, _, multiplier = weights.shape[:3]
        plan = lines_plan(groups, multiplier, axes, target.lanes(dtype))
        self._dtype = np.dtype(dtype)
        self._kernel = lines_kernel(target.lanes(dtype), plan.unrolled_taps)
        self._tables = frozen_all(
            weight_vectors(weights, plan, dtype), np.array(plan.sizes, np.int64),
            plan.row_first, plan.row_taps, plan.row_shifts, plan.column_reads)
        self._scratch = plan.scratch
        self._items = batch * groups
        self._threads = target.threads  # all: see ..depthwise's docstring
        self._addresses: dict = {}  # (:func:`.launch.parallel_kernel`'s ``kept``)

    def __call__(self, data, out) -> None:
        """Fill ``out`` (channels first, the sums' dtype) from ``data``."""
        (source,) = frozen_all(np.ascontiguousarray(data, self._dtype).reshape(-1).view())
        result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        weights, *tables = self._tables
        flat = result.reshape(-1)
        # Only the data and the result vary in type from call to call.
        kept = (self._addresses, (array_kind(source), array_kind(flat)))
        parallel_kernel(self._kernel, (source, weights, flat, *tables), self._items,
                        self._threads, scratch=(3, self._scratch, self._dtype), kept=kept)
        if result is not out:
            np.copyto(out, result)
