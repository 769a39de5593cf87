"""Parallel loops of compiled kernels on numba's native threads, without the GIL.

A kernel that computes pieces ``[start, stop)`` of a range (``kernel(*arguments,
start, stop)``) runs on several threads through :func:`parallel_kernel`.  The
library's own pool (:func:`convtranspose._runtime.threads.parallel_for`) wakes Python
threads, each of which needs the GIL to take its pieces: a fork-join costs 77-102 us
back to back on an AMD Zen 3 and 170-500 us after a pause of 1-10 ms, more than many
small layers' whole work (``benchmarks/results/thread-wakeup-zen3.json``).  Here one
compiled parallel loop (numba's ``prange``) runs the pieces on the threads of numba's
threading layer, which take no GIL and, with GNU OpenMP or TBB, wait spinning for a
while after a loop: 10-12 us back to back and 53-55 us after 1 ms through
:func:`parallel_kernel`, against 128-145 and 270-310 us on the pool in the same run
(``benchmarks/results/native-threads-zen3.json``).

The loop calls the kernel through the addresses of its compiled code (a first-class
function value, :func:`_function_at`), so one compiled loop serves every kernel whose
arguments have the same types, and it is kept in the kernel cache like any kernel.

The loop runs only where it is safe and the kernel is ready (:func:`native_threads`):

- numba's threading layer is thread-safe: GNU OpenMP or TBB (``workqueue`` aborts the
  process when two threads start parallel loops at once, as two callers of the
  library may);
- the thread count is at most numba's (``NUMBA_NUM_THREADS``, fixed at its start);
- the process is not a fork of one whose GNU OpenMP threads had started (numba then
  terminates the child);
- the kernel has compiled code for these arguments (else the pool's call compiles it,
  or defers that: :mod:`convtranspose._kernels.compiling`), and so has the loop;
- :data:`NATIVE_THREADS_ENV` is not ``0``.

Otherwise the pieces go through the library's pool, as before.  numba's per-thread
count (``numba.set_num_threads``) is set for the loop and restored after it.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..._runtime.config import NATIVE_THREADS_ENV, switch
from ..._runtime.threads import (
    PIECES_PER_THREAD,
    count_native_loop,
    native_loops_run,
    parallel_for,
    restore_affinities,
    seconds_since_loop,
    steer_helpers_off_caller,
    steering_mode,
)
from ..compiling import KernelNotCompiled
from .kernel_cache import cached_njit
from .worker_spin import spin_seconds, watch_after_loop

__all__ = ["NATIVE_THREADS_ENV", "array_kind", "count_native_loop", "function_at",
           "kernel_addresses", "native_loops_run", "native_threads", "parallel_kernel",
           "parallel_pair", "seconds_since_loop", "steered_workers", "swap_num_threads"]

#: The threading layers whose parallel loops several threads may start at once.
_THREAD_SAFE_LAYERS = ("omp", "tbb")


def _function_value(function_type):
    """The codegen of a first-class function value of ``function_type`` from the
    addresses of its compiled code (numba's calling convention, then its C wrapper)."""
    def codegen(context, builder, signature, values):
        pointer = context.get_value_type(types.voidptr)
        function = cgutils.create_struct_proxy(function_type)(context, builder)
        function.jit_addr = builder.inttoptr(values[0], pointer)
        function.c_addr = builder.inttoptr(values[1], pointer)
        function.py_addr = pointer(None)
        return function._getvalue()

    return codegen


@intrinsic
def _function_at(typingctx, jit_address, c_address, arguments):
    """The kernel whose compiled code is at ``jit_address`` (numba's calling
    convention) and ``c_address`` (its C wrapper), as a first-class function of the
    types of ``arguments`` and two int64 bounds."""
    function_type = types.FunctionType(
        types.void(*arguments.types, types.int64, types.int64))
    return (function_type(jit_address, c_address, arguments),
            _function_value(function_type))


@intrinsic
def function_at(typingctx, jit_address, c_address, arguments, tail):
    """:func:`_function_at` of a kernel whose last arguments have the types of the
    tuple ``tail`` (not two int64 bounds): a rows kernel's ``(starts, run)``."""
    function_type = types.FunctionType(types.void(*arguments.types, *tail.types))
    return (function_type(jit_address, c_address, arguments, tail),
            _function_value(function_type))


@intrinsic
def swap_num_threads(typingctx, count):
    """Set the calling thread's numba thread count to ``count``; returns the previous.

    The threading layer's own functions, called by name as numba's parallel loops call
    them (``numba.set_num_threads`` in compiled code would keep the loop out of the
    kernel cache, which refuses code holding the addresses of Python objects).
    ``count`` is within numba's threads (:func:`native_threads`)."""
    def codegen(context, builder, signature, values):
        # Declared as numba's parallel loops declare them: the count read as an intp
        # (of which the C int is the low half), written as a C int.
        get = cgutils.get_or_insert_function(builder.module,
                                             ir.FunctionType(cgutils.intp_t, []),
                                             "get_num_threads")
        put = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]),
            "set_num_threads")
        previous = builder.call(get, [])
        builder.call(put, [builder.trunc(values[0], ir.IntType(32))])
        return builder.sext(builder.trunc(previous, ir.IntType(32)), cgutils.intp_t)

    return types.intp(count), codegen


@cached_njit(parallel=True, nogil=True)
def _launch(jit_address, c_address, threads, count, pieces, arguments):  # pragma: no cover
    previous = swap_num_threads(threads)
    for piece in prange(pieces):
        kernel = _function_at(jit_address, c_address, arguments)
        kernel(*arguments, count * piece // pieces, count * (piece + 1) // pieces)
    swap_num_threads(previous)


@cached_njit(parallel=True, nogil=True)
def _launch_with_scratch(jit_address, c_address, threads, count, before, scratch,
                         after):  # pragma: no cover
    # One piece per thread, each with its own row of ``scratch`` between the arguments.
    previous = swap_num_threads(threads)
    pieces = scratch.shape[0]
    for piece in prange(pieces):
        arguments = before + (scratch[piece],) + after
        kernel = _function_at(jit_address, c_address, arguments)
        kernel(*arguments, count * piece // pieces, count * (piece + 1) // pieces)
    swap_num_threads(previous)


@cached_njit(parallel=True, nogil=True)
def _launch_pair(first_jit, first_c, second_jit, second_c, threads, samples, first_units,
                 second_units, before, scratch, after, second_arguments):  # pragma: no cover
    # One piece per thread, each with its own row of ``scratch`` between the first
    # kernel's arguments: the first kernel's units of the piece's samples, then the
    # second's.
    previous = swap_num_threads(threads)
    pieces = scratch.shape[0]
    for piece in prange(pieces):
        low = samples * piece // pieces
        high = samples * (piece + 1) // pieces
        arguments = before + (scratch[piece],) + after
        first = _function_at(first_jit, first_c, arguments)
        first(*arguments, low * first_units, high * first_units)
        second = _function_at(second_jit, second_c, second_arguments)
        second(*second_arguments, low * second_units, high * second_units)
    swap_num_threads(previous)


#: Compiled code addresses per (kernel, argument kinds): :func:`_addresses`.
_ADDRESSES: dict = {}
#: numba's threading layer once this module started it, and whether this process is a
#: fork of one whose GNU OpenMP threads had started.
_state = {"layer": None, "forked": False}
_layer_lock = threading.Lock()


#: The flags that take part in an array's numba type (its layout, whether it is
#: read-only, whether aligned): ``ndarray.flags.num`` bits.
_TYPE_FLAGS = 0x1 | 0x2 | 0x100 | 0x400


def _kinds(arguments: tuple) -> tuple:
    """What decides the numba types of ``arguments``, cheaply (:func:`_addresses`' key):
    a tenth of ``numba.typeof``'s time.  Scalars by their class (an int and a float
    differ; so do NumPy's scalar types); None for a tuple, which numba's parallel loop
    cannot take inside its arguments (the pool runs such kernels)."""
    return tuple([(value.dtype, value.ndim, value.flags.num & _TYPE_FLAGS)
                  if type(value) is np.ndarray
                  else None if type(value) is tuple else type(value) for value in arguments])


def _addresses(kernel, arguments: tuple) -> tuple[int, int] | None:
    """The addresses of ``kernel``'s code for ``arguments`` and two int64 bounds, or
    None where it returns a value or takes a tuple.  Compiles it first where a call
    would (raising :class:`~convtranspose._kernels.compiling.KernelNotCompiled` where
    that is deferred)."""
    return kernel_addresses(kernel, arguments, (types.int64, types.int64))


def kernel_addresses(kernel, arguments: tuple, tail: tuple) -> tuple[int, int] | None:
    """:func:`_addresses` of ``kernel`` for ``arguments`` and last arguments of the
    numba types ``tail`` (:func:`function_at`'s), kept per argument kinds."""
    kinds = _kinds(arguments)
    if None in kinds:
        return None
    key = (kernel, kinds, tail)
    found = _ADDRESSES.get(key)
    if found is None:
        signature = tuple(map(numba.typeof, arguments)) + tail
        compiled = kernel.overloads.get(signature)
        if compiled is None:
            kernel.compile(signature)
            compiled = kernel.overloads[signature]
        if compiled.signature.return_type != types.void:
            return None
        library, described = compiled.library, compiled.fndesc
        found = _ADDRESSES[key] = (
            library.get_pointer_to_function(described.llvm_func_name),
            library.get_pointer_to_function(described.llvm_cfunc_wrapper_name))
    return found


def array_kind(array: np.ndarray) -> tuple:
    """What of ``array`` takes part in its numba type (:func:`_kinds`' entry for it): a
    key part for :func:`parallel_kernel`'s ``kept``."""
    return array.dtype, array.ndim, array.flags.num & _TYPE_FLAGS


def _kept_addresses(kernel, arguments: tuple, kept: tuple | None) -> tuple[int, int] | None:
    """:func:`_addresses`, kept in ``kept[0]`` under ``kept[1]`` when given."""
    if kept is None:
        return _addresses(kernel, arguments)
    addresses, key = kept
    found = addresses.get(key)
    if found is None:
        found = _addresses(kernel, arguments)
        if found is not None:
            addresses[key] = found
    return found


def _threading_layer() -> str:
    """numba's threading layer, started here if it was not yet (:func:`_prefer_openmp`)."""
    layer = _state["layer"]
    if layer is None:
        with _layer_lock:
            _prefer_openmp()
            numba.get_num_threads()  # starts the layer as numba's configuration says
            layer = _state["layer"] = numba.threading_layer()
    return layer


#: numba's own order of threading layers, which it takes when nobody chose one.
_NUMBA_LAYER_ORDER = ["tbb", "omp", "workqueue"]
#: The order this library starts them in where nobody chose: GNU OpenMP first.
_LIBRARY_LAYER_ORDER = ["omp", "tbb", "workqueue"]


def _prefer_openmp() -> None:
    """Have numba start GNU OpenMP's threads rather than TBB's where both load, unless
    the layer or its order was chosen (``NUMBA_THREADING_LAYER``,
    ``NUMBA_THREADING_LAYER_PRIORITY`` or numba's configuration) or numba's threads run.

    numba loads TBB first wherever a TBB library loads, and a process that imported
    OpenVINO has loaded its own; alternating with OpenVINO and torch there, a stride-1
    convolution's paused calls took 1.4x as long on TBB as on GNU OpenMP (medians of
    five processes, up to 1.75x in one), and no layer ran faster on TBB (AMD EPYC Zen 2;
    ``benchmarks/results/threading-layers-zen2.json``).  A process without TBB starts
    GNU OpenMP either way."""
    if any(os.environ.get(name) for name in ("NUMBA_THREADING_LAYER",
                                             "NUMBA_THREADING_LAYER_PRIORITY")):
        return
    config = numba.config
    if (str(config.THREADING_LAYER).lower() != "default"
            or list(config.THREADING_LAYER_PRIORITY) != _NUMBA_LAYER_ORDER):
        return
    from numba.np.ufunc import parallel

    if not getattr(parallel, "_is_initialized", False):
        config.THREADING_LAYER_PRIORITY = list(_LIBRARY_LAYER_ORDER)


def native_threads(threads: int) -> bool:
    """Whether :func:`parallel_kernel` may run ``threads`` threads on numba's layer
    (the module docstring's conditions, but the kernel's)."""
    if switch(NATIVE_THREADS_ENV) == "0" or _state["forked"]:
        return False
    if threads > numba.config.NUMBA_NUM_THREADS:
        return False
    return _threading_layer() in _THREAD_SAFE_LAYERS


def _forget_layer() -> None:
    # GNU OpenMP's threads do not survive a fork, and numba terminates a child that
    # starts a parallel loop after its parent did.
    if _state["layer"] == "omp":
        _state["forked"] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_layer)


def parallel_kernel(kernel, arguments: tuple, count: int, threads: int,
                    pieces: int | None = None, scratch: tuple | None = None,
                    kept: tuple | None = None) -> None:
    """``kernel(*arguments, start, stop)`` over pieces of ``range(count)`` on up to
    ``threads`` threads: numba's native threads where :func:`native_threads` allows,
    else the library's pool (:func:`~convtranspose._runtime.threads.parallel_for`,
    whose piece rule ``pieces`` follows).

    ``scratch``: ``(position, size, dtype)`` inserts at ``position`` of the arguments a
    working array of ``size`` elements, one per thread (then each native thread takes
    one piece): zeros when first made, then, on numba's threads or on one, as the
    kernel's last call on this calling thread left it (:func:`_scratch_rows`).  A
    kernel reads only what it wrote earlier in the same piece, and zeros it never
    writes, as it does between the items of one piece.

    ``kept``: ``(addresses, key)``, a dict the caller keeps and a key that, with the
    kernel, decides the numba types of the arguments (:func:`array_kind` of those
    that vary from call to call): the kernel's code addresses are kept there under the
    key, so that a prepared layer's calls skip working out the types of every argument
    (the packed product's 14 arguments: 2.1 us, against 0.6 kept, on an AMD Zen 4;
    ``benchmarks/results/prepared-calls-zen4.json``, ``kept_addresses``).
    """
    threads = max(1, min(threads, count))
    if scratch is not None:
        position, size, dtype = scratch
        before, after = arguments[:position], arguments[position:]
    if threads == 1:
        if scratch is not None:
            arguments = before + (_scratch_rows(kernel, 1, size, dtype)[0],) + after
        kernel(*arguments, 0, count)
        return
    if native_threads(threads) and _native_call(kernel, arguments, count, threads, pieces,
                                                scratch, kept):
        return
    if scratch is None:
        parallel_for(lambda start, stop: kernel(*arguments, start, stop), count, threads,
                     pieces)
        return
    kept = threading.local()

    def run(start: int, stop: int) -> None:
        if not hasattr(kept, "array"):
            kept.array = np.zeros(size, dtype)
        kernel(*before, kept.array, *after, start, stop)

    parallel_for(run, count, threads, pieces)


def _native_call(kernel, arguments: tuple, count: int, threads: int, pieces: int | None,
                 scratch: tuple | None, kept: tuple | None = None) -> bool:
    """:func:`parallel_kernel` on numba's threads; False where the loop is not compiled
    and compiling is deferred (the pool then runs it)."""
    if scratch is not None:
        position, size, dtype = scratch
        rows = _scratch_rows(kernel, threads, size, dtype)
        arguments = arguments[:position] + (rows[0],) + arguments[position:]
    found = _kept_addresses(kernel, arguments, kept)
    if found is None:
        return False
    try:
        with steered_workers(threads):
            if scratch is None:
                pieces = min(count, threads * PIECES_PER_THREAD if pieces is None
                             else max(1, pieces))
                _launch(found[0], found[1], threads, count, pieces, arguments)
            else:
                _launch_with_scratch(found[0], found[1], threads, count,
                                     arguments[:position], rows, arguments[position + 1:])
    except KernelNotCompiled:
        return False
    count_native_loop()
    watch_after_loop(getattr(_caller, "workers", ()), seconds_since_loop)
    return True


def parallel_pair(first, first_arguments: tuple, first_count: int, scratch: tuple,
                  second, second_arguments: tuple, second_count: int, samples: int,
                  threads: int, kept: tuple | None = None) -> bool:
    """``first`` over ``range(first_count)`` (with ``scratch`` as in
    :func:`parallel_kernel`), then ``second`` over ``range(second_count)``, in one
    parallel loop on numba's threads: each thread takes an equal share of ``samples``
    and runs the first kernel's units of its samples, then the second's.  Both ranges
    must be sample-major (``count // samples`` units per sample), and the second
    kernel's units of a sample may read only what the first wrote for that sample.  One
    fork-join instead of two: the second launch cost 5-6 us of a 0.05 ms layer's call on
    an AMD Zen 4 (``benchmarks/results/prepared-calls-zen4.json``, ``paired_launch``).

    Returns False, having run nothing, where the loop cannot run: ``threads`` does not
    divide ``samples`` or is 1, numba's threads are not usable
    (:func:`native_threads`), or the loop or a kernel is not compiled and compiling is
    deferred; the caller then runs the two kernels one after the other.  ``kept``: two
    kernels' :func:`parallel_kernel` ``kept``, ``(addresses, key)``: the key decides both
    kernels' argument types."""
    if threads < 2 or samples % threads or not native_threads(threads):
        return False
    position, size, dtype = scratch
    rows = _scratch_rows(first, threads, size, dtype)
    first_arguments = first_arguments[:position] + (rows[0],) + first_arguments[position:]
    try:
        found = _kept_addresses(first, first_arguments, kept and (kept[0], (kept[1], 0)))
        other = _kept_addresses(second, second_arguments, kept and (kept[0], (kept[1], 1)))
        if found is None or other is None:
            return False
        with steered_workers(threads):
            _launch_pair(found[0], found[1], other[0], other[1], threads, samples,
                         first_count // samples, second_count // samples,
                         first_arguments[:position], rows, first_arguments[position + 1:],
                         second_arguments)
    except KernelNotCompiled:
        return False
    count_native_loop()
    return True


#: Scratch rows (:func:`_scratch_rows`) a calling thread keeps, the most recently used.
_SCRATCH_KEPT = 8


def _scratch_rows(kernel, threads: int, size: int, dtype) -> np.ndarray:
    """``(threads, size)`` working rows of ``dtype`` for ``kernel``, kept per calling
    thread for its next loop of the same kernel, thread count and size: zeros when
    made.  Making them anew took 7.5 of the 71 us of a small pointwise layer's prepared
    call on two threads (``benchmarks/results/native-threads-zen3.json``,
    ``kept_scratch``).  Two calling threads never share rows; one calling thread runs
    one loop at a time."""
    kept = getattr(_caller, "scratch", None)
    if kept is None:
        kept = _caller.scratch = {}
    key = (kernel, threads, size, np.dtype(dtype))
    rows = kept.pop(key, None)
    if rows is None:
        rows = np.zeros((threads, size), dtype)
        while len(kept) >= _SCRATCH_KEPT:
            kept.pop(next(iter(kept)))
    kept[key] = rows  # the most recently used last
    return rows


class steered_workers:  # noqa: N801 - used as a function: ``with steered_workers(2):``
    """``with steered_workers(threads):`` around every native loop of the library on
    ``threads`` threads: numba's workers steered off the caller's CPU before it where
    they may be asleep, and given their affinity back after (:func:`_steer_workers`).
    A team larger than any the caller ran is found first (:func:`_roll_call`).  (A
    class: a generator's context manager added more than a microsecond to each loop,
    a sixth of a short native loop's time on an AMD Zen 3.)"""

    __slots__ = ("_threads", "_narrowed")

    def __init__(self, threads: int):
        self._threads = threads

    def __enter__(self) -> None:
        self._narrowed = _steer_workers(self._threads)

    def __exit__(self, *exception) -> None:
        _after_loop(self._narrowed)


#: A native loop started this long (seconds) after the calling thread's previous one
#: steers numba's workers off the caller's CPU first (:func:`_steer_workers`); loops
#: closer together find them spinning on their own CPUs (GNU OpenMP's workers spin for
#: a while before they sleep), and skip the system calls.  Steering costs a few us,
#: against 53-250 us for a wake-up after 1-10 ms (``native-threads-zen3.json``).  Once
#: the process has measured how long its workers spin (:mod:`.worker_spin`), loops
#: within :data:`SPIN_SHARE` of that skip the steering too.
STEER_AFTER_SECONDS = 1e-4
#: The share of the measured spin within which a loop skips the steering: the watch
#: places the workers' sleep only within its polls, and spins stretch and shrink with
#: what else the CPUs run.
SPIN_SHARE = 0.5

#: Per calling thread: when its last native loop ended (``ended``), the largest team
#: whose workers it found (``team``), those workers' thread ids (``workers``), and the
#: roll calls that found fewer workers than the team's size (``tries``).
_caller = threading.local()
#: Roll calls of a larger team that may find fewer workers than it has (OpenMP may give
#: a loop fewer threads; TBB's workers steal pieces) before the caller stops asking.
_TEAM_TRIES = 8
#: Linux's ``gettid`` system call number on this machine's architecture (None where
#: unknown or not Linux: numba's workers are then never steered).
_GETTID = ({"x86_64": 186, "amd64": 186, "aarch64": 178, "arm64": 178}
           .get(platform.machine().lower()) if sys.platform.startswith("linux") else None)


@intrinsic
def _system_call(typingctx, number):
    """Linux's ``syscall(number)`` without arguments: its int64 result."""
    def codegen(context, builder, signature, values):
        call = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)], var_arg=True),
            "syscall")
        return builder.call(call, [values[0]])

    return types.int64(number), codegen


@cached_njit(nogil=True)
def _record_thread_ids(ids, number, start, stop):  # pragma: no cover
    for piece in range(start, stop):
        ids[piece] = _system_call(number)


def _roll_call(threads: int) -> None:
    """Find the calling thread's numba workers for a team of ``threads``: a native loop
    whose pieces record the system thread id of the thread that runs them.  (Threads
    that appear in the process meanwhile, other libraries' among them, are not taken
    for workers; a team that the caller's earlier loops started is found all the
    same.)"""
    pieces = threads * PIECES_PER_THREAD
    ids = np.zeros(pieces, np.int64)
    arguments = (ids, np.int64(_GETTID))
    try:
        found = _addresses(_record_thread_ids, arguments)
        _launch(found[0], found[1], threads, pieces, pieces, arguments)
    except KernelNotCompiled:  # compiled in the background: asked again next loop
        return
    workers = set(ids.tolist()) - {threading.get_native_id()}
    _caller.workers = getattr(_caller, "workers", set()) | workers
    _caller.tries = getattr(_caller, "tries", 0) + 1
    if len(workers) >= threads - 1 or _caller.tries >= _TEAM_TRIES:
        _caller.team, _caller.tries = threads, 0
    _caller.ended = time.perf_counter()


def _steer_workers(threads: int) -> dict:
    """Before a native loop: narrow the affinity of the caller's numba workers to its
    other CPUs when they may be asleep (the caller's last loop ended over
    :data:`STEER_AFTER_SECONDS` ago), as the pool's helpers are unless steering is off
    (:func:`~convtranspose._runtime.threads.steer_helpers_off_caller`).  Woken on the
    caller's CPU after a pause, a worker waited there for the load balancer: on a 2-vCPU
    AMD Zen 3 VM, most calls of a 0.3-0.7 ms layer after 50 ms pauses took 4-9 ms
    (``native-threads-zen3.json``, ``steering``).  A team larger than any the caller
    ran is found first (:func:`_roll_call`), which wakes it.  Returns the narrowed
    workers' affinities to restore."""
    if _GETTID is None:
        return {}
    if threads > getattr(_caller, "team", 0):
        _roll_call(threads)
    spun = spin_seconds()
    after = STEER_AFTER_SECONDS if spun is None else max(STEER_AFTER_SECONDS, spun * SPIN_SHARE)
    if time.perf_counter() - getattr(_caller, "ended", 0.0) < after:
        return {}
    mode = steering_mode()
    if mode == "off" or _placed_by_openmp():
        return {}
    return steer_helpers_off_caller(keep=mode == "keep",
                                    helpers=getattr(_caller, "workers", set()))


def _placed_by_openmp() -> bool:
    """Whether the environment places OpenMP's threads itself (``OMP_PROC_BIND`` other
    than false, ``OMP_PLACES``, ``GOMP_CPU_AFFINITY``): its workers are then left where
    it puts them."""
    bind = os.environ.get("OMP_PROC_BIND", "").strip().lower()
    return (bind not in ("", "false") or bool(os.environ.get("OMP_PLACES"))
            or bool(os.environ.get("GOMP_CPU_AFFINITY")))


def _after_loop(narrowed: dict) -> None:
    """After a native loop: the steered workers' affinities back, and the caller's
    time."""
    if narrowed:
        restore_affinities(narrowed)
    _caller.ended = time.perf_counter()
