"""Every fenced ``python`` block of README.md and docs/*.md runs.

Each block runs alone (its own imports, its own data) in a fresh interpreter under the
estimate (``CONVTRANSPOSE_PLANNING=estimate``, ``CONVTRANSPOSE_WISDOM=off``), in a
temporary directory.  A block that needs an optional package says so on its first line,
``# requires: torch`` (several: ``# requires: torch, jax``), and is skipped only when
that package is missing.  Output that is not Python is fenced as ``text`` or ``console``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
REQUIRES = re.compile(r"#\s*requires:\s*(.+)")


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """``(line of the opening fence, code)`` of every fenced ``python`` block."""
    blocks, code, start, indent = [], None, 0, ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if code is None:
            if stripped.startswith("```") and stripped[3:].strip() in ("python", "{python}"):
                code, start, indent = [], number, line[:len(line) - len(line.lstrip())]
        elif stripped.startswith("```"):
            blocks.append((start, textwrap.dedent("\n".join(code)) + "\n"))
            code = None
        else:
            code.append(line[len(indent):] if line.startswith(indent) else line)
    assert code is None, f"{path.name}: the block opened on line {start} is never closed"
    return blocks


BLOCKS = [pytest.param(path, line, code, id=f"{path.relative_to(ROOT)}:{line}")
          for path in DOCUMENTS for line, code in python_blocks(path)]


def test_the_blocks_are_found(tmp_path):
    # The collector sees the blocks a reader sees: one per fence, none inside another.
    page = tmp_path / "page.md"
    page.write_text("text\n```python\nx = 1\n```\n\n```text\nnot = code(\n```\n"
                    "  ```python\n  y = 2\n  ```\n```console\n$ ls\n```\n")
    assert python_blocks(page) == [(2, "x = 1\n"), (9, "y = 2\n")]
    files = {path.name for path, *_ in (param.values for param in BLOCKS)}
    assert {"README.md", "planning.md", "scaling.md", "semantics.md"} <= files


@pytest.mark.parametrize("path, line, code", BLOCKS)
def test_python_block_runs(path, line, code, tmp_path):
    first = code.lstrip().splitlines()[0] if code.strip() else ""
    required = REQUIRES.match(first)
    if required:
        for name in required.group(1).split(","):
            pytest.importorskip(name.strip())
    env = dict(os.environ, CONVTRANSPOSE_PLANNING="estimate", CONVTRANSPOSE_WISDOM="off",
               MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"{path.name}, the block on line {line}:\n{code}\n{result.stderr[-3000:]}")
