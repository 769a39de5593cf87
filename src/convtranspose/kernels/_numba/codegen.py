"""Compiling kernel templates and generated kernel source, readable in tracebacks and on disk.

Two kinds of kernel source:

- **Templates** (``templates/*.py`` beside this module): numba kernels written as plain
  functions whose compile-time constants (vector lanes, block shape, load and store
  modes) and helper kernels are free names.  :func:`compile_template` executes a
  template with those names bound as its globals, which numba freezes into the
  compiled code as it freezes a closure's variables; the template keeps its own file
  name, so tracebacks and debuggers show its lines.
- **Generated source**: register-blocked kernels keep each accumulator in its own
  variable (one per vector register), so their source depends on the block shape and
  is generated as text (:mod:`.planes`, :mod:`.rows`, :mod:`.blocked`,
  :mod:`.transpose`).  :func:`compile_source` registers it with :mod:`linecache` under
  a name that says which kernel it is, and ``CONVTRANSPOSE_DUMP_KERNELS=DIR`` writes
  each one to ``DIR`` as a ``.py`` file (nothing is written otherwise).
"""

from __future__ import annotations

import hashlib
import linecache
import os

import numba

from ..._runtime.environment import switch
from . import vectors

__all__ = ["DUMP_ENV", "compile_source", "compile_template"]

#: The folder of the kernel templates.
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

#: Environment variable naming a folder where every generated kernel source is written.
DUMP_ENV = "CONVTRANSPOSE_DUMP_KERNELS"

#: The vector intrinsics a generated kernel may call, by name.
_INTRINSICS = ("vector_zero", "vector_load", "vector_splat_at", "vector_splat_pair",
               "vector_fma", "vector_dot_pairs", "vector_add", "vector_interleave",
               "vector_shift_in", "vector_store", "vector_load_float16",
               "vector_store_float16", "vector_pack_pairs", "vector_widen_halves",
               "vector_load_bfloat16", "vector_store_bfloat16")


def source_filename(source: str, name: str) -> str:
    """The pseudo file name under which ``source`` is registered: the kernel's name and
    a digest of its text (one name per distinct source)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    return f"<convtranspose generated {name} {digest}>"


def compile_source(source: str, name: str):
    """``numba.njit`` of the function ``name`` defined by generated ``source``.

    The source is registered with :mod:`linecache` (tracebacks show its lines) and,
    when :data:`DUMP_ENV` names a folder, written there as ``<name>-<digest>.py``.
    """
    filename = source_filename(source, name)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    folder = switch(DUMP_ENV)
    if folder:
        os.makedirs(folder, exist_ok=True)
        stem = filename.strip("<>").split()[-2:]
        with open(os.path.join(folder, "-".join(stem) + ".py"), "w", encoding="utf-8") as file:
            file.write(source)
    namespace = {intrinsic: getattr(vectors, intrinsic) for intrinsic in _INTRINSICS}
    exec(compile(source, filename, "exec"), namespace)
    return numba.njit(nogil=True, cache=False)(namespace[name])


def compile_template(name: str, names: dict) -> dict:
    """The kernels of ``templates/<name>.py``, with ``names`` bound as its globals.

    Every free name of the template (its header lists them) must be in ``names``; the
    template's functions carry their own ``numba.njit`` decorators.  Returns the
    template's namespace after execution (its kernels by name).
    """
    path = os.path.join(TEMPLATES, name + ".py")
    with open(path, encoding="utf-8") as file:
        source = file.read()
    namespace = {"numba": numba, "__name__": f"{__name__}.templates.{name}", **names}
    exec(compile(source, path, "exec"), namespace)
    return namespace
