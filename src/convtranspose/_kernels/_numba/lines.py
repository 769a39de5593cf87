"""Compiled adapters that let the requantization kernels of output lines run on numba's
native threads (:func:`.launch.parallel_kernel`).

The quantized dialects' rows kernels (:mod:`.requantize`) take the rows of sums to
requantize as ``(starts, run)``: rows ``[start, start + run)`` for each of ``starts``,
the form in which ``direct-blocked``'s threads hand over the output lines each has just
summed.  A native parallel loop calls a compiled kernel with ``(first, stop)`` and
cannot call Python in between, so each use gets a small generated kernel instead of a
Python closure: :func:`span_kernel` for a whole pass, :func:`fused_lines_kernel` for the
sums and their requantization, line by line, on one thread.  On the pool, a fork-join
of its Python threads cost 76-93 us back to back on an AMD Zen 4 against 7-8 us for
numba's (``benchmarks/results/native-threads-zen4.json``).
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from .kernel_cache import cached_njit

__all__ = ["fused_lines_kernel", "line_starts", "passes_kernel", "span_kernel"]


@cached_njit(nogil=True)
def line_starts(order, out1, out2, pixels, first, stop):  # pragma: no cover - compiled
    """Where ``direct-blocked``'s output lines ``[first, stop)`` start in its
    channels-last output, in pixels: line ``i`` is output ``(n, y1, y2)`` with ``n = i
    // (out1 * out2)`` and ``y1``, ``y2`` the ``i``-th in the kernel's phase order
    (``order``: axis 1's outputs, then axis 2's), each line ``pixels`` long."""
    starts = np.empty(stop - first, np.int64)
    for i in range(first, stop):
        y1 = order[(i // out2) % out1]
        y2 = order[out1 + i % out2]
        starts[i - first] = ((i // (out1 * out2) * out1 + y1) * out2 + y2) * pixels
    return starts


def _parameters(prefix: str, count: int) -> str:
    return ", ".join(f"{prefix}{i}" for i in range(count))


@kept("compiled kernels", maxsize=None)
def span_kernel(rows, arity: int):
    """``span(*arguments, first, stop)``: ``rows(*arguments, starts, run)`` (a compiled
    rows kernel of ``arity`` arguments before ``starts`` and ``run``) on rows ``[first,
    stop)``, as one start."""
    from .codegen import compile_source

    arguments = _parameters("a", arity)
    source = (f"def span({arguments}, first, stop):\n"
              f"    starts = np.empty(1, np.int64)\n"
              f"    starts[0] = first\n"
              f"    rows({arguments}, starts, stop - first)\n")
    return compile_source(source, "span", names={"rows": rows})


@kept("compiled kernels", maxsize=None)
def fused_lines_kernel(kernel, arity: int, rows, rows_arity: int):
    """``fused_lines(*arguments, *rows_arguments, order, out1, out2, pixels, first,
    stop)``: ``kernel(*arguments, first, stop)`` (a ``direct-blocked`` pass over output
    lines ``[first, stop)``, ``arity`` arguments before the bounds), then, on the same
    thread while its sums are in its caches, ``rows(*rows_arguments, starts, pixels)``
    (a rows kernel of ``rows_arity`` arguments) on those lines (:func:`line_starts`)."""
    from .codegen import compile_source

    arguments, rows_arguments = _parameters("a", arity), _parameters("r", rows_arity)
    source = (f"def fused_lines({arguments}, {rows_arguments}, order, out1, out2, pixels,"
              f" first, stop):\n"
              f"    kernel({arguments}, first, stop)\n"
              f"    rows({rows_arguments}, line_starts(order, out1, out2, pixels, first,"
              f" stop), pixels)\n")
    return compile_source(source, "fused_lines", names={
        "kernel": kernel, "rows": rows, "line_starts": line_starts})


@kept("compiled kernels", maxsize=None)
def passes_kernel(kernel, arity: int):
    """``passes(*arguments, w_step, out_step, bias_step, lines, first, stop)``: a
    ``direct-blocked`` pass kernel (``arity`` arguments before the bounds: data,
    weights, output, rounded output, bias, then the rest) over units ``[first, stop)``
    of several passes of equal width one after another, ``lines`` units each: pass
    ``p``'s weights, outputs and bias start ``p`` times ``w_step``, ``out_step`` and
    ``bias_step`` elements further on.  Pieces of whole passes then run on numba's
    threads, each pass's weights read by one thread for all its lines."""
    from .codegen import compile_source

    rest = _parameters("a", arity)[len("a0, a1, a2, a3, a4, "):]
    source = (f"def passes(a0, a1, a2, a3, a4, {rest}, w_step, out_step, bias_step, lines,"
              f" first, stop):\n"
              f"    p = first // lines\n"
              f"    while p * lines < stop:\n"
              f"        low = max(first, p * lines) - p * lines\n"
              f"        high = min(stop, (p + 1) * lines) - p * lines\n"
              f"        kernel(a0, a1[p * w_step:], a2[p * out_step:], a3[p * out_step:],"
              f" a4[p * bias_step:], {rest}, low, high)\n"
              f"        p += 1\n")
    return compile_source(source, "passes", names={"kernel": kernel})
