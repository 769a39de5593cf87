"""No algorithm leaves threads busy after it returns: OpenBLAS's own workers spin for
about 0.1 s after a product it threads, taking a core from whatever runs next, and
measured planning, which times the candidates in turn, then ranks every candidate on
more than one thread after such a one as slow (a 512->3 head chose ``direct`` on one
thread over ``col2im-ncx`` on two, which the spinning made 1.5-3x slower)."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from convtranspose import host_target, use_target
from convtranspose._kernels import ALGORITHMS
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import blas
from kernel_support import run_forced
from oracle import canonical_result

#: The window watched after a call, and the CPU time the other threads may take in it:
#: a worker spinning through the window takes about all of it; numba's OpenMP workers
#: wait spinning for a few milliseconds at most.
WINDOW_SECONDS = 0.06
BUSY_SECONDS = 0.03


def _other_threads_seconds() -> float:
    """CPU seconds taken so far by this process's threads other than the caller."""
    hertz = os.sysconf("SC_CLK_TCK")
    caller = str(threading.get_native_id())
    total = 0
    for task in os.listdir("/proc/self/task"):
        if task == caller:
            continue
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / hertz


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_no_algorithm_leaves_threads_spinning(algorithm):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no other thread to spin")
    # 512 -> 3 channels, k4 s2: 48 filter columns per input channel (no whole chunk of
    # `stream`'s numba blocks, which then runs the product in NumPy), 3.1M multiply-adds
    # (OpenBLAS threads such products).
    axes = (AxisPlan(8, 4, 2, 1, 1, 16),) * 2
    rng = np.random.default_rng(3)
    data = rng.integers(-3, 4, (2, 512, 8, 8)).astype(np.float32)
    weights = rng.integers(-3, 4, (1, 512, 3, 4, 4)).astype(np.float32)
    expected = canonical_result(data, weights, axes)
    with use_target(host_target().replace(threads=2)), blas.at_most(2):
        for _ in range(2):
            got = run_forced(data, weights, axes, np.float32, False, algorithm)
        before = _other_threads_seconds()
        time.sleep(WINDOW_SECONDS)
        busy = _other_threads_seconds() - before
    np.testing.assert_array_equal(got, expected)
    assert busy < BUSY_SECONDS, f"{algorithm}: other threads took {busy:.3f} s of CPU"
