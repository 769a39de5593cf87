"""The frameworks' dialects as ``nn.Module`` layers (``ctt.TorchConvTranspose`` ...)
against the frameworks themselves: each layer's result and the gradients of its input,
weight and bias equal what the framework computes with the layer's own weights (torch
autograd, ``tf.GradientTape``, ``jax.vjp``); TFLite's TRANSPOSE_CONV through the
TensorFlow op its converter maps to it (``tf.nn.conv2d_transpose`` with the OHWI weights
transposed), TensorRT's deconvolution through torch's full transposed convolution cropped
by TensorRT's documented pads.  The initial weights are torch's draw for
``nn.ConvTranspose`` of the same shape, moved into the dialect's layout.

Operands hold small integers, so every sum is exact and the comparisons are equalities.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import convtranspose.torch as ctt
from dialects._cases import integer_array, require


def _integer_parameters(layer, rng) -> None:
    """Small integers in the layer's weight and bias (exact sums)."""
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(integer_array(rng, tuple(layer.weight.shape),
                                                          "float32")))
        if getattr(layer, "bias", None) is not None:
            layer.bias.copy_(torch.from_numpy(integer_array(rng, tuple(layer.bias.shape),
                                                            "float32")))


def _ours(layer, x: np.ndarray, grad_of, *call):
    """The layer's result and the gradients of ``sum(result * grad)`` (input, weight,
    bias), with ``grad = grad_of(result shape)``."""
    data = torch.tensor(x, requires_grad=True)
    out = layer(data, *call)
    grad = grad_of(tuple(out.shape))
    (out * torch.from_numpy(grad)).sum().backward()
    bias = None if getattr(layer, "bias", None) is None else layer.bias.grad.numpy()
    return out.detach().numpy(), grad, (data.grad.numpy(), layer.weight.grad.numpy(), bias)


def _assert_equal(ours, theirs, context) -> None:
    for mine, expected in zip(ours, theirs):
        if expected is None:
            assert mine is None, context
            continue
        np.testing.assert_array_equal(mine, np.asarray(expected), err_msg=str(context))


def test_every_frameworks_layer_starts_from_torchs_draw():
    for layer_class, arguments, from_torch in (
            (ctt.TorchConvTranspose, dict(groups=2), lambda w: w),
            (ctt.TensorrtDeconvolution, dict(num_groups=2), lambda w: w),
            (ctt.KerasConvTranspose, {}, lambda w: w.permute(2, 3, 1, 0)),
            (ctt.TfConvTranspose, dict(strides=1), lambda w: w.permute(2, 3, 1, 0)),
            (ctt.TfliteTransposeConv, {}, lambda w: w.permute(1, 2, 3, 0)),
            (ctt.JaxConvTranspose, dict(strides=(1, 1), padding="SAME"),
             lambda w: w.permute(2, 3, 0, 1)),
            (ctt.JaxConvTranspose, dict(strides=(1, 1), padding="SAME",
                                        dimension_numbers=("NCHW", "OIHW", "NCHW")),
             lambda w: w.permute(1, 0, 2, 3)),
            (ctt.JaxConvTranspose, dict(strides=(1, 1), padding="SAME", transpose_kernel=True),
             lambda w: w.permute(2, 3, 1, 0))):
        groups = arguments.get("groups", arguments.get("num_groups", 1))
        torch.manual_seed(5)
        reference = torch.nn.ConvTranspose2d(4, 6, (2, 3), groups=groups)
        torch.manual_seed(5)
        layer = layer_class(4, 6, (2, 3), **arguments)
        assert torch.equal(layer.weight, from_torch(reference.weight)), layer_class
        if getattr(layer, "bias", None) is not None:
            assert torch.equal(layer.bias, reference.bias), layer_class


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_torch_conv_transpose_layer_is_torchs_own(rank):
    rng = np.random.default_rng(70 + rank)
    kernel = (3, 2, 2)[:rank]
    attributes = dict(stride=(2, 1, 3)[:rank], padding=(1, 0, 1)[:rank],
                      output_padding=(1, 0, 2)[:rank], groups=2, dilation=(1, 2, 1)[:rank])
    layer = ctt.TorchConvTranspose(4, 6, kernel, **attributes)
    _integer_parameters(layer, rng)
    reference = getattr(torch.nn, f"ConvTranspose{rank}d")(4, 6, kernel, **attributes)
    with torch.no_grad():
        reference.weight.copy_(layer.weight)
        reference.bias.copy_(layer.bias)
    x = integer_array(rng, (2, 4) + (3, 4, 2)[:rank], "float32")
    out, grad, grads = _ours(layer, x, lambda shape: integer_array(rng, shape, "float32"))
    data = torch.tensor(x, requires_grad=True)
    expected = reference(data)
    (expected * torch.from_numpy(grad)).sum().backward()
    np.testing.assert_array_equal(out, expected.detach().numpy())
    _assert_equal(grads, (data.grad, reference.weight.grad, reference.bias.grad), rank)
    # output_size, given per call as torch's layer takes it (here the sizes above)
    attributes["output_padding"] = 0
    sized = ctt.TorchConvTranspose(4, 6, kernel, **attributes)
    plain = getattr(torch.nn, f"ConvTranspose{rank}d")(4, 6, kernel, **attributes)
    with torch.no_grad():
        for module in (sized, plain):
            module.weight.copy_(layer.weight)
            module.bias.copy_(layer.bias)
    sizes = list(out.shape[2:])
    np.testing.assert_array_equal(sized(torch.from_numpy(x), sizes).detach().numpy(), out)
    np.testing.assert_array_equal(plain(torch.from_numpy(x), sizes).detach().numpy(), out)


def test_tensorrt_layer_is_torchs_full_result_cropped():
    rng = np.random.default_rng(75)
    layer = ctt.TensorrtDeconvolution(4, 6, (3, 2), num_groups=2, stride_nd=(2, 3),
                                      pre_padding=(1, 0), post_padding=(0, 2))
    _integer_parameters(layer, rng)
    x = integer_array(rng, (2, 4, 3, 4), "float32")
    out, grad, grads = _ours(layer, x, lambda shape: integer_array(rng, shape, "float32"))
    data = torch.tensor(x, requires_grad=True)
    weight = layer.weight.detach().clone().requires_grad_()
    bias = layer.bias.detach().clone().requires_grad_()
    full = torch.nn.functional.conv_transpose2d(data, weight, bias, stride=(2, 3), groups=2)
    expected = full[:, :, 1:, 0:full.shape[3] - 2]
    (expected * torch.from_numpy(grad)).sum().backward()
    np.testing.assert_array_equal(out, expected.detach().numpy())
    _assert_equal(grads, (data.grad, weight.grad, bias.grad), "tensorrt")


def _tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    return require("tensorflow", "tensorflow-cpu is installed by the test extra")


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_tf_conv_transpose_layer_is_tensorflows(padding):
    tf = _tensorflow()
    rng = np.random.default_rng(76)
    layer = ctt.TfConvTranspose(4, 3, (3, 2), strides=(2, 3), padding=padding)
    _integer_parameters(layer, rng)
    x = integer_array(rng, (2, 3, 4, 4), "float32")
    output_shape = [2, 6, 12, 3] if padding == "SAME" else [2, 7, 11, 3]
    out, grad, grads = _ours(layer, x, lambda shape: integer_array(rng, shape, "float32"),
                             output_shape)
    data, kernel = tf.Variable(x), tf.Variable(layer.weight.detach().numpy())
    with tf.GradientTape() as tape:
        expected = tf.nn.conv_transpose(data, kernel, output_shape, (2, 3), padding)
        loss = tf.reduce_sum(expected * grad)
    np.testing.assert_array_equal(out, expected.numpy())
    _assert_equal(grads, [g.numpy() for g in tape.gradient(loss, [data, kernel])] + [None],
                  padding)


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_keras_conv_transpose_layer_is_keras_own(padding):
    tf = _tensorflow()
    keras = require("keras", "keras is installed by the test extra")
    rng = np.random.default_rng(77)
    layer = ctt.KerasConvTranspose(4, 3, (3, 2), strides=(2, 3), padding=padding,
                                   output_padding=(1, 2))
    _integer_parameters(layer, rng)
    x = integer_array(rng, (2, 3, 4, 4), "float32")
    out, grad, grads = _ours(layer, x, lambda shape: integer_array(rng, shape, "float32"))
    reference = keras.layers.Conv2DTranspose(3, (3, 2), strides=(2, 3), padding=padding,
                                             output_padding=(1, 2))
    data = tf.Variable(x)
    reference.build(data.shape)
    reference.set_weights([layer.weight.detach().numpy(), layer.bias.detach().numpy()])
    with tf.GradientTape() as tape:
        expected = reference(data)
        loss = tf.reduce_sum(expected * grad)
    np.testing.assert_array_equal(out, np.asarray(expected))
    variables = [data, reference.kernel, reference.bias]
    _assert_equal(grads, [np.asarray(g) for g in tape.gradient(loss, variables)], padding)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_tflite_transpose_conv_layer_is_tensorflows_op(padding):
    tf = _tensorflow()
    rng = np.random.default_rng(78)
    layer = ctt.TfliteTransposeConv(4, 3, (3, 2), padding=padding, stride_h=2, stride_w=3)
    _integer_parameters(layer, rng)
    x = integer_array(rng, (2, 3, 4, 4), "float32")
    output_shape = [2, 6, 12, 3] if padding == "SAME" else [2, 7, 11, 3]
    out, grad, grads = _ours(layer, x, lambda shape: integer_array(rng, shape, "float32"),
                             output_shape)
    data = tf.Variable(x)
    weights = tf.Variable(layer.weight.detach().numpy())
    bias = tf.Variable(layer.bias.detach().numpy())
    with tf.GradientTape() as tape:  # OHWI weights as conv2d_transpose's HWOI filters
        expected = tf.nn.conv2d_transpose(data, tf.transpose(weights, (1, 2, 0, 3)),
                                          output_shape, (2, 3), padding) + bias
        loss = tf.reduce_sum(expected * grad)
    np.testing.assert_array_equal(out, expected.numpy())
    _assert_equal(grads, [g.numpy() for g in tape.gradient(loss, [data, weights, bias])],
                  padding)


@pytest.mark.parametrize("arguments", [
    dict(strides=(2, 3), padding="SAME"),
    dict(strides=(2, 1), padding=((1, 2), (0, 1)), rhs_dilation=(1, 2),
         dimension_numbers=("NCHW", "OIHW", "NCHW")),
    dict(strides=(1, 2), padding="VALID", transpose_kernel=True)], ids=str)
def test_jax_conv_transpose_layer_is_jaxs(arguments):
    jax = require("jax", "jax is installed by the test extra")
    rng = np.random.default_rng(79)
    layer = ctt.JaxConvTranspose(4, 3, (3, 2), **arguments)
    _integer_parameters(layer, rng)
    channels_first = arguments.get("dimension_numbers", ("NHWC",))[0] == "NCHW"
    x = integer_array(rng, (2, 4, 3, 4) if channels_first else (2, 3, 4, 4), "float32")
    out, grad, grads = _ours(layer, x, lambda shape: integer_array(rng, shape, "float32"))
    expected, pullback = jax.vjp(
        lambda a, k: jax.lax.conv_transpose(a, k, **arguments), x, layer.weight.detach().numpy())
    np.testing.assert_array_equal(out, np.asarray(expected))
    _assert_equal(grads, list(pullback(grad)) + [None], arguments)
