"""Measured planning: the first call of a new problem times the best candidates, and the
machine remembers the winner (like FFTW's planner and wisdom, cuDNN's benchmark mode).

Levels (:func:`set_planning`, :func:`use_planning`, ``CONVTRANSPOSE_PLANNING``):

``estimate``
    The cost model alone (:mod:`convtranspose._choose.choice`): no call is ever timed.
``measure`` (the default)
    The first call of a problem this machine has not measured times the candidates the
    estimate ranks first, on the real operands (the budget:
    :mod:`convtranspose._choose.measure`), and keeps the fastest as wisdom.  Small
    layers too: the estimate errs most on them (a tiny layer's estimated choice ran
    7.9x slower than the measured one, ``benchmarks/results/planning-xeon.json``),
    and measuring one costs a few milliseconds once per machine.
``exhaustive``
    As ``measure``, timing every applicable algorithm.

At every level but ``estimate``, wisdom already measured for a problem is used (and
nothing measured again).  The key is the
canonical problem (batch, per-axis plan, weights shape, layout, dtypes, target and
threads), never the dialect: the four dialect functions share what was learned.

A candidate whose kernels would compile first is deferred when the caller can have them
compiled elsewhere (``warm`` of :func:`planned_choice`): the call runs the fastest of
the others (``decided_by="provisional"``, not kept), the first call after the
best-ranked deferred candidate's kernels are ready measures again among the compiled
ones (once per problem), and the first call after all are ready measures every
candidate.

Measuring never changes what is computed beyond float rounding: every candidate
computes the same sums (in another order), and the result returned is the winner's.
Operands with infinities or NaNs are never measured (they go to the exact algorithms
as always), and the problem is measured at a later finite call.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import math
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .._errors import ConvTransposeError
from .._kernels import resolve
from .._kernels.compiling import deferring_compiles
from .._plan.problem import Problem
from .._runtime.caches import register
from .._runtime.config import ALGORITHM_ENV, CACHE_ENV, PLANNING_ENV, WISDOM_ENV, switch
from .._runtime.target import Target
from . import figures as _figures
from .candidates import candidate_names, numba_kernel
from .choice import Choice, choose, numpy_target, split_label, timed_label
from .measure import MEASURE_ALL_BELOW_SECONDS, RUNS_PER_CANDIDATE, Measurement, measure
from .wisdom import WisdomError, check_document, store

__all__ = ["LEVELS", "choice_settled", "export_wisdom",
           "forget_wisdom", "get_planning", "import_wisdom", "measured_choice", "planned_choice",
           "problem_key", "provisional_ready", "recording", "remeasuring", "set_planning",
           "store_path", "use_planning"]

#: The planning levels (the module docstring).
LEVELS = ("estimate", "measure", "exhaustive")
#: The level when nothing sets one (the module docstring says why).
DEFAULT_LEVEL = "measure"

_level_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "convtranspose_planning", default=None)
_level_set: str | None = None
_inflight: dict[str, threading.Event] = {}
_inflight_lock = threading.Lock()


def _checked(level) -> str:
    if level not in LEVELS:
        raise ConvTransposeError(f"planning level {level!r} is not one of {LEVELS}")
    return level


def get_planning() -> str:
    """The planning level in force here: :func:`use_planning`'s, else
    :func:`set_planning`'s, else ``CONVTRANSPOSE_PLANNING``, else ``"measure"``."""
    level = _level_var.get() or _level_set
    if level is not None:
        return level
    chosen = switch(PLANNING_ENV).strip().lower()
    if not chosen:
        return DEFAULT_LEVEL
    if chosen not in LEVELS:
        raise ConvTransposeError(f"{PLANNING_ENV}={chosen!r} is not one of {LEVELS}")
    return chosen


def set_planning(level: str | None) -> str | None:
    """Set the planning level for the process; returns the previous setting.

    Parameters
    ----------
    level : {"estimate", "measure", "exhaustive"} or None
        None drops the setting (``CONVTRANSPOSE_PLANNING``, else ``measure``, applies).

    Returns
    -------
    str or None
        The setting before, None when there was none.

    Examples
    --------
    >>> import convtranspose as ct
    >>> previous = ct.set_planning("estimate")
    >>> ct.get_planning()
    'estimate'
    >>> _ = ct.set_planning(previous)
    """
    global _level_set, generation
    previous = _level_set
    _level_set = None if level is None else _checked(level)
    generation += 1
    return previous


@contextlib.contextmanager
def use_planning(level: str) -> Iterator[None]:
    """``with ct.use_planning("measure"):`` the level for calls in this block (this
    thread or task only)."""
    global generation
    token = _level_var.set(_checked(level))
    generation += 1  # calls kept under another level (prepared calls) are made again
    try:
        yield
    finally:
        _level_var.reset(token)
        generation += 1


def problem_key(problem: Problem, target: Target) -> str:
    """The wisdom key of a canonical problem on ``target``."""
    per_axis = ",".join(f"{a.input_size}:{a.kernel_size}:{a.stride}:{a.dilation}:"
                        f"{a.offset}:{a.output_size}" for a in problem.axes)
    flags = "".join(flag for flag, on in (("n", target.numba), ("b", target.blas),
                                          ("h", target.f16c), ("p", target.bfloat16_pairs))
                    if on)
    result = "" if problem.result_dtype is None else "->" + problem.result_dtype.name
    return (f"n{problem.batch} [{per_axis}] w{'x'.join(map(str, problem.weights_shape))} "
            f"{'nxc' if problem.channels_last else 'ncx'} {problem.dtype.name}{result} "
            f"t{target.threads} v{target.vector_bytes} {flags}")


def _with_algorithm(choice: Choice, entry: dict, decided_by: str, dtype, rank,
                    channels_last, target, measured=()) -> Choice:
    algorithm = entry["algorithm"]
    numba = entry.get("numba") is not False  # False: NumPy's code while kernels compile
    runs, fallbacks = resolve(algorithm, dtype, rank, channels_last,
                              target if numba else numpy_target(target))
    threads = entry.get("threads")  # checked when read (wisdom.valid_entries)
    return dataclasses.replace(choice, algorithm=algorithm, runs=runs, decided_by=decided_by,
                               fallbacks=fallbacks, measured=tuple(measured),
                               threads=threads if threads and threads < target.threads
                               else None, numba=numba)


def _remembered(key: str, offered) -> dict | None:
    store.ensure_loaded()
    entry = store.choices.get(key)
    if isinstance(entry, dict) and entry.get("algorithm") in offered:
        return entry
    return None


def _numpy_stand_in(names) -> str | None:
    """What a call runs on NumPy's code (:func:`~.choice.numpy_target`) while every
    candidate's kernels compile elsewhere: the best-ranked candidate that is not a
    numba kernel (``candidate_names`` times one)."""
    return next((name for name in names if not numba_kernel(name)), None)


#: Decisions already taken in this process, by problem and level (cleared when the
#: wisdom changes): a repeated call costs one dictionary lookup.  A Choice for a
#: layer's problem, an algorithm's name for a :func:`measured_choice` computation.
_decided: dict[tuple, Any] = {}
_DECIDED_KEPT = 4096
#: Counts the changes of wisdom (forgotten, imported): callers that keep a decision
#: (the dialect functions' prepared calls) keep it with this number and drop it when
#: the number moved.
generation = 0


def _wisdom_changed() -> None:
    global generation
    _decided.clear()
    _figures.forget_figures()
    generation += 1


def forget_decisions() -> None:
    """Drop the decisions kept in memory (the wisdom on disk stays)."""
    _decided.clear()
    _provisional.clear()
    _warmed.clear()
    _staged.clear()


register("planning decisions", forget_decisions)


def planned_choice(problem: Problem, target: Target, *, run=None, finite=None,
                   warm=None) -> Choice:
    """The :class:`~convtranspose._choose.choice.Choice` for a problem under the planning level.

    ``run(name)`` computes the problem with algorithm ``name`` on the real operands
    (into a result buffer the caller keeps), and ``finite()`` says whether they are all
    finite; without ``run``, or when they are not, wisdom is used but nothing measured.

    ``warm(names)``, when given, has the kernels of algorithms ``names`` compiled
    elsewhere and returns a function that says whether they are all ready, whose
    ``compiled()`` names those ready so far (a
    :class:`~convtranspose._execute.background.Compiling`), or None when it cannot:
    measuring then leaves out the candidates whose kernels are not compiled yet, the
    call runs the fastest of the others (``decided_by="provisional"``, not kept as
    wisdom), and the first call after the best-ranked of them or all are ready
    measures again (the module docstring).
    """
    level = get_planning()
    forced = switch(ALGORITHM_ENV)
    memo = (problem, target, level, switch(WISDOM_ENV), switch(CACHE_ENV))
    remeasured = _remeasure.get()
    known = None if forced or remeasured is not None else _decided.get(memo)
    if known is not None:
        return _keep(memo, known, final=False)
    with deferring_compiles() if warm is not None else contextlib.nullcontext():
        choice = choose(problem, target)  # a figure's kernel may compile elsewhere too
    if choice.decided_by != "estimates" or level == "estimate":
        return _keep(memo, choice, final=choice.decided_by != "forced")
    key = problem_key(problem, target)
    offered = {name for name, _ in choice.estimates}
    dtype, rank, channels_last = problem.dtype, problem.rank, problem.channels_last
    again = remeasured is not None and key not in remeasured and run is not None
    entry = None if again else (_remembered(key, offered) or _pending_entry(key))
    if entry is None and run is not None:
        if finite is None or finite():
            entry = _measure_once(key, offered, lambda: candidate_names(
                choice, level, dtype, rank, channels_last, target), run, level,
                None if key in _warmed else warm, target.threads, _numpy_stand_in)
            if remeasured is not None:
                remeasured.add(key)
        else:
            return _keep(memo, choice, final=False)  # measured at a later finite call
    if entry is None:
        return _keep(memo, choice, final=run is not None)
    decided_by = ("provisional" if entry.get("provisional")
                  else "measured" if entry.get("fresh") else "wisdom")
    # The wisdom file keeps the times by name: Choice.measured is fastest first.
    times = sorted(entry.get("times_ns", {}).items(), key=lambda item: item[1])
    return _keep(memo, _with_algorithm(choice, entry, decided_by, dtype, rank,
                                       channels_last, target, times),
                 final=decided_by != "provisional")  # a later call measures it all


def measured_choice(kind: str, key: str, candidates, run, default: str, warm=None) -> str:
    """The fastest of ``candidates`` for a problem outside the transposed-convolution
    registry (the adjoint kernels), under the planning level: ``default`` (the rule's
    choice) at ``estimate``; otherwise wisdom, or a measurement kept as wisdom.

    ``kind`` names the computation and ``key`` the canonical problem
    (:func:`problem_key`); ``run(name)`` computes it with algorithm ``name``.
    ``warm`` as for :func:`planned_choice`: candidates whose kernels are not compiled
    are compiled elsewhere, the call takes the fastest of the others (not kept), and
    the first call after they are ready measures them all.
    """
    level = get_planning()
    candidates = tuple(candidates)
    if level == "estimate" or len(candidates) < 2:
        return default
    full_key = f"{kind} {key}"
    memo = (full_key, level, switch(WISDOM_ENV), switch(CACHE_ENV))
    known = _decided.get(memo)
    if known is not None:
        return known
    entry = _remembered(full_key, set(candidates)) or _pending_entry(full_key)
    if entry is None:
        ordered = (default,) + tuple(name for name in candidates if name != default)
        entry = _measure_once(full_key, set(candidates), lambda: list(ordered), run, level,
                              None if full_key in _warmed else warm)
    name = entry["algorithm"] if entry is not None else default
    if entry is None or not entry.get("provisional"):
        if len(_decided) >= _DECIDED_KEPT:
            _decided.clear()
        _decided[memo] = name
    return name


def choice_settled(kind: str, key: str) -> bool:
    """Whether :func:`measured_choice`'s pick for ``kind`` and ``key`` is final under
    the planning level in force: decided by the rule (``estimate``) or by wisdom or a
    measurement kept in memory, not a provisional pick while kernels compile."""
    level = get_planning()
    return level == "estimate" or (
        f"{kind} {key}", level, switch(WISDOM_ENV), switch(CACHE_ENV)) in _decided


_recorder: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "convtranspose_planning_record", default=None)


@contextlib.contextmanager
def recording():
    """``with recording() as choices:`` every planned :class:`Choice` of the block's calls
    (in this thread or task), in order (``convtranspose tune`` reports them)."""
    choices: list[Choice] = []
    token = _recorder.set(choices)
    try:
        yield choices
    finally:
        _recorder.reset(token)


_remeasure: contextvars.ContextVar[set | None] = contextvars.ContextVar(
    "convtranspose_planning_remeasure", default=None)


@contextlib.contextmanager
def remeasuring() -> Iterator[None]:
    """``with remeasuring():`` the block's calls (in this thread or task) measure each
    problem once again whatever the wisdom says, and their measurements replace its
    entries (``convtranspose tune --force``: a choice measured on a busy machine)."""
    token = _remeasure.set(set())
    try:
        yield
    finally:
        _remeasure.reset(token)


def _keep(memo: tuple, choice: Choice, final: bool) -> Choice:
    """Remember a final decision (not a forced one: ``CONVTRANSPOSE_ALGORITHM`` is read
    on every call; not one taken without the operands, which a later call may measure)."""
    record = _recorder.get()
    if record is not None:
        record.append(choice)
    if final:
        if len(_decided) >= _DECIDED_KEPT:
            _decided.clear()
        # Later calls use what this one measured: for them it is wisdom.
        _decided[memo] = (dataclasses.replace(choice, decided_by="wisdom")
                          if choice.decided_by == "measured" else choice)
    return choice


#: Measurements that left out candidates whose kernels were compiling elsewhere, by
#: problem key: (the entry, those kernels' :class:`Compiling`-like readiness, the
#: best-ranked of them).
_provisional: dict[str, tuple[dict, Any, str]] = {}
#: Problems measured again when their best-ranked deferred candidate was ready.
_staged: set[str] = set()
#: Problems whose deferred kernels were compiled: measured without deferring again
#: (a kernel still missing then compiles here, so deferring ends).
_warmed: set[str] = set()


def provisional_ready(problem: Problem, target: Target) -> Callable[[], bool] | None:
    """For a problem whose choice is provisional (:func:`planned_choice`: its other
    candidates' kernels compiling elsewhere), the function that says whether the next
    planned call measures it again (:func:`_staged_or_ready`); None otherwise."""
    key = problem_key(problem, target)
    pending = _provisional.get(key)
    return None if pending is None else lambda: _staged_or_ready(key, pending)


def _staged_or_ready(key: str, pending: tuple) -> bool:
    """Whether the provisional ``pending`` entry of ``key`` is measured again: all its
    deferred candidates are ready, or, once per problem, the best-ranked of them.  The
    candidate running meanwhile may take several times that one's time (``gemm-ncx``
    130 ms against ``direct``'s 28 on a grouped float16 layer), and the last deferred
    candidate may be ready 30-40 s after the first
    (``benchmarks/results/provisional-calls-zen1.json``)."""
    _, ready, best = pending  # (all ready: the best one is among the compiled)
    return ready() if key in _staged else best in ready.compiled()


def _pending_entry(key: str) -> dict | None:
    """The provisional entry of ``key`` while its deferred kernels compile, else None
    (and, once they or the best-ranked of them are ready, ``key`` is measured again)."""
    pending = _provisional.get(key)
    if pending is None:
        return None
    if not _staged_or_ready(key, pending):
        return pending[0]
    # Measured without deferring once all are ready, else deferring those compiling.
    done = _warmed if pending[1]() else _staged
    _provisional.pop(key, None)
    # The calls kept while the choice was provisional (none: prepare_call) are made
    # again after this measurement.
    global generation
    generation += 1
    if len(done) >= _DECIDED_KEPT:
        done.clear()
    done.add(key)
    return None


def _measure_once(key, offered, candidates, run, level, warm=None,
                  threads: int = 1, stand_in=None) -> dict | None:
    """Measure the problem ``key`` unless another thread is: then wait for its result.

    With ``warm`` (:func:`planned_choice`), candidates whose kernels are not compiled
    are deferred: the entry is provisional and not kept as wisdom.  When every one is,
    ``stand_in(names)`` names the algorithm that runs meanwhile on NumPy's code
    (``"numba": False`` in the entry), untimed: compiling one of them here made a new
    machine's first call of the README's example take 3-4 s on an AMD Zen 4 (the row
    kernel and numba's launchers, ``benchmarks/results/cold-start-zen4.json``); without
    ``stand_in`` (or when it names none) the first compiles here.  With ``threads``
    over one, the fastest are timed on fewer threads too (:func:`_on_fewer_threads`;
    ``run`` then takes their :func:`~.choice.timed_label`)."""
    with _inflight_lock:
        pending = _inflight.get(key)
        if pending is None:
            _inflight[key] = event = threading.Event()
    if pending is not None:
        pending.wait()
        return _remembered(key, offered) or _pending_entry(key)
    try:
        names = candidates()
        meanwhile = None if warm is None or stand_in is None else stand_in(names)
        measurement: Measurement = measure(names, run, defer=warm is not None,
                                           defer_all=meanwhile is not None)
        ready = warm(measurement.deferred) if measurement.deferred else None
        if measurement.deferred and ready is None:  # nowhere else to compile: here
            measurement = measure(names, run)
        if not measurement.times:  # every candidate compiles elsewhere: NumPy meanwhile
            entry = {"algorithm": meanwhile, "level": level, "times_ns": {},
                     "numba": False, "provisional": True}
            _provisional[key] = (entry, ready, measurement.deferred[0])
            return entry
        measurement = _on_fewer_threads(measurement, run, threads, level)
        algorithm, fewer = split_label(measurement.fastest)
        entry = {"algorithm": algorithm, "level": level,
                 "times_ns": {name: round(ns) for name, ns in measurement.times},
                 "seconds": round(measurement.seconds, 4)}
        if fewer is not None:
            entry["threads"] = fewer
        if ready is not None:
            _provisional[key] = ({**entry, "provisional": True}, ready,
                                 measurement.deferred[0])
            return {**entry, "provisional": True}
        store.record("choices", key, entry)
        return {**entry, "fresh": True}
    finally:
        with _inflight_lock:
            del _inflight[key]
        event.set()


def _fewer_threads(threads: int) -> list[int]:
    """The smaller thread counts timed against ``threads``: one, and half of them
    where that is more than one (a machine of many cores may run a small layer best
    on a few)."""
    return sorted({1, threads // 2} - {threads})


def _on_fewer_threads(measurement: Measurement, run, threads: int, level: str) -> Measurement:
    """``measurement`` with its candidates timed again on fewer threads
    (:func:`_fewer_threads`), beside the fastest on all ``threads``, in one race.

    Waking idle threads costs tens to hundreds of microseconds (more after a pause,
    and most on virtual machines whose idle CPUs halt:
    ``benchmarks/results/thread-wakeup-xeon.json``), and a small layer's kernel may
    take less than that; no count of multiply-adds tells where, because kernel rates
    differ fourfold between layers.  Nor does the time on all threads: the wake-ups
    it holds vary from run to run and from kernel to kernel, so its order says
    little about the order on one thread (``direct`` on a 16->16 8x8 k3 s2 layer took
    151 us on two threads, six times the fastest there, and 10.5 us on one, the
    fastest of all: ``benchmarks/results/fewer-threads-zen4.json``).  So every
    candidate is timed again, in the order of its time on all threads, while that
    costs under :data:`~.measure.MEASURE_ALL_BELOW_SECONDS` by the threaded times (a
    run on ``k`` threads taking up to ``threads / k`` times as long; the race drops
    the slow ones after a run or two), under ``measure``; under ``exhaustive`` all.
    """
    if threads < 2 or not measurement.times:
        return measurement
    counts = _fewer_threads(threads)
    share = RUNS_PER_CANDIDATE * sum(threads / k for k in counts)
    cost = RUNS_PER_CANDIDATE * measurement.times[0][1]  # the fastest, raced again
    again = []
    for name, ns in measurement.times:
        cost += share * ns
        if not math.isfinite(ns) or level != "exhaustive" and (
                cost > MEASURE_ALL_BELOW_SECONDS * 1e9):
            break
        again.append(name)
    if not again:
        return measurement
    labels = [measurement.fastest] + [timed_label(name, k) for name in again for k in counts]
    timed = measure(labels, run)
    times = dict(measurement.times)
    times.update(timed.times)
    return dataclasses.replace(measurement, times=tuple(sorted(times.items(),
                                                               key=lambda item: item[1])),
                               seconds=measurement.seconds + timed.seconds)


def store_path() -> str | None:
    """The wisdom file this process reads and writes, or None (kept in memory only)."""
    return store.path()


def export_wisdom(path: str | os.PathLike[str] | None = None) -> dict:
    """This machine's wisdom as a document (a dict that :func:`import_wisdom` takes);
    also written to ``path`` as JSON when one is given."""
    document = store.document()
    if path is not None:
        with open(path, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1, sort_keys=True)
    return document


def import_wisdom(source: dict | str | os.PathLike[str]) -> int:
    """Take the wisdom of a document from :func:`export_wisdom` (a dict, or the path of
    its JSON file); returns the number of choices taken.

    Raises
    ------
    ConvTransposeError
        When the document is damaged, from another machine (CPU, instruction set, BLAS)
        or from other versions of the library, NumPy or numba: what it says would not
        hold here.
    """
    try:
        if isinstance(source, dict):
            document, name = source, "the wisdom document"
        else:
            with open(source, encoding="utf-8") as file:
                document, name = json.load(file), repr(str(source))
        check_document(document, name)
    except (OSError, ValueError, WisdomError) as error:
        raise ConvTransposeError(f"import_wisdom: {error}") from None
    store.merge(document)
    _wisdom_changed()
    return len(document.get("choices", {}))


def forget_wisdom(*, disk: bool = False) -> None:
    """Forget every measured choice and machine figure in this process (and delete the
    wisdom file when ``disk``): the next calls plan afresh."""
    store.forget(disk)
    _wisdom_changed()
