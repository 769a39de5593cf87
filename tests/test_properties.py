"""Property tests: every dialect against the independent oracle (``tests/oracle.py``).

Hypothesis draws ranks 1-3, groups, dilations, asymmetric pads, output_padding,
output_shape below and above the natural size, every auto_pad spelling, every data
and filter format, bias, batch 0..3 and every dtype.  For each draw:

- the array function equals the oracle (integers bit-exact; floats within the
  accumulation-order bound documented in ``oracle.assert_matches``), or, when the
  oracle says the configuration is invalid (an output size <= 0, oneDNN's
  output_padding >= stride), both the array function and its ``ct.shapes`` twin raise
  ``ConvTransposeError``;
- the ``ct.shapes`` twin's ``output_shape``, offsets, sizes and resolved pads equal
  the oracle's and the array result's shape; the result has the input dtype;
- the inputs are unchanged and the result shares no memory with them;
- the same call with ``out=`` (contiguous, or a strided view) writes the same numbers
  there and nothing outside it.

``--examples N`` sets the number of draws per test.
"""

import dataclasses
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convtranspose as ct
import oracle

DTYPES = oracle.all_dtypes()


def run(examples, strategy, check):
    """Run ``check`` on ``examples`` draws of ``strategy`` (the budget comes from --examples)."""
    settings(max_examples=examples)(given(strategy)(check))()


def spelled(value):
    """The same auto_pad/format value in one of the spellings the API accepts."""
    if not isinstance(value, str):
        return st.just(value)
    return st.sampled_from([value, value.upper(), value.lower(), value.title()])


def per_axis(draw, values, rank):
    """A per-axis attribute in one of its accepted forms: int, list, tuple or int array."""
    values = list(values)
    forms = ["list", "tuple", "array"] + (["int"] if len(set(values)) == 1 else [])
    form = draw(st.sampled_from(forms))
    if form == "int":
        return values[0]
    if form == "tuple":
        return tuple(values)
    if form == "array":
        return np.array(values, dtype=draw(st.sampled_from([np.int64, np.int32, np.uint8])))
    return values


@st.composite
def geometry(draw, *, max_groups=3, max_output_padding=2, stride_bound_padding=False,
             with_output_shape=None, wide=False):
    """Sizes and per-axis attributes shared by every dialect (``wide``: larger ranges)."""
    rank = draw(st.integers(1, 3))
    max_size = ({1: 9, 2: 5, 3: 3} if wide else {1: 6, 2: 4, 3: 3})[rank]
    big = 2 if wide else 0
    spatial = draw(st.lists(st.integers(1, max_size), min_size=rank, max_size=rank))
    kernel = draw(st.lists(st.integers(1, 3 + big), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(1, 3 + big), min_size=rank, max_size=rank))
    dilations = draw(st.lists(st.integers(1, 2 + big), min_size=rank, max_size=rank))
    pads_begin = draw(st.lists(st.integers(0, 3 + 2 * big), min_size=rank, max_size=rank))
    pads_end = draw(st.lists(st.integers(0, 3 + 2 * big), min_size=rank, max_size=rank))
    if stride_bound_padding:
        output_padding = [draw(st.integers(0, min(max_output_padding, s - 1))) for s in strides]
    else:
        output_padding = draw(st.lists(st.integers(0, max_output_padding), min_size=rank,
                                       max_size=rank))
    natural = [(x - 1) * s + (k - 1) * d + 1 + p for x, k, s, d, p in
               zip(spatial, kernel, strides, dilations, output_padding)]
    output_shape = None
    if with_output_shape if with_output_shape is not None else draw(st.booleans()):
        reach = 9 if wide else 3
        output_shape = [max(1, n + draw(st.integers(-reach, reach))) for n in natural]
    return dict(
        rank=rank, spatial=spatial, kernel=kernel, strides=strides, dilations=dilations,
        pads_begin=pads_begin, pads_end=pads_end, output_padding=output_padding,
        output_shape=output_shape,
        groups=draw(st.integers(1, max_groups)),
        in_per_group=draw(st.integers(1, 3)),
        out_per_group=draw(st.integers(1, 3)),
        batch=draw(st.sampled_from([0, 1, 2, 3])),
        dtype=draw(st.sampled_from(DTYPES)),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


def snapshot(*arrays):
    return [None if a is None else a.copy() for a in arrays]


def assert_untouched_and_unaliased(result, arrays, copies):
    for array, copy in zip(arrays, copies):
        if array is None:
            continue
        np.testing.assert_array_equal(array, copy, strict=True)
        assert not np.shares_memory(result, array), "the result aliases an input"


def check_against_oracle(call, plan_call, case_call):
    """The shared body of every dialect's property: oracle, shapes twin, no side effects.

    ``call(**out)`` is the array function, ``out`` passed on (absent or ``out=array``)."""
    try:
        case = case_call()
    except oracle.Rejected:
        with pytest.raises(ct.ConvTransposeError):
            plan_call()
        with pytest.raises(ct.ConvTransposeError):
            call()
        return
    plan = plan_call()
    result = call()
    assert plan.output_shape == case.output_shape
    assert result.shape == plan.output_shape
    assert result.dtype == case.dtype
    assert plan.offset == tuple(case.offsets)
    assert plan.output_size == tuple(case.sizes)
    assert plan.pads_begin == case.pads_begin
    assert plan.pads_end == case.pads_end
    oracle.assert_matches(result, case)
    # The same call writing into a given array (every other draw a strided view,
    # whose gaps must stay as they were).
    strided = result.size % 2 == 1
    base = np.ones(result.shape[:-1] + (result.shape[-1] * (2 if strided else 1),),
                   result.dtype)
    given = base[..., ::2] if strided else base
    assert call(out=given) is given
    oracle.assert_matches(given, case)
    if strided:
        assert (base[..., 1::2] == 1).all(), "out= wrote outside the given view"
    return result


# ---------------------------------------------------------------------------
# OpenVINO

# Each mode with its accepted aliases; every (mode, output_shape given?) pair is its own test.
OPENVINO_MODES = {"explicit": ["explicit", "notset", None], "same_upper": ["same_upper"],
                  "same_lower": ["same_lower"], "valid": ["valid"]}
WITH_OUTPUT_SHAPE = pytest.mark.parametrize("with_output_shape", [False, True],
                                            ids=["natural", "output_shape"])


@st.composite
def openvino_draw(draw, grouped, mode, with_output_shape, wide=False):
    g = draw(geometry(max_groups=3 if grouped else 1, with_output_shape=with_output_shape,
                      wide=wide))
    mode = draw(st.sampled_from(OPENVINO_MODES[mode] if mode else sum(
        OPENVINO_MODES.values(), [])))
    keywords = dict(auto_pad=draw(spelled(mode)))
    for name in ("strides", "dilations", "pads_begin", "pads_end", "output_padding"):
        if name in ("strides", "dilations") or draw(st.integers(0, 4)):  # sometimes omitted
            keywords[name] = per_axis(draw, g[name], g["rank"])
        else:
            g[name] = [0] * g["rank"]
    output_shape = g["output_shape"]
    if output_shape is not None and draw(st.booleans()):
        output_shape = np.array(output_shape, dtype=draw(st.sampled_from([np.int64, np.int32])))
    return g, keywords, output_shape


def openvino_check(grouped):
    def check(drawn):
        g, keywords, output_shape = drawn
        rng = np.random.default_rng(g["seed"])
        data = oracle.random_array(
            rng, [g["batch"], g["groups"] * g["in_per_group"]] + g["spatial"], g["dtype"])
        filter_shape = [g["in_per_group"], g["out_per_group"]] + g["kernel"]
        if grouped:
            filter_shape = [g["groups"]] + filter_shape
        filter = oracle.random_array(rng, filter_shape, g["dtype"])
        copies = snapshot(data, filter, output_shape)
        name = "group_convolution_backprop_data" if grouped else "convolution_backprop_data"
        case_of = oracle.openvino_group_cbpd_case if grouped else oracle.openvino_cbpd_case
        oracle_keywords = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                           for k, v in keywords.items()}
        result = check_against_oracle(
            lambda **out: getattr(ct, name)(data, filter, output_shape, **keywords, **out),
            lambda: getattr(ct.shapes, name)(data.shape, filter.shape, output_shape, **keywords),
            lambda: case_of(data, filter, g["output_shape"], **oracle_keywords))
        assert_untouched_and_unaliased(result, [data, filter, output_shape], copies)
    return check


@WITH_OUTPUT_SHAPE
@pytest.mark.parametrize("mode", list(OPENVINO_MODES))
def test_convolution_backprop_data_matches_oracle(examples, mode, with_output_shape):
    run(examples, openvino_draw(False, mode, with_output_shape), openvino_check(False))


@WITH_OUTPUT_SHAPE
@pytest.mark.parametrize("mode", list(OPENVINO_MODES))
def test_group_convolution_backprop_data_matches_oracle(examples, mode, with_output_shape):
    run(examples, openvino_draw(True, mode, with_output_shape), openvino_check(True))


# ---------------------------------------------------------------------------
# oneDNN Graph

ONEDNN_MODES = {"none": ["none", None], "same_upper": ["same_upper"],
                "same_lower": ["same_lower"], "valid": ["valid"]}
LAYOUTS = ["XIO", "OIX", "IOX", "XOI"]


def layout_filter(filter_iox, layout, rank):
    """An (I, O, K...) filter rearranged into ``layout`` (the inverse of oracle.to_iox)."""
    if layout == "IOX":
        return np.ascontiguousarray(filter_iox)
    if layout == "OIX":
        return np.ascontiguousarray(np.swapaxes(filter_iox, 0, 1))
    if layout == "XIO":
        return np.ascontiguousarray(np.moveaxis(filter_iox, (0, 1), (rank, rank + 1)))
    return np.ascontiguousarray(np.moveaxis(filter_iox, (0, 1), (rank + 1, rank)))  # XOI


@st.composite
def onednn_draw(draw, mode, with_output_shape, wide=False):
    # output_padding >= stride is drawn too, sometimes: it must be rejected.
    g = draw(geometry(stride_bound_padding=draw(st.integers(0, 5)) > 0,
                      with_output_shape=with_output_shape, wide=wide))
    mode = draw(st.sampled_from(ONEDNN_MODES[mode] if mode else sum(
        ONEDNN_MODES.values(), [])))
    keywords = dict(auto_pad=draw(spelled(mode)), groups=g["groups"])
    for name in ("strides", "dilations", "pads_begin", "pads_end", "output_padding"):
        keywords[name] = per_axis(draw, g[name], g["rank"])
    data_format = draw(st.sampled_from(["NXC", "NCX"]))
    keywords["data_format"] = draw(spelled(data_format))
    layout = draw(st.sampled_from(LAYOUTS))
    if layout in ("XIO", "OIX") and draw(st.booleans()):
        keywords["filter_format"] = draw(spelled(layout))
    else:  # today's oneDNN name, which overrides filter_format
        keywords["weights_format"] = draw(spelled(layout))
        keywords["filter_format"] = draw(st.sampled_from(["XIO", "OIX"]))
    if g["output_shape"] is not None:
        keywords["output_shape"] = g["output_shape"]
    return g, keywords, data_format, layout, draw(st.booleans())


@WITH_OUTPUT_SHAPE
@pytest.mark.parametrize("mode", list(ONEDNN_MODES))
def test_conv_transpose_matches_oracle(examples, mode, with_output_shape):
    run(examples, onednn_draw(mode, with_output_shape), onednn_check)


def onednn_check(drawn):
    """One oneDNN draw against the oracle (shared by the default and wide tests)."""
    g, keywords, data_format, layout, with_bias = drawn
    rng = np.random.default_rng(g["seed"])
    rank, channels = g["rank"], g["groups"] * g["in_per_group"]
    shape = ([g["batch"]] + g["spatial"] + [channels] if data_format == "NXC"
             else [g["batch"], channels] + g["spatial"])
    data = oracle.random_array(rng, shape, g["dtype"])
    filter_iox = oracle.random_array(rng, [channels, g["out_per_group"]] + g["kernel"],
                                     g["dtype"])
    filter = layout_filter(filter_iox, layout, rank)
    bias = (oracle.random_array(rng, [g["groups"] * g["out_per_group"]], g["dtype"])
            if with_bias else None)
    copies = snapshot(data, filter, bias)
    oracle_keywords = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                       for k, v in keywords.items()}
    result = check_against_oracle(
        lambda **out: ct.conv_transpose(data, filter, bias, **keywords, **out),
        lambda: ct.shapes.conv_transpose(data.shape, filter.shape,
                                         None if bias is None else bias.shape, **keywords),
        lambda: oracle.onednn_conv_transpose_case(data, filter, bias, **oracle_keywords))
    assert_untouched_and_unaliased(result, [data, filter, bias], copies)


# ---------------------------------------------------------------------------
# ONNX

ONNX_MODES = {"NOTSET": ["NOTSET", None], "SAME_UPPER": ["SAME_UPPER"],
              "SAME_LOWER": ["SAME_LOWER"], "VALID": ["VALID"]}


@st.composite
def onnx_draw(draw, mode, with_output_shape, wide=False):
    g = draw(geometry(with_output_shape=with_output_shape, wide=wide))
    mode = draw(st.sampled_from(ONNX_MODES[mode] if mode else sum(ONNX_MODES.values(), [])))
    keywords = dict(auto_pad=draw(spelled(mode)), group=g["groups"])
    for name in ("strides", "dilations", "output_padding"):
        if draw(st.integers(0, 4)):
            keywords[name] = per_axis(draw, g[name], g["rank"])
    if draw(st.integers(0, 4)):
        keywords["pads"] = g["pads_begin"] + g["pads_end"]
    if draw(st.booleans()):
        keywords["kernel_shape"] = list(g["kernel"])
    if g["output_shape"] is not None:
        shape = list(g["output_shape"])
        if draw(st.integers(0, 3)) == 0:  # the whole (N, M, spatial...) form
            shape = [g["batch"], g["groups"] * g["out_per_group"]] + shape
        keywords["output_shape"] = shape
    return g, keywords, draw(st.booleans())


@WITH_OUTPUT_SHAPE
@pytest.mark.parametrize("mode", list(ONNX_MODES))
def test_onnx_conv_transpose_matches_oracle(examples, mode, with_output_shape):
    run(examples, onnx_draw(mode, with_output_shape), onnx_check)


def onnx_check(drawn):
    """One ONNX draw against the oracle (shared by the default and wide tests)."""
    g, keywords, with_bias = drawn
    rng = np.random.default_rng(g["seed"])
    channels = g["groups"] * g["in_per_group"]
    X = oracle.random_array(rng, [g["batch"], channels] + g["spatial"], g["dtype"])
    W = oracle.random_array(rng, [channels, g["out_per_group"]] + g["kernel"], g["dtype"])
    B = (oracle.random_array(rng, [g["groups"] * g["out_per_group"]], g["dtype"])
         if with_bias else None)
    copies = snapshot(X, W, B)
    oracle_keywords = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                       for k, v in keywords.items()}
    result = check_against_oracle(
        lambda **out: ct.onnx_conv_transpose(X, W, B, **keywords, **out),
        lambda: ct.shapes.onnx_conv_transpose(X.shape, W.shape,
                                              None if B is None else B.shape, **keywords),
        lambda: oracle.onnx_conv_transpose_case(X, W, B, **oracle_keywords))
    assert_untouched_and_unaliased(result, [X, W, B], copies)


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["openvino", "group", "onednn", "onnx"])
def test_wide_ranges_match_oracle(examples, dialect):
    """Larger kernels, strides, dilations, pads and output_shape offsets (--runslow);
    ``examples * 5`` draws, every mode, output_shape present or not."""
    draws = {
        "openvino": (openvino_draw(False, None, None, wide=True), openvino_check(False)),
        "group": (openvino_draw(True, None, None, wide=True), openvino_check(True)),
        "onednn": (onednn_draw(None, None, wide=True), onednn_check),
        "onnx": (onnx_draw(None, None, wide=True), onnx_check),
    }
    run(examples * 5, *draws[dialect])


# ---------------------------------------------------------------------------
# Layout-independence: the same problem in every oneDNN layout gives the same numbers.

def test_conv_transpose_layouts_agree(examples):
    @st.composite
    def draw_problem(draw):
        return (draw(geometry(stride_bound_padding=True)),
                draw(st.sampled_from([m for v in ONEDNN_MODES.values() for m in v])))

    def check(drawn):
        g, mode = drawn
        rng = np.random.default_rng(g["seed"])
        rank, channels = g["rank"], g["groups"] * g["in_per_group"]
        # Small integers in float64: every sum is exact, so any summation order agrees.
        data_ncx = rng.integers(-8, 9, [g["batch"], channels] + g["spatial"]).astype(np.float64)
        filter_iox = rng.integers(-8, 9, [channels, g["out_per_group"]] + g["kernel"]).astype(
            np.float64)
        keywords = dict(strides=g["strides"], dilations=g["dilations"],
                        pads_begin=g["pads_begin"], pads_end=g["pads_end"],
                        output_padding=g["output_padding"], groups=g["groups"], auto_pad=mode)
        try:
            reference = ct.conv_transpose(data_ncx, filter_iox, data_format="NCX",
                                          weights_format="IOX", **keywords)
        except ct.ConvTransposeError:
            return
        for layout in LAYOUTS:
            filter = layout_filter(filter_iox, layout, rank)
            nxc = ct.conv_transpose(np.moveaxis(data_ncx, 1, -1), filter, weights_format=layout,
                                    **keywords)
            np.testing.assert_array_equal(np.moveaxis(nxc, -1, 1), reference)
    run(examples, draw_problem(), check)


# ---------------------------------------------------------------------------
# The contract between each array function and its ct.shapes twin.

FUNCTIONS = ["convolution_backprop_data", "group_convolution_backprop_data", "conv_transpose",
             "onnx_conv_transpose"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_shapes_twin_has_the_same_parameters(name):
    """The same parameters, but for the array function's last one, ``out`` (an array)."""
    array_parameters = list(inspect.signature(getattr(ct, name)).parameters.values())
    shape_parameters = inspect.signature(getattr(ct.shapes, name)).parameters
    assert (array_parameters[-1].name, array_parameters[-1].kind) == ("out", inspect.Parameter.KEYWORD_ONLY)
    assert [(p.name, p.kind, p.default) for p in array_parameters[:-1]] == \
           [(p.name, p.kind, p.default) for p in shape_parameters.values()]


def test_plan_is_frozen_and_printable():
    plan = ct.shapes.convolution_backprop_data((1, 20, 224, 224), (20, 10, 3, 3), strides=2,
                                               pads_begin=1, pads_end=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.output_shape = (1,)
    text = str(plan)
    assert "(1, 10, 447, 447)" in text and "pads_begin=[1, 1]" in text
    assert (plan.offset, plan.output_size) == ((1, 1), (447, 447))
    assert hash(plan) == hash(ct.shapes.convolution_backprop_data(
        (1, 20, 224, 224), (20, 10, 3, 3), strides=[2, 2], pads_begin=1, pads_end=[1, 1]))


def test_spatial_rank_four_in_every_dialect():
    # Rank >= 3 tensors of any rank are accepted (docs/semantics.md: "any rank >= 3"); one 4-D
    # spatial problem per dialect, with groups, strides, dilations and pads.
    rng = np.random.default_rng(11)
    data = rng.standard_normal((2, 4, 2, 3, 2, 2))
    iox = rng.standard_normal((4, 3, 2, 1, 3, 2))
    attrs = dict(strides=[1, 2, 3, 1], dilations=[2, 1, 1, 2], pads_begin=[0, 1, 2, 0],
                 pads_end=[1, 0, 0, 1])
    oracle.assert_matches(ct.convolution_backprop_data(data, iox, **attrs),
                          oracle.openvino_cbpd_case(data, iox, **attrs))
    grouped = iox.reshape(2, 2, 3, 2, 1, 3, 2)
    oracle.assert_matches(ct.group_convolution_backprop_data(data, grouped, [3, 5, 7, 4],
                                                             auto_pad="same_lower", strides=2),
                          oracle.openvino_group_cbpd_case(data, grouped, [3, 5, 7, 4],
                                                          auto_pad="same_lower", strides=2))
    nxc, xoi = np.moveaxis(data, 1, -1), layout_filter(iox, "XOI", 4)
    bias = rng.standard_normal(6)
    dnn = dict(attrs, groups=2, auto_pad="same_upper", output_padding=[0, 1, 2, 0])
    oracle.assert_matches(ct.conv_transpose(nxc, xoi, bias, weights_format="XOI", **dnn),
                          oracle.onednn_conv_transpose_case(nxc, xoi, bias,
                                                            weights_format="XOI", **dnn))
    onnx = dict(strides=[1, 2, 3, 1], dilations=[2, 1, 1, 2], pads=[0, 1, 2, 0, 1, 0, 0, 1],
                group=2)
    oracle.assert_matches(ct.onnx_conv_transpose(data, iox, bias, **onnx),
                          oracle.onnx_conv_transpose_case(data, iox, bias, **onnx))
