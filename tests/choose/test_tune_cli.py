"""``convtranspose tune`` and ``shape --explain --measure`` through the command line."""

import json
import os

import numpy as np

from cli_support import assert_one_line_error, run_cli, write_ir
from convtranspose._choose import wisdom

SHAPE_ARGS = ("shape", "convolution_backprop_data", "--data-shape", "1,16,12,12",
              "--filter-shape", "16,8,4,4", "--strides", "2", "--pads-begin", "1",
              "--pads-end", "1")


def _with_wisdom(monkeypatch, path):
    monkeypatch.setenv(wisdom.WISDOM_ENV, str(path))
    monkeypatch.setenv("CONVTRANSPOSE_PLANNING", "measure")


def test_tune_measures_each_layer_and_keeps_the_wisdom(tmp_path, monkeypatch):
    weights = np.random.default_rng(0).standard_normal((16, 8, 4, 4)).astype(np.float32)
    xml = write_ir(tmp_path, data_shape=(1, 16, 12, 12), weights=weights,
                   declared=(1, 8, 24, 24),
                   attributes={"strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1"})
    store = tmp_path / "wisdom.json"
    _with_wisdom(monkeypatch, store)
    first = run_cli("tune", str(xml), "--json", timeout=300)
    assert first.returncode == 0, first.stderr
    [layer] = json.loads(first.stdout)["layers"]
    assert layer["decided_by"] == "measured" and len(layer["times_ns"]) >= 2
    times = layer["times_ns"]
    assert times[min(times, key=times.get)] == min(times.values())
    kept = json.loads(store.read_text())["choices"]
    assert [entry["algorithm"] for entry in kept.values()] == [min(times, key=times.get)]
    # A second tune finds the wisdom: nothing is measured again.
    second = json.loads(run_cli("tune", str(xml), "--json", timeout=300).stdout)["layers"][0]
    assert second["decided_by"] == "wisdom"
    text = run_cli("tune", str(xml), timeout=300)
    assert "runner-up" in text.stdout and "upsampling_node" in text.stdout


def test_tune_refuses_a_missing_model(tmp_path):
    result = run_cli("tune", str(tmp_path / "absent.xml"))
    assert_one_line_error(result, "absent.xml")


def test_explain_measure_shows_both_columns(tmp_path, monkeypatch):
    _with_wisdom(monkeypatch, tmp_path / "wisdom.json")
    result = run_cli(*SHAPE_ARGS, "--explain", "--measure", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "estimate" in result.stdout and "measured" in result.stdout
    record = json.loads(run_cli(*SHAPE_ARGS, "--explain", "--json").stdout)["explain"]
    assert record["decided_by"] == "wisdom" and record["measured_ns"]
    assert record["algorithm"] == min(record["measured_ns"], key=record["measured_ns"].get)
    assert os.path.exists(tmp_path / "wisdom.json")


def test_measure_without_explain_is_refused():
    assert_one_line_error(run_cli(*SHAPE_ARGS, "--measure"), "--measure goes with --explain")


def test_explain_measures_a_channels_last_plan_on_operands_of_its_own_shapes(tmp_path,
                                                                           monkeypatch):
    # A channels-last plan's data_shape is already (N, X..., C): measuring on operands
    # permuted again would hand every kernel data of the wrong shape.
    import convtranspose as ct

    _with_wisdom(monkeypatch, tmp_path / "wisdom.json")
    ct.forget_wisdom()
    plan = ct.shapes.conv_transpose((1, 9, 6, 12), (3, 3, 5, 12), strides=[2, 1],
                                    pads_begin=[1, 0], pads_end=[1, 0], data_format="NXC",
                                    weights_format="XOI")
    try:
        choice = ct.explain(plan, measure=True).choice
    finally:
        ct.forget_wisdom()
    assert choice.measured and choice.algorithm == choice.measured[0][0]
