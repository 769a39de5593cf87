"""Numba ``direct``'s per-position kernel, for channels-last layers of many small groups.

Per output position, up to four taps per pass over the channel vector, written straight
into the output; compiled per (Ci, Co) so that the channel loops vectorise (depthwise
layers: in explicit vectors, :mod:`.vectors`).
"""

from __future__ import annotations

import numpy as np

from ..._plan.geometry import axis_phases
from ..._plan.rules import AxisPlan
from ..._runtime.caches import kept
from ..schedules import frozen_all
from .kernel_cache import cached_njit
from .launch import array_kind, parallel_kernel


@cached_njit(nogil=True, inline="always")
def gather_row_taps(found, j1, j2, p1, p2, tap_shift, tap_count, size1,
                    size2):  # pragma: no cover - compiled
    """The taps of the first two axes that read inside the input for output row ``(j1,
    j2)`` of phases ``(p1, p2)``: ``found[r] = (x1, x2, m1, m2)``; returns their count."""
    rows = 0
    for m1 in range(tap_count[0, p1]):
        x1 = j1 + tap_shift[0, p1, m1]
        if x1 < 0 or x1 >= size1:
            continue
        for m2 in range(tap_count[1, p2]):
            x2 = j2 + tap_shift[1, p2, m2]
            if x2 < 0 or x2 >= size2:
                continue
            found[rows, 0], found[rows, 1], found[rows, 2], found[rows, 3] = x1, x2, m1, m2
            rows += 1
    return rows


@kept("compiled kernels", maxsize=None)
def channels_last_kernel(ci: int, co: int, lanes: int):
    """The channels-last kernel compiled for ``Ci = ci`` and ``Co = co`` (constants).

    Constant channel counts let LLVM unroll the per-group channel loops and
    vectorise over the groups with constant strides (about 5x faster than run-time
    ones).  ``ci = co = 0`` compiles one kernel reading them at run time, for
    shapes outside the range :func:`~convtranspose._kernels.schedules.direct_per_position`
    sends here (more than 4 products per group).
    Depthwise layers (``ci = co = 1``) sum their taps in vectors of ``lanes``
    elements (:mod:`convtranspose._kernels._numba.vectors`), four taps per pass over the channels.
    """
    from .codegen import compile_template
    from .vectors import vector_fma, vector_load, vector_store, vector_zero

    constant = ci > 0
    ci_constant = np.uint64(ci)
    co_constant = np.uint64(co)
    depthwise = ci == 1 and co == 1
    one = np.uint64(1)
    step = np.uint64(lanes)

    return compile_template("channels_last", dict(
        np=np, gather_row_taps=gather_row_taps, vector_fma=vector_fma, vector_load=vector_load,
        vector_store=vector_store, vector_zero=vector_zero, constant=constant,
        ci_constant=ci_constant, co_constant=co_constant, depthwise=depthwise, one=one,
        step=step, lanes=lanes,
    ))["kernel"]


@kept("kernel schedules", maxsize=256)
def _row_tables(axes3: tuple[AxisPlan, ...], groups: int, ci: int, co: int):
    """Tables of :func:`channels_last_kernel` (cached per shape; read-only).

    Per axis and phase: the tap count, each tap's input shift and its flat weight
    index ``((k1 * K2 + k2) * K3 + k3) * Ci * Co * G`` (summed over the axes).
    """
    phases = [axis_phases(axis) for axis in axes3]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    # Phases are ``y mod stride`` of outputs ``y < Y``: a stride past Y needs Y rows.
    stride_max = max(min(axis.stride, axis.output_size) for axis in axes3)
    kernel3 = tuple(a.kernel_size for a in axes3)
    scale = (kernel3[1] * kernel3[2] * ci * co * groups, kernel3[2] * ci * co * groups,
             ci * co * groups)
    tap_k = np.zeros((3, stride_max, widest), np.int64)
    tap_shift = np.zeros((3, stride_max, widest), np.int64)
    tap_count = np.zeros((3, stride_max), np.int64)
    for a, p in enumerate(phases):
        for c in p.classes:
            for i in range(c.count):
                phase = c.first + i
                tap_count[a, phase] = len(c.shifts)
                for m, (shift, k) in enumerate(zip(c.shifts, c.taps[i])):
                    tap_k[a, phase, m] = k * scale[a]
                    tap_shift[a, phase, m] = shift
    sizes = np.array((groups, ci, co) + tuple(a.input_size for a in axes3)
                     + tuple(a.output_size for a in axes3), np.int64)
    strides = np.array([a.stride for a in axes3], np.int64)
    return frozen_all(sizes, strides, tap_k, tap_shift, tap_count)


def _position_weights(weights, kernel3, dtype, derived) -> np.ndarray:
    """The weights as ``(K1, K2, K3, Ci, Co, G)``, flat and read-only, kept in ``derived``
    (the filter's memo; None: reordered anew): reordering a depthwise filter of 1024
    channels and 7x7 taps took about a tenth of its call (0.04 of 0.4 ms, Intel Xeon)."""
    key = ("per-position", np.dtype(dtype).str)
    w = None if derived is None else derived.get(key)
    if w is None:
        groups, ci, co = weights.shape[:3]
        w = np.ascontiguousarray(np.moveaxis(weights.reshape((groups, ci, co) + kernel3), 0, -1)
                                 .transpose(2, 3, 4, 0, 1, 5), dtype).reshape(-1)
        w = frozen_all(w)[0]
        if derived is not None:
            derived[key] = w
    return w


def direct_channels_last(data, weights, axes3, dtype, out, target, threads, derived=None):
    """The per-position kernel over every output position, into ``out`` (C-contiguous);
    ``derived``: the filter's memo, where the reordered weights are kept."""
    if data.dtype != dtype or not data.flags.c_contiguous:
        data = np.ascontiguousarray(data, dtype)
    run = channels_last_runner(data.shape[0], weights, axes3, dtype, target, threads, derived)
    run(data.reshape(-1), out.reshape(-1))


def channels_last_runner(batch, weights, axes3, dtype, target, threads, derived):
    """``run(source, result)``: the per-position kernel over flat C-contiguous data of
    ``dtype`` into the flat result, with everything but the data prepared: the tables,
    the reordered weights (kept in ``derived``, the filter's memo; None: reordered
    anew), the kernel and its code addresses."""
    groups, ci, co = weights.shape[:3]
    tables = _row_tables(axes3, groups, ci, co)
    w = _position_weights(weights, tuple(a.kernel_size for a in axes3), dtype, derived)
    lanes = target.lanes(dtype)
    kernel = channels_last_kernel(ci, co, lanes) if ci * co <= 4 else channels_last_kernel(
        0, 0, lanes)
    count = batch * axes3[0].output_size * axes3[1].output_size
    addresses: dict = {}

    def run(source, result):
        # Only the data and the result vary in type from call to call.
        kept = (addresses, (array_kind(source), array_kind(result)))
        parallel_kernel(kernel, (source, w, result, *tables), count, threads, kept=kept)

    return run
