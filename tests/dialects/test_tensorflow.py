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
