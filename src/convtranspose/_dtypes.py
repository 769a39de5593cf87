"""Element-type rules: which dtypes are accepted and what they accumulate in."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["SUPPORTED_DTYPES", "accumulation_dtype", "check_dtypes"]

#: Names of the element types every op accepts (``bfloat16`` needs ``ml_dtypes``).
SUPPORTED_DTYPES = (
    "float64", "float32", "float16", "bfloat16",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
)


@functools.lru_cache(maxsize=64)
def _is_supported(dtype: np.dtype) -> bool:
    # bfloat16 is a structured-kind ("V") dtype from ml_dtypes: recognise it by name so
    # that ml_dtypes is never imported unless the caller already uses it.
    return dtype.kind in "fiu" and dtype.name in SUPPORTED_DTYPES or dtype.name == "bfloat16"


def check_dtypes(**arrays: np.ndarray) -> np.dtype:
    """The common dtype of ``arrays`` (keyword name -> array), or a TypeError.

    Every array must have the same, supported dtype: transposed convolution in
    every dialect is defined for a single element type T.
    """
    names = list(arrays)
    first = arrays[names[0]].dtype
    for name in names[1:]:
        other = arrays[name].dtype
        if other != first:
            raise TypeError(
                f"{names[0]} has dtype {first} but {name} has dtype {other}; all inputs must"
                f" have the same element type (cast one of them first)"
            )
    if not _is_supported(first):
        listed = ", ".join(names)
        raise TypeError(
            f"{listed} {'has' if len(names) == 1 else 'have'} dtype {first}, which is not"
            f" supported; use one of {', '.join(SUPPORTED_DTYPES)}"
        )
    return first


_INT64, _FLOAT32 = np.dtype(np.int64), np.dtype(np.float32)


def accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype sums are accumulated in (docs/semantics.md, "Numbers").

    float16 and bfloat16 accumulate in float32 and round once at the end; integers
    accumulate in int64 and wrap to the element type on the final cast (two's
    complement wrap-around gives the same bits as wrapping at every step).
    """
    if dtype.kind in "iu":
        return _INT64
    if dtype.kind == "f" and dtype.itemsize == 8:
        return dtype
    return _FLOAT32
