"""Limits every model and array reader enforces.

Model files and ``.npy`` files come from users debugging models they did not
write, so every size read from a file is checked before anything is allocated:
element counts must fit in int64, byte counts must stay under a stated limit
(``max_bytes``), every offset and size must lie inside the file, and pickles are
never loaded.  Violations raise :class:`InteropError` with a one-line message.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable

from .._errors import ConvTransposeError, install_hint

__all__ = [
    "DEFAULT_MAX_BYTES",
    "INT64_MAX",
    "InteropError",
    "MissingDependencyError",
    "check_bytes",
    "check_plan_memory",
    "element_count",
    "file_size",
    "format_bytes",
    "load_npy",
    "parse_bytes",
    "read_bounded",
    "require",
    "save_npy",
]

#: Default limit on any single allocation driven by a file's contents: 4 GiB.
DEFAULT_MAX_BYTES = 4 * 2**30
INT64_MAX = 2**63 - 1


class InteropError(ConvTransposeError):
    """A model or array file that is malformed, inconsistent or over a limit."""


class MissingDependencyError(ImportError):
    """An optional dependency a reader needs is not installed."""


def require(module: str, extra: str, purpose: str):
    """Import an optional dependency or raise :class:`MissingDependencyError`."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise MissingDependencyError(
            f"{purpose} needs the optional dependency {package!r}: "
            + install_hint(extra)
        ) from None


_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20,
          "MIB": 2**20, "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40,
          "TIB": 2**40}


def parse_bytes(text: str) -> int:
    """``"4G"``, ``"512M"``, ``"1000"`` -> bytes (binary units, case-insensitive)."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    unit = match and _UNITS.get(match.group(2).upper())
    if not unit:
        raise ValueError(f"expected a byte count such as 4G, 512M or 1000000, got {text!r}")
    value = int(match.group(1)) * unit
    if value <= 0:
        raise ValueError(f"must be positive, got {text!r}")
    return value


def format_bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def element_count(name: str, dims: Iterable[int]) -> int:
    """The number of elements of a shape, refusing negative dims and int64 overflow."""
    dims = tuple(dims)
    for i, dim in enumerate(dims):
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise InteropError(f"{name} {dims}: dimension {i} is not an integer: {dim!r}")
        if dim < 0:
            raise InteropError(f"{name} {dims}: dimension {i} is negative ({dim})")
        if dim > INT64_MAX:
            raise InteropError(f"{name} {dims}: dimension {i} does not fit in int64")
    count = math.prod(dims)
    if count > INT64_MAX:
        raise InteropError(f"{name} {dims} has {count} elements, which overflows int64")
    return count


def check_bytes(name: str, nbytes: int, max_bytes: int) -> None:
    """Refuse an allocation of ``nbytes`` over the limit."""
    if nbytes > max_bytes:
        raise InteropError(
            f"{name} needs {format_bytes(nbytes)} ({nbytes} bytes), over the limit of"
            f" {format_bytes(max_bytes)}; raise it with --max-bytes if this is intended"
        )


def read_bounded(path: str, offset: int, size: int, file_size: int, what: str) -> bytes:
    """``size`` bytes at ``offset`` of ``path``, after checking they lie inside the file."""
    if offset < 0 or size < 0:
        raise InteropError(f"{what}: negative offset {offset} or size {size}")
    if offset + size > file_size:
        raise InteropError(
            f"{what}: bytes [{offset}, {offset + size}) lie outside {os.path.basename(path)}"
            f" ({file_size} bytes); the file is truncated or the offset is wrong"
        )
    with open(path, "rb") as file:
        file.seek(offset)
        data = file.read(size)
    if len(data) != size:  # the file shrank while we read it
        raise InteropError(f"{what}: could read only {len(data)} of {size} bytes")
    return data


def file_size(path: str, what: str, max_bytes: int | None = None) -> int:
    """The size of a regular file, or an :class:`InteropError` naming it."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise InteropError(f"{what} {path!r} does not exist") from None
    except OSError as error:
        raise InteropError(f"cannot read {what} {path!r}: {error.strerror}") from None
    import stat as stat_module

    if not stat_module.S_ISREG(stat.st_mode):
        raise InteropError(f"{what} {path!r} is not a regular file")
    if max_bytes is not None:
        check_bytes(f"{what} {os.path.basename(path)}", stat.st_size, max_bytes)
    return stat.st_size


def load_npy(path: str, name: str, max_bytes: int):
    """Load a ``.npy`` file after checking its header: no pickles, no oversize arrays.

    The header is read first, so a file claiming a huge shape is refused before any
    allocation, and a truncated file is reported as such.
    """
    import numpy as np

    what = f"--{name} file"
    size = file_size(path, what)
    with open(path, "rb") as file:
        try:
            version = np.lib.format.read_magic(file)
        except ValueError:
            raise InteropError(
                f"{what} {path!r} is not a .npy file (save arrays with numpy.save)"
            ) from None
        try:
            if version == (1, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(file)
            else:
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(file)
        except (ValueError, SyntaxError, TypeError) as error:
            raise InteropError(f"{what} {path!r} has a malformed .npy header: {error}") from None
        header_end = file.tell()
    if dtype.hasobject:
        raise InteropError(
            f"{what} {path!r} holds Python objects (a pickle); refused for safety,"
            f" save a numeric array instead"
        )
    count = element_count(f"{what} {path!r} shape", shape)
    nbytes = count * dtype.itemsize
    check_bytes(f"{what} {os.path.basename(path)}", nbytes, max_bytes)
    if size - header_end < nbytes:
        raise InteropError(
            f"{what} {path!r} is truncated: its header declares {shape} {dtype}"
            f" ({nbytes} bytes) but only {size - header_end} bytes follow"
        )
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise InteropError(f"cannot load {what} {path!r}: {error}") from None


def save_npy(path: str, array) -> None:
    """Write ``array`` to exactly ``path`` (``numpy.save`` would append ``.npy``)."""
    import numpy as np

    try:
        with open(path, "wb") as file:
            np.save(file, array, allow_pickle=False)
    except OSError as error:
        raise InteropError(f"cannot write {path!r}: {error.strerror or error}") from None


def check_plan_memory(plan, dtype, max_bytes: int) -> None:
    """Refuse to execute ``plan`` when its working memory would exceed ``max_bytes``.

    The estimate is the output plus the data and one group's GEMM column buffer
    (``N * C_OUT/G * prod(K) * prod(X)`` elements), all in the accumulation dtype:
    what the GEMM + col2im kernel allocates, an upper bound for the others.
    """
    from .._dtypes import accumulation_dtype

    itemsize = accumulation_dtype(dtype).itemsize
    batch = plan.data_shape[0]
    spatial = math.prod(axis.input_size for axis in plan.axes)
    taps = math.prod(plan.kernel_shape)
    output = element_count("output shape", plan.output_shape)
    columns = batch * (plan.out_channels // plan.groups) * taps * spatial
    data = batch * plan.in_channels * spatial
    check_bytes(f"computing output {plan.output_shape}", (output + columns + data) * itemsize,
                max_bytes)
