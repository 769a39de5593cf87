"""ct.onednn_quantized_conv_transpose: oneDNN's int8 deconvolution.

Two independent references: a direct loop in Python integers with oneDNN's
requantization restated element by element in float32 scalars (the rule of
docs/quantization.md, read from oneDNN's x64 JIT kernels and its reference
implementation), and a real oneDNN: torch's quantized ConvTranspose on its ``onednn``
engine, which runs oneDNN's int8 deconvolution (u8 source, s8 weights per tensor, u8
destination, float bias) where torch computes the layer right.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import convtranspose as ct
from int8_peers import unsaturated
from oracle import integer_scatter_sum, integer_tap_sums

#: torch warns that its quantized tensor types are deprecated; they still compute.
pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")

F32 = np.float32
#: oneDNN's saturation bounds before rounding (s32: the float32 below 2**31).
BOUNDS = {"u8": (0.0, 255.0, np.uint8), "s8": (-128.0, 127.0, np.int8),
          "s32": (-2.0 ** 31, 2147483520.0, np.int32)}


# ----------------------------------------------------------------------------- oracle
def direct_sum(x, x_zp, w, stride, pads_begin, pads_end, groups, dilation,
               output_padding=None):
    """``sum (x - x_zp) * w`` by scattering each input element through the kernel, in
    Python integers: ``x`` ``(N, C, X...)``, ``w`` ``(C, O, K...)`` (IOX)."""
    rank = w.ndim - 2
    output_padding = output_padding or (0,) * rank
    size = [(x.shape[2 + a] - 1) * stride[a] + (w.shape[2 + a] - 1) * dilation[a] + 1
            + output_padding[a] - pads_begin[a] - pads_end[a] for a in range(rank)]
    return integer_scatter_sum(x, x_zp, w, [0] * w.shape[1], stride, pads_begin, size,
                               groups, dilation)


def oracle(acc, dst, xs=None, ws=None, bias=None, ys=None, yzp=None, scaling="jit"):
    """oneDNN's steps after the sum, one element at a time in float32 scalars: the
    int32 sum (wrapped) to float32, times the source scale, times the weight scale of
    the channel, plus the bias, times float32(1 / ys) (or divided by ys), plus the zero
    point; then saturated and rounded half to even."""
    out = np.zeros(acc.shape, F32)
    for index in np.ndindex(*acc.shape):
        c = index[1]
        a = (int(acc[index]) + 2 ** 31) % 2 ** 32 - 2 ** 31
        v = F32(a)
        if xs is not None:
            v = F32(v * F32(xs))
        if ws is not None:
            v = F32(v * F32(np.broadcast_to(np.asarray(ws, F32).reshape(-1),
                                            (acc.shape[1],))[c]))
        if bias is not None:
            v = F32(v + F32(bias[c]))
        if ys is not None:
            v = F32(v * F32(F32(1) / F32(ys))) if scaling == "jit" else F32(v / F32(ys))
        if yzp is not None:
            v = F32(v + F32(yzp))
        out[index] = v
    if dst == "f32":
        return out
    low, high, dtype = BOUNDS[dst]
    return np.rint(np.clip(out, low, high)).astype(dtype)


def ours(case, **changes):
    case = {**case, **changes}
    return ct.onednn_quantized_conv_transpose(
        case["x"], case["w"], case["bias"], src_scale=case["xs"], wei_scales=case["ws"],
        dst_scale=case["ys"], src_zero_point=case["xzp"], dst_zero_point=case["yzp"],
        dst_dtype=case["dst"], scaling=case.get("scaling", "jit"), strides=case["stride"],
        pads_begin=case["pb"], pads_end=case["pe"], dilations=case["dilation"],
        output_padding=case.get("output_padding"), groups=case["groups"],
        data_format="NCX", filter_format="IOX")


def expected(case):
    acc = direct_sum(case["x"], case["xzp"] or 0, case["w"], case["stride"], case["pb"],
                     case["pe"], case["groups"], case["dilation"],
                     case.get("output_padding"))
    return oracle(acc, case["dst"], case["xs"], case["ws"], case["bias"], case["ys"],
                  case["yzp"], case.get("scaling", "jit"))


def random_case(rng, rank, dst="u8", *, source=np.uint8, per_channel=False, bias=True,
                groups=None):
    groups = groups or int(rng.integers(1, 4))
    c_in_g, c_out_g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kernel = tuple(int(k) for k in rng.integers(1, 4, rank))
    stride = tuple(int(s) for s in rng.integers(1, 4, rank))
    dilation = tuple(int(d) for d in rng.integers(1, 3, rank))
    pads = [tuple(int(rng.integers(0, (k - 1) * d // 2 + 1)) for k, d in zip(kernel, dilation))
            for _ in range(2)]
    spatial = tuple(int(v) for v in rng.integers(1, 6 if rank < 3 else 4, rank))
    info = np.iinfo(source)
    x = rng.integers(info.min, info.max + 1, (int(rng.integers(1, 3)), c_in_g * groups,
                                                *spatial)).astype(source)
    w = rng.integers(-128, 128, (c_in_g * groups, c_out_g, *kernel), dtype=np.int8)
    channels = c_out_g * groups
    return {"x": x, "w": w, "xs": F32(rng.uniform(0.002, 0.1)),
            "xzp": int(rng.integers(info.min, info.max + 1)),
            "ws": rng.uniform(0.001, 0.05, channels).astype(F32) if per_channel
            else F32(rng.uniform(0.001, 0.05)),
            "bias": rng.normal(0, 5, channels).astype(F32) if bias else None,
            "ys": F32(rng.uniform(0.05, 2.0) if dst != "f32" else 1.0),
            "yzp": int(rng.integers(-20, 256)), "dst": dst, "stride": stride,
            "pb": pads[0], "pe": pads[1], "groups": groups, "dilation": dilation}


# ---------------------------------------------------------------------------- (a) oracle
@pytest.mark.parametrize("dst", ["u8", "s8"])
def test_layers_requantized_by_the_threads_that_sum_them_match_the_oracle(dst):
    """A layer large enough for the integer kernels to requantize each thread's output
    lines as it ends them (64 -> 32 channels, 24x24, k3 s2): oneDNN's steps one
    element at a time on NumPy's int64 sums, bit for bit."""
    rng = np.random.default_rng(29)
    case = {"x": rng.integers(0, 256, (1, 64, 24, 24), dtype=np.uint8),
            "w": rng.integers(-128, 128, (64, 32, 3, 3), dtype=np.int8), "xs": F32(0.02),
            "xzp": 3, "ws": rng.uniform(0.005, 0.02, 32).astype(F32),
            "bias": rng.normal(0, 5, 32).astype(F32), "ys": F32(0.3), "yzp": 10, "dst": dst,
            "stride": (2, 2), "pb": (1, 1), "pe": (0, 0), "groups": 1, "dilation": (1, 1)}
    with ct.num_threads(2):
        result = ours(case)
    acc = integer_tap_sums(case["x"], 3, case["w"], [0] * 32, (2, 2), (1, 1), (48, 48), 1,
                           (1, 1))
    expected = oracle(acc, dst, case["xs"], case["ws"], case["bias"], case["ys"], 10)
    assert len(np.unique(expected)) > 20  # spread over the type, not saturated
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dst", ["u8", "s8", "s32", "f32"])
def test_a_prepared_layers_repeated_calls_run_prepared_and_match_the_oracle(
        dst, every_layer_integer, counted):
    """``ct.prepare``'s layer (channels first, as ``ours``): its first call of each
    input shape runs the function, the next ones its prepared call (the integer kernel
    set up once), on the first input and on others of its shape; each result
    oneDNN's steps on Python-integer sums."""
    function, called = counted("onednn_quantized_conv_transpose")
    rng = np.random.default_rng({"u8": 71, "s8": 72, "s32": 73, "f32": 74}[dst])
    for rank in (1, 2, 3):
        case = random_case(rng, rank, dst, source=(np.uint8, np.int8)[rank % 2],
                           per_channel=rank == 2)
        layer = ct.prepare(
            function, filter=case["w"], bias=case["bias"], src_scale=case["xs"],
            wei_scales=case["ws"], dst_scale=case["ys"], src_zero_point=case["xzp"],
            dst_zero_point=case["yzp"], dst_dtype=dst, strides=case["stride"],
            pads_begin=case["pb"], pads_end=case["pe"], dilations=case["dilation"],
            groups=case["groups"], data_format="NCX", filter_format="IOX")
        del called[:]
        info = np.iinfo(case["x"].dtype)
        for x in [case["x"]] * 3 + [rng.integers(info.min, info.max + 1, case["x"].shape
                                                 ).astype(case["x"].dtype) for _ in range(2)]:
            np.testing.assert_array_equal(layer(x), expected(dict(case, x=x)))
        assert len(called) == 1, rank  # the first call only


@pytest.mark.parametrize("groups", [1, 2])
def test_channels_last_bytes_read_as_they_are_match_the_oracle_from_two_threads(
        groups, every_layer_integer):
    """Channels-last uint8 data whose channels fill whole four-byte words (8 per group),
    which the integer kernel reads as they are: a prepared layer's repeated calls on
    several inputs, writable and read-only, from two threads at once, each oneDNN's
    steps on Python-integer sums; the caller's data are left as they were (their
    flags too)."""
    import threading

    rng = np.random.default_rng(80 + groups)
    case = random_case(rng, 2, "u8", groups=groups)
    case["x"] = rng.integers(0, 256, (2, 8 * groups, 3, 4), dtype=np.uint8)
    case["w"] = rng.integers(-128, 128, (8 * groups, 3, 3, 2), dtype=np.int8)
    case["bias"] = rng.normal(0, 5, 3 * groups).astype(F32)
    layer = ct.prepare(
        ct.onednn_quantized_conv_transpose, filter=case["w"], bias=case["bias"],
        src_scale=case["xs"], wei_scales=case["ws"], dst_scale=case["ys"],
        src_zero_point=case["xzp"], dst_zero_point=case["yzp"], dst_dtype="u8",
        strides=case["stride"], pads_begin=case["pb"], pads_end=case["pe"],
        dilations=case["dilation"], groups=groups, data_format="NXC", filter_format="IOX")
    inputs = [rng.integers(0, 256, case["x"].shape, dtype=np.uint8) for _ in range(4)]
    wanted = [expected(dict(case, x=x)) for x in inputs]
    nxc = [np.ascontiguousarray(np.moveaxis(x, 1, -1)) for x in inputs]
    copies = [x.copy() for x in nxc]
    for x in nxc[2:]:
        x.flags.writeable = False
    results: dict = {}

    def run(first: int) -> None:
        for round_ in range(3):
            for i in range(first, len(nxc), 2):
                results[first, round_, i] = np.moveaxis(layer(nxc[i]), -1, 1)

    threads = [threading.Thread(target=run, args=(first,)) for first in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 * len(nxc)
    for (_, _, i), result in results.items():
        np.testing.assert_array_equal(result, wanted[i])
    for i, (x, copy) in enumerate(zip(nxc, copies)):
        assert x.flags.writeable == (i < 2) and np.array_equal(x, copy)


@pytest.mark.parametrize("way", ["source as it is", "centred", "numpy"])
@pytest.mark.parametrize("dst", ["u8", "s8", "s32", "f32"])
def test_against_the_integer_oracle(dst, way, monkeypatch, request):
    """Random 1-D to 3-D layers (groups, strides, dilations, unequal pads; u8 and s8
    sources; per-tensor and per-channel weight scales; with and without bias), both
    scalings: equal element for element (f32 bit for bit), with the integer kernels on
    the source as it is (its zero point's share subtracted in the requantization's
    pass), on the centred source, and with NumPy's steps."""
    if way == "numpy":
        monkeypatch.setenv("CONVTRANSPOSE_NO_NUMBA", "1")
    from convtranspose._frontends import onednn_quantized

    if way == "centred":
        monkeypatch.setattr(onednn_quantized, "offset_requantized", lambda *arguments: None)
    if way == "source as it is":
        request.getfixturevalue("every_layer_integer")
    rng = np.random.default_rng({"u8": 1, "s8": 2, "s32": 3, "f32": 4}[dst])
    for i in range(12):
        case = random_case(rng, 1 + i % 3, dst, source=(np.uint8, np.int8)[i % 2],
                           per_channel=i % 3 == 0, bias=i % 4 != 1)
        case["scaling"] = ("jit", "reference")[i // 6]
        before = case["x"].copy(), case["w"].copy()
        result = ours(case)
        np.testing.assert_array_equal(result, expected(case))
        assert result.dtype == np.dtype({"u8": np.uint8, "s8": np.int8, "s32": np.int32,
                                         "f32": np.float32}[dst])
        np.testing.assert_array_equal(case["x"], before[0])  # inputs are not modified
        np.testing.assert_array_equal(case["w"], before[1])


def test_unset_attributes_and_output_padding():
    """Attributes left unset are skipped (scale 1, zero point 0): an s32 destination
    without any is the exact sum itself; output_padding adds rows the oracle also has."""
    rng = np.random.default_rng(5)
    case = random_case(rng, 2, "s32", bias=False, groups=2)
    case.update(xs=None, ws=None, ys=None, xzp=None, yzp=None, stride=(2, 3),
                output_padding=(1, 2))
    acc = direct_sum(case["x"], 0, case["w"], case["stride"], case["pb"], case["pe"], 2,
                     case["dilation"], (1, 2))
    np.testing.assert_array_equal(ours(case), acc.astype(np.int64))


def test_layouts_are_transpositions():
    """NXC with XIO, OIX or XOI weights gives the NCX/IOX result transposed."""
    rng = np.random.default_rng(6)
    case = random_case(rng, 2, "s8", per_channel=True, groups=2)
    reference = ours(case)
    x_nxc = np.moveaxis(case["x"], 1, -1)
    g = case["groups"]
    oix = np.swapaxes(case["w"], 0, 1)  # I is every input channel, O those of one group
    filters = {"IOX": case["w"], "XIO": np.moveaxis(case["w"], (0, 1), (-2, -1)),
               "OIX": oix, "XOI": np.moveaxis(oix, (0, 1), (-2, -1))}
    for layout, w in filters.items():
        result = ct.onednn_quantized_conv_transpose(
            x_nxc, w, case["bias"], src_scale=case["xs"], wei_scales=case["ws"],
            dst_scale=case["ys"], src_zero_point=case["xzp"], dst_zero_point=case["yzp"],
            dst_dtype=np.int8, strides=case["stride"], pads_begin=case["pb"],
            pads_end=case["pe"], dilations=case["dilation"], groups=g, filter_format=layout)
        np.testing.assert_array_equal(np.moveaxis(result, -1, 1), reference, layout)


# --------------------------------------------------------------------------- saturation
def _extreme_case(dst, source, x_value, xzp, yzp, w_value=-128):
    x = np.full((1, 64, 3, 3), x_value, source)
    w = np.full((64, 2, 5, 5), w_value, np.int8)
    w[:, 1] = 127
    return {"x": x, "w": w, "xs": None, "ws": None, "bias": None, "ys": None, "xzp": xzp,
            "yzp": yzp, "dst": dst, "stride": (1, 1), "pb": (0, 0), "pe": (0, 0),
            "groups": 1, "dilation": (1, 1)}


@pytest.mark.parametrize("dst", ["u8", "s8", "s32", "f32"])
def test_saturation_edges(dst):
    """Every operand at an extreme, zero points at the ends of int32 (so the int32
    accumulator wraps, as oneDNN's does) and 1,600 products per output (sums beyond
    2**24, where float32(acc) rounds): equal to the oracle, both ends of the
    destination reached."""
    low, high = -2 ** 31, 2 ** 31 - 1
    cases = [_extreme_case(dst, np.uint8, 255, 0, 0),
             _extreme_case(dst, np.uint8, 0, 255, high),
             _extreme_case(dst, np.int8, -128, 127, low),
             _extreme_case(dst, np.int8, 127, -128, 0, w_value=127),
             _extreme_case(dst, np.uint8, 255, low, 0),
             _extreme_case(dst, np.int8, -128, high, 5)]
    seen = set()
    for case in cases:
        case["x"] = case["x"][:, :, :2, :2] if case["xzp"] in (low, high) else case["x"]
        result = ours(case)
        np.testing.assert_array_equal(result, expected(case))
        seen.update(result.ravel().tolist())
    if dst != "f32":
        low_bound, high_bound, _ = BOUNDS[dst]
        assert {int(low_bound), int(high_bound)} <= seen


def test_s32_saturates_below_two_to_the_31():
    """oneDNN saturates an s32 destination at 2147483520 (the float32 below 2**31:
    cvtps2dq would turn 2**31 into INT32_MIN), not at INT32_MAX."""
    x = np.full((1, 1, 1), 200, np.uint8)
    w = np.full((1, 1, 1), 100, np.int8)
    y = ct.onednn_quantized_conv_transpose(x, w, src_scale=1e6, dst_dtype="s32",
                                           data_format="NCX", filter_format="IOX")
    assert y.tolist() == [[[2147483520]]]
    y = ct.onednn_quantized_conv_transpose(x, w, src_scale=1e6,
                                           src_zero_point=255, dst_dtype="s32",
                                           data_format="NCX", filter_format="IOX")
    assert y.tolist() == [[[-2 ** 31]]]


def test_the_zero_point_is_added_before_rounding():
    """oneDNN adds dst_zero_point in float32 and then rounds half to even: 0.5 + 101
    rounds to 102, where rounding first (0.5 -> 0) would give 101."""
    x = np.arange(8, dtype=np.uint8).reshape(1, 1, 8)
    w = np.ones((1, 1, 1), np.int8)
    y = ct.onednn_quantized_conv_transpose(x, w, dst_scale=2.0, dst_zero_point=101,
                                           data_format="NCX", filter_format="IOX")
    assert (y.astype(int) - 101).ravel().tolist() == [0, 1, 1, 1, 2, 3, 3, 3]


def test_jit_and_reference_scalings_differ_as_float32_does():
    """The JIT kernels multiply by float32(1 / dst_scale), the reference divides: with
    dst_scale 3 the two float32 results of 3 * 5 differ (15 * float32(1/3) is a hair
    above 5, 15 / 3 is 5) and an f32 destination shows it."""
    x = np.array([[[15]]], np.uint8)
    w = np.ones((1, 1, 1), np.int8)
    args = dict(dst_scale=3.0, dst_dtype="f32", data_format="NCX", filter_format="IOX")
    jit = ct.onednn_quantized_conv_transpose(x, w, **args)
    reference = ct.onednn_quantized_conv_transpose(x, w, scaling="reference", **args)
    assert reference.item() == 5.0
    assert jit.item() == float(F32(15) * (F32(1) / F32(3)))


# ---------------------------------------------------------------------------- errors
def test_errors_name_the_argument():
    x = np.zeros((1, 4, 4, 2), np.uint8)
    w = np.zeros((3, 3, 2, 3), np.int8)
    call = ct.onednn_quantized_conv_transpose
    with pytest.raises(TypeError, match="input has dtype float32"):
        call(x.astype(np.float32), w)
    with pytest.raises(TypeError, match="filter has dtype uint8.*s8 weights"):
        call(x, w.astype(np.uint8))
    with pytest.raises(TypeError, match="bias has dtype int32"):
        call(x, w, np.zeros(3, np.int32))
    with pytest.raises(TypeError, match="src_scale has dtype int64"):
        call(x, w, src_scale=np.int64(2))
    with pytest.raises(ct.ConvTransposeError, match=r"wei_scales has shape \(2,\).*\(3,\)"):
        call(x, w, wei_scales=np.ones(2, np.float32))
    with pytest.raises(ct.ConvTransposeError, match=r"dst_scale has shape \(3,\)"):
        call(x, w, dst_scale=np.ones(3, np.float32))
    with pytest.raises(ct.ConvTransposeError, match="dst_scale must be positive"):
        call(x, w, dst_scale=-1.0)
    with pytest.raises(ct.ConvTransposeError, match="dst_scale = .* reciprocal"):
        call(x, w, dst_scale=1e-45)
    with pytest.raises(ct.ConvTransposeError, match="src_zero_point = .* int32"):
        call(x, w, src_zero_point=2 ** 31)
    with pytest.raises(ct.ConvTransposeError, match="dst_dtype must be one of u8"):
        call(x, w, dst_dtype="bf16")
    with pytest.raises(ct.ConvTransposeError, match="scaling must be one of jit"):
        call(x, w, scaling="fast")
    with pytest.raises(ct.ConvTransposeError, match="bias must be finite"):
        call(x, w, np.array([0, np.inf, 0], np.float32))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray of dtype int32"):
        call(x, w, dst_dtype="s32", out=np.zeros((1, 6, 6, 3), np.uint8))
    out = np.zeros((1, 6, 6, 3), np.int32)
    assert call(x + 1, w + 1, dst_dtype=np.int32, out=out) is out and out.max() == 18


def test_shape_twin():
    plan = ct.shapes.onednn_quantized_conv_transpose(
        (2, 3, 5, 5), (3, 4, 3, 3), (4,), src_scale=(), wei_scales=(4,), dst_scale=(1,),
        dst_dtype="s32", strides=2, data_format="NCX", filter_format="IOX",
        pads_begin=1, pads_end=0)
    result = ct.onednn_quantized_conv_transpose(
        np.zeros((2, 3, 5, 5), np.uint8), np.zeros((3, 4, 3, 3), np.int8),
        np.zeros(4, np.float32),
        src_scale=1.0, wei_scales=np.ones(4, np.float32), dst_scale=[1.0], dst_dtype="s32",
        strides=2, data_format="NCX", filter_format="IOX", pads_begin=1, pads_end=0)
    assert plan.op == "onednn_quantized_conv_transpose"
    assert plan.output_shape == result.shape == (2, 4, 10, 10)
    with pytest.raises(ct.ConvTransposeError, match=r"wei_scales has shape \(3,\)"):
        ct.shapes.onednn_quantized_conv_transpose((2, 3, 5, 5), (3, 4, 3, 3),
                                                  wei_scales=(3,), data_format="NCX",
                                                  filter_format="IOX")
    with pytest.raises(ct.ConvTransposeError, match=r"bias has shape \(8,\)"):
        ct.shapes.onednn_quantized_conv_transpose((2, 3, 5, 5), (3, 4, 3, 3), (8,),
                                                  data_format="NCX", filter_format="IOX")


# ------------------------------------------------------------------- (b) torch's oneDNN
def _torch():
    torch = pytest.importorskip("torch")
    if "onednn" not in torch.backends.quantized.supported_engines:
        pytest.skip("this torch build has no onednn quantized engine")
    return torch


def _torch_scale(scale: float) -> F32:
    """The scale oneDNN receives from torch: torch hands over float32(1 / scale) and
    ideep inverts it back in float32 (docs/quantization.md, the torch section)."""
    return F32(F32(1) / F32(1.0 / scale))


def _torch_onednn(torch, case):
    """The int_repr of torch's quantized ConvTranspose on the onednn engine."""
    nnq = pytest.importorskip("torch.ao.nn.quantized")
    torch.backends.quantized.engine = "onednn"
    w = case["w"]
    module = (nnq.ConvTranspose1d, nnq.ConvTranspose2d, nnq.ConvTranspose3d)[w.ndim - 3](
        w.shape[0], w.shape[1] * case["groups"], w.shape[2:], stride=case["stride"],
        padding=case["pb"], groups=case["groups"], dilation=case["dilation"],
        bias=case["bias"] is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module.set_weight_bias(torch._make_per_tensor_quantized_tensor(
            torch.from_numpy(w), float(case["ws"]), 0),
            None if case["bias"] is None else torch.from_numpy(case["bias"]))
        module.scale, module.zero_point = float(case["ys"]), case["yzp"]
        qx = torch._make_per_tensor_quantized_tensor(torch.from_numpy(case["x"]),
                                                     float(case["xs"]), case["xzp"])
        return module(qx).int_repr().numpy()


def torch_case(rng, rank, ties):
    """A layer torch's oneDNN path computes right (docs/quantization.md: C_in/groups
    equal to C_out/groups or one of them 1, no stride above the dilated kernel,
    output_padding 0, weights per tensor and symmetric), u8 in and out.  ``ties``: power
    of two scales and quarter-unit biases, so that many values are exact ties."""
    case = random_case(rng, rank, "u8", bias=bool(rng.integers(0, 2)))
    c_in_g = case["x"].shape[1] // case["groups"]
    if c_in_g > 1 and case["w"].shape[1] > 1:
        case["w"] = np.ascontiguousarray(case["w"][:, :1].repeat(c_in_g, axis=1))
        if case["bias"] is not None:
            case["bias"] = rng.normal(0, 5, c_in_g * case["groups"]).astype(F32)
    w = case["w"]
    case["stride"] = tuple(min(s, (k - 1) * d + 1) for s, k, d in
                           zip(case["stride"], w.shape[2:], case["dilation"]))
    case["pe"] = case["pb"]
    case["yzp"] = int(rng.integers(0, 256))
    if ties:
        case.update(xs=2.0 ** -int(rng.integers(0, 4)), ws=2.0 ** -int(rng.integers(3, 7)),
                    ys=2.0 ** int(rng.integers(-2, 3)))
        if case["bias"] is not None:
            case["bias"] = (np.round(case["bias"] * 4) / 4).astype(F32)
    else:
        case.update(xs=float(case["xs"]), ws=float(case["ws"]), ys=float(case["ys"]))
    return case


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_against_torch_onednn(rank):
    """torch's onednn engine runs oneDNN's int8 deconvolution: with the scales it hands
    over, the dialect's result is the same element for element, ties included (a
    quarter of the layers have power-of-two scales, so that many values are exact
    ties and the zero point's place before the rounding shows)."""
    torch = _torch()
    rng = np.random.default_rng(700 + rank)
    apart = total = 0
    for i in range(16):
        case = unsaturated(torch_case(rng, rank, ties=i % 4 == 3))
        theirs = _torch_onednn(torch, case)
        # Measured: torch's oneDNN path hands oneDNN one weight scale, the float32
        # product of the two (as torch's ideep gives them back), and no source scale.
        mine = ours({**case, "xs": None,
                     "ws": F32(_torch_scale(case["xs"]) * _torch_scale(case["ws"])),
                     "ys": _torch_scale(case["ys"])})
        apart += int((mine != theirs).sum())
        total += mine.size
        assert np.abs(mine.astype(int) - theirs.astype(int)).max() <= 1, case
    assert apart == 0, (apart, total)


@pytest.mark.parametrize("numba_disabled", [False, True], ids=["compiled", "numpy"])
def test_a_product_that_underflows_keeps_its_sign(numba_disabled, monkeypatch):
    """An f32 destination without bias or zero point keeps a negative product that
    underflows to -0.0 as -0.0: the steps not set are skipped, not taken as +0.0."""
    if numba_disabled:
        monkeypatch.setenv("CONVTRANSPOSE_NO_NUMBA", "1")
    x = np.array([[[0, 1, 3]]], np.uint8)
    w = np.full((1, 1, 1), -1, np.int8)
    y = ct.onednn_quantized_conv_transpose(x, w, src_scale=1e-30, wei_scales=1e-30,
                                           dst_dtype="f32", data_format="NCX",
                                           filter_format="IOX")
    assert np.signbit(y).ravel().tolist() == [False, True, True] and not y.any()
