"""The tiling rule, per axis: which inputs each output tile reads, and its own plan.

Pure integer code (no NumPy, no Dask), so the rule can be checked exhaustively.  Along
one spatial axis with the canonical plan ``(X, K, s, d, offset, Y)`` (``K' = (K-1)*d+1``)::

    out[o] = full[o + offset],   full[t] = sum over x, k with t = x*s + k*d

so output ``o`` reads exactly the inputs ``x`` with ``t - K' < x*s <= t`` for
``t = o + offset``.  An output tile ``[start, stop)`` therefore reads the input window::

    x0 = max(0, ceil((start + offset - K' + 1) / s)),   x1 = min(X, floor((stop - 1 + offset) / s) + 1)

and is computed exactly by the canonical transposed convolution of that window alone
with the tile's own plan ``(x1 - x0, K, s, d, start + offset - x0*s, stop - start)``: the
same stride and dilation, the crop shifted by the window's start.  Every input outside
the window reaches no output of the tile, so each tile is owned by exactly one task and
nothing is added twice.  A tile whose window is empty (it lies wholly in the zeros of
an ``output_shape`` larger than natural, or of a negative pad) reads nothing.

The default output tiles follow the input chunks: input chunk ``[a, b)`` owns the
outputs ``[a*s, b*s)`` (clamped to ``[0, Y)``; outputs past ``X*s`` go on in tiles of the
last chunk's size), so regular input chunks give regular output chunks (as Zarr needs)
whose edges all sit at the same phase of the stride: every inner tile has one plan.
Such a tile reads its own chunk, ``floor((K' - 1 - offset) / s)`` inputs before it and
``ceil(offset / s)`` after it (:func:`halo`; one-sided when ``offset <= 0`` or
``offset >= K' - 1``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from .._plan.rules import AxisPlan

__all__ = ["default_chunks", "edges", "halo", "input_window", "pieces", "split_chunks",
           "tile_plan"]


def halo(axis: AxisPlan) -> tuple[int, int]:
    """Inputs before and after its own input chunk ``[a, b)`` that the default tile
    ``[a*s, b*s)`` also reads."""
    before = (axis.dilated_kernel_size - 1 - axis.offset) // axis.stride
    after = -(-axis.offset // axis.stride)
    return max(before, 0), max(after, 0)


def input_window(axis: AxisPlan, start: int, stop: int) -> tuple[int, int]:
    """The half-open input range ``[x0, x1)`` that outputs ``[start, stop)`` read.

    Empty (``x0 == x1``) when those outputs read no input at all.
    """
    first, last = start + axis.offset, stop - 1 + axis.offset
    x0 = max(0, -(-(first - axis.dilated_kernel_size + 1) // axis.stride))  # ceil
    x1 = min(axis.input_size, last // axis.stride + 1)  # floor, negatives included
    return (x0, x1) if x0 < x1 else (x0, x0)


def tile_plan(axis: AxisPlan, start: int, stop: int) -> tuple[AxisPlan | None, int, int]:
    """The plan computing outputs ``[start, stop)`` from their input window alone.

    Returns ``(plan, x0, x1)``: the window ``[x0, x1)`` and the plan of the canonical
    transposed convolution of ``input[x0:x1]`` whose result is ``out[start:stop]``;
    ``plan`` is None when the window is empty (the tile holds only zeros, or the bias).
    """
    x0, x1 = input_window(axis, start, stop)
    if x0 == x1:
        return None, x0, x1
    plan = AxisPlan(x1 - x0, axis.kernel_size, axis.stride, axis.dilation,
                    start + axis.offset - x0 * axis.stride, stop - start)
    return plan, x0, x1


def _sizes(bounds: Sequence[int]) -> tuple[int, ...]:
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


def edges(sizes: Sequence[int]) -> list[int]:
    """The chunk edges ``[0, c0, c0 + c1, ..., total]`` of chunk sizes ``sizes``."""
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    return bounds


def default_chunks(axis: AxisPlan, input_chunks: Sequence[int]) -> tuple[int, ...]:
    """Output chunk sizes along ``axis`` that follow the input chunks (the module's rule).

    Input chunk edge ``c`` becomes output edge ``c*s``, clamped to ``[0, Y]``; outputs
    past ``X*s`` go on in chunks of ``s`` times the last input chunk.
    """
    y, s = axis.output_size, axis.stride
    inner = edges(input_chunks)[1:]
    cuts = {0, y} | {min(c * s, y) for c in inner}
    step = s * input_chunks[-1] if input_chunks else y
    cut = axis.input_size * s + step
    while cut < y:
        cuts.add(cut)
        cut += step
    return _sizes(sorted(cuts))


def split_chunks(chunks: Sequence[int], parts: int, stride: int = 1,
                 offset: int = 0) -> tuple[int, ...]:
    """Each chunk cut into about ``parts`` pieces at edges ``e`` with ``(e + offset) % stride == 0``.

    A chunk too short for ``parts`` aligned pieces gets fewer; chunk edges already
    there are kept, so an aligned chunking stays aligned.
    """
    result = []
    bounds = edges(chunks)
    for a, b in zip(bounds, bounds[1:]):
        cuts = {a, b}
        for j in range(1, parts):
            cut = a + (b - a) * j // parts
            cut = (cut + offset) // stride * stride - offset  # down to an aligned edge
            if a < cut < b:
                cuts.add(cut)
        result += _sizes(sorted(cuts))
    return tuple(result)


def pieces(input_edges: Sequence[int], x0: int, x1: int) -> list[tuple[int, slice, slice]]:
    """The input chunks (edges ``input_edges``, see :func:`edges`) that cover ``[x0, x1)``:
    ``(chunk index, slice in the chunk, slice in the window)`` for each, in order."""
    found = []
    index = max(bisect.bisect_right(input_edges, x0) - 1, 0)
    while index < len(input_edges) - 1 and input_edges[index] < x1:
        a, b = input_edges[index], input_edges[index + 1]
        lo, hi = max(a, x0), min(b, x1)
        if lo < hi:
            found.append((index, slice(lo - a, hi - a), slice(lo - x0, hi - x0)))
        index += 1
    return found
