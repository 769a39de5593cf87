"""Timing candidate algorithms on the real operands, within a fixed budget.

The budget, per problem, once per machine (the result is kept as wisdom):

- under ``measure``, the :data:`MEASURED_CANDIDATES` the estimate ranks first, plus
  the best-ranked of each kind of kernel until one BLAS/NumPy algorithm and
  :data:`NUMBA_KERNELS_TIMED` numba kernels are among them, plus the best-ranked of
  each way of making BLAS products
  (:data:`~convtranspose._choose.candidates.PRODUCT_FORMS`), plus
  the next ones while the estimates put measuring them all under
  :data:`MEASURE_ALL_BELOW_SECONDS` (:func:`convtranspose._choose.candidates.candidate_names`); every
  applicable one under ``exhaustive``;
- each candidate runs once untimed (its kernels compile, or load from the on-disk
  cache, and its derived filter is built); when compiling is deferred, a candidate
  whose kernels are not compiled leaves the race there (:func:`measure`);
- then rounds that time every candidate still in the race once each, in turn, so a
  burst of contention from the rest of the machine slows all of them alike rather
  than one.  No candidate leaves threads busy after it returns, which would slow the
  next one: the library's BLAS products run on its own threads
  (:func:`~convtranspose._kernels.common.split_gemms`), where OpenBLAS's workers spun
  for 0.1 s after each and `direct-blocked` timed right after `gemm-ncx` ran 1.6x slower.  Each timed run of a candidate under :data:`WARM_UP_BELOW_NS` comes right
  after an untimed run of its own, so it finds the caches as a loop of its calls
  would.  :data:`TIMED_RUNS` rounds at least; more, up to :data:`MAX_RUNS`, while the
  rounds so far took under :data:`ROUND_BUDGET_SECONDS` (a layer of a few tens of
  microseconds gets a dozen runs each for about a millisecond; a first timed run of a
  short call is often several times its later ones, which a single run would keep);
- after two runs, a candidate over :data:`GIVE_UP_FACTOR` times the best time so far
  leaves the race (after one, over :data:`GIVE_UP_AT_ONCE` times).

So a measured first call of a layer estimated at more than about 10 ms costs at most
``1 + 2 * 3 = 7`` calls of each candidate (4 where they take over 20 ms), plus
compilation; a smaller layer, up to about 0.1 s of calls by the estimates; the winner
then computes the result once more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .._kernels.compiling import KernelNotCompiled, deferring_compiles
from .._runtime.notices import notice_if_slow

__all__ = ["GIVE_UP_AT_ONCE", "GIVE_UP_FACTOR", "MAX_RUNS", "MEASURE_ALL_BELOW_SECONDS",
           "MEASURED_CANDIDATES", "NUMBA_KERNELS_TIMED", "ROUND_BUDGET_SECONDS",
           "RUNS_PER_CANDIDATE", "TIMED_RUNS", "WARM_UP_BELOW_NS", "Measurement", "measure"]

#: Candidates the estimate ranks first that are timed under ``measure``.
MEASURED_CANDIDATES = 3
#: Under ``measure``, at least this many numba kernels are timed (the best-ranked ones),
#: whatever their rank: their estimates are modelled shares of the FMA peak and err
#: between them too.  On an Intel Xeon a 14x14 k7 stride-1 128->128 layer of 4
#: samples was estimated 11 ms by ``direct`` and 12.9 by ``direct-blocked``, which came
#: fourth and was never timed; they ran 7.8 and 5.3 ms
#: (``benchmarks/results/planning-xeon.json``, ``numba_kernels_timed``).
NUMBA_KERNELS_TIMED = 2
#: Under ``measure``, more candidates in the estimate's order while timing all of them
#: (:data:`RUNS_PER_CANDIDATE` runs each, by their estimates) stays under this:
#: small layers are measured exhaustively.  The estimate erred by up to 4-8x between
#: algorithms on an Intel Xeon (a numba kernel 2.7x faster than the three BLAS ones it
#: ranked first on a k1 s3 layer of 0.05 ms); measuring them all there costs a few ms.
MEASURE_ALL_BELOW_SECONDS = 0.1
#: Timed rounds at least; the fastest run of each candidate counts (the others met
#: interruptions).
TIMED_RUNS = 3
#: Runs of a candidate in the minimum rounds: one untimed, then a warm-up and a timed
#: run per round.
RUNS_PER_CANDIDATE = 1 + 2 * TIMED_RUNS
#: Timed rounds at most, for calls so short that more rounds cost next to nothing.
MAX_RUNS = 15
#: More rounds than :data:`TIMED_RUNS` only while the timed rounds so far took less.
ROUND_BUDGET_SECONDS = 0.005
#: In each round a candidate faster than this (ns) runs once untimed right before its
#: timed run: the candidate before it in the round left the caches holding its own data,
#: which slowed a 1.2 ms layer (1 MB in, 1 MB out) to 2.8 ms and made a slower candidate
#: look faster (Intel Xeon); a layer slower than this moves more data than the caches hold.
WARM_UP_BELOW_NS = 20e6
#: A candidate timed twice and still over this many times the best time leaves the race.
GIVE_UP_FACTOR = 2.0
#: A candidate over this many times the best time after its first timed run leaves at
#: once: no cold first run is that slow (a run that slow only costs time).
GIVE_UP_AT_ONCE = 8.0


@dataclass(frozen=True)
class Measurement:
    """What measuring one problem found.

    Attributes
    ----------
    times : tuple of (str, float)
        Each timed candidate's fastest run in nanoseconds, fastest first (none when
        every candidate was deferred: :func:`measure`'s ``defer_all``).
    seconds : float
        Wall time spent measuring (compilation and untimed runs included).
    deferred : tuple of str
        Candidates left out because their kernels were not compiled yet (measuring
        with ``defer``).
    """

    times: tuple[tuple[str, float], ...]
    seconds: float
    deferred: tuple[str, ...] = ()

    @property
    def fastest(self) -> str:
        return self.times[0][0]


def _timed_ns(run, name) -> float:
    start = time.perf_counter_ns()
    run(name)
    return float(time.perf_counter_ns() - start)


def measure(candidates, run, defer: bool = False, defer_all: bool = False) -> Measurement:
    """Time ``run(name)`` for every name of ``candidates`` (see the module docstring).

    With ``defer``, a candidate whose kernels are not compiled yet leaves the race
    before compiling (:func:`~convtranspose._kernels.compiling.deferring_compiles`) and
    is listed in :attr:`Measurement.deferred`, unless every candidate would: then the
    first compiles, or, with ``defer_all``, none does and :attr:`Measurement.times` is
    empty.
    """
    started = time.perf_counter()
    with notice_if_slow("measuring", _measuring_message):
        names = list(dict.fromkeys(candidates))
        first, deferred = _first_runs(names, run, defer, defer_all)
        names = [name for name in names if name in first]
        best = _race(names, run, first) if names else {}
    ranked = tuple(sorted(best.items(), key=lambda item: item[1]))
    return Measurement(ranked, time.perf_counter() - started, tuple(deferred))


def _measuring_message() -> str:
    return ("timing algorithms on the first call of this layer shape, once for this "
            "machine (the fastest is kept as wisdom; CONVTRANSPOSE_PLANNING=estimate "
            "skips the timing)")


def _first_runs(names, run, defer: bool,
                defer_all: bool = False) -> tuple[dict[str, float], list[str]]:
    """Each candidate's untimed first run (compilation, derived filters, first touch of
    memory), in ns; its duration only says whether the candidate is short enough to
    warm up in round one.  With ``defer``, the candidates that would compile first are
    returned apart (all but the first when every one would, unless ``defer_all``)."""
    first, deferred = {}, []
    for name in names:
        if not defer:
            first[name] = _timed_ns(run, name)
            continue
        try:
            with deferring_compiles():
                first[name] = _timed_ns(run, name)
        except KernelNotCompiled:
            deferred.append(name)
    if not first and not defer_all:
        name = deferred.pop(0)
        first[name] = _timed_ns(run, name)
    return first, deferred


def _race(names, run, first) -> dict[str, float]:
    """Every candidate's fastest timed run (ns; infinite for those that left early)."""
    best = dict.fromkeys(names, float("inf"))
    runs = dict.fromkeys(names, 0)
    racing, rounds_started = list(names), time.perf_counter()
    for round_index in range(MAX_RUNS):
        if len(racing) < 2 and round_index or round_index >= TIMED_RUNS and (
                time.perf_counter() - rounds_started > ROUND_BUDGET_SECONDS):
            break
        for name in racing:
            if min(best[name], first[name]) < WARM_UP_BELOW_NS:
                run(name)  # caches warm with this candidate's data, as in a loop of calls
            best[name] = min(best[name], _timed_ns(run, name))
            runs[name] += 1
        fastest = min(best.values())
        racing = [name for name in racing if best[name] <= fastest * (
            GIVE_UP_FACTOR if runs[name] >= 2 else GIVE_UP_AT_ONCE)]
    return best
