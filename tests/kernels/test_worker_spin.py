"""The watch of numba's workers after a native loop: how long they spun before they all
slept, from their states as Linux (or a stand-in) reports them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from convtranspose._kernels._numba import worker_spin


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(worker_spin, "_state",
                        {"seconds": None, "watching": False, "tries": 0, "next": 0.0})
    monkeypatch.setattr(worker_spin, "POLL_SECONDS", 1e-4)
    return worker_spin


def _finished(module, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while module._state["watching"] and time.monotonic() < deadline:
        time.sleep(0.001)
    assert not module._state["watching"]


def _states(sequence: list[str | None]):
    """A reader that gives each worker the next state of ``sequence`` per poll (the
    last one from then on), and the polls it answered."""
    polls = []

    def read(worker: int) -> str | None:
        polls.append(worker)
        return sequence[min(len(polls) - 1, len(sequence) - 1)]

    return read, polls


def test_the_spin_is_the_time_since_the_loop_when_every_worker_sleeps(fresh):
    read, polls = _states(["R", "R", "R", "S"])
    since = iter([0.001, 0.002, 0.003, 0.004, 0.005])
    fresh.watch_after_loop([7], lambda: next(since), read)
    _finished(fresh)
    assert fresh.spin_seconds() == 0.004 and polls == [7] * 4
    fresh.watch_after_loop([7], lambda: 1.0, read)  # found out: no second watch
    assert not fresh._state["watching"] and len(polls) == 4


def test_one_running_worker_keeps_the_watch_going(fresh):
    answers = iter(["S", "R", "S", "S"])
    fresh.watch_after_loop([1, 2], lambda: 0.002, lambda worker: next(answers))
    _finished(fresh)
    assert fresh.spin_seconds() == 0.002


def test_workers_that_never_sleep_spin_for_good(fresh):
    fresh.watch_after_loop([3], lambda: fresh.LONGEST_SECONDS, lambda worker: "R")
    _finished(fresh)
    assert fresh.spin_seconds() == fresh.LONGEST_SECONDS


def test_a_gone_worker_or_loops_back_to_back_tell_nothing_and_later_loops_retry(
        fresh, monkeypatch):
    fresh.watch_after_loop([3], lambda: 0.001, lambda worker: None)
    _finished(fresh)
    assert fresh.spin_seconds() is None and fresh._state["tries"] == 1
    fresh.watch_after_loop([3], lambda: 0.001, lambda worker: "S")  # too soon after
    assert fresh._state["tries"] == 1
    monkeypatch.setattr(fresh, "WATCH_SECONDS", 0.02)
    monkeypatch.setattr(fresh, "RETRY_SECONDS", 0.0)
    fresh._state["next"] = 0.0
    for tries in range(2, fresh.TRIES + 1):  # busy workers, each loop just ended
        fresh.watch_after_loop([3], lambda: 0.0001, lambda worker: "R")
        _finished(fresh)
        assert fresh.spin_seconds() is None and fresh._state["tries"] == tries
    fresh.watch_after_loop([3], lambda: 0.001, lambda worker: "S")  # no tries left
    assert not fresh._state["watching"] and fresh.spin_seconds() is None
    fresh.watch_after_loop([], lambda: 0.001, lambda worker: "S")
    assert not fresh._state["watching"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_linux_states_of_a_sleeping_and_a_gone_thread(fresh, monkeypatch):
    # The default reader, from /proc: a thread blocked on an event is asleep, so the
    # watch ends with the time since the loop; once the thread has exited, its state
    # is gone and a later watch learns nothing.
    release = threading.Event()
    sleeper = threading.Thread(target=release.wait)
    sleeper.start()
    try:
        fresh.watch_after_loop([sleeper.native_id], lambda: 0.003)
        _finished(fresh)
        assert fresh.spin_seconds() == 0.003
    finally:
        release.set()
        sleeper.join()
    monkeypatch.setattr(fresh, "_state",
                        {"seconds": None, "watching": False, "tries": 0, "next": 0.0})
    fresh.watch_after_loop([sleeper.native_id], lambda: 0.003)
    _finished(fresh)
    assert fresh.spin_seconds() is None and fresh._state["tries"] == 1


_AFTER_A_LOOP = """
import json, time
import numba
import numpy as np
from convtranspose._kernels._numba import launch, worker_spin
@numba.njit(nogil=True)
def KERNEL(counts, start, stop):
    counts[start:stop] += 1
counts = np.zeros(64, np.int64)
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # finds the workers
launch.parallel_kernel(KERNEL, (counts,), 64, 2)  # watched after
time.sleep(worker_spin.LONGEST_SECONDS + 0.5)
print(json.dumps({"seconds": worker_spin.spin_seconds(), "counts": sorted(set(counts.tolist()))}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_numba_workers_are_watched_until_they_sleep():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no team of workers")
    pytest.importorskip("numba")
    done = subprocess.run([sys.executable, "-c", _AFTER_A_LOOP], capture_output=True,
                          text=True, timeout=600,
                          env={key: value for key, value in os.environ.items()
                               if key != "CONVTRANSPOSE_PIN_THREADS"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["counts"] == [2]
    assert found["seconds"] is not None
    assert 0 <= found["seconds"] <= worker_spin.LONGEST_SECONDS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_may_watch_again(fresh):
    fresh._state["watching"] = True  # a watch under way in the parent
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.write(writer, b"1" if not fresh._state["watching"] else b"0")
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(reader, 1) == b"1" and fresh._state["watching"]
    fresh._state["watching"] = False
