"""Translations run by the target frameworks themselves: random layers of every source
dialect, translated with ``ct.translate``, computed by ``lax.conv_transpose``,
``tf.nn.conv_transpose``, Keras 3 ``Conv*DTranspose`` (TensorFlow backend) and LiteRT's
``TRANSPOSE_CONV`` on the operands ``Translation.layers`` gives (one call per group for a
group split, the kernel dilated with zeros where the target has no dilation), then
concatenated, cropped, padded and given the bias as the translation says: equal to the
source layer's output (the oracle's, or torch's)."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

from ._cases import assert_same, integer_array, require
from .test_tensorflow import _tflite_model, run_keras, run_tf, run_tflite
from .test_translate import (
    GROUPED_OR_DILATED_SOURCES,
    SOURCES,
    _grouped_or_dilated_source,
    random_source,
    source_expected,
)

lax = require("jax.lax", "jax is installed by the test extra")

pytestmark = pytest.mark.peers

_TF_FORMATS = {1: "NWC", 2: "NHWC", 3: "NDHWC"}


def _run_layer(translation, data, weight, bias):
    """One target layer computed by its framework (TensorFlow's CPU kernels get the
    zero-dilated kernel and channels-last data in ``run_tf`` and ``run_keras``)."""
    attributes = dict(translation.attributes)
    target = translation.target
    if target == "jax_conv_transpose":
        return np.asarray(lax.conv_transpose(data, weight, **attributes))
    if target == "keras_conv_transpose":
        result = run_keras(attributes, data.astype(np.float32), weight.astype(np.float32),
                           None if bias is None else bias.astype(np.float32))
    elif target == "tflite_transpose_conv":
        interpreter = _tflite_model(weight.astype(np.float32), (attributes["stride_h"],
                                    attributes["stride_w"]), attributes["padding"],
                                    None if bias is None else bias.astype(np.float32))
        result = run_tflite(interpreter, attributes["output_shape"], data.astype(np.float32))
    else:
        rank = data.ndim - 2
        attributes.setdefault("dilations", [1] * rank)
        if attributes.get("data_format") is None:
            attributes["data_format"] = _TF_FORMATS[rank]
        result = run_tf(attributes, data, weight)
    assert not isinstance(result, str), (translation, result)
    return result


def run_by_framework(translation, arrays):
    """The source layer's output computed by the target framework, as translated."""
    outputs = [_run_layer(translation, *layer) for layer in translation.layers(*arrays)]
    return translation.finish(outputs, arrays[2])


#: Per target: random layers per source, and grouped or dilated layers per source.
BUDGETS = {"jax_conv_transpose": (5, 2), "tf_conv_transpose": (5, 2),
           "keras_conv_transpose": (1, 1), "tflite_transpose_conv": (1, 1)}


def _layers(rng, target):
    """Random layers of every source, then grouped or dilated ones, each translated to
    ``target`` (invalid layers and the target's refusals are tested elsewhere)."""
    for source in SOURCES:
        random_budget, special_budget = BUDGETS[target]
        found = 0
        budget = random_budget + (special_budget if source in GROUPED_OR_DILATED_SOURCES
                                  else 0)
        flips = 2 if source == "jax_conv_transpose" else 0  # two more, with flipped kernels
        for _ in range(200):
            if found == budget + flips:
                break
            special = random_budget <= found < budget
            layer = _grouped_or_dilated_source(rng, source)[0] if special else \
                random_source(rng, source)
            try:
                translation = ct.translate(source, target, *layer[:3], **layer[3])
            except ct.ConvTransposeError:
                continue
            if found >= budget and all(step != "flip" for step, _ in translation.filter_steps):
                continue
            found += 1
            yield source, layer, translation


@pytest.mark.parametrize("target", list(BUDGETS))
def test_translations_run_by_the_target_framework(target):
    rng = np.random.default_rng(sum(map(ord, target)))
    checked, split, dilated, flipped = 0, 0, 0, 0
    for source, (data_shape, filter_shape, bias_shape, attributes), translation in \
            _layers(rng, target):
        arrays = [None if s is None else integer_array(rng, s)
                  for s in (data_shape, filter_shape, bias_shape)]
        expected = source_expected(source, arrays, attributes)
        context = (source, target, data_shape, filter_shape, bias_shape, attributes)
        assert_same(run_by_framework(translation, arrays), expected, context)
        checked += 1
        split += translation.split_groups > 1
        dilated += any(step == "dilate" for step, _ in translation.filter_steps)
        flipped += any(step == "flip" for step, _ in translation.filter_steps)
    assert checked >= len(SOURCES) and split >= 3 and flipped >= 2, (checked, split, flipped)
    if target in ("keras_conv_transpose", "tflite_transpose_conv"):
        assert dilated >= 2, dilated
