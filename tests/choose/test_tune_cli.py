"""``convtranspose tune`` and ``shape --explain --measure`` through the command line."""

import json
import os

import numpy as np

from cli_support import assert_one_line_error, run_cli, write_ir
from convtranspose._choose import wisdom
from convtranspose._choose.choice import split_label

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
    assert [(entry["algorithm"], entry.get("threads")) for entry in kept.values()] == [
        split_label(min(times, key=times.get))]
    # A second tune finds the wisdom: nothing is measured again.
    second = json.loads(run_cli("tune", str(xml), "--json", timeout=300).stdout)["layers"][0]
    assert second["decided_by"] == "wisdom"
    text = run_cli("tune", str(xml), timeout=300)
    assert "runner-up" in text.stdout and "upsampling_node" in text.stdout


def _tuned_model(tmp_path, monkeypatch):
    """A one-layer IR tuned once: ``(xml, wisdom file, its one wisdom key)``."""
    weights = np.random.default_rng(0).standard_normal((16, 8, 4, 4)).astype(np.float32)
    xml = write_ir(tmp_path, data_shape=(1, 16, 12, 12), weights=weights,
                   declared=(1, 8, 24, 24),
                   attributes={"strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1"})
    store = tmp_path / "wisdom.json"
    _with_wisdom(monkeypatch, store)
    first = run_cli("tune", str(xml), "--json", timeout=300)
    assert first.returncode == 0, first.stderr
    [key] = json.loads(store.read_text())["choices"]
    return xml, store, key


def _rewrite_choice(store, key, algorithm, times_ns):
    document = json.loads(store.read_text())
    document["choices"][key].update(algorithm=algorithm, times_ns=times_ns)
    document["choices"][key].pop("threads", None)
    store.write_text(json.dumps(document, sort_keys=True))


def test_tune_reports_the_choice_and_runner_up_by_time_after_a_reload(tmp_path,
                                                                      monkeypatch):
    # The wisdom file keeps the times by name: the report must not take their order for
    # the order of speed.  The choice is the alphabetically last name, the slowest the
    # first, so reading the file's order gives other names and numbers.
    xml, store, key = _tuned_model(tmp_path, monkeypatch)
    names = sorted(name for name in json.loads(store.read_text())["choices"][key]["times_ns"]
                   if split_label(name)[1] is None)  # on the target's threads
    assert len(names) >= 2
    chosen = names[-1]
    times = {chosen: 56_800, names[0]: 92_600}
    times.update({name: 76_000 + 10_000 * i for i, name in enumerate(names[1:-1])})
    _rewrite_choice(store, key, chosen, times)
    if len(names) > 2:
        runner, expected = names[1], f"runner-up {names[1]} 76 us (1.34x)"
    else:
        runner, expected = names[0], f"runner-up {names[0]} 92.6 us (1.63x)"
    text = run_cli("tune", str(xml), timeout=300)
    assert text.returncode == 0, text.stderr
    line = next(line for line in text.stdout.splitlines() if "upsampling_node" in line)
    assert line.endswith(f"{chosen} 56.8 us; {expected}"), line
    [layer] = json.loads(run_cli("tune", str(xml), "--json", timeout=300).stdout)["layers"]
    assert layer["decided_by"] == "wisdom"
    assert (layer["algorithm"], layer["time_ns"]) == (chosen, 56_800)
    assert layer["runner_up"] == [runner, times[runner]]
    assert list(layer["times_ns"]) == sorted(times, key=times.get)


def test_tune_force_measures_again_and_replaces_the_wisdom(tmp_path, monkeypatch):
    xml, store, key = _tuned_model(tmp_path, monkeypatch)
    names = sorted(json.loads(store.read_text())["choices"][key]["times_ns"])
    slow = {name: 1_000_000_000 + i for i, name in enumerate(names)}  # a busy machine: 1 s
    _rewrite_choice(store, key, names[0], slow)
    [kept] = json.loads(run_cli("tune", str(xml), "--json", timeout=300).stdout)["layers"]
    assert kept["decided_by"] == "wisdom" and kept["times_ns"] == slow
    forced = run_cli("tune", str(xml), "--force", "--json", timeout=300)
    assert forced.returncode == 0, forced.stderr
    [layer] = json.loads(forced.stdout)["layers"]
    assert layer["decided_by"] == "measured"
    assert max(layer["times_ns"].values()) < 1e8  # this layer takes microseconds
    entry = json.loads(store.read_text())["choices"][key]
    assert entry["times_ns"] == layer["times_ns"]
    fastest = split_label(min(entry["times_ns"], key=entry["times_ns"].get))
    assert (entry["algorithm"], entry.get("threads")) == fastest


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
    fastest = split_label(min(record["measured_ns"], key=record["measured_ns"].get))
    assert (record["algorithm"], record["threads"]) == fastest
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
    assert choice.measured and choice.label == choice.measured[0][0]
