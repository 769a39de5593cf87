"""Every ``CONVTRANSPOSE_*`` environment switch, named in one place and read here.

Switches are read on every call (users and tests change them at run time), through
:func:`switch`; each module that obeys one imports its name from here.
"""

from __future__ import annotations

import os

__all__ = ["ALGORITHM_ENV", "AMX_ENV", "BACKGROUND_COMPILE_ENV", "BACKWARD_ALGORITHM_ENV", "CACHE_ENV",
           "DUMP_ENV", "NATIVE_THREADS_ENV", "NO_BLAS_ENV", "NO_NUMBA_ENV",
           "PIN_THREADS_ENV", "PLANNING_ENV", "WISDOM_ENV",
           "dump_source", "switch", "switches_reader"]

#: Forces an algorithm (a name of the kernels' registry) for every transposed convolution.
ALGORITHM_ENV = "CONVTRANSPOSE_ALGORITHM"
#: Forces one adjoint algorithm (:data:`convtranspose._kernels.adjoints.ALGORITHMS`) for
#: the gradients and forward convolutions (tests, comparisons).
BACKWARD_ALGORITHM_ENV = "CONVTRANSPOSE_BACKWARD_ALGORITHM"
#: The planning level when no API setting chooses one (``estimate``, ``measure``, ...).
PLANNING_ENV = "CONVTRANSPOSE_PLANNING"
#: The wisdom file's path, or ``off``.
WISDOM_ENV = "CONVTRANSPOSE_WISDOM"
#: The cache folder, or ``off``.
CACHE_ENV = "CONVTRANSPOSE_CACHE_DIR"
#: Set to ``off`` to compile the kernels a new layer's measurement needs in the calling
#: process instead of in a background process (:mod:`convtranspose._execute.background`).
BACKGROUND_COMPILE_ENV = "CONVTRANSPOSE_BACKGROUND_COMPILE"
#: A folder where every generated kernel source is written.
DUMP_ENV = "CONVTRANSPOSE_DUMP_KERNELS"
#: Set to 1 to never use numba, even when it is installed.
NO_NUMBA_ENV = "CONVTRANSPOSE_NO_NUMBA"
#: Set to 1 to never call BLAS directly (the NumPy-only algorithms run instead).
NO_BLAS_ENV = "CONVTRANSPOSE_NO_BLAS"
#: Helper threads' CPU affinity (:func:`convtranspose._runtime.threads.steering_mode`):
#: unset, narrowed off the calling thread's CPU for their wake-up only; 1 (anything but
#: 0), kept narrowed; 0, never touched.  Read on every parallel call.
PIN_THREADS_ENV = "CONVTRANSPOSE_PIN_THREADS"
#: Set to 0 to never use AMX tiles (:func:`convtranspose._runtime.machine.has_amx_int8`):
#: the integer sums then run on the CPU's vector instructions.  Read once.
AMX_ENV = "CONVTRANSPOSE_AMX"
#: Set to 0 to run every parallel kernel on the library's Python thread pool instead of
#: numba's native threads (:mod:`convtranspose._kernels._numba.launch`).
NATIVE_THREADS_ENV = "CONVTRANSPOSE_NATIVE_THREADS"

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


def switches_reader(*names: str):
    """A function of no arguments that reads the switches ``names`` as they are set now:
    a tuple, equal between two reads exactly when every switch is unchanged (the raw
    values, faster to read than :func:`switch`'s strings, which a caller that only
    compares two reads does not need)."""
    if _DATA is None:
        return lambda: tuple(os.environ.get(name) for name in names)
    keys, get = tuple(name.encode() for name in names), _DATA.get
    if len(keys) == 3:  # spelled out: a fifth of the time of a loop over the keys
        first, second, third = keys
        return lambda: (get(first), get(second), get(third))
    return lambda: tuple([get(key) for key in keys])


def dump_source(stem: str, source: str) -> None:
    """Write ``source`` as ``<stem>.py`` into the folder :data:`DUMP_ENV` names (made if
    missing); nothing when the variable is unset.

    Raises
    ------
    ConvTransposeError
        The variable names something that is not a folder (an existing file), or a
        folder that cannot be made or written: the message names the variable.
    """
    folder = switch(DUMP_ENV)
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, stem + ".py"), "w", encoding="utf-8") as file:
            file.write(source)
    except OSError as error:
        from .._errors import ConvTransposeError

        raise ConvTransposeError(
            f"{DUMP_ENV}={folder!r} must name a folder this process can create or write"
            f" ({error.strerror or error}); unset it to write no kernel sources") from None
