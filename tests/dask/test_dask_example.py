"""``examples/volume.py`` runs end to end (small volume, one worker process) and its
result, read back from Zarr, equals the single-machine call (its ``--check``)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("distributed")
pytest.importorskip("zarr")

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "volume.py"


def test_the_volume_example_writes_the_exact_result(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(EXAMPLE.parents[1] / "src"), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--size", "24", "--chunk", "8", "--in-channels", "3",
         "--out-channels", "2", "--workers", "1", "--folder", str(tmp_path / "volume"),
         "--check"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "output (1, 2, 48, 48, 48)" in result.stdout
    assert "check: " in result.stdout
    assert (tmp_path / "volume" / "output.zarr").is_dir()
