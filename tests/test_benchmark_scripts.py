"""The benchmark helper scripts run (on the tiny suite layers, which take milliseconds),
and the calibration fit recovers a known table from synthetic measurements."""

import importlib.util
import pathlib

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_profile_layers_prints_a_row_per_selected_layer(capsys):
    assert _load("profile_layers").main(["--layers", "tiny", "--pause", "0.001"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny")]
    assert len(rows) == 2  # NCX and NXC
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == "dense"
        assert all(float(cell) > 0 for cell in cells[2:5])


def test_calibration_fit_recovers_a_known_scale_and_overhead():
    # Measurements made from (scale, overhead) on the fit's overhead grid: the fit
    # must give them back, and the loss of choices made with them must be none.
    calibrate = _load("calibrate")
    true = {"phase-ncx": (0.5, 0.02), "direct": (1.7, 0.0)}
    results = []
    for i, (raw_phase, raw_direct) in enumerate([(0.4, 3.0), (2.0, 0.9), (9.0, 4.0),
                                                 (30.0, 25.0), (0.1, 0.05)]):
        raw = {"phase-ncx": raw_phase, "direct": raw_direct}
        measured = {name: true[name][0] * value + true[name][1] for name, value in raw.items()}
        results.append({"layer": f"layer {i}", "raw_ms": raw, "measured_ms": measured})
    table = calibrate.fit(results)
    for name, (scale, overhead_ms) in true.items():
        assert table[name][0] == pytest.approx(scale, rel=2e-3)
        assert table[name][1] == round(overhead_ms * 1e6)
    assert calibrate.choice_losses(results, table) == pytest.approx([1.0] * len(results))
    # The raw estimates alone choose wrongly where the scales reverse the order.
    losses = calibrate.choice_losses(results, {})
    assert max(losses) > 1.0
