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
from collections.abc import Iterator

__all__ = ["KernelNotCompiled", "compiles_deferred", "deferring_compiles",
           "numba_import_seconds"]

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
