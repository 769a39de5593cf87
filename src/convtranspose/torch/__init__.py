"""PyTorch: every float dialect as a differentiable function (the spec dialects', the
frameworks' and the forward convolution) and as an ``nn.Module`` layer (the API
reference lists them).

Importing this package imports torch (``import convtranspose`` never does).  Each
function computes exactly what the same-named function of :mod:`convtranspose` computes,
on tensors, and can be trained through: its gradients are the library's vector-Jacobian
products (:mod:`convtranspose.vjp`).  Each module holds a weight (and a bias where the
dialect has one) in the dialect's own filter layout, initialised as torch initialises
its ``ConvTranspose``/``Conv`` layers, and the dialect's attributes under the spec's
names.

>>> import torch, convtranspose.torch as ctt
>>> layer = ctt.ConvolutionBackpropData(4, 2, 3, strides=2, auto_pad="same_upper")
>>> x = torch.ones(1, 4, 5, 5)
>>> y = layer(x, output_shape=[10, 10])          # OpenVINO's odd pad at the beginning
>>> y.shape
torch.Size([1, 2, 10, 10])
>>> y.sum().backward()
>>> layer.weight.grad.shape
torch.Size([4, 2, 3, 3])

Each op is a ``torch.library`` custom operator (``torch.ops.convtranspose.transposed``,
``transposed_backward``, ``convolution``, ``convolution_backward``) with a registered
autograd formula and a shape function, so ``torch.compile`` keeps a layer in one graph
(``fullgraph=True`` works) and calls the library's kernels inside it.  CPU tensors are
read through zero-copy NumPy views by the library's NumPy kernels; tensors on other
devices are computed with torch's own functions (``docs/arrays.md``).  Second
derivatives (a backward through a backward) are not provided.

A layer's forward call that records no gradient (under ``torch.no_grad()`` or
``torch.inference_mode()``, or with nothing requiring a gradient) on CPU runs a prepared
layer of its weights (:func:`convtranspose.prepare`), made again whenever torch reports
that the weight or bias changed (``optimizer.step()``, ``load_state_dict``, in-place
operations) or an attribute is set.  Writes torch does not count, through
``weight.data`` or a NumPy view of the weight, are not seen: call the layer's
``repack()`` after them.
"""

from ._modules import (
    Convolution,
    ConvolutionBackpropData,
    ConvTranspose,
    GroupConvolution,
    GroupConvolutionBackpropData,
    JaxConvTranspose,
    KerasConvTranspose,
    OnnxConvTranspose,
    TensorrtDeconvolution,
    TfConvTranspose,
    TfliteTransposeConv,
    TorchConvTranspose,
)
from ._ops import (
    conv_transpose,
    convolution,
    convolution_backprop_data,
    group_convolution,
    group_convolution_backprop_data,
    jax_conv_transpose,
    keras_conv_transpose,
    onnx_conv_transpose,
    tensorrt_deconvolution,
    tf_conv_transpose,
    tflite_transpose_conv,
    torch_conv_transpose,
)

__all__ = [
    "ConvTranspose",
    "Convolution",
    "ConvolutionBackpropData",
    "GroupConvolution",
    "GroupConvolutionBackpropData",
    "JaxConvTranspose",
    "KerasConvTranspose",
    "OnnxConvTranspose",
    "TensorrtDeconvolution",
    "TfConvTranspose",
    "TfliteTransposeConv",
    "TorchConvTranspose",
    "conv_transpose",
    "convolution",
    "convolution_backprop_data",
    "group_convolution",
    "group_convolution_backprop_data",
    "jax_conv_transpose",
    "keras_conv_transpose",
    "onnx_conv_transpose",
    "tensorrt_deconvolution",
    "tf_conv_transpose",
    "tflite_transpose_conv",
    "torch_conv_transpose",
]
