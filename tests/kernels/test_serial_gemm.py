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
from kernel_support import check_gemm_on_strided_views  # noqa: E402

pytestmark = pytest.mark.skipif(not blas.available(np.float32),
                                reason="NumPy's bundled OpenBLAS is not loadable here")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_equal_matmul_on_strided_views(dtype):
    def gemm(a, b, c, accumulate):
        assert serial_gemm(a, b, c, accumulate)  # no layout the kernels pass is declined

    check_gemm_on_strided_views(gemm, dtype, seed=1, cases=400)


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


def test_read_only_operands_are_taken():
    # The kernels pass frozen filter matrices: one compiled entry takes them too.
    a, b = np.arange(12.0).reshape(4, 3), np.arange(6.0).reshape(3, 2)
    a.flags.writeable = b.flags.writeable = False
    c = np.full((4, 2), np.nan)
    assert serial_gemm(a, b, c)
    np.testing.assert_array_equal(c, np.array(a) @ np.array(b))
