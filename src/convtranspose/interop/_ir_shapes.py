"""Shapes through an OpenVINO IR from given input shapes, without OpenVINO.

An IR saved with dynamic dims declares ``?`` (or an interval) wherever a dim depends on
an input's; ``--input-shape NAME=DIMS`` gives a ``Parameter`` its dims and this module
carries them along the edges, layer by layer in graph order.  A layer's dynamic output
dims are computed only for the operations whose rule is short and certain: the
transposed convolutions (this library's own shape functions), ``Convolution`` and
``GroupConvolution``, the operations that keep their first input's shape (activations,
``Convert``, normalisations, ``Result`` ...) and the elementwise binary operations
(NumPy broadcasting).  Past any other operation the dims stay as declared, so a layer
behind one is still reported as dynamic: never a guessed shape.

A static dim the IR declares is never changed.  The output ports of the transposed
convolutions keep their declared dims (the ones ``ir check`` compares against); the
dims they compute flow on to the layers they feed.
"""

from __future__ import annotations

import dataclasses

from ._report import given_input_shape, merge_dims
from ._safety import InteropError

__all__ = ["propagate"]

#: Operations whose output has their first input's shape.
_SAME_SHAPE = frozenset((
    "Abs", "BatchNormInference", "Ceiling", "Clamp", "Convert", "Elu", "Erf", "Exp",
    "FakeQuantize", "Floor", "Gelu", "HSigmoid", "HSwish", "Log", "LogSoftmax", "MVN",
    "Mish", "Negative", "NormalizeL2", "PRelu", "ReLU", "Relu", "Result", "Round",
    "Sigmoid", "Sign", "SoftMax", "Softmax", "SoftPlus", "Sqrt", "Swish", "Tanh"))
#: Elementwise operations of two inputs (NumPy broadcasting).
_BROADCAST = frozenset((
    "Add", "Divide", "Equal", "Greater", "Less", "Maximum", "Minimum", "Multiply", "Power",
    "SquaredDifference", "Subtract"))


def _broadcast(left, right):
    """NumPy broadcasting of two static shapes; ``None`` when a dim is dynamic or they
    do not broadcast."""
    if left is None or right is None or None in left or None in right:
        return None
    import numpy as np

    try:
        return tuple(np.broadcast_shapes(tuple(left), tuple(right)))
    except ValueError:
        return None


def _ints(text: str) -> tuple:
    return tuple(int(item) for item in text.split(",") if item.strip())


def _convolution(layer, inputs):
    """The output dims of a ``Convolution`` / ``GroupConvolution`` (opset1 rules)."""
    data, filter_ = inputs[0], inputs[1]
    if data is None or filter_ is None or None in data[1:] or None in filter_:
        return None
    attributes = layer.attributes
    rank = len(data) - 2
    try:
        strides = _ints(attributes.get("strides", "")) or (1,) * rank
        dilations = _ints(attributes.get("dilations", "")) or (1,) * rank
        begins = _ints(attributes.get("pads_begin", "")) or (0,) * rank
        ends = _ints(attributes.get("pads_end", "")) or (0,) * rank
    except ValueError:
        return None
    auto_pad = attributes.get("auto_pad", "explicit").lower()
    kernel = filter_[-rank:]
    if layer.type == "GroupConvolution":
        channels = filter_[0] * filter_[1]
    else:
        channels = filter_[0]
    spatial = []
    for x, k, s, d, b, e in zip(data[2:], kernel, strides, dilations, begins, ends):
        if auto_pad in ("same_upper", "same_lower"):
            spatial.append(-(-x // s))
            continue
        if auto_pad == "valid":
            b = e = 0
        span = x + b + e - d * (k - 1) - 1
        if span < 0:
            return None
        spatial.append(span // s + 1)
    return (data[0], channels, *spatial)


def _output_dims(model, layer, inputs, transposed_output):
    """What ``layer`` computes from its input dims ``inputs``, or ``None`` (unknown)."""
    if not inputs:
        return None
    if layer.type in _SAME_SHAPE:
        return inputs[0]
    if layer.type in _BROADCAST and len(inputs) == 2:
        return _broadcast(inputs[0], inputs[1])
    if layer.type in ("Convolution", "GroupConvolution") and len(inputs) == 2:
        return _convolution(layer, inputs)
    if transposed_output is not None:
        return transposed_output(layer, inputs)
    return None


def _order(model) -> list:
    """The layer ids in graph order (every producer before its consumers), file order
    among independent layers."""
    consumers: dict = {}
    waiting = {}
    for layer_id in model.layers:
        waiting[layer_id] = 0
    for (to_id, _), (from_id, _) in model.edges.items():
        if to_id in waiting and from_id in waiting:
            waiting[to_id] += 1
            consumers.setdefault(from_id, []).append(to_id)
    ready = [layer_id for layer_id, count in waiting.items() if count == 0]
    order = []
    while ready:
        layer_id = ready.pop(0)
        order.append(layer_id)
        for consumer in consumers.get(layer_id, ()):
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                ready.append(consumer)
    return order  # layers on a cycle (a malformed IR) are left out, keeping their dims


def propagate(model, input_shapes: dict, transposed_output=None) -> dict:
    """``model.layers`` with the dims ``input_shapes`` (Parameter name -> dims) implies.

    ``transposed_output(layer, input_dims)`` gives a transposed convolution's output
    dims (``None`` when unknown); its own output ports keep their declared dims.

    Raises
    ------
    InteropError
        A name that is no ``Parameter``, or dims :func:`given_input_shape` refuses.
    """
    parameters = {layer.name: layer for layer in model.layers.values()
                  if layer.type == "Parameter"}
    for name in input_shapes:
        if name not in parameters:
            raise InteropError(f"--input-shape {name}=...: the model has no Parameter"
                               f" {name!r}; its inputs are: {', '.join(parameters) or 'none'}")
    flowing: dict = {}  # (layer id, output port id) -> the dims computed there
    layers = dict(model.layers)
    for layer_id in _order(model):
        layer = layers[layer_id]
        inputs = []
        for port in layer.inputs:
            source = model.edges.get((layer.id, port.id))
            inputs.append(merge_dims(port.dims, flowing.get(source)))
        if layer.type == "Parameter" and layer.name in input_shapes and layer.outputs:
            given = given_input_shape(layer.name, layer.outputs[0].dims,
                                      input_shapes[layer.name])
            computed: tuple | None = given
        elif layer.type in ("Parameter", "Const"):
            computed = None
        else:
            transposed = transposed_output if transposed_output is not None and \
                layer.type in ("ConvolutionBackpropData", "GroupConvolutionBackpropData") \
                else None
            computed = _output_dims(model, layer, inputs, transposed)
        outputs = list(layer.outputs)
        if computed is not None and len(outputs) == 1:
            dims = merge_dims(outputs[0].dims, computed)
            flowing[(layer.id, outputs[0].id)] = dims
            if transposed_output is None or layer.type not in (
                    "ConvolutionBackpropData", "GroupConvolutionBackpropData"):
                outputs[0] = dataclasses.replace(outputs[0], dims=dims)
        new_inputs = tuple(dataclasses.replace(port, dims=dims)
                           for port, dims in zip(layer.inputs, inputs))
        layers[layer_id] = dataclasses.replace(layer, inputs=new_inputs, outputs=tuple(outputs))
    return layers
