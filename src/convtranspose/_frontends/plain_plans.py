"""The plans of plain arguments, found without building the plan cache's key.

A repeated call of an array function passes the same kinds of arguments again and again:
exact ints, strings, None, lists and tuples of exact ints.  For those, equal values of
the same types mean the same to the resolvers, so a call whose slot (its resolver,
keyword names, the values' types and its positional arguments, the operands' shapes)
holds equal values gets its plan by comparisons alone: the plan cache's key
(:func:`~.specs.resolve_plan`, a freeze of every value) takes 2-3 us of a tiny layer's
call.  The values are kept as copies, so a list edited in place between calls is read
again.
"""

from __future__ import annotations

import threading
from itertools import chain
from operator import itemgetter

__all__ = ["SLOTS_KEPT", "exact_int_items", "find_plain", "forget_plain", "keep_plain",
           "sequences_getter"]

#: Slots kept: ``(resolver, keyword names, values' types, *positional arguments)`` ->
#: ``(values (lists copied), the sequences' getter, (plan, plan cache key))``; all are
#: forgotten together beyond this many.
SLOTS_KEPT = 512
_slots: dict = {}
#: The most recent ``(slot key, slot)``: found again without hashing its key.
_recent: tuple = ((), None)
_lock = threading.Lock()
_PLAIN_TYPES = frozenset({int, str, type(None), tuple, list})
_EXACT_INT = frozenset({int})


def sequences_getter(kinds: tuple):
    """A function of values of these ``kinds`` giving the sequences (lists and tuples)
    among them as one tuple."""
    indices = [index for index, kind in enumerate(kinds) if kind is tuple or kind is list]
    # A lone one twice: itemgetter of one index returns it bare.
    return itemgetter(*indices, *indices[:1]) if indices else _no_sequences


def _no_sequences(values: tuple) -> tuple:
    return ()


def exact_int_items(sequences: tuple) -> bool:
    """Whether every item of every sequence is an exact int."""
    return _EXACT_INT.issuperset(map(type, chain.from_iterable(sequences)))


def find_plain(resolver, args: tuple, kwargs: dict, values: tuple) -> tuple:
    """``(slot key, (plan, plan cache key) or None)`` for a resolution of ``resolver`` on
    ``args`` and ``kwargs`` (``values``: both, in order); the slot key is None where a
    positional argument cannot key a slot."""
    global _recent
    slot_key = (resolver, tuple(kwargs), tuple(map(type, values)), *args)
    if _recent[0] == slot_key:  # compared up to the types first: no array's ==
        slot = _recent[1]
    else:
        try:
            slot = _slots.get(slot_key)
        except TypeError:  # an unhashable positional argument
            return None, None
        _recent = slot_key, slot
    # Same types (the slot's key) and equal values; the sequences' items exact ints.
    if (slot is not None and slot[0] == values
            and exact_int_items(slot[1](values))):
        return slot_key, slot[2]
    return slot_key, None


def keep_plain(slot_key: tuple, values: tuple, found: tuple) -> None:
    """Keep ``found`` (plan, plan cache key) in ``slot_key``'s slot if every value is plain."""
    global _recent
    kinds = slot_key[2]
    getter = sequences_getter(kinds)
    if not _PLAIN_TYPES.issuperset(kinds) or not exact_int_items(getter(values)):
        return
    slot = tuple(list(value) if type(value) is list else value for value in values), getter, found
    with _lock:
        if len(_slots) >= SLOTS_KEPT:
            _slots.clear()
        _slots[slot_key] = slot
        _recent = slot_key, slot


def forget_plain() -> None:
    """Forget every slot (with the plan cache)."""
    global _recent
    with _lock:
        _slots.clear()
        _recent = ((), None)
