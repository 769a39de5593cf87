"""One BLAS product called from compiled code (``_numba/native_gemm.serial_gemm``) against
``np.matmul`` (an independent implementation), and the cases it leaves to the ctypes
binding: it must do nothing there, so that the binding's copy or refusal applies."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from convtranspose._kernels import common  # noqa: E402
from convtranspose._kernels._numba.native_gemm import serial_gemm  # noqa: E402
from convtranspose._runtime import blas  # noqa: E402

pytestmark = pytest.mark.skipif(not blas.available(np.float32),
                                reason="NumPy's bundled OpenBLAS is not loadable here")


def _view(rng, rows, cols, dtype, kind):
    """A (rows, cols) view in one of the layouts the kernels pass to BLAS."""
    if kind == 0:
        return rng.standard_normal((rows, cols)).astype(dtype)
    if kind == 1:  # transposed
        return rng.standard_normal((cols, rows)).astype(dtype).T
    if kind == 2:  # a window of a wider buffer (leading dimension > cols)
        return rng.standard_normal((rows + 2, cols + 3)).astype(dtype)[1:rows + 1, 2:cols + 2]
    # a column block of a (rows, groups, cols) buffer, as for grouped products
    return rng.standard_normal((rows, 3, cols)).astype(dtype)[:, 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_equal_matmul_on_strided_views(dtype):
    rng = np.random.default_rng(1)
    for case in range(400):
        m, n, k = (int(v) for v in rng.integers(1, 9, 3))
        a, b, c = (_view(rng, rows, cols, dtype, int(rng.integers(4)))
                   for rows, cols in ((m, k), (k, n), (m, n)))
        a_before, b_before, c_before = a.copy(), b.copy(), c.copy()
        accumulate = bool(case % 2)
        assert serial_gemm(a, b, c, accumulate)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        if accumulate:
            expected += c_before
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)
        assert np.array_equal(a, a_before) and np.array_equal(b, b_before)


def test_empty_products_and_zero_depth():
    c = np.full((2, 3), 7.0)
    assert serial_gemm(np.ones((2, 0)), np.ones((0, 3)), c, accumulate=True)
    assert np.array_equal(c, np.full((2, 3), 7.0))
    assert serial_gemm(np.ones((2, 0)), np.ones((0, 3)), c)
    assert np.array_equal(c, np.zeros((2, 3)))
    assert serial_gemm(np.ones((0, 4)), np.ones((4, 3)), np.ones((0, 3)))


@pytest.mark.parametrize("operands", [
    "neither axis of a packed", "overlapping rows of a", "neither axis of c packed", "shapes",
    "dtypes", "integers", "three dimensions"])
def test_what_it_declines_it_leaves_untouched(operands):
    a, b, c = np.ones((4, 3)), np.ones((3, 2)), np.full((4, 2), 5.0)
    if operands == "neither axis of a packed":
        a = np.ones((4, 6))[:, ::2]
    elif operands == "overlapping rows of a":  # a leading dimension under the row length
        a = np.lib.stride_tricks.as_strided(np.arange(6.0), (4, 3), (8, 8))
    elif operands == "neither axis of c packed":
        c = np.full((4, 4), 5.0)[:, ::2]
    elif operands == "shapes":
        b = np.ones((4, 2))
    elif operands == "dtypes":
        a = a.astype(np.float32)
    elif operands == "integers":
        a, b, c = a.astype(np.int64), b.astype(np.int64), c.astype(np.int64)
    else:
        a, b, c = a[None], b[None], c[None]
    assert not serial_gemm(a, b, c)
    assert (c == 5).all()


def test_the_kernels_product_copies_what_compiled_code_declines():
    # gemm_call falls back to the ctypes binding: an input without a packed axis is
    # copied first, a mismatch refused with its error.
    gemm = common.gemm_call()
    every_other = np.ones((4, 6))[:, ::2]
    product = np.empty((4, 2))
    gemm(every_other, np.arange(6.0).reshape(3, 2), product)
    np.testing.assert_array_equal(product, np.array(every_other) @ np.arange(6.0).reshape(3, 2))
    with pytest.raises(ValueError, match="gemm of"):
        gemm(np.ones((2, 3)), np.ones((4, 5)), np.ones((2, 5)))
