"""Generated kernel sources stay readable: a module file of the kernel cache, or without
it registered with linecache (tracebacks show their lines either way), and written out
on request; nothing is written otherwise."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("numba")

_TRACEBACK_SCRIPT = '''\
import linecache, traceback
from convtranspose._kernels._numba import codegen
source = "def scaled(x):\\n    y = x * 2\\n    return y\\n"
kernel = codegen.compile_source(source, "scaled")
assert kernel(21) == 42
code = kernel.py_func.__code__
assert linecache.getline(code.co_filename, code.co_firstlineno + 1).strip() == "y = x * 2"
# The pure-Python function behind the kernel raises with its generated line shown.
try:
    kernel.py_func(None)
except TypeError:
    shown = traceback.format_exc()
assert "y = x * 2" in shown and "scaled" in shown, shown
print(code.co_filename)
'''


@pytest.mark.parametrize("cache", ["folder", "off"])
def test_a_generated_kernel_shows_its_lines_in_a_traceback(tmp_path, cache):
    # With the kernel cache the source is a module file in the cache folder; without
    # it, a pseudo file registered with linecache.
    folder = tmp_path / "cache"
    environment = dict(os.environ, CONVTRANSPOSE_CACHE_DIR=str(folder) if cache == "folder"
                       else "off")
    shown = subprocess.run([sys.executable, "-c", _TRACEBACK_SCRIPT], check=True,
                           env=environment, cwd=tmp_path, capture_output=True,
                           text=True).stdout.strip()
    if cache == "folder":
        path = pathlib.Path(shown)
        assert path.is_file() and path.parent.parent == folder / "kernels"
        assert path.name.startswith("scaled_")
    else:
        assert shown.startswith("<convtranspose generated scaled")
        assert not folder.exists()


def test_sources_are_written_only_where_the_variable_says(tmp_path):
    script = ("import numpy as np, convtranspose as ct\n"
              "x = np.ones((1, 8, 9, 9), np.float32); w = np.ones((8, 4, 3, 3), np.float32)\n"
              "ct.convolution_backprop_data(x, w, strides=2)\n")
    environment = dict(os.environ, CONVTRANSPOSE_ALGORITHM="direct",
                       CONVTRANSPOSE_DUMP_KERNELS=str(tmp_path / "kernels"),
                       CONVTRANSPOSE_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", script], check=True, env=environment, cwd=tmp_path)
    written = sorted((tmp_path / "kernels").glob("*.py"))
    assert written and all(path.read_text().startswith("def ") for path in written)
    environment.pop("CONVTRANSPOSE_DUMP_KERNELS")
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    subprocess.run([sys.executable, "-c", script], check=True, env=environment, cwd=quiet)
    assert list(quiet.iterdir()) == []
