"""The numba ``direct`` kernels (depthwise and few-channel groups) against the oracle.

``direct_phase`` is called directly with a preallocated output, on random shapes
that reach each of its paths: the channels-first plane kernel (zero-bordered
windows, strides 1, 2 and 3+ in the last axis), the channels-last kernel
(Ci = Co = 1 and the general few-channel loop), few-channel channels-last data
(computed by the plane kernel with strided reads and writes), the threaded split, and
inputs that need a copy.  The oracle (tests/oracle.py) shares no code with the kernel.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import numpy as np
import pytest

from convtranspose import host_target
from convtranspose._execute import transposed as execute
from convtranspose._kernels import casts, schedules
from convtranspose._kernels._numba import direct as numba_direct
from convtranspose._kernels._numba import line_segments as numba_line_segments
from convtranspose._kernels._numba import modes as numba_modes
from convtranspose._kernels._numba import planes as numba_planes
from convtranspose._kernels._numba import rows as numba_rows
from convtranspose._kernels._numba import scatter as numba_scatter
from convtranspose._kernels._numba import transpose as numba_transpose
from convtranspose._plan import geometry
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import threads as runtime_threads
from oracle import canonical_result as _reference

pytest.importorskip("numba")


def _direct(data_ncx, weights, axes, dtype, channels_last, out_order="C"):
    """``direct_phase`` in the requested layout, returned as NCX."""
    groups, _, co = weights.shape[:3]
    batch = data_ncx.shape[0]
    spatial = tuple(a.output_size for a in axes)
    if channels_last:
        data = np.ascontiguousarray(np.moveaxis(data_ncx, 1, -1))
        out = np.empty((batch,) + spatial + (groups * co,), dtype, order=out_order)
    else:
        data = data_ncx
        out = np.empty((batch, groups * co) + spatial, dtype, order=out_order)
    out.fill(np.nan)  # every element must be written
    before = data.copy(), weights.copy()
    numba_direct.direct_phase(data, weights, tuple(axes), np.dtype(dtype), channels_last, out,
                              None, None, host_target())
    assert np.array_equal(data, before[0]) and np.array_equal(weights, before[1])
    return np.moveaxis(out, -1, 1) if channels_last else out


def _random_axes(rng, rank, max_size=7):
    axes = []
    for _ in range(rank):
        size = int(rng.integers(1, max_size + 1))
        kernel = int(rng.integers(1, 6))
        stride = int(rng.integers(1, 4))
        dilation = int(rng.integers(1, 4))
        full = (size - 1) * stride + (kernel - 1) * dilation + 1
        offset = int(rng.integers(-3, full + 1))  # negative: zeros in front; large: crop
        output = int(rng.integers(1, full + 5))  # may run past the full result
        axes.append(AxisPlan(size, kernel, stride, dilation, offset, output))
    return tuple(axes)


def _check(data, weights, axes, dtype, channels_last, **kwargs):
    expected = _reference(data, weights, axes)
    got = _direct(data.astype(dtype), weights.astype(dtype), axes, dtype, channels_last,
                  **kwargs)
    assert not np.isnan(got).any(), "output element left unwritten"
    tolerance = 1e-4 if dtype == np.float32 else 1e-11
    scale = max(1.0, float(np.abs(expected).max(initial=0)))
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * scale,
                               err_msg=f"{axes} {weights.shape} channels_last={channels_last}")


def _check_random_channels(rng, axes, channels_last):
    """:func:`_check` of a one-group float64 layer with 1-4 input and 1-6 output channels."""
    ci, co = int(rng.integers(1, 5)), int(rng.integers(1, 7))
    data = rng.standard_normal((2, ci) + tuple(a.input_size for a in axes))
    weights = rng.standard_normal((1, ci, co) + tuple(a.kernel_size for a in axes))
    _check(data, weights, axes, np.float64, channels_last)


#: Channels-last data is computed along the channels (the row kernel) or, when there
#: are few channels, by the plane kernel with strided access: tests force each route.
ROUTES = {"ncx": (False, None), "nxc-rows": (True, 0), "nxc-planes": (True, 1 << 30)}


def _route(monkeypatch, name):
    channels_last, min_width = ROUTES[name]
    if min_width is not None:
        monkeypatch.setattr(schedules, "DIRECT_CHANNELS_LAST_MIN_WIDTH", min_width)
    return channels_last


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_random_depthwise_and_few_channel_groups(monkeypatch, rank, route):
    channels_last = _route(monkeypatch, route)
    rng = np.random.default_rng([rank, list(ROUTES).index(route), 7])
    # (Ci, Co): the channels-last kernel is compiled per pair up to Ci * Co = 4 (one
    # compilation per pair and dtype: a short, even-length cycle keeps them few);
    # (2, 3) takes its run-time-count variant.
    channel_choices = [(1, 1), (1, 1), (2, 2), (1, 3), (4, 1), (2, 3)]
    for trial in range(30 if rank < 3 else 15):
        ci, co = channel_choices[trial % len(channel_choices)]
        groups = int(rng.integers(1, 10))
        batch = int(rng.integers(1, 3))
        axes = _random_axes(rng, rank, max_size=9 if rank < 3 else 5)
        data = rng.standard_normal((batch, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((groups, ci, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, (np.float64, np.float32)[trial % 2], channels_last)


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
def test_long_lines_every_last_axis_stride(channels_last):
    # The plane kernel stores the last axis's phases by stride: 1, 2 (odd and even
    # lengths) and a general stride; windows starting before and after input 0.
    rng = np.random.default_rng(21)
    for stride in (1, 2, 3, 4):
        for output_extra, offset in ((0, 0), (1, 2), (-5, 7), (3, -2)):
            size = 20
            full = (size - 1) * stride + 4 * 2 + 1
            axes = (AxisPlan(5, 3, 2, 1, 1, 9),
                    AxisPlan(size, 5, stride, 2, offset, max(1, full - offset + output_extra)))
            data = rng.standard_normal((2, 6, 5, size))
            weights = rng.standard_normal((6, 1, 1, 3, 5))
            _check(data, weights, axes, np.float32, channels_last)


def test_single_channel_channels_last_uses_the_same_memory_layout():
    # One channel: channels-first and channels-last are the same memory layout.
    rng = np.random.default_rng(3)
    for rank in (1, 2, 3):
        axes = _random_axes(rng, rank, max_size=6)
        data = rng.standard_normal((3, 1) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((1, 1, 1) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, np.float64, True)


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_depthwise_channels_last_in_vectors_and_a_remainder(use_target, monkeypatch, register_bytes):
    # The depthwise channels-last kernel sums the groups in vectors (passes of four
    # taps, then single ones) and the groups past the last whole vector one at a time:
    # group counts below, at and past one and two vectors of either width, positions
    # with 0 to 27 taps (borders, dilations, strides, offsets outside the input).

    use_target(vector_bytes=register_bytes)
    rng = np.random.default_rng(register_bytes + 40)
    for trial in range(12):
        dtype = (np.float32, np.float64)[trial % 2]
        lanes = register_bytes // np.dtype(dtype).itemsize
        groups = (lanes - 1, lanes, 2 * lanes + 3, 3 * lanes - 1)[trial % 4]
        rank = 1 + trial % 3
        axes = _random_axes(rng, rank, max_size=(12, 7, 5)[rank - 1])
        data = rng.standard_normal((2, groups) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((groups, 1, 1) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, dtype, True)


def _force_row_kernel(use_target, monkeypatch, threaded=False) -> list:
    """Give the row kernel rows of any length and stride (on three threads, in bands of
    a few rows, if ``threaded``); the list returned gets each ``_rows_runner`` call's
    data and result modes."""
    monkeypatch.setattr(schedules, "ROWS_MAX_WASTE", 100.0)
    monkeypatch.setattr(schedules, "ROWS_CHANNEL_STRIDES", (1, 2))
    if threaded:
        monkeypatch.setattr(schedules, "ROWS_WINDOW_BYTES", 3000)
        monkeypatch.setattr(numba_rows, "ROWS_WINDOW_BYTES", 3000)
        use_target(threads=3)
        monkeypatch.setattr(schedules, "DIRECT_PARALLEL_MACS", 0)
        monkeypatch.setattr(numba_scatter, "DIRECT_PARALLEL_MACS", 0)
        monkeypatch.setattr(runtime_threads, "pool", None)
    calls = []
    runner = numba_rows.rows_runner
    spy = lambda *args: calls.append(args[7:9]) or runner(*args)  # noqa: E731
    monkeypatch.setattr(numba_rows, "rows_runner", spy)
    monkeypatch.setattr(numba_direct, "rows_runner", spy)
    return calls


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("threaded", [False, True], ids=["one-thread", "threads"])
def test_channels_first_row_kernel(use_target, monkeypatch, register_bytes, threaded):
    # The row kernel compiles the last axis and the channel counts in: stride 1 or 2
    # (even and odd lengths), rows of one vector to several passes (the last pass
    # overlapping the one before, its last vector partial or whole), dilations,
    # windows starting before and after input 0, first axes of any rank with rows
    # reading no input, blocks of output channels with and without padding, split
    # into ranges between the threads, and bands of output rows.

    use_target(vector_bytes=register_bytes)
    calls = _force_row_kernel(use_target, monkeypatch, threaded)
    rng = np.random.default_rng(register_bytes + threaded)
    channels = [(1, 1), (2, 3), (1, 5), (3, 4), (1, 1), (2, 7), (1, 1), (4, 1)]
    for trial, (ci, co) in enumerate(channels):
        dtype = (np.float32, np.float64)[trial % 2]
        lanes = register_bytes // np.dtype(dtype).itemsize
        stride, dilation = 1 + trial % 2, 1 + trial // 2 % 2
        kernel = int(rng.integers(1, 6))
        size = int(rng.integers(lanes // 2, 7 * lanes))
        full = (size - 1) * stride + (kernel - 1) * dilation + 1
        offset = int(rng.integers(-2, kernel * dilation))
        output = max(lanes, full - offset + int(rng.integers(-3, 4)))
        axes = _random_axes(rng, trial % 3, max_size=5) + (
            AxisPlan(size, kernel, stride, dilation, offset, output),)
        groups = int(rng.integers(1, 4))
        data = rng.standard_normal((2, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((groups, ci, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, dtype, False)
        assert len(calls) == trial + 1, axes


@pytest.mark.parametrize("co", [4, 5, 8])
def test_row_kernel_blocks_of_two_channels_and_two_vectors_on_avx2(use_target, monkeypatch, co):
    # With AVX2's 16 registers, rows whose two phases both have taps take blocks of 2
    # output channels x 2 vectors per phase: an odd channel count pads its last block,
    # and rows of 2, 3 and 5 vectors per phase end in a whole or a one-vector pass,
    # the last vector partial or not.

    use_target(vector_bytes=32)
    calls = _force_row_kernel(use_target, monkeypatch, threaded=co == 5)
    rng = np.random.default_rng(co)
    for trial, size in enumerate((16, 21, 37)):
        last = AxisPlan(size, 4, 2, 1, 1, 2 * size)
        assert schedules.rows_block(co, last, 8, False, 32) == (2, 2)
        axes = (AxisPlan(3, 3, 2, 1, 1, 5), last)
        data = rng.standard_normal((2, 2 * 3) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((2, 3, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, np.float32, False)
        assert len(calls) == trial + 1
    # Not with AVX-512's registers, one vector per phase, or a phase without taps.
    assert schedules.rows_block(co, AxisPlan(8, 4, 2, 1, 1, 16), 8, False, 32) != (2, 2)
    assert schedules.rows_block(co, AxisPlan(16, 3, 2, 2, 2, 32), 8, False, 32) != (2, 2)
    assert schedules.rows_block(co, AxisPlan(32, 4, 2, 1, 1, 64), 16, False, 64) != (2, 2)


def test_row_kernel_merges_the_phases_of_even_kernels(use_target, monkeypatch):
    # Stride 2 and an even kernel: the phases' taps pair up and AVX-512 rows sum both
    # phases in the same vectors from a window holding every input twice.  Rows whose
    # last vector is whole, half a vector, shorter (shifted back with the outputs stored
    # before it) or longer than half; several passes; blocks of channels with and
    # without padding; float64 in 8 lanes; bands of rows on three threads; float16 data
    # and results with a bias, bit for bit (exact sums, as in the test above).
    from convtranspose._runtime.machine import host_has_f16c

    use_target(vector_bytes=64)
    merged = []
    compile_rows = numba_rows.rows_kernel
    monkeypatch.setattr(numba_rows, "rows_kernel",
                        lambda *args: merged.append(args[-1]) or compile_rows(*args))
    _force_row_kernel(use_target, monkeypatch, threaded=True)
    rng = np.random.default_rng(17)
    cases = [(np.float32, 28, 4, 1, 2, 5), (np.float32, 22, 2, 0, 3, 3),
             (np.float32, 18, 6, 2, 2, 4), (np.float32, 60, 4, 1, 1, 2),
             (np.float32, 24, 2, 0, 1, 4), (np.float64, 14, 4, 1, 2, 3),
             (np.float64, 11, 2, 0, 1, 2)]
    for dtype, size, kernel, offset, ci, co in cases:
        lanes = 64 // np.dtype(dtype).itemsize
        last = AxisPlan(size, kernel, 2, 1, offset, 2 * size + kernel - 2 - 2 * offset)
        assert schedules.rows_merged(last, lanes, co, schedules.KEEP, 64), last
        axes = (AxisPlan(3, 3, 2, 1, 1, 5), last)
        data = rng.standard_normal((2, 2 * ci) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((2, ci, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, dtype, False)
        assert merged[-1:] == [True], (last, merged)
    # Remainders of the last vector: 56 = 48 + 8 (half), 36 = 32 + 4 (half, shifted),
    # 44 = 32 + 12 (whole, shifted), 48 (none), 120 (two passes, the last ending in a half).
    assert [case[1] * 2 + case[2] - 2 - 2 * case[3] for case in cases[:5]] == [56, 44, 36, 120,
                                                                               48]
    if host_has_f16c():
        last = AxisPlan(28, 4, 2, 1, 1, 56)
        axes = (AxisPlan(4, 4, 2, 1, 1, 8), last)
        data = rng.integers(-40, 41, (2, 6) + tuple(a.input_size for a in axes))
        weights = rng.integers(-40, 41, (2, 3, 5) + tuple(a.kernel_size for a in axes))
        bias = (rng.integers(-99, 100, 10) / 8).astype(np.float16)
        sums = _reference(data.astype(np.float64), weights, axes) + bias.reshape(-1, 1, 1)
        got = execute.transposed_convolution(
            data.astype(np.float16), weights.astype(np.float16), axes,
            dtype=np.dtype(np.float32), bias=bias, algorithm="direct",
            result_dtype=np.float16)
        assert merged[-1:] == [True]
        np.testing.assert_array_equal(got.view(np.uint16),
                                      sums.astype(np.float32).astype(np.float16).view(np.uint16))
    # Not where the phases' own vectors take as few lanes, for one output channel,
    # for odd kernels, or with AVX2's registers.
    keep = schedules.KEEP
    assert not schedules.rows_merged(AxisPlan(16, 4, 2, 1, 1, 32), 16, 4, keep, 64)
    assert not schedules.rows_merged(AxisPlan(28, 4, 2, 1, 1, 56), 16, 1, keep, 64)
    assert not schedules.rows_merged(AxisPlan(28, 3, 2, 1, 1, 55), 16, 4, keep, 64)
    assert not schedules.rows_merged(AxisPlan(28, 4, 2, 1, 1, 56), 8, 4, keep, 32)


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_row_kernel_only_where_it_pays(register_bytes):
    # Rows of whole vectors (or depthwise ones) within the window budget; not rows
    # shorter than a vector, wasteful or stride-1 rows with channels, channels-last data.
    target = host_target().replace(vector_bytes=register_bytes, f16c=True, bfloat16_pairs=True)
    lanes = target.lanes(np.float32)
    long_row = AxisPlan(2 * lanes, 4, 2, 1, 1, 4 * lanes)  # two vectors per phase
    wasteful = AxisPlan(lanes + 1, 4, 2, 1, 1, 2 * lanes + 2)  # two vectors for one more
    unit = AxisPlan(1, 1, 1, 1, 0, 1)
    plane = (AxisPlan(8, 4, 2, 1, 1, 16), unit)
    f32 = np.dtype(np.float32)
    assert schedules.rows_apply((4, 8, 8, 4, 1, 4), plane + (long_row,), False, f32, f32, f32, target)
    assert schedules.rows_apply((4, 1, 1, 4, 1, 4), plane + (wasteful,), False, f32, f32,
                                    f32, target)
    assert not schedules.rows_apply((4, 8, 8, 4, 1, 4), plane + (wasteful,), False, f32,
                                        f32, f32, target)
    assert not schedules.rows_apply((4, 8, 8, 4, 1, 4), plane + (long_row,), True, f32, f32,
                                        f32, target)
    # float16 data or results of float32 sums where the CPU converts them in vectors,
    # bfloat16 results, bfloat16 data where the CPU multiplies their pairs; none of
    # them with float64 sums.
    f16, f64 = np.dtype(np.float16), np.dtype(np.float64)
    bf16 = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    for f16c, bf16_pairs in itertools.product((False, True), repeat=2):
        machine = target.replace(f16c=f16c, bfloat16_pairs=bf16_pairs)
        pairs = bf16_pairs and lanes == 16
        for data_dtype, out_dtype, taken in ((f32, f16, f16c), (f16, f32, f16c), (f16, f16, f16c),
                                             (f32, bf16, True), (bf16, bf16, pairs),
                                             (bf16, f32, pairs)):
            assert schedules.rows_apply((4, 8, 8, 4, 1, 4), plane + (long_row,), False,
                                        data_dtype, f32, out_dtype, machine) == taken
            assert not schedules.rows_apply((4, 8, 8, 4, 1, 4), plane + (long_row,), False,
                                            data_dtype, f64, out_dtype, machine)
    stride_1 = AxisPlan(4 * lanes, 3, 1, 1, 1, 4 * lanes)  # depthwise only
    assert schedules.rows_apply((4, 1, 1, 4, 1, 3), plane + (stride_1,), False, f32, f32,
                                    f32, target)
    assert not schedules.rows_apply((4, 8, 8, 4, 1, 3), plane + (stride_1,), False, f32,
                                        f32, f32, target)
    short_row = AxisPlan(lanes // 2, 4, 2, 1, 1, lanes - 1)  # less than a vector of outputs
    assert not schedules.rows_apply((4, 1, 1, 4, 1, 4), plane + (short_row,), False, f32,
                                        f32, f32, target)
    # A window per band of output rows: one output row's inputs must fit.
    tall = (AxisPlan(512, 4, 2, 1, 1, 1024), unit)
    assert schedules.rows_apply((4, 32, 8, 4, 1, 4), tall + (long_row,), False, f32, f32,
                                    f32, target)
    assert not schedules.rows_apply((4, 4096, 8, 4, 1, 4), plane + (long_row,), False, f32,
                                        f32, f32, target)


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("threaded", [False, True], ids=["one-thread", "threads"])
def test_channels_last_copy_equals_numpys_transposed_copy(use_target, monkeypatch, register_bytes,
                                                          threaded):
    # Whole register blocks, and rows and columns past the last whole block; other
    # dtypes and non-contiguous data take NumPy's copy.  The input is left unchanged.

    use_target(vector_bytes=register_bytes)
    if threaded:
        monkeypatch.setattr(numba_transpose, "copy_threads", lambda nbytes, threads: threads)
        use_target(threads=3)
        monkeypatch.setattr(runtime_threads, "pool", None)
    rng = np.random.default_rng(register_bytes + threaded)
    shapes = [(1, 64, 8, 8, 8), (2, 37, 5, 101), (3, 16, 16), (1, 5, 3), (4, 33, 17, 2),
              (2, 100, 70), (1, 8, 1)]
    for shape in shapes:
        for dtype in (np.float32, np.float64):
            data = rng.standard_normal(shape).astype(dtype)
            kept = data.copy()
            got = numba_transpose.channels_last_copy(data, dtype, host_target())
            assert got.dtype == dtype and got.flags.c_contiguous
            np.testing.assert_array_equal(got, np.moveaxis(kept, 1, -1))
            np.testing.assert_array_equal(data, kept)
        half = data.astype(np.float16)
        np.testing.assert_array_equal(numba_transpose.channels_last_copy(half, np.float32, host_target()),
                                      np.moveaxis(half, 1, -1).astype(np.float32))
        reversed_channels = data[:, ::-1]
        np.testing.assert_array_equal(
            numba_transpose.channels_last_copy(reversed_channels, np.float64, host_target()),
            np.moveaxis(reversed_channels, 1, -1))
    if threaded:
        runtime_threads.pool.shutdown()


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
def test_threaded_split_into_pieces(use_target, monkeypatch, channels_last):
    # Split between threads (however small); more threads than pieces of some sizes,
    # and fewer planes than threads (their bands are cut finer).
    use_target(threads=3)
    monkeypatch.setattr(schedules, "DIRECT_PARALLEL_MACS", 0)
    monkeypatch.setattr(numba_scatter, "DIRECT_PARALLEL_MACS", 0)
    monkeypatch.setattr(runtime_threads, "pool", None)
    rng = np.random.default_rng(8)
    for groups, ci, co, batch in ((64, 1, 1, 2), (5, 2, 2, 1), (2, 1, 1, 1)):
        axes = (AxisPlan(24, 4, 2, 1, 1, 48), AxisPlan(24, 3, 1, 2, 0, 28))
        data = rng.standard_normal((batch, groups * ci, 24, 24))
        weights = rng.standard_normal((groups, ci, co, 4, 3))
        _check(data, weights, axes, np.float32, channels_last)


def _threaded_pieces(use_target, monkeypatch, fake_cpu=None):
    """Run ``_parallel`` twice on a fresh 3-thread pool, steering asked for.

    Returns each helper thread's native id and CPU affinity, as seen by the helper
    in the second call (the first one registers the helpers, the second steers them).
    """
    use_target(threads=3)
    monkeypatch.setattr(runtime_threads, "_pinning", True)
    monkeypatch.setattr(runtime_threads, "pool", None)
    monkeypatch.setattr(runtime_threads, "helper_ids", set())
    monkeypatch.setattr(runtime_threads, "steering", True)
    if fake_cpu is not None:
        monkeypatch.setattr(runtime_threads, "_sched_getcpu", lambda: lambda: fake_cpu)
    seen = {}

    def piece(start, stop):
        time.sleep(0.002)  # long enough for every helper to take pieces
        seen[threading.get_native_id()] = (
            os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None)

    for _ in range(2):
        seen.clear()
        runtime_threads.parallel_for(piece, 24, 3)
    runtime_threads.pool.shutdown()
    seen.pop(threading.get_native_id(), None)
    return seen


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two allowed CPUs")
def test_helpers_are_kept_off_the_calling_threads_cpu(use_target, monkeypatch):
    allowed = os.sched_getaffinity(0)
    caller_cpu = min(allowed)
    helpers = _threaded_pieces(use_target, monkeypatch, fake_cpu=caller_cpu)
    assert helpers and set(helpers) <= runtime_threads.helper_ids
    assert all(affinity == allowed - {caller_cpu} for affinity in helpers.values())


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two allowed CPUs")
def test_a_vanished_helper_is_forgotten_and_steering_goes_on(monkeypatch):
    gone = threading.Thread(target=lambda: None)
    gone.start()
    gone.join()
    # join() returns when the Python thread is done, a moment before the OS thread
    # exits; until then it still takes an affinity (a fresh clone's run failed so).
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/self/task/{gone.native_id}") and time.monotonic() < deadline:
        time.sleep(0.001)
    monkeypatch.setattr(runtime_threads, "helper_ids", {gone.native_id})
    monkeypatch.setattr(runtime_threads, "steering", True)
    monkeypatch.setattr(runtime_threads, "_sched_getcpu", lambda: lambda: 0)
    runtime_threads.steer_helpers_off_caller()
    assert runtime_threads.helper_ids == set() and runtime_threads.steering is True


def test_refused_affinity_turns_steering_off(use_target, monkeypatch):
    def refuse(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setaffinity", refuse, raising=False)
    _threaded_pieces(use_target, monkeypatch, fake_cpu=0)
    assert runtime_threads.steering is False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_forgets_the_parents_helpers(use_target, monkeypatch):
    assert _threaded_pieces(use_target, monkeypatch)
    pid = os.fork()
    if pid == 0:  # the child: its ids could name other processes' threads
        os._exit(0 if not runtime_threads.helper_ids and runtime_threads.pool is None else 1)
    assert os.waitpid(pid, 0)[1] == 0


@pytest.mark.parametrize("route", ROUTES)
def test_inputs_needing_a_copy_and_a_non_contiguous_output(monkeypatch, route):
    channels_last = _route(monkeypatch, route)
    # float32 data accumulated in float64, a non-contiguous weights view, and an
    # output in Fortran order (computed in a scratch array, then copied).
    rng = np.random.default_rng(12)
    axes = (AxisPlan(6, 4, 2, 1, 1, 12), AxisPlan(5, 3, 3, 1, 0, 15))
    data = rng.standard_normal((2, 8, 6, 5)).astype(np.float32)
    stored = rng.standard_normal((4, 3, 4, 2, 1))  # (K1, K2, G, Ci, Co)
    weights = stored.transpose(2, 3, 4, 0, 1)
    for order in ("C", "F"):
        expected = _reference(data, weights, axes)
        got = _direct(data, weights, axes, np.float64, channels_last, out_order=order)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
def test_planes_cut_into_bands(monkeypatch, route):
    # Tiny bands: one or two output blocks of the first axis per window, so that
    # windows at the input's edges are re-zeroed after interior bands filled them.
    channels_last = _route(monkeypatch, route)
    rng = np.random.default_rng(31)
    for trial in range(12):
        monkeypatch.setattr(numba_planes, "BAND_ELEMENTS", int(rng.integers(1, 24)))
        rank = 2 + trial % 2
        ci, co = ((1, 1), (2, 1), (1, 2))[trial % 3]
        groups = int(rng.integers(1, 4))
        axes = _random_axes(rng, rank, max_size=8 if rank == 2 else 5)
        data = rng.standard_normal((2, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((groups, ci, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, np.float64, channels_last)


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
def test_plane_kernel_register_blocks_of_output_channels(monkeypatch, route):
    # The plane kernel sums blocks of up to three output channels over runs of whole
    # vectors: channel counts that leave a partial last block (its missing channels
    # get zero factors and are never stored), more input channels than the other
    # tests use, runs shorter and longer than one register block, and bands.
    channels_last = _route(monkeypatch, route)
    rng = np.random.default_rng(41)
    for trial in range(16):
        if trial % 4 == 3:
            monkeypatch.setattr(numba_planes, "BAND_ELEMENTS", int(rng.integers(1, 200)))
        rank = 1 + trial % 3
        co = (4, 5, 7, 8, 1, 2, 3, 10)[trial % 8]
        ci = int(rng.integers(1, 9))
        groups = int(rng.integers(1, 3))
        axes = _random_axes(rng, rank, max_size=(40, 12, 6)[rank - 1])
        data = rng.standard_normal((int(rng.integers(1, 3)), groups * ci)
                                   + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((groups, ci, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, (np.float64, np.float32)[trial % 2], channels_last)


def test_plane_kernel_input_channels_in_chunks(monkeypatch):
    # Windows of one or a few channels per chunk: every block sums the chunks in turn,
    # resuming from its stored partial sums (each chunk length, a last short chunk).
    rng = np.random.default_rng(43)
    try:
        for trial in range(6):
            monkeypatch.setattr(numba_planes, "_CHUNK_WINDOW_ELEMENTS",
                                int(rng.integers(1, 300)))
            numba_planes.planes_kernel.cache_clear()  # the chunk is read when compiling
            rank = 1 + trial % 3
            axes = _random_axes(rng, rank, max_size=(30, 9, 5)[rank - 1])
            ci, co = int(rng.integers(2, 12)), int(rng.integers(1, 6))
            data = rng.standard_normal((2, ci) + tuple(a.input_size for a in axes))
            weights = rng.standard_normal((1, ci, co) + tuple(a.kernel_size for a in axes))
            _check(data, weights, axes, (np.float64, np.float32)[trial % 2], trial % 2 == 1)
    finally:
        numba_planes.planes_kernel.cache_clear()  # later tests compile the real chunk


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_plane_kernel_every_register_layout(use_target, monkeypatch, register_bytes):
    # Each machine takes one block shape, from its vector width: pretending the other
    # width compiles the other shape here (LLVM splits 64-byte vectors into two on
    # AVX2 hardware: slower, same sums), so AVX-512's blocks are checked too.

    use_target(vector_bytes=register_bytes)
    schedules.planes_block_shape.cache_clear()
    rng = np.random.default_rng(register_bytes + 3)
    try:
        lanes = register_bytes // 4
        accumulators = 12 if register_bytes == 32 else 24
        # Blocks of three channels, each a third of the accumulators (12 of AVX2's 16
        # registers, 24 of AVX-512's 32); two channels take half each.
        assert schedules.planes_block_shape(4, 10, register_bytes) == (lanes, 3, accumulators // 3)
        assert schedules.planes_block_shape(8, 2, register_bytes)[:2] == (lanes // 2, 2)
        for trial in range(8):
            rank = 1 + trial % 3
            co = (1, 2, 3, 5, 7, 4, 6, 8)[trial]
            ci = int(rng.integers(1, 6))
            # Runs shorter and longer than one block of 8 or 16 vectors.
            axes = _random_axes(rng, rank, max_size=(300, 24, 7)[rank - 1])
            data = rng.standard_normal((2, ci) + tuple(a.input_size for a in axes))
            weights = rng.standard_normal((1, ci, co) + tuple(a.kernel_size for a in axes))
            _check(data, weights, axes, (np.float32, np.float64)[trial % 2], trial % 3 == 2)
    finally:
        schedules.planes_block_shape.cache_clear()  # later calls see the real width


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plane_kernel_interleaves_stride_2_rows_in_whole_vectors(dtype):
    # The two phases of a stride-2 last axis are stored a vector of each at a time,
    # the last pair of vectors overlapping the one before; rows shorter than a vector
    # per phase go one element at a time, and an odd row's last output alone.
    lanes = schedules.planes_block_shape(np.dtype(dtype).itemsize, 3, host_target().vector_bytes)[0]
    rng = np.random.default_rng(lanes)
    for half in (lanes - 1, lanes, lanes + 1, 2 * lanes - 4, 2 * lanes, 2 * lanes + 3):
        for odd in (0, 1):
            axes = (AxisPlan(3, 3, 2, 1, 1, 5), AxisPlan(half + odd, 4, 2, 1, 1, 2 * half + odd))
            data = rng.standard_normal((2, 2) + tuple(a.input_size for a in axes))
            weights = rng.standard_normal((1, 2, 3) + tuple(a.kernel_size for a in axes))
            _check(data, weights, axes, dtype, False)


def _covered_positions(blocks, plane, tail, band, length, block_rows=0):
    """Window positions the plane kernel computes per phase: whole blocks over each band's
    run, or (``block_rows``) whole blocks of that many rows over each band's rows."""
    total, first = 0, 0
    while first < blocks:
        rows = min(band, blocks - first)
        if block_rows:
            total += -(-rows // block_rows) * length
        else:
            total += -(-((rows - 1) * plane + tail) // length) * length
        first += band
    return total


def test_plane_schedule_takes_the_fewest_positions_it_may():
    # Against a brute force over every band and block length the schedule may take
    # (bands from the cache bound to two more, equal; blocks of half to all vectors,
    # keeping PLANE_MIN_ACCUMULATORS).
    rng = np.random.default_rng(53)
    for _ in range(300):
        blocks, plane = int(rng.integers(1, 40)), int(rng.integers(1, 80))
        tail = int(rng.integers(1, plane + 1))
        widest, min_bands = int(rng.integers(0, 50)), int(rng.integers(1, 5))
        lanes, most = int(rng.choice([4, 8, 16])), int(rng.choice([4, 6, 8, 12]))
        co_block = int(rng.integers(1, 4))
        row_segments = int(rng.choice([0, 0, 1, 2, 3]))
        band, vectors, positions, segments = schedules.plane_schedule(
            blocks, plane, tail, widest, min_bands, lanes, most, co_block, row_segments)
        assert -(-most // 2) <= vectors <= most and 1 <= band <= blocks
        # Eight independent accumulators at least (Zen 3: two FMA pipes of latency 4),
        # unless the longest block has fewer.
        assert vectors * co_block >= 8 or vectors == most
        shortest = min(most, max(-(-most // 2),
                                 -(-schedules.PLANE_MIN_ACCUMULATORS // co_block)))
        assert segments in (0, row_segments) and vectors % max(1, segments) == 0
        assert positions == _covered_positions(blocks, plane, tail, band, lanes * vectors,
                                               vectors // segments if segments else 0)
        # Bands no wider than the cache allows, nor than the threads' share.
        assert band <= max(1, widest) and band <= -(-blocks // min_bands)
        fewest = min(max(min_bands, -(-blocks // max(1, widest))), blocks)
        allowed = {-(-blocks // b) for b in range(fewest, min(fewest + 2, blocks) + 1)}
        best = min(_covered_positions(blocks, plane, tail, b, lanes * v, rows)
                   for b in allowed for v in range(shortest, most + 1)
                   for rows in [0] + ([v // row_segments] if row_segments
                                      and v % row_segments == 0 else []))
        assert positions == best


def test_plane_schedule_covers_dcgan_runs_with_less_waste():
    # DCGAN 256->128 16x16 k4 s2 p1 on AVX-512: 16 block rows, window rows of 18,
    # bands of at most 13 rows; the fixed 128-position block computed 384 positions
    # per phase for 256 outputs.
    band, vectors, positions, segments = schedules.plane_schedule(16, 18, 16, 13, 1, 16, 8, 3)
    assert segments == 0
    assert positions == _covered_positions(16, 18, 16, band, 16 * vectors) <= 320
    assert _covered_positions(16, 18, 16, 13, 128) == 384
    # Blocks of whole rows (one vector per row of 16 outputs): no border columns.
    assert schedules.plane_schedule(16, 18, 16, 13, 1, 16, 8, 3, 1)[2:] == (256, 1)


def test_plane_lanes_take_half_vectors_only_where_whole_ones_waste_enough():
    def schedule(blocks, plane, tail, row):  # (blocks, window row, run, outputs per row)
        return lambda lanes: schedules.plane_schedule(blocks, plane, tail, 13, 1, lanes, 8, 3,
                                                    -(-row // lanes))
    # DCGAN 512->256 (rows of 8 outputs): 80 positions per phase in whole vectors of 16
    # (flat runs over the window's border columns), 64 in rows of one half vector.
    dcgan_512 = schedule(8, 10, 8, 8)
    assert dcgan_512(16)[2] == 80 and dcgan_512(8)[2] == 64
    assert schedules.plane_lanes(dcgan_512, 16, True) == (8, dcgan_512(8))
    assert schedules.plane_lanes(dcgan_512, 16, False) == (16, dcgan_512(16))
    # DCGAN 256->128 (rows of 16): no waste to save.
    dcgan_256 = schedule(16, 18, 16, 16)
    assert schedules.plane_lanes(dcgan_256, 16, True) == (16, dcgan_256(16))
    # Rows of 28 outputs (grouped, depthwise): bands of 10 rows cover them with 880
    # positions per phase in whole or half vectors alike.
    grouped = schedule(28, 30, 28, 28)
    assert grouped(16)[2] < schedules.HALF_VECTOR_WASTE * grouped(8)[2]
    assert schedules.plane_lanes(grouped, 16, True)[0] == 16


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plane_kernel_in_half_vectors(monkeypatch, route, dtype):
    # Every layer forced to half vectors (on AVX-512 the kernel takes them for short
    # rows, on AVX2 never): 8 float32 or 4 float64 lanes there, 4 or 2 on AVX2, with
    # the interleaving stores of stride-2 rows in those vectors.
    channels_last = _route(monkeypatch, route)
    monkeypatch.setattr(numba_planes, "plane_lanes",
                        lambda schedule, lanes, halves: (lanes // 2, schedule(lanes // 2)))
    rng = np.random.default_rng(89)
    for trial in range(12):
        rank = 1 + trial % 3
        axes = _random_axes(rng, rank, max_size=(40, 12, 6)[rank - 1])
        if trial % 4 == 1:  # a stride-2 last axis with rows of whole half vectors
            axes = axes[:-1] + (AxisPlan(11, 4, 2, 1, 1, 22),)
        ci, co = int(rng.integers(1, 5)), int(rng.integers(1, 7))
        data = rng.standard_normal((2, ci) + tuple(a.input_size for a in axes))
        weights = rng.standard_normal((1, ci, co) + tuple(a.kernel_size for a in axes))
        _check(data, weights, axes, dtype, channels_last)


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
def test_plane_kernel_every_block_length_the_schedule_may_take(monkeypatch, route):
    # Each register block length from half to all of the vectors, forced, with bands:
    # the kernel pads accumulator rows and windows to whole blocks of that length.
    channels_last = _route(monkeypatch, route)
    lanes, co_block, most = schedules.planes_block_shape(8, 3, host_target().vector_bytes)
    rng = np.random.default_rng(59)
    real = numba_planes.plane_schedule
    shortest = max(-(-most // 2), -(-schedules.PLANE_MIN_ACCUMULATORS // co_block))
    for vectors in range(min(most, shortest), most + 1):
        def forced(*args, vectors=vectors):
            return real(*args)[0], vectors, 0, 0
        monkeypatch.setattr(numba_planes, "plane_schedule", forced)
        rank = 1 + vectors % 3
        axes = _random_axes(rng, rank, max_size=(60, 14, 6)[rank - 1])
        _check_random_channels(rng, axes, channels_last)


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
def test_plane_kernel_blocks_of_whole_rows(monkeypatch, route):
    # 2-D layers in blocks of output rows, each row `segments` vectors (every block
    # length the schedule may take: one to all rows per block), with bands that leave
    # a last short block of rows; the windows' rows beyond the band are padding.
    channels_last = _route(monkeypatch, route)
    lanes, co_block, most = schedules.planes_block_shape(8, 3, host_target().vector_bytes)
    rng = np.random.default_rng(79)
    real = numba_planes.plane_schedule
    for trial in range(8):
        axes = _random_axes(rng, 2, max_size=3 * lanes)
        segments = -(-geometry.axis_phases(axes[1]).blocks // lanes)
        rows = [v // segments for v in range(segments, most + 1, segments)]
        block_rows = rows[trial % len(rows)] if rows else 0

        def forced(*args, vectors=block_rows * segments):
            band, v, positions, _ = real(*args)
            return (band, vectors, 0, segments) if vectors else (band, v, positions, 0)
        monkeypatch.setattr(numba_planes, "plane_schedule", forced)
        monkeypatch.setattr(numba_planes, "BAND_ELEMENTS",
                            int(rng.integers(1, 400)) if trial % 2 else 1 << 16)
        _check_random_channels(rng, axes, channels_last)


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
def test_long_lines_cut_into_segments(monkeypatch, route):
    # 1-D lines longer than a few segments are cut into output segments, each a layer
    # of its own over a slice of the input (first and last segments: the padding and
    # cropping of the ends; segments that read no input: zeros), run on the threads.
    channels_last = _route(monkeypatch, route)
    segmented = []

    class Recorded(numba_line_segments.LineSegments):
        def __call__(self, data, out):
            segmented.append(1)
            super().__call__(data, out)

    monkeypatch.setattr(numba_direct, "LineSegments", Recorded)
    monkeypatch.setattr(schedules, "DIRECT_PARALLEL_MACS", 0)  # threads even for small lines
    monkeypatch.setattr(numba_scatter, "DIRECT_PARALLEL_MACS", 0)  # threads even for small lines
    rng = np.random.default_rng(83)
    for trial in range(12):
        monkeypatch.setattr(schedules, "LINE_SEGMENT_ELEMENTS", int(rng.integers(1, 600)))
        axes = _random_axes(rng, 1, max_size=500)
        ci, co = int(rng.integers(1, 6)), int(rng.integers(1, 7))
        groups = int(rng.integers(1, 3))
        # One sample's channels-last segments are stored in place, others through a copy.
        data = rng.standard_normal((1 + trial // 2 % 2, groups * ci, axes[0].input_size))
        weights = rng.standard_normal((groups, ci, co, axes[0].kernel_size))
        before = len(segmented)
        _check(data, weights, axes, (np.float64, np.float32)[trial % 2], channels_last)
        assert (len(segmented) > before) == schedules.line_segmented(axes[0], ci)
    assert len(segmented) >= 6


# --------------------------------------------------------------------------- rounded stores


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_row_kernel_widens_float16_data_and_rounds_float16_results(use_target, monkeypatch, register_bytes):
    # float16 data are widened as the row kernel fills its windows and float16 results
    # rounded from the float32 sums (plus the bias) as it stores them, the row's last,
    # partial vector too; no float32 copy of either.  Small integers times a power of
    # two: the float32 sums are exact, so the bits must be those of the oracle's sums
    # rounded by astype, ties to even (odd integers above 2048), overflows to infinity
    # and subnormal results included.
    from convtranspose._runtime.machine import host_has_f16c

    if not host_has_f16c():
        pytest.skip("the row kernel converts float16 with F16C instructions only")
    use_target(vector_bytes=register_bytes)
    calls = _force_row_kernel(use_target, monkeypatch)

    def no_cast(*args):
        raise AssertionError("a float32 copy was made of the data or the result")
    monkeypatch.setattr(casts, "narrow", no_cast)
    monkeypatch.setattr(casts, "widen", no_cast)
    rng = np.random.default_rng(register_bytes + 5)
    lanes = register_bytes // 4
    scales = (1.0, 2.0 ** -22, 2.0 ** 7)  # plain, subnormal and overflowing results
    overflows = []
    for trial in range(9):
        ci, co = ((1, 1), (2, 3), (3, 5))[trial % 3]
        stride = 1 + trial % 2
        kernel = int(rng.integers(1, 5))
        size = int(rng.integers(lanes // 2 + 1, 3 * lanes))
        offset = int(rng.integers(0, kernel))
        output = max(lanes, (size - 1) * stride + kernel - offset + int(rng.integers(-2, 3)))
        axes = _random_axes(rng, trial % 3, max_size=4) + (
            AxisPlan(size, kernel, stride, 1, offset, output),)
        groups = int(rng.integers(1, 3))
        data = rng.integers(-40, 41, (2, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.integers(-40, 41, (groups, ci, co) + tuple(a.kernel_size for a in axes))
        weights = weights * scales[trial // 3]  # exact in float16 too
        operands = np.float16 if trial % 4 < 2 else np.float32
        bias = (rng.integers(-99, 100, groups * co) / 8 * scales[trial // 3]).astype(
            operands) if trial % 2 else None
        sums = _reference(data.astype(np.float64), weights, axes)
        if bias is not None:
            sums = sums + bias.astype(np.float64).reshape((-1,) + (1,) * len(axes))
        with np.errstate(over="ignore"):
            expected = sums.astype(np.float32).astype(np.float16)
        got = execute.transposed_convolution(
            data.astype(operands), weights.astype(operands), axes, dtype=np.dtype(np.float32),
            bias=bias, algorithm="direct", result_dtype=np.float16)
        assert calls and calls[-1] == (
            schedules.FLOAT16 if operands == np.float16 else schedules.KEEP,
            schedules.FLOAT16), calls[-1:]
        np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16),
                                      err_msg=f"{axes} {weights.shape}")
        overflows.append(bool(np.isinf(expected).any()))
    assert not any(overflows[:6]) and any(overflows[6:]), overflows


@pytest.mark.parametrize("route", ["ncx", "nxc-planes"])
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_plane_kernel_rounds_half_results_as_it_stores(monkeypatch, route, half):
    # float16/bfloat16 results are rounded from the float32 sums (plus the bias) as the
    # plane kernel stores them: each store loop (strides 1, 2 and more, channels-last
    # strides), long lines in segments (those that read no input: the bias alone), and
    # no float32 result rounded afterwards.  Half data (every other trial) is widened
    # as the windows are filled, never copied to float32 first.  Small integers: the
    # float32 sums are exact, so the bits must be those of the oracle's sums rounded
    # by astype.

    half = np.dtype(half) if half == "float16" else np.dtype(pytest.importorskip("ml_dtypes")
                                                              .bfloat16)
    channels_last = _route(monkeypatch, route)

    def no_narrow(*args):
        raise AssertionError("a float32 result was rounded afterwards")
    monkeypatch.setattr(casts, "narrow", no_narrow)
    real_widen = casts.widen

    def no_widen(array, target):
        assert array.dtype not in (np.float16, half), "half data was widened first"
        return real_widen(array, target)
    monkeypatch.setattr(casts, "widen", no_widen)
    monkeypatch.setattr(schedules, "LINE_SEGMENT_ELEMENTS", 300)
    rng = np.random.default_rng(97)
    for trial in range(9):
        rank = 1 + trial % 3
        axes = _random_axes(rng, rank, max_size=(400, 12, 6)[rank - 1])
        groups, ci, co = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 7))
        data = rng.integers(-40, 41, (2, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.integers(-40, 41, (groups, ci, co) + tuple(a.kernel_size for a in axes))
        bias = (rng.integers(-99, 100, groups * co) / 8).astype(np.float32) if trial % 3 else None
        sums = _reference(data.astype(np.float64), weights.astype(np.float64), axes)
        if bias is not None:
            sums = sums + bias.reshape((-1,) + (1,) * rank)
        expected = sums.astype(np.float32).astype(half)
        source = np.moveaxis(data, 1, -1) if channels_last else data
        operands = half if trial % 2 else np.float32
        got = execute.transposed_convolution(
            np.ascontiguousarray(source, operands), weights.astype(operands), axes,
            dtype=np.dtype(np.float32), channels_last=channels_last,
            bias=None if bias is None else bias.astype(operands), algorithm="direct",
            result_dtype=half)
        assert got.dtype == half
        got = np.moveaxis(got, -1, 1) if channels_last else got
        np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16),
                                      err_msg=f"{axes} {weights.shape}")


# --------------------------------------------------------------------------- bfloat16 pairs

bfloat16 = pytest.importorskip("ml_dtypes").bfloat16


def _host_pairs() -> bool:
    from convtranspose._runtime.machine import has_bfloat16_pairs

    return has_bfloat16_pairs()


needs_pairs = pytest.mark.skipif("not _host_pairs()",
                                 reason="vdpbf16ps needs AVX512_BF16 and LLVM 17+")


@needs_pairs
def test_dot_pairs_adds_the_high_then_the_low_product_like_two_fmas():
    # Per lane: sums + hi * hi', then + lo * lo', each product exact in float32 (8-bit
    # significands) and each sum rounded to nearest even: NumPy's float32 arithmetic,
    # over magnitudes from 2**-40 to 2**40 (no subnormal anywhere).
    import numba

    from convtranspose._kernels._numba.vectors import vector_dot_pairs, vector_load, vector_store

    @numba.njit
    def dot(pairs, factors, sums):
        vector_store(sums, 0, vector_dot_pairs(vector_load(pairs, 0, 16),
                                               vector_load(factors, 0, 16),
                                               vector_load(sums, 0, 16)))

    rng = np.random.default_rng(61)
    for _ in range(200):
        scale = 2.0 ** rng.integers(-40, 41, (3, 16, 2))
        x = (rng.standard_normal((16, 2)) * scale[0]).astype(bfloat16)
        w = (rng.standard_normal((16, 2)) * scale[1]).astype(bfloat16)
        sums = (rng.standard_normal(16) * scale[2, :, 0]).astype(np.float32)
        expected = sums.copy()
        for half in (1, 0):
            expected = expected + x[:, half].astype(np.float32) * w[:, half].astype(np.float32)
        got = sums.copy()
        dot(x.view(np.uint32).reshape(-1), w.view(np.uint32).reshape(-1), got)
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_smallest_bfloat16_exponent_against_numpy():
    rng = np.random.default_rng(67)
    for size in (1, 7, 100, 5000):
        bits = rng.integers(0, 1 << 16, size, dtype=np.uint16)
        bits[rng.random(size) < 0.3] &= 0x8000  # zeros of either sign
        magnitude = bits & 0x7FFF
        fields = (magnitude >> 7)[magnitude != 0]
        assert numba_modes.smallest_bfloat16_exponent(bits) == fields.min(initial=255)


def _pairs_case(rng, rank, co, max_sizes=(40, 12, 6)):
    """A random layer in small integers (every float32 sum exact), as bfloat16."""
    axes = _random_axes(rng, rank, max_size=max_sizes[rank - 1])
    ci, groups = int(rng.integers(1, 8)), int(rng.integers(1, 3))
    data = rng.integers(-8, 9, (2, groups * ci) + tuple(a.input_size for a in axes))
    weights = rng.integers(-8, 9, (groups, ci, co) + tuple(a.kernel_size for a in axes))
    return axes, data.astype(bfloat16), weights.astype(bfloat16)


def _direct_bfloat16(data_ncx, weights, axes, channels_last):
    """``direct_phase`` of bfloat16 operands into float32, as NCX; and whether it took pairs."""
    groups, _, co = weights.shape[:3]
    spatial = tuple(a.output_size for a in axes)
    data = np.ascontiguousarray(np.moveaxis(data_ncx, 1, -1)) if channels_last else data_ncx
    shape = (2,) + spatial + (groups * co,) if channels_last else (2, groups * co) + spatial
    out = np.full(shape, np.nan, np.float32)
    derived = {}
    numba_direct.direct_phase(data, weights, axes, np.dtype(np.float32), channels_last, out,
                              derived, None, host_target())
    paired = any(key[:2] in (("planes", "pairs"), ("rows", "pairs")) for key in derived)
    return (np.moveaxis(out, -1, 1) if channels_last else out), paired


@needs_pairs
def test_plane_kernel_bfloat16_pairs_against_the_oracle(monkeypatch):
    # Odd and even input channel counts (the last pair's second half is zero), groups,
    # bands, chunks of one pair or a few, every block length the schedule may take,
    # channels first and last: the sums are exact, so any channel paired with the
    # wrong weight shows.  (Chunks are fixed when compiling: one small chunk size here,
    # the default in the other tests; each block shape compiles for seconds.)
    _route(monkeypatch, "nxc-planes")
    monkeypatch.setattr(numba_direct, "rows_apply", lambda *args: False)  # the plane kernel's
    monkeypatch.setattr(numba_planes, "_CHUNK_WINDOW_ELEMENTS", 60)
    numba_planes.planes_kernel.cache_clear()
    rng = np.random.default_rng(71)
    lanes, co_block, most = schedules.planes_block_shape(4, 3, host_target().vector_bytes)
    shortest = max(-(-most // 2), -(-schedules.PLANE_MIN_ACCUMULATORS // co_block))
    real = numba_planes.plane_schedule
    try:
        for trial in range(10):
            vectors = shortest + trial % (most - shortest + 1)
            co = (3, 4, 5, 6, 7, 1, 3, 4, 2, 6)[trial]
            axes, data, weights = _pairs_case(rng, 1 + trial % 3, co)
            # 2-D: blocks of whole rows where a row fits the block.
            segments = -(-geometry.axis_phases(axes[-1]).blocks // lanes)
            rows = len(axes) == 2 and segments <= most
            monkeypatch.setattr(
                numba_planes, "plane_schedule",
                lambda *args, v=vectors, rows=rows, s=segments: (
                    (real(*args)[0], most // s * s, 0, s) if rows else (real(*args)[0], v, 0, 0)))
            monkeypatch.setattr(numba_planes, "BAND_ELEMENTS",
                                int(rng.integers(1, 300)) if trial % 2 else 1 << 16)
            channels_last = trial % 4 >= 2
            got, paired = _direct_bfloat16(data, weights, axes, channels_last)
            assert paired
            expected = _reference(data.astype(np.float64), weights.astype(np.float64), axes)
            np.testing.assert_array_equal(got, expected.astype(np.float32),
                                          err_msg=f"{axes} {weights.shape} {channels_last}")
    finally:
        numba_planes.planes_kernel.cache_clear()  # later tests compile the real chunk


@needs_pairs
@pytest.mark.parametrize("threaded", [False, True], ids=["one-thread", "threads"])
def test_row_kernel_bfloat16_pairs_and_bfloat16_results(use_target, monkeypatch, threaded):
    # The row kernel packs bfloat16 data in pairs of input channels as it fills its
    # window (odd counts: the last channel alone, zeros beside it) and multiplies them
    # with vdpbf16ps; its sums, plus the bias, are rounded to bfloat16 as they are
    # stored, the row's partial last vector too.  Small integers (exact sums): any
    # channel paired with the wrong weight, or any rounding off ml_dtypes', shows.
    calls = _force_row_kernel(use_target, monkeypatch, threaded)
    rng = np.random.default_rng(79 + threaded)
    for trial in range(8):
        ci, co = ((1, 1), (2, 3), (3, 4), (5, 2))[trial % 4]
        stride = 1 + trial % 2
        kernel = int(rng.integers(1, 5))
        size = int(rng.integers(9, 48))
        offset = int(rng.integers(0, kernel))
        output = max(16, (size - 1) * stride + kernel - offset + int(rng.integers(-2, 3)))
        axes = _random_axes(rng, trial % 3, max_size=4) + (
            AxisPlan(size, kernel, stride, 1, offset, output),)
        groups = int(rng.integers(1, 3))
        data = rng.integers(-8, 9, (2, groups * ci) + tuple(a.input_size for a in axes))
        # Weights of 2**-20..2**10: rounding to bfloat16 (8-bit significands) shows.
        weights = rng.integers(-8, 9, (groups, ci, co) + tuple(a.kernel_size for a in axes)) * (
            2.0 ** int(rng.integers(-20, 11)))
        bias = (rng.integers(-99, 100, groups * co) / 8).astype(bfloat16) if trial % 2 else None
        sums = _reference(data.astype(np.float64), weights, axes)
        if bias is not None:
            sums = sums + bias.astype(np.float64).reshape((-1,) + (1,) * len(axes))
        result = bfloat16 if trial % 4 < 3 else np.float32
        got = execute.transposed_convolution(
            data.astype(bfloat16), weights.astype(bfloat16), axes, dtype=np.dtype(np.float32),
            bias=bias, algorithm="direct", result_dtype=result)
        assert calls and calls[-1] == (schedules.BFLOAT16, schedules.BFLOAT16
                                       if result == bfloat16 else schedules.KEEP), calls
        expected = sums.astype(np.float32).astype(result)
        np.testing.assert_array_equal(got.view(np.uint16 if result == bfloat16 else np.uint32),
                                      expected.view(np.uint16 if result == bfloat16
                                                    else np.uint32),
                                      err_msg=f"{axes} {weights.shape}")
    # An odd channel count's last pair reads that channel alone: the next group's
    # first channel, all infinities, must not reach the first group's sums.
    axes = (AxisPlan(5, 3, 2, 1, 1, 10), AxisPlan(20, 4, 2, 1, 1, 40))
    data = rng.integers(-8, 9, (2, 6, 5, 20)).astype(np.float64)
    weights = rng.integers(-8, 9, (2, 3, 2, 3, 4)).astype(np.float64)
    data[:, 3] = np.inf
    got = execute.transposed_convolution(data.astype(bfloat16), weights.astype(bfloat16), axes,
                                         dtype=np.dtype(np.float32), algorithm="direct")
    assert calls[-1] == (schedules.BFLOAT16, schedules.KEEP)
    expected = _reference(data[:, :3], weights[:1], axes)
    np.testing.assert_array_equal(got[:, :2], expected.astype(np.float32))


@needs_pairs
def test_bfloat16_pairs_refused_where_vdpbf16ps_would_flush_subnormals():
    # vdpbf16ps reads subnormal operands as zero and flushes subnormal sums to zero;
    # the float32 kernel computes them exactly.  Each case must come out exact.
    rng = np.random.default_rng(73)
    axes = (AxisPlan(9, 3, 2, 1, 1, 17), AxisPlan(11, 4, 2, 1, 1, 22))
    data = rng.integers(1, 9, (2, 6, 9, 11)).astype(np.float64)
    weights = rng.integers(1, 9, (1, 6, 5, 3, 4)).astype(np.float64)
    cases = {
        # products of 2**-70 * 2**-70: subnormal float32 sums
        "tiny products": (2.0 ** -70, 2.0 ** -70, False),
        # a subnormal bfloat16 datum times large weights: normal products
        "subnormal operand": (2.0 ** -133, 2.0 ** 20, False),
        # the smallest exponents' sum at the bound (fields 71 + 71 = 142 for 2**-56):
        # every product a multiple of 2**-126
        "at the bound": (2.0 ** -56, 2.0 ** -56, True),
    }
    for name, (data_scale, weight_scale, pairs) in cases.items():
        d = (data * data_scale).astype(bfloat16)
        w = (weights * weight_scale).astype(bfloat16)
        assert np.all(d.astype(np.float64) == data * data_scale), name  # exact in bfloat16
        got, paired = _direct_bfloat16(d, w, axes, False)
        assert paired == pairs, name
        expected = _reference(d.astype(np.float64), w.astype(np.float64), axes)
        assert (expected != 0).any() and np.all(expected.astype(np.float32) == expected), name
        np.testing.assert_array_equal(got, expected.astype(np.float32), err_msg=name)


def test_bfloat16_pairs_only_for_bfloat16_summed_in_float32():
    # Only bfloat16 results summed in float32, on a target with numba and vdpbf16ps.
    from convtranspose._choose.choice import sums_bfloat16_pairs

    f32, f16, bf16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(bfloat16)
    target = host_target().replace(numba=True, bfloat16_pairs=True)
    assert sums_bfloat16_pairs(f32, bf16, target)
    assert not sums_bfloat16_pairs(f32, f16, target)
    assert not sums_bfloat16_pairs(np.dtype(np.float64), bf16, target)
    assert not sums_bfloat16_pairs(f32, bf16, target.replace(numba=False))
    assert not sums_bfloat16_pairs(f32, bf16, target.replace(bfloat16_pairs=False))