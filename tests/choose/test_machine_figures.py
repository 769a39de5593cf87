"""The machine figures the estimate reads: measured on the machine at hand, kept in the
wisdom file, and followed by the estimates of the numba kernels."""

import numpy as np
import pytest

from convtranspose import AxisPlan, host_target
from convtranspose._choose import choice as dispatch
from convtranspose._choose import figures, wisdom
from convtranspose._kernels._numba import peak
from convtranspose._plan.problem import Problem
from convtranspose._runtime import target
from convtranspose._runtime.machine import vector_bytes

# A grouped layer for which the cost model offers both numba kernels and the BLAS
# algorithms: 8 groups of 32 -> 32 channels, 28x28, kernel 4, stride 2, padding 1.
AXES = (AxisPlan(28, 4, 2, 1, 1, 56),) * 2
WEIGHTS = (8, 32, 32, 4, 4)
NUMBA_KERNELS = ("direct", "direct-blocked")


def _with_figures(**measured) -> None:
    """Make ``measured`` this machine's figures, as if read from its wisdom file."""
    wisdom.store.record("figures", "machine", dict(measured))
    figures.forget_figures()
    dispatch.forget_estimates()


def _raw(vector_bytes: int = 64):
    return dispatch.raw_costs(Problem(8, AXES, WEIGHTS, True, np.dtype(np.float32)),
                              host_target().replace(numba=True, vector_bytes=vector_bytes,
                                                    threads=2))


def test_the_fma_peak_is_measured_once_and_kept(wisdom_file, monkeypatch):
    if not target.numba_usable():
        pytest.skip("the FMA peak is measured by a numba kernel; this run has no numba")
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0)
    measured = figures.fma_gflops()
    # Any CPU that runs numba does more than a GFLOP/s and less than a PFLOP/s per thread.
    assert 1.0 < measured < 1e6
    kept = wisdom.store.entries("figures")["machine"]
    assert kept == {"gemm_gflops": 100.0, "copy_gbps": 10.0, "fma_gflops": measured}
    # A later process reads it from the wisdom file instead of measuring again.
    monkeypatch.setattr(peak, "measure_fma_gflops", lambda: pytest.fail("measured again"))
    wisdom.store.flush()  # as this process's exit would
    wisdom.store.figures, wisdom.store._loaded_from = {}, None  # a new process: read the file
    figures.forget_figures()
    assert figures.fma_gflops() == measured


def test_no_fma_peak_is_measured_without_numba(wisdom_file, monkeypatch):
    monkeypatch.setenv(target.NO_NUMBA_ENV, "1")
    monkeypatch.setattr(peak, "measure_fma_gflops", lambda: pytest.fail("measured"))
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0)
    assert figures.fma_gflops() is None


def test_numba_estimates_follow_the_measured_fma_peak(wisdom_file):
    # No rate per CPU kind: twice the measured peak halves the numba kernels'
    # multiply-add part and leaves every other part alone.
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0, fma_gflops=80.0)
    slow = _raw()
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0, fma_gflops=160.0)
    fast = _raw()
    assert set(NUMBA_KERNELS) <= set(slow) and set(slow) == set(fast)
    for name, cost in slow.items():
        if name in NUMBA_KERNELS:
            assert cost.kernel > 0, name
            assert fast[name].kernel == pytest.approx(cost.kernel / 2, rel=1e-9), name
            assert fast[name].scaled == pytest.approx(cost.scaled, rel=1e-9), name
        else:
            assert fast[name] == cost, name


def test_the_peak_is_scaled_to_the_targets_vector_width(wisdom_file):
    # Measured at this process's vector width; half as wide vectors do half the
    # multiply-adds per instruction.
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0, fma_gflops=80.0)
    wide = figures.thread_macs_per_ns(host_target().replace(vector_bytes=64))
    narrow = figures.thread_macs_per_ns(host_target().replace(vector_bytes=32))
    assert wide == pytest.approx(2 * narrow)
    assert figures.thread_macs_per_ns(
        host_target().replace(vector_bytes=vector_bytes())) == pytest.approx(40.0)


def test_a_copy_is_split_from_the_smallest_size_where_every_larger_split_won():
    from convtranspose._kernels._numba.transpose import split_threshold

    sizes = [1, 2, 4, 8, 16]
    alone = [1.0, 2.0, 4.0, 8.0, 16.0]
    assert split_threshold(sizes, alone, [2.0, 1.5, 3.0, 5.0, 9.0]) == 2
    # A win below a loss does not count: the split must win at every larger size.
    assert split_threshold(sizes, alone, [0.5, 2.5, 3.0, 5.0, 9.0]) == 4
    assert split_threshold(sizes, alone, [0.5, 1.0, 2.0, 4.0, 16.0]) is None
    assert split_threshold(sizes, alone, [0.5, 1.0, 2.0, 4.0, 8.0]) == 1


def test_the_copy_split_is_measured_once_and_kept(wisdom_file, monkeypatch):
    if not target.numba_usable():
        pytest.skip("the copies are compiled numba kernels; this run has no numba")
    from convtranspose._kernels._numba import transpose
    from convtranspose._runtime import threads

    _with_figures(gemm_gflops=100.0, copy_gbps=10.0)
    with target.num_threads(2):
        cold, warm = figures.copy_split_bytes(False), figures.copy_split_bytes(True)
    if cold is None and warm is None and "copy_split_bytes" not in wisdom.store.entries(
            "figures")["machine"]:
        pytest.skip("numba's threads did not run the copy here (threading layer)")
    for found in (cold, warm):
        assert found is None or found in transpose.SPLIT_SIZES
    kept = wisdom.store.entries("figures")["machine"]
    assert kept["copy_split_bytes"] == (cold or 0)
    assert kept["warm_copy_split_bytes"] == (warm or 0)
    assert threads.parallel_copy_bytes(False) == (cold or float("inf"))
    # A later process reads both from the wisdom file instead of measuring again.
    monkeypatch.setattr(transpose, "measure_copy_split",
                        lambda *_: pytest.fail("measured again"))
    wisdom.store.flush()
    wisdom.store.figures, wisdom.store._loaded_from = {}, None
    figures.forget_figures()
    with target.num_threads(2):
        assert (figures.copy_split_bytes(False), figures.copy_split_bytes(True)) == (
            cold, warm)


def test_copies_split_at_the_warm_size_only_right_after_a_native_loop(wisdom_file,
                                                                      monkeypatch):
    from convtranspose._kernels._numba import launch, transpose
    from convtranspose._runtime import threads

    mib = 1 << 20
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0, copy_split_bytes=8 * mib,
                  warm_copy_split_bytes=mib)
    monkeypatch.setattr(threads, "_last_loop", [float("-inf")])
    assert [transpose.copy_threads(size, 2) for size in (mib, 2 * mib, 8 * mib)] == [1, 1, 2]
    launch.count_native_loop()  # a loop ends now: the threads still spin
    assert [transpose.copy_threads(size, 2) for size in (mib // 2, mib, 8 * mib)] == [1, 2, 2]
    assert transpose.copy_threads(8 * mib, 1) == 1
    # Splitting paid at no size measured (kept as 0): every copy on one thread.
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0, copy_split_bytes=0,
                  warm_copy_split_bytes=0)
    launch.count_native_loop()
    assert transpose.copy_threads(64 * mib, 2) == 1


@pytest.mark.parametrize("kept", [float("inf"), float("nan"), -1, "1024", None])
def test_a_damaged_copy_split_figure_is_measured_again(wisdom_file, monkeypatch, kept):
    from convtranspose._kernels._numba import transpose

    measured = {"sizes": [1, 2], "alone": [1.0, 2.0], "cold": [2.0, 1.0],
                "alone_warm": [1.0, 2.0], "warm": [0.5, 1.0]}
    monkeypatch.setattr(transpose, "measure_copy_split", lambda *_: measured)
    monkeypatch.setattr(figures, "numba_usable", lambda: True)
    _with_figures(gemm_gflops=100.0, copy_gbps=10.0, copy_split_bytes=kept)
    with target.num_threads(2):
        assert figures.copy_split_bytes(False) == 2
        assert figures.copy_split_bytes(True) == 1
