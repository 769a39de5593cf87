"""The numba kernels' memory, as the operating system counts it.

tracemalloc sees the buffers numba's kernels allocate (its runtime uses
``PyMem_RawMalloc``; tests/test_scratch.py measures them so).  Here the operating
system's count checks them independently: fresh processes (tests/rss_support.py)
measure a call's peak RSS growth, every allocated byte touched, against the scratch
estimate and bound, and its address space under ``RLIMIT_AS``.
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import rss_support
from convtranspose._runtime import environment
from convtranspose._runtime.target import host
from convtranspose.dispatch import fitting
from convtranspose.kernels import resolve
from convtranspose.kernels.scratch import scratch_bound, scratch_bytes

pytestmark = pytest.mark.skipif(not rss_support.available(),
                                reason="peak RSS of a fresh process: Linux with glibc")

#: The RSS counters are kept per CPU and folded in batches of pages: a peak may be read
#: up to a few hundred KiB low or high.
COUNTER_SLACK = 1 << 20

#: Beyond the result and the scratch estimate, the address space a measured call may
#: map: Python's own small allocations and glibc's bookkeeping.
ADDRESS_SLACK = 256 << 20


def _run(layer):
    """``(measured, estimate, bound)`` of a layer: ``(function, data shape, filter shape
    (C_IN, C_OUT/G, K...), dtype, forced algorithm, attributes)``."""
    function, data, filter, dtype, algorithm, attributes = layer
    if function == "conv_transpose":  # measured channels last, as rss_support passes it
        plan = ct.shapes.conv_transpose((data[0],) + data[2:] + data[1:2],
                                        filter[2:] + filter[:2], **attributes)
    else:
        plan = getattr(ct.shapes, function)(data, filter, **attributes)
    wide = np.dtype(np.float32)
    batch, axes, weights = plan.data_shape[0], plan.axes, plan.canonical_filter_shape
    target = host()
    name, _ = resolve(algorithm, wide, len(axes), plan.channels_last, target)
    runs = fitting(name, batch, axes, weights, plan.channels_last, wide, target)
    assert runs == algorithm  # the layer measures the algorithm it names
    estimate = scratch_bytes(runs, batch, axes, weights, wide)
    result = np.dtype(dtype).itemsize * int(np.prod(plan.output_shape))
    measured = rss_support.measure(function, data, filter, dtype, algorithm=algorithm,
                                   address_space=result + estimate + ADDRESS_SLACK,
                                   **attributes)
    return measured, estimate, scratch_bound(batch, axes, weights, wide)


@pytest.mark.parametrize("layer", [
    ("convolution_backprop_data", (1, 8, 64), (8, 8, 601), "float32", "direct-blocked", {}),
    ("conv_transpose", (1, 16, 64), (16, 1, 601), "float32", "direct", {"groups": 16}),
], ids=["blocked", "per-position"])
def test_a_long_filter_maps_no_more_than_its_estimate(layer, monkeypatch):
    """The tap lists of a 1-D filter of 601 taps are 601 entries long: sized by the
    widest axis's count cubed they reserved 8.5 GB (direct-blocked) and 3.4 GB (the
    per-position kernel) of address space, a MemoryError under this ``RLIMIT_AS``."""
    monkeypatch.delenv(environment.ALGORITHM_ENV, raising=False)
    measured, estimate, bound = _run(layer)
    assert measured["error"] is None, measured
    assert measured["growth"] - measured["result"] <= estimate + COUNTER_SLACK
    assert estimate <= bound

