"""Broadcast operands (``np.broadcast_to``: stride 0 along the broadcast axes) reach
every algorithm, forced one by one and under measured planning: each result equals
the direct-loop oracle's, and no BLAS call sees a matrix without a packed axis."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
from convtranspose import _kernels as kernels
from oracle import canonical_result

ATTRIBUTES = dict(strides=[2, 3], pads_begin=[2, 2], pads_end=[0, 1], dilations=[1, 2],
                  auto_pad="Valid")


def _operands(dtype):
    rng = np.random.default_rng(11)
    x = rng.integers(-4, 5, (1, 1, 11, 9)).astype(dtype)
    w = rng.integers(-4, 5, (1, 1, 8, 2, 2)).astype(dtype)
    return np.broadcast_to(x, (1, 32, 11, 9)), np.broadcast_to(w, (1, 32, 8, 2, 2))


def _expected(data, filter_):
    plan = ct.shapes.group_convolution_backprop_data(data.shape, filter_.shape, **ATTRIBUTES)
    return canonical_result(np.array(data, np.float64), np.array(filter_, np.float64),
                            plan.axes)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("algorithm", kernels.ALGORITHMS)
def test_every_algorithm_takes_broadcast_operands(monkeypatch, algorithm, dtype):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    data, filter_ = _operands(dtype)
    result = ct.group_convolution_backprop_data(data, filter_, **ATTRIBUTES)
    # Small integers: every sum is exact in float32 too.
    np.testing.assert_array_equal(result, _expected(data, filter_))


def test_measured_planning_takes_broadcast_operands(monkeypatch):
    # Measuring runs every candidate on the caller's operands: the GEMM ones failed here.
    monkeypatch.setenv("CONVTRANSPOSE_PLANNING", "measure")
    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", "off")
    data, filter_ = _operands(np.float64)
    result = ct.group_convolution_backprop_data(data, filter_, **ATTRIBUTES)
    np.testing.assert_array_equal(result, _expected(data, filter_))


def test_gemm_copies_an_operand_without_a_packed_axis():
    from convtranspose._runtime import blas

    if not blas.available(np.float64):
        pytest.skip("no BLAS found")
    a = np.broadcast_to(np.arange(3.0)[:, None], (3, 4))  # strides (8, 0)
    b = np.broadcast_to(np.arange(5.0), (4, 5))  # strides (0, 8)
    c = np.empty((3, 5))
    blas.gemm(a, b, c)
    np.testing.assert_array_equal(c, np.array(a) @ np.array(b))
