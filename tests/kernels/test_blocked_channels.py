"""``direct-blocked`` summing the input channels in blocks (layers of many input channels
and long lines): integer operands, so every order of the sums gives the oracle's value."""

from __future__ import annotations

import numpy as np
import pytest

from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels.blocked_channels import blocked_channel_block
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime.machine import l1_data_cache_bytes
from kernel_support import run_forced
from oracle import canonical_result

# (input channels, output channels, spatial sizes, kernel, stride): 150 channels are more
# than one block on any L1 of 32-48 KiB, and not a multiple of one.
LAYERS = [
    (150, 40, (24,), 6, 2),
    (150, 70, (3, 20), 4, 2),
    (96, 20, (2, 2, 18), 4, 2),
    # 49 taps: the L1 share fits few channels, so blocks of BLOCKED_LEAST_CHANNELS (16),
    # the last one short.
    (40, 20, (9, 12), 7, 1),
    # A line's weights past the L2 share: passes of at least BLOCKED_LEAST_PASS_VECTORS
    # vectors, the last one narrower.
    (256, 48, (5, 6), 7, 1),
]


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ci, co, sizes, kernel, stride", LAYERS)
def test_channel_blocks_sum_to_the_oracle(ci, co, sizes, kernel, stride, dtype, channels_last):
    # The premise: these layers are summed in more than one block of input channels.
    lanes = 64 // np.dtype(dtype).itemsize
    taps = (-(-kernel // stride)) ** len(sizes)
    assert blocked_channel_block(ci, taps, lanes, np.dtype(dtype).itemsize,
                                 l1_data_cache_bytes()) < ci
    rng = np.random.default_rng(ci + co)
    axes = tuple(AxisPlan(x, kernel, stride, 1, 1, (x - 1) * stride + kernel - 2)
                 for x in sizes)
    data = rng.integers(-3, 4, (2, ci) + sizes).astype(dtype)
    weights = rng.integers(-3, 4, (1, ci, co) + (kernel,) * len(sizes)).astype(dtype)
    result = run_forced(data, weights, axes, dtype, channels_last, "direct-blocked")
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


# (batch, input channels, output channels, spatial sizes, kernel, stride, pad): lines whose
# phases hold fewer outputs with every tap inside than a block, and groups of lines that
# hold more: blocks are taken across the lines.
SHORT_LINES = [
    (3, 8, 24, (12, 3), 4, 2, 1),
    (2, 20, 40, (10, 3), 3, 1, 1),
    (2, 6, 33, (3, 4, 3), 2, 2, 0),
    (4, 150, 20, (6, 3), 4, 2, 1),  # many input channels too: blocks of channels
]


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("batch, ci, co, sizes, kernel, stride, pad", SHORT_LINES)
def test_blocks_across_lines_sum_to_the_oracle(batch, ci, co, sizes, kernel, stride, pad,
                                               channels_last):
    from convtranspose._kernels.schedules import blocked_shape
    from convtranspose._plan.geometry import axis_phases

    axes = tuple(AxisPlan(x, kernel, stride, 1, pad, (x - 1) * stride + kernel - 2 * pad)
                 for x in sizes)
    # The premise: no phase of the last axis has a block's worth of outputs whose taps
    # all read inside the input, on AVX2 or AVX-512.
    last = axes[-1]
    inside = max(min(-(-(last.output_size - c.first) // stride), last.input_size - max(c.shifts))
                 - max(0, -min(c.shifts)) for c in axis_phases(last).classes if c.shifts)
    for vector_bytes in (32, 64):
        assert inside < blocked_shape(4, co, last, vector_bytes)[3]
    rng = np.random.default_rng(ci * co + len(sizes))
    data = rng.integers(-3, 4, (batch, ci) + sizes).astype(np.float32)
    weights = rng.integers(-3, 4, (1, ci, co) + (kernel,) * len(sizes)).astype(np.float32)
    result = run_forced(data, weights, axes, np.float32, channels_last, "direct-blocked")
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
def test_pieces_of_whole_and_of_part_planes_sum_to_the_oracle(threads, channels_last,
                                                               use_target):
    # Three samples of 14 lines: pieces of whole planes on three threads, and pieces
    # that cut planes (and their groups of lines) on two.
    use_target(threads=threads)
    axes = (AxisPlan(14, 7, 1, 1, 3, 14), AxisPlan(9, 5, 1, 1, 2, 9))
    rng = np.random.default_rng(threads)
    data = rng.integers(-3, 4, (3, 6, 14, 9)).astype(np.float32)
    weights = rng.integers(-3, 4, (1, 6, 40, 7, 5)).astype(np.float32)
    result = run_forced(data, weights, axes, np.float32, channels_last, "direct-blocked")
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


def test_lines_go_to_the_threads_in_pieces_of_whole_planes():
    from convtranspose._kernels._numba.blocked import line_pieces
    from convtranspose._runtime.threads import PIECES_PER_THREAD

    assert line_pieces(56, 14, 1, 2) == 4  # four samples: a plane each
    assert line_pieces(42, 14, 1, 2) == 4  # three: a multiple of the threads
    assert line_pieces(14, 14, 1, 2) == 2
    assert line_pieces(14 * 100, 14, 1, 2) == 2 * PIECES_PER_THREAD
    assert line_pieces(1, 1, 64, 2) == 2 * PIECES_PER_THREAD  # segments of one line


def test_channel_blocks_and_passes_keep_their_floors():
    from convtranspose._kernels.blocked_channels import blocked_channel_passes
    from convtranspose._plan.geometry import three_axes

    # 49 taps of 64 float32 channels fit one input channel in half of 48 KiB: 16 a block,
    # or every channel where there are fewer.
    assert blocked_channel_block(40, 49, 64, 4, 48 << 10) == 16
    assert blocked_channel_block(8, 49, 64, 4, 48 << 10) == 8
    assert blocked_channel_block(400, 1, 64, 4, 48 << 10) == 96  # the share alone
    # 256 input channels x 49 taps: one 16-lane vector's weights per line (784 KiB) fill
    # the share of 2 MiB, so three vectors go in passes of two and one, not three of one.
    axes3 = three_axes(tuple(AxisPlan(8, 7, 1, 1, 3, 8) for _ in range(2)))
    assert blocked_channel_passes(256, 48, axes3, 4, 16, 2 << 20) == 2
    assert blocked_channel_passes(16, 48, axes3, 4, 16, 2 << 20) == 1


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("co, stacked", [(128, True), (120, False)],
                         ids=["equal-passes", "narrower-last-pass"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
def test_passes_shared_out_whole_sum_to_the_oracle(co, stacked, channels_last, threads,
                                                   use_target, monkeypatch):
    # Passes of two vectors each (no L2 share fits a vector's weights): 128 channels
    # make passes of one width, run as one kernel over all of them, each thread taking
    # whole passes; 120 make a narrower last pass, each pass run on its own.  float32
    # and float16 results rounded with a bias from the same sums.
    from convtranspose._kernels import blocked_channels
    from convtranspose._kernels._numba import blocked

    use_target(threads=threads)
    monkeypatch.setattr(blocked_channels, "BLOCKED_LINE_WEIGHTS_L2_SHARE", 1e-9)
    calls, passes_kernel = [], blocked.passes_kernel

    def counted(kernel, arity):
        calls.append(arity)
        return passes_kernel(kernel, arity)

    monkeypatch.setattr(blocked, "passes_kernel", counted)
    axes = (AxisPlan(7, 4, 2, 1, 1, 14), AxisPlan(5, 3, 1, 1, 1, 5))
    rng = np.random.default_rng(co + threads)
    data = rng.integers(-3, 4, (4, 48, 7, 5)).astype(np.float32)  # enough for threads
    weights = rng.integers(-3, 4, (1, 48, co, 4, 3)).astype(np.float32)
    bias = rng.integers(-3, 4, co).astype(np.float32)
    expected = canonical_result(data, weights, axes)
    result = run_forced(data, weights, axes, np.float32, channels_last, "direct-blocked")
    np.testing.assert_array_equal(result, expected)
    source = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
    rounded = transposed_convolution(source, weights, axes, dtype=np.dtype(np.float32),
                                     channels_last=channels_last, bias=bias,
                                     algorithm="direct-blocked", result_dtype=np.float16)
    rounded = np.moveaxis(rounded, -1, 1) if channels_last else rounded
    np.testing.assert_array_equal(
        rounded, (expected + bias.reshape(-1, 1, 1)).astype(np.float16))
    assert bool(calls) == stacked
