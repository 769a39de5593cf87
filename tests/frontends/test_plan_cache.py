"""The frontends' plan memo never changes an answer.

A cached plan must be exactly the plan a fresh resolution gives, and values that
compare equal but mean different things to the resolvers (True vs 1, 2.0 vs 2,
an array vs a list) must not share a cache entry.
"""

import warnings

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends import specs as _api

DATA = np.arange(2 * 2 * 4 * 4, dtype=np.float64).reshape(2, 2, 4, 4)
FILTER = np.arange(2 * 3 * 3 * 3, dtype=np.float64).reshape(2, 3, 3, 3)


def test_cached_plan_equals_fresh_resolution():
    _api.plan_cache.clear()
    kwargs = dict(strides=[2, 1], pads_begin=1, pads_end=[0, 1], output_padding=1)
    first = ct.convolution_backprop_data(DATA, FILTER, **kwargs)
    assert len(_api.plan_cache) == 1
    second = ct.convolution_backprop_data(DATA, FILTER, **kwargs)
    np.testing.assert_array_equal(first, second)
    (cached,) = _api.plan_cache.values()
    assert cached == ct.shapes.convolution_backprop_data(DATA.shape, FILTER.shape, **kwargs)


@pytest.mark.parametrize("bad", [True, 2.0, np.float64(2.0)])
def test_values_equal_to_a_cached_int_are_still_validated(bad):
    ct.convolution_backprop_data(DATA, FILTER, strides=int(bad))  # caches the equal int
    with pytest.raises(ct.ConvTransposeError, match="strides"):
        ct.convolution_backprop_data(DATA, FILTER, strides=bad)


def test_errors_are_not_cached():
    _api.plan_cache.clear()
    for _ in range(2):
        with pytest.raises(ct.ConvTransposeError, match="pads_begin"):
            ct.convolution_backprop_data(DATA, FILTER, pads_begin=-1)
    assert not _api.plan_cache


def test_output_shape_array_and_list_resolve_alike():
    as_list = ct.convolution_backprop_data(DATA, FILTER, [7, 7], strides=2, auto_pad="same_upper")
    as_array = ct.convolution_backprop_data(DATA, FILTER, np.array([7, 7]), strides=2,
                                            auto_pad="same_upper")
    np.testing.assert_array_equal(as_list, as_array)
    with pytest.raises(ct.ConvTransposeError, match="output_shape"):
        ct.convolution_backprop_data(DATA, FILTER, np.array([7.0, 7.0]), strides=2)


def test_a_list_edited_between_calls_is_read_again():
    # The plan of the most recent plain arguments is found by comparing values: the
    # caller's list, edited in place after a call, must not compare with itself.
    strides = [2, 2]
    ct.convolution_backprop_data(DATA, FILTER, strides=strides)
    strides[0] = 3
    got = ct.convolution_backprop_data(DATA, FILTER, strides=strides)
    assert got.shape == ct.shapes.convolution_backprop_data(DATA.shape, FILTER.shape,
                                                            strides=[3, 2]).output_shape
    strides[1] = True  # equal to 1, but refused as a fresh resolution refuses it
    with pytest.raises(ct.ConvTransposeError, match="strides"):
        ct.convolution_backprop_data(DATA, FILTER, strides=strides)


def test_a_plan_used_again_after_the_cache_was_emptied_is_kept_again():
    # The shortcuts to the most recent plan never leave the cache short of it.
    # (Through resolve_plan: the array functions answer repeated calls before it.)
    kwargs = dict(strides=[2, 1], pads_begin=1)
    rule = ct.shapes.convolution_backprop_data
    for _ in range(2):
        _api.resolve_plan(rule, DATA.shape, FILTER.shape, **kwargs)
        _api.plan_cache.clear()
        _api.resolve_plan(rule, DATA.shape, FILTER.shape, **kwargs)
        assert list(_api.plan_cache.values()) == [
            ct.shapes.convolution_backprop_data(DATA.shape, FILTER.shape, **kwargs)]


def test_cache_stays_bounded():
    _api.plan_cache.clear()
    for pad in range(_api.PLAN_CACHE_SIZE + 10):
        _api.resolve_plan(ct.shapes.onnx_conv_transpose, (1, 1, 3), (1, 1, 3), strides=pad + 1)
    assert len(_api.plan_cache) == _api.PLAN_CACHE_SIZE


def test_same_values_under_other_keywords_do_not_collide():
    _api.plan_cache.clear()
    by_strides = _api.resolve_plan(ct.shapes.onnx_conv_transpose, (1, 1, 3), (1, 1, 3), strides=2)
    by_dilations = _api.resolve_plan(ct.shapes.onnx_conv_transpose, (1, 1, 3), (1, 1, 3), dilations=2)
    assert by_strides.strides == (2,) and by_dilations.strides == (1,)
    assert by_dilations.dilations == (2,)


@pytest.mark.parametrize("first, second", [
    ([1, 2], [True, 2]),          # bool inside a sequence
    ([2, 2], [2.0, 2]),           # float inside a sequence
    (2, (2,)),                    # scalar vs one-element sequence: both valid, both cached
])
def test_lookalike_values_get_their_own_entries(first, second):
    _api.plan_cache.clear()
    _api.resolve_plan(ct.shapes.onnx_conv_transpose, (1, 1, 3, 3), (1, 1, 3, 3), strides=first)
    try:
        _api.resolve_plan(ct.shapes.onnx_conv_transpose, (1, 1, 3, 3), (1, 1, 3, 3), strides=second)
    except ct.ConvTransposeError:
        assert len(_api.plan_cache) == 1   # refused, as a fresh resolution would
    else:
        assert len(_api.plan_cache) == 2


def test_axis_plan_hash_agrees_with_equality_after_caching_and_pickling():
    # AxisPlan caches its hash: equal plans must still hash alike (also across a
    # pickle round trip, which carries the cached value) and fields still decide
    # equality, repr and replace.
    import dataclasses
    import pickle

    from convtranspose import AxisPlan

    first = AxisPlan(5, 3, 2, 1, -1, 9)
    hash(first)
    second = AxisPlan(5, 3, 2, 1, -1, 9)
    assert first == second and hash(first) == hash(second)
    restored = pickle.loads(pickle.dumps(first))
    assert restored == first and hash(restored) == hash(first)
    moved = dataclasses.replace(first, offset=0)
    assert moved != first and hash(moved) == hash(AxisPlan(5, 3, 2, 1, 0, 9))
    assert repr(first) == "AxisPlan(input_size=5, kernel_size=3, stride=2, dilation=1, offset=-1, output_size=9)"
    assert {first: 1}[second] == 1


# --------------------------------------------------------------------------- prepared tiny calls
# Tiny layers that the kernel computes with ``dense`` are prepared after their first
# call (``_api.prepared_calls``); later calls with the same plan, dtypes and filter bytes
# take one product.  They must give the general path's bits and yield to it whenever
# it could decide otherwise.

RNG = np.random.default_rng(5)
TINY = {
    "openvino": lambda d, f: ct.convolution_backprop_data(d, f, strides=2, pads_begin=1,
                                                          pads_end=1),
    "openvino-group": lambda d, f: ct.group_convolution_backprop_data(
        d, f.reshape((2, 1) + f.shape[1:]), strides=[2, 1], output_padding=[1, 0]),
    "onednn-nxc": lambda d, f: ct.conv_transpose(
        np.moveaxis(d, 1, -1), np.moveaxis(f, (0, 1), (-2, -1)), strides=2, pads_begin=1,
        pads_end=0),
    "onnx": lambda d, f: ct.onnx_conv_transpose(d, f, strides=[3, 2], pads=[1, 0, 0, 1]),
}


@pytest.fixture
def forced_dense(monkeypatch):
    """These tests are of the prepared ``dense`` call: which algorithm the cost model
    would pick for a tiny layer depends on the CPU, so ``dense`` is forced."""
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "dense")
    _api.prepared_calls.clear()
    yield
    _api.prepared_calls.clear()


def _tiny(dtype=np.float32, batch=1):
    data = RNG.standard_normal((batch, 2, 5, 4)).astype(dtype)
    return data, RNG.standard_normal((2, 3, 3, 2)).astype(dtype)


def _general(call, data, filter):
    _api.prepared_calls.clear()
    try:
        return call(data, filter)
    finally:
        _api.prepared_calls.clear()


def _forbid_general_path(monkeypatch):
    def general(*args, **kwargs):
        raise AssertionError("the prepared call was not used")
    monkeypatch.setattr(_api, "transposed_convolution", general)


@pytest.mark.parametrize("frontend", TINY)
@pytest.mark.parametrize("dtype, batch", [(np.float32, 1), (np.float64, 3)])
def test_prepared_tiny_call_is_used_and_gives_the_general_paths_bits(forced_dense, monkeypatch, frontend,
                                                                     dtype, batch):
    call = TINY[frontend]
    data, filter = _tiny(dtype, batch)
    expected = _general(call, data, filter)
    call(data, filter)  # prepares
    assert len(_api.prepared_calls) == 1
    with monkeypatch.context() as patch:
        _forbid_general_path(patch)
        got = call(data.copy(), filter.copy())
    assert got.dtype == expected.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected)
    # And an independent algorithm agrees (the general path's own tests use the oracle).
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "col2im-ncx")
    np.testing.assert_allclose(got, call(data, filter), rtol=1e-5, atol=1e-5)


def test_prepared_tiny_call_notices_an_edited_filter(forced_dense):
    call = TINY["openvino"]
    data, filter = _tiny()
    call(data, filter)
    filter[1, 2, 0, 1] += 1.0
    np.testing.assert_array_equal(call(data, filter), _general(call, data, filter))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_prepared_tiny_call_yields_non_finite_data_to_the_exact_path(forced_dense, monkeypatch, bad):
    call = TINY["onnx"]
    data, filter = _tiny(batch=3)
    call(data, filter)
    data[2, 1, 4, 3] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # special values arise silently, as in general
        got = call(data, filter)
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "col2im-ncx")  # exact: only taps it meets
    np.testing.assert_array_equal(got, call(data, filter))
    assert np.isfinite(got[:2]).all() and not np.isfinite(got[2]).all()


@pytest.mark.parametrize("where", ["data", "data and filter", "filter", "filter, zero data"])
def test_prepared_tiny_call_overflows_silently_like_the_general_path(forced_dense, where):
    # Values near the float32 limit (or an infinite tap, also against zeros) take the
    # prepared call's guarded product; the result is the general path's, and nothing
    # warns.  "data and filter": inputs whose squares stay finite, so that only the
    # bound on their sum (not an overflow of it) sends them to the guarded product.
    call = TINY["openvino"]
    data, filter = _tiny(batch=2)
    if where.startswith("data"):
        filter = np.abs(filter) + 1
        data[1] = 3e38
        if where == "data and filter":
            filter *= np.float32(4e19)  # every product with 1e19 overflows
            data[1] = 0.5
            data[1, 0, 0, 0] = 1e19
    else:
        filter[0, 1, 2, 0] = np.inf
        if where == "filter, zero data":
            data[...] = 0.0
    expected = _general(call, data, filter)
    call(data, filter)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = call(data, filter)
    np.testing.assert_array_equal(got, expected)
    assert not np.isfinite(got).all()


def test_prepared_tiny_call_follows_the_environment_switches(forced_dense, monkeypatch):
    call = TINY["openvino"]
    data, filter = _tiny()
    call(data, filter)
    seen = []
    general = _api.transposed_convolution
    monkeypatch.setattr(_api, "transposed_convolution",
                        lambda *a, **k: seen.append(1) or general(*a, **k))
    for name in ("CONVTRANSPOSE_ALGORITHM", "CONVTRANSPOSE_NO_NUMBA", "CONVTRANSPOSE_NO_BLAS"):
        with monkeypatch.context() as patch:
            patch.setenv(name, "direct" if name == "CONVTRANSPOSE_ALGORITHM" else "1")
            call(data, filter)
        assert len(seen) == 1, name
        seen.clear()


@pytest.mark.parametrize("frontend", ["openvino", "onednn-nxc"])
def test_prepared_tiny_call_raises_nothing_under_a_strict_error_state(forced_dense, frontend):
    # Products below float32's smallest normal number set the underflow flag, which a
    # caller's np.errstate(all="raise") turns into an error unless the call computes
    # under its own quiet state, as the general path does: the first call (general), the
    # repeated ones (prepared) and a prepared layer's all return the oracle's sums.
    call = TINY[frontend]
    data, filter = _tiny()
    data, filter = data * np.float32(3e-21), filter * np.float32(3e-21)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            results = [call(data, filter) for _ in range(3)]
            layer = ct.prepare(ct.convolution_backprop_data, filter=filter, strides=2,
                               pads_begin=1, pads_end=1)
            if frontend == "openvino":
                results += [layer(data) for _ in range(3)]
    assert len(_api.prepared_calls) == 1
    expected = oracle.canonical_result(data.astype(np.float64), filter[None].astype(np.float64),
                                       ct.shapes.convolution_backprop_data(
                                           data.shape, filter.shape, strides=2, pads_begin=1,
                                           pads_end=1).axes)
    assert np.abs(expected).max() < np.finfo(np.float32).tiny  # every sum underflows
    for got in results:
        if frontend == "onednn-nxc":
            got = np.moveaxis(got, -1, 1)
            expected = oracle.canonical_result(
                data.astype(np.float64), filter[None].astype(np.float64),
                ct.shapes.conv_transpose(np.moveaxis(data, 1, -1).shape,
                                         np.moveaxis(filter, (0, 1), (-2, -1)).shape,
                                         strides=2, pads_begin=1, pads_end=0).axes)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-43)


def test_repeated_call_still_checks_the_memory_limit():
    # A pass of the footprint check is kept for the limit it passed under: a lower
    # limit refuses the same call, before anything is allocated.
    call = TINY["onnx"]
    data, filter = _tiny()
    for _ in range(2):
        call(data, filter)
    with ct.limit_memory(64):
        with pytest.raises(ct.ResultTooLargeError):
            call(data, filter)
    np.testing.assert_array_equal(call(data, filter), _general(call, data, filter))


def test_prepared_tiny_calls_only_for_native_floats(forced_dense, monkeypatch):
    call = TINY["openvino"]
    data, filter = _tiny(np.float32)
    data, filter = data.astype(np.int32), filter.astype(np.int32)
    result = _general(call, data, filter)
    call(data, filter)
    # Remembered as having no prepared call (so the choice is not asked again).
    assert all(entry[0] is None for entry in _api.prepared_calls.values())
    assert result.dtype == np.int32
    # float16: the float32 sums' prepared call on the widened data, rounded once.
    data, filter = (array.astype(np.float16) for array in _tiny(np.float32))
    result = _general(call, data, filter)
    call(data, filter)
    assert [type(entry[0]).__name__ for entry in _api.prepared_calls.values()] == [
        "WidenedCall"]
    with monkeypatch.context() as patch:
        _forbid_general_path(patch)
        np.testing.assert_array_equal(call(data, filter).view(np.uint16),
                                      result.view(np.uint16))
    # Byte-swapped operands are read in native order at the boundary: the same numbers,
    # in the native float32.
    data, filter = _tiny(np.float32)
    swapped = call(data.astype(">f4"), filter.astype(">f4"))
    assert swapped.dtype == np.float32 and swapped.dtype.isnative
    np.testing.assert_array_equal(swapped, _general(call, data, filter))
    _api.prepared_calls.clear()
    data, filter = _tiny()
    xio = np.moveaxis(filter, (0, 1), (-2, -1))
    bias = np.arange(3, dtype=np.float32)
    nxc = np.moveaxis(data, 1, -1)
    with_bias = ct.conv_transpose(nxc, xio, bias, strides=2)  # the general path
    assert len(_api.prepared_calls) == 1  # and the bias-free sums' prepared call
    with monkeypatch.context() as patch:  # that call plus the bias: the same bits
        _forbid_general_path(patch)
        np.testing.assert_array_equal(ct.conv_transpose(nxc.copy(), xio.copy(), bias.copy(),
                                                        strides=2), with_bias)


def test_prepared_tiny_calls_stay_bounded(forced_dense):
    _api.prepared_calls.clear()
    for size in range(3, 3 + _api.PREPARED_CALLS_KEPT + 4):
        data = RNG.standard_normal((1, 1, size)).astype(np.float32)
        ct.convolution_backprop_data(data, np.ones((1, 2, 3), np.float32), strides=2)
    assert len(_api.prepared_calls) == _api.PREPARED_CALLS_KEPT


# --------------------------------------------------------------------------- prepared direct calls
# Small layers that numba ``direct`` computes are prepared likewise (``DirectCall``):
# the plane kernel set up once.  Same contract: the general path's bits, against the
# oracle too, and the general path whenever it could decide otherwise.


DIRECT = {  # frontend, its oracle case, data shape (NCX), filter shape (IOX), attributes
    "onnx 2-D": (ct.onnx_conv_transpose, oracle.onnx_conv_transpose_case, (2, 5, 9, 7),
                 (5, 4, 4, 3), dict(strides=[2, 3], pads=[1, 0, 1, 2], dilations=[1, 2])),
    "onnx 1-D grouped": (ct.onnx_conv_transpose, oracle.onnx_conv_transpose_case, (1, 6, 40),
                         (6, 2, 5), dict(strides=[3], pads=[2, 1], group=2)),
    "onnx 3-D": (ct.onnx_conv_transpose, oracle.onnx_conv_transpose_case, (1, 3, 4, 5, 6),
                 (3, 2, 2, 3, 2), dict(strides=[2, 1, 2], pads=[0, 1, 0, 0, 1, 1])),
    "onnx 2-D depthwise": (ct.onnx_conv_transpose, oracle.onnx_conv_transpose_case,
                           (2, 6, 5, 13), (6, 1, 4, 3), dict(strides=2, pads=[1, 1, 1, 0],
                                                             group=6)),
    "onednn NXC": (ct.conv_transpose, oracle.onednn_conv_transpose_case, (2, 6, 7, 6),
                   (6, 5, 3, 3), dict(strides=2, pads_begin=1, pads_end=0, data_format="NXC",
                                      filter_format="IOX", output_padding=1)),
}


def _direct_layer(name, dtype=np.float32):
    """(call, oracle case, data, filter) of one ``DIRECT`` layer with random operands."""
    frontend, case, data_shape, filter_shape, attributes = DIRECT[name]
    data = RNG.standard_normal(data_shape).astype(dtype)
    if attributes.get("data_format") == "NXC":
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    filter = RNG.standard_normal(filter_shape).astype(dtype)

    def call(d, f):
        return frontend(d, f, **attributes)

    def oracle_case(d, f):
        return case(d, f, **attributes)

    return call, oracle_case, data, filter


@pytest.fixture
def forced_direct(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    _api.prepared_calls.clear()
    yield
    _api.prepared_calls.clear()


@pytest.mark.parametrize("name", DIRECT)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prepared_direct_call_is_used_and_gives_the_general_paths_bits(monkeypatch, forced_direct,
                                                                       name, dtype):
    call, case, data, filter = _direct_layer(name, dtype)
    expected = _general(call, data, filter)
    oracle.assert_matches(expected, case(data, filter))
    call(data, filter)  # prepares
    (prepared,) = _api.prepared_calls.values()
    assert type(prepared[0]).__name__ == "DirectCall"
    before = data.copy(), filter.copy()
    with monkeypatch.context() as patch:
        _forbid_general_path(patch)
        got = call(data, filter)
        # Data in another memory order takes the same call.
        strided = np.asfortranarray(data)
        np.testing.assert_array_equal(call(strided, filter), expected)
    np.testing.assert_array_equal(data, before[0])
    np.testing.assert_array_equal(filter, before[1])
    assert got.dtype == expected.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected)


def test_prepared_direct_call_notices_an_edited_filter(forced_direct):
    call, case, data, filter = _direct_layer("onnx 2-D")
    call(data, filter)
    filter[3, 1, 2, 0] += 1.0
    got = call(data, filter)
    oracle.assert_matches(got, case(data, filter))
    np.testing.assert_array_equal(got, _general(call, data, filter))


def test_prepared_direct_call_takes_non_finite_data_exactly(monkeypatch, forced_direct):
    call, case, data, filter = _direct_layer("onnx 2-D")
    call(data, filter)
    data[1, 2, 4, 3] = np.inf
    data[0, 0, 0, 0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = call(data, filter)
    # Exact: only the outputs the special values' taps reach are not finite.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "col2im-ncx")
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(call(data, filter)))
    finite = np.isfinite(got)
    assert 0 < finite.sum() < got.size
    # Elsewhere the sums of the finite data (the special values' outputs filled in).
    zeroed = case(np.where(np.isfinite(data), data, 0), filter)
    oracle.assert_matches(np.where(finite, got, zeroed.rounded()), zeroed)


def test_prepared_direct_calls_never_for_a_non_finite_filter(monkeypatch, forced_direct):
    call, case, data, filter = _direct_layer("onnx 2-D")
    filter[0, 0, 0, 0] = np.inf
    got = call(data, filter)
    assert all(entry[0] is None for entry in _api.prepared_calls.values())
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "col2im-ncx")  # exact: only taps it meets
    np.testing.assert_allclose(got, call(data, filter), rtol=1e-5, atol=1e-5)
    assert 0 < np.isfinite(got).sum() < got.size


def test_prepared_direct_call_follows_the_environment_switches(monkeypatch, forced_direct):
    call, _, data, filter = _direct_layer("onnx 2-D")
    call(data, filter)
    seen = []
    general = _api.transposed_convolution
    monkeypatch.setattr(_api, "transposed_convolution",
                        lambda *a, **k: seen.append(1) or general(*a, **k))
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-blocked")
    call(data, filter)
    assert seen == [1]


def _prepared_callables():
    return [entry[0] for entry in _api.prepared_calls.values() if entry[0] is not None]


def test_prepared_direct_calls_only_where_a_kernel_is_set_up_once(monkeypatch, forced_direct):
    from convtranspose._execute import transposed as execute
    from convtranspose._kernels._numba import direct as numba_direct

    # The per-position kernel (channels-last, many groups of one channel), a long line in
    # segments and a float16 layer's rounding kernel are set up once; a filter above the
    # bound: the general path each time.
    depthwise = RNG.standard_normal((1, 6, 5, 16)).astype(np.float32)
    ct.conv_transpose(depthwise, RNG.standard_normal((3, 3, 16, 1)).astype(np.float32),
                      strides=2, groups=16)
    assert len(_prepared_callables()) == 1
    _api.prepared_calls.clear()
    call, _, data, filter = _direct_layer("onnx 2-D")
    call(data.astype(np.float16), filter.astype(np.float16))
    assert len(_prepared_callables()) == 1
    _api.prepared_calls.clear()
    monkeypatch.setattr(execute, "PREPARED_MAX_FILTER_BYTES", filter.nbytes // 2 - 1)
    call(data.astype(np.float16), filter.astype(np.float16))
    assert not _prepared_callables()
    monkeypatch.undo()
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    _api.prepared_calls.clear()
    monkeypatch.setattr(numba_direct, "line_segmented", lambda axis, ci: True)
    call, _, data, filter = _direct_layer("onnx 1-D grouped")
    call(data, filter)
    assert len(_prepared_callables()) == 1
    _api.prepared_calls.clear()
    monkeypatch.undo()
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    monkeypatch.setattr(execute, "PREPARED_MAX_FILTER_BYTES", filter.nbytes - 1)
    call(data, filter)
    assert not _prepared_callables()
    monkeypatch.setattr(execute, "PREPARED_MAX_FILTER_BYTES", filter.nbytes)
    _api.prepared_calls.clear()  # the layer is remembered as having none: start afresh
    call(data, filter)
    assert len(_prepared_callables()) == 1


def test_prepared_direct_call_yields_to_another_target(forced_direct):
    # Its kernels and threads were set up for the target of its first call: under
    # another target it declines, and the general path computes the oracle's result.
    call, case, data, filter = _direct_layer("onnx 2-D")
    call(data, filter)  # prepares
    (prepared,) = _api.prepared_calls.values()
    assert prepared[0](data, filter) is not None
    with ct.use_target(ct.host_target().replace(threads=1)):
        assert prepared[0](data, filter) is None
        oracle.assert_matches(call(data, filter), case(data, filter))
