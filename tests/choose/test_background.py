"""A new layer's first call on a machine: candidates whose kernels are not compiled are
deferred (never compiled while the caller waits), compiled by a background process, and
timed at a later call; long waits are announced.  Results are checked against the
oracle at every stage."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from convtranspose._choose.measure import measure
from convtranspose._kernels.compiling import (
    KernelNotCompiled,
    compiles_deferred,
)
from convtranspose._runtime import notices
from oracle import full_transposed_convolution

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "src")


def _child(script: str, cache: str, **environment) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONVTRANSPOSE_CACHE_DIR": cache, "PYTHONPATH": SOURCE,
           **environment}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=600, check=True)


def test_deferred_candidates_leave_the_race_and_are_listed():
    def run(name):
        if name in ("b", "d") and compiles_deferred():
            raise KernelNotCompiled(name)

    result = measure(["a", "b", "c", "d"], run, defer=True)
    assert result.deferred == ("b", "d")
    assert sorted(name for name, _ in result.times) == ["a", "c"]


def test_when_every_candidate_would_compile_the_first_one_runs():
    ran = []

    def run(name):
        if compiles_deferred():
            raise KernelNotCompiled(name)
        ran.append(name)

    result = measure(["x", "y"], run, defer=True)
    assert result.deferred == ("y",) and [name for name, _ in result.times] == ["x"]
    assert set(ran) == {"x"}


def test_without_defer_nothing_is_deferred():
    seen = []
    result = measure(["a", "b"], lambda name: seen.append(compiles_deferred()))
    assert result.deferred == () and not any(seen)


def test_a_slow_wait_is_announced_once_and_a_quick_one_not(caplog):
    kind = f"test wait {time.monotonic_ns()}"
    with caplog.at_level(logging.WARNING, logger="convtranspose"):
        with notices.notice_if_slow(kind, lambda: "quick", after=0.5):
            pass
        for _ in range(2):
            with notices.notice_if_slow(kind, lambda: "slow wait", after=0.05):
                time.sleep(0.3)
    assert [record.getMessage() for record in caplog.records] == ["convtranspose: slow wait"]
    assert kind in notices.said()


_FORCED = """
import numpy as np
from convtranspose._kernels.compiling import KernelNotCompiled, deferring_compiles
import convtranspose as ct
rng = np.random.default_rng(5)
x = rng.standard_normal((1, 6, 5, 4)).astype(np.float32)
w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
try:
    with deferring_compiles():
        ct.convolution_backprop_data(x, w, strides=2)
    print("ran")
except KernelNotCompiled:
    print("deferred")
np.save({path!r}, ct.convolution_backprop_data(x, w, strides=2))
"""


def test_a_kernel_is_deferred_until_compiled_then_loads_from_the_cache(tmp_path):
    cache, path = str(tmp_path / "cache"), str(tmp_path / "y.npy")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 6, 5, 4)).astype(np.float32)
    w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    expected = full_transposed_convolution(x, w[None], (2, 2), (1, 1))
    outputs = []
    for _ in range(2):
        done = _child(_FORCED.format(path=path), cache, CONVTRANSPOSE_ALGORITHM="direct")
        outputs.append(done.stdout.split())
        np.testing.assert_allclose(np.load(path), expected, rtol=1e-5, atol=1e-5)
    assert outputs == [["deferred"], ["ran"]]


_FIRST_CALLS = """
import json, time
import numpy as np
import convtranspose as ct
from convtranspose._choose import planning
planning.candidate_names = lambda *args: ["gemm-ncx", "direct"]  # a cheap compile
rng = np.random.default_rng(7)
x = rng.standard_normal((2, 5, 6, 7)).astype(np.float32)
w = rng.standard_normal((5, 4, 3, 2)).astype(np.float32)
decided, results = [], []
for _ in range(3000):
    with planning.recording() as choices:
        results.append(ct.convolution_backprop_data(x, w, strides=2))
    decided.append(sorted({{choice.decided_by for choice in choices}}))
    if "provisional" not in decided[-1]:
        break
    time.sleep(0.1)
np.save({path!r}, np.stack([results[0], results[-1]]))
print(json.dumps(decided[:1] + decided[-1:]))
"""


@pytest.mark.parametrize("background", ["on", "off"])
def test_a_new_layers_kernels_compile_in_the_background(tmp_path, background):
    cache, path = str(tmp_path / "cache"), str(tmp_path / "y.npy")
    done = _child(_FIRST_CALLS.format(path=path), cache, CONVTRANSPOSE_PLANNING="measure",
                  CONVTRANSPOSE_BACKGROUND_COMPILE=background)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 2)).astype(np.float32)
    expected = full_transposed_convolution(x, w[None], (2, 2), (1, 1))
    for result in np.load(path):
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    first, last = json.loads(done.stdout)
    # Background on: the first call times only the compiled candidate; a later one,
    # once the background process ended, times both (never deferring again).
    assert ("provisional" in first) == (background == "on")
    assert "measured" in last and "provisional" not in last


_NOTHING_COMPILED = """
import json, time
import numpy as np
from numba.core import event
import convtranspose as ct
from convtranspose._choose import planning
# numba kernels and an algorithm whose helpers are numba kernels: none compiled yet
planning.candidate_names = lambda *args: ["direct", "col2im-ncx"]
rng = np.random.default_rng(11)
x = rng.standard_normal((2, 6, 7, 5)).astype(np.float32)
w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
with event.install_recorder("numba:compile") as compiled:
    with planning.recording() as choices:
        results = [ct.convolution_backprop_data(x, w, strides=2, pads_begin=1, pads_end=1)]
first = [len(compiled.buffer), sorted({{choice.decided_by for choice in choices}})]
for _ in range(3000):
    time.sleep(0.1)
    with planning.recording() as choices:
        results.append(ct.convolution_backprop_data(x, w, strides=2, pads_begin=1,
                                                    pads_end=1))
    if "measured" in {{choice.decided_by for choice in choices}}:
        break
last = sorted({{choice.decided_by for choice in choices}})
for _ in range(2):  # the measured choice's prepared call, no planning
    with planning.recording() as choices:
        results.append(ct.convolution_backprop_data(x, w, strides=2, pads_begin=1,
                                                    pads_end=1))
np.save({path!r}, np.stack([results[0], results[-3], results[-1]]))
print(json.dumps(first + [last, len(choices)]))
"""


def _background_child(script: str, tmp_path, seed: int, data_shape, filter_shape):
    """What ``script`` prints (JSON), run under measured planning with the background
    process on and an empty cache folder, after checking every result it saved against
    the oracle: its layer's random operands of ``seed``, strides 2 and pads 1."""
    cache, path = str(tmp_path / "cache"), str(tmp_path / "y.npy")
    done = _child(script.format(path=path), cache, CONVTRANSPOSE_PLANNING="measure",
                  CONVTRANSPOSE_BACKGROUND_COMPILE="on")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(data_shape).astype(np.float32)
    w = rng.standard_normal(filter_shape).astype(np.float32)
    # pads 1 on both sides: the full result without its first and last row and column
    expected = full_transposed_convolution(x, w[None], (2, 2), (1, 1))[:, :, 1:-1, 1:-1]
    for result in np.load(path):
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    return json.loads(done.stdout)


_PROVISIONAL_DENSE = """
import json, time
import numpy as np
import convtranspose as ct
from convtranspose._choose import planning
# dense (NumPy's product) is timed at once; direct's kernels compile in the background
planning.candidate_names = lambda *args: ["dense", "direct"]
rng = np.random.default_rng(13)
x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
call = lambda: ct.convolution_backprop_data(x, w, strides=2, pads_begin=1, pads_end=1)
with planning.recording() as choices:
    results = [call()]
first = sorted({{choice.decided_by for choice in choices}})
with planning.recording() as choices:
    results += [call() for _ in range(20)]
meanwhile = len(choices)
for _ in range(3000):
    time.sleep(0.1)
    with planning.recording() as choices:
        results.append(call())
    if "measured" in {{choice.decided_by for choice in choices}}:
        break
last = sorted({{choice.decided_by for choice in choices}})
np.save({path!r}, np.stack([results[0], results[10], results[-1]]))
print(json.dumps([first, meanwhile, last]))
"""


def test_a_provisional_dense_layer_runs_prepared_until_the_others_are_compiled(tmp_path):
    """A tiny layer whose provisional choice (its other candidates compiling in the
    background) is ``dense`` runs a prepared call meanwhile, planning nothing on each
    call; once the background process ended, a call measures every candidate."""
    first, meanwhile, last = _background_child(_PROVISIONAL_DENSE, tmp_path, 13,
                                               (1, 2, 5, 5), (2, 3, 3, 3))
    assert first == ["provisional"] and meanwhile == 0
    assert "measured" in last


def test_a_new_machines_first_call_compiles_nothing_while_it_waits(tmp_path):
    """When no candidate's kernels are compiled, the first call runs NumPy's code (the
    best-ranked candidate that is not a numba kernel) instead of compiling one here;
    a later call, once the background process ended, measures them all, and the calls
    after it run the winner's prepared call."""
    compiled, first, last, planned = _background_child(_NOTHING_COMPILED, tmp_path, 11,
                                                       (2, 6, 7, 5), (6, 4, 3, 3))
    assert compiled == 0 and first == ["provisional"]
    assert "measured" in last and planned == 0


_BLAS_FROM_COMPILED_CODE = """
import json, time
import numpy as np
from numba.core import event
import convtranspose as ct
from convtranspose._choose import planning
# gemm-ncx (BLAS, timed at once) makes its products from compiled code where numba runs
# (_kernels/_numba/native_gemm.py): kernels that compile too, helpers of every BLAS path
planning.candidate_names = lambda *args: ["gemm-ncx", "direct"]
rng = np.random.default_rng(17)
x = rng.standard_normal((2, 16, 9, 8)).astype(np.float32)
w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
call = lambda: ct.convolution_backprop_data(x, w, strides=2, pads_begin=1, pads_end=1)
with event.install_recorder("numba:compile") as compiled:
    results = [call(), call()]
first = len(compiled.buffer)
from convtranspose._kernels._numba import native_gemm
for _ in range(3000):
    time.sleep(0.1)
    results.append(call())
    if native_gemm._ENTRIES:
        break
np.save({path!r}, np.stack([results[0], results[1], results[-1]]))
print(json.dumps([first, len(native_gemm._ENTRIES)]))
"""


def test_blas_products_from_compiled_code_compile_in_the_background(tmp_path):
    """The kernels that make BLAS products from compiled code are not compiled while a
    new machine's first calls wait (measured planning times ``gemm-ncx`` at once): the
    products go through ctypes meanwhile, the background process compiles them, and a
    later call loads them."""
    compiled, entries = _background_child(_BLAS_FROM_COMPILED_CODE, tmp_path, 17,
                                          (2, 16, 9, 8), (16, 8, 3, 3))
    assert compiled == 0 and entries >= 1


def test_notices_of_any_kinds_nest():
    outer, inner = f"outer {time.monotonic_ns()}", f"inner {time.monotonic_ns()}"
    with notices.notice_if_slow(outer, lambda: "outer", after=0.01):
        time.sleep(0.05)  # announced: later blocks of its kind take the quick path
    with notices.notice_if_slow(outer, lambda: "outer"):
        with notices.notice_if_slow(inner, lambda: "inner"):
            with notices.notice_if_slow(outer, lambda: "outer"):
                pass
    assert outer in notices.said() and inner not in notices.said()


_FIRST_CONVOLUTIONS = """
import json, time
import numpy as np
import convtranspose as ct
from convtranspose._choose import planning
rng = np.random.default_rng(9)
x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
results, provisional, timed = [], [], []
for _ in range(3000):
    results.append(ct.convolution(x, w, strides=2, pads_begin=1, pads_end=1))
    provisional.append(any(key.startswith("data-adjoint") for key in planning._provisional))
    timed = [sorted(entry["times_ns"]) for key, entry in ct.export_wisdom()["choices"].items()
             if key.startswith("data-adjoint")]
    if timed and "blocked" in timed[0]:
        break
    time.sleep(0.1)
np.save({path!r}, np.stack([results[0], results[-1]]))
print(json.dumps([provisional[0], timed[0] if timed else []]))
"""


@pytest.mark.parametrize("background", ["on", "off"])
def test_a_new_convolutions_adjoint_kernels_compile_in_the_background(tmp_path, background):
    """The adjoints' measured planning defers the compiled ``blocked`` kernels like the
    transposed convolution's: the first strided forward convolution on a new machine
    times the ready candidates and returns (nothing kept), the background process
    compiles ``blocked``, and a later call times every candidate and keeps the winner."""
    from oracle import forward_convolution

    cache, path = str(tmp_path / "cache"), str(tmp_path / "y.npy")
    done = _child(_FIRST_CONVOLUTIONS.format(path=path), cache,
                  CONVTRANSPOSE_PLANNING="measure", CONVTRANSPOSE_BACKGROUND_COMPILE=background)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    expected = forward_convolution(x.astype(np.float64), w[None].astype(np.float64), (2, 2),
                                   (1, 1), (1, 1), (5, 5))
    for result in np.load(path):
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4)
    first_provisional, timed = json.loads(done.stdout)
    assert first_provisional == (background == "on")
    assert {"im2col", "taps", "blocked"} <= set(timed)


def test_the_best_deferred_candidate_is_measured_as_soon_as_it_is_ready(wisdom_file):
    """Planning with deferred candidates ``b`` (ranked first among them) and ``c``: a
    call once ``b`` is ready measures again, still deferring ``c``; one once both are
    measures all three without deferring; calls in between measure nothing."""
    from convtranspose._choose import planning

    compiled: set[str] = set()
    handed: list[tuple[str, ...]] = []

    class Compiling:  # what the background module's readiness says, set by the test
        def __init__(self, names):
            self.names = tuple(names)

        def __call__(self):
            return compiled.issuperset(self.names)

        def compiled(self):
            return frozenset(compiled.intersection(self.names))

    def warm(names):
        handed.append(tuple(names))
        return Compiling(names)

    timed: list[set[str]] = []

    def run(name):
        if name not in compiled | {"a"} and compiles_deferred():
            raise KernelNotCompiled(name)
        timed[-1].add(name)

    key = f"staged {time.monotonic_ns()}"

    def call(ready=()):
        compiled.update(ready)
        timed.append(set())
        return planning.measured_choice("test", key, ["a", "b", "c"], run, "a", warm)

    assert call() == "a" and timed[-1] == {"a"} and handed == [("b", "c")]
    call(ready=["c"])  # not the best-ranked: nothing measured yet
    assert timed[-1] == set()
    compiled.discard("c")
    call(ready=["b"])
    assert timed[-1] == {"a", "b"} and handed[-1] == ("c",)
    call()  # measured again once for a partial readiness, not on every call
    assert timed[-1] == set()
    call(ready=["c"])
    assert timed[-1] == {"a", "b", "c"} and len(handed) == 2
    call()
    assert timed[-1] == set()


def test_the_background_process_reports_each_algorithm_as_it_is_ready(tmp_path, monkeypatch):
    """A background job's ``Compiling`` names an algorithm once the process has run it
    (the cheap ``gemm-ncx`` well before ``direct`` has compiled), never one that failed,
    and says it is all ready once the process ended; a job handed over again for the
    same problem while it runs waits for the same process."""
    from convtranspose._execute import background
    from convtranspose._plan.problem import Problem
    from convtranspose._plan.rules import AxisPlan
    from convtranspose._runtime.target import host

    monkeypatch.setenv("CONVTRANSPOSE_CACHE_DIR", str(tmp_path / "cache"))
    data, weights = np.ones((1, 3, 5, 6), np.float32), np.ones((1, 3, 2, 3, 3), np.float32)
    axes = (AxisPlan(5, 3, 2, 1, 1, 9), AxisPlan(6, 3, 2, 1, 1, 11))
    problem = Problem(1, axes, weights.shape, False, np.dtype(np.float32))
    names = ["gemm-ncx", "no such algorithm", "direct"]
    compiling = background.compile_elsewhere(names, data, weights, None, problem, host())
    assert compiling is not None
    again = background.compile_elsewhere(names[2:], data, weights, None, problem, host())
    seen = []
    deadline = time.monotonic() + 600
    while not compiling() and time.monotonic() < deadline:
        ready = compiling.compiled()
        if not seen or ready != seen[-1]:
            seen.append(ready)
        time.sleep(0.01)
    assert compiling() and again()
    assert {"gemm-ncx"} in seen and all("no such algorithm" not in ready for ready in seen)
    assert again.compiled() == {"direct"}
