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
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "convtranspose"

#: Layers, lowest first: a module may import its own layer and the ones before it.
#: Matched by the longest prefix of the dotted name below ``convtranspose``.
LAYERS = (
    ("_errors", "_dtypes", "_version", "_typing"),
    ("_runtime",),
    ("_plan",),
    ("_kernels",),
    ("_choose",),
    ("_execute",),
    ("_frontends", "shapes", "vjp"),
    ("__init__", "__main__", "cli", "_cli", "interop", "dask", "torch"),
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
    assert {"_execute", "_choose", "_kernels", "_kernels.schedules", "_runtime.target",
            "_kernels._numba.rows"} <= set(GRAPH)


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
               if numba and not module.startswith("_kernels._numba")]
    # llvmlite reads the host's features without compiling anything (machine facts).
    outside = [entry for entry in outside if not entry.startswith("_runtime.machine")]
    assert not outside, "numba imported outside kernels._numba:\n" + "\n".join(outside)


def test_numba_kernels_are_imported_lazily_from_outside_their_subpackage():
    eager = [f"{module} -> {target} (line {line})"
             for module, edges in GRAPH.items() for target, line, at_top, _ in edges
             if at_top and target.startswith("_kernels._numba")
             and not module.startswith("_kernels._numba")]
    assert not eager, ("module-level imports of numba kernels (import convtranspose would "
                       "import numba):\n" + "\n".join(eager))


@pytest.mark.parametrize("edge", ["_kernels.phase -> _choose", "_runtime.threads -> _kernels"])
def test_the_checks_can_fail(edge):
    # An upward edge added to a copy of the graph is reported.
    module, target = edge.split(" -> ")
    graph = {name: list(edges) for name, edges in GRAPH.items()}
    graph[module].append((target, 1, False, False))
    assert _upward(graph) == [f"{edge} (line 1)"]


def test_the_folder_list_is_the_layer_list():
    # Every entry of src/convtranspose is one layer (or a module of the top one), and
    # every layer named here exists: reading ``ls`` is reading the architecture.
    entries = {path.stem for path in PACKAGE.iterdir()
               if path.name != "__pycache__" and (path.suffix == ".py" or path.is_dir())}
    named = {prefix for prefixes in LAYERS for prefix in prefixes}
    assert entries == named, (sorted(entries - named), sorted(named - entries))
    assert len(list(PACKAGE.iterdir())) <= 21  # the modules above, and py.typed


def _private_uses(path: pathlib.Path, module: str | None) -> list[str]:
    """Where the file at ``path`` takes an underscore name from another module of the
    package: ``from m import _name`` or ``m._name`` on a module it imported.
    ``module`` is the file's dotted name inside the package, None outside it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level and module is None:
                continue
            if node.level:
                base = _resolve(module, path.name == "__init__.py", ast.ImportFrom(
                    module=node.module, names=[ast.alias(name="__x")], level=node.level))[0]
            elif (node.module or "").split(".")[0] == "convtranspose":
                base = ".".join(node.module.split(".")[1:])
            else:
                continue
            for alias in node.names:
                dotted = f"{base}.{alias.name}".strip(".")
                if _exists(dotted):
                    aliases.add(alias.asname or alias.name)
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.name}:{node.lineno} imports {alias.name} from {base}")
        elif isinstance(node, ast.Import):
            aliases.update(alias.asname for alias in node.names
                           if alias.asname and alias.name.startswith("convtranspose"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append(f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}")
    return found


def test_no_underscore_name_crosses_a_module():
    # An underscore means "this module only"; a package's interface has plain names.
    crossing = [use for path in sorted(PACKAGE.rglob("*.py"))
                for use in _private_uses(path, _module_name(path))]
    assert not crossing, "\n".join(crossing)


def test_the_private_name_check_can_fail(tmp_path):
    path = tmp_path / "use.py"
    path.write_text("from convtranspose._plan.rules import _secret\n"
                    "from convtranspose._kernels import common\ncommon._hidden\n")
    assert len(_private_uses(path, None)) == 2


#: Tests and benchmarks that still read a module's underscore names, and how many times:
#: none left.  The list only shrinks, so any new read fails; tests read the interface.
TRANSITION_ALLOWED: dict[str, int] = {}


def test_tests_read_underscore_names_only_where_still_allowed():
    root = PACKAGE.parents[1]
    counts = {path.relative_to(root).as_posix(): len(_private_uses(path, None))
              for path in sorted([*root.glob("tests/**/*.py"), *root.glob("benchmarks/*.py")])}
    over = {name: count for name, count in counts.items()
            if count > TRANSITION_ALLOWED.get(name, 0)}
    assert not over, f"new reads of underscore names (use the module's interface): {over}"
    stale = {name: allowed for name, allowed in TRANSITION_ALLOWED.items()
             if counts.get(name, 0) < allowed}
    assert not stale, f"fewer reads than allowed: lower TRANSITION_ALLOWED to match {stale}"


def test_the_design_page_draws_these_layers():
    # docs/design.md's table has one row per layer, in LAYERS' order, naming exactly the
    # layer's entries (so the page cannot drift from the folder list).
    text = (PACKAGE.parents[1] / "docs" / "design.md").read_text(encoding="utf-8")
    table = text.split("<!-- layers:", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]  # no header
    named = [tuple(sorted(entry.strip().strip("`").removesuffix("/").removesuffix(".py")
                          for entry in row.split("|")[2].split(", ")))
             for row in rows]
    assert named == [tuple(sorted(prefixes)) for prefixes in LAYERS]


def test_the_design_pages_data_path_names_real_code():
    import importlib

    text = (PACKAGE.parents[1] / "docs" / "design.md").read_text(encoding="utf-8")
    path = text.split("<!-- path:", 1)[1].split("\n\n", 1)[0]
    names = set(re.findall(r"`(convtranspose\.[\w.]+)`", path))
    assert len(names) >= 8
    for name in sorted(names):
        module, _, attribute = name.rpartition(".")
        try:
            assert hasattr(importlib.import_module(module), attribute), name
        except ModuleNotFoundError:
            importlib.import_module(name)
