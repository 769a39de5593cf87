"""``ct.tensorrt_deconvolution`` against TensorRT's documented deconvolution formulas
(the Deconvolution operator page: ``O = (I-1)*S + DK - (B+A)`` for the explicit modes,
``O = min(I*S, (I-1)*S + DK)``, ``P = max(DK-S, 0)`` split floor-first for SAME_UPPER and
floor-last for SAME_LOWER), computed by torch: the full result (``padding=0``) cropped by
``B`` before and ``A`` after.  No TensorRT runtime is involved."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import convtranspose as ct

from ._cases import assert_same, integer_array, require

torch = require("torch", "torch is installed by the test extra")


def documented_pads(mode, kernel, strides, dilations, pre, post):
    """``(B, A)`` per axis, transcribed from TensorRT's PaddingMode table."""
    if mode.startswith("EXPLICIT"):
        return list(zip(pre, post))
    pairs = []
    for f, s, d in zip(kernel, strides, dilations):
        p = max(1 + d * (f - 1) - s, 0)
        pairs.append((p // 2, p - p // 2) if mode == "SAME_UPPER" else (p - p // 2, p // 2))
    return pairs


def torch_expected(x, w, b, groups, strides, dilations, pairs):
    rank = x.ndim - 2
    function = getattr(torch.nn.functional, f"conv_transpose{rank}d")
    full = function(torch.from_numpy(x), torch.from_numpy(w),
                    None if b is None else torch.from_numpy(b), stride=strides,
                    dilation=dilations, groups=groups).numpy()
    index = (Ellipsis,) + tuple(slice(before, full.shape[2 + i] - after)
                                for i, (before, after) in enumerate(pairs))
    return full[index]


def random_layer(rng) -> SimpleNamespace:
    """A random TensorRT deconvolution of rank 2 or 3 with small integer operands: its
    data ``x``, kernel ``w``, bias ``b`` (or None), ``attributes`` and their parts."""
    rank = int(rng.integers(2, 4))
    groups = int(rng.integers(1, 3))
    c_in, c_out = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(1, 4, rank))
    strides = tuple(int(s) for s in rng.integers(1, 4, rank))
    dilations = tuple(int(d) for d in rng.integers(1, 3, rank))
    mode = str(rng.choice(["EXPLICIT_ROUND_DOWN", "EXPLICIT_ROUND_UP", "SAME_UPPER",
                           "SAME_LOWER"]))
    pre = tuple(int(p) for p in rng.integers(0, 3, rank))
    post = tuple(int(p) for p in rng.integers(0, 3, rank))
    x = integer_array(rng, (int(rng.integers(1, 3)), c_in)
                      + tuple(int(v) for v in rng.integers(1, 4, rank)))
    w = integer_array(rng, (c_in, c_out // groups) + kernel)
    b = integer_array(rng, (c_out,)) if rng.random() < 0.5 else None
    attributes = dict(stride_nd=strides, dilation_nd=dilations, padding_mode=mode,
                      pre_padding=pre, post_padding=post, num_groups=groups,
                      num_output_maps=c_out)
    return SimpleNamespace(x=x, w=w, b=b, attributes=attributes, rank=rank, groups=groups,
                           kernel=kernel, strides=strides, dilations=dilations, mode=mode,
                           pre=pre, post=post)


def test_random_layers_match_the_documented_formulas():
    rng = np.random.default_rng(12)
    compared = refused = 0
    for _ in range(150):
        layer = random_layer(rng)
        x, w, b, attributes = layer.x, layer.w, layer.b, layer.attributes
        groups, kernel, mode = layer.groups, layer.kernel, layer.mode
        strides, dilations, pre, post = layer.strides, layer.dilations, layer.pre, layer.post
        pairs = documented_pads(mode, kernel, strides, dilations, pre, post)
        sizes = [(i - 1) * s + 1 + d * (f - 1) - before - after for i, f, s, d, (before, after)
                 in zip(x.shape[2:], kernel, strides, dilations, pairs)]
        if mode.startswith("SAME"):  # the documented output size
            assert sizes == [min(i * s, (i - 1) * s + 1 + d * (f - 1)) for i, f, s, d
                             in zip(x.shape[2:], kernel, strides, dilations)]
        if min(sizes) <= 0:
            with pytest.raises(ct.ConvTransposeError, match="must be positive"):
                ct.tensorrt_deconvolution(x, w, b, **attributes)
            refused += 1
            continue
        context = (x.shape, w.shape, attributes)
        expected = torch_expected(x, w, b, groups, strides, dilations, pairs)
        assert_same(ct.tensorrt_deconvolution(x, w, b, **attributes), expected, context)
        plan = ct.shapes.tensorrt_deconvolution(x.shape, w.shape, None if b is None
                                                else b.shape, **attributes)
        assert plan.output_shape == expected.shape
        assert list(zip(plan.pads_begin, plan.pads_end)) == pairs
        compared += 1
    assert compared > 90 and refused > 10, (compared, refused)


@pytest.mark.parametrize("mode, expected", [
    # worked example: data [1, 2, 3], kernel [1, 10, 100], stride 2: F = 7, DK - S = 1
    ("EXPLICIT_ROUND_DOWN", [1, 10, 102, 20, 203, 30, 300]),
    ("EXPLICIT_ROUND_UP", [1, 10, 102, 20, 203, 30, 300]),
    ("SAME_UPPER", [1, 10, 102, 20, 203, 30]),
    ("SAME_LOWER", [10, 102, 20, 203, 30, 300]),
])
def test_worked_example(mode, expected):
    x = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 1, 3)
    w = np.array([1.0, 10.0, 100.0]).reshape(1, 1, 1, 3)
    result = ct.tensorrt_deconvolution(x, w, stride_nd=2, padding_mode=mode)
    assert result.ravel().tolist() == expected


def test_same_with_a_kernel_shorter_than_the_stride_keeps_the_full_result():
    # O = min(I*S, (I-1)*S + DK) = min(9, 7): TensorRT's own rule, unlike ONNX's I*S.
    x, w = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 1, 3), np.ones((1, 1, 1, 1))
    result = ct.tensorrt_deconvolution(x, w, stride_nd=3, padding_mode="SAME_UPPER")
    assert result.ravel().tolist() == [1, 0, 0, 2, 0, 0, 3]


def test_padding_nd_is_symmetric_and_the_paddings_override_it():
    x, w = np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3))
    assert ct.tensorrt_deconvolution(x, w, stride_nd=2, padding_nd=1).shape == (1, 1, 5, 5)
    assert ct.tensorrt_deconvolution(x, w, stride_nd=2, padding_nd=1,
                                     post_padding=0).shape == (1, 1, 6, 6)


@pytest.mark.parametrize("arguments, message", [
    (dict(padding_mode="CAFFE_ROUND_DOWN"), "CAFFE modes were removed"),
    (dict(num_output_maps=3), "num_output_maps is 3"),
    (dict(num_groups=2), "not divisible by num_groups=2"),
    (dict(pre_padding=-1), "non-negative"),
])
def test_refusals_name_the_rule(arguments, message):
    with pytest.raises(ct.ConvTransposeError, match=message):
        ct.tensorrt_deconvolution(np.ones((1, 3, 3, 3)), np.ones((3, 2, 3, 3)), **arguments)


def test_one_dimensional_layers_are_refused_with_the_reshape_workaround():
    with pytest.raises(ct.ConvTransposeError, match="reshape 1-D layers to 2-D"):
        ct.shapes.tensorrt_deconvolution((1, 1, 3), (1, 1, 3))
