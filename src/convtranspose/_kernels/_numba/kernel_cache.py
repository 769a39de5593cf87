"""Compiled kernels kept on disk between processes: numba's cache, in the library's folder.

Compiling a kernel costs from a tenth of a second to a few seconds, paid again by every
new process.  numba can keep the machine code of a function defined in a real module
file (``njit(cache=True)``), but

- its files go beside the module's source (``__pycache__`` in the installed package)
  or into the user's ``NUMBA_CACHE_DIR``; the library keeps them in its own cache folder
  (:func:`convtranspose._runtime.cache.cache_dir`) and leaves numba's settings alone:
  its dispatchers get a cache whose only locator is that folder (:class:`KernelCache`);
- its index keys a function on its bytecode, the signature and the CPU (LLVM's name
  and features: code compiled for one instruction set is never loaded for another),
  but not on the values of the globals it freezes, nor on the other modules whose
  kernels it inlines.  So the compiled code lives in a folder named after numba's
  version and a digest of every source file of :mod:`convtranspose._kernels`
  (:func:`kernel_folder`): editing any of them starts a new folder;
- it cannot keep code that was ``exec``'d from a string.  Kernels compiled per block
  shape (templates with constants bound, generated source) are therefore written to
  that folder as modules of their own, constants as module-level assignments and
  helper kernels as imports, named after a digest of their full text
  (:func:`kernel_module`), and imported from there; tracebacks show their lines.

With the cache folder off (``CONVTRANSPOSE_CACHE_DIR=off``) or not writable, nothing is
written and every process compiles again (:mod:`.codegen` then ``exec``'s the
sources).

A compilation of the library's kernels that lasts over a second is announced once per
process (:func:`convtranspose._runtime.notices.notice_if_slow`), and inside
:func:`convtranspose._kernels.compiling.deferring_compiles` a kernel found neither in
memory nor in the folder raises instead of compiling.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import threading

import numba
from numba.core import event
from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator
from numba.core.runtime import rtsys

from ..._runtime.cache import atomic_write, cache_dir, warn_once
from ..._runtime.caches import kept
from ..._runtime.notices import notice_if_slow
from ..compiling import KernelNotCompiled, compiles_deferred
from .full_width import full_width_njit

__all__ = ["KERNELS_SUBFOLDER", "MODULE_PREFIX", "KernelCache", "cached_njit",
           "kernel_folder", "kernel_module"]

#: The subfolder of the cache folder that holds the kernels.
KERNELS_SUBFOLDER = "kernels"

#: Prefix of the names under which kernel modules written to the cache are imported.
MODULE_PREFIX = "_convtranspose_kernel_"

#: The folder of :mod:`convtranspose._kernels`, whose sources the compiled code depends on.
_KERNELS_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_module_lock = threading.RLock()


@kept("the kernel folder", maxsize=None)
def sources_digest() -> str:
    """A digest of numba's version and every ``.py`` file of :mod:`convtranspose._kernels`
    (paths and bytes): what the compiled kernels depend on besides their own text."""
    digest = hashlib.sha256(numba.__version__.encode())
    for root, folders, files in os.walk(_KERNELS_PACKAGE):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, _KERNELS_PACKAGE).encode() + b"\0")
            with open(path, "rb") as file:
                digest.update(file.read() + b"\0")
    return digest.hexdigest()[:16]


@kept("the kernel folder", maxsize=None)
def kernel_folder() -> str | None:
    """The folder of compiled kernels and kernel modules, created and writable, or None
    when the cache folder is off or cannot be written (decided once per process)."""
    base = cache_dir()
    if base is None:
        return None
    folder = os.path.join(base, KERNELS_SUBFOLDER,
                          f"numba-{numba.__version__}-{sources_digest()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return None
    return folder


class _KernelLocator(_CacheLocator):
    """numba's files for one function, all in :func:`kernel_folder`."""

    def __init__(self, py_func, folder: str):
        self._py_file = inspect.getfile(py_func)  # numba names it in its warnings
        self._lineno = py_func.__code__.co_firstlineno
        self._folder = folder

    def get_cache_path(self) -> str:
        return self._folder

    def get_source_stamp(self) -> str:
        # The folder is named after the digest of every kernel source and a kernel
        # module's file after its text: the folder's digest stamps them all.
        return sources_digest()

    def get_disambiguator(self) -> str:
        return str(self._lineno)


class _KernelCacheImpl(CompileResultCacheImpl):
    """numba's compile-result cache with :class:`_KernelLocator` as its only locator
    (numba's own ``__init__`` would try the locators it knows first, and
    ``NUMBA_CACHE_LOCATOR_CLASSES``)."""

    def __init__(self, py_func):
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = _KernelLocator(py_func, kernel_folder())
        module = os.path.splitext(os.path.basename(inspect.getfile(py_func)))[0]
        self._filename_base = self.get_filename_base(f"{module}.{py_func.__qualname__}",
                                                     getattr(sys, "abiflags", ""))


class KernelCache(FunctionCache):
    """numba's per-function cache, kept in :func:`kernel_folder`."""

    _impl_class = _KernelCacheImpl

    def load_overload(self, sig, target_context):
        """The compiled code for ``sig`` kept in the folder, or None.

        numba's own version first refreshes the target context: it imports and installs
        every typing and lowering registry (about 90 ms, half of a warm process's first
        call on the Intel Xeon of ``benchmarks/results/first-calls-xeon.json``).
        Machine code read back needs only numba's runtime (the allocator and reference
        counts the kernels call, which the refresh would start); a compilation
        refreshes the context itself.
        """
        rtsys.initialize(target_context)
        try:
            loaded = self._load_overload(sig, target_context)
        except Exception:  # noqa: BLE001 - damaged or unreadable files: compile again
            # (numba raises on a truncated or garbled file; the new code overwrites it).
            loaded = None
        if loaded is None and compiles_deferred():
            raise KernelNotCompiled(f"{self._name} has no machine code for {sig} yet")
        return loaded

    def save_overload(self, sig, data):
        """Keep the compiled code for ``sig``; a folder that cannot take it (full, gone
        read-only) costs one warning, never the call."""
        try:
            self._save_overload(sig, data)
        except OSError as error:
            self._cannot_keep(error)
        except Exception:  # noqa: BLE001 - an index numba cannot read to add to: a new
            try:  # one (the old one's entries compile again)
                os.unlink(self._cache_file._index_path)
                self._save_overload(sig, data)
            except OSError as error:
                self._cannot_keep(error)

    def _cannot_keep(self, error: OSError) -> None:
        warn_once(self._cache_path, f"convtranspose cannot keep compiled kernels in "
                                    f"{self._cache_path!r} ({error}); they are compiled "
                                    "again by every process")


def cached_njit(**options):
    """``numba.njit(**options)`` for full-width vectors (:mod:`.full_width`) whose
    compiled code is kept in :func:`kernel_folder` (compiled again by every process
    where there is none).

    For functions of real module files: the package's kernel modules and the kernel
    modules written by :func:`kernel_module`.
    """
    def decorate(function):
        dispatcher = full_width_njit(**options)(function)
        if kernel_folder() is not None:
            # What numba's Dispatcher.enable_caching does, with the library's cache.
            dispatcher._cache = KernelCache(function)
        return dispatcher

    return decorate


def kernel_module(name: str, text: str):
    """The module of kernel source ``text``: written to :func:`kernel_folder` as
    ``<name>_<digest of text>.py`` (unless there already) and imported, once per process,
    as ``MODULE_PREFIX + <file stem>``.  Raises OSError when it cannot be written.

    Kernel modules import each other by those names (a module imports only modules
    already loaded, so the folder need not be on ``sys.path``).
    """
    folder = kernel_folder()
    if folder is None:
        raise OSError("the kernel cache folder is off")
    stem = f"{name}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    module_name = MODULE_PREFIX + stem
    with _module_lock:
        module = sys.modules.get(module_name)
        if module is not None:
            return module
        path = os.path.join(folder, stem + ".py")
        try:
            with open(path, encoding="utf-8") as file:
                written = file.read()
        except OSError:
            written = None
        if written != text:
            atomic_write(path, text)
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module


def _is_library_kernel(dispatcher) -> bool:
    """Whether ``dispatcher`` compiles one of this library's kernels (its package's
    modules, the kernel modules of the cache folder, or their ``exec``'d sources)."""
    function = getattr(dispatcher, "py_func", None)
    if function is None:
        return False
    module = getattr(function, "__module__", None) or ""
    return (module.startswith(("convtranspose.", MODULE_PREFIX))
            or "convtranspose" in function.__code__.co_filename)


def _compile_message() -> str:
    folder = kernel_folder()
    if folder is None:
        return ("compiling numba kernels for this layer shape; with the kernel cache off "
                "(CONVTRANSPOSE_CACHE_DIR) every process compiles them again")
    return ("compiling numba kernels for this layer shape, once for this machine: they "
            f"are kept in {folder} for later calls and processes")


class _CompileNotice(event.Listener):
    """Announces a compilation of the library's kernels that lasts over a second
    (numba's compile events; the nested compilations of helper kernels count as one)."""

    def __init__(self):
        self._local = threading.local()

    def on_start(self, started):
        if not _is_library_kernel(started.data.get("dispatcher")):
            return
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth == 0:
            self._local.notice = notice_if_slow("compiling", _compile_message)
            self._local.notice.__enter__()

    def on_end(self, ended):
        if not _is_library_kernel(ended.data.get("dispatcher")):
            return
        self._local.depth -= 1
        if self._local.depth == 0:
            self._local.notice.__exit__(None, None, None)


event.register("numba:compile", _CompileNotice())
