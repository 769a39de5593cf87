"""Compiled passes run one after the other by one call from Python, on the calling
thread: a small layer's data words, sums and requantization in a single dispatch.

A quantized layer's repeated call is three compiled passes (the data into the kernel's
words, the blocked sums, the requantization of the sums).  For a small layer each is
a few microseconds of work behind a few of Python: the quantized suite's 16->16 8x8
layer's prepared call took 30 us, of which the passes' machine code ran about 6, on an
AMD Zen 4 (``benchmarks/results/quantized-calls-zen4.json``, ``chained_passes``).  Here
one compiled function calls each pass's kernel through the addresses of its code (a
first-class function value, :func:`.launch.function_at`), so that one compiled chain
serves every kernel whose arguments have the same types, and the caller binds every
argument but the data and the result once.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from .kernel_cache import cached_njit
from .launch import function_at, kernel_addresses

__all__ = ["ChainedPasses"]


@cached_njit(nogil=True)
def _sums_then_rows(sums_jit, sums_c, sums_arguments, sums_count, rows_jit, rows_c,
                    rows_arguments, rows):  # pragma: no cover - compiled
    # The sums' units [0, sums_count), then rows [0, rows) of the rows kernel.
    sums = function_at(sums_jit, sums_c, sums_arguments, (sums_count, sums_count))
    sums(*sums_arguments, 0, sums_count)
    starts = np.zeros(1, np.int64)
    requantize = function_at(rows_jit, rows_c, rows_arguments, (starts, rows))
    requantize(*rows_arguments, starts, rows)


@cached_njit(nogil=True)
def _words_sums_then_rows(words_jit, words_c, words_arguments, words_count, sums_jit,
                          sums_c, sums_arguments, sums_count, rows_jit, rows_c,
                          rows_arguments, rows):  # pragma: no cover - compiled
    words = function_at(words_jit, words_c, words_arguments, (words_count, words_count))
    words(*words_arguments, 0, words_count)
    _sums_then_rows(sums_jit, sums_c, sums_arguments, sums_count, rows_jit, rows_c,
                    rows_arguments, rows)


class ChainedPasses:
    """Two or three compiled passes in one compiled call: ``words`` (optional) and
    ``sums``, each ``(kernel, arguments)`` of a kernel ``kernel(*arguments, start,
    stop)``, then ``rows``, ``(kernel, arguments)`` of a rows kernel ``kernel(*arguments,
    starts, run)`` (:mod:`.requantize`'s).  The arguments given here are examples: each
    call passes its own, of the same numba types (the same dtypes, dimensions and
    flags, scalars of the same classes).

    ``passes(words_arguments, words_count, sums_arguments, sums_count, rows_arguments,
    rows)`` runs ``words`` over ``[0, words_count)`` (without ``words``, pass ``()``
    and 0), ``sums`` over ``[0, sums_count)`` and ``rows`` on rows ``[0, rows)``, in
    turn, on the calling thread without the GIL.
    """

    __slots__ = ("_words", "_sums", "_rows", "ready")

    def __init__(self, words: tuple | None, sums: tuple, rows: tuple) -> None:
        bounds = (types.int64, types.int64)
        self._words = None if words is None else kernel_addresses(*words, bounds)
        self._sums = kernel_addresses(*sums, bounds)
        self._rows = kernel_addresses(*rows, (numba.typeof(np.zeros(1, np.int64)),
                                              types.int64))
        #: Whether every kernel can be called through its addresses (none returns a
        #: value or takes a tuple); the chain must not be called otherwise.
        self.ready = (None not in (self._sums, self._rows)
                      and (words is None or self._words is not None))

    def __call__(self, words_arguments: tuple, words_count: int, sums_arguments: tuple,
                 sums_count: int, rows_arguments: tuple, rows: int) -> None:
        if self._words is None:
            _sums_then_rows(*self._sums, sums_arguments, sums_count, *self._rows,
                            rows_arguments, rows)
        else:
            _words_sums_then_rows(*self._words, words_arguments, words_count, *self._sums,
                                  sums_arguments, sums_count, *self._rows, rows_arguments,
                                  rows)
