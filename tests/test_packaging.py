"""What the package ships and how ``make test`` checks it.

The wheel is built from a copy of the sources (the build writes into its source tree)
with this environment's setuptools, and its contents are read back: the license, the
type marker, the one version.
"""

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import convtranspose

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("setuptools")
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                    "--no-build-isolation", "--no-index", "-q", "-w", str(out)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("convtranspose-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_ships_the_license_the_type_marker_and_the_version(wheel):
    names = wheel.namelist()
    version = convtranspose.__version__
    assert "convtranspose/py.typed" in names
    assert f"convtranspose-{version}.dist-info/licenses/LICENSE" in names
    metadata = wheel.read(f"convtranspose-{version}.dist-info/METADATA").decode()
    assert re.search(rf"^Version: {re.escape(version)}$", metadata, re.M)
    assert re.search(r"^License-Expression: Apache-2.0$", metadata, re.M)
    assert wheel.read(f"convtranspose-{version}.dist-info/licenses/LICENSE") == (
        ROOT / "LICENSE").read_bytes()
    assert "convtranspose/interop/_onnx_graphs.py" in names


def test_make_test_lints_type_checks_and_builds_the_docs_before_pytest():
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^test:(.*)$", makefile, re.M).group(1).split()
    assert "lint" in target and "docs" in target
    lint = makefile.split("\nlint:")[1].split("\n\n")[0]
    docs = makefile.split("\ndocs:")[1].split("\n\n")[0]
    assert "ruff check" in lint and "mypy" in lint
    assert docs.count("sphinx -W") == 2 and "-b doctest" in docs and "-b html" in docs
    extras = (ROOT / "pyproject.toml").read_text().split("\ntest = [")[1].split("]")[0]
    for package in ("ruff", "mypy", "sphinx", "numpydoc", "myst-parser"):
        assert f'"{package}' in extras, package


def test_install_hints_name_a_checkout_and_real_extras():
    # The package is installed from a checkout, not a package index: every hint says
    # pip install '.[extra]', and every extra it names is one pyproject.toml defines.
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                 ["optional-dependencies"])
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "examples").rglob("*.py"))]
    named = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "convtranspose[" not in text, path
        for hint in re.findall(r"pip install '\.\[([^\]]*)\]'", text):
            named.update(hint.split(","))
    named -= {"extra", "{extra}"}  # install_hint's own docstring and f-string
    assert named and named <= extras, named - extras
    assert "install_hint" in (ROOT / "src/convtranspose/interop/_safety.py").read_text()
