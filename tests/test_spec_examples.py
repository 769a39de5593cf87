"""The specs' own examples and the docs/semantics.md worked example, with exact numbers.

The five XML layers are parsed from the spec files themselves (001 example; 003
examples 1-3; 004 example), so a transcription slip cannot hide a mismatch: the
declared output dims must come out of ``ct.shapes``, and a real computation on
random data must match the oracle.  The worked-example arrays are written by hand
from the rules in docs/semantics.md, with the derivation beside each one.
"""

import pathlib
import re

import numpy as np
import pytest

import convtranspose as ct
import oracle

SPECS = pathlib.Path("/work/shared/specs")
if not SPECS.is_dir():  # a fresh clone without the shared folder: fall back to the transcription
    SPECS = None


def _find_spec(prefix):
    return next(SPECS.glob(f"{prefix}_*.txt")) if SPECS else None


def _parse_layers(text):
    """Each ``<layer>`` of a spec as (type, attributes, input port dims, output dims, output_shape)."""
    layers = []
    for match in re.finditer(r'<layer[^>]*type="(\w+)"[^>]*>(.*?)</layer>', text, re.S):
        kind, body = match.groups()
        attributes = dict(re.findall(r'(\w+)="([^"]*)"', re.search(r"<data([^>]*)/>", body).group(1)))
        inputs = re.search(r"<input>(.*?)</input>", body, re.S).group(1)
        ports = [[int(d) for d in re.findall(r"<dim>(\d+)</dim>", port)]
                 for port in re.findall(r"<port[^>]*>(.*?)</port>", inputs, re.S)]
        output = re.search(r"<output>(.*?)</output>", body, re.S).group(1)
        out_dims = tuple(int(d) for d in re.findall(r"<dim>(\d+)</dim>", output))
        value = re.search(r"output_shape value is:\s*\[([\d,\s]+)\]", inputs)
        output_shape = None if value is None else [int(v) for v in value.group(1).split(",")]
        layers.append((kind, attributes, ports, out_dims, output_shape))
    return layers


# The same five layers transcribed by hand (used only when the spec folder is absent, and
# compared with the parse when present): spec file prefix, example index, parsed tuple.
TRANSCRIBED = [
    ("001", 0, ("ConvolutionBackpropData",
                {"dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "strides": "2,2"},
                [[1, 20, 224, 224], [20, 10, 3, 3]], (1, 10, 447, 447), None)),
    ("003", 0, ("ConvolutionBackpropData",
                {"dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "strides": "2,2",
                 "output_padding": "0,0", "auto_pad": "explicit"},
                [[1, 20, 224, 224], [20, 10, 3, 3]], (1, 10, 447, 447), None)),
    ("003", 1, ("ConvolutionBackpropData",
                {"dilations": "1,1", "pads_begin": "0,0", "pads_end": "0,0", "strides": "3,3",
                 "output_padding": "2,2", "auto_pad": "explicit"},
                [[1, 20, 2, 2], [20, 10, 3, 3]], (1, 10, 8, 8), None)),
    ("003", 2, ("ConvolutionBackpropData",
                {"dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "strides": "1,1",
                 "output_padding": "0,0", "auto_pad": "valid"},
                [[1, 20, 224, 224], [20, 10, 3, 3], [2]], (1, 10, 450, 450), [450, 450])),
    ("004", 0, ("GroupConvolutionBackpropData",
                {"dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "strides": "2,2"},
                [[1, 20, 224, 224], [4, 5, 2, 3, 3]], (1, 8, 447, 447), None)),
]
IDS = [f"spec{prefix}-example{index + 1}" for prefix, index, _ in TRANSCRIBED]


def _layer(prefix, index, transcribed):
    if SPECS is None:
        return transcribed
    layers = _parse_layers(_find_spec(prefix).read_text())
    return layers[index]


def test_the_specs_hold_exactly_five_examples_and_the_transcription_matches():
    if SPECS is None:
        pytest.skip("the published specs' XML files are not beside the project; the transcription is used instead")
    counts = {p: len(_parse_layers(_find_spec(p).read_text())) for p in ("001", "003", "004")}
    assert counts == {"001": 1, "003": 3, "004": 1}
    for prefix, index, transcribed in TRANSCRIBED:
        assert _layer(prefix, index, transcribed) == transcribed


def _keywords(attributes):
    ints = lambda key: [int(v) for v in attributes[key].split(",")]  # noqa: E731
    keywords = {key: ints(key) for key in
                ("strides", "pads_begin", "pads_end", "dilations", "output_padding")
                if key in attributes}
    if "auto_pad" in attributes:
        keywords["auto_pad"] = attributes["auto_pad"]
    return keywords


def _resolve(prefix, index, transcribed):
    kind, attributes, ports, out_dims, output_shape = _layer(prefix, index, transcribed)
    function = {"ConvolutionBackpropData": "convolution_backprop_data",
                "GroupConvolutionBackpropData": "group_convolution_backprop_data"}[kind]
    return function, tuple(ports[0]), tuple(ports[1]), out_dims, output_shape, _keywords(attributes)


@pytest.mark.parametrize("prefix, index, transcribed", TRANSCRIBED, ids=IDS)
def test_spec_example_shape(prefix, index, transcribed):
    function, data, filter, out_dims, output_shape, keywords = _resolve(prefix, index, transcribed)
    plan = getattr(ct.shapes, function)(data, filter, output_shape, **keywords)
    assert plan.output_shape == out_dims
    geometry = oracle.openvino_geometry(data[2:], filter[-2:], output_shape=output_shape, **keywords)
    assert plan.offset == tuple(a[0] for a in geometry)
    assert plan.pads_begin == tuple(a[2] for a in geometry)
    assert plan.pads_end == tuple(a[3] for a in geometry)


@pytest.mark.parametrize("prefix, index, transcribed", TRANSCRIBED, ids=IDS)
def test_spec_example_computation(prefix, index, transcribed):
    function, data_shape, filter_shape, out_dims, output_shape, keywords = _resolve(
        prefix, index, transcribed)
    rng = np.random.default_rng(sum(out_dims) + index)
    data = rng.standard_normal(data_shape).astype(np.float32)
    filter = rng.standard_normal(filter_shape).astype(np.float32)
    result = getattr(ct, function)(data, filter, output_shape, **keywords)
    case_of = {"convolution_backprop_data": oracle.openvino_cbpd_case,
               "group_convolution_backprop_data": oracle.openvino_group_cbpd_case}[function]
    case = case_of(data, filter, output_shape, **keywords)
    assert result.shape == out_dims
    oracle.assert_matches(result, case)


# ---------------------------------------------------------------------------
# The docs/semantics.md worked example: X=3, K=3, s=2, data [1,2,3], filter [1,10,100].
#
#   F = (3-1)*2 + 3 = 7;  full[t] = sum over x, k with t = 2x + k of data[x]*filter[k]:
#   t=0: 1*1 = 1            t=1: 1*10 = 10          t=2: 1*100 + 2*1 = 102
#   t=3: 2*10 = 20          t=4: 2*100 + 3*1 = 203  t=5: 3*10 = 30     t=6: 3*100 = 300

DATA = np.array([[[1.0, 2.0, 3.0]]])
FILTER = np.array([[[1.0, 10.0, 100.0]]])   # OpenVINO/ONNX (C_IN, C_OUT, K)
FULL = [1, 10, 102, 20, 203, 30, 300]

OPENVINO_CASES = [
    # (output_shape, keywords, expected, derivation)
    (None, {}, FULL, "explicit, pads 0: offset 0, Y = F = 7"),
    ([6], {"auto_pad": "same_upper"}, [10, 102, 20, 203, 30, 300],
     "total = max(7 - 6, 0) = 1; same_upper offset = total - total//2 = 1"),
    ([6], {"auto_pad": "same_lower"}, [1, 10, 102, 20, 203, 30],
     "total = 1; same_lower offset = total//2 = 0"),
    ([9], {"pads_begin": [1]}, [10, 102, 20, 203, 30, 300, 0, 0, 0],
     "explicit with output_shape: offset = pads_begin = 1, Y = 9, zeros past F"),
    ([9], {"pads_begin": [1], "pads_end": [5]}, [10, 102, 20, 203, 30, 300, 0, 0, 0],
     "pads_end is unused when output_shape is given"),
    ([9], {"auto_pad": "same_upper"}, FULL + [0, 0],
     "total = max(7 - 9, 0) = 0 (clamped): offset 0, zeros at the end"),
    ([9], {"auto_pad": "valid"}, FULL + [0, 0], "valid with output_shape: offset 0, Y = 9"),
    ([4], {"auto_pad": "valid"}, [1, 10, 102, 20], "valid with a smaller output_shape: offset 0"),
    (None, {"auto_pad": "same_upper"}, FULL, "same_* without output_shape: pads 0, Y = F"),
    (None, {"auto_pad": "same_lower", "output_padding": [1]}, FULL + [0],
     "same_lower without output_shape: Y = F + output_padding = 8"),
    (None, {"pads_begin": [1], "pads_end": [2]}, [10, 102, 20, 203],
     "explicit: offset 1, Y = 7 - 1 - 2 = 4"),
    (None, {"pads_begin": [2], "output_padding": [1]}, [102, 20, 203, 30, 300, 0],
     "explicit: offset 2, Y = 7 + 1 - 2 = 6; full[7] lies outside F"),
]


@pytest.mark.parametrize("output_shape, keywords, expected, derivation", OPENVINO_CASES,
                         ids=[c[3] for c in OPENVINO_CASES])
def test_worked_example_openvino(output_shape, keywords, expected, derivation):
    result = ct.convolution_backprop_data(DATA, FILTER, output_shape, strides=2, **keywords)
    np.testing.assert_array_equal(result, [[expected]])
    grouped = ct.group_convolution_backprop_data(DATA, FILTER[None], output_shape, strides=[2],
                                                 **keywords)
    np.testing.assert_array_equal(grouped, [[expected]])


ONEDNN_CASES = [
    ({}, FULL, "auto_pad none, pads 0: Y = F = 7"),
    ({"auto_pad": "same_upper"}, [1, 10, 102, 20, 203, 30],
     "total = max(K' - s, 0) = 1; same_upper pads_begin = total//2 = 0 (extra at END); Y = 6"),
    ({"auto_pad": "same_lower"}, [10, 102, 20, 203, 30, 300],
     "total = 1; same_lower pads_begin = total - total//2 = 1; Y = 6"),
    ({"auto_pad": "valid", "pads_begin": [3]}, FULL, "valid ignores pads: Y = F = 7"),
    ({"pads_begin": [1], "pads_end": [2]}, [10, 102, 20, 203], "none: offset 1, Y = 4"),
    ({"output_padding": [1]}, FULL + [0], "none: Y = F + output_padding = 8"),
    ({"output_shape": [9]}, FULL + [0, 0], "output_shape 9: total = max(-2, 0) = 0, offset 0"),
    ({"output_shape": [6]}, [10, 102, 20, 203, 30, 300],
     "output_shape 6 with none: total 1, pads_begin = total - total//2 = 1"),
    ({"output_shape": [6], "auto_pad": "same_upper"}, [1, 10, 102, 20, 203, 30],
     "output_shape 6, same_upper: pads_begin = total//2 = 0"),
    ({"output_shape": [5], "auto_pad": "valid"}, [1, 10, 102, 20, 203],
     "output_shape 5, valid: pads_begin 0"),
]


@pytest.mark.parametrize("keywords, expected, derivation", ONEDNN_CASES,
                         ids=[c[2] for c in ONEDNN_CASES])
def test_worked_example_onednn(keywords, expected, derivation):
    data_nxc = DATA.reshape(1, 3, 1)           # (N, X, C)
    filter_xio = FILTER.reshape(3, 1, 1)       # (K, I, O)
    result = ct.conv_transpose(data_nxc, filter_xio, strides=[2], **keywords)
    np.testing.assert_array_equal(result, np.array(expected, float).reshape(1, -1, 1))
    ncx = ct.conv_transpose(DATA, FILTER, strides=2, data_format="NCX", filter_format="IOX",
                            **keywords)
    np.testing.assert_array_equal(ncx, [[expected]])
    # A bias is added to every output element, including the zeros past F.
    biased = ct.conv_transpose(DATA, FILTER, np.array([0.5]), strides=2, data_format="NCX",
                               weights_format="OIX", **keywords)
    np.testing.assert_array_equal(biased, [[np.array(expected) + 0.5]])


ONNX_CASES = [
    ({}, FULL, "NOTSET, pads 0: Y = 7"),
    ({"pads": [1, 1]}, [10, 102, 20, 203, 30], "NOTSET pads [1, 1]: offset 1, Y = 5"),
    ({"auto_pad": "SAME_UPPER"}, [1, 10, 102, 20, 203, 30],
     "SAME without output_shape: Y = X*s = 6, total = 1, SAME_UPPER pads_begin = total//2 = 0"),
    ({"auto_pad": "SAME_LOWER"}, [10, 102, 20, 203, 30, 300],
     "Y = 6, total = 1, SAME_LOWER pads_begin = total - total//2 = 1"),
    ({"auto_pad": "SAME_UPPER", "output_padding": [1]}, [10, 102, 20, 203, 30, 300],
     "Y = X*s = 6 (output_padding does not grow it); total = 7 + 1 - 6 = 2, pads_begin 1"),
    ({"auto_pad": "VALID"}, FULL, "VALID: Y = F = 7"),
    ({"output_shape": [9]}, [0] + FULL + [0],
     "total = 7 - 9 = -2 (no clamping); NOTSET pads_begin = -2 - (-2)//2 = -1"),
    ({"output_shape": [8]}, FULL + [0], "total = -1; NOTSET pads_begin = -1 - (-1)//2 = 0"),
    ({"output_shape": [8], "auto_pad": "SAME_UPPER"}, [0] + FULL,
     "total = -1; SAME_UPPER pads_begin = (-1)//2 = -1"),
    ({"output_shape": [1, 1, 6], "pads": [3, 3]}, [10, 102, 20, 203, 30, 300],
     "a whole (N, M, Y) output_shape; pads ignored; total 1, pads_begin 1"),
]


@pytest.mark.parametrize("keywords, expected, derivation", ONNX_CASES,
                         ids=[c[2] for c in ONNX_CASES])
def test_worked_example_onnx(keywords, expected, derivation):
    result = ct.onnx_conv_transpose(DATA, FILTER, strides=[2], **keywords)
    np.testing.assert_array_equal(result, [[expected]])


def test_onnx_same_with_kernel_smaller_than_stride():
    # K=1, s=2, X=3: F = 5, full = [10, 0, 20, 0, 30]; SAME targets Y = X*s = 6, so
    # total = 5 - 6 = -1.  SAME_UPPER: pads_begin = (-1)//2 = -1 (a zero first);
    # SAME_LOWER: pads_begin = -1 - (-1)//2 = 0 (a zero last).
    data, filter = DATA, np.array([[[10.0]]])
    upper = ct.onnx_conv_transpose(data, filter, strides=[2], auto_pad="SAME_UPPER")
    lower = ct.onnx_conv_transpose(data, filter, strides=[2], auto_pad="same_lower")
    np.testing.assert_array_equal(upper, [[[0, 10, 0, 20, 0, 30]]])
    np.testing.assert_array_equal(lower, [[[10, 0, 20, 0, 30, 0]]])
    plan = ct.shapes.onnx_conv_transpose((1, 1, 3), (1, 1, 1), strides=[2], auto_pad="SAME_UPPER")
    assert (plan.pads_begin, plan.pads_end) == ((-1,), (0,))


def test_onednn_same_with_kernel_smaller_than_stride():
    # K'=1 < s=2: total = max(1 - 2, 0) = 0, so Y = F = 5 (not X*s): [10, 0, 20, 0, 30].
    result = ct.conv_transpose(DATA, np.array([[[10.0]]]), strides=2, auto_pad="same_upper",
                               data_format="NCX", filter_format="IOX")
    np.testing.assert_array_equal(result, [[[10, 0, 20, 0, 30]]])


def test_worked_example_resolved_pads():
    # OpenVINO reports pads_begin = offset, pads_end = total - pads_begin for same_*.
    plan = ct.shapes.convolution_backprop_data((1, 1, 3), (1, 1, 3), [6], strides=2,
                                               auto_pad="same_upper")
    assert (plan.pads_begin, plan.pads_end, plan.offset, plan.output_shape) == (
        (1,), (0,), (1,), (1, 1, 6))
    plan = ct.shapes.convolution_backprop_data((1, 1, 3), (1, 1, 3), [6], strides=2,
                                               auto_pad="SAME_LOWER")
    assert (plan.pads_begin, plan.pads_end) == ((0,), (1,))
    plan = ct.shapes.conv_transpose((1, 3, 1), (3, 1, 1), strides=2, auto_pad="same_upper")
    assert (plan.pads_begin, plan.pads_end, plan.output_shape) == ((0,), (1,), (1, 6, 1))
    plan = ct.shapes.onnx_conv_transpose((1, 1, 3), (1, 1, 3), strides=[2], output_shape=[9])
    assert (plan.pads_begin, plan.pads_end, plan.offset) == ((-1,), (-1,), (-1,))
