"""``ct.translate`` between the quantized dialects: random small 2-D layers of each
source dialect, computed by the source's function, translated, computed by the target's
function on the translated operands and compared.  The source's function is the oracle
(each checked against its owner's runtime in tests/frontends); the comparison is exact
where both requantization rules are exact (power-of-two scales, the float32 rules), and
within the translation's stated bound otherwise.  The refusals name what cannot be
carried over."""

from __future__ import annotations

import json

import numpy as np
import pytest

import convtranspose as ct

QUANTIZED = ("qlinear_conv_transpose", "tflite_quantized_transpose_conv",
             "torch_quantized_conv_transpose")
FLOAT32_RULES = ("ONNX", "torch")
ENGINES = ("fbgemm", "qnnpack", "onednn")
FLOATS = dict(zip(QUANTIZED, ("onnx_conv_transpose", "tflite_transpose_conv",
                              "torch_conv_transpose")))
#: The quantization parameters and options, which the float dialects do not take.
PARAMETERS = {"x_scale", "x_zero_point", "w_scale", "w_zero_point", "y_scale",
              "y_zero_point", "input_scale", "input_zero_point", "weights_scale",
              "weights_zero_point", "weight_scale", "weight_zero_point", "output_scale",
              "output_zero_point", "engine"}


def _scales(rng, power_of_two, count):
    if power_of_two:
        return np.float32(2.0) ** -rng.integers(3, 7, count).astype(np.float32)
    return rng.uniform(0.01, 0.1, count).astype(np.float32)


def _quantization(rng, power_of_two, channels, groups, symmetric, per_channel):
    """Scales and zero points: data, weights (per output channel, the same for every
    group so that torch can take them), output."""
    per_group = channels // groups if per_channel else 1
    w_scale = np.tile(_scales(rng, power_of_two, per_group), channels // per_group
                      if per_channel else 1)
    w_zero = np.zeros(w_scale.size, np.int64) if symmetric else \
        np.tile(rng.integers(-5, 6, per_group), channels // per_group if per_channel else 1)
    x_scale = _scales(rng, power_of_two, 1)[0]
    # the output scale: sums of about 2000 units of x_scale * w_scale spread over the range
    y_scale = np.float32(x_scale * w_scale.max() * (64 if power_of_two else 60))
    return x_scale, w_scale, w_zero, y_scale


def qlinear_layer(rng, power_of_two, target):
    groups = 1 if target == "tflite_quantized_transpose_conv" else int(rng.integers(1, 3))
    per_channel = bool(rng.integers(0, 2))
    symmetric = target == "tflite_quantized_transpose_conv" and per_channel
    ci, co = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
    x_type, w_type, y_type = (np.dtype(rng.choice(["uint8", "int8"])) for _ in range(3))
    x_scale, w_scale, w_zero, y_scale = _quantization(rng, power_of_two, co, groups,
                                                      symmetric, per_channel)
    x_zero = int(rng.integers(-20, 20)) + (128 if x_type == np.uint8 else 0)
    w_zero = w_zero + (128 if w_type == np.uint8 else 0)
    y_zero = int(rng.integers(-20, 20)) + (128 if y_type == np.uint8 else 0)
    x = rng.integers(np.iinfo(x_type).min, np.iinfo(x_type).max + 1,
                     (1, ci, *rng.integers(3, 5, 2))).astype(x_type)
    kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
    w = (rng.integers(-30, 31, (ci, co // groups) + kernel)
         + (128 if w_type == np.uint8 else 0)).astype(w_type)
    b = rng.integers(-500, 501, co).astype(np.int32) if rng.random() < 0.7 else None
    attributes = dict(strides=[int(s) for s in rng.integers(1, 4, 2)],
                      dilations=[int(d) for d in rng.integers(1, 3, 2)],
                      pads=[int(p) for p in rng.integers(0, 2, 4)], group=groups,
                      x_scale=x_scale, x_zero_point=x_type.type(x_zero),
                      w_scale=w_scale if per_channel else w_scale[0],
                      w_zero_point=(w_zero if per_channel else w_zero[:1]).astype(w_type),
                      y_scale=y_scale, y_zero_point=y_type.type(y_zero))

    def compute():
        a = attributes
        return ct.qlinear_conv_transpose(
            x, a["x_scale"], a["x_zero_point"], w, a["w_scale"], a["w_zero_point"],
            a["y_scale"], a["y_zero_point"], b, strides=a["strides"],
            dilations=a["dilations"], pads=a["pads"], group=groups)
    return x, w, b, attributes, compute


def tflite_layer(rng, power_of_two, target):
    kind = str(rng.choice(["int8", "uint8"]))
    per_channel = kind == "int8" and bool(rng.integers(0, 2))
    ci, co = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x_scale, w_scale, w_zero, y_scale = _quantization(rng, power_of_two, co, 1,
                                                      kind == "int8", per_channel)
    dtype = np.dtype(kind)
    shift = 128 if kind == "uint8" else 0
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1,
                     (1, *rng.integers(3, 5, 2), ci)).astype(dtype)
    kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
    w = (rng.integers(-30, 31, (co,) + kernel + (ci,)) + shift).astype(dtype)
    b = rng.integers(-500, 501, co).astype(np.int32) if rng.random() < 0.7 else None
    strides = [int(s) for s in rng.integers(1, 4, 2)]
    padding = str(rng.choice(["SAME", "VALID"]))
    if padding == "SAME":
        size = [d * s for d, s in zip(x.shape[1:3], strides)]
    else:
        size = [(d - 1) * s + max(k, s) for d, s, k in zip(x.shape[1:3], strides, kernel)]
    attributes = dict(output_shape=[1, *size, co], padding=padding, stride_h=strides[0],
                      stride_w=strides[1], input_scale=x_scale,
                      input_zero_point=dtype.type(int(rng.integers(-20, 20)) + shift),
                      weights_scale=w_scale if per_channel else w_scale[0],
                      weights_zero_point=(w_zero + shift) if per_channel else
                      int(w_zero[0] + shift), output_scale=y_scale,
                      output_zero_point=int(rng.integers(-20, 20)) + shift)

    def compute():
        a = dict(attributes)
        return ct.tflite_quantized_transpose_conv(a.pop("output_shape"), w, x, b, **a)
    return x, w, b, attributes, compute


def torch_layer(rng, power_of_two, target):
    groups = int(rng.integers(1, 3))
    per_channel = bool(rng.integers(0, 2))
    symmetric = target == "tflite_quantized_transpose_conv" and per_channel
    ci, co = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
    x_scale, w_scale, w_zero, y_scale = _quantization(rng, power_of_two, co, groups,
                                                      symmetric, per_channel)
    per_group = co // groups
    x = rng.integers(0, 256, (1, ci, *rng.integers(3, 5, 2))).astype(np.uint8)
    kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
    w = rng.integers(-30, 31, (ci, per_group) + kernel).astype(np.int8)
    b = None
    if rng.random() < 0.7:  # power of two: whole units of the sum, carried exactly
        units = rng.integers(-500, 501, co) if power_of_two else rng.uniform(-500, 500, co)
        b = (units * np.float64(x_scale) * w_scale).astype(np.float32)
    strides = [int(s) for s in rng.integers(1, 4, 2)]
    attributes = dict(stride=strides, padding=[int(p) for p in rng.integers(0, 2, 2)],
                      output_padding=[int(rng.integers(0, s)) for s in strides],
                      dilation=[int(d) for d in rng.integers(1, 3, 2)], groups=groups,
                      input_scale=x_scale, input_zero_point=int(rng.integers(100, 156)),
                      weight_scale=w_scale[:per_group] if per_channel else w_scale[0],
                      weight_zero_point=w_zero[:per_group] if per_channel else int(w_zero[0]),
                      output_scale=y_scale, output_zero_point=int(rng.integers(100, 156)),
                      engine=str(rng.choice(ENGINES)))

    def compute():
        return ct.torch_quantized_conv_transpose(x, w, b, **attributes)
    return x, w, b, attributes, compute


LAYERS = {"qlinear_conv_transpose": qlinear_layer,
          "tflite_quantized_transpose_conv": tflite_layer,
          "torch_quantized_conv_transpose": torch_layer}


@pytest.mark.parametrize("power_of_two", [True, False], ids=["pow2", "any"])
@pytest.mark.parametrize("target", QUANTIZED)
@pytest.mark.parametrize("source", QUANTIZED)
def test_random_layers(source, target, power_of_two):
    rng = np.random.default_rng([QUANTIZED.index(source), QUANTIZED.index(target),
                                 power_of_two])
    for _ in range(8):
        x, w, b, attributes, compute = LAYERS[source](rng, power_of_two, target)
        engine = str(rng.choice(ENGINES)) if target == QUANTIZED[2] else None
        bias_shape = None if b is None else b.shape
        try:
            t = ct.translate(source, target, x.shape, w.shape, bias_shape,
                             target_engine=engine, **attributes)
        except ct.ConvTransposeError as error:
            # refused exactly where the float translation pads the output with zeros
            assert "pads it with zeros" in str(error)
            geometry = {k: v for k, v in attributes.items() if k not in PARAMETERS}
            floats = ct.translate(FLOATS[source], FLOATS[target], x.shape, w.shape,
                                  bias_shape, **geometry)
            assert floats.bias_after or min(min(pair) for pair in floats.crop) < 0
            continue
        expected = compute()
        got = t.run(x, w, b)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        apart = np.abs(got.astype(np.int32) - expected).max()
        assert apart <= t.max_difference, (str(t), apart)
        rules = (t.source_quantization.rule, t.target_quantization.rule)
        before = ["zero point before rounding" in rule for rule in rules]
        if power_of_two and all(rule.startswith(FLOAT32_RULES) for rule in rules) and (
                before[0] == before[1]):
            # every float32 step is exact: both rules round the exact value alike (oneDNN
            # adds the zero point before rounding, so its ties go the other way at odd ones)
            assert apart == 0, str(t)
        if source == target and engine in (None, attributes.get("engine")):
            assert t.exact and apart == 0


def test_exact_shift_and_bias_by_hand():
    # int8 activations to torch's uint8: x + 128 and the zero point + 128; the int32 bias
    # 7 units as the float bias 7 * x_scale * w_scale; the uint8 result - 128 again.
    x = np.array([[[-118, -108, -98]]], np.int8)
    w = np.array([[[1, 2, 3]]], np.int8)
    t = ct.translate("qlinear_conv_transpose", "torch_quantized_conv_transpose", x.shape,
                     w.shape, (1,), strides=[2], x_scale=np.float32(0.5),
                     x_zero_point=np.int8(-118), w_scale=np.float32(0.25),
                     w_zero_point=np.int8(0), y_scale=np.float32(0.125),
                     y_zero_point=np.int8(-28), target_engine="qnnpack")
    assert t.max_difference == 1 and t.attributes["input_zero_point"] == 10
    assert t.attributes["output_zero_point"] == 100
    (data, weight, bias), = t.operands(x, w, np.array([7], np.int32))
    assert data.dtype == np.uint8 and data.tolist() == [[[10, 20, 30]]]
    assert bias.dtype == np.float32 and bias.tolist() == [7 * 0.125]
    # acc = [0, 0, 10, 20, 50, 40, 60] + 7 units; y = acc + 7 - 28 (multiplier 1, every
    # step exact: the rules agree here)
    assert t.run(x, w, np.array([7], np.int32)).tolist() == \
        [[[-21, -21, -11, -1, 29, 19, 39]]]


def _qlinear(**changes):
    attributes = dict(x_scale=np.float32(0.5), x_zero_point=np.uint8(10),
                      w_scale=np.float32([0.25, 0.5]), w_zero_point=np.int8([1, 2]),
                      y_scale=np.float32(0.125), y_zero_point=np.uint8(100))
    return {**attributes, **changes}


@pytest.mark.parametrize("source, target, shapes, attributes, message", [
    ("qlinear_conv_transpose", "tflite_quantized_transpose_conv", ((1, 1, 3, 3), (1, 2, 2, 2)),
     _qlinear(), "int8 weights are symmetric"),
    ("qlinear_conv_transpose", "torch_quantized_conv_transpose", ((1, 2, 3, 3), (2, 1, 2, 2)),
     _qlinear(group=2), "differ between groups"),
    ("qlinear_conv_transpose", "tflite_quantized_transpose_conv", ((1, 1, 3), (1, 2, 2)),
     _qlinear(w_zero_point=np.int8([0, 0])), "2-D"),
    ("qlinear_conv_transpose", "torch_quantized_conv_transpose", ((1, 1, 3), (1, 2, 2)),
     _qlinear(w_zero_point=None), "missing w_zero_point"),
    ("tflite_quantized_transpose_conv", "qlinear_conv_transpose", ((1, 3, 3, 1), (1, 2, 2, 1)),
     dict(output_shape=[1, 3, 3, 1], input_scale=0.5, input_zero_point=np.int8(0),
          weights_scale=0.5, weights_zero_point=0, output_scale=0.5, output_zero_point=0,
          fused_activation_function="RELU"), "fused_activation_function='RELU'"),
    ("tflite_quantized_transpose_conv", "torch_quantized_conv_transpose",
     ((1, 3, 3, 1), (1, 2, 2, 1)),
     dict(output_shape=[1, 3, 3, 1], input_scale=0.5, input_zero_point=np.int16(0),
          weights_scale=0.5, weights_zero_point=0, output_scale=0.5, output_zero_point=0),
     "no int16 activations"),
    ("qlinear_conv_transpose", "fake_quantize_convolution_backprop_data",
     ((1, 1, 3), (1, 1, 2)), _qlinear(), "FakeQuantize"),
    ("onnx_conv_transpose", "qlinear_conv_transpose", ((1, 1, 3), (1, 1, 2)), {},
     "is a float dialect"),
    ("qlinear_conv_transpose", "torch_quantized_conv_transpose", ((1, 1, 3), (1, 2, 2)),
     _qlinear(x_zero_point=10), "np.uint8(10)"),
])
def test_refusals(source, target, shapes, attributes, message):
    attributes = {k: v for k, v in attributes.items() if v is not None}
    with pytest.raises(ct.ConvTransposeError, match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
        ct.translate(source, target, *shapes, **attributes)


def test_float_translations_take_no_quantization_options():
    with pytest.raises(ct.ConvTransposeError, match="for quantized dialects"):
        ct.translate("onnx_conv_transpose", "torch_conv_transpose", (1, 1, 3), (1, 1, 2),
                     target_engine="fbgemm")


def test_exact_refuses_a_requantization_that_differs():
    attributes = _qlinear(w_scale=np.float32(0.25), w_zero_point=np.int8(0))
    with pytest.raises(ct.ConvTransposeError, match="requantization rules differ"):
        ct.translate("qlinear_conv_transpose", "torch_quantized_conv_transpose", (1, 1, 3),
                     (1, 1, 2), workarounds=False, **attributes)
    same = ct.translate("qlinear_conv_transpose", "qlinear_conv_transpose", (1, 1, 3),
                        (1, 1, 2), workarounds=False, **attributes)
    assert same.exact


def test_cli():
    from cli_support import assert_one_line_error, run_cli

    common = ["translate", "qlinear_conv_transpose", "torch_quantized_conv_transpose",
              "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2",
              "--attr", "x_scale=0.5", "--attr", "x_zero_point=10", "--attr", "w_scale=0.25",
              "--attr", "w_zero_point=0", "--attr", "y_scale=0.125", "--attr",
              "y_zero_point=-28", "--dtypes", "uint8,int8,int8"]
    result = run_cli(*common, "--target-engine", "qnnpack", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    # the int8 output's zero point -28 is torch's uint8 zero point 100
    assert answer["attributes"]["output_zero_point"] == 100
    assert answer["target_dtypes"] == ["uint8", "int8", "uint8"]
    assert answer["max_difference"] == 1
    text = run_cli(*common)
    assert text.returncode == 0 and "requantization: ONNX" in text.stdout
    assert_one_line_error(run_cli(*common, "--exact"), "requantization rules differ")
    assert_one_line_error(run_cli(*common[:11]), "missing x_zero_point")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("engine", ["fbgemm", "qnnpack"])
def test_torch_itself_computes_the_translated_onnx_layer(engine):
    # The peer: torch's own quantized ConvTranspose2d on the translated operands gives
    # back the ONNX layer's int8 result (power-of-two scales: both rules exact).
    torch = pytest.importorskip("torch")
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"this torch build has no {engine} engine")
    from torch.ao.nn import quantized as nnq

    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 3, 4, 5)).astype(np.int8)
    w = rng.integers(-40, 41, (3, 2, 3, 2)).astype(np.int8)
    B = rng.integers(-300, 301, 2).astype(np.int32)
    onnx = dict(x_scale=np.float32(0.125), x_zero_point=np.int8(5),
                w_scale=np.float32(0.0625), w_zero_point=np.int8(-3),
                y_scale=np.float32(2.0), y_zero_point=np.int8(-10))
    y = ct.qlinear_conv_transpose(x, onnx["x_scale"], onnx["x_zero_point"], w,
                                  onnx["w_scale"], onnx["w_zero_point"], onnx["y_scale"],
                                  onnx["y_zero_point"], B, strides=[2, 1], pads=[1, 0, 1, 0])
    t = ct.translate("qlinear_conv_transpose", "torch_quantized_conv_transpose", x.shape,
                     w.shape, B.shape, strides=[2, 1], pads=[1, 0, 1, 0],
                     target_engine=engine, **onnx)
    (xq, wq, bias), = t.operands(x, w, B)
    a = t.attributes
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        module = nnq.ConvTranspose2d(3, 2, (3, 2), stride=a["stride"], padding=a["padding"],
                                     output_padding=a["output_padding"], groups=a["groups"],
                                     dilation=a["dilation"])
        module.set_weight_bias(torch._make_per_tensor_quantized_tensor(
            torch.from_numpy(wq), float(a["weight_scale"]), a["weight_zero_point"]),
            torch.from_numpy(bias))
        module.scale, module.zero_point = float(a["output_scale"]), a["output_zero_point"]
        result = module(torch._make_per_tensor_quantized_tensor(
            torch.from_numpy(xq), float(a["input_scale"]), a["input_zero_point"]))
    finally:
        torch.backends.quantized.engine = previous
    np.testing.assert_array_equal(t.output(result.int_repr().numpy()), y)
    assert np.unique(y).size > 10  # not all saturated
