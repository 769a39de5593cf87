"""How much memory a call may take: the machine's, or less where the caller says so.

:func:`get_max_bytes` is the limit every array function checks its request against
before allocating (:class:`~convtranspose._errors.ResultTooLargeError` beyond it):
:func:`set_max_bytes` for the process, :func:`limit_memory` for the calls of one
``with`` block (this thread or task only), else the machine's memory
(:func:`machine_memory_bytes`).
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
import os
from collections.abc import Iterator

from .._errors import ConvTransposeError
from .caches import kept

__all__ = ["check_request", "get_max_bytes", "limit_memory", "machine_memory_bytes",
           "set_max_bytes", "sums_piece_bytes"]

_process_limit: int | None = None
_block_limit: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "convtranspose_max_bytes", default=None)


def _byte_count(value: object) -> int | None:
    """``value`` as a positive byte count, or None (no limit of the caller's own)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConvTransposeError(f"max_bytes must be a positive integer or None, got {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise ConvTransposeError(
            f"max_bytes must be a positive integer or None, got {value!r} of type"
            f" {type(value).__name__}") from None
    if count <= 0:
        raise ConvTransposeError(f"max_bytes must be positive, got {count}")
    return count


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (cgroup v2): no limit


@kept("machine facts", maxsize=1)
def machine_memory_bytes() -> int:
    """The memory this process can have: the least of the physical memory, the control
    group's limit (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) and the
    address-space limit (``RLIMIT_AS``), where each is known; 2**63 - 1 if none is."""
    known = []
    try:
        known.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        value = _read_int(path)
        if value:
            known.append(value)
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            known.append(soft)
    except (ImportError, ValueError, OSError):
        pass
    return min(known) if known else (1 << 63) - 1


def get_max_bytes() -> int:
    """The bytes a call may allocate (result and scratch) before it is refused.

    Examples
    --------
    >>> import convtranspose as ct
    >>> with ct.limit_memory(1 << 20):
    ...     ct.get_max_bytes()
    1048576
    """
    block = _block_limit.get()
    if block is not None:
        return block
    return _process_limit if _process_limit is not None else machine_memory_bytes()


def set_max_bytes(max_bytes: int | None) -> int | None:
    """Limit the memory of every later call of the process to ``max_bytes`` (None: the
    machine's memory); returns the previous setting (None if there was none).

    A call whose result and scratch would need more raises
    :class:`~convtranspose.ResultTooLargeError` before allocating anything (the
    command line's ``--max-bytes`` for the library).  :func:`limit_memory` blocks
    take precedence.

    Raises
    ------
    ConvTransposeError
        ``max_bytes`` is not a positive integer or None.

    Examples
    --------
    >>> import convtranspose as ct
    >>> previous = ct.set_max_bytes(8 << 30)
    >>> ct.get_max_bytes()
    8589934592
    >>> _ = ct.set_max_bytes(previous)
    """
    global _process_limit
    previous, _process_limit = _process_limit, _byte_count(max_bytes)
    return previous


@contextlib.contextmanager
def limit_memory(max_bytes: int | None) -> Iterator[None]:
    """Limit the memory of the calls in the ``with`` block (this thread or task only).

    ``None`` lifts a limit set around the block back to the process setting.

    Raises
    ------
    ConvTransposeError
        ``max_bytes`` is not a positive integer or None.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data, filter = np.ones((1, 1, 4)), np.ones((1, 1, 3))
    >>> with ct.limit_memory(1 << 20):
    ...     ct.convolution_backprop_data(data, filter, [10**6])
    Traceback (most recent call last):
    ...
    convtranspose._errors.ResultTooLargeError: output_shape asks for ...
    """
    token = _block_limit.set(_byte_count(max_bytes))
    try:
        yield
    finally:
        _block_limit.reset(token)


#: Sums of a narrower result type (float16, bfloat16, integers of fewer than 8 bytes) are
#: accumulated in pieces of at most ``max(result bytes, this)``: the wider sums never
#: take more than the result itself, except for results under 16 MiB.
SUMS_PIECE_MIN_BYTES = 16 << 20


def sums_piece_bytes(result_bytes: int) -> int:
    """The most bytes a piece of wider sums may take, for a result of ``result_bytes``."""
    return max(result_bytes, SUMS_PIECE_MIN_BYTES)


def format_bytes(count: int) -> str:
    """``count`` in the largest binary unit that keeps it at least 1 (``7.3 TiB``)."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{count} bytes" if unit == "bytes" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{count} bytes"  # pragma: no cover - the loop returns


def check_request(shape: tuple[int, ...], dtype, *, result_allocated: bool, scratch_bytes: int,
                  argument: str, value: object) -> None:
    """Refuse a result of ``shape`` and ``dtype`` that NumPy cannot hold, or that with
    ``scratch_bytes`` more would exceed :func:`get_max_bytes` (``result_allocated``:
    the call allocates the result; with ``out=`` it does not).

    ``argument`` and ``value`` name what asks for that size, for the message.
    """
    from .._errors import ResultTooLargeError

    itemsize, elements, span = dtype.itemsize, 1, dtype.itemsize
    for dim in shape:
        elements *= dim
        span *= max(dim, 1)
    if span > _LARGEST_ARRAY_BYTES:  # NumPy's own limit, even with no elements
        raise ResultTooLargeError(
            f"{argument} asks for a result of shape {shape} ({dtype}), which NumPy cannot"
            f" hold: its dimensions span {span} bytes, past NumPy's {_LARGEST_ARRAY_BYTES}"
            f" (even when another dimension is 0); {argument}={value!r}",
            argument=argument, nbytes=span, limit=None)
    if elements == 0:
        return
    needed = (elements * itemsize if result_allocated else 0) + scratch_bytes
    limit = get_max_bytes()
    if needed > limit:
        what = "a result" if result_allocated else "scratch for a result"
        raise ResultTooLargeError(
            f"{argument} asks for {what} of shape {shape} ({dtype}) that needs {needed}"
            f" bytes ({format_bytes(needed)}) with its scratch, more than the"
            f" {limit}-byte limit ({format_bytes(limit)}, {_limit_source()});"
            f" {argument}={value!r}",
            argument=argument, nbytes=needed, limit=limit)


_LARGEST_ARRAY_BYTES = (1 << 63) - 1


def _limit_source() -> str:
    if _block_limit.get() is not None:
        return "set by convtranspose.limit_memory"
    if _process_limit is not None:
        return "set by convtranspose.set_max_bytes"
    return "this machine's memory; convtranspose.set_max_bytes changes it"
