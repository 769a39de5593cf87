"""The layout copies (channels first <-> channels last in register blocks) against
NumPy's copy of the moved axis: every band shape (whole blocks of ``lanes`` rows, a
last band of fewer, fewer rows than one band), columns past the whole blocks, both
vector widths, one and two threads."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

pytest.importorskip("numba")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("vector_bytes", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layout_copies_equal_numpys(dtype, vector_bytes, threads):
    from convtranspose._kernels._numba.transpose import channels_first_copy, channels_last_copy

    target = ct.host_target().replace(vector_bytes=vector_bytes, threads=threads)
    lanes = target.lanes(dtype)
    rng = np.random.default_rng(lanes + threads)
    for channels in (1, 3, lanes - 1, lanes, lanes + 3, 2 * lanes + 1):
        for spatial in ((5,), (7, 9), (3, 4, 33), (2 * lanes + 5,)):
            data = rng.standard_normal((2, channels) + spatial).astype(dtype)
            last = channels_last_copy(data, dtype, target)
            np.testing.assert_array_equal(last, np.moveaxis(data, 1, -1),
                                          err_msg=f"{channels} {spatial}")
            first = channels_first_copy(last, dtype, target)
            np.testing.assert_array_equal(first, data, err_msg=f"{channels} {spatial}")
