"""``onnx compare`` / ``ir compare`` and ``--input-shape`` on models written by the
frameworks themselves (``torch.onnx.export``, ``openvino.convert_model`` of a torch
module).

Oracles: the torch module that was exported (the shape of every transposed
convolution's output, read by forward hooks) and the peer runtimes (onnxruntime and
OpenVINO, whose outputs the comparison captures).  A comparison that passes says the
library's recomputation of every layer agrees with the runtime; the tests that must
see a mismatch use a layer where onnxruntime departs from the ONNX specification, and
a library result deliberately perturbed in the test process.
"""

import json

import numpy as np
import pytest

import convtranspose as ct
from cli_support import assert_one_line_error, run_cli

pytestmark = pytest.mark.peers


def _net(torch):
    """Groups, dilation, output_padding, a layer without bias, a tensor feeding two
    transposed convolutions and a transposed convolution's output that already is a
    model output."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                               groups=2, dilation=2)
            self.left = torch.nn.ConvTranspose2d(6, 3, 2, stride=2)
            self.right = torch.nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1, bias=False)

        def forward(self, x):
            a = self.up(x)
            r = torch.relu(a)
            return self.left(r) + self.right(r), a

    torch.manual_seed(3)
    return Net().eval()


def _torch_shapes(torch, net, shape) -> dict:
    """Module name -> the output shape torch computes (the oracle of the shapes)."""
    shapes = {}
    hooks = [module.register_forward_hook(
        lambda m, i, o, name=name: shapes.__setitem__(name, list(o.shape)))
        for name, module in net.named_children()]
    with torch.no_grad():
        net(torch.zeros(shape))
    for hook in hooks:
        hook.remove()
    return shapes


@pytest.fixture(scope="module")
def torch_onnx(tmp_path_factory):
    """``torch.onnx.export(dynamo=False)`` of :func:`_net`: one model with a dynamic
    batch, one with dynamic spatial dims too."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    net = _net(torch)
    directory = tmp_path_factory.mktemp("torch_onnx")
    paths = {}
    for variant, axes in (("batch", {0: "batch"}), ("spatial", {0: "n", 2: "h", 3: "w"})):
        path = directory / f"{variant}.onnx"
        torch.onnx.export(net, (torch.zeros(1, 4, 5, 5),), str(path), dynamo=False,
                          input_names=["x"], output_names=["y", "a"],
                          dynamic_axes={"x": axes})
        paths[variant] = path
    return torch, net, paths


def _rows(result) -> dict:
    return {row["source"]: row for row in json.loads(result.stdout)["layers"]}


def test_onnx_compare_torch_export_passes(torch_onnx):
    torch, net, paths = torch_onnx
    result = run_cli("onnx", "compare", paths["batch"], "--input-shape", "x=2,4,5,5", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = _rows(result)
    expected = _torch_shapes(torch, net, (2, 4, 5, 5))
    assert len(rows) == 3
    for row in rows.values():
        module = row["name"].split("/")[1]  # legacy export names nodes /MODULE/ConvTranspose
        assert row["status"] == "pass", row
        assert row["runtime_shape"] == row["library_shape"] == expected[module]
        assert row["max_abs_error"] <= 1e-4 and row["ulp_error"] is not None
    up = next(row for row in rows.values() if row["name"].startswith("/up/"))
    assert up["attributes"]["group"] == 2 and up["attributes"]["dilations"] == [2, 2]
    assert up["attributes"]["output_padding"] == [1, 1]
    table = run_cli("onnx", "compare", paths["batch"], "--input-shape", "x=2,4,5,5")
    assert table.returncode == 0 and "3 of 3" in table.stdout
    assert "ulp" in table.stdout.splitlines()[0]


def test_onnx_compare_uses_the_given_input(torch_onnx, tmp_path):
    torch, net, paths = torch_onnx
    np.save(tmp_path / "x.npy", np.ones((3, 4, 5, 5), np.float32))
    result = run_cli("onnx", "compare", paths["batch"], "--input", f"x={tmp_path / 'x.npy'}",
                     "--json")
    assert result.returncode == 0, result.stderr
    assert {row["data_shape"][0] for row in _rows(result).values()} == {3}


def test_onnx_compare_needs_the_dynamic_dims(torch_onnx):
    _, _, paths = torch_onnx
    assert_one_line_error(run_cli("onnx", "compare", paths["batch"]), "--input-shape x=")
    assert_one_line_error(run_cli("onnx", "compare", paths["batch"], "--input-shape",
                                  "x=1,4,6,5"), "declared 5")
    assert_one_line_error(run_cli("onnx", "compare", paths["batch"], "--input-shape",
                                  "z=1,4,5,5"), "no input 'z'")


def test_onnx_check_of_dynamic_spatial_dims_needs_input_shape(torch_onnx):
    torch, net, paths = torch_onnx
    result = run_cli("onnx", "check", paths["spatial"])
    assert result.returncode == 3, result.stdout + result.stderr
    assert "0 of 3" in result.stdout and "--input-shape" in result.stderr
    result = run_cli("onnx", "check", paths["spatial"], "--input-shape", "x=1,4,7,6", "--json")
    assert result.returncode == 0, result.stderr
    expected = _torch_shapes(torch, net, (1, 4, 7, 6))
    for row in json.loads(result.stdout)["layers"]:
        assert row["status"] == "ok" and row["inferred"] == expected[row["name"].split("/")[1]]


def _single_node_model(onnx, node, x_shape, initializers, metadata=None):
    from onnx import TensorProto, helper

    for key, value in (metadata or {}).items():
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [node] if not isinstance(node, list) else node, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    return model


def test_onnxruntime_departing_from_the_specification_is_a_mismatch(tmp_path):
    """ConvTranspose(strides=[3], SAME_UPPER) of a 1-tap filter on 3 inputs: the ONNX text
    gives output = input * stride = 9 (total pad -2, pads -1/-1); onnxruntime clamps the
    pads and gives 7.  The comparison reports it as a mismatch with the pads note."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    node = helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="ct", strides=[3],
                            auto_pad="SAME_UPPER")
    model = _single_node_model(onnx, node, [1, 1, 3],
                               [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W")])
    path = tmp_path / "same_upper.onnx"
    onnx.save(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    runtime = session.run(None, {"x": np.ones((1, 1, 3), np.float32)})[0]
    result = run_cli("onnx", "compare", path, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    row = json.loads(result.stdout)["layers"][0]
    assert row["status"] == "mismatch"
    assert row["runtime_shape"] == list(runtime.shape) == [1, 1, 7]
    assert row["library_shape"] == [1, 1, 3 * 3]
    assert any("negative pads" in note for note in row["conventions"])
    assert "negative pads" in result.stderr
    # One line per note on stderr, in the format ``check`` uses too.
    lines = result.stderr.splitlines()
    assert any(line.startswith("convtranspose: mismatch: ct: ") for line in lines), lines
    assert any(line.startswith("convtranspose: convention: ct: ") and "negative pads" in line
               for line in lines), lines


def test_a_model_wrong_in_one_layer_fails_exactly_that_layer(tmp_path):
    """Three layers in a chain, the middle one edited to the SAME_UPPER case onnxruntime
    computes against the ONNX text: that layer alone is a mismatch; the one after it is
    computed from the input the runtime gave it and passes."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(6)
    nodes = [helper.make_node("ConvTranspose", ["x", "A"], ["a"], name="first", strides=[2]),
             helper.make_node("ConvTranspose", ["a", "B"], ["b"], name="edited", strides=[3],
                              auto_pad="SAME_UPPER"),
             helper.make_node("ConvTranspose", ["b", "C"], ["y"], name="last", strides=[2])]
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("A", (2, 2, 2)), ("B", (2, 2, 1)), ("C", (2, 1, 3)))]
    model = _single_node_model(onnx, nodes, [1, 2, 3], weights)
    path = tmp_path / "chain.onnx"
    onnx.save(model, str(path))
    result = run_cli("onnx", "compare", path, "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    status = {row["name"]: row["status"] for row in json.loads(result.stdout)["layers"]}
    assert status == {"first": "pass", "edited": "mismatch", "last": "pass"}


def test_weights_computed_at_run_time_and_torch_scopes(tmp_path):
    """W = A + B (two initializers; an Add is not folded as a constant) comes from the
    runtime; a node carrying the name scopes the torch.export-based exporter writes is
    reported under its module's name."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(4)
    halves = [numpy_helper.from_array(rng.standard_normal((2, 3, 3, 3)).astype(np.float32),
                                      name) for name in ("A", "B")]
    nodes = [helper.make_node("Add", ["A", "B"], ["W"], name="add"),
             helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="convolution",
                              strides=[2, 2], pads=[1, 0, 0, 1])]
    scopes = {"pkg.torch.onnx.name_scopes": repr(["", "decoder", "decoder.up", "convolution"])}
    model = _single_node_model(onnx, nodes, [1, 2, 4, 4], halves)
    entry = model.graph.node[1].metadata_props.add()
    entry.key, entry.value = next(iter(scopes.items()))
    path = tmp_path / "runtime_weights.onnx"
    onnx.save(model, str(path))
    result = run_cli("onnx", "compare", path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    row = json.loads(result.stdout)["layers"][0]
    assert row["source"] == "decoder.up" and row["name"] == "convolution"
    assert row["status"] == "pass" and row["runtime_shape"] == [1, 3, 8, 8]


def test_a_perturbed_recomputation_is_a_mismatch(tmp_path, monkeypatch, capsys):
    """The library's result is shifted by 1e-2 in this process only: the comparison must
    see the difference (and measure it) instead of passing."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    from convtranspose import cli

    node = helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="ct", strides=[2])
    weights = np.random.default_rng(5).standard_normal((1, 2, 3)).astype(np.float32)
    model = _single_node_model(onnx, node, [1, 1, 6], [numpy_helper.from_array(weights, "W")])
    path = tmp_path / "one.onnx"
    onnx.save(model, str(path))
    assert cli.main(["onnx", "compare", str(path)]) == 0
    original = ct.onnx_conv_transpose
    monkeypatch.setattr(ct, "onnx_conv_transpose", lambda *a, **k: original(*a, **k) + 1e-2)
    capsys.readouterr()
    assert cli.main(["onnx", "compare", str(path), "--json"]) == 1
    row = json.loads(capsys.readouterr().out)["layers"][0]
    assert row["status"] == "mismatch" and row["max_abs_error"] == pytest.approx(1e-2, rel=1e-3)
    assert cli.main(["onnx", "compare", str(path), "--atol", "0.1"]) == 0


def test_nothing_to_compare(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import helper

    # A dynamic input: with nothing to compare, no input is asked for (nor made).
    model = _single_node_model(onnx, helper.make_node("Relu", ["x"], ["y"]), ["n", 2], [])
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    result = run_cli("onnx", "compare", path)
    assert result.returncode == 3, result.stderr
    assert "nothing compared: relu.onnx has no transposed convolution" in result.stderr


@pytest.fixture(scope="module")
def torch_ir(tmp_path_factory):
    """``openvino.convert_model`` of :func:`_net` saved with ``save_model``: static input
    dims, and dynamic batch and spatial dims."""
    torch = pytest.importorskip("torch")
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    net = _net(torch)
    directory = tmp_path_factory.mktemp("torch_ir")
    paths = {}
    for variant, shape in (("static", [1, 4, 5, 5]), ("dynamic", [-1, 4, -1, -1])):
        model = ov.convert_model(net, example_input=torch.zeros(1, 4, 5, 5),
                                 input=[ov.PartialShape(shape)])
        paths[variant] = directory / f"{variant}.xml"
        ov.save_model(model, str(paths[variant]))
    return torch, net, paths


def test_ir_compare_passes(torch_ir):
    torch, net, paths = torch_ir
    runs = {"static": run_cli("ir", "compare", paths["static"], "--json"),
            "dynamic": run_cli("ir", "compare", paths["dynamic"], "--input-shape", "x=2,4,6,5",
                               "--json")}
    for variant, shape in (("static", (1, 4, 5, 5)), ("dynamic", (2, 4, 6, 5))):
        result = runs[variant]
        assert result.returncode == 0, result.stdout + result.stderr
        rows = _rows(result)
        expected = _torch_shapes(torch, net, shape)
        assert set(rows) == set(expected)  # the torch module names, from the IR's names
        for name, row in rows.items():
            assert row["status"] == "pass", row
            assert row["runtime_shape"] == row["library_shape"] == expected[name]
        assert rows["up"]["attributes"]["groups"] == 2
    assert_one_line_error(run_cli("ir", "compare", paths["dynamic"]), "--input-shape x=")


def test_ir_check_of_dynamic_dims_needs_input_shape(torch_ir):
    torch, net, paths = torch_ir
    result = run_cli("ir", "check", paths["dynamic"])
    assert result.returncode == 3, result.stdout + result.stderr
    assert "0 transposed-convolution layers checked: 3 have dynamic shapes" in result.stderr
    result = run_cli("ir", "check", paths["dynamic"], "--input-shape", "x=1,4,7,6", "--json")
    assert result.returncode == 0, result.stderr
    expected = _torch_shapes(torch, net, (1, 4, 7, 6))
    rows = json.loads(result.stdout)["layers"]
    assert len(rows) == 3
    for row in rows:
        module = row["name"].split("/")[0].removeprefix("__module.")
        assert row["status"] == "ok" and row["inferred"] == expected[module], row
    assert_one_line_error(run_cli("ir", "check", paths["dynamic"], "--input-shape",
                                  "x=1,3,7,6"), "declared 4")


def test_tune_takes_input_shape(torch_onnx):
    torch, net, paths = torch_onnx
    result = run_cli("tune", paths["spatial"], "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["layers"]
    assert all("--input-shape" in row["skipped"] for row in rows), rows
    result = run_cli("tune", paths["spatial"], "--input-shape", "x=1,4,7,6", "--json")
    assert result.returncode == 0, result.stderr
    expected = _torch_shapes(torch, net, (1, 4, 7, 6))
    inputs = {"up": [1, 4, 7, 6], "left": expected["up"], "right": expected["up"]}
    for row in json.loads(result.stdout)["layers"]:
        assert "skipped" not in row, row
        assert row["data_shape"] == inputs[row["layer"].split("/")[1]]


def test_compare_with_external_data(torch_onnx, tmp_path):
    """Weights stored beside the model (external data) are read by the model's own bounded
    reader into the copy the runtime runs."""
    onnx = pytest.importorskip("onnx")
    _, _, paths = torch_onnx
    model = onnx.load(str(paths["batch"]))
    onnx.save(model, str(tmp_path / "external.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").stat().st_size > 0
    result = run_cli("onnx", "compare", tmp_path / "external.onnx", "--input-shape",
                     "x=1,4,5,5", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [row["status"] for row in json.loads(result.stdout)["layers"]] == ["pass"] * 3


def test_a_node_inside_a_subgraph_is_not_compared(tmp_path):
    """A ConvTranspose in an If branch: its tensors cannot be model outputs, so it is
    listed as not compared, and a model with nothing else compares nothing (exit 3)."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.ones((1, 1, 2), np.float32), "W")
    branch = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "W"], ["inner"], name="up", strides=[2])],
        "then", [], [helper.make_tensor_value_info("inner", TensorProto.FLOAT, None)])
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"])], "else", [],
        [helper.make_tensor_value_info("same", TensorProto.FLOAT, None)])
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("If", ["cond"], ["y"], name="choose", then_branch=branch,
                            else_branch=other)
    model = _single_node_model(onnx, node, [1, 1, 3], [weights, cond])
    path = tmp_path / "branch.onnx"
    onnx.save(model, str(path))
    result = run_cli("onnx", "compare", path, "--json")
    assert result.returncode == 3, result.stdout + result.stderr
    row = json.loads(result.stdout)["layers"][0]
    assert row["name"] == "choose/then_branch/up" and row["status"] == "not compared"
    assert "subgraph" in row["notes"][0]


def test_the_error_measures_by_hand():
    from convtranspose.interop.compare import measure, tolerances

    reference = np.array([1.0, 0.0, -2.0], np.float32)
    computed = np.array([np.nextafter(np.float32(1), np.float32(2)), 1e-6, -2.0], np.float32)
    errors = measure(reference, computed, atol=1e-4, rtol=1e-4)
    one_ulp_at_one = 2.0 ** -23
    assert errors["max_abs"] == float(np.float32(1e-6))  # |1e-6 - 0| beats 2**-23
    assert errors["max_rel"] == pytest.approx(float(np.float32(1e-6)) / 1e-4)  # |ref| < atol
    assert errors["ulp"] == pytest.approx(float(np.float32(1e-6)) / (2 * one_ulp_at_one))
    assert errors["passed"]
    assert not measure(reference, computed, atol=1e-7, rtol=1e-4)["passed"]
    same_nan = measure(np.array([np.nan, 1], np.float32), np.array([np.nan, 1], np.float32),
                       1e-4, 1e-4)
    assert same_nan["passed"] and same_nan["max_abs"] == 0
    one_nan = measure(np.array([np.nan, 1], np.float32), np.array([0, 1], np.float32),
                      1e-4, 1e-4)
    assert not one_nan["passed"] and one_nan["max_abs"] == np.inf
    assert tolerances(np.float16) == (1e-2, 1e-2) and tolerances(np.float32, 1e-3) == (1e-3, 1e-4)


def test_zero_tolerance_and_non_finite_errors_stay_numbers():
    from convtranspose.interop.compare import LayerComparison, measure

    zero = measure(np.zeros(2, np.float32), np.array([0, 1e-3], np.float32), atol=0, rtol=0)
    assert zero["max_rel"] == np.inf and not zero["passed"]
    row = LayerComparison("n", "n", "ConvTranspose", max_abs=np.inf, max_rel=0.5)
    text = json.dumps(row.to_dict(), allow_nan=False)  # strict JSON
    assert json.loads(text)["max_abs_error"] == "inf"


def test_onnx_compare_dynamo_export(tmp_path):
    """The torch.export-based exporter (it needs onnxscript) records each node's module
    scopes; the comparison names the layers by their modules."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    net = _net(torch)
    path = tmp_path / "dynamo.onnx"
    torch.onnx.export(net, (torch.zeros(1, 4, 5, 5),), str(path), dynamo=True)
    result = run_cli("onnx", "compare", path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = _rows(result)
    expected = _torch_shapes(torch, net, (1, 4, 5, 5))
    assert set(rows) == set(expected)
    for name, row in rows.items():
        assert row["status"] == "pass" and row["runtime_shape"] == expected[name], row


def test_ir_weights_and_output_shape_computed_at_run_time(tmp_path):
    """The filter is a model input and the output_shape a ShapeOf-free Parameter's sum:
    neither is in the .bin, so both are captured from OpenVINO."""
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import openvino.opset1 as ops
    from openvino.utils.node_factory import NodeFactory

    data = ops.parameter([1, 3, 4, 4], np.float32, name="x")
    filter_ = ops.parameter([3, 2, 3, 3], np.float32, name="w")
    size = ops.add(ops.constant(np.array([8, 7], np.int64)), ops.constant(np.array([1, 1],
                                                                                  np.int64)))
    node = NodeFactory("opset1").create(
        "ConvolutionBackpropData", [data.output(0), filter_.output(0), size.output(0)],
        dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1],
             auto_pad="same_upper", output_padding=[0, 0]))
    node.friendly_name = "up"
    xml = tmp_path / "runtime_inputs.xml"
    ov.save_model(ov.Model([node.output(0)], [data, filter_], "m"), str(xml))
    result = run_cli("ir", "compare", xml, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    row = json.loads(result.stdout)["layers"][0]
    assert row["status"] == "pass" and row["runtime_shape"] == [1, 2, 9, 8], row
