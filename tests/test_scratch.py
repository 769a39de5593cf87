"""Every algorithm's scratch stays within the stated bound, for every dtype family.

The rule (:mod:`convtranspose.kernels.scratch`): the algorithm's own NumPy buffers
take at most ``max(4 x (result + data + filter), 64 MiB)``, sizes in the accumulation
dtype; a forced algorithm that would exceed it is replaced.  Narrow types add their
widened operands and a piece of wider sums (at most ``max(result, 16 MiB)``) on top.
Measured with tracemalloc, which sees every NumPy allocation.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose import _api
from convtranspose._dtypes import accumulation_dtype
from convtranspose._execute import transposed_convolution
from convtranspose._runtime import environment, memo
from convtranspose._runtime.memory import sums_piece_bytes
from convtranspose._runtime.target import host
from convtranspose.dispatch import choose, fitting
from convtranspose.kernels import ALGORITHMS, resolve
from convtranspose.kernels.scratch import (
    SCRATCH_MIN_BYTES,
    SCRATCH_MULTIPLE,
    scratch_bound,
    scratch_bytes,
)

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
    _api._prepared_calls.clear()
    tracemalloc.start()
    try:
        result = result_of()
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
        name, _ = resolve(algorithm, dtype, len(plan.axes), False, target)
        runs = fitting(name, data_shape[0], plan.axes, weights.shape, False, dtype, target)
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
    choice = choose(1, plan.axes, weights_shape)
    assert choice.algorithm == "dense" and choice.runs != "dense"
    assert ("dense", "scratch over the bound") in choice.fallbacks
    rng = np.random.default_rng(2)
    data = rng.standard_normal((1, 64, 32, 32)).astype(np.float32)
    filter = rng.standard_normal((64, 4, 4, 4)).astype(np.float32)
    result = ct.convolution_backprop_data(data, filter, strides=2, pads_begin=1, pads_end=1)
    case = oracle.openvino_cbpd_case(data, filter, strides=2, pads_begin=1, pads_end=1)
    np.testing.assert_allclose(result, case.rounded(), rtol=1e-4, atol=1e-4)
    assert math.prod(result.shape) == 4 * 64 * 64
