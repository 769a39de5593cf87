"""Property-based fuzzing of the four dialect functions and ``ct.shapes``: every call
returns the oracle's answer or raises a documented exception.

Each draw mixes valid and invalid arguments: any supported (or unsupported) dtype, the
operands in any memory layout (Fortran order, read-only, byte-swapped, unaligned,
strided views, empty batches), integer attributes of any size (far past 2**63), wrong
types, and a random ``np.errstate`` with warnings turned into errors.  Each call runs
under ``ct.limit_memory`` (64 MiB), so requests for huge results exercise
:class:`ct.ResultTooLargeError` instead of the machine's memory.

- A result must equal the independent float64 oracle (``tests/oracle.py``, windowed
  with Python integers, so it also holds for strides and pads past 2**63);
- an exception must be a :class:`ct.ConvTransposeError` (``ResultTooLargeError``
  included) or a :class:`TypeError`;
- the operands must be unchanged, and the result must share no memory with them;
- a valid call repeated with ``out=`` (C-contiguous, a strided view, or a view of the
  data operand's own buffer) returns ``out`` holding the same answer.

A separate test runs a handful of calls from 8 threads at once and compares each with
its serial result.

``--fuzz-examples N`` sets the number of draws (default 400, about 30 s on 2 cores);
the run prints its figures (calls, results, errors by type).
"""

from __future__ import annotations

import collections
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convtranspose as ct
import oracle

DOCUMENTED = (ct.ConvTransposeError, TypeError)
LIMIT = 64 << 20

DTYPES = [np.dtype(t) for t in (np.float64, np.float32, np.float16, ml_dtypes.bfloat16,
                                np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64)]
UNSUPPORTED = [np.dtype(t) for t in (np.bool_, np.complex64, np.object_, "U2", "M8[s]")]
HUGE = [2**31, 2**31 + 1, 2**40 + 3, 2**62, 2**63 - 1, 2**63, 2**64 + 5, 10**30]
LAYOUTS = ("c", "fortran", "read-only", "byte-swapped", "unaligned", "strided", "list")
ERRSTATES = ({}, {"all": "raise"}, {"all": "warn"}, {"over": "raise", "invalid": "raise"},
             {"under": "raise"})
#: Where a valid call is repeated with ``out=``: none, a C-contiguous array, a strided
#: view, or a view of the same buffer as the data operand (filled with its values).
OUTS = ("none", "none", "c", "strided", "overlap")

figures: collections.Counter = collections.Counter()


@pytest.fixture(scope="module")
def fuzz_examples(pytestconfig):
    return pytestconfig.getoption("--fuzz-examples")


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    errors = {k: v for k, v in figures.items() if k != "calls" and not k.startswith("results")}
    outs = {k: v for k, v in figures.items() if k.startswith("results into out")}
    print(f"\nfuzz: {figures['calls']} calls, {figures['results']} results checked"
          f" against the oracle, {dict(sorted(outs.items()))}, errors by type"
          f" {dict(sorted(errors.items()))}")


def attribute(draw, hostile, *, positive=True):
    """An int attribute: mostly small, sometimes huge, and in hostile draws invalid."""
    kinds = ["small"] * 6 + ["huge", "negative", "wrong"] if hostile else ["small"] * 12 + [
        "huge"]
    kind = draw(st.sampled_from(kinds))
    if kind == "small":
        return draw(st.integers(1 if positive else 0, 4))
    if kind == "huge":
        return draw(st.sampled_from(HUGE))
    if kind == "negative":
        return draw(st.integers(-3, 0 if positive else -1))
    return draw(st.sampled_from([1.0, "2", True, None, [1, 2, 3, 4, 5]]))


def per_axis(draw, hostile, rank, *, positive=True):
    """None, one int for every axis, or one value per axis."""
    form = draw(st.sampled_from(["none", "int", "list", "list"]))
    if form == "none":
        return None
    if form == "int":
        return attribute(draw, hostile, positive=positive)
    return [attribute(draw, hostile, positive=positive) for _ in range(rank)]


def values(draw, shape, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype in DTYPES:
        array = oracle.random_array(rng, shape, dtype)
        if dtype.kind == "f" and draw(st.integers(0, 9)) == 0 and array.size:
            special = draw(st.sampled_from([np.inf, -np.inf, np.nan, 1e38, 6e4]))
            with np.errstate(over="ignore"):  # 1e38 is inf in float16
                array.flat[draw(st.integers(0, array.size - 1))] = special
        return array
    return np.zeros(shape, dtype)


def laid_out(draw, array):
    """``array`` (same values) in a drawn memory layout."""
    layout = draw(st.sampled_from(LAYOUTS))
    if layout == "fortran":
        return np.asfortranarray(array)
    if layout == "read-only":
        array = array.copy()
        array.flags.writeable = False
        return array
    if layout == "byte-swapped" and array.dtype.kind in "fiu" and array.dtype.itemsize > 1:
        return array.astype(array.dtype.newbyteorder())
    if layout == "unaligned" and array.dtype.kind in "fiuV":
        buffer = np.zeros(array.nbytes + 1, np.uint8)[1:]
        unaligned = buffer.view(array.dtype).reshape(array.shape)
        unaligned[...] = array
        return unaligned
    if layout == "strided" and array.ndim:
        wide = np.zeros(array.shape[:-1] + (2 * array.shape[-1],), array.dtype)
        wide[..., ::2] = array
        return wide[..., ::2]
    if layout == "list" and array.dtype in (np.float64, np.int64) and array.size < 64:
        return array.tolist()
    return array


@st.composite
def calls(draw):
    """(name, function, args, kwargs, oracle case function or None)."""
    rank = draw(st.integers(1, 3))
    hostile = draw(st.booleans())
    dialect = draw(st.sampled_from(["openvino", "openvino_group", "onednn", "onnx"]))
    dtype = draw(st.sampled_from(DTYPES * 4 + UNSUPPORTED if hostile else DTYPES))
    groups = draw(st.integers(1, 2))
    batch = draw(st.sampled_from([0, 1, 1, 2]))
    ci, co = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    spatial = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    common = {"strides": per_axis(draw, hostile, rank), "dilations": per_axis(draw, hostile, rank)}
    output_shape = None
    if draw(st.booleans()):
        sizes = [1, 2, 3, 5, 8, 2**20, 2**40, 2**63, 0] if hostile else [1, 2, 3, 5, 8, 2**20]
        output_shape = [draw(st.sampled_from(sizes)) for _ in range(rank)]
    data = values(draw, (batch, groups * ci) + spatial, dtype)
    filter_dtype = dtype if not hostile or draw(st.integers(0, 9)) else draw(
        st.sampled_from(DTYPES))
    if dialect == "openvino":
        filter = values(draw, (ci, co) + kernel, filter_dtype)
        data = data[:, :ci]
        pads = {"pads_begin": per_axis(draw, hostile, rank, positive=False),
                "pads_end": per_axis(draw, hostile, rank, positive=False),
                "output_padding": per_axis(draw, hostile, rank, positive=False),
                "auto_pad": draw(st.sampled_from(["explicit", "same_upper", "same_lower",
                                                  "valid"]))}
        args, kwargs = [data, filter, output_shape], {**common, **pads}
        function, case = ct.convolution_backprop_data, oracle.openvino_cbpd_case
        shapes = ct.shapes.convolution_backprop_data
    elif dialect == "openvino_group":
        filter = values(draw, (groups, ci, co) + kernel, filter_dtype)
        pads = {"pads_begin": per_axis(draw, hostile, rank, positive=False),
                "pads_end": per_axis(draw, hostile, rank, positive=False),
                "auto_pad": draw(st.sampled_from(["explicit", "same_upper", "valid"]))}
        args, kwargs = [data, filter, output_shape], {**common, **pads}
        function, case = ct.group_convolution_backprop_data, oracle.openvino_group_cbpd_case
        shapes = ct.shapes.group_convolution_backprop_data
    elif dialect == "onednn":
        filter = values(draw, kernel + (groups * ci, co), filter_dtype)  # XIO
        bias = values(draw, (groups * co,), dtype) if draw(st.booleans()) else None
        data = np.moveaxis(data, 1, -1)  # NXC
        kwargs = {**common, "groups": groups, "output_shape": output_shape,
                  "pads_begin": per_axis(draw, hostile, rank, positive=False),
                  "pads_end": per_axis(draw, hostile, rank, positive=False),
                  "auto_pad": draw(st.sampled_from(["none", "same_upper", "same_lower"]))}
        args = [data, filter, bias]
        function, case = ct.conv_transpose, oracle.onednn_conv_transpose_case
        shapes = ct.shapes.conv_transpose
    else:
        filter = values(draw, (groups * ci, co) + kernel, filter_dtype)
        bias = values(draw, (groups * co,), dtype) if draw(st.booleans()) else None
        pads = per_axis(draw, hostile, rank, positive=False)
        kwargs = {**common, "group": groups, "output_shape": output_shape,
                  "pads": None if pads is None else (pads if isinstance(pads, list) else
                                                     [pads] * rank) * 2,
                  "auto_pad": draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER"]))}
        args = [data, filter, bias]
        function, case = ct.onnx_conv_transpose, oracle.onnx_conv_transpose_case
        shapes = ct.shapes.onnx_conv_transpose
    laid = [laid_out(draw, a) if isinstance(a, np.ndarray) else a for a in args]
    return (function, shapes, laid, args, kwargs, case, draw(st.sampled_from(ERRSTATES)),
            draw(st.sampled_from(OUTS)))


def _snapshot(arguments):
    return [(a.tobytes(), a.strides, a.dtype) if isinstance(a, np.ndarray) else repr(a)
            for a in arguments]


def _call(function, arguments, kwargs, errstate):
    with ct.limit_memory(LIMIT), np.errstate(**errstate), warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*arguments, **kwargs)


def _shape_of(argument):
    return None if argument is None else np.shape(argument)


def check(drawn):
    function, shapes, laid, plain, kwargs, case, errstate, out_kind = drawn
    figures["calls"] += 2
    try:  # the shape twin: a plan or a documented error, never anything else
        shape_args = [_shape_of(a) for a in plain[:2]] + (
            [plain[2]] if function.__name__.endswith("backprop_data") else
            [_shape_of(plain[2])])
        shapes(*shape_args, **kwargs)
    except DOCUMENTED as error:
        figures[f"shapes: {type(error).__name__}"] += 1
    before = _snapshot(laid)
    try:
        result = _call(function, laid, kwargs, errstate)
    except DOCUMENTED as error:
        figures[type(error).__name__] += 1
        assert _snapshot(laid) == before, "an operand was modified"
        return
    assert _snapshot(laid) == before, "an operand was modified"
    for argument in laid:
        if isinstance(argument, np.ndarray):
            assert not np.may_share_memory(result, argument), "the result aliases an operand"
    arrays = [a for a in plain if isinstance(a, np.ndarray)]
    assert result.dtype == arrays[0].dtype.newbyteorder("="), (result.dtype, arrays[0].dtype)
    expected = case(*plain, **kwargs)
    _assert_matches(result, expected)
    figures["results"] += 1
    if out_kind != "none" and result.size:
        _check_out(function, laid, plain, kwargs, errstate, out_kind, result, expected)


def _check_out(function, laid, plain, kwargs, errstate, out_kind, result, expected):
    """The call again with ``out=`` of ``out_kind``: it returns ``out``, holding the
    oracle's answer (the same bits as without ``out``)."""
    arguments = list(laid)
    if out_kind == "c":
        out = np.full(result.shape, 7, result.dtype)
    elif out_kind == "strided":
        wide = np.full(result.shape[:-1] + (2 * result.shape[-1],), 7, result.dtype)
        out = wide[..., ::2]
    else:  # the data's values and out in one buffer: out overlaps the operand
        data = plain[0]
        if data.dtype != result.dtype or not data.size:
            return
        buffer = np.zeros(max(data.size, result.size), result.dtype)
        arguments[0] = buffer[:data.size].reshape(data.shape)
        arguments[0][...] = data
        out = buffer[:result.size].reshape(result.shape)
    figures["calls"] += 1
    returned = _call(function, arguments, {**kwargs, "out": out}, errstate)
    assert returned is out, "out= must be returned"
    _assert_matches(out, expected)
    np.testing.assert_array_equal(out, result)
    figures[f"results into out ({out_kind})"] += 1


def _assert_matches(actual, case):
    """:func:`oracle.assert_matches`, extended to infinities, NaNs and overflow: where the
    exact sum is not finite the result must be too (NaN where it is NaN); where partial
    sums may overflow the accumulator (terms near its largest value) any value is
    right; where the exact sum rounds past the element type's range the result is that
    infinity or the largest finite value."""
    if actual.size == 0:  # nothing to compare; the oracle's float64 array may not fit NumPy
        assert actual.dtype == case.dtype and actual.shape == case.output_shape
        return
    if case.dtype.kind in "iu":
        oracle.assert_matches(actual, case)
        return
    assert actual.dtype == case.dtype and actual.shape == case.output_shape
    with np.errstate(all="ignore"):
        exact = case.exact().astype(np.float64)
        magnitude = case.magnitude()
        got = actual.astype(np.float64)
        accumulator = np.finfo(np.float64 if case.dtype == np.float64 else np.float32)
        largest = float(oracle.ml_finfo(case.dtype).max)
        unbounded = magnitude >= float(accumulator.max) / 4  # partial sums may overflow
        special = ~np.isfinite(exact)
        assert np.isnan(got[np.isnan(exact)]).all(), "NaN expected"
        assert (~np.isfinite(got[special & ~unbounded])).all(), "a non-finite value expected"
        beyond = np.isfinite(exact) & (np.abs(exact) > largest) & ~unbounded
        assert ((np.abs(got[beyond]) >= largest) & (np.sign(got[beyond]) == np.sign(
            exact[beyond]))).all(), "the overflow to the type's range expected"
        ordinary = ~(special | unbounded | beyond)
        bound = (2.0 * case.terms * float(accumulator.eps) * magnitude
                 + float(oracle.ml_finfo(case.dtype).eps) * np.abs(exact)
                 + float(oracle.ml_finfo(case.dtype).smallest_subnormal))
        bad = np.argwhere(ordinary & ~(np.abs(got - exact) <= bound))
    assert bad.size == 0, (f"{len(bad)} mismatches, first at {tuple(bad[0])}: got"
                           f" {got[tuple(bad[0])]!r}, exact {exact[tuple(bad[0])]!r}")


def test_every_call_returns_the_oracles_answer_or_a_documented_error(fuzz_examples):
    settings(max_examples=fuzz_examples)(given(calls())(check))()
    assert figures["results"] > fuzz_examples // 20, figures  # the draws do reach results
    assert sum(v for k, v in figures.items() if k.startswith("results into out")), figures


#: (function, data shape, filter shape, keywords, dtype): a handful of valid calls of
#: every dialect, run from 8 threads at once.
CONCURRENT = [
    (ct.convolution_backprop_data, (2, 4, 9, 9), (4, 3, 3, 3), {"strides": 2}, np.float32),
    (ct.convolution_backprop_data, (1, 2, 30), (2, 5, 4), {"dilations": 2}, np.float64),
    (ct.group_convolution_backprop_data, (1, 4, 6, 6), (2, 2, 2, 3, 3), {"strides": 3},
     np.float16),
    (ct.conv_transpose, (2, 5, 5, 3), (2, 2, 3, 4), {"strides": 2}, np.float32),
    (ct.onnx_conv_transpose, (1, 3, 4, 4, 4), (3, 2, 2, 2, 2), {"strides": [2, 1, 2]},
     np.int16),
    (ct.onnx_conv_transpose, (2, 8, 16, 16), (8, 8, 4, 4), {"strides": 2, "group": 2},
     ml_dtypes.bfloat16),
]


def test_concurrent_calls_equal_their_serial_results():
    """Eight threads run every call (half of them into ``out=``) several times at once:
    each result has the bits of the serial one."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    calls = []
    for function, data_shape, filter_shape, kwargs, dtype in CONCURRENT:
        data = oracle.random_array(rng, data_shape, np.dtype(dtype))
        filter = oracle.random_array(rng, filter_shape, np.dtype(dtype))
        calls.append((function, data, filter, kwargs, function(data, filter, **kwargs)))

    def run(index):
        function, data, filter, kwargs, serial = calls[index % len(calls)]
        out = np.empty_like(serial) if index % 2 else None
        result = function(data, filter, **kwargs, out=out)
        assert out is None or result is out
        return index, result

    with ThreadPoolExecutor(8) as pool:
        for index, result in pool.map(run, range(8 * 4 * len(calls))):
            np.testing.assert_array_equal(result, calls[index % len(calls)][4])
