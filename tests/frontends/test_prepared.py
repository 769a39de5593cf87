"""Prepared layers (``ct.prepare``): each equals the slow oracle or the real framework, and
is bit for bit what its array function returns, across input shapes, weight updates,
pickling and the caller's later edits of its arrays."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._plan.dialects import DIALECTS
from convtranspose._runtime import memo
from dialects._cases import require

RNG = np.random.default_rng(20261128)


def _values(shape, dtype=np.float64):
    return RNG.integers(-3, 4, size=shape).astype(dtype)


# (function, the oracle of the same dialect, data shapes, bound arguments): small-integer
# values, so every sum is exact and the oracle's result compares with ==.
SPEC_LAYERS = [
    (ct.convolution_backprop_data, oracle.openvino_cbpd, [(1, 3, 5, 4), (2, 3, 2, 7)],
     dict(filter=_values((3, 2, 3, 3)), strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1],
          dilations=[1, 2], output_padding=[1, 0])),
    (ct.group_convolution_backprop_data, oracle.openvino_group_cbpd, [(2, 4, 6), (1, 4, 3)],
     dict(filter=_values((2, 2, 3, 2)), strides=3, auto_pad="same_lower")),
    (ct.conv_transpose, oracle.onednn_conv_transpose, [(1, 4, 4, 2), (3, 2, 5, 2)],
     dict(filter=_values((3, 3, 2, 6)), bias=_values((6,)), strides=2, pads_begin=1,
          pads_end=0, groups=1)),
    (ct.onnx_conv_transpose, oracle.onnx_conv_transpose, [(1, 4, 3, 3, 2), (2, 4, 2, 1, 3)],
     dict(W=_values((4, 1, 2, 2, 3)), B=_values((2,)), group=2, strides=[1, 2, 2],
          pads=[0, 1, 0, 1, 0, 1])),
]


def _oracle_arguments(function, arguments):
    """The bound arguments as the oracle of ``function`` takes them (positionally for the
    operands)."""
    names = {ct.conv_transpose: ("filter", "bias"), ct.onnx_conv_transpose: ("W", "B")}
    operands = names.get(function, ("filter",))
    attributes = {k: v for k, v in arguments.items() if k not in operands}
    return [arguments.get(name) for name in operands], attributes


@pytest.mark.parametrize("function, reference, shapes, arguments", SPEC_LAYERS,
                         ids=lambda v: getattr(v, "__name__", ""))
def test_spec_dialects_match_the_oracle_and_the_function(function, reference, shapes,
                                                         arguments):
    layer = ct.prepare(function, **arguments)
    operands, attributes = _oracle_arguments(function, arguments)
    for shape in shapes + shapes:  # each shape bound once, then called bound
        data = _values(shape)
        result = layer(data)
        np.testing.assert_array_equal(result, reference(data, *operands, **attributes))
        np.testing.assert_array_equal(result, function(data, **arguments))


def test_torch_layer_matches_torch():
    torch = require("torch", "the PyTorch dialect's reference")
    weight = _values((4, 3, 3, 2), np.float32)
    bias = _values((6,), np.float32)
    layer = ct.prepare(ct.torch_conv_transpose, weight=weight, bias=bias, stride=(2, 1),
                       padding=(1, 0), output_padding=(1, 0), groups=2, dilation=(1, 2))
    on_torch = ct.prepare(ct.torch_conv_transpose, weight=torch.from_numpy(weight),
                          bias=torch.from_numpy(bias), stride=(2, 1), padding=(1, 0),
                          output_padding=(1, 0), groups=2, dilation=(1, 2))
    for shape in [(1, 4, 5, 3), (2, 4, 2, 6)]:
        data = _values(shape, np.float32)
        expected = torch.nn.functional.conv_transpose2d(
            torch.from_numpy(data), torch.from_numpy(weight), torch.from_numpy(bias),
            stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
            dilation=(1, 2)).numpy()
        np.testing.assert_array_equal(layer(data), expected)
        # A layer of torch weights takes tensors (through the array function) and gives
        # tensors; mixing libraries is refused as the function refuses it.
        tensor = on_torch(torch.from_numpy(data))
        assert isinstance(tensor, torch.Tensor)
        np.testing.assert_array_equal(tensor.numpy(), expected)
        with pytest.raises(TypeError, match="same library"):
            layer(torch.from_numpy(data))


def test_jax_layer_matches_jax():
    jax = require("jax", "the JAX dialect's reference")
    rhs = _values((3, 2, 2, 5), np.float32)
    layer = ct.prepare(ct.jax_conv_transpose, rhs=rhs, strides=(2, 3), padding="SAME")
    for shape in [(1, 4, 3, 2), (2, 2, 5, 2)]:
        lhs = _values(shape, np.float32)
        expected = np.asarray(jax.lax.conv_transpose(
            lhs, rhs, (2, 3), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
        np.testing.assert_array_equal(layer(lhs), expected)


# The framework dialects' docstring examples (each checked against its framework by the
# dialect tests): (function, data, bound arguments, expected result, raveled).
GOLDEN = [
    (ct.tf_conv_transpose, np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1),
     dict(filters=np.array([1.0, 10.0, 100.0]).reshape(3, 1, 1), output_shape=[1, 5, 1],
          strides=2, padding="SAME"), [10.0, 102.0, 20.0, 203.0, 30.0]),
    (ct.keras_conv_transpose, np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1),
     dict(kernel=np.ones((1, 1, 1)), strides=3), [1, 0, 0, 2, 0, 0, 3, 0, 0]),
    (ct.tflite_transpose_conv, np.array([1.0, 2.0, 3.0]).reshape(1, 1, 3, 1),
     dict(output_shape=[1, 1, 6, 1], weights=np.array([1.0, 10.0, 100.0]).reshape(1, 1, 3, 1),
          bias=np.array([5.0]), stride_w=2), [6.0, 15.0, 107.0, 25.0, 208.0, 35.0]),
    (ct.tensorrt_deconvolution, np.array([1.0, 2.0, 3.0]).reshape(1, 1, 1, 3),
     dict(kernel=np.array([1.0, 10.0, 100.0]).reshape(1, 1, 1, 3), stride_nd=2,
          padding_mode="SAME_LOWER"),
     [10.0, 102.0, 20.0, 203.0, 30.0, 300.0]),
]


@pytest.mark.parametrize("function, data, arguments, expected", GOLDEN,
                         ids=lambda v: getattr(v, "__name__", ""))
def test_framework_dialects_give_their_golden_results(function, data, arguments, expected):
    layer = ct.prepare(function, **arguments)
    for _ in range(2):
        np.testing.assert_array_equal(layer(data).ravel(), expected)
    data_name = DIALECTS[function.__name__].operands[0]
    np.testing.assert_array_equal(layer(data), function(**{data_name: data}, **arguments))


def test_forward_convolution_matches_the_direct_sum():
    filter = _values((2, 3, 3))                       # C_OUT=2, C_IN=3, K=3
    layer = ct.prepare(ct.convolution, filter=filter, strides=2)
    data = _values((1, 3, 7))
    expected = np.array([[[sum(data[0, c, 2 * y + k] * filter[o, c, k]
                               for c in range(3) for k in range(3)) for y in range(3)]
                          for o in range(2)]])
    np.testing.assert_array_equal(layer(data), expected)
    explanation = layer.explain()  # the data gradient of a transposed convolution
    assert "computed as  strides [2]" in str(explanation)
    assert explanation.choice.algorithm in explanation.choice.candidates


def test_the_layer_keeps_its_own_weights_and_set_weights_replaces_them():
    filter = _values((2, 3, 2, 2))
    data = _values((1, 2, 3, 3))
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, strides=2)
    before = oracle.openvino_cbpd(data, filter.copy(), strides=2)
    filter[...] = 0  # the caller's array, edited after prepare
    np.testing.assert_array_equal(layer(data), before)
    assert not layer.arguments["filter"].flags.writeable
    replacement = _values((2, 3, 2, 2))
    layer.set_weights(replacement)
    np.testing.assert_array_equal(layer(data), oracle.openvino_cbpd(data, replacement,
                                                                    strides=2))
    onnx = ct.prepare(ct.onnx_conv_transpose, W=replacement)
    onnx.set_weights(B=np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(
        onnx(data), oracle.onnx_conv_transpose(data, replacement, np.array([1.0, 2.0, 3.0])))
    with pytest.raises(TypeError, match="not one of W, B"):
        onnx.set_weights(filter=replacement)
    with pytest.raises(TypeError, match="at most 2"):
        onnx.set_weights(replacement, None, replacement)


def test_out_and_other_dtypes_behave_as_the_function():
    filter = _values((2, 3, 3), np.float32)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, strides=2)
    data = _values((2, 2, 4), np.float32)
    out = np.empty((2, 3, 9), np.float32)
    assert layer(data, out=out) is out
    np.testing.assert_array_equal(out, oracle.openvino_cbpd(data, filter, strides=2))
    # float64 data with a float32 filter is refused exactly as the function refuses it.
    with pytest.raises(TypeError) as prepared_error:
        layer(data.astype(np.float64))
    with pytest.raises(TypeError) as function_error:
        ct.convolution_backprop_data(data.astype(np.float64), filter, strides=2)
    assert str(prepared_error.value) == str(function_error.value)
    swapped = data.astype(data.dtype.newbyteorder(">"))  # read in native order
    np.testing.assert_array_equal(layer(swapped), oracle.openvino_cbpd(data, filter,
                                                                       strides=2))


def test_bad_arguments_are_refused_when_prepared_or_on_the_first_call():
    w = _values((2, 3, 3))
    with pytest.raises(TypeError, match="array functions"):
        ct.prepare(np.convolve, filter=w)
    with pytest.raises(TypeError, match="data is given to each call"):
        ct.prepare(ct.convolution_backprop_data, data=w, filter=w)
    with pytest.raises(TypeError, match="unknown argument 'stride'"):
        ct.prepare(ct.convolution_backprop_data, filter=w, stride=2)
    with pytest.raises(TypeError, match="missing the argument 'padding'"):
        ct.prepare(ct.jax_conv_transpose, rhs=w, strides=(2,))
    layer = ct.prepare(ct.convolution_backprop_data, filter=w, strides=2)
    with pytest.raises(ct.ConvTransposeError):
        layer(_values((1, 5, 4)))  # 5 channels against the filter's 2: not kept
    np.testing.assert_array_equal(layer(_values((1, 2, 4)) * 0), np.zeros((1, 3, 9)))
    with pytest.raises(ct.ConvTransposeError, match="data_shape"):
        ct.prepare(ct.onnx_conv_transpose, W=w).explain()


def test_pickled_layers_compute_the_same_and_explain_names_the_algorithm():
    w = _values((2, 3, 3, 3), np.float32)
    layer = ct.prepare("onnx_conv_transpose", W=w, strides=[2, 2], pads=[1, 1, 1, 1])
    data = _values((1, 2, 5, 5), np.float32)
    expected = oracle.onnx_conv_transpose(data, w, strides=[2, 2], pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(layer(data), expected)
    copy = pickle.loads(pickle.dumps(layer))
    np.testing.assert_array_equal(copy(data), expected)
    assert "onnx_conv_transpose" in repr(layer) and "[1, 3, 9, 9]" in repr(layer)
    assert layer.explain().choice.runs in ct.ALGORITHMS
    assert layer.explain((4, 2, 8, 8)).plan.output_shape == (4, 3, 15, 15)


def test_owned_filters_keep_one_derived_dict_per_view_geometry():
    square = memo.frozen(np.arange(16.0).reshape(4, 4).copy())
    with pytest.raises(ValueError):
        memo.own(np.zeros(3))  # writable: its owner could change it
    owned = memo.own(square)
    first = memo.derived_from(owned[:, :], "key")
    assert memo.derived_from(owned.reshape(4, 4), "key") is first
    assert memo.derived_from(owned.T, "key") is not first  # same shape, other values
    assert memo.derived_from(owned, "other") is not first
