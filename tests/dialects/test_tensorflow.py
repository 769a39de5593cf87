"""``ct.tf_conv_transpose``, ``ct.keras_conv_transpose`` and ``ct.tflite_transpose_conv``
against TensorFlow 2.21, Keras 3.15 and LiteRT 2.3: random layers, equal shapes and values,
and the same refusals (ours a ``ConvTransposeError`` naming the rule).

TensorFlow's CPU kernels refuse dilations above 1 and channels-first data (GPU only): those
cases run TensorFlow on the kernel dilated with zeros and on transposed data.  TensorFlow is
imported once for the module (several seconds)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import convtranspose as ct

from ._cases import assert_same, dilate_kernel, integer_array, require

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's oneDNN CPU kernel aborts on some valid layers ("could not create a primitive
# descriptor", e.g. input width 1, stride 2, output width 1): compare with its Eigen kernels.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = require("tensorflow", "tensorflow-cpu is installed by the test extra")
keras = require("keras", "keras is installed by the test extra")
litert = require("ai_edge_litert.interpreter", "ai-edge-litert is installed by the test extra")

pytestmark = pytest.mark.peers

FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def _last(array, channels_last):
    """Channels-first data as channels last (and back: the same permutation's inverse)."""
    if channels_last:
        return array
    return np.moveaxis(array, 1, -1)


def _size_range(x, k, s, mode):
    if mode == "SAME":
        return (x - 1) * s + 1, x * s
    a, b = (0, 0) if mode == "VALID" else mode
    low = (x - 1) * s + k - a - b
    return low, low + s - 1


def random_tf_layer(rng):
    rank = int(rng.integers(1, 4))
    channels_last = bool(rng.random() < 0.6)
    c_in, c_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    spatial = tuple(int(x) for x in rng.integers(1, 5, rank))
    kernel = tuple(int(k) for k in rng.integers(1, 4, rank))
    strides = tuple(int(s) for s in rng.integers(1, 4, rank))
    dilations = tuple(int(d) for d in rng.integers(1, 3, rank)) if rng.random() < 0.3 \
        else (1,) * rank
    kind = rng.random()
    if rank == 2 and kind < 0.3:
        pairs = [tuple(int(v) for v in rng.integers(0, 3, 2)) for _ in range(rank)]
        padding = ([[0, 0]] + [list(p) for p in pairs] + [[0, 0]])
        modes = pairs
    else:
        padding = "SAME" if kind < 0.65 else "VALID"
        modes = [padding] * rank
    sizes = []
    for x, k, s, d, mode in zip(spatial, kernel, strides, dilations, modes):
        low, high = _size_range(x, (k - 1) * d + 1, s, mode)
        size = int(rng.integers(low, high + 1))
        if rng.random() < 0.12:  # just outside the range: refused
            size = low - 1 if rng.random() < 0.5 else high + 1
        sizes.append(max(size, 1))
    n = int(rng.integers(1, 3))
    if channels_last:
        data, output = (n,) + spatial + (c_in,), [n] + sizes + [c_out]
    else:
        data, output = (n, c_in) + spatial, [n, c_out] + sizes
    if not channels_last and isinstance(padding, list):
        padding = [padding[0], padding[-1]] + padding[1:-1]
    return dict(input=data, filters=kernel + (c_out, c_in), output_shape=output,
                strides=strides, padding=padding,
                data_format=FORMATS[rank][0 if channels_last else 1], dilations=dilations)


def run_tf(layer, x, w):
    """TensorFlow's output (channels last, undilated kernel where the CPU needs it), or
    its error message."""
    rank = x.ndim - 2
    channels_last = layer["data_format"] == FORMATS[rank][0]
    output = list(layer["output_shape"])
    padding = layer["padding"]
    if not channels_last:
        output = [output[0]] + output[2:] + [output[1]]
        if isinstance(padding, list):
            padding = [padding[0]] + padding[2:] + [padding[1]]
    kernel = dilate_kernel(w, layer["dilations"], range(rank))
    try:
        result = tf.nn.conv_transpose(_last(x, channels_last), kernel, output,
                                      layer["strides"], padding).numpy()
    except (tf.errors.InvalidArgumentError, ValueError) as error:
        return str(error)
    return result if channels_last else np.moveaxis(result, -1, 1)


def test_random_layers_match_tensorflow():
    rng = np.random.default_rng(21)
    compared = refused = 0
    for _ in range(120):
        layer = random_tf_layer(rng)
        x = integer_array(rng, layer["input"], "float32")
        w = integer_array(rng, layer["filters"], "float32")
        expected = run_tf(layer, x, w)
        arguments = {k: v for k, v in layer.items() if k not in ("input", "filters")}
        if isinstance(expected, str):
            assert "doesn't match computed" in expected, (layer, expected)
            with pytest.raises(ct.ConvTransposeError, match="does not match the input"):
                ct.tf_conv_transpose(x, w, **arguments)
            refused += 1
            continue
        assert_same(ct.tf_conv_transpose(x, w, **arguments), expected, layer)
        plan = ct.shapes.tf_conv_transpose(layer["input"], layer["filters"], **arguments)
        assert plan.output_shape == expected.shape
        compared += 1
    assert compared > 70 and refused > 8, (compared, refused)


def test_tensorflow_cpu_refuses_what_the_op_defines():
    # Dilations above 1 and NCHW are GPU-only in TensorFlow's kernels; the op (and ours)
    # defines them, checked above through a zero-dilated kernel and transposed data.
    x, w = np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="dilation rates larger than 1"):
        tf.nn.conv_transpose(x, w, [1, 5, 5, 1], 1, "VALID", dilations=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="only supports NHWC"):
        tf.nn.conv_transpose(x.transpose(0, 3, 1, 2), w, [1, 1, 4, 4], 1, "VALID",
                             data_format="NCHW")
    assert ct.tf_conv_transpose(x, w, [1, 5, 5, 1], 1, "VALID", dilations=2).shape == \
        (1, 5, 5, 1)


@pytest.mark.parametrize("arguments, tf_message, ours", [
    (dict(strides=[2, 2, 2, 2]), "strides in the batch and depth", "batch and depth"),
    (dict(padding=[[0, 0], [-1, 0], [0, 0], [0, 0]]), "must be nonnegative", "nonnegative"),
    (dict(padding=[[1, 0], [0, 0], [0, 0], [0, 0]]), "batch or depth", "batch or depth"),
    (dict(padding="FULL"), "padding", "padding"),
    (dict(output_shape=[1, 6, 6, 1, 1, 1]), "length 3, 4 or 5", "length 3, 4 or 5"),
])
def test_refusals_match_tensorflow(arguments, tf_message, ours):
    x, w = np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)
    call = dict(output_shape=[1, 6, 6, 1], strides=2, padding="SAME") | arguments
    with pytest.raises((ValueError, tf.errors.OpError), match=tf_message):
        tf.nn.conv_transpose(x, w, **call)
    with pytest.raises(ct.ConvTransposeError, match=ours):
        ct.tf_conv_transpose(x, w, **call)


def random_keras_layer(rng):
    rank = int(rng.integers(1, 4))
    strides = tuple(int(s) for s in rng.integers(1, 4, rank))
    dilations = (1,) * rank
    if rng.random() < 0.3:
        dilations = tuple(int(d) for d in rng.integers(1, 3, rank))
        if rng.random() < 0.8:
            strides = (1,) * rank  # otherwise refused by Keras
    output_padding = None
    if rng.random() < 0.5:
        output_padding = tuple(int(rng.integers(0, s + (rng.random() < 0.1))) for s in strides)
    channels_last = bool(rng.random() < 0.6)
    c_in, filters = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    spatial = tuple(int(x) for x in rng.integers(1, 5, rank))
    n = int(rng.integers(1, 3))
    return dict(inputs=(n,) + spatial + (c_in,) if channels_last else (n, c_in) + spatial,
                kernel=tuple(int(k) for k in rng.integers(1, 4, rank)) + (filters, c_in),
                bias=(filters,) if rng.random() < 0.5 else None, strides=strides,
                padding=str(rng.choice(["valid", "same"])), output_padding=output_padding,
                data_format="channels_last" if channels_last else "channels_first",
                dilation_rate=dilations)


def run_keras(layer, x, w, b):
    """The Keras layer's output, or its error message.  The real layer is built first (its
    constructor's checks); channels-first data and dilation run as channels last with a
    zero-dilated kernel, which TensorFlow's CPU kernels accept."""
    rank = x.ndim - 2
    cls = getattr(keras.layers, f"Conv{rank}DTranspose")
    options = dict(filters=w.shape[-2], kernel_size=w.shape[:rank], strides=layer["strides"],
                   padding=layer["padding"], output_padding=layer["output_padding"],
                   use_bias=b is not None)
    try:
        cls(data_format=layer["data_format"], dilation_rate=layer["dilation_rate"], **options)
        kernel = dilate_kernel(w, layer["dilation_rate"], range(rank))
        options["kernel_size"] = kernel.shape[:rank]
        module = cls(**options)
        channels_last = layer["data_format"] == "channels_last"
        data = _last(x, channels_last)
        module.build(data.shape)
        module.set_weights([kernel] + ([b] if b is not None else []))
        result = np.asarray(module(data))
    except (ValueError, tf.errors.InvalidArgumentError) as error:
        return str(error)
    return result if channels_last else np.moveaxis(result, -1, 1)


def test_random_layers_match_keras():
    rng = np.random.default_rng(3)
    compared, refused = 0, {}
    for _ in range(80):
        layer = random_keras_layer(rng)
        x = integer_array(rng, layer["inputs"], "float32")
        w = integer_array(rng, layer["kernel"], "float32")
        b = None if layer["bias"] is None else integer_array(rng, layer["bias"], "float32")
        expected = run_keras(layer, x, w, b)
        arguments = {k: v for k, v in layer.items() if k not in ("inputs", "kernel", "bias")}
        if isinstance(expected, str):
            reasons = {"doesn't match computed": "does not match the input",
                       "strictly less than": "strictly less than",
                       "in conjunction with": "in conjunction with"}
            words = [ours for theirs, ours in reasons.items() if theirs in expected]
            assert words, (layer, expected)
            with pytest.raises(ct.ConvTransposeError, match=words[0]):
                ct.keras_conv_transpose(x, w, b, **arguments)
            refused[words[0]] = refused.get(words[0], 0) + 1
            continue
        assert_same(ct.keras_conv_transpose(x, w, b, **arguments), expected, layer)
        plan = ct.shapes.keras_conv_transpose(layer["inputs"], layer["kernel"], layer["bias"],
                                              **arguments)
        assert plan.output_shape == expected.shape
        compared += 1
    assert compared > 40 and len(refused) == 3, (compared, refused)


def test_keras_same_with_output_padding_and_an_even_kernel_is_refused_by_tensorflow():
    # Keras computes Y = (X-1)*s + K % 2 + output_padding = 4 for X=3, K=2, s=2, and
    # TensorFlow's SAME maps 4 back to ceil(4/2) = 2, not 3.
    layer = keras.layers.Conv1DTranspose(1, 2, strides=2, padding="same", output_padding=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="doesn't match computed"):
        layer(np.ones((1, 3, 1), np.float32))
    with pytest.raises(ct.ConvTransposeError, match=r"Keras computes the output size \[4\]"):
        ct.keras_conv_transpose(np.ones((1, 3, 1)), np.ones((2, 1, 1)), strides=2,
                                padding="same", output_padding=0)


def _tflite_model(kernel, strides, padding, bias):
    """A LiteRT interpreter of one TRANSPOSE_CONV whose output shape and input are fed at
    run time (converted from ``tf.nn.conv2d_transpose`` with a dynamic ``output_shape``)."""
    hwoi = np.ascontiguousarray(kernel.transpose(1, 2, 0, 3))  # OHWI -> TF's HWOI

    @tf.function(input_signature=[tf.TensorSpec([4], tf.int32),
                                  tf.TensorSpec([None, None, None, kernel.shape[-1]],
                                                tf.float32)])
    def model(shape, x):
        y = tf.nn.conv2d_transpose(x, tf.constant(hwoi), shape, [1, *strides, 1], padding)
        return y if bias is None else y + tf.constant(bias)

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [model.get_concrete_function()], model)
    interpreter = litert.Interpreter(model_content=converter.convert())
    ops = [op["op_name"] for op in interpreter._get_ops_details()]
    assert ops == ["TRANSPOSE_CONV"], ops
    return interpreter


def run_tflite(interpreter, output_shape, x):
    shape_input, data_input = interpreter.get_input_details()
    if shape_input["name"] != "shape":
        shape_input, data_input = data_input, shape_input
    interpreter.resize_tensor_input(data_input["index"], list(x.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(shape_input["index"], np.array(output_shape, np.int32))
    interpreter.set_tensor(data_input["index"], x)
    try:
        interpreter.invoke()
    except RuntimeError as error:
        return str(error)
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy()


def test_random_layers_match_litert():
    rng = np.random.default_rng(8)
    compared = refused = 0
    for _ in range(16):  # one converted model per kernel, stride, padding and bias
        c_in, c_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        weights = integer_array(rng, (c_out,) + tuple(int(k) for k in rng.integers(1, 4, 2))
                                + (c_in,), "float32")
        strides = tuple(int(s) for s in rng.integers(1, 4, 2))
        padding = str(rng.choice(["SAME", "VALID"]))
        bias = integer_array(rng, (c_out,), "float32") if rng.random() < 0.5 else None
        interpreter = _tflite_model(weights, strides, padding, bias)
        for _ in range(6):
            spatial = [int(v) for v in rng.integers(1, 5, 2)]
            sizes = []
            for x, k, s in zip(spatial, weights.shape[1:3], strides):
                low, high = _size_range(x, k, s, padding)
                size = int(rng.integers(low, high + 1))
                if rng.random() < 0.15:  # just outside the range: refused
                    size = low - 1 if rng.random() < 0.5 else high + 1
                sizes.append(max(1, size))
            x = integer_array(rng, [int(rng.integers(1, 3))] + spatial + [c_in], "float32")
            output_shape = [x.shape[0]] + sizes + [c_out]
            expected = run_tflite(interpreter, output_shape, x)
            options = dict(padding=padding, stride_h=strides[0], stride_w=strides[1])
            context = (output_shape, weights.shape, x.shape, options, bias is not None)
            if isinstance(expected, str):
                assert "computed_input_" in expected, (context, expected)
                with pytest.raises(ct.ConvTransposeError, match="does not match the input"):
                    ct.tflite_transpose_conv(output_shape, weights, x, bias, **options)
                refused += 1
                continue
            assert_same(ct.tflite_transpose_conv(output_shape, weights, x, bias, **options),
                        expected, context)
            compared += 1
    assert compared > 40 and refused > 10, (compared, refused)


# ---------------------------------------------------------------------------
# Empty inputs, 1-D stride lists and one-element tuples: the frameworks decide.


def _tf_or_error(*args, **kwargs):
    """TensorFlow's result (its Eigen kernels), or its error message."""
    try:
        return tf.nn.conv_transpose(*args, **kwargs).numpy()
    except (tf.errors.OpError, ValueError) as error:
        return str(error)


#: input shape, filters shape, output_shape, strides, padding: an empty spatial axis
EMPTY_TF_LAYERS = [
    ((3, 1, 0, 3), (1, 3, 2, 3), [3, 1, 1, 2], [1, 1, 2, 1], "VALID"),
    *[((1, 0, 2, 1), (3, 1, 2, 1), [1, y, 5, 2], 2, padding)
      for y in range(5) for padding in ("VALID", "SAME")],
    *[((1, 0, 2, 1), (3, 1, 1, 1), [1, y, 2, 1], 1, "VALID") for y in range(4)],
    ((1, 0, 1, 1), (1, 1, 1, 1), [1, 0, 1, 1], 3, "VALID"),
    ((1, 0, 0, 1), (2, 2, 1, 1), [1, 0, 0, 1], 1, "SAME"),
    ((2, 0, 3, 2), (2, 2, 1, 2), [2, 0, 6, 1], 2, "SAME"),
    ((1, 0, 2), (2, 3, 2), [1, 1, 3], 1, "VALID"),
    ((1, 0, 2), (2, 3, 2), [1, 0, 3], 1, "VALID"),
    ((1, 0, 2), (2, 3, 2), [1, 0, 3], 1, "SAME"),
    ((1, 0, 2, 2, 2), (2, 1, 1, 3, 2), [1, 1, 2, 2, 3], 1, "VALID"),
    ((1, 0, 2, 1), (3, 1, 1, 1), [1, 2, 2, 1], 1, [[0, 0], [1, 0], [0, 0], [0, 0]]),
    ((1, 0, 2, 1), (3, 1, 1, 1), [1, 0, 2, 1], 1, [[0, 0], [1, 1], [0, 0], [0, 0]]),
    ((1, 0, 2, 1), (3, 1, 1, 1), [1, 0, 2, 1], 1, [[0, 0], [3, 0], [0, 0], [0, 0]]),
    ((1, 2, 1, 1), (1, 1, 1, 1), [1, 0, 1, 1], 1, [[0, 0], [1, 1], [0, 0], [0, 0]]),
]


@pytest.mark.parametrize("layer", EMPTY_TF_LAYERS, ids=str)
def test_empty_spatial_inputs_match_tensorflow(layer):
    # TensorFlow takes X = 0 and gives zeros, even an empty output, when its forward
    # rule maps the output size back to 0 (C++ division: (0 - 3 + 2) / 2 is 0), and an
    # empty output for a non-empty input when explicit pads map 0 back to it.
    data_shape, filter_shape, output_shape, strides, padding = layer
    x = np.ones(data_shape, np.float32)
    w = np.arange(1, np.prod(filter_shape) + 1, dtype=np.float32).reshape(filter_shape)
    expected = _tf_or_error(x, w, output_shape, strides, padding)
    if isinstance(expected, str):
        words = "does not match" if "doesn't match" in expected else "negative size"
        assert "doesn't match" in expected or "would be negative" in expected, expected
        with pytest.raises(ct.ConvTransposeError, match=words):
            ct.tf_conv_transpose(x, w, output_shape, strides, padding)
        return
    assert_same(ct.tf_conv_transpose(x, w, output_shape, strides, padding), expected, layer)
    plan = ct.shapes.tf_conv_transpose(data_shape, filter_shape, output_shape, strides, padding)
    assert plan.output_shape == expected.shape


@pytest.mark.parametrize("strides, output", [([2, 1, 1], 3), ([3, 2, 1], 6), ([1, 1, 2], 3),
                                             ([0, 1, 1], 3), ([1, 2], 6)])
def test_1d_stride_lists_of_three_match_tensorflow(strides, output):
    # conv1d_transpose runs the 2-D op with strides [1] + strides on an inserted size-1
    # axis: in NWC the first entry strides that axis (no effect), the last the depth.
    x = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1)
    w = np.array([1.0, 10.0], np.float32).reshape(2, 1, 1)
    expected = _tf_or_error(x, w, [1, output, 1], strides, "SAME")
    if isinstance(expected, str):
        word = {"batch and depth": "batch and\\s+depth", "larger than 0": "positive",
                "length 1, 1 or 3": "length 1, 1 or 3"}
        matched = [ours for theirs, ours in word.items() if theirs in expected]
        assert matched, expected
        with pytest.raises(ct.ConvTransposeError, match=matched[0]):
            ct.tf_conv_transpose(x, w, [1, output, 1], strides, "SAME")
        return
    assert_same(ct.tf_conv_transpose(x, w, [1, output, 1], strides, "SAME"), expected, strides)


@pytest.mark.parametrize("data_format, strides, op_strides", [
    ("NWC", [5, 2, 1], [1, 5, 2, 1]), ("NCW", [1, 5, 2], [1, 1, 5, 2]),
    ("NCW", [2, 1, 2], [1, 2, 1, 2])])
def test_1d_stride_lists_reach_the_2d_op_as_in_tensorflow(data_format, strides, op_strides):
    # TensorFlow's CPU kernels refuse NCW; the op it builds shows where each entry goes:
    # in NCW the first is the depth's (must be 1) and the second the inserted axis's.
    x = np.ones((1, 3, 1) if data_format == "NWC" else (1, 1, 3), np.float32)
    output = [1, 6, 1] if data_format == "NWC" else [1, 1, 6]
    function = tf.function(lambda v: tf.nn.conv_transpose(
        v, np.ones((1, 1, 1), np.float32), output, strides, "SAME", data_format=data_format))
    graph = function.get_concrete_function(tf.TensorSpec(x.shape, tf.float32)).graph
    [node] = [op for op in graph.get_operations() if op.type == "Conv2DBackpropInput"]
    assert list(node.get_attr("strides")) == op_strides
    depth = op_strides[3 if data_format == "NWC" else 1]
    if depth != 1:
        with pytest.raises(ct.ConvTransposeError, match="depth"):
            ct.tf_conv_transpose(x, np.ones((1, 1, 1), np.float32), output, strides, "SAME",
                                 data_format)
        return
    ours = ct.tf_conv_transpose(x, np.ones((1, 1, 1), np.float32), output, strides, "SAME",
                                data_format)
    assert ours.ravel().tolist() == [1, 0, 1, 0, 1, 0]  # stride 2, the op's W stride


# Golden values of TensorFlow's own suites.  Conv2DBackpropInput is tf.nn.conv_transpose
# with the transposed op's input as out_backprop: filter and out_backprop hold 1, 2, ...


@pytest.mark.parametrize("output_shape, filter_shape, input_shape, strides, padding, golden", [
    # tensorflow/tensorflow tensorflow/python/kernel_tests/nn_ops/conv_ops_test.py
    ([1, 2, 3, 1], [2, 2, 1, 1], [1, 1, 2, 1], 1, "VALID",
     [1, 4, 4, 3, 10, 8]),  # testConv2D2x2Depth1ValidBackpropInput
    ([1, 2, 3, 3], [2, 2, 3, 3], [1, 1, 2, 3], 1, "VALID",
     [14, 32, 50, 100, 163, 226, 167, 212, 257, 122, 140, 158, 478, 541, 604, 437, 482,
      527]),  # testConv2D2x2Depth3ValidBackpropInput
    ([0, 2, 3, 1], [2, 2, 1, 1], [0, 1, 2, 1], 1, "VALID", []),  # testConv2DEmptyBackpropInput
    # tensorflow/tensorflow tensorflow/compiler/tests/conv2d_test.py (Conv2DBackpropInputTest)
    ([1, 1, 5, 1], [1, 2, 1, 1], [1, 1, 2, 1], 3, "VALID", [1, 2, 0, 2, 4]),
    ([1, 1, 6, 1], [1, 2, 1, 1], [1, 1, 2, 1], 3, "VALID", [1, 2, 0, 2, 4, 0]),
    ([1, 1, 7, 1], [1, 2, 1, 1], [1, 1, 2, 1], 3, "VALID", [1, 2, 0, 2, 4, 0, 0]),
    ([1, 2, 3, 1], [2, 2, 1, 1], [1, 2, 3, 1], 1, "SAME", [1, 4, 7, 7, 23, 33]),
    ([1, 2, 3, 3], [2, 2, 3, 3], [1, 2, 3, 3], 1, "SAME",
     [14, 32, 50, 100, 163, 226, 217, 334, 451, 190, 307, 424, 929, 1217, 1505, 1487, 1883,
      2279]),  # testConv2D2x2FilterSame
    ([1, 3, 5, 1], [1, 3, 1, 1], [1, 2, 2, 1], 2, "VALID",
     [1, 2, 5, 4, 6, 0, 0, 0, 0, 0, 3, 6, 13, 8, 12]),  # testConv2D2x2FilterStride2
    ([1, 2, 3, 1], [2, 2, 1, 1], [1, 1, 2, 1], 2, "SAME", [1, 2, 2, 3, 4, 6]),
])
def test_tensorflow_suite_backprop_input_goldens(output_shape, filter_shape, input_shape,
                                                  strides, padding, golden):
    w = np.arange(1, np.prod(filter_shape) + 1, dtype=np.float32).reshape(filter_shape)
    x = np.arange(1, np.prod(input_shape) + 1, dtype=np.float32).reshape(input_shape)
    result = ct.tf_conv_transpose(x, w, output_shape, strides, padding)
    assert result.shape == tuple(output_shape)
    assert result.ravel().tolist() == golden


@pytest.mark.parametrize("dilations, output_shape, input_shape, golden", [
    # tensorflow/tensorflow tensorflow/compiler/tests/conv2d_test.py: dilated backprop input
    ([2, 1], [1, 3, 6, 1], [1, 1, 5, 1],
     [1, 4, 7, 10, 13, 10, 0, 0, 0, 0, 0, 0, 3, 10, 17, 24, 31, 20]),
    ([1, 2], [1, 2, 3, 1], [1, 1, 1, 1], [1, 0, 2, 3, 0, 4]),
    ([1, 2], [0, 2, 3, 1], [0, 1, 1, 1], []),  # testConv2DEmptyBackpropInputDilation1x2
])
def test_tensorflow_suite_dilated_goldens(dilations, output_shape, input_shape, golden):
    w = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1)
    x = np.arange(1, np.prod(input_shape) + 1, dtype=np.float32).reshape(input_shape)
    result = ct.tf_conv_transpose(x, w, output_shape, 1, "VALID", dilations=dilations)
    assert result.ravel().tolist() == golden


@pytest.mark.parametrize("padding, strides, output", [("SAME", 1, (6, 4)), ("SAME", 2, (12, 8)),
                                                      ("VALID", 2, (13, 9))])
def test_tensorflow_conv2d_transpose_test_counts(padding, strides, output):
    # tensorflow/tensorflow tensorflow/python/kernel_tests/nn_ops/conv2d_transpose_test.py
    # (testConv2DTransposeSingleStride, ...Same, ...Valid): all-ones x (2, 6, 4, 3) and
    # filter (3, 3, 2, 3); the expected value counts the cells added at each position.
    result = ct.tf_conv_transpose(np.ones((2, 6, 4, 3), np.float32),
                                  np.ones((3, 3, 2, 3), np.float32), [2, *output, 2],
                                  [1, strides, strides, 1], padding)
    height, width = output
    expected = np.zeros((2, height, width, 2), np.float32)
    for h in range(height):
        for w in range(width):
            if strides == 1:
                h_in, w_in = 0 < h < height - 1, 0 < w < width - 1
                target = 4 * 3 + (5 * 3 if h_in and w_in else 2 * 3 if h_in or w_in else 0)
            else:
                pad = 1 if padding == "VALID" else 0
                h_in = h % 2 == 0 and pad < h < height - 1 - pad
                w_in = w % 2 == 0 and pad < w < width - 1 - pad
                target = 3 + (9 if h_in and w_in else 3 if h_in or w_in else 0)
            expected[:, h, w, :] = target
    if padding == "VALID":  # the suite copies the values next to the border onto it
        expected[:, :, 0], expected[:, :, -1] = expected[:, :, 1], expected[:, :, -2]
        expected[:, 0], expected[:, -1] = expected[:, 1], expected[:, -2]
    np.testing.assert_array_equal(result, expected)


def test_tensorflow_suite_refusals():
    # conv2d_transpose_test.py testConv2DTransposeInvalidOutputShape and
    # testConv2DTransposeLargeOutputShape
    with pytest.raises(ct.ConvTransposeError, match="negative dimension"):
        ct.tf_conv_transpose(np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), [2, -2], [1])
    with pytest.raises(ct.ConvTransposeError):
        ct.tf_conv_transpose(np.ones((2, 2, 2, 2)), np.ones((1, 1, 1, 1)),
                             [114078056, 179835296], [10])


@pytest.mark.parametrize("rank, name, value", [
    (rank, name, value) for rank in (1, 2, 3)
    for name, value in (("strides", (2,)), ("strides", [2]), ("dilation_rate", (2,)),
                        ("output_padding", (1,)), ("strides", ()), ("strides", (2, 2)))])
def test_keras_tuple_lengths_match_keras(rank, name, value):
    # Keras' standardize_tuple: an int, or exactly `rank` values (one only in 1-D).
    cls = getattr(keras.layers, f"Conv{rank}DTranspose")
    options = dict(strides=2) if name == "output_padding" else {}
    options[name] = value
    x, kernel = np.ones((1,) + (3,) * rank + (1,), np.float32), np.ones((2,) * rank + (1, 1))
    try:
        cls(1, 2, **options)
    except ValueError as error:
        assert f"must be a tuple of {rank} integers" in str(error)
        with pytest.raises(ct.ConvTransposeError, match=f"tuple of {rank} integers"):
            ct.keras_conv_transpose(x, kernel, **options)
        return
    plan = ct.shapes.keras_conv_transpose(x.shape, kernel.shape, **options)
    assert plan.output_shape == tuple(cls(1, 2, **options).compute_output_shape(x.shape))


#: inputs shape (an empty spatial axis), kernel size, strides, padding, output_padding
EMPTY_KERAS_LAYERS = [
    ((1, 0, 1), 2, 1, "valid", None), ((1, 0, 1), 3, 2, "valid", None),
    ((1, 0, 1), 1, 3, "valid", None), ((1, 0, 1), 3, 2, "same", None),
    ((1, 0, 1), 3, 2, "valid", 1), ((1, 0, 1), 3, 2, "same", 1), ((1, 0, 1), 2, 2, "same", 1),
    ((1, 0, 1), 4, 1, "same", 0), ((1, 0, 1), 4, 1, "valid", None),
    ((1, 0, 2, 1), (1, 3), 2, "valid", None), ((1, 0, 2, 1), (3, 3), 2, "valid", None),
    ((1, 2, 0, 2, 1), 2, 2, "valid", None),
]


@pytest.mark.parametrize("layer", EMPTY_KERAS_LAYERS, ids=str)
def test_empty_spatial_inputs_match_keras(layer):
    shape, kernel_size, strides, padding, output_padding = layer
    rank = len(shape) - 2
    cls = getattr(keras.layers, f"Conv{rank}DTranspose")
    module = cls(2, kernel_size, strides=strides, padding=padding,
                 output_padding=output_padding)
    x = np.zeros(shape, np.float32)
    module.build(x.shape)
    kernel, bias = (np.asarray(v) for v in module.get_weights())
    bias = np.array([1.5, -2.0], np.float32)
    module.set_weights([kernel, bias])
    options = dict(strides=strides, padding=padding, output_padding=output_padding)
    try:
        expected = np.asarray(module(x))
    except (ValueError, tf.errors.OpError) as error:
        assert "must be >= 0" in str(error), error
        with pytest.raises(ct.ConvTransposeError, match="negative size"):
            ct.keras_conv_transpose(x, kernel, bias, **options)
        return
    assert_same(ct.keras_conv_transpose(x, kernel, bias, **options), expected, layer)
    plan = ct.shapes.keras_conv_transpose(shape, kernel.shape, bias.shape, **options)
    assert plan.output_shape == expected.shape


@pytest.mark.parametrize("rank, filters, kernel_size, strides, padding, output_padding, "
                         "data_format, dilation_rate, input_shape, output_shape", [
    # keras-team/keras keras/src/layers/convolutional/conv_transpose_test.py
    # (ConvTransposeBasicTest: test_conv{1,2,3}d_transpose_basic)
    (1, 5, 2, 2, "valid", None, "channels_last", 1, (2, 8, 4), (2, 16, 5)),
    (1, 6, 2, 3, "same", 2, "channels_last", (1,), (2, 8, 4), (2, 23, 6)),
    (1, 6, (2,), (2,), "valid", None, "channels_last", 1, (2, 8, 4), (2, 16, 6)),
    (2, 5, 2, 2, "valid", None, "channels_last", 1, (2, 8, 8, 4), (2, 16, 16, 5)),
    (2, 6, 2, 3, "same", 2, "channels_last", (1, 1), (2, 8, 8, 4), (2, 23, 23, 6)),
    (2, 6, (2, 3), (2, 1), "valid", None, "channels_first", (1, 1), (2, 4, 8, 8),
     (2, 6, 16, 10)),
    (2, 2, (7, 7), (16, 16), "valid", None, "channels_last", (1, 1), (1, 14, 14, 2),
     (1, 224, 224, 2)),
    (3, 5, 2, 2, "valid", None, "channels_last", 1, (2, 8, 8, 8, 4), (2, 16, 16, 16, 5)),
    (3, 6, 2, 3, "same", 2, "channels_last", (1, 1, 1), (2, 8, 8, 8, 4), (2, 23, 23, 23, 6)),
    (3, 6, (2, 2, 3), (2, 1, 2), "valid", None, "channels_last", (1, 1, 1), (2, 8, 8, 8, 4),
     (2, 16, 9, 17, 6)),
])
def test_keras_suite_output_shapes(rank, filters, kernel_size, strides, padding,
                                   output_padding, data_format, dilation_rate, input_shape,
                                   output_shape):
    sizes = (kernel_size,) * rank if isinstance(kernel_size, int) else kernel_size
    c_in = input_shape[-1] if data_format == "channels_last" else input_shape[1]
    plan = ct.shapes.keras_conv_transpose(
        input_shape, sizes + (filters, c_in), (filters,), strides=strides, padding=padding,
        output_padding=output_padding, data_format=data_format, dilation_rate=dilation_rate)
    assert plan.output_shape == output_shape


@pytest.mark.parametrize("rank, options, message", [
    # keras-team/keras keras/src/layers/convolutional/conv_transpose_test.py
    # (test_bad_init_args)
    (2, dict(strides=(1, 0)), "strides"),
    (1, dict(strides=2, output_padding=2), "strictly less than `strides`"),
    (2, dict(strides=2, output_padding=3), "strictly less than `strides`"),
    (2, dict(strides=(2, 3), output_padding=(1, 3)), "strictly less than `strides`"),
    (2, dict(strides=2, dilation_rate=(2, 1)), "in conjunction with `dilation_rate > 1`"),
])
def test_keras_suite_refusals(rank, options, message):
    with pytest.raises(ct.ConvTransposeError, match=message):
        ct.shapes.keras_conv_transpose((1,) + (4,) * rank + (1,), (2,) * rank + (2, 1),
                                       **options)


@pytest.mark.parametrize("shape", [(1, 0, 2, 2), (1, 1, 0, 2), (1, 1, 2, 0)])
def test_litert_refuses_empty_inputs(shape):
    # LiteRT's TRANSPOSE_CONV: "SizeOfDimension(input, i) > 0 was not true" for the
    # spatial axes and the channels (unlike TensorFlow).
    weights = np.ones((2, 3, 3, shape[-1]), np.float32)
    interpreter = _tflite_model(weights, (2, 2), "VALID", None)
    output_shape = [1, 3, 5, 2]
    with pytest.raises(RuntimeError, match="> 0 was not true"):
        run_tflite(interpreter, output_shape, np.zeros(shape, np.float32))
    with pytest.raises(ct.ConvTransposeError, match="size 0|no channels"):
        ct.tflite_transpose_conv(output_shape, weights, np.zeros(shape, np.float32),
                                 stride_h=2, stride_w=2, padding="VALID")


@pytest.mark.parametrize("output_shape, weights_shape, weights, input_shape, padding, "
                         "strides, bias, golden", [
    # google-ai-edge/LiteRT tflite/kernels/transpose_conv_test.cc (float tests; the
    # input holds 1, 2, ..., the weights are OHWI)
    ([1, 4, 4, 1], (1, 3, 3, 1), range(1, 10), (1, 4, 4, 1), "SAME", 1, None,
     [29, 62, 83, 75, 99, 192, 237, 198, 207, 372, 417, 330, 263, 446, 485, 365]),  # SimpleTest
    ([1, 4, 4, 1], (1, 3, 3, 2), range(1, 19), (1, 4, 4, 2), "SAME", 1, None,
     [184, 412, 568, 528, 678, 1347, 1689, 1434, 1494, 2715, 3057, 2442, 1968, 3352, 3652,
      2760]),  # TwoFiltersTest
    ([1, 6, 6, 1], (1, 3, 3, 2), range(1, 19), (1, 4, 4, 2), "VALID", 1, None,
     [5, 22, 59, 101, 114, 83, 52, 184, 412, 568, 528, 344, 237, 678, 1347, 1689, 1434, 879,
      597, 1494, 2715, 3057, 2442, 1431, 856, 1968, 3352, 3652, 2760, 1548, 689, 1534, 2543,
      2729, 2010, 1103]),  # PaddingValidTest
    ([1, 5, 5, 1], (1, 3, 3, 1), range(1, 10), (1, 2, 2, 1), "VALID", 2, None,
     [1, 2, 5, 4, 6, 4, 5, 14, 10, 12, 10, 14, 36, 24, 30, 12, 15, 34, 20, 24, 21, 24, 55,
      32, 36]),  # StrideValidTest
    ([1, 5, 5, 2], (2, 3, 3, 1), [1, 3, 5, 7, 9, 11, 13, 15, 17, 2, 4, 6, 8, 10, 12, 14, 16,
                                  18], (1, 2, 2, 1), "VALID", 2, None,
     [1, 2, 3, 4, 7, 10, 6, 8, 10, 12, 7, 8, 9, 10, 25, 28, 18, 20, 22, 24, 16, 20, 24, 28,
      62, 72, 42, 48, 54, 60, 21, 24, 27, 30, 61, 68, 36, 40, 44, 48, 39, 42, 45, 48, 103,
      110, 60, 64, 68, 72]),  # MultiChannelTest
    ([1, 5, 5, 2], (2, 3, 3, 1), [1, 3, 5, 7, 9, 11, 13, 15, 17, 2, 4, 6, 8, 10, 12, 14, 16,
                                  18], (1, 2, 2, 1), "VALID", 2, [3, 4],
     [4, 6, 6, 8, 10, 14, 9, 12, 13, 16, 10, 12, 12, 14, 28, 32, 21, 24, 25, 28, 19, 24, 27,
      32, 65, 76, 45, 52, 57, 64, 24, 28, 30, 34, 64, 72, 39, 44, 47, 52, 42, 46, 48, 52, 106,
      114, 63, 68, 71, 76]),  # MultiChannelBiasTest
])
def test_litert_suite_goldens(output_shape, weights_shape, weights, input_shape, padding,
                              strides, bias, golden):
    w = np.array(list(weights), np.float32).reshape(weights_shape)
    x = np.arange(1, np.prod(input_shape) + 1, dtype=np.float32).reshape(input_shape)
    b = None if bias is None else np.array(bias, np.float32)
    result = ct.tflite_transpose_conv(output_shape, w, x, b, padding=padding, stride_h=strides,
                                      stride_w=strides)
    assert result.ravel().tolist() == golden


def test_litert_suite_accuracy_golden():
    # google-ai-edge/LiteRT tflite/kernels/transpose_conv_test.cc AccuracyTest
    w = np.array([9, 5, 6, 9, 8, 5, 3, 1, 4], np.float32).reshape(1, 3, 3, 1)
    x = np.array([323, 521], np.float32).reshape(1, 1, 2, 1)
    result = ct.tflite_transpose_conv([1, 3, 4, 1], w, x, padding="SAME", stride_h=3,
                                      stride_w=3)
    assert result.ravel().tolist() == [1615, 1938, 4689, 2605, 2584, 1615, 4689, 4168, 323,
                                       1292, 1563, 521]


def test_xnnpack_runs_what_the_litert_kernel_refuses():
    # docs/semantics.md: a constant output shape of 8 for 2 elements, kernel 3, stride 2,
    # VALID (TensorFlow's rule takes 5 or 6): the kernel refuses it, the default XNNPACK
    # delegate returns 6 elements.
    hwoi = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1, 1)

    @tf.function(input_signature=[tf.TensorSpec([1, 1, 2, 1], tf.float32)])
    def model(x):
        return tf.nn.conv2d_transpose(x, tf.constant(hwoi), [1, 1, 8, 1], [1, 1, 2, 1], "VALID")

    content = tf.lite.TFLiteConverter.from_concrete_functions(
        [model.get_concrete_function()], model).convert()
    x = np.array([1.0, 2.0], np.float32).reshape(1, 1, 2, 1)
    results = {}
    for resolver in ("AUTO", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"):
        interpreter = litert.Interpreter(
            model_content=content,
            experimental_op_resolver_type=getattr(litert.OpResolverType, resolver))
        try:
            interpreter.allocate_tensors()
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
            interpreter.invoke()
            results[resolver] = interpreter.get_tensor(
                interpreter.get_output_details()[0]["index"]).copy()
        except RuntimeError as error:
            results[resolver] = str(error)
    assert "computed_input_width" in results["BUILTIN_WITHOUT_DEFAULT_DELEGATES"]
    assert results["AUTO"].shape == (1, 1, 6, 1)
    assert results["AUTO"].ravel().tolist() == [1, 2, 5, 4, 6, 0]
    with pytest.raises(ct.ConvTransposeError, match="does not match the input"):
        ct.tflite_transpose_conv([1, 1, 8, 1], hwoi.transpose(2, 0, 1, 3), x, padding="VALID",
                                 stride_w=2)
