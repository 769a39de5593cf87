"""``convtranspose onnx check`` / ``onnx run`` on models built with ``onnx.helper``.

Oracle: onnxruntime.  The declared output shapes written into the models are the
shapes onnxruntime actually produced, and ``onnx run`` must equal its values.
"""

import json

import numpy as np
import pytest

from cli_support import assert_one_line_error, run_cli

pytestmark = pytest.mark.peers

# name -> (input, W shape, with bias, attributes); every node's W and B are initializers.
NODES = {
    "ct_explicit": ("x", (4, 6, 3, 3), True,
                    dict(strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])),
    "ct_same_upper_grouped": ("ct_explicit_out", (6, 2, 3, 3), False,
                              dict(strides=[2, 2], auto_pad="SAME_UPPER", group=3)),
    "ct_output_shape": ("ct_same_upper_grouped_out", (6, 1, 2, 2), True,
                        dict(strides=[2, 2], dilations=[2, 1], output_shape=[44, 47])),
    "ct_1d_valid": ("y", (3, 2, 4), True, dict(strides=[3], auto_pad="VALID",
                                               kernel_shape=[4])),
}
INPUTS = {"x": (2, 4, 5, 6), "y": (1, 3, 7)}


def _build(onnx, declared_shapes, rng_seed=11, declare_as="output"):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(rng_seed)
    nodes, initializers = [], []
    for name, (source, w_shape, with_bias, attributes) in NODES.items():
        inputs = [source, f"{name}_W"]
        initializers.append(numpy_helper.from_array(
            rng.standard_normal(w_shape).astype(np.float32), f"{name}_W"))
        if with_bias:
            channels = w_shape[1] * attributes.get("group", 1)
            initializers.append(numpy_helper.from_array(
                rng.standard_normal(channels).astype(np.float32), f"{name}_B"))
            inputs.append(f"{name}_B")
        nodes.append(helper.make_node("ConvTranspose", inputs, [f"{name}_out"], name=name,
                                      **attributes))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in INPUTS.items()]
    infos = [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT,
                                           declared_shapes.get(name)) for name in NODES]
    if declare_as == "output":
        outputs, value_info = infos, []
    else:  # intermediates declared in value_info, only the last outputs as graph outputs
        outputs = [i for i in infos if i.name in ("ct_output_shape_out", "ct_1d_valid_out")]
        value_info = [i for i in infos if i not in outputs]
    graph = helper.make_graph(nodes, "transposed", inputs, outputs, initializer=initializers,
                              value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    return model


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory):
    """(path of the model declaring onnxruntime's shapes, {tensor: value from onnxruntime})."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(5)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in INPUTS.items()}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    probe = _build(onnx, {})
    session = ort.InferenceSession(probe.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    values = dict(feeds)
    for name, value in zip(NODES, session.run([f"{n}_out" for n in NODES], feeds)):
        values[name] = value
    values.update({f"{name}_out": values[name] for name in NODES})
    shapes = {name: list(values[name].shape) for name in NODES}
    directory = tmp_path_factory.mktemp("onnx")
    paths = {}
    for declare_as in ("output", "value_info"):
        path = directory / f"declared_in_{declare_as}.onnx"
        onnx.save(_build(onnx, shapes, declare_as=declare_as), str(path))
        paths[declare_as] = path
    return paths, values, shapes


@pytest.mark.parametrize("declare_as", ["output", "value_info"])
def test_onnx_check_passes(onnx_models, declare_as):
    paths, values, shapes = onnx_models
    result = run_cli("onnx", "check", paths[declare_as], "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["layers"]}
    assert set(rows) == set(NODES)
    for name, row in rows.items():
        assert row["status"] == "ok", row
        assert row["inferred"] == shapes[name]
    assert rows["ct_explicit"]["pads_begin"] == [1, 0] and rows["ct_explicit"]["pads_end"] == [0, 1]
    table = run_cli("onnx", "check", paths[declare_as])
    assert all(name in table.stdout for name in NODES)


@pytest.mark.parametrize("node", list(NODES))
def test_onnx_run_equals_onnxruntime(onnx_models, node, tmp_path):
    paths, values, _ = onnx_models
    np.save(tmp_path / "x.npy", values[NODES[node][0]])
    result = run_cli("onnx", "run", paths["value_info"], "--node", node, "--data",
                     tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    output = np.load(tmp_path / "y.npy")
    expected = values[node]
    assert output.shape == expected.shape and output.dtype == np.float32
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-5 * scale)


def test_onnx_check_reports_an_edited_declared_shape(onnx_models, tmp_path):
    onnx = pytest.importorskip("onnx")
    _, _, shapes = onnx_models
    edited = dict(shapes)
    edited["ct_same_upper_grouped"] = shapes["ct_same_upper_grouped"][:3] + [
        shapes["ct_same_upper_grouped"][3] + 1]
    path = tmp_path / "edited.onnx"
    onnx.save(_build(onnx, edited, declare_as="value_info"), str(path))
    result = run_cli("onnx", "check", path)
    assert result.returncode == 1
    declared = "[" + ",".join(map(str, edited["ct_same_upper_grouped"])) + "]"
    inferred = "[" + ",".join(map(str, shapes["ct_same_upper_grouped"])) + "]"
    lines = [line for line in result.stderr.splitlines() if "ct_same_upper_grouped" in line]
    assert lines and declared in lines[0] and inferred in lines[0], result.stderr


def test_onnx_check_without_declared_intermediate_shapes(onnx_models, tmp_path):
    """Undeclared inputs come from ONNX shape inference; undeclared outputs are a note."""
    onnx = pytest.importorskip("onnx")
    _, _, shapes = onnx_models
    path = tmp_path / "bare.onnx"
    onnx.save(_build(onnx, {"ct_output_shape": shapes["ct_output_shape"]}), str(path))
    result = run_cli("onnx", "check", path, "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["layers"]}
    assert rows["ct_output_shape"]["status"] == "ok"
    assert rows["ct_output_shape"]["inferred"] == shapes["ct_output_shape"]
    assert "declares no shape" in result.stderr


def test_onnx_run_unknown_node(onnx_models, tmp_path):
    paths, values, _ = onnx_models
    np.save(tmp_path / "x.npy", values["x"])
    result = run_cli("onnx", "run", paths["output"], "--node", "nope", "--data",
                     tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "no ConvTranspose node named 'nope'", "ct_explicit")
    assert not (tmp_path / "y.npy").exists()


def _random_node(rng):
    """Random ConvTranspose attributes avoiding onnxruntime's documented divergences
    (SAME_* with K' + output_padding < stride; output_shape beyond the full size)."""
    rank = int(rng.integers(1, 4))
    group = int(rng.integers(1, 4))
    c_in, c_out = group * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    x = [int(v) for v in rng.integers(1, 6, rank)]
    k = [int(v) for v in rng.integers(1, 4, rank)]
    s = [int(v) for v in rng.integers(1, 4, rank)]
    d = [int(v) for v in rng.integers(1, 3, rank)]
    op = [int(rng.integers(0, sv)) for sv in s]
    auto_pad = str(rng.choice(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    dilated = [(kv - 1) * dv + 1 for kv, dv in zip(k, d)]
    if auto_pad.startswith("SAME"):
        s = [min(sv, kd) for sv, kd in zip(s, dilated)]
        op = [0] * rank
    full = [(xv - 1) * sv + kd for xv, sv, kd in zip(x, s, dilated)]
    attributes = dict(strides=s, dilations=d, group=group, auto_pad=auto_pad)
    if any(op):
        attributes["output_padding"] = op
    if auto_pad == "NOTSET":
        if rng.integers(0, 2):
            attributes["output_shape"] = [max(1, f + o - int(rng.integers(0, 3)))
                                          for f, o in zip(full, op)]
        else:
            pads = [int(v) for v in rng.integers(0, 2, 2 * rank)]
            if all(f + o - a - b > 0 for f, o, a, b in zip(full, op, pads[:rank], pads[rank:])):
                attributes["pads"] = pads
    return [2, c_in] + x, [c_in, c_out] + k, bool(rng.integers(0, 2)), attributes


def test_random_nodes_match_onnxruntime(tmp_path, peer_examples):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from convtranspose.interop import onnx_model

    rng = np.random.default_rng(2027)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    nodes, initializers, inputs, outputs, cases = [], [], [], [], []
    for index in range(max(10, peer_examples // 10)):
        x_shape, w_shape, with_bias, attributes = _random_node(rng)
        names = [f"x{index}", f"W{index}"]
        weights = [numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32),
                                           f"W{index}")]
        if with_bias:
            weights.append(numpy_helper.from_array(
                rng.standard_normal(w_shape[1] * attributes["group"]).astype(np.float32),
                f"B{index}"))
            names.append(f"B{index}")
        node = helper.make_node("ConvTranspose", names, [f"y{index}"], name=f"node{index}",
                                **attributes)
        x_info = helper.make_tensor_value_info(f"x{index}", TensorProto.FLOAT, x_shape)
        single = helper.make_model(
            helper.make_graph([node], "one", [x_info],
                              [helper.make_tensor_value_info(f"y{index}", TensorProto.FLOAT, None)],
                              initializer=weights),
            opset_imports=[helper.make_opsetid("", 22)])
        single.ir_version = 10
        session = ort.InferenceSession(single.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        data = rng.standard_normal(x_shape).astype(np.float32)
        expected = session.run(None, {f"x{index}": data})[0]
        nodes.append(node)
        initializers += weights
        inputs.append(x_info)
        outputs.append(helper.make_tensor_value_info(f"y{index}", TensorProto.FLOAT,
                                                     list(expected.shape)))
        cases.append((f"node{index}", data, expected))
    model = helper.make_model(helper.make_graph(nodes, "random", inputs, outputs,
                                                initializer=initializers),
                              opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    path = tmp_path / "random.onnx"
    onnx.save(model, str(path))

    result = run_cli("onnx", "check", path)
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = onnx_model.load(str(path))
    for name, data, expected in cases:
        output, _ = loaded.run(loaded.node(name), data)
        np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4, err_msg=name)
