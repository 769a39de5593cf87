"""Parallel kernels on numba's native threads (``_numba/launch.py``) and on the
library's pool: every piece once, the oracle's results, numba's thread count left as
it was, forked children and concurrent callers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from convtranspose._execute.transposed import transposed_convolution  # noqa: E402
from convtranspose._kernels._numba import launch  # noqa: E402
from convtranspose._plan.rules import AxisPlan  # noqa: E402
from convtranspose._runtime import threads as runtime_threads  # noqa: E402
from oracle import canonical_result  # noqa: E402


@numba.njit(nogil=True)
def _count_pieces(counts, start, stop):
    for i in range(start, stop):
        counts[i] += 1


@numba.njit(nogil=True)
def _record_threads(seen, start, stop):
    for i in range(start, stop):
        seen[i] = numba.get_thread_id()


@numba.njit(nogil=True)
def _note_window(counts, window, seen, start, stop):
    seen[start] = window[0] + 100 * window.shape[0]  # zero when new, then 7
    window[0] = 7
    for i in range(start, stop):
        counts[i] += 1


@numba.njit(nogil=True)
def _add_product(out, source, first, second, start, stop):
    for i in range(start, stop):
        out[i] = source[i] + first * second


@numba.njit(nogil=True)
def _add_pair(out, source, pair, start, stop):
    for i in range(start, stop):
        out[i] = source[i] + pair[0] * pair[1]


def _needs_native():
    if not launch.native_threads(2):
        pytest.skip(f"numba's threading layer here ({numba.threading_layer()}) is not "
                    "thread-safe, or has fewer than 2 threads: the pool runs every kernel")


class _Loops:
    """The native loops run since it was made (:func:`launch.native_loops_run`)."""

    def __init__(self):
        self._start = launch.native_loops_run()

    def __bool__(self):
        return self.count > 0

    @property
    def count(self) -> int:
        return launch.native_loops_run() - self._start


@pytest.fixture
def launches():
    return _Loops()


@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "pool"])
@pytest.mark.parametrize("count, threads, pieces", [(1000, 2, None), (7, 2, 3), (3, 8, None),
                                                    (1, 2, None), (64, 2, 64)])
def test_every_piece_runs_once(native, count, threads, pieces, launches, monkeypatch):
    monkeypatch.setenv(launch.NATIVE_THREADS_ENV, native)
    counts = np.zeros(count, np.int64)
    launch.parallel_kernel(_count_pieces, (counts,), count, threads, pieces)
    assert np.array_equal(counts, np.ones(count, np.int64))
    if native == "0" or min(count, threads) == 1:
        assert not launches
    elif launch.native_threads(min(count, threads)):
        assert launches.count == 1


@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "pool"])
@pytest.mark.parametrize("threads", [1, 2])
def test_each_thread_gets_its_own_scratch_zeroed_when_made(native, threads, monkeypatch):
    # A size no other test uses: the first loop makes the rows (zeros).  The next loop of
    # the kernel on this calling thread finds what the last one left, on numba's threads
    # and on one; the pool makes them anew.  Another calling thread has its own.
    monkeypatch.setenv(launch.NATIVE_THREADS_ENV, native)
    size = 50 + 10 * threads + (native == "1")

    def firsts_seen() -> list:
        counts, seen = np.zeros(40, np.int64), np.full(40, -1, np.int64)
        launch.parallel_kernel(_note_window, (counts, seen), 40, threads,
                               scratch=(1, size, np.int64))
        assert np.array_equal(counts, np.ones(40, np.int64))
        return list(seen[seen >= 0])

    new, old = 100 * size, 100 * size + 7
    on_native = native == "1" and launch.native_threads(threads)
    first = firsts_seen()
    assert set(first) <= {new, old} and 1 <= first.count(new) <= threads
    if on_native:
        assert first == [new] * threads  # one piece per thread, each on its own array
    again = firsts_seen()
    if on_native or threads == 1:
        assert again == [old] * threads
    else:
        assert set(again) <= {new, old} and again.count(new) >= 1
    other = []
    caller = threading.Thread(target=lambda: other.extend(firsts_seen()))
    caller.start()
    caller.join()
    assert new in other and set(other) <= {new, old}


def test_kept_addresses_serve_the_next_calls_of_the_same_kinds(launches):
    # The caller's dict keeps the kernel's code addresses under its key after the
    # first native loop; later loops under that key run from them.
    _needs_native()
    addresses = {}
    for call in range(3):
        counts = np.zeros(50, np.int64)
        kinds = (launch.array_kind(counts),)
        launch.parallel_kernel(_count_pieces, (counts,), 50, 2, kept=(addresses, kinds))
        assert np.array_equal(counts, np.ones(50, np.int64))
        assert list(addresses) == [kinds] and launches.count == call + 1


@numba.njit(nogil=True)
def _square_samples(values, scratch, squares, width, start, stop):
    # Units of (sample, element): each sample's squares through the thread's scratch.
    for unit in range(start, stop):
        scratch[0] = values[unit] * values[unit]
        squares[unit] = scratch[0]


@numba.njit(nogil=True)
def _sum_samples(squares, sums, width, start, stop):
    # Units of samples: reads the squares the first kernel wrote for its samples.
    for sample in range(start, stop):
        total = 0.0
        for i in range(width):
            total += squares[sample * width + i]
        sums[sample] = total


@pytest.mark.parametrize("samples, threads, paired", [(4, 2, True), (2, 2, True),
                                                      (3, 2, False), (4, 1, False)])
def test_a_pair_runs_each_samples_second_kernel_after_its_first(samples, threads, paired,
                                                                launches):
    # The second kernel's units of a sample read what the first wrote for it: the
    # oracle's sums hold only where the first ran before the second on each sample.
    # A pair that cannot run (threads not dividing the samples, one thread) runs
    # nothing and says so.
    _needs_native()
    width = 5
    values = np.arange(samples * width, dtype=np.float64)
    squares, sums = np.full_like(values, np.nan), np.full(samples, np.nan)
    ran = launch.parallel_pair(_square_samples, (values, squares, width), samples * width,
                               (1, 3, np.float64), _sum_samples, (squares, sums, width),
                               samples, samples, threads)
    assert ran == paired and launches.count == paired
    if paired:
        np.testing.assert_array_equal(sums, (values ** 2).reshape(samples, width).sum(1))
    else:
        assert np.isnan(squares).all() and np.isnan(sums).all()


def test_one_kernel_with_arguments_of_other_types(launches):
    # Each set of argument types gets the kernel's code compiled for it: arrays of
    # other dtypes, layouts or flags, scalars of other types; tuples go to the pool.
    source = np.arange(40.0)
    frozen = source.copy()
    frozen.flags.writeable = False
    cases = [(np.zeros(40), source, 2, 3), (np.zeros(40), source, 2.5, 2.0),
             (np.zeros(40, np.int64), np.arange(40), 2, 3),
             (np.zeros(80)[::2], source, 2, 3), (np.zeros(40), frozen, np.int32(2), 3),
             (np.zeros(40, np.float32), source.astype(np.float32), 1.5, 1.5)]
    for out, values, first, second in cases:
        launch.parallel_kernel(_add_product, (out, values, first, second), 40, 2)
        np.testing.assert_array_equal(out, values + first * second)
    out = np.zeros(40)
    launch.parallel_kernel(_add_pair, (out, source, (2, 3)), 40, 2)
    np.testing.assert_array_equal(out, source + 6)
    if launch.native_threads(2):
        assert launches.count == len(cases)


def test_the_loop_stays_within_its_threads_and_restores_numbas_count(launches):
    # OpenMP may give a loop fewer threads than it asks for (a whole test run once saw
    # both pieces on thread 0), never more; the caller's numba count comes back.
    _needs_native()
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        seen = np.full(8, -1, np.int64)
        launch.parallel_kernel(_record_threads, (seen,), 8, 2, pieces=8)
        assert launches.count == 1 and set(seen) <= {0, 1}
        assert numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(previous)


def test_more_threads_than_numbas_run_on_the_pool(launches):
    threads = numba.config.NUMBA_NUM_THREADS + 1
    assert not launch.native_threads(threads)
    counts = np.zeros(100, np.int64)
    launch.parallel_kernel(_count_pieces, (counts,), 100, threads)
    assert np.array_equal(counts, np.ones(100, np.int64)) and not launches


# Layers with enough work for the kernels to share it out on two threads: multiply-adds
# (schedules.py's DIRECT_PARALLEL_MACS) and, for the scatter of few output channels, a
# sixteenth of that in columns.  (data shape, weights shape, axes)
_LAYERS = {
    "direct-blocked": ((2, 32, 24, 24), (1, 32, 32, 3, 3), AxisPlan(24, 3, 2, 1, 1, 47)),
    # weights per output line beyond any L2: passes over the output channels of one
    # width, whole passes per thread in one kernel over all of them
    "direct-blocked passes": ((2, 512, 6, 6), (1, 512, 256, 4, 4),
                              AxisPlan(6, 4, 2, 1, 1, 12)),
    # the row kernel: a zeroed window of input rows per thread
    "direct": ((2, 32, 24, 24), (1, 32, 32, 3, 3), AxisPlan(24, 3, 2, 1, 1, 47)),
    "col2im-ncx": ((4, 64, 48, 48), (1, 64, 4, 3, 3), AxisPlan(48, 3, 2, 1, 1, 95)),
    # the filter streamed: two groups' products, each group's columns in a piece per
    # thread, from one table
    "stream": ((1, 256, 4, 4), (2, 128, 96, 4, 4), AxisPlan(4, 4, 2, 1, 1, 8)),
    # products over common.NATIVE_SPLIT_GEMM_FLOPS, split between native threads
    "gemm-ncx": ((2, 64, 32, 32), (1, 64, 64, 3, 3), AxisPlan(32, 3, 2, 1, 1, 63)),
}


@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "pool"])
@pytest.mark.parametrize("algorithm", list(_LAYERS))
def test_threaded_layers_match_the_oracle(algorithm, native, launches, monkeypatch):
    monkeypatch.setenv(launch.NATIVE_THREADS_ENV, native)
    if native == "1":
        _needs_native()
    data_shape, weights_shape, axis = _LAYERS[algorithm]
    rng = np.random.default_rng(5)
    data = rng.integers(-4, 5, data_shape).astype(np.float32)
    weights = rng.integers(-4, 5, weights_shape).astype(np.float32)
    expected = canonical_result(data, weights, (axis, axis))
    previous = runtime_threads.set_process_threads(2)
    try:
        got = transposed_convolution(data, weights, (axis, axis), dtype=np.dtype(np.float32),
                                     channels_last=False, algorithm=algorithm.split()[0])
    finally:
        runtime_threads.set_process_threads(previous)
    np.testing.assert_array_equal(got, expected)
    assert bool(launches) == (native == "1")


# Scripts run by a fresh interpreter: a process whose only threads are numba's team and
# the caller, with no thread placement in its environment (a test process has run
# other libraries' threads and loops before, and may have any environment).
_RECORD_STEERING = """
import json, os, threading, time
import numba
import numpy as np
from convtranspose._kernels import common
from convtranspose._kernels._numba import launch
@numba.njit(nogil=True)
def KERNEL(counts, start, stop):
    counts[start:stop] += 1
steered = []
steer = launch.steer_helpers_off_caller
launch.steer_helpers_off_caller = lambda keep, helpers: steered.append(set(helpers)) or steer(
    keep, helpers)
launch.spin_seconds = lambda: None  # the workers' spin unmeasured: the steering's own rule
"""

_STEER_AFTER_A_PAUSE = """
counts = np.zeros(64, np.int64)
launch.STEER_AFTER_SECONDS = 60.0
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # starts numba's team: finds the workers
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # soon after: not steered
back_to_back = len(steered)
launch.STEER_AFTER_SECONDS = 0.001
time.sleep(0.01)
launch.parallel_kernel(KERNEL, (counts,), 64, 2)
# the workers' affinities after the loop, while they live
affinities = [sorted(os.sched_getaffinity(worker)) for worker in (steered or [()])[-1]]
os.environ["OMP_PROC_BIND"] = "close"  # OpenMP's own placement is left alone
time.sleep(0.01)
launch.parallel_kernel(KERNEL, (counts,), 64, 2)
print(json.dumps({"counts": sorted(set(counts.tolist())), "back to back": back_to_back,
                  "steered": [sorted(workers) for workers in steered],
                  "caller": threading.get_native_id(), "affinities": affinities,
                  "own": sorted(os.sched_getaffinity(0))}))
"""


def _fresh_python(script: str) -> str:
    """``script``'s standard output, run by a fresh interpreter without OpenMP's thread
    placement or the library's pinning switch in its environment."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY",
                                  "OMP_NUM_THREADS", "CONVTRANSPOSE_PIN_THREADS")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_workers_are_steered_off_the_caller_after_a_pause_then_given_back():
    # After a pause numba's workers may sleep, and Linux would wake one on the caller's
    # CPU: they are narrowed to the caller's other CPUs first, and restored after.
    _needs_native()
    seen = json.loads(_fresh_python(_RECORD_STEERING + _STEER_AFTER_A_PAUSE))
    assert seen["counts"] == [4] and seen["back to back"] == 0
    (workers,) = seen["steered"]
    assert workers and seen["caller"] not in workers
    assert seen["affinities"] == [seen["own"]] * len(workers)  # given back


_STEER_WITHIN_THE_SPIN = """
counts = np.zeros(64, np.int64)
launch.STEER_AFTER_SECONDS = 0.001
launch.spin_seconds = lambda: 0.4  # as if measured: workers spin 0.4 s after a loop
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # starts numba's team: finds the workers
time.sleep(0.02)
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # within half the spin: not steered
within = len(steered)
time.sleep(0.3)
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # past it: steered
print(json.dumps({"counts": sorted(set(counts.tolist())), "within": within,
                  "steered": len(steered)}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_loops_within_half_the_measured_spin_are_not_steered():
    _needs_native()
    seen = json.loads(_fresh_python(_RECORD_STEERING + _STEER_WITHIN_THE_SPIN))
    assert seen["counts"] == [3] and seen["within"] == 0 and seen["steered"] == 1


_STEER_WHILE_THREADS_START = """
KERNEL(np.zeros(64, np.int64), 0, 64)  # compiled before the threads start
stop = threading.Event()


def start_threads():  # other threads appear while numba's team starts, and live on
    while not stop.is_set():
        threading.Thread(target=stop.wait, daemon=True).start()
        time.sleep(0.002)


threading.Thread(target=start_threads, daemon=True).start()
time.sleep(0.02)
before = {int(name) for name in os.listdir("/proc/self/task")}  # OpenBLAS's among them
launch.parallel_kernel(KERNEL, (np.zeros(64, np.int64),), 64, 2)  # starts the team
time.sleep(0.02)
launch.parallel_kernel(KERNEL, (np.zeros(64, np.int64),), 64, 2)  # steered
python_threads = {thread.native_id for thread in threading.enumerate()}
team = {int(name) for name in os.listdir("/proc/self/task")} - before - python_threads
stop.set()
print(json.dumps({"steered": [sorted(workers) for workers in steered], "team": sorted(team),
                  "others": len(python_threads)}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_the_workers_steered_are_numbas_alone_while_other_threads_start():
    # The threads that start in the process while numba's team does are not its workers:
    # those steered are exactly the threads that appeared with it and that Python did not
    # start.
    _needs_native()
    seen = json.loads(_fresh_python(_RECORD_STEERING + _STEER_WHILE_THREADS_START))
    assert seen["others"] > 5 and seen["team"]
    assert seen["steered"] == [seen["team"]]


_FIRST_LOOP_A_SPLIT_PRODUCT = """
a, b = np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)
c = np.zeros((64, 64), np.float32)
common.split_gemms([[(a, b, c, False)]], 2)  # the team's first loop: BLAS blocks
assert launch.native_loops_run() == 1 and (c == 64).all()
time.sleep(0.01)
launch.parallel_kernel(KERNEL, (np.zeros(8, np.int64),), 8, 2)
(workers,) = steered
assert workers and threading.get_native_id() not in workers, steered
print("steered", len(workers))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_workers_are_found_whichever_native_loop_starts_them():
    # The split BLAS products' loop starts numba's team in a new process: its workers
    # are found there too, and steered before a later kernel's loop after a pause.
    _needs_native()
    assert "steered" in _fresh_python(_RECORD_STEERING + _FIRST_LOOP_A_SPLIT_PRODUCT)


_FORKED_CHILD = """
import os
import numba
import numpy as np
from convtranspose._kernels._numba import launch
@numba.njit(nogil=True)
def count_pieces(counts, start, stop):
    counts[start:stop] += 1
counts = np.zeros(100, np.int64)
launch.parallel_kernel(count_pieces, (counts,), 100, 2)  # the layer's threads start
pid = os.fork()
if pid == 0:  # numba would end a child that starts GNU OpenMP's loop again
    try:
        counts[:] = 0
        launch.parallel_kernel(count_pieces, (counts,), 100, 2)
        os._exit(0 if np.array_equal(counts, np.ones(100, np.int64)) else 1)
    finally:
        os._exit(2)
print(os.waitpid(pid, 0)[1])
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_its_kernels_on_the_pool():
    # In a fresh interpreter: a fork also shuts down OpenBLAS's workers in the parent
    # (its fork handler), and the ones it starts again later spin after a product, which
    # tests of idle threads after this one in the same process would count.
    _needs_native()
    assert _fresh_python(_FORKED_CHILD).split()[-1] == "0"


def test_concurrent_callers_each_get_their_pieces():
    errors = []

    def caller(seed):
        try:
            for trial in range(40):
                count = 50 + seed * 7 + trial
                counts = np.zeros(count, np.int64)
                launch.parallel_kernel(_count_pieces, (counts,), count, 2)
                assert np.array_equal(counts, np.ones(count, np.int64))
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    callers = [threading.Thread(target=caller, args=(seed,)) for seed in range(3)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    assert not errors


def _split_cases(rng):
    """(units, results, expected results): products of small integers (exact in
    float32), C and transposed results, a broadcast operand (copied for BLAS), a unit
    whose calls accumulate in order."""
    def operand(*shape):
        return rng.integers(-4, 5, shape).astype(np.float32)

    a, b = operand(40, 24), operand(24, 36)
    c_plain = np.zeros((40, 36), np.float32)
    c_transposed = np.zeros((36, 40), np.float32).T
    broadcast = np.broadcast_to(operand(1, 24), (40, 24))
    c_broadcast = np.zeros((40, 36), np.float32)
    c_sum = np.ones((40, 36), np.float32)
    units = [[(a, b, c_plain, False)], [(a, b, c_transposed, False)],
             [(broadcast, b, c_broadcast, False)],
             [(a, -b, c_sum, False)] + [(a, b, c_sum, True)] * 3]
    product = a.astype(np.float64) @ b
    expected = [product, product, broadcast.astype(np.float64) @ b, 2 * product]
    return units, [c_plain, c_transposed, c_broadcast, c_sum], expected


@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "pool"])
def test_split_products_match_the_oracle(native, launches, monkeypatch):
    from convtranspose._kernels.common import split_gemms

    monkeypatch.setenv(launch.NATIVE_THREADS_ENV, native)
    units, results, expected = _split_cases(np.random.default_rng(9))
    split_gemms(units, 2)
    for result, wanted in zip(results, expected):
        np.testing.assert_array_equal(result, wanted)
    assert launches.count == (1 if native == "1" and launch.native_threads(2) else 0)


_LAYER_STARTED = """
import importlib, json
if FIRST == "openvino":
    import openvino  # loads OpenVINO's own TBB library
    openvino.Core().available_devices
import numba
import numpy as np
from convtranspose._kernels._numba import launch
@numba.njit(nogil=True)
def KERNEL(counts, start, stop):
    counts[start:stop] += 1
try:
    importlib.import_module("numba.np.ufunc.omppool")
    openmp = True
except ImportError:  # no GNU OpenMP library here
    openmp = False
layer = launch._threading_layer()  # what the library's first loop starts
counts = np.zeros(64, np.int64)
launch.parallel_kernel(KERNEL, (counts,), 64, 2)
print(json.dumps({"layer": layer, "openmp": openmp,
                  "order": list(numba.config.THREADING_LAYER_PRIORITY),
                  "counts": sorted(set(counts.tolist()))}))
"""


def _layer_started(first: str) -> dict:
    """What a fresh interpreter's first parallel loop started (:data:`_LAYER_STARTED`),
    with ``first`` imported before it."""
    return json.loads(_fresh_python(f"FIRST = {first!r}" + _LAYER_STARTED).splitlines()[-1])


@pytest.mark.parametrize("first", ["nothing", "openvino"])
def test_numbas_threads_start_on_gnu_openmp_where_nobody_chose(first, monkeypatch):
    # numba's own order puts TBB first, which a process that imported OpenVINO (it
    # ships a TBB library) would start: the library's loops ran slower there.
    if first == "openvino":
        pytest.importorskip("openvino")
    for name in ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY"):
        monkeypatch.delenv(name, raising=False)
    seen = _layer_started(first)
    assert seen["counts"] == [1]
    assert seen["order"][0] == "omp"
    if seen["openmp"]:
        assert seen["layer"] == "omp"


@pytest.mark.parametrize("chosen", [{"NUMBA_THREADING_LAYER": "workqueue"},
                                    {"NUMBA_THREADING_LAYER_PRIORITY": "workqueue omp tbb"}])
def test_a_threading_layer_the_user_chose_is_kept(chosen, monkeypatch):
    for name in ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in chosen.items():
        monkeypatch.setenv(name, value)
    seen = _layer_started("nothing")
    assert seen["layer"] == "workqueue"  # not thread-safe: the pool ran the pieces
    assert seen["counts"] == [1]
    if "NUMBA_THREADING_LAYER_PRIORITY" in chosen:
        assert seen["order"] == ["workqueue", "omp", "tbb"]
