"""How long numba's workers keep spinning after a native loop, measured once per process.

GNU OpenMP's workers spin on their CPUs for a while after a parallel loop before they
sleep (``GOMP_SPINCOUNT`` and ``OMP_WAIT_POLICY`` decide for how many iterations, the
CPU for how long each takes).  A loop that starts while they spin needs no steering
(:func:`convtranspose._kernels._numba.launch.steered_workers`): its affinity calls then
only cost time, 2-4% of a 2.5 ms depthwise layer's call on an AMD EPYC Zen 1, whose
workers spun 5-10 ms (``benchmarks/results/worker-spin-zen1.json``).

After a native loop, a watcher thread reads the state of the workers the roll call
found (Linux's ``/proc/self/task/<id>/stat``) every :data:`POLL_SECONDS`.  Once none
is running, the time since the process's last native loop ended is how long they spun
(less than a poll too long).  Loops back to back keep them running: the watch ends
after :data:`WATCH_SECONDS` without a result, and a later loop, at least
:data:`RETRY_SECONDS` after, tries again, at most :data:`TRIES` times.  Where nothing
was measured, :func:`spin_seconds` is None.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable

__all__ = ["LONGEST_SECONDS", "POLL_SECONDS", "RETRY_SECONDS", "TRIES", "WATCH_SECONDS",
           "spin_seconds", "watch_after_loop"]

#: How often the watcher reads the workers' states: often enough to place their sleep
#: within a small part of the shortest spins that matter (a steering's cost is tens of
#: us), rarely enough that its own wake-ups do not keep a 2-CPU machine busy.
POLL_SECONDS = 2.5e-4
#: How long one watch lasts at most, and how long after it the next may start.
WATCH_SECONDS = 1.0
RETRY_SECONDS = 10.0
#: Watches a process makes before it gives up.
TRIES = 4
#: Workers still running this long after the last loop spin for good
#: (``OMP_WAIT_POLICY=active``): the watch ends with this duration.
LONGEST_SECONDS = 0.5

_state: dict = {"seconds": None, "watching": False, "tries": 0, "next": 0.0}


def _after_fork_in_child() -> None:
    # A fork copies no watcher thread: its watch ends here (the spin measured stays).
    _state["watching"] = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def spin_seconds() -> float | None:
    """How long the workers spun after a native loop before they all slept, or None
    where no watch has found out yet."""
    return _state["seconds"]


def watch_after_loop(workers: Iterable[int], since_loop: Callable[[], float],
                     read_state: Callable[[int], str | None] | None = None) -> None:
    """Start a watch of ``workers`` (system thread ids) where none found out, none runs
    and tries are left.  ``since_loop()``: seconds since the process's last native
    loop ended.  ``read_state``: a thread's state letter (``R`` running, ``S``
    asleep), or None where it is gone; Linux's by default."""
    if (_state["seconds"] is not None or _state["watching"] or not workers
            or _state["tries"] >= TRIES or time.perf_counter() < _state["next"]):
        return
    _state["watching"], _state["tries"] = True, _state["tries"] + 1
    threading.Thread(target=_watch, args=(tuple(workers), since_loop,
                                          read_state or _ProcStates()),
                     name="worker-spin-watch", daemon=True).start()


def _watch(workers: tuple[int, ...], since_loop: Callable[[], float],
           read_state: Callable[[int], str | None]) -> None:
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < WATCH_SECONDS:
            spun = since_loop()  # read first: a loop ending meanwhile leaves them running
            states = [read_state(worker) for worker in workers]
            if None in states:  # a worker is gone: nothing to learn from this team
                return
            if "R" not in states:
                _state["seconds"] = spun
                return
            if spun >= LONGEST_SECONDS:
                _state["seconds"] = LONGEST_SECONDS
                return
            time.sleep(POLL_SECONDS)
    finally:
        getattr(read_state, "close", lambda: None)()
        _state["watching"] = False
        _state["next"] = time.perf_counter() + RETRY_SECONDS


class _ProcStates:
    """The state letter of this process's thread ``thread_id`` (Linux's ``/proc``), or
    None where it is gone.  Each thread's ``stat`` file is opened once per watch and
    read again in place: the watch polls while the workers may be busy with the next
    loop, and an open, read and close took 16 us of a CPU where a read of the open
    file takes 4 (AMD EPYC Zen 4; ``benchmarks/results/worker-spin-zen4.json``)."""

    def __init__(self) -> None:
        self._files: dict[int, int] = {}

    def __call__(self, thread_id: int) -> str | None:
        try:
            file = self._files.get(thread_id)
            if file is None:
                file = self._files[thread_id] = os.open(f"/proc/self/task/{thread_id}/stat",
                                                         os.O_RDONLY)
            text = os.pread(file, 1024, 0)
        except OSError:
            return None
        end = text.rfind(b")")  # the name, in parentheses, may hold anything
        return text[end + 2:end + 3].decode("ascii", "replace") if end >= 0 else None

    def close(self) -> None:
        for file in self._files.values():
            os.close(file)
        self._files.clear()
