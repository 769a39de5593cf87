"""The one thread pool: every parallel loop of the library runs through :func:`parallel_for`,
but the compiled kernels' loops that run on numba's native threads
(:mod:`convtranspose._kernels._numba.launch`, which falls back to this pool).

The calling thread always takes part; up to ``threads - 1`` helper threads of one
pool join it.  Work is cut into more pieces than threads, taken in turn, so that a
thread whose core is busy with other work does fewer pieces instead of holding up
the call.  NumPy copies and BLAS calls release the GIL, and numba kernels are
compiled ``nogil``, so these threads run in parallel.

How many threads
    :func:`process_threads`, from the environment at import, read at first use:
    ``NUMBA_NUM_THREADS``, else ``OMP_NUM_THREADS`` (its first entry), else the CPUs
    this process may run on, up to 8 (a ``NUMBA_NUM_THREADS`` that is not a positive
    integer is removed from the environment at import, as numba would refuse to
    start).  :func:`set_process_threads` replaces it for the whole process (the public
    ``convtranspose.set_num_threads``); :mod:`.target` layers the per-context setting
    on top and builds the :class:`~.target.Target` that carries the count.

CPU affinity
    A parallel loop narrows its helpers' affinity for their wake-up only, and each
    helper sets its own back as it starts (:func:`steer_helpers_off_caller`); it stays
    narrowed when asked for, and is never touched when forbidden
    (:data:`PIN_THREADS_ENV`, :func:`set_pinning`, :func:`steering_mode`).
"""

from __future__ import annotations

import contextvars
import itertools
import math
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .caches import kept
from .config import PIN_THREADS_ENV, switch

__all__ = ["THREAD_COUNT_ENVS", "default_threads",
           "SPLIT_SIZES", "copy_threads", "parallel_copy_bytes", "register_copy_split",
           "MAX_THREADS", "parallel_copy", "parallel_for", "parallel_parts", "pinning", "process_threads",
           "set_pinning", "set_process_threads", "pool", "helper_ids", "steering",
           "restore_affinities", "steer_helpers_off_caller", "steering_mode",
           "count_native_loop", "native_loops_run", "seconds_since_loop"]

#: Environment variables giving the default thread count, the first one set wins
#: (numba's and OpenMP's conventions; ``OMP_NUM_THREADS`` may list one count per
#: nesting level, of which the first applies).  Read once, at import.
THREAD_COUNT_ENVS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")
#: The most threads the default takes from the CPU count: memory-bound kernels gain
#: little beyond that, and a library call should not take a whole server.  A count
#: the user sets (the API or the environment variables above) is taken as it is.
_MAX_DEFAULT_THREADS = 8
#: The most threads any setting may ask for: far above any CPU count a library call
#: can use, and small enough that no count overflows the C integers it reaches
#: (OpenBLAS's thread count, a pool's size).
MAX_THREADS = 1024


#: Sizes in bytes a copy split between threads is timed at
#: (:func:`convtranspose._kernels._numba.transpose.measure_copy_split`): 128 KiB to 16
#: MiB, doubling, from copies a split cannot pay for to ones past the caches of the
#: CPUs this library runs on.  Smaller copies are never split.
SPLIT_SIZES = tuple(1 << bits for bits in range(17, 25))
#: Where :func:`parallel_copy_bytes` reads this machine's figure: a function
#: registered by the layer that measures and keeps machine figures
#: (:mod:`convtranspose._choose.figures`), which this layer may not import.
_copy_split: dict = {"source": None}


def register_copy_split(source) -> None:
    """Read :func:`parallel_copy_bytes` from ``source(warm)``: the smallest copy in
    bytes worth splitting between numba's threads on this machine, or None while it is
    not known."""
    _copy_split["source"] = source


def parallel_copy_bytes(warm: bool) -> float:
    """The layout copies, casts and word passes that run on numba's native threads
    split between the threads from this many bytes on; smaller ones run on the
    calling thread.  ``warm``: numba's threads ended a loop a moment ago and are still
    spinning, so starting them costs little.

    A machine figure, not a constant: where two threads start paying depends on the
    CPU, its caches and what it costs to wake the threads (on an AMD Zen 4, right
    after a loop from 256 KiB-1 MiB on, after a rest of 2 ms from 1-4 MiB, by the
    host's spell).  Both are
    measured once per machine, the first time a copy could be split, and kept in the
    wisdom file (:func:`convtranspose._choose.figures.copy_split_bytes`).  Until they
    are known, every copy runs on one thread.
    """
    source = _copy_split["source"]
    found = None if source is None else source(warm)
    return math.inf if found is None else float(found)


#: A copy that starts within this many seconds of a native loop's end (a kernel's
#: result copied out) takes the size measured right after a loop: the copy's own
#: start follows within microseconds there, and numba's threads spin far longer than
#: this after a loop (waking them took 10-12 us back to back and 53-55 us after 1 ms
#: on an AMD Zen 3, ``benchmarks/results/native-threads-zen3.json``).
_WARM_SECONDS = 1e-4


def copy_threads(nbytes: int, threads: int) -> int:
    """The threads a compiled copy of ``nbytes`` runs on, of the caller's ``threads``:
    all of them from this machine's measured size on (:func:`parallel_copy_bytes`; the
    smaller one where a native loop ended within :data:`_WARM_SECONDS`), else one."""
    if threads == 1 or nbytes < SPLIT_SIZES[0]:
        return 1
    warm = seconds_since_loop() < _WARM_SECONDS
    return threads if nbytes >= parallel_copy_bytes(warm) else 1


def _env_count(name: str, environ) -> int | None:
    """The positive thread count environment variable ``name`` gives, or None.

    A value that is not a positive integer is ignored with a :class:`RuntimeWarning`
    (a typo in the environment should not stop a program at import).
    """
    value = environ.get(name, "")
    if not value.strip():
        return None
    first = value.split(",")[0] if name == "OMP_NUM_THREADS" else value
    try:
        count = int(first.strip())
    except ValueError:
        count = 0
    if count < 1:
        warnings.warn(f"{name}={value!r} is not a positive integer thread count; "
                      "convtranspose ignores it", RuntimeWarning, stacklevel=3)
        return None
    if count > MAX_THREADS:
        warnings.warn(f"{name}={value!r} is over {MAX_THREADS} threads; convtranspose "
                      f"uses {MAX_THREADS}", RuntimeWarning, stacklevel=3)
        return MAX_THREADS
    return count


def available_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where the system has one.

    ``os.process_cpu_count`` (Python 3.13+) is the affinity mask's size unless the
    interpreter was told otherwise (``-X cpu_count``, ``PYTHON_CPU_COUNT``), which it
    honours; before 3.13 the mask itself, else every CPU of the machine.
    """
    counter = getattr(os, "process_cpu_count", None)
    if counter is not None:
        return max(1, counter() or 1)
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def default_threads(environ=None) -> int:
    """The thread count without an API setting: the first of :data:`THREAD_COUNT_ENVS`
    set to a positive integer, else :func:`available_cpus` up to 8."""
    environ = os.environ if environ is None else environ
    for name in THREAD_COUNT_ENVS:
        count = _env_count(name, environ)
        if count is not None:
            return count
    return min(available_cpus(), _MAX_DEFAULT_THREADS)


#: The thread-count variables as they were at import: the count is read from them at
#: first use, so that a bad value's warning comes when the library is used (and the
#: command line shows it as its one warning line), not while it is imported.
_ENVIRON_AT_IMPORT = {name: os.environ.get(name, "") for name in THREAD_COUNT_ENVS}


def _drop_unusable_numba_count() -> None:
    """Remove a ``NUMBA_NUM_THREADS`` that is not a positive integer from the
    environment before numba is imported: numba raises at import on one (``0``,
    ``-1``) and would make the value, which the library ignores with a warning, stop
    every kernel.  numba then takes its own default."""
    import sys

    value = os.environ.get("NUMBA_NUM_THREADS", "")
    if not value.strip() or "numba" in sys.modules:
        return
    try:
        usable = int(value.strip()) >= 1
    except ValueError:
        usable = False
    if not usable:
        del os.environ["NUMBA_NUM_THREADS"]


_drop_unusable_numba_count()
#: The process-wide count (:func:`set_process_threads`); None until first read from
#: the environment (:func:`default_threads` on :data:`_ENVIRON_AT_IMPORT`).
_process_threads: int | None = None
_count_lock = threading.Lock()


def process_threads() -> int:
    """The process-wide thread count: what :func:`set_process_threads` set, else the
    environment's at import and the CPU affinity (:func:`default_threads`)."""
    global _process_threads
    count = _process_threads
    if count is None:
        with _count_lock:
            count = _process_threads
            if count is None:
                count = _process_threads = default_threads(_ENVIRON_AT_IMPORT)
    return count


def set_process_threads(count: int) -> int:
    """Make ``count`` (at least 1, checked by the caller) the process-wide thread count.

    Returns the previous one.  A pool with room for more helpers than ``count - 1`` is
    let go (its threads end once their work is done), so that lowering the count
    frees the threads; the next parallel call makes a pool that fits.
    """
    global _process_threads
    previous = process_threads()
    with _pool_lock:
        _process_threads = count
        if pool is not None and _pool_size > count - 1:
            _drop_pool()
    return previous


#: Pieces of a loop per thread (see the module docstring).
PIECES_PER_THREAD = 8
#: Threads for NumPy copies and adds between BLAS products: one, because OpenBLAS's
#: worker threads spin for tens of milliseconds after each product and a second copy
#: thread then waits for a core (``benchmarks/results/thread-steering.json``).
_COPY_THREADS = 1
#: Copies and adds of fewer elements than this are never split.
_PARALLEL_ELEMENTS = 1 << 18
#: The helper threads' pool and its size (None and 0 until a parallel call makes one).
pool = None
_pool_size = 0
#: Guards the pool: a parallel call takes it and submits its work in one step, so that
#: a pool another thread lets go (:func:`set_process_threads`) never receives work.
_pool_lock = threading.Lock()
#: Native ids of the current pool's helper threads (each adds its own as it takes work).
helper_ids: set[int] = set()
#: Cleared when the system refuses to set a helper's CPU affinity.
steering = True
#: :func:`set_pinning`'s choice; None: :data:`PIN_THREADS_ENV` decides.
_pinning: bool | None = None
#: Whether a helper's affinity was changed since steering was last turned off.
_steered = False


def _drop_pool() -> None:
    """Let the pool go (its threads end after the work already submitted); hold the lock."""
    global pool, _pool_size
    pool.shutdown(wait=False)
    pool, _pool_size = None, 0
    helper_ids.clear()  # only the current pool's threads are steered


def _submit(work, helpers: int) -> list:
    """``work`` submitted to ``helpers`` threads of the pool, which is made (or replaced
    by a larger one) to hold at least ``helpers`` and the process-wide count's."""
    global pool, _pool_size
    with _pool_lock:
        if pool is None or _pool_size < helpers:
            if pool is not None:
                _drop_pool()
            _pool_size = max(helpers, process_threads() - 1)
            pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="convtranspose")
        return [pool.submit(work) for _ in range(helpers)]


def _forget_helpers() -> None:
    # A forked child has none of the parent's threads (its ids may name other threads),
    # and a lock some other thread of the parent held stays held in the child.
    global pool, _pool_size, _pool_lock
    pool, _pool_size = None, 0
    _pool_lock = threading.Lock()
    helper_ids.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def pinning() -> bool:
    """Whether helper threads are kept off the caller's CPU (:func:`steer_helpers_off_caller`):
    :func:`set_pinning`'s choice, else :data:`PIN_THREADS_ENV` set to anything but 0."""
    return steering_mode() == "keep"


def steering_mode() -> str:
    """How :func:`parallel_for` treats the helpers' CPU affinity
    (:func:`steer_helpers_off_caller`): ``"keep"`` narrows it and leaves it narrowed
    (:func:`set_pinning` True, or :data:`PIN_THREADS_ENV` set to anything but 0);
    ``"off"`` never touches it (:func:`set_pinning` False, or the variable set to 0);
    ``"wake"`` (neither: the default) narrows it for the helpers' wake-up alone."""
    if _pinning is not None:
        return "keep" if _pinning else "off"
    value = switch(PIN_THREADS_ENV)
    return "wake" if value == "" else "off" if value == "0" else "keep"


def set_pinning(enabled: bool | None) -> bool | None:
    """Keep helpers off the caller's CPU (True), never touch their affinity (False), or
    leave it to :data:`PIN_THREADS_ENV` (None): :func:`steering_mode`.

    Returns the previous choice.  Turning it off gives the helper threads steered so
    far the calling thread's CPU affinity back.
    """
    global _pinning
    previous, _pinning = _pinning, enabled
    if not pinning():
        _release_helpers()
    return previous


def _release_helpers() -> None:
    """Give the helper threads steered so far the calling thread's CPU affinity."""
    global _steered
    if not _steered:
        return
    try:
        allowed = os.sched_getaffinity(0)
        for helper in tuple(helper_ids):
            try:
                os.sched_setaffinity(helper, allowed)
            except ProcessLookupError:  # a thread of a pool since dropped
                helper_ids.discard(helper)
    except OSError:
        return
    _steered = False


@kept("machine facts", maxsize=1)
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


def steer_helpers_off_caller(keep: bool = True, helpers=None) -> dict:
    """Let the helper threads run on any allowed CPU but the calling thread's.

    Linux wakes a thread on the waker's CPU when that CPU looks lightly loaded, as it
    does after the caller slept: the helper then waits on the caller's CPU until the
    load balancer moves it, milliseconds later, and a call of a few milliseconds after
    a pause runs at about half speed.  (Other runtimes' worker threads spin for tens of
    milliseconds after a call instead of sleeping at once, and so keep their CPUs.)
    Narrowing the helpers' affinity before they are woken makes the wake-up pick
    another CPU (``benchmarks/results/thread-steering.json``).

    With ``keep`` (:func:`pinning`, asked for) the narrowed affinity stays.  Without,
    it is the wake-up's alone: returns the narrowed helpers with the affinity each gets
    back (the caller's, which the pool's threads share) as soon as it runs
    (:func:`_restore_own_affinity`), so that no thread's affinity outlasts the call and
    the scheduler places the work as it would otherwise.  A few system calls per
    parallel call.  ``helpers``: other threads' ids to steer than the pool's (numba's
    native workers, :mod:`convtranspose._kernels._numba.launch`).
    """
    global steering, _steered
    helpers = helper_ids if helpers is None else helpers
    getcpu = _sched_getcpu()
    if getcpu is None or not steering or not helpers:
        return {}
    narrowed = {}
    try:
        cpu = getcpu()
        # The caller's affinity, not each helper's: a helper another caller's call has
        # narrowed meanwhile would otherwise be given its narrowed mask back.
        allowed = os.sched_getaffinity(0)
        others = allowed - {cpu}
        for helper in tuple(helpers):
            try:
                if others and others != allowed:
                    os.sched_setaffinity(helper, others)
                    if keep:
                        _steered = True
                    else:
                        narrowed[helper] = allowed
            except ProcessLookupError:  # a thread of a pool since dropped
                helper_ids.discard(helper)
    except OSError:  # not allowed here (a sandbox): the scheduler decides alone
        steering = False
    return narrowed


def _restore_own_affinity(narrowed: dict) -> None:
    """Give the calling helper thread the affinity :func:`steer_helpers_off_caller`
    recorded when it narrowed it for a wake-up (the caller's; taken from ``narrowed``,
    so that the caller restores only the helpers that did not run)."""
    allowed = narrowed.pop(threading.get_native_id(), None)
    if allowed is not None:
        try:
            os.sched_setaffinity(0, allowed)
        except OSError:
            pass


def restore_affinities(narrowed: dict) -> None:
    """Give the helpers that :func:`steer_helpers_off_caller` narrowed and that took no
    work the affinity it recorded for them (the caller's)."""
    for helper, allowed in tuple(narrowed.items()):
        try:
            os.sched_setaffinity(helper, allowed)
        except OSError:  # ProcessLookupError included: a thread since gone
            pass
        narrowed.pop(helper, None)


def parallel_for(function, count: int, threads: int, pieces: int | None = None) -> None:
    """``function(start, stop)`` over ``range(count)``, on up to ``threads`` threads.

    The range is cut into several pieces per thread (:data:`PIECES_PER_THREAD`, or
    ``pieces`` in all where the work needs larger ones) that the threads (the calling
    one included) take in turn: on a machine shared with other work, a thread whose
    core is busy does fewer pieces instead of holding up the whole call.
    """
    threads = max(1, min(threads, count))
    if threads == 1:
        function(0, count)
        return
    pieces = min(count, threads * PIECES_PER_THREAD if pieces is None else max(1, pieces))
    bounds = [count * i // pieces for i in range(pieces + 1)]
    taken = itertools.count()  # next() is atomic under the GIL

    def work():
        for i in iter(taken.__next__, None):
            if i >= pieces:
                return
            function(bounds[i], bounds[i + 1])

    # Each helper runs in a copy of the caller's context: context variables set by the
    # caller (deferred compilation while a new layer is measured) hold in its pieces.
    contexts = [contextvars.copy_context() for _ in range(threads - 1)]

    def helper_work():
        helper_ids.add(threading.get_native_id())
        if narrowed:
            _restore_own_affinity(narrowed)
        contexts.pop().run(work)

    mode = steering_mode()
    narrowed = {} if mode == "off" else steer_helpers_off_caller(keep=mode == "keep")
    helpers = _submit(helper_work, threads - 1)
    try:
        work()
    finally:
        # Every helper has finished before the call returns or raises: none may still
        # write into the caller's arrays afterwards.
        errors = [helper.exception() for helper in helpers]
        if narrowed:
            restore_affinities(narrowed)
    for error in errors:
        if error is not None:
            raise error


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


#: Parallel loops run on numba's threads in this process (:func:`native_loops_run`).
_loops_run = 0
#: When the last native loop of this process ended (``time.perf_counter()``).
_last_loop = [-math.inf]


def native_loops_run() -> int:
    """How many parallel loops this process has run on numba's native threads."""
    return _loops_run


def count_native_loop() -> None:
    """Count one more loop run on numba's native threads (:func:`native_loops_run`),
    ending now (:func:`seconds_since_loop`)."""
    global _loops_run
    _loops_run += 1  # (under the GIL)
    _last_loop[0] = time.perf_counter()


def seconds_since_loop() -> float:
    """Seconds since a loop on numba's native threads last ended in this process (its
    workers may still be spinning)."""
    return time.perf_counter() - _last_loop[0]
