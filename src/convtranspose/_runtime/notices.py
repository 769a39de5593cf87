"""One-line notices for waits that would otherwise pass in silence.

A call that compiles kernels or times algorithms for a new layer can take seconds the
first time on a machine.  :func:`notice_if_slow` says so, once per kind of wait and
process, when such a wait passes :data:`NOTICE_AFTER_SECONDS`: a warning of the
``convtranspose`` logger (printed on stderr when the application configured no
logging), written while the wait goes on, not after it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

__all__ = ["LOGGER", "NOTICE_AFTER_SECONDS", "notice_if_slow", "said"]

#: The library's logger.
LOGGER = logging.getLogger("convtranspose")
#: A wait longer than this (seconds) is announced: users notice a pause of about a
#: second, and a first call that measures a small layer takes well under it.
NOTICE_AFTER_SECONDS = 1.0

_said: set[str] = set()
_said_lock = threading.Lock()


def said() -> frozenset[str]:
    """The kinds of wait announced so far in this process."""
    with _said_lock:
        return frozenset(_said)


@contextlib.contextmanager
def notice_if_slow(kind: str, message: Callable[[], str],
                   after: float = NOTICE_AFTER_SECONDS) -> Iterator[None]:
    """``with notice_if_slow(kind, message):`` log ``message()`` once per process and
    ``kind`` if the block is still running ``after`` seconds after it started."""
    with _said_lock:
        announced = kind in _said
    if announced:  # the lock is never held while the block runs: blocks nest
        yield
        return
    timer = threading.Timer(after, _say, (kind, message))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _say(kind: str, message: Callable[[], str]) -> None:
    with _said_lock:
        if kind in _said:
            return
        _said.add(kind)
    LOGGER.warning("convtranspose: %s", message())
