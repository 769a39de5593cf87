"""The canonical problem: one frozen record of what a transposed convolution computes.

Every dialect's plan reduces to the same problem: a batch, one
:class:`~convtranspose._plan.rules.AxisPlan` per spatial axis, the canonical weights'
shape ``(G, Ci, Co, K...)``, the data's layout and the dtypes.  The choice of algorithm,
its estimates, measured planning, the wisdom and the prepared calls are all keyed by a
:class:`Problem`, so none of them spells these fields out again, and two dialects'
layers that compute the same problem share everything learned about it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from .rules import AxisPlan

__all__ = ["Problem"]


@dataclass(frozen=True)
class Problem:
    """One canonical transposed convolution, hashable.

    Attributes
    ----------
    batch : int
        ``N``.
    axes : tuple of AxisPlan
        One per spatial axis.
    weights_shape : tuple of int
        ``(G, Ci, Co, K...)``.
    channels_last : bool
        The layout of the data and of the result.
    dtype : numpy.dtype
        The accumulation dtype (float64, float32 or int64), which the sums have.
    result_dtype : numpy.dtype or None
        The result's dtype where it is not ``dtype`` (float16, bfloat16, narrower
        integers): the sums are rounded to it once.  None when it is ``dtype``.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> from convtranspose._plan.problem import Problem
    >>> plan = ct.shapes.convolution_backprop_data((2, 8, 16, 16), (8, 4, 3, 3), strides=2)
    >>> problem = Problem(2, plan.axes, plan.canonical_filter_shape, dtype=np.dtype("float32"))
    >>> problem.groups, problem.rank, problem.output_shape
    (1, 2, (2, 4, 33, 33))
    """

    batch: int
    axes: tuple[AxisPlan, ...]
    weights_shape: tuple[int, ...]
    channels_last: bool = False
    dtype: Any = None
    result_dtype: Any = None

    def __post_init__(self):
        # Normalised so that equal problems are equal records (and hash alike) however
        # they were spelled: tuples of ints, a bool, numpy dtypes (``np.float32`` the
        # type is not ``np.dtype("float32")`` to a dict).
        set_ = object.__setattr__
        set_(self, "batch", int(self.batch))
        set_(self, "axes", tuple(self.axes))
        set_(self, "weights_shape", tuple(int(n) for n in self.weights_shape))
        set_(self, "channels_last", bool(self.channels_last))
        for name in ("dtype", "result_dtype"):
            value = getattr(self, name)
            if value is not None and not (hasattr(value, "itemsize") and hasattr(value, "kind")):
                raise TypeError(f"Problem.{name} must be a numpy dtype, got {value!r}")
        if self.dtype is None:
            raise TypeError("Problem.dtype is required")
        if self.result_dtype == self.dtype:
            set_(self, "result_dtype", None)

    @property
    def rank(self) -> int:
        """The number of spatial axes."""
        return len(self.axes)

    @property
    def groups(self) -> int:
        return self.weights_shape[0]

    @property
    def empty(self) -> bool:
        """Whether there is nothing to multiply (a zero-size batch, channel or input)."""
        return self.batch * math.prod(self.weights_shape) * math.prod(
            a.input_size for a in self.axes) == 0

    @property
    def output_shape(self) -> tuple[int, ...]:
        """The result's shape in the problem's layout."""
        channels = self.weights_shape[0] * self.weights_shape[2]
        spatial = tuple(a.output_size for a in self.axes)
        if self.channels_last:
            return (self.batch, *spatial, channels)
        return (self.batch, channels, *spatial)

    def replace(self, **changes) -> Problem:
        """This problem with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)
