"""The per-axis tiling rule (``convtranspose.dask._tiling``), checked against the oracle:
a tile computed from its input window alone, with its own shifted plan, equals that
tile of the whole layer's result, and no input outside the window reaches it."""

from __future__ import annotations

import numpy as np
import pytest

from convtranspose import AxisPlan
from oracle import canonical_result

pytest.importorskip("dask")
from convtranspose.dask import _tiling  # noqa: E402


def _random_axis(rng) -> AxisPlan:
    x, k = int(rng.integers(1, 12)), int(rng.integers(1, 6))
    s, d = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    full = (x - 1) * s + (k - 1) * d + 1
    offset = int(rng.integers(-4, full + 2))    # negative: leading zeros; past F: only zeros
    return AxisPlan(x, k, s, d, offset, int(rng.integers(1, full + 8)))


def _whole(data, weights, axis):
    return canonical_result(data[None, None], weights[None, None, None], [axis])[0, 0]


@pytest.mark.parametrize("seed", range(300))
def test_a_tile_is_its_window_alone(seed):
    rng = np.random.default_rng(seed)
    axis = _random_axis(rng)
    data = rng.integers(1, 9, axis.input_size).astype(np.float64)
    weights = rng.integers(1, 9, axis.kernel_size).astype(np.float64)
    whole = _whole(data, weights, axis)
    start = int(rng.integers(0, axis.output_size))
    stop = int(rng.integers(start + 1, axis.output_size + 1))
    tile_axis, x0, x1 = _tiling.tile_plan(axis, start, stop)
    if tile_axis is None:
        np.testing.assert_array_equal(whole[start:stop], 0)
        return
    assert 0 <= x0 < x1 <= axis.input_size
    np.testing.assert_array_equal(_whole(data[x0:x1], weights, tile_axis), whole[start:stop])
    # Inputs outside the window reach no output of the tile.
    changed = data.copy()
    changed[:x0] += 100
    changed[x1:] += 100
    np.testing.assert_array_equal(_whole(changed, weights, axis)[start:stop], whole[start:stop])


@pytest.mark.parametrize("seed", range(200))
def test_default_tiles_follow_the_input_chunks_and_read_a_bounded_halo(seed):
    rng = np.random.default_rng(seed)
    axis = _random_axis(rng)
    sizes = []
    while sum(sizes) < axis.input_size:
        sizes.append(min(int(rng.integers(1, 5)), axis.input_size - sum(sizes)))
    chunks = _tiling.default_chunks(axis, sizes)
    assert sum(chunks) == axis.output_size and min(chunks) > 0
    edges = _tiling.edges(chunks)
    assert all(e % axis.stride == 0 for e in edges[1:-1])
    input_edges = _tiling.edges(sizes)
    before, after = _tiling.halo(axis)
    for start, stop in zip(edges, edges[1:]):
        x0, x1 = _tiling.input_window(axis, start, stop)
        if x0 == x1 or start >= axis.input_size * axis.stride:
            continue
        # The tile of input chunk [a, b) is [a*s, b*s) (the last one clamped to Y): it
        # reads at most ``before`` inputs before a and ``after`` after b.
        a = start // axis.stride
        assert a in input_edges
        b = min(e for e in input_edges if e > a)
        assert stop <= b * axis.stride
        assert x0 >= a - before and x1 <= b + after


def test_regular_input_chunks_give_regular_output_chunks():
    # Zarr stores only chunks that are all equal but the last, which may be smaller.
    for offset, y in ((1, 127), (0, 128), (3, 125), (-5, 140), (2, 300)):
        axis = AxisPlan(64, 4, 2, 1, offset, y)
        chunks = _tiling.default_chunks(axis, (16, 16, 16, 16))
        assert set(chunks[:-1]) == {32} and chunks[-1] <= 32, (offset, y, chunks)


@pytest.mark.parametrize("seed", range(100))
def test_split_chunks_keep_alignment_and_cover_the_axis(seed):
    rng = np.random.default_rng(seed)
    stride, offset = int(rng.integers(1, 5)), int(rng.integers(-5, 6))
    chunks = _tiling.default_chunks(
        AxisPlan(90, 3, stride, 1, offset, int(rng.integers(1, 200))), [30] * 3)
    parts = int(rng.integers(1, 9))
    split = _tiling.split_chunks(chunks, parts, stride, offset)
    assert sum(split) == sum(chunks) and min(split) > 0
    assert set(_tiling.edges(chunks)) <= set(_tiling.edges(split))
    new = set(_tiling.edges(split)) - set(_tiling.edges(chunks))
    assert all((e + offset) % stride == 0 for e in new)
    assert len(split) <= len(chunks) * parts


def test_pieces_cover_a_window_once():
    edges = _tiling.edges([3, 1, 1, 4, 2])
    for x0 in range(11):
        for x1 in range(x0, 12):
            found = _tiling.pieces(edges, x0, min(x1, 11))
            covered = [x for index, source, _ in found
                       for x in range(edges[index] + source.start, edges[index] + source.stop)]
            assert covered == list(range(x0, min(x1, 11)))
            assert all(d.stop - d.start == s.stop - s.start for _, s, d in found)
