"""Prepared calls of float16 and bfloat16 layers, each with its own bias.

:func:`~.transposed.transposed_convolution` computes a half-precision layer in float32
and rounds once (:func:`~.transposed._rounded`): numba ``direct`` and ``direct-blocked``
round the sums plus the bias as they store them; every other algorithm (and ``direct``
where its kernel does not round) computes the float32 result of the widened data, adds
the bias and rounds it.  :func:`prepare_rounded_call` sets either way up once for a
prepared layer (and for the array functions' calls), so that its repeated
calls skip planning and the kernels' set-up, as float32 layers' do
(:func:`~.transposed.prepare_call`): a 16->8 8x8 layer's prepared call took 69 us in
float16 and 92 in bfloat16 through the general path, 21 and 14 us prepared, on an AMD
EPYC Zen 4 (``benchmarks/results/prepared-half-zen4.json``).  The array functions
and Dask's tiles keep one call without a bias and one prepared with the bias they are
called with (:class:`BiasedCall`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._choose.choice import fitting, running_target
from .._choose.planning import planned_choice
from .._kernels import REGISTRY, prepare_rounded, resolve
from .._kernels import casts as _casts
from .._kernels.direct import DirectCall
from .._plan.geometry import beyond_int64_kernels
from .._plan.problem import Problem
from .._plan.rules import AxisPlan
from .._runtime.memory import sums_piece_bytes
from .._runtime.target import Target, host
from .transposed import (
    add_bias,
    add_column,
    bias_column,
    kept_filter,
    preparable,
    prepare_call,
    prepared_sums,
    result_shape,
)

__all__ = ["BiasedCall", "WidenedCall", "half_preparable", "kept_result", "prepare_kept_call",
           "prepare_rounded_call"]


def half_preparable(data_dtype: np.dtype, filter_dtype: np.dtype) -> bool:
    """Whether layers of these operand dtypes may get a :func:`prepare_rounded_call`:
    float16 or bfloat16 (``ml_dtypes``' type, known by its name) in native order, both
    the same."""
    return (data_dtype.isnative and data_dtype.name in ("float16", "bfloat16")
            and filter_dtype == data_dtype)


class WidenedCall:
    """A half-precision layer whose algorithm does not round as it stores: the float32
    prepared call (a :class:`~convtranspose._kernels.dense.DenseCall` or
    :class:`DirectCall` on the layer's filter) on the widened data, the bias column
    added, the sums rounded once, as the general path does; None where the float32
    call declines."""

    __slots__ = ("_sums", "_column", "_dtype", "_target")

    def __init__(self, sums, column: np.ndarray | None, dtype: np.dtype, target: Target):
        self._sums, self._column, self._dtype, self._target = sums, column, dtype, target

    def tells_by_identity(self, filter: np.ndarray) -> bool:
        return self._sums.tells_by_identity(filter)

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        sums = self._sums(_casts.widen(data, self._target), filter)
        if sums is None:
            return None
        if self._column is not None:
            add_column(sums, self._column)
        return _casts.narrow(sums, self._dtype, out, self._target)


def prepare_rounded_call(data: np.ndarray, filter: np.ndarray, bias: np.ndarray | None,
                         canonical: Callable[[np.ndarray], np.ndarray],
                         axes: tuple[AxisPlan, ...], channels_last: bool,
                         target: Target | None = None) -> DirectCall | WidenedCall | None:
    """The prepared call of a float16 or bfloat16 layer (data, filter and bias of one
    such dtype) with ``bias``, or None: what
    :func:`~.transposed.transposed_convolution` computes for it.

    A :class:`DirectCall` where the algorithm rounds as it stores (the registry's
    ``prepare_rounding``), else a :class:`WidenedCall`.  The bias is part of the call,
    so it serves one layer's own bias: a prepared layer's, which nobody can write.  The
    filter is kept as :func:`~.transposed.prepare_call` keeps it, and the same layers
    qualify; None also where the general path would compute the float32 sums in pieces
    (they would exceed :func:`~convtranspose._runtime.memory.sums_piece_bytes`) or
    planning is provisional: those calls go through the general path.
    """
    result_dtype = data.dtype
    if (not half_preparable(result_dtype, filter.dtype)
            or (bias is not None and bias.dtype != result_dtype)
            or not data.size or not filter.size or beyond_int64_kernels(axes)):
        return None
    target = host() if target is None else target
    dtype, batch, weights = np.dtype(np.float32), data.shape[0], canonical(filter)
    choice = planned_choice(Problem(batch, axes, weights.shape, channels_last, dtype,
                                    result_dtype), target)
    if choice.decided_by == "provisional":
        return None
    run_target = running_target(target, choice)
    name, _ = resolve(choice.algorithm, dtype, len(axes), channels_last, run_target, axes)
    rounding = (REGISTRY[name].rounding is not None
                and _casts.rounds_in_kernels(dtype, result_dtype, run_target))
    if rounding:
        kept = kept_filter(filter)
        if kept is None:
            return None
        compute = prepare_rounded(name, batch, canonical(kept), axes, dtype, channels_last,
                                  result_dtype, result_dtype, bias, run_target)
        if compute is not None:
            shape = result_shape(batch, weights.shape, axes, channels_last)
            return DirectCall(kept, compute, shape, result_dtype, target)
        # Declined as the general path's rounding function declines every call of the
        # layer (a kernel that does not round, a filter that may not be finite): that
        # path then widens, as below.
    elements = math.prod(result_shape(batch, weights.shape, axes, channels_last))
    if elements * dtype.itemsize > sums_piece_bytes(elements * result_dtype.itemsize):
        return None
    # The float32 sums' algorithm as the general path's call of it runs it: within the
    # scratch bound (a forced `dense` of a large layer runs another).
    sums_problem = Problem(batch, axes, weights.shape, channels_last, dtype)
    fitted = fitting(name, sums_problem, run_target)
    if fitted != name:
        name, _ = resolve(fitted, dtype, len(axes), channels_last, run_target, axes)
    sums = prepared_sums(name, sums_problem, filter, canonical, run_target, target)
    column = None if bias is None else bias_column(bias, dtype, channels_last, len(axes))
    return None if sums is None else WidenedCall(sums, column, result_dtype, run_target)


class BiasedCall:
    """A half-precision layer's prepared call with a bias (the array functions' calls
    with one): ``call(data, filter, out, bias)`` is the rounded result of the sums plus
    ``bias`` while ``bias`` holds the bits the call was prepared with (the rounding
    kernels take it in at their set-up; a bias is one value per output channel, so the
    comparison costs about a microsecond), else None (another bias: prepared again)."""

    __slots__ = ("_call", "_bits")

    def __init__(self, call: DirectCall | WidenedCall, bias: np.ndarray):
        self._call, self._bits = call, bias.tobytes()

    def tells_by_identity(self, filter: np.ndarray) -> bool:
        return self._call.tells_by_identity(filter)

    def __call__(self, data: np.ndarray, filter: np.ndarray, out: np.ndarray | None,
                 bias: np.ndarray | None) -> np.ndarray | None:
        if bias is None or bias.tobytes() != self._bits:
            return None
        return self._call(data, filter, out)


def kept_result(call, data: np.ndarray, filter: np.ndarray, out: np.ndarray | None,
                bias: np.ndarray | None, channels_last: bool, rank: int) -> np.ndarray | None:
    """The result of a call the array functions (or Dask's tiles) keep
    (:func:`prepare_kept_call`), with ``bias``: given to a :class:`BiasedCall`, which
    rounds the sums plus the bias, else added to the call's sums as
    :func:`~.transposed.transposed_convolution` adds it; None where the call declines."""
    if type(call) is BiasedCall:
        return call(data, filter, out, bias)
    result = call(data, filter, out)
    if result is not None and bias is not None and result.size:
        add_bias(result, bias, result.dtype, channels_last, rank)
    return result


def prepare_kept_call(data: np.ndarray, filter: np.ndarray, bias: np.ndarray | None,
                      canonical: Callable[[np.ndarray], np.ndarray],
                      axes: tuple[AxisPlan, ...], channels_last: bool):
    """The prepared call that the array functions and Dask's tiles keep for a layer of
    these operands, run by :func:`kept_result`: :func:`~.transposed.prepare_call`'s
    for float32 and float64 (its sums, a bias added to them afterwards); for float16
    and bfloat16 :func:`prepare_rounded_call`'s, without a bias or, since a bias joins
    the sums before the rounding, a :class:`BiasedCall` prepared with ``bias``."""
    if preparable(data.dtype, filter.dtype):
        return prepare_call(data, filter, canonical, axes, channels_last)
    call = prepare_rounded_call(data, filter, bias, canonical, axes, channels_last)
    return call if call is None or bias is None else BiasedCall(call, bias)
