"""The ``convtranspose`` console script, run for real in subprocesses.

Oracles: the output dims the specs' own XML examples declare, the direct loop in
``tests/oracle.py``, and the spec formulas written out by hand.
"""

import json
import re
import sys
import types

import numpy as np
import pytest

import convtranspose.cli as cli
from cli_support import assert_one_line_error, run_cli, write_ir
from oracle import crop, full_transposed_convolution

# The spec XML examples: (op, data, filter, output_shape input, attributes, declared output).
SPEC_EXAMPLES = [
    ("convolution_backprop_data", (1, 20, 224, 224), (20, 10, 3, 3), None,
     dict(strides="2,2", pads_begin="1,1", pads_end="1,1", dilations="1,1",
          output_padding="0,0", auto_pad="explicit"), (1, 10, 447, 447)),
    ("convolution_backprop_data", (1, 20, 2, 2), (20, 10, 3, 3), None,
     dict(strides="3,3", pads_begin="0,0", pads_end="0,0", dilations="1,1",
          output_padding="2,2", auto_pad="explicit"), (1, 10, 8, 8)),
    ("convolution_backprop_data", (1, 20, 224, 224), (20, 10, 3, 3), (450, 450),
     dict(strides="1,1", pads_begin="1,1", pads_end="1,1", dilations="1,1",
          output_padding="0,0", auto_pad="valid"), (1, 10, 450, 450)),
    ("group_convolution_backprop_data", (1, 20, 224, 224), (4, 5, 2, 3, 3), None,
     dict(strides="2,2", pads_begin="1,1", pads_end="1,1", dilations="1,1"), (1, 8, 447, 447)),
]


def _flags(attributes):
    flags = []
    for key, value in attributes.items():
        flags += ["--" + key.replace("_", "-"), value]
    return flags


@pytest.mark.parametrize("op,data,filter_,output_shape,attributes,declared", SPEC_EXAMPLES)
def test_shape_json_matches_the_spec_examples(op, data, filter_, output_shape, attributes,
                                              declared):
    args = ["shape", op, "--data-shape", ",".join(map(str, data)),
            "--filter-shape", ",".join(map(str, filter_)), "--json", *_flags(attributes)]
    if output_shape:
        args += ["--output-shape", ",".join(map(str, output_shape))]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert tuple(plan["output_shape"]) == declared
    explicit = attributes.get("auto_pad", "explicit") == "explicit"
    expected_pads = [int(v) for v in attributes["pads_begin"].split(",")] if explicit else [0, 0]
    assert plan["pads_begin"] == expected_pads
    assert plan["output_size"] == list(declared[2:])
    assert len(plan["offset"]) == 2


def test_shape_text_shows_shape_pads_and_each_axis_formula_with_numbers():
    result = run_cli("shape", "convolution_backprop_data", "--data-shape", "1,20,224,224",
                     "--filter-shape", "20,10,3,3", "--strides", "2,2", "--pads-begin", "1,1",
                     "--pads-end", "1,1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "output_shape  [1, 10, 447, 447]" in lines
    assert "pads_begin    [1, 1]" in lines and "pads_end      [1, 1]" in lines
    axes = [line for line in lines if line.startswith("axis ")]
    assert len(axes) == 2
    # F = (X-1)*s + (K-1)*d + 1 = 223*2 + 3 = 449, then minus the pads: 447.
    assert all("(224-1)*2" in line and "449" in line and "447" in line for line in axes)
    assert result.stderr == ""


def test_shape_onnx_and_onednn_follow_their_own_padding_rules():
    # oneDNN same_upper: total = K' - s = 1, the odd pad at the END; Y = X * s.
    result = run_cli("shape", "conv_transpose", "--data-shape", "1,8,8,16", "--filter-shape",
                     "3,3,16,4", "--strides", "2", "--auto-pad", "same_upper", "--json")
    plan = json.loads(result.stdout)
    assert plan["output_shape"] == [1, 16, 16, 4]
    assert (plan["pads_begin"], plan["pads_end"]) == ([0, 0], [1, 1])
    # ONNX explicit pads [b1, b2, e1, e2]: Y = (X-1)*s + K - b - e.
    result = run_cli("shape", "onnx_conv_transpose", "--data-shape", "1,1,3,3", "--filter-shape",
                     "1,2,3,3", "--strides", "3,2", "--pads", "1,2,1,2", "--bias-shape", "2",
                     "--group", "1", "--json")
    plan = json.loads(result.stdout)
    assert plan["output_shape"] == [1, 2, (3 - 1) * 3 + 3 - 2, (3 - 1) * 2 + 3 - 4]
    assert (plan["pads_begin"], plan["pads_end"]) == ([1, 2], [1, 2])


def test_run_convolution_backprop_data_matches_the_direct_loop(tmp_path):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    weights = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    np.save(tmp_path / "w.npy", weights)
    before = set(tmp_path.iterdir())
    result = run_cli("run", "convolution_backprop_data", "--data", tmp_path / "x.npy",
                     "--filter", tmp_path / "w.npy", "--strides", "2,1", "--pads-begin", "1,0",
                     "--pads-end", "0,1", "--dilations", "1,2", "--output-padding", "1,0",
                     "-o", tmp_path / "y.out")
    assert result.returncode == 0, result.stderr
    # Exactly the requested file, under exactly its name (numpy.save would add .npy).
    assert set(tmp_path.iterdir()) - before == {tmp_path / "y.out"}
    output = np.load(tmp_path / "y.out")
    full = full_transposed_convolution(data, weights[None], (2, 1), (1, 2))
    sizes = ((5 - 1) * 2 + 3 + 1 - 1, (4 - 1) * 1 + (2 - 1) * 2 + 1 - 1)
    expected = crop(full, (1, 0), sizes)
    assert output.dtype == np.float32 and output.shape == (2, 2) + sizes
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)


def test_run_onnx_with_bias_and_groups_matches_the_direct_loop(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((1, 4, 3, 3))
    weights = rng.standard_normal((4, 3, 2, 2))  # (C, M/group, K...), group 2 -> M = 6
    bias = rng.standard_normal(6)
    for name, array in (("x", data), ("w", weights), ("b", bias)):
        np.save(tmp_path / f"{name}.npy", array)
    result = run_cli("run", "onnx_conv_transpose", "--data", tmp_path / "x.npy", "--filter",
                     tmp_path / "w.npy", "--bias", tmp_path / "b.npy", "--group", "2",
                     "--strides", "2,2", "--pads", "0,1,1,0", "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    assert "y.npy" in result.stdout
    # (C, M/g, K) -> (G, C/g, M/g, K): group g owns input channels [2g, 2g+2).
    full = full_transposed_convolution(data, weights.reshape(2, 2, 3, 2, 2), (2, 2), (1, 1))
    full_size = (3 - 1) * 2 + 2  # F = (X-1)*s + K
    expected = crop(full, (0, 1), (full_size - 1, full_size - 1)) + bias[None, :, None, None]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-12)


# The frameworks' dialects with their own flags: (op, data, filter, flags, output shape by
# each framework's documented formula).
FRAMEWORK_SHAPES = [
    # PyTorch: Y = (X-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1
    ("torch_conv_transpose", "1,8,5,5", "8,2,3,3",
     ["--stride", "2", "--padding", "1", "--output-padding", "1", "--groups", "2"],
     [1, 4, 4 * 2 - 2 + 2 + 1 + 1, 10]),
    ("torch_conv_transpose", "1,1,4", "1,1,3", ["--stride", "3", "--output-size", "12"],
     [1, 1, 12]),
    # TensorRT SAME_UPPER: O = min(I*S, (I-1)*S + DK)
    ("tensorrt_deconvolution", "1,2,3,3", "2,4,3,3",
     ["--stride-nd", "2", "--padding-mode", "SAME_UPPER", "--num-groups", "2"], [1, 8, 6, 6]),
    ("tensorrt_deconvolution", "1,2,3,3", "2,4,3,3",
     ["--stride-nd", "2", "--pre-padding", "1,0", "--post-padding", "0,2"],
     [1, 4, 7 - 1, 7 - 2]),
    # TensorFlow: the output shape is given (and checked)
    ("tf_conv_transpose", "1,2,3,3", "3,3,4,2",
     ["--output-shape", "1,4,5,6", "--strides", "2", "--data-format", "NCHW",
      "--padding", "[[0,0],[0,0],[1,1],[0,1]]"], [1, 4, 5, 6]),
    # Keras "same" with output_padding p: Y = (X-1)*s + K % 2 + p
    ("keras_conv_transpose", "1,3,3,2", "3,3,4,2",
     ["--strides", "2", "--padding", "same", "--output-padding", "1"], [1, 6, 6, 4]),
    ("keras_conv_transpose", "1,2,3", "2,4,2",
     ["--dilation-rate", "2", "--data-format", "channels_first"], [1, 4, 3 + 2]),
    # TFLite: the output shape is given
    ("tflite_transpose_conv", "1,3,3,2", "4,3,3,2",
     ["--output-shape", "1,6,5,4", "--stride-h", "2", "--stride-w", "2", "--padding", "SAME"],
     [1, 6, 5, 4]),
    # JAX: Y = F + a + b - 2 (K' - 1), F = (X-1)*s + K'
    ("jax_conv_transpose", "1,2,3,3", "4,2,3,3",
     ["--strides", "2,2", "--padding", "[[1,2],[0,1]]", "--dimension-numbers",
      "NCHW,OIHW,NCHW"], [1, 4, 7 + 3 - 4, 7 + 1 - 4]),
    ("jax_conv_transpose", "1,3,3,2", "3,3,4,2",
     ["--strides", "2,1", "--padding", "SAME", "--transpose-kernel"], [1, 6, 3, 4]),
]


@pytest.mark.parametrize("op,data,filter_,flags,declared", FRAMEWORK_SHAPES)
def test_shape_of_the_frameworks_dialects_takes_their_own_flags(op, data, filter_, flags,
                                                                 declared):
    result = run_cli("shape", op, "--data-shape", data, "--filter-shape", filter_, "--json",
                     *flags)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output_shape"] == declared


def test_run_torch_conv_transpose_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    arrays = dict(x=rng.standard_normal((2, 4, 3, 5)), w=rng.standard_normal((4, 3, 2, 3)),
                  b=rng.standard_normal(6))
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    result = run_cli("run", "torch_conv_transpose", "--data", tmp_path / "x.npy", "--filter",
                     tmp_path / "w.npy", "--bias", tmp_path / "b.npy", "--stride", "2,3",
                     "--padding", "1,0", "--output-padding", "1,2", "--groups", "2",
                     "--dilation", "1,2", "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    expected = torch.nn.functional.conv_transpose2d(
        *(torch.from_numpy(arrays[k]) for k in "xwb"), stride=(2, 3), padding=(1, 0),
        output_padding=(1, 2), groups=2, dilation=(1, 2)).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-12, atol=1e-12)


def test_run_jax_conv_transpose_matches_jax(tmp_path):
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 3)).astype(np.float32)  # OIHW
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    result = run_cli("run", "jax_conv_transpose", "--data", tmp_path / "x.npy", "--filter",
                     tmp_path / "w.npy", "--strides", "2,1", "--padding", "[[1,2],[-1,6]]",
                     "--rhs-dilation", "1,2", "--dimension-numbers", "NCHW,OIHW,NCHW",
                     "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    expected = np.asarray(jax.lax.conv_transpose(
        x, w, (2, 1), ((1, 2), (-1, 6)), rhs_dilation=(1, 2),
        dimension_numbers=("NCHW", "OIHW", "NCHW")))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5, atol=1e-5)


def test_run_tflite_transpose_conv_matches_the_direct_loop(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 3, 2))                     # NHWC
    w = rng.standard_normal((4, 4, 3, 2))                     # OHWI
    b = rng.standard_normal(4)
    for name, array in (("x", x), ("w", w), ("b", b)):
        np.save(tmp_path / f"{name}.npy", array)
    result = run_cli("run", "tflite_transpose_conv", "--data", tmp_path / "x.npy", "--filter",
                     tmp_path / "w.npy", "--bias", tmp_path / "b.npy", "--output-shape",
                     "1,6,5,4", "--stride-h", "2", "--stride-w", "2", "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    # SAME: X = ceil(Y/s); the crop max((X-1)*s + K - Y, 0), its odd element at the end:
    # H: (3-1)*2 + 4 - 6 = 2 -> 1 before; W: (3-1)*2 + 3 - 5 = 2 -> 1 before
    full = full_transposed_convolution(np.moveaxis(x, -1, 1), w.transpose(3, 0, 1, 2)[None],
                                       (2, 2), (1, 1))
    expected = np.moveaxis(crop(full, (1, 1), (6, 5)), 1, -1) + b
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-12)


def test_spec_ir_example_passes_ir_check(tmp_path):
    pytest.importorskip("defusedxml")
    weights = np.ones((20, 10, 3, 3), np.float32)
    xml = write_ir(tmp_path, data_shape=(1, 20, 224, 224), weights=weights,
                   declared=(1, 10, 450, 450), output_shape=(450, 450),
                   attributes=dict(dilations="1,1", pads_begin="1,1", pads_end="1,1",
                                   strides="1,1", output_padding="0,0", auto_pad="valid"))
    result = run_cli("ir", "check", xml)
    assert result.returncode == 0, result.stderr
    assert "upsampling_node" in result.stdout and "[1,10,450,450]" in result.stdout


@pytest.mark.parametrize("command", [
    [], ["shape"], ["run"], ["ir"], ["ir", "check"], ["ir", "run"], ["onnx"],
    ["onnx", "check"], ["onnx", "run"], ["demo"],
])
def test_every_command_has_help_with_examples(command):
    result = run_cli(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "example" in result.stdout and "usage: convtranspose" in result.stdout


def test_python_dash_m_runs_the_same_cli():
    import subprocess

    result = subprocess.run([sys.executable, "-m", "convtranspose", "shape",
                             "convolution_backprop_data", "--data-shape", "1,20,2,2",
                             "--filter-shape", "20,10,3,3", "--strides", "3",
                             "--output-padding", "2", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output_shape"] == [1, 10, 8, 8]


def test_demo_still_runs():
    result = run_cli("demo", "--repeat", "1")
    assert result.returncode == 0, result.stderr
    assert "(1, 10, 447, 447)" in result.stdout
    # The array function's time, then a prepared layer's (ct.prepare) of the same layer.
    assert re.search(r"\n  time +\d+\.\d+ ms \(median of 1\)\n  prepared +\d+\.\d+ ms"
                     r" \(median of 1, ct\.prepare\)\n", result.stdout), result.stdout
    assert re.search(r"\n  algorithm +[a-z0-9-]+", result.stdout), result.stdout


@pytest.mark.parametrize("args,fragment", [
    (["shape", "deconv", "--data-shape", "1,2,3", "--filter-shape", "2,2,3"], "invalid choice"),
    (["shape", "convolution_backprop_data", "--data-shape", "1,2,3", "--filter-shape", "2,2,3",
      "--pads", "1,1"], "--pads is not an attribute of convolution_backprop_data"),
    (["shape", "convolution_backprop_data", "--data-shape", "1,2,3", "--filter-shape", "2,2,3",
      "--groups", "2"], "no groups attribute"),
    (["shape", "convolution_backprop_data", "--data-shape", "1,3,3", "--filter-shape", "2,2,3"],
     "channels"),
    (["shape", "convolution_backprop_data", "--data-shape", "1,2,3", "--filter-shape", "2,2,x"],
     "integers"),
    (["shape", "convolution_backprop_data", "--data-shape=1,-2,3", "--filter-shape", "2,2,3"],
     "negative"),
    (["shape", "convolution_backprop_data", "--data-shape", "1,2,99999999999",
      "--filter-shape", "2,99999999999,3"], "overflows"),
    (["run", "convolution_backprop_data", "--data", "missing.npy", "--filter", "w.npy",
      "-o", "y.npy"], "does not exist"),
    (["shape", "conv_transpose", "--data-shape", "1,3,2", "--filter-shape", "3,2,2",
      "--stride", "2"], "--stride is not an attribute of conv_transpose"),
    (["shape", "tf_conv_transpose", "--data-shape", "1,3,2", "--filter-shape", "3,2,2",
      "--strides", "2"], "tf_conv_transpose needs --output-shape"),
    (["shape", "jax_conv_transpose", "--data-shape", "1,3,2", "--filter-shape", "3,2,2",
      "--strides", "2", "--padding", "SAME", "--bias-shape", "2"], "has no bias"),
    (["shape", "tensorrt_deconvolution", "--data-shape", "1,2,3,3", "--filter-shape",
      "2,2,3,3", "--groups", "2"], "it takes --num-output-maps"),
])
def test_bad_input_is_one_line_and_exit_2(args, fragment, tmp_path):
    result = run_cli(*args, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert list(tmp_path.iterdir()) == []


def test_missing_optional_dependencies_are_one_line_errors(tmp_path, monkeypatch, capsys):
    xml = tmp_path / "m.xml"
    xml.write_text("<net/>")
    monkeypatch.setitem(sys.modules, "defusedxml", None)
    monkeypatch.setitem(sys.modules, "defusedxml.ElementTree", None)
    monkeypatch.setitem(sys.modules, "onnx", None)
    assert cli.main(["ir", "check", str(xml)]) == 2
    assert cli.main(["onnx", "check", str(tmp_path / "m.onnx")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2
    assert "defusedxml" in lines[0] and "pip install '.[interop]' in a checkout" in lines[0]
    assert "'onnx'" in lines[1]


def test_bench_forwards_every_argument(monkeypatch, tmp_path):
    received = []
    fake = types.ModuleType("convtranspose._cli.bench")
    fake.main = lambda argv: received.append(argv) or 0
    monkeypatch.setitem(sys.modules, "convtranspose._cli.bench", fake)
    assert cli.main(["bench", "--quick", "--out", str(tmp_path)]) == 0
    assert received == [["--quick", "--out", str(tmp_path)]]
    fake.main = lambda argv: 3
    assert cli.main(["bench"]) == 3


def test_bench_without_its_module_is_a_one_line_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "convtranspose._cli.bench", None)
    assert cli.main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "convtranspose._cli.bench" in err[0]


def test_the_shape_examples_in_the_help_run():
    text = run_cli("shape", "--help").stdout
    examples = text[text.index("examples:"):].replace("\\\n", " ").splitlines()[1:]
    commands = [line.split()[1:] for line in examples if line.strip().startswith("convtranspose")]
    assert len(commands) == 6
    for command in commands:
        result = run_cli(*command)
        assert result.returncode == 0, (command, result.stderr)
        assert result.stdout.strip()


def test_run_with_mismatched_dtypes_is_a_one_line_error(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 2, 3), np.float32))
    np.save(tmp_path / "w.npy", np.ones((2, 2, 3), np.float64))
    result = run_cli("run", "convolution_backprop_data", "--data", tmp_path / "x.npy",
                     "--filter", tmp_path / "w.npy", "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "dtype float32", "float64")
    assert not (tmp_path / "y.npy").exists()
