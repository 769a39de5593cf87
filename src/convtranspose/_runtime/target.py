"""The machine the kernels run on, as one frozen value passed explicitly.

The cost model and the kernels read every machine fact from a :class:`Target`:
vector width, half-precision instructions, whether NumPy's BLAS and numba are
usable, how many threads to use.  :func:`host` describes this process's machine,
environment switches and thread count (:func:`set_num_threads`, :func:`num_threads`);
tests and benchmarks build other targets (an AVX2 machine on an AVX-512 one, one
thread, no BLAS) instead of patching module globals.

A target narrower than the host is always safe: kernels built for 32-byte vectors
run on an AVX-512 CPU (LLVM selects the narrower instructions).  A target wider than
the host only changes block shapes and estimates; the instructions are still the
host's (``NUMBA_CPU_NAME`` selects another instruction set for a whole process).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib.util
from collections.abc import Iterator

import numpy as np

from .._errors import ConvTransposeError
from . import blas
from . import threads as _threads
from .caches import kept
from .config import NO_NUMBA_ENV, switch
from .machine import has_bfloat16_pairs, host_has_f16c, vector_bytes

__all__ = ["Target", "get_num_threads", "host", "host_state", "is_host", "num_threads",
           "set_num_threads", "set_thread_pinning", "use_target"]



@dataclasses.dataclass(frozen=True)
class Target:
    """What the cost model and the kernels may assume of the machine.

    Attributes
    ----------
    vector_bytes : int
        The widest SIMD register the numba kernels use: 64 (AVX-512), 32 (AVX2) or 16.
    f16c : bool
        float16 conversions compile to instructions (x86 F16C, 64-bit ARM).
    bfloat16_pairs : bool
        ``vdpbf16ps`` (pairs of bfloat16 multiplied and added in float32) compiles.
    numba : bool
        numba is installed and not switched off (``CONVTRANSPOSE_NO_NUMBA``).
    blas : bool
        NumPy's bundled OpenBLAS can be called directly (``CONVTRANSPOSE_NO_BLAS``).
    threads : int
        Threads of a parallel loop, the caller included.

    Examples
    --------
    >>> Target(vector_bytes=32, threads=1).lanes(np.float32)
    8
    """

    vector_bytes: int = 32
    f16c: bool = True
    bfloat16_pairs: bool = False
    numba: bool = True
    blas: bool = True
    threads: int = 1

    def __post_init__(self):
        if self.vector_bytes not in (16, 32, 64):
            raise ValueError(f"vector_bytes={self.vector_bytes!r}; expected 16, 32 or 64")
        if self.threads < 1:
            raise ValueError(f"threads={self.threads!r}; expected at least 1")

    def lanes(self, dtype) -> int:
        """Elements of ``dtype`` in one vector register."""
        return max(1, self.vector_bytes // np.dtype(dtype).itemsize)

    def blas_for(self, dtype) -> bool:
        """Whether BLAS products are called directly for ``dtype`` (float32, float64)."""
        return self.blas and blas.supports(dtype)

    def numba_for(self, dtype, rank: int) -> bool:
        """Whether the numba kernels take ``dtype`` sums over ``rank`` spatial axes."""
        return self.numba and np.dtype(dtype).kind == "f" and rank <= 3

    def replace(self, **changes) -> Target:
        """A copy with ``changes`` (as :func:`dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)


@kept("the host target", maxsize=None)
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def numba_usable() -> bool:
    return switch(NO_NUMBA_ENV) in ("", "0") and _numba_installed()


@kept("the host target", maxsize=None)
def _host(numba: bool, blas_usable: bool, threads: int) -> Target:
    if not numba:  # llvmlite comes with numba: without it there are no vector kernels
        return Target(vector_bytes=16, f16c=False, bfloat16_pairs=False, numba=False,
                      blas=blas_usable, threads=threads)
    return Target(vector_bytes=vector_bytes(), f16c=host_has_f16c(),
                  bfloat16_pairs=has_bfloat16_pairs(), numba=True, blas=blas_usable,
                  threads=threads)


#: The target :func:`use_target` set in this context (thread, task), if any.
_chosen: contextvars.ContextVar[Target | None] = contextvars.ContextVar("target", default=None)
#: The thread count :func:`num_threads` set in this context, if any.
_chosen_threads: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "threads", default=None)


def host() -> Target:
    """The target calls compute for: the one :func:`use_target` set, else this machine
    under the current environment switches and thread count.

    The switches (``CONVTRANSPOSE_NO_NUMBA``, ``CONVTRANSPOSE_NO_BLAS``) are read on
    every call, the machine facts once per process; the thread count is the one
    :func:`num_threads` set in this context, else the process-wide one
    (:func:`set_num_threads`, else the environment and the CPU affinity at import).
    One target is built per combination and kept: a call costs three lookups.
    """
    chosen = _chosen.get()
    if chosen is not None:
        return chosen
    threads = _chosen_threads.get()
    return _host(numba_usable(), blas.usable(),
                 _threads.process_threads() if threads is None else threads)


def is_host(target: Target) -> bool:
    """Whether ``target`` is what :func:`host` gives now (by identity first, as
    :func:`host` keeps one target per combination: comparing the fields takes as long
    as the lookups)."""
    current = host()
    return current is target or current == target


def host_state() -> tuple:
    """What :func:`host` depends on besides the switches ``CONVTRANSPOSE_NO_NUMBA`` and
    ``CONVTRANSPOSE_NO_BLAS``: the target :func:`use_target` set and the thread counts.

    A prepared call that reads those two switches on every call anyway compares this
    with its set-up's instead of :func:`host`'s target with its own: the same switches
    and state give the same target, without reading the switches twice.  Each Python
    step counts where a kernel has just emptied the caches (a memory-bound layer's
    prepared call spent 13 us in its call's checks and set-up,
    ``benchmarks/results/outside-kernels-zen4.json``, ``cold_python_after_streaming``).
    """
    return _chosen.get(), _chosen_threads.get(), _threads.process_threads()


@contextlib.contextmanager
def use_target(target: Target) -> Iterator[Target]:
    """Compute for ``target`` within the ``with`` block (in this thread or task only).

    Parameters
    ----------
    target : Target
        For example ``host().replace(threads=1)`` for single-threaded calls, or
        ``host().replace(vector_bytes=32)`` to run the AVX2 kernels on an AVX-512 CPU.
        A target that claims numba, BLAS, F16C or bfloat16 pairs the machine lacks
        fails in the kernels that need them.

    Examples
    --------
    >>> import convtranspose as ct
    >>> with ct.use_target(ct.host_target().replace(threads=1)):
    ...     ct.host_target().threads
    1
    """
    if not isinstance(target, Target):
        raise TypeError(f"target must be a Target, got {type(target).__name__}")
    token = _chosen.set(target)
    try:
        yield target
    finally:
        _chosen.reset(token)


def _thread_count(n) -> int:
    """``n`` as a thread count, or :class:`~convtranspose.ConvTransposeError`."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ConvTransposeError(
            f"n must be an integer thread count of at least 1, got {n!r} "
            f"({type(n).__name__})")
    if not 1 <= n <= _threads.MAX_THREADS:
        raise ConvTransposeError(f"n must be a thread count from 1 to {_threads.MAX_THREADS}, "
                                 f"got {n!r}")
    return int(n)


def get_num_threads() -> int:
    """The number of threads a call made here and now runs on, the caller's included.

    The innermost of :func:`num_threads` and :func:`use_target` in this context
    decides; outside both, the process-wide count (:func:`set_num_threads`), which
    defaults to ``NUMBA_NUM_THREADS``, else the first entry of ``OMP_NUM_THREADS``,
    else the CPUs the process may run on (its affinity mask) up to 8, as read at import.

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> import convtranspose as ct
    >>> with ct.num_threads(1):
    ...     ct.get_num_threads()
    1
    """
    return host().threads


def set_num_threads(n: int) -> int:
    """Make every later call of this process run on ``n`` threads, the caller's included.

    A :func:`num_threads` block or a :func:`use_target` target takes precedence where
    it is in force.  Helper threads beyond ``n - 1`` end once idle; OpenBLAS runs the
    library's products on at most ``n`` threads (its own count, set for the whole
    process, comes back after each call).

    Parameters
    ----------
    n : int
        From 1 to 1024.  Unlike the default, not limited to 8 or to the CPU count.

    Returns
    -------
    int
        The previous process-wide count.

    Raises
    ------
    ConvTransposeError
        If ``n`` is not an integer from 1 to 1024.

    Examples
    --------
    >>> import convtranspose as ct
    >>> previous = ct.set_num_threads(1)
    >>> ct.get_num_threads()
    1
    >>> _ = ct.set_num_threads(previous)
    """
    return _threads.set_process_threads(_thread_count(n))


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[int]:
    """Run calls on ``n`` threads within the ``with`` block (in this thread or task only).

    The same rules as :func:`set_num_threads`.  Inside a :func:`use_target` block it
    computes for that target with ``threads=n``; a :func:`use_target` block inside
    this one computes for its own target.

    Parameters
    ----------
    n : int
        At least 1.

    Raises
    ------
    ConvTransposeError
        If ``n`` is not an integer of at least 1.

    Examples
    --------
    >>> import convtranspose as ct
    >>> with ct.num_threads(2):
    ...     ct.host_target().threads
    2
    """
    n = _thread_count(n)
    chosen = _chosen.get()
    threads_token = _chosen_threads.set(n)
    target_token = _chosen.set(chosen.replace(threads=n)) if chosen is not None else None
    try:
        yield n
    finally:
        if target_token is not None:
            _chosen.reset(target_token)
        _chosen_threads.reset(threads_token)


def set_thread_pinning(enabled: bool | None) -> bool | None:
    """Keep (True) the library's helper threads off the calling thread's CPU, forbid
    (False) any change to their CPU affinity, or leave it to ``CONVTRANSPOSE_PIN_THREADS``
    (None, the default).

    Linux tends to wake a helper on the caller's CPU after the caller slept, and a call
    of a few milliseconds after a pause then runs at about half speed on a 2-vCPU
    machine (``benchmarks/results/thread-steering.json``).  By default (None, the
    variable unset) each parallel loop narrows the helpers' affinity to every CPU the
    caller may use but the one it runs on just before waking them, and each helper
    sets its own affinity back as soon as it runs: no thread's affinity outlasts the
    wake-up.  With pinning (True, or the variable set to anything but 0) the narrowed
    affinity stays between calls.  False (or the variable set to 0) leaves every
    thread's affinity alone, for programs that place their threads themselves;
    switching pinning off gives the helpers the caller's affinity back.

    Parameters
    ----------
    enabled : bool or None

    Returns
    -------
    bool or None
        The previous setting.

    Raises
    ------
    ConvTransposeError
        If ``enabled`` is not True, False or None.
    """
    if enabled is not None and not isinstance(enabled, bool):
        raise ConvTransposeError(
            f"enabled must be True, False or None, got {enabled!r}")
    return _threads.set_pinning(enabled)
