"""Running one algorithm of the library the way the kernel tests do."""

from __future__ import annotations

import numpy as np

from convtranspose._execute import transposed_convolution


def run_forced(data_ncx, weights, axes, dtype, channels_last, algorithm, bias=None):
    """``algorithm`` on ``data_ncx`` in the requested layout, returned as NCX; checks that
    the operands are untouched and the result is a fresh C-contiguous array of ``dtype``."""
    data = np.ascontiguousarray(np.moveaxis(data_ncx, 1, -1)) if channels_last else data_ncx
    before = data.copy(), weights.copy()
    result = transposed_convolution(data, weights, axes, dtype=np.dtype(dtype),
                                    channels_last=channels_last, bias=bias, algorithm=algorithm)
    assert np.array_equal(data, before[0]) and np.array_equal(weights, before[1])  # untouched
    assert result.dtype == np.dtype(dtype) and result.flags.c_contiguous
    assert not np.shares_memory(result, data) and not np.shares_memory(result, weights)
    return np.moveaxis(result, -1, 1) if channels_last else result
