"""Deferred compilation: running a kernel only if its machine code is ready.

Measured planning times candidate algorithms on a layer's first call.  A numba
candidate whose kernels have not been compiled for this machine (none in this process,
none in the kernel cache) would first compile them, for seconds; inside
:func:`deferring_compiles` it raises :class:`KernelNotCompiled` instead, before
compiling, so the planner can time the candidates that are ready and have the others
compiled elsewhere (:mod:`convtranspose._execute.background`).

The switch is a context variable: it holds in the calling thread and in the helper
threads that compute for it (:func:`convtranspose._runtime.threads.parallel_for`), not in
other threads of the process.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

__all__ = ["KernelNotCompiled", "compile_helpers_elsewhere", "compiles_deferred",
           "deferring_compiles", "numba_import_seconds"]

#: Seconds this process took to import numba (set by :mod:`._numba` when it imported
#: it; None before, or where something else imported numba first).
numba_import_seconds: float | None = None

_deferring: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "convtranspose_deferring_compiles", default=False)


class KernelNotCompiled(Exception):
    """A kernel the call needs has no machine code here yet, and compiling is deferred
    (raised only inside :func:`deferring_compiles`; the call's output is then
    undefined)."""


def compiles_deferred() -> bool:
    """Whether a kernel without machine code raises :class:`KernelNotCompiled` here."""
    return _deferring.get()


@contextlib.contextmanager
def deferring_compiles() -> Iterator[None]:
    """``with deferring_compiles():`` calls in the block raise :class:`KernelNotCompiled`
    instead of compiling a kernel."""
    token = _deferring.set(True)
    try:
        yield
    finally:
        _deferring.reset(token)


#: ``hand_over(kind)``: have the background process compile the helper kernels ``kind``
#: names, returning a function that says whether it is done, or None where there is no
#: background process.  Set by :mod:`convtranspose._execute.background` (a layer above
#: this one) when imported; until then helpers compile where they are needed.
helpers_hand_over: Callable[[str], Callable[[], bool] | None] | None = None


def compile_helpers_elsewhere(kind: str) -> Callable[[], bool] | None:
    """Have helper kernels that many algorithms call (BLAS products from compiled code:
    ``"native-gemm"``) compiled in the background process rather than in a call that
    needs them and finds them neither compiled nor in the kernel cache: ``ready()``,
    which says when they are, or None (compile them here)."""
    return None if helpers_hand_over is None else helpers_hand_over(kind)
