"""``depthwise``: one input channel per group, a block of outputs times a vector of
channels in registers over a padded channel-blocked copy.  Every result is compared
with the slow oracle on integer operands (every sum exact in float32, so ``==``), and
a spy checks that the depthwise kernel, not a fallback, computed it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends import specs
from convtranspose._plan.rules import AxisPlan
from kernel_support import call_shapes_spy, run_forced
from oracle import canonical_result

numba_depthwise = pytest.importorskip("convtranspose._kernels._numba.depthwise")
numba_lines = pytest.importorskip("convtranspose._kernels._numba.depthwise_lines")


@pytest.fixture
def spy(monkeypatch):
    """A list that gets one entry per call the depthwise kernel computes."""
    calls = []
    made = numba_depthwise.depthwise_layer

    def layer(*args, **kwargs):
        calls.append(args[0])
        return made(*args, **kwargs)

    monkeypatch.setattr(numba_depthwise, "depthwise_layer", layer)
    return calls


@pytest.fixture
def lines_spy(monkeypatch):
    """A list that gets the output shape of each call the lines kernel computes."""
    return call_shapes_spy(monkeypatch, numba_lines.LinesLayer)


def _case(rng, rank, channels, multiplier=1, batch=None):
    """A random depthwise layer of ``rank`` axes: strides 1-4, kernels 1-7, dilations 1-3,
    crops and zeros at either end (pads and output padding)."""
    batch = int(rng.integers(1, 3)) if batch is None else batch
    size = rng.integers(1, 7, rank)
    kernel = rng.integers(1, 8, rank)
    stride = rng.integers(1, 5, rank)
    dilation = rng.integers(1, 4, rank)
    full = (size - 1) * stride + (kernel - 1) * dilation + 1
    offsets = [int(rng.integers(-2, f)) for f in full]  # negative: zeros in front
    sizes = [int(rng.integers(1, f + 4)) for f in full]  # past the full size: zeros
    axes = tuple(AxisPlan(*(int(v) for v in values), o, y)
                 for values, o, y in zip(zip(size, kernel, stride, dilation), offsets, sizes))
    data = rng.integers(-3, 4, (batch, channels) + tuple(int(x) for x in size))
    weights = rng.integers(-3, 4, (channels, 1, multiplier) + tuple(int(k) for k in kernel))
    return data, weights, axes


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_random_layers_match_the_oracle(use_target, spy, rank, dtype, channels_last, threads):
    use_target(threads=threads)
    rng = np.random.default_rng(100 * rank + threads + 10 * channels_last)
    for trial in range(12):
        channels = (1, 3, 17, 40)[trial % 4]
        multiplier = 1 if trial % 3 else 2
        data, weights, axes = _case(rng, rank, channels, multiplier)
        got = run_forced(data.astype(dtype), weights.astype(dtype), axes, dtype, channels_last,
                         "depthwise")
        np.testing.assert_array_equal(got, canonical_result(data, weights, axes),
                                      err_msg=f"{axes} {weights.shape}")
    assert len(spy) == 12


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("channels", [1008, 1024])
def test_many_channels_both_layouts(use_target, spy, channels, register_bytes):
    # Channel counts that are and are not whole vectors of both widths; N > 1.
    use_target(vector_bytes=register_bytes, threads=2)
    rng = np.random.default_rng(channels)
    axes = (AxisPlan(4, 7, 2, 1, 3, 8), AxisPlan(5, 5, 1, 1, 2, 5))
    data = rng.integers(-3, 4, (2, channels, 4, 5))
    weights = rng.integers(-3, 4, (channels, 1, 1, 7, 5))
    expected = canonical_result(data, weights, axes)
    for channels_last in (False, True):
        got = run_forced(data.astype(np.float32), weights.astype(np.float32), axes,
                         np.float32, channels_last, "depthwise")
        np.testing.assert_array_equal(got, expected)
    assert len(spy) == 2


@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_lines_go_through_register_transposes(use_target, spy, dtype, register_bytes):
    # Input and output lines of several vectors: channels-first data and outputs move in
    # lanes x lanes blocks, with a remainder; 40 channels are two whole vectors of 16
    # and a partial one (five of 8).
    use_target(vector_bytes=register_bytes)
    rng = np.random.default_rng(register_bytes)
    for multiplier, axes in ((1, (AxisPlan(3, 3, 1, 1, 1, 3), AxisPlan(37, 4, 2, 1, 1, 74))),
                             (2, (AxisPlan(35, 5, 3, 2, 0, 111),))):
        data = rng.integers(-3, 4, (2, 40) + tuple(a.input_size for a in axes))
        weights = rng.integers(-3, 4, (40, 1, multiplier) + tuple(a.kernel_size for a in axes))
        expected = canonical_result(data, weights, axes)
        for channels_last in (False, True):
            got = run_forced(data.astype(dtype), weights.astype(dtype), axes, dtype,
                             channels_last, "depthwise")
            np.testing.assert_array_equal(got, expected)
    assert len(spy) == 4


def _lines_case(rng, channels, multiplier, lanes):
    """A random channels-first 2-D depthwise layer that ``depthwise`` sums along its
    lines: strides 1-4 on the first axis and 1, 2, 4 or 8 (dividing ``lanes``) on the
    last, first axes of fewer and more than a block of 8 rows per phase, lines of part
    of a vector to several vectors, dilations 1-3, crops and zeros at either end."""
    axes = []
    for size, stride in ((int(rng.integers(1, 20)), int(rng.integers(1, 5))),
                         (int(rng.integers(1, 41)),
                          int(rng.choice([s for s in (1, 2, 4, 8) if lanes % s == 0])))):
        kernel, dilation = int(rng.integers(1, 8)), int(rng.integers(1, 4))
        full = (size - 1) * stride + (kernel - 1) * dilation + 1
        axes.append(AxisPlan(size, kernel, stride, dilation, int(rng.integers(-2, full)),
                             int(rng.integers(1, full + 4))))
    data = rng.integers(-3, 4, (int(rng.integers(1, 3)), channels)
                        + tuple(a.input_size for a in axes))
    weights = rng.integers(-3, 4, (channels, 1, multiplier)
                           + tuple(a.kernel_size for a in axes))
    return data, weights, tuple(axes)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_channels_first_planes_are_summed_along_lines(use_target, lines_spy, register_bytes,
                                                      dtype, threads):
    use_target(vector_bytes=register_bytes, threads=threads)
    lanes = register_bytes // np.dtype(dtype).itemsize
    rng = np.random.default_rng(register_bytes + threads + np.dtype(dtype).itemsize)
    for trial in range(16):
        data, weights, axes = _lines_case(rng, (1, 5, 17)[trial % 3], 1 + trial % 3, lanes)
        got = run_forced(data.astype(dtype), weights.astype(dtype), axes, dtype, False,
                         "depthwise")
        np.testing.assert_array_equal(got, canonical_result(data, weights, axes),
                                      err_msg=f"{axes} {weights.shape}")
    assert len(lines_spy) == 16


def _unrolled_case(rng, channels, taps, stride):
    """A channels-first 2-D layer whose lines kernel unrolls its blocks over ``taps``
    row taps (every phase of stride ``stride`` has that many, no dilation on the first
    axis; stride 1 along the line): first axes of fewer and more than a block of 8 rows
    per phase, lines of part of a vector to several, any dilation along the line, crops
    and zeros at either end."""
    size1, size2 = int(rng.integers(1, 20)), int(rng.integers(1, 41))
    k2, d2 = int(rng.integers(1, 8)), int(rng.integers(1, 4))
    axes = []
    for size, kernel, s, d in ((size1, taps * stride, stride, 1), (size2, k2, 1, d2)):
        full = (size - 1) * s + (kernel - 1) * d + 1
        axes.append(AxisPlan(size, kernel, s, d, int(rng.integers(-2, full)),
                             int(rng.integers(1, full + 4))))
    data = rng.integers(-3, 4, (int(rng.integers(1, 3)), channels, size1, size2))
    weights = rng.integers(-3, 4, (channels, 1, int(rng.integers(1, 3)), taps * stride, k2))
    return data, weights, tuple(axes)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("register_bytes", [32, 64], ids=["avx2", "avx512"])
def test_unrolled_row_taps_match_the_oracle(use_target, lines_spy, register_bytes, dtype,
                                            threads):
    # Blocks unrolled over 1-7 row taps, reading the staged rows: every tap count the
    # kernel generates, with strides 1 and 2 on the first axis.
    from convtranspose._kernels.depthwise_schedule import LINES_UNROLLED_TAPS, lines_plan

    use_target(vector_bytes=register_bytes, threads=threads)
    lanes = register_bytes // np.dtype(dtype).itemsize
    rng = np.random.default_rng(register_bytes + threads + np.dtype(dtype).itemsize)
    for taps in range(1, LINES_UNROLLED_TAPS + 1):
        for stride in (1, 2):
            data, weights, axes = _unrolled_case(rng, (3, 17)[stride - 1], taps, stride)
            groups, _, multiplier = weights.shape[:3]
            assert lines_plan(groups, multiplier, axes, lanes).unrolled_taps == taps
            got = run_forced(data.astype(dtype), weights.astype(dtype), axes, dtype, False,
                             "depthwise")
            np.testing.assert_array_equal(got, canonical_result(data, weights, axes),
                                          err_msg=f"{axes} {weights.shape}")
    assert len(lines_spy) == 2 * LINES_UNROLLED_TAPS


def test_unrolled_row_taps_keep_infinite_data_where_its_taps_reach(lines_spy):
    # The window rows past the input are zeros of the stage, never data.
    rng = np.random.default_rng(9)
    axes = (AxisPlan(7, 3, 1, 1, 1, 7), AxisPlan(14, 5, 1, 1, 2, 14))
    data = rng.integers(-3, 4, (2, 6, 7, 14)).astype(np.float32)
    weights = rng.integers(-3, 4, (6, 1, 1, 3, 5))
    data[0, 2, 0, 0] = np.inf
    data[-1, 4, -1, -1] = -np.inf
    weights = np.where(weights == 0, 1, weights).astype(np.float32)
    with np.errstate(invalid="ignore"):
        expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
    assert np.isinf(expected).any()  # the premise: the taps reach it
    got = run_forced(data, weights, axes, np.float32, False, "depthwise")
    np.testing.assert_array_equal(got, expected)
    assert lines_spy


def test_prepared_stride_one_layer_sums_along_lines(monkeypatch, lines_spy):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "depthwise")
    ct.clear_caches()
    rng = np.random.default_rng(12)
    data = rng.integers(-3, 4, (2, 24, 7, 14)).astype(np.float32)
    filter = rng.integers(-3, 4, (24, 1, 1, 5, 5)).astype(np.float32)
    attributes = dict(strides=1, pads_begin=2, pads_end=2)
    expected = oracle.openvino_group_cbpd(data, filter, **attributes)
    layer = ct.prepare(ct.group_convolution_backprop_data, filter=filter, **attributes)
    for _ in range(3):
        np.testing.assert_array_equal(layer(data), expected)
        np.testing.assert_array_equal(
            ct.group_convolution_backprop_data(data, filter, **attributes), expected)
    assert len(lines_spy) == 6


def test_half_precision_data_is_widened(spy):
    rng = np.random.default_rng(5)
    data, weights, axes = _case(rng, 2, 19, batch=2)
    got = run_forced(data.astype(np.float16), weights.astype(np.float16), axes, np.float32,
                     True, "depthwise")
    np.testing.assert_array_equal(got, canonical_result(data, weights, axes))
    assert spy


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
def test_infinite_weight_gives_the_exact_sum(spy, channels_last):
    # The padding's zeros would turn an infinite weight into NaN at outputs whose taps
    # read past the input: the call takes the exact fallback instead.
    rng = np.random.default_rng(7)
    axes = (AxisPlan(5, 3, 2, 1, 1, 9), AxisPlan(6, 5, 2, 1, 2, 11))
    data = rng.integers(1, 4, (1, 5, 5, 6)).astype(np.float32)  # no zeros: no inf * 0
    weights = rng.integers(1, 4, (5, 1, 1, 3, 5)).astype(np.float32)
    weights[2, 0, 0, 1, 4] = np.inf
    weights[4, 0, 0, 0, 0] = -np.inf
    with np.errstate(invalid="ignore"):
        expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
    assert np.isinf(expected).any() and not np.isnan(expected).any()  # the premise
    got = run_forced(data, weights, axes, np.float32, channels_last, "depthwise")
    np.testing.assert_array_equal(got, expected)
    assert not spy  # the depthwise kernel declined


def test_infinite_data_stays_where_its_taps_reach(spy):
    rng = np.random.default_rng(8)
    data, weights, axes = _case(rng, 2, 9, batch=1)
    data = data.astype(np.float32)
    data[0, 4, 0, 0] = np.inf
    weights = np.where(weights == 0, 1, weights).astype(np.float32)
    with np.errstate(invalid="ignore"):
        expected = canonical_result(data.astype(np.float64), weights.astype(np.float64), axes)
    got = run_forced(data, weights, axes, np.float32, True, "depthwise")
    np.testing.assert_array_equal(got, expected)
    assert spy


def test_other_layers_run_direct_blocked(spy):
    rng = np.random.default_rng(9)
    axes = (AxisPlan(4, 3, 2, 1, 1, 7),)
    data = rng.integers(-3, 4, (2, 6, 4))
    weights = rng.integers(-3, 4, (2, 3, 4, 3))
    got = run_forced(data.astype(np.float32), weights.astype(np.float32), axes, np.float32,
                     False, "depthwise")
    np.testing.assert_array_equal(got, canonical_result(data, weights, axes))
    assert not spy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_public_api_and_prepared_layer(monkeypatch, spy, dtype):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "depthwise")
    ct.clear_caches()
    rng = np.random.default_rng(11)
    data = rng.integers(-3, 4, (2, 24, 7, 7)).astype(dtype)
    filter = rng.integers(-3, 4, (24, 1, 1, 7, 7)).astype(dtype)
    attributes = dict(strides=2, pads_begin=3, pads_end=3, output_padding=1)
    expected = oracle.openvino_group_cbpd(data, filter, **attributes)
    for _ in range(3):
        np.testing.assert_array_equal(
            ct.group_convolution_backprop_data(data, filter, **attributes), expected)
    assert "DirectCall" in {type(entry[0]).__name__ for entry in specs.prepared_calls.values()
                            if entry[0] is not None}
    layer = ct.prepare(ct.group_convolution_backprop_data, filter=filter, **attributes)
    for _ in range(3):
        np.testing.assert_array_equal(layer(data), expected)
    assert spy


SCRIPT = textwrap.dedent("""\
    import json, re
    import numba
    import numpy as np
    import convtranspose as ct
    from convtranspose._kernels._numba.depthwise import depthwise_kernels

    lanes = ct.host_target().lanes(np.float32)
    kernel = depthwise_kernels(lanes, 1, 8)["kernel"]

    def frozen(array):
        array.flags.writeable = False
        return array

    f32, i64 = np.float32, np.int64
    args = (frozen(np.zeros(64, f32)), frozen(np.zeros(64, f32)), np.zeros(64, f32),
            np.zeros(64, f32), frozen(np.zeros(17, i64)), frozen(np.zeros((3, 2, 2), i64)),
            frozen(np.zeros((3, 2, 2), i64)), frozen(np.zeros((3, 2), i64)), 0, 1)
    signature = tuple(numba.typeof(a) for a in args)
    kernel.compile(signature)
    fmas = {"xmm": 0, "ymm": 0, "zmm": 0}
    for line in kernel.inspect_asm(signature).splitlines():
        fields = line.split(None, 1)
        if len(fields) == 2 and re.match(r"vfmadd|vfmacc", fields[0]):
            for register in ("zmm", "ymm", "xmm"):
                if "%" + register in fields[1]:
                    fmas[register] += 1
                    break
    print(json.dumps({"lanes": lanes, "fmas": fmas}))
    """)

#: LLVM's CPU name, its features, the float32 lanes and the register the FMAs use.
CPUS = {
    "skylake-avx512": ("+avx512f,+f16c", 16, "zmm"),
    "haswell": ("+avx2,+fma,+f16c", 8, "ymm"),
}


@pytest.mark.parametrize("cpu", sorted(CPUS))
def test_block_fmas_use_the_full_vector_width(cpu):
    features, lanes, register = CPUS[cpu]
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                       CONVTRANSPOSE_CACHE_DIR="off",
                       PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["lanes"] == lanes
    # The block's eight accumulators: at least eight FMAs, all in the full register.
    fmas = report["fmas"]
    assert fmas[register] >= 8, report
    assert sum(fmas.values()) == fmas[register], report


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("shape, kernel, stride, multiplier", [
    ((1, 1024, 7, 7), 7, 2, 1), ((2, 3, 300), 5, 3, 2), ((1, 17, 6, 6, 6), 3, 2, 1)])
def test_scratch_estimate_covers_the_allocations(shape, kernel, stride, multiplier,
                                                 channels_last):
    from convtranspose._execute.transposed import transposed_convolution
    from convtranspose._kernels.scratch import scratch_bytes
    from convtranspose._runtime import memo

    rank = len(shape) - 2
    axes = tuple(AxisPlan(x, kernel, stride, 1, 1, (x - 1) * stride + kernel - 2)
                 for x in shape[2:])
    data = np.ones(shape, np.float32)
    if channels_last:
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    weights = np.ones((shape[1], 1, multiplier) + (kernel,) * rank, np.float32)

    def compute():
        return transposed_convolution(data, weights, axes, dtype=np.dtype(np.float32),
                                      channels_last=channels_last, algorithm="depthwise")

    compute()
    memo.forget_derived()  # packed weights and set-ups count as scratch
    tracemalloc.start()
    try:
        result = compute()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = scratch_bytes("depthwise", shape[0], axes, weights.shape, np.float32)
    assert 0 < peak - result.nbytes <= estimate
