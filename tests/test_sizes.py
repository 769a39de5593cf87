"""Modules and functions stay small enough to read: no module under ``src/`` over 600
lines, no hand-written function over 80.  Kernel templates (``_kernels/_numba/templates``)
and the named source generators below are the exceptions: a compiled kernel is one
function so that its accumulators stay in registers."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "convtranspose"
MODULE_LINES = 600
FUNCTION_LINES = 80
#: Functions that write a kernel's source as text, one shape at a time.
GENERATORS = {"_kernels/_numba/rows.py": {"_rows_source"}}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8")


def test_no_module_is_too_long():
    long = [f"{name}: {text.count(chr(10))} lines" for name, text in _modules()
            if text.count("\n") > MODULE_LINES]
    assert not long, long


def test_no_hand_written_function_is_too_long():
    long = []
    for name, text in _modules():
        if name.startswith("_kernels/_numba/templates/"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES and node.name not in GENERATORS.get(name, ()):
                    long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not long, long


def test_the_exceptions_still_exist():
    # A renamed or removed generator must leave the list, or it would excuse another.
    texts = dict(_modules())
    for name, functions in GENERATORS.items():
        defined = {node.name for node in ast.walk(ast.parse(texts[name]))
                   if isinstance(node, ast.FunctionDef)}
        assert functions <= defined, (name, functions - defined)
    assert any(name.startswith("_kernels/_numba/templates/") for name in texts)
