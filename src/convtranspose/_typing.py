"""The types of the public API's arguments, for annotations (imported only by type
checkers: ``if TYPE_CHECKING``).

A shape is a sequence of ints (a tuple, a list or a 1-D integer array); a per-axis
attribute is one int for every spatial axis, one int per axis, or ``None`` for the
specification's default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import SupportsIndex, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

__all__ = ["ArrayLike", "DTypeLike", "NDArray", "PerAxis", "ShapeLike"]

#: A shape: ``(1, 20, 224, 224)``, ``[450, 450]`` or a 1-D integer array.
ShapeLike = Union[Sequence[SupportsIndex], "np.ndarray"]
#: A per-axis attribute: ``2`` (every spatial axis), ``[2, 1]``, or ``None`` (the default).
PerAxis = Union[SupportsIndex, Sequence[SupportsIndex], "np.ndarray", None]
