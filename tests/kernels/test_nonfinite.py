"""Infinities and NaNs give exactly the IEEE result of the canonical sum.

docs/semantics.md defines each output as the sum over the (input, tap) pairs that
exist; a zero that an algorithm adds on its own (padding of the input, absent
taps in a matrix) must never meet an operand: ``inf * 0`` is NaN where the exact
sum is infinite or finite.  Every algorithm is forced, with and without numba, on
shapes whose strides and crops make the fast algorithms read padding, and the
result is compared with the oracle (tests/oracle.py, float64 loops that only
visit existing pairs): the same NaN positions, the same infinities with the same
signs, and close finite values.
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import ALGORITHMS, common
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import config as environment
from convtranspose._runtime import target as runtime_target
from oracle import canonical_result as _reference
from oracle import (
    onnx_conv_transpose_case,
    openvino_cbpd_case,
    openvino_group_cbpd_case,
)

#: (batch, groups, Ci, Co, axes): strides above 1 with crops (offset > 0) and
#: zeros in front (offset < 0), so that the phase, gemm, shift and window
#: algorithms all read padding; groups; depthwise (numba's per-position kernel);
#: a long line (direct-blocked's register blocks); all small enough for ``dense``.
SHAPES = (
    (2, 1, 3, 4, (AxisPlan(7, 4, 2, 1, 1, 14),)),
    (1, 1, 3, 20, (AxisPlan(20, 4, 2, 1, 1, 40),)),
    (1, 2, 2, 3, (AxisPlan(5, 3, 2, 1, 1, 9), AxisPlan(4, 2, 3, 2, -1, 12))),
    (1, 1, 2, 3, (AxisPlan(5, 3, 2, 1, 1, 9),) * 2),  # DCGAN-like k3 s2 p1, tiny
    (2, 8, 1, 1, (AxisPlan(6, 4, 2, 1, 1, 12), AxisPlan(5, 3, 2, 1, 0, 10))),
    (1, 1, 2, 3, (AxisPlan(3, 2, 2, 1, 1, 4), AxisPlan(3, 3, 1, 1, 1, 3),
                  AxisPlan(4, 3, 2, 1, 1, 7))),
)

SPECIALS = (np.inf, -np.inf, np.nan)


def assert_same_ieee(got, expected, rtol, context=""):
    """NaN where ``expected`` is NaN, the same signed infinities, finite values close."""
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    assert got.shape == expected.shape, context
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        wrong = np.argwhere(test(got) != test(expected))
        assert wrong.size == 0, (
            f"{context}: {len(wrong)} positions disagree on {name}, first {tuple(wrong[0])}:"
            f" got {got[tuple(wrong[0])]!r}, expected {expected[tuple(wrong[0])]!r}")
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=rtol,
                               atol=rtol * max(1.0, float(np.abs(expected[finite]).max(initial=0))),
                               err_msg=context)


def _operands(rng, shape, operand, trial):
    """Data (NCX) and weights of ``shape`` with infinities and a NaN in ``operand``.

    Values are nonzero (no existing pair is itself ``inf * 0``) and moderate (no
    overflow in float32).  Trial 0 puts the specials at the first and last taps or
    positions of every axis (the ones that meet padding), later trials anywhere;
    each special goes to another output channel (weights) or group and channel (data),
    so that most outputs stay finite.
    """
    batch, groups, ci, co, axes = shape
    spatial = tuple(a.input_size for a in axes)
    kernel = tuple(a.kernel_size for a in axes)
    data = rng.uniform(0.5, 2.0, (batch, groups * ci) + spatial) * rng.choice([-1, 1], (
        batch, groups * ci) + spatial)
    weights = rng.uniform(0.5, 2.0, (groups, ci, co) + kernel) * rng.choice([-1, 1], (
        groups, ci, co) + kernel)
    target = weights if operand == "weights" else data
    for index, value in enumerate(SPECIALS):
        if operand == "weights":
            lead = (int(rng.integers(groups)), int(rng.integers(ci)), index % co)
            extent = kernel
        else:
            lead = (int(rng.integers(batch)), index % (groups * ci))
            extent = spatial
        if trial == 0:
            where = tuple(0 if index % 2 == 0 else k - 1 for k in extent)
        else:
            where = tuple(int(rng.integers(k)) for k in extent)
        target[lead + where] = value
    return data, weights


def _run(data_ncx, weights, axes, dtype, channels_last, algorithm):
    data = np.ascontiguousarray(np.moveaxis(data_ncx, 1, -1)) if channels_last else data_ncx
    before = data.copy(), weights.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        result = transposed_convolution(data, weights, axes, dtype=np.dtype(dtype),
                                        channels_last=channels_last, algorithm=algorithm)
    np.testing.assert_array_equal(data, before[0])  # untouched (NaN == NaN here)
    np.testing.assert_array_equal(weights, before[1])
    return np.moveaxis(result, -1, 1) if channels_last else result


@pytest.mark.parametrize("operand", ["weights", "data"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("numba_disabled", [False, True], ids=["numba", "no-numba"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_forced_algorithms_keep_ieee_results_of_the_exact_sum(
        monkeypatch, algorithm, numba_disabled, channels_last, dtype, operand):
    if numba_disabled:
        monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
    else:
        monkeypatch.delenv(runtime_target.NO_NUMBA_ENV, raising=False)
    rng = np.random.default_rng([ALGORITHMS.index(algorithm), numba_disabled, channels_last,
                                 operand == "data"])
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for number, shape in enumerate(SHAPES):
        for trial in range(3):
            data, weights = _operands(rng, shape, operand, trial)
            data, weights = data.astype(dtype), weights.astype(dtype)
            with np.errstate(invalid="ignore"):
                expected = _reference(data, weights, shape[4])
            got = _run(data, weights, shape[4], dtype, channels_last, algorithm)
            assert_same_ieee(got, expected, rtol, f"{algorithm} shape {number} trial {trial}")


@pytest.mark.parametrize("algorithm", ["", "phase-nxc", "gemm-ncx", "gemm-nxc", "window",
                                       "dense", "direct", "col2im-ncx"])
def test_frontends_keep_ieee_results(monkeypatch, algorithm):
    # The chosen algorithm (tiny layers go to dense or window) and forced ones
    # through CONVTRANSPOSE_ALGORITHM; float16 and float32 operands accumulate in
    # float32, float64 in float64.
    if algorithm:
        monkeypatch.setenv(environment.ALGORITHM_ENV, algorithm)
    else:
        monkeypatch.delenv(environment.ALGORITHM_ENV, raising=False)
    rng = np.random.default_rng(41)
    for dtype in (np.float16, np.float32, np.float64):
        rtol = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
        data = rng.uniform(0.5, 2.0, (1, 2, 5, 5)).astype(dtype)
        # k4 s2 p1: the first and the last taps meet the padding of the phase algorithms.
        filter = rng.uniform(-2.0, -0.5, (2, 3, 4, 4)).astype(dtype)
        filter[0, 1, 0, 0] = np.inf
        filter[1, 2, 3, 1] = np.nan
        attributes = dict(strides=2, pads_begin=1, pads_end=1)
        with np.errstate(invalid="ignore", over="ignore"):
            got = convtranspose.convolution_backprop_data(data, filter, **attributes)
            expected = openvino_cbpd_case(data, filter, **attributes).exact()
        assert got.dtype == dtype
        assert_same_ieee(got, expected, rtol, f"cbpd {dtype.__name__} {algorithm}")

        grouped = rng.uniform(0.5, 2.0, (2, 2, 2, 4, 4)).astype(dtype)
        spiked = np.concatenate([data, data], axis=1)
        spiked[0, 3, 4, 0] = -np.inf  # an input of the second group, at the border
        with np.errstate(invalid="ignore", over="ignore"):
            got = convtranspose.group_convolution_backprop_data(spiked, grouped, **attributes)
            expected = openvino_group_cbpd_case(spiked, grouped, **attributes).exact()
        assert_same_ieee(got, expected, rtol, f"group cbpd {dtype.__name__} {algorithm}")

        spiked = data.copy()
        spiked[0, 1, 0, 4] = np.inf
        spiked[0, 0, 2, 2] = np.nan
        with np.errstate(invalid="ignore", over="ignore"):
            got = convtranspose.onnx_conv_transpose(spiked, np.abs(filter), strides=[2, 2],
                                                    pads=[1, 1, 1, 1])
            expected = onnx_conv_transpose_case(spiked, np.abs(filter), strides=[2, 2],
                                                pads=[1, 1, 1, 1]).exact()
        assert_same_ieee(got, expected, rtol, f"onnx {dtype.__name__} {algorithm}")


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
def test_dense_notices_a_non_finite_input_in_any_sample(channels_last):
    # dense tests one output per sample: the NaN and the infinity sit in the last
    # samples only, the first ones stay finite.
    rng = np.random.default_rng(43)
    axes = (AxisPlan(5, 3, 2, 1, 1, 9),) * 2
    weights = rng.uniform(0.5, 2.0, (1, 2, 3, 3, 3))
    for special in SPECIALS:
        data = rng.uniform(0.5, 2.0, (3, 2, 5, 5))
        data[2, 1, 0, 4] = special
        data[1, 0, 4, 4] = special
        with np.errstate(invalid="ignore"):
            expected = _reference(data, weights, axes)
        got = _run(data, weights, axes, np.float64, channels_last, "dense")
        assert_same_ieee(got, expected, 1e-12, f"dense {special}")


def test_finiteness_check_on_every_layout():
    # Contiguous, transposed, gapped and reversed views, narrow floats and integers;
    # one special anywhere is noticed (a false alarm would only cost speed).
    base = np.arange(1.0, 61.0).reshape(3, 4, 5)
    views = [lambda a: a, lambda a: np.moveaxis(a, 0, -1), lambda a: a[:, ::2],
             lambda a: a[::-1, :, ::-1]]
    for dtype in (np.float32, np.float64, np.float16):
        for view in views:
            assert common.all_finite(view(base.astype(dtype)))
            for special in SPECIALS:
                for position in (0, 17, -1):
                    spiked = view(base.astype(dtype))
                    spiked.flat[position % spiked.size] = special
                    assert not common.all_finite(spiked), (dtype, special, position)
    assert common.all_finite(np.arange(6).reshape(2, 3))
    assert common.all_finite(np.zeros((2, 0), np.float32))
