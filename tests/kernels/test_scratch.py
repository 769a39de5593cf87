"""Every algorithm's scratch stays within the stated bound, for every dtype family.

The rule (:mod:`convtranspose._kernels.scratch`): the algorithm's own buffers take at
most ``max(4 x (result + data + filter), 64 MiB)``, sizes in the accumulation dtype; a
forced algorithm that would exceed it is replaced.  Narrow types add their widened
operands and a piece of wider sums (at most ``max(result, 16 MiB)``) on top.  The
adjoint algorithms (the forward convolution, the gradients) have estimates of their
own under the same bound.  Measured with tracemalloc, which sees every NumPy allocation
and numba's (its runtime allocates with ``PyMem_RawMalloc``); ``tests/kernels/test_numba_memory.py``
measures the numba kernels as the operating system counts them.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._choose.choice import choose, fitting
from convtranspose._dtypes import accumulation_dtype
from convtranspose._execute import adjoints as _backward
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._frontends import specs as _api
from convtranspose._kernels import ALGORITHMS, resolve
from convtranspose._kernels import adjoints as backward
from convtranspose._kernels.scratch import (
    SCRATCH_MIN_BYTES,
    SCRATCH_MULTIPLE,
    adjoint_scratch_bytes,
    im2col_budget,
    scratch_bound,
    scratch_bytes,
)
from convtranspose._plan.problem import Problem
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import config as environment
from convtranspose._runtime import memo
from convtranspose._runtime.memory import sums_piece_bytes
from convtranspose._runtime.target import host

#: (data shape, filter shape, stride, pad): small, a 2-D layer of a 1 MiB float32
#: result, a long 1-D one, and one whose dense matrix would take 4 GiB.
LAYERS = [
    ((2, 8, 12, 12), (8, 4, 3, 3), 2, 1),
    ((1, 32, 64, 64), (32, 16, 4, 4), 2, 1),
    ((2, 4, 4000), (4, 4, 5), 3, 0),
    ((1, 64, 32, 32), (64, 4, 4, 4), 2, 1),
]


def _peak_beyond(result_of) -> tuple[np.ndarray, int]:
    """(result, the peak bytes NumPy allocated beyond the result) of ``result_of()``,
    measured after a first call (which compiles kernels) with the filters' derived
    matrices and the prepared calls forgotten (they count as scratch)."""
    result_of()
    memo.forget_derived()
    _api.prepared_calls.clear()
    return _traced_peak(result_of)


def _traced_peak(compute) -> tuple[np.ndarray, int]:
    """(result, tracemalloc's peak beyond the result) of one call of ``compute()``."""
    tracemalloc.start()
    try:
        result = compute()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - result.nbytes


def _bound(data, filter, result, wide) -> int:
    """The rule, in the accumulation dtype ``wide``."""
    sizes = (data.size + filter.size + result.size) * wide.itemsize
    return max(SCRATCH_MULTIPLE * sizes, SCRATCH_MIN_BYTES)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
@pytest.mark.parametrize("layer", LAYERS, ids=["small", "2d", "1d", "dense-4GiB"])
def test_every_forced_algorithm_stays_within_the_bound(layer, dtype, monkeypatch):
    data_shape, filter_shape, stride, pad = layer
    rng = np.random.default_rng(1)
    data = oracle.random_array(rng, data_shape, dtype)
    filter = oracle.random_array(rng, filter_shape, dtype)
    wide = accumulation_dtype(np.dtype(dtype))
    expected = oracle.openvino_cbpd_case(data, filter, strides=stride, pads_begin=pad,
                                         pads_end=pad).rounded()
    tolerance = {"float32": 1e-4, "float16": 2e-2, "int8": 0}[dtype]
    for algorithm in ALGORITHMS:
        monkeypatch.setenv(environment.ALGORITHM_ENV, algorithm)
        result, scratch = _peak_beyond(lambda: ct.convolution_backprop_data(
            data, filter, strides=stride, pads_begin=pad, pads_end=pad))
        allowed = _bound(data, filter, result, wide)
        if wide != result.dtype:  # widened operands and a piece of wider sums
            allowed += (data.size + filter.size) * wide.itemsize
            allowed += min(result.size * wide.itemsize, sums_piece_bytes(result.nbytes))
        assert scratch <= allowed, (algorithm, scratch, allowed)
        np.testing.assert_allclose(result.astype(np.float64), expected.astype(np.float64),
                                   rtol=tolerance, atol=tolerance, err_msg=algorithm)

@pytest.mark.parametrize("layer", LAYERS, ids=["small", "2d", "1d", "dense-4GiB"])
def test_the_estimate_covers_what_the_algorithm_allocates(layer):
    """The memory check counts :func:`scratch_bytes` of what runs: at least its scratch."""
    data_shape, filter_shape, stride, pad = layer
    plan = ct.shapes.convolution_backprop_data(data_shape, filter_shape, strides=stride,
                                               pads_begin=pad, pads_end=pad)
    dtype = np.dtype(np.float32)
    data = np.ones(data_shape, dtype)
    weights = np.ones((1,) + filter_shape, dtype)
    target = host()
    for algorithm in ALGORITHMS:
        name, _ = resolve(algorithm, dtype, len(plan.axes), False, target, plan.axes)
        runs = fitting(name, Problem(data_shape[0], plan.axes, weights.shape, False,
                                     np.dtype(dtype)), target)
        _, scratch = _peak_beyond(lambda: transposed_convolution(
            data, weights, plan.axes, dtype=dtype, algorithm=algorithm))
        estimate = scratch_bytes(runs, data_shape[0], plan.axes, weights.shape, dtype)
        assert scratch <= estimate <= scratch_bound(data_shape[0], plan.axes, weights.shape,
                                                    dtype), (algorithm, runs, scratch, estimate)


def test_forced_dense_on_a_large_layer_runs_another_algorithm(monkeypatch):
    """dense's (65536, 16384) matrix would take 4 GiB: the cheapest fitting one runs."""
    plan = ct.shapes.convolution_backprop_data((1, 64, 32, 32), (64, 4, 4, 4), strides=2,
                                               pads_begin=1, pads_end=1)
    weights_shape = plan.canonical_filter_shape
    assert scratch_bytes("dense", 1, plan.axes, weights_shape, np.float32) > 4 << 30
    monkeypatch.setenv(environment.ALGORITHM_ENV, "dense")
    choice = choose(Problem(1, plan.axes, weights_shape, dtype=np.dtype(np.float32)))
    assert choice.algorithm == "dense" and choice.runs != "dense"
    assert ("dense", "scratch over the bound") in choice.fallbacks
    rng = np.random.default_rng(2)
    data = rng.standard_normal((1, 64, 32, 32)).astype(np.float32)
    filter = rng.standard_normal((64, 4, 4, 4)).astype(np.float32)
    result = ct.convolution_backprop_data(data, filter, strides=2, pads_begin=1, pads_end=1)
    case = oracle.openvino_cbpd_case(data, filter, strides=2, pads_begin=1, pads_end=1)
    np.testing.assert_allclose(result, case.rounded(), rtol=1e-4, atol=1e-4)
    assert math.prod(result.shape) == 4 * 64 * 64


#: Canonical problems of the adjoints, ``(batch, axes, (G, Ci, Co, K...))``: channels in
#: 2-D, a depthwise layer, a long 1-D line, 3-D with a stride past the kernel, and 2-D
#: lines short enough that ``blocked``'s copy of ``grad`` gets zeros at their ends.
ADJOINT_PROBLEMS = [
    (4, (AxisPlan(16, 3, 2, 1, 1, 31), AxisPlan(16, 3, 2, 1, 1, 31)), (1, 16, 8, 3, 3)),
    (2, (AxisPlan(32, 3, 2, 1, 1, 63), AxisPlan(32, 3, 2, 1, 1, 63)), (8, 1, 1, 3, 3)),
    (3, (AxisPlan(3000, 7, 3, 2, 4, 9000),), (2, 4, 6, 7)),
    (2, (AxisPlan(6, 2, 3, 1, 0, 17),) * 3, (1, 8, 4, 2, 2, 2)),
    (4, (AxisPlan(8, 4, 2, 1, 1, 16),) * 2, (1, 16, 24, 4, 4)),
]


def _adjoint_operands(batch, axes, weights_shape, dtype):
    """Random data, grad and weights of the canonical problem in the accumulation dtype
    ``dtype`` (small integers: every sum exact in float32 too)."""
    rng = np.random.default_rng(3)
    groups, ci, co = weights_shape[:3]
    data = rng.integers(-3, 4, (batch, groups * ci) + tuple(a.input_size for a in axes))
    grad = rng.integers(-3, 4, (batch, groups * co) + tuple(a.output_size for a in axes))
    weights = rng.integers(-3, 4, weights_shape)
    return data.astype(dtype), grad.astype(dtype), weights.astype(dtype)


def _kernel_peak(compute) -> tuple[np.ndarray, int]:
    """(result, tracemalloc's peak beyond the result) of ``compute()``, after a first call."""
    compute()
    return _traced_peak(compute)


@pytest.mark.parametrize("budget", [None, 1 << 16], ids=["budget", "slices"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("problem", ADJOINT_PROBLEMS,
                         ids=["2d", "depthwise", "1d", "3d", "2d-padded-line-ends"])
def test_every_adjoint_algorithm_stays_within_its_estimate(problem, dtype, budget,
                                                           monkeypatch):
    """Each adjoint kernel's measured scratch (beyond the sums it returns) is within its
    estimate, and exactly the algorithms whose estimate is within the bound are offered;
    a small im2col budget (a slice of one item) is followed by kernel and estimate alike."""
    if budget is not None:
        monkeypatch.setattr(backward, "IM2COL_SCRATCH_BYTES", budget)
    batch, axes, weights_shape = problem
    dtype = np.dtype(dtype)
    data, grad, weights = _adjoint_operands(batch, axes, weights_shape, dtype)
    strides = [a.stride for a in axes]
    dilations = [a.dilation for a in axes]
    offsets = [a.offset for a in axes]
    expected = {"data": oracle.forward_convolution(grad.astype(np.float64), weights, strides,
                                                   dilations, offsets,
                                                   [a.input_size for a in axes]),
                "filter": oracle.filter_gradient(data, grad, weights_shape[0],
                                                 weights_shape[3:], strides, dilations,
                                                 offsets)}
    cut = im2col_budget(batch, axes, weights_shape, dtype)
    bound = scratch_bound(batch, axes, weights_shape, dtype)
    for kind in ("data", "filter"):
        offered = _backward.adjoint_candidates(kind, batch, weights_shape, axes, dtype)
        for name in backward.ALGORITHMS:
            if name == "depthwise" and weights_shape[1:3] != (1, 1):
                continue
            if name.startswith("blocked") and not (
                    backward.blocked_applies(kind, weights_shape, dtype, len(axes))
                    and (name == "blocked" or kind == "data")):
                # (int64 sums, Co not whole vectors, or a filter adjoint in planes)
                assert name not in offered
                continue
            if kind == "data":
                result, scratch = _kernel_peak(lambda: backward.data_adjoint(
                    grad, weights, axes, dtype, name, cut, finite_weights=True))
            else:
                result, scratch = _kernel_peak(lambda: backward.filter_adjoint(
                    data, grad, axes, weights_shape[0], dtype, name, cut))
            estimate = adjoint_scratch_bytes(kind, name, batch, axes, weights_shape, dtype)
            assert scratch <= estimate, (kind, name, scratch, estimate)
            assert (name in offered) == (estimate <= bound), (kind, name, estimate, bound)
            np.testing.assert_array_equal(result, expected[kind].astype(dtype),
                                          err_msg=f"{kind} {name}")


def test_a_forced_im2col_beyond_the_bound_runs_taps(monkeypatch):
    """A long filter over a short output: one batch item's im2col columns (2000 taps of
    2000 positions of 8 channels, 122 MiB) exceed the bound of operands of a few hundred
    KiB (64 MiB), so the forced ``im2col`` is replaced and the call stays within it."""
    batch, axes, weights_shape = 1, (AxisPlan(2000, 2000, 1, 1, 1999, 2000),), (1, 2, 8, 2000)
    dtype = np.dtype(np.float32)
    bound = scratch_bound(batch, axes, weights_shape, dtype)
    assert adjoint_scratch_bytes("filter", "im2col", batch, axes, weights_shape, dtype) > bound
    assert "im2col" not in _backward.adjoint_candidates("filter", batch, weights_shape, axes,
                                                        dtype)
    monkeypatch.setenv(_backward.BACKWARD_ALGORITHM_ENV, "im2col")
    rng = np.random.default_rng(4)
    data = rng.integers(-3, 4, (1, 2, 2000)).astype(dtype)
    filter = rng.integers(-3, 4, (2, 8, 2000)).astype(dtype)
    grad = rng.integers(-3, 4, (1, 8, 2000)).astype(dtype)
    ct.vjp.convolution_backprop_data(data, filter, grad, pads_begin=1999)
    tracemalloc.start()
    try:
        _, grad_filter = ct.vjp.convolution_backprop_data(data, filter, grad, pads_begin=1999)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < bound
    # grad_filter[ci, co, k] = sum over x of data[ci, x] * grad[co, x + k - 1999]
    padded = np.concatenate([np.zeros((8, 1999)), grad[0].astype(np.float64)], axis=1)
    expected = [[np.correlate(padded[co], data[0, ci].astype(np.float64), "valid")
                 for co in range(8)] for ci in range(2)]
    np.testing.assert_array_equal(grad_filter, np.array(expected, dtype))
