"""The frontends' plan memo never changes an answer.

A cached plan must be exactly the plan a fresh resolution gives, and values that
compare equal but mean different things to the resolvers (True vs 1, 2.0 vs 2,
an array vs a list) must not share a cache entry.
"""

import numpy as np
import pytest

import convtranspose as ct
from convtranspose import _api

DATA = np.arange(2 * 2 * 4 * 4, dtype=np.float64).reshape(2, 2, 4, 4)
FILTER = np.arange(2 * 3 * 3 * 3, dtype=np.float64).reshape(2, 3, 3, 3)


def test_cached_plan_equals_fresh_resolution():
    _api._plan_cache.clear()
    kwargs = dict(strides=[2, 1], pads_begin=1, pads_end=[0, 1], output_padding=1)
    first = ct.convolution_backprop_data(DATA, FILTER, **kwargs)
    assert len(_api._plan_cache) == 1
    second = ct.convolution_backprop_data(DATA, FILTER, **kwargs)
    np.testing.assert_array_equal(first, second)
    (cached,) = _api._plan_cache.values()
    assert cached == ct.shapes.convolution_backprop_data(DATA.shape, FILTER.shape, **kwargs)


@pytest.mark.parametrize("bad", [True, 2.0, np.float64(2.0)])
def test_values_equal_to_a_cached_int_are_still_validated(bad):
    ct.convolution_backprop_data(DATA, FILTER, strides=int(bad))  # caches the equal int
    with pytest.raises(ct.ConvTransposeError, match="strides"):
        ct.convolution_backprop_data(DATA, FILTER, strides=bad)


def test_errors_are_not_cached():
    _api._plan_cache.clear()
    for _ in range(2):
        with pytest.raises(ct.ConvTransposeError, match="pads_begin"):
            ct.convolution_backprop_data(DATA, FILTER, pads_begin=-1)
    assert not _api._plan_cache


def test_output_shape_array_and_list_resolve_alike():
    as_list = ct.convolution_backprop_data(DATA, FILTER, [7, 7], strides=2, auto_pad="same_upper")
    as_array = ct.convolution_backprop_data(DATA, FILTER, np.array([7, 7]), strides=2,
                                            auto_pad="same_upper")
    np.testing.assert_array_equal(as_list, as_array)
    with pytest.raises(ct.ConvTransposeError, match="output_shape"):
        ct.convolution_backprop_data(DATA, FILTER, np.array([7.0, 7.0]), strides=2)


def test_cache_stays_bounded():
    _api._plan_cache.clear()
    for pad in range(_api._PLAN_CACHE_SIZE + 10):
        _api._resolve(ct.shapes.onnx_conv_transpose, (1, 1, 3), (1, 1, 3), strides=pad + 1)
    assert len(_api._plan_cache) == _api._PLAN_CACHE_SIZE


def test_same_values_under_other_keywords_do_not_collide():
    _api._plan_cache.clear()
    by_strides = _api._resolve(ct.shapes.onnx_conv_transpose, (1, 1, 3), (1, 1, 3), strides=2)
    by_dilations = _api._resolve(ct.shapes.onnx_conv_transpose, (1, 1, 3), (1, 1, 3), dilations=2)
    assert by_strides.strides == (2,) and by_dilations.strides == (1,)
    assert by_dilations.dilations == (2,)


@pytest.mark.parametrize("first, second", [
    ([1, 2], [True, 2]),          # bool inside a sequence
    ([2, 2], [2.0, 2]),           # float inside a sequence
    (2, (2,)),                    # scalar vs one-element sequence: both valid, both cached
])
def test_lookalike_values_get_their_own_entries(first, second):
    _api._plan_cache.clear()
    _api._resolve(ct.shapes.onnx_conv_transpose, (1, 1, 3, 3), (1, 1, 3, 3), strides=first)
    try:
        _api._resolve(ct.shapes.onnx_conv_transpose, (1, 1, 3, 3), (1, 1, 3, 3), strides=second)
    except ct.ConvTransposeError:
        assert len(_api._plan_cache) == 1   # refused, as a fresh resolution would
    else:
        assert len(_api._plan_cache) == 2


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
