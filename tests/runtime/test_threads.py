"""Thread counts that respect the host: the environment variables and the CPU affinity
set the default, ``set_num_threads`` / ``num_threads`` override it, the pool grows and
shrinks with it, OpenBLAS follows it within a call, and no thread's CPU affinity
outlasts a helper's wake-up unless asked for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._kernels import ALGORITHMS
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import blas
from convtranspose._runtime.config import NATIVE_THREADS_ENV
from convtranspose._runtime.threads import parallel_for
from kernel_support import random_case, run_forced
from oracle import canonical_result

_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "src")
_ENV_NAMES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "CONVTRANSPOSE_PIN_THREADS")
_HAS_AFFINITY = hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def _python(script: str, **env: str) -> subprocess.CompletedProcess:
    """``script`` run by a fresh interpreter that imports this checkout's library, with
    the thread variables of this process removed and ``env`` added."""
    environment = {k: v for k, v in os.environ.items() if k not in _ENV_NAMES}
    environment["PYTHONPATH"] = os.pathsep.join(
        [_SRC] + [p for p in (os.environ.get("PYTHONPATH"),) if p])
    environment.update(env)
    return subprocess.run([sys.executable, "-W", "always", "-c", textwrap.dedent(script)],
                          env=environment, capture_output=True, text=True, timeout=120)


_COUNT = "import convtranspose as ct; print(ct.get_num_threads(), ct.host_target().threads)"


def _count(**env: str) -> tuple[int, str]:
    result = _python(_COUNT, **env)
    assert result.returncode == 0, result.stderr
    api, target = (int(v) for v in result.stdout.split())
    assert api == target
    return api, result.stderr


def _cpus() -> int:
    """This process's CPUs, as the test sees them (its affinity where it has one)."""
    return len(os.sched_getaffinity(0)) if _HAS_AFFINITY else (os.cpu_count() or 1)


@pytest.mark.parametrize("env, expected", [
    ({"NUMBA_NUM_THREADS": "3"}, 3),
    ({"OMP_NUM_THREADS": "5"}, 5),
    ({"OMP_NUM_THREADS": "6,2"}, 6),  # one count per nesting level: the first applies
    ({"NUMBA_NUM_THREADS": "3", "OMP_NUM_THREADS": "5"}, 3),
    ({"NUMBA_NUM_THREADS": "12"}, 12),  # a count the user sets is not capped at 8
])
def test_the_environment_sets_the_default(env, expected):
    assert _count(**env) == (expected, "")


def test_without_settings_the_default_is_the_allowed_cpus_up_to_eight():
    assert _count()[0] == min(_cpus(), 8)


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5", ","])
def test_an_invalid_environment_value_warns_once_and_is_ignored(value):
    count, stderr = _count(NUMBA_NUM_THREADS=value, OMP_NUM_THREADS="3")
    assert count == 3
    assert stderr.count("RuntimeWarning") == 1 and "NUMBA_NUM_THREADS" in stderr
    count, stderr = _count(OMP_NUM_THREADS=value)
    assert count == min(_cpus(), 8)
    assert stderr.count("RuntimeWarning") == 1 and "OMP_NUM_THREADS" in stderr


@pytest.mark.skipif(not _HAS_AFFINITY, reason="the platform has no CPU affinity "
                    "(os.sched_setaffinity)")
def test_the_default_follows_the_process_cpu_affinity():
    # The child restricts itself to one allowed CPU before importing the library.
    cpu = min(os.sched_getaffinity(0))
    result = _python(f"import os; os.sched_setaffinity(0, {{{cpu}}}); {_COUNT}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "1"]


def test_set_num_threads_returns_the_previous_count_and_sets_the_process_wide_one():
    original = ct.get_num_threads()
    try:
        assert ct.set_num_threads(3) == original
        assert ct.get_num_threads() == 3 and ct.host_target().threads == 3
        seen = []
        thread = threading.Thread(target=lambda: seen.append(ct.get_num_threads()))
        thread.start()
        thread.join()
        assert seen == [3]  # every thread of the process
        assert ct.set_num_threads(np.int64(1)) == 3
        assert ct.host_target().threads == 1
    finally:
        ct.set_num_threads(original)
    assert ct.get_num_threads() == original


@pytest.mark.parametrize("value", [0, -1, 2.5, "2", True, None, np.float64(2)])
def test_invalid_thread_counts_are_rejected(value):
    original = ct.get_num_threads()
    with pytest.raises(ct.ConvTransposeError, match=rf"\bn\b.*{re.escape(repr(value))}"):
        ct.set_num_threads(value)
    with pytest.raises(ValueError, match=r"\bn\b"):
        with ct.num_threads(value):
            pass
    assert ct.get_num_threads() == original
    with pytest.raises(ct.ConvTransposeError, match="enabled"):
        ct.set_thread_pinning("yes")


def test_num_threads_nests_restores_and_stays_in_its_thread():
    outer = ct.get_num_threads()
    barrier = threading.Barrier(2, timeout=30)
    seen = {}

    def user(count):
        with ct.num_threads(count):
            barrier.wait()  # both blocks are in force at once
            seen[count] = (ct.get_num_threads(), ct.host_target().threads)
            barrier.wait()
        seen[-count] = ct.get_num_threads()

    with ct.num_threads(5):
        assert ct.get_num_threads() == 5
        with ct.num_threads(1):
            assert ct.host_target().threads == 1
        assert ct.get_num_threads() == 5
        workers = [threading.Thread(target=user, args=(n,)) for n in (2, 7)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert ct.get_num_threads() == 5
    assert ct.get_num_threads() == outer
    assert seen == {2: (2, 2), 7: (7, 7), -2: outer, -7: outer}


def test_num_threads_and_use_target_the_innermost_decides():
    narrow = ct.host_target().replace(vector_bytes=16, threads=3)
    with ct.use_target(narrow):
        with ct.num_threads(1):
            assert ct.host_target() == narrow.replace(threads=1)
        assert ct.host_target() is narrow
    with ct.num_threads(2):
        with ct.use_target(narrow):
            assert ct.get_num_threads() == 3
        assert ct.get_num_threads() == 2


def _pool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("convtranspose")]


def test_the_pool_grows_to_the_count_and_shrinks_when_it_is_lowered():
    original = ct.get_num_threads()
    barrier = threading.Barrier(4, timeout=30)
    met = set()

    def piece(start, stop):
        met.add(threading.get_native_id())
        barrier.wait()  # four pieces at once: four threads, the caller's included

    try:
        ct.set_num_threads(2)
        with ct.num_threads(4):
            parallel_for(piece, 4, ct.get_num_threads())
        assert len(met) == 4
        assert len(_pool_threads()) >= 3
        ct.set_num_threads(1)  # the helpers end once idle
        deadline = time.monotonic() + 30
        while _pool_threads() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _pool_threads() == []
    finally:
        ct.set_num_threads(original)


def _large_case():
    """A layer large enough for the algorithms to split their work between threads."""
    rng = np.random.default_rng(7)
    axes = (AxisPlan(20, 4, 2, 1, 1, 40), AxisPlan(18, 3, 2, 1, 0, 37))
    return rng.integers(-3, 4, (2, 24, 20, 18)), rng.integers(-3, 4, (2, 12, 10, 4, 3)), axes


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_one_and_two_threads_give_the_oracles_sums(algorithm):
    rng = np.random.default_rng(2024)
    cases = [random_case(rng, rank) for rank in (1, 2, 3)]
    if algorithm != "dense":  # its matrix of this layer would take a gigabyte
        cases.append(_large_case())
    for data, weights, axes in cases:
        expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
        for channels_last in (False, True):
            for threads in (1, 2):
                with ct.num_threads(threads):
                    got = run_forced(data.astype(np.float32), weights.astype(np.float32),
                                     axes, np.float32, channels_last, algorithm)
                np.testing.assert_array_equal(
                    got, expected, err_msg=f"{algorithm} {axes} {channels_last} {threads}")


@pytest.mark.skipif(blas.thread_setter() is None or blas.thread_getter() is None
                    or not blas.available(np.float32),
                    reason="needs NumPy's OpenBLAS with openblas_set_num_threads_local")
@pytest.mark.parametrize("native", ["0", "1"], ids=["pool", "native"])
@pytest.mark.parametrize("library", [1, 4])
def test_library_products_run_on_one_openblas_thread_within_a_call(monkeypatch, library,
                                                                   native):
    # OpenBLAS set to 2 threads by its user; every product the library makes is taken
    # as large: it is split over the library's threads, each block on one BLAS thread
    # (OpenBLAS's own workers would spin after it), and the user's count comes back.
    # On numba's native threads the blocks are called from a compiled parallel loop:
    # only the results and the count afterwards are seen there.  On the pool each block
    # is one call, through ctypes (blas.gemm) or from compiled code (serial_gemm).
    import convtranspose._kernels.common as common_module

    monkeypatch.setenv(NATIVE_THREADS_ENV, native)
    monkeypatch.setattr(common_module, "SERIAL_GEMM_FLOPS", 0)
    monkeypatch.setattr(common_module, "NATIVE_SPLIT_GEMM_FLOPS", 0)
    counts = []

    def recording(gemm):
        def record(*arguments, **options):
            counts.append(blas.threads())
            return gemm(*arguments, **options)
        return record

    monkeypatch.setattr(blas, "gemm", recording(blas.gemm))
    if ct.host_target().numba:
        from convtranspose._kernels._numba import native_gemm

        monkeypatch.setattr(native_gemm, "serial_gemm", recording(native_gemm.serial_gemm))
    previous = blas.thread_setter()(2)
    try:
        data, weights, axes = _large_case()
        with ct.num_threads(library):
            got = run_forced(data.astype(np.float32), weights.astype(np.float32), axes,
                             np.float32, True, "gemm-nxc")
        after = blas.threads()
    finally:
        blas.thread_setter()(previous)
    np.testing.assert_array_equal(got, canonical_result(data, weights, axes))
    assert set(counts) == {1} and (bool(counts) or native == "1")
    assert after == 2  # the user's count comes back


@pytest.mark.skipif(blas.thread_setter() is None or blas.thread_getter() is None,
                    reason="needs NumPy's OpenBLAS with openblas_set_num_threads_local")
def test_openblas_limits_nest_and_the_users_count_comes_back():
    previous = blas.thread_setter()(3)
    try:
        seen = []
        with blas.at_most(4):  # above OpenBLAS's own count: it stays
            seen.append(blas.threads())
            with blas.at_most(2):
                seen.append(blas.threads())
                with blas.one_thread:
                    seen.append(blas.threads())
                    with blas.at_most(3):
                        seen.append(blas.threads())
                seen.append(blas.threads())
            seen.append(blas.threads())
        seen.append(blas.threads())
    finally:
        blas.thread_setter()(previous)
    assert seen == [3, 2, 1, 1, 2, 3, 3]


_AFFINITY_SCRIPT = """
    import glob, json, os, threading, time
    import convtranspose as ct
    from convtranspose._runtime.threads import parallel_for

    def masks():
        found = {}
        for path in glob.glob("/proc/self/task/*/status"):
            try:
                with open(path) as status:
                    for line in status:
                        if line.startswith("Cpus_allowed_list:"):
                            found[path.split("/")[4]] = line.split(":", 1)[1].strip()
            except FileNotFoundError:  # a thread that just ended
                pass
        return found

    helpers, inside, calls = set(), {}, []
    set_affinity = os.sched_setaffinity

    def recorded(thread, cpus):
        calls.append(thread)
        set_affinity(thread, cpus)

    os.sched_setaffinity = recorded

    def piece(start, stop):
        if threading.get_native_id() != caller:
            helpers.add(threading.get_native_id())
        inside[str(threading.get_native_id())] = sorted(os.sched_getaffinity(0))
        time.sleep(0.005)  # every thread takes pieces

    caller = threading.get_native_id()
    parallel_for(piece, 32, 2)  # starts the helper
    before = masks()
    inside.clear()
    parallel_for(piece, 32, 2)  # steers it first, unless forbidden
    after = masks()
    steered = len(calls)
    ct.set_thread_pinning(False)
    released = masks()
    print(json.dumps({"before": before, "after": after, "released": released,
                      "helpers": sorted(str(h) for h in helpers), "inside": inside,
                      "calls": steered}))
"""


@pytest.mark.skipif(not _HAS_AFFINITY or not os.path.exists("/proc/self/task"),
                    reason="needs CPU affinity and /proc/self/task (Linux)")
@pytest.mark.skipif(_HAS_AFFINITY and len(os.sched_getaffinity(0)) < 2,
                    reason="needs two allowed CPUs (steering a helper takes one away)")
def test_no_threads_affinity_outlasts_a_wake_up_unless_asked_for():
    result = _python(_AFFINITY_SCRIPT)
    assert result.returncode == 0, result.stderr
    default = json.loads(result.stdout)
    assert default["helpers"]
    assert default["after"] == default["before"]  # every thread, helpers included
    # The helper was narrowed for its wake-up and ran its pieces with its own affinity.
    allowed = sorted(os.sched_getaffinity(0))
    assert default["calls"] >= 2
    assert all(cpus == allowed for cpus in default["inside"].values())
    # Forbidden: no thread's affinity is ever set.
    result = _python(_AFFINITY_SCRIPT, CONVTRANSPOSE_PIN_THREADS="0")
    assert result.returncode == 0, result.stderr
    forbidden = json.loads(result.stdout)
    assert forbidden["calls"] == 0 and forbidden["after"] == forbidden["before"]
    # The same observation sees the change when pinning is asked for, and its undoing.
    result = _python(_AFFINITY_SCRIPT, CONVTRANSPOSE_PIN_THREADS="1")
    assert result.returncode == 0, result.stderr
    pinned = json.loads(result.stdout)
    changed = {t for t in pinned["before"] if pinned["after"].get(t, pinned["before"][t])
               != pinned["before"][t]}
    assert changed and changed <= set(pinned["helpers"])
    assert all(pinned["released"][t] == pinned["before"][t] for t in pinned["helpers"]
               if t in pinned["released"])


def test_helpers_run_in_the_callers_context():
    from convtranspose._kernels.compiling import compiles_deferred, deferring_compiles

    seen = []

    def piece(start, stop):
        seen.append((compiles_deferred(), threading.get_ident()))
        time.sleep(0.01)

    with deferring_compiles():
        parallel_for(piece, 8, 2)
    parallel_for(piece, 8, 2)
    assert [deferred for deferred, _ in seen[:8]] == [True] * 8
    assert not any(deferred for deferred, _ in seen[8:])
    assert len({ident for _, ident in seen}) > 1  # helpers took pieces too


def test_every_helper_has_finished_when_a_piece_raises():
    running = []

    def piece(start, stop):
        running.append(start)
        if start == 0:
            raise RuntimeError("piece 0")
        time.sleep(0.05)
        running.remove(start)

    with pytest.raises(RuntimeError, match="piece 0"):
        parallel_for(piece, 8, 2)
    assert running == [0]  # the others all ran to the end before the call raised


def test_thread_counts_are_capped():
    from convtranspose._runtime.threads import MAX_THREADS, default_threads

    with pytest.warns(RuntimeWarning, match=f"uses {MAX_THREADS}"):
        assert default_threads({"OMP_NUM_THREADS": "99999999999999999999"}) == MAX_THREADS
    with pytest.raises(ct.ConvTransposeError, match=f"from 1 to {MAX_THREADS}"):
        ct.set_num_threads(MAX_THREADS + 1)


@pytest.mark.parametrize("count, threads, pieces", [(10, 2, 3), (56, 2, 4), (5, 3, 16), (7, 2, 1)])
def test_parallel_for_cuts_the_pieces_asked_for(count, threads, pieces):
    ranges = []
    lock = threading.Lock()

    def piece(start, stop):
        with lock:
            ranges.append((start, stop))

    parallel_for(piece, count, threads, pieces)
    ranges.sort()
    expected = min(count, pieces) if threads > 1 and count > 1 else 1
    assert len(ranges) == expected
    assert ranges[0][0] == 0 and ranges[-1][1] == count
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, in order


def test_overlapping_wake_ups_give_the_helpers_the_callers_affinity_back(monkeypatch):
    # Four fake CPUs: two calls narrow the same helpers before either has run, from
    # CPUs 0 and 1, and restore in either order; every helper ends with the caller's.
    from convtranspose._runtime import threads as runtime_threads

    allowed = {0, 1, 2, 3}
    masks = {0: set(allowed), 11: set(allowed), 12: set(allowed)}
    monkeypatch.setattr(os, "sched_getaffinity", lambda thread: set(masks[thread]),
                        raising=False)
    monkeypatch.setattr(os, "sched_setaffinity",
                        lambda thread, cpus: masks.__setitem__(thread, set(cpus)), raising=False)
    monkeypatch.setattr(runtime_threads, "helper_ids", {11, 12})
    monkeypatch.setattr(runtime_threads, "steering", True)
    for first, second in ((0, 1), (1, 0)):
        monkeypatch.setattr(runtime_threads, "_sched_getcpu", lambda: lambda: 0)
        narrowed_0 = runtime_threads.steer_helpers_off_caller(keep=False)
        monkeypatch.setattr(runtime_threads, "_sched_getcpu", lambda: lambda: 1)
        narrowed_1 = runtime_threads.steer_helpers_off_caller(keep=False)
        assert masks[11] == allowed - {0, 1} or masks[11] == allowed - {1}
        for narrowed in ((narrowed_0, narrowed_1)[first], (narrowed_0, narrowed_1)[second]):
            runtime_threads.restore_affinities(narrowed)
        assert masks[11] == masks[12] == allowed


@pytest.mark.skipif(not _HAS_AFFINITY or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two allowed CPUs")
def test_concurrent_callers_leave_every_helper_the_callers_affinity():
    from convtranspose._runtime import threads as runtime_threads

    allowed = os.sched_getaffinity(0)

    def piece(start, stop):
        time.sleep(0.0005)

    def caller():
        for _ in range(30):
            parallel_for(piece, 8, 3)

    callers = [threading.Thread(target=caller) for _ in range(3)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    assert runtime_threads.helper_ids
    assert all(os.sched_getaffinity(helper) == allowed
               for helper in runtime_threads.helper_ids)
