"""Compiling a new layer's kernels in a background process while the caller goes on.

The first call of a layer shape measures candidate algorithms
(:mod:`convtranspose._choose.planning`).  A numba candidate whose kernels are in neither
this process nor the kernel cache would compile them first, for seconds on end; so the
call times the candidates that are ready (the BLAS ones always are), returns with the
fastest of those, and hands the others to a background process
(:mod:`.background_worker`) that runs each on zeros of the same problem with as many
images as threads (up to the batch: so that kernels run in pairs per image compile too),
which compiles its kernels into the kernel cache folder, and exits.  The process
reports each algorithm as its kernels are compiled (a line on its standard output), in
the order it was given them, the estimates' order: the first call of the layer after
the best-ranked of them is ready measures again among the compiled candidates, and the
first call after that process ended measures every candidate (their kernels now load
in milliseconds) and keeps the winner as wisdom; a process that ends first leaves the
compiled kernels to the next one.  A layer handed over again while its kernels compile
(the others, deferred again by that measurement) waits for the same process.

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
import time
from collections.abc import Iterator

import numpy as np

from .._kernels import compiling as _compiling
from .._plan.problem import Problem
from .._runtime.cache import cache_dir
from .._runtime.caches import kept
from .._runtime.config import BACKGROUND_COMPILE_ENV, CACHE_ENV, switch
from .._runtime.target import Target

__all__ = ["BACKGROUND_MAX_BYTES", "Compiling", "available", "compile_adjoint_elsewhere",
           "compile_elsewhere", "compile_helpers", "compiling_here"]

#: The background process allocates the one-image operands and result of the problem it
#: compiles for; larger ones compile in the calling process instead.
BACKGROUND_MAX_BYTES = 256 << 20

_here: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "convtranspose_compiling_here", default=False)
_lock = threading.Lock()
#: The running process is asked what it has compiled at most this often (seconds): a
#: look costs a few system calls, and a tiny layer's provisional prepared call asks on
#: every call (``benchmarks/provisional_calls.py``); its kernels take seconds.
_LOOK_SECONDS = 0.005


class _Progress:
    """One job's algorithms whose kernels the background process has compiled."""

    __slots__ = ("compiled", "done")

    def __init__(self) -> None:
        self.compiled: set[str] = set()
        self.done = False  # the process ended: every kernel it could compile is


@dataclasses.dataclass
class _Process:
    """The background process, its jobs' progress in the order it runs them, and the
    part of a line it has written so far."""

    popen: subprocess.Popen
    jobs: list[_Progress]
    text: bytes = b""
    looked: float = -math.inf  # when it was last asked (time.monotonic)


class Compiling:
    """Algorithms whose kernels compile in the background for one layer: called, it
    says whether all of them are ready; :meth:`compiled` names those ready so far."""

    __slots__ = ("names", "_progress")

    def __init__(self, names, progress: _Progress) -> None:
        self.names, self._progress = tuple(names), progress

    def __call__(self) -> bool:
        _advance()
        progress = self._progress
        return progress.done or progress.compiled.issuperset(self.names)

    def compiled(self) -> frozenset[str]:
        """The algorithms the process has reported compiled; all of them once it has
        ended (one that failed there then compiles in the process that needs it)."""
        _advance()
        progress = self._progress
        return frozenset(self.names if progress.done
                         else progress.compiled.intersection(self.names))


#: Jobs not handed to a process yet and the running process's, by their problem
#: (:func:`_problem_of`): (algorithms, progress).
_jobs: dict[str, tuple[tuple[str, ...], _Progress]] = {}
_waiting: list[tuple[dict, _Progress]] = []  # (job, progress) not handed to a process yet
_running: _Process | None = None


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


def compile_helpers(kind: str) -> Compiling | None:
    """Have the helper kernels ``kind`` names (:data:`.background_worker.HELPERS`)
    compiled in the background (:func:`convtranspose._kernels.compiling
    .compile_helpers_elsewhere`); None when there is no background process now."""
    if not available():
        return None
    return _hand_over({"helpers": kind, "algorithms": [kind]})


_compiling.helpers_hand_over = compile_helpers


def _problem_of(job: dict) -> str:
    """What ``job`` compiles for, whatever its algorithms."""
    return json.dumps({**job, "algorithms": None}, sort_keys=True)


def _hand_over(job: dict | None) -> Compiling | None:
    """Queue ``job`` for the background process (or join a queued or running job of the
    same problem that has its algorithms): its :class:`Compiling`, or None when there
    is no background process for it."""
    if job is None:
        return None
    problem = _problem_of(job)
    with _lock:
        queued = _jobs.get(problem)
        if queued is not None and set(job["algorithms"]).issubset(queued[0]):
            progress = queued[1]
        else:
            progress = _Progress()
            _jobs[problem] = (tuple(job["algorithms"]), progress)
            _waiting.append((job, progress))
    if not _advance():
        return None
    return Compiling(job["algorithms"], progress)


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
    """Note what the background process has compiled; start one for the waiting jobs
    unless one is running, and mark the jobs of a finished one done.  False when no
    process could be started."""
    global _running
    with _lock:
        if _running is not None:
            now = time.monotonic()
            if now - _running.looked < _LOOK_SECONDS:
                return True
            _running.looked = now
            ended = _running.popen.poll() is not None
            _read_progress(_running, ended)
            if ended:
                for progress in _running.jobs:
                    progress.done = True
                _forget_jobs(_running.jobs)
                _running = None
        if _running is not None or not _waiting:
            return True
        jobs = list(_waiting)
        _waiting.clear()
        try:
            popen = _start([job for job, _ in jobs])
        except OSError:
            for _, progress in jobs:
                progress.done = True  # the caller measures again and compiles what is missing
            _forget_jobs([progress for _, progress in jobs])
            return False
        _running = _Process(popen, [progress for _, progress in jobs])
        return True


def _forget_jobs(finished: list[_Progress]) -> None:
    for problem, (_, progress) in list(_jobs.items()):
        if progress in finished:
            del _jobs[problem]


def _read_progress(process: _Process, ended: bool) -> None:
    """Mark the algorithms the process has reported compiled (lines ``"<job index>
    <algorithm>"``), reading only what its pipe holds (never waiting for more)."""
    stream = process.popen.stdout
    if stream is None:
        return
    try:
        while chunk := os.read(stream.fileno(), 1 << 16):
            process.text += chunk
    except (OSError, ValueError):  # BlockingIOError among them
        pass  # nothing more for now (or the pipe is gone: the end marks the rest)
    *lines, process.text = process.text.split(b"\n")
    for line in lines:
        index, _, name = line.decode(errors="replace").partition(" ")
        if index.isdigit() and int(index) < len(process.jobs):
            process.jobs[int(index)].compiled.add(name)
    if ended:
        stream.close()


def _start(jobs: list[dict]) -> subprocess.Popen:
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, (package_root, environment.get("PYTHONPATH"))))
    environment[BACKGROUND_COMPILE_ENV] = "off"
    process = subprocess.Popen(
        [sys.executable, "-m", "convtranspose._execute.background_worker"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=environment, start_new_session=os.name == "posix")
    with contextlib.suppress(OSError):
        process.stdin.write(json.dumps(jobs).encode())
        process.stdin.close()
    try:  # its progress is read without waiting, or not at all (then: when it ends)
        os.set_blocking(process.stdout.fileno(), False)
    except (OSError, AttributeError):
        process.stdout.close()
        process.stdout = None
    return process
