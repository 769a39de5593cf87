"""The cost model's estimates and choice: what each algorithm is offered for, how the
measured figures price them, and the rules of the choice (never which algorithm a
given CPU picks)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from convtranspose import host_target
from convtranspose._choose import choice as dispatch
from convtranspose._choose import estimates, figures, kernel_estimates
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import ALGORITHMS, schedules
from convtranspose._plan.geometry import tap_reads
from convtranspose._plan.problem import Problem
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import config as environment
from convtranspose._runtime import target as runtime_target
from kernel_support import chosen

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def _raw_estimates(batch, axes, weights_shape, channels_last, numba=True):
    """The cost model's raw float32 estimates on this machine (numba usable or not)."""
    target = host_target().replace(numba=numba)
    return estimates.raw_estimates(batch, axes, weights_shape, channels_last,
                                   np.dtype(np.float32), target)


def _estimates_ns(batch, axes, weights_shape, channels_last, numba=True):
    """The cost model's calibrated float32 estimates (ns) on this machine."""
    target = host_target().replace(numba=numba)
    return dict(dispatch.estimates_ns(Problem(batch, axes, weights_shape, channels_last,
                                              np.dtype(np.float32)), target))


def test_direct_blocked_models_its_threads():
    # One line on one core costs as much as twice the work on two lines; a line long
    # enough to be cut into segments, half that.  (The same line as a 2-D layer of
    # one row: the same cost.)
    long, short = AxisPlan(20000, 4, 2, 1, 1, 40000), AxisPlan(100, 4, 2, 1, 1, 200)
    one = AxisPlan(1, 1, 1, 1, 0, 1)
    target = host_target().replace(threads=2)

    def estimate(batch, axes):
        layer = estimates.Layer.of(batch, axes, (1, 64, 64) + (4,) * len(axes), True)
        return kernel_estimates.blocked_estimate(layer, target).total

    for axis in (long, short):
        single, double = estimate(1, (axis,)), estimate(2, (axis,))
        split = schedules.blocked_segments(1, axis, target.threads) >= target.threads
        assert split == (axis is long)
        # Two samples: twice the work on twice the lines.
        assert double / single == pytest.approx(1.0 if not split else 2.0, rel=0.1), axis
    assert estimate(1, (one, long)) == pytest.approx(estimate(1, (long,)), rel=0.01)


@pytest.mark.parametrize("seed", range(40))
def test_tap_reads_count_the_pairs_that_read_inside(seed):
    # Against a loop over every (output, tap) pair of a random axis: the pairs whose
    # input index is whole and inside, and per phase, over the taps that read inside
    # for some output position of the axis, its outputs whose every such tap does.
    draw = np.random.default_rng(seed)
    size, kernel, stride, dilation = (int(v) for v in draw.integers(1, [9, 8, 6, 4]))
    full = (size - 1) * stride + (kernel - 1) * dilation + 1
    offset = int(draw.integers(-2, full))
    axis = AxisPlan(size, kernel, stride, dilation, offset, int(draw.integers(1, full + 4)))
    positions = -(-axis.output_size // stride)
    pairs, runs = 0, []
    for phase in range(min(stride, axis.output_size)):
        shifts = [(phase + offset - k * dilation) // stride for k in range(kernel)
                  if (phase + offset - k * dilation) % stride == 0]
        live = [t for t in shifts if t + positions - 1 >= 0 and t <= size - 1]
        outputs = range(phase, axis.output_size, stride)
        pairs += sum(0 <= o // stride + t < size for o in outputs for t in shifts)
        if live:
            runs.append((sum(all(0 <= o // stride + t < size for t in live) for o in outputs),
                         len(live)))
    reads, counted = tap_reads(axis)
    assert reads == pairs, axis
    assert sorted(counted) == sorted(runs), axis


def test_numba_algorithms_are_candidates_only_with_numba(monkeypatch):
    # A grouped layer is a candidate for both numba algorithms where numba is usable,
    # and for neither where it is not (whatever the estimates, which vary by CPU).
    axes = (AxisPlan(28, 4, 2, 1, 1, 56),) * 2
    shape = (8, 32, 32, 4, 4)
    for vector_bytes in (32, 64):
        with_numba = _raw_estimates(8, axes, shape, True, numba=True)
        assert {"direct", "direct-blocked"} <= set(with_numba), vector_bytes
    without = _raw_estimates(8, axes, shape, True, numba=False)
    assert not {"direct", "direct-blocked"} & set(without)
    monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
    assert not chosen(8, axes, shape, channels_last=True).startswith("direct")


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("batch, size, kernel, ci, co", [(1, 32, 2, 512, 256),   # U-Net, k2 s2
                                                        (8, 64, 1, 1024, 1024)])  # 1x1
def test_estimates_never_price_blas_products_below_the_machines_gemm_rate(
        channels_last, batch, size, kernel, ci, co):
    # Each output takes exactly one tap (kernel == stride), so each BLAS algorithm
    # multiplies exactly the layer's 2*N*Ci*Co*K^2*X^2 FLOPs: no estimate may be
    # cheaper than those products at the machine's measured GEMM rate.
    axes = (AxisPlan(size, kernel, kernel, 1, 0, size * kernel),) * 2
    weights_shape = (1, ci, co, kernel, kernel)
    floor_ns = 2.0 * batch * ci * co * kernel ** 2 * size ** 2 / figures.gemm_gflops()
    costs = _estimates_ns(batch, axes, weights_shape, channels_last, numba=HAVE_NUMBA)
    raw = _raw_estimates(batch, axes, weights_shape, channels_last, numba=HAVE_NUMBA)
    blas = [name for name in costs if name.split("-")[0] in {"gemm", "phase", "col2im"}]
    assert len(blas) == 6
    for name in blas:
        assert raw[name].gemm >= floor_ns, name
        assert costs[name] >= floor_ns, name
    assert all(raw[name].gemm == 0 for name in costs if name.startswith("direct"))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
def test_direct_blocked_is_not_offered_for_half_a_vector_of_output_channels():
    # Its lanes hold output channels: with at most half a vector of them the plane
    # kernel of `direct` (lanes along space) is the numba kernel on offer.
    lanes = host_target().lanes(np.float32)
    target = host_target().replace(numba=True)
    axes = (AxisPlan(28, 4, 2, 1, 1, 56),) * 2
    # It is offered for any number of output channels beyond half a vector, in either
    # layout, on every vector width.
    for co, offered in ((lanes // 2, False), (lanes // 2 + 1, True), (64, True), (65, True),
                        (256, True)):
        costs = _raw_estimates(2, axes, (1, 32, co, 4, 4), True)
        assert ("direct-blocked" in costs) is (co > lanes // 2), (co, lanes)
        assert "direct" in costs
        # Channels first alike, where `direct`'s row kernel takes the layer or not (8
        # outputs per phase: half a vector of it; a 1-D layer of stride 8): planning
        # measures which is faster.
        assert schedules.rows_take_layer(axes, (1, 32, co, 4, 4), False, target)
        first = _raw_estimates(2, axes, (1, 32, co, 4, 4), False)
        assert ("direct-blocked" in first) is offered, (co, lanes)
        small = (AxisPlan(4, 4, 2, 1, 1, 8),) * 2
        assert not schedules.rows_take_layer(small, (1, 32, co, 4, 4), False, target)
        rowless = _raw_estimates(2, small, (1, 32, co, 4, 4), False)
        assert ("direct-blocked" in rowless) is offered, (co, lanes)
        line = (AxisPlan(8192, 16, 8, 1, 4, 65536),)
        one_line = _raw_estimates(1, line, (1, 32, co, 16), False)
        assert ("direct-blocked" in one_line) is offered, (co, lanes)


def test_choice_is_cached_overridable_and_validated(monkeypatch):
    axes = (AxisPlan(8, 4, 2, 1, 1, 16),) * 2
    name = chosen(16, axes, (1, 512, 256, 4, 4))
    assert name in ALGORITHMS
    assert chosen(16, axes, (1, 512, 256, 4, 4)) == name
    monkeypatch.setenv(environment.ALGORITHM_ENV, "col2im-ncx")
    assert chosen(16, axes, (1, 512, 256, 4, 4)) == "col2im-ncx"
    monkeypatch.setenv(environment.ALGORITHM_ENV, "nonsense")
    with pytest.raises(ValueError, match="nonsense"):
        chosen(16, axes, (1, 512, 256, 4, 4))
    monkeypatch.delenv(environment.ALGORITHM_ENV)
    with pytest.raises(ValueError, match="unknown algorithm"):
        transposed_convolution(np.ones((1, 1, 2)), np.ones((1, 1, 1, 2)), (AxisPlan(2, 2, 1, 1, 0, 3),),
                               dtype=np.dtype(np.float64), algorithm="nonsense")
