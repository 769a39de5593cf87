"""``onnx check`` / ``onnx run`` beyond the main graph and beyond plain initializers.

Models built with ``onnx.helper``: ConvTranspose nodes inside ``If`` branches, ``Loop``
and ``Scan`` bodies and a model-local function, and weights that reach a node through
``DequantizeLinear``, ``Cast`` and ``Reshape``.  Oracle: onnxruntime runs each whole
model, and its outputs are both the declared shapes checked against and the values
``onnx run`` must equal.
"""

import json

import numpy as np
import pytest

from cli_support import assert_one_line_error, run_cli

pytestmark = pytest.mark.peers

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

X_SHAPE = (1, 4, 5, 5)
RNG = np.random.default_rng(31)
X = RNG.standard_normal(X_SHAPE).astype(np.float32)
# The weights of the subgraph and function models (each model is built twice: once for
# onnxruntime's outputs, once declaring their shapes).
WEIGHTS = {name: RNG.standard_normal(shape).astype(np.float32) for name, shape in (
    ("w", (4, 2, 3, 3)), ("w_else", (4, 3, 2, 2)), ("w_loop", (4, 1, 2, 3)),
    ("w1", (4, 2, 3, 3)), ("w2", (4, 2, 2, 2)))}


def _model(graph, functions=(), opset=21):
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid("local", 1)] * bool(functions)
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = 10
    return model


def _onnxruntime(model, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def _info(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _save(model, directory, name):
    path = directory / name
    onnx.save(model, str(path))
    return path


def _run(path, node, data, tmp_path, *extra):
    np.save(tmp_path / "x.npy", data)
    result = run_cli("onnx", "run", path, "--node", node, "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy", *extra)
    assert result.returncode == 0, result.stderr
    return np.load(tmp_path / "y.npy"), result


def _close(actual, expected):
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


# -- weights through DequantizeLinear, Cast and Reshape ---------------------------------

def _quantized_model():
    """Three ConvTranspose nodes on X whose W and B are computed from constants."""
    w_int8 = RNG.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    w_flat = RNG.integers(0, 256, 4 * 2 * 2 * 2, dtype=np.uint8)
    w_block = RNG.integers(-8, 8, (4, 2, 3, 3), dtype=np.int8)
    tensors = {
        "w_q": w_int8,                                                    # per-axis (axis 1)
        "w_scale": np.array([0.02, 0.05, 0.01], np.float32),
        "w_zero": np.array([3, -2, 0], np.int8),
        "b_half": RNG.standard_normal(3).astype(np.float16),              # Cast to float32
        "flat_q": w_flat,                                                 # per tensor, then
        "flat_scale": np.array(0.03, np.float32),                         # Reshape
        "flat_zero": np.array(128, np.uint8),
        "block_q": w_block,                                               # per block of 2
        "block_scale": RNG.uniform(0.01, 0.1, (2, 2, 3, 3)).astype(np.float32),  # on axis 0
    }
    initializers = [numpy_helper.from_array(value, name) for name, value in tensors.items()]
    shape = helper.make_node("Constant", [], ["shape"], name="shape",
                             value=numpy_helper.from_array(np.array([4, -1, 2, 2], np.int64)))
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"], axis=1,
                         name="dq_axis"),
        helper.make_node("Cast", ["b_half"], ["b"], to=TensorProto.FLOAT, name="cast_bias"),
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["y_axis"], name="ct_axis",
                         strides=[2, 2], pads=[1, 1, 0, 0]),
        shape,
        helper.make_node("DequantizeLinear", ["flat_q", "flat_scale", "flat_zero"], ["flat"],
                         name="dq_tensor"),
        helper.make_node("Reshape", ["flat", "shape"], ["w_reshaped"], name="reshape"),
        helper.make_node("ConvTranspose", ["x", "w_reshaped"], ["y_reshaped"], name="ct_reshaped",
                         group=2, strides=[3, 3]),
        helper.make_node("DequantizeLinear", ["block_q", "block_scale"], ["w_block"], axis=0,
                         block_size=2, name="dq_block"),
        helper.make_node("ConvTranspose", ["x", "w_block"], ["y_block"], name="ct_block",
                         dilations=[2, 1]),
    ]
    graph = helper.make_graph(nodes, "quantized", [_info("x", X_SHAPE)],
                              [_info(name, None) for name in ("y_axis", "y_reshaped", "y_block")],
                              initializer=initializers)
    return _model(graph)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    model = _quantized_model()
    expected = _onnxruntime(model, {"x": X})
    # The declared output shapes are the ones onnxruntime produced.
    del model.graph.output[:]
    model.graph.output.extend(_info(name, list(value.shape)) for name, value in expected.items())
    return _save(model, tmp_path_factory.mktemp("quantized"), "quantized.onnx"), expected


@pytest.mark.parametrize("node, output, followed", [
    ("ct_axis", "y_axis", ["DequantizeLinear of int8", "Cast from float16 to float32"]),
    ("ct_reshaped", "y_reshaped", ["DequantizeLinear of uint8", "Reshape from [32] to [4, 2, 2, 2]"]),
    ("ct_block", "y_block", ["DequantizeLinear of int8 [4, 2, 3, 3]"]),
])
def test_run_follows_dequantize_cast_and_reshape(quantized, tmp_path, node, output, followed):
    path, expected = quantized
    actual, result = _run(path, node, X, tmp_path)
    _close(actual, expected[output])
    for fragment in followed:
        assert fragment in result.stderr, result.stderr


def test_check_passes_on_the_quantized_model(quantized):
    path, _ = quantized
    result = run_cli("onnx", "check", path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(result.stdout)["layers"]
    assert [row["name"] for row in rows] == ["ct_axis", "ct_reshaped", "ct_block"]
    assert all(row["status"] == "ok" for row in rows), rows


def test_weights_computed_at_run_time_are_a_one_line_error(tmp_path):
    weights = numpy_helper.from_array(np.ones((4, 2, 2, 2), np.float32), "w0")
    nodes = [helper.make_node("Relu", ["w0"], ["w"], name="relu"),
             helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct")]
    graph = helper.make_graph(nodes, "g", [_info("x", X_SHAPE)], [_info("y", None)],
                              initializer=[weights])
    path = _save(_model(graph), tmp_path, "relu.onnx")
    np.save(tmp_path / "x.npy", X)
    result = run_cli("onnx", "run", path, "--node", "ct", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "computed by Relu node 'relu'", "DequantizeLinear")
    assert not (tmp_path / "y.npy").exists()


# -- subgraphs: If, Loop, Scan ----------------------------------------------------------

def _conv(name, source, weights, output, **attributes):
    return helper.make_node("ConvTranspose", [source, weights], [output], name=name,
                            **attributes)


def _subgraph_model(declared):
    """``If`` (each branch a ConvTranspose of the outer x, one with the outer W and one
    with its own), ``Loop`` (one iteration, a ConvTranspose in the body) and ``Scan`` (a
    ConvTranspose of each slice of a [1, ...] input).  ``declared`` maps each subgraph
    output to its declared shape."""
    outer_w = numpy_helper.from_array(WEIGHTS["w"], "w")
    else_w = numpy_helper.from_array(WEIGHTS["w_else"], "w_else")
    loop_w = numpy_helper.from_array(WEIGHTS["w_loop"], "w_loop")
    then_branch = helper.make_graph([_conv("ct_then", "x", "w", "then_y", strides=[2, 2])],
                                    "then", [], [_info("then_y", declared["then_y"])])
    else_branch = helper.make_graph([_conv("ct_else", "x", "w_else", "else_y", strides=[1, 2],
                                           auto_pad="SAME_UPPER")],
                                    "else", [], [_info("else_y", declared["else_y"])],
                                    initializer=[else_w])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         _conv("ct_loop", "x", "w_loop", "loop_y", pads=[0, 1, 1, 0])],
        "body", [_info("i", [], TensorProto.INT64), _info("cond_in", [], TensorProto.BOOL)],
        [_info("cond_out", [], TensorProto.BOOL), _info("loop_y", declared["loop_y"])],
        initializer=[loop_w])
    scan_body = helper.make_graph(
        [_conv("ct_scan", "slice", "w", "scan_y", output_padding=[1, 0], strides=[2, 2])],
        "scan_body", [_info("slice", list(X_SHAPE))], [_info("scan_y", declared["scan_y"])])
    trip = numpy_helper.from_array(np.array(1, np.int64), "trip")
    yes = numpy_helper.from_array(np.array(True), "yes")
    nodes = [
        helper.make_node("If", ["cond"], ["if_y"], name="choose", then_branch=then_branch,
                         else_branch=else_branch),
        helper.make_node("Loop", ["trip", "yes"], ["loop_ys"], name="repeat", body=body),
        helper.make_node("Unsqueeze", ["x", "zero"], ["xs"], name="stack"),
        helper.make_node("Scan", ["xs"], ["scan_ys"], name="each", body=scan_body,
                         num_scan_inputs=1),
    ]
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    graph = helper.make_graph(nodes, "subgraphs",
                              [_info("x", X_SHAPE), _info("cond", [], TensorProto.BOOL)],
                              [_info("if_y", None), _info("loop_ys", None),
                               _info("scan_ys", None)],
                              initializer=[outer_w, trip, yes, zero])
    return _model(graph)


@pytest.fixture(scope="module")
def subgraphs(tmp_path_factory):
    """(model path, {node label: onnxruntime's output}, declared shapes)."""
    undeclared = {name: None for name in ("then_y", "else_y", "loop_y", "scan_y")}
    probe = _subgraph_model(undeclared)
    taken = _onnxruntime(probe, {"x": X, "cond": np.array(True)})
    skipped = _onnxruntime(probe, {"x": X, "cond": np.array(False)})
    values = {"choose/then_branch/ct_then": taken["if_y"],
              "choose/else_branch/ct_else": skipped["if_y"],
              "repeat/body/ct_loop": taken["loop_ys"][0],
              "each/body/ct_scan": taken["scan_ys"][0]}
    declared = {"then_y": list(taken["if_y"].shape), "else_y": list(skipped["if_y"].shape),
                "loop_y": list(taken["loop_ys"].shape[1:]),
                "scan_y": list(taken["scan_ys"].shape[1:])}
    directory = tmp_path_factory.mktemp("subgraphs")
    return _save(_subgraph_model(declared), directory, "subgraphs.onnx"), values, declared


def test_check_finds_and_checks_the_nodes_of_every_subgraph(subgraphs):
    path, values, _ = subgraphs
    result = run_cli("onnx", "check", path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["layers"]}
    assert set(rows) == set(values)
    for name, row in rows.items():
        assert row["status"] == "ok", row
        assert row["inferred"] == list(values[name].shape)


def test_check_reports_a_wrong_shape_declared_inside_a_subgraph(subgraphs, tmp_path):
    _, values, declared = subgraphs
    edited = dict(declared, loop_y=declared["loop_y"][:3] + [declared["loop_y"][3] + 2])
    path = _save(_subgraph_model(edited), tmp_path, "edited.onnx")
    result = run_cli("onnx", "check", path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout
    mismatches = [line for line in result.stderr.splitlines() if line.startswith(
        "convtranspose: mismatch")]
    assert len(mismatches) == 1 and "repeat/body/ct_loop" in mismatches[0], result.stderr


@pytest.mark.parametrize("node", ["choose/then_branch/ct_then", "choose/else_branch/ct_else",
                                  "repeat/body/ct_loop", "each/body/ct_scan"])
def test_run_a_node_inside_a_subgraph(subgraphs, tmp_path, node):
    path, values, _ = subgraphs
    data = X.reshape(X_SHAPE)
    actual, _ = _run(path, node, data, tmp_path)
    _close(actual, values[node])


# -- model-local functions --------------------------------------------------------------

def _function_model(declared_y):
    """``local.Up(x, w)``: a ConvTranspose with the call's ``s`` as strides and a bias
    from a Constant in the body; called twice with different strides and weights."""
    bias = helper.make_node("Constant", [], ["bias"], name="bias",
                            value=numpy_helper.from_array(np.array([0.5, -1.0], np.float32)))
    strides = helper.make_attribute_ref("strides", onnx.AttributeProto.INTS, ref_attr_name="s")
    inner = helper.make_node("ConvTranspose", ["fx", "fw", "bias"], ["fy"], name="ct_fn")
    inner.attribute.append(strides)
    function = helper.make_function("local", "Up", ["fx", "fw"], ["fy"], [bias, inner],
                                    [helper.make_opsetid("", 21)], attributes=["s"])
    w1 = numpy_helper.from_array(WEIGHTS["w1"], "w1")
    w2 = numpy_helper.from_array(WEIGHTS["w2"], "w2")
    calls = [helper.make_node("Up", ["x", "w1"], ["y1"], name="up2", domain="local", s=[2, 2]),
             helper.make_node("Up", ["x", "w2"], ["y2"], name="up3", domain="local", s=[3, 1])]
    graph = helper.make_graph(calls, "functions", [_info("x", X_SHAPE)],
                              [_info("y1", declared_y[0]), _info("y2", declared_y[1])],
                              initializer=[w1, w2])
    return _model(graph, [function])


@pytest.fixture(scope="module")
def functions(tmp_path_factory):
    expected = _onnxruntime(_function_model([None, None]), {"x": X})
    declared = [list(expected["y1"].shape), list(expected["y2"].shape)]
    path = _save(_function_model(declared), tmp_path_factory.mktemp("functions"), "fn.onnx")
    return path, {"up2/local.Up/ct_fn": expected["y1"], "up3/local.Up/ct_fn": expected["y2"]}


def test_check_follows_each_call_of_a_local_function(functions, tmp_path):
    path, values = functions
    result = run_cli("onnx", "check", path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["layers"]}
    assert set(rows) == set(values)
    for name, row in rows.items():
        assert row["status"] == "ok" and row["inferred"] == list(values[name].shape), row
    wrong = _function_model([list(values["up2/local.Up/ct_fn"].shape),
                             [1, 2, 13, 5]])  # onnxruntime: [1, 2, 14, 6]
    assert list(values["up3/local.Up/ct_fn"].shape) == [1, 2, 14, 6]
    result = run_cli("onnx", "check", _save(wrong, tmp_path, "wrong.onnx"))
    assert result.returncode == 1 and "up3/local.Up/ct_fn" in result.stderr, result.stderr


@pytest.mark.parametrize("node", ["up2/local.Up/ct_fn", "up3/local.Up/ct_fn"])
def test_run_a_node_inside_a_local_function(functions, tmp_path, node):
    path, values = functions
    actual, _ = _run(path, node, X, tmp_path)
    _close(actual, values[node])
