"""How much working memory each algorithm allocates, and the bound none may exceed.

An algorithm's scratch is every buffer it allocates besides the result: padded copies
of the input, matrices derived from the filter, im2col columns and products (chunked to
:data:`~._common.SCRATCH_BYTES`), ``dense``'s whole-layer matrix, and the numba
kernels' own windows, accumulators and tap lists (:mod:`.numba_scratch`, which names
every allocation inside compiled code).  :func:`scratch_bytes` is an upper estimate of
it from the problem's shape alone, and :func:`scratch_bound` the most any algorithm may
take::

    scratch <= max(SCRATCH_MULTIPLE * (result + data + filter), SCRATCH_MIN_BYTES)

with every size counted in the accumulation dtype (float32 for float16 and bfloat16,
int64 for integers).  The cost model offers no algorithm whose estimate exceeds the
bound, and a forced one is replaced by the cheapest that fits
(:func:`convtranspose._choose.choice.fitting`): only ``dense`` (a matrix of every input by
every output) and layers whose single block row exceeds the chunk budget can be
refused.  ``direct-numpy`` (a copy of the input and one output-sized product per
tap) always fits, so something always runs.

The adjoints of the same problem (the forward convolution and the gradients,
:mod:`.backward`) have estimates of their own, :func:`adjoint_scratch_bytes`, under the
same bound (the same three operands): the planner of :mod:`convtranspose._execute.adjoints`
offers none beyond it, and a forced ``im2col`` beyond it is replaced.  The memory check
of every array function (:mod:`convtranspose._execute.footprint`) counts the largest estimate
among the algorithms a call may run.  ``tests/kernels/test_scratch.py`` measures every
algorithm's scratch with tracemalloc (which sees numba's buffers too: its runtime
allocates with ``PyMem_RawMalloc``) against its estimate, and
``tests/kernels/test_numba_memory.py`` the numba kernels' peak RSS in fresh processes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._plan.geometry import tap_zeros
from .._plan.rules import AxisPlan
from .._runtime.caches import kept
from .._runtime.target import host
from . import REGISTRY
from . import adjoints as _backward
from .common import SCRATCH_BYTES
from .depthwise_schedule import depthwise_bytes
from .disjoint_plan import disjoint_bytes
from .numba_scratch import direct_blocked_bytes, direct_bytes, stream_bytes
from .schedules import blocked_shape

__all__ = ["SCRATCH_MIN_BYTES", "SCRATCH_MULTIPLE", "SCRATCH_RULES", "adjoint_fits", "adjoint_scratch_bytes",
           "bound_of", "fits", "im2col_budget", "scratch_bound", "scratch_bytes"]

#: The bound is this many times the bytes of the result and the operands, ...
SCRATCH_MULTIPLE = 4
#: ... or this many bytes if more: a chunk of columns and its products (at most
#: ``2 * SCRATCH_BYTES``, 48 MiB) plus small copies of the operands.
SCRATCH_MIN_BYTES = 64 << 20


def _sizes(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
           itemsize: int) -> tuple[int, int, int]:
    """Bytes of the data, the result and the weights in the accumulation dtype."""
    groups, ci, co = weights_shape[:3]
    data = batch * groups * ci * math.prod(a.input_size for a in axes) * itemsize
    result = batch * groups * co * math.prod(a.output_size for a in axes) * itemsize
    return data, result, math.prod(weights_shape) * itemsize


def scratch_bound(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
                  dtype) -> int:
    """The most bytes of scratch any algorithm may allocate for this problem
    (``dtype`` the accumulation dtype): the module's rule."""
    return bound_of(sum(_sizes(batch, axes, weights_shape, np.dtype(dtype).itemsize)))


def bound_of(operand_bytes: int) -> int:
    """:func:`scratch_bound` of a problem whose data, result and filter take
    ``operand_bytes`` together in the accumulation dtype."""
    return max(SCRATCH_MULTIPLE * operand_bytes, SCRATCH_MIN_BYTES)


def _padded(axis: AxisPlan) -> int:
    """Positions along ``axis`` of a padded copy of the input: the input or the
    output's blocks, with every phase's window of taps on either side."""
    blocks = -(-axis.output_size // axis.stride)
    return max(axis.input_size, blocks) + -(-axis.dilated_kernel_size // axis.stride) + 2


def scratch_bytes(name: str, batch: int, axes: Sequence[AxisPlan],
                  weights_shape: Sequence[int], dtype, threads: int | None = None) -> int:
    """An upper estimate of the scratch algorithm ``name`` allocates for the problem
    (``dtype`` the accumulation dtype) on ``threads`` threads (this machine's by
    default): NumPy's buffers and, for the numba algorithms, numba's own."""
    return _scratch_bytes(name, batch, tuple(axes), tuple(weights_shape),
                          np.dtype(dtype).itemsize, host().threads if threads is None else threads)


@kept("scratch estimates", maxsize=1024)
def _scratch_bytes(name: str, batch: int, axes: tuple[AxisPlan, ...],
                   weights_shape: tuple[int, ...], itemsize: int, threads: int) -> int:
    data, result, weights = _sizes(batch, axes, weights_shape, itemsize)
    if not data or not result or not weights:
        return 0
    return _OVERHEAD_BYTES + _buffers(name, batch, axes, weights_shape, itemsize, threads)


#: Index arrays, views and Python objects of a call, on top of its buffers (the largest
#: excess over the buffers alone in ``benchmarks/results/scratch-bounds.json`` is 0.1 MiB).
_OVERHEAD_BYTES = 256 << 10


def _dense_buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
    # The (G*Ci*X, G*Co*Y) matrix, and int64 indices of its nonzeros (at most one per
    # input, tap and channel pair), a few of them alive at once.
    data = sizes[0]
    groups, ci, co = weights_shape[:3]
    rows = groups * ci * math.prod(a.input_size for a in axes)
    columns = groups * co * math.prod(a.output_size for a in axes)
    nonzeros = rows * co * math.prod(weights_shape[3:])
    return rows * columns * itemsize + 4 * 8 * nonzeros + data


def _direct_numpy_buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
    return 2 * sum(sizes)  # the input's copy, one tap's product


def _stream_buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
    # The input's copy, every position's columns (Co * taps each), a copy of a filter
    # stored neither taps last nor taps first, and NumPy's product of the columns past
    # whole chunks (under 64 of them: its copy of the filter's slice and its result).
    data, _, weights = sizes
    groups, ci, co = weights_shape[:3]
    taps = math.prod(weights_shape[3:])
    positions = batch * math.prod(a.input_size for a in axes)
    tails = groups * (taps if groups == 1 else 1) * (ci + positions) * 64 * itemsize
    return (data + groups * positions * co * taps * itemsize + weights + tails
            + stream_bytes(threads))


def _column_chunks(batch, axes, weights_shape, itemsize) -> tuple[int, int]:
    """The padded copy of the input, and the chunks of whole block rows of the first
    axis (their columns and products, up to the budget) plus the product's copy on its
    way into the result."""
    groups, ci, co = weights_shape[:3]
    taps = math.prod(weights_shape[3:])
    padded = batch * groups * ci * math.prod(_padded(a) for a in axes) * itemsize
    rest = math.prod(_padded(a) for a in axes[1:])
    # One block row of the first axis: its columns (every tap, input channels) and
    # products (every tap or phase, output channels); chunks hold whole rows.
    row = groups * itemsize * taps * (ci + co) * rest
    whole = row * batch * _padded(axes[0])
    return padded, 3 * min(max(SCRATCH_BYTES, row), whole) // 2


def _columns_buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
    data, _, weights = sizes
    return data + 2 * weights + _column_chunks(batch, axes, weights_shape, itemsize)[1]


def _padded_columns_buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
    data, _, weights = sizes
    padded, chunk = _column_chunks(batch, axes, weights_shape, itemsize)
    return padded + data + 2 * weights + chunk


def _pointwise_buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
    # The inputs reached (cast to the sums' dtype), the filter's matrices and, where
    # the outputs are not the inputs' places, the products before their copy, or the
    # tables of where each product row goes.
    from .pointwise import SPAN_TABLE_BYTES, reached

    data, result, weights = sizes
    return data + weights + result + SPAN_TABLE_BYTES * batch * reached(axes)


def _numba_buffers(bytes_of):
    def buffers(sizes, batch, axes, weights_shape, itemsize, threads) -> int:
        return bytes_of(batch, axes, weights_shape, itemsize, threads)
    return buffers


#: Each scratch rule an algorithm's record names (``Algorithm.scratch``): the bytes of
#: its buffers from ``(sizes, batch, axes, weights_shape, itemsize, threads)``, where
#: ``sizes`` are the data's, the result's and the weights' bytes.
SCRATCH_RULES = {
    "dense": _dense_buffers,
    "direct": _numba_buffers(direct_bytes),
    "direct-blocked": _numba_buffers(direct_blocked_bytes),
    "depthwise": _numba_buffers(depthwise_bytes),
    "disjoint": _numba_buffers(disjoint_bytes),
    "direct-numpy": _direct_numpy_buffers,
    "stream": _stream_buffers,
    "columns": _columns_buffers,
    "padded-columns": _padded_columns_buffers,
    "pointwise": _pointwise_buffers,
}


def _buffers(name: str, batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
             itemsize: int, threads: int) -> int:
    sizes = _sizes(batch, axes, weights_shape, itemsize)
    rule = SCRATCH_RULES[REGISTRY[name].scratch]
    return rule(sizes, batch, axes, weights_shape, itemsize, threads)


def fits(name: str, batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
         dtype, threads: int | None = None) -> bool:
    """Whether ``name``'s scratch estimate is within :func:`scratch_bound`."""
    return (scratch_bytes(name, batch, axes, weights_shape, dtype, threads)
            <= scratch_bound(batch, axes, weights_shape, dtype))


def _box(axis: AxisPlan) -> int:
    """The most data positions one tap of ``axis`` reads inside ``grad`` for
    (:func:`.backward.tap_boxes`): distinct positions ``stride`` apart in ``[0, Y)``."""
    return min(axis.input_size, -(-axis.output_size // axis.stride))


def adjoint_scratch_bytes(kind: str, name: str, batch: int, axes: Sequence[AxisPlan],
                          weights_shape: Sequence[int], dtype) -> int:
    """An upper estimate of the scratch of :mod:`.backward`'s algorithm ``name`` for the
    data adjoint (``kind="data"``) or the filter adjoint (``"filter"``) of the problem,
    besides the array of sums it returns (``dtype`` the accumulation dtype).

    ``depthwise``: one tap's product over the batch.  ``blocked``: the operands'
    channels-last copies; the data adjoint's sums and packed weights with each group's
    channels padded to its blocks' width, the weights' swapped copy and the unpadded
    sums; the filter adjoint's sums per tap and their reordering.  ``depthwise``'s
    compiled filter adjoint: the operands' channels-last copies.  ``taps``: the filter's tap-major
    copy (data) or one tap's ``(G, Ci, Co)`` product (filter), one tap's window of
    ``grad`` and of the data or its product, made contiguous for BLAS.  ``im2col``: the
    filter's contiguous copy (data) or a product of the filter's size (filter), and per
    slice of the batch its columns (every tap's ``grad``) and products (data) or its
    contiguous data (filter); slices hold as many items as fit :func:`im2col_budget`,
    at least one.
    """
    if kind not in ("data", "filter"):
        raise ValueError(f"kind must be 'data' or 'filter', got {kind!r}")
    itemsize = np.dtype(dtype).itemsize
    data, result, weights = _sizes(batch, axes, weights_shape, itemsize)
    if not data or not result or not weights:
        return 0
    groups, ci, co = weights_shape[:3]
    # The two adjoints allocate alike: the data adjoint's products are data-sized and
    # the filter adjoint's contiguous data too; a tap's (G, Ci, Co) product or the
    # filter's copy is at most the filter.
    box = batch * groups * math.prod(_box(axis) for axis in axes) * itemsize
    if name == "depthwise":  # (the compiled filter adjoint: channels-last copies)
        return _OVERHEAD_BYTES + max(box * max(ci, co), data + result if kind == "filter" else 0)
    if name == "blocked" and kind == "filter":
        # channels-last copies, the sums per tap and their reordering
        return _OVERHEAD_BYTES + data + result + 2 * weights
    if name == "blocked-planes":  # blocked's, without grad's copies
        width = _blocked_width(ci, axes[-1].input_size, itemsize)
        return _OVERHEAD_BYTES + -(-(data + weights) * width // ci) + weights + data
    if name == "blocked":
        # grad's channels-last copy with zeros around it (of a finite filter; of
        # channels-last data without zeros, a padded copy beside it); the sums and the
        # packed weights with each group's Ci padded to the blocks' width; the weights'
        # swapped copy; the sums unpadded
        width = _blocked_width(ci, axes[-1].input_size, itemsize)
        padded = result
        for axis in axes:
            padded = -(-padded * (sum(tap_zeros(axis)) + axis.output_size)
                       // axis.output_size)
        return (_OVERHEAD_BYTES + result + padded
                + -(-(data + weights) * width // ci) + weights + data)
    if name == "taps":
        return _OVERHEAD_BYTES + weights + box * (ci + co)
    item = _im2col_item(axes, weights_shape, itemsize)
    step = min(batch, max(1, im2col_budget(batch, axes, weights_shape, dtype) // item))
    return _OVERHEAD_BYTES + weights + step * item


def _blocked_width(channels: int, line: int, itemsize: int) -> int:
    """The channels per group of the ``blocked`` data adjoint's sums and packed weights:
    ``channels`` padded to the width of its blocks on this machine for lines of
    ``line`` outputs (:func:`._numba.forward.forward_adjoint`'s choice)."""
    lanes, vectors = blocked_shape(itemsize, channels, AxisPlan(line, 1, 1, 1, 0, line),
                                   host().vector_bytes)[:2]
    return lanes * vectors


def _im2col_item(axes: Sequence[AxisPlan], weights_shape: Sequence[int], itemsize: int) -> int:
    """Bytes of one batch item's im2col columns (every tap's ``grad``) and products or
    contiguous data (``Ci`` channels), as :func:`.backward._batch_slices` counts them."""
    groups, ci, co = weights_shape[:3]
    return (groups * (co * math.prod(weights_shape[3:]) + ci)
            * math.prod(axis.input_size for axis in axes) * itemsize)


def im2col_budget(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int],
                  dtype) -> int:
    """The bytes of columns and products a slice of the batch may take in the adjoints'
    ``im2col``: :data:`.backward.IM2COL_SCRATCH_BYTES`, or what :func:`scratch_bound`
    leaves beside the filter's copy if less, so that ``im2col`` fits whenever one
    item does."""
    itemsize = np.dtype(dtype).itemsize
    weights = math.prod(weights_shape) * itemsize
    room = scratch_bound(batch, axes, weights_shape, dtype) - weights - _OVERHEAD_BYTES
    return min(_backward.IM2COL_SCRATCH_BYTES, room)


def adjoint_fits(kind: str, name: str, batch: int, axes: Sequence[AxisPlan],
                 weights_shape: Sequence[int], dtype) -> bool:
    """Whether the adjoint algorithm's estimate is within :func:`scratch_bound` (the
    transposed convolution's bound: the same three operands)."""
    return (adjoint_scratch_bytes(kind, name, batch, axes, weights_shape, dtype)
            <= scratch_bound(batch, axes, weights_shape, dtype))
