"""Prepared layers of the quantized dialects (``ct.prepare`` -> PreparedQuantizedLayer).

The oracle is each dialect's array function, itself tested against its owner (ONNX
Runtime, TFLite, torch, oneDNN's rules, OpenVINO) in the dialect's own test file: a
prepared layer must return its result bit for bit, keep its own copies of the arrays,
and raise the function's errors.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._plan.dialects import DIALECTS


def _qlinear(rng, per_channel, bias, layout):
    c, m, group = 4, 6, 2 if per_channel else 1
    w = rng.integers(-128, 128, (c, m // group, 3, 3), dtype=np.int8)
    arguments = dict(
        x_scale=np.float32(0.05), x_zero_point=np.uint8(rng.integers(0, 256)), w=w,
        w_scale=(rng.uniform(0.01, 0.1, m).astype(np.float32) if per_channel
                 else np.float32(0.03)),
        w_zero_point=(rng.integers(-5, 6, m, dtype=np.int8) if per_channel else np.int8(2)),
        y_scale=np.float32(0.7), y_zero_point=np.uint8(128),
        B=rng.integers(-5000, 5000, m, dtype=np.int32) if bias else None,
        strides=[2, 2], pads=[1, 0, 1, 0], group=group)

    def data(n, h, wd):
        return rng.integers(0, 256, (n, c, h, wd), dtype=np.uint8)

    return ct.qlinear_conv_transpose, arguments, data, "w"


def _tflite(rng, per_channel, bias, layout):
    cin, cout = 3, 5
    weights = rng.integers(-127, 128, (cout, 3, 3, cin), dtype=np.int8)
    arguments = dict(
        output_shape=[2, 8, 10, cout], weights=weights,
        bias=rng.integers(-3000, 3000, cout, dtype=np.int32) if bias else None,
        input_scale=np.float32(0.1), input_zero_point=np.int64(rng.integers(-20, 20)),
        weights_scale=(rng.uniform(0.01, 0.1, cout).astype(np.float32) if per_channel
                       else np.float32(0.05)),
        weights_zero_point=np.zeros(cout, np.int64) if per_channel else 0,
        output_scale=np.float32(0.3), output_zero_point=np.int64(3), padding="SAME",
        stride_h=2, stride_w=2)

    def data(n, h, wd):  # the output shape is bound: (2, 4, 5) is the only input shape
        return rng.integers(-128, 128, (n, h, wd, cin), dtype=np.int8)

    return ct.tflite_quantized_transpose_conv, arguments, data, "weights"


def _torch(rng, per_channel, bias, layout):
    cin, per_group, groups = 4, 3, 2 if per_channel else 1
    weight = rng.integers(-128, 128, (cin, per_group, 2, 3), dtype=np.int8)
    arguments = dict(
        weight=weight, bias=rng.standard_normal(per_group * groups) if bias else None,
        stride=2, padding=1, output_padding=1, groups=groups, input_scale=0.02,
        input_zero_point=int(rng.integers(0, 256)),
        weight_scale=rng.uniform(0.01, 0.1, per_group) if per_channel else 0.04,
        weight_zero_point=(rng.integers(-3, 4, per_group) if per_channel else 0),
        output_scale=0.5, output_zero_point=60, engine="fbgemm" if bias else "x86")

    def data(n, h, wd):
        return rng.integers(0, 256, (n, cin, h, wd), dtype=np.uint8)

    return ct.torch_quantized_conv_transpose, arguments, data, "weight"


def _onednn(rng, per_channel, bias, layout):
    i, o = 5, 4
    arguments = dict(
        filter=rng.integers(-128, 128, (3, 3, i, o), dtype=np.int8),
        bias=rng.standard_normal(o).astype(np.float32) if bias else None,
        src_scale=0.03, wei_scales=(rng.uniform(0.01, 0.1, o).astype(np.float32)
                                    if per_channel else 0.05),
        dst_scale=0.2, src_zero_point=int(rng.integers(0, 256)), dst_zero_point=7,
        dst_dtype="u8", strides=[2, 2], pads_begin=[1, 0], pads_end=[0, 1],
        data_format=layout)

    def data(n, h, wd):
        shape = (n, h, wd, i) if layout == "NXC" else (n, i, h, wd)
        return rng.integers(0, 256, shape, dtype=np.uint8)

    return ct.onednn_quantized_conv_transpose, arguments, data, "filter"


def _fake_quantize(rng, per_channel, bias, layout):
    c, m = 3, 4
    filter_low = (-rng.uniform(0.5, 1, (1, m, 1, 1)) if per_channel else -0.8)
    filter_quantize = [filter_low, 0.9, np.float32(-0.7), 0.8, 255]
    arguments = dict(
        filter=rng.standard_normal((c, m, 3, 3)).astype(np.float32),
        data_quantize=(np.float32(-1), np.float32(1), -1.0, 1.0, 256),
        filter_quantize=filter_quantize,
        output_quantize={"input_low": -4, "input_high": 4, "output_low": -4,
                         "output_high": 4, "levels": 17} if bias else None,
        strides=[2, 2], pads_begin=[1, 1], pads_end=[0, 0])

    def data(n, h, wd):
        return rng.standard_normal((n, c, h, wd)).astype(np.float32)

    return ct.fake_quantize_convolution_backprop_data, arguments, data, "filter"


def _fake_quantize_group(rng, per_channel, bias, layout):
    arguments = dict(
        filter=rng.standard_normal((2, 2, 3, 2, 2)).astype(np.float32),
        data_quantize=(-1.0, 1.0, -1.0, 1.0, 16), filter_quantize=(-1.0, 1.0, -1.0, 1.0, 16),
        strides=[1, 2])

    def data(n, h, wd):
        return rng.standard_normal((n, 4, h, wd)).astype(np.float32)

    return ct.fake_quantize_group_convolution_backprop_data, arguments, data, "filter"


BUILDERS = {"qlinear": _qlinear, "tflite": _tflite, "torch": _torch, "onednn": _onednn,
            "fake_quantize": _fake_quantize, "fake_quantize_group": _fake_quantize_group}
VARIANTS = [(name, per_channel, bias, layout)
            for name in BUILDERS for per_channel in (False, True) for bias in (False, True)
            for layout in (("NXC", "NCX") if name == "onednn" else ("-",))]
#: The input shape every layer takes (tflite binds its output shape, so only this one),
#: and a second one for the others.
SHAPE, SECOND = (2, 4, 5), (1, 3, 6)


def _both(function, arguments, data):
    return function(**{_data_name(function): data}, **arguments)


def _data_name(function):
    return DIALECTS[function.__name__].operands[0]


def _same(a, b):
    assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def _edited(value):
    """``value`` with every element changed in place (an array) and that array."""
    flat = value.reshape(-1)
    if value.dtype.kind == "f":
        flat *= -1.5
    else:
        flat[...] = np.where(flat == 1, 2, 1).astype(value.dtype)
    return value


@pytest.mark.parametrize("name, per_channel, bias, layout", VARIANTS)
def test_layer_is_the_function_bit_for_bit(name, per_channel, bias, layout):
    rng = np.random.default_rng(abs(hash((name, per_channel, bias, layout))) % 2**32)
    function, arguments, data, _ = BUILDERS[name](rng, per_channel, bias, layout)
    layer = ct.prepare(function, **arguments)
    assert isinstance(layer, ct.PreparedQuantizedLayer)
    x = data(*SHAPE)
    expected = _both(function, arguments, x)
    _same(layer(x), expected)
    _same(layer(x), expected)  # a second call, with whatever the first one kept
    if name != "tflite":
        x2 = data(*SECOND)
        _same(layer(x2), _both(function, arguments, x2))
    out = np.empty_like(expected)
    assert layer(x, out=out) is out
    _same(out, expected)
    _same(pickle.loads(pickle.dumps(layer))(x), expected)
    shown = repr(layer)
    assert shown.startswith(f"PreparedQuantizedLayer({function.__name__}") and "called:" in shown


@pytest.mark.parametrize("name", list(BUILDERS))
def test_editing_the_callers_arrays_changes_nothing(name):
    rng = np.random.default_rng(7)
    function, arguments, data, filter_name = BUILDERS[name](rng, True, True, "NXC")
    kept = {key: value.copy() if isinstance(value, np.ndarray) else value
            for key, value in arguments.items()}
    layer = ct.prepare(function, **arguments)
    x = data(*SHAPE)
    expected = _both(function, kept, x)
    _edited(arguments[filter_name])
    for key, value in arguments.items():
        if key != filter_name and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            value *= 1.25  # scales and float biases: still positive where positive
    if name == "fake_quantize":
        arguments["filter_quantize"][0] *= 2
        arguments["filter_quantize"][4] = 3  # the list itself, edited
    assert _both(function, arguments, x).tobytes() != expected.tobytes()  # the edit shows
    _same(layer(x), expected)
    assert not layer.arguments[filter_name].flags.writeable


@pytest.mark.parametrize("name", list(BUILDERS))
def test_set_weights_gives_the_function_of_the_new_weights(name):
    rng = np.random.default_rng(11)
    function, arguments, data, filter_name = BUILDERS[name](rng, False, False, "NCX")
    layer = ct.prepare(function, **arguments)
    x = data(*SHAPE)
    layer(x)
    new = _edited(arguments[filter_name].copy())
    layer.set_weights(new)
    _same(layer(x), _both(function, dict(arguments, **{filter_name: new}), x))
    bias_name = DIALECTS[function.__name__].operands[2]
    if bias_name is not None:
        channels = {"qlinear": 6, "tflite": 5, "torch": 3, "onednn": 4}[name]
        bias = (rng.integers(-900, 900, channels, dtype=np.int32)
                if name in ("qlinear", "tflite") else rng.standard_normal(channels))
        if name == "onednn":
            bias = bias.astype(np.float32)
        layer.set_weights(**{filter_name: arguments[filter_name], bias_name: bias})
        _same(layer(x), _both(function, dict(arguments, **{bias_name: bias}), x))
    with pytest.raises(TypeError, match="set_weights"):
        layer.set_weights(x, x, x)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_bad_data_raises_what_the_function_raises(name):
    rng = np.random.default_rng(3)
    function, arguments, data, _ = BUILDERS[name](rng, True, False, "NXC")
    layer = ct.prepare(function, **arguments)
    good = data(*SHAPE)
    wrong_type = good.astype(np.float64 if good.dtype.kind != "f" else np.int32)
    axis = -1 if name in ("tflite", "onednn") else 1  # one channel more than the weights'
    wrong_shape = np.concatenate([good, good.take([0], axis=axis)], axis=axis)
    for bad in (wrong_type, wrong_shape):
        with pytest.raises((TypeError, ct.ConvTransposeError)) as expected:
            _both(function, arguments, bad)
        with pytest.raises(expected.type) as raised:
            layer(bad)
        assert str(raised.value) == str(expected.value)


def test_bad_arguments_raise_at_prepare_or_on_the_first_call():
    w = np.zeros((1, 1, 3), np.int8)
    with pytest.raises(TypeError, match="x is given to each call"):
        ct.prepare(ct.qlinear_conv_transpose, x=w, w=w)
    with pytest.raises(TypeError, match="unknown argument 'W'"):
        ct.prepare(ct.qlinear_conv_transpose, W=w)
    with pytest.raises(TypeError, match="missing the argument 'x_scale'"):
        ct.prepare(ct.qlinear_conv_transpose, w=w)
    arguments = dict(x_scale=-1.0, x_zero_point=0, w=w, w_scale=1.0,
                     w_zero_point=np.int8(0), y_scale=1.0, y_zero_point=0)
    layer = ct.prepare(ct.qlinear_conv_transpose, **arguments)
    x = np.zeros((1, 1, 2), np.uint8)
    with pytest.raises(ct.ConvTransposeError) as expected:
        ct.qlinear_conv_transpose(x, **arguments)
    with pytest.raises(ct.ConvTransposeError) as raised:
        layer(x)
    assert str(raised.value) == str(expected.value)


def test_explain_says_what_it_covers():
    layer = ct.prepare(ct.qlinear_conv_transpose, x_scale=1.0, x_zero_point=0,
                       w=np.ones((1, 1, 3), np.int8), w_scale=1.0, w_zero_point=np.int8(0),
                       y_scale=1.0, y_zero_point=0)
    with pytest.raises(ct.ConvTransposeError, match="float dialects"):
        layer.explain((1, 1, 4))


def test_a_prepared_layer_does_not_compare_its_filter_on_each_call(monkeypatch):
    """The layer's filter is its own: the weights memo finds the derived weights by
    ownership, never by comparing bytes (``same_bits``)."""
    from convtranspose._runtime import memo

    rng = np.random.default_rng(5)
    for name in ("qlinear", "tflite", "torch", "onednn"):
        function, arguments, data, _ = BUILDERS[name](rng, True, True, "NXC")
        layer = ct.prepare(function, **arguments)
        x = data(*SHAPE)
        layer(x)
        compared = []
        original = memo.same_bits
        monkeypatch.setattr(memo, "same_bits",
                            lambda kept, weights: compared.append(weights.shape)
                            or original(kept, weights))
        layer(x)
        monkeypatch.setattr(memo, "same_bits", original)
        assert compared == [], (name, compared)


@pytest.mark.parametrize("kernel", ["any", "pairs"])
@pytest.mark.parametrize("seed", range(6))
def test_qlinear_repeated_calls_run_prepared(monkeypatch, every_layer_integer, seed, kernel):
    """A qlinear layer's repeated calls of one input shape run its prepared call (the
    function itself is not called again) and return the function's bytes: uint8 and
    int8 data, per-tensor and per-channel weights, bias, groups, 1-3 axes; ``pairs``:
    with VNNI switched off, on the int16 pair products.  Set-up again per input shape
    and after new weights."""
    import functools

    from convtranspose._frontends import quantized

    if kernel == "pairs":
        monkeypatch.setattr(quantized, "vnni_vector_bytes", lambda: 0)
        assert quantized.integer_kinds(ct.host_target()) == ("halves",)  # the switch holds
    rng = np.random.default_rng(seed)
    rank, group = 1 + seed % 3, 1 + seed % 2
    c, m = 2 * group, 3 * group
    x_type = np.uint8 if seed % 2 else np.int8
    info = np.iinfo(x_type)
    w = rng.integers(-128, 128, (c, m // group) + (3,) * rank, dtype=np.int8)
    arguments = dict(
        x_scale=np.float32(0.05), x_zero_point=x_type(rng.integers(info.min, info.max)),
        w=w, w_scale=rng.uniform(0.01, 0.1, m).astype(np.float32),
        w_zero_point=np.zeros(m, np.int8), y_scale=np.float32(0.4),
        y_zero_point=np.uint8(100), B=rng.integers(-900, 900, m, dtype=np.int32),
        strides=[2] * rank, pads=[1] * rank + [0] * rank, group=group)
    called = []
    function = ct.qlinear_conv_transpose

    @functools.wraps(function)
    def counted(*args, **kwargs):
        called.append(1)
        return function(*args, **kwargs)

    monkeypatch.setattr(ct, "qlinear_conv_transpose", counted)
    layer = ct.prepare(counted, **arguments)
    for shape in ((2, c) + (4,) * rank, (1, c) + (5,) * rank):
        x = rng.integers(info.min, info.max + 1, shape, dtype=x_type)
        expected = function(x, **arguments)
        before = len(called)
        for _ in range(3):
            _same(layer(x), expected)
        assert len(called) == before + 1  # the first call only
        _same(layer(np.asfortranarray(x)), expected)
    new = rng.integers(-128, 128, w.shape, dtype=np.int8)
    layer.set_weights(new)
    for _ in range(2):
        _same(layer(x), function(x, **dict(arguments, w=new)))


def test_qlinear_prepared_call_keeps_the_memory_limit():
    """A prepared call checks the memory limit as the function does: refused there,
    refused here, with the function's error."""
    rng = np.random.default_rng(2)
    function, arguments, data, _ = BUILDERS["qlinear"](rng, True, True, "-")
    layer = ct.prepare(function, **arguments)
    x = data(*SHAPE)
    for _ in range(2):
        layer(x)
    with ct.limit_memory(64):
        with pytest.raises(ct.ConvTransposeError) as expected:
            function(x, **arguments)
        with pytest.raises(expected.type) as raised:
            layer(x)
    assert str(raised.value) == str(expected.value)
