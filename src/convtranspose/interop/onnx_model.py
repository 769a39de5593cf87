"""ONNX models: check and run their ``ConvTranspose`` nodes (needs the ``onnx`` package).

Declared shapes come from the graph's inputs, ``value_info`` and outputs and from
initializer dims; weights and bias from initializers or ``Constant`` nodes.  External
tensor data is read by this module, bounded: its file must lie inside the model's
directory and every offset and length inside that file.

>>> model = load("model.onnx")                                   # doctest: +SKIP
>>> [model.check(node).status for node in model.transposed_nodes]  # doctest: +SKIP
['ok']
"""

from __future__ import annotations

import os

from .._errors import ConvTransposeError
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

__all__ = ["ONNXModel", "load"]

_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
               "output_shape", "pads", "strides")


def _onnx():
    return require("onnx", "interop", "reading ONNX models")


def node_label(node) -> str:
    """A node's name, or its first output's name when it has none."""
    return node.name or (f"<{node.output[0]}>" if node.output else "<unnamed>")


def _describe(node) -> str:
    return f"node {node_label(node)!r} ({node.op_type})"


def _value_info_dims(value_info):
    """Declared dims of a ValueInfoProto (``None`` per symbolic dim), or ``None`` if unknown."""
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return tuple(dim.dim_value if dim.HasField("dim_value") else None
                 for dim in tensor_type.shape.dim)


class ONNXModel:
    """A loaded ONNX model and bounded access to its constants; see :func:`load`."""

    def __init__(self, path: str, model, max_bytes: int):
        self.path = path
        self.model = model
        self.max_bytes = max_bytes
        graph = model.graph
        self.initializers = {tensor.name: tensor for tensor in graph.initializer}
        self.declared = {}
        for value_info in list(graph.input) + list(graph.value_info) + list(graph.output):
            dims = _value_info_dims(value_info)
            if dims is not None:
                self.declared[value_info.name] = dims
        for name, tensor in self.initializers.items():
            self.declared.setdefault(name, tuple(tensor.dims))
        self.constant_nodes = {node.output[0]: node for node in graph.node
                               if node.op_type == "Constant" and node.output}
        self._inferred: dict | None = None

    @property
    def transposed_nodes(self) -> list:
        """Every ConvTranspose node of the main graph, in order."""
        return [node for node in self.model.graph.node
                if node.op_type == "ConvTranspose" and node.domain in ("", "ai.onnx")]

    def node(self, name: str):
        """The ConvTranspose node called ``name`` (or whose first output is ``name``)."""
        nodes = self.transposed_nodes
        for node in nodes:
            if node.name == name:
                return node
        for node in nodes:
            if node.output and node.output[0] == name:
                return node
        names = ", ".join(repr(node_label(node)) for node in nodes[:10])
        more = f" and {len(nodes) - 10} more" if len(nodes) > 10 else ""
        raise InteropError(f"no ConvTranspose node named {name!r} in"
                           f" {os.path.basename(self.path)}; its nodes are:"
                           f" {names or 'none'}{more}")

    # -- shapes and constants --------------------------------------------------------

    def _shape(self, name: str):
        """Declared dims of a tensor, else what ONNX shape inference derives, else None."""
        if name in self.declared:
            return self.declared[name]
        if self._inferred is None:
            self._inferred = {}
            try:
                inferred = _onnx().shape_inference.infer_shapes(self.model)
                graph = inferred.graph  # inferred shapes land in value_info or the outputs
                for value_info in list(graph.value_info) + list(graph.output):
                    dims = _value_info_dims(value_info)
                    if dims is not None:
                        self._inferred[value_info.name] = dims
            except Exception:  # noqa: BLE001 - inference is a best-effort fallback only
                pass
        return self._inferred.get(name)

    def constant(self, name: str, purpose: str):
        """The value of an initializer or Constant node output, read with bounds checks."""
        onnx = _onnx()
        if name in self.initializers:
            return self._tensor(self.initializers[name], f"initializer {name!r}")
        node = self.constant_nodes.get(name)
        if node is not None:
            for attribute in node.attribute:
                if attribute.name == "value":
                    return self._tensor(attribute.t, f"Constant {name!r}")
            import numpy as np

            for attribute in node.attribute:
                if attribute.name in ("value_float", "value_floats", "value_int", "value_ints"):
                    value = onnx.helper.get_attribute_value(attribute)
                    dtype = np.float32 if "float" in attribute.name else np.int64
                    return np.asarray(value, dtype)
        raise InteropError(f"{purpose} is {name!r}, which is neither an initializer nor a"
                           " Constant node: its value is only known at run time")

    def _tensor(self, tensor, what: str):
        import numpy as np

        onnx = _onnx()
        dims = tuple(tensor.dims)
        count = element_count(f"{what} shape", dims)
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
        except (KeyError, ValueError, TypeError):
            raise InteropError(f"{what} has an unsupported data type {tensor.data_type}") from None
        check_bytes(what, count * dtype.itemsize, self.max_bytes)
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return self._external(tensor, dims, count, dtype, what)
        try:
            return onnx.numpy_helper.to_array(tensor)
        except Exception as error:  # noqa: BLE001 - onnx raises many types on bad tensors
            raise InteropError(f"{what} cannot be decoded: {error}") from None

    def _external(self, tensor, dims, count, dtype, what):
        import numpy as np

        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location")
        if not location:
            raise InteropError(f"{what}: external data without a location")
        base = os.path.realpath(os.path.dirname(os.path.abspath(self.path)))
        target = os.path.realpath(os.path.join(base, location))
        if os.path.isabs(location) or os.path.commonpath([base, target]) != base:
            raise InteropError(f"{what}: external data location {location!r} lies outside the"
                               " model's directory; refused")
        size = file_size(target, f"external data file of {what}")
        try:
            offset = int(entries.get("offset", 0))
            length = int(entries.get("length", count * dtype.itemsize))
        except ValueError:
            raise InteropError(f"{what}: external data offset/length are not integers") from None
        if length != count * dtype.itemsize:
            raise InteropError(f"{what}: external data length {length} does not match dims"
                               f" {dims} of {dtype} ({count * dtype.itemsize} bytes)")
        data = read_bounded(target, offset, length, size, what)
        return np.frombuffer(data, dtype).reshape(dims)

    # -- the two operations ---------------------------------------------------------------

    def _attributes(self, node) -> dict:
        onnx = _onnx()
        attributes = {}
        for attribute in node.attribute:
            if attribute.name not in _ATTRIBUTES:
                raise ConvTransposeError(f"unknown ConvTranspose attribute {attribute.name!r}")
            value = onnx.helper.get_attribute_value(attribute)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            attributes[attribute.name] = value
        return attributes

    def _inputs(self, node):
        names = list(node.input) + [""] * 3
        if not names[0] or not names[1]:
            raise InteropError(f"{_describe(node)} lacks its X or W input")
        return names[0], names[1], names[2] or None

    def check(self, node) -> LayerReport:
        """Recompute ``node``'s output shape and compare it with the declared one."""
        import convtranspose as ct

        report = LayerReport(node_label(node), node.op_type)
        try:
            x_name, w_name, b_name = self._inputs(node)
        except InteropError as error:
            report.status = "invalid"
            report.problems.append(str(error))
            return report
        data, filter_ = self._shape(x_name), self._shape(w_name)
        bias = self._shape(b_name) if b_name else None
        report.data_shape, report.filter_shape = data, filter_
        report.declared = self.declared.get(node.output[0]) if node.output else None
        try:
            attributes = self._attributes(node)
        except ConvTransposeError as error:
            report.status = "invalid"
            report.problems.append(f"{_describe(node)}: {error}")
            return report
        if attributes.get("output_shape") is not None:
            report.output_shape_input = tuple(attributes["output_shape"])
        unknown = [name for name, dims in ((x_name, data), (w_name, filter_)) if dims is None]
        unknown_bias = b_name is not None and (bias is None or None in bias)
        if unknown or None in data[1:] or None in filter_ or unknown_bias:
            report.status = "unchecked"
            report.problems.append(
                f"{_describe(node)}: input shapes unknown or dynamic (X {format_dims(data)},"
                f" W {format_dims(filter_)}): not checked")
            return report
        for name, dims in ((x_name, data), (w_name, filter_)):
            element_count(f"{_describe(node)} input {name!r} shape", [d or 1 for d in dims])
        if not infer_output(report, _describe(node), lambda dims: ct.shapes.onnx_conv_transpose(
                dims, filter_, bias, **attributes), data):
            return report
        from ._conventions import onnx_conventions

        report.conventions = onnx_conventions(
            ct.shapes.onnx_conv_transpose((1,) + tuple(data[1:]), filter_, bias, **attributes),
            attributes)
        inferred = report.inferred
        if report.declared is None:
            report.problems.append(f"{_describe(node)}: the model declares no shape for its"
                                   f" output {node.output[0]!r}; inferred {format_dims(inferred)}")
        elif not compatible(report.declared, inferred):
            report.status = "mismatch"
            report.problems.append(
                f"{_describe(node)}: declared output {format_dims(report.declared)} but inferred"
                f" {format_dims(inferred)} from X {format_dims(data)}, W {format_dims(filter_)}")
        return report

    def run(self, node, data):
        """Execute ``node`` on ``data`` with the model's own weights and bias.

        Returns
        -------
        (ndarray, list of str)
            The output and notes for the user.
        """
        import convtranspose as ct

        notes = []
        x_name, w_name, b_name = self._inputs(node)
        declared = self._shape(x_name)
        if not compatible(declared, data.shape):
            raise InteropError(f"data has shape {data.shape} but {_describe(node)} declares its"
                               f" input {x_name!r} as {format_dims(declared)}")
        weights = self.constant(w_name, f"the weights W of {_describe(node)}")
        bias = self.constant(b_name, f"the bias B of {_describe(node)}") if b_name else None
        for label, array in (("W", weights), ("B", bias)):
            if array is not None and array.dtype != data.dtype:
                notes.append(f"{label} of {_describe(node)} is {array.dtype}; cast to the data's"
                             f" {data.dtype}")
        weights = weights.astype(data.dtype, copy=False)
        bias = None if bias is None else bias.astype(data.dtype, copy=False)
        attributes = self._attributes(node)
        plan = ct.shapes.onnx_conv_transpose(data.shape, weights.shape,
                                             None if bias is None else bias.shape, **attributes)
        check_plan_memory(plan, data.dtype, self.max_bytes)
        result = ct.onnx_conv_transpose(data, weights, bias, **attributes)
        declared_output = self.declared.get(node.output[0]) if node.output else None
        if not compatible(declared_output, result.shape):
            notes.append(f"the result has shape {result.shape} but the model declares"
                         f" {format_dims(declared_output)} (run `onnx check`)")
        return result, notes


def load(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ONNXModel:
    """Load an ONNX model without its external data (read later, bounded).

    Raises
    ------
    InteropError
        Unreadable or malformed files, or files over ``max_bytes``.
    MissingDependencyError
        ``onnx`` is not installed.
    """
    onnx = _onnx()
    file_size(path, "model file", max_bytes)
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as error:  # noqa: BLE001 - protobuf raises DecodeError, RuntimeError ...
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InteropError(
            f"{os.path.basename(path)} is not a readable ONNX model: {reason}") from None
    return ONNXModel(path, model, max_bytes)
