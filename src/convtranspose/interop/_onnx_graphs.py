"""Where the ``ConvTranspose`` nodes of an ONNX model are, and what each one can see.

A node may sit in the main graph, in a subgraph (the branches of ``If``, the bodies of
``Loop`` and ``Scan``, at any depth) or in a model-local function.  Each place is a
:class:`Scope`: the declared shapes, initializers and producing nodes visible there
(a subgraph sees its own and every enclosing graph's), a path naming it in reports
(``"cond/then_branch"``) and, in a function, the attributes of the call.

A function body declares no shapes of its own inputs and outputs, so it is walked
once per call: its inputs and outputs take the caller's shapes.  A function no node
calls is walked once with nothing known (its nodes are reported unchecked).

The walk is bounded, as the model comes from anywhere: a function that calls itself
(directly or through others) is refused, and so is a model whose walk would visit
more than :data:`MAX_SCOPES` scopes (graphs and function calls: 30 functions each
calling the next twice make 2**30) or more than :data:`MAX_VISITS` nodes and names
(every call of a function visits its body again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._safety import InteropError

__all__ = ["CONTRIB_DOMAIN", "MAX_SCOPES", "MAX_VISITS", "LocatedNode", "Scope",
           "check_node_count", "located_nodes", "node_label", "value_info_dims", "visit_limit",
           "walk_model"]

#: onnxruntime's operator domain (``com.microsoft.QLinearConvTranspose``).
CONTRIB_DOMAIN = "com.microsoft"
_GRAPH, _GRAPHS = 5, 10  # onnx.AttributeProto.GRAPH and GRAPHS
_MAX_DEPTH = 32  # nesting of subgraphs and function calls followed; deeper is malformed
#: The most scopes (the main graph, each subgraph, each call of a function) one walk makes.
MAX_SCOPES = 50_000
#: The most nodes visited and names copied into scopes in one walk (a few seconds):
#: every subgraph copies the names its enclosing graphs make visible.
MAX_VISITS = 50_000_000
#: What one node of a model costs in memory while it is walked and checked, at least:
#: a ConvTranspose node took about 3.3 kB (100 000 of them, a 3.9 MB file, peaked at
#: 376 MB in ``onnx check``), so a model may hold the memory limit divided by this many
#: nodes (initializers and function bodies' nodes counted too) ...
BYTES_PER_NODE = 4096
#: ... or this many, whichever is more: a limit of a few kilobytes, meant for the
#: constants, still reads a model's structure.
MIN_NODES = 10_000
#: A walk's visits (a name copied into a scope, a node visited) take at least this many
#: bytes each, so the memory limit allows that many visits (up to :data:`MAX_VISITS`) ...
_BYTES_PER_VISIT = 64
#: ... or this many, whichever is more.
_MIN_VISITS = 1_000_000


def check_node_count(model, max_bytes: int, file_name: str) -> None:
    """Refuse a model with more nodes than ``max_bytes`` allows (:data:`BYTES_PER_NODE`,
    :data:`MIN_NODES`), before any per-node structure is built.  The count is the main
    graph's nodes and initializers and every function's nodes (lengths, no node read);
    the nodes of subgraphs are bounded by the walk's visits (:func:`visit_limit`)."""
    limit = max(MIN_NODES, max_bytes // BYTES_PER_NODE)
    graph = model.graph
    count = len(graph.node) + len(graph.initializer) + sum(
        len(function.node) for function in model.functions)
    if count > limit:
        from ._safety import format_bytes

        raise InteropError(
            f"{file_name} has {count} nodes and initializers, more than the {limit} the"
            f" limit of {format_bytes(max_bytes)} allows (about {BYTES_PER_NODE} bytes"
            " each to walk and check); raise it with --max-bytes if this is intended")


def visit_limit(max_bytes: int) -> int:
    """The most visits one walk of a model may make under ``max_bytes``."""
    return min(MAX_VISITS, max(_MIN_VISITS, max_bytes // _BYTES_PER_VISIT))


def node_label(node) -> str:
    """A node's name, or its first output's name when it has none."""
    return node.name or (f"<{node.output[0]}>" if node.output else "<unnamed>")


def value_info_dims(value_info):
    """Declared dims of a ValueInfoProto (``None`` per symbolic dim), or ``None`` if unknown."""
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return tuple(dim.dim_value if dim.HasField("dim_value") else None
                 for dim in tensor_type.shape.dim)


@dataclass
class Scope:
    """One graph or function body, with the names visible in it.

    Attributes
    ----------
    path : str
        ``""`` for the main graph; else the enclosing nodes and attribute names,
        ``"loop/body"``, or ``"call/domain.Function"`` for a function body.
    declared : dict
        Tensor name -> declared dims (``None`` per dynamic dim), outer scopes' included.
    initializers : dict
        Tensor name -> TensorProto, outer scopes' included.
    producers : dict
        Tensor name -> the NodeProto computing it, outer scopes' included.
    call_attributes : dict
        In a function body: attribute name -> AttributeProto of the call (or the
        function's default); what a ``ref_attr_name`` refers to.
    arguments : dict
        In a function body: input name -> (the call's input name, the caller's scope),
        so that a constant passed to a function is followed into the caller.
    consumers : dict
        Tensor name -> the nodes reading it in this graph or body and in the subgraphs
        inside it (filled by the walk); what a quantized layer's output feeds.
    outputs : set
        The names this graph or body returns (a tensor read by its caller too).
    """

    path: str = ""
    declared: dict = field(default_factory=dict)
    initializers: dict = field(default_factory=dict)
    producers: dict = field(default_factory=dict)
    call_attributes: dict = field(default_factory=dict)
    arguments: dict = field(default_factory=dict)
    consumers: dict = field(default_factory=dict, repr=False, compare=False)
    outputs: set = field(default_factory=set, repr=False, compare=False)
    outer: Scope | None = field(default=None, repr=False, compare=False)

    def label(self, node) -> str:
        return f"{self.path}/{node_label(node)}" if self.path else node_label(node)

    def constant_dims(self, name: str):
        """The dims of a ``Constant`` node's output, read off the node; else None.  (A
        function body declares no shapes and shape inference does not enter it.)"""
        node = self.producers.get(name)
        if node is None or node.op_type != "Constant":
            return None
        for attribute in node.attribute:
            if attribute.name == "value":
                return tuple(attribute.t.dims)
            if attribute.name in ("value_float", "value_int"):
                return ()
            if attribute.name in ("value_floats", "value_ints"):
                return (len(attribute.floats) + len(attribute.ints),)
        return None


@dataclass(frozen=True, eq=False)
class LocatedNode:
    """A ``ConvTranspose`` node and the scope it sits in."""

    node: object
    scope: Scope

    @property
    def label(self) -> str:
        """The node's name, prefixed by its scope's path outside the main graph."""
        return self.scope.label(self.node)


def _graph_scope(graph, parent: Scope | None, path: str) -> Scope:
    """The scope of ``graph``, enclosed by ``parent`` (``None`` for the main graph)."""
    scope = Scope(path=path, outer=parent)
    scope.outputs.update(value.name for value in graph.output)
    if parent is not None:
        scope.declared.update(parent.declared)
        scope.initializers.update(parent.initializers)
        scope.producers.update(parent.producers)
        scope.call_attributes.update(parent.call_attributes)
        scope.arguments.update(parent.arguments)
    scope.initializers.update((tensor.name, tensor) for tensor in graph.initializer)
    for value_info in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = value_info_dims(value_info)
        if dims is not None:
            scope.declared[value_info.name] = dims
    for tensor in graph.initializer:
        scope.declared.setdefault(tensor.name, tuple(tensor.dims))
    for node in graph.node:
        scope.producers.update((name, node) for name in node.output if name)
    return scope


def _function_scope(function, call, caller: Scope | None) -> Scope:
    """The scope of ``function``'s body as ``call`` (in ``caller``) runs it."""
    where = f"{caller.label(call)}/" if call is not None else ""
    scope = Scope(path=f"{where}{function.domain or 'ai.onnx'}.{function.name}")
    for attribute in function.attribute_proto:  # defaults, overridden by the call's
        scope.call_attributes[attribute.name] = attribute
    if call is not None:
        scope.call_attributes.update((attribute.name, attribute) for attribute in call.attribute)
        for inner, outer in list(zip(function.input, call.input)) + list(
                zip(function.output, call.output)):
            if inner and outer and outer in caller.declared:
                scope.declared[inner] = caller.declared[outer]
        scope.arguments.update((inner, (outer, caller))
                               for inner, outer in zip(function.input, call.input) if outer)
    scope.outputs.update(name for name in function.output if name)
    for value_info in function.value_info:
        dims = value_info_dims(value_info)
        if dims is not None:
            scope.declared[value_info.name] = dims
    for node in function.node:
        scope.producers.update((name, node) for name in node.output if name)
    return scope


class _Budget:
    """What one walk may still do: :data:`MAX_SCOPES` scopes, ``max_visits`` visits."""

    def __init__(self, max_visits: int = MAX_VISITS) -> None:
        self.scopes, self.visits, self.max_visits = 0, 0, max_visits

    def spend(self, scope: Scope, nodes: int) -> None:
        """Count ``scope`` (its names copied in) and the ``nodes`` of its body."""
        self.scopes += 1
        self.visits += nodes + len(scope.declared) + len(scope.initializers) + len(
            scope.producers)
        if self.scopes > MAX_SCOPES or self.visits > self.max_visits:
            where = scope.path or "the main graph"
            where = where if len(where) <= 100 else "..." + where[-97:]
            raise InteropError(
                f"the model's graphs and function calls unfold into more than {MAX_SCOPES}"
                f" scopes or {self.max_visits} node visits (at {where!r}); refused: functions"
                " calling one another many times over?")


def walk_model(model, op_type: str = "ConvTranspose", max_visits: int = MAX_VISITS,
               contrib: tuple = ()) -> tuple[list[LocatedNode], dict]:
    """Every ``op_type`` node of the default domain in ``model`` (the main graph first,
    each subgraph after the node holding it, each function body after its call), and
    every scope walked, by path.  ``contrib`` names operators of onnxruntime's
    ``com.microsoft`` domain found as well, in the same order.

    Raises
    ------
    InteropError
        A function that calls itself, directly or through others, or a walk over the
        limits :data:`MAX_SCOPES` and ``max_visits`` (at most :data:`MAX_VISITS`;
        :func:`visit_limit` derives it from a memory limit).
    """
    functions = {(function.domain, function.name): function for function in model.functions}
    found: list[LocatedNode] = []
    scopes: dict = {}
    called: set = set()
    budget = _Budget(max_visits)

    def walk(nodes, scope: Scope, depth: int, calling: tuple) -> None:
        budget.spend(scope, len(nodes))
        scopes.setdefault(scope.path, scope)
        if depth > _MAX_DEPTH:
            return
        for node in nodes:
            if (node.op_type == op_type and node.domain in ("", "ai.onnx")) or (
                    node.op_type in contrib and node.domain == CONTRIB_DOMAIN):
                found.append(LocatedNode(node, scope))
            _consume(node, scope)
            for attribute in node.attribute:
                graphs = ([attribute.g] if attribute.type == _GRAPH
                          else list(attribute.graphs) if attribute.type == _GRAPHS else [])
                for index, graph in enumerate(graphs):
                    name = attribute.name + (f"[{index}]" if attribute.type == _GRAPHS else "")
                    inner = _graph_scope(graph, scope, f"{scope.label(node)}/{name}")
                    walk(graph.node, inner, depth + 1, calling)
            key = (node.domain, node.op_type)
            function = functions.get(key)
            if function is not None:
                _refuse_recursion(key, calling)
                called.add(key)
                walk(function.node, _function_scope(function, node, scope), depth + 1,
                     calling + (key,))

    walk(model.graph.node, _graph_scope(model.graph, None, ""), 0, ())
    for key, function in functions.items():
        if key not in called:
            walk(function.node, _function_scope(function, None, None), 1, (key,))
    return found, scopes


def _consume(node, scope: Scope) -> None:
    """Record ``node`` as a consumer of its inputs in ``scope`` and in every scope
    enclosing it (a subgraph reads its outer graphs' tensors by name)."""
    outer: Scope | None = scope
    while outer is not None:
        for name in node.input:
            if name:
                outer.consumers.setdefault(name, []).append(node)
        outer = outer.outer


def _refuse_recursion(key: tuple, calling: tuple) -> None:
    """Refuse a call of function ``key`` from inside itself (``calling``: the functions
    being walked, outermost first): ONNX functions may not recurse, and the walk, which
    unfolds each call, would never end."""
    if key in calling:
        cycle = calling[calling.index(key):] + (key,)
        names = " -> ".join(f"{domain or 'ai.onnx'}.{name}" for domain, name in cycle)
        raise InteropError(f"model-local function {cycle[0][1]!r} calls itself ({names});"
                           " ONNX functions may not recurse")


def located_nodes(model, op_type: str = "ConvTranspose") -> list[LocatedNode]:
    """The ``op_type`` nodes of :func:`walk_model`."""
    return walk_model(model, op_type)[0]
