"""The adjoints of the canonical transposed convolution, on NumPy and its BLAS.

For the canonical problem (``docs/semantics.md``) with data ``(N, G*Ci, X...)``, weights
``(G, Ci, Co, K...)`` and per axis ``(offset, Y)``::

    out[n, g*Co + co, o] = sum over ci, k, x with x*s + k*d = o + offset
                           of data[n, g*Ci + ci, x] * w[g, ci, co, k]

its adjoint with respect to the data (the data gradient; also every forward
convolution, :mod:`convtranspose._frontends.convolution`) and with respect to the weights (the
filter gradient) read the same taps of a ``grad`` shaped like ``out``::

    data_adjoint[n, g*Ci + ci, x] = sum over co, k of w[g, ci, co, k] * grad[n, g*Co + co, x*s + k*d - offset]
    filter_adjoint[g, ci, co, k]  = sum over n, x of data[n, g*Ci + ci, x] * grad[n, g*Co + co, x*s + k*d - offset]

with ``grad`` read as 0 outside ``[0, Y)``.  Per tap ``k`` the ``x`` that read inside
``grad`` form one box, and ``grad`` over it is a strided view (:func:`tap_boxes`): no
padded copy of ``grad`` is ever made, however large the stride or the pads.

Algorithms (:data:`ALGORITHMS`):

``im2col``
    Gathers every tap's view into one ``(G, Co*T, N*X)`` matrix (``T`` taps) and runs
    one GEMM per group: the fastest when channels are many.  The batch is cut into
    slices whose matrix and products take at most ``budget`` bytes (at least one
    item): :data:`IM2COL_SCRATCH_BYTES`, or less where the scratch bound leaves less
    (:func:`convtranspose._kernels.scratch.im2col_budget`).
``taps``
    One GEMM per tap, accumulated: scratch of one tap's view, and faster when the taps
    are few and large.
``depthwise``
    Groups of one input and one output channel: per tap an elementwise multiply-add
    over the whole batch (a GEMM per group and tap would be 1 x 1); the filter adjoint
    of float32 and float64 operands in compiled channel vectors
    (:mod:`._numba.depthwise_filter`).
``blocked``
    Compiled register blocks (float32 and float64, up to three axes): the data
    adjoint in ``direct-blocked``'s blocks with a block's pixels ``s`` apart
    (:mod:`._numba.forward`; with a finite filter over a copy of ``grad`` with zeros
    around it, every output in whole blocks across lines), the filter adjoint per
    group and tap as a product over the tap's box of pixels
    (:mod:`._numba.blocked_filter`, for groups of whole vectors of output channels); no
    gathered matrix (:func:`blocked_applies`).
``blocked-planes``
    The data adjoint only: ``blocked``'s blocks reading a channels-first ``grad``'s
    planes where they are, without its channels-last copy (nor zeros around it).  Which
    of the two is faster depends on the channels and the machine (on an AMD Zen 4 the
    planes took 0.57-0.92x the time up to 128 channels per group and
    1.35-1.40x at 256-512, ``benchmarks/results/copy-split-zen4.json``,
    ``source_planes``): measured planning times both.  A channels-last ``grad`` runs
    ``blocked``.

Every algorithm computes the same sums in another order; they agree up to float
rounding, and exactly for integers (int64 sums wrap like int64 arithmetic).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .._plan.geometry import axis_taps
from .._plan.rules import AxisPlan
from .._runtime.target import host
from .common import threaded_matmul

__all__ = ["ALGORITHMS", "IM2COL_SCRATCH_BYTES", "SUMMARIES", "blocked_applies", "data_adjoint",
           "filter_adjoint", "prepare_data_adjoint", "tap_boxes"]

ALGORITHMS = ("im2col", "taps", "depthwise", "blocked", "blocked-planes")
#: One line per algorithm of :data:`ALGORITHMS` (``ct.explain`` of a strided forward
#: convolution prints it; the module docstring says more).
SUMMARIES = {
    "im2col": "every tap's view gathered into one matrix, one BLAS GEMM per group",
    "taps": "one BLAS GEMM per tap, accumulated",
    "depthwise": "per tap an elementwise multiply-add (one channel in and out per group)",
    "blocked": "numba register blocks over a channels-last copy of the data with zeros"
               " around it",
    "blocked-planes": "numba register blocks reading the channels-first data's planes in"
                      " place",
}

#: The im2col matrix and its products are built for as many batch items as fit in this
#: many bytes (at least one): large enough for BLAS to run at full rate on every layer
#: of the benchmark, small enough to stay in memory next to the operands.
IM2COL_SCRATCH_BYTES = 64 << 20


def tap_boxes(axes: Sequence[AxisPlan]):
    """Every tap that reads inside ``grad``, with the box of ``x`` it reads for.

    Yields ``(tap, data_box, grad_box)``: ``tap`` the kernel index per axis, and per axis
    the slice of data positions ``x`` whose ``x*s + k*d - offset`` falls in ``[0, Y)``
    and the strided slice of ``grad`` they read.  Taps that read nothing are left out.
    """
    per_axis = []
    for axis in axes:
        s = axis.stride
        per_axis.append([(k, slice(low, high),
                          slice(low * s + shift, low * s + shift + (high - low - 1) * s + 1, s))
                         for k, shift, low, high in axis_taps(axis)])
    for choice in itertools.product(*per_axis):
        yield (tuple(c[0] for c in choice), tuple(c[1] for c in choice),
               tuple(c[2] for c in choice))


def _grouped(array: np.ndarray, groups: int) -> np.ndarray:
    """``(N, G*C, S...)`` as the view ``(N, G, C, S...)``."""
    n, channels = array.shape[:2]
    return array.reshape((n, groups, channels // groups) + array.shape[2:])


def _flat(tap: tuple[int, ...], axes) -> int:
    """The row-major index of ``tap`` among all taps."""
    index = 0
    for k, axis in zip(tap, axes):
        index = index * axis.kernel_size + k
    return index


def _batch_slices(batch: int, bytes_per_item: int, budget: int | None):
    """Slices of the batch whose im2col matrices and products each fit ``budget`` bytes
    (:data:`IM2COL_SCRATCH_BYTES` if None), at least one item each."""
    budget = IM2COL_SCRATCH_BYTES if budget is None else budget
    step = max(1, budget // max(bytes_per_item, 1))
    return [slice(start, min(start + step, batch)) for start in range(0, batch, step)]


def _im2col(grad_g: np.ndarray, axes, input_sizes, dtype) -> np.ndarray:
    """``(G, Co, T, N, X...)``: per tap, the ``grad`` each data position reads (0 outside)."""
    n, groups, co = grad_g.shape[:3]
    taps = math.prod(axis.kernel_size for axis in axes)
    cols = np.zeros((groups, co, taps, n) + tuple(input_sizes), dtype)
    for tap, data_box, grad_box in tap_boxes(axes):
        index = _flat(tap, axes)
        window = grad_g[(slice(None),) * 3 + grad_box]  # (N, G, Co, box...)
        target = cols[(slice(None), slice(None), index, slice(None)) + data_box]
        target[...] = np.moveaxis(window, 0, 2)
    return cols


def data_adjoint(grad: np.ndarray, weights: np.ndarray, axes: Sequence[AxisPlan],
                 dtype: np.dtype, algorithm: str, budget: int | None = None,
                 finite_weights: bool = False, derived: dict | None = None) -> np.ndarray:
    """The data adjoint ``(N, G*Ci, X...)`` in ``dtype`` (the module docstring).

    ``grad`` is ``(N, G*Co, Y...)`` and ``weights`` ``(G, Ci, Co, K...)``, both already
    in ``dtype`` (any strides); ``budget``: ``im2col``'s bytes per slice of the batch;
    ``finite_weights``: every weight is finite (``blocked`` then reads a copy of
    ``grad`` with zeros around it, every output in whole blocks); ``derived``: the
    weights memo's dict for these weights and the key ``"forward"``
    (:func:`~convtranspose._runtime.memo.derived_from`), if
    the caller has it.
    """
    if algorithm in ("blocked", "blocked-planes"):
        return prepare_data_adjoint(grad, weights, axes, dtype, algorithm, budget,
                                    finite_weights, derived)(grad, weights)
    groups, ci, co = weights.shape[:3]
    n = grad.shape[0]
    sizes = tuple(axis.input_size for axis in axes)
    grad_g = _grouped(grad, groups)
    result = np.zeros((n, groups, ci) + sizes, dtype)
    if algorithm == "depthwise":
        for tap, data_box, grad_box in tap_boxes(axes):
            w = weights[(slice(None), 0, 0) + tap].reshape((groups,) + (1,) * len(axes))
            result[(slice(None), slice(None), 0) + data_box] += (
                w * grad_g[(slice(None), slice(None), 0) + grad_box])
    elif algorithm == "taps":
        # NumPy hands matmul to BLAS only for contiguous operands: a tap of the filter
        # and a window of grad are strided views, so both are copied once.
        per_tap = np.ascontiguousarray(np.moveaxis(weights.reshape(groups, ci, co, -1), 3, 0))
        for tap, data_box, grad_box in tap_boxes(axes):
            window = np.ascontiguousarray(grad_g[(slice(None),) * 3 + grad_box])
            box = window.shape[3:]
            product = threaded_matmul(per_tap[_flat(tap, axes)], window.reshape((n, groups, co, -1)),
                                      host().threads)
            result[(slice(None),) * 3 + data_box] += product.reshape((n, groups, ci) + box)
            # freed before the next tap's are made: one window and product at a time
            # (kernels.scratch counts one)
            del window, product
    else:
        taps = math.prod(axis.kernel_size for axis in axes)
        matrix = np.ascontiguousarray(weights).reshape(groups, ci, co * taps)
        # an item's columns (every tap's grad) and products (its Ci channels)
        item_bytes = groups * (co * taps + ci) * math.prod(sizes) * dtype.itemsize
        for part in _batch_slices(n, item_bytes, budget):
            cols = _im2col(grad_g[part], axes, sizes, dtype)
            count = cols.shape[3]
            product = threaded_matmul(matrix, cols.reshape(groups, co * taps, -1), host().threads)
            result[part] = np.moveaxis(product.reshape((groups, ci, count) + sizes), 2, 0)
            del cols, product  # one slice's at a time
    return result.reshape((n, groups * ci) + sizes)


def prepare_data_adjoint(grad: np.ndarray, weights: np.ndarray, axes: Sequence[AxisPlan],
                         dtype: np.dtype, algorithm: str, budget: int | None = None,
                         finite_weights: bool = False, derived: dict | None = None):
    """:func:`data_adjoint` of grads of ``grad``'s shape and strides with everything but
    the grad set up once: ``compute(grad, weights, out=None)`` returns the adjoint of
    ``grad`` and weights of the same bits as ``weights``, in ``out`` (of the result's
    shape and dtype) where given.  The numba kernels (``blocked``,
    ``blocked-planes``) are prepared with their packed weights
    (:func:`~._numba.forward.prepare_forward_adjoint`) and read none; the NumPy
    algorithms read the weights of the call, so that nothing kept is the caller's."""
    if algorithm not in ("blocked", "blocked-planes"):
        return lambda grad, weights, out=None: _into(out, data_adjoint(
            grad, weights, axes, dtype, algorithm, budget, finite_weights, derived))
    if not blocked_applies("data", weights.shape, dtype, len(axes)):
        raise ValueError(f"{algorithm} does not take {dtype} sums over {len(axes)} axes")
    from .._runtime.memo import derived_from
    from ._numba.forward import prepare_forward_adjoint

    # read as it is where it is channels last
    channels_last = np.moveaxis(grad, 1, -1).flags.c_contiguous
    planes = algorithm == "blocked-planes" and not channels_last
    run = prepare_forward_adjoint(grad.shape[0], weights, axes, channels_last, dtype,
                                  derived_from(weights, "forward") if derived is None
                                  else derived, host(), finite_weights and not planes,
                                  planes)
    if not channels_last:
        return lambda grad, weights, out=None: run(grad, out)
    return lambda grad, weights, out=None: _into(out, np.moveaxis(
        run(np.moveaxis(grad, 1, -1)), -1, 1))


def _into(out: np.ndarray | None, result: np.ndarray) -> np.ndarray:
    """``result``, copied into ``out`` where given."""
    if out is None:
        return result
    out[...] = result
    return out


def filter_adjoint(data: np.ndarray, grad: np.ndarray, axes: Sequence[AxisPlan],
                   groups: int, dtype: np.dtype, algorithm: str,
                   budget: int | None = None) -> np.ndarray:
    """The filter adjoint ``(G, Ci, Co, K...)`` in ``dtype`` (the module docstring).

    ``data`` is ``(N, G*Ci, X...)`` and ``grad`` ``(N, G*Co, Y...)``, both in ``dtype``;
    ``budget`` as in :func:`data_adjoint`.
    """
    n = data.shape[0]
    ci, co = data.shape[1] // groups, grad.shape[1] // groups
    kernel = tuple(axis.kernel_size for axis in axes)
    sizes = tuple(axis.input_size for axis in axes)
    data_g, grad_g = _grouped(data, groups), _grouped(grad, groups)
    result = np.zeros((groups, ci, co) + kernel, dtype)
    target = host()
    # Channels-last operands (seen here as transposed views) are read as they are.
    last = [np.moveaxis(a, 1, -1) for a in (data, grad)]
    channels_last = all(a.flags.c_contiguous for a in last)
    first, second = last if channels_last else (data, grad)
    if algorithm == "blocked-planes":
        raise ValueError("blocked-planes computes data adjoints only")
    if algorithm == "blocked":
        if not blocked_applies("filter", (groups, ci, co), dtype, len(axes)):
            raise ValueError(f"blocked does not take this filter adjoint ({dtype} sums over"
                             f" {len(axes)} axes, {co} output channels per group)")
        from ._numba.blocked_filter import blocked_filter_adjoint

        result[...] = blocked_filter_adjoint(first, second, axes, groups, channels_last,
                                             dtype, target)
    elif algorithm == "depthwise" and target.numba_for(dtype, len(axes)) and dtype.itemsize >= 4:
        from ._numba.depthwise_filter import depthwise_filter_adjoint

        result[:, 0, 0] = depthwise_filter_adjoint(first, second, axes, channels_last,
                                                   dtype, target)
    elif algorithm == "depthwise":
        for tap, data_box, grad_box in tap_boxes(axes):
            values = data_g[(slice(None), slice(None), 0) + data_box]
            window = grad_g[(slice(None), slice(None), 0) + grad_box]
            product = values * window
            result[(slice(None), 0, 0) + tap] = product.reshape(n, groups, -1).sum(axis=(0, 2))
            del product  # one tap's at a time
    elif algorithm == "taps":
        for tap, data_box, grad_box in tap_boxes(axes):
            # (G, Ci, N*box) and (G, N*box, Co), contiguous so that BLAS takes them
            values = np.ascontiguousarray(np.moveaxis(data_g[(slice(None),) * 3 + data_box],
                                                      0, 2)).reshape(groups, ci, -1)
            window = np.ascontiguousarray(np.moveaxis(grad_g[(slice(None),) * 3 + grad_box],
                                                      (0, 2), (1, -1))).reshape(groups, -1, co)
            result[(slice(None),) * 3 + tap] = threaded_matmul(values, window, host().threads)
            del values, window  # one tap's at a time
    else:
        taps = math.prod(kernel)
        total = np.zeros((groups, ci, co * taps), dtype)
        # an item's columns and its contiguous data (Ci channels)
        item_bytes = groups * (co * taps + ci) * math.prod(sizes) * dtype.itemsize
        for part in _batch_slices(n, item_bytes, budget):
            cols = _im2col(grad_g[part], axes, sizes, dtype)
            values = np.ascontiguousarray(np.moveaxis(data_g[part], 0, 2)).reshape(groups, ci, -1)
            # the transposed im2col matrix is a view BLAS takes as it is (a transposed
            # operand), no copy
            total += threaded_matmul(values, cols.reshape(groups, co * taps, -1).swapaxes(1, 2),
                                     host().threads)
            del cols, values  # one slice's at a time
        result = total.reshape((groups, ci, co) + kernel)
    return result



def blocked_applies(kind: str, weights_shape: Sequence[int], dtype, rank: int) -> bool:
    """Whether ``blocked`` computes the ``kind`` ("data" or "filter") adjoint: float32
    or float64 sums over up to three axes, with numba; for the filter's, each group's
    output channels a whole number of this machine's vectors."""
    target = host()
    return (target.numba_for(dtype, rank) and np.dtype(dtype).itemsize >= 4
            and (kind == "data" or weights_shape[2] % target.lanes(dtype) == 0))


def choose(groups: int, ci: int, co: int, axes: Sequence[AxisPlan]) -> str:
    """The algorithm by rule: ``depthwise`` for one channel in and out per group,
    ``im2col`` while one batch item's matrix fits its budget, else ``taps``."""
    if ci == 1 and co == 1:
        return "depthwise"
    taps = math.prod(axis.kernel_size for axis in axes)
    item = groups * co * taps * math.prod(axis.input_size for axis in axes) * 8
    return "im2col" if item <= IM2COL_SCRATCH_BYTES else "taps"
