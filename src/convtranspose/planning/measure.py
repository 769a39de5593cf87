"""Timing candidate algorithms on the real operands, within a fixed budget.

The budget, per problem, once per machine (the result is kept as wisdom):

- at most :data:`MEASURED_CANDIDATES` candidates under ``measure`` (the ones the
  estimate ranks first), every applicable one under ``exhaustive``;
- each candidate runs once untimed (its kernels compile, or load from the on-disk
  cache, and its derived filter is built), then up to :data:`TIMED_RUNS` timed runs;
  a candidate whose timed run takes over :data:`GIVE_UP_FACTOR` times the best time
  so far stops there;
- so a measured first call costs at most ``3 * (1 + 3) = 12`` calls of the layer
  plus compilation.  Its result is then computed once more by the winner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["GIVE_UP_FACTOR", "MEASURED_CANDIDATES", "TIMED_RUNS", "Measurement", "measure"]

#: Candidates timed under ``measure``: the estimate ranks the winner among its first
#: three on every layer of ``benchmarks/results/choices-*.json``.
MEASURED_CANDIDATES = 3
#: Timed runs per candidate; the fastest counts (the others met interruptions).
TIMED_RUNS = 3
#: A candidate slower than this many times the best so far is not timed again.
GIVE_UP_FACTOR = 2.0


@dataclass(frozen=True)
class Measurement:
    """What measuring one problem found.

    Attributes
    ----------
    times : tuple of (str, float)
        Each timed candidate's fastest run in nanoseconds, fastest first.
    seconds : float
        Wall time spent measuring (compilation and untimed runs included).
    """

    times: tuple[tuple[str, float], ...]
    seconds: float

    @property
    def fastest(self) -> str:
        return self.times[0][0]


def measure(candidates, run) -> Measurement:
    """Time ``run(name)`` for every name of ``candidates`` (see the module docstring)."""
    started = time.perf_counter()
    times: dict[str, float] = {}
    for name in candidates:
        run(name)  # untimed: compilation, derived filters, first touch of memory
        best = float("inf")
        for _ in range(TIMED_RUNS):
            start = time.perf_counter_ns()
            run(name)
            best = min(best, float(time.perf_counter_ns() - start))
            if times and best > GIVE_UP_FACTOR * min(times.values()):
                break
        times[name] = best
    ranked = tuple(sorted(times.items(), key=lambda item: item[1]))
    return Measurement(ranked, time.perf_counter() - started)
