"""From a raw estimate (:mod:`.estimates`) to nanoseconds on this machine.

A raw estimate is a :class:`RawCost`: pass and overhead terms (``scaled``), BLAS
multiply-adds priced at this machine's measured GEMM rate (``gemm``) and numba
multiply-adds at modelled shares of its measured FMA peak (``kernel``).  Nothing here
is fitted by hand to a kind of CPU:

- the GEMM rate, copy rate and FMA peak are measured on the machine at hand
  (:mod:`convtranspose._choose.figures`, kept in the wisdom file);
- every time measured planning (:mod:`convtranspose._choose.planning`) times candidates, the
  wisdom keeps each one's raw estimate beside its measured time.  From those samples
  :func:`fit_coefficients` learns, per algorithm, how this machine weighs the three
  parts and what one call costs besides (:class:`Coefficients`), and the estimate
  uses them from then on.  An algorithm never measured here keeps the model as written.

The estimate only has to rank the few most promising algorithms well: measured
planning times those and makes the final call.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .._runtime.target import numba_usable
from .figures import keep_figure, machine_figures
from .wisdom import store

__all__ = ["Coefficients", "RawCost", "calibrated_ns", "fit_coefficients", "fma_gflops",
           "gemm_gflops",
           "learn", "learned_coefficients", "model_revision", "samples_of"]

#: The unit of the per-call term of :class:`Coefficients` (ns), and its prior: about
#: what one call's Python and NumPy dispatch costs.  The fit moves it to what each
#: algorithm's calls cost here; held-out suites ranked best with 10 us against 1 us
#: and about as well as with 30 us (``benchmarks/results/estimate-errors-xeon.json``).
OVERHEAD_UNIT_NS = 10000.0
#: Weight of the prior (the model as written) against the samples, in samples' worth:
#: with one sample an algorithm's coefficients move about halfway to what it says.
#: Held-out suites ranked best with 1 against 0.1 and 5
#: (``benchmarks/results/estimate-errors-xeon.json``).
PRIOR_WEIGHT = 1.0
#: Samples per algorithm the fit reads (the most recent).
MAX_SAMPLES = 2000


@dataclass(frozen=True)
class RawCost:
    """One algorithm's raw estimate (ns): ``scaled``, the modelled passes and per-call
    terms; ``gemm``, BLAS multiply-adds at the measured GEMM rate; and ``kernel``, a
    numba kernel's multiply-adds at a modelled share of the measured FMA peak.  Numbers add to ``scaled``.
    """

    scaled: float
    gemm: float = 0.0
    kernel: float = 0.0

    def __add__(self, other):
        if isinstance(other, RawCost):
            return RawCost(self.scaled + other.scaled, self.gemm + other.gemm,
                           self.kernel + other.kernel)
        return RawCost(self.scaled + other, self.gemm, self.kernel)

    __radd__ = __add__

    @property
    def total(self) -> float:
        return self.scaled + self.gemm + self.kernel

    @property
    def parts(self) -> tuple[float, float, float]:
        """``(scaled, gemm, kernel)``: what the wisdom keeps beside a measured time."""
        return (self.scaled, self.gemm, self.kernel)


@dataclass(frozen=True)
class Coefficients:
    """How this machine weighs one algorithm's raw estimate:
    ``scaled * passes + gemm * blas + kernel * numba + calls * OVERHEAD_UNIT_NS``."""

    passes: float = 1.0
    blas: float = 1.0
    numba: float = 1.0
    calls: float = 1.0
    samples: int = 0

    def ns(self, cost: RawCost) -> float:
        return (cost.scaled * self.passes + cost.gemm * self.blas + cost.kernel * self.numba
                + self.calls * OVERHEAD_UNIT_NS)


_PRIOR = Coefficients()


def gemm_gflops() -> float:
    """Large float32 GEMM rate (GFLOP/s) of the BLAS this process uses, measured here."""
    return machine_figures().gemm_gflops


def fma_gflops() -> float | None:
    """One thread's float32 FMA peak (GFLOP/s) at the vector width numba compiles for
    here: from the wisdom file, or measured now
    (:func:`convtranspose._kernels._numba.peak.measure_fma_gflops`, a few milliseconds
    once its kernel is in the kernel cache) and kept there.  None where numba cannot
    run: no numba kernel is offered then, so no estimate needs it.

    One thread's, because an estimate counts the threads its kernel keeps busy (two
    threads on the two hyperthreads of one core would not double the peak).
    """
    known = machine_figures().get("fma_gflops")
    if isinstance(known, (int, float)) and known > 0:
        return float(known)
    if not numba_usable():
        return None
    from .._kernels._numba import peak

    measured = peak.measure_fma_gflops()
    keep_figure("fma_gflops", measured)
    return measured


def fit_coefficients(parts, times_ns) -> Coefficients:
    """The :class:`Coefficients` that best explain measured times by raw estimates.

    Minimises the squared log ratio of the predicted to the measured times (each
    sample counts by its relative error, so small layers weigh as much as large ones),
    plus :data:`PRIOR_WEIGHT` times the squared logs of the coefficients (the prior is
    the model as written, all ones).  Coefficients are kept positive by fitting their
    logs (Gauss-Newton steps, halved until the objective falls).

    Parameters
    ----------
    parts : array_like, shape (n, 3)
        Each sample's ``(scaled, gemm, kernel)`` raw parts (ns, non-negative).
    times_ns : array_like, shape (n,)
        Each sample's measured time (ns, positive).

    Examples
    --------
    Passes that take twice, and numba multiply-adds half, the modelled time:

    >>> parts = [(1e6, 0.0, 0.0), (0.0, 0.0, 4e6), (1e6, 0.0, 2e6), (3e6, 0.0, 1e6)] * 5
    >>> fit = fit_coefficients(parts, [2e6, 2e6, 3e6, 6.5e6] * 5)
    >>> round(fit.passes, 1), round(fit.numba, 1)
    (1.9, 0.6)
    """
    features = np.column_stack([np.asarray(parts, float).reshape(-1, 3),
                                np.full(len(times_ns), OVERHEAD_UNIT_NS)])
    log_times = np.log(np.asarray(times_ns, float))
    logs = np.zeros(4)

    def objective(logs):
        predicted = features @ np.exp(logs)
        return float(np.sum((np.log(predicted) - log_times) ** 2)
                     + PRIOR_WEIGHT * np.sum(logs ** 2))

    current = objective(logs)
    for _ in range(50):
        weights = np.exp(logs)
        predicted = features @ weights
        residuals = np.log(predicted) - log_times
        jacobian = features * weights / predicted[:, None]
        normal = jacobian.T @ jacobian + PRIOR_WEIGHT * np.eye(4)
        step = np.linalg.solve(normal, jacobian.T @ residuals + PRIOR_WEIGHT * logs)
        for _ in range(30):
            trial = np.clip(logs - step, -30.0, 30.0)
            value = objective(trial)
            if value <= current:
                break
            step = step / 2
        else:
            break
        logs, improvement, current = trial, current - value, value
        if improvement < 1e-10 * max(current, 1.0):
            break
    passes, blas, numba, calls = np.exp(logs)
    return Coefficients(float(passes), float(blas), float(numba), float(calls), len(log_times))


def _usable(parts, time) -> bool:
    try:
        numbers = [float(p) for p in parts] + [float(time)]
    except (TypeError, ValueError):
        return False
    return (len(numbers) == 4 and all(math.isfinite(x) and x >= 0 for x in numbers)
            and numbers[3] > 0)


def samples_of(choices: dict) -> dict[str, tuple[list, list]]:
    """Per algorithm, the ``(parts, times_ns)`` samples of the wisdom's measured
    choices that carry raw estimates (entries that do not, or are damaged, are
    skipped)."""
    samples: dict[str, tuple[list, list]] = {}
    for entry in choices.values():
        if not isinstance(entry, dict):
            continue
        parts, times = entry.get("parts"), entry.get("times_ns")
        if not isinstance(parts, dict) or not isinstance(times, dict):
            continue
        for name, raw in parts.items():
            time = times.get(name)
            if isinstance(raw, list) and _usable(raw, time):
                found = samples.setdefault(name, ([], []))
                found[0].append([float(part) for part in raw])
                found[1].append(float(time))
    return samples


def learn(choices: dict) -> dict[str, Coefficients]:
    """Per algorithm with samples in ``choices`` (the wisdom's section,
    :func:`samples_of`), the :class:`Coefficients` fitted to its most recent
    :data:`MAX_SAMPLES`."""
    return {name: fit_coefficients(parts[-MAX_SAMPLES:], times[-MAX_SAMPLES:])
            for name, (parts, times) in samples_of(choices).items()}


@functools.lru_cache(maxsize=4)
def _learned(revision: tuple) -> dict[str, Coefficients]:
    del revision  # the cache key: the wisdom's path and its revision
    return learn(store.entries("choices"))


def model_revision() -> tuple:
    """Changes whenever the wisdom does (another file, new or forgotten entries): the
    key under which calibrated estimates may be kept."""
    store.ensure_loaded()
    return (store.path(), store.revision)


def learned_coefficients() -> dict[str, Coefficients]:
    """Per algorithm measured on this machine, its :class:`Coefficients` (from the
    wisdom; an algorithm absent here keeps the model as written)."""
    return _learned(model_revision())


def calibrated_ns(cost: RawCost, name: str | None = None,
                  learned: dict[str, Coefficients] | None = None) -> float:
    """``cost`` in nanoseconds on this machine: weighed by the coefficients learned for
    algorithm ``name`` (``learned``, by default :func:`learned_coefficients`), or by
    the prior (the model as written plus one per-call unit) where none were; without
    ``name``, its total."""
    if name is None:
        return cost.total
    coefficients = (learned_coefficients() if learned is None else learned).get(name, _PRIOR)
    return coefficients.ns(cost)
