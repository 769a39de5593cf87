"""Repeated calls of a quantized dialect's array function, run through a prepared layer.

A quantized layer called again and again through its array function
(``ct.qlinear_conv_transpose(x, x_scale, ..., strides=[2, 2])`` in a loop) passes equal
arguments every time.  What the function works out before it sums (the operands'
checks, the plan, the owner's requantization constants, the integer kernel's set-up)
depends on nothing else, and took 0.3-1.4 ms of each call of the quantized suite's
layers that a prepared layer skips (``benchmarks/results/quantized-calls-zen3.json``).
:func:`remembers_quantized_calls` wraps such a function so that a call whose
arguments equal a :class:`_Record` of an earlier call runs the record's
:class:`~.prepared_quantized.PreparedQuantizedLayer`.  That layer holds its own copies of
the recorded arguments and returns exactly what the function returns on them, so a
call that matches the record gets the function's result.

A record is made after a call that returned, with ndarray data and filter, no ``out``,
a filter that is not a prepared layer's own copy (that layer is the record already),
and every other argument of a type whose equality the record checks exactly: None,
bools, ints, floats, strings, NumPy scalars and numeric arrays, and lists and tuples of
them.  A record holds while

- the call passes as many positional arguments, and the same keyword names in the same
  order (with the filter's identity and the data's shape, the record's key; a key
  keeps the records of calls with other arguments too, the most recent first, so that
  calls alternating between two scales or engines are each answered);
- the data and the filter are ndarrays (exactly) of the recorded shapes and dtypes;
- every other argument equals the record's copy: of the same type, and for arrays and
  NumPy scalars of the same dtype, shape and bits, for floats of the same value and
  sign (a NaN never matches);
- the filter, compared last, holds the recorded bits, as the weights memo compares it
  on every call of the function (:func:`~convtranspose._runtime.memo.same_bits`): a
  filter edited in place between calls misses, and is recorded again.

Any other call runs the whole function, which may record it.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from .._plan import dialects as _dialects
from .._runtime import caches as _caches
from .._runtime.memo import compared_as_bytes, owned, same_bits, weights_memo_bytes

__all__ = ["QUANTIZED_RECORDS_KEPT", "matches", "records_use", "remembers_quantized_calls"]

#: Records kept per array function, keyed by the filter's identity, the data's shape
#: and how the arguments are passed (how many by position, which by name), several per
#: key; the oldest are dropped beyond this many, or where their filters would take more than the
#: weights memo's budget (each record holds a copy of its filter and the packed
#: weights made from it, counted as twice the filter, as the memo counts its own).
QUANTIZED_RECORDS_KEPT = 8
_forgets: list = []
_SCALARS = frozenset({type(None), bool, int, float, str})
#: The prepared layer class a record makes (:func:`records_use`); none are made before.
_layer_class: list = []


def records_use(layer_class) -> None:
    """Make records with ``layer_class``
    (:class:`~.prepared_quantized.PreparedQuantizedLayer`, which registers itself: its
    module imports the functions this one wraps, so this one cannot import it)."""
    _layer_class[:] = [layer_class]


def _recordable(value: object) -> bool:
    """Whether :func:`matches` can tell exactly whether a later value equals ``value``."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is np.ndarray or isinstance(value, np.generic):
        return value.dtype.kind in "biuf"  # type: ignore[union-attr]
    if kind is list or kind is tuple:
        return all(map(_recordable, value))  # type: ignore[arg-type]
    return False


def matches(value: Any, kept: Any) -> bool:
    """Whether ``value`` equals the record's copy ``kept`` by the module's rules."""
    kind = type(value)
    if kind is not type(kept):
        return False
    if kind is np.ndarray:
        return (value.shape == kept.shape and value.dtype == kept.dtype
                and same_bits(kept, value))
    if isinstance(value, np.generic):
        return value.dtype == kept.dtype and value.tobytes() == kept.tobytes()
    if kind is float:
        return value == kept and math.copysign(1.0, value) == math.copysign(1.0, kept)
    if kind is list or kind is tuple:
        return len(value) == len(kept) and all(map(matches, value, kept))
    return bool(value == kept)


#: How :meth:`_Record.holds` compares an argument: not at all (the data and filter,
#: compared by the caller), the caller's immutable object itself or else by
#: :func:`matches`, a small array's bytes with the record's, a flat sequence of exact
#: ints as a whole, or by :func:`matches`.  Each gives :func:`matches`' answer.
_SKIP, _IMMUTABLE, _SMALL_ARRAY, _INTS, _OTHER = range(5)


def _kind(value: Any) -> int:
    """How :meth:`_Record.holds` compares later values with the record's copy ``value``."""
    kind = type(value)
    if kind in _SCALARS or isinstance(value, np.generic):
        return _IMMUTABLE
    if kind is np.ndarray and compared_as_bytes(value):
        return _SMALL_ARRAY  # as same_bits compares it: as bytes objects
    if (kind is list or kind is tuple) and all(type(item) is int for item in value):
        return _INTS
    return _OTHER


class _Record:
    """One call of a quantized array function: its arguments' names in the order given,
    the caller's objects, and the prepared layer made from copies of them."""

    __slots__ = ("_checks", "layer", "kept", "dtype", "filter_bytes")

    def __init__(self, names: tuple, values: tuple, skipped: tuple, layer, data):
        # The layer's copies of the arguments, by name (the same arrays it computes with).
        self.layer, self.kept, self.dtype = layer, layer.arguments, data.dtype
        self.filter_bytes = self.kept[skipped[1]].nbytes
        # Per argument in the order given: (how it is compared, the layer's copy, and the
        # caller's immutable object or the small array's bytes).  No array of the
        # caller's is held.
        checks = []
        for name, value in zip(names, values):
            kept = self.kept.get(name)
            how = _SKIP if name in skipped else _kind(kept)
            own = (value if how == _IMMUTABLE else
                   kept.tobytes() if how == _SMALL_ARRAY else None)
            checks.append((how, kept, own))
        self._checks = tuple(checks)

    def holds(self, values: tuple, data: np.ndarray) -> bool:
        """Whether a call of ``values`` (its arguments in the order given, as many and
        by the same names as the record's: its key) with ``data`` matches, but for the
        filter's bits (the module's rules)."""
        if data.dtype is not self.dtype:
            return False
        for value, (how, kept, own) in zip(values, self._checks):
            if how == _SKIP or how == _IMMUTABLE and value is own:
                continue
            if how == _SMALL_ARRAY:
                if not (type(value) is np.ndarray and value.shape == kept.shape
                        and value.dtype == kept.dtype and value.tobytes() == own):
                    return False
            elif how == _INTS:
                if not (type(value) is type(kept) and value == kept
                        and all(type(item) is int for item in value)):
                    return False
            elif not matches(value, kept):
                return False
        return True


_Function = TypeVar("_Function", bound=Callable[..., Any])


def remembers_quantized_calls(function: _Function) -> _Function:
    """``function`` (a quantized dialect's array function with a prepared call),
    answering repeated calls through a prepared layer (the module's rules)."""
    name = function.__name__
    dialect = _dialects.DIALECTS[name]
    signature = inspect.signature(function)
    parameters = list(signature.parameters)
    data_name, filter_name = dialect.operands[:2]
    data_at, filter_at = parameters.index(data_name), parameters.index(filter_name)
    skipped = (data_name, filter_name)
    records: dict = {}
    _forgets.append(records.clear)

    @functools.wraps(function)
    def call(*args, **kwargs):
        data = args[data_at] if len(args) > data_at else kwargs.get(data_name)
        filter = args[filter_at] if len(args) > filter_at else kwargs.get(filter_name)
        if (type(data) is not np.ndarray or type(filter) is not np.ndarray
                or kwargs.get("out") is not None):
            return function(*args, **kwargs)
        key = (id(filter), data.shape, len(args), tuple(kwargs))
        kept = records.get(key, ())
        values = (*args, *kwargs.values())
        stale = None  # a record of these arguments whose filter has other bits now
        for record in kept:
            if record.holds(values, data):
                if matches(filter, record.kept[filter_name]):
                    return record.layer(data)
                stale = record
        result = function(*args, **kwargs)
        if not owned(filter):
            bound = signature.bind(*args, **kwargs).arguments
            del bound[data_name]
            if (_layer_class and "out" not in bound and all(map(_recordable, bound.values()))
                    and _made_room(records, filter.nbytes)):
                new = _Record(tuple(parameters[:len(args)]) + tuple(kwargs), values, skipped,
                              _layer_class[0](name, bound), data)
                # The most recent first; after it the key's others that _made_room kept,
                # but the stale one.
                others = records.pop(key, ())
                records[key] = (new,) + tuple(r for r in others if r is not stale)
        return result

    return cast(_Function, call)


def _made_room(records: dict, nbytes: int) -> bool:
    """Drop the oldest records (the least recent key's last) until one more of a
    filter of ``nbytes`` fits; False where it cannot (a filter beyond half the
    budget)."""
    budget = weights_memo_bytes()
    while True:
        kept = [record for group in list(records.values()) for record in group]
        if not kept or (len(kept) < QUANTIZED_RECORDS_KEPT and 2 * (
                nbytes + sum(record.filter_bytes for record in kept)) <= budget):
            return 2 * nbytes <= budget
        oldest = next(iter(records), None)
        group = records.pop(oldest, ())  # another thread may drop it first
        if len(group) > 1:
            records[oldest] = group[:-1]  # (the key moves to the most recent end)


def _forget() -> None:
    for forget in _forgets:
        forget()


# Forgotten with the float dialects' records and prepared calls.
_caches.register("resolved plans and prepared calls", _forget)
