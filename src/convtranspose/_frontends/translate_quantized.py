"""``ct.translate`` between the quantized dialects: the geometry by the float
translation of their float dialects, the quantization parameters converted.

Every quantized dialect sums ``(x - x_zero_point) * (w - w_zero_point)`` exactly and
requantizes by its own rule (docs/quantization.md), so a translation keeps the exact sum
and moves the parameters:

- uint8 <-> int8 by a shift of 128 of the values and their zero point together
  (``x_u8 = x_s8 + 128``, ``zp_u8 = zp_s8 + 128``): ``x - zp`` is unchanged, and an
  8-bit result's clamp moves with it, so the shift is exact both ways;
- per-channel weights as one value per output channel (ONNX, TFLite) or per index of
  the weight's axis 1 (torch, shared by the groups);
- the bias as the int32 sum term of scale ``x_scale * w_scale`` (ONNX, TFLite, torch's
  QNNPACK) or a float added before or after scaling (torch's FBGEMM and oneDNN): a float
  bias is chosen so that the target adds the same integer where the target's rule allows
  it; otherwise the float bias is rounded to the int32 grid and the note says so.

Where the requantization rules differ (or the bias is rounded), the target's result can
differ from the source's by :attr:`QuantizedTranslation.max_difference` units; what
cannot be carried at all is refused, naming it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["QUANTIZED_DIALECTS", "QuantizedTranslation", "translate_quantized"]

#: The quantized dialects a layer can be translated from and to, and their float twins.
FLOAT_OF = {"qlinear_conv_transpose": "onnx_conv_transpose",
            "tflite_quantized_transpose_conv": "tflite_transpose_conv",
            "torch_quantized_conv_transpose": "torch_conv_transpose"}
QUANTIZED_DIALECTS = tuple(FLOAT_OF)

#: Each dialect's names of (data scale, data zero point, filter scale, filter zero
#: point, output scale, output zero point).
PARAMETERS = {
    "qlinear_conv_transpose": ("x_scale", "x_zero_point", "w_scale", "w_zero_point",
                               "y_scale", "y_zero_point"),
    "tflite_quantized_transpose_conv": ("input_scale", "input_zero_point", "weights_scale",
                                        "weights_zero_point", "output_scale",
                                        "output_zero_point"),
    "torch_quantized_conv_transpose": ("input_scale", "input_zero_point", "weight_scale",
                                       "weight_zero_point", "output_scale",
                                       "output_zero_point"),
}

#: Each dialect's options that are not the float dialect's attributes.
_OPTIONS = {"qlinear_conv_transpose": (),
            "tflite_quantized_transpose_conv": ("fused_activation_function",
                                                "quantized_bias_type"),
            "torch_quantized_conv_transpose": ("engine",)}

_F32 = np.float32
_EIGHT_BIT = ("uint8", "int8")


@dataclass(frozen=True)
class Quantization:
    """One side's quantization, with per-channel values over all output channels.

    ``dtypes`` are the data, filter and output types; ``rule`` names the requantization
    (two sides with the same rule and the same integer sum give the same integers);
    ``bias`` is ``"int32"``, ``"int64"`` (added to the exact sum) or ``"float"``.
    """

    dtypes: tuple[str, str, str]
    data_scale: float
    data_zero_point: int
    filter_scale: np.ndarray
    filter_zero_point: np.ndarray
    per_channel: bool
    output_scale: float
    output_zero_point: int
    rule: str
    bias: str
    engine: str | None = None


def _shift(source: str, target: str) -> int:
    """What to add to a ``source``-typed value (and its zero point) to give ``target``'s."""
    return {("int8", "uint8"): 128, ("uint8", "int8"): -128}.get((source, target), 0)


@dataclass(frozen=True)
class QuantizedTranslation:
    """A quantized layer of one dialect, expressed in another quantized dialect.

    Attributes
    ----------
    source, target : str
        The dialect names.
    geometry : Translation
        The translation of the float layer (``onnx_conv_transpose``,
        ``tflite_transpose_conv``, ``torch_conv_transpose``): its attributes, layouts,
        filter steps, group split and crop.
    source_quantization, target_quantization : Quantization
    attributes : dict
        The target function's keyword arguments: the geometry's and, for the first
        target layer, the quantization parameters (:meth:`parameters` for each layer).
    notes : tuple of str
        Where the target's result can differ from the source's, and why.
    max_difference : int
        The most units a target result can differ from the source's (0: equal element
        for element).
    """

    source: str
    target: str
    geometry: Any
    source_quantization: Quantization
    target_quantization: Quantization
    attributes: dict
    notes: tuple = field(default=())
    max_difference: int = 0

    @property
    def exact(self) -> bool:
        """Whether the target computes the source's integers element for element."""
        return self.max_difference == 0

    def parameters(self, layer: int = 0) -> dict:
        """The target's quantization arguments for target layer ``layer`` (a group split
        gives each layer its output channels' per-channel values)."""
        quantization, names = self.target_quantization, PARAMETERS[self.target]
        channels = slice(*self.geometry.group_channels[layer][1])
        scale = quantization.filter_scale[channels]
        zero_point = quantization.filter_zero_point[channels]
        if self.target == "torch_quantized_conv_transpose":  # shared by the groups
            per_group = scale.size // self.geometry.target_plan.groups
            scale, zero_point = scale[:per_group], zero_point[:per_group]
        if not quantization.per_channel:
            scale, zero_point = scale[:1], zero_point[:1]
        dtypes = [np.dtype(d).type for d in quantization.dtypes]
        typed = self.target == "qlinear_conv_transpose"  # ONNX types a zero point
        values = (_F32(quantization.data_scale),
                  dtypes[0](quantization.data_zero_point) if typed
                  else quantization.data_zero_point,
                  scale if quantization.per_channel else _F32(scale[0]),
                  (zero_point.astype(dtypes[1]) if typed else zero_point)
                  if quantization.per_channel else
                  (dtypes[1](zero_point[0]) if typed else int(zero_point[0])),
                  _F32(quantization.output_scale),
                  dtypes[2](quantization.output_zero_point) if typed
                  else quantization.output_zero_point)
        result = dict(zip(names, values))
        if quantization.engine is not None:
            result["engine"] = quantization.engine
        return result

    def operands(self, data, filter, bias=None) -> list:
        """Each target layer's ``(data, filter, bias)``: the source's operands shifted to
        the target's types, in the target's layouts, the bias in the target's
        convention."""
        source, target = self.source_quantization, self.target_quantization
        data = _shifted(np.asarray(data), source.dtypes[0], target.dtypes[0])
        filter = _shifted(np.asarray(filter), source.dtypes[1], target.dtypes[1])
        converted = None if bias is None else convert_bias(np.asarray(bias), source, target)
        layers = self.geometry.layers(data, filter, converted)
        if any(step == "dilate" for step, _ in self.geometry.filter_steps):
            # the zeros between the taps must be the zero point: w - zp = 0 there
            taps = self.geometry.layers(data, np.ones(np.shape(filter), np.int8))
            zero_point = int(target.filter_zero_point[0])
            for (_, weights, _), (_, ones, _) in zip(layers, taps):
                weights[ones == 0] = zero_point
        return layers

    def run(self, data, filter, bias=None):
        """The source layer's output, computed by the target's function of this library
        on :meth:`operands` and brought back to the source's type and layout."""
        from .qlinear import qlinear_conv_transpose
        from .tflite_quantized import tflite_quantized_transpose_conv
        from .torch_quantized import torch_quantized_conv_transpose

        function = {"qlinear_conv_transpose": qlinear_conv_transpose,
                    "tflite_quantized_transpose_conv": tflite_quantized_transpose_conv,
                    "torch_quantized_conv_transpose": torch_quantized_conv_transpose,
                    }[self.target]
        geometry = dict(self.geometry.attributes)
        outputs = []
        for g, (x, w, b) in enumerate(self.operands(data, filter, bias)):
            parameters = self.parameters(g)
            if self.target == "qlinear_conv_transpose":
                p = list(parameters.values())
                outputs.append(function(x, p[0], p[1], w, p[2], p[3], p[4], p[5], b,
                                        **geometry))
            elif self.target == "tflite_quantized_transpose_conv":
                attributes = dict(geometry)
                output_shape = attributes.pop("output_shape")
                outputs.append(function(output_shape, w, x, b, **attributes, **parameters))
            else:
                outputs.append(function(x, w, b, **geometry, **parameters))
        return self.output(outputs)

    def output(self, result):
        """The target's output (a list of each layer's for a group split) as the source's:
        concatenated, cropped, transposed to its layout and shifted to its type."""
        result = self.geometry.finish(result)
        return _shifted(result, self.target_quantization.dtypes[2],
                        self.source_quantization.dtypes[2])

    def __str__(self) -> str:
        lines = str(self.geometry).splitlines()
        lines[0] = f"{self.source} -> {self.target}" + (
            "" if self.exact else f" (within {self.max_difference} unit"
            f"{'s' if self.max_difference > 1 else ''})")
        source, target = self.source_quantization, self.target_quantization
        lines.insert(1, "  types: data {}, filter {}, output {} -> {}, {}, {}".format(
            *source.dtypes, *target.dtypes))
        shown = {k: (v.tolist() if isinstance(v, np.ndarray) else
                     v.item() if isinstance(v, np.generic) else v)
                 for k, v in self.parameters().items()}
        lines.insert(2, "  quantization: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
        lines.insert(3, f"  requantization: {source.rule} -> {target.rule}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def _shifted(array: np.ndarray, source: str, target: str) -> np.ndarray:
    delta = _shift(source, target)
    if not delta:
        return array
    return (array.astype(np.int16) + delta).astype(target)


def _one(name: str, value) -> float | int:
    array = np.asarray(value)
    if array.size != 1:
        raise ConvTransposeError(f"{name} must hold one value; got shape {array.shape}")
    return array.reshape(-1)[0].item()


def _dtype(name: str, zero_point, given: str | None, allowed: tuple) -> str:
    """A tensor's type: ``given`` (from ``dtypes``) or its NumPy-typed zero point's."""
    found = np.asarray(zero_point).dtype if isinstance(zero_point, (np.ndarray, np.generic)) \
        else None
    dtype = given if given is not None else None if found is None else found.name
    if dtype is None:
        raise ConvTransposeError(
            f"{name}'s tensor type is not known: give {name} as a NumPy integer of the"
            f" tensor's type (np.uint8(10)) or dtypes=(data, filter, output)")
    if dtype not in allowed:
        raise ConvTransposeError(f"{name}'s tensor type is {dtype}; the translation takes"
                                 f" {', '.join(allowed)}")
    return dtype


def _per_channel(name: str, value, channels: int, groups: int, shared: bool) -> np.ndarray:
    """A filter scale or zero point over all ``channels`` output channels (``shared``:
    torch's values along the weight's axis 1, the same for every group)."""
    array = np.asarray(value).reshape(-1)
    if array.size == 1:
        return np.repeat(array, channels)
    expected = channels // groups if shared else channels
    if array.size != expected:
        raise ConvTransposeError(f"{name} has {array.size} values; this layer takes one or"
                                 f" {expected}")
    return np.tile(array, groups) if shared else array


def _scale(name: str, value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{name} has dtype {array.dtype} but must be a number")
    scale = array.astype(_F32)
    if not np.all(np.isfinite(scale) & (scale > 0)):
        raise ConvTransposeError(f"{name} must be positive and finite (as float32), got"
                                 f" {array.tolist()}")
    return scale


def _torch_rule(engine: str) -> str:
    return {"fbgemm": "torch fbgemm (float32, float bias before scaling)",
            "qnnpack": "torch qnnpack (float32, bias rounded to int32)",
            "onednn": "torch onednn (float32, float bias after scaling, zero point before"
                      " rounding)"}[engine]


def _tflite_rule(data: str, bias_type: str | None) -> str:
    if data == "int16" and bias_type != "INT32":
        return "TFLite 64-bit fixed point (int16 kernel)"
    return f"TFLite 32-bit fixed point ({data} kernel)"


def _resolved_engine(engine: str, zero_point: np.ndarray, plan) -> str:
    """torch's ``x86`` engine as the layer's rule: oneDNN or FBGEMM, as on this host."""
    if engine != "x86":
        return engine
    from .torch_quantized import x86_uses_onednn

    per_group = zero_point[:max(zero_point.size // plan.groups, 1)]
    shown = per_group[:1] if np.all(per_group == per_group[0]) else per_group
    return "onednn" if x86_uses_onednn(shown, plan.groups, plan.output_padding) else "fbgemm"


def read_source(source: str, values: dict, extras: dict, dtypes, plan) -> Quantization:
    """The source layer's :class:`Quantization` from its parameters (``values``, by the
    source's names), its options (``extras``) and the tensor types."""
    names = PARAMETERS[source]
    given = (None, None, None) if dtypes is None else tuple(np.dtype(d).name for d in dtypes)
    if len(given) != 3:
        raise ConvTransposeError(f"dtypes must be (data, filter, output); got {dtypes!r}")
    channels, groups = plan.out_channels, plan.groups
    shared = source == "torch_quantized_conv_transpose"
    scale = _per_channel(names[2], _scale(names[2], values[names[2]]), channels, groups, shared)
    zero_point = _per_channel(names[3], np.asarray(values[names[3]]).astype(np.int64),
                              channels, groups, shared)
    per_channel = np.asarray(values[names[2]]).size > 1 or \
        np.asarray(values[names[3]]).size > 1
    engine = None
    if source == "qlinear_conv_transpose":
        types = (_dtype(names[1], values[names[1]], given[0], _EIGHT_BIT),
                 _dtype(names[3], values[names[3]], given[1], _EIGHT_BIT),
                 _dtype(names[5], values[names[5]], given[2], _EIGHT_BIT))
        rule, bias = "ONNX (float32, half to even)", "int32"
    elif source == "tflite_quantized_transpose_conv":
        activation = extras.get("fused_activation_function", "NONE")
        if activation != "NONE":
            raise ConvTransposeError(
                f"fused_activation_function={activation!r} narrows the result's clamp; no"
                f" other quantized dialect fuses an activation: translate the layer with"
                f" 'NONE' and clamp the result")
        data = _dtype(names[1], values[names[1]], given[0], _EIGHT_BIT + ("int16",))
        types = (data, given[1] or ("uint8" if data == "uint8" else "int8"), data)
        bias_type = extras.get("quantized_bias_type")
        rule = _tflite_rule(data, bias_type)
        bias = "int64" if rule.startswith("TFLite 64") else "int32"
    else:
        types, bias = ("uint8", "int8", "uint8"), "float"
        engine = extras.get("engine", "x86")
        rule = _torch_rule(_resolved_engine(engine, zero_point, plan))
    return Quantization(types, float(_scale(names[0], _one(names[0], values[names[0]]))),
                        int(_one(names[1], values[names[1]])), scale, zero_point,
                        per_channel, float(_scale(names[4], _one(names[4], values[names[4]]))),
                        int(_one(names[5], values[names[5]])), rule, bias, engine)


def _moved(quantization: Quantization, dtypes: tuple, rule: str, bias: str,
           engine: str | None = None) -> Quantization:
    """``quantization`` with its tensors shifted to ``dtypes``."""
    source = quantization.dtypes
    return Quantization(
        tuple(dtypes), quantization.data_scale,
        quantization.data_zero_point + _shift(source[0], dtypes[0]),
        quantization.filter_scale,
        quantization.filter_zero_point + _shift(source[1], dtypes[1]),
        quantization.per_channel, quantization.output_scale,
        quantization.output_zero_point + _shift(source[2], dtypes[2]), rule, bias, engine)


def target_quantization(source: str, target: str, quantization: Quantization, plan,
                        target_engine: str | None) -> tuple[Quantization, list]:
    """The target's quantization for the source's, with notes; or a refusal naming what
    the target cannot carry."""
    notes: list = []
    if source == target and (target_engine is None or target_engine == quantization.engine):
        return quantization, notes
    if quantization.dtypes[0] == "int16":
        raise ConvTransposeError(
            f"{target} has no int16 activations (TFLite's 16x8 kernel only): this int16"
            f" layer cannot be carried over")
    if target == "qlinear_conv_transpose":
        return _moved(quantization, quantization.dtypes, "ONNX (float32, half to even)",
                      "int32"), notes
    if target == "tflite_quantized_transpose_conv":
        signed = quantization.filter_zero_point + _shift(quantization.dtypes[1], "int8")
        if not np.any(signed):
            dtypes = ("int8", "int8", "int8")
        elif not quantization.per_channel:
            dtypes = ("uint8", "uint8", "uint8")
        else:
            raise ConvTransposeError(
                f"{target} cannot carry weights quantized per output channel with zero"
                f" points {np.unique(quantization.filter_zero_point).tolist()}"
                f" ({quantization.dtypes[1]}): TFLite's int8 weights are symmetric (zero"
                f" point 0) and its uint8 weights are per tensor")
        return _moved(quantization, dtypes, _tflite_rule(dtypes[0], None), "int32"), notes
    engine = target_engine or quantization.engine or "fbgemm"
    if quantization.per_channel and plan.groups > 1:
        rows = quantization.filter_scale.reshape(plan.groups, -1)
        zero_rows = quantization.filter_zero_point.reshape(plan.groups, -1)
        if np.any(rows != rows[0]) or np.any(zero_rows != zero_rows[0]):
            raise ConvTransposeError(
                f"{target} quantizes a grouped weight per index of its axis 1 (C_out/groups"
                f" values shared by the {plan.groups} groups); this layer's per-channel"
                f" scales or zero points differ between groups")
    moved = _moved(quantization, ("uint8", "int8", "uint8"), "", "float", engine)
    notes += _torch_limits(engine, moved, plan)
    rule = _torch_rule(_resolved_engine(engine, moved.filter_zero_point, plan))
    return dataclasses.replace(moved, rule=rule), notes


def _torch_limits(engine: str, quantization: Quantization, plan) -> list[str]:
    """What torch's own engine refuses of a layer this library computes by its rule."""
    refused = []
    if quantization.per_channel and engine != "qnnpack":
        refused.append("per-channel weights")
    if engine == "onednn" and np.any(quantization.filter_zero_point):
        refused.append("weight zero points other than 0")
    if engine == "onednn" and any(plan.output_padding):
        refused.append("output_padding")
    if engine == "qnnpack" and quantization.per_channel and plan.groups > 1:
        refused.append("per-channel weights with groups")
    if engine == "qnnpack" and plan.spatial_rank == 3:
        refused.append("3-D layers")
    if not refused:
        return []
    return [f"torch's {engine} engine itself refuses {', '.join(refused)} for transposed"
            f" convolution; this library computes the layer by the engine's rule"]


def _products(quantization: Quantization) -> np.ndarray:
    """``float32(x_scale * w_scale)`` per output channel, as FBGEMM and QNNPACK take it."""
    return (np.float64(_F32(quantization.data_scale))
            * quantization.filter_scale.astype(np.float64)).astype(_F32)


def _onednn_scales(quantization: Quantization) -> np.ndarray:
    """oneDNN's ``s(x_scale) * s(w_scale)`` (torch hands it reciprocals, inverted back)."""
    def back(scale):
        return _F32(1) / (1.0 / np.asarray(scale, np.float64)).astype(_F32)
    return back(_F32(quantization.data_scale)) * back(quantization.filter_scale)


def _integer_term(bias: np.ndarray, quantization: Quantization) -> np.ndarray:
    """The float bias of a torch layer in units of the sum, as its engine adds it
    (QNNPACK: rounded to an integer; FBGEMM before scaling; oneDNN after it)."""
    bias = bias.astype(_F32)
    products = _products(quantization)
    if "qnnpack" in quantization.rule:
        return np.rint(bias * (_F32(1) / products))
    if "fbgemm" in quantization.rule:
        if quantization.per_channel:
            return bias / products
        return bias * _F32(1.0 / np.float64(products[0]))
    return bias.astype(np.float64) / _onednn_scales(quantization)


def _float_bias(integers: np.ndarray, quantization: Quantization) -> np.ndarray:
    """A float32 bias that the torch engine of ``quantization`` adds as ``integers``
    (the nearest float32 that does, searched over a few units in the last place;
    oneDNN adds it after scaling, so only approximately)."""
    if "onednn" in quantization.rule:
        return (integers * _onednn_scales(quantization).astype(np.float64)).astype(_F32)
    wanted = integers.astype(np.float64)
    start = (wanted * _products(quantization)).astype(_F32)
    best = start.copy()
    found = _integer_term(start, quantization) == wanted
    for step in range(1, 9):
        for direction in (np.inf, -np.inf):
            candidate = start
            for _ in range(step):
                candidate = np.nextafter(candidate, _F32(direction))
            hit = ~found & (_integer_term(candidate, quantization) == wanted)
            best[hit], found = candidate[hit], found | hit
    return best


def convert_bias(bias: np.ndarray, source: Quantization, target: Quantization) -> np.ndarray:
    """The source's bias in the target's convention: an integer added to the exact sum
    (int32, int64) or torch's float bias."""
    if source.bias == "float" and target.bias == "float":
        return bias.astype(_F32)
    if source.bias == "float":
        term = np.rint(_integer_term(bias, source).astype(np.float64))
        return np.clip(term, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    if target.bias == "float":
        return _float_bias(bias.astype(np.int64), target)
    return bias.astype(np.int64 if target.bias == "int64" else np.int32)


def max_difference(source: Quantization, target: Quantization,
                   has_bias: bool) -> tuple[int, list]:
    """The most units the target's result can differ from the source's, and why."""
    notes: list[str] = []
    rounded = has_bias and source.bias == "float" and "qnnpack" not in source.rule and (
        target.bias != "float" or "qnnpack" in target.rule)
    if source.rule == target.rule and not rounded:
        return 0, notes
    bound = 1
    if source.rule != target.rule:
        notes.append(
            f"the requantization rules differ ({source.rule} vs {target.rule}): a result"
            f" next to a rounding boundary can round the other way, one unit apart (equal"
            f" element for element where both rules compute the exact value and round it"
            f" alike, as with power-of-two scales between the float32 rules that add the"
            f" zero point after rounding; oneDNN adds it before, so an exact tie and an odd"
            f" zero point round the other way)")
    if rounded:
        multiplier = float(np.max(source.data_scale * source.filter_scale.astype(np.float64)
                                  / source.output_scale))
        bound += math.floor(0.5 * multiplier * (1 + 1e-6) + 1e-6)
        notes.append(
            f"the float bias ({source.rule}) is added unrounded; the target adds it rounded"
            f" to an integer of the sum (scale input_scale * weight_scale): up to half a"
            f" unit of the sum, {0.5 * multiplier:.3g} of the result")
    return bound, notes


def translate_quantized(source: str, target: str, data_shape, filter_shape, bias_shape,
                        workarounds: bool, dtypes, target_engine: str | None,
                        attributes: dict[str, Any],
                        translate: Callable[..., Any]) -> QuantizedTranslation:
    """``ct.translate`` for a quantized ``source`` and ``target`` (see its docstring);
    ``translate`` is the float translation, which gives the geometry."""
    # A quantized dialect that is not translated is named first (its record says why).
    for name in sorted((source, target), key=lambda n: _untranslated(n) is None):
        if name not in FLOAT_OF:
            raise ConvTransposeError(_refusal(name))
    if target_engine is not None and target != "torch_quantized_conv_transpose":
        raise ConvTransposeError(f"target_engine is torch_quantized_conv_transpose's engine;"
                                 f" the target is {target}")
    attributes = dict(attributes)
    names = PARAMETERS[source]
    missing = [name for name in names if name not in attributes]
    if missing:
        raise ConvTransposeError(
            f"translating a {source} layer needs its quantization parameters "
            f"({', '.join(names)}) among the attributes; missing {', '.join(missing)}")
    values = {name: attributes.pop(name) for name in names}
    extras = {name: attributes.pop(name) for name in _OPTIONS[source] if name in attributes}
    geometry = translate(FLOAT_OF[source], FLOAT_OF[target], data_shape, filter_shape,
                         bias_shape, workarounds=workarounds, **attributes)
    if geometry.bias_after or any(begin < 0 or end < 0 for begin, end in geometry.crop):
        raise ConvTransposeError(
            f"{target} cannot compute this {source} layer's whole output: the float"
            f" translation pads it with zeros or adds the bias after the op"
            f" ({'; '.join(geometry.notes)}), and a quantized result there is the"
            f" requantized bias, not zero")
    source_q = read_source(source, values, extras, dtypes, geometry.source_plan)
    target_q, notes = target_quantization(source, target, source_q, geometry.source_plan,
                                          target_engine)
    bound, why = max_difference(source_q, target_q, bias_shape is not None)
    if bound and not workarounds:
        raise ConvTransposeError(f"{target} cannot compute this {source} layer's integers"
                                 f" exactly: " + "; ".join(why))
    translation = QuantizedTranslation(source, target, geometry, source_q, target_q, {},
                                       tuple(notes + why), bound)
    return dataclasses.replace(translation,
                               attributes={**geometry.attributes, **translation.parameters()})


def _untranslated(name: str) -> str | None:
    """Why the quantized dialect ``name`` is not translated, by its record; None for the
    translated ones and for float dialects."""
    dialect = _dialects.DIALECTS.get(name)
    if dialect is None or not dialect.quantized:
        return None
    return dialect.missing.get("translate")


def _refusal(name: str) -> str:
    """Why ``name`` is no source or target of a quantized translation: a quantized
    dialect's record says why (OpenVINO's FakeQuantize, oneDNN's int8), else it is a
    float dialect."""
    reason = _untranslated(name)
    if reason:
        return (f"{name} is not translated: {reason}; a quantized layer translates"
                f" between {', '.join(QUANTIZED_DIALECTS)}")
    return (f"a quantized layer translates between {', '.join(QUANTIZED_DIALECTS)}; {name}"
            f" is a float dialect (translate the float layer between float dialects)")
