"""Element types: every dtype in every dialect, accumulation and rounding rules.

docs/semantics.md "Numbers": float16/bfloat16 accumulate in float32 and round once at
the end; integers accumulate exactly (in int64) and wrap to the element type.  The
hand-made cases below distinguish those rules from the tempting alternatives
(accumulating in the element type, saturating) with numbers small enough to check
by eye.
"""

import ml_dtypes
import numpy as np
import pytest

import convtranspose as ct
import oracle

DTYPES = oracle.all_dtypes()
DTYPE_IDS = [d.name for d in DTYPES]


def _dialect_cases(dtype, rng):
    """One moderately sized, grouped, strided, padded rank-2 problem per dialect."""
    data = oracle.random_array(rng, (2, 4, 3, 4), dtype)
    iox = oracle.random_array(rng, (4, 3, 3, 2), dtype)            # I=4, O=3 per group
    bias = oracle.random_array(rng, (6,), dtype)
    ov = dict(strides=[2, 1], dilations=[1, 2], pads_begin=[1, 0], pads_end=[0, 2],
              output_padding=[1, 0])
    yield ("convolution_backprop_data",
           lambda: ct.convolution_backprop_data(data, iox, **ov),
           lambda: oracle.openvino_cbpd_case(data, iox, **ov))
    gi = iox.reshape(2, 2, 3, 3, 2)
    yield ("group_convolution_backprop_data",
           lambda: ct.group_convolution_backprop_data(data, gi, [7, 5], strides=2,
                                                      auto_pad="same_upper"),
           lambda: oracle.openvino_group_cbpd_case(data, gi, [7, 5], strides=2,
                                                   auto_pad="same_upper"))
    nxc = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    xio = np.ascontiguousarray(np.moveaxis(iox, (0, 1), (2, 3)))
    dnn = dict(strides=[2, 3], dilations=[2, 1], pads_begin=[0, 1], pads_end=[1, 1],
               output_padding=[1, 2], groups=2)
    yield ("conv_transpose",
           lambda: ct.conv_transpose(nxc, xio, bias, **dnn),
           lambda: oracle.onednn_conv_transpose_case(nxc, xio, bias, **dnn))
    onnx = dict(strides=[1, 2], pads=[1, 0, 0, 1], group=2, output_padding=[0, 1])
    yield ("onnx_conv_transpose",
           lambda: ct.onnx_conv_transpose(data, iox, bias, **onnx),
           lambda: oracle.onnx_conv_transpose_case(data, iox, bias, **onnx))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_every_dtype_in_every_dialect_matches_the_oracle(dtype):
    rng = np.random.default_rng(7)
    for name, call, case_call in _dialect_cases(dtype, rng):
        result = call()
        assert result.dtype == dtype, name
        oracle.assert_matches(result, case_call())


# ---------------------------------------------------------------------------
# Half-precision types: accumulate in float32, round once.

def _sum_of_channels(dtype, values, dialect):
    """One output element equal to sum(values) (one data channel per value, weights 1)."""
    c = len(values)
    data = np.array(values, dtype=np.float64).astype(dtype).reshape(1, c, 1)
    ones = np.ones((c, 1, 1), dtype)
    if dialect == "openvino":
        return ct.convolution_backprop_data(data, ones)[0, 0, 0]
    if dialect == "group":
        return ct.group_convolution_backprop_data(data, ones[None])[0, 0, 0]
    if dialect == "onednn":
        return ct.conv_transpose(data, ones, data_format="NCX", filter_format="IOX")[0, 0, 0]
    return ct.onnx_conv_transpose(data, ones)[0, 0, 0]


DIALECTS = ["openvino", "group", "onednn", "onnx"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_float16_accumulates_in_float32(dialect):
    # float16 spacing at 2048 is 2: 2048 + 1 rounds back to 2048 (ties to even), so
    # accumulating in float16 gives 2048; the exact sum 2050 is representable.
    assert _sum_of_channels(np.float16, [2048, 1, 1], dialect) == 2050
    # 60000 + 60000 overflows float16 (max 65504) but not float32; the final 60000 fits.
    assert _sum_of_channels(np.float16, [60000, 60000, -60000], dialect) == 60000


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bfloat16_accumulates_in_float32(dialect):
    # bfloat16 spacing at 256 is 2: stepwise bfloat16 gives 256, float32 gives 258.
    result = _sum_of_channels(ml_dtypes.bfloat16, [256, 1, 1], dialect)
    assert result.dtype == ml_dtypes.bfloat16 and float(result) == 258


@pytest.mark.parametrize("dialect", DIALECTS)
def test_half_precision_rounds_once_at_the_end(dialect):
    # 1 + 2**-11 + 2**-11: exactly 1 + 2**-10, which float16 represents; rounding after
    # each step would give 1 + 2**-11 -> 1 (tie to even) twice, so 1.
    assert _sum_of_channels(np.float16, [1, 2**-11, 2**-11], dialect) == 1 + 2**-10
    # Overflow of the final value is the one rounding: +inf, not an error.
    with np.errstate(over="ignore"):
        assert _sum_of_channels(np.float16, [60000, 60000], dialect) == np.inf


# ---------------------------------------------------------------------------
# Integers: exact accumulation, wrap-around to the element type.

WRAP_CASES = [
    # dtype, data values (one per channel), weight, expected, derivation
    (np.int8, [100, 100], 2, -112, "100*2 + 100*2 = 400 = 256 + 144 -> 144 - 256 = -112"),
    (np.int8, [-128, 1], -1, 127, "128 - 1 = 127 (the intermediate 128 does not saturate)"),
    (np.uint8, [200], 2, 144, "400 mod 256 = 144"),
    (np.uint8, [0, 1], 255, 255, "exact"),
    (np.int16, [30000, 30000, -30000], 1, 30000, "the intermediate 60000 wraps and unwraps"),
    (np.uint16, [65535, 65535], 65535, 2, "2 * 65535**2 = 2 * (65536*65534 + 1) -> 2"),
    (np.int32, [2**30, 2**30], 2, 0, "2**32 -> 0"),
    (np.uint32, [2**31], 3, 2**31, "3 * 2**31 = 2**32 + 2**31 -> 2**31"),
    (np.int64, [2**62, 2**62], 2, 0, "2**64 -> 0"),
    (np.int64, [-(2**63)], -1, -(2**63), "2**63 wraps to -2**63"),
    (np.uint64, [2**64 - 1], 2**64 - 1, 1, "(2**64 - 1)**2 = 2**128 - 2**65 + 1 -> 1"),
    (np.uint64, [2**63, 2**63, 5], 1, 5, "2**64 + 5 -> 5"),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dtype, values, weight, expected, derivation", WRAP_CASES,
                         ids=[f"{np.dtype(c[0]).name}:{c[4]}" for c in WRAP_CASES])
def test_integers_accumulate_exactly_and_wrap(dialect, dtype, values, weight, expected,
                                              derivation):
    c = len(values)
    data = np.array(values, dtype=dtype).reshape(1, c, 1)
    weights = np.full((c, 1, 1), weight, dtype=dtype)
    if dialect == "openvino":
        result = ct.convolution_backprop_data(data, weights)
    elif dialect == "group":
        result = ct.group_convolution_backprop_data(data, weights[None])
    elif dialect == "onednn":
        result = ct.conv_transpose(data, weights, data_format="NCX", filter_format="IOX")
    else:
        result = ct.onnx_conv_transpose(data, weights)
    assert result.dtype == np.dtype(dtype)
    assert result.tolist() == [[[expected]]]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.uint64], ids=str)
def test_integer_bias_wraps_too(dtype):
    info = np.iinfo(dtype)
    data = np.array([[[info.max]]], dtype)
    weights = np.ones((1, 1, 1), dtype)
    bias = np.array([1], dtype)
    expected = info.min  # max + 1 wraps to min
    assert ct.onnx_conv_transpose(data, weights, bias).tolist() == [[[expected]]]
    assert ct.conv_transpose(data, weights, bias, data_format="NCX",
                             filter_format="IOX").tolist() == [[[expected]]]


# ---------------------------------------------------------------------------
# Inputs the dtype rules must not trip over.

def test_python_lists_are_arrays_of_their_natural_dtype():
    result = ct.convolution_backprop_data([[[1, 2, 3]]], [[[1, 10, 100]]], strides=2)
    assert result.dtype == np.int64
    assert result.tolist() == [[[1, 10, 102, 20, 203, 30, 300]]]
    result = ct.onnx_conv_transpose([[[1.0, 2.0, 3.0]]], [[[1.0, 10.0, 100.0]]], strides=[2])
    assert result.dtype == np.float64
    assert result.tolist() == [[[1, 10, 102, 20, 203, 30, 300]]]


@pytest.mark.parametrize("dtype", [">f4", ">i4", "<f8", ">u2"])
def test_non_native_byte_order(dtype):
    rng = np.random.default_rng(3)
    data = oracle.random_array(rng, (2, 2, 3), np.dtype(dtype).newbyteorder("="))
    data = data.astype(dtype)
    filter = oracle.random_array(rng, (2, 3, 2), np.dtype(dtype).newbyteorder("=")).astype(dtype)
    result = ct.convolution_backprop_data(data, filter, strides=2, pads_begin=1)
    case = oracle.openvino_cbpd_case(data.astype(data.dtype.newbyteorder("=")),
                                     filter.astype(filter.dtype.newbyteorder("=")),
                                     strides=2, pads_begin=1)
    assert result.dtype.kind == data.dtype.kind and result.dtype.itemsize == data.dtype.itemsize
    oracle.assert_matches(result.astype(result.dtype.newbyteorder("=")), case)


@pytest.mark.parametrize("dtype", [np.float32, np.int16], ids=str)
def test_strided_fortran_and_readonly_views(dtype):
    rng = np.random.default_rng(5)
    big = oracle.random_array(rng, (3, 6, 5, 8), dtype)
    data = big[::2, ::2, ::-1, 1::2]                        # (2, 3, 5, 4), negative strides
    filter = np.asfortranarray(oracle.random_array(rng, (3, 2, 2, 3), dtype))
    filter.flags.writeable = False
    data_copy, filter_copy = data.copy(), filter.copy()
    result = ct.convolution_backprop_data(data, filter, strides=[1, 2], pads_end=[1, 0])
    case = oracle.openvino_cbpd_case(data_copy, filter_copy, strides=[1, 2], pads_end=[1, 0])
    oracle.assert_matches(result, case)
    np.testing.assert_array_equal(data, data_copy)
    assert not np.shares_memory(result, big) and not np.shares_memory(result, filter)
    nxc_view = np.moveaxis(data, 1, -1)                      # a non-contiguous NXC view
    xio_view = np.moveaxis(filter, (0, 1), (2, 3))
    out = ct.conv_transpose(nxc_view, xio_view, strides=[1, 2], pads_end=[1, 0])
    oracle.assert_matches(out, oracle.onednn_conv_transpose_case(
        nxc_view, xio_view, strides=[1, 2], pads_end=[1, 0]))
    assert out.flags.writeable
