"""Quantized transposed convolutions: ONNX's ``com.microsoft.QLinearConvTranspose``,
TFLite's quantized ``TRANSPOSE_CONV``, PyTorch's quantized ``ConvTranspose1d/2d/3d``,
OpenVINO's FakeQuantize pattern around (Group)ConvolutionBackpropData and oneDNN's int8
deconvolution.

Each geometry is its float dialect's (:mod:`convtranspose._plan.onnx`,
:mod:`convtranspose._plan.tensorflow`); this module adds the shapes of the
quantization operands.  Per the contrib operator's text, ``x_scale``,
``x_zero_point``, ``y_scale`` and ``y_zero_point`` are per-tensor (one value), and
``w_scale`` and ``w_zero_point`` are per-tensor or per output channel (``M`` values, one
for each channel of the result ``(N, M, Y...)``); a scale and its zero point have the
same shape.  A "one value" operand may be a scalar or a 1-D array of one element, as
onnxruntime and ``onnx.reference`` accept both.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .onednn import conv_transpose
from .onnx import onnx_conv_transpose
from .openvino import convolution_backprop_data, group_convolution_backprop_data
from .pytorch import torch_conv_transpose
from .rules import ConvTransposePlan, as_shape
from .tensorflow import tflite_transpose_conv

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._typing import PerAxis, ShapeLike

    #: The shapes of a FakeQuantize's four ranges, then its ``levels``.
    FakeQuantizeArgs = Sequence[object]

__all__ = ["ONEDNN_DST_TYPES", "ONEDNN_SCALINGS", "TFLITE_ACTIVATIONS", "TORCH_ENGINES",
           "fake_quantize_convolution_backprop_data", "onednn_dst_type",
           "onednn_quantization_shapes",
           "onednn_quantized_conv_transpose",
           "fake_quantize_group_convolution_backprop_data", "qlinear_conv_transpose", "quantization_shapes",
           "tflite_quantized_transpose_conv", "tflite_quantization_shapes",
           "torch_quantized_conv_transpose"]


def _one_value(name: str, shape: tuple[int, ...]) -> None:
    if len(shape) > 1 or shape not in ((), (1,)):
        raise ConvTransposeError(
            f"{name} has shape {shape} but must hold one value (shape () or (1,)):"
            f" QLinearConvTranspose quantizes x and y per tensor")


def quantization_shapes(x_scale: ShapeLike, x_zero_point: ShapeLike, w_scale: ShapeLike,
                        w_zero_point: ShapeLike, y_scale: ShapeLike, y_zero_point: ShapeLike,
                        out_channels: int) -> bool:
    """Check the quantization operands' shapes; True if ``w`` is per output channel.

    Raises ConvTransposeError for a per-tensor operand with more than one value, a
    ``w_scale``/``w_zero_point`` that is neither one value nor ``(out_channels,)``, or a
    ``w_scale`` and ``w_zero_point`` of different shapes.
    """
    shapes = {name: as_shape(f"{name} shape", value) for name, value in (
        ("x_scale", x_scale), ("x_zero_point", x_zero_point), ("w_scale", w_scale),
        ("w_zero_point", w_zero_point), ("y_scale", y_scale), ("y_zero_point", y_zero_point))}
    for name in ("x_scale", "x_zero_point", "y_scale", "y_zero_point"):
        _one_value(name, shapes[name])
    per_channel = False
    for name in ("w_scale", "w_zero_point"):
        shape = shapes[name]
        if shape == (out_channels,) and out_channels != 1:
            per_channel = True
        elif shape not in ((), (1,)):
            raise ConvTransposeError(
                f"{name} has shape {shape} but must hold one value (per tensor) or"
                f" ({out_channels},), one per output channel M = W.shape[1] * group")
    if (shapes["w_scale"] in ((), (1,))) != (shapes["w_zero_point"] in ((), (1,))):
        raise ConvTransposeError(
            f"w_scale has shape {shapes['w_scale']} but w_zero_point has shape"
            f" {shapes['w_zero_point']}: both per tensor or both per output channel")
    return per_channel


def qlinear_conv_transpose(x: ShapeLike, x_scale: ShapeLike, x_zero_point: ShapeLike,
                           w: ShapeLike, w_scale: ShapeLike, w_zero_point: ShapeLike,
                           y_scale: ShapeLike, y_zero_point: ShapeLike,
                           B: ShapeLike | None = None, *, auto_pad: str = "NOTSET",
                           dilations: PerAxis = None, group: int = 1,
                           kernel_shape: ShapeLike | None = None,
                           output_padding: PerAxis = None,
                           output_shape: ShapeLike | None = None,
                           pads: ShapeLike | None = None,
                           strides: PerAxis = None) -> ConvTransposePlan:
    """Plan ``com.microsoft.QLinearConvTranspose`` from shapes.

    Takes the shapes of the operands of :func:`convtranspose.qlinear_conv_transpose`
    (``x`` ``(N, C, D...)``, ``w`` ``(C, M/group, K...)``, ``B`` ``(M,)``, the scales
    and zero points ``()`` or ``(1,)``, ``w_scale`` and ``w_zero_point`` also ``(M,)``)
    and the same keywords; the geometry is :func:`onnx_conv_transpose`'s (the text
    since 2021).

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.qlinear_conv_transpose((1, 4, 5, 5), (), (), (4, 3, 3, 3), (3,), (3,),
    ...                                      (), (), (3,), strides=2, pads=[1, 1, 1, 1])
    >>> plan.op, plan.output_shape
    ('qlinear_conv_transpose', (1, 3, 9, 9))
    """
    plan = onnx_conv_transpose(
        x, w, B, auto_pad=auto_pad, dilations=dilations, group=group,
        kernel_shape=kernel_shape, output_padding=output_padding, output_shape=output_shape,
        pads=pads, strides=strides)
    quantization_shapes(x_scale, x_zero_point, w_scale, w_zero_point, y_scale, y_zero_point,
                        plan.output_shape[1])
    return dataclasses.replace(plan, op="qlinear_conv_transpose")


#: The fused activations of a quantized TRANSPOSE_CONV (its ``fused_activation_function``).
TFLITE_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def tflite_quantization_shapes(input_scale: ShapeLike, input_zero_point: ShapeLike,
                               weights_scale: ShapeLike, weights_zero_point: ShapeLike,
                               output_scale: ShapeLike, output_zero_point: ShapeLike,
                               out_channels: int) -> bool:
    """Check TFLite's quantization parameters' shapes; True if the weights are per
    output channel.

    The input and output are quantized per tensor (one value, shape ``()`` or
    ``(1,)``); the weights per tensor or per output channel (``(C_out,)``: TFLite's
    ``quantized_dimension`` 0 of the OHWI weights), the zero point one value or as many
    as the scales.
    """
    shapes = {name: as_shape(f"{name} shape", value) for name, value in (
        ("input_scale", input_scale), ("input_zero_point", input_zero_point),
        ("weights_scale", weights_scale), ("weights_zero_point", weights_zero_point),
        ("output_scale", output_scale), ("output_zero_point", output_zero_point))}
    for name in ("input_scale", "input_zero_point", "output_scale", "output_zero_point"):
        if shapes[name] not in ((), (1,)):
            raise ConvTransposeError(
                f"{name} has shape {shapes[name]} but must hold one value (shape () or"
                f" (1,)): TRANSPOSE_CONV quantizes its input and output per tensor")
    one = ((), (1,))
    for name in ("weights_scale", "weights_zero_point"):
        if shapes[name] not in one and shapes[name] != (out_channels,):
            raise ConvTransposeError(
                f"{name} has shape {shapes[name]} but must hold one value (per tensor) or"
                f" ({out_channels},), one per output channel (weights axis 0, OHWI)")
    if shapes["weights_scale"] in one and shapes["weights_zero_point"] not in one:
        raise ConvTransposeError(
            f"weights_zero_point has shape {shapes['weights_zero_point']} but"
            f" weights_scale is per tensor ({shapes['weights_scale']})")
    return shapes["weights_scale"] not in one and out_channels != 1


def tflite_quantized_transpose_conv(
        output_shape: ShapeLike, weights: ShapeLike, input: ShapeLike,
        bias: ShapeLike | None = None, *, input_scale: ShapeLike,
        input_zero_point: ShapeLike, weights_scale: ShapeLike,
        weights_zero_point: ShapeLike, output_scale: ShapeLike,
        output_zero_point: ShapeLike, padding: str = "SAME", stride_h: int = 1,
        stride_w: int = 1, fused_activation_function: str = "NONE",
        quantized_bias_type: str | None = None) -> ConvTransposePlan:
    """Plan TFLite / LiteRT's quantized ``TRANSPOSE_CONV`` from shapes.

    Takes ``output_shape`` (the op's input 0, ``[N, H, W, C_out]``), the shapes of
    ``weights`` ``(C_out, KH, KW, C_in)``, ``input`` (NHWC), ``bias`` ``(C_out,)`` and
    of the six quantization parameters, and the options of
    :func:`convtranspose.tflite_quantized_transpose_conv`; the geometry is
    :func:`tflite_transpose_conv`'s.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.tflite_quantized_transpose_conv(
    ...     [1, 8, 8, 3], (3, 3, 3, 4), (1, 4, 4, 4), (3,), input_scale=(),
    ...     input_zero_point=(), weights_scale=(3,), weights_zero_point=(3,),
    ...     output_scale=(), output_zero_point=(), stride_h=2, stride_w=2)
    >>> plan.op, plan.output_shape
    ('tflite_quantized_transpose_conv', (1, 8, 8, 3))
    """
    if quantized_bias_type not in (None, "INT32", "INT64"):
        raise ConvTransposeError(f"quantized_bias_type must be None, 'INT32' or 'INT64'; got"
                                 f" {quantized_bias_type!r}")
    if fused_activation_function not in TFLITE_ACTIVATIONS:
        raise ConvTransposeError(
            f"fused_activation_function must be one of {', '.join(TFLITE_ACTIVATIONS)};"
            f" got {fused_activation_function!r}")
    plan = tflite_transpose_conv(output_shape, weights, input, bias, padding=padding,
                                 stride_h=stride_h, stride_w=stride_w)
    tflite_quantization_shapes(input_scale, input_zero_point, weights_scale,
                               weights_zero_point, output_scale, output_zero_point,
                               plan.output_shape[-1])
    return dataclasses.replace(plan, op="tflite_quantized_transpose_conv")


#: The quantized engines of PyTorch's CPU build (``torch.backends.quantized.engine``).
TORCH_ENGINES = ("x86", "fbgemm", "qnnpack", "onednn")


def torch_quantized_conv_transpose(
        input: ShapeLike, weight: ShapeLike, bias: ShapeLike | None = None,
        stride: PerAxis = 1, padding: PerAxis = 0, output_padding: PerAxis = 0,
        groups: int = 1, dilation: PerAxis = 1, *, input_scale: ShapeLike = (),
        input_zero_point: ShapeLike = (), weight_scale: ShapeLike = (),
        weight_zero_point: ShapeLike = (), output_scale: ShapeLike = (),
        output_zero_point: ShapeLike = (), engine: str = "x86") -> ConvTransposePlan:
    """Plan PyTorch's quantized ``ConvTranspose1d/2d/3d`` from shapes.

    Takes the shapes of ``input`` ``(N, C_in, X...)``, ``weight``
    ``(C_in, C_out/groups, K...)``, ``bias`` ``(C_out,)`` and of the six quantization
    parameters (one value each, except ``weight_scale`` and ``weight_zero_point``:
    one value, or ``(C_out/groups,)`` for a weight quantized per channel along its
    axis 1), and the arguments of :func:`convtranspose.torch_quantized_conv_transpose`;
    the geometry is :func:`torch_conv_transpose`'s.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.torch_quantized_conv_transpose((1, 4, 5, 5), (4, 3, 3, 3), (3,),
    ...                                              stride=2, padding=1, weight_scale=(3,),
    ...                                              weight_zero_point=(3,))
    >>> plan.op, plan.output_shape
    ('torch_quantized_conv_transpose', (1, 3, 9, 9))
    """
    if engine not in TORCH_ENGINES:
        raise ConvTransposeError(f"engine must be one of {', '.join(TORCH_ENGINES)}; got"
                                 f" {engine!r}")
    plan = torch_conv_transpose(input, weight, bias, stride=stride, padding=padding,
                                output_padding=output_padding, groups=groups,
                                dilation=dilation)
    shapes = {name: as_shape(f"{name} shape", value) for name, value in (
        ("input_scale", input_scale), ("input_zero_point", input_zero_point),
        ("weight_scale", weight_scale), ("weight_zero_point", weight_zero_point),
        ("output_scale", output_scale), ("output_zero_point", output_zero_point))}
    one = ((), (1,))
    for name in ("input_scale", "input_zero_point", "output_scale", "output_zero_point"):
        if shapes[name] not in one:
            raise ConvTransposeError(
                f"{name} has shape {shapes[name]} but must hold one value (shape () or"
                f" (1,)): torch quantizes a quint8 activation per tensor")
    per_group = as_shape("weight shape", weight)[1]
    for name in ("weight_scale", "weight_zero_point"):
        if shapes[name] not in one and shapes[name] != (per_group,):
            raise ConvTransposeError(
                f"{name} has shape {shapes[name]} but must hold one value (per tensor) or"
                f" ({per_group},), one per index of the weight's axis 1 (C_out/groups)")
    if (shapes["weight_scale"] in one) != (shapes["weight_zero_point"] in one):
        raise ConvTransposeError(
            f"weight_scale has shape {shapes['weight_scale']} but weight_zero_point has"
            f" shape {shapes['weight_zero_point']}: both per tensor or both per channel")
    return dataclasses.replace(plan, op="torch_quantized_conv_transpose")


def _fake_quantize_shapes(name: str, quantize: FakeQuantizeArgs | None,
                          tensor: tuple[int, ...]) -> None:
    """Check one FakeQuantize's ``(input_low, input_high, output_low, output_high,
    levels)``: four range shapes that broadcast to ``tensor`` without enlarging it
    (FakeQuantize-1's NumPy broadcasting; its output has the data's shape) and
    ``levels`` an integer >= 2."""
    if quantize is None:
        return
    if not isinstance(quantize, (tuple, list)) or len(quantize) != 5:
        raise TypeError(f"{name} must be (input_low, input_high, output_low, output_high,"
                        f" levels), got {type(quantize).__name__}")
    *ranges, levels = quantize
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 2:
        raise ConvTransposeError(f"{name} levels = {levels!r}, but FakeQuantize needs an"
                                 f" integer of at least 2 (it divides by levels - 1)")
    for key, value in zip(("input_low", "input_high", "output_low", "output_high"), ranges):
        shape = as_shape(f"{name} {key} shape", value)
        fits = len(shape) <= len(tensor) and all(
            size in (1, full) for size, full in zip(reversed(shape), reversed(tensor)))
        if not fits:
            raise ConvTransposeError(
                f"{name} {key} has shape {shape}, which does not broadcast to its tensor's"
                f" {tensor} (FakeQuantize broadcasts its ranges to the data: one value, or"
                f" 1 or the tensor's size on each trailing axis)")


def _fake_quantized(op, plan, data, filter, data_quantize, filter_quantize,
                    output_quantize) -> ConvTransposePlan:
    _fake_quantize_shapes("data_quantize", data_quantize, as_shape("data shape", data))
    _fake_quantize_shapes("filter_quantize", filter_quantize, as_shape("filter shape", filter))
    _fake_quantize_shapes("output_quantize", output_quantize, plan.output_shape)
    return dataclasses.replace(plan, op=op)


def fake_quantize_convolution_backprop_data(
        data: ShapeLike, filter: ShapeLike, output_shape: ShapeLike | None = None, *,
        data_quantize: FakeQuantizeArgs | None = None,
        filter_quantize: FakeQuantizeArgs | None = None,
        output_quantize: FakeQuantizeArgs | None = None,
        strides: PerAxis = None, pads_begin: PerAxis = None, pads_end: PerAxis = None,
        dilations: PerAxis = None,
        auto_pad: str = "explicit", output_padding: PerAxis = None) -> ConvTransposePlan:
    """Plan OpenVINO's FakeQuantize pattern around ConvolutionBackpropData from shapes.

    Takes the shapes of ``data`` and ``filter``, and for each FakeQuantize the shapes of
    its four ranges and its ``levels``: ``(input_low, input_high, output_low,
    output_high, levels)``; the geometry is :func:`convolution_backprop_data`'s.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.fake_quantize_convolution_backprop_data(
    ...     (1, 4, 5, 5), (4, 3, 3, 3), data_quantize=((), (), (), (), 256),
    ...     filter_quantize=((1, 3, 1, 1),) * 4 + (255,), strides=2)
    >>> plan.op, plan.output_shape
    ('fake_quantize_convolution_backprop_data', (1, 3, 11, 11))
    """
    plan = convolution_backprop_data(data, filter, output_shape, strides=strides,
                                     pads_begin=pads_begin, pads_end=pads_end,
                                     dilations=dilations, auto_pad=auto_pad,
                                     output_padding=output_padding)
    return _fake_quantized("fake_quantize_convolution_backprop_data", plan, data, filter,
                           data_quantize, filter_quantize, output_quantize)


def fake_quantize_group_convolution_backprop_data(
        data: ShapeLike, filter: ShapeLike, output_shape: ShapeLike | None = None, *,
        data_quantize: FakeQuantizeArgs | None = None,
        filter_quantize: FakeQuantizeArgs | None = None,
        output_quantize: FakeQuantizeArgs | None = None,
        strides: PerAxis = None, pads_begin: PerAxis = None, pads_end: PerAxis = None,
        dilations: PerAxis = None,
        auto_pad: str = "explicit", output_padding: PerAxis = None) -> ConvTransposePlan:
    """Plan OpenVINO's FakeQuantize pattern around GroupConvolutionBackpropData from
    shapes, as :func:`fake_quantize_convolution_backprop_data`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.fake_quantize_group_convolution_backprop_data(
    ...     (1, 4, 5), (2, 2, 3, 3), data_quantize=((), (), (), (), 256),
    ...     filter_quantize=((2, 1, 3, 1),) * 4 + (255,))
    >>> plan.op, plan.output_shape
    ('fake_quantize_group_convolution_backprop_data', (1, 6, 7))
    """
    plan = group_convolution_backprop_data(data, filter, output_shape, strides=strides,
                                           pads_begin=pads_begin, pads_end=pads_end,
                                           dilations=dilations, auto_pad=auto_pad,
                                           output_padding=output_padding)
    return _fake_quantized("fake_quantize_group_convolution_backprop_data", plan, data,
                           filter, data_quantize, filter_quantize, output_quantize)


#: The destination data types of oneDNN's int8 deconvolution, by their oneDNN names.
ONEDNN_DST_TYPES = {"u8": "uint8", "s8": "int8", "s32": "int32", "f32": "float32"}
#: The float orders of oneDNN's requantization: its JIT kernels' and its reference's.
ONEDNN_SCALINGS = ("jit", "reference")


def onednn_dst_type(value: object) -> str:
    """The oneDNN name (``u8``, ``s8``, ``s32`` or ``f32``) of a destination data type
    given by that name (any case) or as a NumPy dtype or type of the same kind."""
    name = value if isinstance(value, str) else getattr(
        value, "name", getattr(value, "__name__", None))
    if isinstance(name, str):
        if name.lower() in ONEDNN_DST_TYPES:
            return name.lower()
        for short, numpy_name in ONEDNN_DST_TYPES.items():
            if name == numpy_name:
                return short
    raise ConvTransposeError(
        f"dst_dtype must be one of {', '.join(ONEDNN_DST_TYPES)} (or numpy's"
        f" {', '.join(ONEDNN_DST_TYPES.values())}); got {value!r}: oneDNN's int8"
        f" deconvolution writes those destination types")


def onednn_quantization_shapes(src_scale: ShapeLike | None, wei_scales: ShapeLike | None,
                               dst_scale: ShapeLike | None,
                               src_zero_point: ShapeLike | None,
                               dst_zero_point: ShapeLike | None,
                               out_channels: int) -> bool:
    """Check oneDNN's quantization attributes' shapes (None: the attribute is not set);
    True if ``wei_scales`` is per output channel.

    ``src_scale``, ``dst_scale`` and the two zero points are per tensor (oneDNN's mask
    0: one value, shape ``()`` or ``(1,)``); ``wei_scales`` per tensor or one per output
    channel ``(groups * O,)`` (the weights' mask over their output-channel dimensions).
    """
    one = ((), (1,))
    for name, value in (("src_scale", src_scale), ("dst_scale", dst_scale),
                        ("src_zero_point", src_zero_point),
                        ("dst_zero_point", dst_zero_point)):
        if value is not None and as_shape(f"{name} shape", value) not in one:
            raise ConvTransposeError(
                f"{name} has shape {as_shape(f'{name} shape', value)} but must hold one"
                f" value (shape () or (1,)): oneDNN's int8 deconvolution kernels take it"
                f" per tensor (mask 0)")
    if wei_scales is None:
        return False
    shape = as_shape("wei_scales shape", wei_scales)
    if shape not in one and shape != (out_channels,):
        raise ConvTransposeError(
            f"wei_scales has shape {shape} but must hold one value (per tensor) or"
            f" ({out_channels},), one per output channel (groups * O)")
    return shape not in one and out_channels != 1


def onednn_quantized_conv_transpose(
        input: ShapeLike, filter: ShapeLike, bias: ShapeLike | None = None, *,
        src_scale: ShapeLike | None = None, wei_scales: ShapeLike | None = None,
        dst_scale: ShapeLike | None = None, src_zero_point: ShapeLike | None = None,
        dst_zero_point: ShapeLike | None = None, dst_dtype: str = "u8",
        scaling: str = "jit", strides: PerAxis = None, pads_begin: PerAxis = None,
        pads_end: PerAxis = None, dilations: PerAxis = None, auto_pad: str = "none",
        output_padding: PerAxis = None, groups: int = 1, data_format: str = "NXC",
        filter_format: str = "XIO", weights_format: str | None = None,
        output_shape: ShapeLike | None = None) -> ConvTransposePlan:
    """Plan oneDNN's int8 deconvolution from shapes.

    Takes the shapes of ``input``, ``filter`` and ``bias`` (as
    :func:`convtranspose.shapes.conv_transpose`, whose geometry and layouts it has), the
    shapes of the quantization attributes (None: not set), and ``dst_dtype`` and
    ``scaling`` as :func:`convtranspose.onednn_quantized_conv_transpose` does.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.onednn_quantized_conv_transpose(
    ...     (1, 5, 5, 4), (3, 3, 4, 6), (6,), src_scale=(), wei_scales=(6,), dst_scale=(),
    ...     dst_dtype="s8", strides=2, pads_begin=1, pads_end=1)
    >>> plan.op, plan.output_shape
    ('onednn_quantized_conv_transpose', (1, 9, 9, 6))
    """
    onednn_dst_type(dst_dtype)
    if scaling not in ONEDNN_SCALINGS:
        raise ConvTransposeError(f"scaling must be one of {', '.join(ONEDNN_SCALINGS)};"
                                 f" got {scaling!r}")
    plan = conv_transpose(input, filter, bias, strides=strides, pads_begin=pads_begin,
                          pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
                          output_padding=output_padding, groups=groups,
                          data_format=data_format, filter_format=filter_format,
                          weights_format=weights_format, output_shape=output_shape)
    onednn_quantization_shapes(src_scale, wei_scales, dst_scale, src_zero_point,
                               dst_zero_point, plan.out_channels)
    return dataclasses.replace(plan, op="onednn_quantized_conv_transpose")
