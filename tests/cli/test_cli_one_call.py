"""``convtranspose run`` computes one layer once: a small one skips importing numba
when this machine's numba import time (a wisdom figure) is longer than the layer takes
on NumPy and BLAS, and the result is the same layer's either way."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from convtranspose._choose import wisdom
from oracle import canonical_result

#: Runs the command line in this interpreter and says whether numba was imported.
_SCRIPT = (
    "import sys\n"
    "from convtranspose.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('numba imported:', 'numba' in sys.modules)\n"
    "sys.exit(code)\n")


def _environment(wisdom_path) -> dict:
    """This process's environment with the wisdom file, no background compiling and
    no forced algorithm (which would keep numba)."""
    env = {**os.environ, wisdom.WISDOM_ENV: str(wisdom_path),
           "CONVTRANSPOSE_BACKGROUND_COMPILE": "off"}
    env.pop("CONVTRANSPOSE_ALGORITHM", None)
    return env


def _run(tmp_path, wisdom_path, *, size=6):
    rng = np.random.default_rng(size)
    data = rng.standard_normal((1, 3, size, size)).astype(np.float32)
    filter = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    np.save(tmp_path / "w.npy", filter)
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "run", "convolution_backprop_data", "--data",
         str(tmp_path / "x.npy"), "--filter", str(tmp_path / "w.npy"), "-o",
         str(tmp_path / "y.npy"), "--strides", "2", "--pads-begin", "1", "--pads-end", "1"],
        capture_output=True, text=True, env=_environment(wisdom_path), timeout=300)
    assert result.returncode == 0, result.stderr
    from convtranspose import shapes
    plan = shapes.convolution_backprop_data(data.shape, filter.shape, strides=2,
                                            pads_begin=1, pads_end=1)
    expected = canonical_result(data.astype(np.float64), filter.astype(np.float64)[None],
                                plan.axes)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5, atol=1e-5)
    return "numba imported: True" in result.stdout


def _figures(path):
    return json.loads(path.read_text()).get("figures", {}).get("machine", {})


def test_a_small_layer_skips_numba_once_its_import_time_is_known(tmp_path):
    store = tmp_path / "wisdom.json"
    # No figure yet: numba runs, and its import time becomes this machine's figure
    # (unless this interpreter imported it before the library: then it is not timed).
    _run(tmp_path, store)
    if "numba_import_seconds" not in _figures(store):
        pytest.skip("numba was imported before convtranspose here: its import is not timed")
    assert _figures(store)["numba_import_seconds"] > 0
    assert not _run(tmp_path, store)  # the same layer again: NumPy and BLAS alone


#: Prints whether a one-call process would keep numba for the layer :func:`_run` computes
#: (whether it then imports numba depends on which algorithm this machine measured fastest).
_TARGET_SCRIPT = (
    "from convtranspose import shapes\n"
    "from convtranspose._frontends.explain import one_call_target\n"
    "plan = shapes.convolution_backprop_data((1, 3, 6, 6), (3, 2, 3, 3), strides=2,\n"
    "                                        pads_begin=1, pads_end=1)\n"
    "print('numba kept:', one_call_target(plan, 'float32').numba)\n")


def _numba_kept(store) -> bool:
    result = subprocess.run([sys.executable, "-c", _TARGET_SCRIPT], capture_output=True,
                            text=True, env=_environment(store), timeout=300)
    assert result.returncode == 0, result.stderr
    return "numba kept: True" in result.stdout


def test_a_fast_numba_import_keeps_numba(tmp_path):
    store = tmp_path / "wisdom.json"
    _run(tmp_path, store)
    if "numba_import_seconds" not in _figures(store):
        pytest.skip("numba was imported before convtranspose here: its import is not timed")
    assert not _numba_kept(store)  # the measured import is longer than the layer
    document = json.loads(store.read_text())
    document["figures"]["machine"]["numba_import_seconds"] = 1e-9  # no layer is faster
    store.write_text(json.dumps(document))
    assert _numba_kept(store)
    _run(tmp_path, store)  # and the layer's result is the same (checked by _run)
