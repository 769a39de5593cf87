"""The kernels' per-call views (``_kernels/common.py``) against NumPy's own."""

from __future__ import annotations

import numpy as np

from convtranspose._kernels import common


def test_move_axis_is_numpys_moveaxis_view():
    rng = np.random.default_rng(0)
    for ndim in range(1, 6):
        array = rng.standard_normal(tuple(int(n) for n in rng.integers(1, 4, ndim)))
        for source in range(-ndim, ndim):
            for destination in range(-ndim, ndim):
                moved = common.move_axis(array, source, destination)
                expected = np.moveaxis(array, source, destination)
                assert moved.shape == expected.shape and moved.strides == expected.strides
                assert np.shares_memory(moved, array)
                np.testing.assert_array_equal(moved, expected)


def test_group_views_of_both_layouts():
    # (N, C, X...) and (N, X..., C) data as (G, N, X..., Ci), NumPy's moves as the oracle.
    data = np.arange(2 * 6 * 3 * 4).reshape(2, 6, 3, 4)
    expected = np.moveaxis(data.reshape(2, 3, 2, 3, 4), (1, 2), (0, -1))
    np.testing.assert_array_equal(common.input_glxc(data, 3, False), expected)
    last = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    np.testing.assert_array_equal(common.input_glxc(last, 3, True), expected)
