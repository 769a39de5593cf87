"""``ct.translate``: random layers of every source dialect, translated to every target,
run on both sides.  The source side is the slow oracle (tests/oracle.py, written from
docs/semantics.md) or torch itself; the target side is the target's function in this
library and, for the PyTorch target, torch itself.  A translation that needs a crop, pad
or bias add must be refused by ``workarounds=False``, and one that needs none must not."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle

from ._cases import assert_same, integer_array

torch = pytest.importorskip("torch", reason="torch is installed by the test extra")

SOURCES = ct._translate.DIALECTS
TARGETS = [d for d in SOURCES if d not in ct._translate.SOURCE_ONLY]
FRAMEWORK_SOURCES = ("tensorrt_deconvolution", "tf_conv_transpose", "keras_conv_transpose",
                     "tflite_transpose_conv")


def _ints(rng, low, high, rank):
    return tuple(int(v) for v in rng.integers(low, high, rank))


def random_source(rng, source):
    """``(data shape, filter shape, bias shape or None, attributes)`` of a random layer."""
    rank = int(rng.integers(1, 3))
    grouped = source not in ("convolution_backprop_data",)
    groups = int(rng.integers(1, 3)) if grouped else 1
    ci, co = groups * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    spatial, kernel = _ints(rng, 1, 5, rank), _ints(rng, 1, 4, rank)
    strides, dilations = _ints(rng, 1, 4, rank), _ints(rng, 1, 3, rank)
    data = (int(rng.integers(1, 3)), ci) + spatial
    bias = (groups * co,) if grouped and "backprop" not in source and rng.random() < 0.5 else None
    full = [(x - 1) * s + (k - 1) * d + 1 for x, k, s, d in zip(spatial, kernel, strides,
                                                                 dilations)]
    sizes = tuple(max(1, f + int(rng.integers(-3, 4))) for f in full)
    if source.endswith("backprop_data"):
        modes = ["explicit", "same_upper", "same_lower", "valid"]
        attributes = dict(strides=strides, dilations=dilations, auto_pad=str(rng.choice(modes)),
                          pads_begin=_ints(rng, 0, 3, rank), pads_end=_ints(rng, 0, 3, rank),
                          output_padding=_ints(rng, 0, 3, rank))
        if rng.random() < 0.5:
            attributes["output_shape"] = sizes
        filter_ = ((groups, ci // groups, co) if "group" in source else (ci, co)) + kernel
    elif source == "conv_transpose":
        layout = str(rng.choice(["XIO", "OIX", "IOX", "XOI"]))
        channels_last = rng.random() < 0.5
        attributes = dict(strides=strides, dilations=dilations, groups=groups,
                          auto_pad=str(rng.choice(["none", "same_upper", "same_lower", "valid"])),
                          pads_begin=_ints(rng, 0, 3, rank), pads_end=_ints(rng, 0, 3, rank),
                          output_padding=tuple(int(rng.integers(0, s)) for s in strides),
                          data_format="NXC" if channels_last else "NCX", filter_format=layout)
        if rng.random() < 0.3:
            attributes["output_shape"] = sizes
        if channels_last:
            data = (data[0],) + spatial + (ci,)
        filter_ = {"IOX": (ci, co) + kernel, "OIX": (co, ci) + kernel,
                   "XIO": kernel + (ci, co), "XOI": kernel + (co, ci)}[layout]
    elif source == "onnx_conv_transpose":
        attributes = dict(strides=strides, dilations=dilations, group=groups,
                          auto_pad=str(rng.choice(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])),
                          pads=_ints(rng, 0, 3, 2 * rank), output_padding=_ints(rng, 0, 3, rank))
        if rng.random() < 0.4:
            attributes["output_shape"] = sizes
        filter_ = (ci, co) + kernel
    elif source in FRAMEWORK_SOURCES:
        return random_framework_source(rng, source, spatial, kernel, strides, dilations)
    else:
        limits = [max(s, d) for s, d in zip(strides, dilations)]
        attributes = dict(stride=strides, dilation=dilations, groups=groups,
                          padding=_ints(rng, 0, 3, rank),
                          output_padding=tuple(int(rng.integers(0, m)) for m in limits))
        filter_ = (ci, co) + kernel
    return data, filter_, bias, attributes


def random_framework_source(rng, source, spatial, kernel, strides, dilations):
    """A random TensorRT, TensorFlow, Keras or TFLite layer (groups 1 but for TensorRT)."""
    rank = len(spatial)
    ci, co, n = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    if source == "tensorrt_deconvolution":
        spatial, kernel, strides, dilations = ((3,) + spatial)[:2], ((2,) + kernel)[:2], \
            ((1,) + strides)[:2], ((1,) + dilations)[:2]
        groups = int(rng.integers(1, 3))
        mode = str(rng.choice(["EXPLICIT_ROUND_DOWN", "SAME_UPPER", "SAME_LOWER"]))
        return (n, ci * groups) + spatial, (ci * groups, co) + kernel, \
            (co * groups,) if rng.random() < 0.5 else None, dict(
                stride_nd=strides, dilation_nd=dilations, padding_mode=mode, num_groups=groups,
                pre_padding=_ints(rng, 0, 3, 2), post_padding=_ints(rng, 0, 3, 2))
    if source == "keras_conv_transpose":
        if max(strides) > 1:
            dilations = (1,) * rank
        channels_last = bool(rng.random() < 0.5)
        extra = None if rng.random() < 0.5 else tuple(int(rng.integers(0, s)) for s in strides)
        return ((n,) + spatial + (ci,) if channels_last else (n, ci) + spatial,
                kernel + (co, ci), (co,) if rng.random() < 0.5 else None,
                dict(strides=strides, dilation_rate=dilations, output_padding=extra,
                     padding=str(rng.choice(["same", "valid"])),
                     data_format="channels_last" if channels_last else "channels_first"))
    if source == "tflite_transpose_conv":
        spatial, kernel, strides = ((2,) + spatial)[:2], ((1,) + kernel)[:2], \
            ((1,) + strides)[:2]
        dilations, rank = (1, 1), 2
    padding = str(rng.choice(["SAME", "VALID"]))
    sizes = []
    for x, k, s, d in zip(spatial, kernel, strides, dilations):
        dilated = (k - 1) * d + 1
        low = (x - 1) * s + 1 if padding == "SAME" else (x - 1) * s + dilated
        sizes.append(low + int(rng.integers(0, s)))
    if source == "tflite_transpose_conv":
        return (n,) + spatial + (ci,), (co,) + kernel + (ci,), \
            (co,) if rng.random() < 0.5 else None, dict(
                output_shape=[n] + sizes + [co], padding=padding, stride_h=strides[0],
                stride_w=strides[1])
    return (n,) + spatial + (ci,), kernel + (co, ci), None, dict(
        output_shape=[n] + sizes + [co], strides=strides, padding=padding, dilations=dilations)


def source_expected(source, arrays, attributes):
    """The source layer's output from the oracle, or from torch for the PyTorch source.
    The framework sources' own functions are checked against their runtimes (TensorFlow,
    Keras, LiteRT) and documented formulas in test_tensorflow.py and test_tensorrt.py."""
    data, filter_, bias = arrays
    if source == "tflite_transpose_conv":
        attributes = dict(attributes)
        return ct.tflite_transpose_conv(attributes.pop("output_shape"), filter_, data, bias,
                                        **attributes)
    if source in FRAMEWORK_SOURCES:
        function = getattr(ct, source)
        return function(data, filter_, **attributes) if bias is None and source == \
            "tf_conv_transpose" else function(data, filter_, bias, **attributes)
    if source == "torch_conv_transpose":
        rank = data.ndim - 2
        function = getattr(torch.nn.functional, f"conv_transpose{rank}d")
        tensors = [None if a is None else torch.from_numpy(a) for a in arrays]
        return function(*tensors, **attributes).numpy()
    attributes = dict(attributes)
    if source.endswith("backprop_data"):
        function = (oracle.openvino_group_cbpd if "group" in source else oracle.openvino_cbpd)
        return function(data, filter_, attributes.pop("output_shape", None), **attributes)
    function = (oracle.onednn_conv_transpose if source == "conv_transpose"
                else oracle.onnx_conv_transpose)
    return function(data, filter_, bias, **attributes)


def torch_target(translation, arrays):
    """The translated layer run by torch itself, then cropped or padded as translated."""
    data, filter_, bias = arrays
    if translation.data_axes is not None:
        data = data.transpose(translation.data_axes)
    weight = translation.filter(filter_)
    rank = weight.ndim - 2
    function = getattr(torch.nn.functional, f"conv_transpose{rank}d")
    torch_bias = None if bias is None or translation.bias_after else torch.from_numpy(bias)
    out = function(torch.from_numpy(np.ascontiguousarray(data)), torch.from_numpy(weight),
                   torch_bias, **translation.attributes).numpy()
    return translation.finish(out, bias)


@pytest.mark.parametrize("source", SOURCES)
def test_random_layers_translate_to_every_dialect(source):
    rng = np.random.default_rng(sum(map(ord, source)))
    checked, refused, inexact = 0, 0, 0
    while checked < 60:
        data_shape, filter_shape, bias_shape, attributes = random_source(rng, source)
        try:
            ct.translate(source, source if source in TARGETS else "onnx_conv_transpose",
                         data_shape, filter_shape, bias_shape, **attributes)
        except ct.ConvTransposeError:
            continue  # not a valid layer of the source dialect
        arrays = [None if s is None else integer_array(rng, s)
                  for s in (data_shape, filter_shape, bias_shape)]
        expected = source_expected(source, arrays, attributes)
        checked += 1
        for target in TARGETS:
            context = (source, target, data_shape, filter_shape, bias_shape, attributes)
            try:
                translation = ct.translate(source, target, data_shape, filter_shape,
                                           bias_shape, **attributes)
            except ct.ConvTransposeError as error:
                assert (target == "convolution_backprop_data" and "groups" in str(error)) or (
                    target == "tensorrt_deconvolution" and "add a spatial axis" in str(error))
                refused += 1
                continue
            assert_same(translation.run(*arrays), expected, context)
            if target == "torch_conv_transpose":
                assert_same(torch_target(translation, arrays), expected, context)
            if translation.exact:
                ct.translate(source, target, data_shape, filter_shape, bias_shape,
                             workarounds=False, **attributes)
            else:
                inexact += 1
                with pytest.raises(ct.ConvTransposeError, match="workaround"):
                    ct.translate(source, target, data_shape, filter_shape, bias_shape,
                                 workarounds=False, **attributes)
    assert inexact > 0


def test_asymmetric_pads_to_torch_name_the_workaround():
    with pytest.raises(ct.ConvTransposeError,
                       match=r"pads symmetrically.*drop the last 1 along spatial axis 0"):
        ct.translate("onnx_conv_transpose", "torch_conv_transpose", (1, 1, 3), (1, 1, 3),
                     strides=[2], pads=[1, 2], workarounds=False)


def test_openvino_same_upper_to_onnx_moves_the_odd_pad():
    # OpenVINO same_upper puts the odd pad first; ONNX's SAME_UPPER puts it last, so the
    # translation must use explicit pads [1, 0] (docs/semantics.md, worked example).
    t = ct.translate("convolution_backprop_data", "onnx_conv_transpose", (1, 1, 3), (1, 1, 3),
                     output_shape=[6], strides=2, auto_pad="same_upper")
    assert t.exact and t.attributes["pads"] == (1, 0)


def test_tensorflow_family_targets_are_refused_naming_the_alternatives():
    with pytest.raises(ct.ConvTransposeError, match="translation source only"):
        ct.translate("onnx_conv_transpose", "tf_conv_transpose", (1, 1, 3), (1, 1, 3))


def test_tensorflow_same_to_torch_and_tensorrt():
    # TF SAME, X=3, K=3, s=2, output 6: the odd pad at the end (offset 0, one element
    # dropped at the end), which PyTorch's symmetric padding cannot express and TensorRT
    # expresses as pre_padding 0, post_padding 1 (SAME_UPPER's split).
    t = ct.translate("tf_conv_transpose", "torch_conv_transpose", (1, 3, 1), (3, 1, 1),
                     output_shape=[1, 6, 1], strides=2)
    assert not t.exact and t.attributes["padding"] == (0,) and t.crop == ((0, 1),)
    t = ct.translate("tf_conv_transpose", "tensorrt_deconvolution", (1, 3, 3, 1),
                     (3, 3, 1, 1), output_shape=[1, 6, 6, 1], strides=2)
    assert t.exact and t.attributes["pre_padding"] == (0, 0)
    assert t.attributes["post_padding"] == (1, 1)


def test_output_padding_to_tensorrt_names_the_workaround():
    with pytest.raises(ct.ConvTransposeError, match="no output_padding.*add 1 zeros after"):
        ct.translate("torch_conv_transpose", "tensorrt_deconvolution", (1, 1, 3, 3),
                     (1, 1, 3, 3), stride=2, output_padding=1, workarounds=False)


def test_unknown_dialect_is_refused():
    with pytest.raises(ct.ConvTransposeError, match="target must be one of"):
        ct.translate("onnx_conv_transpose", "tflite", (1, 1, 3), (1, 1, 3))
