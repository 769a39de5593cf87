"""``onnx check`` shows every attribute of each node and the PyTorch module it came from.

Oracle: the attributes written into models built with ``onnx.helper`` (with the ONNX
defaults for those left out: dilations and group 1, output_padding 0, auto_pad NOTSET,
kernel_shape from W), the ``pkg.torch.onnx.name_scopes`` metadata set on a node the way
``torch.onnx.export(dynamo=True)`` writes it, and the arguments of a real
``torch.nn.ConvTranspose2d`` exported by ``torch.onnx.export``.
"""

import json

import numpy as np
import pytest

from cli_support import run_cli

onnx = pytest.importorskip("onnx")

pytestmark = pytest.mark.peers

SCOPES = "['', 'decoder', 'decoder.up', 'convolution']"


def _model(path, declared=(1, 6, 10, 10), scopes=SCOPES):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    up = helper.make_node("ConvTranspose", ["x", "W1"], ["y"], name="node_convolution_1",
                          strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1], group=2,
                          dilations=[1, 2])
    if scopes is not None:
        up.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=scopes)
    same = helper.make_node("ConvTranspose", ["y", "W2"], ["z"], name="plain",
                            strides=[3, 1], auto_pad="SAME_UPPER")
    graph = helper.make_graph(
        [up, same], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(declared)),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W1"),
         numpy_helper.from_array(rng.standard_normal((6, 2, 2, 4)).astype(np.float32), "W2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_check_json_has_every_attribute_and_the_torch_module(tmp_path):
    # up: Y = (5-1)*2 - 2 + (3-1)*d + 1 + 1 per axis: 10 (d=1) and 12 (d=2)
    result = run_cli("onnx", "check", _model(tmp_path / "m.onnx", (1, 6, 10, 12)), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["layers"]}
    assert rows["node_convolution_1"]["attributes"] == dict(
        kernel_shape=[3, 3], strides=[2, 2], dilations=[1, 2], groups=2,
        output_padding=[1, 1], auto_pad="notset")
    assert rows["node_convolution_1"]["module"] == "decoder.up"
    assert rows["plain"]["attributes"] == dict(
        kernel_shape=[2, 4], strides=[3, 1], dilations=[1, 1], groups=1,
        output_padding=[0, 0], auto_pad="same_upper")
    assert rows["plain"]["module"] is None
    table = run_cli("onnx", "check", tmp_path / "m.onnx")
    lines = {line.split()[0]: line for line in table.stdout.splitlines() if line}
    assert "node_convolution_1 (decoder.up)" in lines["node_convolution_1"]
    assert "k3x3 s2 d1x2 g2 op1 notset" in lines["node_convolution_1"]
    assert "k2x4 s3x1 d1 g1 op0 same_upper" in lines["plain"]


def test_a_mismatched_row_says_why_in_the_table(tmp_path):
    result = run_cli("onnx", "check", _model(tmp_path / "m.onnx", (1, 6, 10, 11)))
    assert result.returncode == 1
    row = [line for line in result.stdout.splitlines() if line.startswith("node_convolution_1")]
    assert row and row[0].endswith("MISMATCH: declared output differs from the inferred"), row
    assert "[1,6,10,11]" in row[0] and "[1,6,10,12]" in row[0]


@pytest.mark.parametrize("scopes", ["not a list", "['', 'a', 3]", "__import__('os')"])
def test_a_malformed_name_scope_is_no_module(tmp_path, scopes):
    result = run_cli("onnx", "check", _model(tmp_path / "m.onnx", (1, 6, 10, 12), scopes),
                     "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["layers"][0]["module"] is None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the TorchScript exporter
def test_a_torch_export_shows_the_module_arguments(tmp_path):
    torch = pytest.importorskip("torch")
    layer = torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=1,
                                     output_padding=(1, 0), groups=2, dilation=(1, 2))
    module = torch.nn.Sequential(torch.nn.Identity(), layer)
    path = tmp_path / "t.onnx"
    dynamo = _has("onnxscript")
    torch.onnx.export(module, (torch.ones(1, 4, 5, 5),), str(path), dynamo=dynamo)
    result = run_cli("onnx", "check", path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["layers"]
    assert row["attributes"] == dict(
        kernel_shape=list(layer.kernel_size), strides=list(layer.stride),
        dilations=list(layer.dilation), groups=layer.groups,
        output_padding=list(layer.output_padding), auto_pad="notset")
    assert row["pads_begin"] == row["pads_end"] == list(layer.padding)
    if dynamo:  # only the dynamo exporter records the module path
        assert row["module"] == "1"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
