"""From a raw estimate (:mod:`.estimates`) to nanoseconds on this machine.

A raw estimate is a :class:`RawCost`: pass and overhead terms (``scaled``), BLAS
multiply-adds priced at this machine's measured GEMM rate (``gemm``) and numba
multiply-adds at their modelled rate (``kernel``).  Nothing here is fitted by hand to
a kind of CPU: the GEMM rate is measured on the machine at hand
(:mod:`convtranspose._runtime.figures`, kept in the wisdom file), and the estimate
only has to rank the few most promising algorithms, which measured planning
(:mod:`convtranspose.planning`) then times on the real operands.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._runtime.figures import machine_figures

__all__ = ["RawCost", "calibrated_ns", "gemm_gflops"]


@dataclass(frozen=True)
class RawCost:
    """One algorithm's raw estimate (ns): ``scaled``, the modelled passes and per-call
    terms; ``gemm``, BLAS multiply-adds at the measured GEMM rate; and ``kernel``, a
    numba kernel's multiply-adds at their modelled rate.  Numbers add to ``scaled``.
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


def gemm_gflops() -> float:
    """Large float32 GEMM rate (GFLOP/s) of the BLAS this process uses, measured here."""
    return machine_figures().gemm_gflops


def calibrated_ns(cost: RawCost) -> float:
    """``cost`` in nanoseconds on this machine."""
    return cost.total
