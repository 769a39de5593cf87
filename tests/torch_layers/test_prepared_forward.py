"""The layers' forward calls without gradients run prepared layers of their weights:
every change of the weights torch reports is seen, checked against torch's own
``nn.ConvTranspose2d`` (the oracle) after each kind of edit; gradients still flow."""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest
import torch
from torch import nn

import convtranspose as ct
import convtranspose.torch as ctt


def _pair(bias=True):
    """A layer and torch's own of the same shape and attributes, with the same weights."""
    layer = ctt.TorchConvTranspose(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                   bias=bias, dtype=torch.float64)
    reference = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                   bias=bias, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(layer.weight)
        if bias:
            reference.bias.copy_(layer.bias)
    return layer, reference


def _assert_agree(layer, reference, data):
    with torch.no_grad():
        got, want = layer(data), reference(data)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.fixture
def data():
    return torch.from_numpy(np.random.default_rng(7).standard_normal((2, 4, 5, 6)))


@pytest.mark.parametrize("bias", [True, False])
def test_in_place_edits_under_no_grad_are_seen(data, bias):
    layer, reference = _pair(bias)
    _assert_agree(layer, reference, data)
    with torch.no_grad():
        for module in (layer, reference):
            module.weight.add_(1)
            if bias:
                module.bias.mul_(-3)
    _assert_agree(layer, reference, data)
    for module in (layer, reference):  # a detached view shares the version counter
        module.weight.detach()[0].mul_(2)
    _assert_agree(layer, reference, data)


def test_optimizer_steps_are_seen(data):
    layer, reference = _pair()
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
                  for m in (layer, reference)]
    target = torch.from_numpy(np.random.default_rng(8).standard_normal((2, 6, 10, 12)))
    for _ in range(3):
        _assert_agree(layer, reference, data)
        for module, optimizer in zip((layer, reference), optimizers):
            optimizer.zero_grad()
            ((module(data) - target) ** 2).mean().backward()
            optimizer.step()
        np.testing.assert_allclose(layer.weight.detach().numpy(),
                                   reference.weight.detach().numpy(), rtol=1e-10)
    _assert_agree(layer, reference, data)


def test_load_state_dict_and_new_parameters_are_seen(data):
    layer, reference = _pair()
    _assert_agree(layer, reference, data)
    source, _ = _pair()
    layer.load_state_dict(source.state_dict())
    reference.load_state_dict(source.state_dict())
    _assert_agree(layer, reference, data)
    other, _ = _pair()
    layer.load_state_dict(other.state_dict(), assign=True)  # new Parameter objects
    reference.load_state_dict(other.state_dict())
    _assert_agree(layer, reference, data)
    layer.weight = nn.Parameter(layer.weight.detach() * 0.5)
    with torch.no_grad():
        reference.weight.mul_(0.5)
    _assert_agree(layer, reference, data)


def test_dtype_attributes_and_shapes_are_seen(data):
    layer, reference = _pair()
    _assert_agree(layer, reference, data)
    layer.float()
    reference.float()
    with torch.no_grad():
        got, want = layer(data.float()), reference(data.float())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    layer.double()
    reference.double()
    layer.padding, reference.padding = 0, (0, 0)
    _assert_agree(layer, reference, data)
    _assert_agree(layer, reference, data[:1, :, :3])  # another input shape


def test_writes_torch_does_not_count_need_repack(data):
    # Writes through ``.data`` bump no version counter: the documented caveat, and the
    # sign that the prepared layer (not the custom operator) computed the call.
    layer, reference = _pair()
    _assert_agree(layer, reference, data)
    with torch.no_grad():
        before = layer(data)
    layer.weight.data.mul_(2)
    with torch.no_grad():
        reference.weight.mul_(2)
        np.testing.assert_array_equal(layer(data).numpy(), before.numpy())
    layer.repack()
    _assert_agree(layer, reference, data)


def test_gradients_after_prepared_calls(data):
    layer, reference = _pair()
    _assert_agree(layer, reference, data)
    inputs = [data.clone().requires_grad_() for _ in range(2)]
    outputs = [m(x) for m, x in zip((layer, reference), inputs)]
    assert outputs[0].requires_grad
    for output in outputs:
        output.square().sum().backward()
    np.testing.assert_allclose(inputs[0].grad.numpy(), inputs[1].grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(layer.weight.grad.numpy(), reference.weight.grad.numpy(),
                               rtol=1e-10)
    with torch.no_grad():
        assert not layer(data).requires_grad
    frozen = copy.deepcopy(layer).requires_grad_(False)
    result = frozen(data)  # grad mode on, nothing requires a gradient
    assert not result.requires_grad
    with torch.no_grad():
        np.testing.assert_allclose(result.numpy(), reference(data).numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_copies_and_pickles_prepare_their_own_weights(data):
    layer, reference = _pair()
    _assert_agree(layer, reference, data)
    twin = copy.deepcopy(layer)
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    unpickled = pickle.loads(pickle.dumps(layer))
    with torch.no_grad():
        twin.weight.neg_()
        for module in (loaded, unpickled):
            _assert_agree(module, reference, data)
        reference.weight.neg_()
    _assert_agree(twin, reference, data)


#: (layer, data shape, forward's per-call arguments, the array function on NumPy data,
#: weight and bias with the layer's attributes).
LAYERS = {
    "openvino": (
        lambda: ctt.ConvolutionBackpropData(3, 2, 3, strides=2, auto_pad="same_upper"),
        (1, 3, 4, 5), dict(output_shape=[8, 10]),
        lambda x, w, b: ct.convolution_backprop_data(x, w, [8, 10], strides=2,
                                                     auto_pad="same_upper")),
    "onednn": (
        lambda: ctt.ConvTranspose(4, 2, 3, strides=2, groups=2), (1, 4, 5, 4), {},
        lambda x, w, b: ct.conv_transpose(x, w, b, strides=2, groups=2)),
    "onnx": (
        lambda: ctt.OnnxConvTranspose(2, 4, 2, strides=[2, 1], pads=[0, 1, 1, 0]),
        (2, 2, 3, 3), {},
        lambda x, w, b: ct.onnx_conv_transpose(x, w, b, strides=[2, 1], pads=[0, 1, 1, 0])),
    "convolution": (
        lambda: ctt.Convolution(3, 2, 3, strides=2), (1, 3, 7, 6), {},
        lambda x, w, b: ct.convolution(x, w, strides=2)),
    "group convolution": (
        lambda: ctt.GroupConvolution(4, 4, 3, 2), (1, 4, 5, 5), {},
        lambda x, w, b: ct.group_convolution(x, w)),
    "tf": (
        lambda: ctt.TfConvTranspose(3, 2, 3, strides=2), (1, 4, 4, 3),
        dict(output_shape=[1, 8, 8, 2]),
        lambda x, w, b: ct.tf_conv_transpose(x, w, [1, 8, 8, 2], 2)),
    "keras": (
        lambda: ctt.KerasConvTranspose(3, 2, 3, strides=2, padding="same"), (1, 4, 4, 3), {},
        lambda x, w, b: ct.keras_conv_transpose(x, w, b, strides=2, padding="same")),
    "jax": (
        lambda: ctt.JaxConvTranspose(3, 2, 3, strides=(2, 2), padding="SAME"), (1, 4, 4, 3),
        {}, lambda x, w, b: ct.jax_conv_transpose(x, w, (2, 2), "SAME")),
}


@pytest.mark.parametrize("name", LAYERS)
def test_every_layer_matches_its_array_function(name):
    # The oracle: the array function on copies of the weights, after an in-place edit.
    make, shape, per_call, function = LAYERS[name]
    torch.manual_seed(3)
    layer = make().double()
    data = torch.from_numpy(np.random.default_rng(4).standard_normal(shape))
    with torch.no_grad():
        layer(data, **per_call)
        layer.weight.sub_(0.25)
        got = layer(data, **per_call)
    bias = None if layer.bias is None else layer.bias.detach().numpy().copy()
    expected = function(data.numpy().copy(), layer.weight.detach().numpy().copy(), bias)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_inference_mode_and_layers_made_inside_it(data):
    layer, reference = _pair()
    with torch.inference_mode():
        np.testing.assert_allclose(layer(data).numpy(), reference(data).numpy(), rtol=1e-12,
                                   atol=1e-12)
        # Parameters made here are inference tensors, which keep no version counter:
        # such a layer runs the custom operator, never a stale copy.
        inner, inner_reference = _pair()
        for _ in range(2):
            np.testing.assert_allclose(inner(data).numpy(), inner_reference(data).numpy(),
                                       rtol=1e-12, atol=1e-12)
            inner.weight.mul_(2)
            inner_reference.weight.mul_(2)
