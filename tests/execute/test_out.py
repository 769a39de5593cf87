"""``out=``: every array function writes its result into a given array.

The numbers are checked against the independent oracle (``tests/oracle.py``) for
every algorithm (forced), both layouts, the rounding dtypes (whose numba kernels
round straight into ``out``), the prepared calls of repeated layers, long 1-D lines
cut into segments, strided and overlapping ``out`` arrays; and the errors for an
``out`` that cannot take the result.
"""

import ml_dtypes
import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose import _kernels as kernels
from convtranspose._frontends import specs as _api
from convtranspose._kernels import schedules
from convtranspose._runtime import config as environment

ATTRIBUTES = dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1], dilations=[1, 2],
                  output_padding=[1, 0])


def operands(rng, dtype, data_format, batch=2, channels=(6, 10), spatial=(9, 7), kernel=(3, 2),
             groups=2, bias=True):
    ci, co = channels
    shape = ((batch,) + spatial + (ci,) if data_format == "NXC" else (batch, ci) + spatial)
    data = oracle.random_array(rng, shape, dtype)
    filter = oracle.random_array(rng, kernel + (ci, co // groups), dtype)  # XIO
    return data, filter, oracle.random_array(rng, (co,), dtype) if bias else None


def into_given(data, filter, bias, data_format, **attributes):
    """The oneDNN call with ``out=`` an array of the result's shape filled with ones,
    checked against the oracle; returns that array."""
    keywords = dict(ATTRIBUTES, groups=2, data_format=data_format, **attributes)
    case = oracle.onednn_conv_transpose_case(data, filter, bias, **keywords)
    out = np.ones(case.output_shape, data.dtype)
    assert ct.conv_transpose(data, filter, bias, out=out, **keywords) is out
    oracle.assert_matches(out, case)
    return out


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("algorithm", kernels.ALGORITHMS)
def test_every_algorithm_writes_into_out(monkeypatch, algorithm, data_format):
    monkeypatch.setenv(environment.ALGORITHM_ENV, algorithm)
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64, np.int32):
        for bias in (True, False):
            into_given(*operands(rng, dtype, data_format, bias=bias), data_format)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("algorithm", ["direct", "direct-blocked", "gemm-ncx"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_rounds_into_out(monkeypatch, algorithm, dtype, data_format):
    # The numba kernels round their float32 sums straight into out; BLAS rounds a
    # float32 result into it afterwards.
    monkeypatch.setenv(environment.ALGORITHM_ENV, algorithm)
    rng = np.random.default_rng(2)
    for bias in (True, False):
        into_given(*operands(rng, dtype, data_format, channels=(8, 24), bias=bias), data_format)


@pytest.mark.parametrize("shape, algorithm", [((1, 2, 5, 5), "dense"), ((1, 6, 9, 9), "direct")])
def test_prepared_calls_write_into_out(monkeypatch, shape, algorithm):
    # A tiny layer (dense) and a few-channel one (numba direct) are prepared after
    # their first call; later calls with out= go through the prepared call.  The
    # algorithm is forced: which one the cost model picks depends on the CPU.
    if algorithm == "direct":
        pytest.importorskip("numba")
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    rng = np.random.default_rng(3)
    X = rng.standard_normal(shape).astype(np.float32)
    W = rng.standard_normal((shape[1], 3, 3, 3)).astype(np.float32)
    keywords = dict(strides=[2, 2], pads=[1, 1, 1, 1])
    case = oracle.onnx_conv_transpose_case(X, W, **keywords)
    _api.prepared_calls.clear()
    for _ in range(3):
        out = np.full(case.output_shape, np.nan, np.float32)
        assert ct.onnx_conv_transpose(X, W, out=out, **keywords) is out
        oracle.assert_matches(out, case)
    assert _api.prepared_calls, "the layer was not prepared"


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_long_lines_in_segments_write_into_out(data_format):
    # The plane kernel cuts a long 1-D line into segments, each written into its
    # slice of the result.
    weights_shape = (1, 4, 3, 4)
    axis = ct.shapes.conv_transpose((1, 20000, 4), (4, 4, 3), strides=2, pads_begin=1,
                                    pads_end=1).axes[0]
    assert schedules.line_segmented(axis, weights_shape[1])
    rng = np.random.default_rng(4)
    data, filter, bias = operands(rng, np.float32, data_format, batch=1, channels=(4, 3),
                                  spatial=(20000,), kernel=(4,), groups=1)
    for given in (None, bias):
        keywords = dict(strides=2, pads_begin=1, pads_end=1, data_format=data_format)
        case = oracle.onednn_conv_transpose_case(data, filter, given, **keywords)
        out = np.ones(case.output_shape, np.float32)
        assert ct.conv_transpose(data, filter, given, out=out, **keywords) is out
        oracle.assert_matches(out, case)


@pytest.mark.parametrize("algorithm", kernels.ALGORITHMS)
def test_strided_out_is_written_only_where_it_views(monkeypatch, algorithm):
    monkeypatch.setenv(environment.ALGORITHM_ENV, algorithm)
    rng = np.random.default_rng(5)
    data, filter, _ = operands(rng, np.float32, "NCX")
    keywords = dict(ATTRIBUTES, groups=2, data_format="NCX")
    case = oracle.onednn_conv_transpose_case(data, filter, **keywords)
    shape = case.output_shape
    for _ in range(2):  # the second call through the prepared call, if any
        wide = np.ones(shape[:-1] + (2 * shape[-1],), np.float32)
        transposed = np.ones(shape[::-1], np.float32)
        for out in (wide[..., ::2], transposed.T):
            assert ct.conv_transpose(data, filter, out=out, **keywords) is out
            oracle.assert_matches(out, case)
        assert (wide[..., 1::2] == 1).all()


@pytest.mark.parametrize("algorithm", kernels.ALGORITHMS)
def test_out_may_be_an_operand(monkeypatch, algorithm):
    # Layers whose result has the shape of an operand, written over it: the result
    # is that of the operand before the call.
    monkeypatch.setenv(environment.ALGORITHM_ENV, algorithm)
    rng = np.random.default_rng(6)
    for _ in range(2):  # the second call through the prepared call, if any
        data = rng.standard_normal((2, 5, 5, 4)).astype(np.float32)  # NXC, 1x1, 4 -> 4
        filter = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)  # XIO
        case = oracle.onednn_conv_transpose_case(data.copy(), filter)
        assert ct.conv_transpose(data, filter, out=data) is data
        oracle.assert_matches(data, case)
        data = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)  # NCX, k2 s2, 3 -> 3
        shared = np.empty(3 * 8 * 8, np.float32)
        out = shared.reshape(1, 3, 8, 8)
        filter = shared[:3 * 3 * 2 * 2].reshape(3, 3, 2, 2)  # IOX, in the same memory
        filter[...] = rng.standard_normal(filter.shape)
        case = oracle.onnx_conv_transpose_case(data, filter.copy(), strides=[2, 2])
        assert ct.onnx_conv_transpose(data, filter, strides=[2, 2], out=out) is out
        oracle.assert_matches(out, case)


@pytest.mark.parametrize("out, error, words", [
    (np.ones((1, 2, 7, 7), np.float32), ct.ConvTransposeError,
     ["out has shape (1, 2, 7, 7)", "(1, 2, 9, 9)"]),
    (np.ones((1, 2, 9, 9), np.float64), TypeError, ["out has dtype float64", "float32"]),
    ([[0.0]], TypeError, ["out must be a numpy.ndarray", "list"]),
    (np.ma.ones((1, 2, 9, 9), np.float32), TypeError, ["MaskedArray"]),
])
def test_out_that_cannot_take_the_result(out, error, words):
    X = np.ones((1, 3, 5, 5), np.float32)
    W = np.ones((3, 2, 3, 3), np.float32)
    copies = X.copy(), W.copy()
    with pytest.raises(error) as raised:
        ct.onnx_conv_transpose(X, W, strides=[2, 2], pads=[1, 1, 1, 1], out=out)
    for word in words:
        assert word in str(raised.value)
    np.testing.assert_array_equal(X, copies[0])
    np.testing.assert_array_equal(W, copies[1])


def test_read_only_out():
    out = np.zeros((1, 2, 9, 9), np.float32)
    out.flags.writeable = False
    with pytest.raises(ct.ConvTransposeError, match="out is read-only"):
        ct.convolution_backprop_data(np.ones((1, 3, 5, 5), np.float32),
                                     np.ones((3, 2, 3, 3), np.float32), strides=2,
                                     pads_begin=1, pads_end=1, out=out)
    assert not out.any()
