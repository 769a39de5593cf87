"""Repeated calls of an array function are answered from a record of an earlier call
(without resolving the plan again): every answer equals the slow oracle, and nothing the
whole function checks is skipped (the attributes' types, the memory limit, an edited
filter, ``out`` and the bias, the planning)."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends import specs
from convtranspose._plan import dialects

RNG = np.random.default_rng(20261129)


def _values(shape):
    # Small integers: every sum is exact in float32, so results compare with ==.
    return RNG.integers(-3, 4, size=shape).astype(np.float32)


def _nhwc(array):
    return np.ascontiguousarray(np.moveaxis(array, 1, -1))


# name -> (the dialect's rule in ``dialects``, the call on NCHW data and an IOHW filter,
# the oracle's result on them)
CALLS = {
    "openvino": ("convolution_backprop_data",
                 lambda x, w: ct.convolution_backprop_data(x, w, strides=2, pads_begin=1,
                                                           pads_end=[0, 1]),
                 lambda x, w: oracle.openvino_cbpd(x, w, strides=2, pads_begin=1,
                                                   pads_end=[0, 1])),
    "onnx": ("onnx_conv_transpose",
             lambda x, w: ct.onnx_conv_transpose(x, w, strides=[3, 2], pads=[1, 0, 0, 1]),
             lambda x, w: oracle.onnx_conv_transpose(x, w, strides=[3, 2], pads=[1, 0, 0, 1])),
    "torch": ("torch_conv_transpose",
              lambda x, w: ct.torch_conv_transpose(x, w, None, 2, 1, 1),
              lambda x, w: oracle.onnx_conv_transpose(x, w, strides=[2, 2], pads=[1, 1, 0, 0])),
}


@pytest.fixture
def preparable(monkeypatch):
    """A prepared call for every layer (which algorithm the planner picks for a tiny
    layer depends on the CPU, and only some have one): ``dense`` is forced."""
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "dense")
    ct.clear_caches()
    yield
    ct.clear_caches()


def _forbid_resolution(patch, rule: str):
    def refused(*args, **kwargs):
        raise AssertionError("the repeated call resolved its plan again")
    patch.setattr(dialects, rule, refused)


@pytest.mark.parametrize("name", CALLS)
def test_repeated_calls_resolve_nothing_and_match_the_oracle(preparable, monkeypatch, name):
    rule, call, expected = CALLS[name]
    data, filter = _values((2, 3, 4, 5)), _values((3, 2, 3, 3))
    for _ in range(2):
        np.testing.assert_array_equal(call(data, filter), expected(data, filter))
    with monkeypatch.context() as patch:
        _forbid_resolution(patch, rule)
        other_data = _values(data.shape)  # another array of the same shape
        np.testing.assert_array_equal(call(other_data, filter), expected(other_data, filter))
    filter[1, 0, 2, 1] += 2  # edited in place: the prepared call declines, made again
    np.testing.assert_array_equal(call(data, filter), expected(data, filter))
    with monkeypatch.context() as patch:
        _forbid_resolution(patch, rule)
        np.testing.assert_array_equal(call(data, filter), expected(data, filter))


def _ohwi(filter):
    return np.ascontiguousarray(filter.transpose(1, 2, 3, 0))


def _tflite(data, filter, bias, **out):
    shape = [data.shape[0], 2 * data.shape[1] + 1, 2 * data.shape[2] + 1, filter.shape[0]]
    return ct.tflite_transpose_conv(shape, filter, data, bias, padding="VALID", stride_h=2,
                                    stride_w=2, **out)


def _same(array):
    return array


# name -> (the dialect's rule, the data's and the filter's layout from NCHW and IOHW,
# the call on them with a bias (and ``out``), the result's layout from NCHW); every
# one computes ONNX's strides=[2, 2] layer.
BIASED = {
    "onnx, B by position": (
        "onnx_conv_transpose", _same, _same,
        lambda x, w, b, **out: ct.onnx_conv_transpose(x, w, b, strides=[2, 2], **out), _same),
    "onnx, B by name": (
        "onnx_conv_transpose", _same, _same,
        lambda x, w, b, **out: ct.onnx_conv_transpose(x, w, strides=[2, 2], B=b, **out), _same),
    "torch": ("torch_conv_transpose", _same, _same,
              lambda x, w, b, **out: ct.torch_conv_transpose(x, w, b, 2, **out), _same),
    "tflite, bias fourth": ("tflite_transpose_conv", _nhwc, _ohwi, _tflite, _nhwc),
}


@pytest.mark.parametrize("name", BIASED)
def test_repeated_calls_with_a_bias_resolve_nothing_and_read_the_bias_given(
        preparable, monkeypatch, name):
    """A bias is an operand, not an attribute: a repeated call adds the bias it is given
    (edited in place, or another array) without resolving anything; one of another
    dtype or shape gets the fresh call's refusal; ``out`` overlapping it gets the result
    of the bias as it was."""
    rule, data_layout, filter_layout, call, result_layout = BIASED[name]
    nchw, iohw, bias = _values((2, 3, 4, 5)), _values((3, 2, 3, 3)), _values((2,))
    data, filter = data_layout(nchw), filter_layout(iohw)

    def expected(of_bias):
        return result_layout(oracle.onnx_conv_transpose(nchw, iohw, of_bias, strides=[2, 2]))

    for _ in range(2):
        np.testing.assert_array_equal(call(data, filter, bias), expected(bias))
    with monkeypatch.context() as patch:
        _forbid_resolution(patch, rule)
        bias[1] += 2  # edited in place: read as it is now
        np.testing.assert_array_equal(call(data, filter, bias), expected(bias))
        other = _values(bias.shape)
        np.testing.assert_array_equal(call(data, filter, other), expected(other))
    for wrong, error in [(bias.astype(np.float64), TypeError),
                         (_values((3,)), ct.ConvTransposeError)]:
        with pytest.raises(error):
            call(data, filter, wrong)
    np.testing.assert_array_equal(call(data, filter, None), expected(None))
    out = np.full(expected(bias).shape, np.nan, np.float32)
    for _ in range(3):
        assert call(data, filter, bias, out=out) is out
        np.testing.assert_array_equal(out, expected(bias))
    shared = out.reshape(-1)[:2]  # the bias in ``out``: read as it was before the call
    shared[...] = bias
    assert call(data, filter, shared, out=out) is out
    np.testing.assert_array_equal(out, expected(bias))


def test_tflite_operands_in_the_ops_order_are_answered_too(preparable, monkeypatch):
    data, filter = _values((1, 3, 4, 5)), _values((3, 2, 3, 3))  # NCHW, IOHW
    weights = np.ascontiguousarray(filter.transpose(1, 2, 3, 0))  # OHWI
    expected = _nhwc(oracle.onnx_conv_transpose(data, filter, strides=[2, 2]))
    shape = list(expected.shape)
    for _ in range(2):
        np.testing.assert_array_equal(
            ct.tflite_transpose_conv(shape, weights, _nhwc(data), padding="VALID", stride_h=2,
                                     stride_w=2), expected)
    with monkeypatch.context() as patch:
        _forbid_resolution(patch, "tflite_transpose_conv")
        got = ct.tflite_transpose_conv(shape, weights, _nhwc(data), padding="VALID",
                                       stride_h=2, stride_w=2)
    np.testing.assert_array_equal(got, expected)
    # Another output shape (a positional argument): the fresh call's answer.
    again = lambda: ct.tflite_transpose_conv(  # noqa: E731
        [*shape[:2], shape[2] - 1, shape[3]], weights, _nhwc(data), padding="VALID",
        stride_h=2, stride_w=2)
    after = _outcome(again)
    ct.clear_caches()
    _assert_same_outcome(after, _outcome(again))


def _outcome(call):
    try:
        return call()
    except ct.ConvTransposeError as error:
        return type(error)


def _assert_same_outcome(got, expected):
    if isinstance(expected, type):
        assert got is expected  # refused, as the fresh call was
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("lookalike", [[True, 2], [2.0, 2], [np.int64(2), 2], (2, 2), 2,
                                       np.array([2, 2])])
def test_attributes_equal_to_a_recorded_call_get_a_fresh_calls_answer(preparable, lookalike):
    data, filter = _values((1, 3, 4, 5)), _values((3, 2, 3, 3))
    again = lambda: ct.onnx_conv_transpose(data, filter, strides=lookalike)  # noqa: E731
    ct.clear_caches()
    fresh = _outcome(again)
    for _ in range(2):
        ct.onnx_conv_transpose(data, filter, strides=[2, 2])  # recorded
    after = _outcome(again)
    _assert_same_outcome(after, fresh)
    if not isinstance(fresh, type):
        np.testing.assert_array_equal(after, oracle.onnx_conv_transpose(data, filter,
                                                                        strides=[2, 2]))


def test_keywords_in_another_order_with_swapped_values_are_not_answered(preparable):
    # The values in the order given are the recorded ones; the names say otherwise.
    data, filter = _values((1, 3, 4, 5)), _values((3, 2, 3, 3))
    swapped = lambda: ct.onnx_conv_transpose(data, filter, pads=[2, 2],  # noqa: E731
                                             dilations=[1, 1, 1, 1])
    ct.clear_caches()
    fresh = _outcome(swapped)
    for _ in range(2):
        ct.onnx_conv_transpose(data, filter, dilations=[2, 2], pads=[1, 1, 1, 1])
    _assert_same_outcome(_outcome(swapped), fresh)


def test_a_lower_memory_limit_refuses_recorded_calls_and_prepared_layers(preparable):
    data, filter = _values((1, 3, 4, 5)), _values((3, 2, 3, 3))
    layer = ct.prepare(ct.onnx_conv_transpose, W=filter, strides=[2, 2])
    calls = {"function": lambda: ct.onnx_conv_transpose(data, filter, strides=[2, 2]),
             "prepared layer": lambda: layer(data)}
    expected = oracle.onnx_conv_transpose(data, filter, strides=[2, 2])
    for name, call in calls.items():
        for _ in range(3):
            np.testing.assert_array_equal(call(), expected)
        with ct.limit_memory(expected.nbytes // 2), pytest.raises(ct.ResultTooLargeError):
            call()
        np.testing.assert_array_equal(call(), expected)  # and answered again after


def test_out_bias_and_another_planning_after_a_recorded_call(preparable):
    data, filter, bias = _values((2, 3, 4, 5)), _values((3, 2, 3, 3)), _values((2,))
    expected = oracle.onnx_conv_transpose(data, filter, strides=[2, 2])
    for _ in range(2):
        ct.onnx_conv_transpose(data, filter, strides=[2, 2])
    out = np.full(expected.shape, np.nan, np.float32)
    assert ct.onnx_conv_transpose(data, filter, strides=[2, 2], out=out) is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(ct.onnx_conv_transpose(data, filter, bias, strides=[2, 2]),
                                  oracle.onnx_conv_transpose(data, filter, bias, strides=[2, 2]))
    specs.prepared_calls.clear()  # the record's prepared call is gone: made again
    np.testing.assert_array_equal(ct.onnx_conv_transpose(data, filter, strides=[2, 2]), expected)
    previous = ct.set_planning("estimate")  # a new planning generation
    try:
        for _ in range(2):
            np.testing.assert_array_equal(ct.onnx_conv_transpose(data, filter, strides=[2, 2]),
                                          expected)
    finally:
        ct.set_planning(previous)


@pytest.mark.parametrize("algorithm", ["dense", "direct"])
def test_calls_with_out_are_answered_from_their_own_record(preparable, monkeypatch, algorithm):
    """Calls that pass ``out`` keep a record of their own: answered without resolving,
    into the caller's array, and any ``out`` the prepared call cannot write straight into
    (another shape or dtype, not contiguous, read-only, overlapping an operand, not an
    ndarray) gets the whole function's answer: the right result copied in, or its error."""
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    data, filter = _values((2, 3, 4, 5)), _values((3, 2, 3, 3))
    expected = oracle.onnx_conv_transpose(data, filter, strides=[2, 2])

    def call(out, operand=data, weights=filter):
        return ct.onnx_conv_transpose(operand, weights, strides=[2, 2], out=out)

    out = np.full(expected.shape, np.nan, np.float32)
    for _ in range(2):
        assert call(out) is out
    with monkeypatch.context() as patch:
        _forbid_resolution(patch, "onnx_conv_transpose")
        out[...] = np.nan
        assert call(out) is out
        np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(call(None), expected)  # a record of its own
    filter[0, 1, 2, 0] -= 3  # edited in place: the prepared call declines
    expected = oracle.onnx_conv_transpose(data, filter, strides=[2, 2])
    assert call(out) is out
    np.testing.assert_array_equal(out, expected)
    strided = np.full((*expected.shape[:-1], 2 * expected.shape[-1]), np.nan, np.float32)
    assert call(strided[..., ::2]) is not None
    np.testing.assert_array_equal(strided[..., ::2], expected)
    assert np.isnan(strided[..., 1::2]).all()
    # An output sharing the data's memory: the data is read as it was before the call.
    shared = np.zeros(expected.size, np.float32)
    operand = shared[:data.size].reshape(data.shape)
    operand[...] = data
    overlapping = shared.reshape(expected.shape)
    assert call(overlapping, operand) is overlapping
    np.testing.assert_array_equal(overlapping, expected)
    read_only = np.zeros_like(expected)
    read_only.flags.writeable = False
    refusals = [(read_only, ct.ConvTransposeError), (np.zeros_like(expected[:1]),
                ct.ConvTransposeError), (expected.astype(np.float64), TypeError),
                (expected.tolist(), TypeError)]
    for refused, error in refusals:
        with pytest.raises(error):
            call(refused)
    np.testing.assert_array_equal(call(out), expected)
    np.testing.assert_array_equal(out, expected)


# -- the quantized dialects' records ------------------------------------------------------

@pytest.mark.parametrize("value, kept, same", [
    (0.5, 0.5, True), (-0.0, 0.0, False), (float("nan"), float("nan"), False),
    (3, 3, True), (True, 1, False), ("SAME", "SAME", True), (None, None, True),
    (np.float32(0.5), np.float32(0.5), True), (np.float32(0.5), np.float64(0.5), False),
    (np.float32(-0.0), np.float32(0.0), False), (np.uint8(3), np.int8(3), False),
    ([2, 2], [2, 2], True), ([2, True], [2, 1], False), ((2, 2), [2, 2], False),
    ([2, 2], [2, 2, 2], False),
    (np.array([1, 2], np.int32), np.array([1, 2], np.int32), True),
    (np.array([1, 2], np.int32), np.array([1, 2], np.int64), False),
    (np.array([0.0, 1.0]), np.array([-0.0, 1.0]), False),
    (np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2), False),
    (np.arange(6).reshape(2, 3).T, np.arange(6).reshape(2, 3).T.copy(), True),
])
def test_a_quantized_record_matches_equal_values_of_one_type_and_bits_only(value, kept, same):
    """The rules of ``repeated_quantized``: the same type, and for NumPy values the same
    dtype, shape and bits; floats of the same value and sign; NaN never."""
    from convtranspose._frontends.repeated_quantized import matches

    assert matches(value, kept) is same


@pytest.mark.parametrize("lookalike", [
    dict(strides=[2, True]), dict(strides=[2, 1.0]), dict(strides=[2, np.int64(1)]),
    dict(strides=(2, 1)), dict(x_scale=np.float64(0.02)),
    dict(w_scale=np.full(3, 0.01, np.float32).view(np.int32)),
    dict(w_zero_point=np.zeros(3, np.uint8)),
    dict(w_scale=np.full(3, 0.01, np.float32).reshape(3, 1))])
def test_quantized_arguments_equal_to_a_recorded_calls_get_a_fresh_calls_answer(lookalike):
    """A quantized call whose arguments equal a recorded call's by value but not by the
    record's rules (a bool or float stride, a tuple for a list, a per-channel array of
    the recorded values in another dtype or shape) gets what a fresh call gets: the
    same result or the same refusal."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 2, 4, 5)).astype(np.uint8)
    w = rng.integers(-127, 128, (2, 3, 3, 3)).astype(np.int8)
    recorded = dict(x_scale=np.float32(0.02), x_zero_point=np.uint8(3), w=w,
                    w_scale=np.full(3, 0.01, np.float32), w_zero_point=np.zeros(3, np.int8),
                    y_scale=np.float32(0.05), y_zero_point=np.uint8(128), strides=[2, 1])

    def again():
        try:
            return ct.qlinear_conv_transpose(x, **dict(recorded, **lookalike))
        except (ct.ConvTransposeError, TypeError) as error:
            return type(error)

    ct.clear_caches()
    fresh = again()
    for _ in range(3):
        ct.qlinear_conv_transpose(x, **recorded)  # recorded, then answered
    _assert_same_outcome(again(), fresh)
