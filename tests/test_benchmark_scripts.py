"""The benchmark helper scripts run (on the tiny suite layers, which take milliseconds)."""

import importlib.util
import pathlib

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
