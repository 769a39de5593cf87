"""Translations to JAX and TensorFlow run by the frameworks themselves: random layers of
every source dialect, translated with ``ct.translate``, computed by ``lax.conv_transpose``
and ``tf.nn.conv_transpose`` on the transformed operands, then cropped, padded and given
the bias as the translation says: equal to the source layer's output (the oracle's)."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

from ._cases import assert_same, integer_array, require
from .test_tensorflow import run_tf
from .test_translate import SOURCES, random_source, source_expected

lax = require("jax.lax", "jax is installed by the test extra")

pytestmark = pytest.mark.peers


def _run_by_framework(translation, arrays):
    data, filter_, bias = arrays
    if translation.data_axes is not None:
        data = data.transpose(translation.data_axes)
    weight = translation.filter(filter_)
    attributes = dict(translation.attributes)
    if translation.target == "jax_conv_transpose":
        result = np.asarray(lax.conv_transpose(np.ascontiguousarray(data), weight, **attributes))
    else:
        rank = data.ndim - 2
        attributes.setdefault("data_format", None)
        attributes.setdefault("dilations", [1] * rank)
        if attributes["data_format"] is None:
            attributes["data_format"] = {1: "NWC", 2: "NHWC", 3: "NDHWC"}[rank]
        result = run_tf(attributes, np.ascontiguousarray(data), weight)
        assert not isinstance(result, str), (translation, result)
    return translation.finish(result, bias)


@pytest.mark.parametrize("target", ["jax_conv_transpose", "tf_conv_transpose"])
def test_translations_run_by_the_target_framework(target):
    rng = np.random.default_rng(sum(map(ord, target)))
    checked = {source: 0 for source in SOURCES}
    for _ in range(400):
        source = SOURCES[int(rng.integers(len(SOURCES)))]
        if checked[source] >= 6:
            continue
        data_shape, filter_shape, bias_shape, attributes = random_source(rng, source)
        try:
            translation = ct.translate(source, target, data_shape, filter_shape, bias_shape,
                                       **attributes)
        except ct.ConvTransposeError:
            continue  # an invalid source layer, or one the target refuses (tested elsewhere)
        arrays = [None if s is None else integer_array(rng, s)
                  for s in (data_shape, filter_shape, bias_shape)]
        expected = source_expected(source, arrays, attributes)
        context = (source, target, data_shape, filter_shape, bias_shape, attributes)
        assert_same(_run_by_framework(translation, arrays), expected, context)
        checked[source] += 1
    assert sum(checked.values()) >= 3 * len(SOURCES), checked
