"""The package's layering, read from its source: data flows one way, frontend -> plan ->
dispatch -> one algorithm -> result, and each layer imports only the layers below it.

Every ``import`` statement of every module (function-level ones included) is parsed with
:mod:`ast`; the test fails on an edge from a lower layer to a higher one, on a circle
among modules, and on numba imported anywhere but the numba kernels' subpackage or at
module level by a module that is imported without numba.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "convtranspose"

#: Layers, lowest first: a module may import its own layer and the ones before it.
#: Matched by the longest prefix of the dotted name below ``convtranspose``.
LAYERS = (
    ("_errors", "_dtypes", "_version", "_runtime", "_typing"),
    ("_plan", "_geometry", "_dialects"),
    ("kernels",),
    ("dispatch",),
    ("planning",),
    ("_execute", "_backward", "_array_api"),
    ("_footprint",),
    ("_api", "_api_frameworks", "_translate", "shapes", "_explain", "_convolution", "vjp"),
    ("__init__", "interop", "cli", "_cli_parser", "_cli_translate", "_tune", "_bench", "__main__", "dask",
     "torch"),
)


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"module {module!r} belongs to no layer: add it to LAYERS")


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The package modules an ``ImportFrom`` names (dotted, below ``convtranspose``)."""
    if node.level == 0:
        if not (node.module or "").startswith("convtranspose"):
            return []
        base = node.module.split(".")[1:]
    else:
        here = module.split(".") if module != "__init__" else []
        package = here if is_package else here[:-1]
        base = package[:len(package) - (node.level - 1)] + (node.module or "").split(".")
        base = [part for part in base if part]
    names = []
    for alias in node.names:  # ``from . import kernels`` names a module, or a member
        candidate = ".".join(base + [alias.name])
        names.append(candidate if _exists(candidate) else ".".join(base))
    return [name or "__init__" for name in names]


def _exists(dotted: str) -> bool:
    path = PACKAGE.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports():
    """``{module: [(imported module, line, module level?, numba?)]}`` for the package."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        edges = []
        for node in ast.walk(tree):
            at_top = id(node) in top_level
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "numba":
                        edges.append(("numba", node.lineno, at_top, True))
                    elif alias.name.startswith("convtranspose."):
                        edges.append((alias.name[len("convtranspose."):], node.lineno, at_top,
                                      False))
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and (node.module or "").split(".")[0] in ("numba", "llvmlite"):
                    edges.append(("numba", node.lineno, at_top, True))
                for target in _resolve(module, path.name == "__init__.py", node):
                    edges.append((target, node.lineno, at_top, False))
        graph[module] = edges
    return graph


GRAPH = _imports()


def test_the_package_is_parsed():
    assert {"_execute", "dispatch", "kernels", "kernels.schedules", "_runtime.target",
            "kernels._numba.rows"} <= set(GRAPH)


def _upward(graph) -> list[str]:
    """Every import in ``graph`` of a module of a higher layer than the importer's."""
    return [f"{module} -> {target} (line {line})"
            for module, edges in graph.items() for target, line, _, numba in edges
            if not numba and _layer(target) > _layer(module)]


def test_each_layer_imports_only_the_layers_below_it():
    upward = _upward(GRAPH)
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_no_module_imports_itself_through_others():
    adjacency = {module: {t for t, _, _, numba in edges if not numba and t != module}
                 for module, edges in GRAPH.items()}
    seen, path, circles = set(), [], []

    def visit(module):
        if module in path:
            circles.append(" -> ".join(path[path.index(module):] + [module]))
            return
        if module in seen:
            return
        seen.add(module)
        path.append(module)
        for target in sorted(adjacency.get(module, ())):
            visit(target)
        path.pop()

    for module in sorted(adjacency):
        visit(module)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_numba_is_imported_only_by_the_numba_kernels():
    outside = [f"{module} (line {line})" for module, edges in GRAPH.items()
               for _, line, _, numba in edges
               if numba and not module.startswith("kernels._numba")]
    # llvmlite reads the host's features without compiling anything (machine facts).
    outside = [entry for entry in outside if not entry.startswith("_runtime.machine")]
    assert not outside, "numba imported outside kernels._numba:\n" + "\n".join(outside)


def test_numba_kernels_are_imported_lazily_from_outside_their_subpackage():
    eager = [f"{module} -> {target} (line {line})"
             for module, edges in GRAPH.items() for target, line, at_top, _ in edges
             if at_top and target.startswith("kernels._numba")
             and not module.startswith("kernels._numba")]
    assert not eager, ("module-level imports of numba kernels (import convtranspose would "
                       "import numba):\n" + "\n".join(eager))


@pytest.mark.parametrize("edge", ["kernels.phase -> dispatch", "_runtime.threads -> kernels"])
def test_the_checks_can_fail(edge):
    # An upward edge added to a copy of the graph is reported.
    module, target = edge.split(" -> ")
    graph = {name: list(edges) for name, edges in GRAPH.items()}
    graph[module].append((target, 1, False, False))
    assert _upward(graph) == [f"{edge} (line 1)"]
