"""The one path from a canonical problem to its result.

:func:`transposed_convolution` takes data, canonical weights ``(G, Ci, Co, K...)``
and the per-axis plan, asks :mod:`.dispatch` for the algorithm, runs it through the
kernels' registry, and applies the epilogue: the bias, the rounding to float16 or
bfloat16 (in the kernel where the algorithm can round as it stores), and the exact
fallback when a non-finite operand meets an algorithm's own zeros.  Layers computed
again and again (a tiny ``dense`` layer, a small numba ``direct`` one) are prepared
once (:func:`prepare_call`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from .._choose.choice import choose_exact, fitting, on_threads, running_target, split_label
from .._choose.planning import planned_choice, provisional_ready
from .._kernels import ALGORITHMS, REGISTRY, prepare, resolve, run, run_rounded
from .._kernels import casts as _casts
from .._kernels.common import NonFinite, zero_output
from .._kernels.dense import DenseCall, dense_matrix
from .._kernels.direct import DirectCall
from .._plan.geometry import beyond_int64_kernels
from .._plan.problem import Problem
from .._plan.rules import AxisPlan
from .._runtime import quiet as _quiet
from .._runtime.memo import frozen, owned, owned_view
from .._runtime.memory import sums_piece_bytes
from .._runtime.target import Target, host, use_target
from . import background

__all__ = ["add_bias", "add_column", "bias_column", "kept_filter", "preparable", "prepare_call",
           "prepared_sums", "result_shape", "transposed_convolution"]


def transposed_convolution(
    data: np.ndarray,
    weights: np.ndarray,
    axes: Sequence[AxisPlan],
    *,
    dtype: np.dtype,
    channels_last: bool = False,
    bias: np.ndarray | None = None,
    algorithm: str | None = None,
    result_dtype: np.dtype | None = None,
    out: np.ndarray | None = None,
    target: Target | None = None,
) -> np.ndarray:
    """Compute the canonical transposed convolution.

    Parameters
    ----------
    data : ndarray
        ``(N, G*Ci, X...)``, or ``(N, X..., G*Ci)`` when ``channels_last``.
    weights : ndarray
        ``(G, Ci, Co, K...)`` (any strides).
    axes : sequence of AxisPlan
        One per spatial axis; gives ``X``, ``K``, stride, dilation, offset and ``Y``.
    dtype : numpy dtype
        The accumulation dtype (float64, float32 or int64); the result has it.
        Integer sums wrap around like int64 arithmetic.
    channels_last : bool
        Layout of ``data`` and of the result.
    bias : ndarray, optional
        ``(G*Co,)``, added to every output position.
    algorithm : str, optional
        One of :data:`ALGORITHMS`, to force one; by default :mod:`.planning` decides.
    result_dtype : numpy dtype, optional
        The result's dtype if not ``dtype``: the sums (and the bias) are accumulated
        in ``dtype`` and converted once, to the bits of ``result.astype(result_dtype)``
        (float16 and bfloat16 round to nearest even, integers wrap), silently (an
        overflow to infinity is the defined result, not an error).
    out : ndarray, optional
        Where to write the result: C-contiguous, of its shape and dtype, sharing no
        memory with the operands (the caller checks).
    target : Target, optional
        The machine to compute for; this one by default.

    Returns
    -------
    ndarray
        ``(N, G*Co, Y...)``, or ``(N, Y..., G*Co)`` when ``channels_last``: ``out``, or
        a fresh C-contiguous array, never a view of an input.
    """
    dtype, axes = np.dtype(dtype), tuple(axes)
    target = host() if target is None else target
    result_dtype = None if result_dtype is None or np.dtype(result_dtype) == dtype else result_dtype
    batch = data.shape[0]
    if out is None:
        out = _empty_result(batch, weights.shape, axes, channels_last, result_dtype or dtype)
    if data.size == 0 or weights.size == 0:  # before any algorithm, forced ones included
        return _nothing_to_multiply(out, bias, dtype, result_dtype, channels_last, len(axes),
                                    target)
    problem = Problem(batch, axes, weights.shape, channels_last, dtype,
                      None if result_dtype is None else np.dtype(result_dtype))
    if beyond_int64_kernels(axes):  # correctness wins over a forced algorithm
        algorithm = "direct-numpy"
    elif algorithm is None:
        choice = _planned(data, weights, problem, bias, out, target)
        algorithm, target = choice.algorithm, running_target(target, choice)
        if not choice.numba:  # helpers that ask for the host run NumPy's code too
            with use_target(target):
                return _computed(algorithm, data, weights, problem, bias, out, target)
    return _computed(algorithm, data, weights, problem, bias, out, target)


def _computed(algorithm: str, data, weights, problem: Problem, bias, out: np.ndarray,
              target: Target) -> np.ndarray:
    """``out`` filled by ``algorithm`` (the exact algorithm after it where an operand
    is not finite), the bias added, rounded to the problem's result dtype if it has
    one."""
    axes, dtype, channels_last = problem.axes, problem.dtype, problem.channels_last
    if problem.result_dtype is not None:
        return _rounded(data, weights, axes, dtype, problem.result_dtype, channels_last,
                        bias, algorithm, out, target)
    if out.size:
        # Special values arise silently whichever algorithm runs (BLAS never warns), under
        # any np.errstate of the caller; the finiteness checks may overflow.
        with np.errstate(all="ignore"):
            try:
                _compute(algorithm, data, weights, problem, out, target)
            except NonFinite:
                _compute(choose_exact(problem, target), _casts.widen(data, target), weights,
                         problem, out, target)
    if bias is not None and out.size:
        add_bias(out, bias, dtype, channels_last, len(axes))
    return out


def _nothing_to_multiply(out: np.ndarray, bias: np.ndarray | None, dtype: np.dtype,
                         result_dtype: np.dtype | None, channels_last: bool, rank: int,
                         target: Target) -> np.ndarray:
    """``out`` filled for an empty batch, channel, spatial or kernel axis: no product
    reaches it, so it holds zeros plus the bias (rounded once to ``result_dtype``)."""
    if bias is None or not out.size:
        zero_output(out, target.threads)
    elif result_dtype is None:
        zero_output(out, target.threads)
        add_bias(out, bias, dtype, channels_last, rank)
    else:
        sums = np.zeros(out.shape, dtype)
        add_bias(sums, bias, dtype, channels_last, rank)
        _casts.narrow(sums, np.dtype(result_dtype), out, target)
    return out


def add_bias(out: np.ndarray, bias: np.ndarray, dtype: np.dtype, channels_last: bool,
              rank: int) -> None:
    """``out += bias`` along the channel axis, silently (inf + -inf is NaN, as in the
    sums), whatever the caller's ``np.errstate``: how :func:`transposed_convolution`
    adds the bias to its sums in the accumulation ``dtype``, so a prepared call's sums
    (:func:`prepare_call`) plus this are its result bit for bit."""
    add_column(out, bias_column(bias, dtype, channels_last, rank))


def bias_column(bias: np.ndarray, dtype: np.dtype, channels_last: bool,
                rank: int) -> np.ndarray:
    """``bias`` in ``dtype``, shaped to broadcast along the channel axis of a result of
    ``rank`` spatial axes: what :func:`add_column` adds (a view where no cast is due)."""
    shape = (-1,) if channels_last else (-1,) + (1,) * rank
    return bias.reshape(shape) if bias.dtype == dtype else bias.astype(dtype).reshape(shape)


def add_column(out: np.ndarray, column: np.ndarray) -> None:
    """:func:`add_bias` with the bias already a :func:`bias_column` of ``out``'s
    dtype: for callers that keep one for many calls."""
    token = _quiet.silence()
    try:
        np.add(out, column, out=out)
    finally:
        _quiet.restore(token)


def result_shape(batch: int, weights_shape: tuple[int, ...], axes: tuple[AxisPlan, ...],
                  channels_last: bool) -> tuple[int, ...]:
    """``(N, G*Co, Y...)``, or ``(N, Y..., G*Co)`` when ``channels_last``."""
    channels = weights_shape[0] * weights_shape[2]
    spatial = tuple(axis.output_size for axis in axes)
    return (batch,) + spatial + (channels,) if channels_last else (batch, channels) + spatial


def _empty_result(batch: int, weights_shape: tuple[int, ...], axes: tuple[AxisPlan, ...],
                  channels_last: bool, dtype: np.dtype) -> np.ndarray:
    """The uninitialised result (:func:`result_shape`)."""
    return np.empty(result_shape(batch, weights_shape, axes, channels_last), dtype)


def _rounded(data, weights, axes, dtype, result_dtype, channels_last, bias, algorithm, out,
             target):
    """:func:`transposed_convolution` rounded once to ``result_dtype`` (into ``out``, if given).

    An algorithm that rounds as it stores (the registry's ``rounding`` entry: numba
    ``direct``'s plane and row kernels, ``direct-blocked``) writes the half-precision
    result directly, with no float32 result; every other one computes the float32
    result, rounded afterwards (:func:`convtranspose._kernels.casts.narrow`).
    """
    if (data.size and weights.size and algorithm in REGISTRY
            and _casts.rounds_in_kernels(dtype, result_dtype, target)):
        name, _ = resolve(algorithm, dtype, len(axes), channels_last, target, axes)
        if REGISTRY[name].rounding is not None:
            if out is None:
                out = _empty_result(data.shape[0], weights.shape, axes, channels_last,
                                    result_dtype)
            if run_rounded(name, data, weights, axes, dtype, channels_last, out, bias, target):
                return out
    shape = result_shape(data.shape[0], weights.shape, axes, channels_last)
    elements = math.prod(shape)
    if elements * dtype.itemsize > sums_piece_bytes(elements * result_dtype.itemsize):
        return _rounded_in_pieces(data, weights, axes, dtype, result_dtype, channels_last, bias,
                                  algorithm, out, target)
    # Half-precision data is widened once: the kernels' own copies would each cast it
    # with NumPy's slower loops.
    result = transposed_convolution(_casts.widen(data, target), weights, axes, dtype=dtype,
                                    channels_last=channels_last, bias=bias,
                                    algorithm=algorithm, target=target)
    return _casts.narrow(result, result_dtype, out, target)


def _rounded_in_pieces(data, weights, axes, dtype, result_dtype, channels_last, bias,
                       algorithm, out, target):
    """:func:`_rounded` a few samples, or rows of the first spatial axis, at a time, so
    that the wider sums never take more than :func:`sums_piece_bytes` (an int8 result's
    int64 sums would take 8 times the result at once)."""
    batch = data.shape[0]
    shape = result_shape(batch, weights.shape, axes, channels_last)
    if out is None:
        out = np.empty(shape, result_dtype)
    piece = sums_piece_bytes(out.nbytes)
    per_sample = math.prod(shape[1:]) * dtype.itemsize
    if per_sample <= piece:
        step = piece // per_sample
        for first in range(0, batch, step):
            part = transposed_convolution(
                _casts.widen(data[first:first + step], target), weights, axes, dtype=dtype,
                channels_last=channels_last, bias=bias, algorithm=algorithm, target=target)
            _casts.narrow(part, result_dtype, out[first:first + step], target)
        return out
    rows = axes[0].output_size
    step = max(1, piece // (per_sample // rows))
    for n in range(batch):
        sample = _casts.widen(data[n:n + 1], target)
        for first in range(0, rows, step):
            size = min(step, rows - first)
            # Rows [first, first + size) of the first axis: the same axis cropped later.
            lead = dataclasses.replace(axes[0], offset=axes[0].offset + first, output_size=size)
            part = transposed_convolution(
                sample, weights, (lead,) + tuple(axes[1:]), dtype=dtype,
                channels_last=channels_last, bias=bias, algorithm=algorithm, target=target)
            rows_of = (slice(n, n + 1), slice(first, first + size)) if channels_last else (
                slice(n, n + 1), slice(None), slice(first, first + size))
            view = out[rows_of]
            if view.flags.c_contiguous:
                _casts.narrow(part, result_dtype, view, target)
            else:
                np.copyto(view, _casts.narrow(part, result_dtype, None, target))
    return out


def _planned(data, weights, problem: Problem, bias, out, target):
    """The choice measured planning gives this problem (:mod:`.planning`); when it
    measures, each candidate computes the whole call (bias and rounding included) into
    ``out``, which the winner then fills once more.  A candidate may be timed on fewer
    threads than ``target``'s (its :func:`~convtranspose._choose.choice.timed_label`).
    A candidate that repeated calls run prepared is timed prepared (:func:`_timed_call`)."""
    prepared: dict = {}

    def run(label):
        name, threads = split_label(label)
        on = on_threads(target, threads)
        if label not in prepared:
            prepared[label] = _timed_call(name, data, weights, problem, out, on)
        compute = prepared[label]
        if compute is None:
            transposed_convolution(data, weights, problem.axes, dtype=problem.dtype,
                                   channels_last=problem.channels_last, bias=bias,
                                   algorithm=name, result_dtype=problem.result_dtype,
                                   out=out, target=on)
            return
        compute(data, out)
        if bias is not None:
            add_bias(out, bias, problem.dtype, problem.channels_last, len(problem.axes))

    def finite():
        return all(array is None or array.dtype.kind not in "fc"
                   or bool(np.isfinite(array).all()) for array in (data, weights, bias))

    def warm(names):
        return background.compile_elsewhere(names, data, weights, bias, problem, target)

    return planned_choice(problem, target, run=run, finite=finite,
                          warm=warm if target.numba and background.available() else None)


def _timed_call(name: str, data, weights, problem: Problem, out, target):
    """``compute(data, out)`` of candidate ``name`` prepared for this layer, as
    :func:`prepare_call` sets up the repeated calls of the functional API and of
    prepared layers (a :class:`DenseCall`, or the registry's ``prepare`` entry: the
    one-time work done), or None where those calls would not run it prepared: planning
    then times the function path.  Timing the function path instead made planning
    choose by fixed costs that repeated calls skip, and those differ between
    candidates: timing one candidate prepared and another not chose ``col2im-ncx``
    (75-93 us per call) over ``dense`` (4-7 us) for a tiny layer on an AMD Zen 3."""
    axes, dtype = problem.axes, problem.dtype
    if (problem.result_dtype is not None or not preparable(data.dtype, weights.dtype)
            or data.dtype != dtype or not out.flags.c_contiguous
            or weights.nbytes > PREPARED_MAX_FILTER_BYTES and not owned(_root(weights))):
        return None  # repeated calls of the functional API run the general path
    resolved, _ = resolve(name, dtype, len(axes), problem.channels_last, target, axes)
    if resolved == "dense":
        shape = result_shape(problem.batch, weights.shape, axes, problem.channels_last)
        call = _dense_call(weights, weights, axes, dtype, problem.channels_last, shape)
        return lambda data, out: call(data, weights, out)
    if REGISTRY[resolved].prepare is None or fitting(resolved, problem, target) != resolved:
        return None
    return prepare(resolved, problem.batch, weights, axes, dtype, problem.channels_last,
                   target)


class ProvisionalCall:
    """A prepared call of a provisional choice (:func:`prepare_call`), declining (None,
    as a prepared call does when it cannot vouch for its result) from the moment
    ``ready()`` says planning measures again (the other candidates' kernels, or the
    best-ranked of them, are compiled): each call asks it (a lock and a poll of the
    background process), and the caller's general path then measures.  A tiny layer's
    call while they compile took 130-150 us through planning on every call on an AMD
    EPYC Zen 2, 6.9 us through this one
    (``benchmarks/results/provisional-calls-zen2.json``)."""

    __slots__ = ("_call", "_ready")

    def __init__(self, call, ready: Callable[[], bool]) -> None:
        self._call, self._ready = call, ready

    def tells_by_identity(self, filter: np.ndarray) -> bool:
        return self._call.tells_by_identity(filter)

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        return None if self._ready() else self._call(data, filter, out)


def _dense_call(filter, weights, axes, dtype, channels_last: bool, shape) -> DenseCall:
    """The :class:`DenseCall` of a layer whose canonical filter is ``weights`` (of the
    caller's ``filter``), giving a result of ``shape``."""
    matrix = dense_matrix(weights, axes, dtype, channels_last, math.prod(shape[1:]))
    return DenseCall(filter, matrix, shape, dtype)


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (``array`` itself if not a view)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _compute(algorithm, data, weights, problem: Problem, out, target):
    """Fill ``out`` with ``algorithm``, or the fallback the registry names where one of its
    requirements is missing on ``target`` (:func:`convtranspose._kernels.resolve`).

    Raises :class:`NonFinite` when an operand may not be finite and the algorithm
    would multiply it by a zero of its own (``out`` may hold anything then: the exact
    algorithm that follows writes every element).
    """
    if algorithm not in REGISTRY:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    axes, dtype, channels_last = problem.axes, problem.dtype, problem.channels_last
    name, _ = resolve(algorithm, dtype, len(axes), channels_last, target, axes)
    # Scratch stays within the bound of kernels.scratch, forced algorithms included.
    fitted = fitting(name, problem, target)
    if fitted != name:
        name, _ = resolve(fitted, dtype, len(axes), channels_last, target, axes)
    run(name, data, weights, axes, dtype, channels_last, out, target)


#: Filters of at most this many bytes are kept by a :class:`DirectCall`, which
#: compares them with the caller's in every call (as the filter memo does anyway); a
#: prepared layer's own filter is told by identity, whatever its size.
PREPARED_MAX_FILTER_BYTES = 1 << 20


def preparable(data_dtype: np.dtype, filter_dtype: np.dtype) -> bool:
    """Whether layers of these operand dtypes may get a prepared call
    (:func:`prepare_call`): native float32 or float64, both the same (no rounding
    afterwards)."""
    return data_dtype in _PREPARED_DTYPES and filter_dtype == data_dtype


#: The dtypes of :func:`preparable` layers (``np.dtype`` equality: native order only).
_PREPARED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def prepare_call(data: np.ndarray, filter: np.ndarray,
                 canonical: Callable[[np.ndarray], np.ndarray], axes: tuple[AxisPlan, ...],
                 channels_last: bool, target: Target | None = None):
    """A :class:`DenseCall` or :class:`DirectCall` for this layer, or None.

    ``filter`` is the caller's filter and ``canonical`` gives the ``(G, Ci, Co, K...)``
    view of a filter of its layout.  The call is set up from a copy of the filter (a
    prepared layer's own filter, or a view of it, as it is), which it compares the
    caller's with on every call unless it is that very object: nothing it keeps is a
    view of an array the caller may edit.
    Only float32 and float64 layers (no rounding afterwards) qualify, that planning
    gives to ``dense`` or to an algorithm with a ``prepare`` entry in the registry
    (:func:`convtranspose._kernels.prepare`; numba ``direct`` and ``depthwise`` only
    with a finite filter), within the scratch bound, the latter with a
    filter of at most :data:`PREPARED_MAX_FILTER_BYTES` or a prepared layer's own (or a
    view of it).
    For a provisional choice (other candidates' kernels compiling elsewhere,
    :mod:`convtranspose._choose.planning`) only ``dense``, which compiles nothing, as a
    :class:`ProvisionalCall`: it declines once planning would measure again, and the
    call that then goes through planning does.  None for the others:
    their calls go through planning until then.
    """
    dtype = data.dtype
    if not preparable(dtype, filter.dtype):
        return None
    if beyond_int64_kernels(axes):
        return None
    target = host() if target is None else target
    batch = data.shape[0]
    weights = canonical(filter)
    problem = Problem(batch, axes, weights.shape, channels_last, dtype)
    choice = planned_choice(problem, target)
    runs, run_target = choice.runs, on_threads(target, choice.threads)
    shape = result_shape(batch, weights.shape, axes, channels_last)
    if choice.decided_by == "provisional":
        ready = provisional_ready(problem, target) if runs == "dense" else None
        return None if ready is None else ProvisionalCall(
            _dense_call(filter, weights, axes, dtype, channels_last, shape), ready)
    return prepared_sums(runs, problem, filter, canonical, run_target, target)


def prepared_sums(name: str, problem: Problem, filter: np.ndarray,
                  canonical: Callable[[np.ndarray], np.ndarray], run_target: Target,
                  target: Target) -> DenseCall | DirectCall | None:
    """The :class:`DenseCall` or :class:`DirectCall` of :func:`prepare_call` for the
    bias-free ``problem`` (no result dtype) computed by algorithm ``name`` (resolved) on
    ``run_target``, planned for ``target``; None as :func:`prepare_call` says."""
    batch, axes, dtype, channels_last = (problem.batch, problem.axes, problem.dtype,
                                         problem.channels_last)
    weights = canonical(filter)
    shape = result_shape(batch, weights.shape, axes, channels_last)
    if name == "dense":
        return _dense_call(filter, weights, axes, dtype, channels_last, shape)
    if fitting(name, problem, target) != name:
        return None
    kept = kept_filter(filter)
    if kept is None:
        return None
    compute = prepare(name, batch, canonical(kept), axes, dtype, channels_last, run_target)
    # The call is checked against the machine it was planned for (its kernels run on
    # the plan's threads).
    return None if compute is None else DirectCall(kept, compute, shape, dtype, target)


def kept_filter(filter: np.ndarray) -> np.ndarray | None:
    """The filter a :class:`DirectCall` is set up from and compares the caller's with:
    a prepared layer's own filter (or a view of it) as it is, a read-only copy of any
    other of at most :data:`PREPARED_MAX_FILTER_BYTES`; None for a larger one."""
    if owned_view(filter):
        return filter
    if filter.nbytes > PREPARED_MAX_FILTER_BYTES:
        return None
    return frozen(np.array(filter, copy=True, order="K"))
