"""ONNX models: check and run their ``ConvTranspose`` nodes (needs the ``onnx`` package).

The nodes are found in the main graph, in the subgraphs of ``If``, ``Loop`` and
``Scan`` and in model-local functions (:mod:`._onnx_graphs`).  Declared shapes come
from each graph's inputs, ``value_info`` and outputs and from initializer dims (a
function body takes its call's); weights and bias from initializers or ``Constant``
nodes, followed through ``DequantizeLinear``, ``Cast``, ``Reshape`` and ``Identity``
(:mod:`._onnx_constants`).  A ConvTranspose in the QDQ pattern (DequantizeLinear
before, QuantizeLinear after) and a ``com.microsoft.QLinearConvTranspose`` node are
computed on their quantized input by :func:`convtranspose.qlinear_conv_transpose`
(:mod:`._onnx_quantized`).  External tensor data is read by this module, bounded: its
file must lie inside the model's directory and every offset and length inside that
file.

>>> model = load("model.onnx")                                   # doctest: +SKIP
>>> [model.check(node).status for node in model.transposed_nodes]  # doctest: +SKIP
['ok']
"""

from __future__ import annotations

import os

import numpy as np

from .._errors import ConvTransposeError
from ._onnx_constants import fold
from ._onnx_graphs import (
    LocatedNode,
    Scope,
    check_node_count,
    value_info_dims,
    visit_limit,
    walk_model,
)
from ._onnx_graphs import node_label as _plain_label
from ._onnx_quantized import (
    QLINEAR,
    NotFollowed,
    QuantizedLayer,
    follow,
    is_qlinear,
    looks_quantized,
)
from ._report import (
    LayerReport,
    compatible,
    format_dims,
    given_input_shape,
    infer_output,
    merge_dims,
)
from ._safety import (
    DEFAULT_MAX_BYTES,
    InteropError,
    check_bytes,
    check_plan_memory,
    element_count,
    file_size,
    open_regular,
    read_bounded,
    require,
)

__all__ = ["ONNXModel", "load"]

_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
               "output_shape", "pads", "strides")
# The attribute types each takes (onnx.AttributeProto: INT 2, STRING 3, INTS 7; a lone
# INT stands for a list of one): a tensor or a graph where ints belong is refused by its
# type's name, not printed whole.
_ATTRIBUTE_TYPES = {name: (7, 2) for name in _ATTRIBUTES} | {"group": (2,), "auto_pad": (3,)}


def _onnx():
    return require("onnx", "interop", "reading ONNX models")


def node_label(node) -> str:
    """A node's name (or its first output's name when it has none), prefixed by the path
    of its subgraph or function outside the main graph."""
    return node.label if isinstance(node, LocatedNode) else _plain_label(node)


#: The ``metadata_props`` key where ``torch.onnx.export(dynamo=True)`` records a node's
#: module path: ``repr`` of a list of cumulative scopes, ``''`` (the root module) first
#: and the node's own name last, e.g. ``"['', 'decoder', 'decoder.up', 'convolution']"``.
TORCH_NAME_SCOPES = "pkg.torch.onnx.name_scopes"


def torch_module(node) -> str | None:
    """The PyTorch module a node was exported from (``decoder.up``), or None when the
    model does not record it (or the record is not a list of strings).  The value is
    read by :func:`ast.literal_eval`, which evaluates literals only."""
    import ast

    for prop in node.metadata_props:
        if prop.key != TORCH_NAME_SCOPES:
            continue
        try:
            scopes = ast.literal_eval(prop.value[:10_000])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            return None
        modules = [s for s in scopes[:-1] if s]  # the last entry is the node's own name
        return modules[-1] if modules else None
    return None


def _describe(item) -> str:
    return f"node {node_label(item)!r} ({_node_of(item).op_type})"


def _node_of(item):
    return item.node if isinstance(item, LocatedNode) else item


class ONNXModel:
    """A loaded ONNX model and bounded access to its constants; see :func:`load`."""

    def __init__(self, path: str, model, max_bytes: int, input_shapes: dict | None = None):
        self.path = path
        self.model = _with_input_shapes(model, input_shapes) if input_shapes else model
        self.max_bytes = max_bytes
        self._located, self._scopes = walk_model(self.model, max_visits=visit_limit(max_bytes),
                                                 contrib=(QLINEAR,))
        self.main = self._scopes[""]
        self.initializers = self.main.initializers
        self.declared = self.main.declared
        self._inferred: dict | None = None

    @property
    def transposed_nodes(self) -> list[LocatedNode]:
        """Every ConvTranspose node: the main graph's, its subgraphs' (``If``, ``Loop``,
        ``Scan``) and its model-local functions' (once per call), in order."""
        return [item for item in self._located if not is_qlinear(item.node)]

    @property
    def layer_nodes(self) -> list[LocatedNode]:
        """:attr:`transposed_nodes` and the ``com.microsoft.QLinearConvTranspose`` nodes,
        in the model's order: what ``check`` and ``run`` take."""
        return list(self._located)

    def node(self, name: str) -> LocatedNode:
        """The ConvTranspose or QLinearConvTranspose node called ``name``: its label (with
        the path of its subgraph or function), its name, or its first output's name; the
        first match."""
        nodes = self.layer_nodes
        for matches in (lambda item: item.label == name, lambda item: item.node.name == name,
                        lambda item: bool(item.node.output) and item.node.output[0] == name):
            for item in nodes:
                if matches(item):
                    return item
        names = ", ".join(repr(node_label(node)) for node in nodes[:10])
        more = f" and {len(nodes) - 10} more" if len(nodes) > 10 else ""
        raise InteropError(f"no ConvTranspose node named {name!r} in"
                           f" {os.path.basename(self.path)}; its nodes are:"
                           f" {names or 'none'}{more}")

    # -- shapes and constants --------------------------------------------------------

    def _shape(self, name: str, scope: Scope | None = None):
        """Declared dims of a tensor in ``scope`` (default: the main graph), their
        dynamic dims filled in where ONNX shape inference knows them (from the dims
        ``--input-shape`` gave); undeclared, what inference derives; else None."""
        scope = scope or self.main
        declared = scope.declared.get(name)
        if declared is not None and None not in declared:
            return declared
        if self._inferred is None:
            self._inferred = {}
            try:  # inferred shapes land in each (sub)graph's value_info or outputs
                inferred = _onnx().shape_inference.infer_shapes(self.model)
                self._inferred = {path: inner.declared
                                  for path, inner in walk_model(
                                      inferred, max_visits=visit_limit(self.max_bytes))[1].items()}
            except Exception:  # noqa: BLE001 - inference is a best-effort fallback only
                pass
        inferred = self._inferred.get(scope.path, {}).get(name)
        if declared is not None:  # a dynamic dim inference resolved (an --input-shape)
            return merge_dims(declared, inferred)
        return inferred if inferred is not None else scope.constant_dims(name)

    def graph_inputs(self) -> dict:
        """The main graph's inputs fed at run time (initializers excluded): name ->
        (declared dims or ``None``, NumPy dtype or ``None`` when NumPy has none)."""
        import numpy as np

        onnx = _onnx()
        inputs = {}
        for value in self.model.graph.input:
            if value.name in self.initializers:
                continue
            try:
                dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
                    value.type.tensor_type.elem_type))
            except (KeyError, ValueError, TypeError):
                dtype = None
            inputs[value.name] = (self.main.declared.get(value.name), dtype)
        return inputs

    def constant(self, name: str, purpose: str, scope: Scope | None = None,
                 notes: list | None = None):
        """The value of a constant tensor of ``scope`` (default: the main graph): an
        initializer or Constant, or computed from them by the operators
        :mod:`._onnx_constants` follows; read with bounds checks.  ``notes`` receives
        one line per operator followed."""
        return fold(name, scope or self.main, self.read_tensor, self.max_bytes, purpose,
                    [] if notes is None else notes)

    def read_tensor(self, tensor, what: str):
        """The value of the TensorProto ``tensor`` (``what`` names it in errors), its
        external data read with bounds checks."""
        import numpy as np

        onnx = _onnx()
        dims = tuple(tensor.dims)
        count = element_count(f"{what} shape", dims)
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
        except (KeyError, ValueError, TypeError):
            raise InteropError(f"{what} has an unsupported data type {tensor.data_type}") from None
        if dtype.kind == "O":  # STRING: no operand or constant the layers read holds text
            raise InteropError(f"{what} holds strings (ONNX STRING); the operands and"
                               f" constants of a ConvTranspose layer are numbers")
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
        if "\0" in location:  # no file name holds one; the system calls refuse it
            raise InteropError(f"{what}: external data location {location!r} holds a NUL"
                               " byte; refused")
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

    def attributes(self, node, scope: Scope | None = None) -> dict:
        """The ConvTranspose ``node``'s attributes as :func:`convtranspose.onnx_conv_transpose`
        takes them (in a function body, ``scope`` gives the call's values)."""
        onnx = _onnx()
        attributes = {}
        for attribute in node.attribute:
            if attribute.name not in _ATTRIBUTES:
                raise ConvTransposeError(f"unknown ConvTranspose attribute {attribute.name!r}")
            if attribute.ref_attr_name:  # in a function: the call's value, else the default
                referred = (scope.call_attributes if scope else {}).get(attribute.ref_attr_name)
                if referred is None:
                    continue
                attribute_type, value = referred.type, onnx.helper.get_attribute_value(referred)
            else:
                attribute_type = attribute.type
                value = onnx.helper.get_attribute_value(attribute)
            if attribute_type not in _ATTRIBUTE_TYPES[attribute.name]:
                names = onnx.AttributeProto.AttributeType
                got = names.Name(attribute_type) if attribute_type in names.values() else "?"
                raise ConvTransposeError(
                    f"attribute {attribute.name!r} must be of type"
                    f" {names.Name(_ATTRIBUTE_TYPES[attribute.name][0])}, got {got}")
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            attributes[attribute.name] = value
        return attributes

    def _inputs(self, item: LocatedNode):
        """The names of the data, weights and bias (or None) of the node ``item``
        (QLinearConvTranspose: ``x``, ``w`` and ``B``, inputs 0, 3 and 8)."""
        names = list(item.node.input) + [""] * 9
        x, w, b = (0, 3, 8) if is_qlinear(item.node) else (0, 1, 2)
        if not names[x] or not names[w]:
            raise InteropError(f"{_describe(item)} lacks its X or W input")
        return names[x], names[w], names[b] or None

    def quantized(self, item) -> QuantizedLayer | None:
        """The quantized layer of node ``item`` (:mod:`._onnx_quantized`): its
        QLinearConvTranspose operands, or the QDQ pattern around a ConvTranspose; None
        for a ConvTranspose with no DequantizeLinear or QuantizeLinear around it.

        Raises
        ------
        NotFollowed
            A QDQ pattern or QLinearConvTranspose that cannot be computed exactly: why.
        """
        item = self._locate(item)
        if not is_qlinear(item.node) and not looks_quantized(item.node, item.scope):
            return None
        return follow(item.node, item.scope,
                      lambda name, purpose: self.constant(name, purpose, item.scope))

    def _locate(self, item) -> LocatedNode:
        """``item`` as a located node (a bare NodeProto is one of the main graph)."""
        return item if isinstance(item, LocatedNode) else LocatedNode(item, self.main)

    def check(self, item) -> LayerReport:
        """Recompute the node's output shape and compare it with the declared one; for a
        quantized layer, say what is followed around it (:meth:`quantized`)."""
        item = self._locate(item)
        report = self._check_shapes(item)
        self._check_quantization(item, report)
        return report

    def _check_quantization(self, item: LocatedNode, report: LayerReport) -> None:
        """Record on ``report`` the quantized layer of ``item`` (its dialect in ``op``, a
        note, ``quantization``) or why ``onnx run`` cannot compute it exactly."""
        import convtranspose as ct

        qlinear = is_qlinear(item.node)
        try:
            layer = self.quantized(item)
        except NotFollowed as why:
            what = ("onnx run cannot compute it" if qlinear else
                    "QDQ pattern not followed; onnx run computes the ConvTranspose alone, in"
                    " float, from the dequantized float input")
            report.problems.append(f"{_describe(item)}: {what}: {why}")
            report.quantization = {"dialect": "QDQ" if not qlinear else
                                   f"com.microsoft.{QLINEAR}", "followed": False,
                                   "reason": str(why)}
            return
        if layer is None:
            return
        report.op = QLINEAR if qlinear else "ConvTranspose (QDQ)"
        report.quantization = layer.to_dict() | {"followed": True}
        report.problems.append(f"{_describe(item)}: {layer.describe()}; onnx run computes it"
                               f" exactly with qlinear_conv_transpose from {layer.x!r}")
        data, ops = report.data_shape, layer.operands
        if qlinear and data is not None and None not in data and report.status == "ok":
            try:  # the quantization operands' shapes, beyond the geometry checked already
                ct.shapes.qlinear_conv_transpose(
                    data, *(np.shape(ops[key]) for key in _QLINEAR_OPERANDS),
                    None if ops["B"] is None else ops["B"].shape,
                    **self.attributes(item.node, item.scope))
            except ConvTransposeError as error:
                report.status, report.reason = "invalid", "its quantization operands (see below)"
                report.problems.append(f"{_describe(item)}: {error}")

    def _check_shapes(self, item: LocatedNode) -> LayerReport:
        """:meth:`check` of the node's geometry."""
        import convtranspose as ct

        node, scope = item.node, item.scope
        report = LayerReport(item.label, node.op_type, module=torch_module(node))
        try:
            x_name, w_name, b_name = self._inputs(item)
        except InteropError as error:
            report.status, report.reason = "invalid", "its inputs (see below)"
            report.problems.append(str(error))
            return report
        data, filter_ = self._shape(x_name, scope), self._shape(w_name, scope)
        bias = self._shape(b_name, scope) if b_name else None
        report.data_shape, report.filter_shape = data, filter_
        report.declared = scope.declared.get(node.output[0]) if node.output else None
        try:
            attributes = self.attributes(node, scope)
        except ConvTransposeError as error:
            report.status, report.reason = "invalid", "its attributes (see below)"
            report.problems.append(f"{_describe(item)}: {error}")
            return report
        if attributes.get("output_shape") is not None:
            report.output_shape_input = tuple(attributes["output_shape"])
        unknown = [name for name, dims in ((x_name, data), (w_name, filter_)) if dims is None]
        unknown_bias = b_name is not None and (bias is None or None in bias)
        if unknown or None in data[1:] or None in filter_ or unknown_bias:
            report.status = "unchecked"
            report.problems.append(
                f"{_describe(item)}: input shapes unknown or dynamic (X {format_dims(data)},"
                f" W {format_dims(filter_)}): not checked")
            return report
        for name, dims in ((x_name, data), (w_name, filter_)):
            element_count(f"{_describe(item)} input {name!r} shape", [d or 1 for d in dims])
        if not infer_output(report, _describe(item), lambda dims: ct.shapes.onnx_conv_transpose(
                dims, filter_, bias, **attributes), data):
            return report
        from ._conventions import onnx_conventions

        report.conventions = onnx_conventions(
            ct.shapes.onnx_conv_transpose((1,) + tuple(data[1:]), filter_, bias, **attributes),
            attributes)
        inferred = report.inferred
        if report.declared is None:
            report.problems.append(f"{_describe(item)}: the model declares no shape for its"
                                   f" output {node.output[0]!r}; inferred {format_dims(inferred)}")
        elif not compatible(report.declared, inferred):
            report.status = "mismatch"
            report.reason = "declared output differs from the inferred"
            report.problems.append(
                f"{_describe(item)}: declared output {format_dims(report.declared)} but inferred"
                f" {format_dims(inferred)} from X {format_dims(data)}, W {format_dims(filter_)}")
        return report

    def run(self, item, data, weights=None, bias=None):
        """Execute the node ``item`` on ``data`` with the model's own weights and bias.

        ``weights`` and ``bias``, when given, replace the model's (for a node whose W or
        B is computed at run time: the values a runtime gave).

        Returns
        -------
        (ndarray, list of str)
            The output and notes for the user.
        """
        import convtranspose as ct

        item = self._locate(item)
        node, scope = item.node, item.scope
        notes: list[str] = []
        if weights is None and bias is None:
            quantized = self._quantized_run(item, data, notes)
            if quantized is not None:
                return quantized, notes
        x_name, w_name, b_name = self._inputs(item)
        declared = self._shape(x_name, scope)
        if not compatible(declared, data.shape):
            raise InteropError(f"data has shape {data.shape} but {_describe(item)} declares its"
                               f" input {x_name!r} as {format_dims(declared)}")
        if weights is None:
            weights = self.constant(w_name, f"the weights W of {_describe(item)}", scope, notes)
        if bias is None and b_name:
            bias = self.constant(b_name, f"the bias B of {_describe(item)}", scope, notes)
        for label, array in (("W", weights), ("B", bias)):
            if array is not None and array.dtype != data.dtype:
                notes.append(f"{label} of {_describe(item)} is {array.dtype}; cast to the data's"
                             f" {data.dtype}")
        weights = weights.astype(data.dtype, copy=False)
        bias = None if bias is None else bias.astype(data.dtype, copy=False)
        attributes = self.attributes(node, scope)
        plan = ct.shapes.onnx_conv_transpose(data.shape, weights.shape,
                                             None if bias is None else bias.shape, **attributes)
        check_plan_memory(plan, data.dtype, self.max_bytes)
        result = ct.onnx_conv_transpose(data, weights, bias, **attributes)
        declared_output = scope.declared.get(node.output[0]) if node.output else None
        if not compatible(declared_output, result.shape):
            notes.append(f"the result has shape {result.shape} but the model declares"
                         f" {format_dims(declared_output)} (run `onnx check`)")
        return result, notes

    def _quantized_run(self, item: LocatedNode, data, notes: list):
        """The quantized layer's output computed from ``data`` (its quantized input), or
        None to compute the ConvTranspose alone in float: the node is no QDQ pattern,
        or ``data`` is float (a note says what it computes and how to get the other).

        Quantized data meets a QDQ pattern that cannot be followed, or any data a
        QLinearConvTranspose that cannot be computed: an InteropError saying why.
        """
        quantized_data = data.dtype.kind in "iu"
        try:
            layer = self.quantized(item)
        except NotFollowed as why:
            if is_qlinear(item.node):
                raise InteropError(f"{_describe(item)} cannot be computed: {why}") from None
            if quantized_data:
                raise InteropError(
                    f"{_describe(item)}: its QDQ pattern cannot be followed ({why}); give"
                    " the dequantized float input to compute the ConvTranspose alone in"
                    " float") from None
            notes.append(f"{_describe(item)}: QDQ pattern not followed ({why}): computed the"
                         " ConvTranspose alone in float")
            return None
        if layer is None:
            return None
        if not quantized_data and not is_qlinear(item.node):
            notes.append(f"{_describe(item)} is the ConvTranspose of a QDQ pattern; given"
                         f" {data.dtype} data it is computed alone in float (its dequantized"
                         f" output); give the quantized input {layer.x!r} to get the output"
                         f" {layer.y!r} of the QuantizeLinear")
            return None
        return self._run_quantized(item, layer, data, notes)

    def _run_quantized(self, item: LocatedNode, layer: QuantizedLayer, data, notes: list):
        """``qlinear_conv_transpose`` of ``layer`` on the quantized input ``data``."""
        import convtranspose as ct

        ops = dict(layer.operands)
        if ops["x_zero_point"] is None:  # DequantizeLinear's default: zero of x's type
            ops["x_zero_point"] = np.zeros((), data.dtype)
        if data.dtype != ops["x_zero_point"].dtype:
            raise InteropError(f"data is {data.dtype} but {_describe(item)} takes the"
                               f" quantized input {layer.x!r} of {ops['x_zero_point'].dtype}")
        declared = self._shape(layer.x, item.scope)
        if not compatible(declared, data.shape):
            raise InteropError(f"data has shape {data.shape} but {_describe(item)} declares its"
                               f" quantized input {layer.x!r} as {format_dims(declared)}")
        attributes = self.attributes(item.node, item.scope)
        bias = ops.pop("B")
        shapes = [np.shape(ops[key]) for key in _QLINEAR_OPERANDS]
        plan = ct.shapes.qlinear_conv_transpose(
            data.shape, *shapes, None if bias is None else bias.shape, **attributes)
        # The exact sum runs in float64 or int64 (8 bytes an element), not the data's type.
        check_plan_memory(plan, np.dtype(np.float64), self.max_bytes)
        result = ct.qlinear_conv_transpose(data, *(ops[key] for key in _QLINEAR_OPERANDS),
                                           bias, **attributes)
        notes.append(f"{_describe(item)}: {layer.describe()}; computed exactly with"
                     " qlinear_conv_transpose")
        declared_output = item.scope.declared.get(layer.y)
        if not compatible(declared_output, result.shape):
            notes.append(f"the result has shape {result.shape} but the model declares"
                         f" {format_dims(declared_output)} (run `onnx check`)")
        return result


#: The operands of ``qlinear_conv_transpose`` after ``x``, in its order (``B`` last).
_QLINEAR_OPERANDS = ("x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
                     "y_zero_point")


def _with_input_shapes(model, input_shapes: dict):
    """A copy of ``model`` whose graph inputs have the dims ``input_shapes`` gives (name
    -> dims; only dynamic dims may change), so that shape inference reaches further."""
    onnx = _onnx()
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    inputs = {value.name: value for value in copy.graph.input}
    initializers = {tensor.name for tensor in copy.graph.initializer}
    feedable = [name for name in inputs if name not in initializers]
    for name, dims in input_shapes.items():
        if name not in feedable:
            raise InteropError(f"--input-shape {name}=...: the model has no input {name!r};"
                               f" its inputs are: {', '.join(feedable) or 'none'}")
        shape = inputs[name].type.tensor_type.shape
        declared = value_info_dims(inputs[name]) or (None,) * len(dims)
        dims = given_input_shape(name, declared, dims)
        shape.ClearField("dim")
        for dim in dims:
            shape.dim.add().dim_value = dim
    return copy


def load(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES,
         input_shapes: dict | None = None) -> ONNXModel:
    """Load an ONNX model without its external data (read later, bounded).

    ``input_shapes`` (input name -> dims) gives the dynamic dims of graph inputs; the
    shapes inside the graph are then inferred from them (:mod:`onnx.shape_inference`).

    Raises
    ------
    InteropError
        Unreadable or malformed files, or files over ``max_bytes``; an
        ``input_shapes`` entry naming no input, of another rank, or changing a
        static dim.
    MissingDependencyError
        ``onnx`` is not installed.
    """
    onnx = _onnx()
    if file_size(path, "model file", max_bytes) == 0:
        raise InteropError(f"{os.path.basename(path)} is empty (0 bytes), not an ONNX model")
    try:
        with open_regular(path, "model file") as file:  # the name may be a FIFO by now
            model = onnx.load_model_from_string(file.read())  # external data: not loaded
    except InteropError:
        raise
    except Exception as error:  # noqa: BLE001 - protobuf raises DecodeError, RuntimeError ...
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InteropError(
            f"{os.path.basename(path)} is not a readable ONNX model: {reason}") from None
    if not model.HasField("graph"):  # protobuf reads many non-model bytes as an empty message
        raise InteropError(f"{os.path.basename(path)} is not an ONNX model: it holds no graph")
    check_node_count(model, max_bytes, os.path.basename(path))  # before any per-node work
    return ONNXModel(path, model, max_bytes, input_shapes)
