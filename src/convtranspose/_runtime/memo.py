"""Matrices and reordered weights derived from a filter, kept between calls.

A model run layer by layer, or a benchmark, calls each layer with the same weights
again; rebuilding its matrices costs milliseconds.  :func:`derived_from` returns the
same dict for a filter of the same bits and key, compared value by value, so a filter
edited in place never hits.  At most :data:`_DERIVED_KEPT` filters, each of at most
:data:`_DERIVED_MAX_BYTES`, within :data:`_DERIVED_BUDGET_BYTES` together
(``benchmarks/results/weights-memo.json``).
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from .caches import register
from .machine import l1_data_cache_bytes
from .target import get_num_threads
from .threads import helper_ids, native_loops_run, parallel_parts

#: Matrices derived from a filter (class matrices, the dense layer matrix) are kept
#: for repeated calls with the same filter: a model run layer by layer, or a
#: benchmark, calls each layer with the same weights again, and rebuilding them
#: costs milliseconds (about a fifth of a DCGAN 512->256 call;
#: ``benchmarks/results/weights-memo.json``).  At most this many filters.
_DERIVED_KEPT = 8


#: The memory all kept filters may take, counting each twice (the memo holds a copy
#: of the filter and about as much again in matrices): eight filters of 16 MiB, or
#: fewer larger ones.  A budget in total rather than a cap per filter, because a
#: large filter's matrices cost the most to rebuild (a 32 MiB filter: 36 of a 48 ms
#: call, ``benchmarks/results/weights-memo.json``), while comparing its bits costs 1.6-2.6.
_DERIVED_BUDGET_BYTES = 256 << 20
#: The largest filter (in bytes) whose derived matrices are kept: half the budget.
_DERIVED_MAX_BYTES = _DERIVED_BUDGET_BYTES // 2


derived_kept: dict = {}


_derived_lock = threading.Lock()


def same_bits(kept: np.ndarray, weights: np.ndarray) -> bool:
    """Whether two filters of one shape and dtype hold the same bits (-0.0 is not 0.0).

    Filters up to the size of the level-1 data cache compare as bytes objects: their
    two copies stay in it, and cost less than NumPy's comparison, which builds a
    boolean array and then reduces it (8 KiB: 1.0 against 3.4 us, 32 KiB: 2.4 against
    3.8 on an AMD Zen 4; ``benchmarks/results/filter-comparison-zen4.json``).  Two dense
    arrays of one memory layout (the memo's copy keeps the filter's) compare as memory:
    with a numba loop below :data:`_MEMCMP_MIN_BYTES` (:mod:`._kernels._numba.compare`:
    96 KiB 4.4 against NumPy's 9.2 us on an AMD Zen 2,
    ``benchmarks/results/filter-comparison-zen2.json``), and from there with the C
    library's ``memcmp``, on the threads in pieces of at least
    :data:`_COMPARED_PIECE_BYTES`: 1.5x faster than NumPy's comparison on one thread and
    2.4x on two for a 32 MiB filter on an Intel Xeon
    (``benchmarks/results/weights-memo.json``), 2.3x from 1 MiB on the Zen 4.
    """
    if compared_as_bytes(kept):
        return kept.tobytes() == weights.tobytes()
    size = kept.nbytes
    # C order, the usual case, before the layout checks (3 us of a 96 KiB filter's
    # comparison on the Zen 2).
    if (size < _MEMCMP_MIN_BYTES and kept.flags.c_contiguous and weights.flags.c_contiguous
            or _same_layout(kept, weights) and _dense(kept)):
        equal = (compiled_equal(kept, weights) if size < _MEMCMP_MIN_BYTES
                 else memory_equal(kept, weights))
        if equal is not None:
            return equal
    unsigned = np.dtype(f"u{weights.itemsize}") if weights.itemsize in (1, 2, 4, 8) else None
    return unsigned is not None and np.array_equal(kept.view(unsigned), weights.view(unsigned))


def compared_as_bytes(array: np.ndarray) -> bool:
    """Whether :func:`same_bits` compares filters of ``array``'s size as bytes objects
    (up to the size of the level-1 data cache): a caller that keeps one filter's bytes
    may compare others with them the same way."""
    return array.nbytes <= l1_data_cache_bytes()


def compiled_equal(kept: np.ndarray, weights: np.ndarray) -> bool | None:
    """What :func:`same_bits` answers for two dense arrays of one layout and size,
    compared with the numba loop whatever their size, or None without numba."""
    differ = _bytes_differ or _load_bytes_differ()
    if differ is None:
        return None
    return not differ(_flat_bytes(kept), _flat_bytes(weights))


def _flat_bytes(array: np.ndarray) -> np.ndarray:
    """A dense array's bytes as a flat uint8 view, in memory order."""
    flat = array.reshape(-1) if array.flags.c_contiguous else array.ravel(order="K")
    return flat.view(np.uint8)


#: :func:`._kernels._numba.compare.bytes_differ`, loaded on first use; False where it
#: cannot be (then NumPy compares).
_bytes_differ = None
#: What loads it: set by :mod:`convtranspose._kernels` (a layer above this one) when
#: imported; until then NumPy compares.
comparison_loader = None


def _load_bytes_differ():
    global _bytes_differ
    if _bytes_differ is None:
        if comparison_loader is None:
            return None
        try:
            _bytes_differ = comparison_loader()
        except ImportError:
            _bytes_differ = False
    return _bytes_differ or None


#: Filters compared with ``memcmp`` from this size on: at 1 MiB it is as fast as NumPy's
#: comparison on an Intel Xeon (0.93-1.03x) and 2.3x faster on an AMD Zen 4; below, its
#: set-up costs more than NumPy's (32 KiB: 5 us against 3 on the Xeon, 5.2 against 3.8
#: on the Zen 4; ``benchmarks/results/weights-memo.json``, ``comparison``;
#: ``filter-comparison-zen4.json``).
_MEMCMP_MIN_BYTES = 1 << 20
#: The least bytes one thread compares: comparing 4 MiB takes about 0.3 ms on one
#: thread, about what a fork-join of the thread pool costs after a pause (0.15-0.43 ms,
#: ``benchmarks/results/thread-wakeup-xeon.json``); in two pieces of 2 MiB it took
#: longer than in one (``benchmarks/results/weights-memo.json``, ``comparison``).
_COMPARED_PIECE_BYTES = 4 << 20


def _same_layout(kept: np.ndarray, weights: np.ndarray) -> bool:
    """Whether two arrays of one shape place every element at the same offset.  An axis
    of length 1 has no stride that matters, and a copy may give it another one (a
    group axis of 1 in a transposed view): comparing the whole ``strides`` sent a 16
    MiB filter to NumPy's comparison, 1.5 ms against memcmp's 0.85
    (``benchmarks/results/weights-memo.json``, ``unit_axis_strides``)."""
    return all(size == 1 or a == b
               for size, a, b in zip(kept.shape, kept.strides, weights.strides))


def _dense(array: np.ndarray) -> bool:
    """Whether ``array``'s elements fill its memory without gaps, at rising addresses
    from its data pointer (any order of the axes)."""
    expected = array.itemsize
    for stride, size in sorted(zip(array.strides, array.shape)):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return True


def memory_equal(kept: np.ndarray, weights: np.ndarray) -> bool | None:
    """What :func:`same_bits` answers for two dense arrays of one layout and size,
    compared as memory with ``memcmp`` whatever their size (in pieces on the threads),
    or None where the C library's ``memcmp`` cannot be loaded: the comparison
    ``benchmarks/filter_comparison.py`` times against NumPy's."""
    memcmp = _memcmp()
    return None if memcmp is None else _same_memory(memcmp, kept, weights)


def _same_memory(memcmp, kept: np.ndarray, weights: np.ndarray) -> bool:
    """``memcmp`` of two dense arrays of one layout and size, in pieces on the pool's
    threads (``memcmp`` releases the GIL), or on the calling thread alone in a process
    whose loops run on numba's threads: right after such a loop numba's workers still
    spin, and a pool helper sharing a CPU with one waits for the scheduler (an 8 MiB
    filter's check made a forward convolution's next call 3.5 ms slower, 16.4 against
    12.9 ms; one thread after a rest cost 0.2 ms, 14.05 against 13.85, on an AMD EPYC
    Zen 2, ``benchmarks/results/forward-kernels-zen2.json``, ``memo_check_threads``)."""
    first = kept.__array_interface__["data"][0]
    second = weights.__array_interface__["data"][0]
    size = kept.nbytes
    parts = max(1, min(get_num_threads(), size // _COMPARED_PIECE_BYTES))
    # One piece inside the pool's own work: its threads may all be busy with the caller's.
    if parts == 1 or native_loops_run() or threading.get_native_id() in helper_ids:
        return memcmp(first, second, size) == 0
    bounds = [size * i // parts for i in range(parts + 1)]
    differing: list[int] = []

    def compare(i: int) -> None:
        start, stop = bounds[i], bounds[i + 1]
        if memcmp(first + start, second + start, stop - start):
            differing.append(i)

    parallel_parts(compare, parts, parts)
    return not differing


#: The C library's ``memcmp`` through ctypes, loaded on first use; False where there is
#: none to load (then NumPy compares).
_memcmp_function = None


def _memcmp():
    global _memcmp_function
    if _memcmp_function is None:
        try:
            import ctypes
            library = ctypes.cdll.msvcrt if os.name == "nt" else ctypes.CDLL(None)
            function = library.memcmp
            function.restype = ctypes.c_int
            function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        except (OSError, AttributeError):
            function = False
        _memcmp_function = function
    return _memcmp_function or None


#: Filters a prepared layer owns (:func:`own`), by ``id``: their derived matrices are
#: kept with them, found without comparing bits (nobody can write them) and dropped
#: when the filter is.
owned_filters: dict = {}


def own(filter: np.ndarray) -> np.ndarray:
    """Mark a read-only filter that no other code can write (a prepared layer's own
    copy): the matrices derived from it and its views are kept for as long as it lives,
    found without comparing it with a kept copy (3 ms per call for a 32 MiB filter,
    ``benchmarks/results/weights-memo.json``).  Returns ``filter``."""
    if filter.flags.writeable or filter.base is not None:
        raise ValueError("own takes a read-only array that owns its memory")
    with _derived_lock:
        owned_filters[id(filter)] = (weakref.ref(filter), {})
    weakref.finalize(filter, owned_filters.pop, id(filter), None)
    return filter


def owned(filter: np.ndarray) -> bool:
    """Whether ``filter`` itself (not a view of it) is one that :func:`own` marked."""
    entry = owned_filters.get(id(filter))
    return entry is not None and entry[0]() is filter


def _owned_root(weights: np.ndarray) -> tuple[np.ndarray, tuple] | None:
    """``(filter, entry)``: the owned filter ``weights`` is (a view of) and its entry
    in :data:`owned_filters`, or None."""
    root = weights
    while isinstance(root.base, np.ndarray):
        root = root.base
    entry = owned_filters.get(id(root))
    return None if entry is None or entry[0]() is not root else (root, entry)


def _owned_derived(weights: np.ndarray, key) -> dict | None:
    """The derived dict of ``weights`` for ``key`` if it is a view of an owned filter."""
    found = _owned_root(weights)
    if found is None:
        return None
    root, entry = found
    # A view is told apart by its geometry within the filter, not by its shape alone.
    offset = weights.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    full_key = (weights.shape, weights.strides, offset, weights.dtype.str) + key
    with _derived_lock:
        return entry[1].setdefault(full_key, {})


def derived_from(weights: np.ndarray, *key) -> dict:
    """The dict of matrices derived from ``weights`` for ``key`` (a fresh one if new).

    Callers fill it on a miss; later calls with a filter of the same bits and the
    same ``key`` get the same dict.  The filter is compared value by value, so a
    filter edited in place never hits.  The copy kept for that keeps the filter's
    memory order (a channels-last ``XIO`` filter arrives as a transposed view):
    comparing in memory order is about 4x faster than comparing with a C-order copy
    read across the view's strides (``benchmarks/results/weights-memo.json``).
    """
    if not weights.flags.writeable and owned_filters:
        derived = _owned_derived(weights, key)
        if derived is not None:
            return derived
    full_key = (weights.shape, weights.dtype.str) + key
    with _derived_lock:
        entry = derived_kept.pop(full_key, None)
        if entry is not None and same_bits(entry[0], weights):
            derived_kept[full_key] = entry  # most recently used last
            return entry[1]
    derived: dict = {}
    if weights.nbytes <= min(_DERIVED_MAX_BYTES, _DERIVED_BUDGET_BYTES // 2):
        kept = frozen(np.array(weights, copy=True, order="K"))
        with _derived_lock:
            while derived_kept and (len(derived_kept) >= max(1, _DERIVED_KEPT) or 2 * (
                    kept.nbytes + sum(e[0].nbytes for e in derived_kept.values()))
                    > _DERIVED_BUDGET_BYTES):
                del derived_kept[next(iter(derived_kept))]  # the least recently used
            derived_kept[full_key] = (kept, derived)
    return derived


def owned_view(weights: np.ndarray) -> bool:
    """Whether ``weights`` is a filter :func:`own` marked or a view of one: its bits
    never change."""
    return not weights.flags.writeable and _owned_root(weights) is not None


def keeps_derived(weights: np.ndarray) -> bool:
    """Whether :func:`derived_from` keeps what is derived from ``weights`` (a view of
    a filter :func:`own` marked, or one within :data:`_DERIVED_MAX_BYTES`), so that a
    later call with the same bits gets the same dict."""
    return owned_view(weights) or (
        weights.nbytes <= min(_DERIVED_MAX_BYTES, _DERIVED_BUDGET_BYTES // 2))


#: Scratch arrays kept with one filter's derived matrices (:func:`spare_array`): at
#: most this many roles and shapes, the oldest dropped, so that calls of many shapes
#: do not hold many buffers.
_SPARES_KEPT = 8
_spares_lock = threading.Lock()


class spare_array:  # noqa: N801 - used as a function: ``with spare_array(...) as a:``
    """A scratch array for the ``with`` block: one kept in ``derived`` (a
    :func:`derived_from` dict) for ``key`` (its role and layout), or ``make()`` where
    none is, put back afterwards, so that the next call with these weights reuses its
    pages instead of faulting in fresh ones.  One is kept per key; calls at once make
    their own.  (A class: a generator's context manager cost about a microsecond more
    per call, a small quantized layer's prepared call making one each time.)"""

    __slots__ = ("_kept", "_array")

    def __init__(self, derived: dict, key, make):
        with _spares_lock:
            spares = derived.setdefault("spare arrays", {})
            kept = spares.get(key)
            if kept is None:
                while len(spares) >= _SPARES_KEPT:
                    spares.pop(next(iter(spares)))
                kept = spares[key] = []
        self._kept = kept
        self._array = kept.pop() if kept else make()

    def __enter__(self) -> np.ndarray:
        return self._array

    def __exit__(self, *exception) -> None:
        if not self._kept:
            self._kept.append(self._array)


def frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def set_weights_memo_bytes(max_bytes: int) -> int:
    """Bound the memory the weights memo may keep (its filters' copies and derived
    matrices, counted twice); returns the previous bound.  0 keeps nothing.  The
    quantized array functions' records of repeated calls, which hold copies of their
    filters, keep within the same bound, each function's on its own.

    Filters beyond the new bound are dropped at once, least recently used first.

    Raises
    ------
    ConvTransposeError
        ``max_bytes`` is not a non-negative integer.

    Examples
    --------
    >>> import convtranspose as ct
    >>> previous = ct.set_weights_memo_bytes(64 << 20)
    >>> _ = ct.set_weights_memo_bytes(previous)
    """
    global _DERIVED_BUDGET_BYTES, _DERIVED_MAX_BYTES
    from .._errors import ConvTransposeError

    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ConvTransposeError(
            f"max_bytes must be a non-negative integer, got {max_bytes!r}")
    with _derived_lock:
        previous = _DERIVED_BUDGET_BYTES
        _DERIVED_BUDGET_BYTES, _DERIVED_MAX_BYTES = max_bytes, max_bytes // 2
        while derived_kept and 2 * sum(e[0].nbytes for e in derived_kept.values()) > max_bytes:
            del derived_kept[next(iter(derived_kept))]
    return previous


def weights_memo_bytes() -> int:
    """The memory the weights memo may keep now (:func:`set_weights_memo_bytes`)."""
    return _DERIVED_BUDGET_BYTES


def forget_derived() -> None:
    """Drop every filter's derived matrices (owned filters' too: they are derived again)."""
    with _derived_lock:
        derived_kept.clear()
        for _, derived in list(owned_filters.values()):  # clearing may free owned filters
            derived.clear()


register("filters' derived matrices", forget_derived)
