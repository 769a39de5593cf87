"""``onnx check`` / ``onnx run`` on quantized ConvTranspose layers: the ONNX QDQ pattern
and ``com.microsoft.QLinearConvTranspose``.

Oracle: onnxruntime's CPU provider, which runs the QDQ model's ConvTranspose in float32
between its DequantizeLinear and QuantizeLinear nodes.  ``onnx run`` on the quantized
input must give the QuantizeLinear's output: equal with power-of-two scales (every
float32 step of the model is then exact), else at most one unit apart where the
runtime's float32 sum lands next to a rounding boundary (docs/quantization.md).  The
CPU provider has no QLinearConvTranspose kernel, so that node is compared with the
equivalent QDQ model's onnxruntime output.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_support import assert_one_line_error, run_cli

pytestmark = pytest.mark.peers
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from convtranspose.interop import onnx_model  # noqa: E402
from convtranspose.interop._safety import InteropError  # noqa: E402

# (spatial dims of x, x dtype, w dtype, per-channel weights, bias, group, attributes)
CASES = [
    ((7,), np.uint8, np.int8, False, True, 1, dict(strides=[2])),
    ((6,), np.int8, np.int8, True, False, 2, dict(strides=[3], pads=[1, 2],
                                                   output_padding=[1])),
    ((4, 5), np.uint8, np.uint8, False, False, 1, dict(strides=[2, 1], pads=[1, 0, 0, 1])),
    ((5, 4), np.int8, np.int8, True, True, 2, dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                    output_padding=[1, 0])),
    ((4, 3), np.uint8, np.int8, True, True, 1, dict(strides=[3, 2], output_padding=[2, 1])),
    ((3, 4, 3), np.uint8, np.int8, True, True, 1, dict(strides=[2, 1, 2],
                                                        output_padding=[1, 0, 0])),
    ((3, 3, 3), np.int8, np.uint8, False, True, 3, dict(strides=[1, 2, 1],
                                                         pads=[0, 1, 0, 0, 0, 1],
                                                         dilations=[1, 1, 2])),
]


def _layer(case, seed: int, power_of_two: bool):
    """Random operands of ``case``: ``x``, its scale and zero point, ``w`` with ``M/group``
    scales (per channel) or one, the int32 bias, the output's scale and zero point."""
    spatial, x_type, w_type, per_channel, with_bias, group, attributes = case
    rng = np.random.default_rng(seed)
    channels, per_group = 2 * group, 2
    kernel = [3] * len(spatial)

    def ints(dtype, shape, low=None, high=None):
        info = np.iinfo(dtype)
        return rng.integers(info.min if low is None else low,
                            (info.max if high is None else high) + 1, shape).astype(dtype)

    def scale(size=None):
        if power_of_two:
            return np.float32(2.0) ** np.asarray(rng.integers(-9, -3, size), np.float32)
        return np.asarray(rng.uniform(0.002, 0.05, size), np.float32)

    count = per_group if per_channel else None
    layer = dict(
        x=ints(x_type, (2, channels, *spatial)), x_scale=scale(), w=ints(w_type, (
            channels, per_group, *kernel)), w_scale=scale(count),
        x_zero_point=ints(x_type, (), -20 if x_type == np.int8 else 100, 20 if x_type ==
                          np.int8 else 150),
        w_zero_point=ints(w_type, count or (), 0 if w_type == np.int8 else 120,
                          5 if w_type == np.int8 else 135),
        y_zero_point=np.array(rng.integers(-10, 10), np.int8) if seed % 2 else np.array(
            rng.integers(110, 140), np.uint8),
        B=ints(np.int32, (group * per_group,), -3000, 3000) if with_bias else None)
    taps = channels // group * int(np.prod(kernel))
    typical = float(layer["x_scale"]) * float(np.max(layer["w_scale"])) * 80 * 80 * taps ** 0.5
    y_scale = typical / 40
    layer["y_scale"] = np.float32(2.0 ** np.round(np.log2(y_scale)) if power_of_two
                                  else y_scale)
    return layer, dict(attributes, group=group)


def _tensor(value, name):
    return numpy_helper.from_array(np.asarray(value), name)


def qdq_model(layer, attributes, variant: str = ""):
    """``DequantizeLinear(x), DequantizeLinear(w, axis=1) [, DequantizeLinear(B, x_scale *
    w_scale, axis=0)] -> ConvTranspose 'up' -> QuantizeLinear`` (opset 21); ``variant``
    breaks one part of the pattern for the refusal tests."""
    group = attributes["group"]
    m = layer["w"].shape[1] * group
    xs, xz = np.asarray(layer["x_scale"]), np.asarray(layer["x_zero_point"])
    if variant == "per_axis_x":  # one scale per input channel
        xs, xz = np.full(layer["x"].shape[1], xs, np.float32), np.full(layer["x"].shape[1], xz)
    ws = np.asarray(layer["w_scale"])
    constants = {"xz": xz, "w": layer["w"], "ws": ws, "wz": np.asarray(layer["w_zero_point"]),
                 "ys": np.asarray(layer["y_scale"]), "yz": np.asarray(layer["y_zero_point"])}
    if variant == "float16_scale":
        constants["ys"] = constants["ys"].astype(np.float16)
    inputs = [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(
        layer["x"].dtype), list(layer["x"].shape))]
    if variant == "scale_input":  # x_scale fed at run time
        inputs.append(helper.make_tensor_value_info("xs", TensorProto.FLOAT, list(xs.shape)))
    else:
        constants["xs"] = xs
    w_attributes = dict(axis=1)
    if variant == "blocked":  # one scale per block of the input channels (opset 21)
        w_attributes = dict(axis=0, block_size=layer["w"].shape[0])
        constants["ws"] = np.full((1,) + layer["w"].shape[1:], ws.reshape(-1)[0], np.float32)
        constants["wz"] = np.zeros(constants["ws"].shape, layer["w"].dtype)
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], name="dq_w",
                              **w_attributes)]
    conv_inputs = ["xf", "wf"]
    if layer["B"] is not None:
        # x_scale * w_scale per output channel: the M/group weight scales of each group.
        bias_scale = np.float32(layer["x_scale"]) * np.broadcast_to(
            np.tile(ws.reshape(-1), group) if ws.size > 1 else ws, (m,))
        if variant == "float_bias":
            constants["bf"] = (layer["B"] * bias_scale).astype(np.float32)
        else:
            constants.update(b=layer["B"], bs=np.asarray(bias_scale, np.float32))
            nodes.append(helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"], name="dq_b",
                                          axis=0))
        conv_inputs.append("bf")
    outputs = [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(
        constants["yz"].dtype), None)]
    nodes += [helper.make_node("ConvTranspose", conv_inputs, ["yf"], name="up", **attributes),
              helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"], name="q")]
    if variant in ("two_consumers", "float_output"):
        outputs.append(helper.make_tensor_value_info("yf_out" if variant == "two_consumers"
                                                     else "yf", TensorProto.FLOAT, None))
        if variant == "two_consumers":
            nodes.append(helper.make_node("Relu", ["yf"], ["yf_out"], name="relu"))
    graph = helper.make_graph(nodes, "qdq", inputs, outputs,
                              initializer=[_tensor(v, k) for k, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def qlinear_model(layer, attributes, scale_input: bool = False):
    """The same layer as one ``com.microsoft.QLinearConvTranspose`` node (per-channel
    scales and zero points ``(M,)``: the QDQ model's ``M/group`` tiled over the groups)."""
    group = attributes["group"]
    tile = (lambda v: np.tile(np.asarray(v).reshape(-1), group)) if np.size(
        layer["w_scale"]) > 1 else np.asarray
    values = {"xs": layer["x_scale"], "xz": layer["x_zero_point"], "w": layer["w"],
              "ws": tile(layer["w_scale"]), "wz": tile(layer["w_zero_point"]),
              "ys": layer["y_scale"], "yz": layer["y_zero_point"]}
    names = list(values)
    if layer["B"] is not None:
        values["b"] = layer["B"]
        names.append("b")
    inputs = [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(
        layer["x"].dtype), list(layer["x"].shape))]
    if scale_input:
        del values["ws"]
        inputs.append(helper.make_tensor_value_info("ws", TensorProto.FLOAT, None))
    node = helper.make_node("QLinearConvTranspose", ["x"] + names, ["y"], name="qup",
                            domain="com.microsoft", **attributes)
    graph = helper.make_graph(
        [node], "qlinear", inputs, [helper.make_tensor_value_info(
            "y", helper.np_dtype_to_tensor_dtype(np.asarray(layer["y_zero_point"]).dtype),
            None)], initializer=[_tensor(v, k) for k, v in values.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model


def run_onnxruntime(model, feeds, outputs=None):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def _saved(tmp_path, model, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def units_apart(result, peer):
    assert result.shape == peer.shape and result.dtype == peer.dtype
    return np.abs(result.astype(np.int64) - peer.astype(np.int64))


# -- agreement with onnxruntime --------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{len(case[0])}d-{case[1].__name__}"
                         f"-{case[2].__name__}-g{case[5]}{'-pc' if case[3] else ''}"
                         f"{'-b' if case[4] else ''}")
def test_qdq_run_matches_onnxruntime(case, tmp_path):
    """Power-of-two scales: equal element for element; any scales: at most one unit apart
    on a few elements."""
    for power_of_two in (True, False):
        differing = total = 0
        for seed in range(3):
            layer, attributes = _layer(case, 10 * seed + CASES.index(case), power_of_two)
            if seed == 2:  # a finer output scale: many outputs saturate at both ends
                layer["y_scale"] = np.float32(layer["y_scale"] / 8)
            model = qdq_model(layer, attributes)
            peer = run_onnxruntime(model, {"x": layer["x"]})[0]
            loaded = onnx_model.load(str(_saved(tmp_path, model)))
            result, notes = loaded.run(loaded.node("up"), layer["x"])
            assert any("qlinear_conv_transpose" in note for note in notes), notes
            apart = units_apart(result, peer)
            info = np.iinfo(peer.dtype)
            assert seed != 2 or {info.min, info.max} <= set(peer.ravel().tolist())
            if power_of_two:
                np.testing.assert_array_equal(result, peer)
            assert apart.max() <= 1, (seed, power_of_two)
            differing, total = differing + int(np.count_nonzero(apart)), total + apart.size
        assert differing <= max(1, total // 100), (differing, total)


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[6]], ids=["1d", "2d", "3d"])
def test_qlinear_conv_transpose_matches_the_qdq_model_in_onnxruntime(case, tmp_path):
    for power_of_two in (True, False):
        layer, attributes = _layer(case, 7, power_of_two)
        peer = run_onnxruntime(qdq_model(layer, attributes), {"x": layer["x"]})[0]
        loaded = onnx_model.load(str(_saved(tmp_path, qlinear_model(layer, attributes))))
        result, _ = loaded.run(loaded.node("qup"), layer["x"])
        assert units_apart(result, peer).max() <= (0 if power_of_two else 1)


def test_cli_run_writes_the_quantize_linear_output(tmp_path):
    layer, attributes = _layer(CASES[3], 1, True)
    model = qdq_model(layer, attributes)
    path = _saved(tmp_path, model)
    np.save(tmp_path / "x.npy", layer["x"])
    result = run_cli("onnx", "run", path, "--node", "up", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy", "--json")
    assert result.returncode == 0, result.stderr
    written = np.load(tmp_path / "y.npy")
    np.testing.assert_array_equal(written, run_onnxruntime(model, {"x": layer["x"]})[0])
    record = json.loads(result.stdout)
    assert record["dtype"] == str(layer["y_zero_point"].dtype)
    assert any("QDQ" in note for note in record["notes"])


def test_cli_check_reports_both_dialects(tmp_path):
    layer, attributes = _layer(CASES[3], 2, False)
    qdq = _saved(tmp_path, qdq_model(layer, attributes), "qdq.onnx")
    qlinear = _saved(tmp_path, qlinear_model(layer, attributes), "qlinear.onnx")
    for path, op, dialect in ((qdq, "ConvTranspose (QDQ)", "QDQ"),
                              (qlinear, "QLinearConvTranspose",
                               "com.microsoft.QLinearConvTranspose")):
        result = run_cli("onnx", "check", path, "--json")
        assert result.returncode == 0, result.stderr
        (report,) = json.loads(result.stdout)["layers"]
        assert report["op"] == op and report["status"] == "ok"
        expected = run_onnxruntime(qdq_model(layer, attributes), {"x": layer["x"]})[0]
        assert report["inferred"] == list(expected.shape)
        quantization = report["quantization"]
        assert quantization["dialect"] == dialect and quantization["followed"]
        assert quantization["per_channel"] and quantization["bias"]
        assert quantization["y_dtype"] == str(expected.dtype)


def test_float_data_runs_the_conv_transpose_alone(tmp_path):
    """The dequantized float input gives the ConvTranspose's own float output, as
    onnxruntime computes it, with a note naming the quantized input."""
    layer, attributes = _layer(CASES[3], 3, False)
    model = qdq_model(layer, attributes)
    xf = ((layer["x"].astype(np.int64) - layer["x_zero_point"]).astype(np.float32)
          * layer["x_scale"])
    peer = run_onnxruntime(qdq_model(layer, attributes, "float_output"), {"x": layer["x"]},
                           ["yf"])[0]
    loaded = onnx_model.load(str(_saved(tmp_path, model)))
    result, notes = loaded.run(loaded.node("up"), xf)
    np.testing.assert_allclose(result, peer, rtol=1e-5, atol=1e-5)
    assert any("give the quantized input 'x'" in note for note in notes), notes


# -- what is not followed --------------------------------------------------------------------

VARIANTS = {
    "per_axis_x": "one activation scale",
    "scale_input": "only known at run time",
    "blocked": "blocked",
    "float_bias": "not by DequantizeLinear",
    "two_consumers": "exactly one QuantizeLinear",
    "float_output": "output of the graph",
    "float16_scale": "float16",
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_unfollowed_patterns_are_reported_and_refused(variant, tmp_path):
    """``check`` says why (the layer itself is fine); ``run`` refuses quantized data
    rather than compute something else, and computes float data in float."""
    layer, attributes = _layer(CASES[3], 4, True)
    model = qdq_model(layer, attributes, variant)
    loaded = onnx_model.load(str(_saved(tmp_path, model)))
    report = loaded.check(loaded.node("up"))
    assert report.status == "ok" and report.op == "ConvTranspose"
    assert report.quantization["followed"] is False
    assert VARIANTS[variant] in report.quantization["reason"], report.quantization
    with pytest.raises(InteropError, match="cannot be followed"):
        loaded.run(loaded.node("up"), layer["x"])


def test_cli_refuses_an_unfollowed_pattern_in_one_line(tmp_path):
    layer, attributes = _layer(CASES[0], 5, True)
    path = _saved(tmp_path, qdq_model(layer, attributes, "two_consumers"))
    np.save(tmp_path / "x.npy", layer["x"])
    result = run_cli("onnx", "run", path, "--node", "up", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "QDQ pattern cannot be followed", "feeds")
    assert not (tmp_path / "y.npy").exists()


def test_qlinear_with_a_run_time_scale_is_refused(tmp_path):
    layer, attributes = _layer(CASES[3], 6, False)
    path = _saved(tmp_path, qlinear_model(layer, attributes, scale_input=True))
    loaded = onnx_model.load(str(path))
    report = loaded.check(loaded.node("qup"))
    assert report.quantization["followed"] is False
    with pytest.raises(InteropError, match="cannot be computed.*only known at run time"):
        loaded.run(loaded.node("qup"), layer["x"])


def test_the_memory_limit_holds_for_the_quantized_path(tmp_path):
    """The exact sum's working memory counts against --max-bytes (8 bytes an element)."""
    layer, attributes = _layer(CASES[3], 8, True)
    path = _saved(tmp_path, qdq_model(layer, attributes))
    loaded = onnx_model.load(str(path), max_bytes=2048)
    with pytest.raises(InteropError, match="computing output"):
        loaded.run(loaded.node("up"), layer["x"])
    roomy = onnx_model.load(str(path))
    assert roomy.run(roomy.node("up"), layer["x"])[0].size


def test_dequantized_weights_alone_stay_a_float_layer(tmp_path):
    """Weight compression (DequantizeLinear on W only, float data, no QuantizeLinear) is
    no quantized layer: computed in float as before, matching onnxruntime, no QDQ note."""
    layer, attributes = _layer(CASES[3], 9, False)
    ws = np.asarray(layer["w_scale"], np.float32)
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=1),
         helper.make_node("ConvTranspose", ["xf", "wf"], ["yf"], name="up", **attributes)],
        "weights_only", [helper.make_tensor_value_info("xf", TensorProto.FLOAT,
                                                       list(layer["x"].shape))],
        [helper.make_tensor_value_info("yf", TensorProto.FLOAT, None)],
        initializer=[_tensor(layer["w"], "w"), _tensor(ws, "ws"),
                     _tensor(layer["w_zero_point"], "wz")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    xf = np.random.default_rng(0).standard_normal(layer["x"].shape).astype(np.float32)
    loaded = onnx_model.load(str(_saved(tmp_path, model)))
    report = loaded.check(loaded.node("up"))
    assert report.quantization is None and report.op == "ConvTranspose"
    result, notes = loaded.run(loaded.node("up"), xf)
    np.testing.assert_allclose(result, run_onnxruntime(model, {"xf": xf})[0], rtol=1e-5,
                               atol=1e-5)
    assert not any("QDQ" in note for note in notes)


def test_compare_says_onnxruntime_cannot_run_qlinear_conv_transpose(tmp_path):
    layer, attributes = _layer(CASES[0], 10, False)
    path = _saved(tmp_path, qlinear_model(layer, attributes))
    with pytest.raises(Exception, match="QLinearConvTranspose"):  # the runtime itself
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert_one_line_error(run_cli("onnx", "compare", path), "QLinearConvTranspose",
                          "onnx run")


def test_qlinear_operands_of_the_wrong_shape_are_invalid(tmp_path):
    """Five weight scales for four output channels: the geometry is fine, the
    quantization operands are not; ``check`` says invalid, ``run`` refuses."""
    from convtranspose import ConvTransposeError

    layer, attributes = _layer(CASES[3], 11, False)  # M = 4, per channel
    model = qlinear_model(layer, attributes)
    for tensor in model.graph.initializer:
        if tensor.name in ("ws", "wz"):
            value = numpy_helper.to_array(tensor)
            tensor.CopyFrom(_tensor(np.concatenate([value, value[:1]]), tensor.name))
    loaded = onnx_model.load(str(_saved(tmp_path, model)))
    report = loaded.check(loaded.node("qup"))
    assert report.status == "invalid" and "w_scale" in " ".join(report.problems)
    with pytest.raises(ConvTransposeError, match="w_scale"):
        loaded.run(loaded.node("qup"), layer["x"])
