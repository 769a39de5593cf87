"""``convtranspose translate``: text, ``--json`` whose attributes really compute the
source layer, and one-line refusals."""

from __future__ import annotations

import json

import numpy as np

import convtranspose as ct
import oracle
from cli_support import assert_one_line_error, run_cli


def test_json_attributes_compute_the_source_layer():
    result = run_cli("translate", "onnx_conv_transpose", "conv_transpose", "--data-shape",
                     "1,2,3,4", "--filter-shape", "2,3,2,2", "--strides", "2",
                     "--pads", "0,1,2,0", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["exact"] and record["notes"] == []
    rng = np.random.default_rng(0)
    x, w = rng.integers(-3, 4, (1, 2, 3, 4)).astype(float), rng.integers(-3, 4, (2, 3, 2, 2))
    w = w.astype(float)
    ours = ct.conv_transpose(x, w, **record["attributes"])
    expected = oracle.onnx_conv_transpose(x, w, strides=[2, 2], pads=[0, 1, 2, 0])
    np.testing.assert_array_equal(ours, expected)


def test_text_names_the_crop_torch_needs():
    result = run_cli("translate", "onnx_conv_transpose", "torch_conv_transpose",
                     "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2",
                     "--pads", "1,2")
    assert result.returncode == 0, result.stderr
    assert "padding=[1]" in result.stdout and "drop the last 1" in result.stdout


def test_exact_refuses_in_one_line_naming_the_workaround():
    result = run_cli("translate", "onnx_conv_transpose", "torch_conv_transpose",
                     "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2",
                     "--pads", "1,2", "--exact")
    assert_one_line_error(result, "pads symmetrically", "drop the last 1")


def test_a_flag_of_another_dialect_is_refused():
    result = run_cli("translate", "torch_conv_transpose", "onnx_conv_transpose",
                     "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2")
    assert_one_line_error(result, "--strides is not an argument of torch_conv_transpose")
