"""The direct BLAS binding against ``np.matmul`` (an independent implementation)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading

import numpy as np
import pytest

from convtranspose._runtime import blas
from kernel_support import check_gemm_on_strided_views

pytestmark = pytest.mark.skipif(not blas.available(np.float32),
                                reason="NumPy's bundled OpenBLAS is not loadable here")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_matches_matmul_on_strided_views(dtype):
    check_gemm_on_strided_views(blas.gemm, dtype, seed=0, cases=300)


def test_empty_products_and_zero_depth():
    c = np.full((2, 3), 7.0)
    blas.gemm(np.ones((2, 0)), np.ones((0, 3)), c, accumulate=True)
    assert np.array_equal(c, np.full((2, 3), 7.0))
    blas.gemm(np.ones((2, 0)), np.ones((0, 3)), c)
    assert np.array_equal(c, np.zeros((2, 3)))
    blas.gemm(np.ones((0, 4)), np.ones((4, 3)), np.ones((0, 3)))


def test_rejects_mismatches_and_non_blas_views():
    with pytest.raises(ValueError, match="gemm of"):
        blas.gemm(np.ones((2, 3)), np.ones((4, 5)), np.ones((2, 5)))
    with pytest.raises(ValueError, match="gemm of"):
        blas.gemm(np.ones((2, 3), np.float32), np.ones((3, 5)), np.ones((2, 5)))
    every_other = np.ones((4, 6))[:, ::2]  # neither axis packed
    with pytest.raises(ValueError, match="not a BLAS operand"):  # c is written in place
        blas.gemm(np.ones((4, 3)), np.ones((3, 3)), np.ones((4, 6))[:, ::2])
    # An input without a packed axis is copied (packed) first.
    product = np.empty((4, 2))
    blas.gemm(every_other, np.arange(6.0).reshape(3, 2), product)
    np.testing.assert_array_equal(product, np.array(every_other) @ np.arange(6.0).reshape(3, 2))


def test_switch_off_by_environment(monkeypatch):
    monkeypatch.setenv(blas.NO_BLAS_ENV, "1")
    assert not blas.available(np.float32)
    assert not blas.available(np.int64)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 core names")
def test_corename_reports_the_core_the_environment_forces():
    # OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded: hence a fresh process.
    script = "from convtranspose._runtime import blas; print(blas.corename())"
    environment = dict(os.environ, OPENBLAS_CORETYPE="Nehalem")
    result = subprocess.run([sys.executable, "-c", script], env=environment,
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "Nehalem"


@pytest.mark.skipif(blas.thread_setter() is None, reason="no openblas_set_num_threads_local")
def test_one_thread_restores_the_count_after_concurrent_users():
    # openblas_set_num_threads_local is process-wide in pthreads builds: concurrent
    # set-and-restore pairs must not leave OpenBLAS on one thread.
    before = blas.threads()
    inside = []
    barrier = threading.Barrier(4)

    def user():
        with blas.one_thread:
            barrier.wait()
            inside.append(blas.threads())
            with blas.one_thread:  # nested
                barrier.wait()

    workers = [threading.Thread(target=user) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert inside == [1] * 4
    assert blas.threads() == before


@pytest.mark.skipif(blas.thread_setter() is None, reason="no openblas_set_num_threads_local")
def test_first_limit_touches_one_buffer_per_thread_and_restores_the_count():
    # A fresh process: the library's first BLAS limit writes one of OpenBLAS's buffers
    # per library thread (touch_buffers), on helper threads that end, with OpenBLAS
    # held at one thread meanwhile and its own count back after.
    script = "\n".join([
        "import threading",
        "from convtranspose._runtime import blas",
        "before, untouched = blas.threads(), blas.buffers_touched()",
        "with blas.one_thread:",
        "    inside = blas.threads()",
        "with blas.one_thread:",
        "    pass",
        "print(untouched, blas.buffers_touched(), before, inside, blas.threads(),",
        "      threading.active_count())",
    ])
    environment = dict(os.environ, OMP_NUM_THREADS="3", OPENBLAS_NUM_THREADS="2")
    environment.pop("NUMBA_NUM_THREADS", None)
    result = subprocess.run([sys.executable, "-c", script], env=environment,
                            capture_output=True, text=True, check=True)
    untouched, touched, before, inside, after, threads = map(int, result.stdout.split())
    assert (untouched, touched) == (0, 3)
    assert (before, inside, after) == (2, 1, 2)
    assert threads == 1


def test_touch_buffers_runs_its_product_on_each_thread_at_one_blas_thread():
    counts = []

    def setter(count):
        counts.append(count)
        return 5

    seen = []
    original = np.matmul

    def recording_matmul(left, right, *args, **kwargs):
        seen.append((threading.get_ident(), left.shape[0], left.shape[1], right.shape[1],
                     counts[-1]))
        return original(left, right, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(np, "matmul", recording_matmul)
        assert blas.touch_buffers(3, setter) == 3
    assert counts == [1, 5]  # one thread while the products run, then the count back
    assert len({ident for ident, *_ in seen}) == 3
    assert {tuple(shape) for _, *shape in seen} == {(*blas.TOUCH_PRODUCT, 1)}
