"""Running one algorithm of the library the way the kernel tests do."""

from __future__ import annotations

import numpy as np

from convtranspose._choose.choice import choose
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._plan.problem import Problem
from convtranspose._plan.rules import AxisPlan


def run_forced(data_ncx, weights, axes, dtype, channels_last, algorithm, bias=None):
    """``algorithm`` on ``data_ncx`` in the requested layout, returned as NCX; checks that
    the operands are untouched and the result is a fresh C-contiguous array of ``dtype``."""
    data = np.ascontiguousarray(np.moveaxis(data_ncx, 1, -1)) if channels_last else data_ncx
    before = data.copy(), weights.copy()
    result = transposed_convolution(data, weights, axes, dtype=np.dtype(dtype),
                                    channels_last=channels_last, bias=bias, algorithm=algorithm)
    assert np.array_equal(data, before[0]) and np.array_equal(weights, before[1])  # untouched
    assert result.dtype == np.dtype(dtype) and result.flags.c_contiguous
    assert not np.shares_memory(result, data) and not np.shares_memory(result, weights)
    return np.moveaxis(result, -1, 1) if channels_last else result


def random_case(rng, rank):
    """``(data, weights, axes)`` of a random small layer of ``rank`` spatial axes: 1-3
    groups of 1-3 channels, integer operands, crops and zeros in front."""
    groups = int(rng.integers(1, 4))
    ci, co, batch = (int(v) for v in rng.integers(1, 4, 3))
    size = rng.integers(1, 6, rank)
    kernel = rng.integers(1, 5, rank)
    stride = rng.integers(1, 4, rank)
    dilation = rng.integers(1, 3, rank)
    full = (size - 1) * stride + (kernel - 1) * dilation + 1
    offsets = [int(rng.integers(-3, f + 1)) for f in full]  # negative: zeros in front
    sizes = [int(rng.integers(1, f + 5)) for f in full]  # may exceed the full size
    axes = tuple(AxisPlan(*(int(v) for v in values), o, y)
                 for values, o, y in zip(zip(size, kernel, stride, dilation), offsets, sizes))
    data = rng.integers(-9, 10, (batch, groups * ci) + tuple(size))
    weights = rng.integers(-9, 10, (groups, ci, co) + tuple(kernel))
    return data, weights, axes


def chosen(batch, axes, weights_shape, channels_last=False, dtype=np.float32,
           result_dtype=None, target=None) -> str:
    """The algorithm the cost model chooses for a canonical problem."""
    problem = Problem(batch, axes, weights_shape, channels_last, np.dtype(dtype),
                      None if result_dtype is None else np.dtype(result_dtype))
    return choose(problem, target).algorithm
