"""Every dialect's shape rules: its attributes, with the spec's own names and defaults,
resolved into the canonical :class:`~convtranspose._plan.rules.ConvTransposePlan`.

One module per published specification; each is a thin layer over the shared
validation of :mod:`convtranspose._plan.rules`.
"""

from .convolution import ConvolutionPlan, convolution, group_convolution
from .jax import jax_conv_transpose
from .onednn import conv_transpose
from .onnx import onnx_conv_transpose
from .openvino import convolution_backprop_data, group_convolution_backprop_data
from .pytorch import torch_conv_transpose
from .tensorflow import keras_conv_transpose, tf_conv_transpose, tflite_transpose_conv
from .tensorrt import tensorrt_deconvolution

__all__ = ["ConvolutionPlan", "conv_transpose", "convolution", "convolution_backprop_data",
           "group_convolution", "group_convolution_backprop_data", "jax_conv_transpose",
           "keras_conv_transpose", "onnx_conv_transpose", "tensorrt_deconvolution",
           "tf_conv_transpose", "tflite_transpose_conv", "torch_conv_transpose"]
