"""The gradients of the frameworks' dialects (``ct.vjp.torch_conv_transpose`` ...) against
the frameworks' own autodiff, on the random layers of the dialects' forward tests
(tests/dialects/): torch autograd for PyTorch, ``jax.vjp`` for JAX, ``tf.GradientTape``
for TensorFlow and Keras; TFLite's TRANSPOSE_CONV through ``tf.GradientTape`` on the
TensorFlow op the converter maps to it (``tf.nn.conv2d_transpose`` with the OHWI weights
transposed inside the tape, plus the bias); TensorRT's deconvolution through torch
autograd on the full result cropped by TensorRT's documented pads.

Operands and the result's gradient hold small integers, so every sum is exact and the
comparisons are equalities.  Layers the dialect refuses are skipped (the forward tests
check the refusals), and so are the 3-D SAME layers whose data gradient TensorFlow's CPU
``Conv3D`` gets wrong (:func:`_tensorflow_conv3d_is_wrong`; the last test shows it).
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
from dialects._cases import dilate_kernel, integer_array, require

pytestmark = pytest.mark.peers


def _plan_or_none(rule, *args, **kwargs):
    try:
        return rule(*args, **kwargs)
    except ct.ConvTransposeError:
        return None


def _assert_gradients(ours, theirs, context):
    assert len(ours) == len(theirs), context
    for mine, expected in zip(ours, theirs):
        if expected is None:
            assert mine is None, context
            continue
        assert mine.shape == expected.shape and mine.dtype == expected.dtype, context
        np.testing.assert_array_equal(mine, expected, err_msg=str(context))


# ---------------------------------------------------------------------------
# PyTorch and TensorRT: torch autograd


def test_torch_conv_transpose_matches_torch_autograd():
    torch = require("torch", "torch is installed by the test extra")
    from dialects.test_pytorch import random_layer

    rng = np.random.default_rng(61)
    compared = 0
    for _ in range(80):
        layer = random_layer(rng)
        attributes = {k: v for k, v in layer.items() if k not in ("input", "weight", "bias")}
        if _plan_or_none(ct.shapes.torch_conv_transpose, layer["input"], layer["weight"],
                         layer["bias"], **attributes) is None:
            continue
        x, w = integer_array(rng, layer["input"]), integer_array(rng, layer["weight"])
        b = None if layer["bias"] is None else integer_array(rng, layer["bias"])
        rank = len(layer["input"]) - 2
        module = getattr(torch.nn, f"ConvTranspose{rank}d")(
            layer["input"][1], layer["weight"][1] * layer["groups"], layer["weight"][2:],
            stride=layer["stride"], padding=layer["padding"],
            output_padding=layer["output_padding"], groups=layer["groups"],
            bias=b is not None, dilation=layer["dilation"], dtype=torch.float64)
        with torch.no_grad():
            module.weight.copy_(torch.from_numpy(w))
            if b is not None:
                module.bias.copy_(torch.from_numpy(b))
        data = torch.tensor(x, requires_grad=True)
        out = module(data, output_size=layer["output_size"])
        grad = integer_array(rng, tuple(out.shape))
        (out * torch.from_numpy(grad)).sum().backward()
        expected = (data.grad.numpy(), module.weight.grad.numpy(),
                    None if b is None else module.bias.grad.numpy())
        ours = ct.vjp.torch_conv_transpose(x, w, grad, b, **attributes)
        _assert_gradients(ours, expected, layer)
        compared += 1
    assert compared > 50, compared


def test_tensorrt_deconvolution_matches_torch_autograd_of_the_documented_crop():
    torch = require("torch", "torch is installed by the test extra")
    from dialects.test_tensorrt import documented_pads, random_layer

    rng = np.random.default_rng(62)
    compared = 0
    for _ in range(80):
        layer = random_layer(rng)
        x, w, b, attributes = layer.x, layer.w, layer.b, layer.attributes
        rank, groups, kernel, mode = layer.rank, layer.groups, layer.kernel, layer.mode
        strides, dilations, pre, post = layer.strides, layer.dilations, layer.pre, layer.post
        if _plan_or_none(ct.shapes.tensorrt_deconvolution, x.shape, w.shape,
                         None if b is None else b.shape, **attributes) is None:
            continue
        tensors = [None if a is None else torch.tensor(a, requires_grad=True)
                   for a in (x, w, b)]
        full = getattr(torch.nn.functional, f"conv_transpose{rank}d")(
            *tensors, stride=strides, dilation=dilations, groups=groups)
        pairs = documented_pads(mode, kernel, strides, dilations, pre, post)
        out = full[(Ellipsis,) + tuple(slice(before, full.shape[2 + i] - after)
                                       for i, (before, after) in enumerate(pairs))]
        grad = integer_array(rng, tuple(out.shape))
        (out * torch.from_numpy(grad)).sum().backward()
        expected = [None if t is None else t.grad.numpy() for t in tensors]
        ours = ct.vjp.tensorrt_deconvolution(x, w, grad, b, **attributes)
        _assert_gradients(ours, expected, (x.shape, w.shape, attributes))
        compared += 1
    assert compared > 50, compared


# ---------------------------------------------------------------------------
# JAX: jax.vjp


def test_jax_conv_transpose_matches_jax_vjp():
    jax = require("jax", "jax is installed by the test extra")
    jax.config.update("jax_enable_x64", True)
    from dialects.test_jax import random_layer

    rng = np.random.default_rng(63)
    compared = 0
    for _ in range(60):
        layer = random_layer(rng)
        arguments = {k: v for k, v in layer.items() if k not in ("lhs", "rhs")}
        if _plan_or_none(ct.shapes.jax_conv_transpose, layer["lhs"], layer["rhs"],
                         **arguments) is None:
            continue
        lhs, rhs = integer_array(rng, layer["lhs"]), integer_array(rng, layer["rhs"])
        out, pullback = jax.vjp(
            lambda a, k: jax.lax.conv_transpose(a, k, **arguments), lhs, rhs)
        grad = integer_array(rng, out.shape)
        expected = tuple(np.asarray(g) for g in pullback(grad))
        ours = ct.vjp.jax_conv_transpose(lhs, rhs, grad, **arguments)
        _assert_gradients(ours, expected, layer)
        compared += 1
    assert compared > 30, compared


# ---------------------------------------------------------------------------
# TensorFlow, Keras and TFLite: tf.GradientTape


def _tensorflow():
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    return require("tensorflow", "tensorflow-cpu is installed by the test extra")


def _tensorflow_conv3d_is_wrong(plan, padding) -> bool:
    """Whether ``plan`` is a 3-D SAME layer with an axis where the stride-spread input and
    the dilated kernel fall short of the output, ``(X-1)*s + K' < Y``.  The data gradient
    of ``conv3d_transpose`` is ``Conv3D`` of the result's gradient with SAME padding,
    whose total pad ``(X-1)*s + K' - Y`` is then negative: TensorFlow's CPU kernel
    (Eigen) does not clamp it to 0 in 3-D and returns other values than torch's
    ``conv3d`` on the same zero-padded data
    (:func:`test_tensorflow_conv3d_with_a_short_kernel_differs_from_torch`)."""
    return plan.spatial_rank == 3 and str(padding).upper() == "SAME" and any(
        (a.input_size - 1) * a.stride + a.dilated_kernel_size < a.output_size
        for a in plan.axes)


def _undilated(kernel_grad, dilations, rank):
    """The gradient of a kernel from that of its zero-dilated copy: its taps are every
    ``d``-th tap of the dilated kernel (whose other taps are the inserted zeros)."""
    index = tuple(slice(None, None, d) for d in dilations) + (slice(None),) * (
        kernel_grad.ndim - rank)
    return np.ascontiguousarray(kernel_grad[index])


def test_tf_conv_transpose_matches_tensorflow_gradient_tape():
    tf = _tensorflow()
    from dialects.test_tensorflow import FORMATS, random_tf_layer

    rng = np.random.default_rng(64)
    compared = 0
    for _ in range(50):
        layer = random_tf_layer(rng)
        arguments = {k: v for k, v in layer.items() if k not in ("input", "filters")}
        plan = _plan_or_none(ct.shapes.tf_conv_transpose, layer["input"], layer["filters"],
                             **arguments)
        if plan is None or _tensorflow_conv3d_is_wrong(plan, layer["padding"]):
            continue
        x = integer_array(rng, layer["input"], "float32")
        w = integer_array(rng, layer["filters"], "float32")
        rank = x.ndim - 2
        last = layer["data_format"] == FORMATS[rank][0]
        output, padding = list(layer["output_shape"]), layer["padding"]
        if not last:  # TensorFlow's CPU kernels: channels last only
            output = [output[0]] + output[2:] + [output[1]]
            if isinstance(padding, list):
                padding = [padding[0]] + padding[2:] + [padding[1]]
        grad = integer_array(rng, layer["output_shape"], "float32")
        data = tf.Variable(x if last else np.moveaxis(x, 1, -1))
        kernel = tf.Variable(dilate_kernel(w, layer["dilations"], range(rank)))
        with tf.GradientTape() as tape:
            out = tf.nn.conv_transpose(data, kernel, output, layer["strides"], padding)
            loss = tf.reduce_sum(out * (grad if last else np.moveaxis(grad, 1, -1)))
        grad_data, grad_kernel = (g.numpy() for g in tape.gradient(loss, [data, kernel]))
        expected = (grad_data if last else np.moveaxis(grad_data, -1, 1),
                    _undilated(grad_kernel, layer["dilations"], rank))
        ours = ct.vjp.tf_conv_transpose(x, w, grad, **arguments)
        _assert_gradients(ours, expected, layer)
        compared += 1
    assert compared > 30, compared


def test_keras_conv_transpose_matches_tensorflow_gradient_tape():
    tf = _tensorflow()
    keras = require("keras", "keras is installed by the test extra")
    from dialects.test_tensorflow import random_keras_layer

    rng = np.random.default_rng(65)
    compared = 0
    for _ in range(40):
        layer = random_keras_layer(rng)
        arguments = {k: v for k, v in layer.items() if k not in ("inputs", "kernel", "bias")}
        plan = _plan_or_none(ct.shapes.keras_conv_transpose, layer["inputs"], layer["kernel"],
                             layer["bias"], **arguments)
        if plan is None or _tensorflow_conv3d_is_wrong(plan, layer["padding"]):
            continue
        x = integer_array(rng, layer["inputs"], "float32")
        w = integer_array(rng, layer["kernel"], "float32")
        b = None if layer["bias"] is None else integer_array(rng, layer["bias"], "float32")
        rank = x.ndim - 2
        last = layer["data_format"] == "channels_last"
        # as the forward test: channels last and the kernel dilated with zeros
        dilated = dilate_kernel(w, layer["dilation_rate"], range(rank))
        module = getattr(keras.layers, f"Conv{rank}DTranspose")(
            filters=w.shape[-2], kernel_size=dilated.shape[:rank], strides=layer["strides"],
            padding=layer["padding"], output_padding=layer["output_padding"],
            use_bias=b is not None)
        data = tf.Variable(x if last else np.moveaxis(x, 1, -1))
        module.build(data.shape)
        module.set_weights([dilated] + ([b] if b is not None else []))
        with tf.GradientTape() as tape:
            out = module(data)
            grad = integer_array(rng, out.shape, "float32")
            loss = tf.reduce_sum(out * grad)
        variables = [data, module.kernel] + ([module.bias] if b is not None else [])
        grads = [np.asarray(g) for g in tape.gradient(loss, variables)]
        expected = (grads[0] if last else np.moveaxis(grads[0], -1, 1),
                    _undilated(grads[1], layer["dilation_rate"], rank),
                    grads[2] if b is not None else None)
        ours = ct.vjp.keras_conv_transpose(x, w, grad if last else np.moveaxis(grad, -1, 1),
                                           b, **arguments)
        _assert_gradients(ours, expected, layer)
        compared += 1
    assert compared > 20, compared


def test_tflite_transpose_conv_matches_tensorflow_gradient_tape():
    tf = _tensorflow()
    from dialects.test_tensorflow import _size_range

    rng = np.random.default_rng(66)
    compared = 0
    for _ in range(40):
        c_in, c_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        weights = integer_array(rng, (c_out,) + tuple(int(k) for k in rng.integers(1, 4, 2))
                                + (c_in,), "float32")
        strides = tuple(int(s) for s in rng.integers(1, 4, 2))
        padding = str(rng.choice(["SAME", "VALID"]))
        bias = integer_array(rng, (c_out,), "float32") if rng.random() < 0.5 else None
        spatial = [int(v) for v in rng.integers(1, 5, 2)]
        sizes = [int(rng.integers(low, high + 1)) for low, high in (
            _size_range(x, k, s, padding)
            for x, k, s in zip(spatial, weights.shape[1:3], strides))]
        x = integer_array(rng, [int(rng.integers(1, 3))] + spatial + [c_in], "float32")
        output_shape = [x.shape[0]] + sizes + [c_out]
        options = dict(padding=padding, stride_h=strides[0], stride_w=strides[1])
        grad = integer_array(rng, output_shape, "float32")
        variables = [tf.Variable(x), tf.Variable(weights)] + (
            [tf.Variable(bias)] if bias is not None else [])
        with tf.GradientTape() as tape:
            hwoi = tf.transpose(variables[1], (1, 2, 0, 3))  # OHWI -> TensorFlow's HWOI
            out = tf.nn.conv2d_transpose(variables[0], hwoi, output_shape,
                                         [1, *strides, 1], padding)
            if bias is not None:
                out = out + variables[2]
            loss = tf.reduce_sum(out * grad)
        grads = [g.numpy() for g in tape.gradient(loss, variables)]
        expected = (grads[0], grads[1], grads[2] if bias is not None else None)
        ours = ct.vjp.tflite_transpose_conv(output_shape, weights, x, grad, bias, **options)
        _assert_gradients(ours, expected, (output_shape, weights.shape, x.shape, options))
        compared += 1
    assert compared > 30, compared


def test_tensorflow_conv3d_with_a_short_kernel_differs_from_torch():
    """Why :func:`_tensorflow_conv3d_is_wrong` layers are left out: the data gradient of a
    3-D SAME layer with input 4, kernel 1, stride 3 and output 12 is ``Conv3D`` of the
    gradient with a total pad ``(4-1)*3 + 1 - 12 = -2``, i.e. none; TensorFlow's CPU
    kernel differs from torch's ``conv3d`` on the unpadded gradient there (and agrees
    with it in 2-D)."""
    tf = _tensorflow()
    torch = require("torch", "torch is installed by the test extra")
    rng = np.random.default_rng(68)
    for rank in (2, 3):
        grad = integer_array(rng, (1,) + (12,) * rank + (2,), "float32")
        kernel = integer_array(rng, (1,) * rank + (2, 3), "float32")  # K..., I, O
        theirs = tf.nn.convolution(grad, kernel, strides=3, padding="SAME").numpy()
        expected = getattr(torch.nn.functional, f"conv{rank}d")(
            torch.from_numpy(np.ascontiguousarray(np.moveaxis(grad, -1, 1))),
            torch.from_numpy(np.ascontiguousarray(np.moveaxis(kernel, (-1, -2), (0, 1)))),
            stride=3).numpy()
        same = np.array_equal(np.moveaxis(theirs, -1, 1), expected)
        assert same == (rank == 2), rank
        plan = ct.shapes.tf_conv_transpose((1,) + (4,) * rank + (2,), (1,) * rank + (3, 2),
                                           (1,) + (12,) * rank + (3,), 3, "SAME")
        assert _tensorflow_conv3d_is_wrong(plan, "SAME") == (rank == 3)


# ---------------------------------------------------------------------------
# The forward convolution: torch autograd of conv{1,2,3}d


def test_convolution_matches_torch_autograd():
    torch = require("torch", "torch is installed by the test extra")
    rng = np.random.default_rng(67)
    for _ in range(60):
        rank, groups = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        c_in, c_out = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        kernel = tuple(int(k) for k in rng.integers(1, 4, rank))
        strides = tuple(int(s) for s in rng.integers(1, 4, rank))
        dilations = tuple(int(d) for d in rng.integers(1, 3, rank))
        padding = tuple(int(p) for p in rng.integers(0, 3, rank))
        sizes = tuple((k - 1) * d + 1 + int(rng.integers(0, 4))
                      for k, d in zip(kernel, dilations))
        x = integer_array(rng, (int(rng.integers(1, 3)), groups * c_in) + sizes)
        w = integer_array(rng, (groups * c_out, c_in) + kernel)
        data, weight = (torch.tensor(a, requires_grad=True) for a in (x, w))
        out = getattr(torch.nn.functional, f"conv{rank}d")(
            data, weight, stride=strides, padding=padding, dilation=dilations, groups=groups)
        grad = integer_array(rng, tuple(out.shape))
        (out * torch.from_numpy(grad)).sum().backward()
        attributes = dict(strides=strides, dilations=dilations, pads_begin=padding,
                          pads_end=padding)
        context = (x.shape, w.shape, attributes, groups)
        if groups == 1:
            ours = ct.vjp.convolution(x, w, grad, **attributes)
            _assert_gradients(ours, (data.grad.numpy(), weight.grad.numpy()), context)
        grouped = w.reshape((groups, c_out, c_in) + kernel)
        ours = ct.vjp.group_convolution(x, grouped, grad, **attributes)
        _assert_gradients(ours, (data.grad.numpy(),
                                 weight.grad.numpy().reshape(grouped.shape)), context)
