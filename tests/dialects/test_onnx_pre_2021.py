"""ONNX ConvTranspose under the opset-11 text before its 2021 change (``pads_rule=
"pre-2021"``), against pads written from that text and run as explicit pads by the
oracle:

    total_padding[i] = stride[i] * (input_size[i] - 1) + output_padding[i]
                       + ((kernel_shape[i] - 1) * dilations[i] + 1) - output_shape[i]
    If (auto_pads != SAME_UPPER): pads[start_i] = total_padding[i]/2;
                                  pads[end_i] = total_padding[i] - (total_padding[i]/2)
    Else: pads[start_i] = total_padding[i] - (total_padding[i]/2);
          pads[end_i] = (total_padding[i]/2).
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle

from ._cases import assert_same, integer_array


def old_text_pads(spatial, kernel, strides, dilations, output_padding, sizes, mode):
    begins, ends = [], []
    for x, k, s, d, op_, y in zip(spatial, kernel, strides, dilations, output_padding, sizes):
        total = s * (x - 1) + op_ + ((k - 1) * d + 1) - y
        begin = total // 2 if mode != "SAME_UPPER" else total - total // 2
        begins.append(begin)
        ends.append(total - begin)
    return begins + ends


@pytest.mark.parametrize("mode", ["NOTSET", "SAME_UPPER", "SAME_LOWER"])
def test_random_layers_follow_the_pre_2021_text(mode):
    rng = np.random.default_rng(len(mode))
    for _ in range(40):
        rank = int(rng.integers(1, 3))
        spatial, kernel = rng.integers(1, 5, rank), rng.integers(1, 4, rank)
        strides, dilations = rng.integers(1, 4, rank), rng.integers(1, 3, rank)
        output_padding = rng.integers(0, 2, rank)
        full = (spatial - 1) * strides + (kernel - 1) * dilations + 1 + output_padding
        with_shape = mode == "NOTSET" or rng.random() < 0.5
        sizes = full - rng.integers(0, 4, rank) if with_shape else spatial * strides
        if (sizes <= 0).any() or (sizes > full).any():
            continue  # the oracle's explicit pads are never negative
        X = integer_array(rng, (1, 2) + tuple(spatial))
        W = integer_array(rng, (2, 1) + tuple(kernel))
        attributes = dict(strides=strides.tolist(), dilations=dilations.tolist(),
                          output_padding=output_padding.tolist(), auto_pad=mode)
        if with_shape:
            attributes["output_shape"] = sizes.tolist()
        pads = old_text_pads(spatial, kernel, strides, dilations, output_padding, sizes, mode)
        expected = oracle.onnx_conv_transpose(
            X, W, strides=strides.tolist(), dilations=dilations.tolist(),
            output_padding=output_padding.tolist(), pads=pads)
        ours = ct.onnx_conv_transpose(X, W, pads_rule="pre-2021", **attributes)
        assert_same(ours, expected, (attributes, pads))
        plan = ct.shapes.onnx_conv_transpose(X.shape, W.shape, pads_rule="pre-2021",
                                             **attributes)
        assert list(plan.pads_begin) + list(plan.pads_end) == pads


def test_the_two_texts_differ_on_the_worked_example():
    X, W = np.array([[[1.0, 2.0, 3.0]]]), np.array([[[1.0, 10.0, 100.0]]])
    current = ct.onnx_conv_transpose(X, W, strides=2, auto_pad="SAME_UPPER", output_shape=[6])
    old = ct.onnx_conv_transpose(X, W, strides=2, auto_pad="SAME_UPPER", output_shape=[6],
                                 pads_rule="pre-2021")
    np.testing.assert_array_equal(current.ravel(), [1, 10, 102, 20, 203, 30])
    np.testing.assert_array_equal(old.ravel(), [10, 102, 20, 203, 30, 300])


def test_a_pre_2021_model_translates_to_explicit_pads():
    t = ct.translate("onnx_conv_transpose", "onnx_conv_transpose", (1, 1, 3), (1, 1, 3),
                     strides=[2], auto_pad="SAME_UPPER", output_shape=[6], pads_rule="pre-2021")
    assert t.exact and t.attributes["pads"] == (1, 0)


def test_an_unknown_rule_is_refused():
    with pytest.raises(ct.ConvTransposeError, match="pads_rule must be one of"):
        ct.shapes.onnx_conv_transpose((1, 1, 3), (1, 1, 3), pads_rule="2019")
