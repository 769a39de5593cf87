"""``stream``: the filter read as it is stored, against the direct-loop oracle.

Integer-valued operands make float32/float64 sums exact, so results compare with
``array_equal``.  Every storage of the filter the algorithm reads in place (taps last,
taps first) or copies, register blocks of both vector widths with their tails (positions
past whole blocks, columns past whole chunks), groups, and one and several threads.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from convtranspose import host_target, use_target
from convtranspose._plan.rules import AxisPlan
from kernel_support import run_forced
from oracle import canonical_result

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                reason="numba is not installed")


def _axes(rng, size):
    kernel = [int(k) for k in rng.integers(1, 5, len(size))]
    axes = []
    for x, k in zip(size, kernel):
        s, d = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        full = (x - 1) * s + (k - 1) * d + 1
        axes.append(AxisPlan(x, k, s, d, int(rng.integers(-1, full // 2 + 1)),
                             int(rng.integers(max(1, full - 3), full + 3))))
    return tuple(axes), tuple(kernel)


def _stored(weights, storage):
    """The same canonical (G, Ci, Co, K...) values as a view of another storage."""
    if storage == "taps last":
        return weights
    if storage == "taps first":  # (K..., Ci, Co) storage, as oneDNN's XIO gives it
        stored = np.ascontiguousarray(np.moveaxis(weights[0], (0, 1), (-2, -1)))
        return np.moveaxis(stored, (-2, -1), (0, 1))[None]
    return np.asfortranarray(weights)  # copied by the algorithm


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("storage", ["taps last", "taps first", "fortran"])
def test_stream_matches_the_oracle(register_bytes, storage):
    rng = np.random.default_rng(register_bytes + len(storage))
    lanes = register_bytes // 4
    for trial in range(6):
        rank = 1 + trial % 3
        groups = 1 if storage == "taps first" else int(rng.integers(1, 3))
        ci = int(rng.integers(1, 20))
        # Columns (Co * taps, or Co per tap) past and at whole chunks of 2-4 vectors.
        co = int(rng.choice([lanes * 4, lanes * 2 + 3, int(rng.integers(1, 40))]))
        size = tuple(int(v) for v in rng.integers(1, 5, rank))
        batch = int(rng.integers(1, 4))  # positions past whole blocks of six
        axes, kernel = _axes(rng, size)
        dtype = (np.float32, np.float64)[trial % 2]
        data = rng.integers(-9, 10, (batch, groups * ci) + size).astype(dtype)
        weights = rng.integers(-9, 10, (groups, ci, co) + kernel).astype(dtype)
        expected = canonical_result(data, weights, axes)
        target = host_target().replace(vector_bytes=register_bytes, threads=1 + 2 * (trial % 2))
        for channels_last in (False, True):
            with use_target(target):
                got = run_forced(data, _stored(weights, storage), axes, dtype, channels_last,
                                 "stream")
            np.testing.assert_array_equal(got, expected,
                                          err_msg=f"{storage} {axes} {weights.shape}")


def test_stream_of_many_positions_and_wide_rows():
    # More positions than two blocks (a tail of one), a filter of more rows than one
    # row block and columns of several pieces, on two threads.
    rng = np.random.default_rng(3)
    axes = (AxisPlan(13, 3, 2, 1, 1, 26),)
    data = rng.integers(-3, 4, (1, 300, 13)).astype(np.float32)
    weights = rng.integers(-3, 4, (1, 300, 200, 3)).astype(np.float32)
    expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
    for channels_last in (False, True):
        with use_target(host_target().replace(threads=2)):
            got = run_forced(data, weights, axes, np.float32, channels_last, "stream")
        np.testing.assert_array_equal(got, expected)


def test_stream_keeps_non_finite_sums_where_taps_reach():
    # Exact: only the (input, tap) pairs that exist are multiplied.
    axes = (AxisPlan(4, 3, 3, 1, 0, 10),)
    data = np.ones((1, 2, 4))
    data[0, 1, 2] = np.inf
    weights = np.ones((1, 2, 3, 3))
    expected = canonical_result(data, weights, axes)
    got = run_forced(data, weights, axes, np.float64, False, "stream")
    np.testing.assert_array_equal(got, expected)
    assert np.isfinite(got).sum() == np.isfinite(expected).sum()

