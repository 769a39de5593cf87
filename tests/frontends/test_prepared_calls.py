"""Repeated calls of one layer run a prepared call (everything but the data set up once):
every such call equals the slow oracle, through the array functions and prepared layers,
when the caller edits the filter in place, changes the switches or the planning, or
passes data of another memory layout."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends import specs

RNG = np.random.default_rng(20261129)


def _values(shape, dtype=np.float32):
    # Small integers: every sum is exact in float32, so results compare with ==.
    return RNG.integers(-3, 4, size=shape).astype(dtype)


def _prepared_kinds() -> set[str]:
    return {type(entry[0]).__name__ for entry in specs.prepared_calls.values()
            if entry[0] is not None}


# (data shape, filter shape, attributes): small channel planes read in place, and planes
# of 16 KB and more (float32) that direct-blocked reads through a channels-last copy.
BLOCKED_LAYERS = [
    ((2, 6, 5, 7), (6, 20, 3, 3), dict(strides=2, pads_begin=1, pads_end=0)),
    ((1, 4, 64, 66), (4, 8, 2, 2), dict(strides=2)),
    ((1, 3, 9), (3, 40, 4), dict(strides=3, pads_begin=1, pads_end=2, dilations=2)),
]


@pytest.mark.parametrize("data_shape, filter_shape, attributes", BLOCKED_LAYERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_direct_blocked_prepared_call_matches_the_oracle(monkeypatch, data_shape, filter_shape,
                                                         attributes, dtype):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-blocked")
    ct.clear_caches()
    data, filter = _values(data_shape, dtype), _values(filter_shape, dtype)
    for call in range(4):
        if call == 2:
            filter[0] += 1  # edited in place: the prepared call must not serve it
        given = data if call != 3 else np.asfortranarray(data)
        expected = oracle.openvino_cbpd(data, filter, **attributes)
        np.testing.assert_array_equal(
            ct.convolution_backprop_data(given, filter, **attributes), expected)
    assert "DirectCall" in _prepared_kinds()  # the repeated calls ran prepared


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_direct_blocked_prepared_call_channels_last(monkeypatch, dtype):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-blocked")
    ct.clear_caches()
    data, filter = _values((2, 6, 5, 12), dtype), _values((3, 3, 12, 24), dtype)
    attributes = dict(strides=2, pads_begin=1, pads_end=1, output_padding=1)
    expected = oracle.onednn_conv_transpose(data, filter, **attributes)
    for _ in range(3):
        np.testing.assert_array_equal(ct.conv_transpose(data, filter, **attributes), expected)
    assert "DirectCall" in _prepared_kinds()


# (data shape, filter shape, groups, attributes): channels-last layers of many groups of
# at most four products each, which numba direct computes per output position: depthwise
# (its vector kernel), a channel multiplier of 2 and two input channels per group (the
# kernels compiled per channel count), in one, two and three spatial axes.
PER_POSITION_LAYERS = [
    ((2, 5, 6, 16), (3, 3, 16, 1), 16, dict(strides=2, pads_begin=1, pads_end=0)),
    ((1, 7, 6), (4, 6, 2), 6, dict(strides=3, pads_begin=1, pads_end=2, dilations=2)),
    ((2, 3, 4, 5, 16), (2, 3, 2, 16, 2), 8, dict(strides=(1, 2, 2), output_padding=(0, 1, 0))),
]


@pytest.mark.parametrize("data_shape, filter_shape, groups, attributes", PER_POSITION_LAYERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_direct_per_position_prepared_call_matches_the_oracle(monkeypatch, data_shape,
                                                              filter_shape, groups, attributes,
                                                              dtype):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    ct.clear_caches()
    data, filter = _values(data_shape, dtype), _values(filter_shape, dtype)
    for call in range(5):
        if call == 2:
            filter[..., -1, 0] += 1  # edited in place: the prepared call must not serve it
        given = data if call != 3 else np.asfortranarray(data)
        expected = oracle.onednn_conv_transpose(data, filter, groups=groups, **attributes)
        out = np.full(expected.shape, np.nan, dtype) if call == 4 else None
        result = ct.conv_transpose(given, filter, groups=groups, out=out, **attributes)
        np.testing.assert_array_equal(result, expected)
        assert out is None or result is out
    assert "DirectCall" in _prepared_kinds()


# (data shape, filter shape, groups, attributes): 1-D layers whose lines numba direct
# cuts into segments (of 64 inputs here), channels first and last,
# one and two samples (one sample's channels-last segments are stored in place), with
# padding, cropping and output padding at the ends.
SEGMENTED_LAYERS = [
    ((1, 3, 300), (5, 3, 2), 1, dict(strides=2, pads_begin=1, pads_end=1)),
    ((2, 4, 200), (6, 4, 3), 2, dict(strides=3, pads_begin=2, pads_end=0, dilations=2,
                                    output_padding=1)),
]


@pytest.mark.parametrize("data_shape, filter_shape, groups, attributes", SEGMENTED_LAYERS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_direct_segmented_line_prepared_call_matches_the_oracle(monkeypatch, data_shape,
                                                                filter_shape, groups,
                                                                attributes, channels_last):
    from convtranspose._kernels import schedules

    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    monkeypatch.setattr(schedules, "LINE_SEGMENT_ELEMENTS", 40)
    ct.clear_caches()
    ci, stride = data_shape[1] // groups, attributes["strides"]
    assert data_shape[-1] > 2 * schedules.line_segment_inputs(ci, stride)  # segmented
    data, filter = _values(data_shape), _values(filter_shape)
    if channels_last:
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    arguments = dict(groups=groups, data_format="NXC" if channels_last else "NCX",
                     **attributes)
    layer = ct.prepare(ct.conv_transpose, filter=filter.copy(), **arguments)
    for call in range(5):
        if call == 2:
            filter[..., 0, 0] += 1  # edited in place: the prepared call must not serve it
            layer.set_weights(filter.copy())
        given = data if call != 3 else np.asfortranarray(data)
        expected = oracle.onednn_conv_transpose(data, filter, **arguments)
        out = np.full(expected.shape, np.nan, np.float32) if call == 4 else None
        np.testing.assert_array_equal(ct.conv_transpose(given, filter, out=out, **arguments),
                                      expected)
        np.testing.assert_array_equal(layer(given), expected)
    assert "DirectCall" in _prepared_kinds()


# (algorithm, data shape, filter shape, attributes): GEMM layers prepared through the
# registry's ``prepare`` entries.  col2im: overlapping taps (adds), k2 s2 (disjoint
# copies), few output channels (numba's scatter, channels last), groups, a crop; pointwise:
# a 1x1 layer in place, and strided with an output crop (zeros between its inputs).
GEMM_LAYERS = [
    ("col2im-ncx", (2, 6, 5, 7), (6, 20, 3, 3), dict(strides=2, pads_begin=1, pads_end=0)),
    ("col2im-nxc", (2, 6, 5, 7), (6, 3, 3, 3), dict(strides=2, pads_begin=1, pads_end=0)),
    ("col2im-ncx", (1, 4, 6, 6), (4, 24, 2, 2), dict(strides=2)),
    ("col2im-nxc", (1, 3, 9), (3, 40, 4), dict(strides=3, pads_begin=1, pads_end=2,
                                                dilations=2)),
    ("pointwise", (2, 6, 5, 7), (6, 20, 1, 1), dict()),
    ("pointwise", (1, 4, 6, 3), (4, 9, 1, 1), dict(strides=3, pads_begin=1, pads_end=2)),
]


@pytest.mark.parametrize("algorithm, data_shape, filter_shape, attributes", GEMM_LAYERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_prepared_calls_match_the_oracle(monkeypatch, algorithm, data_shape, filter_shape,
                                              attributes, dtype):
    """col2im's and pointwise's prepared calls give the oracle's sums through the array
    function and a prepared layer, after an in-place edit of the filter, for data of
    another memory layout, and with infinities (both multiply only pairs that exist:
    inf and NaN exactly where the oracle has them)."""
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    ct.clear_caches()
    data, filter = _values(data_shape, dtype), _values(filter_shape, dtype)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)
    own = filter.copy()
    for call in range(5):
        if call == 2:
            filter[0] += 1  # edited in place: the prepared call must not serve it
        given = data if call != 3 else np.asfortranarray(data)
        if call == 4:
            given = data.copy()
            given.flat[7] = np.inf
        with np.errstate(invalid="ignore"):
            expected = oracle.openvino_cbpd(given.astype(np.float64), filter.astype(np.float64),
                                            **attributes)
            own_expected = oracle.openvino_cbpd(given.astype(np.float64),
                                                own.astype(np.float64), **attributes)
        np.testing.assert_array_equal(
            ct.convolution_backprop_data(given, filter, **attributes), expected.astype(dtype))
        np.testing.assert_array_equal(layer(given), own_expected.astype(dtype))
    assert "DirectCall" in _prepared_kinds()  # the repeated calls ran prepared


@pytest.mark.parametrize("algorithm", ["pointwise", "col2im-nxc", "col2im-ncx"])
def test_a_shared_prepared_call_keeps_nothing_of_the_callers_filter(monkeypatch, algorithm):
    """A prepared layer that finds the prepared call an array function made for its
    problem gets its own weights' result after the caller edits the function's filter
    in place: nothing that call keeps (the filter's matrices in the weights memo
    included) is a view of the caller's filter."""
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    ct.clear_caches()
    data, filter = _values((2, 5, 6, 8)), _values((1, 1, 8, 12))  # NXC data, XIO filter
    layer = ct.prepare(ct.conv_transpose, filter=filter)
    expected = oracle.onednn_conv_transpose(data, filter)
    for _ in range(2):
        np.testing.assert_array_equal(ct.conv_transpose(data, filter), expected)
    np.testing.assert_array_equal(layer(data), expected)
    filter += 1  # the caller's array, edited in place
    for _ in range(2):
        np.testing.assert_array_equal(layer(data), expected)
    np.testing.assert_array_equal(ct.conv_transpose(data, filter),
                                  oracle.onednn_conv_transpose(data, filter))


@pytest.mark.parametrize("algorithm", ["pointwise", "direct", "col2im-ncx"])
def test_a_prepared_layer_compares_nothing_of_its_own_filter(monkeypatch, algorithm):
    """A prepared layer whose problem's shared prepared call the array function set up
    from the caller's filter gets one of its own, which tells the layer's filter by
    identity: its calls compare no filter bytes, and give the oracle's sums, before and
    after the caller edits its filter in place."""
    from convtranspose._kernels import direct

    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    ct.clear_caches()
    data = _values((2, 6, 5, 5))
    filter = _values((6, 8) + ((1, 1) if algorithm == "pointwise" else (3, 3)))
    attributes = dict(strides=2, pads_begin=1, pads_end=0)
    expected = oracle.openvino_cbpd(data, filter, **attributes)
    for _ in range(2):  # the shared prepared call, set up from the caller's filter
        np.testing.assert_array_equal(ct.convolution_backprop_data(data, filter, **attributes),
                                      expected)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)
    layer(data)
    compared = []
    same_bits = direct.same_bits
    monkeypatch.setattr(direct, "same_bits", lambda *pair: compared.append(1) or same_bits(*pair))
    filter += 1
    for _ in range(3):
        np.testing.assert_array_equal(layer(data), expected)
    assert not compared
    assert "DirectCall" in _prepared_kinds()


@pytest.mark.parametrize("internal_last", [False, True], ids=["col2im-ncx", "col2im-nxc"])
def test_col2im_prepared_call_in_chunks(monkeypatch, internal_last):
    """A layer whose columns exceed the scratch budget goes in chunks of samples and of
    the first axis, prepared as in the general path."""
    from convtranspose._kernels import phase

    monkeypatch.setattr(phase, "SCRATCH_BYTES", 1 << 10)
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM",
                       "col2im-nxc" if internal_last else "col2im-ncx")
    ct.clear_caches()
    data, filter = _values((3, 4, 9, 5)), _values((4, 6, 3, 2))
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    expected = oracle.openvino_cbpd(data, filter, **attributes)
    for _ in range(3):
        np.testing.assert_array_equal(
            ct.convolution_backprop_data(data, filter, **attributes), expected)
    assert "DirectCall" in _prepared_kinds()


def test_prepared_layer_follows_switches_and_planning(monkeypatch):
    """A prepared layer keeps the prepared call of its binding while the planning holds; a
    changed switch or planning level is followed, and every result stays exact."""
    data, filter = _values((1, 8, 6, 6)), _values((8, 16, 3, 3))
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    expected = oracle.openvino_cbpd(data, filter, **attributes)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)
    for algorithm in ("direct-blocked", "direct", "dense", "gemm-ncx", None):
        if algorithm is None:
            monkeypatch.delenv("CONVTRANSPOSE_ALGORITHM")
        else:
            monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
        for _ in range(3):
            np.testing.assert_array_equal(layer(data), expected)
    previous = ct.set_planning("estimate")  # a new planning generation
    try:
        for _ in range(2):
            np.testing.assert_array_equal(layer(data), expected)
    finally:
        ct.set_planning(previous)
    out = np.full(expected.shape, np.nan, np.float32)
    assert layer(data, out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_prepared_layer_with_non_finite_data(monkeypatch):
    """Data with infinities through a bound layer gives the exact result (inf and NaN
    where the oracle has them): a prepared call that cannot vouch for it declines."""
    data, filter = _values((1, 4, 5, 5)), _values((4, 3, 3, 3))
    data[0, 1, 2, 2] = np.inf
    attributes = dict(strides=2)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)
    with np.errstate(invalid="ignore"):
        expected = oracle.openvino_cbpd(data.astype(np.float64), filter.astype(np.float64),
                                        **attributes)
    for algorithm in ("dense", "direct", "direct-blocked"):
        monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
        finite = _values((1, 4, 5, 5))
        layer(finite)  # the binding's prepared call is made on finite data
        for _ in range(2):
            np.testing.assert_array_equal(layer(data), expected.astype(np.float32))


def test_layers_of_one_problem_share_a_prepared_call_only_with_one_filter_layout(monkeypatch):
    """Prepared calls are keyed by the canonical problem and the filter's layout: the
    OpenVINO and ONNX layers of one problem (both filters ``(C_IN, C_OUT, K...)``) share
    one; a oneDNN layer whose filter holds the same bytes in another layout (``OIX``) is
    another filter, and gets its own."""
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-blocked")
    ct.clear_caches()
    data, filter = _values((1, 6, 5, 5)), _values((6, 20, 3, 3))
    expected = oracle.openvino_cbpd(data, filter, strides=2)
    np.testing.assert_array_equal(ct.convolution_backprop_data(data, filter, strides=2),
                                  expected)
    assert len(specs.prepared_calls) == 1
    np.testing.assert_array_equal(ct.onnx_conv_transpose(data, filter, strides=[2, 2]),
                                  expected)
    assert len(specs.prepared_calls) == 1  # the ONNX layer found the OpenVINO layer's
    same_bytes = filter.reshape(20, 6, 3, 3)  # read as (C_OUT, C_IN, K...): another filter
    got = ct.conv_transpose(data, same_bytes, strides=2, data_format="NCX", filter_format="OIX")
    np.testing.assert_array_equal(
        got, oracle.onednn_conv_transpose(data, same_bytes, strides=2, data_format="NCX",
                                          filter_format="OIX"))
    assert len(specs.prepared_calls) == 2


@pytest.mark.parametrize("function, data_shape, arguments", [
    (ct.torch_conv_transpose, (2, 4, 5, 6),
     dict(weight=(4, 3, 3, 3), bias=(6,), stride=2, padding=1, groups=2)),
    (ct.keras_conv_transpose, (1, 6, 5, 3),
     dict(kernel=(3, 3, 5, 3), bias=(5,), strides=2, padding="same")),
    (ct.onnx_conv_transpose, (1, 8, 7), dict(W=(8, 1, 3), B=(8,), group=8, strides=[2])),
], ids=["torch", "keras channels-last", "onnx depthwise"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prepared_layers_with_a_bias_match_the_function_bit_for_bit(function, data_shape,
                                                                     arguments, dtype):
    # A layer with a bias keeps its own prepared call and adds the bias after it: random
    # values (inexact sums), so only the very same additions give the function's bits;
    # and the oracle with the bias alone, on zero data.
    rng = np.random.default_rng(5)
    bound = {name: rng.standard_normal(value).astype(dtype) if isinstance(value, tuple)
             else value for name, value in arguments.items()}
    layer = ct.prepare(function, **bound)
    for _ in range(3):
        data = rng.standard_normal(data_shape).astype(dtype)
        np.testing.assert_array_equal(layer(data), function(data, **bound))
    expected = function(data, **bound)
    out = np.full(expected.shape, np.nan, dtype)
    for _ in range(2):  # into out: the sums overwrite it, the bias is added once
        assert layer(data, out=out) is out
        np.testing.assert_array_equal(out, expected)
    bias_name = "B" if function is ct.onnx_conv_transpose else "bias"
    zeros = layer(np.zeros(data_shape, dtype))
    channel_axis = -1 if function is ct.keras_conv_transpose else 1
    shape = [1] * zeros.ndim
    shape[channel_axis] = -1
    np.testing.assert_array_equal(zeros, np.broadcast_to(
        bound[bias_name].reshape(shape), zeros.shape))


@pytest.mark.parametrize("algorithm", ["direct-blocked", "dense", None])
def test_prepared_layer_into_out_on_repeated_calls(monkeypatch, algorithm):
    """Repeated calls into ``out`` write the oracle's result into it; an ``out`` that
    overlaps the data, is not C-contiguous or has another dtype is treated as the array
    function treats it (a copy, or its error), and a memory limit below the layer's
    footprint is told as the function tells it."""
    if algorithm is not None:
        monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    data, filter = _values((2, 8, 6, 6)), _values((8, 8, 3, 3))
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    expected = oracle.openvino_cbpd(data, filter, **attributes)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)
    np.testing.assert_array_equal(layer(data), expected)
    for _ in range(3):
        out = np.full(expected.shape, np.nan, np.float32)
        assert layer(data, out=out) is out
        np.testing.assert_array_equal(out, expected)
    # The data inside the output's buffer, where the first outputs are written.
    shared = np.zeros(expected.size, np.float32)
    out = shared.reshape(expected.shape)
    inside = shared[:data.size].reshape(data.shape)
    for _ in range(3):
        shared[...] = 0
        inside[...] = data
        assert layer(inside, out=out) is out
        np.testing.assert_array_equal(out, expected)
    strided = np.full(expected.shape[:-1] + (2 * expected.shape[-1],), np.nan,
                      np.float32)[..., ::2]
    assert layer(data, out=strided) is strided
    np.testing.assert_array_equal(strided, expected)
    with pytest.raises(TypeError, match="dtype"):
        layer(data, out=np.empty(expected.shape, np.float64))
    read_only = np.empty(expected.shape, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ct.ConvTransposeError, match="read-only"):
        layer(data, out=read_only)
    out = np.empty(expected.shape, np.float32)
    with ct.limit_memory(64):
        try:
            ct.convolution_backprop_data(data, filter, **attributes, out=out)
        except ct.ConvTransposeError as error:
            with pytest.raises(type(error)):
                layer(data, out=out)
        else:
            layer(data, out=out)
            np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("forward", [False, True], ids=["transposed", "forward"])
def test_a_layer_whose_first_call_moved_the_planning_generation_runs_prepared_after(
        monkeypatch, forward):
    """A call whose planning moved the planning generation (the end of a background
    compile moves it: the layer's choice is then measured again) kept its prepared call
    under the generation it began in.  The layer's next call makes it again, and the
    calls after run it: they do not go through the whole function every time."""
    from convtranspose._frontends import prepared

    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "dense")
    ct.clear_caches()
    data, filter = _values((1, 4, 5, 5)), _values((4, 3, 3, 3))
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    if forward:  # filter [C_OUT, C_IN, K...]: the transposed layer's (Ci, Co, K...)
        function, entry, filter = ct.convolution, "execute_convolution", filter.swapaxes(0, 1)
        expected = oracle.forward_convolution(data, filter[None], (2, 2), (1, 1), (1, 1),
                                              (3, 3))
    else:
        function, entry = ct.convolution_backprop_data, "execute_plan"
        expected = oracle.openvino_cbpd(data, filter, **attributes)
    layer = ct.prepare(function, filter=filter, **attributes)
    whole = getattr(prepared, entry)
    runs = []

    def counted(*args, **kwargs):
        result = whole(*args, **kwargs)
        if not runs:
            ct.set_planning(ct.set_planning(None))  # a new planning generation
        runs.append(True)
        return result

    monkeypatch.setattr(prepared, entry, counted)
    for _ in range(5):
        np.testing.assert_array_equal(layer(data), expected)
    assert len(runs) == 2


def test_prepared_layer_follows_the_thread_count_and_the_target(monkeypatch):
    """A prepared call set up for two threads runs its kernel on numba's threads; under one
    thread (``ct.num_threads``, ``ct.set_num_threads``) or a target without numba
    (``ct.use_target``) it declines and the layer runs what that setting allows: no
    native loop, the same exact result."""
    from convtranspose._kernels._numba import launch
    from convtranspose._runtime import threads

    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    ct.clear_caches()
    if ct.get_num_threads() < 2 or not launch.native_threads(2):
        pytest.skip("needs numba's native threads for two threads")
    # 8.4 M multiply-adds: above what direct leaves on one thread (DIRECT_PARALLEL_MACS).
    data, filter = _values((2, 32, 16, 16)), _values((32, 32, 4, 4))
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    expected = oracle.openvino_cbpd(data, filter, **attributes)
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)

    def loops_of_a_call() -> int:
        before = threads.native_loops_run()
        np.testing.assert_array_equal(layer(data), expected)
        return threads.native_loops_run() - before

    with ct.num_threads(2):
        layer(data)
        assert loops_of_a_call() > 0  # the prepared call's loop
        with ct.num_threads(1):
            assert loops_of_a_call() == 0
        with ct.use_target(ct.host_target().replace(numba=False)):
            assert loops_of_a_call() == 0
        assert loops_of_a_call() > 0
    previous = ct.set_num_threads(1)
    try:
        assert loops_of_a_call() == 0
    finally:
        ct.set_num_threads(previous)
