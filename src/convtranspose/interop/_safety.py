"""Limits every model and array reader enforces.

Model files and ``.npy`` files come from users debugging models they did not
write, so every size read from a file is checked before anything is allocated:
element counts must fit in int64, byte counts must stay under a stated limit
(``max_bytes``), every offset and size must lie inside the file, and pickles are
never loaded.  Violations raise :class:`InteropError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import stat as stat_module
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from .._errors import ConvTransposeError, install_hint
from .._runtime.cache import user_file_mode

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
    "open_regular",
    "parse_bytes",
    "read_bounded",
    "require",
    "replaced_atomically",
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
    with open_regular(path, what) as file:
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
    if not stat_module.S_ISREG(stat.st_mode):
        raise InteropError(f"{what} {path!r} is not a regular file")
    if max_bytes is not None:
        check_bytes(f"{what} {os.path.basename(path)}", stat.st_size, max_bytes)
    return stat.st_size


def open_regular(path: str, what: str) -> BinaryIO:
    """``path`` opened for reading in binary, or an :class:`InteropError` when it is
    missing, unreadable or not a regular file.

    The file is opened without blocking and checked through its descriptor: a FIFO
    would block the open (or the first read) until some writer came, and a device
    never ends, so neither may be what a name turns out to be when it is opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(
        os, "O_BINARY", 0)
    try:
        handle = os.open(path, flags)
    except FileNotFoundError:
        raise InteropError(f"{what} {path!r} does not exist") from None
    except OSError as error:
        raise InteropError(f"cannot read {what} {path!r}: {error.strerror}") from None
    try:
        if not stat_module.S_ISREG(os.fstat(handle).st_mode):
            raise InteropError(f"{what} {path!r} is not a regular file")
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(handle, True)
        return os.fdopen(handle, "rb")
    except BaseException:
        os.close(handle)
        raise


@contextlib.contextmanager
def replaced_atomically(path: str) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new contents into; they replace the file only
    when the block ends without an error.

    The bytes go to a temporary file in the same folder, which is then renamed over
    ``path`` (through a symbolic link, to its target): a reader sees the old file or
    the new one, and a failure (a full disk, an interrupt) leaves the old file as it
    was and no temporary behind.  A name that is not a regular file (``/dev/null``, a
    FIFO, ``/dev/stdout``) is written directly, in one piece once the block ends:
    renaming over it would replace the device itself.
    """
    try:
        status = os.stat(path)  # through links: /dev/stdout may lead to a pipe
    except FileNotFoundError:
        status = None
    except OSError as error:
        raise InteropError(f"cannot write {path!r}: {error.strerror or error}") from None
    if status is not None and not stat_module.S_ISREG(status.st_mode):
        # Collected first: NumPy's writer asks a file for its position, which a pipe
        # (``-o /dev/stdout`` into one) cannot tell.
        buffer = io.BytesIO()
        yield buffer
        with open(path, "wb") as stream:
            stream.write(buffer.getbuffer())
        return
    target = os.path.realpath(path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.",
                                             suffix=".part", dir=os.path.dirname(target))
    except OSError as error:
        raise InteropError(f"cannot write {path!r}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as file:
            yield file
            file.flush()
        os.chmod(temporary, stat_module.S_IMODE(status.st_mode) if status else user_file_mode(target))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def load_npy(path: str, name: str, max_bytes: int):
    """Load a ``.npy`` file after checking its header: no pickles, no oversize arrays.

    The header is read first, so a file claiming a huge shape is refused before any
    allocation, and a truncated file is reported as such.
    """

    what = f"--{name} file"
    with open_regular(path, what) as file:
        size = os.fstat(file.fileno()).st_size
        return _read_npy(file, path, what, size, max_bytes)


def _read_npy(file: BinaryIO, path: str, what: str, size: int, max_bytes: int):
    """The array of the open ``.npy`` ``file`` of ``size`` bytes, checked (:func:`load_npy`)."""
    import numpy as np

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
    except Exception as error:  # noqa: BLE001 - NumPy's header parser raises
        # ValueError, SyntaxError, tokenize.TokenError, RecursionError...: all mean
        # the header is not one NumPy wrote.
        raise InteropError(f"{what} {path!r} has a malformed .npy header:"
                           f" {one_line(error)}") from None
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
    file.seek(0)
    try:
        return np.load(file, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise InteropError(f"cannot load {what} {path!r}: {one_line(error)}") from None


def one_line(error) -> str:
    """An error's message on one line (NumPy's and onnx's may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def save_npy(path: str, array) -> None:
    """Write ``array`` to exactly ``path`` (``numpy.save`` would append ``.npy``)."""
    import numpy as np

    try:
        with replaced_atomically(path) as file:
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
