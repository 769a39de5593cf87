"""``ir check`` / ``ir run`` on the FakeQuantize pattern of IRs written by OpenVINO.

Oracle: what the OpenVINO runtime computes for the saved model (read back from its
``.xml``), each layer's result being its output FakeQuantize's.
"""

import numpy as np
import pytest

from cli_support import assert_one_line_error, run_cli

F32 = np.float32
CPU = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}
#: name -> (op, data shape, filter shape, attributes, levels of data/filter/output)
LAYERS = {
    "up": ("ConvolutionBackpropData", (1, 4, 5, 5), (4, 3, 3, 3),
           dict(strides=[2, 2], pads_begin=[1, 0], pads_end=[0, 1], dilations=[1, 1],
                auto_pad="explicit", output_padding=[1, 0]), (256, 255, 256)),
    "up_group": ("GroupConvolutionBackpropData", (2, 4, 7), (2, 2, 3, 4),
                 dict(strides=[3], pads_begin=[1], pads_end=[1], dilations=[2],
                      auto_pad="explicit", output_padding=[0]), (16, 255, 7)),
}


def _ranges(rng, shape, levels):
    low = rng.uniform(-2, -0.2, shape).astype(F32)
    high = rng.uniform(0.2, 2, shape).astype(F32)
    return [low, high, (low * F32(0.9)).astype(F32), (high * F32(1.1)).astype(F32), levels]


@pytest.fixture(scope="module")
def quantized_ir(tmp_path_factory):
    """A model with both layers between FakeQuantize layers, saved as IR; returns the
    xml path, the inputs and what OpenVINO computes for each layer's output."""
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import openvino.opset13 as ops
    from openvino.utils.node_factory import NodeFactory

    def fake_quantize(node, ranges):
        return ops.fake_quantize(node, *(ops.constant(r) for r in ranges[:4]), ranges[4])

    rng = np.random.default_rng(3)
    parameters, results, inputs = [], [], {}
    for name, (op, data_shape, filter_shape, attributes, levels) in LAYERS.items():
        parameter = ops.parameter(data_shape, np.float32, name=f"{name}_in")
        inputs[name] = rng.uniform(-3, 3, data_shape).astype(F32)
        group = op.startswith("Group")
        channels_out = filter_shape[0] * filter_shape[2] if group else filter_shape[1]
        ones = (1,) * (len(data_shape) - 2)
        weights = rng.standard_normal(filter_shape).astype(F32)
        per_filter = ((filter_shape[0], 1, filter_shape[2]) if group
                      else (1, filter_shape[1])) + ones
        layer = NodeFactory("opset1").create(op, [
            fake_quantize(parameter, _ranges(rng, (1, data_shape[1]) + ones, levels[0])).output(0),
            fake_quantize(ops.constant(weights), _ranges(rng, per_filter, levels[1])).output(0),
        ], attributes)
        layer.set_friendly_name(name)
        output = fake_quantize(layer, _ranges(rng, (1, channels_out) + ones, levels[2]))
        parameters.append(parameter)
        results.append(output.output(0))
    xml = tmp_path_factory.mktemp("fq") / "quantized.xml"
    ov.save_model(ov.Model(results, parameters), str(xml))
    compiled = ov.Core().compile_model(ov.Core().read_model(str(xml)), "CPU", CPU)
    outputs = compiled([inputs[name] for name in LAYERS])
    expected = {name: outputs[index] for index, name in enumerate(LAYERS)}
    return xml, inputs, expected


def test_check_names_the_pattern(quantized_ir):
    xml, _, _ = quantized_ir
    result = run_cli("ir", "check", xml)
    assert result.returncode == 0, result.stderr
    assert "FakeQuantize on data (256 levels), filter (255 levels), output (256 levels)" \
        in result.stderr
    assert "FakeQuantize on data (16 levels), filter (255 levels), output (7 levels)" \
        in result.stderr


@pytest.mark.parametrize("name", list(LAYERS))
def test_run_reproduces_openvino(quantized_ir, tmp_path, name):
    xml, inputs, expected = quantized_ir
    data = tmp_path / "x.npy"
    np.save(data, inputs[name])
    out = tmp_path / "y.npy"
    result = run_cli("ir", "run", xml, "--layer", name, "--data", data, "-o", out)
    assert result.returncode == 0, result.stderr
    computed = np.load(out)
    assert computed.shape == expected[name].shape
    # Both runs give one output level per element; its value is the same up to the
    # float32 order of OpenVINO's FakeQuantize (a few units in the last place).
    scale = np.abs(expected[name]).max()
    np.testing.assert_allclose(computed, expected[name], rtol=0, atol=1e-6 * scale)
    levels = LAYERS[name][4][2]  # the output ranges are per channel
    assert all(len(np.unique(computed[:, c])) <= levels for c in range(computed.shape[1]))


def test_run_refuses_ranges_computed_at_run_time(tmp_path):
    ov = pytest.importorskip("openvino")
    pytest.importorskip("defusedxml")
    import openvino.opset13 as ops
    from openvino.utils.node_factory import NodeFactory

    data = ops.parameter((1, 2, 4), np.float32, name="x")
    high = ops.parameter((), np.float32, name="high")  # a run-time input_high
    quantized = ops.fake_quantize(data, ops.constant(F32(-1)), high, ops.constant(F32(-1)),
                                  ops.constant(F32(1)), 256)
    layer = NodeFactory("opset1").create("ConvolutionBackpropData", [
        quantized.output(0), ops.constant(np.ones((2, 3, 2), F32)).output(0)],
        dict(strides=[1], pads_begin=[0], pads_end=[0], dilations=[1], auto_pad="explicit",
             output_padding=[0]))
    layer.set_friendly_name("up")
    xml = tmp_path / "dynamic_range.xml"
    ov.save_model(ov.Model([layer.output(0)], [data, high]), str(xml))
    np.save(tmp_path / "x.npy", np.zeros((1, 2, 4), F32))
    check = run_cli("ir", "check", xml)
    assert check.returncode == 0 and "not followed by `ir run`" in check.stderr
    result = run_cli("ir", "run", xml, "--layer", "up", "--data", tmp_path / "x.npy", "-o",
                     tmp_path / "y.npy")
    assert_one_line_error(result, "input_high (input 2) is computed at run time")
    assert not (tmp_path / "y.npy").exists()
