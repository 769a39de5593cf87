"""Products on the library's threads (one BLAS thread each) against float64 ``@``."""

from __future__ import annotations

import resource
import time

import numpy as np
import pytest

from convtranspose._kernels import common
from convtranspose._runtime import blas

pytestmark = pytest.mark.skipif(not blas.available(np.float32),
                                reason="NumPy's bundled OpenBLAS is not loadable here")


def _strided(rng, rows, cols, kind):
    """A (rows, cols) float32 view: packed, transposed, or a window of a wider buffer."""
    if kind == 0:
        return rng.standard_normal((rows, cols)).astype(np.float32)
    if kind == 1:
        return rng.standard_normal((cols, rows)).astype(np.float32).T
    return rng.standard_normal((rows + 2, cols + 5)).astype(np.float32)[1:rows + 1, 3:cols + 3]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("m, k, n", [(37, 11, 5), (5, 11, 70), (1, 3, 40), (40, 3, 1),
                                     (2, 4, 2)])
def test_split_gemms_accumulate_every_unit(m, k, n, threads):
    rng = np.random.default_rng(m * 100 + n)
    units, expected = [], []
    for u in range(3):  # independent results; each accumulates two products
        c = _strided(rng, m, n, u % 3)
        calls, total = [], np.zeros((m, n))
        for slot in range(2):
            a, b = _strided(rng, m, k, (u + slot) % 3), _strided(rng, k, n, (u + 2 * slot) % 3)
            calls.append((a, b, c, slot > 0))
            total += a.astype(np.float64) @ b.astype(np.float64)
        units.append(calls)
        expected.append((c, total))
    common.split_gemms(units, threads)
    for c, total in expected:
        np.testing.assert_allclose(c, total, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a_shape, b_shape", [((3, 33, 17), (3, 17, 9)), ((33, 17), (2, 17, 40)),
                                              ((2, 1, 9, 17), (4, 17, 50))])
def test_large_products_split_over_threads(monkeypatch, a_shape, b_shape):
    # Every product here counts as large: it takes the split path.
    monkeypatch.setattr(common, "SERIAL_GEMM_FLOPS", 0.0)
    monkeypatch.setattr(common, "NATIVE_SPLIT_GEMM_FLOPS", 0.0)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    a_before, b_before = a.copy(), b.copy()
    product = common.threaded_matmul(a, b, 2)
    np.testing.assert_allclose(product, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
    assert product.dtype == np.float32
    assert np.array_equal(a, a_before) and np.array_equal(b, b_before)


def _cpu_seconds_while_sleeping(seconds: float) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(seconds)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_large_products_leave_no_blas_thread_spinning():
    """After OpenBLAS's own threaded product its workers spin (a core's worth of CPU
    time while the caller sleeps, still 50 ms later); after the library's, nothing does
    by then.  (numba's GNU OpenMP workers spin for a moment after a loop, by design:
    about 10 ms on an AMD EPYC Zen 2, all of it in the first 50 ms.)"""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)  # 134 MFLOP: a large product
    assert 2.0 * 512 * 512 * 256 >= common.SERIAL_GEMM_FLOPS
    with blas.at_most(2):
        if blas.threads() < 2:
            pytest.skip("OpenBLAS runs on one thread here")
        np.matmul(a, b)
        time.sleep(0.05)
        control = _cpu_seconds_while_sleeping(0.05)
    if control < 0.02:
        pytest.skip(f"OpenBLAS's threads did not spin 50 ms after a product here"
                    f" ({control:.3f} s)")
    time.sleep(0.3)  # they stop spinning
    product = common.threaded_matmul(a, b, 2)
    time.sleep(0.05)
    assert _cpu_seconds_while_sleeping(0.05) < 0.01
    np.testing.assert_allclose(product, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
