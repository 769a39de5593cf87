"""``ct.explain``: why a layer gets its algorithm, estimate and measurement side by side."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from .._choose.choice import Explanation, choose, estimates_ns
from .._choose.figures import keep_numba_import, numba_import_seconds
from .._choose.planning import get_planning, planned_choice, use_planning
from .._dtypes import accumulation_dtype
from .._execute.background import compiling_here
from .._execute.transposed import transposed_convolution
from .._plan.problem import Problem
from .._plan.rules import ConvTransposePlan
from .._runtime.config import ALGORITHM_ENV, switch
from .._runtime.target import Target, host, use_target

if TYPE_CHECKING:
    from .._typing import DTypeLike

__all__ = ["explain", "one_call", "one_call_target", "problem_of"]

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


def explain(plan: ConvTransposePlan, dtype: DTypeLike = "float32", *,
            target: Target | None = None,
            measure: bool = False) -> Explanation:
    """Why a layer gets its algorithm: every candidate's estimate, what this machine
    measured for it (if anything), the choice, what runs.

    Parameters
    ----------
    plan : ConvTransposePlan
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
    Explanation
        Its ``str`` is a table; ``.choice`` holds the
        :class:`~convtranspose._choose.choice.Choice` (``.measured`` the times, if any).

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
    """
    if not isinstance(plan, ConvTransposePlan):
        hint = (" (a prepared layer explains itself: layer.explain())"
                if callable(getattr(plan, "explain", None)) else "")
        raise TypeError(f"explain takes a plan of convtranspose.shapes, got "
                        f"{type(plan).__name__}{hint}")
    target = host() if target is None else target
    operand = np.dtype(dtype)
    problem = problem_of(plan, operand)
    accumulate, result_dtype = problem.dtype, problem.result_dtype
    estimated = choose(problem, target, estimate_forced=True)
    if measure and estimated.decided_by == "estimates":
        level = get_planning()
        with use_planning(level if level in ("measure", "exhaustive") else "measure"), \
                compiling_here():
            data, weights = _random_operands(plan, operand)
            transposed_convolution(data, weights, plan.axes, channels_last=plan.channels_last,
                                   dtype=accumulate, result_dtype=result_dtype, target=target)
    if estimated.decided_by == "estimates":
        planned = planned_choice(problem, target)
        estimated = dataclasses.replace(estimated, algorithm=planned.algorithm,
                                        runs=planned.runs, decided_by=planned.decided_by,
                                        fallbacks=planned.fallbacks, measured=planned.measured,
                                        threads=planned.threads)
    return Explanation(plan, operand, estimated, target)
