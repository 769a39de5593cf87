"""Everything the library keeps between calls in one process, by name.

A module that keeps something between calls registers it here (:func:`register`, or the
:func:`kept` decorator for a memoised function), under a name a user can read;
``ct.clear_caches()`` clears every registered cache (:func:`clear_all`).  Facts about
the machine (its CPU, BLAS and memory) are not registered: they do not change while a
process runs.  Compiled kernels on disk and the wisdom file are not caches of the
process either (``ct.forget_wisdom`` forgets the wisdom).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

__all__ = ["clear_all", "kept", "names", "register"]

_clears: dict[str, list[Callable[[], None]]] = {}
_lock = threading.Lock()


def register(name: str, clear: Callable[[], None]) -> None:
    """Add ``clear`` to the functions that forget the cache called ``name``."""
    with _lock:
        _clears.setdefault(name, []).append(clear)


def kept(name: str, maxsize: int | None = 128):
    """``functools.lru_cache(maxsize)``, registered under ``name``."""
    def decorate(function):
        cached = functools.lru_cache(maxsize=maxsize)(function)
        register(name, cached.cache_clear)
        return cached
    return decorate


def names() -> tuple[str, ...]:
    """The registered caches' names, in the order they were first registered (a cache
    of a module not imported yet is not registered: it holds nothing)."""
    with _lock:
        return tuple(_clears)


def clear_all() -> tuple[str, ...]:
    """Clear every registered cache; returns their names."""
    with _lock:
        clears = {name: list(functions) for name, functions in _clears.items()}
    for functions in clears.values():
        for clear in functions:
            clear()
    return tuple(clears)
