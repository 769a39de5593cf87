"""``disjoint``: channels-first layers whose taps reach disjoint outputs (no dilated kernel
longer than its stride), each output line summed once from the input repeated along
it.  Results are compared with the slow oracle on integer operands (every sum exact, so
``==``), on 64- and 32-byte vectors and on one to three threads, and a spy checks that
the disjoint kernel, not a fallback, computed them."""

from __future__ import annotations

import numpy as np
import pytest

from convtranspose import host_target
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import missing, resolve
from convtranspose._kernels.disjoint_plan import axis_sources, takes_layer
from convtranspose._plan.rules import AxisPlan
from kernel_support import call_shapes_spy, run_forced
from oracle import canonical_result

numba_disjoint = pytest.importorskip("convtranspose._kernels._numba.disjoint")


@pytest.fixture
def spy(monkeypatch):
    """A list that gets the output shape of each call the disjoint kernel computes."""
    return call_shapes_spy(monkeypatch, numba_disjoint.DisjointLayer)


def _disjoint_axis(rng, input_size=None) -> AxisPlan:
    """A random axis whose taps reach disjoint outputs: stride 1-6, dilation 1-3, as many
    taps as fit in the stride, crops and zeros at either end."""
    stride = int(rng.integers(1, 7))
    dilation = int(rng.integers(1, 4))
    kernel = int(rng.integers(1, (stride - 1) // dilation + 2))
    size = int(rng.integers(1, 7)) if input_size is None else input_size
    full = (size - 1) * stride + (kernel - 1) * dilation + 1
    offset = int(rng.integers(-4, 5))
    return AxisPlan(size, kernel, stride, dilation, offset,
                    max(0, full - offset + int(rng.integers(-3, 6))))


def _case(rng, rank):
    axes = tuple(_disjoint_axis(rng) for _ in range(rank))
    groups, ci, batch = int(rng.integers(1, 3)), int(rng.integers(0, 7)), int(rng.integers(1, 3))
    co = int(rng.integers(1, 12))  # 1-11: channel blocks of 4 with every remainder
    data = rng.integers(-4, 5, (batch, groups * ci) + tuple(a.input_size for a in axes))
    weights = rng.integers(-4, 5, (groups, ci, co) + tuple(a.kernel_size for a in axes))
    return data.astype(np.float64), weights.astype(np.float64), axes


def test_axis_sources_name_the_one_pair_each_output_reads():
    rng = np.random.default_rng(3)
    for _ in range(200):
        axis = _disjoint_axis(rng)
        sources, taps = axis_sources(axis)
        expected = np.full((2, axis.output_size), -1)
        for x in range(axis.input_size):
            for t in range(axis.kernel_size):
                y = x * axis.stride + t * axis.dilation - axis.offset
                if 0 <= y < axis.output_size:
                    assert expected[0, y] == -1, axis  # one pair per output
                    expected[:, y] = x, t
        np.testing.assert_array_equal(np.stack([sources, taps]), expected, err_msg=str(axis))


@pytest.mark.parametrize("vector_bytes", [64, 32])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_disjoint_layers_match_the_oracle(spy, use_target, vector_bytes, rank):
    rng = np.random.default_rng([rank, vector_bytes])
    for trial in range(30 if rank < 3 else 15):
        use_target(vector_bytes=vector_bytes, threads=1 + trial % 3)
        data, weights, axes = _case(rng, rank)
        expected = canonical_result(data, weights, axes)
        dtype = (np.float32, np.float64)[trial % 2]
        channels_last = trial % 4 == 3
        calls = len(spy)
        got = run_forced(data.astype(dtype), weights.astype(dtype), axes, dtype, channels_last,
                         "disjoint")
        np.testing.assert_array_equal(got, expected, err_msg=f"{axes} trial {trial}")
        # (Layers of no input channel get their zeros without any algorithm.)
        ran = expected.size > 0 and weights.shape[1] > 0
        assert len(spy) == calls + ran, "the disjoint kernel did not run"


def test_long_lines_and_wide_planes(spy):
    # Lines of many vectors (several lane patterns per line: stride 3 and 5 against 16
    # lanes) and several input lines per row of the first axis.
    rng = np.random.default_rng(11)
    for axes in [(AxisPlan(40, 3, 3, 1, 1, 118),),
                 (AxisPlan(5, 2, 2, 1, 0, 10), AxisPlan(9, 5, 5, 1, 2, 44)),
                 (AxisPlan(2, 2, 2, 1, 0, 4), AxisPlan(7, 3, 4, 1, 0, 27),
                  AxisPlan(13, 2, 5, 2, -3, 70))]:
        data = rng.integers(-4, 5, (2, 6) + tuple(a.input_size for a in axes)).astype(np.float32)
        weights = rng.integers(-4, 5, (2, 3, 9) + tuple(a.kernel_size for a in axes))
        weights = weights.astype(np.float32)
        expected = canonical_result(data, weights, axes)
        got = run_forced(data, weights, axes, np.float32, False, "disjoint")
        np.testing.assert_array_equal(got, expected, err_msg=str(axes))
    assert len(spy) == 3


@pytest.mark.parametrize("operand", ["weights", "data"])
def test_non_finite_operands_keep_the_exact_sum(spy, operand):
    # Lanes past a line's inputs hold zeros, and their weights are zero: an infinite
    # weight at a border tap, or an infinite input, reaches only its own outputs.
    rng = np.random.default_rng(5 if operand == "weights" else 6)
    axes = (AxisPlan(3, 3, 4, 1, -2, 17), AxisPlan(4, 2, 2, 1, 1, 9))
    for trial in range(6):
        data = rng.uniform(0.5, 2.0, (1, 4, 3, 4)) * rng.choice([-1, 1], (1, 4, 3, 4))
        weights = rng.uniform(0.5, 2.0, (2, 2, 5, 3, 2)) * rng.choice([-1, 1], (2, 2, 5, 3, 2))
        special = (np.inf, -np.inf, np.nan)[trial % 3]
        if operand == "weights":
            weights[trial % 2, 1, trial % 5, 2 * (trial % 2), trial % 2] = special
        else:
            data[0, trial % 4, 2 * (trial % 2), 3 * (trial % 2)] = special
        with np.errstate(invalid="ignore"):
            expected = canonical_result(data, weights, axes)
            got = transposed_convolution(data, weights, axes, dtype=np.dtype(np.float64),
                                         channels_last=False, algorithm="disjoint")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        finite = np.isfinite(expected)
        np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)],
                                      expected[~finite & ~np.isnan(expected)])
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-12, atol=1e-12)
    assert len(spy) == 6


def test_overlapping_taps_resolve_to_direct():
    target = host_target()
    overlapping = (AxisPlan(4, 3, 2, 1, 0, 9),)  # k3 s2: two taps reach odd outputs
    dilated = (AxisPlan(4, 2, 3, 3, 0, 12),)  # (k - 1) * d = 3, not below s = 3
    for axes in (overlapping, dilated):
        assert not takes_layer(axes)
        assert missing("disjoint", np.dtype(np.float32), 1, target, axes) is not None
        assert resolve("disjoint", np.dtype(np.float32), 1, False, target, axes)[0] == "direct"
    assert takes_layer((AxisPlan(4, 2, 3, 2, 0, 12),))


def test_lines_no_tap_reaches_are_zero_after_another_layer_used_the_scratch(spy, use_target):
    # Two layers whose scratch has the same size (so one thread keeps it from one call to
    # the next): the first fills its input copies with data where the second keeps the
    # tile of lines that no tap reaches, which the second must still store as zeros.
    target = use_target(threads=1)
    lanes = target.lanes(np.float32)
    last = AxisPlan(lanes // 2, 2, 2, 1, 0, lanes)
    one = AxisPlan(1, 1, 1, 1, 0, 1)
    wide = (one, last)  # 18 input channels: 18 + 4 (tile) + 1 vectors of scratch
    gappy = (one, AxisPlan(2, 1, 2, 1, 0, 5), last)  # 2 + 4 * 5 + 1: rows 1, 3 and 4 zero
    rng = np.random.default_rng(8)
    for axes, ci in ((wide, 18), (gappy, 1)):
        data = rng.integers(1, 5, (1, ci) + tuple(a.input_size for a in axes))
        weights = rng.integers(1, 5, (1, ci, 4) + tuple(a.kernel_size for a in axes))
        data, weights = data.astype(np.float32), weights.astype(np.float32)
        got = run_forced(data, weights, axes, np.float32, False, "disjoint")
        np.testing.assert_array_equal(got, canonical_result(data, weights, axes))
    assert len(spy) == 2


@pytest.mark.parametrize("cache_bytes", [1, 4096])
def test_bands_of_rows_within_a_small_cache(spy, monkeypatch, cache_bytes):
    # Each item copies the input rows of a band of output rows, as many as keep the
    # copies within half of L2; a tiny L2 makes bands of one output row (or of the few
    # that read one input row), with rows no tap reaches at band ends.
    monkeypatch.setattr(numba_disjoint, "l2_cache_bytes", lambda: cache_bytes)
    rng = np.random.default_rng(cache_bytes)
    for trial in range(12):
        data, weights, axes = _case(rng, 2 + trial % 2)
        expected = canonical_result(data, weights, axes)
        got = run_forced(data.astype(np.float32), weights.astype(np.float32), axes,
                         np.float32, False, "disjoint")
        np.testing.assert_array_equal(got, expected, err_msg=f"{axes} trial {trial}")


@pytest.mark.parametrize("cache_bytes", [1 << 20, 4096])
def test_the_scratch_estimate_covers_what_it_allocates(monkeypatch, cache_bytes):
    # What the memory check counts (scratch_bytes) must cover the copies of bands,
    # tiles, weight vectors and tables the kernel allocates, with large bands and small.
    import threading
    import tracemalloc

    from convtranspose._kernels import disjoint_plan
    from convtranspose._kernels.scratch import scratch_bytes
    from convtranspose._runtime import memo

    for module in (numba_disjoint, disjoint_plan):
        monkeypatch.setattr(module, "l2_cache_bytes", lambda: cache_bytes)
    rng = np.random.default_rng(4)
    for axes in [(AxisPlan(6, 2, 2, 1, 0, 12), AxisPlan(20, 4, 4, 1, 1, 78)),
                 (AxisPlan(4, 3, 3, 1, 0, 12), AxisPlan(3, 2, 2, 1, 0, 6),
                  AxisPlan(9, 2, 3, 1, 0, 26))]:
        data = rng.integers(-4, 5, (2, 24) + tuple(a.input_size for a in axes))
        weights = rng.integers(-4, 5, (2, 12, 10) + tuple(a.kernel_size for a in axes))
        data, weights = data.astype(np.float32), weights.astype(np.float32)

        def call():
            return transposed_convolution(data, weights, axes, dtype=np.dtype(np.float32),
                                          channels_last=False, algorithm="disjoint")
        call()
        memo.forget_derived()  # the weight vectors
        results = []
        # A new calling thread: the working rows kept for this one do not count.
        caller = threading.Thread(target=lambda: results.append(call()))
        tracemalloc.start()
        try:
            caller.start()
            caller.join()
            peak = tracemalloc.get_traced_memory()[1] - results[0].nbytes
        finally:
            tracemalloc.stop()
        estimate = scratch_bytes("disjoint", 2, axes, weights.shape, np.float32)
        assert peak <= estimate, (axes, peak, estimate)
