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


def require(module: str, reason: str):
    """``pytest.importorskip``, except under CI (``CI`` set), where a missing framework
    fails the test instead of skipping it."""
    import importlib
    import os

    import pytest

    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=reason)


def dilate_kernel(kernel: np.ndarray, dilations, axes) -> np.ndarray:
    """The kernel with ``d - 1`` zeros between taps along each axis: what a dilated
    kernel means, for runtimes that refuse dilation (TensorFlow's CPU kernels)."""
    result = kernel
    for axis, d in zip(axes, dilations):
        if d == 1:
            continue
        shape = list(result.shape)
        shape[axis] = (shape[axis] - 1) * d + 1
        spread = np.zeros(shape, result.dtype)
        index = [slice(None)] * result.ndim
        index[axis] = slice(None, None, d)
        spread[tuple(index)] = result
        result = spread
    return result
