"""Wisdom: what the library measured on this machine, kept across processes.

One JSON file per machine holds two sections: ``figures`` (the machine's measured
GEMM rate, copy rate, FMA peak and layout-copy split sizes, :mod:`.figures`) and
``choices`` (the algorithm measured fastest for each canonical problem,
:mod:`convtranspose._choose.planning`, with every timed candidate's time).  The file
names the machine it was measured on (:func:`identity`: CPU, instruction set, library and
dependency versions); a file that is damaged, from another machine (*foreign*) or from
another version of the library or its dependencies (*stale*) is ignored with one
warning, and replaced by the next write.

Where it lives: ``CONVTRANSPOSE_WISDOM=PATH`` names the file, ``CONVTRANSPOSE_WISDOM=off``
keeps everything in memory; otherwise it is ``wisdom-<digest of the identity>.json``
in the cache folder (:func:`convtranspose._runtime.cache.cache_dir`), so machines that
share a home folder keep separate files.  Writes replace the file atomically under an
advisory lock, merging what other processes wrote meanwhile: readers never see a torn
file and no process's entries are lost.  New entries are written in batches (the
first at once, then at most one write per :data:`FLUSH_SECONDS`, and at exit), so
adding n entries costs a few writes of the file, not n.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.metadata
import json
import os
import stat
import threading
import time

from .._runtime import blas
from .._runtime.cache import atomic_write, cache_dir, file_lock, replaceable, warn_once
from .._runtime.caches import kept
from .._runtime.config import WISDOM_ENV, switch
from .._runtime.machine import (
    cpu_identity,
    cpu_model_name,
    has_bfloat16_pairs,
    host_has_f16c,
    vector_bytes,
)
from .._version import __version__

__all__ = ["FORMAT", "WisdomError", "identity", "store"]

#: The ``format`` entry of every wisdom file (its layout's version is ``format_version``).
FORMAT = "convtranspose-wisdom"
#: Raised when what a file's entries mean changes (2: figures hold the FMA peak, and
#: ``direct-blocked``'s raw estimates put its multiply-adds in their ``kernel`` part).
FORMAT_VERSION = 2
#: The identity entries whose change makes a file stale rather than foreign.
_VERSIONS = ("convtranspose", "numpy", "numba", "format_version")


class WisdomError(ValueError):
    """A wisdom file or document that cannot be used here (damaged, foreign or stale)."""


@kept("the wisdom file's identity", maxsize=None)
def identity() -> dict:
    """What a measurement depends on: the CPU, the instruction set the kernels are
    compiled for (``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` included), the BLAS
    kernels, and the versions of the library and of NumPy and numba."""
    import numpy

    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba_version = ""
    vendor, family = cpu_identity()
    return {"cpu": cpu_model_name(), "vendor": vendor, "family": family,
            "vector_bytes": vector_bytes(), "f16c": host_has_f16c(),
            "bfloat16_pairs": has_bfloat16_pairs(), "blas": blas.corename(),
            "numba_cpu": os.environ.get("NUMBA_CPU_NAME", ""),
            "numba_features": os.environ.get("NUMBA_CPU_FEATURES", ""),
            "cpus": os.cpu_count() or 1, "convtranspose": __version__,
            "numpy": numpy.__version__, "numba": numba_version,
            "format_version": FORMAT_VERSION}


@kept("the wisdom file's identity", maxsize=None)
def _identity_digest() -> str:
    text = json.dumps(identity(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_document(document, source: str) -> None:
    """Raise :class:`WisdomError` saying why ``document`` (read from ``source``) cannot
    be used on this machine, or return."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise WisdomError(f"{source} is not a convtranspose wisdom file")
    theirs, ours = document.get("identity"), identity()
    if not isinstance(theirs, dict):
        raise WisdomError(f"{source} names no machine")
    differs = sorted(key for key in ours if theirs.get(key) != ours[key])
    if differs:
        kind = "stale" if set(differs) <= set(_VERSIONS) else "foreign"
        detail = ", ".join(f"{key} {theirs.get(key)!r} (here {ours[key]!r})" for key in differs)
        raise WisdomError(f"{source} is {kind}: {detail}")
    for section in ("figures", "choices"):
        if not isinstance(document.get(section, {}), dict):
            raise WisdomError(f"{source} is damaged: {section!r} is not a mapping")


def _valid_choice(entry) -> bool:
    """Whether a choices entry has the shape the planner reads: an algorithm's name,
    each timed candidate's nanoseconds and, if any, a positive thread count."""
    if not isinstance(entry, dict) or not isinstance(entry.get("algorithm"), str):
        return False
    threads = entry.get("threads", 1)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        return False
    times = entry.get("times_ns", {})
    return isinstance(times, dict) and all(
        isinstance(name, str) and isinstance(ns, (int, float)) and not isinstance(ns, bool)
        for name, ns in times.items())


def valid_entries(document: dict, source: str) -> tuple[dict, dict]:
    """The document's figures and choices without the entries the planner could not
    read (dropped with one warning)."""
    figures = {key: value for key, value in document.get("figures", {}).items()
               if isinstance(value, dict)}
    choices = {key: entry for key, entry in document.get("choices", {}).items()
               if _valid_choice(entry)}
    dropped = (len(document.get("figures", {})) - len(figures)
               + len(document.get("choices", {})) - len(choices))
    if dropped:
        warn_once("wisdom entries:" + source, f"convtranspose ignores {dropped} damaged "
                                              f"entries of its wisdom file {source}")
    return figures, choices


def new_document(figures: dict, choices: dict) -> dict:
    """A wisdom document of this machine."""
    return {"format": FORMAT, "identity": identity(), "figures": dict(figures),
            "choices": dict(choices)}


#: A wisdom file over this size is ignored (with one warning): a machine's wisdom holds a
#: few hundred bytes per measured problem, so this is tens of thousands of problems, and
#: reading and parsing it stays well under a second.
WISDOM_MAX_BYTES = 16 << 20


def _bounded_text(path: str) -> str:
    """The text of the regular file ``path``, refused (WisdomError) when it is anything
    else (a FIFO would block, a device never end) or over :data:`WISDOM_MAX_BYTES`."""
    with open(path, "rb", opener=_nonblocking) as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise WisdomError(f"{path} is not a regular file")
        data = file.read(WISDOM_MAX_BYTES + 1)
    if len(data) > WISDOM_MAX_BYTES:
        raise WisdomError(f"{path} is over {WISDOM_MAX_BYTES >> 20} MiB")
    return data.decode("utf-8")


def _nonblocking(path: str, flags: int) -> int:
    # Opening a FIFO for reading blocks until a writer comes; O_NONBLOCK returns at once
    # (regular files ignore it), and the file is then refused as not regular.
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


#: New entries are written in batches: a write (re-read under the lock when another
#: process changed the file, merged, rewritten and flushed to disk) comes at most once per
#: this many seconds ...
FLUSH_SECONDS = 1.0
#: ... and waits at least this many times as long as the last write took, so that writing
#: a large file costs at most a twentieth of the time (one rewrite per entry made adding
#: n entries cost n whole-file rewrites: quadratic).
_FLUSH_SHARE = 20


def _signature(path: str):
    """What tells whether the file at ``path`` changed: its inode, size and times."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def _no_entries() -> dict:
    return {"figures": {}, "choices": {}}


class WisdomStore:
    """The process's wisdom: read from the file at first use; new entries are written
    back in batches (the first at once, later ones at most once per
    :data:`FLUSH_SECONDS`, by a timer thread, and at the process's exit).  Thread-safe."""

    def __init__(self):
        self._lock = threading.RLock()
        self._loaded_from: object = None  # the path read, "" when off; None: not yet
        self.figures: dict = {}
        self.choices: dict = {}
        #: Counts the changes of what this process holds (loaded, recorded, merged,
        #: forgotten): what is derived from the entries is kept under it.
        self.revision = 0
        self._pending = _no_entries()  # recorded, not yet written to ``_loaded_from``
        self._next_write = 0.0  # time.monotonic() before which a record does not write
        self._timer: threading.Timer | None = None
        self._written: tuple = (None, None)  # (signature, document) of the last write
        self._exit_hook = False

    def path(self) -> str | None:
        """The wisdom file of this process, or None when wisdom stays in memory."""
        chosen = switch(WISDOM_ENV)
        if chosen.lower() == "off":
            return None
        if chosen:
            return os.path.abspath(os.path.expanduser(chosen))
        folder = cache_dir(create=False)
        if folder is None:
            return None
        return os.path.join(folder, f"wisdom-{_identity_digest()}.json")

    def _read(self, path: str) -> dict | None:
        """The usable document at ``path``, or None (missing; or unusable, with a warning)."""
        try:
            text = _bounded_text(path)
            try:
                document = json.loads(text)
            except (ValueError, RecursionError) as error:
                raise WisdomError(f"{path} is damaged (not JSON: {error})") from None
            check_document(document, path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, UnicodeDecodeError) as error:
            warn_once("wisdom:" + path, f"convtranspose ignores its wisdom file: {error}")
            return None
        document["figures"], document["choices"] = valid_entries(document, path)
        return document

    def ensure_loaded(self) -> None:
        """Read the file if this process has not yet (or the path changed since: what
        was recorded for the old path is written there first)."""
        path = self.path() or ""
        if self._loaded_from == path:
            return
        with self._lock:
            if self._loaded_from == path:
                return
            self._write_pending()
            document = self._read(path) if path else None
            self.figures = dict(document["figures"]) if document else {}
            self.choices = dict(document["choices"]) if document else {}
            self._loaded_from = path
            self._written, self._next_write = (None, None), 0.0  # a new file: write at once
            self.revision += 1

    def entries(self, section: str) -> dict:
        """A copy of ``section`` (``"figures"`` or ``"choices"``), safe to read while
        other threads record."""
        self.ensure_loaded()
        with self._lock:
            return dict(getattr(self, section))

    def record(self, section: str, key: str, entry) -> None:
        """Keep ``entry`` under ``key`` of ``section``; it reaches the file with the
        next batch (:meth:`flush` writes it at once)."""
        self.ensure_loaded()
        with self._lock:
            getattr(self, section)[key] = entry
            self.revision += 1
            if self._loaded_from:
                self._pending[section][key] = entry
                self._schedule()

    def merge(self, document: dict) -> None:
        """Take every readable entry of a checked document (:func:`check_document`) and
        write them at once."""
        self.ensure_loaded()
        figures, choices = valid_entries(document, "the imported wisdom")
        with self._lock:
            self.figures.update(figures)
            self.choices.update(choices)
            self.revision += 1
            if self._loaded_from:
                self._pending["figures"].update(figures)
                self._pending["choices"].update(choices)
                self._write_pending()

    def flush(self) -> None:
        """Write what was recorded and not yet written (the timer and the process's exit
        call this; so may a caller that wants the file current now)."""
        with self._lock:
            self._write_pending()

    def forget(self, disk: bool) -> None:
        """Forget every entry (and delete the file when ``disk``; else what was recorded
        is written first, as it would have been)."""
        with self._lock:
            if disk:
                self._pending = _no_entries()
            self._write_pending()
            self.figures, self.choices = {}, {}
            self.revision += 1
            path = self.path()
            self._loaded_from = path or ""
            self._written, self._next_write = (None, None), 0.0
            if disk and path:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def document(self) -> dict:
        self.ensure_loaded()
        with self._lock:
            return new_document(self.figures, self.choices)

    def _schedule(self) -> None:
        """Write the pending entries now when the last write was long enough ago; else
        have a timer write them when it is (called with the lock held)."""
        wait = self._next_write - time.monotonic()
        if wait <= 0:
            self._write_pending()
            return
        if not self._exit_hook:
            self._exit_hook = True
            atexit.register(self.flush)
        if self._timer is None:
            self._timer = threading.Timer(wait, self.flush)
            self._timer.daemon = True
            self._timer.start()

    def _write_pending(self) -> None:
        """Write the pending entries to the file they were recorded for (lock held)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, _no_entries()
        if not (self._loaded_from and (pending["figures"] or pending["choices"])):
            return
        started = time.monotonic()
        self._write(str(self._loaded_from), pending)
        finished = time.monotonic()
        self._next_write = finished + max(FLUSH_SECONDS, _FLUSH_SHARE * (finished - started))

    def _after_fork(self) -> None:
        """In a forked child: a fresh lock (another thread may have held the parent's)
        and no timer (threads do not survive a fork); the parent writes what it had
        pending, the child writes what it records itself."""
        self._lock = threading.RLock()
        self._timer = None
        self._pending = _no_entries()
        self._next_write = 0.0

    def _write(self, path: str, new: dict) -> None:
        if not replaceable(path):
            # A FIFO or a device (its reading was refused with a warning): renaming a
            # file over it would replace the device itself (/dev/null, for root).
            return
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            with file_lock(path):
                # The file is read again only when another process changed it since
                # this one wrote it (its entries are kept, merged with these).
                signature, document = self._written
                if signature is None or signature != _signature(path):
                    document = self._read(path) or new_document({}, {})
                for section, entries in new.items():
                    document[section].update(entries)
                atomic_write(path, json.dumps(document, indent=1, sort_keys=True))
                self._written = (_signature(path), document)
        except OSError as error:
            self._written = (None, None)
            warn_once("wisdom-write:" + path,
                      f"convtranspose keeps its wisdom in memory only: cannot write {path!r} "
                      f"({error}); set {WISDOM_ENV} to a writable file or 'off'")


#: The process's one store.
store = WisdomStore()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=store._after_fork)
