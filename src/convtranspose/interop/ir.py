"""OpenVINO IR (``.xml`` + ``.bin``): check and run its transposed convolutions.

The ``.xml`` is parsed with ``defusedxml`` with DTDs forbidden (so entity expansion
and external entities are refused before they happen); every ``Const`` read from the
``.bin`` is bounds-checked against the file and the stated memory limit.

>>> model = load("model.xml")                                   # doctest: +SKIP
>>> [model.check(layer).status for layer in model.transposed_layers]  # doctest: +SKIP
['ok', 'ok']
>>> output = model.run(model.layer("up1"), data)                # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ._ir_xml import parse_bounded
from ._report import LayerReport, compatible, format_dims, infer_output
from ._safety import (
    DEFAULT_MAX_BYTES,
    InteropError,
    check_bytes,
    check_plan_memory,
    element_count,
    file_size,
    read_bounded,
    require,
)

__all__ = ["IRModel", "Layer", "NotConstantError", "Port", "TRANSPOSED_CONVOLUTIONS", "load"]

#: IR layer type -> the :mod:`convtranspose` function computing it.
TRANSPOSED_CONVOLUTIONS = {
    "ConvolutionBackpropData": "convolution_backprop_data",
    "GroupConvolutionBackpropData": "group_convolution_backprop_data",
}

#: IR element types that can be read from the ``.bin`` (sub-byte types cannot).
ELEMENT_TYPES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8",
    "u64": "uint64", "u32": "uint32", "u16": "uint16", "u8": "uint8", "boolean": "bool",
}

class NotConstantError(InteropError):
    """An input the reader needs is computed at run time, not stored in the ``.bin``."""


# How deep a chain of constant-folding layers (Const -> Convert -> Multiply ...) may be.
_MAX_CONSTANT_DEPTH = 32
_ATTRIBUTES = ("strides", "pads_begin", "pads_end", "dilations", "output_padding")


@dataclass(frozen=True)
class Port:
    """One input or output port of a layer: its id and declared dims (``None`` = dynamic)."""

    id: str
    dims: tuple
    precision: str | None = None


@dataclass(frozen=True)
class Layer:
    """One ``<layer>`` of the IR."""

    id: str
    name: str
    type: str
    attributes: dict
    inputs: tuple
    outputs: tuple

    def describe(self) -> str:
        return f"layer {self.name!r} ({self.type}, id {self.id})"


def _dim(text: str | None, where: str):
    text = (text or "").strip()
    if re.fullmatch(r"-?\d+", text):
        if len(text.lstrip("-")) > 19:  # past int64, and Python refuses > 4300 digits
            raise InteropError(f"{where}: dimension of {len(text.lstrip('-'))} digits does"
                               " not fit in int64")
        value = int(text)
        if value == -1:
            return None
        if value < 0:
            raise InteropError(f"{where}: negative dimension {value}")
        return value
    if text == "?" or re.fullmatch(r"\d*\.\.\d*", text):  # dynamic, or a dynamic interval
        return None
    raise InteropError(f"{where}: dimension {text!r} is not an integer")


def _ints(text: str, where: str) -> tuple[int, ...]:
    text = text.strip()
    if not text:
        return ()
    try:
        return tuple(int(item) for item in text.split(","))
    except ValueError:
        raise InteropError(f"{where}: {text!r} is not a comma-separated list of integers") from None


def _finite(layer: Layer, compute, *operands):
    """``compute()`` with NumPy's floating-point warnings silenced, refused when it
    overflows: finite operands whose result holds an infinity or a NaN.  A weight
    that overflowed would make every output it touches infinite, and NumPy's warning
    would name no layer."""
    import numpy as np

    with np.errstate(all="ignore"):
        value = compute()
    if not_finite(value) and not any(not_finite(operand) for operand in operands):
        raise InteropError(f"{layer.describe()}: the constant overflows {value.dtype}: its"
                           " finite operands give infinities or NaNs")
    return value


def not_finite(array) -> bool:
    """Whether a floating-point ``array`` (bfloat16 and float8 too) holds an infinity or
    a NaN; integers never do."""
    import numpy as np

    if array.dtype.kind in "iub":
        return False
    try:
        return not bool(np.isfinite(array).all())
    except TypeError:  # a dtype without isfinite: raw bytes
        return False


def _ports(element, layer_name: str, kind: str) -> tuple[Port, ...]:
    if element is None:
        return ()
    ports = []
    for port in element.findall("port"):
        port_id = port.get("id")
        if port_id is None:
            raise InteropError(f"layer {layer_name!r}: an {kind} port has no id")
        where = f"layer {layer_name!r} {kind} port {port_id}"
        dims = tuple(_dim(dim.text, where) for dim in port.findall("dim"))
        ports.append(Port(port_id, dims, port.get("precision")))
    return tuple(ports)


class IRModel:
    """A parsed OpenVINO IR: its layers, edges and a bounded reader for its ``.bin``.

    Use :func:`load` to make one.
    """

    def __init__(self, xml_path: str, bin_path: str, layers: dict, edges: dict, max_bytes: int):
        self.xml_path = xml_path
        self.bin_path = bin_path
        self.layers = layers  # id -> Layer, in file order
        self.edges = edges  # (to_layer_id, to_port_id) -> (from_layer_id, from_port_id)
        self.max_bytes = max_bytes
        self._bin_size: int | None = None
        self._constants: dict = {}

    # -- navigation -------------------------------------------------------------

    @property
    def transposed_layers(self) -> list[Layer]:
        """Every ConvolutionBackpropData / GroupConvolutionBackpropData layer, in file order."""
        return [layer for layer in self.layers.values() if layer.type in TRANSPOSED_CONVOLUTIONS]

    def layer(self, name: str) -> Layer:
        """The transposed-convolution layer called ``name`` (or with id ``name``)."""
        candidates = self.transposed_layers
        for layer in candidates:
            if layer.name == name:
                return layer
        for layer in candidates:
            if layer.id == name:
                return layer
        names = ", ".join(repr(layer.name) for layer in candidates[:10])
        more = f" and {len(candidates) - 10} more" if len(candidates) > 10 else ""
        raise InteropError(
            f"no ConvolutionBackpropData or GroupConvolutionBackpropData layer named {name!r}"
            f" in {os.path.basename(self.xml_path)}; its layers are: {names or 'none'}{more}"
        )

    def parameters(self) -> dict:
        """The model's inputs: Parameter name -> (dims, NumPy dtype or ``None`` when
        its element type has none)."""
        inputs = {}
        for layer in self.layers.values():
            if layer.type != "Parameter" or not layer.outputs:
                continue
            try:
                dtype = self._dtype(layer, layer.attributes.get("element_type"))
            except InteropError:
                dtype = None
            inputs[layer.name] = (layer.outputs[0].dims, dtype)
        return inputs

    def producer(self, layer: Layer, index: int) -> tuple[Layer, Port]:
        """The layer and output port feeding input ``index`` of ``layer``."""
        port = layer.inputs[index]
        try:
            from_id, from_port = self.edges[(layer.id, port.id)]
        except KeyError:
            raise InteropError(f"{layer.describe()}: input {index} is not connected") from None
        source = self.layers.get(from_id)
        if source is None:
            raise InteropError(f"an edge into {layer.describe()} comes from a missing layer"
                               f" id {from_id}")
        for output in source.outputs:
            if output.id == from_port:
                return source, output
        raise InteropError(f"an edge into {layer.describe()} comes from a missing port"
                           f" {from_port} of {source.describe()}")

    # -- constants ---------------------------------------------------------------

    def constant(self, layer: Layer, index: int):
        """The value of input ``index`` of ``layer``, folded from Const-only layers.

        Follows ``Const`` -> ``Convert`` (e.g. f16 weights decompressed to f32) and
        the ``Multiply``/``Subtract``/``Add`` of weight-decompression subgraphs.
        """
        source, port = self.producer(layer, index)
        value = self._evaluate(source, 0, f"input {index} of {layer.describe()}")
        if not compatible(port.dims, value.shape):
            raise InteropError(f"{source.describe()} holds shape {value.shape} but its output"
                               f" port declares {format_dims(port.dims)}")
        return value

    def _bin(self) -> int:
        if self._bin_size is None:
            self._bin_size = file_size(self.bin_path, "weights file")
        return self._bin_size

    def _evaluate(self, layer: Layer, depth: int, purpose: str):
        if layer.id in self._constants:
            return self._constants[layer.id]
        if depth > _MAX_CONSTANT_DEPTH:
            raise InteropError(f"{purpose}: the chain of constant layers is deeper than"
                               f" {_MAX_CONSTANT_DEPTH} (a cycle?)")
        import numpy as np

        if layer.type == "Const":
            value = self._read_const(layer)
        elif layer.type == "Convert":
            source, _ = self.producer(layer, 0)
            operand = self._evaluate(source, depth + 1, purpose)
            dtype = self._dtype(layer, layer.attributes.get("destination_type"))
            check_bytes(layer.describe(), operand.size * dtype.itemsize, self.max_bytes)
            value = _finite(layer, lambda: operand.astype(dtype), operand)
        elif layer.type in ("Multiply", "Subtract", "Add") and len(layer.inputs) == 2:
            left = self._evaluate(self.producer(layer, 0)[0], depth + 1, purpose)
            right = self._evaluate(self.producer(layer, 1)[0], depth + 1, purpose)
            try:
                shape = np.broadcast_shapes(left.shape, right.shape)
            except ValueError:
                raise InteropError(f"{layer.describe()}: shapes {left.shape} and {right.shape}"
                                   " do not broadcast") from None
            check_bytes(layer.describe(), element_count(layer.describe(), shape)
                        * max(left.itemsize, right.itemsize), self.max_bytes)
            operation = {"Multiply": np.multiply, "Subtract": np.subtract, "Add": np.add}
            value = _finite(layer, lambda: operation[layer.type](left, right), left, right)
        else:
            raise NotConstantError(
                f"{purpose} is computed by {layer.describe()}; only constants (Const, optionally"
                " through Convert, Multiply, Subtract, Add) can be read from the .bin"
            )
        self._constants[layer.id] = value
        return value

    def _dtype(self, layer: Layer, element_type: str | None):
        import numpy as np

        name = ELEMENT_TYPES.get((element_type or "").lower())
        if name is None:
            raise InteropError(f"{layer.describe()}: element type {element_type!r} is not"
                               f" supported (supported: {', '.join(ELEMENT_TYPES)})")
        if name == "bfloat16":
            return np.dtype(require("ml_dtypes", "bfloat16", "reading bf16 constants").bfloat16)
        return np.dtype(name)

    def _const_layout(self, layer: Layer):
        """A Const's (dtype, shape, offset, size), checked against each other and the .bin."""
        attrs = layer.attributes
        dtype = self._dtype(layer, attrs.get("element_type"))
        where = layer.describe()
        shape = _ints(attrs.get("shape", ""), f"{where} attribute shape")
        count = element_count(f"{where} shape", shape)
        try:
            offset, size = int(attrs["offset"]), int(attrs["size"])
        except (KeyError, ValueError):
            raise InteropError(
                f"{where}: needs integer offset and size attributes, got"
                f" offset={attrs.get('offset')!r} size={attrs.get('size')!r}") from None
        if size != count * dtype.itemsize:
            raise InteropError(f"{where}: size {size} does not match shape {shape} of"
                               f" {attrs.get('element_type')} ({count * dtype.itemsize} bytes)")
        if offset < 0:
            raise InteropError(f"{where}: negative offset {offset}")
        if offset + size > self._bin():
            raise InteropError(
                f"{where}: bytes [{offset}, {offset + size}) lie outside"
                f" {os.path.basename(self.bin_path)} ({self._bin()} bytes); the file is"
                " truncated or the offset is wrong")
        return dtype, shape, offset, size

    def _read_const(self, layer: Layer):
        import numpy as np

        dtype, shape, offset, size = self._const_layout(layer)
        check_bytes(layer.describe(), size, self.max_bytes)
        data = read_bounded(self.bin_path, offset, size, self._bin(), layer.describe())
        return np.frombuffer(data, dtype).reshape(shape)

    def validate_weights(self, layer: Layer) -> None:
        """Check, without reading them, every Const feeding ``layer``'s filter.

        Follows the same Convert/Multiply/Subtract/Add chains as :meth:`constant`;
        weights computed at run time are not an error here.
        """
        pending, seen = [self.producer(layer, 1)[0]], set()
        while pending:
            source = pending.pop()
            if source.id in seen or len(seen) > _MAX_CONSTANT_DEPTH:
                continue
            seen.add(source.id)
            if source.type == "Const":
                self._const_layout(source)
            elif source.type in ("Convert", "Multiply", "Subtract", "Add"):
                pending += [self.producer(source, i)[0] for i in range(len(source.inputs))]

    # -- the two operations --------------------------------------------------------

    def attributes(self, layer: Layer) -> dict:
        """``layer``'s attributes as the :mod:`convtranspose` function computing it takes
        them."""
        attributes = {}
        for key in _ATTRIBUTES:
            if key in layer.attributes:
                values = _ints(layer.attributes[key], f"{layer.describe()} attribute {key}")
                attributes[key] = values or None
        if "auto_pad" in layer.attributes:
            attributes["auto_pad"] = layer.attributes["auto_pad"]
        return attributes

    def plan(self, layer: Layer, data_dims, filter_dims, output_shape, attributes=None):
        """The plan (:mod:`convtranspose.shapes`) of ``layer`` for these input dims and
        spatial ``output_shape`` (``None``: none given)."""
        import convtranspose as ct

        planner = getattr(ct.shapes, TRANSPOSED_CONVOLUTIONS[layer.type])
        if attributes is None:
            attributes = self.attributes(layer)
        return planner(data_dims, filter_dims, output_shape, **attributes)

    def transposed_output(self, layer: Layer, inputs) -> tuple | None:
        """The output dims the transposed-convolution ``layer`` computes from the input
        dims ``inputs`` (a dynamic batch stays dynamic), or ``None`` when they are not
        known or its attributes refuse them."""
        from .._errors import ConvTransposeError

        if len(inputs) not in (2, 3) or inputs[0] is None or inputs[1] is None:
            return None
        data, filter_ = inputs[0], inputs[1]
        if None in data[1:] or None in filter_:
            return None
        output_shape = None
        try:
            if len(inputs) == 3:
                output_shape = tuple(int(v) for v in self.constant(layer, 2).reshape(-1))
            plan = self.plan(layer, (1,) + tuple(data[1:]), filter_, output_shape)
        except (ConvTransposeError, TypeError, ValueError):
            return None
        return (data[0],) + tuple(plan.output_shape[1:])

    def check(self, layer: Layer) -> LayerReport:
        """Recompute ``layer``'s output shape and compare it with the declared one."""
        report = LayerReport(layer.name, layer.type)
        if len(layer.inputs) not in (2, 3) or len(layer.outputs) != 1:
            report.status = "invalid"
            report.reason = f"{len(layer.inputs)} inputs, {len(layer.outputs)} outputs"
            report.problems.append(f"{layer.describe()} has {len(layer.inputs)} inputs and"
                                   f" {len(layer.outputs)} outputs; the op takes 2 or 3 and has 1")
            return report
        data, filter_ = layer.inputs[0].dims, layer.inputs[1].dims
        report.data_shape, report.filter_shape = data, filter_
        report.declared = layer.outputs[0].dims

        for index, name in ((0, "data"), (1, "filter")):
            source, port = self.producer(layer, index)
            if not compatible(port.dims, layer.inputs[index].dims):
                report.status = "mismatch"
                report.reason = (f"{name} input {format_dims(layer.inputs[index].dims)},"
                                 f" its producer's output {format_dims(port.dims)}")
                report.problems.append(
                    f"{layer.describe()}: input {index} ({name}) declares"
                    f" {format_dims(layer.inputs[index].dims)} but its producer"
                    f" {source.describe()} declares {format_dims(port.dims)}")

        self.validate_weights(layer)
        output_shape = None
        if len(layer.inputs) == 3:
            source, _ = self.producer(layer, 2)
            try:
                values = self.constant(layer, 2)
            except NotConstantError:
                report.status = "unchecked"
                report.problems.append(f"{layer.describe()}: output_shape comes from"
                                       f" {source.describe()}, computed at run time: not checked")
                return report
            if values.dtype.kind not in "iu":
                report.status, report.reason = "invalid", f"output_shape is {values.dtype}"
                report.problems.append(f"{layer.describe()}: output_shape has element type"
                                       f" {values.dtype}, must be an integer type")
                return report
            output_shape = tuple(int(v) for v in values.reshape(-1))
            report.output_shape_input = output_shape

        if None in data[1:] or None in filter_:
            if report.status == "ok":
                report.status = "unchecked"
            report.problems.append(f"{layer.describe()}: dynamic input dims {format_dims(data)}"
                                   f" x {format_dims(filter_)}: not checked")
            return report
        for name, dims in (("data", data), ("filter", filter_)):
            element_count(f"{layer.describe()} {name} shape", [d or 1 for d in dims])
        if not infer_output(report, layer.describe(),
                            lambda dims: self.plan(layer, dims, filter_, output_shape), data):
            return report
        from ._conventions import openvino_conventions

        report.conventions = openvino_conventions(
            self.plan(layer, (1,) + tuple(data[1:]), filter_, output_shape), output_shape)
        inferred = report.inferred
        if not compatible(report.declared, inferred):
            report.status = "mismatch"
            report.reason = "; ".join(filter(None, [report.reason,
                                                    "declared output differs from the inferred"]))
            report.problems.append(
                f"{layer.describe()}: declared output {format_dims(report.declared)} but"
                f" inferred {format_dims(inferred)} from data {format_dims(data)}, filter"
                f" {format_dims(filter_)}"
                + ("" if output_shape is None else f", output_shape {format_dims(output_shape)}"))
        return report

    def run(self, layer: Layer, data, filter_=None, output_shape=None):
        """Execute ``layer`` on ``data`` with the model's own weights.

        ``filter_`` and ``output_shape``, when given, replace the model's (for inputs
        computed at run time: the values a runtime gave).

        Returns
        -------
        (ndarray, list of str)
            The output and notes worth telling the user (e.g. a weight cast).
        """
        import numpy as np

        import convtranspose as ct

        notes = []
        declared = layer.inputs[0].dims if layer.inputs else ()
        if not compatible(declared, data.shape):
            raise InteropError(f"data has shape {data.shape} but {layer.describe()} declares"
                               f" input 0 as {format_dims(declared)}")
        if len(layer.inputs) not in (2, 3):
            raise InteropError(f"{layer.describe()} has {len(layer.inputs)} inputs; the op"
                               " takes 2 or 3")
        if filter_ is None:
            filter_ = self.constant(layer, 1)
        if len(layer.inputs) == 2:
            output_shape = None
        else:
            if output_shape is None:
                output_shape = self.constant(layer, 2)
            output_shape = np.asarray(output_shape)
            if output_shape.dtype.kind not in "iu":
                raise InteropError(f"{layer.describe()}: output_shape has element type"
                                   f" {output_shape.dtype}, must be an integer type")
            output_shape = [int(v) for v in output_shape.reshape(-1)]
        if filter_.dtype != data.dtype:
            notes.append(f"weights of {layer.describe()} are {filter_.dtype}; cast to the"
                         f" data's {data.dtype}")
            filter_ = _finite(layer, lambda: filter_.astype(data.dtype), filter_)
        if not_finite(filter_):
            notes.append(f"weights of {layer.describe()} hold infinities or NaNs: so will"
                         " the outputs they reach")
        attributes = self.attributes(layer)
        plan = self.plan(layer, data.shape, filter_.shape, output_shape, attributes)
        check_plan_memory(plan, data.dtype, self.max_bytes)
        function = getattr(ct, TRANSPOSED_CONVOLUTIONS[layer.type])
        result = function(data, np.ascontiguousarray(filter_), output_shape, **attributes)
        if not compatible(layer.outputs[0].dims if layer.outputs else None, result.shape):
            notes.append(f"the result has shape {result.shape} but {layer.describe()} declares"
                         f" {format_dims(layer.outputs[0].dims)} (run `ir check`)")
        return result, notes


def _graph(root, name: str) -> tuple[dict, dict]:
    """The layers (id -> :class:`Layer`, in file order) and edges ((to layer, to port)
    -> (from layer, from port)) of the IR's root element; ``name`` is the file's."""
    layers = {}
    for element in root.iterfind("layers/layer"):
        layer_id, layer_type = element.get("id"), element.get("type")
        layer_name = element.get("name")
        if layer_id is None or layer_type is None:
            raise InteropError(f"{name}: a <layer> lacks its id or type attribute")
        if layer_id in layers:
            raise InteropError(f"{name}: two layers have the id {layer_id}")
        data = element.find("data")
        layer_name = layer_name if layer_name is not None else f"#{layer_id}"
        layers[layer_id] = Layer(
            layer_id, layer_name, layer_type, dict(data.attrib) if data is not None else {},
            _ports(element.find("input"), layer_name, "input"),
            _ports(element.find("output"), layer_name, "output"),
        )
    edges = {}
    for edge in root.iterfind("edges/edge"):
        keys = ("from-layer", "from-port", "to-layer", "to-port")
        values = [edge.get(key) for key in keys]
        if None in values:
            raise InteropError(f"{name}: an <edge> lacks one of {', '.join(keys)}")
        edges[(values[2], values[3])] = (values[0], values[1])
    return layers, edges




def load(xml_path: str, bin_path: str | None = None, *,
         max_bytes: int = DEFAULT_MAX_BYTES, input_shapes: dict | None = None) -> IRModel:
    """Parse an OpenVINO IR ``.xml`` safely; the ``.bin`` is read lazily, bounded.

    Parameters
    ----------
    xml_path : str
        The ``.xml``.
    bin_path : str, optional
        The weights; default: ``xml_path`` with the suffix ``.bin``.
    max_bytes : int, optional
        Limit on the ``.xml`` size and on any single constant or array.
    input_shapes : dict, optional
        ``Parameter`` name -> dims for its dynamic dims; the dims they imply are carried
        through the graph (:mod:`._ir_shapes`).

    Raises
    ------
    InteropError
        Unreadable, unsafe (DTD, entities) or malformed files; an ``input_shapes``
        entry naming no Parameter, of another rank, or changing a static dim.
    MissingDependencyError
        ``defusedxml`` is not installed.
    """
    defused = require("defusedxml", "interop", "reading OpenVINO IR")
    element_tree = require("defusedxml.ElementTree", "interop", "reading OpenVINO IR")
    from xml.etree.ElementTree import ParseError

    file_size(xml_path, "model file", max_bytes)
    if bin_path is None:
        bin_path = os.path.splitext(xml_path)[0] + ".bin"
    name = os.path.basename(xml_path)
    try:
        root = parse_bounded(element_tree, xml_path, max_bytes)
    except defused.DTDForbidden:
        raise InteropError(
            f"{name}: refused: the XML has a document type declaration (<!DOCTYPE>), which"
            " enables entity expansion and external entities; OpenVINO IR never has one"
        ) from None
    except defused.DefusedXmlException as error:
        raise InteropError(f"{name}: refused unsafe XML ({type(error).__name__})") from None
    except ParseError as error:
        raise InteropError(f"{name} is not well-formed XML: {error}") from None
    except OSError as error:
        raise InteropError(f"cannot read {name}: {error.strerror or error}") from None
    if root.tag != "net":
        raise InteropError(f"{name} is not an OpenVINO IR: its root element is <{root.tag}>,"
                           " not <net>")
    version = root.get("version", "")
    if version.isdigit() and int(version) < 10:
        raise InteropError(f"{name} is an IR version {version}; only versions 10 and 11 (OpenVINO"
                           " 2020.1 and later) are supported: re-save it with a current OpenVINO")

    layers, edges = _graph(root, name)
    model = IRModel(xml_path, bin_path, layers, edges, max_bytes)
    if input_shapes:
        from ._ir_shapes import propagate

        model.layers = propagate(model, input_shapes, model.transposed_output)
    return model
