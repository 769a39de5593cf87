"""Compiled kernels are kept on disk between processes, in the library's cache folder only.

Every check runs in fresh processes (the kernel cache is decided once per process):
a second process loads the kernels a first one compiled (numba's per-dispatcher cache
hits and misses) and both give the slow direct loop's sums, as a layer of other channel
counts does where its kernels are compiled per block shape; code compiled for one
instruction set is never loaded for another; ``CONVTRANSPOSE_CACHE_DIR=off`` writes
nothing anywhere, and by default numba's files go to the cache folder, not beside the
package's sources nor into the user's ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba")
from kernel_support import random_case  # noqa: E402
from oracle import canonical_result  # noqa: E402

TESTS = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "src" / "convtranspose"

#: Runs the cases of an ``.npz`` file with their algorithms, saves the results and
#: prints the cache hits and misses of every kernel dispatcher the process holds.
_SCRIPT = f'''\
import json, sys
import numpy as np
sys.path.insert(0, {str(TESTS)!r})
from kernel_support import run_forced
from convtranspose._plan.rules import AxisPlan
from numba.core.dispatcher import Dispatcher

cases = np.load(sys.argv[1])
results = {{}}
for i in range(int(cases["count"])):
    axes = tuple(AxisPlan(*(int(v) for v in row)) for row in cases[f"axes{{i}}"])
    results[f"result{{i}}"] = run_forced(
        cases[f"data{{i}}"], cases[f"weights{{i}}"], axes, np.float32,
        bool(cases[f"channels_last{{i}}"]), str(cases[f"algorithm{{i}}"]))
np.savez(sys.argv[2], **results)
kernels = {{}}
for name, module in list(sys.modules.items()):
    if name.startswith(("convtranspose._kernels._numba", "_convtranspose_kernel_")):
        kernels.update((id(v), v) for v in vars(module).values() if isinstance(v, Dispatcher))
print(json.dumps({{
    "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels.values()),
    "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels.values())}}))
'''

#: (algorithm, channels last, spatial axes) of the cases run.
_CASES = (("direct", False, 2), ("direct", True, 1), ("direct-blocked", False, 2))


def _cases(tmp_path, chosen=_CASES, seed=0):
    """The cases as an ``.npz`` file for the script, and their oracle results."""
    rng = np.random.default_rng(seed)
    arrays, expected = {"count": np.array(len(chosen))}, []
    for i, (algorithm, channels_last, rank) in enumerate(chosen):
        data, weights, axes = random_case(rng, rank)
        data, weights = data.astype(np.float32), weights.astype(np.float32)
        arrays.update({f"data{i}": data, f"weights{i}": weights,
                       f"axes{i}": np.array([dataclasses.astuple(a) for a in axes], np.int64),
                       f"channels_last{i}": np.array(channels_last),
                       f"algorithm{i}": np.array(algorithm)})
        expected.append(canonical_result(data.astype(np.float64), weights.astype(np.float64),
                                         axes))
    path = tmp_path / f"cases-{seed}.npz"
    np.savez(path, **arrays)
    return path, expected


def _environment(**changes) -> dict:
    """This process's environment without the cache, CPU and dump settings, plus ``changes``."""
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("CONVTRANSPOSE_CACHE_DIR", "CONVTRANSPOSE_DUMP_KERNELS",
                                   "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_CACHE_DIR",
                                   "CONVTRANSPOSE_ALGORITHM")}
    environment.update(changes)
    return environment


def _run(tmp_path, cases, expected, environment, cwd=None) -> dict:
    """Run the cases in a new process; check its results against the oracle and return
    its cache hits and misses."""
    out = tmp_path / "results.npz"
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(cases), str(out)], check=True,
                          env=environment, cwd=cwd or tmp_path, capture_output=True, text=True)
    with np.load(out) as results:
        for i, want in enumerate(expected):
            np.testing.assert_array_equal(results[f"result{i}"], want)
    out.unlink()
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_kernels(tmp_path):
    cases, expected = _cases(tmp_path)
    environment = _environment(CONVTRANSPOSE_CACHE_DIR=str(tmp_path / "cache"))
    first = _run(tmp_path, cases, expected, environment)
    assert first["hits"] == 0 and first["misses"] > 0
    written = list((tmp_path / "cache" / "kernels").rglob("*"))
    assert any(p.suffix == ".nbi" for p in written) and any(p.suffix == ".py" for p in written)
    second = _run(tmp_path, cases, expected, environment)
    assert second["hits"] > 0 and second["misses"] == 0, second


def _widths_of_one_block_shape(last_axis) -> tuple[int, int]:
    """Two output channel counts that ``direct-blocked`` takes in one block shape on this
    host, with different numbers of vectors per output."""
    from convtranspose import host_target
    from convtranspose._kernels.schedules import blocked_shape

    vector_bytes = host_target().vector_bytes
    lanes = vector_bytes // 4
    by_block = {}
    for co in range(lanes, 17 * lanes, lanes):
        _, vectors, chunk, pixels = blocked_shape(4, co, last_axis, vector_bytes)
        by_block.setdefault((chunk, pixels), {}).setdefault(vectors, co)
    for widths in by_block.values():
        if len(widths) > 1:
            return tuple(sorted(widths.values()))[:2]
    pytest.skip("no two widths share a block shape here")


def test_a_layer_of_another_width_loads_the_kernel_another_compiled(tmp_path):
    # direct-blocked compiles per dtype and block shape, not per output channel count:
    # a layer of other channel counts and sizes in a second process finds every kernel
    # it runs in the cache folder the first filled, and both give the oracle's sums.
    from convtranspose._plan.rules import AxisPlan

    last = AxisPlan(6, 4, 2, 1, 1, 12)
    environment = _environment(CONVTRANSPOSE_CACHE_DIR=str(tmp_path / "cache"))
    rng = np.random.default_rng(5)
    runs = []
    for co, ci, first_axis in zip(_widths_of_one_block_shape(last), (3, 5),
                                  (AxisPlan(6, 4, 2, 1, 1, 12), AxisPlan(4, 3, 1, 1, 1, 4))):
        axes = (first_axis, last)
        data = rng.integers(-9, 10, (2, ci, first_axis.input_size, 6)).astype(np.float32)
        weights = rng.integers(-9, 10, (1, ci, co, first_axis.kernel_size, 4)).astype(np.float32)
        cases = tmp_path / f"cases-{co}.npz"
        np.savez(cases, count=np.array(1), data0=data, weights0=weights,
                 axes0=np.array([dataclasses.astuple(a) for a in axes], np.int64),
                 channels_last0=np.array(False), algorithm0=np.array("direct-blocked"))
        expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
        runs.append(_run(tmp_path, cases, [expected], environment))
    assert runs[0]["misses"] > 0
    assert runs[1]["hits"] > 0 and runs[1]["misses"] == 0, runs[1]


def _instruction_sets() -> tuple[str, str]:
    """Two CPU names this host runs code for, with different instruction sets."""
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    if not binding.get_process_triple().startswith("x86_64"):
        pytest.skip("the CPU names below are x86's")
    if features.get("avx512f") and features.get("avx512bw") and features.get("avx512vl"):
        return "haswell", "skylake-avx512"
    if features.get("avx2") and features.get("fma"):
        return "x86-64", "haswell"
    pytest.skip("this CPU has no AVX2")


def test_code_for_one_instruction_set_is_never_loaded_for_another(tmp_path):
    first_cpu, second_cpu = _instruction_sets()
    cases, expected = _cases(tmp_path, _CASES[:1], seed=1)
    folder = str(tmp_path / "cache")
    first = _environment(CONVTRANSPOSE_CACHE_DIR=folder, NUMBA_CPU_NAME=first_cpu)
    second = _environment(CONVTRANSPOSE_CACHE_DIR=folder, NUMBA_CPU_NAME=second_cpu)
    assert _run(tmp_path, cases, expected, first)["hits"] == 0
    other = _run(tmp_path, cases, expected, second)
    assert other["hits"] == 0 and other["misses"] > 0, other
    again = _run(tmp_path, cases, expected, first)
    assert again["hits"] > 0 and again["misses"] == 0, again
    again = _run(tmp_path, cases, expected, second)
    assert again["hits"] > 0 and again["misses"] == 0, again


def _files(folder: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _empty_folders(tmp_path, *names):
    """New empty folders under ``tmp_path``, one per name."""
    folders = [tmp_path / name for name in names]
    for folder in folders:
        folder.mkdir()
    return folders


def _package_numba_files() -> list[str]:
    return sorted(str(p) for suffix in ("*.nbi", "*.nbc") for p in PACKAGE.rglob(suffix))


def test_off_writes_nothing_anywhere(tmp_path):
    cases, expected = _cases(tmp_path, _CASES[:2], seed=2)
    home, xdg, numba_dir, work = _empty_folders(tmp_path, "home", "xdg", "numba", "work")
    before = _package_numba_files()
    environment = _environment(CONVTRANSPOSE_CACHE_DIR="off", HOME=str(home),
                               XDG_CACHE_HOME=str(xdg), NUMBA_CACHE_DIR=str(numba_dir))
    counts = _run(tmp_path, cases, expected, environment, cwd=work)
    assert counts["hits"] == 0
    assert [_files(f) for f in (home, xdg, numba_dir, work)] == [[], [], [], []]
    assert _package_numba_files() == before


def test_numba_files_go_to_the_cache_folder_only(tmp_path):
    # The default folder (XDG_CACHE_HOME on Linux), not the package's __pycache__ nor
    # the folder the user gave numba for their own code.
    cases, expected = _cases(tmp_path, _CASES[:1], seed=3)
    home, xdg, numba_dir, work = _empty_folders(tmp_path, "home", "xdg", "numba", "work")
    before = _package_numba_files()
    environment = _environment(HOME=str(home), XDG_CACHE_HOME=str(xdg),
                               NUMBA_CACHE_DIR=str(numba_dir))
    if sys.platform != "linux":
        pytest.skip("XDG_CACHE_HOME places the default folder on Linux only")
    _run(tmp_path, cases, expected, environment, cwd=work)
    written = _files(xdg)
    assert any(name.startswith("convtranspose/kernels/") and name.endswith(".nbi")
               for name in written)
    assert all(name.startswith("convtranspose/") for name in written)
    assert [_files(f) for f in (home, numba_dir, work)] == [[], [], []]
    assert _package_numba_files() == before


def test_a_kernel_module_names_its_constants_and_helpers():
    # What the cache keys on is the module's text: every binding must be written out.
    from convtranspose._kernels._numba import codegen, vectors

    text = codegen.module_text("test kernel", {
        "lanes": 8, "step": np.uint64(8), "scale": 0.5, "exact": True,
        "vector_load": vectors.vector_load, "load": vectors.vector_load}, "")
    for line in ("lanes = 8", "step = np.uint64(8)", "scale = 0.5", "exact = True",
                 "from convtranspose._kernels._numba.vectors import vector_load",
                 "from convtranspose._kernels._numba.vectors import vector_load as load"):
        assert line in text.splitlines()
    with pytest.raises(TypeError, match="'table'"):
        codegen.module_text("test kernel", {"table": np.arange(3)}, "")
    with pytest.raises(TypeError, match="'limit'"):
        codegen.module_text("test kernel", {"limit": float("inf")}, "")


def test_damaged_cache_files_are_compiled_again(tmp_path):
    # Truncated module files, indexes and machine code (a full disk, a killed process):
    # the kernels compile again, give the same sums, and replace what was damaged.
    cases, expected = _cases(tmp_path, _CASES[:1], seed=4)
    environment = _environment(CONVTRANSPOSE_CACHE_DIR=str(tmp_path / "cache"))
    _run(tmp_path, cases, expected, environment)
    damaged = [p for p in (tmp_path / "cache" / "kernels").rglob("*")
               if p.suffix in (".py", ".nbi", ".nbc")]
    assert {p.suffix for p in damaged} == {".py", ".nbi", ".nbc"}
    for path in damaged:
        path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    counts = _run(tmp_path, cases, expected, environment)
    assert counts["hits"] == 0 and counts["misses"] > 0, counts
    again = _run(tmp_path, cases, expected, environment)
    assert again["hits"] > 0 and again["misses"] == 0, again
