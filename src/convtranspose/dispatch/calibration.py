"""Per-CPU-class calibration of the raw estimates (:mod:`.estimates`).

A raw estimate is a :class:`RawCost`: pass and overhead terms (``scaled``), BLAS
multiply-adds at the class's measured GEMM speed (``gemm``) and numba multiply-adds at
their modelled rate (``kernel``).  A class's table turns it into nanoseconds:
``scale * scaled + kernel_scale * kernel + gemm + overhead``, per algorithm.  The
tables are least-squares fits of ``benchmarks/calibrate.py`` over the benchmark suite
and random layers, on the machines ``benchmarks/results/calibration-zen3.json`` and
``calibration-zen4.json`` name; a class without a table takes the raw estimates as they
are.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .._runtime import blas as _blas
from .._runtime.machine import cpu_identity

__all__ = ["MachineClass", "RawCost", "calibrated_ns", "calibration_table", "gemm_gflops",
           "machine_class"]


@dataclass(frozen=True)
class RawCost:
    """One algorithm's raw estimate (ns): ``scaled``, which the calibration scales;
    ``gemm``, BLAS multiply-adds at the machine class's GEMM speed, which it does not;
    and ``kernel``, a numba kernel's multiply-adds at their modelled rate, which it
    scales on its own where the class's table gives a third number (else as ``scaled``).

    The GEMM speed is measured, the pass and call terms are rough models whose errors
    the calibration absorbs: scaling the products too would price large GEMM-bound
    layers below their measured times.  Numbers add to ``scaled``.
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


@dataclass(frozen=True, eq=False)
class MachineClass:
    """What the cost model knows of one kind of CPU and the BLAS kernels it runs.

    ``gemm_gflops`` is the large-sgemm speed on two cores; ``calibration`` maps an
    algorithm to the ``(scale, overhead ns[, kernel scale])`` that turn its raw estimate
    into the times measured on that kind (absent: as is).
    """

    name: str
    gemm_gflops: float
    calibration: dict[str, tuple[float, ...]]


#: The AMD table (Zen 3 fit, shared by Zen 4 but for its numba kernels):
#: ``benchmarks/results/calibration-zen3.json`` and ``calibration-zen4.json``.
_AMD_CALIBRATION: dict[str, tuple[float, float]] = {
    "gemm-nxc": (0.7, 200000),
    "gemm-ncx": (0.612, 200000),
    "shift-nxc": (0.925, 200000),
    "shift-ncx": (0.782, 200000),
    "phase-nxc": (0.563, 120000),
    "phase-ncx": (0.484, 120000),
    "col2im-nxc": (0.541, 80000),
    "col2im-ncx": (0.502, 80000),
    "window": (0.562, 120000),
    "direct": (0.45, 20000),
    "direct-blocked": (0.579, 50000),
    "dense": (1.325, 0),
}

#: Intel Xeons with two 512-bit FMA units: sgemm at about 400 GFLOP/s on two cores
#: (``benchmarks/results/machines.json``); no calibration table.
_XEON = MachineClass("xeon-avx512", 400.0, {})
#: AMD Zen 3 (AVX2): sgemm 147-175 GFLOP/s on two cores; ``direct`` scales its
#: multiply-adds (0.70) apart from its fills, stores and call terms (0.25)
#: (``benchmarks/results/calibration-zen3.json``).
_ZEN3 = MachineClass("zen3-avx2", 160.0, {**_AMD_CALIBRATION, "direct": (0.25, 50000, 0.70),
                                           "direct-blocked": (0.579, 100000)})
#: AMD Zen 4 (AVX-512 in 256-bit halves): sgemm 190-200 GFLOP/s on two cores; the AMD
#: table but for the numba kernels, whose AVX-512 blocks gain more than BLAS does
#: (``benchmarks/results/calibration-zen4.json``).
_ZEN4 = MachineClass("zen4-avx512", 200.0, {**_AMD_CALIBRATION, "direct": (0.37, 20000),
                                             "direct-blocked": (0.40, 50000)})

#: OpenBLAS kernel families with AVX-512 sgemm.
_AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


@functools.cache
def machine_class() -> MachineClass:
    """The :class:`MachineClass` of this process's CPU and of NumPy's OpenBLAS.

    OpenBLAS's AVX-512 kernels run on Intel Xeons and on AMD Zen 4 (family 25), which
    executes each 512-bit operation in two 256-bit halves, at half the Xeons' sgemm
    speed: the vendor and family tell them apart.  Everything else (AVX2 kernels, or no
    BLAS found) is taken for Zen 3.
    """
    if _blas.corename().lower() not in _AVX512_CORES:
        return _ZEN3
    vendor, family = cpu_identity()
    return _ZEN4 if (vendor, family) == ("AuthenticAMD", 25) else _XEON


def gemm_gflops() -> float:
    """Large-GEMM speed (GFLOP/s, two cores) of the BLAS this process uses."""
    return machine_class().gemm_gflops


def calibration_table() -> dict[str, tuple[float, ...]]:
    """The ``(scale, overhead ns[, kernel scale])`` per algorithm for this machine."""
    return machine_class().calibration


def calibrated_ns(cost: RawCost, entry: tuple[float, ...]) -> float:
    """``cost`` through one calibration ``entry``, ``(scale, overhead ns[, kernel
    scale])``: the kernel part scaled by the third number if there is one, else as
    ``scaled``; the BLAS part as is."""
    scale, overhead, *kernel_scale = entry
    return (scale * cost.scaled + (kernel_scale or [scale])[0] * cost.kernel + cost.gemm
            + overhead)
