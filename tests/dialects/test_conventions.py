"""``onnx check`` and ``ir check`` flag convention-sensitive layers, one line each, and
stay quiet about layers every convention reads alike."""

from __future__ import annotations

import numpy as np
import pytest

from cli_support import run_cli, write_ir

onnx = pytest.importorskip("onnx", reason="onnx is installed by the test extra")


def onnx_model(path, attributes, x_shape=(1, 1, 3), w_shape=(1, 1, 3)):
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.ones(w_shape, np.float32), "W")
    node = helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="up", **attributes)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, path)
    return path


def conventions(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if "convention:" in line]


def test_opset_11_same_upper_with_output_shape_names_both_texts(tmp_path):
    model = onnx_model(tmp_path / "m.onnx", dict(strides=[2], auto_pad="SAME_UPPER",
                                                 output_shape=[6]))
    result = run_cli("onnx", "check", model)
    assert result.returncode == 0, result.stderr
    (line,) = conventions(result)
    assert "pads [0]/[1]" in line and "[1]/[0] by the opset-11 text before it" in line


@pytest.mark.parametrize("attributes, fragment", [
    (dict(strides=[2], output_padding=[2]), "output_padding[0] = 2 >= strides[0] = 2"),
    (dict(strides=[1], output_shape=[7], auto_pad="SAME_LOWER"), "negative pads"),
])
def test_other_conventions_are_flagged(tmp_path, attributes, fragment):
    result = run_cli("onnx", "check", onnx_model(tmp_path / "m.onnx", attributes))
    assert result.returncode == 0, result.stderr
    assert any(fragment in line for line in conventions(result)), result.stderr


def test_a_plain_layer_has_no_convention_line(tmp_path):
    result = run_cli("onnx", "check", onnx_model(tmp_path / "m.onnx", dict(strides=[2],
                                                                          pads=[1, 1])))
    assert result.returncode == 0 and conventions(result) == [], result.stderr


def test_openvino_same_without_output_shape_acts_as_valid(tmp_path):
    weights = np.ones((1, 1, 3, 3), np.float32)
    model = write_ir(tmp_path, data_shape=(1, 1, 4, 4), weights=weights,
                     declared=(1, 1, 9, 9),
                     attributes=dict(strides="2,2", pads_begin="0,0", pads_end="0,0",
                                     dilations="1,1", auto_pad="same_upper"))
    result = run_cli("ir", "check", model)
    assert result.returncode == 0, result.stderr
    assert any("acts as valid" in line for line in conventions(result)), result.stderr
