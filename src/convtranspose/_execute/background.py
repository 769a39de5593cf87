"""Compiling a new layer's kernels in a background process while the caller goes on.

The first call of a layer shape measures candidate algorithms
(:mod:`convtranspose._choose.planning`).  A numba candidate whose kernels are in neither
this process nor the kernel cache would compile them first, for seconds on end; so the
call times the candidates that are ready (the BLAS ones always are), returns with the
fastest of those, and hands the others to a background process
(:mod:`.background_worker`) that runs each on zeros of the same problem with as many
images as threads (up to the batch: so that kernels run in pairs per image compile too),
which compiles its kernels into the kernel cache folder, and exits.  The first
call of the layer after that process ended measures every candidate (their kernels
now load in milliseconds) and keeps the winner as wisdom; a process that ends first
leaves the compiled kernels to the next one.

One background process at a time per process, taking every layer waiting by then.
None when the kernel cache is off (nothing could be shared), when
``CONVTRANSPOSE_BACKGROUND_COMPILE=off``, inside :func:`compiling_here` (``convtranspose
tune``, ``ct.explain(..., measure=True)``), for problems whose one-image operands
exceed :data:`BACKGROUND_MAX_BYTES`, or where no Python executable can be started: the
kernels then compile in the calling process, as they always did.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import numpy as np

from .._plan.problem import Problem
from .._runtime.cache import cache_dir
from .._runtime.caches import kept
from .._runtime.config import BACKGROUND_COMPILE_ENV, CACHE_ENV, switch
from .._runtime.target import Target

__all__ = ["BACKGROUND_MAX_BYTES", "available", "compile_adjoint_elsewhere", "compile_elsewhere",
           "compiling_here"]

#: The background process allocates the one-image operands and result of the problem it
#: compiles for; larger ones compile in the calling process instead.
BACKGROUND_MAX_BYTES = 256 << 20

_here: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "convtranspose_compiling_here", default=False)
_lock = threading.Lock()
_waiting: list[tuple[dict, list]] = []  # (job, [done]) not handed to a process yet
_running: tuple[subprocess.Popen, list] | None = None  # the process and its jobs' flags


@contextlib.contextmanager
def compiling_here() -> Iterator[None]:
    """``with compiling_here():`` calls in the block compile what they measure themselves
    (explicit measuring: ``convtranspose tune``)."""
    token = _here.set(True)
    try:
        yield
    finally:
        _here.reset(token)


def available() -> bool:
    """Whether a new layer's kernels may compile in a background process now (asked on
    every planned call: the folder and executable checks are kept per setting)."""
    return not _here.get() and _available(switch(BACKGROUND_COMPILE_ENV), switch(CACHE_ENV))


@kept("machine facts", maxsize=16)
def _available(background: str, folder: str) -> bool:
    del folder  # the cache key: cache_dir() reads it
    # create=False: asking must not make the folder (nothing is written until needed).
    return (background.strip().lower() != "off" and cache_dir(create=False) is not None
            and not getattr(sys, "frozen", False) and bool(sys.executable)
            and os.path.exists(sys.executable))


def compile_elsewhere(names, data: np.ndarray, weights: np.ndarray,
                      bias: np.ndarray | None, problem: Problem, target: Target):
    """Have the kernels of algorithms ``names`` compiled for this problem in the
    background; returns a function that says whether that is done (None when it
    cannot be: the caller then compiles them itself)."""
    return _hand_over(_job(names, data, weights, bias, problem, target))


def compile_adjoint_elsewhere(kind: str, names, first: np.ndarray, second: np.ndarray,
                              axes, groups: int, dtype, target: Target):
    """:func:`compile_elsewhere` for the adjoint algorithms ``names`` of ``kind``
    ("data": ``first`` is ``grad`` and ``second`` the weights; "filter": the data and
    ``grad``), as :func:`convtranspose._kernels.adjoints.data_adjoint` and
    ``filter_adjoint`` take them, for one image."""
    one_image = (first.nbytes + second.nbytes) // max(1, first.shape[0])
    if one_image > BACKGROUND_MAX_BYTES:
        return None
    return _hand_over({
        "adjoint": kind, "algorithms": list(names), "target": dataclasses.asdict(target),
        "axes": [dataclasses.astuple(axis) for axis in axes], "groups": groups,
        "dtype": np.dtype(dtype).name, "first": _layout(first[:1]),
        "second": _layout(second[:1] if kind == "filter" else second)})


def _hand_over(job: dict | None):
    """Queue ``job`` for the background process: a function saying whether it is done,
    or None when there is no background process for it."""
    if job is None:
        return None
    done = [False]
    with _lock:
        _waiting.append((job, done))
    if not _advance():
        return None

    def ready() -> bool:
        _advance()
        return done[0]

    return ready


def _job(names, data, weights, bias, problem: Problem, target: Target) -> dict | None:
    """The background process's description of the problem, with as many images as
    threads up to the batch (col2im runs its product and store in one loop where the
    threads divide the batch, :func:`convtranspose._kernels._numba.launch.parallel_pair`,
    a loop compiled apart), or None when its operands would exceed
    :data:`BACKGROUND_MAX_BYTES`."""
    images = max(1, min(problem.batch, target.threads))
    image_bytes = (data.nbytes // max(1, problem.batch)
                   + math.prod(problem.output_shape[1:]) * problem.dtype.itemsize)
    if images * image_bytes + weights.nbytes > BACKGROUND_MAX_BYTES:
        return None
    return {"algorithms": list(names), "target": dataclasses.asdict(target),
            "axes": [dataclasses.astuple(axis) for axis in problem.axes],
            "channels_last": problem.channels_last, "dtype": problem.dtype.name,
            "result_dtype": None if problem.result_dtype is None else problem.result_dtype.name,
            "data": _layout(data[:images]), "weights": _layout(weights),
            "bias": None if bias is None else _layout(bias)}


def _layout(array: np.ndarray) -> dict:
    """Shape, dtype and memory order of ``array``: the kernels are compiled for the
    dtype and for whether the array is contiguous, so the zeros that stand for it in
    the background process are laid out the same way."""
    order = sorted(range(array.ndim), key=lambda axis: -abs(array.strides[axis]))
    return {"shape": list(array.shape), "dtype": array.dtype.name, "order": order}


def _advance() -> bool:
    """Start a background process for the waiting jobs unless one is running; mark the
    jobs of a finished one done.  False when no process could be started."""
    global _running
    with _lock:
        if _running is not None and _running[0].poll() is not None:
            for done in _running[1]:
                done[0] = True
            _running = None
        if _running is not None or not _waiting:
            return True
        jobs = list(_waiting)
        _waiting.clear()
        try:
            process = _start([job for job, _ in jobs])
        except OSError:
            for _, done in jobs:
                done[0] = True  # the caller measures again and compiles what is missing
            return False
        _running = (process, [done for _, done in jobs])
        return True


def _start(jobs: list[dict]) -> subprocess.Popen:
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, (package_root, environment.get("PYTHONPATH"))))
    environment[BACKGROUND_COMPILE_ENV] = "off"
    process = subprocess.Popen(
        [sys.executable, "-m", "convtranspose._execute.background_worker"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=environment, start_new_session=os.name == "posix")
    with contextlib.suppress(OSError):
        process.stdin.write(json.dumps(jobs).encode())
        process.stdin.close()
    return process
