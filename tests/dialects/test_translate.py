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
    else:
        limits = [max(s, d) for s, d in zip(strides, dilations)]
        attributes = dict(stride=strides, dilation=dilations, groups=groups,
                          padding=_ints(rng, 0, 3, rank),
                          output_padding=tuple(int(rng.integers(0, m)) for m in limits))
        filter_ = (ci, co) + kernel
    return data, filter_, bias, attributes


def source_expected(source, arrays, attributes):
    """The source layer's output from the oracle, or from torch for the PyTorch source."""
    data, filter_, bias = arrays
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
            ct.translate(source, source, data_shape, filter_shape, bias_shape, **attributes)
        except ct.ConvTransposeError:
            continue  # not a valid layer of the source dialect
        arrays = [None if s is None else integer_array(rng, s)
                  for s in (data_shape, filter_shape, bias_shape)]
        expected = source_expected(source, arrays, attributes)
        checked += 1
        for target in SOURCES:
            context = (source, target, data_shape, filter_shape, bias_shape, attributes)
            try:
                translation = ct.translate(source, target, data_shape, filter_shape,
                                           bias_shape, **attributes)
            except ct.ConvTransposeError as error:
                assert target == "convolution_backprop_data" and "groups" in str(error)
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


def test_unknown_dialect_is_refused():
    with pytest.raises(ct.ConvTransposeError, match="target must be one of"):
        ct.translate("onnx_conv_transpose", "tflite", (1, 1, 3), (1, 1, 3))
