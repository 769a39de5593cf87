"""float16 and bfloat16: the fast conversions, and kernels that round their own sums.

docs/semantics.md "Numbers": half-precision layers accumulate in float32 and round once.
The reference for a conversion is NumPy's ``astype`` (ml_dtypes' for bfloat16),
which shares no code with :mod:`convtranspose._kernels._numba.casts`; every float16 and
bfloat16 bit pattern and a million random float32 ones are compared bit for bit,
NaN payloads included.  Kernel results are compared with the direct-loop oracle
in float32, rounded by ``astype``.
"""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest

import convtranspose as ct
from convtranspose import host_target
from convtranspose._choose import choice as dispatch
from convtranspose._choose.estimates import RawCost
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels import casts
from convtranspose._kernels._numba import casts as numba_casts
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import config as environment
from convtranspose._runtime import target as runtime_target
from kernel_support import chosen
from oracle import crop, full_transposed_convolution

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
HALF = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
HALF_IDS = ["float16", "bfloat16"]


@pytest.fixture(params=[False, True], ids=["numba", "no-numba"])
def numba_mode(request, monkeypatch):
    if request.param:
        monkeypatch.setenv(runtime_target.NO_NUMBA_ENV, "1")
    else:
        monkeypatch.delenv(runtime_target.NO_NUMBA_ENV, raising=False)
    return not request.param


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(f"u{array.itemsize}")


def _float32_edge_cases() -> np.ndarray:
    """float32 values at every rounding edge of float16 and bfloat16, as bit patterns."""
    values = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.996, 65520.0, -65520.0, 1e5, 3.4e38,
              np.inf, -np.inf, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001,
              2.0 ** -26, 3 * 2.0 ** -25, 2.0 ** -133, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
              1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 256 + 1, 256 + 3, 2048 + 1, 2048 + 3,
              np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45]
    bits = [np.array(values, np.float32).view(np.uint32).astype(np.int64)]
    # NaNs: quiet and signalling, both signs, payloads in the kept and the dropped bits.
    bits += [np.array([sign | 0x7F800000 | payload for sign in (0, 0x80000000)
                       for payload in (0x400000, 1, 0x1FFF, 0x2000, 0x3FFFFF, 0x7FFFFF, 0x401234)])]
    # Every float16 and bfloat16 value, and the midpoints above them (2**12 and 2**15
    # float32 ulps up for normals) and their neighbours, wrapping around at the top.
    halves = np.arange(1 << 16, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        wide16 = halves.view(np.float16).astype(np.float32).view(np.uint32).astype(np.int64)
    for base in (wide16, halves.astype(np.int64) << 16):
        bits += [base + offset for offset in (0, 0x0FFF, 0x1000, 0x1001, 0x7FFF, 0x8000, 0x8001)]
    return (np.concatenate(bits) % (1 << 32)).astype(np.uint32)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_narrow_gives_the_bits_of_astype(dtype, numba_mode):
    rng = np.random.default_rng(11)
    bits = np.concatenate([_float32_edge_cases(),
                           rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)])
    values = bits.view(np.float32)
    with np.errstate(all="ignore"):
        expected = values.astype(dtype)
    got = casts.narrow(values, dtype, None, host_target())  # large enough to be split between threads
    assert got.dtype == dtype and got.shape == values.shape
    np.testing.assert_array_equal(_bits(got), _bits(expected))
    # Any shape and strides; small arrays too.
    block = values[:6000].reshape(20, 300)[:, ::3]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(_bits(casts.narrow(block, dtype, None, host_target())), _bits(block.astype(dtype)))
        np.testing.assert_array_equal(_bits(casts.narrow(values[:7], dtype, None, host_target())),
                                      _bits(values[:7].astype(dtype)))


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_widen_gives_the_bits_of_astype(dtype, numba_mode):
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    tiled = np.tile(every, 5)  # large enough to be split between threads
    with np.errstate(invalid="ignore"):
        expected = tiled.astype(np.float32)
    got = casts.widen(tiled, host_target())
    assert got.dtype == np.float32
    np.testing.assert_array_equal(_bits(got), _bits(expected))
    strided = every.reshape(256, 256)[::2, 1::3]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(_bits(casts.widen(strided, host_target())),
                                      _bits(strided.astype(np.float32)))
    assert casts.widen(strided.astype(np.float32), host_target()).dtype == np.float32


def test_narrow_and_widen_leave_other_dtypes_to_numpy():
    values = np.array([1.5, -2.5, 3e5], np.float32)
    assert casts.narrow(values, np.float32, None, host_target()) is values
    np.testing.assert_array_equal(casts.narrow(values, np.int32, None, host_target()), values.astype(np.int32))
    integers = np.arange(5, dtype=np.int16)
    assert casts.widen(integers, host_target()) is integers


def _rounding_case(rng, rank, dtype):
    """A grouped layer whose float32 sums are exact and land on every kind of value:
    subnormal, ties, above the largest finite half, infinite and NaN."""
    groups, ci, co, batch = 2, 5, 20, 4
    size = [3] * (rank - 1) + [13]
    axes = tuple(AxisPlan(x, k, s, 1, 1, (x - 1) * s + k - 2)
                 for x, k, s in zip(size, [4, 3, 3][:rank], [2, 1, 3][:rank]))
    data = rng.integers(-9, 10, (batch, groups * ci) + tuple(size)).astype(np.float32)
    weights = rng.integers(-9, 10, (groups, ci, co) + tuple(a.kernel_size for a in axes))
    weights = weights.astype(np.float32)
    data[0] *= 2.0 ** -26  # float16 subnormals (and zeros of either sign)
    data[1] *= 2.0 ** 4 if dtype == np.float16 else 2.0 ** -2  # odd multiples: ties
    data[2] *= 2.0 ** 10 if dtype == np.float16 else 2.0 ** 100  # float16: beyond its largest
    data[3].reshape(-1)[[3, 40]] = (np.inf, np.nan)
    bias = (rng.integers(-9, 10, groups * co) * 2.0 ** -3).astype(np.float32)
    return axes, data.astype(dtype), weights.astype(dtype), bias.astype(dtype)


def _oracle_rounded(data, weights, axes, bias, dtype):
    with np.errstate(invalid="ignore", over="ignore"):
        full = full_transposed_convolution(data.astype(np.float32), weights.astype(np.float32),
                                           [a.stride for a in axes], [a.dilation for a in axes])
        result = crop(full, [a.offset for a in axes], [a.output_size for a in axes])
        if bias is not None:
            result = result + bias.astype(np.float32).reshape((-1,) + (1,) * len(axes))
        return result.astype(np.float32).astype(dtype)


# The NaNs of padding times infinity, in threads the errstate below does not reach.
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("algorithm",
                         ["direct-blocked", "direct", "gemm-ncx", "col2im-nxc", "window"])
def test_kernels_round_their_float32_sums_once(monkeypatch, numba_mode, rank, dtype, algorithm):
    rng = np.random.default_rng(300 + rank)
    axes, data, weights, bias = _rounding_case(rng, rank, dtype)
    rounds_itself = (algorithm in ("direct-blocked", "direct") and numba_mode
                     and casts.rounds_in_kernels(np.dtype(np.float32), dtype, host_target()))
    if rounds_itself:
        # No float32 result is rounded afterwards: the kernel stores the bits itself.
        def no_narrow(*args):
            raise AssertionError(f"{algorithm} rounded a float32 result afterwards")
        monkeypatch.setattr(casts, "narrow", no_narrow)
    finite = np.isfinite(data.astype(np.float32)).all(axis=tuple(range(1, data.ndim)))
    # Algorithms that multiply padding zeros by an infinity give NaNs of their own:
    # the non-finite sample is checked only where every multiplication is a real tap.
    exact = algorithm == "col2im-nxc" or algorithm == "direct-blocked" and numba_mode
    checked = np.ones_like(finite) if exact else finite
    for with_bias in (False, True):
        expected = _oracle_rounded(data, weights, axes, bias if with_bias else None, dtype)
        for channels_last in (False, True):
            source = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
            with np.errstate(invalid="ignore"):  # NaNs of padding in some algorithms
                # Half-precision data as it is: the kernel's entry widens it (or
                # ``direct`` multiplies bfloat16 pairs).
                got = transposed_convolution(
                    source, weights, axes, dtype=np.dtype(np.float32),
                    channels_last=channels_last, bias=bias if with_bias else None,
                    algorithm=algorithm, result_dtype=dtype)
            assert got.dtype == dtype and got.flags.c_contiguous
            got = np.moveaxis(got, -1, 1) if channels_last else got
            # The float32 sums are exact, so the rounded values must be equal (widened
            # back exactly); the signs of zeros and NaNs depend on the order of the sums.
            np.testing.assert_array_equal(got[checked].astype(np.float32),
                                          expected[checked].astype(np.float32))
    wide = expected.astype(np.float32)
    assert (wide[0] != 0).any() and np.isnan(wide[3]).any()
    assert dtype != np.float16 or np.isinf(wide[2]).any()


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_direct_blocked_rounds_nans_like_astype(monkeypatch, dtype):
    # A NaN weight reaches whole lines; their bits must be those astype gives the
    # float32 kernel's NaNs (the rounding store's NaN rule, not the hardware's).
    monkeypatch.delenv(runtime_target.NO_NUMBA_ENV, raising=False)
    axes = (AxisPlan(20, 4, 2, 1, 1, 40),)
    data = np.ones((2, 6, 20), np.float32)
    weights = np.ones((2, 3, 20, 4), np.float32)
    weights[1, 2, 3, 1] = np.nan
    data[0, 1, 4] = -np.inf
    for channels_last in (False, True):
        source = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
        wide = transposed_convolution(source, weights, axes, dtype=np.dtype(np.float32),
                                      channels_last=channels_last, algorithm="direct-blocked")
        got = transposed_convolution(source, weights.astype(dtype), axes,
                                     dtype=np.dtype(np.float32), channels_last=channels_last,
                                     algorithm="direct-blocked", result_dtype=dtype)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(_bits(got), _bits(wide.astype(dtype)))
        assert np.isnan(wide).any()


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_public_functions_round_grouped_layers_once(numba_mode, dtype):
    # The benchmark's grouped layer in small: direct-blocked with numba, phases without.
    rng = np.random.default_rng(5)
    data = (rng.integers(-9, 10, (2, 64, 9, 9)) * 8).astype(dtype)
    weights = rng.integers(-9, 10, (64, 32, 4, 4)).astype(dtype)
    bias = rng.integers(-9, 10, 64).astype(dtype)
    got = ct.onnx_conv_transpose(data, weights, bias, group=2, strides=[2, 2], pads=[1] * 4)
    wide = ct.onnx_conv_transpose(data.astype(np.float32), weights.astype(np.float32),
                                  bias.astype(np.float32), group=2, strides=[2, 2], pads=[1] * 4)
    assert got.dtype == dtype
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(_bits(got), _bits(wide.astype(dtype)))
    assert (np.abs(wide) > 2048).any()  # sums float16 and bfloat16 must round


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
def test_software_float16_rounding_gives_the_bits_of_astype():
    # The kernels' float16 rounding on CPUs without float16 instructions, checked on
    # any CPU.
    import numba

    software = numba_casts.software_float16_bits

    @numba.njit
    def convert(values, out):
        for i in range(values.size):
            out[i] = software(values[i])

    rng = np.random.default_rng(12)
    bits = np.concatenate([_float32_edge_cases(),
                           rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32)])
    got = np.empty(bits.size, np.uint16)
    convert(bits.view(np.float32), got)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, _bits(bits.view(np.float32).astype(np.float16)))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is an optional extra")
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_choice_charges_a_float32_result_to_algorithms_that_round_it_afterwards(monkeypatch,
                                                                                dtype):
    # direct-blocked and direct's plane kernel round as they store; every other
    # algorithm (and direct's per-position kernel) pays a whole float32 result and a
    # rounding pass, which can turn the choice (and only for half results).
    monkeypatch.delenv(runtime_target.NO_NUMBA_ENV, raising=False)
    monkeypatch.delenv(environment.ALGORITHM_ENV, raising=False)
    axes = (AxisPlan(10, 4, 2, 1, 1, 20), AxisPlan(10, 4, 2, 1, 1, 20))
    planes = (2, 3, 5, 4, 4)  # the plane kernel in either layout
    per_position = (16, 1, 1, 4, 4)  # depthwise channels-last: the per-position kernel
    try:
        for weights_shape, channels_last, direct_rounds in (
                (planes, False, True), (planes, True, True), (per_position, False, True),
                (per_position, True, False)):
            outputs = 3 * weights_shape[0] * weights_shape[2] * 20 * 20  # batch 3
            margin = dispatch.ROUNDING_NS * outputs
            for gap in (0.5 * margin, 2 * margin):
                for rounder in ("direct", "direct-blocked"):
                    costs = {rounder: 1e6 + gap, "gemm-ncx": 1e6}
                    fake = {name: RawCost(cost) for name, cost in costs.items()}
                    monkeypatch.setattr(dispatch, "raw_estimates", lambda *args, fake=fake: fake)
                    dispatch.forget_estimates()
                    rounds = rounder == "direct-blocked" or direct_rounds
                    for result_dtype, expected in (
                            (None, "gemm-ncx"), (np.float32, "gemm-ncx"),
                            (dtype, rounder if rounds and gap < margin else "gemm-ncx")):
                        got = chosen(
                            3, axes, weights_shape, channels_last=channels_last,
                            result_dtype=None if result_dtype is None else np.dtype(result_dtype))
                        assert got == expected, (weights_shape, channels_last, rounder, gap,
                                                 result_dtype)
    finally:
        dispatch.forget_estimates()  # no choice made from the fake costs outlives the test
