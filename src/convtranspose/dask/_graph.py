"""The Dask graph of one transposed convolution: one task per output tile.

Each task receives the input blocks its tile's window overlaps (:mod:`._tiling`), the
filter's key and the bias's key, never the arrays themselves: the filter is one node of
the graph (a single-chunk array), shipped to each worker once and shared by every task
there.  The task assembles the window (a view when one block holds it) and computes the
tile with the library's canonical path, :func:`convtranspose._execute.transposed.transposed_convolution`,
on the tile's own per-axis plans: the same code a single-machine call runs.

Tiles of one layer repeat one problem (every inner tile of the default chunking has
one window shape and one plan), so each process keeps, per layer and tile problem, the
prepared call a repeated single-machine call keeps
(:func:`convtranspose._execute.transposed.prepare_call`: the algorithm chosen and the
filter set up once) and adds the bias to its sums as the canonical path does: the
same bits, without the choice and the filter memo on every tile.  The calls live in
the process (:data:`tile_calls`), not in the graph: a task shipped to a worker on its
own finds the calls the worker's earlier tasks of that layer made.  Each call checks
the filter it is given against its own copy (another filter: the canonical path).
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from dask.utils import parse_bytes

from .._choose import planning
from .._dtypes import accumulation_dtype
from .._execute.rounded_calls import half_preparable, kept_result, prepare_kept_call
from .._execute.transposed import preparable, transposed_convolution
from .._frontends.specs import canonical_weights
from .._plan.rules import AxisPlan, ConvTransposePlan
from .._runtime.target import num_threads
from . import _tiling

__all__ = ["TILE_CALLS_KEPT", "default_output_chunks", "tile_calls", "tiled"]

#: Prepared calls of tile problems, in this process: ``(layer name, window shape, tile
#: axes)`` -> ``(call or None, planning generation)`` (None: the tile's algorithm has
#: none), the most recently made last.  A 3-D layer's tiles have at most 27 problems
#: per batch chunk size (first, inner and last along each axis).
TILE_CALLS_KEPT = 32
tile_calls: dict = {}
_tile_calls_lock = threading.Lock()


@dataclass(frozen=True)
class _Layer:
    """What every task of one layer shares (small: the filter travels as its own key);
    ``name`` is the layer's graph name, which keys its tiles' prepared calls."""

    plan: ConvTransposePlan
    dtype: np.dtype
    threads: int
    name: str = ""


@dataclass(frozen=True)
class _Tile:
    """One output tile: its shape, its window's shape and per-axis plans (None: the
    window is empty), and where each input block's slice goes in the window."""

    shape: tuple[int, ...]
    axes: tuple[AxisPlan, ...] | None
    window_shape: tuple[int, ...]
    placements: tuple[tuple[tuple[slice, ...], tuple[slice, ...]], ...]


def _window(blocks: list[np.ndarray], tile: _Tile) -> np.ndarray:
    """The tile's input window from the blocks that overlap it (a view when one does)."""
    if len(blocks) == 1:
        return blocks[0][tile.placements[0][0]]
    window = np.empty(tile.window_shape, blocks[0].dtype)
    for block, (source, destination) in zip(blocks, tile.placements):
        window[destination] = block[source]
    return window


def _compute_tile(blocks, filter, bias, layer: _Layer, tile: _Tile) -> np.ndarray:
    """The output tile, exactly as the whole layer's single-machine call computes it."""
    window = _window(blocks, tile)
    weights = canonical_weights(layer.plan, filter)
    channels_last = layer.plan.channels_last
    with num_threads(layer.threads):
        if not (half_preparable(window.dtype, filter.dtype)
                or preparable(window.dtype, filter.dtype)):
            return transposed_convolution(
                window, weights, tile.axes, dtype=accumulation_dtype(layer.dtype),
                channels_last=channels_last, bias=bias, result_dtype=layer.dtype)
        key = (layer.name, window.shape, tile.axes)
        call, generation = tile_calls.get(key, (None, -1))
        result = None
        if call is not None and generation == planning.generation:
            result = kept_result(call, window, filter, None, bias, channels_last,
                                 len(tile.axes))
        if result is None:
            result = transposed_convolution(
                window, weights, tile.axes, dtype=accumulation_dtype(layer.dtype),
                channels_last=channels_last, bias=bias, result_dtype=layer.dtype)
        if generation != planning.generation:
            # After the canonical path has run (and planned) this tile problem once; kept
            # without a call too, so the choice is not made again on every tile.
            def canonical(kept):
                return canonical_weights(layer.plan, kept)

            # (a half-precision tile's call is prepared with the layer's bias, which joins
            # its sums before the rounding)
            _keep(key, prepare_kept_call(window, filter, bias, canonical, tile.axes,
                                         channels_last))
        return result


def _keep(key: tuple, call) -> None:
    with _tile_calls_lock:
        tile_calls.pop(key, None)
        while len(tile_calls) >= TILE_CALLS_KEPT:
            del tile_calls[next(iter(tile_calls))]
        tile_calls[key] = (call, planning.generation)


def _empty_tile(bias, layer: _Layer, tile: _Tile) -> np.ndarray:
    """A tile no input reaches: zeros plus the bias, summed and rounded as a computed
    tile would be (so a negative-zero bias gives +0, as ``0.0 + -0.0`` does)."""
    if bias is None or not math.prod(tile.shape):
        return np.zeros(tile.shape, layer.dtype)
    accumulation = accumulation_dtype(layer.dtype)
    spatial = len(tile.shape) - 2
    shape = (-1,) if layer.plan.channels_last else (-1,) + (1,) * spatial
    tile_sums = np.zeros(tile.shape, accumulation)
    tile_sums += bias.astype(accumulation).reshape(shape)
    return tile_sums.astype(layer.dtype)


def axes_of(plan: ConvTransposePlan, ndim: int) -> tuple[int, list[int]]:
    """The channel axis and the spatial axes of data and output (same layout)."""
    if plan.channels_last:
        return ndim - 1, list(range(1, ndim - 1))
    return 1, list(range(2, ndim))


def default_output_chunks(plan: ConvTransposePlan, data_chunks, itemsize: int,
                          limit: int | None = None) -> tuple[tuple[int, ...], ...]:
    """The result's chunks: input chunk ``[a, b)`` gives outputs ``[a*s, b*s)``
    (:func:`._tiling.default_chunks`), split further (at stride multiples, the longest
    axis first) until one output chunk holds at most ``limit`` bytes (Dask's
    ``array.chunk-size`` by default)."""
    ndim = len(plan.output_shape)
    channel, spatial = axes_of(plan, ndim)
    limit = parse_bytes(dask.config.get("array.chunk-size")) if limit is None else limit
    chunks = [None] * ndim
    chunks[0] = tuple(data_chunks[0])
    chunks[channel] = (plan.out_channels,)
    units = {0: 1}
    for position, axis in zip(spatial, plan.axes):
        chunks[position] = _tiling.default_chunks(axis, data_chunks[position])
        units[position] = axis.stride
    parts = dict.fromkeys(units, 1)

    def longest(position):
        return max(chunks[position], default=0) / parts[position]

    while itemsize * plan.out_channels * math.prod(map(longest, units)) > limit:
        splittable = [p for p in units if longest(p) >= 2 * units[p]]
        if not splittable:
            break
        position = max(splittable, key=lambda p: longest(p) / units[p])
        parts[position] *= 2
    for position, count in parts.items():
        if count > 1:
            chunks[position] = _tiling.split_chunks(chunks[position], count, units[position])
    return tuple(chunks)


def _axis_tiles(plan: ConvTransposePlan, data_chunks, out_chunks):
    """Per output axis but the channel one: for each output chunk, ``(tile plan or None,
    window length, [(input chunk, slice in it, slice in the window)])``."""
    ndim = len(out_chunks)
    channel, spatial = axes_of(plan, ndim)
    per_axis = {}
    input_edges = _tiling.edges(data_chunks[0])
    per_axis[0] = [(None, n1 - n0, _tiling.pieces(input_edges, n0, n1))
                   for n0, n1 in itertools.pairwise(_tiling.edges(out_chunks[0]))]
    for position, axis in zip(spatial, plan.axes):
        input_edges = _tiling.edges(data_chunks[position])
        tiles = []
        for start, stop in itertools.pairwise(_tiling.edges(out_chunks[position])):
            tile_axis, x0, x1 = _tiling.tile_plan(axis, start, stop)
            tiles.append((tile_axis, x1 - x0, _tiling.pieces(input_edges, x0, x1)))
        per_axis[position] = tiles
    channels = plan.in_channels
    per_axis[channel] = [(None, channels, [(0, slice(None), slice(None))])]
    return [per_axis[position] for position in range(ndim)]


def tiled(plan: ConvTransposePlan, data: da.Array, filter: da.Array, bias: da.Array | None,
          out_chunks, threads: int) -> da.Array:
    """The lazy result of ``plan`` on ``data`` (channels in one chunk), ``filter`` and
    ``bias`` (single-chunk arrays), with chunks ``out_chunks`` (channels in one chunk)."""
    dtype = data.dtype
    name = "conv-transpose-" + tokenize(data.name, filter.name, None if bias is None
                                        else bias.name, repr(plan), out_chunks, threads)
    layer = _Layer(plan, dtype, threads, name)
    filter_key = (filter.name,) + (0,) * filter.ndim
    bias_key = None if bias is None else (bias.name, 0)
    channel, spatial = axes_of(plan, data.ndim)
    layout = _axis_tiles(plan, data.chunks, out_chunks)
    graph = {}
    for index in itertools.product(*(range(len(c)) for c in out_chunks)):
        per_axis = [axis_tiles[i] for axis_tiles, i in zip(layout, index)]
        shape = tuple(c[i] for c, i in zip(out_chunks, index))
        axes = tuple(per_axis[p][0] for p in spatial)
        if any(a is None for a in axes) or 0 in shape:
            tile = _Tile(shape, None, (), ())
            graph[(name,) + index] = (_empty_tile, bias_key, layer, tile)
            continue
        keys, placements = [], []
        for combination in itertools.product(*(entry[2] for entry in per_axis)):
            keys.append((data.name,) + tuple(piece[0] for piece in combination))
            placements.append((tuple(piece[1] for piece in combination),
                               tuple(piece[2] for piece in combination)))
        window_shape = tuple(entry[1] for entry in per_axis)
        tile = _Tile(shape, axes, window_shape, tuple(placements))
        graph[(name,) + index] = (_compute_tile, keys, filter_key, bias_key, layer, tile)
    dependencies = [data, filter] + ([] if bias is None else [bias])
    hlg = HighLevelGraph.from_collections(name, graph, dependencies=dependencies)
    return da.Array(hlg, name, chunks=out_chunks, dtype=dtype,
                    meta=np.empty((0,) * data.ndim, dtype))
