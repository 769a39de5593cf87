"""A small quantized layer's repeated call in one compiled call: the data's words, the
blocked integer sums and the requantization run one after the other by one compiled
function (:class:`._numba.chains.ChainedPasses`), with every argument but the data and
the result bound once.

:meth:`convtranspose._kernels.int8.BlockedSums.requantized` makes its passes' arguments
on each call, in Python: on the quantized suite's 16->16 8x8 layer that took 24 of a
prepared call's 30 us on an AMD Zen 4, against about 6 us of machine code
(``benchmarks/results/quantized-calls-zen4.json``, ``chained_passes``).  A
:class:`Requantizer` gives the same result through a :class:`ChainedSums` wherever the
whole call runs on one thread (every pass too small to split, or one thread), the
data are one-byte integers (whose range, and so the shift into the kernel's words, is
their type's) and C-contiguous; otherwise, and for the AMX tiles, it calls
:meth:`~convtranspose._kernels.int8.BlockedSums.requantized`.  The results are the
same bytes: the same kernels on the same words.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ChainedSums", "Requantizer"]


class ChainedSums:
    """:meth:`convtranspose._kernels.int8.BlockedSums.requantized` for data of one shape
    and one-byte dtype, C-contiguous, bound once: ``chained(x)`` returns the result.
    Make one with :meth:`~convtranspose._kernels.int8.BlockedSums.chained`.

    Parameters
    ----------
    shape : tuple
        The data's shape.
    passes : ChainedPasses
        The compiled passes.
    make_scratch : callable
        ``make_scratch(x)`` -> ``(words, words_arguments, words_count, sums_arguments,
        sums_count, rows_arguments, rows)``: one set of working arrays (the words and
        the int32 sums) and the passes' arguments over them, the data's flat view
        ``x`` (writable as the data bound are) first among the arguments of the first
        pass that reads it (replaced on each call).
    new_result : callable
        ``new_result()`` -> ``(result, out_rows)``, the rows pass's (the last argument
        of ``rows_arguments``).
    first : tuple
        A first set of ``make_scratch``'s.
    """

    __slots__ = ("shape", "_passes", "_make_scratch", "_new_result", "_spare")

    def __init__(self, shape: tuple, passes, make_scratch, new_result, first: tuple) -> None:
        self.shape, self._passes = shape, passes
        self._make_scratch, self._new_result = make_scratch, new_result
        self._spare = [first]  # sets of working arrays not in use

    def __call__(self, x: np.ndarray) -> np.ndarray:
        source = x.reshape(-1)  # read, never written: as writable as x, as bound
        # One set of working arrays per concurrent call: list.pop and append are atomic.
        scratch = self._spare.pop() if self._spare else self._make_scratch(source)
        try:
            words, words_arguments, words_count, sums_arguments, sums_count, rows_arguments, \
                rows = scratch
            result, out_rows = self._new_result()
            if words_count:
                words_arguments = (source,) + words_arguments[1:]
            else:
                words = source.view(np.int32)
                words.flags.writeable = False  # as the blocked kernel reads its data
                sums_arguments = (words,) + sums_arguments[1:]
            self._passes(words_arguments, words_count, sums_arguments, sums_count,
                         rows_arguments[:-1] + (out_rows,), rows)
        finally:
            self._spare.append(scratch)
        return result


class Requantizer:
    """``requantizer(x)``: ``sums.requantized(x, offset, requantization)``
    (:meth:`convtranspose._kernels.int8.BlockedSums.requantized`; None where it
    declines), through a :class:`ChainedSums` bound at the first call with ``x``'s
    dtype (and writability) where :meth:`~convtranspose._kernels.int8.BlockedSums.chained` gives one."""

    __slots__ = ("_sums", "_offset", "_requantization", "_chains")

    def __init__(self, sums, offset: int, requantization) -> None:
        self._sums, self._offset, self._requantization = sums, offset, requantization
        self._chains: dict = {}  # (dtype, writable) -> ChainedSums, or False: none

    def __call__(self, x: np.ndarray) -> np.ndarray | None:
        flags = x.flags
        # Writable and read-only data are two numba types of the words kernel's source:
        # a chain for each, bound to the kernel compiled for it.
        key = (x.dtype, flags.writeable)
        chained = self._chains.get(key)
        if chained is None:
            chained = self._chains[key] = self._sums.chained(
                x, self._offset, self._requantization) or False
        if chained and flags.c_contiguous and flags.aligned and x.shape == chained.shape:
            return chained(x)
        return self._sums.requantized(x, self._offset, self._requantization)
