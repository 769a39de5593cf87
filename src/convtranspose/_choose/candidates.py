"""Which candidates measured planning times: the estimate's order, cut to a budget.

The estimate ranks every offered algorithm; timing them all on each new problem would
cost seconds, timing only its first choice would keep its errors.  Under ``measure``,
:func:`candidate_names` takes the best-ranked ones and those of each kind and form where
the estimate errs most between them (:mod:`convtranspose._choose.measure` times them).
"""

from __future__ import annotations

from .._kernels import REGISTRY, resolve
from .choice import Choice
from .measure import (
    GIVE_UP_AT_ONCE,
    MEASURE_ALL_BELOW_SECONDS,
    MEASURED_CANDIDATES,
    NUMBA_KERNELS_TIMED,
    RUNS_PER_CANDIDATE,
)

__all__ = ["PRODUCT_FORMS", "candidate_names", "numba_kernel"]


def numba_kernel(name: str) -> bool:
    """Whether ``name`` is a numba kernel (the registry's ``numba`` requirement)."""
    return "numba" in REGISTRY[name].requires


#: The modules whose algorithms make the layer BLAS products in different ways: a GEMM
#: per class of phases over an im2col copy, accumulating GEMMs over shifted windows,
#: one GEMM of every tap's contribution and a scatter.  The estimate prices their
#: products alike, at the measured GEMM rate, but their copies and scatters err by
#: factors between them (on 32 of 386 layers of the fixed and random suites on three
#: CPUs, one of them was the fastest, ranked fourth to ninth of ten or eleven, and not
#: timed), so measured planning times the best-ranked of each where its estimate is
#: within :data:`~.measure.GIVE_UP_AT_ONCE` times the best (beyond it, those added
#: took a median 8.5x the fastest time: hopeless, and costly to time)
#: (``benchmarks/results/estimate-errors-zen4.json``, ``candidate_rules``).
PRODUCT_FORMS = ("phase", "gemm", "col2im")


def candidate_names(choice: Choice, level: str, dtype, rank, channels_last, target) -> list[str]:
    """The names to time: the estimate's order, one per code that runs.

    Under ``measure``, the first :data:`~.measure.MEASURED_CANDIDATES`, then the
    best-ranked of each kind until at least one BLAS/NumPy algorithm and
    :data:`~.measure.NUMBA_KERNELS_TIMED` numba kernels are among them, and the
    best-ranked of each of :data:`PRODUCT_FORMS` (within :data:`~.measure.GIVE_UP_AT_ONCE`
    times the first's estimate); then the next ones in order while the
    estimates put measuring all of them under
    :data:`~.measure.MEASURE_ALL_BELOW_SECONDS`.  The estimate prices BLAS at this
    machine's measured GEMM rate but numba kernels at modelled shares of its FMA peak,
    so its errors are largest between the two kinds (on an Intel Xeon it put numba
    ``direct`` last of eleven on a layer where it was fastest); the best of each kind
    is always timed.
    """
    names, seen = [], set()
    for name, _ in choice.estimates:
        runs, _ = resolve(name, dtype, rank, channels_last, target)
        if runs not in seen:
            seen.add(runs)
            names.append(name)
    if level == "exhaustive":
        return names
    chosen = names[:MEASURED_CANDIDATES]
    # Then the best-ranked of each kind until at least one BLAS/NumPy algorithm and
    # NUMBA_KERNELS_TIMED numba kernels are timed.
    for numba, least in ((False, 1), (True, NUMBA_KERNELS_TIMED)):
        missing = least - sum(numba_kernel(name) == numba for name in chosen)
        chosen += [name for name in names
                   if numba_kernel(name) == numba and name not in chosen][:max(0, missing)]
    # Then the best-ranked of each way of making the layer BLAS products that is not yet
    # among them (PRODUCT_FORMS), unless it would leave the race at once if it ran as
    # estimated.
    estimated = dict(choice.estimates)
    within = GIVE_UP_AT_ONCE * min(estimated.values(), default=0.0)
    for form in PRODUCT_FORMS:
        if not any(REGISTRY[name].module == form for name in chosen):
            chosen += [name for name in names
                       if REGISTRY[name].module == form and estimated[name] <= within][:1]
    # Then more in the estimate's order while measuring them all would take under the
    # budget by the estimates: a small layer is measured exhaustively.
    spent = sum(estimated[name] for name in chosen) * RUNS_PER_CANDIDATE / 1e9
    for name in names:
        if name in chosen:
            continue
        spent += estimated[name] * RUNS_PER_CANDIDATE / 1e9
        if spent > MEASURE_ALL_BELOW_SECONDS:
            break
        chosen.append(name)
    return chosen
