"""Transposed convolution exactly as OpenVINO, oneDNN Graph and ONNX define it.

Four dialect functions compute on NumPy arrays; :mod:`convtranspose.shapes` holds
their shape-only twins.  Every dialect reduces to one canonical plan per spatial
axis, ``(offset, output_size)``, computed by one of several algorithms
(:mod:`convtranspose._kernels`); :func:`explain` tells which one a layer gets and why,
and :class:`Target` describes the machine it is chosen and compiled for.

>>> import numpy as np, convtranspose as ct
>>> data = np.zeros((1, 20, 16, 16), np.float32)
>>> filter = np.zeros((20, 10, 3, 3), np.float32)
>>> ct.convolution_backprop_data(data, filter, strides=2, pads_begin=1, pads_end=1).shape
(1, 10, 31, 31)
"""

from . import shapes, vjp
from ._choose.choice import Explanation
from ._choose.planning import (
    export_wisdom,
    forget_wisdom,
    get_planning,
    import_wisdom,
    set_planning,
    use_planning,
)
from ._dtypes import SUPPORTED_DTYPES
from ._errors import ConvTransposeError, ResultTooLargeError
from ._frontends.convolution import convolution, group_convolution
from ._frontends.explain import AdjointExplanation, explain
from ._frontends.frameworks import (
    jax_conv_transpose,
    keras_conv_transpose,
    tensorrt_deconvolution,
    tf_conv_transpose,
    tflite_transpose_conv,
    torch_conv_transpose,
)
from ._frontends.onednn_quantized import onednn_quantized_conv_transpose
from ._frontends.openvino_quantized import (
    fake_quantize_convolution_backprop_data,
    fake_quantize_group_convolution_backprop_data,
)
from ._frontends.prepared import PreparedLayer, PreparedQuantizedLayer, prepare
from ._frontends.qlinear import qlinear_conv_transpose
from ._frontends.specs import (
    clear_caches,
    conv_transpose,
    convolution_backprop_data,
    group_convolution_backprop_data,
    onnx_conv_transpose,
)
from ._frontends.tflite_quantized import tflite_quantized_transpose_conv
from ._frontends.torch_quantized import torch_quantized_conv_transpose
from ._frontends.translate import Translation, translate
from ._frontends.translate_quantized import QuantizedTranslation
from ._kernels import ALGORITHMS
from ._plan.dialects import ConvolutionPlan
from ._plan.rules import AxisPlan, ConvTransposePlan
from ._runtime.memo import set_weights_memo_bytes
from ._runtime.memory import get_max_bytes, limit_memory, set_max_bytes
from ._runtime.target import (
    Target,
    get_num_threads,
    num_threads,
    set_num_threads,
    set_thread_pinning,
    use_target,
)
from ._runtime.target import host as host_target
from ._version import __version__ as __version__

__all__ = [
    "ALGORITHMS",
    "AdjointExplanation",
    "AxisPlan",
    "ConvTransposeError",
    "ConvTransposePlan",
    "ConvolutionPlan",
    "Explanation",
    "PreparedLayer",
    "PreparedQuantizedLayer",
    "ResultTooLargeError",
    "SUPPORTED_DTYPES",
    "Target",
    "clear_caches",
    "conv_transpose",
    "fake_quantize_convolution_backprop_data",
    "fake_quantize_group_convolution_backprop_data",
    "convolution",
    "convolution_backprop_data",
    "explain",
    "export_wisdom",
    "forget_wisdom",
    "get_max_bytes",
    "get_num_threads",
    "get_planning",
    "group_convolution",
    "group_convolution_backprop_data",
    "host_target",
    "import_wisdom",
    "jax_conv_transpose",
    "keras_conv_transpose",
    "limit_memory",
    "num_threads",
    "onednn_quantized_conv_transpose",
    "onnx_conv_transpose",
    "prepare",
    "qlinear_conv_transpose",
    "set_max_bytes",
    "set_num_threads",
    "set_planning",
    "set_thread_pinning",
    "set_weights_memo_bytes",
    "shapes",
    "tensorrt_deconvolution",
    "tf_conv_transpose",
    "tflite_quantized_transpose_conv",
    "tflite_transpose_conv",
    "torch_conv_transpose",
    "torch_quantized_conv_transpose",
    "Translation",
    "translate",
    "QuantizedTranslation",
    "use_planning",
    "use_target",
    "vjp",
]
