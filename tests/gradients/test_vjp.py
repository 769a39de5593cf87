"""The vector-Jacobian products of every dialect, against loops written from the
definition (tests/oracle.py) and against central finite differences.

Configurations are the peer tests' random ones (every auto_pad mode, output_shape
smaller and larger than natural, asymmetric pads, groups, every filter layout and
data format).  Values are small integers in float64, so every sum is exact and the
assertions are equalities.
"""

import numpy as np
import pytest
from hypothesis import given, settings

import convtranspose as ct
import oracle
from dialect_cases import HAS_BIAS, ORACLE_CASES, STRATEGIES


def _operands(case, seed_offset=0):
    """data, filter, bias (or None) and a grad_output of the result's shape, small ints."""
    rng = np.random.default_rng(case.seed + seed_offset)
    ints = lambda shape: rng.integers(-4, 5, shape).astype(np.float64)  # noqa: E731
    data, filter = ints(case.data_shape), ints(case.filter_shape)
    bias = ints((case.bias_size,)) if case.op in HAS_BIAS else None
    grad = ints(case.plan().output_shape)
    return data, filter, bias, grad


def _call(function, case, data, filter, bias, *extra):
    kwargs = case.kwargs
    if case.op in HAS_BIAS:
        return function(data, filter, *extra, bias, **kwargs)
    return function(data, filter, *extra, **kwargs)


def _oracle_case(case, data, filter, bias=None):
    kwargs = case.kwargs
    if case.op in HAS_BIAS:
        return ORACLE_CASES[case.op](data, filter, bias, **kwargs)
    return ORACLE_CASES[case.op](data, filter, **kwargs)


def _channels_first(array, case):
    return np.moveaxis(array, -1, 1) if case.plan().channels_last else array


def check_against_the_definition(case):
    data, filter, bias, grad = _operands(case)
    grads = _call(getattr(ct.vjp, case.op), case, data, filter, bias, grad)
    expected = _oracle_case(case, data, filter, bias)
    grad_ncx = _channels_first(grad, case)
    strides, dilations, offsets = expected.strides, expected.dilations, expected.offsets
    spatial, groups = expected.data.shape[2:], expected.weights.shape[0]
    kernel = expected.weights.shape[3:]

    assert grads[0].shape == data.shape and grads[0].dtype == data.dtype
    np.testing.assert_array_equal(
        _channels_first(grads[0], case),
        oracle.forward_convolution(grad_ncx, expected.weights, strides, dilations, offsets,
                                   spatial))
    assert grads[1].shape == filter.shape
    # the oracle's own relabelling of a filter into (G, Ci, Co, K...)
    canonical = _oracle_case(case, data, grads[1], bias).weights
    np.testing.assert_array_equal(
        canonical, oracle.filter_gradient(expected.data, grad_ncx, groups, kernel, strides,
                                          dilations, offsets))
    if case.op in HAS_BIAS:
        assert len(grads) == 3
        np.testing.assert_array_equal(
            grads[2], grad_ncx.sum(axis=(0,) + tuple(range(2, grad_ncx.ndim))))
    else:
        assert len(grads) == 2


def check_central_differences(case):
    """The loss ``L = sum(grad * f(data, filter, bias))`` is bilinear, so its central
    difference along any direction equals the directional derivative exactly (small
    integers, step 1/2, float64)."""
    data, filter, bias, grad = _operands(case)
    v_data, v_filter, v_bias, _ = _operands(case, seed_offset=1)
    grads = _call(getattr(ct.vjp, case.op), case, data, filter, bias, grad)
    forward = getattr(ct, case.op)

    def loss(d, f, b):
        return float(np.sum(grad * _call(forward, case, d, f, b)))

    h = 0.5
    directions = [(v_data, 0 * filter, None if bias is None else 0 * bias, grads[0]),
                  (0 * data, v_filter, None if bias is None else 0 * bias, grads[1])]
    if bias is not None:
        directions.append((0 * data, 0 * filter, v_bias, grads[2]))
    for dv, fv, bv, gradient in directions:
        step = lambda sign: loss(data + sign * h * dv, filter + sign * h * fv,  # noqa: E731
                                 None if bias is None else bias + sign * h * bv)
        difference = (step(1) - step(-1)) / (2 * h)
        vector = dv if gradient is grads[0] else fv if gradient is grads[1] else bv
        assert difference == float(np.sum(gradient * vector))


@pytest.mark.parametrize("op", sorted(ORACLE_CASES))
def test_vjp_matches_the_definition(op, examples):
    settings(max_examples=examples)(given(STRATEGIES[op]())(check_against_the_definition))()


@pytest.mark.parametrize("op", sorted(ORACLE_CASES))
def test_vjp_matches_central_differences(op, examples):
    settings(max_examples=max(examples // 2, 10))(
        given(STRATEGIES[op]())(check_central_differences))()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "uint16", "int64"])
def test_vjp_dtypes_round_the_exact_sums_once(dtype):
    """Every element type: the gradients are the float64 (or wrapping int64) sums cast
    once to the element type, as the forward functions do."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(5)
    data = oracle.random_array(rng, (2, 4, 5, 3), dtype)
    filter = oracle.random_array(rng, (2, 2, 3, 3, 2), dtype)
    attrs = dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1], output_padding=[1, 0])
    shape = ct.shapes.group_convolution_backprop_data(data.shape, filter.shape,
                                                      **attrs).output_shape
    grad = oracle.random_array(rng, shape, dtype)
    grad_data, grad_filter = ct.vjp.group_convolution_backprop_data(data, filter, grad, **attrs)
    exact = np.int64 if dtype.kind in "iu" else np.float64
    reference = ct.vjp.group_convolution_backprop_data(
        data.astype(exact), filter.astype(exact), grad.astype(exact), **attrs)
    assert grad_data.dtype == dtype and grad_filter.dtype == dtype
    for ours, wide in zip((grad_data, grad_filter), reference):
        if dtype.kind in "iu":
            np.testing.assert_array_equal(ours, wide.astype(dtype))
        else:
            tolerance = 4 * float(oracle.ml_finfo(dtype).eps)
            np.testing.assert_allclose(ours.astype(np.float64), wide, rtol=tolerance,
                                       atol=tolerance * float(np.abs(wide).max()))


def test_vjp_errors_name_the_argument():
    data, filter = np.ones((1, 2, 3)), np.ones((2, 3, 3))
    with pytest.raises(ct.ConvTransposeError, match=r"grad_output has shape \(1, 3, 4\).*"
                                                    r"\(1, 3, 5\)"):
        ct.vjp.convolution_backprop_data(data, filter, np.ones((1, 3, 4)))
    with pytest.raises(TypeError, match="grad_output has dtype float32"):
        ct.vjp.convolution_backprop_data(data, filter, np.ones((1, 3, 5), np.float32))
    with pytest.raises(ct.ConvTransposeError, match="strides"):
        ct.vjp.convolution_backprop_data(data, filter, np.ones((1, 3, 5)), strides=0)


def test_vjp_never_modifies_its_operands():
    rng = np.random.default_rng(0)
    x, w, b = rng.random((1, 3, 3, 4)), rng.random((2, 2, 4, 5)), rng.random(5)
    grad = rng.random((1, 6, 6, 5))
    copies = [a.copy() for a in (x, w, grad, b)]
    results = ct.vjp.conv_transpose(x, w, grad, b, strides=2)
    for original, copy in zip((x, w, grad, b), copies):
        np.testing.assert_array_equal(original, copy)
    for result in results:
        assert not any(np.shares_memory(result, a) for a in (x, w, grad, b))
