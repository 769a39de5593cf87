"""Repeated calls of an array function, run without resolving anything again.

A layer called again and again through its array function (``ct.onnx_conv_transpose(x,
w, strides=[2, 2])`` in a loop) passes the same attributes and the same filter object,
with data of the same shape, every time.  Its plan and its prepared call
(:mod:`.kept_calls`) depend on nothing else: the operands' shapes and dtypes and the
attributes' values.  :func:`remembers_calls` wraps a dialect's array function so that
such a call compares those with a :class:`_Record` of an earlier call and runs the
prepared call at once: no argument binding, plan lookup or operand checks, which take
more than half of a tiny layer's call through the function
(``benchmarks/results/prepared-calls-xeon.json``).  The prepared call still reads the
filter as the caller passes it, so a filter edited in place between calls gives the
edited result, as it does through the whole function.

A record is kept only after a call that :func:`~.specs.execute_plan` computed through
its prepared path with the caller's own data and filter objects and no bias
(:func:`note_prepared`), writing into the caller's ``out`` if one was given, and whose
result the function returned as it was: the function then did nothing but what the
record runs again.  Calls with and without ``out`` keep separate records (their memory
footprints differ).  A record holds while

- the attributes (the arguments other than the data and filter, all of plain types:
  exact ints, bools, strings, None, lists and tuples of exact ints) are equal and of the
  same types, given by the same names in the same order;
- the data and filter are ndarrays (exactly) of the recorded shapes and dtypes, passed
  by position;
- the prepared call is still kept, for the current planning generation (wisdom,
  planning level);
- the memory limit (:func:`~convtranspose.get_max_bytes`) is at least the one the
  recorded call passed under: the call's footprint is unchanged, so it passes again;
- ``out``, where given, is what the prepared call writes straight into (as
  :func:`~.specs.direct_out` requires): an ndarray (exactly) of the result's shape and
  dtype, C-contiguous, writeable and apart from the data and the filter.

Any other call runs the whole function, which may record it.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from .._choose import planning as _planning
from .._plan import dialects as _dialects
from .._runtime import caches as _caches
from .._runtime import memory as _memory
from .kept_calls import PreparedKey, prepared_calls
from .plain_plans import exact_int_items, sequences_getter

__all__ = ["RECORDS_KEPT", "may_share_memory", "note_prepared", "remembers_calls"]

#: Records kept per array function, keyed by the filter's identity and the data's
#: shape (a decoder's layers, a few batch sizes); all are forgotten beyond this many.
RECORDS_KEPT = 64
_local = threading.local()
#: ``np.may_share_memory`` without the ``__array_function__`` dispatch (half its time in
#: the tiny layer's call), where NumPy exposes it.
may_share_memory = getattr(np.may_share_memory, "_implementation", np.may_share_memory)
_PLAIN = frozenset({int, bool, str, type(None), tuple, list})
_forgets: list = []


def note_prepared(data: np.ndarray, filter: np.ndarray, key: PreparedKey,
                  result: np.ndarray) -> None:
    """Tell the calling thread's array function that ``result`` (the caller's ``out``, if
    it gave one) was computed on these very operands, with no bias, by the prepared call
    kept under ``key`` in :data:`~.kept_calls.prepared_calls`."""
    _local.noted = (data, filter, key, result)


class _Record:
    """What one call of an array function was, and the prepared call that computed it."""

    __slots__ = ("names", "values", "kinds", "sequences", "dtype", "filter_shape",
                 "filter_dtype", "output_shape", "key", "limit")

    def __init__(self, names, values, data, filter, result, key, limit):
        self.names, self.kinds = names, tuple(map(type, values))
        self.values = tuple(list(value) if type(value) is list else value for value in values)
        self.sequences = sequences_getter(self.kinds)
        self.dtype, self.filter_shape, self.filter_dtype = data.dtype, filter.shape, filter.dtype
        self.output_shape = result.shape
        # The prepared call is looked up by its key on every call, not kept here: the
        # prepared calls' table bounds what their packed weights hold.
        self.key, self.limit = key, limit


def _plain(values: tuple) -> bool:
    """Whether every value is of a plain type whose equality the record can trust."""
    kinds = tuple(map(type, values))
    return _PLAIN.issuperset(kinds) and exact_int_items(sequences_getter(kinds)(values))


def _positions(function, record: _dialects.Dialect) -> tuple[int, int]:
    """The positions of the data and the filter among ``function``'s parameters."""
    names = list(inspect.signature(function).parameters)
    return names.index(record.operands[0]), names.index(record.operands[1])


_Function = TypeVar("_Function", bound=Callable[..., Any])


def remembers_calls(function: _Function) -> _Function:
    """``function`` (a float dialect's array function), answering repeated calls from a
    record of an earlier one (the module's rules)."""
    data_at, filter_at = _positions(function, _dialects.DIALECTS[function.__name__])
    low, high = sorted((data_at, filter_at))
    needed = high + 1

    # The positional arguments but the two operands (the common case in one slice).
    if (low, high) == (0, 1):
        def others(args: tuple) -> tuple:
            return args[2:]
    else:
        def others(args: tuple) -> tuple:
            return args[:low] + args[low + 1:high] + args[high + 1:]

    records: dict = {}
    _forgets.append(records.clear)

    @functools.wraps(function)
    def call(*args, **kwargs):
        if len(args) >= needed:
            data, filter = args[data_at], args[filter_at]
            if type(data) is np.ndarray and type(filter) is np.ndarray:
                named, out = kwargs, None
                if "out" in kwargs:
                    out = kwargs["out"]
                    named = {name: value for name, value in kwargs.items() if name != "out"}
                key = (id(filter), data.shape, out is None)
                values = (*others(args), *named.values())
                record = records.get(key)
                # The rules of the module, the cheapest comparisons first; the types
                # before the values, so that ``==`` compares plain values only.
                if (record is not None and data.dtype is record.dtype
                        and filter.dtype is record.filter_dtype
                        and filter.shape == record.filter_shape
                        and tuple(map(type, values)) == record.kinds
                        and values == record.values and tuple(named) == record.names
                        and exact_int_items(record.sequences(values))
                        and _memory.get_max_bytes() >= record.limit
                        and (out is None or _takes_out(out, record, data, filter))):
                    prepared = prepared_calls.get(record.key)
                    if (prepared is not None and prepared[1] == _planning.generation
                            and prepared[0] is not None):
                        result = prepared[0](data, filter, out)
                        if result is not None:
                            return result
                return _recorded(function, records, key, (args, kwargs), named, data, filter,
                                 values)
        return function(*args, **kwargs)

    return cast(_Function, call)


def _takes_out(out: object, record: _Record, data: np.ndarray, filter: np.ndarray) -> bool:
    """Whether the recorded prepared call may write straight into ``out``: the rules of
    :func:`~.specs.direct_out` for a call that passes them.  Any other ``out`` goes
    through the whole function, which copies or refuses it."""
    if type(out) is not np.ndarray:
        return False
    flags = out.flags
    return (flags.c_contiguous and flags.writeable and out.dtype == record.dtype
            and out.shape == record.output_shape and not may_share_memory(out, data)
            and not may_share_memory(out, filter))


def _recorded(function, records: dict, key, arguments: tuple, named: dict, data, filter,
              values):
    """``function(*args, **kwargs)`` (``arguments``), recorded under ``key`` where the
    module's rules allow; ``named``: the keyword arguments but ``out``."""
    _local.noted = None
    limit = _memory.get_max_bytes()
    args, kwargs = arguments
    result = function(*args, **kwargs)
    noted, _local.noted = _local.noted, None
    if (noted is not None and noted[0] is data and noted[1] is filter and noted[3] is result
            and _memory.get_max_bytes() == limit and _plain(values)):
        if len(records) >= RECORDS_KEPT:
            records.clear()
        records[key] = _Record(tuple(named), values, data, filter, result, noted[2], limit)
    return result


def _forget() -> None:
    for forget in _forgets:
        forget()


# Forgotten with the plans and prepared calls they stand for.
_caches.register("resolved plans and prepared calls", _forget)
