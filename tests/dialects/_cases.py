"""Random layers and operands shared by the dialect tests."""

from __future__ import annotations

import numpy as np


def integer_array(rng: np.random.Generator, shape, dtype="float64") -> np.ndarray:
    """Small integers as floats: every sum is exact, so results compare with ``==``."""
    return rng.integers(-3, 4, size=shape).astype(dtype)


def assert_same(ours, theirs, context) -> None:
    """Equal shapes and values (exact: the operands hold small integers)."""
    assert ours.shape == theirs.shape, f"{context}: shape {ours.shape} != {theirs.shape}"
    np.testing.assert_array_equal(ours, theirs, err_msg=str(context))
