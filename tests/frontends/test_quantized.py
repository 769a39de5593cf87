"""``ct.qlinear_conv_transpose``: quantized ONNX ConvTranspose with an exact integer sum.

Oracles: an int64 sum written here from the definition (each kernel tap's products
scattered to its strided output positions) and a scalar requantization in Python's own
arithmetic (``round`` is half to even); the ONNX QDQ pattern ``DequantizeLinear ->
ConvTranspose -> QuantizeLinear`` run by ``onnx.reference`` (group 1 only: its grouped
ConvTranspose is wrong, ``tests/peers/test_onnx_reference.py``) and by onnxruntime.

``com.microsoft.QLinearConvTranspose`` itself has no kernel in onnxruntime's CPU
execution provider (its schema is registered for the internal NHWC domain only, used
by other execution providers): a model with the node fails to load there, which a test
below pins down; the contrib operator is checked through its QDQ equivalent instead.

A QDQ runtime sums dequantized float32 values, so its sum carries rounding errors the
exact integer sum does not; where a value lands next to a rounding boundary of
QuantizeLinear the two differ by one unit.  With power-of-two scales and small sums
every float32 step is exact, and the results are equal element for element.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._frontends.quantized import sum_dtype

UINT8, INT8 = np.dtype(np.uint8), np.dtype(np.int8)


# -- the oracle ---------------------------------------------------------------------------

def oracle_sum(x, w, b, group, strides, pads, dilations, output_padding):
    """``sum (x - x_zp)(w - w_zp) + B`` for centred int64 ``x`` ``(N, C, X...)`` and
    ``w`` ``(C, M/group, K...)``: each tap ``k`` of group ``g`` adds ``x[n, c, i] *
    w[c, j, k]`` at full position ``i * s + k * d``; the output is the full result
    (with output_padding zeros at the end) cropped by pads."""
    n, channels = x.shape[:2]
    per_group, kernel, rank = w.shape[1], w.shape[2:], x.ndim - 2
    sizes = x.shape[2:]
    full = [(sizes[a] - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1
            + output_padding[a] for a in range(rank)]
    acc = np.zeros((n, group * per_group, *full), np.int64)
    cg = channels // group
    for g in range(group):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg]
        for tap in itertools.product(*map(range, kernel)):
            part = np.einsum("nc...,cm->nm...", xg, wg[(slice(None), slice(None)) + tap])
            at = tuple(slice(tap[a] * dilations[a],
                             tap[a] * dilations[a] + (sizes[a] - 1) * strides[a] + 1,
                             strides[a]) for a in range(rank))
            acc[(slice(None), slice(g * per_group, (g + 1) * per_group)) + at] += part
    crop = tuple(slice(pads[a], full[a] - pads[rank + a]) for a in range(rank))
    acc = acc[(slice(None), slice(None)) + crop]
    if b is not None:
        acc = acc + np.asarray(b, np.int64).reshape((1, -1) + (1,) * rank)
    return acc


def oracle_requantize(acc, x_scale, w_scale, y_scale, y_zero_point):
    """Each element in float32 scalars: ``float32(acc) * float32(xs * ws[m]) / ys``,
    Python's half-to-even ``round``, plus the zero point, clamped to its type."""
    info = np.iinfo(y_zero_point.dtype)
    ws = np.broadcast_to(np.float32(w_scale), (acc.shape[1],))
    result = np.empty(acc.shape, y_zero_point.dtype)
    for index in np.ndindex(*acc.shape):
        scale = np.float32(np.float32(x_scale) * ws[index[1]])
        value = np.float32(np.float32(acc[index]) * scale) / np.float32(y_scale)
        q = round(float(np.float32(value))) + int(y_zero_point)
        result[index] = min(max(q, info.min), info.max)
    return result


def centred_weights(w, w_zp, group):
    zp = np.asarray(w_zp, np.int64).reshape(-1)
    if zp.size == 1:
        return w.astype(np.int64) - zp[0]
    full = np.empty(w.shape[:2], np.int64)
    cg, mg = w.shape[0] // group, w.shape[1]
    for c in range(w.shape[0]):
        for j in range(mg):
            full[c, j] = zp[(c // cg) * mg + j]
    return w.astype(np.int64) - full.reshape(full.shape + (1,) * (w.ndim - 2))


# -- random layers ------------------------------------------------------------------------

def random_layer(rng, *, group=None, per_channel=None, bias=None, dtypes=None,
                 power_of_two=False):
    """Operands and attributes of one random quantized layer (explicit pads)."""
    rank = int(rng.integers(1, 4))
    group = int(rng.integers(1, 3)) if group is None else group
    cg, mg = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sizes = [int(rng.integers(1, 6 if rank < 3 else 4)) for _ in range(rank)]
    kernel = [int(rng.integers(1, 4)) for _ in range(rank)]
    strides = [int(rng.integers(1, 4)) for _ in range(rank)]
    dilations = [int(rng.integers(1, 3)) for _ in range(rank)]
    output_padding = [int(rng.integers(0, s)) for s in strides]
    begins, ends = [], []
    for a in range(rank):
        full = (sizes[a] - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1
        pb = int(rng.integers(0, (kernel[a] - 1) * dilations[a] + 1))
        pe = int(rng.integers(0, (kernel[a] - 1) * dilations[a] + 1))
        while full + output_padding[a] - pb - pe < 1:
            pb, pe = max(pb - 1, 0), max(pe - 1, 0)
        begins.append(pb)
        ends.append(pe)
    xt, wt, yt = dtypes or [rng.choice([UINT8, INT8]) for _ in range(3)]
    channels, m = cg * group, mg * group
    per_channel = bool(rng.integers(0, 2)) if per_channel is None else per_channel
    bias = bool(rng.integers(0, 2)) if bias is None else bias

    def ints(dtype, shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)

    def scales(shape):
        if power_of_two:
            return np.float32(2.0) ** rng.integers(-8, -2, shape).astype(np.float32)
        return rng.uniform(0.002, 0.05, shape).astype(np.float32)

    layer = dict(
        x=ints(xt, (int(rng.integers(1, 3)), channels, *sizes)), x_scale=scales(()),
        x_zero_point=ints(xt, ()), w=ints(wt, (channels, mg, *kernel)),
        w_scale=scales((m,) if per_channel else ()),
        w_zero_point=ints(wt, (m,) if per_channel else ()),
        y_zero_point=ints(yt, ()),
        B=rng.integers(-5000, 5000, m).astype(np.int32) if bias else None)
    attributes = dict(group=group, strides=strides, dilations=dilations,
                      output_padding=output_padding, pads=begins + ends)
    acc = expected_sum(layer, attributes)
    # y_scale spreads the sums over the output type, with some saturated at both ends
    spread = np.float32(np.abs(acc).max() + 1) * layer["x_scale"] * np.max(layer["w_scale"])
    y_scale = spread / np.float32(rng.uniform(60, 200))
    if power_of_two:
        y_scale = np.float32(2.0) ** np.float32(np.ceil(np.log2(y_scale)))
    layer["y_scale"] = np.float32(y_scale)
    return layer, attributes


def expected_sum(layer, attributes):
    x = layer["x"].astype(np.int64) - int(layer["x_zero_point"])
    w = centred_weights(layer["w"], layer["w_zero_point"], attributes["group"])
    return oracle_sum(x, w, layer["B"], attributes["group"], attributes["strides"],
                      attributes["pads"], attributes["dilations"],
                      attributes["output_padding"])


def expected(layer, attributes):
    return oracle_requantize(expected_sum(layer, attributes), layer["x_scale"],
                             layer["w_scale"], layer["y_scale"], layer["y_zero_point"])


def call(layer, attributes, **extra):
    names = ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
             "y_zero_point", "B")
    return ct.qlinear_conv_transpose(*(layer[n] for n in names), **attributes, **extra)


# -- against the oracle --------------------------------------------------------------------

@pytest.fixture(params=["vnni", "pairs", "float32", "float64", "int64"])
def sum_in(request, monkeypatch):
    """Every way of the exact sum: AVX512-VNNI byte products (where the CPU has them),
    int16 pair products (x86; here with VNNI switched off), float32 passes over the
    input channels (every layer whose single channel's taps fit), float64 and int64
    (taken here by switching off the ways before them).  The integer kernels take
    these small layers, whose vector lanes mostly idle, as they take large ones."""
    from convtranspose._frontends import qlinear, quantized
    from convtranspose._runtime.machine import has_vnni, integer_vector_bytes

    if request.param == "vnni" and not has_vnni():
        pytest.skip("this CPU has no AVX512-VNNI")
    if request.param in ("vnni", "pairs"):
        request.getfixturevalue("every_layer_integer")
    if request.param == "pairs":
        if not integer_vector_bytes():
            pytest.skip("pmaddwd is an x86 instruction")
        monkeypatch.setattr(quantized, "vnni_vector_bytes", lambda: 0)
        assert quantized.integer_kinds(ct.host_target()) == ("halves",)  # the switch holds
    if request.param not in ("vnni", "pairs"):
        monkeypatch.setattr(quantized, "integer_sum", lambda *arguments: None)
        monkeypatch.setattr(qlinear, "integer_qlinear", lambda *arguments: None)
    if request.param in ("float64", "int64"):
        monkeypatch.setattr(quantized, "FLOAT32_EXACT", 0)
    if request.param == "int64":
        monkeypatch.setattr(quantized, "FLOAT64_EXACT", 0)
    return request.param


@pytest.mark.parametrize("seed", range(24))
def test_random_layers_match_the_integer_oracle(seed, sum_in):
    # odd seeds: power-of-two scales, where many values are ties (rounded half to even)
    layer, attributes = random_layer(np.random.default_rng(seed), power_of_two=seed % 2 == 1)
    copies = {k: None if v is None else np.copy(v) for k, v in layer.items()}
    result = call(layer, attributes)
    want = expected(layer, attributes)
    assert result.dtype == layer["y_zero_point"].dtype
    np.testing.assert_array_equal(result, want)
    for key, value in layer.items():  # inputs are never modified
        np.testing.assert_array_equal(value, copies[key])
    shape = ct.shapes.qlinear_conv_transpose(
        *(np.shape(layer[n]) for n in ("x", "x_scale", "x_zero_point", "w", "w_scale",
                                       "w_zero_point", "y_scale", "y_zero_point")),
        None if layer["B"] is None else layer["B"].shape, **attributes).output_shape
    assert shape == want.shape


def test_saturation_edges_and_sums_beyond_float32(sum_in):
    """Every operand at its extreme: ``(x - zp)`` and ``(w - zp)`` of magnitude 255, a
    channel of 1152 products (a sum of 74.9 million, past float32's 2**24), results
    saturated at both ends of the output type, and zero points at the extremes."""
    x = np.full((1, 128, 2, 2), 0, np.uint8)
    w = np.full((128, 2, 3, 3), -128, np.int8)
    w[:, 1] = 127  # channel 1 negative sums, channel 0 positive ones
    acc = oracle_sum(x.astype(np.int64) - 255,
                     w.astype(np.int64) - np.array([127, -128]).reshape(1, 2, 1, 1),
                     None, 1, [1, 1], [0, 0, 0, 0], [1, 1], [0, 0])
    assert acc.max() == 128 * 4 * 255 * 255 and acc.min() == -acc.max()
    for y_scale, y_zero in ((np.float32(1.0), np.int8(0)), (np.float32(2.0 ** 20),
                                                           np.uint8(255)),
                            (np.float32(3e5), np.int8(-128)), (np.float32(1e9), np.uint8(0))):
        result = ct.qlinear_conv_transpose(
            x, np.float32(0.02), np.uint8(255), w, np.float32([0.5, 0.25]),
            np.int8([127, -128]), y_scale, y_zero)
        want = oracle_requantize(acc, np.float32(0.02), np.float32([0.5, 0.25]), y_scale,
                                 y_zero)
        np.testing.assert_array_equal(result, want)
    assert set(np.unique(result)) <= {0, 1, 255}


@pytest.mark.parametrize("dilation", [1, 2])
def test_long_sums_in_several_float32_passes(sum_in, dilation):
    """Groups, a bias at int32's ends and 150 channels per group of products of 28 800
    to 32 385: sums of up to 19 million, past float32's 2**24, where a single float32 sum
    rounds.  The float32 sum runs in passes (at most 4 taps per output with dilation 1:
    129 channels per pass; dilation 2 with stride 2 puts all 9 on one output: 57)."""
    from convtranspose._frontends.quantized import exact_sum

    rng = np.random.default_rng(11 + dilation)
    x = rng.integers(240, 256, (2, 300, 5, 6)).astype(np.int64)
    w = rng.integers(120, 128, (300, 3, 3, 3)).astype(np.int64)
    w[:, 1] *= -1
    bias = np.array([2 ** 31 - 1, -2 ** 31, 5, -7, 0, 1], np.int64)
    layer = dict(group=2, strides=[2, 2], pads=[1, 0, 0, 1], dilations=[dilation] * 2,
                 output_padding=[1, 0])
    plan = ct.shapes.onnx_conv_transpose(x.shape, w.shape, bias.shape, **layer)
    acc = exact_sum(plan, x, w, bias, names=("x", "w", "B"))
    want = oracle_sum(x, w, bias, 2, layer["strides"], layer["pads"], layer["dilations"],
                      layer["output_padding"])
    np.testing.assert_array_equal(acc, want)
    assert np.abs(want - bias.reshape(1, -1, 1, 1)).max() > 2 ** 24


def test_a_python_loop_from_the_definition(sum_in):
    """A scalar loop over every input, tap and output channel (no NumPy sums)."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 4, 3, 2)).astype(np.int8)
    w = rng.integers(0, 256, (4, 3, 2, 3)).astype(np.uint8)
    b = rng.integers(-1000, 1000, 6).astype(np.int32)
    xz, wz = -3, np.uint8([7, 250, 0, 128, 1, 255])
    s, d, pads = (2, 1), (1, 2), (1, 0, 0, 2)
    out = np.zeros((1, 6, 5, 4), np.int64)  # Y = (3-1)*2 + 2 - 1, (2-1) + 4 + 1 - 2
    for c, i, j, ki, kj, mj in itertools.product(range(4), range(3), range(2), range(2),
                                                 range(3), range(3)):
        m = (c // 2) * 3 + mj  # group 2: channels 0-1 feed outputs 0-2, 2-3 feed 3-5
        oi, oj = i * s[0] + ki * d[0] - pads[0], j * s[1] + kj * d[1] - pads[1]
        if 0 <= oi < 5 and 0 <= oj < 4:
            out[0, m, oi, oj] += (int(x[0, c, i, j]) - xz) * (int(w[c, mj, ki, kj]) - int(wz[m]))
    out += b.reshape(1, 6, 1, 1)
    result = ct.qlinear_conv_transpose(x, 0.01, np.int8(xz), w, np.full(6, 0.02, np.float32),
                                       wz, 0.05, np.int8(3), b, group=2, strides=s,
                                       dilations=d, pads=list(pads))
    np.testing.assert_array_equal(
        result, oracle_requantize(out, 0.01, np.full(6, 0.02, np.float32), 0.05, np.int8(3)))


@pytest.mark.parametrize("split", [False, True], ids=["one-thread", "split"])
@pytest.mark.parametrize("acc_dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("channels_last", [False, True])
def test_compiled_requantization_equals_the_scalar_oracle(acc_dtype, channels_last, split,
                                                          monkeypatch):
    """The compiled requantization pass against the scalar oracle: sums at int32's
    ends and past float32's 2**24 (rounded on the way to float32), ties (power-of-two
    scales: half of them round down to even), both saturation ends of uint8 and int8,
    in both memory orders the exact sums arrive in, on one thread and split between
    two (as larger passes are)."""
    pytest.importorskip("numba")
    from convtranspose._kernels._numba import transpose
    from convtranspose._kernels.requantize import requantized

    monkeypatch.setattr(transpose, "copy_threads",
                        lambda nbytes, threads: threads if split else 1)

    rng = np.random.default_rng(3)
    info = np.iinfo(np.int32)
    shape = (2, 5, 7, 9)  # (N, M, Y1, Y2)
    acc = rng.integers(-4000, 4000, shape)
    acc[0, :, 0, :6] = [info.min, info.max, 2 ** 24 + 1, -(2 ** 24) - 3, 2 ** 30 + 65, 12]
    acc[1, :, 1, :4] = [-12, 20, -20, 28]  # ties at multiplier / y_scale = 1/8
    w_scale = np.float32([0.25, 0.5, 1.0, 2.0 ** -10, 3e-4])
    # Channel 4 at y_scale 0.37: sums whose float32 steps taken in another order
    # (multiplier / y_scale first) round to another integer.
    multiplier = np.float32(0.5) * w_scale[4]
    candidates = np.arange(-2 ** 20, 2 ** 20).astype(np.float32)
    apart = candidates[np.rint(candidates * multiplier / np.float32(0.37))
                       != np.rint(candidates * (multiplier / np.float32(0.37)))]
    assert apart.size >= 9
    acc[:, 4, 2] = apart[:: apart.size // 9][:9].astype(np.int64)
    if acc_dtype == np.float32:  # float32 sums hold integers below 2**24 only
        acc = np.clip(acc, -(2 ** 24), 2 ** 24)
    stored = acc.astype(acc_dtype)
    if channels_last:  # a channels-first view of channels-last memory
        stored = np.moveaxis(np.ascontiguousarray(np.moveaxis(stored, 1, -1)), -1, 1)
    for y_scale, y_zero in ((np.float32(0.0625), np.uint8(128)), (np.float32(0.5), np.int8(-3)),
                            (np.float32(0.37), np.uint8(128)),
                            (np.float32(1e-6), np.int8(127)), (np.float32(7.3), np.uint8(0))):
        multiplier = np.float32(0.5) * w_scale
        result = requantized(stored, multiplier, y_scale, y_zero, threads=2)
        assert result is not None
        np.testing.assert_array_equal(
            result, oracle_requantize(acc, np.float32(0.5), w_scale, y_scale, y_zero))
        assert result.dtype == y_zero.dtype
    low, high = np.iinfo(y_zero.dtype).min, np.iinfo(y_zero.dtype).max
    assert {low, high} <= set(np.unique(result).tolist())  # both saturation ends


@pytest.mark.parametrize("split", [False, True], ids=["one-thread", "split"])
def test_compiled_sum_correction_equals_numpys(split, monkeypatch):
    """``acc - factor * share + bias`` in one compiled pass, exact in int64, on one
    thread and split between two, equals NumPy's int64 arithmetic, into a new array and
    in place."""
    pytest.importorskip("numba")
    from convtranspose._kernels._numba import transpose
    from convtranspose._kernels.requantize import corrected_sums

    monkeypatch.setattr(transpose, "copy_threads",
                        lambda nbytes, threads: threads if split else 1)
    rng = np.random.default_rng(4)
    info = np.iinfo(np.int32)
    acc = rng.integers(info.min, info.max, (3, 7, 5, 6), dtype=np.int64).astype(np.int32)
    share = rng.integers(-5000, 5000, (7, 5, 6)).astype(np.int32)
    bias = rng.integers(info.min, info.max, 6).astype(np.int32)
    expected = acc.astype(np.int64) - 131 * share.astype(np.int64) + bias
    np.testing.assert_array_equal(corrected_sums(acc, 131, share, bias, 2), expected)
    small = (acc // 4096).astype(np.int64)  # in place: the caller's bound keeps it in range
    expected = small - 131 * share.astype(np.int64)
    assert corrected_sums(small, 131, share, None, 2, out=small) is small
    np.testing.assert_array_equal(small, expected)


def test_calls_of_one_filter_with_other_operands_each_match_the_oracle(every_layer_integer):
    """The function keeps its set-up per filter: calls of one filter with another bias,
    data zero point, data dtype, scale or output zero point, and back, each give the
    oracle's result."""
    rng = np.random.default_rng(22)
    w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
    x8 = rng.integers(0, 256, (2, 8, 5, 4)).astype(np.uint8)
    bias = rng.integers(-3000, 3000, 4).astype(np.int32)
    cases = [(x8, np.uint8(3), None, np.float32(0.05), np.uint8(128)),
             (x8, np.uint8(3), bias, np.float32(0.05), np.uint8(128)),
             (x8, np.uint8(200), bias, np.float32(0.05), np.uint8(128)),
             (x8.view(np.int8), np.int8(-5), -bias, np.float32(0.05), np.int8(0)),
             (x8, np.uint8(3), bias, np.float32(0.5), np.uint8(7)),
             (x8, np.uint8(3), None, np.float32(0.05), np.uint8(128))]
    for x, x_zero, b, y_scale, y_zero in cases:
        acc = oracle_sum(x.astype(np.int64) - int(x_zero), w.astype(np.int64), b, 1,
                         [2, 1], [1, 0, 1, 0], [1, 1], [0, 0])
        result = ct.qlinear_conv_transpose(x, np.float32(0.02), x_zero, w, np.float32(0.01),
                                           np.int8(0), y_scale, y_zero, b, strides=[2, 1],
                                           pads=[1, 0, 1, 0])
        np.testing.assert_array_equal(
            result, oracle_requantize(acc, 0.02, 0.01, y_scale, y_zero))


def test_calls_of_one_filter_alternating_between_operands_are_each_answered(
        every_layer_integer, monkeypatch):
    """Calls of one filter and data shape that alternate between two output scales and
    zero points (a calibration sweep) are each answered from a record of their own:
    once both are recorded, neither resolves its plan again, and each gives the
    oracle's result."""
    from convtranspose._plan import dialects

    rng = np.random.default_rng(24)
    w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
    x = rng.integers(0, 256, (1, 8, 5, 4)).astype(np.uint8)
    outputs = [(np.float32(0.05), np.uint8(128)), (np.float32(0.4), np.uint8(7))]
    acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64), None, 1, [2, 1],
                     [1, 0, 1, 0], [1, 1], [0, 0])
    expected = [oracle_requantize(acc, 0.02, 0.01, y_scale, y_zero)
                for y_scale, y_zero in outputs]

    def call(which):
        y_scale, y_zero = outputs[which]
        return ct.qlinear_conv_transpose(x, np.float32(0.02), np.uint8(3), w,
                                         np.float32(0.01), np.int8(0), y_scale, y_zero,
                                         strides=[2, 1], pads=[1, 0, 1, 0])

    for which in (0, 0, 0, 1, 1, 1):  # recorded, then set up, then answered
        np.testing.assert_array_equal(call(which), expected[which])

    def refused(*args, **kwargs):
        raise AssertionError("the repeated call resolved its plan again")

    monkeypatch.setattr(dialects, "qlinear_conv_transpose", refused)
    for which in (0, 1, 0, 1):
        np.testing.assert_array_equal(call(which), expected[which])


def test_a_kept_call_of_the_function_keeps_the_memory_limit(every_layer_integer):
    """The function's set-up kept from earlier calls still checks the memory limit on
    each call: refused under a lower limit, computed again above it."""
    rng = np.random.default_rng(23)
    x = rng.integers(0, 256, (1, 8, 6, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
    args = (np.float32(0.02), np.uint8(3), w, np.float32(0.01), np.int8(0),
            np.float32(0.05), np.uint8(128))
    first = ct.qlinear_conv_transpose(x, *args, strides=[2, 2])
    np.testing.assert_array_equal(ct.qlinear_conv_transpose(x, *args, strides=[2, 2]), first)
    with ct.limit_memory(64):
        with pytest.raises(ct.ResultTooLargeError):
            ct.qlinear_conv_transpose(x, *args, strides=[2, 2])
    acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64), None, 1, [2, 2],
                     [0, 0, 0, 0], [1, 1], [0, 0])
    np.testing.assert_array_equal(ct.qlinear_conv_transpose(x, *args, strides=[2, 2]),
                                  oracle_requantize(acc, 0.02, 0.01, 0.05, np.uint8(128)))


def test_kept_calls_go_with_their_filter(every_layer_integer):
    """The function's kept set-ups go when the weights memo and the records of repeated
    calls forget their filter: after calls of more filters than they keep, fewer
    centred weights stay alive than filters were called (a set-up kept where it held
    its own weights would keep every one)."""
    import gc

    from convtranspose._frontends.repeated_quantized import QUANTIZED_RECORDS_KEPT
    from convtranspose._runtime import memo

    gc.collect()
    before = set(memo.owned_filters)
    rng = np.random.default_rng(24)
    x = rng.integers(0, 256, (1, 8, 5, 5)).astype(np.uint8)
    filters = 3 * QUANTIZED_RECORDS_KEPT
    for _ in range(filters):
        w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
        for _ in range(2):
            ct.qlinear_conv_transpose(x, np.float32(0.02), np.uint8(3), w, np.float32(0.01),
                                      np.int8(0), np.float32(0.05), np.uint8(128),
                                      strides=[2, 2])
    del w
    gc.collect()
    alive = set(memo.owned_filters) - before
    assert len(alive) < filters, len(alive)


def test_weights_edited_in_place_between_calls_are_summed_anew(every_layer_integer):
    """The packed weights are kept between calls (the weights memo), which compares
    the filter value by value: a filter edited in place gives the new result."""
    rng = np.random.default_rng(21)
    x = rng.integers(0, 256, (1, 8, 4, 4)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
    args = (np.float32(0.02), np.uint8(3))
    tail = (np.float32(0.01), np.int8(0), np.float32(0.05), np.uint8(128))

    def want():
        acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64), None, 1, [2, 2],
                         [1, 1, 1, 1], [1, 1], [0, 0])
        return oracle_requantize(acc, 0.02, 0.01, 0.05, np.uint8(128))

    first = ct.qlinear_conv_transpose(x, *args, w, *tail, strides=[2, 2], pads=[1] * 4)
    np.testing.assert_array_equal(first, want())
    w[2, 1, 0, 0] = 127 if w[2, 1, 0, 0] < 0 else -128  # in place, same object
    w[5] = -w[5] // 2
    second = ct.qlinear_conv_transpose(x, *args, w, *tail, strides=[2, 2], pads=[1] * 4)
    np.testing.assert_array_equal(second, want())
    assert not np.array_equal(first, second)
    # The same filter with another weight zero point: other centred weights.
    third = ct.qlinear_conv_transpose(x, *args, w, tail[0], np.int8(-7), *tail[2:],
                                      strides=[2, 2], pads=[1] * 4)
    acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64) + 7, None, 1, [2, 2],
                     [1, 1, 1, 1], [1, 1], [0, 0])
    np.testing.assert_array_equal(third, oracle_requantize(acc, 0.02, 0.01, 0.05,
                                                           np.uint8(128)))


@pytest.mark.parametrize("batch, rank", [(1, 2), (3, 2), (2, 1), (1, 3)])
def test_layers_requantized_by_the_threads_that_sum_them_match_the_oracle(batch, rank):
    """Layers large enough for the integer kernel to split their output lines between
    two threads, each requantizing its own lines as it ends them: the oracle's bytes,
    with and without bias, every output line requantized once (1-3 axes, stride 2, so
    that a thread's lines are every other line)."""
    rng = np.random.default_rng(batch * 10 + rank)
    sizes = {1: (4096,), 2: (32, 32), 3: (8, 8, 10)}[rank]
    x = rng.integers(0, 256, (batch, 64, *sizes)).astype(np.uint8)
    w = rng.integers(-128, 128, (64, 32) + (3,) * rank).astype(np.int8)
    bias = rng.integers(-3000, 3000, 32).astype(np.int32)
    pads = [1] * (2 * rank)
    with ct.num_threads(2):
        for b in (None, bias):
            acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64), b, 1, [2] * rank,
                             pads, [1] * rank, [1] * rank)
            result = ct.qlinear_conv_transpose(
                x, np.float32(0.02), np.uint8(3), w, np.float32(0.01), np.int8(0),
                np.float32(0.5), np.uint8(128), b, strides=[2] * rank, pads=pads,
                output_padding=[1] * rank)
            np.testing.assert_array_equal(
                result, oracle_requantize(acc, 0.02, 0.01, np.float32(0.5), np.uint8(128)))


# -- depthwise and grouped layers -----------------------------------------------------------

@pytest.mark.parametrize("kind, per_word", [("bytes", 4), ("halves", 2)])
@pytest.mark.parametrize("vector_bytes", [32, 64])
@pytest.mark.parametrize("ci, co", [(1, 1), (3, 2), (8, 8), (5, 17), (64, 64), (4, 16)])
def test_products_per_lane_count_the_busy_parts_of_each_lane(kind, per_word, vector_bytes,
                                                              ci, co):
    """The integer kernel's useful products per 32-bit lane of an instruction, counted
    part by part: ``Ci`` input channels in words of ``per_word`` parts (zero past
    ``Ci``), ``Co`` output channels in vectors of 32-bit lanes (idle past ``Co``)."""
    from convtranspose._kernels.int8 import products_per_lane

    words, lanes = -(-ci // per_word), vector_bytes // 4
    vectors = -(-co // lanes)
    parts = np.arange(words * per_word)[:, None] < ci  # (word part, 1)
    outputs = np.arange(vectors * lanes)[None, :] < co  # (1, lane)
    busy = (parts & outputs).sum()  # products that count, per tap and output place
    assert products_per_lane(kind, (ci, co), vector_bytes) == pytest.approx(
        busy / (words * vectors * lanes))


@pytest.mark.parametrize("planning", ["estimate", "measure"])
@pytest.mark.parametrize("case", [
    dict(channels=16, group=16, m=16, kernel=3, stride=1),  # depthwise
    dict(channels=16, group=16, m=32, kernel=4, stride=2),  # depthwise, multiplier 2
    dict(channels=32, group=4, m=32, kernel=4, stride=2),  # groups of 8
    dict(channels=24, group=1, m=3, kernel=3, stride=2),  # three output channels
    dict(channels=160, group=1, m=3, kernel=3, stride=1)],  # and float32 sums in passes
    ids=["depthwise", "depthwise-x2", "groups-of-8", "three-outputs", "three-outputs-long"])
def test_depthwise_and_grouped_layers_match_the_oracle_whichever_way(case, planning):
    """Layers whose integer kernel would leave vector lanes idle sum in one float32
    pass, or, where the float32 sums need several passes or fewer lanes idle, in the
    faster of the two ways where planning measures: the bytes are the oracle's either
    way, with and without bias, for uint8 and int8 data."""
    rng = np.random.default_rng(case["channels"] + case["group"])
    ct.clear_caches()
    channels, group, m, k, s = (case[n] for n in ("channels", "group", "m", "kernel",
                                                   "stride"))
    w = rng.integers(-128, 128, (channels, m // group, k, k)).astype(np.int8)
    bias = rng.integers(-3000, 3000, m).astype(np.int32)
    for x_type, b in ((np.uint8, None), (np.int8, bias)):
        info = np.iinfo(x_type)
        x = rng.integers(info.min, info.max + 1, (2, channels, 6, 5)).astype(x_type)
        x_zero = x_type(7)
        acc = oracle_sum(x.astype(np.int64) - 7, w.astype(np.int64), b, group, [s, s],
                         [1, 1, 1, 1], [1, 1], [0, 0])
        want = oracle_requantize(acc, 0.02, 0.01, np.float32(0.5), np.uint8(128))
        with ct.use_planning(planning):
            for _ in range(2):  # the first call measures where planning does
                result = ct.qlinear_conv_transpose(
                    x, np.float32(0.02), x_zero, w, np.float32(0.01), np.int8(0),
                    np.float32(0.5), np.uint8(128), b, strides=[s, s], pads=[1] * 4,
                    group=group)
                np.testing.assert_array_equal(result, want)


def test_out_receives_the_result():
    layer, attributes = random_layer(np.random.default_rng(3))
    want = expected(layer, attributes)
    out = np.empty(want.shape, want.dtype)
    assert call(layer, attributes, out=out) is out
    np.testing.assert_array_equal(out, want)


# -- against the ONNX QDQ pattern ----------------------------------------------------------

def qdq_model(layer, attributes):
    """``DequantizeLinear(x), DequantizeLinear(w, axis=1) [, DequantizeLinear(B, x_scale *
    w_scale, axis=0)] -> ConvTranspose -> QuantizeLinear`` (opset 21, IR version 10); a
    per-channel ``w`` carries ``M/group`` scales on axis 1, the channels of each group."""
    from onnx import helper, numpy_helper

    group, m = attributes["group"], layer["w"].shape[1] * attributes["group"]
    per_channel = np.size(layer["w_scale"]) > 1
    w_scale = np.asarray(layer["w_scale"], np.float32)
    w_zero = np.asarray(layer["w_zero_point"])
    if per_channel:  # the channels of group 0; every group has the same (checked below)
        w_scale, w_zero = w_scale[:m // group], w_zero[:m // group]
    constants = {"xs": np.float32(layer["x_scale"]), "xz": layer["x_zero_point"],
                 "w": layer["w"], "ws": w_scale, "wz": w_zero,
                 "ys": np.float32(layer["y_scale"]), "yz": layer["y_zero_point"]}
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=1)]
    conv_inputs = ["xf", "wf"]
    if layer["B"] is not None:
        constants["b"] = layer["B"]
        constants["bs"] = np.float32(layer["x_scale"]) * np.broadcast_to(
            np.asarray(layer["w_scale"], np.float32), (m,))
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"], axis=0))
        conv_inputs.append("bf")
    nodes += [helper.make_node("ConvTranspose", conv_inputs, ["yf"], **attributes),
              helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]
    element = helper.np_dtype_to_tensor_dtype(layer["x"].dtype)
    graph = helper.make_graph(
        nodes, "qdq_conv_transpose",
        [helper.make_tensor_value_info("x", element, list(layer["x"].shape))],
        [helper.make_tensor_value_info(
            "y", helper.np_dtype_to_tensor_dtype(layer["y_zero_point"].dtype), None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def qdq_layer(rng, **kwargs):
    """A random layer whose per-channel weights repeat per group, as a QDQ model's
    ``DequantizeLinear(w, axis=1)`` gives them."""
    layer, attributes = random_layer(rng, **kwargs)
    group, m = attributes["group"], layer["w"].shape[1] * attributes["group"]
    if np.size(layer["w_scale"]) > 1:
        layer["w_scale"] = np.tile(layer["w_scale"][:m // group], group)
        layer["w_zero_point"] = np.tile(layer["w_zero_point"][:m // group], group)
    return layer, attributes


def run_reference(model, x):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, {"x": x})[0]


def run_onnxruntime(model, x):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def units_apart(result, peer):
    assert result.shape == peer.shape and result.dtype == peer.dtype
    return np.abs(result.astype(np.int64) - peer.astype(np.int64))


@pytest.mark.peers
@pytest.mark.parametrize("seed", range(16))
def test_onnx_reference_exact_with_power_of_two_scales(seed):
    """Power-of-two scales: every dequantized value, product and partial sum is exact in
    float32, so the QDQ reference and the integer sum agree exactly, ties included."""
    pytest.importorskip("onnx")
    layer, attributes = qdq_layer(np.random.default_rng(100 + seed), group=1,
                                  power_of_two=True)
    peer = run_reference(qdq_model(layer, attributes), layer["x"])
    np.testing.assert_array_equal(call(layer, attributes), peer)


@pytest.mark.peers
def test_onnx_reference_within_one_unit_with_any_scales():
    pytest.importorskip("onnx")
    differing = total = 0
    for seed in range(24):
        layer, attributes = qdq_layer(np.random.default_rng(200 + seed), group=1)
        peer = run_reference(qdq_model(layer, attributes), layer["x"])
        apart = units_apart(call(layer, attributes), peer)
        assert apart.max() <= 1, seed
        differing, total = differing + int(np.count_nonzero(apart)), total + apart.size
    assert differing <= max(1, total // 100), (differing, total)  # rounding-boundary cases


@pytest.mark.peers
def test_onnxruntime_qdq_within_one_unit():
    """onnxruntime on the QDQ model, groups and per-channel weights included: at most one
    unit apart (float32 sums next to a rounding boundary), exact with power-of-two
    scales."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    differing = total = 0
    for seed in range(24):
        for power_of_two in (False, True):
            layer, attributes = qdq_layer(np.random.default_rng(300 + seed),
                                          power_of_two=power_of_two)
            peer = run_onnxruntime(qdq_model(layer, attributes), layer["x"])
            apart = units_apart(call(layer, attributes), peer)
            assert apart.max() <= (0 if power_of_two else 1), (seed, power_of_two)
            differing, total = differing + int(np.count_nonzero(apart)), total + apart.size
    assert differing <= max(1, total // 100), (differing, total)


@pytest.mark.peers
def test_onnxruntime_has_no_cpu_qlinear_conv_transpose():
    """The contrib node does not load on the CPU execution provider; if a release adds
    it, this fails and the node should be compared like the QDQ model."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    layer, attributes = random_layer(np.random.default_rng(1), group=1)
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    values = [layer[n] for n in ("x_scale", "x_zero_point", "w", "w_scale", "w_zero_point",
                                 "y_scale", "y_zero_point")]
    node = helper.make_node("QLinearConvTranspose", names, ["y"], domain="com.microsoft",
                            **attributes)
    graph = helper.make_graph(
        [node], "qlinear", [helper.make_tensor_value_info(
            "x", helper.np_dtype_to_tensor_dtype(layer["x"].dtype), list(layer["x"].shape))],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(
            layer["y_zero_point"].dtype), None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k)
                     for k, v in zip(names[1:], values)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    with pytest.raises(Exception, match="QLinearConvTranspose"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.peers
@pytest.mark.parametrize("per_channel", [False, True])
def test_onnxruntime_qdq_with_long_sums(per_channel):
    """576 products per output (64 channels, 3x3 taps), sums in the hundreds of
    thousands plus an int32 bias: at most one unit from onnxruntime's float32 sums."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(11)
    m = 8
    layer = dict(
        x=rng.integers(0, 256, (1, 64, 6, 6)).astype(np.uint8), x_scale=np.float32(0.013),
        x_zero_point=np.uint8(131), w=rng.integers(-128, 128, (64, m, 3, 3)).astype(np.int8),
        w_scale=rng.uniform(0.001, 0.05, m).astype(np.float32) if per_channel
        else np.float32(0.021),
        w_zero_point=np.zeros(m, np.int8) if per_channel else np.int8(3),
        y_zero_point=np.uint8(128), B=rng.integers(-50000, 50000, m).astype(np.int32))
    attributes = dict(group=1, strides=[2, 2], dilations=[1, 1], output_padding=[1, 1],
                      pads=[1, 1, 1, 1])
    acc = expected_sum(layer, attributes)
    assert np.abs(acc).max() > 2 ** 17
    layer["y_scale"] = np.float32(np.abs(acc).std() * 0.013 * np.max(layer["w_scale"]) / 40)
    peer = run_onnxruntime(qdq_model(layer, attributes), layer["x"])
    assert units_apart(call(layer, attributes), peer).max() <= 1
    np.testing.assert_array_equal(call(layer, attributes), expected(layer, attributes))


# -- bad input -----------------------------------------------------------------------------

def good():
    return dict(x=np.zeros((1, 2, 3), np.uint8), x_scale=np.float32(0.1),
                x_zero_point=np.uint8(0), w=np.zeros((2, 3, 2), np.int8),
                w_scale=np.float32(0.1), w_zero_point=np.int8(0), y_scale=np.float32(0.1),
                y_zero_point=np.uint8(0), B=None)


@pytest.mark.parametrize("change, error, match", [
    (dict(x=np.zeros((1, 2, 3), np.float32)), TypeError, "x has dtype float32"),
    (dict(w=np.zeros((2, 3, 2), np.int16)), TypeError, "w has dtype int16"),
    (dict(x_zero_point=np.int8(0)), TypeError, "x_zero_point has dtype int8"),
    (dict(w_zero_point=np.uint8(0)), TypeError, "w_zero_point has dtype uint8"),
    (dict(y_zero_point=np.int16(0)), TypeError, "y_zero_point has dtype int16"),
    (dict(x_scale=np.int32(1)), TypeError, "x_scale has dtype int32"),
    (dict(B=np.zeros(3, np.int64)), TypeError, "B has dtype int64"),
    (dict(x_scale=np.float32(0)), ct.ConvTransposeError, "x_scale must be positive"),
    (dict(y_scale=-1.0), ct.ConvTransposeError, "y_scale must be positive"),
    (dict(x_scale=np.float32(np.nan)), ct.ConvTransposeError, "x_scale must be positive"),
    (dict(y_scale=np.float32([np.inf])), ct.ConvTransposeError, "y_scale must be positive"),
    (dict(x_scale=1e39), ct.ConvTransposeError, "x_scale must be positive"),  # inf as float32
    (dict(w_scale=np.float64(1e-50)), ct.ConvTransposeError, "w_scale must be positive"),
    (dict(w_scale=np.float32([0.1, np.inf, 0.1]), w_zero_point=np.int8([0, 0, 0])),
     ct.ConvTransposeError, "w_scale must be positive"),
    (dict(x_scale=np.float32([0.1, 0.2])), ct.ConvTransposeError, "x_scale has shape"),
    (dict(w_scale=np.float32([0.1, 0.2]), w_zero_point=np.int8([0, 0])),
     ct.ConvTransposeError, r"w_scale has shape \(2,\)"),
    (dict(w_scale=np.float32([0.1, 0.2, 0.3])), ct.ConvTransposeError,
     "both per tensor or both per output channel"),
    (dict(y_zero_point=np.uint8([0, 0])), ct.ConvTransposeError, "y_zero_point has shape"),
    (dict(x_zero_point=300), ct.ConvTransposeError, "outside the range of uint8"),
    (dict(B=np.zeros(2, np.int32)), ct.ConvTransposeError, "B has shape"),
    (dict(w=np.zeros((3, 3, 2), np.int8)), ct.ConvTransposeError, "channels"),
])
def test_bad_input_is_a_clear_error(change, error, match):
    operands = good() | change
    with pytest.raises(error, match=match):
        ct.qlinear_conv_transpose(**operands)
    shapes = {k: None if v is None else np.shape(v) for k, v in operands.items()}
    if error is ct.ConvTransposeError and "positive" not in match and "range" not in match:
        with pytest.raises(error, match=match):  # the shape twin tells the shape errors
            ct.shapes.qlinear_conv_transpose(**shapes)


def test_python_numbers_and_a_wrong_out():
    result = ct.qlinear_conv_transpose(np.array([[[10, 20]]], np.uint8), 0.5, 10,
                                       np.array([[[2]]], np.int8), 0.25, 0, 0.25, 1)
    # acc = (0, 10 * 2); 20 * 0.5 * 0.25 / 0.25 = 10, plus the zero point 1
    np.testing.assert_array_equal(result, np.array([[[1, 11]]], np.uint8))
    with pytest.raises(TypeError, match="out must be"):
        ct.qlinear_conv_transpose(**good(), out=np.empty((1, 3, 4), np.int8))
    with pytest.raises(ct.ConvTransposeError, match="out has shape"):
        ct.qlinear_conv_transpose(**good(), out=np.empty((1, 3, 5), np.uint8))


def test_prepare_binds_the_quantized_dialect():
    """A prepared layer of the docstring's layer gives its hand-computed result
    (tests/frontends/test_prepared_quantized.py compares layers with the function)."""
    layer = ct.prepare(ct.qlinear_conv_transpose, x_scale=0.5, x_zero_point=10,
                       w=np.array([[[1, 2, 3]]], np.int8), w_scale=0.25,
                       w_zero_point=np.int8(0), y_scale=0.125, y_zero_point=100, strides=2)
    assert isinstance(layer, ct.PreparedQuantizedLayer)
    # (x - 10) = 0, 10, 20 through w at stride 2, times 0.5 * 0.25 / 0.125 = 1, plus 100
    assert layer(np.array([[[10, 20, 30]]], np.uint8)).ravel().tolist() == [
        100, 100, 110, 120, 150, 140, 160]
    with pytest.raises(TypeError, match="missing the argument 'x_scale'"):
        ct.prepare(ct.qlinear_conv_transpose, w=np.zeros((1, 1, 3), np.int8))


def test_the_sum_runs_in_float64_only_below_two_to_the_53():
    """``K * 255**2 + max|B|`` decides: the float64 sum is exact below 2**53."""
    plan = ct.shapes.qlinear_conv_transpose((1, 64, 4, 4), (), (), (64, 8, 3, 3), (), (), (),
                                            ())
    assert sum_dtype(plan, None) == np.float64
    assert sum_dtype(plan, np.array([2 ** 31 - 1], np.int32)) == np.float64
    huge = ct.shapes.qlinear_conv_transpose((1, 2 ** 20, 1), (), (), (2 ** 20, 1, 2 ** 18),
                                            (), (), (), ())
    assert 2 ** 38 * 255 ** 2 >= 2 ** 53 and sum_dtype(huge, None) == np.int64


def test_derived_pads_and_one_element_operands():
    """SAME_UPPER with ``output_shape`` gives the pads ``ct.shapes.onnx_conv_transpose``
    resolves (the ONNX geometry is tested with the float dialect); scales as Python
    floats are rounded to float32 and ``(1,)`` operands are one value."""
    rng = np.random.default_rng(21)
    x = rng.integers(0, 256, (2, 3, 4, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 2)).astype(np.int8)
    geometry = dict(auto_pad="SAME_UPPER", strides=[2, 3], output_shape=[7, 14])
    plan = ct.shapes.onnx_conv_transpose(x.shape, w.shape, **geometry)
    result = ct.qlinear_conv_transpose(x, 0.1, np.uint8([3]), w, np.float32([0.05]),
                                       np.int8([-2]), 0.3, np.int8([-5]), **geometry)
    acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64) + 2, None, 1, [2, 3],
                     list(plan.pads_begin + plan.pads_end), [1, 1], [0, 0])
    assert result.shape == (2, 2, 7, 14) == acc.shape
    np.testing.assert_array_equal(
        result, oracle_requantize(acc, np.float32(0.1), np.float32(0.05), np.float32(0.3),
                                  np.int8(-5)))


def test_repeated_calls_skip_the_set_up_and_follow_arguments_edited_in_place(
        every_layer_integer, monkeypatch):
    """A call repeated with equal arguments and the same filter object runs a prepared
    layer from the third call on (no plan resolved again), and still gives the
    oracle's result for new data, a filter and a bias edited in place after the layer
    was set up, and another output scale or zero point."""
    from convtranspose._frontends import qlinear

    resolved, resolve = [], qlinear.resolve_plan
    monkeypatch.setattr(qlinear, "resolve_plan",
                        lambda *a, **k: resolved.append(1) or resolve(*a, **k))
    rng = np.random.default_rng(25)
    x = rng.integers(0, 256, (2, 8, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 4, 3, 3)).astype(np.int8)
    b = rng.integers(-3000, 3000, 4).astype(np.int32)

    def check(y_scale=np.float32(0.05), y_zero=np.uint8(128)):
        result = ct.qlinear_conv_transpose(x, np.float32(0.02), np.uint8(3), w,
                                           np.float32(0.01), np.int8(0), y_scale, y_zero,
                                           B=b, strides=[2, 2], pads=[1] * 4)
        acc = oracle_sum(x.astype(np.int64) - 3, w.astype(np.int64), b, 1, [2, 2],
                         [1, 1, 1, 1], [1, 1], [0, 0])
        np.testing.assert_array_equal(result, oracle_requantize(acc, 0.02, 0.01, y_scale,
                                                                y_zero))

    for call in range(4):
        check()
        if call == 1:
            settled = len(resolved)
    assert len(resolved) == settled  # the third and fourth calls resolved nothing
    x = rng.integers(0, 256, x.shape).astype(np.uint8)
    check()
    w[3, 2, 1, 1] = 127 if w[3, 2, 1, 1] < 0 else -128  # in place, the same object
    check()
    b[1] += 1000
    check()
    check(y_scale=np.float32(0.07))
    check(y_zero=np.uint8(100))
    check(y_scale=0.05)  # a Python float: another type, the record's copy is float32
