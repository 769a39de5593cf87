"""The Target: machine facts passed explicitly, the environment switches, and
``use_target``; every algorithm gives the oracle's sums on every target it can run on."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import ALGORITHMS
from convtranspose._plan.rules import AxisPlan
from oracle import canonical_result as _reference


def test_targets_are_validated():
    with pytest.raises(ValueError, match="vector_bytes=48"):
        ct.Target(vector_bytes=48)
    with pytest.raises(ValueError, match="threads=0"):
        ct.Target(threads=0)
    with pytest.raises(TypeError, match="must be a Target"):
        with ct.use_target({"threads": 1}):
            pass
    assert ct.Target(vector_bytes=64).lanes(np.float64) == 8


def test_host_follows_the_environment_switches(monkeypatch):
    monkeypatch.setenv("CONVTRANSPOSE_NO_NUMBA", "1")
    monkeypatch.setenv("CONVTRANSPOSE_NO_BLAS", "1")
    target = ct.host_target()
    assert not target.numba and not target.blas and not target.blas_for(np.float32)
    monkeypatch.delenv("CONVTRANSPOSE_NO_BLAS")
    assert not ct.host_target().numba


def test_use_target_nests_restores_and_stays_in_its_thread():
    outer = ct.host_target()
    one = outer.replace(threads=1)
    seen = []
    with ct.use_target(one):
        assert ct.host_target() is one
        with ct.use_target(one.replace(vector_bytes=16)):
            assert ct.host_target().vector_bytes == 16
            thread = threading.Thread(target=lambda: seen.append(ct.host_target()))
            thread.start()
            thread.join()
        assert ct.host_target() is one
    assert ct.host_target() == outer
    assert seen == [outer]  # another thread computes for the machine


@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
@pytest.mark.parametrize("threads", [1, 3])
def test_every_algorithm_on_every_vector_width(vector_bytes, threads):
    # The numba kernels' block shapes follow the target's vector width (narrower
    # vectors run on any wider CPU), the NumPy algorithms' splits its threads: all
    # give the oracle's sums, in both layouts.
    rng = np.random.default_rng(vector_bytes + threads)
    target = ct.host_target().replace(vector_bytes=vector_bytes, threads=threads,
                                      bfloat16_pairs=False)
    layers = [((AxisPlan(7, 4, 2, 1, 1, 14), AxisPlan(9, 3, 2, 2, 0, 21)), (2, 3, 20)),
              ((AxisPlan(40, 5, 3, 1, 2, 118),), (1, 6, 3)),
              ((AxisPlan(3, 2, 2, 1, 0, 6),) * 3, (1, 4, 9))]
    for axes, (groups, ci, co) in layers:
        data = rng.integers(-4, 5, (2, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.integers(-4, 5, (groups, ci, co) + tuple(a.kernel_size for a in axes))
        expected = _reference(data.astype(np.float64), weights.astype(np.float64), axes)
        for algorithm in ALGORITHMS:
            for channels_last in (False, True):
                source = np.moveaxis(data, 1, -1).copy() if channels_last else data
                got = transposed_convolution(source.astype(np.float32),
                                             weights.astype(np.float32), axes,
                                             dtype=np.dtype(np.float32),
                                             channels_last=channels_last, algorithm=algorithm,
                                             target=target)
                got = np.moveaxis(got, -1, 1) if channels_last else got
                np.testing.assert_array_equal(got, expected,
                                              err_msg=f"{algorithm} {axes} {channels_last}")
