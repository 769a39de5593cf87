"""``ct.translate``: random layers of every source dialect, translated to every target,
run on both sides.  The source side is the slow oracle (tests/oracle.py, written from
docs/semantics.md) or torch itself; the target side is the target's function in this
library and, for the PyTorch target, torch itself.  A translation that needs a crop, pad,
bias add, group split or zero-dilated kernel must be refused by ``workarounds=False``, and
one that needs none must not."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends.translate import DIALECTS

from ._cases import assert_same, integer_array, require

torch = require("torch", "torch is installed by the test extra")

SOURCES = TARGETS = DIALECTS
FRAMEWORK_SOURCES = ("tensorrt_deconvolution", "tf_conv_transpose", "keras_conv_transpose",
                     "tflite_transpose_conv", "jax_conv_transpose")
#: Per target, what a documented refusal must say (a layer it cannot hold at all).
REFUSALS = {
    "convolution_backprop_data": ("has no groups",),
    "tensorrt_deconvolution": ("add a spatial axis",),
    "tflite_transpose_conv": ("add a spatial axis",),
}
#: Targets without groups: a grouped layer becomes one target layer per group.
SPLIT_TARGETS = ("tf_conv_transpose", "keras_conv_transpose", "tflite_transpose_conv",
                 "jax_conv_transpose")


def _ints(rng, low, high, rank):
    return tuple(int(v) for v in rng.integers(low, high, rank))


def random_source(rng, source):
    """``(data shape, filter shape, bias shape or None, attributes)`` of a random layer."""
    rank = int(rng.integers(1, 3))
    grouped = source not in ("convolution_backprop_data",)
    groups = int(rng.integers(1, 3)) if grouped else 1
    ci, co = groups * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    spatial, kernel = _ints(rng, 1, 5, rank), _ints(rng, 1, 4, rank)
    strides, dilations = _ints(rng, 1, 4, rank), _ints(rng, 1, 4, rank)
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
    """A random TensorRT, TensorFlow, Keras, TFLite or JAX layer (groups 1 but for
    TensorRT)."""
    rank = len(spatial)
    ci, co, n = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    if source == "jax_conv_transpose":
        return random_jax_source(rng, spatial, kernel, strides, dilations, ci, co, n)
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


def random_jax_source(rng, spatial, kernel, strides, dilations, ci, co, n):
    """A JAX layer: channels first or last, either kernel convention, modes or pairs."""
    rank = len(spatial)
    transpose_kernel = bool(rng.random() < 0.5)
    channels_last = bool(rng.random() < 0.5)
    letters = "HW"[:rank]
    specs = ("N" + letters + "C", letters + "IO") if channels_last else \
        ("NC" + letters, "OI" + letters)
    # the kernel's I axis holds the input channels, or with transpose_kernel its O axis
    first, second = (co, ci) if transpose_kernel else (ci, co)
    filter_ = kernel + (first, second) if channels_last else (second, first) + kernel
    padding = str(rng.choice(["SAME", "VALID"])) if rng.random() < 0.5 else tuple(
        (int(rng.integers(-1, 4)), int(rng.integers(-1, 4))) for _ in range(rank))
    data = (n,) + spatial + (ci,) if channels_last else (n, ci) + spatial
    return data, filter_, None, dict(strides=strides, padding=padding, rhs_dilation=dilations,
                                     dimension_numbers=specs + (specs[0],),
                                     transpose_kernel=transpose_kernel)


def source_expected(source, arrays, attributes):
    """The source layer's output from the oracle, or from torch for the PyTorch source.
    The framework sources' own functions are checked against their runtimes (TensorFlow,
    Keras, LiteRT, JAX) and documented formulas in test_tensorflow.py, test_jax.py and
    test_tensorrt.py."""
    data, filter_, bias = arrays
    if source == "tflite_transpose_conv":
        attributes = dict(attributes)
        return ct.tflite_transpose_conv(attributes.pop("output_shape"), filter_, data, bias,
                                        **attributes)
    if source in FRAMEWORK_SOURCES:
        function = getattr(ct, source)
        return function(data, filter_, **attributes) if source in (
            "tf_conv_transpose", "jax_conv_transpose") else function(data, filter_, bias,
                                                                      **attributes)
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
    (data, weight, layer_bias), = translation.layers(*arrays)
    function = getattr(torch.nn.functional, f"conv_transpose{data.ndim - 2}d")
    out = function(torch.from_numpy(data), torch.from_numpy(weight),
                   None if layer_bias is None else torch.from_numpy(layer_bias),
                   **translation.attributes).numpy()
    return translation.finish(out, arrays[2])


@pytest.mark.parametrize("source", SOURCES)
def test_random_layers_translate_to_every_dialect(source):
    rng = np.random.default_rng(sum(map(ord, source)))
    checked, refused, inexact, translated = 0, 0, 0, set()
    while checked < 60:
        data_shape, filter_shape, bias_shape, attributes = random_source(rng, source)
        try:
            ct.translate(source, "onnx_conv_transpose",
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
                assert any(reason in str(error) for reason in REFUSALS.get(target, ())), \
                    (context, error)
                refused += 1
                continue
            assert_same(translation.run(*arrays), expected, context)
            translated.add(target)
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
    assert inexact > 0 and translated == set(TARGETS)


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


def _tf_family_exact_exists(target, plan):
    """Brute force: whether some padding mode and output size (TensorFlow, TFLite) or
    padding and output_padding (Keras) of the target gives the plan's (offset, Y) on
    every axis, tried through the target's own shape rules."""
    import itertools

    want = plan.offset, plan.output_size
    spatial = tuple(a.input_size for a in plan.axes)
    n, ci, co, kernel = plan.batch, plan.in_channels, plan.out_channels, plan.kernel_shape
    if target == "keras_conv_transpose":
        options = [dict(padding=p, output_padding=op) for p in ("same", "valid") for op in
                   [None] + list(itertools.product(*[range(s) for s in plan.strides]))]
        attempts = [lambda o=o: ct.shapes.keras_conv_transpose(
            (n,) + spatial + (ci,), kernel + (co, ci), strides=plan.strides,
            dilation_rate=plan.dilations, **o) for o in options]
    else:
        sizes = itertools.product(*[range(1, a.full_size + 2 * a.stride) for a in plan.axes])
        attempts = []
        for size, mode in itertools.product(list(sizes), ("SAME", "VALID")):
            if target == "tflite_transpose_conv":
                attempts.append(lambda y=size, m=mode: ct.shapes.tflite_transpose_conv(
                    (n,) + y + (co,), (co,) + kernel + (ci,), (n,) + spatial + (ci,),
                    padding=m, stride_h=plan.strides[0], stride_w=plan.strides[1]))
            else:
                attempts.append(lambda y=size, m=mode: ct.shapes.tf_conv_transpose(
                    (n,) + spatial + (ci,), kernel + (co, ci), (n,) + y + (co,),
                    plan.strides, m, dilations=plan.dilations))
    for attempt in attempts:
        try:
            candidate = attempt()
        except ct.ConvTransposeError:
            continue
        if (candidate.offset, candidate.output_size) == want:
            return True
    return False


@pytest.mark.parametrize("target", ["tf_conv_transpose", "keras_conv_transpose",
                                    "tflite_transpose_conv"])
def test_tensorflow_family_targets_are_exact_whenever_some_attributes_are(target):
    # TensorFlow's own explicit pairs (2-D) are left out: 1-D layers only there.
    rng = np.random.default_rng(sum(map(ord, target)))
    seen = {True: 0, False: 0}
    while min(seen.values()) < 15:
        rank = 2 if target == "tflite_transpose_conv" else 1
        kernel, strides = _ints(rng, 1, 5, rank), _ints(rng, 1, 4, rank)
        dilations = (1,) * rank if target != "tf_conv_transpose" else _ints(rng, 1, 3, rank)
        limits = [max(s, d) for s, d in zip(strides, dilations)]
        attributes = dict(stride=strides, dilation=dilations, padding=_ints(rng, 0, 3, rank),
                          output_padding=tuple(int(rng.integers(0, m)) for m in limits))
        data, filter_ = (1, 1) + _ints(rng, 1, 5, rank), (1, 1) + kernel
        try:
            t = ct.translate("torch_conv_transpose", target, data, filter_, **attributes)
        except ct.ConvTransposeError:
            continue  # an invalid PyTorch layer
        assert t.exact == _tf_family_exact_exists(target, t.source_plan), (data, filter_,
                                                                          attributes, str(t))
        seen[t.exact] += 1


def test_keras_cannot_put_the_odd_pad_first_and_names_the_crop():
    # torch stride 2, padding 1, output_padding 1, K=3, X=3: full result 7, window [1, 7);
    # Keras 'same' starts at max(F - Y, 0) // 2 = 0 for Y = 6, so the layer needs a crop.
    with pytest.raises(ct.ConvTransposeError, match=r"keras_conv_transpose ties the output"
                       r".*drop the first 1 along spatial axis 0"):
        ct.translate("torch_conv_transpose", "keras_conv_transpose", (1, 1, 3, 3),
                     (1, 2, 3, 3), stride=2, padding=1, output_padding=1, workarounds=False)
    t = ct.translate("torch_conv_transpose", "tflite_transpose_conv", (1, 1, 3, 3),
                     (1, 2, 3, 3), (2,), stride=2, padding=1)
    assert t.exact and t.attributes == dict(output_shape=[1, 5, 5, 2], padding="SAME",
                                            stride_h=2, stride_w=2)


def test_tensorflow_explicit_pairs_and_refusals():
    t = ct.translate("onnx_conv_transpose", "tf_conv_transpose", (1, 1, 3, 3), (1, 2, 3, 3),
                     strides=[2, 2], pads=[1, 2, 0, 1], output_padding=[1, 1])
    assert t.exact and t.attributes["padding"] == [(0, 0), (1, 0), (2, 0), (0, 0)]
    assert t.attributes["data_format"] == "NHWC" and t.data_axes == (0, 2, 3, 1)
    with pytest.raises(ct.ConvTransposeError, match=r"tf_conv_transpose has no groups.*"
                       r"workaround: 2 layers, layer g taking input channels \[g, g \+ 1\)"):
        ct.translate("torch_conv_transpose", "tf_conv_transpose", (1, 2, 3), (2, 1, 3),
                     groups=2, workarounds=False)
    with pytest.raises(ct.ConvTransposeError, match=r"tflite_transpose_conv has no dilation.*"
                       r"kernel size \(K - 1\) \* d \+ 1 = \[5, 3\]"):
        ct.translate("torch_conv_transpose", "tflite_transpose_conv", (1, 1, 3, 3),
                     (1, 1, 3, 3), dilation=(2, 1), workarounds=False)
    with pytest.raises(ct.ConvTransposeError, match="tflite_transpose_conv is 2-D"):
        ct.translate("torch_conv_transpose", "tflite_transpose_conv", (1, 2, 3), (2, 1, 3),
                     groups=2)


def test_group_split_and_kernel_dilation_steps():
    # torch groups 2 (2 input, 3 output channels per group), dilation 2 along H, stride 2:
    # TFLite takes it as 2 layers of OHWI filters (3, 5, 2, 2), the kernel spread along H.
    t = ct.translate("torch_conv_transpose", "tflite_transpose_conv", (1, 4, 3, 3),
                     (4, 3, 3, 2), (6,), stride=2, groups=2, dilation=(2, 1))
    assert t.split_groups == 2 and t.channel_axis == 3 and not t.exact
    assert t.group_channels == (((0, 2), (0, 3)), ((2, 4), (3, 6)))
    assert t.filter_steps == (("reshape", (2, 2, 3, 3, 2)), ("transpose", (0, 2, 3, 4, 1)),
                              ("dilate", (1, 1, 2, 1, 1)), ("split_groups", (2,)))
    assert t.target_plan.filter_shape == (3, 5, 2, 2)
    assert t.attributes["output_shape"] == [1, 9, 6, 3]
    w = np.arange(4 * 3 * 3 * 2).reshape(4, 3, 3, 2)
    layers = t.layers(np.zeros((1, 4, 3, 3)), w, np.arange(6.0))
    assert [layer[2].tolist() for layer in layers] == [[0, 1, 2], [3, 4, 5]]
    # layer 1, output channel 0, H taps 0 and 2 (1 is a zero), W tap 1, input channel 1
    assert layers[1][1][0, :, 1, 1].tolist() == [w[3, 0, 0, 1], 0, w[3, 0, 1, 1], 0,
                                                  w[3, 0, 2, 1]]
    text = str(t)
    assert "split_groups(2: layer g takes filter[g])" in text
    assert "layer g takes data channels [2g, 2g + 2) and filter[g], gives output (and bias)" \
        " channels [3g, 3g + 3); the outputs are concatenated along axis 3" in text
    # Keras keeps a dilation with stride 1 and takes the groups' layers alone
    t = ct.translate("torch_conv_transpose", "keras_conv_transpose", (1, 4, 3), (4, 3, 3),
                     groups=2, dilation=2)
    assert t.attributes["dilation_rate"] == (2,) and [s for s, _ in t.filter_steps] == [
        "reshape", "transpose", "split_groups"]


#: Sources with groups or dilation (TFLite has neither).
GROUPED_OR_DILATED_SOURCES = tuple(s for s in SOURCES if s != "tflite_transpose_conv")


def _grouped_or_dilated_source(rng, source):
    """A random valid layer of ``source`` with groups above 1 (where the dialect has
    groups) or a dilation above 1 on some axis, and its source plan."""
    assert source in GROUPED_OR_DILATED_SOURCES, source
    while True:
        data_shape, filter_shape, bias_shape, attributes = random_source(rng, source)
        try:
            plan = ct.translate(source, "onnx_conv_transpose", data_shape, filter_shape,
                                bias_shape, **dict(attributes)).source_plan
        except ct.ConvTransposeError:
            continue
        if plan.groups > 1 or max(plan.dilations) > 1:
            return (data_shape, filter_shape, bias_shape, attributes), plan


@pytest.mark.parametrize("source", GROUPED_OR_DILATED_SOURCES)
def test_grouped_and_dilated_layers_to_targets_without_them(source):
    rng = np.random.default_rng(sum(map(ord, source)) + 1)
    split = dilated = 0
    for _ in range(10):
        (data_shape, filter_shape, bias_shape, attributes), plan = \
            _grouped_or_dilated_source(rng, source)
        arrays = [None if s is None else integer_array(rng, s)
                  for s in (data_shape, filter_shape, bias_shape)]
        expected = source_expected(source, arrays, attributes)
        for target in SPLIT_TARGETS:
            context = (source, target, data_shape, filter_shape, bias_shape, attributes)
            try:
                t = ct.translate(source, target, data_shape, filter_shape, bias_shape,
                                 **attributes)
            except ct.ConvTransposeError as error:
                assert "add a spatial axis" in str(error), (context, error)
                continue
            steps = [step for step, _ in t.filter_steps]
            assert t.split_groups == plan.groups, context
            assert ("split_groups" in steps) == (plan.groups > 1), context
            needs = max(plan.dilations) > 1 and (target == "tflite_transpose_conv" or (
                target == "keras_conv_transpose" and max(plan.strides) > 1))
            assert ("dilate" in steps) == needs, context
            assert_same(t.run(*arrays), expected, context)
            split += plan.groups > 1
            dilated += needs
            if plan.groups > 1 or needs:
                with pytest.raises(ct.ConvTransposeError, match="workaround"):
                    ct.translate(source, target, data_shape, filter_shape, bias_shape,
                                 workarounds=False, **attributes)
    can_group = source not in ("convolution_backprop_data", "tf_conv_transpose",
                               "keras_conv_transpose", "jax_conv_transpose")
    assert (split > 0) == can_group and dilated > 0, (split, dilated)


def test_jax_kernel_is_flipped_unless_transpose_kernel():
    t = ct.translate("jax_conv_transpose", "onnx_conv_transpose", (1, 3, 3, 1), (3, 3, 1, 2),
                     strides=(2, 2), padding="SAME")
    assert t.exact and t.filter_steps[-1] == ("flip", (2, 3))
    t = ct.translate("jax_conv_transpose", "onnx_conv_transpose", (1, 3, 3, 1), (3, 3, 2, 1),
                     strides=(2, 2), padding="SAME", transpose_kernel=True)
    assert all(step != "flip" for step, _ in t.filter_steps)
    t = ct.translate("onnx_conv_transpose", "jax_conv_transpose", (1, 1, 3), (1, 1, 3),
                     strides=[2], pads=[1, 2])
    assert t.exact and t.attributes["padding"] == ((1, 0),) and t.filter_steps == (
        ("flip", (2,)),)


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
