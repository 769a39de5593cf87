"""``disjoint``'s numba kernel set up for one layer (:mod:`..disjoint` says what it
computes; the kernel is ``templates/disjoint.py``, one compiled form per vector width
and dtype)."""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.machine import l2_cache_bytes
from ..disjoint_plan import CHANNEL_BLOCK, block_entries, disjoint_plan, packed_weights
from ..schedules import frozen_all
from .launch import array_kind, parallel_kernel

__all__ = ["DisjointLayer", "block_source", "disjoint_kernel"]


def block_source(lanes: int, entries: int) -> str:
    """Source of ``block``: ``valid`` (up to ``entries``) line vectors from entry
    ``first`` of the plan's tables on, which share their weight vectors, times 4 output
    channels (``count`` of them stored), summed over the ``ci`` input channels.

    Every accumulator is its own vector variable; per input channel the four channels'
    weight vectors are loaded once and each entry's input vector once: ``entries + 4``
    loads per ``4 * entries`` multiply-adds.  Entries past ``valid`` read the last
    valid one's inputs and are not stored."""
    channels = range(CHANNEL_BLOCK)
    lines = ["def block(scratch, weights, out, ci, e_channel, w, w1, w2, w3, count,",
             "          entry_reads, entry_places, entry_columns, first, valid, base, at,",
             "          plane_out):"]
    lines += [f"    e{r} = base + entry_reads[first + min({r}, valid - 1)]"
              for r in range(entries)]
    lines += [f"    a{c}_{r} = vector_zero(scratch, {lanes})" for c in channels
              for r in range(entries)]
    lines += ["    for i in range(ci):",
              f"        wi = w + i * {lanes}"]
    lines += [f"        w{c}_ = vector_load(weights, wi + {offset}, {lanes})"
              for c, offset in zip(channels, ("0", "w1", "w2", "w3"))]
    lines.append("        x_at = i * e_channel")
    for r in range(entries):
        lines.append(f"        x = vector_load(scratch, e{r} + x_at, {lanes})")
        lines += [f"        a{c}_{r} = vector_fma(x, w{c}_, a{c}_{r})" for c in channels]
    for r in range(entries):
        indent = "    "
        if r:
            lines.append(f"    if valid > {r}:")
            indent = "        "
        lines += [f"{indent}p = at + entry_places[first + {r}]",
                  f"{indent}columns = entry_columns[first + {r}]",
                  f"{indent}vector_store_first(out, p, columns, a0_{r})"]
        for c in channels[1:]:
            lines += [f"{indent}if count > {c}:",
                      f"{indent}    vector_store_first(out, p + {c} * plane_out, columns, "
                      f"a{c}_{r})"]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def disjoint_kernel(lanes: int, entries: int):
    """The disjoint kernel for vectors of ``lanes`` elements and blocks of ``entries``
    line vectors (compiled on first use)."""
    from . import vectors
    from .codegen import compile_source, compile_template

    block = compile_source(block_source(lanes, entries), "block", inline=True)
    return compile_template("disjoint", dict(
        np=np, lanes=lanes, ENTRIES=entries, block=block, vector_load=vectors.vector_load,
        vector_store_first=vectors.vector_store_first))["kernel"]


class DisjointLayer:
    """The disjoint kernel set up for one channels-first layer: calling it with data
    ``(N, G*Ci, X...)`` fills a C-contiguous ``out`` ``(N, G*Co, Y...)`` of ``dtype``.
    ``derived``: the filter's memo, where its weight vectors are kept."""

    __slots__ = ("_dtype", "_kernel", "_vectors", "_tables", "_items", "_scratch",
                 "_threads", "_addresses")

    def __init__(self, batch, weights, axes, dtype, target, derived: dict):
        lanes = target.lanes(dtype)
        self._dtype = np.dtype(dtype)
        plan = disjoint_plan(batch, weights.shape, axes, lanes, target.threads,
                             self._dtype.itemsize, l2_cache_bytes())
        key = ("vectors", lanes, tuple(a.kernel_size for a in axes), plan.patterns.tobytes())
        self._vectors = derived.get(key)
        if self._vectors is None:
            derived[key] = self._vectors = packed_weights(weights, axes, plan, dtype)
        self._kernel = disjoint_kernel(lanes, block_entries(lanes, self._dtype.itemsize))
        self._tables = frozen_all(*plan.tables())
        self._items = plan.items
        self._scratch = plan.scratch
        # The layers it takes are memory-bound: all threads (measured planning also times
        # it on one).
        self._threads = target.threads
        self._addresses: dict = {}  # (:func:`.launch.parallel_kernel`'s ``kept``)

    def __call__(self, data, out) -> None:
        """Fill ``out`` (channels first, the sums' dtype) from ``data``."""
        if self._items == 0 or out.size == 0:
            return
        (source,) = frozen_all(np.ascontiguousarray(data, self._dtype).reshape(-1).view())
        result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        flat = result.reshape(-1)
        # Only the data and the result vary in type from call to call.
        key = (array_kind(source), array_kind(flat))
        parallel_kernel(self._kernel, (source, self._vectors, flat, *self._tables),
                        self._items, self._threads, scratch=(3, self._scratch, self._dtype),
                        kept=(self._addresses, key))
        if result is not out:
            np.copyto(out, result)
