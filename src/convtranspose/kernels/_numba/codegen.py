"""Compiling generated kernel source, readable in tracebacks and on disk.

Register-blocked kernels keep each accumulator in its own variable (one per vector
register), so their source depends on the block shape and is generated as text
(:mod:`.planes`, :mod:`.rows`, :mod:`.blocked`, :mod:`.transpose`).  Every generated
source is registered with :mod:`linecache` under a name that says which kernel it is,
so tracebacks and debuggers show its lines, and ``CONVTRANSPOSE_DUMP_KERNELS=DIR``
writes each one to ``DIR`` as a ``.py`` file (nothing is written otherwise).
"""

from __future__ import annotations

import hashlib
import linecache
import os

import numba

from ..._runtime.environment import switch
from . import vectors

__all__ = ["DUMP_ENV", "compile_source"]

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
