"""``ct.tflite_quantized_transpose_conv``: TFLite's quantized TRANSPOSE_CONV, bit for bit.

Oracles:

- an integer oracle written here from TFLite's text: the reference kernel's scatter
  loop over every input element, tap and output channel (in Python integers), the
  padding of ``ComputePaddingHeightWidth``, ``QuantizeMultiplier`` computed with exact
  fractions (not ``frexp``), and the scaling rules stated as roundings of exact
  rationals: ``SaturatingRoundingDoublingHighMul`` is ``a * b / 2**31`` rounded to
  nearest with ties up, ``RoundingDivideByPOT`` a division rounded with ties away from
  zero, the int64 rule a division with ties up; the int32 accumulator wraps;
- the runtime itself: models written by ``tf.lite.TFLiteConverter`` (full-integer int8
  and the 16x8 mode) from Keras ``Conv2DTranspose`` and ``tf.nn.conv2d_transpose``, and
  models written here with LiteRT's flatbuffer schema (uint8, fused activations, extreme
  scales, a sum past int32), run by the LiteRT interpreter with its reference kernels
  (equal element for element) and its optimized ones and XNNPACK (which round their own
  way: within one unit); the quantization parameters are read back from the
  interpreter.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._frontends import fixed_point
from oracle import integer_tap_sums

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
UINT8, INT8, INT16 = np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.int16)


# -- the oracle ---------------------------------------------------------------------------

def o_wrap32(v: int) -> int:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def o_round_half_away(q: Fraction) -> int:
    whole = abs(q.numerator) // q.denominator
    if abs(q) - whole >= Fraction(1, 2):
        whole += 1
    return whole if q >= 0 else -whole


def o_round_half_up(q: Fraction) -> int:
    return (q + Fraction(1, 2)).__floor__()


def o_quantize_multiplier(real: float) -> tuple[int, int]:
    """``real = q * 2**shift`` with ``q`` in ``[1/2, 1)``, found by exact comparison;
    ``round(q * 2**31)`` half away from zero; ``2**31`` halved; shifts below -31 flush."""
    if real == 0:
        return 0, 0
    exact, shift = Fraction(real), 0
    while exact / Fraction(2) ** shift >= 1:
        shift += 1
    while exact / Fraction(2) ** shift < Fraction(1, 2):
        shift -= 1
    m = o_round_half_away(exact / Fraction(2) ** shift * 2 ** 31)
    if m == 2 ** 31:
        m, shift = m // 2, shift + 1
    return (0, 0) if shift < -31 else (m, shift)


def o_mbqm32(x: int, m: int, shift: int) -> int:
    a = o_wrap32(x * 2 ** max(shift, 0))
    high = INT32_MAX if a == m == INT32_MIN else o_round_half_up(Fraction(a * m, 2 ** 31))
    return o_round_half_away(Fraction(high, 2 ** max(-shift, 0)))


def o_mbqm64(x: int, m: int, shift: int) -> int:
    reduced = (m + 2 ** 15) // 2 ** 16 if m < 0x7FFF0000 else 0x7FFF
    return o_wrap32(o_round_half_up(Fraction(x * reduced, 2 ** (15 - shift))))


def o_pad(out_size: int, kernel: int, stride: int, padding: str) -> int:
    """``ComputePaddingHeightWidth`` on the output size (the forward convolution's input)."""
    forward = -(-out_size // stride) if padding == "SAME" else (out_size + stride - kernel) // stride
    return max((forward - 1) * stride + kernel - out_size, 0) // 2


def o_sum(output_shape, w, x, b, xz, wz, padding, strides):
    """The reference kernel's scatter: every input element, tap and output channel."""
    n, oh, ow, co = output_shape
    _, kh, kw, ci = w.shape
    ph, pw = o_pad(oh, kh, strides[0], padding), o_pad(ow, kw, strides[1], padding)
    wz = np.broadcast_to(np.asarray(wz, np.int64).reshape(-1), (co,))
    acc = [[[[0] * co for _ in range(ow)] for _ in range(oh)] for _ in range(n)]
    for bi, iy, ix, c in itertools.product(range(n), range(x.shape[1]), range(x.shape[2]),
                                           range(ci)):
        value = int(x[bi, iy, ix, c]) - int(xz)
        for fy, fx, o in itertools.product(range(kh), range(kw), range(co)):
            oy, ox = iy * strides[0] - ph + fy, ix * strides[1] - pw + fx
            if 0 <= oy < oh and 0 <= ox < ow:
                acc[bi][oy][ox][o] += value * (int(w[o, fy, fx, c]) - int(wz[o]))
    if b is not None:
        for bi, oy, ox, o in itertools.product(range(n), range(oh), range(ow), range(co)):
            acc[bi][oy][ox][o] += int(b[o])
    return acc


def o_multipliers(dtype, xs, ws, ys, co):
    ws = np.broadcast_to(np.asarray(ws, np.float32).reshape(-1), (co,))
    if dtype == UINT8:  # GetQuantizedConvolutionMultipler: the float32 product
        reals = [float(np.float32(xs) * ws[0]) / float(np.float32(ys))] * co
    else:
        reals = [float(np.float32(xs)) * float(s) / float(np.float32(ys)) for s in ws]
    return [o_quantize_multiplier(r) for r in reals]


def o_bound(value, scale, zero):
    q = Fraction(float(np.float32(value) / np.float32(scale)))
    return int(zero) + o_round_half_away(q)


def o_range(dtype, activation, scale, zero):
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if activation in ("RELU", "RELU6"):
        low = max(low, o_bound(0.0, scale, zero))
    if activation == "RELU6":
        high = min(high, o_bound(6.0, scale, zero))
    if activation == "RELU_N1_TO_1":
        low, high = max(low, o_bound(-1.0, scale, zero)), min(high, o_bound(1.0, scale, zero))
    return low, high


def oracle(layer):
    """The whole op in Python integers."""
    x, w = layer["input"], layer["weights"]
    return o_requantize(layer, o_sum(layer["output_shape"], w, x, layer.get("bias"),
                                     layer["input_zero_point"], layer["weights_zero_point"],
                                     layer["padding"], layer["strides"]))


def o_requantize(layer, acc):
    """The exact sums ``acc`` (indexed ``[n][y][x][channel]``) through TFLite's rules in
    Python integers."""
    x, co = layer["input"], layer["weights"].shape[0]
    pairs = o_multipliers(x.dtype, layer["input_scale"], layer["weights_scale"],
                          layer["output_scale"], co)
    low, high = o_range(x.dtype, layer.get("activation", "NONE"), layer["output_scale"],
                        int(np.asarray(layer["output_zero_point"]).reshape(-1)[0]))
    zero = int(np.asarray(layer["output_zero_point"]).reshape(-1)[0])
    out = np.empty(layer["output_shape"], x.dtype)
    for index in np.ndindex(*out.shape):
        value = acc[index[0]][index[1]][index[2]][index[3]]
        m, s = pairs[index[3]]
        if x.dtype == INT16 and layer.get("quantized_bias_type") != "INT32":
            scaled = o_mbqm64(value, m, s)
        else:
            scaled = o_mbqm32(o_wrap32(value), m, s)
        out[index] = min(max(o_wrap32(scaled + zero), low), high)
    return out


def call(layer, **extra):
    return ct.tflite_quantized_transpose_conv(
        layer["output_shape"], layer["weights"], layer["input"], layer.get("bias"),
        input_scale=layer["input_scale"], input_zero_point=layer["input_zero_point"],
        weights_scale=layer["weights_scale"], weights_zero_point=layer["weights_zero_point"],
        output_scale=layer["output_scale"], output_zero_point=layer["output_zero_point"],
        padding=layer["padding"], stride_h=layer["strides"][0], stride_w=layer["strides"][1],
        fused_activation_function=layer.get("activation", "NONE"),
        quantized_bias_type=layer.get("quantized_bias_type"), **extra)


# -- random layers ------------------------------------------------------------------------

def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def random_layer(rng, dtype, *, per_channel=None, bias=None, activation="NONE",
                 quantized_bias_type=None):
    """One random layer of ``dtype`` (input and output) with TFLite's parameter rules;
    ``output_scale`` spreads the sums over the output type, some saturated."""
    ci, co = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    strides = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    padding = str(rng.choice(["SAME", "VALID"]))
    h, w = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    n = int(rng.integers(1, 3))
    sizes = []
    for size, k, s in ((h, kh, strides[0]), (w, kw, strides[1])):
        if padding == "SAME":
            sizes.append(int(rng.integers((size - 1) * s + 1, size * s + 1)))
        else:  # VALID: X = (Y - K + s) // s, so Y in [(X-1)s + K, Xs + K - 1]
            sizes.append(int(rng.integers((size - 1) * s + k, size * s + k)))
    weights_type = UINT8 if dtype == UINT8 else INT8
    per_channel = (dtype != UINT8 and bool(rng.integers(0, 2))) if per_channel is None \
        else per_channel
    bias = bool(rng.integers(0, 2)) if bias is None else bias
    layer = dict(
        output_shape=[n, *sizes, co], weights=_ints(rng, weights_type, (co, kh, kw, ci)),
        input=_ints(rng, dtype, (n, h, w, ci)), padding=padding, strides=strides,
        input_scale=np.float32(rng.uniform(0.001, 0.05)),
        input_zero_point=0 if dtype == INT16 else int(_ints(rng, dtype, ())),
        weights_scale=rng.uniform(0.001, 0.05, co if per_channel else ()).astype(np.float32),
        weights_zero_point=int(_ints(rng, UINT8, ())) if dtype == UINT8 else
        np.zeros(co if per_channel else (), np.int64),
        output_zero_point=0 if dtype == INT16 else int(_ints(rng, dtype, ())),
        activation=activation, quantized_bias_type=quantized_bias_type)
    wide = dtype == INT16 and quantized_bias_type != "INT32"
    if bias:
        limit = 2 ** 40 if wide else 2 ** 20
        layer["bias"] = rng.integers(-limit, limit, co).astype(np.int64 if wide else np.int32)
    span = np.iinfo(dtype).max - np.iinfo(dtype).min
    largest = ci * kh * kw * 255 * span + (2 ** 20 if dtype != INT16 else 2 ** 40)
    real = float(layer["input_scale"]) * float(np.max(layer["weights_scale"]))
    layer["output_scale"] = np.float32(real * largest / span / rng.uniform(5, 60))
    return layer


@pytest.fixture(params=["integer", "float64", "int64"])
def sum_in(request, monkeypatch):
    """Every way of the exact sum: the integer kernels on the input as it is (where this
    CPU runs them: x86), float64 and int64 (the integer kernels switched off; for int64
    the float64 bound lowered to 0 too)."""
    from convtranspose._frontends import quantized, tflite_quantized

    if request.param == "integer":
        request.getfixturevalue("every_layer_integer")
    else:
        monkeypatch.setattr(tflite_quantized, "offset_requantized", lambda *arguments: None)
        monkeypatch.setattr(quantized, "integer_sum", lambda *arguments: None)
    if request.param == "int64":
        monkeypatch.setattr(quantized, "FLOAT64_EXACT", 0)
    return request.param


@pytest.mark.parametrize("dtype", [UINT8, INT8, INT16], ids=str)
@pytest.mark.parametrize("seed", range(8))
def test_random_layers_match_the_integer_oracle(seed, dtype, sum_in):
    activation = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")[seed % 4]
    bias_type = "INT32" if dtype == INT16 and seed % 2 else None  # int16's two accumulators
    layer = random_layer(np.random.default_rng(seed), dtype, activation=activation,
                         quantized_bias_type=bias_type)
    copies = {k: np.copy(v) for k, v in layer.items() if isinstance(v, np.ndarray)}
    result = call(layer)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, oracle(layer))
    for key, value in copies.items():  # inputs are never modified
        np.testing.assert_array_equal(layer[key], value)
    plan = ct.shapes.tflite_quantized_transpose_conv(
        layer["output_shape"], layer["weights"].shape, layer["input"].shape,
        None if layer.get("bias") is None else layer["bias"].shape,
        input_scale=(), input_zero_point=(), weights_scale=np.shape(layer["weights_scale"]),
        weights_zero_point=np.shape(layer["weights_zero_point"]), output_scale=(),
        output_zero_point=(), padding=layer["padding"], stride_h=layer["strides"][0],
        stride_w=layer["strides"][1], fused_activation_function=activation,
        quantized_bias_type=bias_type)
    assert plan.output_shape == result.shape


def _numpy_sum(layer):
    """The reference kernel's sums in NumPy int64 (:func:`oracle.integer_tap_sums`, the
    scatter of :func:`o_sum` by taps), bias included, ``(N, H, W, C_out)``."""
    n, oh, ow, co = layer["output_shape"]
    w = layer["weights"]
    pads = [o_pad(size, k, s, layer["padding"])
            for size, k, s in zip((oh, ow), w.shape[1:3], layer["strides"])]
    zero_points = np.broadcast_to(np.asarray(layer["weights_zero_point"]).reshape(-1), (co,))
    acc = integer_tap_sums(np.moveaxis(layer["input"], -1, 1), int(layer["input_zero_point"]),
                           np.transpose(w, (3, 0, 1, 2)), zero_points, layer["strides"], pads,
                           (oh, ow), 1, (1, 1))
    return np.moveaxis(acc, 1, -1) + np.asarray(layer.get("bias", 0), np.int64)


@pytest.mark.parametrize("dtype", [UINT8, INT8], ids=str)
def test_layers_requantized_by_the_threads_that_sum_them_match_the_oracle(dtype):
    """A layer large enough for the integer kernels to requantize each thread's output
    lines as it ends them (64 -> 32 channels, 24x24, k3 s2): TFLite's rules in Python
    integers on the sums of NumPy's scatter, bit for bit."""
    rng = np.random.default_rng(17)
    ci, co = 64, 32
    weights_type = UINT8 if dtype == UINT8 else INT8
    layer = dict(
        output_shape=[1, 48, 48, co], weights=_ints(rng, weights_type, (co, 3, 3, ci)),
        input=_ints(rng, dtype, (1, 24, 24, ci)), padding="SAME", strides=(2, 2),
        input_scale=np.float32(0.02), input_zero_point=int(_ints(rng, dtype, ())),
        weights_scale=(np.float32(0.01) if dtype == UINT8
                       else rng.uniform(0.005, 0.02, co).astype(np.float32)),
        weights_zero_point=(int(_ints(rng, UINT8, ())) if dtype == UINT8
                            else np.zeros(co, np.int64)),
        output_zero_point=int(_ints(rng, dtype, ())), output_scale=np.float32(2.5),
        bias=rng.integers(-2 ** 16, 2 ** 16, co).astype(np.int32))
    with ct.num_threads(2):
        result = call(layer)
    expected = o_requantize(layer, _numpy_sum(layer).tolist())
    assert len(np.unique(expected)) > 20  # spread over the type, not saturated
    np.testing.assert_array_equal(result, expected)


def _arguments(layer):
    """The function's arguments but the input, by name, from a random layer."""
    return dict(
        output_shape=layer["output_shape"], weights=layer["weights"], bias=layer.get("bias"),
        input_scale=layer["input_scale"], input_zero_point=layer["input_zero_point"],
        weights_scale=layer["weights_scale"], weights_zero_point=layer["weights_zero_point"],
        output_scale=layer["output_scale"], output_zero_point=layer["output_zero_point"],
        padding=layer["padding"], stride_h=layer["strides"][0], stride_w=layer["strides"][1],
        fused_activation_function=layer["activation"],
        quantized_bias_type=layer["quantized_bias_type"])


@pytest.mark.parametrize("dtype", [UINT8, INT8, INT16], ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_a_prepared_layers_repeated_calls_run_prepared_and_match_the_oracle(
        seed, dtype, every_layer_integer, counted):
    """``ct.prepare``'s layer: its first call runs the function, the next ones its
    prepared call (the integer kernel set up once: for int16 data, the int16 pair
    products on every CPU, past the byte kernels of CPUs with VNNI), on the first
    input and on others of its shape; each result TFLite's rules in Python
    integers."""
    rng = np.random.default_rng(300 + seed)
    bias_type = "INT32" if dtype == INT16 and seed % 2 else None
    layer = random_layer(rng, dtype, activation=("NONE", "RELU")[seed % 2],
                         bias=seed >= 2, quantized_bias_type=bias_type)
    if seed >= 2:  # a bias of the sums' size, not one that saturates every output
        layer["bias"] //= 2 ** 12
    function, called = counted("tflite_quantized_transpose_conv")
    prepared = ct.prepare(function, **_arguments(layer))
    expected = oracle(layer)
    assert len(np.unique(expected)) > 3  # not saturated
    for _ in range(3):
        np.testing.assert_array_equal(prepared(layer["input"]), expected)
    for _ in range(2):
        other = dict(layer, input=_ints(rng, dtype, layer["input"].shape))
        np.testing.assert_array_equal(prepared(other["input"]), oracle(other))
    assert len(called) == 1  # the first call only


# -- the fixed-point rules, edge by edge -------------------------------------------------

def test_quantize_multiplier_edges():
    reals = [1.0, 0.5, 0.75, 2.0 ** -31, 2.0 ** -32, 2.0 ** -33, 1 - 2.0 ** -33,
             1 - 2.0 ** -32, 1 - 2.0 ** -31, np.nextafter(1.0, 0.0), (2 ** 31 - 0.5) / 2 ** 31,
             (2 ** 31 - 1.5) / 2 ** 31, 3.0, 1000.5, 2.0 ** 29 * 1.5, 1e-12]
    rng = np.random.default_rng(5)
    reals += list(2.0 ** rng.uniform(-40, 25, 300))
    for real in reals:
        assert fixed_point.quantize_multiplier(float(real)) == o_quantize_multiplier(real), real
    # a multiplier that rounds to 2**31 is halved and its shift raised
    assert fixed_point.quantize_multiplier(1 - 2.0 ** -33) == (2 ** 30, 1)


def _values(rng):
    edges = [0, 1, -1, 2, -2, 3, -3, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1,
             2 ** 30, -(2 ** 30), 12345, -12345]
    return np.array(edges + list(rng.integers(INT32_MIN, INT32_MAX, 40, endpoint=True)),
                    np.int64)


def test_multiply_by_quantized_multiplier_32_edges():
    """Multipliers near 2**31, negative shifts down to -31, left shifts that wrap, ties
    of both roundings, and the one saturating product (INT32_MIN squared)."""
    rng = np.random.default_rng(11)
    xs = _values(rng)
    multipliers = [0, 1, 2 ** 30, 2 ** 30 + 1, 2 ** 31 - 1, 2 ** 31 - 2, 1518500250,
                   *rng.integers(2 ** 30, 2 ** 31, 6)]
    shifts = [-31, -30, -17, -8, -2, -1, 0, 1, 2, 7, 30]
    for m, s in itertools.product(multipliers, shifts):
        got = fixed_point.multiply_by_quantized_multiplier(xs, np.int64(m), np.int64(s))
        want = [o_mbqm32(int(x), int(m), s) for x in xs]
        assert got.tolist() == want, (m, s)
    # ties: 2**30 * 1 / 2**31 = 0.5 -> 1 and -0.5 -> 0 (ties up); then /2: 3/2 -> 2, -3/2 -> -2
    assert fixed_point.multiply_by_quantized_multiplier(
        np.array([1, -1, 3, -3]), np.int64(2 ** 30), np.int64(0)).tolist() == [1, 0, 2, -1]
    assert fixed_point.multiply_by_quantized_multiplier(
        np.array([3, -3, 1, -1]), np.int64(2 ** 31 - 1), np.int64(-1)).tolist() == \
        [o_mbqm32(v, 2 ** 31 - 1, -1) for v in (3, -3, 1, -1)]
    saturated = fixed_point.multiply_by_quantized_multiplier(
        np.array([INT32_MIN]), np.int64(INT32_MIN), np.int64(0))
    assert saturated.tolist() == [INT32_MAX] == [o_mbqm32(INT32_MIN, INT32_MIN, 0)]


@pytest.mark.parametrize("dtype, zero, bounds", [(INT8, -5, (-128, 127)), (UINT8, 200, (0, 255)),
                                                 (INT8, 127, (-30, 90))])
def test_compiled_requantization_edges(dtype, zero, bounds):
    """The compiled int32 requantization pass (the frontend's path where numba is):
    per channel one (multiplier, shift) of the edge sets above, sums past int32 (wrapped
    first), the saturating product, ties, and clamping at both bounds, against the
    Python-integer rules."""
    pytest.importorskip("numba")
    from convtranspose._kernels.requantize import fixed_point_requantized

    rng = np.random.default_rng(13)
    multipliers = [0, 1, 2 ** 30, 2 ** 30 + 1, 2 ** 31 - 1, 1518500250, INT32_MIN,
                   *rng.integers(2 ** 30, 2 ** 31, 3)]
    pairs = list(itertools.product(multipliers, [-31, -17, -2, -1, 0, 1, 7, 30]))
    xs = np.concatenate([_values(rng), [2 ** 32 + 5, -(2 ** 33) - 7, 2 ** 40 + 2 ** 31, 3, -3]])
    acc = np.repeat(xs[:, None], len(pairs), axis=1).reshape(5, -1, len(pairs))
    multiplier = np.array([m for m, _ in pairs], np.int64)
    shift = np.array([s for _, s in pairs], np.int64)
    got = fixed_point_requantized(acc, multiplier, shift, zero, bounds, dtype, threads=2)
    assert got.dtype == dtype and got.shape == acc.shape
    want = [[min(max(o_wrap32(o_mbqm32(o_wrap32(int(x)), int(m), int(s)) + zero), bounds[0]),
                 bounds[1]) for m, s in pairs] for x in xs]
    assert got.reshape(len(xs), -1).tolist() == want
    assert {bounds[0], bounds[1]} <= set(got.reshape(-1).tolist())


def test_compiled_int64_requantization_edges():
    """The compiled pass of the int16 x int8 kernels' int64 rule: multipliers at the
    15-bit cut (``0x7FFF0000``), shifts from -31 to 14, sums of 48 bits, clamping at
    int16's ends, against the Python-integer rule."""
    pytest.importorskip("numba")
    from convtranspose._kernels.requantize import fixed_point_requantized

    rng = np.random.default_rng(14)
    multipliers = [0, 1, 2 ** 15 - 1, 2 ** 15, 2 ** 30, 0x7FFEFFFF, 0x7FFF0000 - 1,
                   0x7FFF0000, 2 ** 31 - 1, *rng.integers(2 ** 30, 2 ** 31, 3)]
    pairs = list(itertools.product(multipliers, [-31, -20, -15, -1, 0, 3, 7, 14]))
    xs = np.array([0, 1, -1, 2 ** 47 - 1, -(2 ** 47), 2 ** 40 + 3, -(2 ** 40) - 3, 3, -3,
                   *rng.integers(-(2 ** 47), 2 ** 47, 27)], np.int64)
    acc = np.repeat(xs[:, None], len(pairs), axis=1).reshape(4, -1, len(pairs))
    multiplier = np.array([m for m, _ in pairs], np.int64)
    shift = np.array([s for _, s in pairs], np.int64)
    bounds = (-32768, 32767)
    got = fixed_point_requantized(acc, multiplier, shift, 0, bounds, INT16, threads=2,
                                  wide=True)
    assert got.dtype == INT16 and got.shape == acc.shape
    want = [[min(max(o_wrap32(o_mbqm64(int(x), int(m), int(s))), bounds[0]), bounds[1])
             for m, s in pairs] for x in xs]
    assert got.reshape(len(xs), -1).tolist() == want
    assert {bounds[0], bounds[1]} <= set(got.reshape(-1).tolist())


def test_multiply_by_quantized_multiplier_64_edges():
    rng = np.random.default_rng(12)
    xs = np.array([0, 1, -1, 2 ** 47 - 1, -(2 ** 47), 2 ** 40 + 3, -(2 ** 40) - 3,
                   *rng.integers(-(2 ** 47), 2 ** 47, 40)], np.int64)
    multipliers = [0, 1, 2 ** 15 - 1, 2 ** 15, 2 ** 30, 0x7FFEFFFF, 0x7FFF0000 - 1,
                   0x7FFF0000, 2 ** 31 - 1, *rng.integers(2 ** 30, 2 ** 31, 4)]
    for m, s in itertools.product(multipliers, [-31, -20, -15, -1, 0, 3, 7, 14]):
        got = fixed_point.multiply_by_quantized_multiplier_64(xs, np.int64(m), np.int64(s))
        assert got.tolist() == [o_mbqm64(int(x), int(m), s) for x in xs], (m, s)


def test_sums_past_int32_wrap_as_the_int32_accumulator_does(sum_in):
    """A 70,000-product channel sums to about 2.3e9, past int32: TFLite's int32 scratch
    wraps, and so does the result here (the int16 kernel's int64 sum does not)."""
    k = 70_000
    x = np.full((1, 1, 1, k), 127, np.int8)
    w = np.full((1, 1, 1, k), 127, np.int8)
    layer = dict(output_shape=[1, 1, 1, 1], weights=w, input=x, padding="VALID",
                 strides=(1, 1), input_scale=np.float32(1.0), input_zero_point=-128,
                 weights_scale=np.float32(2 ** -24), weights_zero_point=0,
                 output_scale=np.float32(2 ** -8), output_zero_point=0,
                 bias=np.array([INT32_MAX], np.int32))
    exact = k * 255 * 127 + INT32_MAX
    assert exact > 2 ** 32 and o_wrap32(exact) != exact
    np.testing.assert_array_equal(call(layer), oracle(layer))
    x16 = np.full((1, 1, 1, k), 32767, np.int16)
    layer16 = dict(layer, input=x16, input_zero_point=0, bias=np.array([2 ** 45], np.int64),
                   weights_scale=np.float32(2 ** -40))
    np.testing.assert_array_equal(call(layer16), oracle(layer16))


# -- the runtime ---------------------------------------------------------------------------

def _tf():
    return pytest.importorskip("tensorflow", reason="the TFLite converter needs tensorflow")


#: The interpreter's kernels: TFLite's reference kernels, its optimized builtin kernels,
#: and the default, which hands the layers XNNPACK takes to that delegate.
KERNELS = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
           "default": "AUTO"}


def _interpreter(blob: bytes, kernels: str = "reference"):
    """LiteRT's interpreter (ai_edge_litert, else tf.lite) on the model with
    ``KERNELS[kernels]``."""
    try:
        from ai_edge_litert import interpreter as lite
    except ImportError:  # tensorflow's own copy
        import tensorflow as tf

        lite = tf.lite
        resolver = tf.lite.experimental.OpResolverType
    else:
        resolver = lite.OpResolverType
    kind = getattr(resolver, KERNELS[kernels])
    interpreter = lite.Interpreter(model_content=blob, experimental_op_resolver_type=kind,
                                   num_threads=1)
    interpreter.allocate_tensors()
    return interpreter


def run_model(blob: bytes, x: np.ndarray, kernels: str = "reference"):
    """Run the one-op model on ``x``; return the output and the layer as the interpreter
    reports it (constants and every tensor's scale and zero point)."""
    interpreter = _interpreter(blob, kernels)
    op = next(o for o in interpreter._get_ops_details() if o["op_name"] == "TRANSPOSE_CONV")
    details = {d["index"]: d for d in interpreter.get_tensor_details()}
    shape_index, weights_index, input_index = (int(i) for i in op["inputs"][:3])
    bias_index = int(op["inputs"][3]) if len(op["inputs"]) > 3 else -1

    def params(index):
        q = details[index]["quantization_parameters"]
        return q["scales"], q["zero_points"]

    layer = dict(output_shape=interpreter.get_tensor(shape_index).tolist(),
                 weights=interpreter.get_tensor(weights_index), input=x)
    layer["input_scale"], layer["input_zero_point"] = params(input_index)
    layer["weights_scale"], layer["weights_zero_point"] = params(weights_index)
    layer["output_scale"], layer["output_zero_point"] = params(int(op["outputs"][0]))
    if bias_index >= 0:
        layer["bias"] = interpreter.get_tensor(bias_index)
    interpreter.set_tensor(input_index, x)
    interpreter.invoke()
    return interpreter.get_tensor(int(op["outputs"][0])), layer


def converted(tf, make, input_shape, mode, rng):
    """Full-integer conversion of the float model ``make`` (int8, or 16x8) with a
    representative dataset."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [make.get_concrete_function(tf.TensorSpec(input_shape, tf.float32))], make)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: (
        [rng.normal(size=input_shape).astype(np.float32)] for _ in range(8))
    if mode == "int8":
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    else:
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int16
    return converter.convert()


def keras_model(tf, input_shape, filters, kernel, strides, padding, rng, *, bias=True):
    layer = tf.keras.layers.Conv2DTranspose(filters, kernel, strides=strides,
                                            padding=padding.lower(), use_bias=bias)
    layer.build(input_shape)
    weights = [rng.normal(size=(*kernel, filters, input_shape[-1])).astype(np.float32)]
    if bias:
        weights.append(rng.normal(size=filters).astype(np.float32))
    layer.set_weights(weights)
    return tf.function(lambda x: layer(x))


def nn_model(tf, input_shape, filters, kernel, strides, padding, rng, output_shape):
    filters_ = tf.constant(rng.normal(size=(*kernel, filters, input_shape[-1]))
                           .astype(np.float32))
    return tf.function(lambda x: tf.nn.conv2d_transpose(
        x, filters_, output_shape, strides=strides, padding=padding))


def sample(dtype, layer_like_scale, zero, shape, rng):
    """Inputs as quantized data looks: a normal variable quantized, with both ends."""
    info = np.iinfo(dtype)
    values = np.rint(rng.normal(size=shape) / layer_like_scale) + zero
    values.reshape(-1)[:2] = info.min, info.max
    return np.clip(values, info.min, info.max).astype(dtype)


CONVERTED = [  # (source, input shape, filters, kernel, strides, padding, mode)
    ("keras", (1, 5, 6, 3), 4, (3, 2), (2, 3), "SAME", "int8"),
    ("keras", (2, 4, 4, 2), 1, (3, 3), (2, 2), "VALID", "int8"),
    ("keras", (1, 3, 5, 8), 6, (4, 4), (2, 2), "SAME", "int8"),
    ("keras", (1, 5, 6, 3), 4, (3, 2), (2, 3), "SAME", "16x8"),
    ("keras", (1, 4, 3, 5), 3, (1, 3), (1, 2), "VALID", "16x8"),
    ("nn", (1, 4, 5, 3), 5, (3, 3), (2, 2), "SAME", "int8"),
    ("nn", (1, 3, 3, 2), 2, (2, 3), (3, 1), "VALID", "16x8"),
]


@pytest.mark.peers
@pytest.mark.parametrize("number", range(len(CONVERTED)),
                         ids=["-".join(map(str, c)) for c in CONVERTED])
def test_converted_models_are_bit_exact(number):
    tf = _tf()
    source, input_shape, filters, kernel, strides, padding, mode = CONVERTED[number]
    rng = np.random.default_rng(number)
    if source == "keras":
        make = keras_model(tf, input_shape, filters, kernel, strides, padding, rng)
    else:
        sizes = [(x - 1) * s + (k if padding == "VALID" else 1) for x, s, k in
                 zip(input_shape[1:3], strides, kernel)]
        make = nn_model(tf, input_shape, filters, kernel, strides, padding, rng,
                        [input_shape[0], *sizes, filters])
    blob = converted(tf, make, input_shape, mode, rng)
    dtype = INT8 if mode == "int8" else INT16
    probe = _interpreter(blob).get_input_details()[0]["quantization"]
    x = sample(dtype, probe[0], probe[1], input_shape, rng)
    y, layer = run_model(blob, x)
    layer.update(padding=padding, strides=strides)
    assert y.dtype == dtype and len(np.unique(y)) > 3
    result = call(layer)
    np.testing.assert_array_equal(result, y)
    assert np.size(layer["weights_scale"]) == filters  # the converter's per-channel weights
    for kernels in ("optimized", "default"):
        assert_near_reference(run_model(blob, x, kernels)[0], result, kernels)


def assert_near_reference(peer, result, kernels):
    """The optimized int8 and uint8 kernels round the scaled sum their own way (NEON's
    truncating doubling multiply and rounding shift, on blocks of 8 channels), XNNPACK
    in float32: at most one unit apart from the reference kernels.  The int16 kernel
    with an int64 bias is the reference kernel in every resolver."""
    apart = np.abs(peer.astype(np.int64) - result.astype(np.int64))
    assert apart.max() <= (0 if result.dtype == INT16 else 1), kernels


# -- models written here: every type, activation and extreme the converter does not make --

def schema_model(layer) -> bytes:
    """A one-op TRANSPOSE_CONV model written with LiteRT's flatbuffer schema: the
    layer's constants, tensor types and quantization parameters, and its options."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    types = {UINT8: schema.TensorType.UINT8, INT8: schema.TensorType.INT8,
             INT16: schema.TensorType.INT16, np.dtype(np.int32): schema.TensorType.INT32,
             np.dtype(np.int64): schema.TensorType.INT64}
    buffers = [schema.BufferT()]
    tensors = []

    def tensor(name, shape, dtype, data=None, scale=None, zero_point=None):
        t = schema.TensorT()
        t.name, t.shape, t.type = name, list(shape), types[np.dtype(dtype)]
        t.buffer = 0
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            buffers.append(buffer)
            t.buffer = len(buffers) - 1
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(v) for v in np.atleast_1d(scale)]
            q.zeroPoint = [int(v) for v in np.atleast_1d(zero_point)]
            q.quantizedDimension = 0
            t.quantization = q
        tensors.append(t)
        return len(tensors) - 1

    x, w = layer["input"], layer["weights"]
    inputs = [tensor("output_shape", [4], np.int32, np.array(layer["output_shape"], np.int32)),
              tensor("weights", w.shape, w.dtype, w, layer["weights_scale"],
                     layer["weights_zero_point"]),
              tensor("input", x.shape, x.dtype, None, layer["input_scale"],
                     layer["input_zero_point"])]
    if layer.get("bias") is not None:
        b = layer["bias"]
        scales = np.float32(layer["input_scale"]) * np.asarray(layer["weights_scale"],
                                                               np.float32)
        inputs.append(tensor("bias", b.shape, b.dtype, b, scales, np.zeros(scales.size, int)))
    output = tensor("output", layer["output_shape"], x.dtype, None, layer["output_scale"],
                    layer["output_zero_point"])
    options = schema.TransposeConvOptionsT()
    options.padding = getattr(schema.Padding, layer["padding"])
    options.strideH, options.strideW = layer["strides"]
    options.fusedActivationFunction = getattr(schema.ActivationFunctionType,
                                              layer.get("activation", "NONE"))
    if layer.get("quantized_bias_type"):
        options.quantizedBiasType = getattr(schema.TensorType, layer["quantized_bias_type"])
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, inputs, [output]
    op.builtinOptionsType = schema.BuiltinOptions.TransposeConvOptions
    op.builtinOptions = options
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.TRANSPOSE_CONV
    code.version = 1
    graph = schema.SubGraphT()
    graph.tensors, graph.inputs, graph.outputs, graph.operators = tensors, [2], [output], [op]
    model = schema.ModelT()
    model.version, model.operatorCodes, model.subgraphs, model.buffers = 3, [code], [graph], \
        buffers
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def runtime(layer, kernels="reference"):
    pytest.importorskip("ai_edge_litert", reason="the flatbuffer schema is LiteRT's")
    pytest.importorskip("flatbuffers")
    return run_model(schema_model(layer), layer["input"], kernels)[0]


@pytest.mark.peers
@pytest.mark.parametrize("dtype", [UINT8, INT8, INT16], ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_written_models_with_every_type_and_activation(seed, dtype):
    activation = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")[seed]
    layer = random_layer(np.random.default_rng(50 + seed), dtype, activation=activation,
                         per_channel=dtype != UINT8 and seed % 2 == 0)
    if activation == "RELU_N1_TO_1":  # an output scale where [-1, 1] spans some units
        layer["output_scale"] = np.float32(0.05)
    want = runtime(layer)
    np.testing.assert_array_equal(call(layer), want)
    np.testing.assert_array_equal(oracle(layer), want)
    assert_near_reference(runtime(layer, "optimized"), want, "optimized")


@pytest.mark.peers
@pytest.mark.parametrize("dtype", [UINT8, INT8, INT16], ids=str)
def test_written_models_at_the_extremes(dtype):
    """Real multipliers just below 1 (significands next to 2**31), above 1 (a left
    shift), below 2**-31 (flushed to 0), ties, saturation, and zero points at the ends
    of their types."""
    rng = np.random.default_rng(77)
    layer = random_layer(rng, dtype, per_channel=dtype != UINT8, bias=True)
    info = np.iinfo(dtype)
    if dtype != INT16:
        layer["input_zero_point"], layer["output_zero_point"] = int(info.max), int(info.min)
    co = layer["weights"].shape[0]
    for reals in ([1 - 2.0 ** -33], [1 - 2.0 ** -25], [3.0], [2.0 ** -34], [0.5]):
        if dtype == UINT8 or np.size(layer["weights_scale"]) == 1:
            layer["weights_scale"] = np.float32(reals[0])
        else:
            layer["weights_scale"] = np.float32(reals * co) * \
                np.float32(2.0) ** np.arange(co, dtype=np.float32)
        layer["input_scale"] = layer["output_scale"] = np.float32(1.0)
        want = runtime(layer)
        np.testing.assert_array_equal(call(layer), want, err_msg=str(reals))
        np.testing.assert_array_equal(oracle(layer), want, err_msg=str(reals))


@pytest.mark.peers
@pytest.mark.parametrize("seed", range(3))
def test_int16_with_an_int32_bias(seed):
    """``quantized_bias_type`` INT32: the int16 kernel sums in int32 (wrapping) and
    scales by the 32-bit rule."""
    layer = random_layer(np.random.default_rng(90 + seed), INT16, bias=seed != 2,
                         quantized_bias_type="INT32")
    want = runtime(layer)
    np.testing.assert_array_equal(call(layer), want)
    np.testing.assert_array_equal(oracle(layer), want)


@pytest.mark.peers
def test_uint8_multiplier_is_the_float32_product():
    """uint8 derives its multiplier from ``float32(input_scale * weights_scale)``, not the
    double product int8 uses: with the float32 product exactly ``output_scale / 2**20``
    the sum ``2**20 * 100.5`` is a tie rounded up to 101; the double product, a little
    smaller, gives 100."""
    rng = np.random.default_rng(3)
    while True:  # scales whose float32 product is rounded up by more than 2**-26
        a, b = rng.uniform(0.01, 0.1, 2).astype(np.float32)
        product = np.float32(a * b)
        if (Fraction(float(product)) - Fraction(float(a)) * Fraction(float(b))) \
                / (Fraction(float(a)) * Fraction(float(b))) > Fraction(1, 2 ** 26):
            break
    layer = dict(output_shape=[1, 1, 1, 1], weights=np.full((1, 1, 1, 1), 7, np.uint8),
                 input=np.full((1, 1, 1, 1), 9, np.uint8), padding="VALID", strides=(1, 1),
                 input_scale=a, input_zero_point=9, weights_scale=b, weights_zero_point=3,
                 output_scale=np.float32(product * np.float32(2 ** 20)), output_zero_point=0,
                 bias=np.array([2 ** 20 * 201 // 2], np.int32))
    want = runtime(layer)
    assert want.ravel().tolist() == [101]
    np.testing.assert_array_equal(call(layer), want)
    np.testing.assert_array_equal(oracle(layer), want)
    int8 = dict(layer, weights=np.zeros((1, 1, 1, 1), np.int8), input=np.zeros((1, 1, 1, 1),
                np.int8), input_zero_point=0, weights_zero_point=0)
    assert call(int8).ravel().tolist() == [100] == runtime(int8).ravel().tolist()


@pytest.mark.peers
def test_written_model_past_int32():
    """The int32 accumulator wraps in the runtime as here (a sum of 2.3e9 plus a bias
    of INT32_MAX)."""
    k = 70_000
    layer = dict(output_shape=[1, 1, 1, 1], weights=np.full((1, 1, 1, k), 127, np.int8),
                 input=np.full((1, 1, 1, k), 127, np.int8), padding="VALID", strides=(1, 1),
                 input_scale=np.float32(1.0), input_zero_point=-128,
                 weights_scale=np.float32(2 ** -24), weights_zero_point=0,
                 output_scale=np.float32(2 ** -8), output_zero_point=0,
                 bias=np.array([INT32_MAX], np.int32))
    np.testing.assert_array_equal(call(layer), runtime(layer))


# -- bad input -----------------------------------------------------------------------------

def good(dtype=INT8):
    weights_type = UINT8 if dtype == UINT8 else INT8
    return dict(output_shape=[1, 4, 4, 2], weights=np.zeros((2, 3, 3, 3), weights_type),
                input=np.zeros((1, 2, 2, 3), dtype), bias=None, input_scale=np.float32(0.1),
                input_zero_point=0, weights_scale=np.float32(0.1), weights_zero_point=0,
                output_scale=np.float32(0.1), output_zero_point=0, stride_h=2, stride_w=2)


@pytest.mark.parametrize("dtype, change, error, match", [
    (INT8, dict(input=np.zeros((1, 2, 2, 3), np.float32)), TypeError, "input has dtype float32"),
    (INT8, dict(weights=np.zeros((2, 3, 3, 3), np.uint8)), TypeError, "weights has dtype uint8"),
    (UINT8, dict(weights=np.zeros((2, 3, 3, 3), np.int8)), TypeError, "weights has dtype int8"),
    (INT16, dict(weights=np.zeros((2, 3, 3, 3), np.int16)), TypeError, "weights has dtype"),
    (INT8, dict(bias=np.zeros(2, np.int64)), TypeError, "bias has dtype int64"),
    (INT16, dict(bias=np.zeros(2, np.int32)), TypeError, "bias has dtype int32"),
    (INT8, dict(input_zero_point=0.5), TypeError, "input_zero_point has dtype float64"),
    (INT8, dict(input_scale=1), TypeError, "input_scale has dtype int"),
    (INT8, dict(input_zero_point=200), ct.ConvTransposeError, "outside the range of the int8"),
    (UINT8, dict(output_zero_point=-1), ct.ConvTransposeError, "outside the range of the uint8"),
    (INT8, dict(weights_zero_point=3), ct.ConvTransposeError, "symmetric"),
    (INT16, dict(input_zero_point=5), ct.ConvTransposeError, "int16 activations"),
    (INT16, dict(output_zero_point=-5), ct.ConvTransposeError, "int16 activations"),
    (UINT8, dict(weights_scale=np.float32([0.1, 0.2]), weights_zero_point=[3, 3]),
     ct.ConvTransposeError, "per tensor"),
    (INT8, dict(output_scale=np.float32(0)), ct.ConvTransposeError, "must be positive"),
    (INT8, dict(weights_scale=np.float32([0.1, np.nan])), ct.ConvTransposeError,
     "must be positive"),
    (INT8, dict(input_scale=np.float32([0.1, 0.2])), ct.ConvTransposeError,
     r"input_scale has shape \(2,\)"),
    (INT8, dict(weights_scale=np.float32([0.1, 0.2, 0.3])), ct.ConvTransposeError,
     r"weights_scale has shape \(3,\)"),
    (INT8, dict(weights_zero_point=np.zeros(2, np.int64)), ct.ConvTransposeError,
     "weights_scale is per tensor"),
    (INT8, dict(output_zero_point=np.zeros(2, np.int64)), ct.ConvTransposeError,
     "output_zero_point has shape"),
    (INT8, dict(fused_activation_function="TANH"), ct.ConvTransposeError,
     "fused_activation_function must be one of"),
    (INT8, dict(output_scale=np.float32(2.0 ** -40)), ct.ConvTransposeError, "too large"),
    (INT16, dict(output_scale=np.float32(2.0 ** -24)), ct.ConvTransposeError, "too large"),
    (INT8, dict(weights=np.zeros((2, 3, 3, 4), np.int8)), ct.ConvTransposeError, "channels"),
    (INT8, dict(padding="same"), ct.ConvTransposeError, "padding must be"),
    (INT8, dict(quantized_bias_type="INT64"), ct.ConvTransposeError, "for int16 inputs"),
    (INT16, dict(quantized_bias_type="int32"), ct.ConvTransposeError,
     "quantized_bias_type must be"),
    (INT16, dict(quantized_bias_type="INT32", bias=np.zeros(2, np.int64)), TypeError,
     "bias has dtype int64"),
])
def test_bad_input_is_a_clear_error(dtype, change, error, match):
    operands = good(dtype) | change
    with pytest.raises(error, match=match):
        ct.tflite_quantized_transpose_conv(**operands)


def test_the_shape_twin_tells_the_shape_errors():
    shapes = dict(input_scale=(), input_zero_point=(), weights_scale=(2,),
                  weights_zero_point=(2,), output_scale=(), output_zero_point=())
    plan = ct.shapes.tflite_quantized_transpose_conv([1, 4, 4, 2], (2, 3, 3, 3), (1, 2, 2, 3),
                                                     (2,), stride_h=2, stride_w=2, **shapes)
    assert plan.op == "tflite_quantized_transpose_conv" and plan.output_shape == (1, 4, 4, 2)
    assert plan.pads_begin == ct.shapes.tflite_transpose_conv(
        [1, 4, 4, 2], (2, 3, 3, 3), (1, 2, 2, 3), stride_h=2, stride_w=2).pads_begin
    with pytest.raises(ct.ConvTransposeError, match="weights_scale has shape"):
        ct.shapes.tflite_quantized_transpose_conv(
            [1, 4, 4, 2], (2, 3, 3, 3), (1, 2, 2, 3), stride_h=2, stride_w=2,
            **(shapes | {"weights_scale": (3,)}))
    with pytest.raises(ct.ConvTransposeError, match="output_scale has shape"):
        ct.shapes.tflite_quantized_transpose_conv(
            [1, 4, 4, 2], (2, 3, 3, 3), (1, 2, 2, 3), stride_h=2, stride_w=2,
            **(shapes | {"output_scale": (2, 1)}))


def test_out_python_numbers_and_a_wrong_out():
    layer = random_layer(np.random.default_rng(9), INT8)
    want = oracle(layer)
    out = np.empty(want.shape, want.dtype)
    assert call(layer, out=out) is out
    np.testing.assert_array_equal(out, want)
    with pytest.raises(TypeError, match="out must be"):
        call(layer, out=np.empty(want.shape, np.uint8))
    with pytest.raises(ct.ConvTransposeError, match="out has shape"):
        call(layer, out=np.empty((1, 1, 1, 1), np.int8))
    # Python floats and ints, one-element arrays: the same values
    x = np.array([10, 20, 30], np.uint8).reshape(1, 1, 3, 1)
    w = np.array([1, 2, 3], np.uint8).reshape(1, 1, 3, 1)
    y = ct.tflite_quantized_transpose_conv([1, 1, 7, 1], w, x, input_scale=[0.5],
                                           input_zero_point=[10], weights_scale=0.25,
                                           weights_zero_point=np.uint8(1),
                                           output_scale=0.0625, output_zero_point=100,
                                           padding="VALID", stride_w=2)
    # (x - 10) = 0, 10, 20 scattered through (w - 1) = 0, 1, 2: 0, 0, 0, 10, 20, 20, 40;
    # times 0.5 * 0.25 / 0.0625 = 2, plus 100
    assert y.ravel().tolist() == [100, 100, 100, 120, 140, 140, 180]


def test_prepare_binds_the_quantized_dialect():
    """A prepared layer of the docstring's layer gives its hand-computed result
    (tests/frontends/test_prepared_quantized.py compares layers with the function)."""
    layer = ct.prepare(ct.tflite_quantized_transpose_conv, output_shape=[1, 1, 6, 1],
                       weights=np.array([1, 2, 3], np.int8).reshape(1, 1, 3, 1),
                       input_scale=0.5, input_zero_point=10, weights_scale=0.25,
                       weights_zero_point=0, output_scale=0.125, output_zero_point=-100,
                       stride_w=2)
    # (x - 10) = 0, 10, 20 through w at stride 2, times 0.5 * 0.25 / 0.125 = 1, minus 100
    x = np.array([10, 20, 30], np.int8).reshape(1, 1, 3, 1)
    assert layer(x).ravel().tolist() == [-100, -100, -90, -80, -50, -60]
    with pytest.raises(TypeError, match="missing the argument 'output_shape'"):
        ct.prepare(ct.tflite_quantized_transpose_conv, weights=np.zeros((1, 1, 3, 1), np.int8))
