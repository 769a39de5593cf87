"""Arrays of other libraries: the same random configurations through NumPy,
array_api_strict and torch CPU tensors (the zero-copy route and the generic array-API
computation) against the oracle of tests/oracle.py, and identical to one another where
every sum is exact; the mixing rules, the errors, immutability and lazy imports.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import array_api_strict as xs
import numpy as np
import pytest
import torch
from hypothesis import given, settings

import convtranspose as ct
import dialect_cases
import oracle
from convtranspose._execute import array_api as _array_api
from dialect_cases import HAS_BIAS, ORACLE_CASES, STRATEGIES

ROUTES = ("array_api_strict", "torch", "torch generic")


def to_library(route, array):
    """``array`` in the route's library; None where the library lacks its dtype."""
    if route == "array_api_strict":
        if array.dtype == np.float16:  # array_api_strict has no float16
            return None
        return xs.asarray(array)
    return torch.from_numpy(array.copy())


def to_numpy(route, value):
    if value is None:
        return None
    expected = xs._array_object.Array if route == "array_api_strict" else torch.Tensor
    assert type(value) is expected, (route, type(value))
    return np.from_dlpack(value) if route == "array_api_strict" else value.numpy()


def run(route, function, arrays, monkeypatch, *args, **kwargs):
    """``function`` on ``arrays`` converted to ``route``, its results back in NumPy
    (None where the route cannot hold the dtype)."""
    converted = [None if a is None else to_library(route, a) for a in arrays]
    if any(c is None and a is not None for c, a in zip(converted, arrays)):
        return None
    with monkeypatch.context() as patch:
        patch.setattr(_array_api, "ZERO_COPY", route == "torch")
        result = function(*converted, *args, **kwargs)
    if isinstance(result, tuple):
        return tuple(to_numpy(route, r) for r in result)
    return to_numpy(route, result)


def _oracle_case(case, data, filter, bias):
    if case.op in HAS_BIAS:
        return ORACLE_CASES[case.op](data, filter, bias, **case.kwargs)
    return ORACLE_CASES[case.op](data, filter, **case.kwargs)


def check_transposed(case, monkeypatch):
    arrays = list(case.arrays())
    if case.op in HAS_BIAS and len(arrays) == 2:
        arrays.append(None)
    expected = _oracle_case(case, *arrays[:2], arrays[2] if case.op in HAS_BIAS else None)
    function = getattr(ct, case.op)
    reference = function(*arrays, **case.kwargs)
    oracle.assert_matches(reference, expected)
    for route in ROUTES:
        result = run(route, function, arrays, monkeypatch, **case.kwargs)
        if result is None:
            continue
        oracle.assert_matches(result, expected)
        if case.values == "integer":  # every sum exact: every route gives the same bits
            np.testing.assert_array_equal(result, reference)


@pytest.mark.parametrize("op", sorted(ORACLE_CASES))
def test_transposed_convolution_in_every_library(op, examples, monkeypatch):
    settings(max_examples=max(examples // 3, 10))(
        given(STRATEGIES[op]())(lambda case: check_transposed(case, monkeypatch)))()


# ---------------------------------------------------------------------------
# VJPs: small integers in float64, every sum exact


def _canonical(case, filter):
    """``filter`` relabelled as ``(G, Ci, Co, K...)`` by the oracle's own code."""
    rng_data = np.zeros(case.data_shape)
    bias = np.zeros(case.bias_size) if case.op in HAS_BIAS else None
    return _oracle_case(case, rng_data, filter, bias).weights


def check_gradients(case, monkeypatch):
    rng = np.random.default_rng(case.seed)
    ints = lambda shape: rng.integers(-4, 5, shape).astype(np.float64)  # noqa: E731
    data, filter = ints(case.data_shape), ints(case.filter_shape)
    bias = ints((case.bias_size,)) if case.op in HAS_BIAS else None
    plan = case.plan()
    grad = ints(plan.output_shape)
    expected = _oracle_case(case, data, filter, bias)
    last = plan.channels_last
    grad_ncx = np.moveaxis(grad, -1, 1) if last else grad
    want_data = oracle.forward_convolution(grad_ncx, expected.weights, expected.strides,
                                           expected.dilations, expected.offsets,
                                           expected.data.shape[2:])
    want_filter = oracle.filter_gradient(expected.data, grad_ncx, expected.weights.shape[0],
                                         expected.weights.shape[3:], expected.strides,
                                         expected.dilations, expected.offsets)
    function = getattr(ct.vjp, case.op)
    arrays = [data, filter, grad] + ([bias] if case.op in HAS_BIAS else [])
    for route in ROUTES:
        grads = run(route, function, arrays, monkeypatch, **case.kwargs)
        assert len(grads) == (3 if case.op in HAS_BIAS else 2)
        got_data = np.moveaxis(grads[0], -1, 1) if last else grads[0]
        np.testing.assert_array_equal(got_data, want_data)
        assert grads[1].shape == filter.shape
        np.testing.assert_array_equal(_canonical(case, grads[1]), want_filter)
        if case.op in HAS_BIAS:
            np.testing.assert_array_equal(
                grads[2], grad_ncx.sum(axis=(0,) + tuple(range(2, grad.ndim))))


@pytest.mark.parametrize("op", sorted(ORACLE_CASES))
def test_vjp_in_every_library(op, examples, monkeypatch):
    settings(max_examples=max(examples // 4, 8))(
        given(STRATEGIES[op]())(lambda case: check_gradients(case, monkeypatch)))()


# ---------------------------------------------------------------------------
# The forward convolution


def convolution_layers():
    return dialect_cases.convolution_layers(largest_dilation=2, largest_sizes={1: 8, 2: 5, 3: 4},
                                            largest_stride=3, largest_pad=2)


def check_convolution(layer, monkeypatch):
    function = ct.group_convolution if layer["grouped"] else ct.convolution
    shapes = ct.shapes.group_convolution if layer["grouped"] else ct.shapes.convolution
    rng = np.random.default_rng(layer["seed"])
    data, filter = (rng.integers(-4, 5, layer[k]).astype(np.float64)
                    for k in ("data_shape", "filter_shape"))
    plan = shapes(layer["data_shape"], layer["filter_shape"], **layer["attrs"])
    expected = oracle.forward_convolution(data, filter.reshape(plan.canonical_filter_shape),
                                          plan.strides, plan.dilations, plan.pads_begin,
                                          plan.output_shape[2:])
    for route in ROUTES:
        result = run(route, function, [data, filter], monkeypatch, **layer["attrs"])
        np.testing.assert_array_equal(result, expected)


def test_forward_convolution_in_every_library(examples, monkeypatch):
    settings(max_examples=max(examples // 2, 10))(
        given(convolution_layers())(lambda layer: check_convolution(layer, monkeypatch)))()


# ---------------------------------------------------------------------------
# dtypes, special values, immutability


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32", "int64"])
def test_dtypes_accumulate_as_numpy_does(dtype, monkeypatch):
    """Integers wrap exactly as the NumPy path's int64 sums do; float32 sums in float32."""
    rng = np.random.default_rng(4)
    data = oracle.random_array(rng, (2, 4, 5, 3), np.dtype(dtype))
    filter = oracle.random_array(rng, (2, 2, 3, 3, 2), np.dtype(dtype))
    attrs = dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1], output_padding=[1, 0])
    expected = oracle.openvino_group_cbpd_case(data, filter, **attrs)
    for route in ROUTES:
        result = run(route, ct.group_convolution_backprop_data, [data, filter], monkeypatch,
                     **attrs)
        assert result.dtype == dtype
        oracle.assert_matches(result, expected)


def test_torch_half_precision_accumulates_in_float32(monkeypatch):
    rng = np.random.default_rng(6)
    for dtype in (torch.float16, torch.bfloat16):
        data = torch.from_numpy(rng.standard_normal((1, 3, 6, 6), np.float32)).to(dtype)
        filter = torch.from_numpy(rng.standard_normal((3, 2, 3, 3), np.float32)).to(dtype)
        monkeypatch.setattr(_array_api, "ZERO_COPY", False)
        result = ct.onnx_conv_transpose(data, filter, strides=2, pads=[1, 0, 0, 1])
        assert result.dtype == dtype
        # the exact float64 sums, rounded once to the element type
        exact = ct.onnx_conv_transpose(data.double().numpy(), filter.double().numpy(),
                                       strides=2, pads=[1, 0, 0, 1])
        np.testing.assert_array_equal(result.float().numpy(),
                                      torch.from_numpy(exact).to(dtype).float().numpy())


def test_no_zero_of_the_algorithm_multiplies_an_infinity():
    """An infinite weight whose taps all fall outside the data or the crop must not
    turn the result into NaN: the generic computation pads products, not operands,
    when a weight is not finite."""
    data = np.array([[[1.0, 2.0, 3.0]]])
    filter = np.array([[[np.inf, 10.0, 100.0]]])
    attrs = dict(strides=2, pads=[3, 0])  # the inf tap lands at full[0..4], crop from 3
    expected = oracle.onnx_conv_transpose_case(data, filter, **attrs).rounded()
    result = np.from_dlpack(ct.onnx_conv_transpose(xs.asarray(data), xs.asarray(filter),
                                                   **attrs))
    np.testing.assert_array_equal(result, expected)
    grads = ct.vjp.onnx_conv_transpose(xs.asarray(data), xs.asarray(filter),
                                       xs.asarray(np.ones(expected.shape)), **attrs)
    np.testing.assert_array_equal(
        np.from_dlpack(grads[0]),
        ct.vjp.onnx_conv_transpose(data, filter, np.ones(expected.shape), **attrs)[0])


def test_no_array_is_written_in_place(monkeypatch):
    """Every in-place operation of array_api_strict's arrays raises here, as JAX's
    immutable arrays do; the operands are unchanged afterwards."""
    def refuse(self, *args):
        raise AssertionError("an array was written in place")

    array_type = xs._array_object.Array
    for name in ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                 "__imatmul__"):
        monkeypatch.setattr(array_type, name, refuse)
    rng = np.random.default_rng(2)
    ints = lambda shape: rng.integers(-3, 4, shape).astype(np.float64)  # noqa: E731
    data, filter, bias = ints((2, 4, 5, 3)), ints((2, 3, 3, 4)), ints((4,))
    attrs = dict(strides=[2, 1], pads_begin=[0, 1], pads_end=[1, 0], groups=1,
                 data_format="NXC", filter_format="XIO")
    operands = [xs.asarray(a) for a in (data, filter, bias)]
    out = ct.conv_transpose(*operands, **attrs)
    grads = ct.vjp.conv_transpose(operands[0], operands[1], xs.ones(out.shape, dtype=xs.float64),
                                  operands[2], **attrs)
    assert [g.shape for g in grads] == [data.shape, filter.shape, bias.shape]
    conv = ct.convolution(xs.asarray(ints((1, 2, 6))), xs.asarray(ints((3, 2, 3))), strides=2)
    assert conv.shape == (1, 3, 2)
    for before, after in zip((data, filter, bias), operands):
        np.testing.assert_array_equal(np.from_dlpack(after), before)


# ---------------------------------------------------------------------------
# The mixing rules and errors


def _small():
    return np.ones((1, 2, 3)), np.ones((2, 1, 2))


def test_a_numpy_operand_beside_a_tensor_is_refused():
    data, filter = _small()
    with pytest.raises(TypeError, match=r"filter is a numpy.ndarray but data is a torch.Tensor"):
        ct.convolution_backprop_data(torch.from_numpy(data), filter)
    with pytest.raises(TypeError, match=r"data is a numpy.ndarray but filter is a torch"):
        ct.convolution_backprop_data(data.tolist(), torch.from_numpy(filter))
    with pytest.raises(TypeError, match=r"B is a torch.Tensor but X is a array_api_strict"):
        ct.onnx_conv_transpose(xs.asarray(data), xs.asarray(filter), torch.zeros(1))
    with pytest.raises(TypeError, match=r"grad_output is a numpy.ndarray"):
        ct.vjp.convolution_backprop_data(xs.asarray(data), xs.asarray(filter), np.ones((1, 1, 4)))
    with pytest.raises(TypeError, match=r"filter is a numpy.ndarray but data is a torch"):
        ct.convolution(torch.ones(1, 1, 4), np.ones((1, 1, 2)))


def test_operands_on_two_devices_are_refused():
    data, filter = _small()
    other = xs.Device("device1")
    with pytest.raises(TypeError, match=r"filter is on device .*device1.* but data is on"):
        ct.convolution_backprop_data(xs.asarray(data), xs.asarray(filter, device=other))


def test_out_is_for_numpy_only():
    data, filter = _small()
    with pytest.raises(TypeError, match=r"out must be a numpy.ndarray with NumPy operands"):
        ct.convolution_backprop_data(torch.from_numpy(data), torch.from_numpy(filter),
                                     out=np.empty((1, 1, 4)))


def test_dtype_errors_name_the_operands(monkeypatch):
    data, filter = _small()
    with pytest.raises(TypeError,
                       match=r"data has dtype \S*float64 but filter has dtype \S*float32"):
        ct.convolution_backprop_data(xs.asarray(data), xs.asarray(filter, dtype=xs.float32))
    with pytest.raises(TypeError, match=r"data, filter have dtype \S*bool, which is not supported"):
        ct.convolution_backprop_data(xs.asarray(data > 0), xs.asarray(filter > 0))
    monkeypatch.setattr(_array_api, "ZERO_COPY", False)
    with pytest.raises(TypeError, match=r"complex.*not supported"):
        ct.convolution(torch.ones(1, 1, 4, dtype=torch.complex64),
                       torch.ones(1, 1, 2, dtype=torch.complex64))


def test_shape_errors_are_the_librarys():
    data, filter = _small()
    with pytest.raises(ct.ConvTransposeError, match=r"data has 2 channels"):
        ct.convolution_backprop_data(xs.asarray(np.ones((1, 2, 3))), xs.asarray(np.ones((3, 1, 2))))
    with pytest.raises(ct.ConvTransposeError, match=r"grad_output has shape \(1, 1, 5\)"):
        ct.vjp.convolution_backprop_data(xs.asarray(data), xs.asarray(filter),
                                         xs.asarray(np.ones((1, 1, 5))))


def test_importing_and_using_the_numpy_path_imports_no_other_library():
    code = (
        "import sys, numpy as np, convtranspose as ct\n"
        "x, w = np.ones((1, 2, 3)), np.ones((2, 1, 2))\n"
        "y = ct.convolution_backprop_data(x, w)\n"
        "ct.vjp.convolution_backprop_data(x, w, y)\n"
        "ct.convolution(y, w)\n"
        "ct.convolution_backprop_data(x.tolist(), w)\n"
        "loaded = {'torch', 'array_api_compat', 'array_api_strict', 'jax', 'cupy'}"
        " & set(sys.modules)\n"
        "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_benchmark_script_times_both_routes(tmp_path, capsys):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "array_api_torch.py"
    spec = importlib.util.spec_from_file_location("array_api_torch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "result.json"
    assert module.main(["--layers", "tiny", "--rounds", "1", "--out", str(out)]) == 0
    assert _array_api.ZERO_COPY  # restored
    rows = json.loads(out.read_text())["rows"]
    assert [row["op"] for row in rows] == ["transposed", "vjp", "convolution"]
    assert all(row["zero_copy_ms"] > 0 and row["generic_ms"] > 0 for row in rows)
    assert all(row["max_relative_difference"] < 1e-5 for row in rows)
