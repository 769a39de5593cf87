"""convtranspose.torch: gradients against central differences (``torch.autograd.gradcheck``,
float64) for every dialect, a training loop step by step against torch's own layers where
the semantics coincide, the initialisation, ``torch.compile`` and the errors.
"""

from __future__ import annotations

import doctest
import importlib
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import convtranspose as ct
import convtranspose.torch as ctt
import oracle

README = Path(__file__).resolve().parents[2] / "README.md"


def _tensor(rng, shape):
    return torch.from_numpy(rng.standard_normal(shape)).requires_grad_()


#: (function, data shape, filter shape, bias shape or None, attributes): small layers
#: with groups, output_shape (smaller and larger than natural), asymmetric and negative
#: pads, dilations, every filter layout, channels-last data, 1-D to 3-D.
GRADCHECK_CASES = {
    "openvino asymmetric pads": (
        ctt.convolution_backprop_data, (1, 2, 3, 3), (2, 2, 2, 3), None,
        dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 2], output_padding=[1, 0],
             dilations=[1, 2])),
    "openvino same_upper output_shape": (
        ctt.convolution_backprop_data, (2, 1, 4), (1, 2, 3), None,
        dict(output_shape=[8], strides=2, auto_pad="same_upper")),
    "openvino groups output_shape explicit": (
        ctt.group_convolution_backprop_data, (1, 4, 3, 2), (2, 2, 1, 2, 2), None,
        dict(output_shape=[7, 5], strides=2, pads_begin=[1, 0])),
    "onednn NXC XOI groups asymmetric": (
        ctt.conv_transpose, (1, 3, 2, 4), (2, 2, 3, 4), (6,),
        dict(strides=2, pads_begin=[0, 1], pads_end=[1, 0], groups=2, filter_format="XOI")),
    "onednn NCX OIX output_shape": (
        ctt.conv_transpose, (1, 2, 3), (2, 2, 3), (2,),
        dict(data_format="NCX", filter_format="OIX", output_shape=[9], strides=3)),
    "onnx negative pads group": (
        ctt.onnx_conv_transpose, (1, 2, 2, 3), (2, 1, 2, 2), (2,),
        dict(strides=[2, 1], output_shape=[7, 6], group=2)),
    "onnx 3-D asymmetric": (
        ctt.onnx_conv_transpose, (1, 1, 2, 2, 2), (1, 2, 2, 1, 2), None,
        dict(strides=[1, 2, 2], pads=[1, 0, 0, 0, 1, 1], dilations=[1, 1, 2])),
    "convolution same_lower": (
        ctt.convolution, (1, 2, 5, 4), (3, 2, 2, 3), None,
        dict(strides=2, auto_pad="same_lower")),
    "group convolution asymmetric": (
        ctt.group_convolution, (1, 4, 6), (2, 1, 2, 3), None,
        dict(pads_begin=2, pads_end=0, strides=2, dilations=2)),
}


@pytest.mark.parametrize("name", sorted(GRADCHECK_CASES))
def test_gradcheck(name):
    function, data_shape, filter_shape, bias_shape, attributes = GRADCHECK_CASES[name]
    rng = np.random.default_rng(len(name))
    operands = [_tensor(rng, data_shape), _tensor(rng, filter_shape)]
    if bias_shape is not None:
        operands.append(_tensor(rng, bias_shape))
    assert torch.autograd.gradcheck(lambda *a: function(*a, **attributes), operands)


#: The frameworks' dialects: (function, operand name -> shape, attributes), the operands
#: passed by name (TFLite's come in the op's order: output shape, weights, input, bias).
FRAMEWORK_GRADCHECK_CASES = {
    "torch groups output_size": (
        ctt.torch_conv_transpose, dict(input=(1, 4, 3, 2), weight=(4, 1, 2, 3), bias=(2,)),
        dict(stride=[2, 1], padding=[1, 0], groups=2, dilation=[1, 2], output_size=[5, 6])),
    "torch 1-D output_padding": (
        ctt.torch_conv_transpose, dict(input=(2, 1, 4), weight=(1, 2, 3)),
        dict(stride=3, padding=1, output_padding=2)),
    "tensorrt asymmetric pre/post groups": (
        ctt.tensorrt_deconvolution, dict(input=(1, 2, 3, 2), kernel=(2, 1, 2, 2), bias=(2,)),
        dict(stride_nd=2, pre_padding=[1, 0], post_padding=[0, 2], num_groups=2)),
    "tensorrt 3-D same_lower dilated": (
        ctt.tensorrt_deconvolution, dict(input=(1, 1, 2, 2, 2), kernel=(1, 2, 2, 1, 2)),
        dict(stride_nd=[1, 2, 2], dilation_nd=[2, 1, 1], padding_mode="SAME_LOWER")),
    "tf NCHW explicit pairs": (
        ctt.tf_conv_transpose, dict(input=(1, 2, 3, 2), filters=(2, 2, 3, 2)),
        dict(output_shape=[1, 3, 5, 4], strides=2, data_format="NCHW",
             padding=[[0, 0], [0, 0], [1, 0], [0, 1]])),
    "tf 1-D same dilated": (
        ctt.tf_conv_transpose, dict(input=(2, 3, 1), filters=(2, 2, 1)),
        dict(output_shape=[2, 3, 2], strides=1, padding="SAME", dilations=2)),
    "keras channels_first output_padding": (
        ctt.keras_conv_transpose, dict(inputs=(1, 2, 3, 2), kernel=(3, 2, 2, 2), bias=(2,)),
        dict(strides=2, padding="same", output_padding=1, data_format="channels_first")),
    "keras 3-D valid": (
        ctt.keras_conv_transpose, dict(inputs=(1, 2, 1, 2, 1), kernel=(1, 2, 2, 2, 1)),
        dict(strides=[1, 2, 1], padding="valid")),
    "tflite same with bias": (
        ctt.tflite_transpose_conv, dict(weights=(2, 3, 2, 1), input=(1, 2, 3, 1), bias=(2,)),
        dict(output_shape=[1, 4, 5, 2], padding="SAME", stride_h=2, stride_w=2)),
    "tflite valid": (
        ctt.tflite_transpose_conv, dict(weights=(1, 2, 2, 2), input=(2, 2, 2, 2)),
        dict(output_shape=[2, 4, 3, 1], padding="VALID", stride_h=2)),
    "jax NCHW OIHW pairs dilated": (
        ctt.jax_conv_transpose, dict(lhs=(1, 2, 3, 2), rhs=(1, 2, 2, 3)),
        dict(strides=(2, 1), padding=((-1, 2), (2, 3)), rhs_dilation=(1, 2),
             dimension_numbers=("NCHW", "OIHW", "NCHW"))),
    "jax default transpose_kernel same": (
        ctt.jax_conv_transpose, dict(lhs=(1, 3, 2, 2), rhs=(2, 3, 1, 2)),
        dict(strides=(2, 2), padding="SAME", transpose_kernel=True)),
}


@pytest.mark.parametrize("name", sorted(FRAMEWORK_GRADCHECK_CASES))
def test_gradcheck_of_the_frameworks(name):
    function, shapes, attributes = FRAMEWORK_GRADCHECK_CASES[name]
    rng = np.random.default_rng(len(name))
    operands = {operand: _tensor(rng, shape) for operand, shape in shapes.items()}
    names = list(operands)
    assert torch.autograd.gradcheck(
        lambda *a: function(**dict(zip(names, a)), **attributes), list(operands.values()))


def test_torch_conv_transpose_is_torchs_own_with_its_gradients():
    """Values and gradients against ``torch.nn.functional.conv_transpose2d`` and autograd."""
    rng = np.random.default_rng(8)
    ours = [_tensor(rng, shape) for shape in ((2, 4, 3, 5), (4, 3, 3, 2), (6,))]
    theirs = [t.detach().clone().requires_grad_() for t in ours]
    attributes = dict(stride=[2, 3], padding=[1, 0], output_padding=[1, 2], groups=2,
                      dilation=[1, 2])
    out = ctt.torch_conv_transpose(*ours, **attributes)
    expected = torch.nn.functional.conv_transpose2d(*theirs, **attributes)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    grad = torch.from_numpy(rng.standard_normal(tuple(out.shape)))
    out.backward(grad)
    expected.backward(grad)
    for mine, torchs in zip(ours, theirs):
        torch.testing.assert_close(mine.grad, torchs.grad, rtol=1e-12, atol=1e-12)


def test_gradcheck_of_the_array_api_path_on_tensors_that_require_grad():
    """``ct.*`` itself on tensors that record gradients: the generic computation with
    torch's functions, which torch's autograd differentiates (second derivatives too)."""
    rng = np.random.default_rng(1)
    operands = [_tensor(rng, (1, 2, 3, 2)), _tensor(rng, (2, 1, 2, 2)), _tensor(rng, (1,))]
    attributes = dict(strides=[2, 1], pads=[1, 0, 0, 1])

    def function(*a):
        return ct.onnx_conv_transpose(*a, **attributes)

    assert torch.autograd.gradcheck(function, operands)
    assert torch.autograd.gradgradcheck(function, operands)


def test_the_gradients_are_the_vjp():
    rng = np.random.default_rng(3)
    data, filter = _tensor(rng, (2, 3, 4)), _tensor(rng, (3, 2, 3))
    attributes = dict(strides=2, pads_begin=1, pads_end=0, output_padding=1)
    out = ctt.convolution_backprop_data(data, filter, **attributes)
    grad = rng.standard_normal(tuple(out.shape))
    out.backward(torch.from_numpy(grad))
    expected = ct.vjp.convolution_backprop_data(data.detach().numpy(), filter.detach().numpy(),
                                                grad, **attributes)
    np.testing.assert_array_equal(data.grad.numpy(), expected[0])
    np.testing.assert_array_equal(filter.grad.numpy(), expected[1])


def test_values_are_the_oracles():
    rng = np.random.default_rng(4)
    data = rng.integers(-4, 5, (2, 4, 3, 3)).astype(np.float32)
    filter = rng.integers(-4, 5, (2, 2, 3, 2, 2)).astype(np.float32)
    attributes = dict(strides=[2, 3], pads_begin=[0, 1], pads_end=[1, 0])
    result = ctt.group_convolution_backprop_data(torch.from_numpy(data),
                                                 torch.from_numpy(filter), **attributes)
    oracle.assert_matches(result.numpy(),
                          oracle.openvino_group_cbpd_case(data, filter, **attributes))


# ---------------------------------------------------------------------------
# Layers: initialisation and training against torch's own


def _torch_model():
    return nn.Sequential(
        nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1), nn.Tanh(),
        nn.ConvTranspose2d(6, 6, 3, padding=1, groups=3, bias=False), nn.Tanh(),
        nn.ConvTranspose2d(6, 2, 3, padding=1), nn.Tanh(),
        nn.ConvTranspose2d(2, 2, 2, stride=2, bias=False))


def _our_model():
    return nn.Sequential(
        ctt.OnnxConvTranspose(4, 6, 4, strides=2, pads=[1, 1, 1, 1]), nn.Tanh(),
        ctt.GroupConvolutionBackpropData(6, 6, 3, 3, pads_begin=1, pads_end=1), nn.Tanh(),
        ctt.ConvTranspose(6, 2, 3, pads_begin=1, pads_end=1, data_format="NCX",
                          weights_format="IOX"), nn.Tanh(),
        ctt.ConvolutionBackpropData(2, 2, 2, strides=2))


def _parameters(model):
    """Every parameter in torch's own layout, flattened, in order."""
    return [p.detach().reshape(-1) for p in model.parameters()]


def test_layers_start_from_torchs_initial_values():
    torch.manual_seed(7)
    reference = _torch_model()
    torch.manual_seed(7)
    ours = _our_model()
    for theirs, mine in zip(_parameters(reference), _parameters(ours), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    # a permuted layout: the same values, moved
    torch.manual_seed(8)
    layer = nn.ConvTranspose3d(4, 6, (2, 3, 1), groups=2)
    torch.manual_seed(8)
    xio = ctt.ConvTranspose(4, 6, (2, 3, 1), groups=2)          # (K..., I, O/groups)
    assert xio.weight.shape == (2, 3, 1, 4, 3)
    torch.testing.assert_close(xio.weight.detach(), layer.weight.detach().permute(2, 3, 4, 0, 1),
                               rtol=0, atol=0)
    torch.testing.assert_close(xio.bias.detach(), layer.bias.detach(), rtol=0, atol=0)
    torch.manual_seed(9)
    conv = nn.Conv2d(6, 4, 3, groups=2, bias=False)
    torch.manual_seed(9)
    grouped = ctt.GroupConvolution(6, 4, 3, 2)
    torch.testing.assert_close(grouped.weight.detach().reshape(4, 3, 3, 3), conv.weight.detach(),
                               rtol=0, atol=0)


@pytest.fixture
def one_torch_thread():
    """torch on one thread: its float64 transposed convolution took 0.1 s per tiny call
    on two threads of a busy 2-CPU machine (thread hand-offs) against 0.1-1 ms on one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_training_follows_torchs_own_layers_step_by_step(one_torch_thread):
    """A 4-layer decoder of each dialect against the same decoder of
    ``nn.ConvTranspose2d``: same initial values, same data, Adam, 25 steps of a squared
    error; losses and parameters agree at every step (float64)."""
    torch.manual_seed(0)
    reference = _torch_model().double()
    torch.manual_seed(0)
    ours = _our_model().double()
    rng = np.random.default_rng(0)
    inputs = torch.from_numpy(rng.standard_normal((3, 4, 5, 5)))
    target = torch.from_numpy(rng.standard_normal((3, 2, 20, 20)))
    optimizers = [torch.optim.Adam(m.parameters(), lr=0.01) for m in (reference, ours)]
    losses = {0: [], 1: []}
    for step in range(25):
        for index, (model, optimizer) in enumerate(zip((reference, ours), optimizers)):
            optimizer.zero_grad()
            loss = torch.mean((model(inputs) - target) ** 2)
            loss.backward()
            optimizer.step()
            losses[index].append(loss.item())
        assert losses[1][-1] == pytest.approx(losses[0][-1], rel=1e-12), step
        for theirs, mine in zip(_parameters(reference), _parameters(ours)):
            torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-12)
    assert losses[1][-1] < 0.9 * losses[1][0]  # it did learn


def test_training_example_of_the_readme_runs():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Training through it", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "the README's training section has no python block"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert namespace["losses"][-1] < namespace["losses"][0]


# ---------------------------------------------------------------------------
# torch.compile


def test_torch_compile_keeps_the_layers_in_one_graph():
    """``fullgraph=True`` fails on any graph break; the compiled forward and backward
    equal the eager ones."""
    torch.manual_seed(1)
    model = nn.Sequential(
        ctt.OnnxConvTranspose(3, 4, 3, strides=2, pads=[0, 1, 1, 0]), nn.ReLU(),
        ctt.Convolution(4, 2, 2, strides=2, auto_pad="same_upper"),
        ctt.ConvTranspose(2, 2, 3, groups=2, data_format="NCX", auto_pad="same_lower")).double()
    inputs = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 3, 5, 4)))
    compiled = torch.compile(model, fullgraph=True)
    eager_out = model(inputs)
    eager_out.square().sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled_out = compiled(inputs)
    compiled_out.square().sum().backward()
    torch.testing.assert_close(compiled_out, eager_out, rtol=1e-12, atol=1e-12)
    for eager, p in zip(eager_grads, model.parameters()):
        torch.testing.assert_close(p.grad, eager, rtol=1e-12, atol=1e-12)


def test_torch_compile_takes_the_frameworks_functions():
    rng = np.random.default_rng(2)
    x, w = _tensor(rng, (1, 4, 4, 2)), _tensor(rng, (3, 3, 2, 3))
    function = lambda x, w: ctt.jax_conv_transpose(x, w, (2, 2), "SAME")  # noqa: E731
    compiled = torch.compile(function, fullgraph=True)
    eager_out = function(x, w)
    eager_out.square().sum().backward()
    eager_grads = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    compiled_out = compiled(x, w)
    compiled_out.square().sum().backward()
    torch.testing.assert_close(compiled_out, eager_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close((x.grad, w.grad), eager_grads, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# Errors


def test_errors_name_the_argument():
    with pytest.raises(ct.ConvTransposeError, match=r"strides\[0\] is 0 but must be positive"):
        ctt.convolution_backprop_data(torch.ones(1, 1, 3), torch.ones(1, 1, 2), strides=0)
    with pytest.raises(ct.ConvTransposeError, match=r"out_channels=5 must be divisible by"
                                                    r" groups=2"):
        ctt.GroupConvolutionBackpropData(4, 5, 3, 2)
    with pytest.raises(ct.ConvTransposeError, match=r"weights_format must be one of"):
        ctt.ConvTranspose(4, 4, 3, weights_format="IXO")
    with pytest.raises(TypeError, match=r"unexpected keyword 'stride'"):
        ctt.GroupConvolution(4, 4, 3, 2, stride=2)
    layer = ctt.OnnxConvTranspose(2, 2, 3)
    with pytest.raises(ct.ConvTransposeError, match=r"X has 3 channels"):
        layer(torch.ones(1, 3, 4, 4))
    assert math.isfinite(layer(torch.ones(1, 2, 4, 4)).sum().item())


@pytest.mark.parametrize("name", ["convtranspose.torch", "convtranspose.torch._ops",
                                  "convtranspose.torch._modules"])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
