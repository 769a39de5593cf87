"""The numba kernels' memory, as the operating system counts it.

The buffers numba's kernels allocate (:mod:`convtranspose._kernels.numba_scratch`
estimates them) are seen by tracemalloc too, numba's runtime allocating with
``PyMem_RawMalloc`` (tests/kernels/test_scratch.py).  Here the operating system's count checks
them independently: fresh processes (tests/rss_support.py) measure a call's peak RSS
growth, every allocated byte touched, against the estimate and the scratch bound, and
its address space under ``RLIMIT_AS``.
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import rss_support
from convtranspose._choose.choice import fitting
from convtranspose._kernels import resolve
from convtranspose._kernels.scratch import scratch_bound, scratch_bytes
from convtranspose._plan.problem import Problem
from convtranspose._runtime import config as environment
from convtranspose._runtime.target import host

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
    runs = fitting(name, Problem(batch, axes, weights, plan.channels_last, wide), target)
    assert runs == algorithm  # the layer measures the algorithm it names
    estimate = scratch_bytes(runs, batch, axes, weights, wide)
    result = np.dtype(dtype).itemsize * int(np.prod(plan.output_shape))
    measured = rss_support.measure(function, data, filter, dtype, algorithm=algorithm,
                                   address_space=result + estimate + ADDRESS_SLACK,
                                   **attributes)
    return measured, estimate, scratch_bound(batch, axes, weights, wide)


#: Large layers of each numba kernel: direct's plane kernel in 3-D (bands of one plane:
#: its windows hold every input channel's whole plane, 8 MiB a thread), its row kernel
#: (the filter's blocked layouts), its per-position kernel (channels-last depthwise),
#: a long 1-D line in segments; direct-blocked's tile and filter; stream's product of a
#: 32 MiB filter read where it is stored.
LAYERS = [
    ("convolution_backprop_data", (1, 64, 8, 128, 128), (64, 4, 3, 3, 3), "float32",
     "direct", {"strides": 2}),
    ("convolution_backprop_data", (1, 256, 32, 32), (256, 256, 4, 4), "float32", "direct",
     {"strides": 2, "pads_begin": 1, "pads_end": 1}),
    ("conv_transpose", (1, 256, 128, 128), (256, 1, 3, 3), "float32", "direct",
     {"strides": 2, "groups": 256}),
    ("convolution_backprop_data", (1, 64, 400000), (64, 8, 7), "float32", "direct",
     {"strides": 3}),
    ("convolution_backprop_data", (1, 64, 8, 128, 128), (64, 4, 3, 3, 3), "float32",
     "direct-blocked", {"strides": 2}),
    ("convolution_backprop_data", (1, 256, 32, 32), (256, 256, 4, 4), "float32",
     "direct-blocked", {"strides": 2, "pads_begin": 1, "pads_end": 1}),
    ("convolution_backprop_data", (1, 1024, 4, 4), (1024, 512, 4, 4), "float32", "stream",
     {"strides": 2, "pads_begin": 1, "pads_end": 1}),
]


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS, ids=["planes-3d", "rows", "per-position",
                                               "segments", "blocked-3d", "blocked-2d",
                                               "stream"])
def test_peak_rss_is_within_the_estimate_and_the_bound(layer, monkeypatch):
    monkeypatch.delenv(environment.ALGORITHM_ENV, raising=False)
    measured, estimate, bound = _run(layer)
    assert measured["error"] is None, measured
    scratch = measured["growth"] - measured["result"]
    assert scratch <= estimate + COUNTER_SLACK, (scratch, estimate)
    assert estimate <= bound, (estimate, bound)


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


def test_the_estimates_use_the_kernels_sizes():
    """:mod:`convtranspose._kernels.numba_scratch` copies two sizes of the numba modules
    (so that estimating never imports numba): they must be the kernels' own."""
    pytest.importorskip("numba")
    from convtranspose._kernels import numba_scratch
    from convtranspose._kernels._numba import blocked, planes

    assert numba_scratch.BAND_ELEMENTS == planes.BAND_ELEMENTS
    assert numba_scratch.GROUP_TILE_ELEMENTS == blocked.GROUP_TILE_ELEMENTS
