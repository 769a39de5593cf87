"""The machine figures the estimate reads: measured on the machine at hand, kept in the
wisdom file, and followed by the estimates of the numba kernels."""

import numpy as np
import pytest

from convtranspose import AxisPlan, host_target
from convtranspose._choose import choice as dispatch
from convtranspose._choose import estimates, figures, wisdom
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
    wide = estimates.thread_macs_per_ns(host_target().replace(vector_bytes=64))
    narrow = estimates.thread_macs_per_ns(host_target().replace(vector_bytes=32))
    assert wide == pytest.approx(2 * narrow)
    assert estimates.thread_macs_per_ns(
        host_target().replace(vector_bytes=vector_bytes())) == pytest.approx(40.0)
