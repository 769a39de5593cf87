"""Outputs zeroed on several threads before the algorithms add into them."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from convtranspose._execute.transposed import transposed_convolution
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime.threads import SPLIT_SIZES
from oracle import canonical_result

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                reason="numba is not installed")


@pytest.fixture
def split_fills(monkeypatch):
    """Every fill of at least the smallest split size runs on all the caller's threads,
    whatever this machine's measured copy split."""
    from convtranspose._kernels._numba import fill

    monkeypatch.setattr(fill, "copy_threads", lambda nbytes, threads: threads)
    return fill


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("extra", [0, 1, 4097])
def test_a_split_fill_zeroes_exactly_its_array(split_fills, dtype, extra):
    itemsize = np.dtype(dtype).itemsize
    count = SPLIT_SIZES[0] * 3 // itemsize + extra  # not a whole number of chunks
    buffer = np.empty(count + 2, dtype)
    buffer.view(np.uint8)[:] = 0x5A  # no zero byte anywhere (a NaN for the floats)
    out = buffer[1:-1]  # its neighbours stay as they were
    split_fills.zero_fill(out, 2)
    assert not out.view(np.uint8).any()
    assert (buffer[[0, -1]].view(np.uint8) == 0x5A).all()


def test_a_strided_array_is_zeroed_in_place(split_fills):
    buffer = np.ones((SPLIT_SIZES[0], 2), np.float32)
    split_fills.zero_fill(buffer[:, 0], 2)
    assert not buffer[:, 0].any() and (buffer[:, 1] == 1).all()


@pytest.mark.parametrize("algorithm", ["phase-nxc", "phase-ncx", "col2im-nxc", "col2im-ncx",
                                       "gemm-nxc", "gemm-ncx", "window", "stream", "direct-numpy"])
def test_algorithms_that_zero_a_large_output_on_two_threads(split_fills, use_target,
                                                            algorithm):
    # Stride 3 with one tap leaves two of every three output columns unreached, so the
    # output is zeroed first; 72x72 outputs of 8 channels (float64) are past the
    # smallest split size, and the fill's pieces start on unreached outputs.
    use_target(threads=2)
    rng = np.random.default_rng(5)
    axes = (AxisPlan(24, 1, 3, 1, 0, 72),) * 2
    data = rng.integers(-9, 10, (1, 4, 24, 24)).astype(np.float64)
    weights = rng.integers(-9, 10, (1, 4, 8, 1, 1)).astype(np.float64)
    assert 8 * 72 * 72 * 8 >= 2 * SPLIT_SIZES[0]
    expected = canonical_result(data, weights, axes)
    for channels_last in (False, True):
        layout = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
        shape = (1, 72, 72, 8) if channels_last else (1, 8, 72, 72)
        out = np.empty(shape)
        out.view(np.uint8)[:] = 0x5A  # NaNs where the fill would miss a byte
        transposed_convolution(layout, weights, axes, dtype=np.dtype(np.float64),
                               channels_last=channels_last, algorithm=algorithm, out=out)
        got = np.moveaxis(out, -1, 1) if channels_last else out
        np.testing.assert_array_equal(got, expected, err_msg=f"{algorithm} {channels_last}")
