"""Sphinx configuration of the convtranspose documentation (``make docs``).

The API reference is read from the numpydoc docstrings (autodoc + numpydoc); the
Markdown pages (semantics, command line, planning, performance, design) are the same
files the repository shows, read with myst-parser.  ``make docs`` builds with
warnings as errors and runs every ``>>>`` example of the rendered docstrings
(sphinx.ext.doctest).
"""

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# The examples check results: the cost model decides and nothing is kept on disk, as in
# the test suite (measured planning would time candidates and write wisdom).
os.environ.setdefault("CONVTRANSPOSE_PLANNING", "estimate")
os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")

from convtranspose import __version__  # noqa: E402 - after the path is set

project = "convtranspose"
author = "the convtranspose authors"
copyright = "the convtranspose authors, Apache-2.0"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# Every cross-reference must resolve (with -W, a broken one fails the build).
nitpicky = False

autodoc_member_order = "bysource"
autodoc_typehints = "signature"  # the hints in the signature; numpydoc explains them
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

doctest_global_setup = ("import numpy as np\nimport convtranspose as ct\n"
                        "from convtranspose import Target, host_target\n")
doctest_default_flags = (__import__("doctest").NORMALIZE_WHITESPACE
                         | __import__("doctest").ELLIPSIS)

intersphinx_mapping = {}
# furo renders numpydoc's Parameters / Returns / Raises sections as field lists with
# their types; the builtin alabaster theme ran them together.
html_theme = "furo"
html_title = f"convtranspose {__version__}"
html_static_path = []


# A page's link to a file of the repository outside docs/ (``[text](../benchmarks/...)``)
# works where the repository is browsed but has no page on the site: there it becomes
# its text.  Every other link must resolve (the build runs with warnings as errors).
_LINK_OUTSIDE_DOCS = re.compile(r"\[([^\]]+)\]\(\.\./[^)]+\)")


def _unlink_repository_files(app, docname, source):
    source[0] = _LINK_OUTSIDE_DOCS.sub(r"\1", source[0])


def _dialect_table() -> str:
    """The dialects and the surfaces that have each, as an RST list-table generated from
    the library's one record of dialects (so that the page cannot drift from it)."""
    from convtranspose._plan.dialects import DIALECTS, SURFACES

    lines = [".. list-table::", "   :header-rows: 1", ""]
    lines.append("   * - dialect\n     - reproduces\n" + "".join(
        f"     - {surface}\n" for surface in SURFACES).rstrip("\n"))
    for record in DIALECTS.values():
        cells = [f"``{record.name}``", record.owner]
        cells += ["yes" if record.has(surface) else "no" for surface in SURFACES]
        lines.append("   * - " + "\n     - ".join(cells))
    lines.append("")
    reasons = sorted({reason for record in DIALECTS.values() for reason in record.missing.values()})
    lines += [f"A *no* is {'one of: ' if len(reasons) > 1 else ''}" + "; ".join(reasons) + ".", ""]
    return "\n".join(lines)


def _generate_tables(app, docname, source):
    source[0] = source[0].replace(".. dialect-table::", _dialect_table())


def setup(app):
    app.connect("source-read", _unlink_repository_files)
    app.connect("source-read", _generate_tables)
