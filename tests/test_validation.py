"""One test per validation rule (docs/semantics.md), per dialect.

Each rule breaks exactly one thing in an otherwise valid call and asserts the
exception type (``ConvTransposeError``, a ``ValueError``, for shapes and
attributes; ``TypeError`` for dtypes) and the key words of the message: the
argument's name and the value received.  Shape and attribute rules are checked
through both the array function and its ``ct.shapes`` twin.  Garbage of every kind
in every argument may only ever raise those two documented types.
"""

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convtranspose as ct

F32 = np.float32


def zeros(shape, dtype=F32):
    return np.zeros(shape, dtype)


# Each dialect: a valid base call (rank 2), its argument names, and how to call it with
# one thing changed.  ``shapes=True`` calls the ct.shapes twin on the same shapes.

class Dialect:
    def __init__(self, name, data, filter, bias_len, data_name, filter_name, bias_name,
                 base_keywords):
        self.name, self.data, self.filter = name, data, filter
        self.bias_len, self.data_name, self.filter_name = bias_len, data_name, filter_name
        self.bias_name, self.base = bias_name, base_keywords

    def call(self, *, data=None, filter=None, bias=None, dtype=F32, shapes=False, **keywords):
        data = zeros(self.data, dtype) if data is None else data
        filter = zeros(self.filter, dtype) if filter is None else filter
        keywords = {**self.base, **keywords}
        function = getattr(ct.shapes if shapes else ct, self.name)
        if shapes:
            data, filter = np.shape(data), np.shape(filter)
            bias = None if bias is None else np.shape(bias)
        if self.bias_name is not None:
            return function(data, filter, bias, **keywords)
        assert bias is None
        return function(data, filter, **keywords)

    def __repr__(self):
        return self.name


OPENVINO = Dialect("convolution_backprop_data", (1, 4, 3, 3), (4, 2, 3, 3), None,
                   "data", "filter", None, {})
GROUP = Dialect("group_convolution_backprop_data", (1, 4, 3, 3), (2, 2, 3, 3, 3), None,
                "data", "filter", None, {})
ONEDNN = Dialect("conv_transpose", (1, 3, 3, 4), (3, 3, 4, 2), 2, "input", "filter", "bias",
                 {"strides": 2})
ONNX = Dialect("onnx_conv_transpose", (1, 4, 3, 3), (4, 2, 3, 3), 2, "X", "W", "B", {})
DIALECTS = [OPENVINO, GROUP, ONEDNN, ONNX]
WITH_BIAS = [ONEDNN, ONNX]


def raises(exc_type, words, call):
    """``call()`` raises ``exc_type`` and its message contains every word (case-insensitive)."""
    with pytest.raises(exc_type) as info:
        call()
    message = str(info.value)
    missing = [w for w in words if w.lower() not in message.lower()]
    assert not missing, f"message {message!r} lacks {missing}"
    return message


def shape_rule(dialect, words, **change):
    """A shape/attribute rule: ConvTransposeError from the array function and its twin."""
    raises(ct.ConvTransposeError, words, lambda: dialect.call(**change))
    raises(ct.ConvTransposeError, words, lambda: dialect.call(shapes=True, **change))


def test_the_error_type_is_a_value_error():
    assert issubclass(ct.ConvTransposeError, ValueError)
    with pytest.raises(ValueError):
        ct.convolution_backprop_data(zeros((1, 4)), zeros((4, 2, 3)))


# ---------------------------------------------------------------------------
# Element types

@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_dtype_mismatch_names_both_dtypes(dialect):
    raises(TypeError, [dialect.data_name, dialect.filter_name, "float32", "float64"],
           lambda: dialect.call(filter=zeros(dialect.filter, np.float64)))
    raises(TypeError, ["int8", "uint8"],
           lambda: dialect.call(data=zeros(dialect.data, np.int8),
                                filter=zeros(dialect.filter, np.uint8)))
    raises(TypeError, ["bfloat16", "float16"],
           lambda: dialect.call(data=zeros(dialect.data, ml_dtypes.bfloat16),
                                filter=zeros(dialect.filter, np.float16)))


@pytest.mark.parametrize("dialect", WITH_BIAS, ids=repr)
def test_bias_dtype_mismatch(dialect):
    raises(TypeError, [dialect.bias_name, "float64", "float32"],
           lambda: dialect.call(bias=zeros((dialect.bias_len,), np.float64)))


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
@pytest.mark.parametrize("dtype, word", [
    (bool, "bool"), (np.complex64, "complex64"), (complex, "complex128"), (object, "object"),
    ("U3", "<U3"), ("m8[s]", "timedelta64"), ("M8[D]", "datetime64"), ("V4", "V4"),
    (np.longdouble, "float128" if np.dtype(np.longdouble).itemsize == 16 else "float64"),
    (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"), (ml_dtypes.int4, "int4"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_non_numeric_dtypes_are_refused(dialect, dtype, word):
    if np.dtype(dtype) == np.float64:
        pytest.skip("longdouble is float64 on this platform, a supported type")
    raises(TypeError, [word, "not supported"],
           lambda: dialect.call(data=zeros(dialect.data, dtype), filter=zeros(dialect.filter, dtype)))


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_masked_arrays_are_refused(dialect):
    masked = np.ma.masked_array(zeros(dialect.data), mask=False)
    raises(TypeError, [dialect.data_name, "masked"], lambda: dialect.call(data=masked))


# ---------------------------------------------------------------------------
# output_shape

@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)  # all four take an output_shape
@pytest.mark.parametrize("value, words", [
    ([7, 2.5], ["output_shape[1]", "2.5", "integer"]),
    (np.array([7.0, 7.0]), ["output_shape", "float64", "integers"]),
    (np.array([True, True]), ["output_shape", "bool"]),
    ([True, 7], ["output_shape[0]", "bool", "True"]),
    (["7", 7], ["output_shape[0]", "'7'"]),
    ([None, 7], ["output_shape[0]", "None"]),
    ("77", ["output_shape", "'77'"]),
    (7, ["output_shape", "7"]),
    (np.array([[7, 7]]), ["output_shape", "1-D", "(1, 2)"]),
    (np.array(7), ["output_shape", "1-D", "()"]),
    ([7, 7, 7], ["output_shape", "3 values", "(7, 7, 7)", "2 spatial"]),
    ([7], ["output_shape", "1 values", "2 spatial"]),
    ([7, 0], ["output_shape[1]", "0", "positive"]),
    ([-4, 7], ["output_shape[0]", "-4", "positive"]),
    ({7, 8}, ["output_shape", "set"]),
], ids=lambda v: repr(v) if not isinstance(v, list) or len(v) < 3 or not isinstance(v[0], str) else None)
def test_output_shape_rules(dialect, value, words):
    raises(ct.ConvTransposeError, words, lambda: dialect.call(output_shape=value))
    raises(ct.ConvTransposeError, words, lambda: dialect.call(shapes=True, output_shape=value))


def test_onnx_output_shape_whole_form_must_still_be_spatial_plus_two():
    # (N, M, Y1, Y2) is accepted; five values is neither form.
    assert ct.shapes.onnx_conv_transpose((1, 4, 3, 3), (4, 2, 3, 3),
                                         output_shape=[1, 2, 6, 6]).output_shape == (1, 2, 6, 6)
    shape_rule(ONNX, ["output_shape", "5 values"], output_shape=[1, 2, 6, 6, 6])


# ---------------------------------------------------------------------------
# Ranks and channels

@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_data_and_filter_ranks_differ(dialect):
    bigger = dialect.filter + (3,)
    shape_rule(dialect, [f"filter has rank {len(bigger)}" if dialect is not ONNX else
                         f"rank {len(bigger)}", str(bigger), f"rank {len(dialect.data)}"],
               filter=zeros(bigger))


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
@pytest.mark.parametrize("data_shape", [(1, 4), (4,), ()], ids=str)
def test_rank_below_three(dialect, data_shape):
    shape_rule(dialect, ["rank 3", str(data_shape)], data=zeros(data_shape))


def test_channel_mismatch_message_openvino():
    message = raises(ct.ConvTransposeError, [], lambda: ct.convolution_backprop_data(
        zeros((1, 20, 4, 4)), zeros((16, 10, 3, 3))))
    assert "data has 20 channels but filter expects 16 input channels" \
           " (filter shape (16, 10, 3, 3))" in message
    raises(ct.ConvTransposeError, ["data has 20 channels", "16 input channels"],
           lambda: ct.shapes.convolution_backprop_data((1, 20, 4, 4), (16, 10, 3, 3)))


def test_channel_mismatch_message_group():
    shape_rule(GROUP, ["data has 20 channels", "4 groups", "4 input channels", "16",
                       "(4, 4, 2, 3, 3)"],
               data=zeros((1, 20, 3, 3)), filter=zeros((4, 4, 2, 3, 3)))


@pytest.mark.parametrize("layout, filter_shape, expected", [
    ("XIO", (3, 3, 4, 2), 4), ("OIX", (2, 4, 3, 3), 4), ("IOX", (4, 2, 3, 3), 4),
    ("XOI", (3, 3, 2, 4), 4)])
def test_channel_mismatch_message_onednn(layout, filter_shape, expected):
    shape_rule(ONEDNN, ["input has 5 channels", layout, f"{expected} input channels",
                        str(filter_shape)],
               data=zeros((1, 3, 3, 5)), filter=zeros(filter_shape), weights_format=layout)
    # The same check in NCX.
    shape_rule(ONEDNN, ["input has 5 channels"], data=zeros((1, 5, 3, 3)),
               filter=zeros(filter_shape), weights_format=layout, data_format="NCX")


def test_channel_mismatch_message_onnx():
    shape_rule(ONNX, ["X has 5 channels", "W expects 4 input channels", "(4, 2, 3, 3)"],
               data=zeros((1, 5, 3, 3)))


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_empty_spatial_axes_are_refused(dialect):
    data = list(dialect.data)
    spatial = 1 if dialect is ONEDNN else 2
    data[spatial] = 0
    shape_rule(dialect, [dialect.data_name, "spatial axis 0", "size 0"], data=zeros(data))


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_empty_kernel_axes_are_refused(dialect):
    filter = list(dialect.filter)
    filter[0 if dialect is ONEDNN else -1] = 0
    axis = "0" if dialect is ONEDNN else "1"
    shape_rule(dialect, ["filter", f"spatial axis {axis}", "size 0"], filter=zeros(filter))


# ---------------------------------------------------------------------------
# Per-axis attributes

def _attributes(dialect):
    names = ["strides", "dilations", "output_padding"]
    if dialect is not ONNX:
        names += ["pads_begin", "pads_end"]
    return names


PER_AXIS = [(d, name) for d in DIALECTS for name in _attributes(d)]
PER_AXIS_IDS = [f"{d!r}-{name}" for d, name in PER_AXIS]


@pytest.mark.parametrize("dialect, name", PER_AXIS, ids=PER_AXIS_IDS)
def test_per_axis_attribute_wrong_length(dialect, name):
    shape_rule(dialect, [name, "3 values", "(1, 1, 1)", "2 spatial"], **{name: [1, 1, 1]})
    shape_rule(dialect, [name, "1 values", "2 spatial"], **{name: (1,)})


@pytest.mark.parametrize("dialect, name", PER_AXIS, ids=PER_AXIS_IDS)
def test_per_axis_attribute_types(dialect, name):
    shape_rule(dialect, [name, "2.0"], **{name: 2.0})
    shape_rule(dialect, [f"{name}[1]", "1.0", "float"], **{name: [1, 1.0]})
    shape_rule(dialect, [name, "True"], **{name: True})
    shape_rule(dialect, [f"{name}[0]", "bool", "False"], **{name: [False, 1]})
    shape_rule(dialect, [name, "'11'"], **{name: "11"})
    shape_rule(dialect, [name, "float64"], **{name: np.array([1.0, 1.0])})
    shape_rule(dialect, [name, "1-D", "(2, 1)"], **{name: np.ones((2, 1), int)})
    shape_rule(dialect, [f"{name}[0]", "[1]"], **{name: [[1], [1]]})
    shape_rule(dialect, [f"{name}[1]", "None"], **{name: [1, None]})
    shape_rule(dialect, [name, "dict"], **{name: {0: 1, 1: 1}})


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
@pytest.mark.parametrize("name", ["strides", "dilations"])
@pytest.mark.parametrize("value", [0, -1, -3])
def test_strides_and_dilations_must_be_positive(dialect, name, value):
    shape_rule(dialect, [f"{name}[1]", str(value), "positive"], **{name: [1, value]})
    shape_rule(dialect, [f"{name}[0]", str(value), "positive"], **{name: value})


@pytest.mark.parametrize("dialect, name",
                         [(d, n) for d in DIALECTS for n in _attributes(d)
                          if n not in ("strides", "dilations")],
                         ids=lambda v: repr(v))
def test_pads_and_output_padding_must_be_non_negative(dialect, name):
    shape_rule(dialect, [f"{name}[1]", "-1", "non-negative"], **{name: [0, -1]})


def test_onnx_pads_must_be_non_negative():
    shape_rule(ONNX, ["pads[2]", "-1", "non-negative"], pads=[0, 0, -1, 0])


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_output_size_must_be_positive(dialect):
    # X=3, K=3, s=1 (F=5) with pads 3 + 2: Y = 0 along axis 1.
    if dialect is ONNX:
        change = dict(pads=[0, 3, 0, 2])
    elif dialect is ONEDNN:
        change = dict(strides=1, pads_begin=[0, 3], pads_end=[0, 2])
    else:
        change = dict(pads_begin=[0, 3], pads_end=[0, 2])
    shape_rule(dialect, ["output size", "spatial axis 1", "would be 0", "positive"], **change)
    change = {k: [0, 9] if isinstance(v, list) and k != "pads" else v for k, v in change.items()}
    if dialect is ONNX:
        change = dict(pads=[0, 9, 0, 9])
    shape_rule(dialect, ["spatial axis 1", "-"], **change)


# ---------------------------------------------------------------------------
# Choices

@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
@pytest.mark.parametrize("value", ["same", "SAME-UPPER", "explicitly", "", 3, ["valid"], b"valid"],
                         ids=repr)
def test_unknown_auto_pad(dialect, value):
    shape_rule(dialect, ["auto_pad", repr(value)], auto_pad=value)


def test_auto_pad_spellings_of_other_dialects_are_refused():
    shape_rule(OPENVINO, ["auto_pad", "'none'"], auto_pad="none")
    shape_rule(ONEDNN, ["auto_pad", "'explicit'"], auto_pad="explicit")
    shape_rule(ONEDNN, ["auto_pad", "'notset'"], auto_pad="NOTSET")
    shape_rule(ONNX, ["auto_pad", "'explicit'"], auto_pad="explicit")


@pytest.mark.parametrize("keyword", ["data_format", "filter_format", "weights_format"])
@pytest.mark.parametrize("value", ["NHWC", "HWIO", "nc", "", 1, None, ["NCX"]], ids=repr)
def test_unknown_onednn_formats(keyword, value):
    if value is None and keyword == "weights_format":
        return  # None is weights_format's default: "use filter_format"
    shape_rule(ONEDNN, [keyword, repr(value)], **{keyword: value})


@pytest.mark.parametrize("dialect, keyword", [(ONEDNN, "groups"), (ONNX, "group")], ids=repr)
@pytest.mark.parametrize("value", [0, -2])
def test_groups_must_be_positive(dialect, keyword, value):
    shape_rule(dialect, [keyword, str(value), "positive"], **{keyword: value})


@pytest.mark.parametrize("dialect, keyword", [(ONEDNN, "groups"), (ONNX, "group")], ids=repr)
@pytest.mark.parametrize("value, words", [(2.0, ["2.0"]), (True, ["bool", "True"]),
                                          ("2", ["'2'"]), (None, ["None"]), ([2], ["[2]"])],
                         ids=repr)
def test_groups_must_be_an_integer(dialect, keyword, value, words):
    shape_rule(dialect, [keyword] + words, **{keyword: value})


def test_channels_not_divisible_by_groups():
    shape_rule(ONEDNN, ["input channels 4", "groups=3", "divisible"], groups=3)
    shape_rule(ONNX, ["X channels 4", "group=3", "divisible"], group=3)


@pytest.mark.parametrize("dialect", WITH_BIAS, ids=repr)
def test_bias_wrong_length(dialect):
    name = dialect.bias_name
    shape_rule(dialect, [name, "(3,)", "(2,)"], bias=zeros((3,)))
    shape_rule(dialect, [name, "(2, 1)", "(2,)"], bias=zeros((2, 1)))
    shape_rule(dialect, [name, "()", "(2,)"], bias=zeros(()))
    # With groups the bias has one value per output channel of every group: 2 * 2.
    change = {"groups": 2} if dialect is ONEDNN else {"group": 2}
    shape_rule(dialect, [name, "(2,)", "(4,)"], bias=zeros((2,)), **change)


@pytest.mark.parametrize("padding, stride", [([2, 0], [2, 2]), ([0, 3], [2, 2]), (1, 1)])
def test_onednn_output_padding_must_be_below_stride(padding, stride):
    axis = 0 if padding == [2, 0] or padding == 1 else 1
    value = padding[axis] if isinstance(padding, list) else padding
    s = stride[axis] if isinstance(stride, list) else stride
    shape_rule(ONEDNN, [f"output_padding[{axis}]", str(value), f"strides[{axis}] = {s}"],
               output_padding=padding, strides=stride)


def test_onnx_kernel_shape_must_match_w():
    shape_rule(ONNX, ["kernel_shape", "(2, 2)", "(3, 3)"], kernel_shape=[2, 2])
    shape_rule(ONNX, ["kernel_shape", "(3, 3, 3)"], kernel_shape=[3, 3, 3])
    shape_rule(ONNX, ["kernel_shape[0]", "3.0"], kernel_shape=[3.0, 3])
    shape_rule(ONNX, ["kernel_shape", "3"], kernel_shape=3)


@pytest.mark.parametrize("pads, words", [
    ([1, 1], ["pads", "2 values", "4"]),
    ([1, 1, 1], ["pads", "3 values", "4"]),
    ([1, 1, 1, 1, 1, 1], ["pads", "6 values"]),
    (1, ["pads", "1"]),
    ([1, 1, 1.0, 1], ["pads[2]", "1.0"]),
    ([1, True, 1, 1], ["pads[1]", "bool"]),
    ("1111", ["pads", "'1111'"]),
])
def test_onnx_pads_shape(pads, words):
    shape_rule(ONNX, words, pads=pads)


# ---------------------------------------------------------------------------
# Garbage anywhere: only documented exception types, never a NumPy error.

GARBAGE = [None, "abc", b"x", 2.5, True, -1, 0, 10**30, -(10**30), [[1], [1, 2]], [None],
           [1.5, 2], {"a": 1}, {1, 2}, object(), np.array([[1]]), np.array(["a", "b"]),
           float("nan"), [], [[]], (), np.zeros((2, 2, 2)), [2**63, 1], [1, 2, 3, 4, 5]]
ARRAY_GARBAGE = [None, "abc", 3, 2.5, [[["a", "b"]]], [[[1], [1, 2]]], {"a": 1}, object(),
                 np.zeros((1, 4, 3, 3), object), [], np.zeros((0,)), np.zeros((1, 4, 3, 3, 3)),
                 np.zeros((1, 4, 3, 3), "U1"), np.ma.zeros((1, 4, 3, 3))]

ARGUMENTS = {
    OPENVINO: ["output_shape", "strides", "pads_begin", "pads_end", "dilations", "auto_pad",
               "output_padding"],
    GROUP: ["output_shape", "strides", "pads_begin", "pads_end", "dilations", "auto_pad",
            "output_padding"],
    ONEDNN: ["strides", "pads_begin", "pads_end", "dilations", "auto_pad", "output_padding",
             "groups", "data_format", "filter_format", "weights_format", "output_shape"],
    ONNX: ["auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape",
           "pads", "strides"],
}


def _only_documented_errors(call):
    try:
        result = call()
    except (ct.ConvTransposeError, TypeError):
        return None
    # MemoryError is the one other honest answer, for a valid but enormous request.
    except MemoryError:
        return None
    return result


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_garbage_attributes_raise_only_documented_errors(dialect):
    for name in ARGUMENTS[dialect]:
        for value in GARBAGE:
            for shapes in (False, True):
                try:
                    result = _only_documented_errors(
                        lambda: dialect.call(shapes=shapes, **{name: value}))
                except Exception as error:  # noqa: BLE001 - the point of the test
                    pytest.fail(f"{dialect!r}({name}={value!r}, shapes={shapes}) raised"
                                f" {type(error).__module__}.{type(error).__name__}: {error}")
                if result is not None and not shapes:
                    assert isinstance(result, np.ndarray)


@pytest.mark.parametrize("dialect, position",
                         [(d, p) for d in DIALECTS for p in ("data", "filter", "bias")
                          if p != "bias" or d.bias_name is not None], ids=repr)
def test_garbage_arrays_raise_only_documented_errors(dialect, position):
    for value in ARRAY_GARBAGE + [[1, 2], np.zeros((2,), np.float64)]:
        if value is None and position == "bias":
            continue  # None is the default: no bias
        try:
            _only_documented_errors(lambda: dialect.call(**{position: value}))
        except Exception as error:  # noqa: BLE001
            pytest.fail(f"{dialect!r}({position}={value!r}) raised"
                        f" {type(error).__module__}.{type(error).__name__}: {error}")


def test_shape_functions_refuse_garbage_shapes():
    for bad, words in [((1, -4, 3), ["data shape", "negative", "-4"]),
                       ((1, 4.0, 3), ["data shape[1]", "4.0"]),
                       ("143", ["data shape", "'143'"]),
                       (None, ["data shape", "None"])]:
        raises(ct.ConvTransposeError, words,
               lambda: ct.shapes.convolution_backprop_data(bad, (4, 2, 3)))
    raises(ct.ConvTransposeError, ["W shape[0]", "bool"],
           lambda: ct.shapes.onnx_conv_transpose((1, 4, 3), (True, 2, 3)))
    raises(ct.ConvTransposeError, ["bias shape", "(2, -1)"],
           lambda: ct.shapes.conv_transpose((1, 3, 4), (3, 4, 2), (2, -1)))


@pytest.mark.parametrize("dialect", DIALECTS, ids=repr)
def test_huge_outputs_are_refused_before_numpy_sees_them(dialect):
    # (3-1)*2**62 + ...: more elements than NumPy can index.
    words = ["output shape", "elements", "overflows"]
    shape_rule(dialect, words, dilations=2**62)
    shape_rule(dialect, words, output_shape=np.array([2**64 - 1, 3], np.uint64))


def test_fuzzed_attributes_only_raise_documented_errors(examples):
    value = st.one_of(st.none(), st.integers(-3, 5), st.integers(), st.booleans(),
                      st.floats(allow_nan=True), st.text(max_size=4),
                      st.lists(st.one_of(st.integers(-2, 5), st.none(), st.floats(0, 3)),
                               max_size=5),
                      st.sampled_from(["same_upper", "SAME_LOWER", "valid", "NCX", "OIX",
                                       "IOX", "notset", "none", "explicit"]))

    @settings(max_examples=examples)
    @given(st.sampled_from(DIALECTS), st.data())
    def check(dialect, data):
        names = data.draw(st.lists(st.sampled_from(ARGUMENTS[dialect]), unique=True,
                                   max_size=4))
        change = {name: data.draw(value) for name in names}
        try:
            plan = dialect.call(shapes=True, **change)
        except ct.ConvTransposeError:
            plan = None
        try:
            result = dialect.call(**change)
        except ct.ResultTooLargeError:
            return  # beyond this machine's memory, which is not a shape rule
        except (ct.ConvTransposeError, TypeError):
            assert plan is None, "the shapes twin accepted what the array function refused"
            return
        except MemoryError:
            return
        assert plan is not None, "the array function accepted what the shapes twin refused"
        assert result.shape == plan.output_shape
    check()


def test_error_messages_are_one_readable_line():
    for call in [lambda: OPENVINO.call(strides=[0, 1]),
                 lambda: ONEDNN.call(groups=3),
                 lambda: ONNX.call(pads=[1])]:
        with pytest.raises(ct.ConvTransposeError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and "Traceback" not in message
        assert not re.search(r"numpy|ndarray", message)
