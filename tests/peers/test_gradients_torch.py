"""Gradients against torch autograd, where torch can express the layer.

``torch.nn.functional.conv_transpose{1,2,3}d`` takes symmetric ``padding``,
``output_padding`` (smaller than the stride or the dilation), ``groups`` and
``dilation``: as ONNX ConvTranspose with ``pads = padding`` at both ends.  Its autograd
gives the data, weight and bias gradients of ``sum(grad * out)``; the library's VJP
must equal them (small integers in float64: every sum is exact).  The forward
convolution is checked the same way against ``conv{1,2,3}d``'s input gradient.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convtranspose as ct

torch = pytest.importorskip("torch", reason="torch is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers


@st.composite
def torch_layers(draw):
    rank = draw(st.integers(1, 3))
    lists = lambda lo, hi: draw(st.lists(st.integers(lo, hi), min_size=rank,  # noqa: E731
                                         max_size=rank))
    groups = draw(st.integers(1, 3))
    sizes, kernel = lists(1, {1: 6, 2: 4, 3: 3}[rank]), lists(1, 3)
    strides, dilations = lists(1, 3), lists(1, 2)
    output_padding = [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(strides, dilations)]
    full = [(x - 1) * s + (k - 1) * d + 1 + p
            for x, k, s, d, p in zip(sizes, kernel, strides, dilations, output_padding)]
    padding = [draw(st.integers(0, (f - 1) // 2)) for f in full]
    return dict(rank=rank, groups=groups, c_in=draw(st.integers(1, 3)),
                c_out=draw(st.integers(1, 3)), batch=draw(st.integers(1, 2)), sizes=sizes,
                kernel=kernel, strides=strides, dilations=dilations, padding=padding,
                output_padding=output_padding, seed=draw(st.integers(0, 2**16)))


def _ints(rng, shape):
    return rng.integers(-4, 5, shape).astype(np.float64)


def check_transposed(layer):
    rng = np.random.default_rng(layer["seed"])
    g = layer["groups"]
    X = _ints(rng, [layer["batch"], g * layer["c_in"]] + layer["sizes"])
    W = _ints(rng, [g * layer["c_in"], layer["c_out"]] + layer["kernel"])
    B = _ints(rng, [g * layer["c_out"]])
    tensors = [torch.tensor(a, requires_grad=True) for a in (X, W, B)]
    function = getattr(torch.nn.functional, f"conv_transpose{layer['rank']}d")
    out = function(*tensors, stride=layer["strides"], padding=layer["padding"],
                   output_padding=layer["output_padding"], groups=g,
                   dilation=layer["dilations"])
    grad = _ints(rng, tuple(out.shape))
    (out * torch.from_numpy(grad)).sum().backward()
    ours = ct.vjp.onnx_conv_transpose(
        X, W, grad, B, strides=layer["strides"], pads=layer["padding"] * 2,
        output_padding=layer["output_padding"], group=g, dilations=layer["dilations"])
    for mine, tensor in zip(ours, tensors):
        np.testing.assert_array_equal(mine, tensor.grad.numpy())


def check_forward(layer):
    """``ct.convolution`` / ``group_convolution`` and their data gradient (through the
    transposed op with the same attributes) against torch's ``conv{1,2,3}d``."""
    rng = np.random.default_rng(layer["seed"])
    g = layer["groups"]
    full = [(x - 1) * s + (k - 1) * d + 1
            for x, k, s, d in zip(layer["sizes"], layer["kernel"], layer["strides"],
                                  layer["dilations"])]
    data = _ints(rng, [layer["batch"], g * layer["c_in"]] + full)
    weight = _ints(rng, [g * layer["c_out"], layer["c_in"]] + layer["kernel"])
    x = torch.tensor(data, requires_grad=True)
    function = getattr(torch.nn.functional, f"conv{layer['rank']}d")
    out = function(x, torch.from_numpy(weight), stride=layer["strides"],
                   padding=layer["padding"], groups=g, dilation=layer["dilations"])
    grad = _ints(rng, tuple(out.shape))
    (out * torch.from_numpy(grad)).sum().backward()
    attrs = dict(strides=layer["strides"], dilations=layer["dilations"],
                 pads_begin=layer["padding"], pads_end=layer["padding"])
    grouped = weight.reshape((g, layer["c_out"], layer["c_in"]) + tuple(layer["kernel"]))
    ours = (ct.group_convolution(data, grouped, **attrs) if g > 1 else
            ct.convolution(data, weight, **attrs))
    np.testing.assert_array_equal(ours, out.detach().numpy())
    # the data gradient of a convolution is the transposed convolution of the gradient
    back = ct.group_convolution_backprop_data(grad, grouped, full, **attrs)
    np.testing.assert_array_equal(back, x.grad.numpy())


def test_vjp_matches_torch_autograd(examples):
    settings(max_examples=examples)(given(torch_layers())(check_transposed))()


def test_convolution_matches_torch_and_its_autograd(examples):
    settings(max_examples=examples)(given(torch_layers())(check_forward))()
