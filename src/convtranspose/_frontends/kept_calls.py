"""The prepared calls the array functions keep for their recent layers.

After a layer's first call, :func:`~.specs.execute_plan` keeps what
:func:`~convtranspose._execute.transposed.prepare_call` makes for it (a ``dense``, numba
``direct`` or ``direct-blocked`` call with everything but the data set up), keyed by the
canonical problem and the filter's layout (:class:`PreparedKey`), and later calls of
that problem run it directly.  Prepared layers (:mod:`.prepared`) call them without the
lookup.
"""

from __future__ import annotations

import numpy as np

from .._choose import planning as _planning
from .._execute.rounded_calls import half_preparable
from .._execute.transposed import preparable
from .._kernels.dense import switch_state
from .._plan.problem import Problem

__all__ = ["PREPARED_CALLS_KEPT", "PreparedKey", "forget_prepared_keys", "prepared_call",
           "prepared_calls", "prepared_key", "usable_prepared"]

#: Layers computed by ``dense``, numba ``direct`` or ``direct-blocked``, prepared once
#: (after their first call): :class:`PreparedKey` -> ``(DenseCall or DirectCall or
#: None, planning generation, switches)`` (None: the layer had no prepared call under
#: those environment switches), the most recently prepared last.
PREPARED_CALLS_KEPT = 8
prepared_calls: dict = {}


class PreparedKey:
    """What a prepared call serves: the canonical :class:`Problem` and the filter's
    layout, shape and dtype (which say how the caller's filter maps to the canonical
    weights).  Two plans with equal keys (two dialects' layers of one problem and filter
    layout) share one prepared call.  Its hash is computed once: the key is made once
    per plan and dtypes (:func:`prepared_key`), so a repeated call's lookup hashes and
    compares nothing."""

    __slots__ = ("fields", "_hash")

    def __init__(self, *fields):
        self.fields = fields
        self._hash = hash(fields)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (type(other) is PreparedKey and self.fields == other.fields)

    def __reduce__(self):  # hashes differ between processes: made again when unpickled
        return (PreparedKey, self.fields)


def prepared_key(plan, data: np.ndarray, filter: np.ndarray,
                 biased: bool = False) -> PreparedKey | None:
    """The :class:`PreparedKey` of ``plan`` on operands of these dtypes, kept on the plan;
    None where no prepared call is made (dtypes other than native float32, float64,
    float16 and bfloat16).  ``biased``: for a half-precision call with a bias, whose
    call rounds the sums plus the bias and so is kept apart from the bias-free one
    (:class:`~convtranspose._execute.rounded_calls.BiasedCall`)."""
    dtypes = (data.dtype, filter.dtype, biased)
    keys = plan.__dict__.get("_prepared_keys")
    key = None if keys is None else keys.get(dtypes)
    if key is None:
        half = half_preparable(data.dtype, filter.dtype)
        if not (preparable(data.dtype, filter.dtype) or half):
            return None
        problem = Problem(plan.batch, plan.axes, plan.canonical_filter_shape,
                          plan.channels_last, data.dtype)
        fields = (problem, plan.filter_layout, plan.filter_shape, filter.dtype)
        key = PreparedKey(*fields, "bias") if biased and half else PreparedKey(*fields)
        if len(_one_key) >= _KEYS_KEPT:
            _one_key.clear()
        key = _one_key.setdefault(key, key)
        plan.__dict__.setdefault("_prepared_keys", {})[dtypes] = key
    return key


#: One :class:`PreparedKey` object for equal keys, so that the plans of one problem
#: (two dialects', a prepared layer's and the array function's) find their shared
#: prepared call by identity, not by comparing the problems' fields (1 us a call).
_one_key: dict = {}
_KEYS_KEPT = 4096


def forget_prepared_keys() -> None:
    """Forget the keys kept by :func:`prepared_key` (with the prepared calls)."""
    _one_key.clear()


def usable_prepared(key: PreparedKey | None) -> tuple | None:
    """The entry of :data:`prepared_calls` for ``key`` if it still holds: the same
    planning generation and (for an entry without a call) switches."""
    entry = None if key is None else prepared_calls.get(key)
    if entry is None or entry[1] != _planning.generation or (
            entry[0] is None and entry[2] != switch_state()):
        return None
    return entry


def prepared_call(plan, data: np.ndarray, filter: np.ndarray):
    """``(call, generation)``: the prepared call :func:`~.specs.execute_plan` keeps for ``plan``
    with operands of these dtypes (None if it has none) and the planning generation it
    holds for; ``(None, -1)`` where it has kept none for the current generation yet (a
    call whose planning changed the generation, as the end of a background compile does,
    kept its entry under the old one: the next call makes it).  A caller that keeps it
    calls ``call(data, filter, out)`` while
    :data:`convtranspose._choose.planning.generation` is unchanged; a None result means:
    go through :func:`~.specs.execute_plan` (and, for ``(None, -1)``, ask again after)."""
    key = prepared_key(plan, data, filter)
    if key is None:  # these dtypes have none
        return None, _planning.generation
    entry = usable_prepared(key)
    return (None, -1) if entry is None else (entry[0], _planning.generation)
