"""Repeated calls of an array function, run without resolving anything again.

A layer called again and again through its array function (``ct.onnx_conv_transpose(x,
w, strides=[2, 2])`` in a loop) passes the same attributes and the same filter object,
with data of the same shape, every time.  Its plan and its prepared call
(:mod:`.kept_calls`) depend on nothing else: the operands' shapes and dtypes and the
attributes' values.  :func:`remembers_calls` wraps a dialect's array function so that
such a call finds a :class:`_Record` of an earlier call by one dictionary lookup and runs
the prepared call at once: no argument binding, plan lookup or operand checks, which take
more than half of a tiny layer's call through the function
(``benchmarks/results/prepared-calls-xeon.json``).  The prepared call still reads the
filter as the caller passes it, so a filter edited in place between calls gives the
edited result, as it does through the whole function.

A record is kept only after a call that :func:`~.specs.execute_plan` computed through
its prepared path with the caller's own data, filter and bias objects
(:func:`note_prepared`), writing into the caller's ``out`` if one was given, and whose
result the function returned as it was: the function then did nothing but what the
record runs again, the prepared call's sums plus the bias as
:func:`~convtranspose._execute.transposed.add_bias` adds it (a half-precision call's
bias is given to its prepared call, which rounds the sums plus it).  Calls with and without
``out``, and with and without a bias, keep separate records (their memory footprints
and plans differ).  A record holds while

- the attributes (the arguments other than the data, filter, bias and ``out``, all of
  plain types: exact ints, bools, strings, None, lists and tuples of exact ints) are
  equal and of the same types, given by the same names in the same order.  The
  lookup's key holds their :mod:`marshal` bytes (version 2), which name every value's
  exact type (an int, a bool, a float, a list, a tuple, any buffer's bytes) with its
  value: equal bytes are equal values of the same types, in one comparison;
- the data and filter are ndarrays (exactly) of the recorded shapes and dtypes, passed
  by position; the bias, if any (by position or by name), an ndarray of the recorded
  shape and the data's dtype: it is read as given, like the filter;
- the prepared call is still kept, for the current planning generation (wisdom,
  planning level);
- the memory limit (:func:`~convtranspose.get_max_bytes`) is at least the one the
  recorded call passed under: the call's footprint is unchanged, so it passes again;
- ``out``, where given, is what the prepared call writes straight into (as
  :func:`~.specs.direct_out` requires): an ndarray (exactly) of the result's shape and
  dtype, C-contiguous, writeable and apart from the operands.

Any other call runs the whole function, which may record it.
"""

from __future__ import annotations

import functools
import inspect
import marshal
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from .._choose import planning as _planning
from .._execute.rounded_calls import kept_result
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
#: :mod:`marshal`'s version 2 writes every value in full; later versions write an
#: object met twice as a reference, so that equal attributes could give other bytes.
_MARSHAL_VERSION = 2
_forgets: list = []


def note_prepared(data: np.ndarray, filter: np.ndarray, key: PreparedKey, result: np.ndarray,
                  bias: np.ndarray | None = None, channels_last: bool = False) -> None:
    """Tell the calling thread's array function that ``result`` (the caller's ``out``, if
    it gave one) was computed on these very operands by the prepared call kept under
    ``key`` in :data:`~.kept_calls.prepared_calls`, plus ``bias`` (if any) added by
    :func:`~convtranspose._execute.transposed.add_bias` along the channel axis of this
    layout."""
    _local.noted = (data, filter, key, result, bias, channels_last)


class _Record:
    """What one call of an array function was, and the prepared call that computed it
    (the attributes are in the key it is kept under)."""

    __slots__ = ("dtype", "filter_shape", "filter_dtype", "bias_shape", "output_shape",
                 "channels_last", "key", "limit")

    def __init__(self, data, filter, bias, result, noted, limit):
        self.dtype, self.filter_shape, self.filter_dtype = data.dtype, filter.shape, filter.dtype
        self.bias_shape = None if bias is None else bias.shape
        self.output_shape, self.channels_last = result.shape, noted[5]
        # The prepared call is looked up by its key on every call, not kept here: the
        # prepared calls' table bounds what their packed weights hold.
        self.key, self.limit = noted[2], limit

    def holds(self, data: np.ndarray, filter: np.ndarray, bias: np.ndarray | None,
              out: object) -> bool:
        """The module's rules but the attributes' (the key's) and the prepared call's."""
        return (data.dtype is self.dtype and filter.dtype is self.filter_dtype
                and filter.shape == self.filter_shape
                and (bias is None or (bias.dtype is self.dtype
                                      and bias.shape == self.bias_shape))
                and _memory.get_max_bytes() >= self.limit
                and (out is None or _takes_out(out, self, (data, filter, bias))))


def _plain(values: tuple) -> bool:
    """Whether every value is of a plain type whose equality the record can trust."""
    kinds = tuple(map(type, values))
    return _PLAIN.issuperset(kinds) and exact_int_items(sequences_getter(kinds)(values))


def _positions(function, record: _dialects.Dialect) -> tuple[int, int, int | None]:
    """The positions of the data, the filter and the bias (None without one) among
    ``function``'s parameters."""
    names = list(inspect.signature(function).parameters)
    bias = record.operands[2]
    return (names.index(record.operands[0]), names.index(record.operands[1]),
            None if bias is None else names.index(bias))


def _others_getter(skipped: list[int]):
    """A function of the positional arguments giving them as a tuple without those at
    the (sorted) positions ``skipped``: the operands."""
    if skipped == list(range(len(skipped))):  # the common case: one slice
        first = len(skipped)
        return lambda args: args[first:]

    def others(args: tuple) -> tuple:
        kept, start = (), 0
        for position in skipped:
            kept += args[start:position]
            start = position + 1
        return kept + args[start:]
    return others


_Function = TypeVar("_Function", bound=Callable[..., Any])


def remembers_calls(function: _Function) -> _Function:
    """``function`` (a float dialect's array function), answering repeated calls from a
    record of an earlier one (the module's rules)."""
    dialect = _dialects.DIALECTS[function.__name__]
    data_at, filter_at, bias_at = positions = _positions(function, dialect)
    bias_name = dialect.operands[2]
    needed = max(data_at, filter_at) + 1
    # Where a positional bias is: past every parameter for a dialect without one.
    bias_position = len(inspect.signature(function).parameters) if bias_at is None else bias_at
    others = _others_getter(sorted(position for position in positions if position is not None))
    records: dict = {}
    _forgets.append(records.clear)

    @functools.wraps(function)
    def call(*args, **kwargs):
        if len(args) >= needed:
            data, filter = args[data_at], args[filter_at]
            if type(data) is np.ndarray and type(filter) is np.ndarray:
                named, out, bias = kwargs, None, None
                if "out" in kwargs or bias_name in kwargs:
                    named = dict(kwargs)
                    out = named.pop("out", None)
                    if len(args) <= bias_position:  # else the function's TypeError
                        bias = named.pop(bias_name, None)
                if len(args) > bias_position:
                    bias = args[bias_position]
                try:
                    attributes = marshal.dumps((others(args), named), _MARSHAL_VERSION)
                except Exception:  # noqa: BLE001 - a value only the function reads
                    return function(*args, **kwargs)
                if bias is not None and type(bias) is not np.ndarray:
                    return function(*args, **kwargs)
                key = (id(filter), data.shape, out is None, bias is None, attributes)
                record = records.get(key)
                if record is not None and record.holds(data, filter, bias, out):
                    prepared = prepared_calls.get(record.key)
                    if (prepared is not None and prepared[1] == _planning.generation
                            and prepared[0] is not None):
                        result = kept_result(prepared[0], data, filter, out, bias,
                                             record.channels_last, data.ndim - 2)
                        if result is not None:
                            return result
                return _recorded(function, records, key, (args, kwargs),
                                 (data, filter, bias), (*others(args), *named.values()))
        return function(*args, **kwargs)

    return cast(_Function, call)


def _takes_out(out: object, record: _Record, operands: tuple) -> bool:
    """Whether the recorded prepared call may write straight into ``out``: the rules of
    :func:`~.specs.direct_out` for a call that passes them.  Any other ``out`` goes
    through the whole function, which copies or refuses it."""
    if type(out) is not np.ndarray:
        return False
    flags = out.flags
    if not (flags.c_contiguous and flags.writeable and out.dtype == record.dtype
            and out.shape == record.output_shape):
        return False
    for operand in operands:  # a loop: a generator costs as much as a check
        if operand is not None and may_share_memory(out, operand):
            return False
    return True


def _recorded(function, records: dict, key, arguments: tuple, operands: tuple, values):
    """``function(*args, **kwargs)`` (``arguments``), recorded under ``key`` where the
    module's rules allow; ``operands``: the data, filter and bias (or None), ``values``:
    the attributes."""
    _local.noted = None
    limit = _memory.get_max_bytes()
    args, kwargs = arguments
    result = function(*args, **kwargs)
    noted, _local.noted = _local.noted, None
    data, filter, bias = operands
    if (noted is not None and noted[0] is data and noted[1] is filter and noted[3] is result
            and noted[4] is bias and _memory.get_max_bytes() == limit and _plain(values)):
        if len(records) >= RECORDS_KEPT:
            records.clear()
        records[key] = _Record(data, filter, bias, result, noted, limit)
    return result


def _forget() -> None:
    for forget in _forgets:
        forget()


# Forgotten with the plans and prepared calls they stand for.
_caches.register("resolved plans and prepared calls", _forget)
