"""What the NumPy/BLAS algorithms share: operand views, products and guards.

- The grouped views every algorithm computes on: :func:`input_glxc` and
  :func:`output_glyc` (groups, positions and channels, either layout).
- Products: :func:`threaded_matmul` and :func:`split_gemms` (on the library's threads,
  BLAS on one thread each), the per-stride-phase weight matrices
  (:func:`taps_first_weights`, :func:`class_matrix`) and the scatter of a phase's
  product into the output (:func:`scatter_phases`).
- The non-finite guard: an algorithm whose own zeros (padding, absent taps) would
  meet an infinity or a NaN raises :class:`NonFinite` (:func:`require_finite`), and
  the execution path runs an exact algorithm instead.
- The scratch budget of im2col/column buffers (:data:`SCRATCH_BYTES`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._runtime import blas as _blas
from .._runtime.target import host
from .._runtime.threads import SPLIT_SIZES, copy, parallel_copy, parallel_parts

#: Scratch (im2col/column) buffers are split over the batch (or the first spatial
#: axis) to stay under this many bytes.  Fewer, larger chunks mean fewer BLAS calls
#: (2 MiB made DCGAN/stride-1 layers 3-4x slower on a loaded 2-core machine), but
#: glibc serves blocks of 32 MiB and more with fresh mmaps whose page faults cost
#: more than the copies themselves (a 64 MiB im2col buffer: ~55 ms of faults), while
#: smaller blocks are recycled from the heap: so the budget stays under 32 MiB.
SCRATCH_BYTES = 24 << 20


def flat_span(array: np.ndarray) -> np.ndarray:
    """The elements ``array`` spans, from its first, as one flat view that its element
    steps index (``reshape(-1)`` would copy a strided array, losing them): the array
    itself where it is C-contiguous, else the dense array it views from its first
    element, else a read-only view over the span (steps whole and non-negative)."""
    if array.flags.c_contiguous:
        return array.reshape(-1)
    base = array.base  # a view of a dense array from its first element: that array
    if (isinstance(base, np.ndarray) and base.dtype == array.dtype
            and base.flags.c_contiguous and element_offset(array, base) == 0):
        return base.reshape(-1)
    if min(array.strides, default=0) < 0:
        raise ValueError("the array's strides must be non-negative")
    extent = 1 + sum((size - 1) * step for size, step in
                     zip(array.shape, np.array(array.strides) // array.itemsize))
    return as_strided(array, (extent,), (array.itemsize,), writeable=False)


def element_offset(view: np.ndarray, base: np.ndarray) -> int:
    """Elements of ``view``'s size from ``base``'s first element to ``view``'s (a view
    of its memory)."""
    return ((view.__array_interface__["data"][0] - base.__array_interface__["data"][0])
            // view.itemsize)


def move_axis(array: np.ndarray, source: int, destination: int) -> np.ndarray:
    """``np.moveaxis(array, source, destination)`` for one axis, as a transpose: a view,
    in a tenth of the time (``np.moveaxis`` normalises its axes through sequences: 7.9
    us against 0.8 for a 5-D array, ``benchmarks/results/prepared-calls-zen3.json``,
    ``views_by_transpose``), for the views made on every call."""
    order = list(range(array.ndim))
    order.insert(destination % array.ndim, order.pop(source % array.ndim))
    return array.transpose(order)


class NonFinite(Exception):
    """An operand may hold an infinity or a NaN that this algorithm would multiply by
    a zero of its own (padding, an absent tap): :func:`transposed_convolution` then
    runs the cheapest exact algorithm instead."""


def all_finite(array: np.ndarray) -> bool:
    """Whether every element of ``array`` is finite (at once for integers).

    For float32/float64 one BLAS dot product of the elements with themselves: an
    infinite or NaN element makes the sum of squares infinite or NaN, so a finite
    one proves every element finite.  Squares of finite elements beyond about 1e19
    (float32) overflow too; that only sends the caller to an exact algorithm.  The
    dot is the cheapest pass NumPy offers (16x512x8x8 float32: 45 us, against 56 us
    for ``np.isfinite(x).all()`` and 110 us for ``np.add.reduce``) and needs no
    temporary.  Narrower floats (float16, bfloat16) are tested element by element.
    Runs under the caller's ``np.errstate``.
    """
    kind = array.dtype.kind
    if kind in "iub" or array.size == 0:
        return True
    if kind == "f" and array.dtype.itemsize >= 4:
        flat = array.ravel(order="K")  # a view unless the elements have gaps
        return math.isfinite(np.dot(flat, flat))
    return bool(np.isfinite(array).all())


def require_finite(array: np.ndarray, dtype: np.dtype, derived: dict | None = None) -> None:
    """Raise :class:`NonFinite` unless ``array`` is finite (integer sums never need it).

    With ``derived`` (the weights memo of the filter) the answer is kept there, so a
    filter used again costs nothing more than the memo lookup the algorithm makes anyway.
    """
    if dtype.kind != "f":
        return
    if not (all_finite(array) if derived is None else kept_finite(array, derived)):
        raise NonFinite


def kept_finite(array: np.ndarray, derived: dict) -> bool:
    """Whether the float ``array`` is finite, found once and kept in ``derived`` (the
    weights memo of the filter)."""
    finite = derived.get("finite")
    if finite is None:
        derived["finite"] = finite = all_finite(array)
    return finite


#: Stacks of products with fewer FLOPs in total than four times this stay on one thread.
PARALLEL_FLOPS = 2e6


#: GEMMs with fewer FLOPs than this run on the calling thread only: waking worker
#: threads costs up to a scheduler tick (milliseconds) on a busy machine, more than
#: splitting such a product can save.
SERIAL_GEMM_FLOPS = 64e6
#: Where numba's native threads split the products (their fork-join about a tenth of
#: the pool's, :mod:`convtranspose._kernels._numba.native_gemm`), GEMMs from this many
#: FLOPs are split: on an AMD Zen 3, products of 26 MFLOP ran 1.25-1.45x faster on two
#: native threads than on one, of 12.8 MFLOP as fast, and the pool gained nothing below
#: 52 MFLOP (``benchmarks/results/native-threads-zen3.json``, ``gemm_split``).  On an
#: AMD Zen 4 too, a 6.3 MFLOP product split made its layer 1.4x slower and products
#: from 16.8 MFLOP ran 1.56-1.76x faster split; below the threshold a split product's
#: time is bimodal there, which is why no run-time measurement replaces this yet
#: (``benchmarks/results/native-split-zen4.json``).
NATIVE_SPLIT_GEMM_FLOPS = 16e6


def splits_product(flops: float, threads: int) -> bool:
    """Whether a product of ``flops`` runs split between ``threads`` threads: from
    :data:`SERIAL_GEMM_FLOPS`, or from :data:`NATIVE_SPLIT_GEMM_FLOPS` where numba's
    native threads split it (asked only then: a process of smaller products never
    imports numba for it)."""
    if flops >= SERIAL_GEMM_FLOPS:
        return True
    return flops >= NATIVE_SPLIT_GEMM_FLOPS and native_threads_run(threads)


def native_threads_run(threads: int) -> bool:
    """Whether numba's native threads run the library's loops on ``threads`` threads
    (:func:`._numba.launch.native_threads`), asked only for more than one thread where
    numba is usable: a process that never asks never imports numba for it."""
    if threads < 2 or not host().numba:
        return False
    from ._numba.launch import native_threads

    return native_threads(threads)


def zero_output(out: np.ndarray, threads: int) -> None:
    """``out.fill(0)`` before an algorithm adds into ``out``: split between up to
    ``threads`` of numba's threads where a copy of its size would be
    (:func:`._numba.fill.zero_fill`); NumPy's fill where numba is off or one thread
    runs (a process that never splits a fill never imports numba for it)."""
    if threads < 2 or out.nbytes < SPLIT_SIZES[0] or not host().numba:
        out.fill(0)
        return
    from ._numba.fill import zero_fill

    zero_fill(out, threads)


#: Column blocks of a product split by columns start at multiples of this many elements
#: (64 bytes of float32): two threads never write one cache line of the result.
_COLUMN_ALIGN = 16


def _block(arguments: tuple, part: int, parts: int) -> tuple:
    """Block ``part`` of ``parts`` of one :func:`~convtranspose._runtime.blas.gemm`
    call: rows of ``c`` (and ``a``) when ``c`` has at least as many rows as columns,
    else columns of ``c`` (and ``b``)."""
    a, b, c, accumulate = arguments
    rows, columns = c.shape
    if rows >= columns:
        lo, hi = rows * part // parts, rows * (part + 1) // parts
        return a[lo:hi], b, c[lo:hi], accumulate
    units = -(-columns // _COLUMN_ALIGN)
    lo = min(columns, units * part // parts * _COLUMN_ALIGN)
    hi = min(columns, units * (part + 1) // parts * _COLUMN_ALIGN)
    return a, b[:, lo:hi], c[:, lo:hi], accumulate


def split_gemms(units: list, threads: int) -> None:
    """Run ``units`` (lists of :func:`~convtranspose._runtime.blas.gemm` argument tuples;
    the calls of one unit, in order, may accumulate into one result) on up to
    ``threads`` of the library's threads: every product is cut into one block of rows
    or columns per thread (:func:`_block`), and each thread runs its block of every
    call, on one BLAS thread.

    Why not OpenBLAS's own threads: after a threaded product they spin for about 2**28
    cycles (0.1 s) before they sleep, and on a machine with as many cores as threads
    they take a core from whatever runs next, the library's own compiled kernels and
    copies included.  ``direct-blocked`` right after ``gemm-ncx`` on DCGAN 512->256 took
    42-61 ms instead of 26-34 ms, and measured planning ranked it below ``gemm-ncx``
    (``benchmarks/results/blas-threads-xeon.json``).  Large products run about as fast
    either way (the same file).
    """
    gemm = gemm_call()

    def work(part):
        for unit in units:
            for arguments in unit:
                block = _block(arguments, part, threads)
                if block[2].size:
                    gemm(*block)

    if threads > 1 and _native_threads_split(units, threads):
        return
    with _blas.one_thread:
        if threads == 1:
            work(0)
        else:
            parallel_parts(work, threads, threads)


def gemm_call():
    """The function that makes one :func:`~convtranspose._runtime.blas.gemm` product on
    the calling thread (the same arguments): from compiled code where numba runs
    (:func:`convtranspose._kernels._numba.native_gemm.serial_gemm`, without the
    Python that works out the arguments), else, and for what that declines, through
    :mod:`ctypes`."""
    if not host().numba:
        return _blas.gemm
    from ._numba.native_gemm import serial_gemm

    def gemm(a, b, c, accumulate=False):
        if not serial_gemm(a, b, c, accumulate):
            _blas.gemm(a, b, c, accumulate)

    return gemm


def _native_threads_split(units: list, threads: int) -> bool:
    """:func:`split_gemms` on numba's native threads, where they run
    (:func:`convtranspose._kernels._numba.native_gemm.native_gemms`); False otherwise."""
    if not host().numba:
        return False
    from ._numba.native_gemm import native_gemms

    return native_gemms(units, threads, _COLUMN_ALIGN)


def threaded_matmul(a: np.ndarray, b: np.ndarray, threads: int) -> np.ndarray:
    """``np.matmul(a, b)`` on the library's threads, BLAS on one thread each.

    A large product is split into blocks (:func:`split_gemms`); a stack of small
    products is split between up to ``threads`` threads; a small one runs on the
    calling thread.
    """
    flops = 2.0 * a.shape[-2] * a.shape[-1] * b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    dtype = np.result_type(a, b)
    if splits_product(flops, threads):
        if not (a.dtype == b.dtype == dtype and _blas.available(dtype)):
            return np.matmul(a, b)
        out = np.empty(batch + (a.shape[-2], b.shape[-1]), dtype)
        split_gemms([[(_stacked(a, index, batch), _stacked(b, index, batch), out[index],
                       False)] for index in np.ndindex(batch)], threads)
        return out
    stack = batch[0] if batch else 1
    with _blas.one_thread:
        if stack < 2 or threads == 1 or flops * math.prod(batch) < 4 * PARALLEL_FLOPS:
            return np.matmul(a, b)
        out = np.empty(batch + (a.shape[-2], b.shape[-1]), dtype)
        threads = min(threads, stack)
        bounds = [stack * i // threads for i in range(threads + 1)]

        def part(operand, lo, hi):
            owns_axis = operand.ndim - 2 == len(batch) and operand.shape[0] == stack
            return operand[lo:hi] if owns_axis else operand

        def work(i):
            lo, hi = bounds[i], bounds[i + 1]
            np.matmul(part(a, lo, hi), part(b, lo, hi), out=out[lo:hi])

        parallel_parts(work, threads, threads)
        return out


def _stacked(operand: np.ndarray, index: tuple[int, ...], batch: tuple[int, ...]) -> np.ndarray:
    """The 2-D matrix of ``operand`` at ``index`` of the broadcast stack ``batch``."""
    lead = operand.shape[:-2]
    offset = len(batch) - len(lead)
    return operand[tuple(0 if size == 1 else index[offset + axis]
                         for axis, size in enumerate(lead))]


def input_glxc(data: np.ndarray, groups: int, channels_last: bool) -> np.ndarray:
    """A view of the data as ``(G, N, X..., Ci)``."""
    rank = data.ndim - 2
    if channels_last:
        split = data.reshape(data.shape[:-1] + (groups, -1))  # (N, X..., G, Ci)
        return move_axis(split, -2, 0)
    split = data.reshape((data.shape[0], groups, -1) + data.shape[2:])  # (N, G, Ci, X...)
    return split.transpose((1, 0) + tuple(range(3, 3 + rank)) + (2,))


def output_glyc(out: np.ndarray, groups: int, channels_last: bool) -> np.ndarray:
    """A writable view of the output as ``(G, N, Y..., Co)``."""
    return input_glxc(out, groups, channels_last)


def taps_first_weights(weights, derived: dict) -> np.ndarray:
    """The filter as ``(G, K..., Ci, Co)``, contiguous (built once per memo entry)."""
    taps_first = derived.get("taps first")
    if taps_first is None:
        taps_first = np.ascontiguousarray(np.moveaxis(weights, (1, 2), (-2, -1)))
        derived["taps first"] = taps_first
    return taps_first


def class_matrix(taps_first, combo, slots, counts, dtype, channels_first_width=False):
    """Weights as ``(G, slots*Ci, phases*Co)``: column (phase..., co) of row (slot..., ci).

    ``taps_first`` is the filter as ``(G, K..., Ci, Co)`` (contiguous), so that the
    gather below moves whole ``(Ci, Co)`` blocks.  With ``channels_first_width`` the
    columns are ordered (co, phase...) instead.
    """
    rank = len(combo)
    groups, ci, co = taps_first.shape[0], taps_first.shape[-2], taps_first.shape[-1]
    # One fancy index per axis, shaped so that the result is (G, S_1..S_D, C_1..C_D, Ci, Co).
    index = []
    for a, c in enumerate(combo):
        taps = np.array(c.taps, np.intp).T  # (slots_a, count_a)
        shape = [1] * (2 * rank)
        shape[a], shape[rank + a] = taps.shape
        index.append(taps.reshape(shape))
    gathered = taps_first[(slice(None),) + tuple(index)]
    slot_axes = tuple(range(1, 1 + rank))
    phase_axes = tuple(range(1 + rank, 1 + 2 * rank))
    in_axis, out_axis = 1 + 2 * rank, 2 + 2 * rank
    if channels_first_width:
        order = (0,) + slot_axes + (in_axis, out_axis) + phase_axes
    else:
        order = (0,) + slot_axes + (in_axis,) + phase_axes + (out_axis,)
    matrix = np.ascontiguousarray(gathered.transpose(order), dtype)
    return matrix.reshape(groups, len(slots) * ci, math.prod(counts) * co)


def scatter_phases(into, product, combo, phases, rank, j_start=0):
    """Copy a class's result into the output.

    ``product`` is (a view of) ``(G, n, j..., phases..., Co)`` whose first block axis
    starts at block ``j_start``; ``into`` is the output as ``(G, n, Y..., Co)``.
    """
    j_stop = j_start + product.shape[2]
    pieces_per_axis = []
    for a, (p, c) in enumerate(zip(phases, combo)):
        low, high = (j_start, j_stop) if a == 0 else (0, p.blocks)
        pieces = []
        if min(high, p.whole_blocks) > low:
            pieces.append((low, min(high, p.whole_blocks), c.count, low))
        keep = min(c.count, p.remainder - c.first)
        if p.remainder and keep > 0 and low <= p.whole_blocks < high:
            pieces.append((p.whole_blocks, p.whole_blocks + 1, keep, low))
        if not pieces:
            return
        pieces_per_axis.append(pieces)
    # product axes (G, n, j_1..j_D, p_1..p_D, Co) -> (G, n, j_1, p_1, ..., j_D, p_D, Co)
    order = (0, 1) + tuple(itertools.chain.from_iterable(
        (2 + a, 2 + rank + a) for a in range(rank))) + (2 + 2 * rank,)
    interleaved = product.transpose(order)
    strides = into.strides
    for pieces in itertools.product(*pieces_per_axis):
        start = tuple(j0 * p.stride + c.first for (j0, _, _, _), p, c in zip(pieces, phases, combo))
        corner = into[(slice(None), slice(None)) + start]  # (G, n, Co) view at the corner
        shape = (into.shape[0], into.shape[1])
        new_strides = (strides[0], strides[1])
        for (j0, j1, keep, _), p, axis_stride in zip(pieces, phases, strides[2:2 + rank]):
            shape += (j1 - j0, keep)
            new_strides += (axis_stride * p.stride, axis_stride)
        shape += (into.shape[-1],)
        new_strides += (strides[-1],)
        destination = as_strided(corner, shape, new_strides, writeable=True)
        source = interleaved[(slice(None), slice(None)) + tuple(itertools.chain.from_iterable(
            (slice(j0 - base, j1 - base), slice(0, keep)) for j0, j1, keep, base in pieces))]
        parallel_copy(copy, destination, source)
