"""Which algorithm computes a problem, and why: the choice, apart from the computation.

:func:`choose` ranks every algorithm the kernels' registry offers for a problem by its
estimate (:mod:`.estimates`) and returns a
:class:`Choice`: the algorithm, every candidate's estimate, how it was decided
(``CONVTRANSPOSE_ALGORITHM``, an empty layer, the estimates) and the registry's
fallbacks that turn it into the code that runs on this :class:`~._runtime.target.Target`.
:class:`Explanation` prints it (``ct.explain``, ``convtranspose shape --explain``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._errors import ConvTransposeError
from .._kernels import ALGORITHMS, REGISTRY, exact_algorithms, resolve, rounds_as_it_stores
from .._kernels.casts import rounds_in_kernels
from .._kernels.scratch import fits, scratch_bytes
from .._plan.geometry import beyond_int64_kernels
from .._plan.problem import Problem
from .._runtime.caches import kept
from .._runtime.config import ALGORITHM_ENV, switch
from .._runtime.target import Target, host
from .estimates import RawCost, estimate_ns, raw_estimates

__all__ = ["Choice", "Explanation", "call_scratch_bytes", "choose", "choose_exact",
           "estimates_ns", "fitting", "forget_estimates", "header_line", "on_threads",
           "raw_costs", "split_label", "target_line", "timed_label"]

#: Nanoseconds per output element of a float32 result that is then rounded to float16
#: or bfloat16 (allocated, written, rounded; ``benchmarks/results/half-precision.json``).
ROUNDING_NS = 1.0


@dataclass(frozen=True)
class Choice:
    """The algorithm for one problem on one target, and how it was decided.

    Attributes
    ----------
    algorithm : str
        The chosen (or forced) algorithm.
    runs : str
        What runs: ``algorithm``, or the registry's fallback where one of its
        requirements is missing on the target.
    decided_by : str
        ``"forced"`` (``CONVTRANSPOSE_ALGORITHM``), ``"empty"`` (nothing to multiply),
        ``"geometry"`` (numbers past the int64 kernels' bound: ``direct-numpy``),
        ``"estimates"``, or (by :mod:`convtranspose._choose.planning`) ``"measured"`` (timed on
        this call's operands), ``"wisdom"`` (timed earlier on this machine) or
        ``"provisional"`` (timed among the candidates whose kernels were compiled, while
        the others compile in a background process).
    estimates : tuple of (str, float)
        Every offered candidate's estimate in nanoseconds, fastest first.
    fallbacks : tuple of (str, str)
        Each algorithm passed over on the way to ``runs``, with the missing requirement.
    measured : tuple of (str, float)
        The candidates timed on this machine (nanoseconds, fastest first) when measured
        planning decided (:mod:`convtranspose._choose.planning`), else empty.  A
        candidate timed on fewer threads than the target's is named with them
        (``"direct-blocked@1"``: :func:`timed_label`).
    threads : int or None
        The threads the layer runs on when measured planning timed it faster on fewer
        than the target's (a small layer on a machine whose idle threads wake slowly);
        None: the target's.
    numba : bool
        False where the layer runs NumPy's code (:func:`numpy_target`) while every
        candidate's kernels compile in a background process (a provisional choice).
    """

    algorithm: str
    runs: str
    decided_by: str
    estimates: tuple[tuple[str, float], ...]
    fallbacks: tuple[tuple[str, str], ...]
    measured: tuple[tuple[str, float], ...] = ()
    threads: int | None = None
    numba: bool = True

    @property
    def label(self) -> str:
        """The algorithm with its thread count where that is not the target's, as
        :attr:`measured` names it."""
        return timed_label(self.algorithm, self.threads)


def timed_label(algorithm: str, threads: int | None) -> str:
    """``algorithm``, or ``"algorithm@threads"`` for a run on fewer threads than the
    target's (the names of :attr:`Choice.measured` and of the wisdom's times)."""
    return algorithm if threads is None else f"{algorithm}@{threads}"


def split_label(label: str) -> tuple[str, int | None]:
    """The algorithm and thread count of a :func:`timed_label`."""
    algorithm, _, threads = label.partition("@")
    return algorithm, int(threads) if threads else None


@kept("the host target", maxsize=64)
def on_threads(target: Target, threads: int | None) -> Target:
    """``target`` with at most ``threads`` threads (the target itself for None or more)."""
    if threads is None or threads >= target.threads:
        return target
    return target.replace(threads=max(1, threads))


@kept("the host target", maxsize=64)
def numpy_target(target: Target) -> Target:
    """``target`` without numba, as the host is under ``CONVTRANSPOSE_NO_NUMBA``: the
    algorithms resolve to their NumPy and BLAS code, which never compiles."""
    return target.replace(numba=False, vector_bytes=16, f16c=False, bfloat16_pairs=False)


def running_target(target: Target, choice: Choice) -> Target:
    """The target ``choice`` runs on: ``target`` on the choice's threads, without numba
    where the choice says so (:attr:`Choice.numba`)."""
    target = on_threads(target, choice.threads)
    return target if choice.numba else numpy_target(target)


def sums_bfloat16_pairs(dtype: np.dtype, result_dtype, target: Target) -> bool:
    """Whether numba ``direct`` may multiply bfloat16 operands summed in float32 as pairs
    (``vdpbf16ps``; the kernel also checks the values,
    :mod:`~convtranspose._kernels._numba.modes`)."""
    return (result_dtype is not None and dtype == np.float32
            and np.dtype(result_dtype).name == "bfloat16" and target.numba
            and target.bfloat16_pairs)


@kept("cost-model estimates", maxsize=512)
def raw_costs(problem: Problem, target: Target) -> dict[str, RawCost]:
    """Raw estimates (:class:`~.estimates.RawCost`) of every offered algorithm whose
    scratch is within the bound (:mod:`convtranspose._kernels.scratch`), with the
    rounding of half-precision results charged to the algorithms that need a whole
    float32 result first (cached)."""
    batch, axes, weights_shape, dtype = (problem.batch, problem.axes, problem.weights_shape,
                                         problem.dtype)
    result_dtype, channels_last = problem.result_dtype, problem.channels_last
    pairs = sums_bfloat16_pairs(dtype, result_dtype, target)
    raw = raw_estimates(batch, axes, weights_shape, channels_last, dtype, target, pairs)
    costs = {name: cost for name, cost in raw.items()
             if fits(name, batch, axes, weights_shape, dtype, target.threads)}
    rounded = (result_dtype is not None and target.numba
               and rounds_in_kernels(dtype, result_dtype, target))
    if rounded:  # the algorithms that round as they store (the registry) pay nothing
        outputs = math.prod(problem.output_shape)
        costs = {name: cost + (0 if rounds_as_it_stores(name, weights_shape, axes, channels_last)
                               else ROUNDING_NS * outputs)
                 for name, cost in costs.items()}
    return costs


@kept("cost-model estimates", maxsize=512)
def estimates_ns(problem: Problem, target: Target) -> tuple[tuple[str, float], ...]:
    """Estimates (ns) of every offered algorithm within the scratch bound, fastest
    first (cached)."""
    costs = raw_costs(problem, target)
    estimates = {name: estimate_ns(cost) for name, cost in costs.items()}
    return tuple(sorted(estimates.items(), key=lambda item: item[1]))


def forget_estimates() -> None:
    """Drop the estimates kept in memory (after the cost model's inputs were replaced)."""
    raw_costs.cache_clear()
    estimates_ns.cache_clear()
    choose_exact.cache_clear()


def choose(problem: Problem, target: Target | None = None, *,
           estimate_forced: bool = False) -> Choice:
    """The :class:`Choice` for a canonical problem.

    Parameters
    ----------
    problem : Problem
        The canonical problem (batch, axes, weights, layout, dtypes).
    target : Target, optional
        The machine; :func:`~convtranspose._runtime.target.host` by default.
    estimate_forced : bool
        Estimate the candidates even when ``CONVTRANSPOSE_ALGORITHM`` forces one (for
        ``ct.explain``; a forced call skips the cost model).

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> from convtranspose._plan.problem import Problem
    >>> plan = ct.shapes.convolution_backprop_data((1, 8, 16, 16), (8, 4, 3, 3), strides=2)
    >>> problem = Problem(1, plan.axes, plan.canonical_filter_shape, dtype=np.dtype("float32"))
    >>> choice = choose(problem)
    >>> choice.algorithm == choice.estimates[0][0]
    True
    """
    target = host() if target is None else target
    forced = switch(ALGORITHM_ENV)
    if forced and forced not in ALGORITHMS:
        raise ConvTransposeError(f"{ALGORITHM_ENV}={forced!r} is not an algorithm; expected "
                                 f"one of {ALGORITHMS} or unset")
    empty, huge = problem.empty, beyond_int64_kernels(problem.axes)
    skip = empty or huge or (forced and not estimate_forced)
    estimates = () if skip else estimates_ns(problem, target)
    if huge and not empty:  # correctness wins over a forced algorithm
        algorithm, decided_by = "direct-numpy", "geometry"
    elif forced:
        algorithm, decided_by = forced, "forced"
    elif empty:
        algorithm, decided_by = ("phase-nxc" if problem.channels_last else "phase-ncx"), "empty"
    else:  # direct-numpy when no offered algorithm's scratch fits
        algorithm, decided_by = (estimates[0][0] if estimates else "direct-numpy"), "estimates"
    runs, fallbacks = resolve(algorithm, problem.dtype, problem.rank, problem.channels_last,
                              target, problem.axes)
    if not (empty or huge):
        fitted = fitting(runs, problem, target)
        if fitted != runs:
            fallbacks += ((runs, "scratch over the bound"),)
            runs, more = resolve(fitted, problem.dtype, problem.rank, problem.channels_last,
                                 target, problem.axes)
            fallbacks += more
    return Choice(algorithm, runs, decided_by, estimates, fallbacks)


def fitting(name: str, problem: Problem, target: Target) -> str:
    """``name``, or where its scratch would exceed the bound
    (:func:`~convtranspose._kernels.scratch.scratch_bound`) the cheapest offered algorithm
    within it, else ``direct-numpy`` (whose scratch always fits): a forced algorithm
    never runs beyond the bound."""
    if fits(name, problem.batch, problem.axes, problem.weights_shape, problem.dtype,
            target.threads):
        return name
    estimates = estimates_ns(problem.replace(result_dtype=None), target)
    return estimates[0][0] if estimates else "direct-numpy"


def call_scratch_bytes(problem: Problem, target: Target | None = None) -> int:
    """The scratch a call may need (:func:`~convtranspose._kernels.scratch.scratch_bytes`):
    the largest estimate among the algorithms measured planning may time (every
    offered one within the bound) and the one that runs by :func:`choose`."""
    target = host() if target is None else target
    problem = problem.replace(result_dtype=None)
    choice = choose(problem, target)
    names = {choice.runs}.union(name for name, _ in choice.estimates)
    return max(scratch_bytes(name, problem.batch, problem.axes, problem.weights_shape,
                             problem.dtype, target.threads) for name in names)


@kept("cost-model estimates", maxsize=512)
def choose_exact(problem: Problem, target: Target) -> str:
    """The cheapest algorithm that is exact with non-finite operands and can run here."""
    problem = problem.replace(result_dtype=None)
    exact = exact_algorithms()
    for name, _ in estimates_ns(problem, target):
        if name in exact:
            return name
    col2im = "col2im-nxc" if problem.channels_last else "col2im-ncx"
    # direct-numpy multiplies only the pairs that exist too, and its scratch always fits.
    return (col2im if fits(col2im, problem.batch, problem.axes, problem.weights_shape,
                           problem.dtype, target.threads)
            else "direct-numpy")


class Explanation:
    """A printable account of one :class:`Choice` (``print(ct.explain(plan))``);
    ``computed_as`` says what a forward convolution's plan runs as."""

    def __init__(self, plan, dtype: np.dtype, choice: Choice, target: Target,
                 computed_as: str | None = None):
        self.plan, self.dtype, self.choice, self.target = plan, dtype, choice, target
        self.computed_as = computed_as

    def __str__(self) -> str:
        choice, target = self.choice, self.target
        decided = _DECIDED[choice.decided_by if choice.numba else "meanwhile"]
        lines = [header_line(self.plan, self.dtype)]
        if self.computed_as:
            lines.append(f"computed as  {self.computed_as}")
        lines += [target_line(target), f"decided by   {decided}"]
        if choice.threads is not None:
            lines.append(f"threads      {choice.threads}: timed faster than on "
                         f"{target.threads} (waking the others costs more than they save)")
        if choice.estimates:
            measured = dict(choice.measured)
            # Runs timed on fewer threads follow their algorithm's estimate (none of its own).
            rows = [(name, format_ns(ns)) for name, ns in choice.estimates]
            rows += [(label, "-") for label in measured if split_label(label)[1] is not None]
            width = max(len(name) for name, _ in rows)
            lines.append("candidates   " + "estimate".rjust(width + 11)
                         + ("measured".rjust(12) if measured else ""))
            for name, estimate in rows:
                mark = "  <- chosen" if name == choice.label else ""
                timed = (format_ns(measured[name]) if name in measured else "-").rjust(12)
                lines.append(f"  {name.ljust(width)}  {estimate.rjust(20)}"
                             f"{timed if measured else ''}{mark}")
        for name, reason in choice.fallbacks:
            lines.append(f"fallback     {name}: {reason}")
        lines.append(f"runs         {choice.runs}: {REGISTRY[choice.runs].summary}")
        return "\n".join(lines)

    __repr__ = __str__


def header_line(plan, dtype: np.dtype) -> str:
    """An explanation's first line: the plan's operation, shapes, layout and dtype."""
    return (f"problem      {plan.op} data {list(plan.data_shape)}, filter "
            f"{list(plan.filter_shape)}, {plan.data_format}, {dtype}")


def target_line(target: Target) -> str:
    """An explanation's line on the machine: vector width, threads, what it has."""
    flags = [name for name in ("numba", "blas", "f16c", "bfloat16_pairs")
             if getattr(target, name)]
    return (f"target       {target.vector_bytes}-byte vectors, {target.threads} threads, "
            + (", ".join(flags) or "NumPy only"))


_DECIDED = {"forced": f"{ALGORITHM_ENV} (forced)",
            "empty": "nothing to multiply (an empty operand): the output is zeros",
            "geometry": "a stride, dilation, pad or size beyond the int64 kernels' bound"
                        " (2**40): Python-integer windows",
            "estimates": "the lowest estimate (cost model)",
            "measured": "measured on these operands (planning), kept as wisdom",
            "provisional": "measured among the algorithms already compiled; the others "
                           "compile in a background process and are timed at a later call",
            "meanwhile": "no candidate's kernels are compiled yet: they compile in a "
                         "background process, are timed at a later call, and NumPy's code "
                         "runs until then",
            "wisdom": "measured earlier on this machine (wisdom)"}


def format_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e3:.3g} us"
