"""The onnx reference evaluator's ConvTranspose divergences (docs/semantics.md, D6, D7, D4).

It is not an oracle for groups or for output_shape without auto_pad; these tests pin
down exactly how it differs, so an onnx release that fixes it makes them fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from . import _runtimes as rt
from ._runtimes import make_case

pytest.importorskip("onnx", reason="onnx is not installed (pip install '.[test]')")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers


def reference(case: rt.Case) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(rt.onnx_model(case)).run(
        None, dict(zip(["X", "W", "B"], case.arrays())))[0]


def test_grouped_with_several_channels_per_group_crashes():
    """D6: group > 1 works only with one input and one output channel per group."""
    for data_shape, filter_shape in (((1, 4, 3), (4, 1, 2)), ((1, 2, 3), (2, 2, 2))):
        case = make_case("onnx_conv_transpose", data_shape, filter_shape, group=2)
        with pytest.raises(ValueError, match="cannot reshape"):
            reference(case)
        rt.assert_close(case, rt.onnxruntime_compute([case])[case].output, case.compute(),
                        label="onnxruntime")


def test_depthwise_bias_uses_the_first_value_for_every_channel():
    """D6: in the depthwise case the reference adds B[0] to every output channel."""
    without_bias = make_case("onnx_conv_transpose", (1, 3, 3), (3, 1, 2), group=3, seed=5)
    bias = np.array([1.0, 20.0, 300.0], np.float32)
    case = rt.with_arrays(make_case("onnx_conv_transpose", (1, 3, 3), (3, 1, 2), group=3,
                                    bias=True), *without_bias.arrays(), bias)
    np.testing.assert_array_equal(reference(case), without_bias.compute() + bias[0])
    np.testing.assert_array_equal(case.compute(), without_bias.compute() + bias[:, None])
    np.testing.assert_array_equal(rt.onnxruntime_compute([case])[case].output, case.compute())


def test_output_shape_without_auto_pad_is_ignored():
    """D7: under NOTSET/VALID the reference keeps the pads attribute and ignores output_shape."""
    for auto_pad in ("NOTSET", "VALID"):
        case = make_case("onnx_conv_transpose", (1, 1, 3), (1, 1, 3), strides=[2],
                         output_shape=[5], auto_pad=auto_pad)
        with pytest.raises(ValueError, match="expected size of input"):
            reference(case)
        np.testing.assert_array_equal(rt.onnxruntime_compute([case])[case].output, case.compute())
    # when the pads attribute happens to give that size, the results agree
    consistent = make_case("onnx_conv_transpose", (1, 1, 3), (1, 1, 3), strides=[2],
                           output_shape=[5], pads=[1, 1])
    np.testing.assert_array_equal(reference(consistent), consistent.compute())


def test_same_with_a_short_kernel_targets_x_times_stride():
    """D4: the reference (and the spec) give X*stride where onnxruntime's output is shorter."""
    case = make_case("onnx_conv_transpose", (1, 1, 3), (1, 1, 1), strides=[3],
                     auto_pad="SAME_UPPER", values="normal", seed=2)
    np.testing.assert_array_equal(reference(case), case.compute())
    assert case.compute().shape[-1] == 9
    assert rt.onnxruntime_compute([case])[case].output.shape[-1] == 7
