"""Environment switches, read on every call (users and tests change them at run time)."""

from __future__ import annotations

import os

__all__ = ["ALGORITHM_ENV", "switch"]

#: Environment variable forcing an algorithm (a name of the kernels' registry) for every call.
ALGORITHM_ENV = "CONVTRANSPOSE_ALGORITHM"

# ``os.environ.get`` of an unset name raises and catches a KeyError inside (about 1 us);
# a tiny layer reads three switches per call, a tenth of its whole cost.  On POSIX the
# mapping keeps its bytes-keyed dict in sync with every assignment, so read that.
_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
if type(_DATA) is not dict:
    _DATA = None


def switch(name: str) -> str:
    """The value of environment variable ``name``, or ``""`` when it is unset."""
    if _DATA is None:
        return os.environ.get(name, "")
    value = _DATA.get(name.encode())
    return "" if value is None else os.fsdecode(value)
