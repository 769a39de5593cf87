"""Generated kernel sources stay readable: registered with linecache (tracebacks show
their lines) and written out on request, and nothing is written otherwise."""

from __future__ import annotations

import linecache
import os
import subprocess
import sys
import textwrap
import traceback

import pytest

pytest.importorskip("numba")
from convtranspose.kernels._numba import codegen  # noqa: E402  (needs numba)


def test_a_generated_kernel_shows_its_lines_in_a_traceback():
    source = textwrap.dedent("""\
        def scaled(x):
            y = x * 2
            return y
        """)
    kernel = codegen.compile_source(source, "scaled")
    assert kernel(21) == 42
    filename = codegen.source_filename(source, "scaled")
    assert linecache.getline(filename, 2).strip() == "y = x * 2"
    # The pure-Python function behind the kernel raises with its generated line shown.
    try:
        kernel.py_func(None)
    except TypeError:
        shown = traceback.format_exc()
    assert "y = x * 2" in shown and "generated scaled" in shown


def test_sources_are_written_only_where_the_variable_says(tmp_path):
    script = ("import numpy as np, convtranspose as ct\n"
              "x = np.ones((1, 8, 9, 9), np.float32); w = np.ones((8, 4, 3, 3), np.float32)\n"
              "ct.convolution_backprop_data(x, w, strides=2)\n")
    environment = dict(os.environ, CONVTRANSPOSE_ALGORITHM="direct",
                       CONVTRANSPOSE_DUMP_KERNELS=str(tmp_path / "kernels"))
    subprocess.run([sys.executable, "-c", script], check=True, env=environment, cwd=tmp_path)
    written = sorted((tmp_path / "kernels").glob("*.py"))
    assert written and all(path.read_text().startswith("def ") for path in written)
    environment.pop("CONVTRANSPOSE_DUMP_KERNELS")
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    subprocess.run([sys.executable, "-c", script], check=True, env=environment, cwd=quiet)
    assert list(quiet.iterdir()) == []
