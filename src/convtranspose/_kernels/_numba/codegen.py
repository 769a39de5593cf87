"""Compiling kernel templates and generated kernel source, readable in tracebacks and on disk.

Two kinds of kernel source:

- **Templates** (``templates/*.py`` beside this module): numba kernels written as plain
  functions whose compile-time constants (vector lanes, block shape, load and store
  modes) and helper kernels are free names.  :func:`compile_template` binds those
  names, which numba freezes into the compiled code as it freezes a closure's
  variables.
- **Generated source**: register-blocked kernels keep each accumulator in its own
  variable (one per vector register), so their source depends on the block shape and
  is generated as text (:mod:`.planes`, :mod:`.rows`, :mod:`.blocked`,
  :mod:`.transpose`) and compiled by :func:`compile_source`.
  ``CONVTRANSPOSE_DUMP_KERNELS=DIR`` writes each one to ``DIR`` as a ``.py`` file
  (nothing is written otherwise).

With the kernel cache (:mod:`.kernel_cache`), each template binding and each generated
source becomes a module file of the cache folder: the constants as module-level
assignments and the helper kernels as imports (:func:`module_text`), then the body.
numba keeps their machine code there, and tracebacks and debuggers show the file's
lines.  Without it (``CONVTRANSPOSE_CACHE_DIR=off``, or a folder that cannot be
written), the source is ``exec``'d: a template under its own file name, generated
source registered with :mod:`linecache` under a name that says which kernel it is.
"""

from __future__ import annotations

import hashlib
import linecache
import math
import os
import sys
import types

import numba
import numpy as np

from ..._runtime.config import dump_source
from . import dot_vectors, kernel_cache, vectors
from .full_width import full_width_njit

__all__ = ["compile_source", "compile_template", "module_text"]

#: The folder of the kernel templates.
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


#: The vector intrinsics a generated kernel may call, by name.
_INTRINSICS = ("vector_zero", "vector_load", "vector_splat_at", "vector_splat_pair",
               "vector_fma", "vector_dot_pairs", "vector_dot_bytes", "vector_dot_words",
               "vector_add", "vector_interleave", "vector_shift_in", "vector_store",
               "vector_load_spread", "vector_store_spread", "vector_store_spread_first",
               "vector_load_first", "vector_store_first", "vector_store_lanes",
               "vector_load_float16", "vector_store_float16", "vector_pack_pairs",
               "vector_widen_halves", "vector_load_bfloat16", "vector_store_bfloat16")


def source_filename(source: str, name: str) -> str:
    """The pseudo file name under which ``source`` is registered without the kernel
    cache: the kernel's name and a digest of its text (one name per distinct source)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    return f"<convtranspose generated {name} {digest}>"


def compile_source(source: str, name: str, inline: bool = False, names: dict | None = None):
    """``numba.njit`` of the function ``name`` defined by generated ``source``
    (``inline``: numba inlines it into every caller, as ``inline="always"``, where LLVM
    would keep a large function's calls).  ``names``: more globals of the source (other
    kernels it calls, bound as :func:`compile_template` binds its names).

    A module of the kernel cache where there is one (:func:`module_text`), else
    ``exec``'d and registered with :mod:`linecache`.  When ``CONVTRANSPOSE_DUMP_KERNELS``
    names a folder, the source is also written there as ``<name>-<digest>.py``
    (:func:`~convtranspose._runtime.config.dump_source`).
    """
    filename = source_filename(source, name)
    dump_source("-".join(filename.strip("<>").split()[-2:]), source)
    # NumPy as ``np`` too, as in the kernel cache's modules (:func:`module_text`)
    intrinsics = {"np": np, **{intrinsic: getattr(vectors, intrinsic, None)
                               or getattr(dot_vectors, intrinsic) for intrinsic in _INTRINSICS},
                  **(names or {})}
    options = {"nogil": True, **({"inline": "always"} if inline else {})}
    if kernel_cache.kernel_folder() is not None:
        listed = ", ".join(f"{key}={value!r}" for key, value in options.items())
        text = module_text(f"generated kernel ``{name}``", intrinsics, source,
                           f"\n{name} = cached_njit({listed})({name})\n")
        try:
            return getattr(kernel_cache.kernel_module(name, text), name)
        except OSError:
            pass  # the folder became unwritable: compile as without a cache
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), intrinsics)
    return full_width_njit(**options)(intrinsics[name])


def compile_template(name: str, names: dict) -> dict:
    """The kernels of ``templates/<name>.py``, with ``names`` bound as its globals.

    Every free name of the template (its header lists them) must be in ``names``; the
    template's functions carry their own ``cached_njit`` decorators.  Returns the
    template's namespace after execution (its kernels by name).
    """
    path = os.path.join(TEMPLATES, name + ".py")
    with open(path, encoding="utf-8") as file:
        source = file.read()
    if kernel_cache.kernel_folder() is not None:
        text = module_text(f"kernels of ``templates/{name}.py``", names, source)
        try:
            return vars(kernel_cache.kernel_module(name, text))
        except OSError:
            pass  # the folder became unwritable: compile as without a cache
    # No numba cache: it cannot tell apart code exec'd with other bindings.
    namespace = {"numba": numba, "cached_njit": full_width_njit,
                 "__name__": f"{__name__}.templates.{name}", **names}
    exec(compile(source, path, "exec"), namespace)
    return namespace


def module_text(title: str, names: dict, body: str, tail: str = "") -> str:
    """The text of a kernel module: ``names`` bound at module level (imports of modules
    and helper kernels, assignments of constants), then ``body`` and ``tail``.

    Raises TypeError for a value that cannot be written as source.
    """
    lines = [f'"""The {title} for the constants below, written by',
             f'{__name__} (numba keeps its machine code beside it)."""',
             "import numpy as np", "",
             "from convtranspose._kernels._numba.kernel_cache import cached_njit"]
    lines += sorted(_binding(name, value) for name, value in names.items()
                    if not (name == "np" and value is np))
    return "\n".join(lines) + "\n\n" + body + tail


def _binding(name: str, value) -> str:
    """One statement binding ``name`` to ``value`` in a kernel module."""
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}"
    if isinstance(value, np.generic) and np.isfinite(value):
        return f"{name} = np.{type(value).__name__}({value.item()!r})"
    if value is None or isinstance(value, (bool, int, str)) or (
            isinstance(value, float) and math.isfinite(value)):
        return f"{name} = {value!r}"
    home = _home(value)
    if home is None:
        raise TypeError(f"kernel constant {name!r}: {value!r} cannot be written as source "
                        "(a number, a bool, a string or a kernel of a loaded module)")
    return f"from {home[0]} import {home[1]}" + ("" if home[1] == name else f" as {name}")


def _home(value) -> tuple[str, str] | None:
    """``(module, attribute)`` holding ``value``: the module that defines it (numba
    dispatchers and intrinsics keep their function's ``__module__`` and ``__name__``),
    else a module of the kernels or of the kernel cache."""
    module_name, attribute = getattr(value, "__module__", None), getattr(value, "__name__", None)
    module = sys.modules.get(module_name) if module_name else None
    if module is not None and attribute and getattr(module, attribute, None) is value:
        return module_name, attribute
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith(("convtranspose._kernels.", kernel_cache.MODULE_PREFIX)):
            for attribute, held in vars(module).items():
                if held is value:
                    return module_name, attribute
    return None
