"""Quantized ConvTranspose layers of an ONNX model: the QDQ pattern and QLinearConvTranspose.

Two spellings of one layer (docs/quantization.md), both computed by
:func:`convtranspose.qlinear_conv_transpose`:

- the QDQ pattern: a ``ConvTranspose`` whose data comes from ``DequantizeLinear(x_q,
  x_scale, x_zero_point)`` (per tensor), whose weights come from ``DequantizeLinear``
  of a constant uint8/int8 tensor (per tensor, or per axis on axis 1, the ``M/group``
  output channels of the ``(C, M/group, k...)`` weights), whose optional bias comes from
  ``DequantizeLinear`` of a constant int32 tensor with scale ``x_scale * w_scale`` and
  zero point 0, and whose output feeds exactly one ``QuantizeLinear(y_scale,
  y_zero_point)`` (per tensor) and nothing else;
- onnxruntime's contrib node ``com.microsoft.QLinearConvTranspose`` (``x, x_scale,
  x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point[, B]``).

Every scale, zero point, weight and bias must be a constant (:mod:`._onnx_constants`
reads them, bounded); the quantized input is the layer's data.  Scales must be float32:
a float16 scale makes the QDQ model compute in float16, another rule.  What cannot be
followed raises :class:`NotFollowed` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._onnx_constants import node_attributes
from ._onnx_graphs import CONTRIB_DOMAIN
from ._safety import InteropError

__all__ = ["QLINEAR", "NotFollowed", "QuantizedLayer", "follow", "is_qlinear",
           "looks_quantized"]

#: The contrib operator's name (domain ``com.microsoft``).
QLINEAR = "QLinearConvTranspose"
_DEFAULT = ("", "ai.onnx")
_EIGHT_BIT = (np.dtype(np.uint8), np.dtype(np.int8))
#: onnx.TensorProto codes QuantizeLinear's ``output_dtype`` may name here.
_OUTPUT_TYPES = {2: np.dtype(np.uint8), 3: np.dtype(np.int8)}
_FLOAT = 1  # onnx.TensorProto.FLOAT: the only DequantizeLinear output_dtype followed
#: Relative distance of a bias scale from float32(x_scale * w_scale) still read as that
#: product: two float32 units in the last place (a quantizer that multiplied in float64
#: and rounded once lands within one).
_BIAS_SCALE_RTOL = 2.0 ** -22


class NotFollowed(InteropError):
    """The quantization around a ConvTranspose node cannot be computed exactly."""


@dataclass
class QuantizedLayer:
    """A quantized ConvTranspose layer, as :func:`convtranspose.qlinear_conv_transpose`
    takes it.

    Attributes
    ----------
    dialect : {"QDQ", "com.microsoft.QLinearConvTranspose"}
    x : str
        The quantized input (``onnx run``'s data): ``DequantizeLinear``'s input.
    y : str
        The quantized output: ``QuantizeLinear``'s output.
    operands : dict
        ``x_scale``, ``x_zero_point`` (None: zero of the data's type), ``w``,
        ``w_scale``, ``w_zero_point`` (per output channel: ``(M,)``), ``y_scale``,
        ``y_zero_point`` and ``B`` (or None).
    around : list of str
        The nodes of the pattern, ``DequantizeLinear 'dq_x'`` ...
    """

    dialect: str
    x: str
    y: str
    operands: dict
    around: list

    def describe(self) -> str:
        """One line: the dialect, the operands' types and the nodes followed."""
        ops = self.operands
        zero = ops["x_zero_point"]
        weights = ("per tensor" if np.size(ops["w_scale"]) == 1
                   else f"per output channel ({np.size(ops['w_scale'])} scales)")
        parts = [f"x {repr(self.x)} {'?' if zero is None else zero.dtype}",
                 f"w {ops['w'].dtype} {list(ops['w'].shape)} {weights}",
                 "B int32" if ops["B"] is not None else "no bias",
                 f"y {self.y!r} {ops['y_zero_point'].dtype}"]
        followed = f" through {', '.join(self.around)}" if self.around else ""
        return f"quantized ({self.dialect}{followed}): {', '.join(parts)}"

    def to_dict(self) -> dict:
        ops = self.operands
        return {"dialect": self.dialect, "input": self.x, "output": self.y,
                "around": list(self.around),
                "x_dtype": None if ops["x_zero_point"] is None else str(
                    ops["x_zero_point"].dtype),
                "w_dtype": str(ops["w"].dtype), "w_shape": list(ops["w"].shape),
                "per_channel": bool(np.size(ops["w_scale"]) > 1),
                "bias": ops["B"] is not None, "y_dtype": str(ops["y_zero_point"].dtype)}


def is_qlinear(node) -> bool:
    """Whether ``node`` is ``com.microsoft.QLinearConvTranspose``."""
    return node.op_type == QLINEAR and node.domain == CONTRIB_DOMAIN


def _is(node, op_type: str) -> bool:
    return node is not None and node.op_type == op_type and node.domain in _DEFAULT


def looks_quantized(node, scope) -> bool:
    """Whether a ConvTranspose node's data comes from a ``DequantizeLinear`` or its
    output feeds a ``QuantizeLinear``: a QDQ pattern, followable or not.  Weights alone
    dequantized are weight compression of a float layer, not a quantized layer."""
    if node.input and _is(scope.producers.get(node.input[0]), "DequantizeLinear"):
        return True
    return bool(node.output) and any(_is(consumer, "QuantizeLinear")
                                     for consumer in scope.consumers.get(node.output[0], []))


def follow(node, scope, constant) -> QuantizedLayer:
    """The quantized layer of ``node`` (a ConvTranspose in a QDQ pattern, or a
    QLinearConvTranspose) in ``scope``; ``constant(name, purpose)`` reads a constant.

    Raises
    ------
    NotFollowed
        The pattern is incomplete or has a form :func:`~convtranspose.qlinear_conv_transpose`
        does not compute exactly; the message says which part and why.
    """
    try:
        return (_qlinear if is_qlinear(node) else _qdq)(node, scope, constant)
    except NotFollowed:
        raise
    except InteropError as error:  # a scale or weight known only at run time, ...
        raise NotFollowed(str(error)) from None


def _label(node) -> str:
    return f"{node.op_type} {node.name or node.output[0]!r}"


def _float32_scale(value: np.ndarray, what: str) -> np.ndarray:
    if value.dtype != np.float32:
        raise NotFollowed(f"{what} is {value.dtype}; the float32 rule of"
                          " qlinear_conv_transpose needs float32 scales (a float16 scale"
                          " makes the model compute in float16)")
    return value


def _eight_bit(value: np.ndarray, what: str) -> np.ndarray:
    if value.dtype not in _EIGHT_BIT:
        raise NotFollowed(f"{what} is {value.dtype}; qlinear_conv_transpose takes uint8 or"
                          " int8")
    return value


def _dequantize_operands(dq, scope, constant, what: str):
    """``(quantized value name, scale, zero point or None, axis)`` of DequantizeLinear
    ``dq``, refusing per-block scales and outputs other than float32."""
    attributes = node_attributes(dq, scope)
    if attributes.get("block_size", 0):
        raise NotFollowed(f"{what}: {_label(dq)} is blocked (block_size"
                          f" {attributes['block_size']}); qlinear_conv_transpose has no blocked"
                          " quantization")
    if attributes.get("output_dtype", _FLOAT) != _FLOAT:
        raise NotFollowed(f"{what}: {_label(dq)} has output_dtype {attributes['output_dtype']},"
                          " not float32")
    names = list(dq.input) + ["", ""]
    if not names[1]:
        raise NotFollowed(f"{what}: {_label(dq)} has no scale")
    scale = _float32_scale(constant(names[1], f"the scale of {_label(dq)}"),
                           f"the scale of {_label(dq)}")
    zero = constant(names[2], f"the zero point of {_label(dq)}") if names[2] else None
    if zero is not None and zero.shape != scale.shape:
        raise NotFollowed(f"{what}: {_label(dq)}'s zero point has shape {zero.shape}, its"
                          f" scale {scale.shape}")
    return names[0], scale, zero, attributes.get("axis", 1)


def _producer(name: str, scope, what: str):
    dq = scope.producers.get(name) if name else None
    if not _is(dq, "DequantizeLinear"):
        how = f"computed by {dq.op_type}" if dq is not None else "not computed by a node"
        raise NotFollowed(f"{what} {name!r} is {how}, not by DequantizeLinear")
    return dq


def _qdq(node, scope, constant) -> QuantizedLayer:
    names = list(node.input) + ["", "", ""]
    dq_x = _producer(names[0], scope, "its data")
    x, x_scale, x_zero, _ = _dequantize_operands(dq_x, scope, constant, "its data")
    if x_scale.size != 1:
        raise NotFollowed(f"its data is dequantized per axis ({x_scale.size} scales by"
                          f" {_label(dq_x)}); qlinear_conv_transpose takes one activation scale")
    if x_zero is not None:
        _eight_bit(x_zero, f"the data {x!r}")
    dq_w = _producer(names[1], scope, "its weights")
    w_name, w_scale, w_zero, axis = _dequantize_operands(dq_w, scope, constant, "its weights")
    w = _eight_bit(constant(w_name, f"the weights of {_label(dq_w)}"),
                   f"the weights {w_name!r}")
    group = int(node_attributes(node, scope).get("group", 1))
    w_scale, w_zero = _weight_scales(w, w_scale, w_zero, axis, group, _label(dq_w))
    around = [_label(dq_x), _label(dq_w)]
    bias = None
    if names[2]:
        dq_b = _producer(names[2], scope, "its bias")
        bias = _bias(dq_b, scope, constant, x_scale, w_scale)
        around.append(_label(dq_b))
    quantize = _quantize_linear(node, scope)
    y_scale, y_zero = _output_operands(quantize, scope, constant)
    around.append(_label(quantize))
    operands = dict(x_scale=x_scale, x_zero_point=x_zero, w=w, w_scale=w_scale,
                    w_zero_point=w_zero, y_scale=y_scale, y_zero_point=y_zero, B=bias)
    return QuantizedLayer("QDQ", x, quantize.output[0], operands, around)


def _weight_scales(w, scale, zero, axis, group: int, label: str):
    """The weights' scale and zero point as qlinear_conv_transpose takes them: one
    value, or ``(M,)`` from DequantizeLinear's ``M/group`` values on axis 1 (each group
    has the same channels' scales: tiled)."""
    if zero is None:
        zero = np.zeros(scale.shape, w.dtype)
    if zero.dtype != w.dtype:
        raise NotFollowed(f"{label}'s zero point is {zero.dtype}, its weights {w.dtype}")
    if scale.size == 1:
        return scale.reshape(()), zero.reshape(())
    if scale.ndim != 1 or axis % w.ndim != 1 or scale.size != w.shape[1]:
        raise NotFollowed(f"{label} has {scale.size} weight scales on axis {axis}; followed:"
                          f" one, or {w.shape[1]} on axis 1 (the output channels of the"
                          f" (C, M/group, k...) weights)")
    return np.tile(scale, group), np.tile(zero, group)


def _bias(dq_b, scope, constant, x_scale, w_scale) -> np.ndarray:
    """The int32 bias of DequantizeLinear ``dq_b``, whose scale must be ``x_scale *
    w_scale`` (per output channel) and zero point 0: ONNX's quantized bias."""
    b_name, scale, zero, _ = _dequantize_operands(dq_b, scope, constant, "its bias")
    bias = constant(b_name, f"the bias of {_label(dq_b)}")
    if bias.dtype != np.int32 or bias.ndim != 1:
        raise NotFollowed(f"its bias {b_name!r} is {bias.dtype} {list(bias.shape)}; followed:"
                          " int32 (M,) dequantized with scale x_scale * w_scale")
    expected = np.broadcast_to(x_scale.reshape(()) * w_scale.reshape(-1), bias.shape)
    given = np.broadcast_to(scale.reshape(-1) if scale.size > 1 else scale.reshape(()),
                            bias.shape) if scale.size in (1, bias.size) else None
    if given is None or not np.allclose(given, expected, rtol=_BIAS_SCALE_RTOL, atol=0):
        raise NotFollowed(f"its bias is dequantized with scale {scale.reshape(-1).tolist()[:4]}"
                          f" by {_label(dq_b)}, not x_scale * w_scale"
                          f" {expected.reshape(-1).tolist()[:4]}")
    if zero is not None and np.any(zero != 0):
        raise NotFollowed(f"its bias has zero point {zero.reshape(-1).tolist()[:4]} in"
                          f" {_label(dq_b)}; a quantized bias has zero point 0")
    return bias


def _quantize_linear(node, scope):
    """The one QuantizeLinear node ``node``'s output feeds, or NotFollowed."""
    if not node.output or not node.output[0]:
        raise NotFollowed("it has no output")
    name = node.output[0]
    consumers = scope.consumers.get(name, [])
    if name in scope.outputs:
        raise NotFollowed(f"its float output {name!r} is an output of the graph as well")
    if len(consumers) != 1 or not _is(consumers[0], "QuantizeLinear"):
        kinds = ", ".join(consumer.op_type for consumer in consumers[:4]) or "nothing"
        raise NotFollowed(f"its output {name!r} feeds {kinds}; followed: exactly one"
                          " QuantizeLinear")
    if list(consumers[0].input)[:1] != [name]:
        raise NotFollowed(f"its output is not the quantized input of {_label(consumers[0])}")
    return consumers[0]


def _output_operands(quantize, scope, constant):
    """QuantizeLinear's per-tensor float32 scale and 8-bit zero point (its output type:
    ``output_dtype``, else uint8 when it has no zero point)."""
    attributes = node_attributes(quantize, scope)
    label = _label(quantize)
    if attributes.get("block_size", 0):
        raise NotFollowed(f"{label} is blocked (block_size); followed: per tensor")
    names = list(quantize.input) + ["", ""]
    if not names[1]:
        raise NotFollowed(f"{label} has no scale")
    scale = _float32_scale(constant(names[1], f"the scale of {label}"), f"the scale of {label}")
    if scale.size != 1:
        raise NotFollowed(f"{label} quantizes per axis ({scale.size} scales);"
                          " qlinear_conv_transpose takes one output scale")
    if names[2]:
        zero = _eight_bit(constant(names[2], f"the zero point of {label}"),
                          f"the zero point of {label}")
    else:
        code = attributes.get("output_dtype", 2)
        if code not in _OUTPUT_TYPES:
            raise NotFollowed(f"{label} has output_dtype {code}; followed: uint8 or int8")
        zero = np.zeros((), _OUTPUT_TYPES[code])
    return scale.reshape(()), zero.reshape(())


def _qlinear(node, scope, constant) -> QuantizedLayer:
    """QLinearConvTranspose's operands: every input but ``x`` a constant."""
    names = list(node.input) + [""] * 9
    keys = ("x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
            "y_zero_point")
    operands: dict = {"B": None}
    for index, key in enumerate(keys, 1):
        if not names[index]:
            raise InteropError(f"{_label(node)} lacks its input {key} (input {index})")
        operands[key] = constant(names[index], f"{key} of {_label(node)}")
    if names[8]:
        operands["B"] = constant(names[8], f"B of {_label(node)}")
    _eight_bit(operands["x_zero_point"], "x_zero_point")
    _eight_bit(operands["w"], "w")
    _eight_bit(operands["y_zero_point"], "y_zero_point")
    if not names[0] or not node.output or not node.output[0]:
        raise InteropError(f"{_label(node)} lacks its input x or its output")
    return QuantizedLayer(f"{CONTRIB_DOMAIN}.{QLINEAR}", names[0], node.output[0], operands, [])
