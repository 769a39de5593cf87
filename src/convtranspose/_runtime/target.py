"""The machine the kernels run on, as one frozen value passed explicitly.

The cost model and the kernels read every machine fact from a :class:`Target`:
vector width, half-precision instructions, whether NumPy's BLAS and numba are
usable, how many threads to use.  :func:`host` describes this process's machine and
environment switches; tests and benchmarks build other targets (an AVX2 machine on an
AVX-512 one, one thread, no BLAS) instead of patching module globals.

A target narrower than the host is always safe: kernels built for 32-byte vectors
run on an AVX-512 CPU (LLVM selects the narrower instructions).  A target wider than
the host only changes block shapes and estimates; the instructions are still the
host's (``NUMBA_CPU_NAME`` selects another instruction set for a whole process).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib.util

import numpy as np

from . import blas
from .environment import switch
from .machine import has_bfloat16_pairs, host_has_f16c, vector_bytes
from .threads import THREADS

__all__ = ["NO_NUMBA_ENV", "Target", "host", "use_target"]

#: Environment variable: set to 1 to never use numba, even when it is installed.
NO_NUMBA_ENV = "CONVTRANSPOSE_NO_NUMBA"


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


@functools.cache
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def _numba_usable() -> bool:
    return switch(NO_NUMBA_ENV) in ("", "0") and _numba_installed()


@functools.cache
def _host(numba: bool, blas_usable: bool) -> Target:
    if not numba:  # llvmlite comes with numba: without it there are no vector kernels
        return Target(vector_bytes=16, f16c=False, bfloat16_pairs=False, numba=False,
                      blas=blas_usable, threads=THREADS)
    return Target(vector_bytes=vector_bytes(), f16c=host_has_f16c(),
                  bfloat16_pairs=has_bfloat16_pairs(), numba=True, blas=blas_usable,
                  threads=THREADS)


#: The target :func:`use_target` set in this context (thread, task), if any.
_chosen: contextvars.ContextVar[Target | None] = contextvars.ContextVar("target", default=None)


def host() -> Target:
    """The target calls compute for: the one :func:`use_target` set, else this machine
    under the current environment switches.

    The switches (``CONVTRANSPOSE_NO_NUMBA``, ``CONVTRANSPOSE_NO_BLAS``) are read on
    every call, the machine facts once per process.
    """
    chosen = _chosen.get()
    if chosen is not None:
        return chosen
    return _host(_numba_usable(), blas.usable())


@contextlib.contextmanager
def use_target(target: Target):
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

