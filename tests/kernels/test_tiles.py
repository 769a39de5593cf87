"""The int8 sums on AMX tiles (:mod:`convtranspose._kernels.tiles`) against the integer
oracle: random 1-3-D layers of 1-3 groups whose lines end inside a tile block (every
last-block path), strides, dilations, crops and zeros in front, 1-5 output channel
blocks; data summed as they are and shifted (int8 data, a zero point); the sums
requantized as each thread makes them; the operands' extremes.  On CPUs without
AMX-INT8 (or where Linux does not permit the tiles) these tests are skipped, and the
VNNI kernels take the same layers."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from convtranspose import host_target  # noqa: E402
from convtranspose._kernels.int8 import prepare_blocked_sums  # noqa: E402
from convtranspose._kernels.requantize import prepare_corrected  # noqa: E402
from convtranspose._plan.rules import AxisPlan  # noqa: E402
from convtranspose._runtime.machine import has_amx_int8  # noqa: E402
from oracle import canonical_result  # noqa: E402

pytestmark = pytest.mark.skipif(not has_amx_int8(),
                                reason="no AMX-INT8 tiles here (or Linux refused them)")

#: The largest input per axis of the random layers, by rank: long last axes (blocks
#: of 32 and 16 pixels and their ends), small others (the oracle is a NumPy loop).
_LARGEST = {1: (70,), 2: (6, 45), 3: (3, 4, 25)}


def _tile_case(seed: int):
    """A random layer the tiles take: 1-3 groups (every other seed one) of 64 or 128
    input channels and 16-80 output channels; its data ``(N, G*Ci, X...)`` uint8 and
    weights ``(G, Ci, Co, K...)`` int8 (as int16, the centred weights' type)."""
    rng = np.random.default_rng(seed)
    rank = 1 + seed % 3
    groups = 1 if seed % 2 else int(rng.integers(1, 4))
    ci, co = 64 * int(rng.integers(1, 3)), 16 * int(rng.integers(1, 6))
    size = [int(rng.integers(1, largest + 1)) for largest in _LARGEST[rank]]
    kernel, stride = rng.integers(1, 5, rank), rng.integers(1, 4, rank)
    dilation = rng.integers(1, 3, rank)
    axes = []
    for x, k, s, d in zip(size, kernel, stride, dilation):
        full = (x - 1) * int(s) + (int(k) - 1) * int(d) + 1
        axes.append(AxisPlan(x, int(k), int(s), int(d), int(rng.integers(-3, full + 1)),
                             int(rng.integers(1, full + 5))))
    data = rng.integers(0, 256, (int(rng.integers(1, 3)), groups * ci, *size))
    weights = rng.integers(-128, 128, (groups, ci, co, *kernel)).astype(np.int16)
    data = data.astype(np.uint8)
    return data, weights, tuple(axes)


def _channels_last(array):
    return np.moveaxis(array, 1, -1)


def _tile_sums(data, weights, axes, channels_last=False):
    sums = prepare_blocked_sums("tiles", data.shape[0], weights, axes, channels_last,
                                host_target())
    assert sums is not None and sums.kind == "tiles"
    return sums


@pytest.mark.parametrize("seed", range(12))
def test_random_layers_equal_the_oracle(seed):
    data, weights, axes = _tile_case(seed)
    kept = data.copy()
    expected = canonical_result(data.astype(np.int64), weights, axes)
    np.testing.assert_array_equal(_tile_sums(data, weights, axes)(data), expected)
    channels_last = np.ascontiguousarray(_channels_last(data))
    np.testing.assert_array_equal(_tile_sums(data, weights, axes, True)(channels_last),
                                  _channels_last(expected))
    np.testing.assert_array_equal(data, kept)


@pytest.mark.parametrize("seed", range(12, 18))
def test_shifted_data_and_their_correction_equal_the_oracle(seed):
    """int8 data with a zero point: summed shifted into bytes, the shift's share and the
    zero point's subtracted from the sums (``acc - factor * share``)."""
    data, weights, axes = _tile_case(seed)
    signed = (data.astype(np.int16) - 128).astype(np.int8)
    offset = int(np.random.default_rng(seed).integers(-128, 128))
    acc, factor, share = _tile_sums(signed, weights, axes).sums(signed, offset)
    total = acc.astype(np.int64) - factor * share.astype(np.int64)
    expected = canonical_result(signed.astype(np.int64) - offset, weights, axes)
    np.testing.assert_array_equal(total, _channels_last(expected))


@pytest.mark.parametrize("seed", range(18, 24))
def test_sums_requantized_by_the_threads_that_make_them(seed):
    """Each thread's output lines requantized as it ends them (the tiles' pieces are
    whole lines): ONNX's float32 steps on the oracle's sums, bit for bit, from a
    set-up called before on other data (the sums' array it keeps between calls)."""
    data, weights, axes = _tile_case(seed)
    co = weights.shape[0] * weights.shape[2]
    rng = np.random.default_rng(seed)
    multiplier = np.broadcast_to(rng.uniform(1e-4, 1e-2, co).astype(np.float32), (co,))
    bias = rng.integers(-5000, 5000, co).astype(np.int32)
    y_scale, y_zero_point = np.asarray(np.float32(0.37)), np.asarray(np.uint8(100))
    total = _channels_last(canonical_result(data.astype(np.int64) - 7, weights, axes)) + bias
    value = np.rint(total.astype(np.float32) * multiplier / y_scale) + np.float32(100)
    expected = np.clip(value, 0, 255).astype(np.uint8)
    apply = prepare_corrected(multiplier, y_scale, y_zero_point, bias, 2)
    sums = _tile_sums(data, weights, axes)
    sums.requantized(255 - data, 7, apply)
    np.testing.assert_array_equal(sums.requantized(data, 7, apply), expected)


def test_the_operands_extremes():
    """Every product at its largest magnitude (255 x -128) over a long sum: 1024 input
    channels of 3 x 3 taps, stride 1, then the smallest data."""
    axes = (AxisPlan(5, 3, 1, 1, 0, 7), AxisPlan(33, 3, 1, 1, 1, 33))
    weights = np.full((1, 1024, 32, 3, 3), -128, np.int16)
    weights[0, :, 1::2] = 127
    for value in (255, 0):
        data = np.full((1, 1024, 5, 33), value, np.uint8)
        expected = canonical_result(data.astype(np.int64), weights, axes)
        np.testing.assert_array_equal(_tile_sums(data, weights, axes)(data), expected)


def test_layouts_of_one_padded_size_keep_their_borders_zero():
    """Two 1-D layers of the same weights whose zero-padded copies have the same size
    but not the same padding (one pixel in front, or none), called in turn: each
    padded copy kept between calls holds zeros where its own layout has padding."""
    rng = np.random.default_rng(5)
    weights = rng.integers(-128, 128, (1, 64, 16, 2)).astype(np.int16)
    data = rng.integers(1, 256, (1, 64, 3)).astype(np.uint8)
    layouts = [(AxisPlan(3, 2, 2, 2, 0, 10),), (AxisPlan(3, 2, 2, 2, 3, 8),)]
    for axes in layouts + layouts:
        np.testing.assert_array_equal(_tile_sums(data, weights, axes)(data),
                                      canonical_result(data.astype(np.int64), weights, axes))
