"""``ct.explain``: why a layer gets its algorithm, estimate and measurement side by side."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, overload

import numpy as np

from .._choose.choice import (
    Choice,
    Explanation,
    choose,
    estimates_ns,
    format_ns,
    header_line,
    target_line,
)
from .._choose.figures import keep_numba_import, numba_import_seconds
from .._choose.planning import get_planning, planned_choice, problem_key, use_planning
from .._choose.wisdom import store
from .._dtypes import accumulation_dtype
from .._execute.adjoints import (
    BACKWARD_ALGORITHM_ENV,
    as_transposed,
    data_adjoint_options,
    transposed_axes,
    transposed_weights_shape,
)
from .._execute.background import compiling_here
from .._execute.transposed import transposed_convolution
from .._kernels.adjoints import SUMMARIES
from .._plan.convolution import ConvolutionPlan
from .._plan.problem import Problem
from .._plan.rules import ConvTransposePlan
from .._runtime.config import ALGORITHM_ENV, switch
from .._runtime.target import Target, host, use_target
from .convolution import execute_convolution

if TYPE_CHECKING:
    from .._typing import DTypeLike

__all__ = ["AdjointChoice", "AdjointExplanation", "explain", "one_call", "one_call_target",
           "problem_of"]

#: How far the cost model's estimate of the fastest NumPy/BLAS algorithm may fall short
#: of its time on small layers: up to 4-8x between algorithms
#: (``benchmarks/results/planning-xeon.json``, docs/planning.md).
_ESTIMATE_SHORTFALL = 4


def problem_of(plan: ConvTransposePlan, dtype) -> Problem:
    """The canonical problem of ``plan`` on operands of ``dtype``."""
    operand = np.dtype(dtype)
    accumulate = accumulation_dtype(operand)
    return Problem(plan.data_shape[0], plan.axes, plan.canonical_filter_shape,
                   plan.channels_last, accumulate, None if operand == accumulate else operand)


def one_call_target(plan: ConvTransposePlan, dtype, target: Target | None = None) -> Target:
    """The target for a process that computes ``plan`` once and exits: without numba
    when numba is not imported yet and the fastest NumPy/BLAS algorithm's estimate,
    even :data:`_ESTIMATE_SHORTFALL` times over, is below this machine's numba import
    time (:func:`~convtranspose._choose.figures.numba_import_seconds`: 0.19 s on an
    Intel Xeon, before its kernels load, against microseconds for a small layer); else
    ``target`` (this machine's
    by default).  Never without numba where an algorithm is forced
    (``CONVTRANSPOSE_ALGORITHM``)."""
    target = host() if target is None else target
    if not target.numba or "numba" in sys.modules or switch(ALGORITHM_ENV):
        return target
    seconds = numba_import_seconds()
    if seconds is None:
        return target
    free = target.replace(numba=False)
    estimates = estimates_ns(problem_of(plan, dtype), free)
    if estimates and estimates[0][1] * _ESTIMATE_SHORTFALL < seconds * 1e9:
        return free
    return target


@contextlib.contextmanager
def one_call(plan: ConvTransposePlan, dtype) -> Iterator[None]:
    """``with one_call(plan, dtype):`` compute ``plan`` as a process that computes it once
    (:func:`one_call_target`); afterwards keep the time numba took to import, if it was
    imported, as the machine's figure for the next such process."""
    with use_target(one_call_target(plan, dtype)):
        yield
    keep_numba_import()


def _random_operands(plan, dtype: np.dtype, seed: int = 0):
    """Data (the plan's ``data_shape``, in its own layout: channels last where the plan
    is) and canonical weights, in ``dtype``, values in [-1, 1)."""
    rng = np.random.default_rng(seed)
    data = (rng.random(plan.data_shape) * 2 - 1).astype(dtype)
    weights = (rng.random(plan.canonical_filter_shape) * 2 - 1).astype(dtype)
    return data, weights


@overload
def explain(plan: ConvTransposePlan, dtype: DTypeLike = ..., *, target: Target | None = ...,
            measure: bool = ...) -> Explanation: ...


@overload
def explain(plan: ConvolutionPlan, dtype: DTypeLike = ..., *, target: Target | None = ...,
            measure: bool = ...) -> Explanation | AdjointExplanation: ...


def explain(plan: ConvTransposePlan | ConvolutionPlan, dtype: DTypeLike = "float32", *,
            target: Target | None = None,
            measure: bool = False) -> Explanation | AdjointExplanation:
    """Why a layer gets its algorithm: every candidate's estimate, what this machine
    measured for it (if anything), the choice, what runs.

    A forward convolution (``ct.shapes.convolution`` or ``group_convolution``) runs as
    the data gradient of a transposed convolution: where every stride is 1 that is a
    stride-1 transposed convolution, explained as any other (a ``computed as`` line says
    which); else the adjoint kernels compute it, and the account lists their candidates
    and what this machine measured for them (they have no cost model).

    Parameters
    ----------
    plan : ConvTransposePlan or ConvolutionPlan
        A plan from :mod:`convtranspose.shapes`.
    dtype : dtype, optional
        The operands' dtype (default float32).
    target : Target, optional
        The machine; this one by default.
    measure : bool, optional
        Measure the candidates now on random operands of the plan's shapes when this
        machine has not measured the problem yet (under the planning level in force,
        ``measure`` when that is ``estimate``); the result is kept as wisdom.

    Returns
    -------
    Explanation or AdjointExplanation
        Its ``str`` is a table; ``.choice`` holds the
        :class:`~convtranspose._choose.choice.Choice` (``.measured`` the times, if any),
        or for a strided forward convolution the :class:`AdjointChoice`.

    Raises
    ------
    TypeError
        ``plan`` is not a plan of :mod:`convtranspose.shapes` (a prepared layer explains
        itself: ``layer.explain()``).

    Examples
    --------
    >>> import convtranspose as ct
    >>> plan = ct.shapes.convolution_backprop_data((1, 8, 16, 16), (8, 4, 3, 3), strides=2)
    >>> ct.explain(plan).choice.runs in ct.ALGORITHMS
    True
    >>> forward = ct.shapes.convolution((1, 8, 16, 16), (4, 8, 3, 3), strides=2)
    >>> ct.explain(forward).choice.algorithm in ("im2col", "taps", "blocked", "blocked-planes")
    True
    """
    target = host() if target is None else target
    operand = np.dtype(dtype)
    if isinstance(plan, ConvolutionPlan):
        return _explain_convolution(plan, operand, target, measure)
    if not isinstance(plan, ConvTransposePlan):
        hint = (" (a prepared layer explains itself: layer.explain())"
                if callable(getattr(plan, "explain", None)) else "")
        raise TypeError(f"explain takes a plan of convtranspose.shapes, got "
                        f"{type(plan).__name__}{hint}")
    problem = problem_of(plan, operand)

    def run():
        data, weights = _random_operands(plan, operand)
        transposed_convolution(data, weights, plan.axes, channels_last=plan.channels_last,
                               dtype=problem.dtype, result_dtype=problem.result_dtype,
                               target=target)

    return Explanation(plan, operand, _explained_choice(problem, target, measure, run), target)


@contextlib.contextmanager
def _measuring() -> Iterator[None]:
    """``explain(..., measure=True)``'s calls: measured planning (the level in force
    where it measures), every kernel compiled in this process."""
    level = get_planning()
    with use_planning(level if level in ("measure", "exhaustive") else "measure"), \
            compiling_here():
        yield


def _explained_choice(problem: Problem, target: Target, measure: bool, run) -> Choice:
    """The choice of ``problem``: the estimates, and what planning decides or decided
    (after ``run()`` computed it under measured planning, if ``measure`` and it is not
    decided yet)."""
    estimated = choose(problem, target, estimate_forced=True)
    if estimated.decided_by != "estimates":
        return estimated
    measured_now = measure and planned_choice(problem, target).decided_by == "estimates"
    if measured_now:
        with _measuring():
            run()
    planned = planned_choice(problem, target)
    # kept as wisdom by the run just now: "measured", as the strided account says
    decided_by = ("measured" if measured_now and planned.decided_by == "wisdom"
                  else planned.decided_by)
    return dataclasses.replace(estimated, algorithm=planned.algorithm,
                               runs=planned.runs, decided_by=decided_by,
                               fallbacks=planned.fallbacks, measured=planned.measured,
                               threads=planned.threads)


def _explain_convolution(plan: ConvolutionPlan, operand: np.dtype, target: Target,
                         measure: bool) -> Explanation | AdjointExplanation:
    """:func:`explain` of a forward convolution: the data adjoint of the transposed
    convolution ``plan.axes`` describes (:func:`~convtranspose._execute.adjoints
    .data_adjoint`), which is the stride-1 transposed convolution of the data where every
    stride is 1 and the adjoint kernels' choice otherwise."""
    accumulate = accumulation_dtype(operand)

    def run():
        data, weights = _random_operands(plan, operand)  # canonical: the filter's memory
        with use_target(target):
            execute_convolution(plan, data, weights.reshape(plan.filter_shape), None)

    weights_shape, batch = plan.canonical_filter_shape, plan.data_shape[0]
    if as_transposed(plan.axes):
        problem = Problem(batch, transposed_axes(plan.axes),
                          transposed_weights_shape(weights_shape), False, accumulate,
                          None if operand == accumulate else operand)
        return Explanation(plan, operand, _explained_choice(problem, target, measure, run),
                           target, computed_as=_AS_TRANSPOSED)
    with use_target(target):
        candidates, preset, rule = data_adjoint_options(batch, weights_shape, plan.axes,
                                                        accumulate)
    key = "data-adjoint " + problem_key(
        Problem(batch, plan.axes, weights_shape, False, accumulate), target)
    entry = store.entries("choices").get(key) if preset is None else None
    measured_now = measure and preset is None and entry is None
    if measured_now:
        with _measuring():
            run()
        entry = store.entries("choices").get(key)
    times: dict[str, float] = {}
    if preset is not None:
        decided_by = "forced" if switch(BACKWARD_ALGORITHM_ENV).strip() else "rule"
        algorithm = preset
    elif entry is None or entry.get("algorithm") not in candidates:
        decided_by, algorithm = "unmeasured", rule
    else:
        decided_by = "measured" if measured_now else "wisdom"
        algorithm, times = entry["algorithm"], entry.get("times_ns", {})
    return AdjointExplanation(plan, operand, target, AdjointChoice(
        algorithm, decided_by, candidates, tuple(sorted(times.items(), key=lambda t: t[1]))))


_AS_TRANSPOSED = ("every stride is 1: the stride-1 transposed convolution of the data, the"
                  " filter's channel roles swapped and its taps reversed")


@dataclasses.dataclass(frozen=True)
class AdjointChoice:
    """What computes a strided forward convolution (the adjoint kernels' choice).

    Attributes
    ----------
    algorithm : str
        One of :data:`convtranspose._kernels.adjoints.ALGORITHMS`.
    decided_by : str
        A key of :data:`_ADJOINT_DECIDED`.
    candidates : tuple of str
        The algorithms that may compute it.
    measured : tuple of (str, float)
        ``(algorithm, ns)`` as measured planning timed them, fastest first.
    """

    algorithm: str
    decided_by: str
    candidates: tuple[str, ...]
    measured: tuple[tuple[str, float], ...] = ()


_ADJOINT_DECIDED = {
    "forced": f"{BACKWARD_ALGORITHM_ENV} (forced)",
    "rule": "the adjoint kernels' rule (planning level estimate, or one candidate)",
    "unmeasured": "not measured yet: the rule's pick, until the first call times the"
                  " candidates (kept as wisdom; measure=True times them now)",
    "measured": "measured on these operands (planning), kept as wisdom",
    "wisdom": "measured earlier on this machine (wisdom)"}


class AdjointExplanation:
    """A printable account of a strided forward convolution's :class:`AdjointChoice`."""

    def __init__(self, plan: ConvolutionPlan, dtype: np.dtype, target: Target,
                 choice: AdjointChoice):
        self.plan, self.dtype, self.target, self.choice = plan, dtype, target, choice

    def __str__(self) -> str:
        choice, plan = self.choice, self.plan
        lines = [header_line(plan, self.dtype),
                 f"computed as  strides {list(plan.strides)}: the data gradient of the"
                 f" transposed convolution it is the adjoint of, by the adjoint kernels",
                 target_line(self.target),
                 f"decided by   {_ADJOINT_DECIDED[choice.decided_by]}"]
        measured = dict(choice.measured)
        width = max(len(name) for name in choice.candidates)
        lines.append("candidates" + ("measured".rjust(width + 15) if measured else ""))
        for name in sorted(choice.candidates, key=lambda n: (n not in measured,
                                                             measured.get(n, 0))):
            timed = format_ns(measured[name]) if name in measured else "-"
            mark = "  <- chosen" if name == choice.algorithm else ""
            lines.append(f"  {name.ljust(width) if measured or mark else name}"
                         f"{timed.rjust(12) if measured else ''}{mark}")
        lines.append(f"runs         {choice.algorithm}: {SUMMARIES[choice.algorithm]}")
        return "\n".join(lines)

    __repr__ = __str__
