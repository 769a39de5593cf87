"""Every dialect, once: its shape rule, its operands, and which surfaces have it.

A dialect is one :class:`Dialect` record in :data:`DIALECTS` plus its rule module (one
per published specification, each a thin layer over :mod:`convtranspose._plan.rules`).
The surfaces (the array functions ``ct.*``, :mod:`convtranspose.shapes`,
:mod:`convtranspose.vjp`, :mod:`convtranspose.dask`, :mod:`convtranspose.torch`, the
command line's ``shape``/``run``, ``ct.translate`` and the API reference) are derived
from this list or checked against it by ``tests/test_surfaces.py``: a dialect that a
surface lacks says why in :attr:`Dialect.missing`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .convolution import ConvolutionPlan, convolution, group_convolution
from .jax import jax_conv_transpose
from .onednn import conv_transpose
from .onnx import onnx_conv_transpose
from .openvino import convolution_backprop_data, group_convolution_backprop_data
from .pytorch import torch_conv_transpose
from .quantized import (
    fake_quantize_convolution_backprop_data,
    fake_quantize_group_convolution_backprop_data,
    onednn_quantized_conv_transpose,
    qlinear_conv_transpose,
    tflite_quantized_transpose_conv,
    torch_quantized_conv_transpose,
)
from .tensorflow import keras_conv_transpose, tf_conv_transpose, tflite_transpose_conv
from .tensorrt import tensorrt_deconvolution

__all__ = ["DIALECTS", "SURFACES", "ConvolutionPlan", "Dialect", "conv_transpose",
           "fake_quantize_convolution_backprop_data",
           "fake_quantize_group_convolution_backprop_data",
           "convolution", "convolution_backprop_data", "dialects_on", "group_convolution",
           "group_convolution_backprop_data", "jax_conv_transpose", "keras_conv_transpose",
           "onednn_quantized_conv_transpose", "onnx_conv_transpose", "qlinear_conv_transpose", "tensorrt_deconvolution",
           "tf_conv_transpose", "tflite_quantized_transpose_conv", "tflite_transpose_conv",
           "torch_conv_transpose", "torch_quantized_conv_transpose"]

#: The surfaces a dialect can have: ``ct`` (the array function), ``shapes`` (its shape
#: twin), ``vjp`` (its gradients), ``dask`` (on Dask arrays), ``torch`` (a
#: differentiable function and an ``nn.Module``), ``cli`` (``convtranspose shape`` and
#: ``run``), ``translate`` (a source and target of ``ct.translate``) and ``docs`` (the
#: API reference).
SURFACES = ("ct", "shapes", "vjp", "dask", "torch", "cli", "translate", "docs")

_NOT_A_LAYER = "a forward convolution, not a transposed-convolution layer"
_NO_CONVOLUTION_CLI = (
    "not built yet: shape and run report and check a transposed convolution's plan (its"
    " offsets, output_padding, data format and filter layout, and the memory check of its"
    " execution); a forward convolution's plan (ConvolutionPlan) has no report nor check"
    " there yet")
_NO_CONVOLUTION_TILES = (
    "not built yet: the Dask tiling plans the tiles of a transposed convolution (each input"
    " chunk's outputs at stride multiples, plus a halo of neighbouring inputs); a forward"
    " convolution's tiles (each output chunk reading a strided window of the data, so its"
    " input chunks' halos depend on pads, stride and dilation the other way round) have no"
    " planner yet")
_QUANTIZED_MISSING = {
    "vjp": "quantized operations have no gradient in their owners (ONNX and onnxruntime"
           " define none; training uses the float layer with fake quantization)",
    "dask": "not built yet: the Dask tiling plans float and plain integer layers; the"
            " quantized operands (scales, zero points, int32 bias) are not carried to"
            " the tiles yet",
    "torch": "not built yet: PyTorch's quantized tensors and its quantized"
             " ConvTranspose modules are another dialect, not reproduced yet",
    "cli": "not built yet: shape and run take one data, filter and bias operand; the"
           " scales and zero points have no options there yet",
}
_TFLITE_QUANTIZED_MISSING = {
    **_QUANTIZED_MISSING,
    "vjp": "quantized operations have no gradient in their owners (TFLite's integer"
           " kernels are inference only; training uses the float layer with fake"
           " quantization)",
    "torch": "not built yet: convtranspose.torch computes float tensors; TFLite's integer"
             " tensors and their quantization parameters have no function there yet",
}

_TORCH_QUANTIZED_MISSING = {
    **_QUANTIZED_MISSING,
    "vjp": "quantized operations have no gradient in their owners (torch's quantized"
           " ConvTranspose modules are inference only; training uses the float module with"
           " fake quantization)",
    "torch": "not built yet: convtranspose.torch computes float tensors; a quantized"
             " tensor in and out (quint8 with its scale and zero point) has no function"
             " there yet",
}

_FAKE_QUANTIZE_MISSING = {
    **_QUANTIZED_MISSING,
    "translate": "FakeQuantize computes on float tensors (ranges and levels, a float sum"
                 " and a float result), not integers with scales and zero points: no"
                 " quantized dialect's operands carry it, and ct.translate refuses it",
    "vjp": "not built yet: FakeQuantize's gradient is a training rule of its own (the"
           " straight-through estimator inside the ranges, zero outside, and gradients for"
           " the ranges), not the transposed convolution's",
    "torch": "not built yet: convtranspose.torch computes the float layers; the"
             " FakeQuantize ranges and levels have no module there yet",
    "cli": "not built yet: shape and run take one data and filter operand; the four"
           " FakeQuantize ranges and levels per tensor have no options there (`ir run`"
           " follows the pattern in a model)",
}

_ONEDNN_QUANTIZED_MISSING = {
    **_QUANTIZED_MISSING,
    "vjp": "quantized operations have no gradient in their owners (oneDNN's int8"
           " deconvolution is forward only; training uses the float layer with fake"
           " quantization)",
    "torch": "not built yet: convtranspose.torch computes float tensors; integer tensors"
             " with oneDNN's scale and zero point attributes have no function there yet",
    "translate": "not built yet: translation carries ONNX's, TFLite's and PyTorch's"
                 " quantization parameters; oneDNN's source, weight and destination scales"
                 " and zero points are not mapped to them yet",
}


@dataclass(frozen=True)
class Dialect:
    """One dialect of transposed (or forward) convolution.

    Attributes
    ----------
    name : str
        Its function name, the same on every surface (``ct.<name>``,
        ``ct.shapes.<name>``, ``ct.vjp.<name>``, ...).
    owner : str
        The specification or framework operation it reproduces.
    rule : callable
        The shape rule: the array function's arguments with shapes for arrays, returning
        the plan.
    operands : tuple of (str, str, str or None)
        The data, filter and bias argument names (None: the dialect has no bias).
    transposed : bool
        False for the forward convolutions.
    quantized : bool
        True for the quantized dialects (integer data and weights with scales and zero
        points, a requantized result).
    missing : mapping of str to str
        The surfaces (:data:`SURFACES`) this dialect is not on, and why.
    """

    name: str
    owner: str
    rule: Callable
    operands: tuple[str, str, str | None]
    transposed: bool = True
    quantized: bool = False
    missing: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        unknown = set(self.missing) - set(SURFACES)
        if unknown:
            raise ValueError(f"{self.name}: unknown surfaces {sorted(unknown)}")
        object.__setattr__(self, "missing", MappingProxyType(dict(self.missing)))

    def has(self, surface: str) -> bool:
        """Whether the surface ``surface`` (one of :data:`SURFACES`) has this dialect."""
        if surface not in SURFACES:
            raise ValueError(f"unknown surface {surface!r}; one of {', '.join(SURFACES)}")
        return surface not in self.missing


_RECORDS = (
    Dialect("convolution_backprop_data", "OpenVINO ConvolutionBackpropData-1",
            convolution_backprop_data, ("data", "filter", None)),
    Dialect("group_convolution_backprop_data", "OpenVINO GroupConvolutionBackpropData-1",
            group_convolution_backprop_data, ("data", "filter", None)),
    Dialect("fake_quantize_convolution_backprop_data", "OpenVINO FakeQuantize-1 around"
            " ConvolutionBackpropData-1 (data, weights, optionally the output)",
            fake_quantize_convolution_backprop_data, ("data", "filter", None),
            quantized=True, missing=_FAKE_QUANTIZE_MISSING),
    Dialect("fake_quantize_group_convolution_backprop_data", "OpenVINO FakeQuantize-1"
            " around GroupConvolutionBackpropData-1 (data, weights, optionally the output)",
            fake_quantize_group_convolution_backprop_data, ("data", "filter", None),
            quantized=True, missing=_FAKE_QUANTIZE_MISSING),
    Dialect("conv_transpose", "oneDNN Graph ConvTranspose-1", conv_transpose,
            ("input", "filter", "bias")),
    Dialect("onednn_quantized_conv_transpose", "oneDNN int8 deconvolution (u8/s8 source, s8"
            " weights, u8/s8/s32/f32 destination, scales and zero points)",
            onednn_quantized_conv_transpose, ("input", "filter", "bias"), quantized=True,
            missing=_ONEDNN_QUANTIZED_MISSING),
    Dialect("onnx_conv_transpose", "ONNX ConvTranspose", onnx_conv_transpose, ("X", "W", "B")),
    Dialect("qlinear_conv_transpose", "ONNX Runtime com.microsoft.QLinearConvTranspose"
            " (the ONNX QDQ ConvTranspose pattern)", qlinear_conv_transpose,
            ("x", "w", "B"), quantized=True, missing=_QUANTIZED_MISSING),
    Dialect("torch_conv_transpose", "PyTorch conv_transpose1d/2d/3d",
            torch_conv_transpose, ("input", "weight", "bias")),
    Dialect("torch_quantized_conv_transpose", "PyTorch torch.ao.nn.quantized"
            " ConvTranspose1d/2d/3d (quint8 x qint8, engines x86, fbgemm, qnnpack, onednn)",
            torch_quantized_conv_transpose, ("input", "weight", "bias"), quantized=True,
            missing=_TORCH_QUANTIZED_MISSING),
    Dialect("tensorrt_deconvolution", "TensorRT IDeconvolutionLayer",
            tensorrt_deconvolution, ("input", "kernel", "bias")),
    Dialect("tf_conv_transpose", "TensorFlow tf.nn.conv_transpose", tf_conv_transpose,
            ("input", "filters", None)),
    Dialect("keras_conv_transpose", "Keras 3 Conv1D/2D/3DTranspose", keras_conv_transpose,
            ("inputs", "kernel", "bias")),
    Dialect("tflite_transpose_conv", "TFLite / LiteRT TRANSPOSE_CONV",
            tflite_transpose_conv, ("input", "weights", "bias")),
    Dialect("tflite_quantized_transpose_conv", "TFLite / LiteRT TRANSPOSE_CONV on uint8,"
            " int8 and int16 x int8 tensors", tflite_quantized_transpose_conv,
            ("input", "weights", "bias"), quantized=True, missing=_TFLITE_QUANTIZED_MISSING),
    Dialect("jax_conv_transpose", "JAX lax.conv_transpose", jax_conv_transpose,
            ("lhs", "rhs", None)),
    Dialect("convolution", "OpenVINO Convolution-1", convolution, ("data", "filter", None),
            transposed=False,
            missing={"translate": _NOT_A_LAYER, "cli": _NO_CONVOLUTION_CLI,
                     "dask": _NO_CONVOLUTION_TILES}),
    Dialect("group_convolution", "OpenVINO GroupConvolution-1", group_convolution,
            ("data", "filter", None), transposed=False,
            missing={"translate": _NOT_A_LAYER, "cli": _NO_CONVOLUTION_CLI,
                     "dask": _NO_CONVOLUTION_TILES}),
)

#: Every dialect by name, in the order the docs list them.
DIALECTS: Mapping[str, Dialect] = MappingProxyType({record.name: record for record in _RECORDS})


def dialects_on(surface: str) -> tuple[str, ...]:
    """The names of the dialects that ``surface`` has, in :data:`DIALECTS`' order."""
    return tuple(name for name, record in DIALECTS.items() if record.has(surface))
