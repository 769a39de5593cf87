"""Every algorithm of the kernel, forced one by one, against the direct-loop oracle.

The oracle (tests/oracle.py) shares no code with the kernel.  Inputs are small
integers, so float32/float64 results are exact and can be compared with
``array_equal``; int64 wraps like the oracle.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from convtranspose import clear_caches, host_target, use_target
from convtranspose._execute import transposed as execute
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import ALGORITHMS, col2im, common, gemm, phase, schedules
from convtranspose._kernels import run as run_algorithm
from convtranspose._kernels._numba import blocked as numba_blocked
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import blas
from convtranspose._runtime import target as runtime_target
from convtranspose._runtime import threads as runtime_threads
from kernel_support import chosen
from kernel_support import random_case as _random_case
from kernel_support import run_forced as _run
from oracle import canonical_result as _reference

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


DTYPES = (np.float64, np.float32, np.int64)


def _dense_elements(data, weights, axes):
    groups, _, co = weights.shape[:3]
    return data[0].size * groups * co * int(np.prod([a.output_size for a in axes]))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_every_algorithm_matches_the_oracle(algorithm, channels_last, rank):
    rng = np.random.default_rng([rank, ALGORITHMS.index(algorithm), channels_last])
    for trial in range(25 if rank < 3 else 12):
        data, weights, axes = _random_case(rng, rank)
        if algorithm == "dense" and _dense_elements(data, weights, axes) > 1 << 21:
            continue  # dense is only ever chosen for tiny layers; keep the test fast
        dtype = DTYPES[trial % 3]
        expected = _reference(data.astype(dtype), weights.astype(dtype), axes)
        got = _run(data.astype(dtype), weights.astype(dtype), axes, dtype, channels_last, algorithm)
        np.testing.assert_array_equal(got, expected, err_msg=f"{algorithm} {axes}")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_bias_strided_weights_and_float32_inputs_to_float64(algorithm):
    rng = np.random.default_rng(7)
    data = rng.integers(-5, 6, (2, 4, 4, 3)).astype(np.float32)
    # A non-contiguous weights view, as the frontends pass for OIX/XIO filters.
    stored = rng.integers(-5, 6, (3, 2, 2, 2, 4)).astype(np.float32)  # (K1, K2, G, Ci, Co)
    weights = stored.transpose(2, 3, 4, 0, 1)
    axes = (AxisPlan(4, 3, 2, 1, -1, 12), AxisPlan(3, 2, 3, 2, 1, 7))
    bias = np.arange(8, dtype=np.float32)
    expected = _reference(data.astype(np.float64), weights.astype(np.float64), axes)
    expected += bias.reshape(-1, 1, 1)
    for channels_last in (False, True):
        got = _run(data, weights, axes, np.float64, channels_last, algorithm, bias=bias)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_int64_wraps_around_like_the_oracle(algorithm):
    big = np.int64(2) ** 62
    data = np.array([[[big, big - 1, 3]]], np.int64)
    weights = np.array([[[[3, -5]]]], np.int64)
    axes = (AxisPlan(3, 2, 1, 1, 0, 4),)
    with np.errstate(over="ignore"):
        expected = _reference(data, weights, axes)
    np.testing.assert_array_equal(_run(data, weights, axes, np.int64, False, algorithm), expected)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_empty_batch_channels_and_depthwise(algorithm):
    axes = (AxisPlan(3, 3, 2, 1, 1, 6), AxisPlan(2, 2, 2, 1, 0, 4))
    for batch, groups, ci, co in [(0, 2, 3, 2), (2, 2, 0, 3), (2, 3, 2, 0), (3, 5, 1, 1)]:
        data = np.ones((batch, groups * ci, 3, 2), np.float32)
        weights = np.ones((groups, ci, co, 3, 2), np.float32)
        expected = _reference(data, weights, axes)
        for channels_last in (False, True):
            got = _run(data, weights, axes, np.float32, channels_last, algorithm)
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_inputs_of_one_position_per_axis_on_one_and_two_threads(algorithm):
    """A 3-D layer whose input has one position along every axis (its products' columns
    then have unit axes, to which NumPy gives any stride), grouped, cropped and dilated:
    the oracle's result on one thread and on two, in both layouts.  Planning timed
    ``col2im-ncx`` on one thread here and its rows kernel refused the columns."""
    import convtranspose as ct

    axes = (AxisPlan(1, 1, 2, 2, 0, 2), AxisPlan(1, 1, 3, 2, 0, 2), AxisPlan(1, 3, 2, 2, 4, 1))
    rng = np.random.default_rng(31)
    data = rng.integers(-3, 4, (2, 4, 1, 1, 1)).astype(np.float32)
    weights = rng.integers(-3, 4, (2, 2, 1, 1, 1, 3)).astype(np.float32)
    expected = _reference(data, weights, axes)
    for threads, channels_last in itertools.product((1, 2), (False, True)):
        with ct.num_threads(threads):
            got = _run(data, weights, axes, np.float32, channels_last, algorithm)
        np.testing.assert_array_equal(got, expected, err_msg=f"{threads} threads")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_an_empty_spatial_axis_gives_zeros_and_the_bias(algorithm):
    # X = 0 along one axis (TensorFlow, Keras and JAX take it): no product reaches the
    # output, which holds the bias alone, whatever algorithm is forced.  F = K' - s may be
    # negative or smaller than Y there.
    cases = [(AxisPlan(0, 3, 2, 1, 1, 2), AxisPlan(2, 2, 2, 1, 0, 4)),
             (AxisPlan(3, 2, 1, 2, 0, 5), AxisPlan(0, 1, 3, 1, 0, 2)),
             (AxisPlan(0, 5, 1, 1, 4, 4),)]
    for axes in cases:
        data = np.ones((2, 3) + tuple(a.input_size for a in axes), np.float32)
        weights = np.ones((1, 3, 2) + tuple(a.kernel_size for a in axes), np.float32)
        bias = np.array([1.5, -2.0], np.float32)
        expected = np.broadcast_to(bias.reshape((1, 2) + (1,) * len(axes)),
                                   (2, 2) + tuple(a.output_size for a in axes))
        for channels_last in (False, True):
            got = _run(data, weights, axes, np.float32, channels_last, algorithm, bias=bias)
            np.testing.assert_array_equal(got, expected)
            layout = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
            half = transposed_convolution(layout.astype(np.float16), weights.astype(np.float16),
                                          axes, dtype=np.float32, channels_last=channels_last,
                                          bias=bias, algorithm=algorithm,
                                          result_dtype=np.float16)
            assert half.dtype == np.float16
            np.testing.assert_array_equal(np.moveaxis(half, -1, 1) if channels_last else half,
                                          expected.astype(np.float16))


def test_chunked_scratch_and_threaded_copies(use_target, monkeypatch):
    # A tiny scratch budget forces the batch and first-axis row chunking paths, and a
    # zero threshold sends every copy and add through the thread pool.
    monkeypatch.setattr(phase, "SCRATCH_BYTES", 64)
    monkeypatch.setattr(runtime_threads, "_PARALLEL_ELEMENTS", 0)
    monkeypatch.setattr(runtime_threads, "_COPY_THREADS", 3)
    use_target(threads=3)
    monkeypatch.setattr(common, "PARALLEL_FLOPS", 0)  # stacks of products split too
    monkeypatch.setattr(gemm, "PARALLEL_FLOPS", 0)  # stacks of products split too
    rng = np.random.default_rng(3)
    for rank in (1, 2, 3):
        for _ in range(6):
            data, weights, axes = _random_case(rng, rank)
            expected = _reference(data, weights, axes)
            for algorithm, channels_last in itertools.product(
                    ("phase-nxc", "phase-ncx", "col2im-nxc", "col2im-ncx", "window"),
                    (False, True)):
                got = _run(data, weights, axes, np.int64, channels_last, algorithm)
                np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(not blas.available(np.float32), reason="no bundled OpenBLAS")
@pytest.mark.parametrize("algorithm", ["gemm-nxc", "gemm-ncx"])
def test_gemm_scratch_stays_within_the_output_size(monkeypatch, algorithm):
    # Two classes per axis, each with two slots: one chunk of every block would hold
    # 2.5 outputs of windows, two classes' at once 5; chunks of one block hold 0.75
    # (plus some 25 KB of Python objects).
    import tracemalloc

    monkeypatch.setattr(gemm, "_GEMM_MIN_SCRATCH_BYTES", 0)
    rng = np.random.default_rng(11)
    axes = (AxisPlan(8, 4, 2, 1, 1, 16),) * 2
    data = rng.standard_normal((16, 64, 8, 8)).astype(np.float32)
    weights = rng.standard_normal((1, 64, 16, 4, 4)).astype(np.float32)
    expected = _reference(data, weights, axes)
    for channels_last in (False, True):
        layout = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
        run = lambda: transposed_convolution(layout, weights, axes, dtype=np.float32,  # noqa: E731
                                             channels_last=channels_last, algorithm=algorithm)
        # The first call makes the class matrices, kept with the filter (read-only);
        # the second loads the kernels compiled for them, with the NumPy modules that
        # loading imports: neither is the call's scratch.
        run()
        run()
        tracemalloc.start()
        try:
            result = run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        got = np.moveaxis(result, -1, 1) if channels_last else result
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        assert peak - result.nbytes <= result.nbytes, (channels_last, peak, result.nbytes)


@pytest.mark.skipif(not blas.available(np.float64), reason="no bundled OpenBLAS")
def test_gemm_chunks_and_products_split_between_threads(use_target, monkeypatch):
    # One block of the first axis per chunk, every copy through the pool, and every
    # product "small", so that groups and rows are split between three threads.
    monkeypatch.setattr(gemm, "_GEMM_SCRATCH_BYTES", 64)
    monkeypatch.setattr(runtime_threads, "_PARALLEL_ELEMENTS", 0)
    monkeypatch.setattr(runtime_threads, "_COPY_THREADS", 3)
    use_target(threads=3)
    monkeypatch.setattr(common, "PARALLEL_FLOPS", 0)
    monkeypatch.setattr(gemm, "PARALLEL_FLOPS", 0)
    monkeypatch.setattr(common, "SERIAL_GEMM_FLOPS", float("inf"))
    monkeypatch.setattr(common, "NATIVE_SPLIT_GEMM_FLOPS", float("inf"))
    threads_before = blas.threads()
    rng = np.random.default_rng(5)
    for rank in (1, 2, 3):
        for trial in range(8):
            data, weights, axes = _random_case(rng, rank)
            dtype = (np.float64, np.float32)[trial % 2]
            expected = _reference(data, weights, axes)
            for algorithm, channels_last in itertools.product(
                    ("gemm-nxc", "gemm-ncx"), (False, True)):
                got = _run(data.astype(dtype), weights.astype(dtype), axes, dtype,
                           channels_last, algorithm)
                np.testing.assert_array_equal(got, expected)
    assert blas.threads() == threads_before  # one BLAS thread only while products ran


def test_gemm_falls_back_to_numpy_phases_without_blas(monkeypatch):
    monkeypatch.setenv(blas.NO_BLAS_ENV, "1")
    monkeypatch.setattr(gemm, "_phase_gemm", None)  # calling it would fail
    rng = np.random.default_rng(13)
    for rank in (1, 2):
        data, weights, axes = _random_case(rng, rank)
        expected = _reference(data, weights, axes)
        for algorithm in ("gemm-nxc", "gemm-ncx"):
            got = _run(data.astype(np.float32), weights.astype(np.float32), axes, np.float32,
                       rank == 2, algorithm)
            np.testing.assert_array_equal(got, expected)
    assert not chosen(2, axes, weights.shape).startswith("gemm")


def test_numpy_fallback_of_direct_when_numba_is_disabled(monkeypatch):
    monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
    rng = np.random.default_rng(11)
    for rank in (1, 2, 3):
        data, weights, axes = _random_case(rng, rank)
        data, weights = data.astype(np.float32), weights.astype(np.float32)
        got = _run(data, weights, axes, np.float32, rank % 2 == 0, "direct")
        np.testing.assert_array_equal(got, _reference(data, weights, axes))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_direct_on_long_lines(rank):
    # Channels-first lines of 8 or more elements take the line-vectorised numba kernel.
    rng = np.random.default_rng(100 + rank)
    for trial in range(6):
        data, weights, axes = _random_case(rng, rank)
        last = axes[-1]
        size = int(rng.integers(8, 13))
        full = (size - 1) * last.stride + (last.kernel_size - 1) * last.dilation + 1
        axes = axes[:-1] + (AxisPlan(size, last.kernel_size, last.stride, last.dilation,
                                     int(rng.integers(-3, full)), int(rng.integers(1, full + 5))),)
        data = rng.integers(-9, 10, data.shape[:-1] + (size,))
        dtype = (np.float64, np.float32)[trial % 2]
        expected = _reference(data.astype(dtype), weights.astype(dtype), axes)
        for channels_last in (False, True):
            got = _run(data.astype(dtype), weights.astype(dtype), axes, dtype, channels_last,
                       "direct")
            np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
def test_numba_direct_matches_numpy_direct_on_random_floats(monkeypatch):
    rng = np.random.default_rng(5)
    axes = (AxisPlan(9, 4, 2, 1, 1, 18), AxisPlan(7, 3, 3, 2, -2, 25))
    data = rng.standard_normal((3, 16, 9, 7))
    weights = rng.standard_normal((16, 1, 1, 4, 3))
    expected = _reference(data, weights, axes)
    for channels_last in (False, True):
        numba_result = _run(data, weights, axes, np.float64, channels_last, "direct")
        np.testing.assert_allclose(numba_result, expected, rtol=1e-12, atol=1e-12)
        monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
        numpy_result = _run(data, weights, axes, np.float64, channels_last, "direct")
        monkeypatch.delenv(runtime_target.NO_NUMBA_ENV)
        np.testing.assert_allclose(numpy_result, numba_result, rtol=1e-12, atol=1e-12)


def _random_axes(rng, size):
    """Axes over input ``size`` with kernels 1-4, strides 1-3, dilations 1-2, offsets
    from -2 (leading zeros) and output sizes around the full one; and the kernel."""
    rank = len(size)
    kernel = rng.integers(1, 5, rank)
    stride = rng.integers(1, 4, rank)
    dilation = rng.integers(1, 3, rank)
    full = (np.array(size) - 1) * stride + (kernel - 1) * dilation + 1
    axes = tuple(AxisPlan(int(x), int(k), int(s), int(d), int(rng.integers(-2, f // 2 + 1)),
                          int(rng.integers(max(1, f - 4), f + 4)))
                 for x, k, s, d, f in zip(size, kernel, stride, dilation, full))
    return axes, kernel


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("numba_disabled", [False, True], ids=["numba", "no-numba"])
def test_direct_blocked_with_many_channels_per_group(monkeypatch, rank, numba_disabled):
    # Several vectors of output channels (padded), long lines (whole blocks, the
    # overlapping last block and single outputs at both ends), strides, dilations,
    # negative and large offsets; without numba the NumPy phases compute it.
    if numba_disabled:
        monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
    rng = np.random.default_rng(200 + rank)
    for trial in range(6 if rank < 3 else 4):
        groups = int(rng.integers(1, 3))
        ci, co = int(rng.integers(1, 40)), int(rng.integers(2, 70))
        batch = int(rng.integers(1, 3))
        size = [int(v) for v in rng.integers(2, 5, rank)]
        size[-1] = int(rng.integers(8, 30))
        axes, kernel = _random_axes(rng, size)
        data = rng.integers(-9, 10, (batch, groups * ci) + tuple(size))
        weights = rng.integers(-9, 10, (groups, ci, co) + tuple(kernel))
        dtype = (np.float32, np.float64)[trial % 2]
        expected = _reference(data.astype(dtype), weights.astype(dtype), axes)
        # Channels-first data is read in place, or through a channels-last copy when
        # its channel planes are large (here: always).
        for channels_last, far_planes in ((False, False), (False, True), (True, False)):
            if HAVE_NUMBA and not numba_disabled:

                monkeypatch.setattr(numba_blocked, "_FAR_CHANNELS_BYTES",
                                    0 if far_planes else 1 << 40)
            got = _run(data.astype(dtype), weights.astype(dtype), axes, dtype, channels_last,
                       "direct-blocked")
            np.testing.assert_array_equal(got, expected, err_msg=f"{axes} {weights.shape}")


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_direct_blocked_every_register_layout(use_target, monkeypatch, register_bytes):
    # Each machine takes one block layout; pretending other vector widths reaches
    # the others here (whole pixels in a block, chunks of 1, 2 or 3 vectors, and
    # vectors padded to a multiple of the chunk; AVX-512 takes wide pixels in chunks
    # of 2 or 4 vectors).

    use_target(vector_bytes=register_bytes)
    rng = np.random.default_rng(register_bytes)
    axes = (AxisPlan(3, 3, 2, 1, 1, 6), AxisPlan(23, 3, 2, 1, 1, 46))
    lanes = register_bytes // 4
    layouts = []
    # float32 output channels of 1, 3, 5 and 9 vectors (5 = a padded chunk of 2 on
    # AVX2 and AVX-512, 9 a chunk of 3 on AVX2).
    for co in (lanes - 1, 3 * lanes, 5 * lanes - 2, 9 * lanes - 3):
        layouts.append(schedules.blocked_shape(4, co, axes[-1], register_bytes))
        data = rng.integers(-9, 10, (2, 7, 3, 23)).astype(np.float32)
        weights = rng.integers(-9, 10, (1, 7, co, 3, 3)).astype(np.float32)
        expected = _reference(data, weights, axes)
        for channels_last in (False, True):
            got = _run(data, weights, axes, np.float32, channels_last, "direct-blocked")
            np.testing.assert_array_equal(got, expected, err_msg=f"co={co}")
    chunks = [chunk for _, _, chunk, _ in layouts]
    assert chunks == ([1, 3, 2, 2] if register_bytes == 64 else [1, 3, 2, 3]), layouts
    assert [vectors for _, vectors, _, _ in layouts] == [1, 3, 6, 10 if register_bytes == 64
                                                         else 9], layouts


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_direct_blocked_in_passes_over_output_channels(use_target, monkeypatch,
                                                      register_bytes):
    # A layer whose weights per line exceed the L2 share runs in passes over its output
    # channels (whole vectors each, at least two, the last one short): with a pretended
    # L2 of a few KiB every layer here of four vectors does.  Every pass writes only its
    # channels, bias and rounding included, in both layouts, with one and with several
    # threads.
    use_target(vector_bytes=register_bytes)
    lanes = register_bytes // 4
    monkeypatch.setattr(numba_blocked, "l2_cache_bytes", lambda: 4096)
    rng = np.random.default_rng(register_bytes + 1)
    axes = (AxisPlan(5, 4, 2, 1, 1, 10), AxisPlan(13, 4, 2, 1, 1, 26))
    for co in (3 * lanes + 5, 4 * lanes):
        passes = numba_blocked.channel_passes((1, 9, co), axes, 4, host_target().replace(
            vector_bytes=register_bytes))
        assert len(passes) > 1 and passes[0][0] == 0 and passes[-1][1] == co
        assert all(a[1] == b[0] and a[1] % lanes == 0 for a, b in zip(passes, passes[1:]))
        data = rng.integers(-9, 10, (2, 9, 5, 13)).astype(np.float32)
        weights = rng.integers(-9, 10, (1, 9, co, 4, 4)).astype(np.float32)
        bias = rng.integers(-9, 10, co).astype(np.float32)
        expected = _reference(data, weights, axes)
        for channels_last, threads in ((False, 1), (True, 1), (True, 3), (False, 3)):
            monkeypatch.setattr(numba_blocked, "direct_threads", lambda *args, n=threads: n)
            clear_caches()  # the set-up is kept with the weights: made again for these threads
            got = _run(data, weights, axes, np.float32, channels_last, "direct-blocked")
            np.testing.assert_array_equal(got, expected, err_msg=f"co={co}")
            operand = np.moveaxis(data, 1, -1).copy() if channels_last else data
            rounded = transposed_convolution(
                operand, weights, axes, dtype=np.dtype(np.float32),
                channels_last=channels_last, result_dtype=np.dtype(np.float16), bias=bias,
                algorithm="direct-blocked")
            rounded = np.moveaxis(rounded, -1, 1) if channels_last else rounded
            with_bias = expected + bias.reshape(-1, 1, 1)
            np.testing.assert_array_equal(rounded, with_bias.astype(np.float16))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
def test_direct_blocked_cuts_lines_among_threads(monkeypatch):
    # A layer of one line (1-D, one sample) is cut into runs of its outputs, one
    # piece of work each, so that every thread takes some; each run is written
    # whole, the lines' ends with their own taps, rounded or not, in both layouts.

    monkeypatch.setattr(numba_blocked, "direct_threads", lambda *args: 4)
    axis = AxisPlan(3000, 5, 3, 1, 2, 8999)
    assert schedules.blocked_segments(1, axis, 4) == 11  # 8999 // (256 * 3) outputs
    assert schedules.blocked_segments(4, axis, 4) == 1
    assert schedules.blocked_segments(1, AxisPlan(100, 5, 3, 1, 2, 299), 4) == 1
    rng = np.random.default_rng(7)
    data = rng.integers(-9, 10, (1, 6, 3000)).astype(np.float32)
    weights = rng.integers(-9, 10, (1, 6, 20, 5)).astype(np.float32)
    expected = _reference(data, weights, (axis,))
    for channels_last in (False, True):
        got = _run(data, weights, (axis,), np.float32, channels_last, "direct-blocked")
        np.testing.assert_array_equal(got, expected)
        rounded = transposed_convolution(
            np.moveaxis(data, 1, -1).copy() if channels_last else data, weights, (axis,),
            dtype=np.dtype(np.float32), channels_last=channels_last,
            result_dtype=np.dtype(np.float16), algorithm="direct-blocked")
        np.testing.assert_array_equal(np.moveaxis(rounded, -1, 1) if channels_last else rounded,
                                      expected.astype(np.float16))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("threads", [1, 3])
def test_direct_blocked_line_ends_go_in_groups(monkeypatch, threads):
    # The ends of consecutive lines of one phase go together through the block kernel
    # (along the first axis in 2-D layers, the second in 3-D ones), written straight
    # into the output (channels-last float32 sums of whole vectors of channels) or
    # from a tile of the group's lines (channels first, rounded to float16): groups
    # longer and shorter than a block, cut where three threads' pieces meet or where
    # the tile is full, lines whose first-axis taps differ (no group across them), and
    # a last axis with several ends per phase (dilation 2, a crop that leaves zeros).
    monkeypatch.setattr(numba_blocked, "direct_threads", lambda *args: threads)
    co = 2 * host_target().lanes(np.float32)
    if threads > 1:  # a tile of 2-4 lines: groups cut where it is full
        monkeypatch.setattr(numba_blocked, "GROUP_TILE_ELEMENTS", 60 * co)
    rng = np.random.default_rng(threads)
    layers = [
        (AxisPlan(8, 4, 2, 1, 1, 16), AxisPlan(8, 4, 2, 1, 1, 16)),  # DCGAN's geometry
        (AxisPlan(19, 3, 2, 1, 1, 37), AxisPlan(6, 5, 3, 2, 0, 30)),
        (AxisPlan(3, 3, 1, 1, 1, 3), AxisPlan(9, 4, 2, 1, 2, 17)),  # groups shorter than a block
        (AxisPlan(4, 2, 2, 1, 0, 8), AxisPlan(5, 3, 2, 1, 1, 10), AxisPlan(7, 4, 2, 1, 1, 14)),
    ]
    for axes in layers:
        batch, ci = 2, 5
        data = rng.integers(-9, 10, (batch, ci) + tuple(a.input_size for a in axes))
        weights = rng.integers(-9, 10, (1, ci, co) + tuple(a.kernel_size for a in axes))
        data, weights = data.astype(np.float32), weights.astype(np.float32)
        expected = _reference(data, weights, axes)
        for channels_last in (True, False):
            got = _run(data, weights, axes, np.float32, channels_last, "direct-blocked")
            np.testing.assert_array_equal(got, expected, err_msg=f"{axes} {channels_last}")
        rounded = transposed_convolution(
            np.ascontiguousarray(np.moveaxis(data, 1, -1)), weights, axes,
            dtype=np.dtype(np.float32), channels_last=True, result_dtype=np.dtype(np.float16),
            algorithm="direct-blocked")
        np.testing.assert_array_equal(np.moveaxis(rounded, -1, 1), expected.astype(np.float16))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
def test_direct_blocked_propagates_infinities_only_where_taps_reach(monkeypatch):
    # Outputs at the line ends skip taps outside the input instead of multiplying
    # them by zero: an infinite weight must not turn those outputs into NaN.
    monkeypatch.delenv(runtime_target.NO_NUMBA_ENV, raising=False)  # the numba kernel itself
    axes = (AxisPlan(12, 4, 2, 1, 1, 24),)
    data = np.ones((1, 3, 12))
    weights = np.ones((1, 3, 20, 4))
    weights[0, 1, 5, 0] = np.inf
    expected = _reference(data, weights, axes)
    for channels_last in (False, True):
        got = _run(data, weights, axes, np.float64, channels_last, "direct-blocked")
        np.testing.assert_array_equal(got, expected)


def test_importing_convtranspose_does_not_import_numba():
    import subprocess
    import sys

    code = "import sys, convtranspose; print('numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("numba_disabled", [False, True], ids=["numba", "numpy"])
def test_direct_channels_last_with_many_products_per_group(monkeypatch, numba_disabled):
    # More than 4 products per group: numba's plane kernel with strided channels (not
    # the per-position kernel), or the NumPy fallback.
    if numba_disabled:
        monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
    rng = np.random.default_rng(23)
    axes = (AxisPlan(6, 4, 2, 1, 1, 12), AxisPlan(5, 3, 2, 1, 1, 10))
    for groups, ci, co in [(1, 5, 9), (2, 3, 4), (1, 21, 21)]:
        data = rng.integers(-9, 10, (2, groups * ci, 6, 5)).astype(np.float32)
        weights = rng.integers(-9, 10, (groups, ci, co, 4, 3)).astype(np.float32)
        expected = _reference(data, weights, axes)
        for channels_last in (False, True):
            got = _run(data, weights, axes, np.float32, channels_last, "direct")
            np.testing.assert_array_equal(got, expected)


def test_window_covers_partial_phase_ranges():
    # Live phases not starting at 0 or ending before the stride (dilation a multiple
    # of the stride), crops and padding beyond the full size: zeros where no tap lands.
    rng = np.random.default_rng(29)
    axes = (AxisPlan(5, 3, 4, 2, 1, 23), AxisPlan(4, 2, 3, 3, -2, 16))
    data = rng.integers(-9, 10, (2, 6, 5, 4))
    weights = rng.integers(-9, 10, (2, 3, 2, 3, 2))
    expected = _reference(data, weights, axes)
    for channels_last in (False, True):
        got = _run(data, weights, axes, np.int64, channels_last, "window")
        np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("algorithm", ["col2im-nxc", "col2im-ncx"])
@pytest.mark.parametrize("scratch", [24 << 20, 1 << 10], ids=["whole", "chunked"])
def test_col2im_numba_scatter_gives_the_numpy_adds_bits(monkeypatch, scratch, algorithm):
    # col2im adds its columns with numba for a few output channels, from either
    # internal layout's columns: every output must get the same bits as from the NumPy
    # adds (same taps in the same order) and equal the oracle; also when the scratch
    # budget cuts batches and first axes.
    monkeypatch.setattr(phase, "SCRATCH_BYTES", scratch)
    rng = np.random.default_rng(77)
    for trial in range(6):
        rank = 1 + trial % 3
        groups, ci, co = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 16))
        size = [int(v) for v in rng.integers(2, 7, rank)]
        axes, kernel = _random_axes(rng, size)
        data = rng.standard_normal((3, groups * ci) + tuple(size)).astype(np.float32)
        weights = rng.standard_normal((groups, ci, co) + tuple(kernel)).astype(np.float32)
        expected = _reference(data.astype(np.float64), weights.astype(np.float64), axes)
        for channels_last in (False, True):
            monkeypatch.setattr(schedules, "SCATTER_MAX_CHANNELS", 16)
            compiled = _run(data, weights, axes, np.float32, channels_last, algorithm)
            monkeypatch.setattr(schedules, "SCATTER_MAX_CHANNELS", 0)
            numpy_adds = _run(data, weights, axes, np.float32, channels_last, algorithm)
            np.testing.assert_array_equal(compiled, numpy_adds, err_msg=f"{axes} co={co}")
            np.testing.assert_allclose(compiled, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("products", ["packed", "blas"])
@pytest.mark.parametrize("scratch", [24 << 20, 1 << 10], ids=["whole", "chunked"])
def test_col2im_rows_kernels_give_the_numpy_stores_bits(monkeypatch, scratch, products):
    # Channels first, col2im stores its columns by output rows in one compiled pass:
    # adds in tap order into the zeroed output, or the rows of taps that reach disjoint
    # outputs written whole.  Every output must get the bits of the NumPy copy or add
    # per tap from the same columns, and equal the oracle: ranks 1-3, few and many
    # channels, overlapping and disjoint taps, whole and cut chunks; the columns from
    # the packed products (a product per sample) or from BLAS (one product over a
    # chunk's samples, whose columns lie samples apart).
    monkeypatch.setattr(phase, "SCRATCH_BYTES", scratch)
    # One thread multiplies through BLAS (the packed products need two or more).
    threads = 1 if products == "blas" else max(2, host_target().threads)
    rng = np.random.default_rng(5)

    for trial in range(9):
        rank = 1 + trial % 3
        groups, ci, co = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 40))
        size = [int(v) for v in rng.integers(2, 7, rank)]
        axes, kernel = _random_axes(rng, size)
        if trial % 4 == 3:  # taps within a stride (disjoint outputs), output padding
            axes = []
            for x in size:
                k, stride = int(rng.integers(1, 3)), int(rng.integers(2, 4))
                offset = int(rng.integers(0, k))
                axes.append(AxisPlan(x, k, stride, 1, offset, (x - 1) * stride + k - offset
                                     + int(rng.integers(0, stride))))
            axes, kernel = tuple(axes), tuple(a.kernel_size for a in axes)
        data = rng.standard_normal((3, groups * ci) + tuple(size)).astype(np.float32)
        weights = rng.standard_normal((groups, ci, co) + tuple(kernel)).astype(np.float32)
        expected = _reference(data.astype(np.float64), weights.astype(np.float64), axes)
        with use_target(host_target().replace(threads=threads)):
            compiled = _run(data, weights, axes, np.float32, False, "col2im-ncx")
            monkeypatch.setattr(col2im, "ROWS_KERNELS", False)
            numpy_stores = _run(data, weights, axes, np.float32, False, "col2im-ncx")
            monkeypatch.setattr(col2im, "ROWS_KERNELS", True)
        np.testing.assert_array_equal(compiled, numpy_stores, err_msg=f"{axes} co={co}")
        np.testing.assert_allclose(compiled, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scratch", [24 << 20, 1 << 9], ids=["whole", "chunked"])
@pytest.mark.parametrize("internal_last", [False, True], ids=["col2im-ncx", "col2im-nxc"])
def test_col2im_copies_disjoint_taps_and_zeroes_what_they_miss(monkeypatch, internal_last,
                                                              scratch):
    # Taps spanning less than a stride reach each output at most once, so col2im copies
    # their columns instead of adding them to zeros (channels first with numba: writes
    # every output row whole): every output they miss (crops beyond the full size,
    # zeros in front, K*d < s, output padding) must still be zeroed, whatever the result
    # buffer held before; also when the scratch budget cuts batches and first axes.
    monkeypatch.setattr(schedules, "SCATTER_MAX_CHANNELS", 0)
    monkeypatch.setattr(phase, "SCRATCH_BYTES", scratch)
    rng = np.random.default_rng(41)
    cases = [
        (AxisPlan(4, 2, 2, 1, 0, 8), AxisPlan(3, 2, 2, 1, 0, 6)),  # U-Net's k2 s2: all reached
        (AxisPlan(4, 2, 2, 1, 1, 9), AxisPlan(3, 1, 3, 1, -2, 9)),  # crop past the end, zeros first
        (AxisPlan(5, 2, 3, 1, 0, 15),),  # k2 s3: every third output unreached
        (AxisPlan(3, 2, 2, 1, -1, 8), AxisPlan(4, 1, 2, 1, 0, 7)),  # zeros first and last
        (AxisPlan(3, 2, 3, 2, 0, 9), AxisPlan(2, 1, 1, 1, 0, 2), AxisPlan(2, 2, 2, 1, 0, 4)),
        # k4 s4 with output padding 3 on every axis: planes, rows and ends unreached
        (AxisPlan(3, 4, 4, 1, 0, 15), AxisPlan(2, 4, 4, 1, 0, 11), AxisPlan(2, 4, 4, 1, 0, 11)),
    ]
    for axes in cases:
        size = tuple(a.input_size for a in axes)
        kernel = tuple(a.kernel_size for a in axes)
        data = rng.integers(-9, 10, (2, 4) + size).astype(np.float64)
        weights = rng.integers(-9, 10, (2, 2, 3) + kernel).astype(np.float64)
        expected = _reference(data, weights, axes)
        # A filter in another order is reordered tap-major (the products' rows too).
        for channels_last, filter in ((False, weights), (True, weights),
                                      (False, np.asfortranarray(weights))):
            source = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
            out = np.full(execute.result_shape(2, weights.shape, axes, channels_last), np.nan)
            run_algorithm(f"col2im-{'nxc' if internal_last else 'ncx'}", source, filter, axes,
                          np.dtype(np.float64), channels_last, out, host_target())
            got = np.moveaxis(out, -1, 1) if channels_last else out
            np.testing.assert_array_equal(got, expected, err_msg=f"{axes} {channels_last}")
