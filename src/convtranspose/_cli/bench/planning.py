"""Two columns that judge planning, measured through the public planning API when the
installed convtranspose has it (``convtranspose.use_planning``, ``forget_wisdom``):

- ``estimate / measure``: steady-state time of the algorithm chosen under
  ``use_planning("estimate")`` (the cost model alone) over that of the one chosen under
  ``use_planning("measure")``: the time the estimate loses against measuring.
- ``first-call planning``: the first call of a problem whose choice was forgotten, under
  the default planning, minus a steady-state call: what deciding costs the first call.

The wisdom is forgotten before each level, so that each decides afresh.  These columns
are measured after the layer's main timing and after both levels have run it, so the
kernels they need are compiled: the first-call column counts planning, not numba's
compilation.  Without the API every column is "n/a".

The on-disk wisdom store would let an earlier run decide for this one; the benchmark
turns it off (:data:`WISDOM_ENV` set to ``off``) before it calls the library.
"""

from __future__ import annotations

import statistics
import sys
import time

from .peers import run_ours
from .suite import Layer

#: The levels compared by the ``estimate / measure`` column, in the order they run.
LEVELS = ("estimate", "measure")

#: What the report says when the installed library has no planning API.
ABSENT_NOTE = ("n/a: this build of convtranspose has no planning API"
               " (convtranspose.use_planning, convtranspose.forget_wisdom)")


def planning_library(library=None):
    """The library (``convtranspose`` unless given) if it has the planning API, else None."""
    if library is None:
        import convtranspose as library
    if hasattr(library, "use_planning") and hasattr(library, "forget_wisdom"):
        return library
    return None


def _steady_seconds(call, repeat: int, clock) -> float:
    """The median of ``repeat`` timed calls after one untimed call (which, right after
    the wisdom was forgotten, is the one that decides)."""
    call()
    times = []
    for _ in range(max(repeat, 1)):
        start = clock()
        call()
        times.append(clock() - start)
    return statistics.median(times)


def planning_columns(layer: Layer, inputs: dict, repeat: int, library=None,
                     clock=time.perf_counter) -> dict:
    """The row's planning fields, or ``{}`` when the library has no planning API.

    Parameters
    ----------
    layer, inputs
        The layer and its inputs (:func:`convtranspose._cli.bench.make_inputs`).
    repeat : int
        Timed calls per steady-state median.
    library : module, optional
        The convtranspose to measure (default: the installed one).
    clock : callable
        Seconds, monotonic (a fake one in tests).

    Returns
    -------
    dict
        ``estimate_over_measure`` (ratio), ``first_call_planning_ms`` and
        ``planning_ms`` (every time behind them); or ``planning_error`` (one line) when
        the API raised.
    """
    ct = planning_library(library)
    if ct is None:
        return {}
    call = run_ours(layer, inputs, library=ct)[0]  # a new output each call, alike at every level
    try:
        steady = {}
        for level in LEVELS:
            ct.forget_wisdom()
            with ct.use_planning(level):
                steady[level] = _steady_seconds(call, repeat, clock)
        ct.forget_wisdom()
        start = clock()
        call()
        first = clock() - start
        settled = _steady_seconds(call, repeat, clock)
    except Exception as error:  # a new API: one failing layer must not end the run
        message = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        print(f"  planning columns failed on {layer.label}: {message}", file=sys.stderr)
        return {"planning_error": message}
    return {
        "estimate_over_measure": steady["estimate"] / steady["measure"],
        "first_call_planning_ms": 1e3 * (first - settled),
        "planning_ms": {"estimate": 1e3 * steady["estimate"], "measure": 1e3 * steady["measure"],
                        "first_call": 1e3 * first, "steady": 1e3 * settled},
    }
