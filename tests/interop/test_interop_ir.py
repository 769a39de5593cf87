"""``convtranspose ir check`` / ``ir run`` on IRs written by OpenVINO itself.

Oracles: the output dims OpenVINO declares in its own ``.xml`` (``check``) and what
the OpenVINO runtime computes for each layer of the saved model (``run``).
"""

import json
import re
import shutil
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from cli_support import assert_one_line_error, run_cli, write_ir

# name -> (op, input, filter shape, output_shape or None, attributes)
LAYERS = {
    "deconv_explicit": ("ConvolutionBackpropData", "x", (4, 6, 3, 3), None,
                        dict(strides=[2, 2], pads_begin=[1, 0], pads_end=[0, 1],
                             dilations=[1, 1], auto_pad="explicit", output_padding=[1, 0])),
    "deconv_output_shape": ("ConvolutionBackpropData", "deconv_explicit", (6, 3, 3, 2), [20, 24],
                            dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0],
                                 dilations=[1, 2], auto_pad="same_lower",
                                 output_padding=[0, 0])),
    "group_valid": ("GroupConvolutionBackpropData", "deconv_output_shape", (3, 1, 2, 2, 2), None,
                    dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
                         auto_pad="valid", output_padding=[0, 0])),
    "group_output_shape": ("GroupConvolutionBackpropData", "group_valid", (2, 3, 1, 3, 3),
                           [42, 50], dict(strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 1],
                                          dilations=[1, 1], auto_pad="explicit",
                                          output_padding=[0, 0])),
    "deconv_1d_same_upper": ("ConvolutionBackpropData", "y", (3, 2, 4), [21],
                             dict(strides=[3], pads_begin=[0], pads_end=[0], dilations=[1],
                                  auto_pad="same_upper", output_padding=[0])),
    "group_1d_depthwise": ("GroupConvolutionBackpropData", "y", (3, 1, 1, 5), None,
                           dict(strides=[2], pads_begin=[2], pads_end=[1], dilations=[2],
                                auto_pad="explicit", output_padding=[1])),
}
INPUTS = {"x": (2, 4, 5, 6), "y": (1, 3, 7)}


@pytest.fixture(scope="module")
def openvino_models(tmp_path_factory):
    """Save the model twice (f32 and compress_to_fp16) and run it with OpenVINO.

    Returns {variant: (xml path, {tensor name: value computed by OpenVINO})}.
    """
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import openvino.opset1 as ops
    from openvino.utils.node_factory import NodeFactory

    rng = np.random.default_rng(7)
    factory = NodeFactory("opset1")
    nodes = {name: ops.parameter(list(shape), np.float32, name=name)
             for name, shape in INPUTS.items()}
    parameters = list(nodes.values())
    for name, (op, source, filter_shape, output_shape, attributes) in LAYERS.items():
        weights = ops.constant(rng.standard_normal(filter_shape).astype(np.float32))
        inputs = [nodes[source].output(0), weights.output(0)]
        if output_shape is not None:
            inputs.append(ops.constant(np.array(output_shape, np.int64)).output(0))
        node = factory.create(op, inputs, attributes)
        node.friendly_name = name
        nodes[name] = node
    results = [ops.result(nodes[name].output(0), name=f"{name}_result") for name in LAYERS]
    model = ov.Model(results, parameters, "transposed_convolutions")

    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in INPUTS.items()}
    core = ov.Core()
    saved = {}
    for variant, compress in (("f32", False), ("f16", True)):
        directory = tmp_path_factory.mktemp(variant)
        xml = directory / "model.xml"
        ov.save_model(model, str(xml), compress_to_fp16=compress)
        compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                      {"INFERENCE_PRECISION_HINT": "f32",
                                       "INFERENCE_NUM_THREADS": "2"})
        outputs = compiled(feeds)
        values = dict(feeds)
        for index, name in enumerate(LAYERS):
            values[name] = outputs[compiled.outputs[index]]
        saved[variant] = (xml, values)
    return saved


@pytest.mark.peers
@pytest.mark.parametrize("variant", ["f32", "f16"])
def test_ir_check_passes_on_openvino_output(openvino_models, variant):
    xml, values = openvino_models[variant]
    if variant == "f16":
        assert 'element_type="f16"' in xml.read_text() and 'type="Convert"' in xml.read_text()
    result = run_cli("ir", "check", xml, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    rows = {row["name"]: row for row in report["layers"]}
    assert set(rows) == set(LAYERS)
    for name, row in rows.items():
        assert row["status"] == "ok", row
        assert tuple(row["inferred"]) == values[name].shape  # what OpenVINO computed
    assert rows["deconv_output_shape"]["output_shape_input"] == [20, 24]
    assert rows["deconv_explicit"]["pads_begin"] == [1, 0]
    # The text table lists every layer with its resolved pads.
    table = run_cli("ir", "check", xml)
    assert table.returncode == 0
    for name in LAYERS:
        assert name in table.stdout
    assert "pads_begin" in table.stdout.splitlines()[0]


@pytest.mark.peers
@pytest.mark.parametrize("variant", ["f32", "f16"])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_ir_run_equals_the_openvino_runtime(openvino_models, variant, layer, tmp_path):
    xml, values = openvino_models[variant]
    source = LAYERS[layer][1]
    np.save(tmp_path / "x.npy", values[source])
    result = run_cli("ir", "run", xml, "--layer", layer, "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    output = np.load(tmp_path / "y.npy")
    expected = values[layer]
    assert output.shape == expected.shape and output.dtype == np.float32
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-5 * scale)


def _edit_declared_dim(xml_text: str, layer: str, axis: int, delta: int) -> tuple[str, list, list]:
    root = ElementTree.fromstring(xml_text)
    element = root.find(f"layers/layer[@name='{layer}']")
    dims = element.findall("output/port/dim")
    original = [int(d.text) for d in dims]
    dims[axis].text = str(original[axis] + delta)
    return ElementTree.tostring(root, encoding="unicode"), original, [int(d.text) for d in dims]


@pytest.mark.peers
def test_ir_check_reports_an_edited_declared_dim(openvino_models, tmp_path):
    xml, _ = openvino_models["f16"]
    text, original, edited = _edit_declared_dim(xml.read_text(), "group_output_shape", 3, 1)
    (tmp_path / "edited.xml").write_text(text)
    shutil.copy(xml.with_suffix(".bin"), tmp_path / "edited.bin")
    result = run_cli("ir", "check", tmp_path / "edited.xml")
    assert result.returncode == 1, result.stdout + result.stderr
    declared = "[" + ",".join(map(str, edited)) + "]"
    inferred = "[" + ",".join(map(str, original)) + "]"
    problem = [line for line in result.stderr.splitlines() if "group_output_shape" in line]
    assert problem and declared in problem[0] and inferred in problem[0], result.stderr
    assert "MISMATCH" in result.stdout
    assert "1 mismatched" in result.stdout


@pytest.mark.peers
def test_ir_check_reports_an_input_that_disagrees_with_its_producer(openvino_models, tmp_path):
    xml, _ = openvino_models["f32"]
    text, _, _ = _edit_declared_dim(xml.read_text(), "deconv_explicit", 2, 2)
    (tmp_path / "edited.xml").write_text(text)
    shutil.copy(xml.with_suffix(".bin"), tmp_path / "edited.bin")
    result = run_cli("ir", "check", tmp_path / "edited.xml", "--json")
    assert result.returncode == 1
    rows = {row["name"]: row for row in json.loads(result.stdout)["layers"]}
    assert rows["deconv_explicit"]["status"] == "mismatch"
    # Its consumer declares the true dims on its input port: reported as a disagreement.
    assert rows["deconv_output_shape"]["status"] == "mismatch"
    assert any("producer" in p for p in rows["deconv_output_shape"]["problems"])


@pytest.mark.peers
def test_ir_run_unknown_layer_lists_the_layers(openvino_models, tmp_path):
    xml, values = openvino_models["f32"]
    np.save(tmp_path / "x.npy", values["x"])
    result = run_cli("ir", "run", xml, "--layer", "nope", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "no ConvolutionBackpropData", "deconv_explicit")
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.peers
def test_ir_run_refuses_data_of_the_wrong_shape(openvino_models, tmp_path):
    xml, _ = openvino_models["f32"]
    np.save(tmp_path / "x.npy", np.zeros((2, 4, 5, 7), np.float32))
    result = run_cli("ir", "run", xml, "--layer", "deconv_explicit", "--data",
                     tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "[2,4,5,6]")


def test_handwritten_ir_with_f16_weights_and_a_wrong_declared_shape(tmp_path):
    """No OpenVINO needed: the spec's example 2 layer with f16 weights + Convert."""
    pytest.importorskip("defusedxml")
    from oracle import crop, full_transposed_convolution

    rng = np.random.default_rng(3)
    weights = rng.standard_normal((20, 10, 3, 3)).astype(np.float16).astype(np.float32)
    attributes = dict(dilations="1,1", pads_begin="0,0", pads_end="0,0", strides="3,3",
                      output_padding="2,2", auto_pad="explicit")
    xml = write_ir(tmp_path, data_shape=(1, 20, 2, 2), weights=weights, declared=(1, 10, 8, 8),
                   attributes=attributes, compress_weights=True)
    assert run_cli("ir", "check", xml).returncode == 0
    data = rng.standard_normal((1, 20, 2, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    result = run_cli("ir", "run", xml, "--layer", "upsampling_node", "--data",
                     tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    expected = crop(full_transposed_convolution(data, weights[None], (3, 3), (1, 1)),
                    (0, 0), (8, 8))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5, atol=1e-5)

    wrong = write_ir(tmp_path, data_shape=(1, 20, 2, 2), weights=weights,
                     declared=(1, 10, 7, 8), attributes=attributes, stem="wrong")
    result = run_cli("ir", "check", wrong)
    assert result.returncode == 1
    assert re.search(r"upsampling_node.*declared output \[1,10,7,8\] but inferred \[1,10,8,8\]",
                     result.stderr), result.stderr


def _compile(ov, xml):
    core = ov.Core()
    return core.compile_model(core.read_model(str(xml)), "CPU",
                              {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2"})


@pytest.mark.peers
def test_quantized_weights_and_dynamic_batch(tmp_path):
    """u8 weights decompressed by Convert -> Subtract -> Multiply, and a dynamic batch dim."""
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import openvino.opset1 as ops
    from openvino.utils.node_factory import NodeFactory

    rng = np.random.default_rng(9)
    data = ops.parameter(ov.PartialShape([-1, 4, 5, 5]), np.float32, name="x")
    quantized = ops.constant(rng.integers(0, 255, (4, 6, 3, 3)).astype(np.uint8))
    zero_point = ops.constant(np.full((4, 1, 1, 1), 128, np.float32))
    scale = ops.constant(rng.random((4, 1, 1, 1)).astype(np.float32) / 50)
    weights = ops.multiply(ops.subtract(ops.convert(quantized, "f32"), zero_point), scale)
    node = NodeFactory("opset1").create(
        "ConvolutionBackpropData", [data.output(0), weights.output(0)],
        dict(strides=[2, 2], pads_begin=[1, 1], pads_end=[0, 0], dilations=[1, 1],
             auto_pad="explicit", output_padding=[1, 0]))
    node.friendly_name = "up_quantized"
    xml = tmp_path / "quantized.xml"
    ov.save_model(ov.Model([node.output(0)], [data], "q"), str(xml), compress_to_fp16=False)
    assert 'element_type="u8"' in xml.read_text() and "<dim>-1</dim>" in xml.read_text()

    result = run_cli("ir", "check", xml, "--json")
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)["layers"][0]
    # Y = (5-1)*2 + 3 + output_padding - pads_begin - pads_end: 11 + 1 - 1 and 11 + 0 - 1.
    assert row["status"] == "ok" and row["inferred"] == [None, 6, 11, 10]

    batch = rng.standard_normal((3, 4, 5, 5)).astype(np.float32)
    expected = _compile(ov, xml)({"x": batch})[0]
    np.save(tmp_path / "x.npy", batch)
    result = run_cli("ir", "run", xml, "--layer", "up_quantized", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.peers
def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch, capsys):
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import io

    import openvino.opset1 as ops

    import convtranspose.cli as cli

    node = parameter = ops.parameter([1, 2, 3], np.float32, name="x")
    for index in range(25):
        node = ops.convolution_backprop_data(node, ops.constant(np.ones((2, 2, 1), np.float32)),
                                             strides=[1])
        node.friendly_name = f"layer{index}"
    xml = tmp_path / "deep.xml"
    ov.save_model(ov.Model([node.output(0)], [parameter], "deep"), str(xml))

    plain = run_cli("ir", "check", xml)  # stderr is a pipe: no bar
    # No bar; a notice of a compilation over a second may come (a cold kernel cache).
    assert plain.returncode == 0
    assert all(line.startswith("convtranspose: compiling")
               for line in plain.stderr.splitlines()), plain.stderr
    assert "25 transposed-convolution layers checked, 0 mismatched" in plain.stdout

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert cli.main(["ir", "check", str(xml)]) == 0
    assert "25/25" in terminal.getvalue() and "\r" in terminal.getvalue()
    assert "25/25" not in capsys.readouterr().out


def _random_layer(rng, index):
    """Random attributes for one layer: rank 1-3, both ops, every auto_pad, +- output_shape."""
    rank = int(rng.integers(1, 4))
    grouped = bool(rng.integers(0, 2))
    groups = int(rng.integers(1, 4)) if grouped else 1
    c_in, c_out = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x = [int(v) for v in rng.integers(1, 6, rank)]
    k = [int(v) for v in rng.integers(1, 4, rank)]
    s = [int(v) for v in rng.integers(1, 4, rank)]
    d = [int(v) for v in rng.integers(1, 3, rank)]
    attributes = dict(strides=s, dilations=d,
                      pads_begin=[int(v) for v in rng.integers(0, 2, rank)],
                      pads_end=[int(v) for v in rng.integers(0, 2, rank)],
                      auto_pad=str(rng.choice(["explicit", "same_upper", "same_lower", "valid"])),
                      output_padding=[int(rng.integers(0, sv)) for sv in s])
    full = [(xv - 1) * sv + (kv - 1) * dv + 1 for xv, sv, kv, dv in zip(x, s, k, d)]
    output_shape = None
    if rng.integers(0, 2):
        output_shape = [max(1, f + int(rng.integers(-2, 1))) for f in full]
    elif attributes["auto_pad"] == "explicit":
        attributes["pads_begin"] = attributes["pads_end"] = [0] * rank
    if (output_shape == x and attributes["auto_pad"] == "explicit" and k == [1] * rank
            and s == [1] * rank and not any(attributes["output_padding"])):
        # A peer's quirk: here OpenVINO's CPU plugin ignores pads_begin (docs/semantics.md: offset).
        attributes["pads_begin"] = [0] * rank
    op = "GroupConvolutionBackpropData" if grouped else "ConvolutionBackpropData"
    filter_shape = ([groups, c_in, c_out] if grouped else [c_in, c_out]) + k
    return op, [2, groups * c_in] + x, filter_shape, output_shape, attributes


@pytest.mark.peers
def test_random_layers_match_openvino(tmp_path, peer_examples):
    """Random layers in one OpenVINO-saved IR: check agrees with OpenVINO's declared
    shapes and run with its runtime (layers its CPU plugin cannot compile are skipped)."""
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import openvino.opset1 as ops
    from openvino.utils.node_factory import NodeFactory

    from convtranspose.interop import ir

    rng = np.random.default_rng(2026)
    factory, core = NodeFactory("opset1"), ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}
    parameters, results, layers = [], [], []
    count = max(10, peer_examples // 10)
    for index in range(count):
        op, data_shape, filter_shape, output_shape, attributes = _random_layer(rng, index)
        parameter = ops.parameter(data_shape, np.float32, name=f"data{index}")
        inputs = [parameter.output(0),
                  ops.constant(rng.standard_normal(filter_shape).astype(np.float32)).output(0)]
        if output_shape is not None:
            inputs.append(ops.constant(np.array(output_shape, np.int64)).output(0))
        node = factory.create(op, inputs, attributes)
        node.friendly_name = f"layer{index}"
        try:
            compiled = core.compile_model(ov.Model([node.output(0)], [parameter]), "CPU", config)
        except RuntimeError:  # e.g. oneDNN has no primitive for this output_padding
            continue
        parameters.append(parameter)
        results.append(node.output(0))
        layers.append((f"layer{index}", f"data{index}", data_shape, compiled))
    assert len(layers) >= count // 2
    xml = tmp_path / "random.xml"
    ov.save_model(ov.Model(results, parameters, "random"), str(xml), compress_to_fp16=False)

    result = run_cli("ir", "check", xml)
    assert result.returncode == 0, result.stdout + result.stderr
    model = ir.load(str(xml))
    for name, data_name, data_shape, compiled in layers:
        layer = model.layer(name)
        report = model.check(layer)
        data = rng.standard_normal(data_shape).astype(np.float32)
        expected = compiled({data_name: data})[0]
        assert report.status == "ok" and report.inferred == expected.shape, report
        output, _ = model.run(layer, data)
        np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4, err_msg=name)


def test_output_shape_computed_at_run_time_is_unchecked_not_failed(tmp_path):
    pytest.importorskip("defusedxml")
    xml = write_ir(tmp_path, data_shape=(1, 20, 4, 4), weights=np.ones((20, 10, 3, 3)),
                   declared=(1, 10, 6, 6), output_shape=(6, 6),
                   attributes=dict(strides="1,1", auto_pad="valid"))
    text = xml.read_text().replace('name="output_shape" type="Const"',
                                   'name="output_shape" type="Parameter"')
    xml.write_text(text)
    result = run_cli("ir", "check", xml, "--json")
    # Its only layer unchecked: nothing was checked, which is neither a pass nor a mismatch.
    assert result.returncode == 3, result.stderr
    row = json.loads(result.stdout)["layers"][0]
    assert row["status"] == "unchecked" and row["inferred"] is None
    assert "computed at run time" in result.stderr
    assert "0 transposed-convolution layers checked" in result.stderr


@pytest.mark.peers
def test_ir_check_shows_every_attribute_and_why_a_row_mismatches(openvino_models, tmp_path):
    xml, _ = openvino_models["f32"]
    rows = {row["name"]: row for row in json.loads(run_cli("ir", "check", xml, "--json")
                                                   .stdout)["layers"]}
    for name, (op, _, filter_shape, _, attributes) in LAYERS.items():
        grouped = op.startswith("Group")
        assert rows[name]["attributes"] == dict(
            kernel_shape=list(filter_shape[3 if grouped else 2:]),
            strides=attributes["strides"], dilations=attributes["dilations"],
            groups=filter_shape[0] if grouped else 1,
            output_padding=attributes["output_padding"],
            auto_pad=attributes["auto_pad"]), name
    # the consumer's input port disagrees with its producer while its own declared and
    # inferred outputs agree: the table's status cell names the input
    text, _, _ = _edit_declared_dim(xml.read_text(), "deconv_explicit", 2, 2)
    (tmp_path / "edited.xml").write_text(text)
    shutil.copy(xml.with_suffix(".bin"), tmp_path / "edited.bin")
    result = run_cli("ir", "check", tmp_path / "edited.xml")
    row = [line for line in result.stdout.splitlines() if line.startswith("deconv_output_shape")]
    assert row and "MISMATCH: data input [" in row[0] and "its producer's output [" in row[0]
    assert "k3x2 s2 d1x2 g1 op0 same_lower" in row[0]
