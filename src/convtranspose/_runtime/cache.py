"""Where the library keeps what it learns about a machine: one per-user cache folder.

Two things live there: the planner's wisdom (:mod:`convtranspose._choose.planning`) and the
compiled kernels' numba cache.  The folder is

- ``CONVTRANSPOSE_CACHE_DIR`` when set (``off`` keeps nothing on disk);
- otherwise the user cache directory of :mod:`platformdirs` when it is installed
  (``~/.cache/convtranspose`` on Linux, ``~/Library/Caches/convtranspose`` on macOS,
  ``%LOCALAPPDATA%\\convtranspose\\Cache`` on Windows);
- otherwise the same Linux and macOS rules applied here (``XDG_CACHE_HOME``).

Nothing is written until something is worth keeping, and a folder that cannot be
created or written is the same as ``off`` (with one warning).  So is a folder that
another user owns or that others may write (:func:`trusted`): compiled kernels are
loaded from it.  A new folder is made ``0700``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
import warnings
from collections.abc import Iterator

from .caches import kept
from .config import CACHE_ENV, switch

__all__ = ["atomic_write", "cache_dir", "file_lock", "replaceable", "trusted", "warned_keys"]


#: The keys :func:`warn_once` has warned for in this process.
warned_keys: set[str] = set()


@kept("machine facts", maxsize=None)
def _platformdirs():
    try:
        import platformdirs
    except ImportError:
        return None
    return platformdirs


def _default_dir() -> str:
    platformdirs = _platformdirs()
    if platformdirs is not None:
        return platformdirs.user_cache_dir("convtranspose", appauthor=False)
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Caches", "convtranspose")
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, "convtranspose", "Cache")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(base, "convtranspose")


def cache_dir(create: bool = True) -> str | None:
    """The cache folder (created when ``create``), or None when caching is off or the
    folder cannot be made."""
    chosen = switch(CACHE_ENV)
    if chosen.lower() == "off":
        return None
    folder = os.path.abspath(os.path.expanduser(chosen)) if chosen else _default_dir()
    if create:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError as error:
            warn_once(folder, f"convtranspose keeps no cache: cannot create {folder!r} "
                              f"({error}); set {CACHE_ENV} to a writable folder or 'off'")
            return None
    if not trusted(folder):
        warn_once(folder, f"convtranspose keeps no cache: {folder!r} is not a folder of "
                          "this user that only this user can write (what is loaded from "
                          f"it runs as code); set {CACHE_ENV} to such a folder or 'off'")
        return None
    return folder


def trusted(folder: str) -> bool:
    """Whether ``folder`` is a folder owned by this user that no one else can write (or
    does not exist yet).  Compiled kernels and kernel modules are loaded from the cache
    folder, so a folder others can write would let them run code in this process.
    POSIX only: elsewhere the folder's access control lists decide."""
    if os.name != "posix":
        return True
    try:
        status = os.stat(folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return (stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid()
            and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def warn_once(key: str, message: str) -> None:
    """One :class:`RuntimeWarning` per ``key`` and process."""
    if key not in warned_keys:
        warned_keys.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def replaceable(path: str) -> bool:
    """Whether a file may be renamed over ``path``: nothing is there, or a regular file
    or a symbolic link (the link itself is replaced).  Not a FIFO, a device or a folder:
    renaming over ``/dev/null`` would replace the device for every program."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def user_file_mode(path: str) -> int:
    """The permissions a file the user asked for gets at ``path``: the existing file's,
    else those ``open(path, "w")`` gives a new one (0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def atomic_write(path: str, text: str, *, private: bool = True) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never
    a part: a temporary file in the same folder, flushed, then renamed over ``path``.
    The file is the user's alone (0600) when ``private`` (the cache's files), else it
    gets :func:`user_file_mode` (results the user asked for).  Raises :class:`OSError`
    when ``path`` is not :func:`replaceable`."""
    if not replaceable(path):
        raise OSError(errno.EEXIST, "exists and is not a regular file; not replaced", path)
    folder = os.path.dirname(path) or "."
    mode = None if private else user_file_mode(path)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """An exclusive advisory lock on ``path + ".lock"`` (POSIX ``flock``; elsewhere none:
    the atomic rename alone keeps files whole).  The lock file is opened without
    following a symbolic link (a planted one would make the library write where it
    points)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    handle = os.open(path + ".lock", flags, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing releases the lock
