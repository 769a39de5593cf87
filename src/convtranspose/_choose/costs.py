"""What every estimate returns and reads: :class:`RawCost`, an algorithm's raw
estimate in parts, and :class:`Layer`, the quantities of one problem the estimators
share (:mod:`.estimates`, :mod:`.kernel_estimates`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._plan.geometry import AxisPhases, axis_phases, tap_windows
from .._plan.rules import AxisPlan

__all__ = ["Layer", "RawCost"]


@dataclass(frozen=True)
class RawCost:
    """One algorithm's raw estimate (ns): ``scaled``, the modelled passes and per-call
    terms; ``gemm``, BLAS multiply-adds at the measured GEMM rate; and ``kernel``, a
    numba kernel's multiply-adds at a modelled share of the measured FMA peak.  Numbers
    add to ``scaled``.
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
class Layer:
    """The quantities every estimator needs, derived once per problem."""

    batch: int
    groups: int
    ci: int
    co: int
    axes: tuple[AxisPlan, ...]
    channels_last: bool
    phases: tuple[AxisPhases, ...]

    @classmethod
    def of(cls, batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
           channels_last: bool) -> Layer:
        groups, ci, co = weights_shape[:3]
        return cls(batch, groups, ci, co, tuple(axes), channels_last,
                   tuple(axis_phases(axis) for axis in axes))

    @property
    def taps(self) -> int:
        return math.prod(axis.kernel_size for axis in self.axes)

    @property
    def spatial_in(self) -> tuple[int, ...]:
        return tuple(axis.input_size for axis in self.axes)

    @property
    def inputs(self) -> int:
        return self.batch * self.groups * self.ci * math.prod(self.spatial_in)

    @property
    def outputs(self) -> int:
        return self.batch * self.groups * self.co * math.prod(a.output_size for a in self.axes)

    @property
    def live_taps(self) -> int:
        """Taps (over every axis) that reach some output: col2im's adds, one per tap."""
        return math.prod(sum(w is not None for w in tap_windows(axis)) for axis in self.axes)

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(p.blocks for p in self.phases)

    @property
    def rows_phase(self) -> int:
        return self.batch * math.prod(self.blocks)

    @property
    def padding(self) -> bool:
        return any(p.pad_low or p.pad_high for p in self.phases)

    @property
    def ncx_run(self) -> int:
        """Channels-first products are stored along the last axis: whole rows of blocks
        when its stride is 1, single elements between the other phases' otherwise."""
        return self.blocks[-1] if self.axes[-1].stride == 1 else 1
