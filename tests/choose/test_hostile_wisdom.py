"""Hostile wisdom files, cache folders and switches: a FIFO, a device, an oversized or
deeply nested file, entries of the wrong shape, a folder others can write, a planted
symlink, an algorithm switch naming no algorithm.  Each call still returns the oracle's
result, within a time limit, with one warning, or raises the documented error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._choose import wisdom
from convtranspose._runtime import cache
from oracle import canonical_result

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "src")

_CALL = """
import warnings
import numpy as np
import convtranspose as ct
rng = np.random.default_rng(3)
x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):
        y = ct.convolution_backprop_data(x, w, strides=2, pads_begin=1, pads_end=1)
np.save({out!r}, y)
print(sum("wisdom" in str(w.message) for w in caught))
"""


def _expected():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    plan = ct.shapes.convolution_backprop_data(x.shape, w.shape, strides=2, pads_begin=1,
                                               pads_end=1)
    return canonical_result(x.astype(np.float64), w.astype(np.float64)[None], plan.axes)


def _hostile(kind: str, path, tmp_path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "oversized":
        document = wisdom.new_document({}, {})
        path.write_text(json.dumps(document) + " " * (wisdom.WISDOM_MAX_BYTES + 1))
    elif kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "bad entries":  # every entry of a real file with unreadable times
        subprocess.run([sys.executable, "-c", textwrap.dedent(
            _CALL.format(out=str(tmp_path / "first.npy")))], env=_environment(path),
            check=True, timeout=600, capture_output=True)
        document = json.loads(path.read_text())
        assert document["choices"]
        for entry in document["choices"].values():
            entry["times_ns"] = [1, 2]
        path.write_text(json.dumps(document))


def _environment(path) -> dict:
    return {**os.environ, "PYTHONPATH": SOURCE, "CONVTRANSPOSE_WISDOM": str(path),
            "CONVTRANSPOSE_PLANNING": "measure"}


@pytest.mark.skipif(os.name != "posix", reason="FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "device", "oversized", "nested", "bad entries"])
def test_a_hostile_wisdom_file_costs_one_warning(tmp_path, kind):
    path, out = tmp_path / "wisdom.json", tmp_path / "y.npy"
    _hostile(kind, path, tmp_path)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_CALL.format(out=str(out)))],
                          env=_environment(path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"], done.stdout + done.stderr[-2000:]
    np.testing.assert_allclose(np.load(out), _expected(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(os.name != "posix", reason="owners and modes are POSIX")
def test_a_cache_folder_others_can_write_is_not_used(tmp_path, monkeypatch):
    shared, own = tmp_path / "shared", tmp_path / "own"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv(cache.CACHE_ENV, str(shared))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.cache_dir() is None
    assert len(caught) == 1 and str(shared) in str(caught[0].message)
    monkeypatch.setenv(cache.CACHE_ENV, str(own))
    assert cache.cache_dir() == str(own)
    assert os.stat(own).st_mode & 0o077 == 0  # made for this user alone


@pytest.mark.skipif(os.name != "posix", reason="symbolic links and flock are POSIX")
def test_a_planted_lock_symlink_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, str(tmp_path / "wisdom.json") + ".lock")
    with pytest.raises(OSError), cache.file_lock(str(tmp_path / "wisdom.json")):
        pass
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("variable", ["CONVTRANSPOSE_ALGORITHM",
                                      "CONVTRANSPOSE_BACKWARD_ALGORITHM"])
def test_an_algorithm_switch_naming_no_algorithm_is_a_library_error(monkeypatch, variable):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    calls = {  # the forward pass reads the first switch, the gradients the second
        "CONVTRANSPOSE_ALGORITHM": lambda: ct.convolution_backprop_data(x, w, strides=2),
        "CONVTRANSPOSE_BACKWARD_ALGORITHM": lambda: ct.vjp.convolution_backprop_data(
            x, w, np.ones((1, 3, 9, 9), np.float32), strides=2)}
    monkeypatch.setenv(variable, "garbage")
    with pytest.raises(ct.ConvTransposeError, match=f"{variable}='garbage'"):
        calls[variable]()


def test_new_entries_are_written_in_batches_and_none_is_lost(tmp_path, monkeypatch):
    """Adding many entries rewrites the file a few times, not once per entry (that was
    quadratic); the timer writes the rest without a call, and every entry recorded, and
    every entry another process wrote meanwhile, is in the file."""
    path = tmp_path / "wisdom.json"
    monkeypatch.setenv(wisdom.WISDOM_ENV, str(path))
    ct.forget_wisdom()
    writes = []
    original = wisdom.atomic_write
    monkeypatch.setattr(wisdom, "atomic_write",
                        lambda *args, **kw: (writes.append(1), original(*args, **kw)))
    entry = {"algorithm": "dense", "level": "measure", "times_ns": {"dense": 1}}
    try:
        wisdom.store.record("choices", "first", entry)
        assert len(writes) == 1  # the first entry is written at once
        other = json.loads(path.read_text())  # another process adds an entry
        other["choices"]["theirs"] = entry
        path.write_text(json.dumps(other))
        for index in range(500):
            wisdom.store.record("choices", f"mine-{index}", entry)
        assert len(writes) <= 2  # the first, and at most one more if this took a while
        deadline = time.monotonic() + 10 * wisdom.FLUSH_SECONDS
        while "mine-499" not in json.loads(path.read_text())["choices"]:
            assert time.monotonic() < deadline, "the timer never wrote the batch"
            time.sleep(0.05)
        choices = json.loads(path.read_text())["choices"]
        assert set(choices) == {"first", "theirs"} | {f"mine-{i}" for i in range(500)}
        assert len(writes) <= 3
    finally:
        ct.forget_wisdom()
