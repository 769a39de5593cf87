"""Typed calls of the public API, checked by mypy (``make test`` runs it; pytest does not
collect this file).  Each ``assert_type`` states what a call returns; a signature that
loses or changes its hints makes mypy fail here."""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
from typing_extensions import assert_type

import convtranspose as ct
from convtranspose import shapes

data = np.zeros((1, 4, 5, 5), np.float32)
weights = np.zeros((4, 2, 3, 3), np.float32)

assert_type(ct.convolution_backprop_data(data, weights, [9, 9], strides=2, pads_begin=[0, 1]),
            np.ndarray)
assert_type(ct.group_convolution_backprop_data(data, weights[None], strides=(2, 2)), np.ndarray)
assert_type(ct.conv_transpose(data, weights, None, groups=1, data_format="NCX",
                              filter_format="IOX", out=None), np.ndarray)
assert_type(ct.onnx_conv_transpose(data, weights, np.zeros(2, np.float32), pads=[1, 1, 0, 0],
                                   group=1), np.ndarray)

plan = shapes.onnx_conv_transpose((1, 4, 5, 5), (4, 2, 3, 3), output_shape=[10, 10])
assert_type(plan, ct.ConvTransposePlan)
assert_type(shapes.convolution_backprop_data([1, 4, 5, 5], [4, 2, 3, 3]), ct.ConvTransposePlan)
assert_type(shapes.conv_transpose((1, 5, 5, 4), (3, 3, 4, 2), strides=2), ct.ConvTransposePlan)
assert_type(plan.output_shape, tuple[int, ...])

assert_type(ct.explain(plan, np.float32), ct.Explanation)
forward = shapes.convolution((1, 4, 5, 5), (2, 4, 3, 3), strides=2)
assert_type(ct.explain(forward), "ct.Explanation | ct.AdjointExplanation")
assert_type(ct.get_planning(), str)
assert_type(ct.set_planning("estimate"), "str | None")
assert_type(ct.export_wisdom(), dict)
assert_type(ct.import_wisdom({}), int)
assert_type(ct.get_num_threads(), int)
assert_type(ct.set_num_threads(2), int)
assert_type(ct.host_target(), ct.Target)
assert_type(ct.host_target().replace(threads=1), ct.Target)
assert_type(ct.set_thread_pinning(None), "bool | None")
with_target: AbstractContextManager[ct.Target] = ct.use_target(ct.host_target())
with_threads: AbstractContextManager[int] = ct.num_threads(1)
with_planning: AbstractContextManager[None] = ct.use_planning("measure")
