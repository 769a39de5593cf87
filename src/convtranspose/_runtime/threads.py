"""The one thread pool: every parallel loop of the library runs through :func:`parallel_for`.

The calling thread always takes part; up to ``THREADS - 1`` helper threads of one
pool join it.  Work is cut into more pieces than threads, taken in turn, so that a
thread whose core is busy with other work does fewer pieces instead of holding up
the call.  NumPy copies and BLAS calls release the GIL, and numba kernels are
compiled ``nogil``, so these threads run in parallel.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["THREADS", "parallel_copy", "parallel_for", "parallel_parts"]

#: Threads of a parallel loop, the caller included: the CPUs, up to 8 (memory-bound
#: kernels gain little beyond that, and a library call should not take a whole server).
THREADS = max(1, min(os.cpu_count() or 1, 8))
#: Pieces of a loop per thread (see the module docstring).
_PIECES_PER_THREAD = 8
#: Threads for NumPy copies and adds between BLAS products: one, because OpenBLAS's
#: worker threads spin for tens of milliseconds after each product and a second copy
#: thread then waits for a core (``benchmarks/results/thread-steering.json``).
_COPY_THREADS = 1
#: Copies and adds of fewer elements than this are never split.
_PARALLEL_ELEMENTS = 1 << 18
_pool = None
_pool_size = 0


def _helper_pool(helpers: int) -> ThreadPoolExecutor:
    """The pool, with at least ``helpers`` threads (replaced by a larger one if needed)."""
    global _pool, _pool_size
    if _pool is None or _pool_size < helpers:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _helper_ids.clear()  # only this pool's threads are steered
        _pool_size = max(helpers, THREADS - 1)
        _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="convtranspose")
    return _pool


#: Native ids of the current pool's helper threads (each adds its own as it takes work).
_helper_ids: set[int] = set()


#: Cleared when the system refuses to set a helper's CPU affinity.
_steering = True


def _forget_helpers() -> None:
    # A forked child has none of the parent's threads; its ids may name other threads.
    global _pool
    _pool = None
    _helper_ids.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


@functools.lru_cache(maxsize=1)
def _sched_getcpu():
    """libc's ``sched_getcpu`` (the calling thread's CPU), or None where it is missing."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = ()
    return function


def _steer_helpers_off_caller() -> None:
    """Let the helper threads run on any allowed CPU but the calling thread's.

    Linux wakes a thread on the waker's CPU when that CPU looks lightly loaded, as
    it does after the caller slept: the helper then shares one CPU with the caller
    until the load balancer moves it, milliseconds later, and a call of a few
    milliseconds after a pause runs at about half speed.  (Other runtimes' worker
    threads spin for tens of milliseconds after a call instead of sleeping at once,
    and so keep their CPUs.)  Costs a few system calls per parallel call
    (``benchmarks/results/thread-steering.json``).
    """
    global _steering
    getcpu = _sched_getcpu()
    if getcpu is None or not _steering or not _helper_ids:
        return
    try:
        others = os.sched_getaffinity(0) - {getcpu()}
        for helper in tuple(_helper_ids) if others else ():
            try:
                os.sched_setaffinity(helper, others)
            except ProcessLookupError:  # a thread of a pool since dropped
                _helper_ids.discard(helper)
    except OSError:  # not allowed here (a sandbox): the scheduler decides alone
        _steering = False


def parallel_for(function, count: int, threads: int) -> None:
    """``function(start, stop)`` over ``range(count)``, on up to ``threads`` threads.

    The range is cut into several pieces per thread that the threads (the calling
    one included) take in turn: on a machine shared with other work, a thread whose
    core is busy does fewer pieces instead of holding up the whole call.
    """
    threads = max(1, min(threads, count))
    if threads == 1:
        function(0, count)
        return
    pieces = min(count, threads * _PIECES_PER_THREAD)
    bounds = [count * i // pieces for i in range(pieces + 1)]
    taken = itertools.count()  # next() is atomic under the GIL

    def work():
        for i in iter(taken.__next__, None):
            if i >= pieces:
                return
            function(bounds[i], bounds[i + 1])

    def helper_work():
        _helper_ids.add(threading.get_native_id())
        work()

    _steer_helpers_off_caller()
    pool = _helper_pool(threads - 1)
    helpers = [pool.submit(helper_work) for _ in range(threads - 1)]
    work()
    for helper in helpers:
        helper.result()


def parallel_parts(work, parts: int, threads: int) -> None:
    """``work(i)`` for every ``i`` in ``range(parts)``, on up to ``threads`` threads."""
    def run(start, stop):
        for i in range(start, stop):
            work(i)

    parallel_for(run, parts, threads)


def _split_axis(shape: tuple[int, ...]) -> int | None:
    for axis, size in enumerate(shape[:3]):
        if size >= _COPY_THREADS:
            return axis
    return None


def parallel_copy(operation, destination: np.ndarray, source: np.ndarray) -> None:
    """``operation(destination, source)`` (a copy or an in-place add), split between threads.

    Both arrays have the same shape; the work is split along one of the leading axes,
    so every thread writes a disjoint part of ``destination``.
    """
    axis = _split_axis(destination.shape)
    if _COPY_THREADS == 1 or destination.size < _PARALLEL_ELEMENTS or axis is None:
        operation(destination, source)
        return
    size = destination.shape[axis]
    bounds = [size * i // _COPY_THREADS for i in range(_COPY_THREADS + 1)]

    def part(i):
        index = [slice(None)] * destination.ndim
        index[axis] = slice(bounds[i], bounds[i + 1])
        operation(destination[tuple(index)], source[tuple(index)])

    parallel_parts(part, _COPY_THREADS, _COPY_THREADS)


def copy(destination, source):
    """``destination[...] = source`` with any cast (a :func:`parallel_copy` operation)."""
    np.copyto(destination, source, casting="unsafe")


def add(destination, source):
    """``destination += source`` (a :func:`parallel_copy` operation)."""
    np.add(destination, source, out=destination)
