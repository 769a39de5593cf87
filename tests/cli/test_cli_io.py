"""The command line's input and output: ``--version``, ``check`` on models with nothing
to check or that are no models, ``-o -``, bfloat16 ``.npy`` files, ``--json`` on the
commands that write a result.

Oracles: the direct loop of ``tests/oracle.py`` and the hand-computed worked example
(data ``[1, 2, 3]``, filter ``[1, 10, 100]``, stride 2).
"""

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from cli_support import assert_one_line_error, cli_command, run_cli, write_ir
from oracle import full_transposed_convolution

ROOT = Path(__file__).resolve().parents[2]
# data [1, 2, 3], filter [1, 10, 100], stride 2: the full result, by hand
WORKED = np.array([1, 10, 102, 20, 203, 30, 300], np.float64)


def _worked_example(tmp_path, dtype=np.float32):
    np.save(tmp_path / "x.npy", np.array([[[1, 2, 3]]], dtype))
    np.save(tmp_path / "w.npy", np.array([[[1, 10, 100]]], dtype))
    return ["run", "convolution_backprop_data", "--data", tmp_path / "x.npy", "--filter",
            tmp_path / "w.npy", "--strides", "2"]


# -- the version --------------------------------------------------------------------

def test_version_is_defined_once_and_printed_by_the_cli():
    import convtranspose

    # (read as text: tomllib is Python 3.11+, the package supports 3.10)
    project = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]$', project, re.M)
    table = project.split("\n[project]\n")[1].split("\n[")[0]
    assert not re.search(r"^version\s*=", table, re.M)
    assert 'version = {attr = "convtranspose._version.__version__"}' in project
    definitions = [path for path in (ROOT / "src").rglob("*.py")
                   if "__version__ = " in path.read_text()]
    assert definitions == [ROOT / "src" / "convtranspose" / "_version.py"]
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout == f"convtranspose {convtranspose.__version__}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and "## [0.1.0]" in changelog


def test_license_is_the_apache_2_text_the_metadata_names():
    project = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "Apache-2.0"$', project, re.M)
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 170
    assert (ROOT / "src" / "convtranspose" / "py.typed").exists()
    assert 'convtranspose = ["py.typed"]' in project  # [tool.setuptools.package-data]


# -- check: nothing to check, not a model --------------------------------------------

def test_ir_check_without_transposed_convolutions_exits_3(tmp_path):
    pytest.importorskip("defusedxml")
    xml = tmp_path / "plain.xml"
    xml.write_text(
        '<?xml version="1.0"?><net name="plain" version="11"><layers>'
        '<layer id="0" name="x" type="Parameter" version="opset1"><data shape="1,3"'
        ' element_type="f32"/><output><port id="0"><dim>1</dim><dim>3</dim></port></output>'
        '</layer><layer id="1" name="out" type="Result" version="opset1"><input>'
        '<port id="0"><dim>1</dim><dim>3</dim></port></input></layer></layers><edges>'
        '<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/></edges></net>')
    result = run_cli("ir", "check", xml)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "nothing to check" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("ir", "check", xml, "--json")
    assert result.returncode == 3 and json.loads(result.stdout)["layers"] == []


def test_onnx_check_without_conv_transpose_exits_3(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph), str(path))
    result = run_cli("onnx", "check", path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "nothing to check" in result.stderr and "no ConvTranspose nodes" in result.stderr


@pytest.mark.parametrize("command, name, content, fragment", [
    ("onnx", "empty.onnx", b"", "empty (0 bytes)"),
    ("onnx", "text.onnx", b"hello, world\n", "not a readable ONNX model"),
    ("onnx", "tag.onnx", b"\x08\x07", "holds no graph"),  # a valid message: ir_version 7
    ("ir", "empty.xml", b"", "not well-formed"),
    ("ir", "html.xml", b"<html/>", "not an OpenVINO IR"),
])
def test_check_on_a_file_that_is_no_model_is_bad_input(tmp_path, command, name, content,
                                                       fragment):
    pytest.importorskip("onnx" if command == "onnx" else "defusedxml")
    path = tmp_path / name
    path.write_bytes(content)
    assert_one_line_error(run_cli(command, "check", path), fragment)


def _relu_onnx(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    onnx.save(helper.make_model(graph), str(path))
    return path


@pytest.mark.parametrize("name", ["model.onnx", "model"])  # by its name, by its bytes
def test_ir_commands_on_an_onnx_model_name_the_onnx_command(tmp_path, name):
    pytest.importorskip("defusedxml")
    path = _relu_onnx(tmp_path / name)
    assert path.read_bytes()[:1] == b"\x08"  # ModelProto's ir_version comes first
    assert_one_line_error(run_cli("ir", "check", path), "not well-formed XML",
                          f"{name} looks like an ONNX model: convtranspose onnx check {path}")
    assert_one_line_error(run_cli("ir", "run", path, "--layer", "up", "--data", "x.npy",
                                  "-o", "y.npy"),
                          f"convtranspose onnx run {path} --node NAME --data X.npy -o Y.npy")


def test_onnx_commands_on_an_ir_name_the_ir_command(tmp_path):
    pytest.importorskip("onnx")
    weights = np.ones((2, 1, 3, 3), np.float32)
    xml = write_ir(tmp_path, data_shape=(1, 2, 4, 4), weights=weights, declared=(1, 1, 6, 6))
    assert_one_line_error(run_cli("onnx", "check", xml), "model.xml looks like an OpenVINO"
                          f" IR: convtranspose ir check {xml}")
    assert_one_line_error(run_cli("onnx", "run", xml, "--node", "up", "--data", "x.npy",
                                  "-o", "y.npy"),
                          f"convtranspose ir run {xml} --layer NAME --data X.npy -o Y.npy")
    # A file that looks like neither gets no suggestion.
    text = tmp_path / "notes.txt"
    text.write_text("hello, world\n")
    result = run_cli("onnx", "check", text)
    assert_one_line_error(result, "not a readable ONNX model")
    assert "looks like" not in result.stderr


# -- -o -, --json ---------------------------------------------------------------------

def test_dash_o_dash_writes_the_npy_to_stdout_and_nothing_else(tmp_path):
    import subprocess

    arguments = _worked_example(tmp_path) + ["-o", "-"]
    result = subprocess.run(cli_command() + [str(a) for a in arguments], capture_output=True,
                            cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    output = np.load(io.BytesIO(result.stdout))
    np.testing.assert_array_equal(output, WORKED.astype(np.float32).reshape(1, 1, 7))
    assert b"-: float32 [1, 1, 7]" in result.stderr
    assert not (tmp_path / "-").exists()


def test_dash_o_dash_with_json_is_bad_input(tmp_path):
    result = run_cli(*_worked_example(tmp_path), "-o", "-", "--json")
    assert_one_line_error(result, "-o -", "--json")


def test_run_json_describes_the_file_written(tmp_path):
    result = run_cli(*_worked_example(tmp_path, np.float64), "--pads-begin", "1",
                     "--pads-end", "2", "-o", tmp_path / "y.npy", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    expected = WORKED[1:-2].reshape(1, 1, 4)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)
    assert record == {"output": str(tmp_path / "y.npy"), "dtype": "float64", "shape": [1, 1, 4],
                      "op": "convolution_backprop_data", "pads_begin": [1], "pads_end": [2],
                      "notes": []}


def test_ir_run_json_names_the_layer(tmp_path):
    pytest.importorskip("defusedxml")
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    data = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    xml = write_ir(tmp_path, data_shape=data.shape, weights=weights, declared=(1, 3, 9, 9),
                   attributes=dict(strides="2,2", pads_begin="0,0", pads_end="0,0",
                                   dilations="1,1"))
    np.save(tmp_path / "x.npy", data)
    result = run_cli("ir", "run", xml, "--layer", "upsampling_node", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["layer"] == "upsampling_node" and record["shape"] == [1, 3, 9, 9]
    expected = full_transposed_convolution(data, weights[None], (2, 2), (1, 1))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5, atol=1e-5)


# -- bfloat16 files -------------------------------------------------------------------

def test_bfloat16_npy_files_need_dtype_and_the_result_loads_back_as_bfloat16(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(4)
    # Small integers: every product and sum is exact in bfloat16's 8-bit significand.
    data = rng.integers(-3, 4, (1, 2, 4, 3)).astype(ml_dtypes.bfloat16)
    weights = rng.integers(-3, 4, (2, 2, 2, 2)).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", data)  # NumPy stores bfloat16 as raw 2-byte values (|V2)
    np.save(tmp_path / "w.npy", weights)
    assert np.load(tmp_path / "x.npy").dtype.kind == "V"
    arguments = ["run", "convolution_backprop_data", "--data", tmp_path / "x.npy", "--filter",
                 tmp_path / "w.npy", "--strides", "2", "-o", tmp_path / "y.npy"]
    assert_one_line_error(run_cli(*arguments), "--dtype bfloat16")
    result = run_cli(*arguments, "--dtype", "bfloat16")
    assert result.returncode == 0, result.stderr
    output = np.load(tmp_path / "y.npy")
    assert output.dtype == ml_dtypes.bfloat16
    full = full_transposed_convolution(data.astype(np.float64), weights.astype(np.float64)[None],
                                       (2, 2), (1, 1))
    np.testing.assert_array_equal(output.astype(np.float64), full)
    # The result (its header says bfloat16) feeds the next run; sums of integers stay
    # exact in float32 and are rounded once to bfloat16, as the float64 loop's are.
    again = run_cli("run", "convolution_backprop_data", "--data", tmp_path / "y.npy",
                    "--filter", tmp_path / "w.npy", "--dtype", "bfloat16", "-o", tmp_path / "z.npy")
    assert again.returncode == 0, again.stderr
    second = np.load(tmp_path / "z.npy")
    expected = full_transposed_convolution(full, weights.astype(np.float64)[None], (1, 1), (1, 1))
    assert second.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(second, expected.astype(ml_dtypes.bfloat16))


def test_dtype_must_match_the_files(tmp_path):
    result = run_cli(*_worked_example(tmp_path), "--dtype", "float16", "-o", tmp_path / "y.npy")
    assert_one_line_error(result, "holds float32, not --dtype float16")
    assert not (tmp_path / "y.npy").exists()
