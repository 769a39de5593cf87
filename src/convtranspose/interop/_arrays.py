"""The command line's ``.npy`` files: bfloat16 both ways, and ``-`` for stdout.

NumPy stores an ``ml_dtypes.bfloat16`` array as raw 2-byte values (``|V2``): the file
does not say bfloat16, so such a file is read as bfloat16 only when ``--dtype
bfloat16`` says so.  A bfloat16 result is written with the dtype name ``'bfloat16'``
in its header instead, which ``numpy.load`` reads back as bfloat16 whenever
``ml_dtypes`` is imported (and this module's reader always does).
"""

from __future__ import annotations

import sys

from ._safety import InteropError, load_npy, open_regular, replaced_atomically, require, save_npy

__all__ = ["STDOUT", "load_array", "save_array"]

#: The output name meaning standard output.
STDOUT = "-"
_BFLOAT16_HEADER = b"'descr': 'bfloat16'"
_HEADER_PEEK = 4096  # a .npy header is padded to a multiple of 64 bytes, rarely > 200


def _bfloat16():
    return require("ml_dtypes", "bfloat16", "bfloat16 arrays").bfloat16


def load_array(path: str, name: str, max_bytes: int, dtype: str | None = None):
    """The array of the ``.npy`` file for ``--name``, checked (:func:`load_npy`).

    ``dtype`` (``--dtype``) is the dtype the file must hold; ``"bfloat16"`` also reads
    raw 2-byte values (``|V2``) as bfloat16.
    """
    import numpy as np

    with open_regular(path, f"--{name} file") as file:  # never a FIFO or a device
        head = file.read(_HEADER_PEEK)
    if _BFLOAT16_HEADER in head:
        _bfloat16()  # registers the name 'bfloat16' with NumPy before the header is parsed
    array = load_npy(path, name, max_bytes)
    # ml_dtypes' bfloat16 is of kind "V" too: raw pairs are plain np.void only.
    raw_pairs = (array.dtype.type is np.void and array.dtype.itemsize == 2
                 and not array.dtype.names)
    if raw_pairs:
        if dtype != "bfloat16":
            raise InteropError(
                f"--{name} file {path!r} holds raw 2-byte values ({array.dtype.str}), which is"
                " how NumPy stores bfloat16: pass --dtype bfloat16 to read them as bfloat16")
        return array.view(_bfloat16())
    if dtype is not None:
        expected = _bfloat16() if dtype == "bfloat16" else _numpy_dtype(dtype)
        if array.dtype != np.dtype(expected):
            raise InteropError(f"--{name} file {path!r} holds {array.dtype}, not --dtype {dtype}")
    return array


def _numpy_dtype(name: str):
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        raise InteropError(f"--dtype {name!r} is not a NumPy dtype") from None


def save_array(path: str, array) -> None:
    """Write ``array`` as ``.npy`` to exactly ``path``, or to stdout for ``-``; a bfloat16
    array with the dtype name ``'bfloat16'`` in its header."""
    import numpy as np

    if array.dtype.name != "bfloat16":
        if path == STDOUT:
            sys.stdout.flush()
            np.save(sys.stdout.buffer, array, allow_pickle=False)
            sys.stdout.buffer.flush()
        else:
            save_npy(path, array)
        return
    array = np.ascontiguousarray(array)
    header = {"descr": "bfloat16", "fortran_order": False, "shape": array.shape}
    if path == STDOUT:
        _write_bfloat16(sys.stdout.buffer, header, array)
        return
    try:
        with replaced_atomically(path) as file:
            _write_bfloat16(file, header, array)
    except OSError as error:
        raise InteropError(f"cannot write {path!r}: {error.strerror or error}") from None


def _write_bfloat16(file, header: dict, array) -> None:
    import numpy as np

    np.lib.format.write_array_header_1_0(file, header)
    file.write(memoryview(array.view(np.uint16)).cast("B"))
    file.flush()
