"""Running one algorithm of the library the way the kernel tests do."""

from __future__ import annotations

import numpy as np

from convtranspose._choose.choice import choose
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._plan.problem import Problem
from convtranspose._plan.rules import AxisPlan


def call_shapes_spy(monkeypatch, layer_class) -> list:
    """A list that gets the output shape of each call of ``layer_class`` (a kernel's
    set-up layer, called as ``layer(data, out)``): which kernel computed a result."""
    calls = []
    made = layer_class.__call__

    def call(self, data, out):
        calls.append(out.shape)
        return made(self, data, out)

    monkeypatch.setattr(layer_class, "__call__", call)
    return calls


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


def check_gemm_on_strided_views(gemm, dtype, seed: int, cases: int) -> None:
    """``gemm(a, b, c, accumulate)`` (a product into ``c``, or added to it) against
    ``np.matmul`` in float64 on ``cases`` random small products whose operands have the
    layouts the kernels pass to BLAS (:func:`_blas_operand`); the inputs untouched."""
    rng = np.random.default_rng(seed)
    for case in range(cases):
        m, n, k = (int(v) for v in rng.integers(1, 9, 3))
        a, b, c = (_blas_operand(rng, rows, cols, dtype)
                   for rows, cols in ((m, k), (k, n), (m, n)))
        a_before, b_before, c_before = a.copy(), b.copy(), c.copy()
        accumulate = bool(case % 2)
        gemm(a, b, c, accumulate)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        if accumulate:
            expected += c_before
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)
        assert np.array_equal(a, a_before) and np.array_equal(b, b_before)


def _blas_operand(rng, rows, cols, dtype):
    """A ``(rows, cols)`` view in one of the layouts the kernels pass to BLAS, drawn by
    ``rng``: contiguous, transposed, a window of a wider buffer (leading dimension over
    ``cols``), or a column block of a ``(rows, groups, cols)`` buffer (grouped
    products)."""
    kind = int(rng.integers(4))
    if kind == 0:
        return rng.standard_normal((rows, cols)).astype(dtype)
    if kind == 1:
        return rng.standard_normal((cols, rows)).astype(dtype).T
    if kind == 2:
        return rng.standard_normal((rows + 2, cols + 3)).astype(dtype)[1:rows + 1, 2:cols + 2]
    return rng.standard_normal((rows, 3, cols)).astype(dtype)[:, 1]
