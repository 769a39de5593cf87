"""Helpers for the CLI and interop tests: run the real console script, write tiny IRs.

The console script is the one installed next to the interpreter running the tests
(``.venv/bin/convtranspose`` under ``make test``); ``python -m convtranspose`` is
the fallback when no script is installed there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "convtranspose"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "convtranspose"]


def run_cli(*args, cwd=None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``convtranspose ARGS`` in a subprocess; text stdout/stderr captured."""
    return subprocess.run(cli_command() + [str(a) for a in args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 2, exactly one stderr line starting with the program name, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("convtranspose"), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), (fragment, lines[0])


def _dims(shape) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


def write_ir(directory: Path, *, data_shape, weights: np.ndarray, declared,
             op: str = "ConvolutionBackpropData", output_shape=None, attributes=None,
             compress_weights: bool = False, name: str = "upsampling_node",
             filter_shape=None, stem: str = "model") -> Path:
    """A minimal OpenVINO IR v11 (Parameter -> [Const (-> Convert)] -> op -> Result).

    ``declared`` is written as the op's output dims, ``filter_shape`` (default: the
    weights' shape) as its filter port dims; the ``.bin`` holds the weights (f16 when
    ``compress_weights``) followed by ``output_shape`` as int64.
    """
    attributes = attributes or {}
    filter_shape = tuple(weights.shape if filter_shape is None else filter_shape)
    stored = weights.astype(np.float16 if compress_weights else np.float32)
    blob = stored.tobytes()
    element = "f16" if compress_weights else "f32"
    layers = [
        f'<layer id="0" name="data" type="Parameter" version="opset1">'
        f'<data shape="{",".join(map(str, data_shape))}" element_type="f32"/>'
        f'<output><port id="0" precision="FP32">{_dims(data_shape)}</port></output></layer>',
        f'<layer id="1" name="weights" type="Const" version="opset1">'
        f'<data element_type="{element}" shape="{", ".join(map(str, weights.shape))}"'
        f' offset="0" size="{len(blob)}"/>'
        f'<output><port id="0" precision="{element.upper().replace("F", "FP")}">'
        f'{_dims(weights.shape)}</port></output></layer>',
    ]
    edges = ['<edge from-layer="0" from-port="0" to-layer="4" to-port="0"/>']
    if compress_weights:
        layers.append(
            '<layer id="2" name="weights_decompressed" type="Convert" version="opset1">'
            '<data destination_type="f32"/>'
            f'<input><port id="0" precision="FP16">{_dims(weights.shape)}</port></input>'
            f'<output><port id="1" precision="FP32">{_dims(weights.shape)}</port></output></layer>')
        edges += ['<edge from-layer="1" from-port="0" to-layer="2" to-port="0"/>',
                  '<edge from-layer="2" from-port="1" to-layer="4" to-port="1"/>']
    else:
        edges.append('<edge from-layer="1" from-port="0" to-layer="4" to-port="1"/>')
    inputs = (f'<port id="0" precision="FP32">{_dims(data_shape)}</port>'
              f'<port id="1" precision="FP32">{_dims(filter_shape)}</port>')
    out_port = 2
    if output_shape is not None:
        values = np.asarray(output_shape, np.int64)
        layers.append(
            f'<layer id="3" name="output_shape" type="Const" version="opset1">'
            f'<data element_type="i64" shape="{len(values)}" offset="{len(blob)}"'
            f' size="{values.nbytes}"/>'
            f'<output><port id="0" precision="I64"><dim>{len(values)}</dim></port></output>'
            '</layer>')
        blob += values.tobytes()
        inputs += f'<port id="2" precision="I64"><dim>{len(values)}</dim></port>'
        edges.append('<edge from-layer="3" from-port="0" to-layer="4" to-port="2"/>')
        out_port = 3
    data_attributes = " ".join(f'{key}="{value}"' for key, value in attributes.items())
    layers.append(
        f'<layer id="4" name="{name}" type="{op}" version="opset1"><data {data_attributes}/>'
        f'<input>{inputs}</input>'
        f'<output><port id="{out_port}" precision="FP32">{_dims(declared)}</port></output></layer>')
    layers.append(
        f'<layer id="5" name="result" type="Result" version="opset1">'
        f'<input><port id="0" precision="FP32">{_dims(declared)}</port></input></layer>')
    edges.append(f'<edge from-layer="4" from-port="{out_port}" to-layer="5" to-port="0"/>')
    xml = ('<?xml version="1.0"?>\n<net name="test" version="11"><layers>' + "".join(layers)
           + "</layers><edges>" + "".join(edges) + "</edges></net>\n")
    path = Path(directory) / f"{stem}.xml"
    path.write_text(xml)
    path.with_suffix(".bin").write_bytes(blob)
    return path
