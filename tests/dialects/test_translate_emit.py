"""``Translation.python()`` / ``translate --emit python``: the emitted code, executed with
``x``, ``w`` and ``b`` in a fresh namespace, runs the target framework itself (torch,
TensorFlow, Keras, LiteRT, JAX, onnxruntime, OpenVINO) and leaves in ``y`` the source
layer's output as the source framework computes it (torch's ``conv_transpose*d``, or an
ONNX model run by onnxruntime), for layers with output_padding, asymmetric pads,
groups and dilation."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
from cli_support import assert_one_line_error, run_cli

from ._cases import integer_array, require

torch = require("torch", "torch is installed by the test extra")

pytestmark = pytest.mark.peers

#: The framework each target's code imports.
FRAMEWORKS = {"torch_conv_transpose": "torch", "tf_conv_transpose": "tensorflow",
              "keras_conv_transpose": "keras", "tflite_transpose_conv": "ai_edge_litert",
              "jax_conv_transpose": "jax", "onnx_conv_transpose": "onnxruntime",
              "convolution_backprop_data": "openvino",
              "group_convolution_backprop_data": "openvino", "conv_transpose": "numpy",
              "tensorrt_deconvolution": "numpy"}

#: torch layers: (data shape, filter shape, bias?, attributes).
TORCH_LAYERS = {
    "output_padding": ((1, 3, 4, 5), (3, 2, 3, 3), True,
                       dict(stride=2, padding=1, output_padding=1)),
    "groups_dilation": ((2, 4, 3, 4), (4, 3, 3, 2), True,
                        dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
                             dilation=(2, 3))),
    "one_axis": ((1, 2, 6), (2, 3, 4), False, dict(stride=3, padding=2, output_padding=1)),
    # output_padding 2 >= stride 1 (torch allows it below the dilation): TensorFlow, Keras
    # and TFLite end at the full result, so their code pads zeros (then adds the bias)
    "zero_pad": ((1, 2, 4, 3), (2, 2, 2, 2), True, dict(stride=1, dilation=3, output_padding=2)),
}


def _torch_oracle(data, weight, bias, attributes):
    rank = data.ndim - 2
    function = getattr(torch.nn.functional, f"conv_transpose{rank}d")
    return function(torch.from_numpy(data), torch.from_numpy(weight),
                    None if bias is None else torch.from_numpy(bias), **attributes).numpy()


def _run_emitted(code, arrays):
    """``y`` after executing ``code`` with ``x``, ``w`` (and ``b``); the inputs unchanged."""
    namespace = dict(zip("xwb", arrays))
    copies = [a.copy() for a in arrays]
    exec(compile(code, "<emitted>", "exec"), namespace)  # noqa: S102 - the code under test
    for before, after in zip(copies, arrays):
        np.testing.assert_array_equal(before, after)
    return namespace["y"]


def _check(translation, arrays, expected):
    pytest.importorskip(FRAMEWORKS[translation.target])
    code = translation.python()
    result = _run_emitted(code, arrays)
    assert result.dtype == np.float32 and result.shape == expected.shape, (result.shape, code)
    np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-4, err_msg=code)


_TARGETS = [t for t in FRAMEWORKS if t != "convolution_backprop_data"]


@pytest.mark.parametrize("case", list(TORCH_LAYERS))
@pytest.mark.parametrize("target", _TARGETS + ["convolution_backprop_data"])
def test_emitted_code_computes_the_torch_layer(case, target):
    data_shape, filter_shape, with_bias, attributes = TORCH_LAYERS[case]
    rank = len(data_shape) - 2
    if target in ("tflite_transpose_conv", "tensorrt_deconvolution") and rank != 2:
        pytest.skip(f"{target} takes no 1-D layer (refused by the translation)")
    if target == "convolution_backprop_data" and attributes.get("groups", 1) > 1:
        pytest.skip("ConvolutionBackpropData has no groups (refused by the translation)")
    rng = np.random.default_rng(len(case) + len(target))
    arrays = [integer_array(rng, data_shape, "float32"),
              integer_array(rng, filter_shape, "float32")]
    out_channels = filter_shape[1] * attributes.get("groups", 1)
    if with_bias:
        arrays.append(integer_array(rng, (out_channels,), "float32"))
    translation = ct.translate("torch_conv_transpose", target, data_shape, filter_shape,
                               (out_channels,) if with_bias else None, **attributes)
    expected = _torch_oracle(*arrays, *([None] if not with_bias else []), attributes)
    _check(translation, arrays, expected)


def _onnx_oracle(data, weight, bias, attributes):
    """The ONNX layer as onnxruntime computes it, from a model built here."""
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], **attributes)
    graph = helper.make_graph(
        [node], "oracle", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT,
                                                         data.shape)],
        [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(bias, "B")])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {"X": data})[0]


@pytest.mark.parametrize("target", [t for t in _TARGETS if t != "onnx_conv_transpose"])
def test_emitted_code_computes_an_onnx_layer_with_asymmetric_pads(target):
    # pads begin (1, 2), end (0, 1): torch (symmetric padding) and Keras need a crop,
    # TensorFlow takes explicit pairs
    attributes = dict(strides=[2, 2], pads=[1, 2, 0, 1], output_padding=[1, 1])
    rng = np.random.default_rng(7)
    arrays = [integer_array(rng, s, "float32") for s in ((1, 2, 3, 4), (2, 3, 3, 3), (3,))]
    translation = ct.translate("onnx_conv_transpose", target, (1, 2, 3, 4), (2, 3, 3, 3),
                               (3,), **attributes)
    _check(translation, arrays, _onnx_oracle(*arrays, attributes))


def test_emitted_code_names_its_contract_and_the_cli_prints_it():
    t = ct.translate("torch_conv_transpose", "tf_conv_transpose", (1, 8, 5, 5), (8, 4, 3, 3),
                     (4,), stride=2, padding=1)
    code = t.python()
    assert "#   x  data,   shape (1, 8, 5, 5)" in code and "#   b  bias,   shape (4,)" in code
    assert "# Output: y, the source layer's output, shape (1, 4, 9, 9)" in code
    # TensorFlow's CPU kernel takes NHWC only: the code transposes, never asks for NCHW
    assert "data_format='NHWC'" in code and "NCHW" not in code
    arguments = ["translate", "torch_conv_transpose", "tf_conv_transpose", "--data-shape",
                 "1,8,5,5", "--filter-shape", "8,4,3,3", "--bias-shape", "4", "--stride", "2",
                 "--padding", "1"]
    result = run_cli(*arguments, "--emit", "python")
    assert result.returncode == 0 and result.stdout == code, result.stderr
    text = run_cli(*arguments)
    assert "run: Translation.run(x, w, b)" in text.stdout
    assert_one_line_error(run_cli(*arguments, "--emit", "python", "--json"), "--emit")
    onnx_text = str(run_cli("translate", "onnx_conv_transpose", "onnx_conv_transpose",
                            "--data-shape", "1,1,3,3", "--filter-shape", "1,2,3,3",
                            "--strides", "2,2", "--pads", "1,2,0,1").stdout)
    assert "torch.onnx.export writes ConvTranspose" in onnx_text
    assert "pads that differ at the two ends" in onnx_text


def test_emitted_onnx_model_padded_computes_a_jax_layer_starting_before_the_full_result():
    # JAX pads (3, 3) of a kernel of 3: the window starts 1 before the full result; the
    # ONNX model ends at it (onnxruntime refuses negative derived pads), the code pads
    lax = pytest.importorskip("jax.lax")
    attributes = dict(strides=[2], padding=[(3, 3)], dimension_numbers=("NHC", "HIO", "NHC"))
    rng = np.random.default_rng(5)
    arrays = [integer_array(rng, (1, 3, 2), "float32"), integer_array(rng, (3, 2, 2), "float32")]
    translation = ct.translate("jax_conv_transpose", "onnx_conv_transpose", (1, 3, 2),
                               (3, 2, 2), **attributes)
    assert translation.crop == ((-1, 0),)  # [-1, 8): output_padding 1 reaches 8
    expected = np.asarray(lax.conv_transpose(*arrays, **attributes))
    _check(translation, arrays, expected)
