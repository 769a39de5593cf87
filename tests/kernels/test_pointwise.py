"""``pointwise`` (one product per group for layers of one tap per axis, with any stride,
offset and output size) against the direct-loop oracle, and what runs instead on every
other layer."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._choose.choice import choose
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import resolve
from convtranspose._plan.problem import Problem
from convtranspose._plan.rules import AxisPlan
from kernel_support import run_forced
from oracle import canonical_result


def _one_tap(sizes):
    return tuple(AxisPlan(x, 1, 1, 1, 0, x) for x in sizes)


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch, groups, ci, co, sizes", [
    (1, 1, 256, 64, (14, 14)),
    (3, 1, 5, 7, (9,)),
    (2, 3, 4, 6, (5, 3, 2)),
    (2, 2, 3, 1, (3, 2, 2, 3)),  # four spatial axes
    (1, 1, 1, 1, (1,)),
])
def test_pointwise_layers_match_the_oracle(batch, groups, ci, co, sizes, dtype, channels_last):
    rng = np.random.default_rng(ci * co + len(sizes))
    axes = _one_tap(sizes)
    data = rng.integers(-4, 5, (batch, groups * ci) + sizes).astype(dtype)
    weights = rng.integers(-4, 5, (groups, ci, co) + (1,) * len(sizes)).astype(dtype)
    got = run_forced(data, weights, axes, dtype, channels_last, "pointwise")
    np.testing.assert_array_equal(got, canonical_result(data, weights, axes))


def test_large_products_split_between_threads():
    # A product of more than SERIAL_GEMM_FLOPS, cut into blocks for two threads.
    rng = np.random.default_rng(3)
    axes = _one_tap((48, 40))
    data = rng.integers(-3, 4, (2, 192, 48, 40)).astype(np.float32)
    weights = rng.integers(-3, 4, (1, 192, 160, 1, 1)).astype(np.float32)
    with ct.num_threads(2):
        for channels_last in (False, True):
            got = run_forced(data, weights, axes, np.float32, channels_last, "pointwise")
            np.testing.assert_array_equal(got, canonical_result(data, weights, axes))


def test_infinities_reach_only_their_own_outputs():
    # Exact: an infinite input meets every weight of its own position and nothing else.
    axes = _one_tap((4, 3))
    data = np.ones((1, 2, 4, 3), np.float32)
    data[0, 1, 2, 1] = np.inf
    weights = np.array([1.0, 0.0, -2.0, 3.0], np.float32).reshape(1, 2, 2, 1, 1)
    got = transposed_convolution(data, weights, axes, dtype=np.dtype(np.float32),
                                 channels_last=False, algorithm="pointwise")
    expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
    np.testing.assert_array_equal(got, expected.astype(np.float32))
    assert np.isinf(got).sum() == 2 and not np.isnan(got).any()


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("axis", [AxisPlan(4, 1, 2, 1, 0, 7), AxisPlan(4, 1, 3, 2, -2, 13),
                                  AxisPlan(5, 1, 1, 1, 1, 3), AxisPlan(4, 1, 1, 1, 0, 6),
                                  AxisPlan(4, 1, 2, 1, 1, 6), AxisPlan(3, 1, 2, 1, 9, 4)],
                         ids=["stride-2", "zeros-in-front", "cropped", "longer",
                              "stride-2-cropped", "out-of-reach"])
def test_strided_and_cropped_layers_match_the_oracle(axis, channels_last):
    # Outputs no input reaches are zeros; a layer whose input reaches no output is all
    # zeros.
    rng = np.random.default_rng(5)
    axes = (axis, AxisPlan(3, 1, 2, 1, 1, 5))
    data = rng.integers(-3, 4, (2, 6, axis.input_size, 3)).astype(np.float32)
    weights = rng.integers(-3, 4, (2, 3, 2, 1, 1)).astype(np.float32)
    got = run_forced(data, weights, axes, np.float32, channels_last, "pointwise")
    np.testing.assert_array_equal(got, canonical_result(data, weights, axes))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axes", [
    (AxisPlan(5, 1, 3, 1, 1, 14),),
    (AxisPlan(5, 1, 4, 1, 0, 17), AxisPlan(5, 1, 4, 1, 0, 17)),
    (AxisPlan(3, 1, 2, 1, 1, 4), AxisPlan(4, 1, 1, 1, 0, 4), AxisPlan(2, 1, 3, 1, -1, 6)),
    (AxisPlan(2, 1, 2, 1, 0, 3),) * 4,
], ids=["1-d", "k1-s4", "3-d-cropped-and-padded", "4-d"])
@pytest.mark.parametrize("threads", [1, 2])
def test_strided_layers_write_every_output(axes, dtype, threads):
    # Channels first, the products of the inputs that land are stored at their places and
    # every other output set to zero in one pass: an output full of NaN keeps none.
    rng = np.random.default_rng(len(axes))
    data = rng.integers(-3, 4, (3, 4) + tuple(a.input_size for a in axes)).astype(dtype)
    weights = rng.integers(-3, 4, (1, 4, 6) + (1,) * len(axes)).astype(dtype)
    expected = canonical_result(data, weights, axes)
    out = np.full(expected.shape, np.nan, dtype)
    with ct.num_threads(threads):
        got = transposed_convolution(data, weights, axes, dtype=np.dtype(dtype),
                                     channels_last=False, algorithm="pointwise", out=out)
    np.testing.assert_array_equal(out, expected)
    assert got is out


def test_other_layers_run_the_phases_instead():
    rng = np.random.default_rng(6)
    axes = (AxisPlan(4, 3, 1, 1, 1, 4), AxisPlan(3, 1, 1, 1, 0, 3))
    data = rng.integers(-3, 4, (2, 3, 4, 3)).astype(np.float32)
    weights = rng.integers(-3, 4, (1, 3, 2, 3, 1)).astype(np.float32)
    assert resolve("pointwise", np.dtype(np.float32), 2, False, ct.host_target(), axes)[0] \
        == "phase-ncx"
    for channels_last in (False, True):
        got = run_forced(data, weights, axes, np.float32, channels_last, "pointwise")
        np.testing.assert_array_equal(got, canonical_result(data, weights, axes))


def test_offered_only_to_pointwise_layers(monkeypatch):
    monkeypatch.delenv("CONVTRANSPOSE_ALGORITHM", raising=False)
    for axes, offered in ((_one_tap((8, 8)), True), ((AxisPlan(8, 1, 3, 1, 0, 22),) * 2, True),
                          ((AxisPlan(8, 3, 1, 1, 1, 8),) * 2, False)):
        problem = Problem(1, axes, (1, 16, 16) + tuple(a.kernel_size for a in axes), False,
                          np.dtype(np.float32))
        names = [name for name, _ in choose(problem, estimate_forced=True).estimates]
        assert ("pointwise" in names) == offered


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("axis", [AxisPlan(4, 1, 1, 1, 0, 4), AxisPlan(4, 1, 2, 1, 1, 6)],
                         ids=["in-place", "stride-2"])
def test_into_an_output_of_other_strides(axis, channels_last):
    # The products of an in-place layer go through a box too when the output is a
    # strided view; every other element of the parent array is left as it was.
    rng = np.random.default_rng(9)
    axes = (axis, AxisPlan(3, 1, 1, 1, 0, 3))
    data = rng.integers(-3, 4, (2, 4, 4, 3)).astype(np.float32)
    weights = rng.integers(-3, 4, (1, 4, 5, 1, 1)).astype(np.float32)
    expected = canonical_result(data, weights, axes)
    if channels_last:
        data, expected = np.moveaxis(data, 1, -1).copy(), np.moveaxis(expected, 1, -1)
    parent = np.full(expected.shape[:-1] + (2 * expected.shape[-1],), 7.0, np.float32)
    out = parent[..., ::2]
    got = transposed_convolution(data, weights, axes, dtype=np.dtype(np.float32),
                                 channels_last=channels_last, algorithm="pointwise", out=out)
    np.testing.assert_array_equal(out, expected)
    assert got is out and (parent[..., 1::2] == 7).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("attributes", [dict(strides=4), dict(strides=3, pads_begin=1, pads_end=2),
                                        dict(strides=[2, 3], output_padding=[1, 2])],
                         ids=["k1-s4", "cropped", "padded"])
@pytest.mark.parametrize("batch", [1, 2, 3, 4])
def test_prepared_strided_layers_on_two_threads(monkeypatch, batch, attributes, dtype):
    # Channels first on two threads, a strided layer's product and its stores run in one
    # parallel loop where the threads divide the batch, one after the other where not:
    # every output written (an output full of NaN keeps none), call after call, for
    # writable and read-only data.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "pointwise")
    ct.clear_caches()
    rng = np.random.default_rng(batch)
    data = rng.integers(-3, 4, (batch, 8, 5, 4)).astype(dtype)
    filter = rng.integers(-3, 4, (2, 4, 6, 1, 1)).astype(dtype)  # two groups
    expected = oracle.openvino_group_cbpd(data, filter, **attributes).astype(dtype)
    frozen = data.copy()
    frozen.flags.writeable = False
    with ct.num_threads(2):
        layer = ct.prepare(ct.group_convolution_backprop_data, filter=filter, **attributes)
        for given in (data, data, frozen, frozen):
            out = np.full(expected.shape, np.nan, dtype)
            assert layer(given, out=out) is out
            np.testing.assert_array_equal(out, expected)
