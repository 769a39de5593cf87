"""Shape inference: the twin of every array function, on shapes instead of arrays.

Each function takes the same keywords as its array twin in :mod:`convtranspose`,
with tuples of ints in place of the arrays, and returns a frozen, printable
:class:`ConvTransposePlan`: the whole ``output_shape``, the resolved ``pads_begin``
and ``pads_end`` as the owning runtime reports them, and the canonical per-axis
``offset`` and ``output_size``.  The array functions compute exactly this plan.

>>> from convtranspose import shapes
>>> plan = shapes.convolution_backprop_data((1, 20, 224, 224), (20, 10, 3, 3), [450, 450],
...                                         strides=1, auto_pad="valid")
>>> plan.output_shape, plan.offset
((1, 10, 450, 450), (0, 0))
"""

from ._plan.dialects import (
    ConvolutionPlan,
    conv_transpose,
    convolution,
    convolution_backprop_data,
    fake_quantize_convolution_backprop_data,
    fake_quantize_group_convolution_backprop_data,
    group_convolution,
    group_convolution_backprop_data,
    jax_conv_transpose,
    keras_conv_transpose,
    onednn_quantized_conv_transpose,
    onnx_conv_transpose,
    qlinear_conv_transpose,
    tensorrt_deconvolution,
    tf_conv_transpose,
    tflite_quantized_transpose_conv,
    tflite_transpose_conv,
    torch_conv_transpose,
    torch_quantized_conv_transpose,
)
from ._plan.rules import AxisPlan, ConvTransposePlan

__all__ = [
    "AxisPlan",
    "ConvTransposePlan",
    "ConvolutionPlan",
    "conv_transpose",
    "convolution",
    "convolution_backprop_data",
    "fake_quantize_convolution_backprop_data",
    "fake_quantize_group_convolution_backprop_data",
    "group_convolution",
    "group_convolution_backprop_data",
    "jax_conv_transpose",
    "keras_conv_transpose",
    "onednn_quantized_conv_transpose",
    "onnx_conv_transpose",
    "qlinear_conv_transpose",
    "tensorrt_deconvolution",
    "tf_conv_transpose",
    "tflite_quantized_transpose_conv",
    "tflite_transpose_conv",
    "torch_conv_transpose",
    "torch_quantized_conv_transpose",
]
