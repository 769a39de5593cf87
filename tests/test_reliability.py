"""The defects an independent fuzzer found, each pinned: huge attributes, byte order,
np.errstate, requests beyond memory, scratch of narrow types, the caches."""

from __future__ import annotations

import ast
import pathlib
import time
import tracemalloc
import warnings

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends import specs as _api
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import memo, memory


def test_positions_past_2_63_do_not_wrap():
    data, filter = np.array([[[1., 2.]]]), np.array([[[1., 10, 100, 1000, 10000]]])
    for dilation in (2**62, 2**63, 2**64 + 1):
        result = ct.convolution_backprop_data(data, filter, [2], dilations=dilation)
        np.testing.assert_array_equal(result, [[[1., 2.]]])


@pytest.mark.parametrize("stride", [2**40 + 1, 2**62, 2**63, 2**70])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.float16])
def test_a_huge_stride_with_huge_pads_places_the_input(stride, dtype):
    data = np.array([[[1, 2, 3]]], dtype)
    filter = np.array([[[1, 5]]], dtype)
    # The crop starts one before input 1's first tap: outputs are 0, 2, 10, 0 ...
    result = ct.convolution_backprop_data(data, filter, [4], strides=stride,
                                          pads_begin=stride - 1)
    case = oracle.openvino_cbpd_case(data, filter, [4], strides=stride, pads_begin=stride - 1)
    np.testing.assert_array_equal(result, case.rounded())
    np.testing.assert_array_equal(result, np.array([[[0, 2, 10, 0]]], dtype))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "float16", "uint16"])
def test_byte_swapped_operands_give_the_native_result(dtype):
    rng = np.random.default_rng(0)
    data = oracle.random_array(rng, (2, 3, 5, 4), dtype)
    filter = oracle.random_array(rng, (3, 2, 3, 3), dtype)
    expected = ct.convolution_backprop_data(data, filter, strides=2)
    swapped = data.astype(data.dtype.newbyteorder()), filter.astype(filter.dtype.newbyteorder())
    before = [a.tobytes() for a in swapped]
    result = ct.convolution_backprop_data(*swapped, strides=2)
    assert result.dtype == np.dtype(dtype) and result.dtype.isnative
    np.testing.assert_array_equal(result, expected)
    assert [a.tobytes() for a in swapped] == before


def test_the_bias_add_follows_no_errstate():
    # The first call runs the general path, the next ones the prepared call plus the
    # bias (the last from the call's record); each leaves the caller's state as it was.
    x, w, b = np.full((1, 2, 1), 1e308), np.ones((1, 1, 1)), np.array([1e308])
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a RuntimeWarning under the default errstate
        results = [ct.conv_transpose(x, w, b) for _ in range(3)]
        assert set(np.geterr().values()) == {"raise"}
    for result in results:
        assert np.isinf(result).all()


def test_a_request_beyond_memory_fails_fast_naming_the_argument():
    start = time.perf_counter()
    with pytest.raises(ct.ResultTooLargeError, match="output_shape") as raised:
        ct.convolution_backprop_data(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 1, 1)),
                                     [10**6, 10**6])
    assert time.perf_counter() - start < 1
    error = raised.value
    assert isinstance(error, MemoryError) and isinstance(error, ct.ConvTransposeError)
    # The result's 8 * 10**12 bytes and its algorithm's scratch.
    assert error.argument == "output_shape" and error.nbytes >= 8 * 10**12
    assert str(error.nbytes) in str(error)
    with pytest.raises(ct.ResultTooLargeError, match="strides") as raised:
        ct.conv_transpose(np.zeros((1, 3, 3, 1)), np.zeros((1, 1, 1, 1)), strides=10**7)
    assert raised.value.argument == "strides"


@pytest.mark.parametrize("length, attributes, argument", [
    (2, {"strides": 2**62}, "strides"), (2, {"dilations": 2**62}, "dilations"),
    (2, {"output_shape": [2**61]}, "output_shape"),
    (1, {"output_padding": 2**62, "strides": 2**62 + 1}, "output_padding")])
def test_an_output_past_2_60_elements_is_too_large_for_the_plan(length, attributes, argument):
    """The shape rules refuse it as the memory check does: a ResultTooLargeError (still
    a ConvTransposeError) naming the argument and the bytes at 8 bytes an element."""
    attributes = dict(attributes)
    output_shape = attributes.pop("output_shape", None)
    with pytest.raises(ct.ResultTooLargeError, match=argument) as raised:
        ct.shapes.convolution_backprop_data((1, 1, length), (1, 1, 3), output_shape,
                                            **attributes)
    error = raised.value
    assert isinstance(error, ct.ConvTransposeError) and error.argument == argument
    elements = error.nbytes // 8
    assert elements > 2**60 and str(error.nbytes) in str(error) and error.limit is None
    with pytest.raises(ct.ResultTooLargeError, match=argument):  # the array functions too
        ct.convolution_backprop_data(np.ones((1, 1, length)), np.ones((1, 1, 3)),
                                     output_shape, **attributes)


def test_the_memory_limit_of_a_block_and_of_the_process():
    data, filter = np.ones((1, 2, 10, 10), np.float32), np.ones((2, 3, 3, 3), np.float32)
    result_bytes = 1 * 3 * 12 * 12 * 4
    with ct.limit_memory(result_bytes - 1):
        with pytest.raises(ct.ResultTooLargeError) as raised:
            ct.convolution_backprop_data(data, filter)
        assert raised.value.limit == result_bytes - 1 and raised.value.nbytes == result_bytes
    with ct.limit_memory(result_bytes):
        with pytest.raises(ct.ResultTooLargeError) as raised:
            ct.convolution_backprop_data(data, filter)
        # The result and the scratch of its algorithm (kernels.scratch).
        assert raised.value.nbytes > result_bytes
    needed = raised.value.nbytes
    with ct.limit_memory(needed - 1):
        with pytest.raises(ct.ResultTooLargeError):
            ct.convolution_backprop_data(data, filter)
    with ct.limit_memory(needed - result_bytes):  # out= allocates only the scratch
        ct.convolution_backprop_data(data, filter, out=np.empty((1, 3, 12, 12), np.float32))
    with ct.limit_memory(needed):
        ct.convolution_backprop_data(data, filter)
    previous = ct.set_max_bytes(100)
    try:
        assert ct.get_max_bytes() == 100
        with pytest.raises(ct.ResultTooLargeError, match="set_max_bytes"):
            ct.convolution_backprop_data(data, filter)
    finally:
        ct.set_max_bytes(previous)
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(ct.ConvTransposeError):
            ct.set_max_bytes(bad)


def test_an_empty_result_with_a_huge_dimension():
    data, filter = np.zeros((0, 1, 2)), np.zeros((1, 1, 1))
    assert ct.convolution_backprop_data(data, filter, [2**58]).shape == (0, 1, 2**58)
    with pytest.raises(ct.ResultTooLargeError, match="NumPy cannot hold") as raised:
        ct.convolution_backprop_data(data, filter, [2**62])
    assert raised.value.limit is None
    with pytest.raises(ct.ResultTooLargeError):
        ct.convolution_backprop_data(data, filter, [2**63 + 5])


def test_int8_sums_are_computed_in_pieces(monkeypatch):
    # An 8 MiB int8 result: its int64 sums at once would take 64 MiB.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-numpy")
    rng = np.random.default_rng(1)
    data = oracle.random_array(rng, (8, 4, 256, 256), np.int8)
    filter = oracle.random_array(rng, (4, 4, 2, 2), np.int8)
    ct.convolution_backprop_data(data[:1, :, :8, :8], filter, strides=2)  # warm up
    tracemalloc.start()
    try:
        result = ct.convolution_backprop_data(data, filter, strides=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.nbytes == 8 << 20
    # A 16 MiB piece with its widened data and products: under the 64 MiB of all sums.
    assert peak - result.nbytes < 48 << 20, peak
    sample = oracle.openvino_cbpd_case(data[-1:], filter, strides=2).rounded()
    np.testing.assert_array_equal(result[-1:], sample)


@pytest.mark.parametrize("layout", ["NCX", "NXC"])
@pytest.mark.parametrize("dtype", ["float16", "int8", "uint16"])
def test_pieces_of_rows_equal_the_oracle(monkeypatch, layout, dtype):
    monkeypatch.setattr(memory, "SUMS_PIECE_MIN_BYTES", 256)  # rows of one sample
    rng = np.random.default_rng(2)
    data = oracle.random_array(rng, (2, 4, 20, 9), dtype)
    filter = oracle.random_array(rng, (4, 5, 3, 3), dtype)
    if layout == "NXC":
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    xio = np.moveaxis(filter, (0, 1), (-2, -1))
    attributes = dict(strides=2, pads_begin=1, pads_end=0, data_format=layout)
    result = ct.conv_transpose(data, xio, **attributes)
    oracle.assert_matches(result, oracle.onednn_conv_transpose_case(data, xio, **attributes))


def test_the_phase_enumeration_is_linear_in_the_taps():
    from convtranspose._plan.geometry import axis_phases

    start = time.perf_counter()
    phases = axis_phases(AxisPlan(3, 3, 10**6, 1, 0, 2 * 10**6 + 1))
    assert time.perf_counter() - start < 2
    assert [(c.first, c.count, c.shifts) for c in phases.classes] == [
        (0, 3, (0,)), (3, 10**6 - 3, ())]
    data, filter = np.ones((1, 4, 3), np.float16), np.ones((2, 2, 2, 3), np.float16)
    start = time.perf_counter()
    result = ct.group_convolution_backprop_data(data, filter, strides=10**6)
    assert time.perf_counter() - start < 10
    assert result.shape == (1, 4, 2 * 10**6 + 3) and result.sum() == 4 * 9 * 2


def test_the_plan_cache_drops_the_least_recently_used(monkeypatch):
    monkeypatch.setattr(_api, "PLAN_CACHE_SIZE", 3)
    _api.plan_cache.clear()
    shapes = [((1, 1, x), (1, 1, 1)) for x in range(1, 5)]
    plans = [ct.shapes.convolution_backprop_data(*s) for s in shapes[:3]]
    data = [np.zeros(s[0]) for s in shapes]
    filter = np.zeros((1, 1, 1))
    # The filter by keyword: a repeated call with both operands by position may be
    # answered from the record of an earlier one, without the plan cache.
    for d in data[:3]:
        ct.convolution_backprop_data(d, filter=filter)
    ct.convolution_backprop_data(data[0], filter=filter)  # the first is used again
    ct.convolution_backprop_data(data[3], filter=filter)  # evicts the second, not the first
    kept = {plan.data_shape for plan in _api.plan_cache.values()}
    assert kept == {(1, 1, 1), (1, 1, 3), (1, 1, 4)}, (kept, plans)


def test_clear_caches_forgets_everything_kept():
    data, filter = np.ones((1, 2, 4, 4), np.float32), np.ones((2, 2, 3, 3), np.float32)
    for _ in range(2):
        ct.convolution_backprop_data(data, filter)
    assert _api.plan_cache and memo.derived_kept
    ct.clear_caches()
    assert not _api.plan_cache and not _api.prepared_calls and not memo.derived_kept
    np.testing.assert_array_equal(ct.convolution_backprop_data(data, filter),
                                  oracle.openvino_cbpd(data, filter))


def test_the_weights_memo_can_be_bounded():
    filter = np.ones((2, 2, 3, 3), np.float32)
    ct.convolution_backprop_data(np.ones((1, 2, 4, 4), np.float32), filter)
    previous = ct.set_weights_memo_bytes(0)
    try:
        assert not memo.derived_kept
        ct.convolution_backprop_data(np.ones((1, 2, 4, 4), np.float32), filter)
        assert not memo.derived_kept
    finally:
        assert ct.set_weights_memo_bytes(previous) == 0
    with pytest.raises(ct.ConvTransposeError):
        ct.set_weights_memo_bytes(-1)


def test_every_cache_of_the_package_is_named():
    # A memoised function is registered under a name (caches.kept), so that
    # ct.clear_caches forgets it and its docstring can say what it forgets; the one
    # exception is a pure function of a dtype in a leaf module below the registry (and
    # the registry itself).
    package = pathlib.Path(ct.__file__).parent
    unnamed = [f"{path.relative_to(package)}:{node.lineno}"
               for path in package.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Attribute) and node.attr in ("lru_cache", "cache")
               and isinstance(node.value, ast.Name) and node.value.id == "functools"
               and path.name not in ("_dtypes.py", "caches.py")]
    assert not unnamed, unnamed
    from convtranspose._runtime import caches

    data, filter = np.ones((1, 2, 4, 4), np.float32), np.ones((2, 2, 3, 3), np.float32)
    ct.convolution_backprop_data(data, filter)
    names = caches.names()
    assert {"resolved plans and prepared calls", "filters' derived matrices",
            "planning decisions", "cost-model estimates"} <= set(names)
    docstring = " ".join(ct.clear_caches.__doc__.split())
    assert all(name in docstring for name in names), [n for n in names if n not in docstring]
