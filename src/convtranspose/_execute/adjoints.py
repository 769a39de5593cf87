"""The adjoints of the canonical problem with the dtype, layout and special-value rules
of :func:`convtranspose._execute.transposed.transposed_convolution` around the kernels of
:mod:`convtranspose._kernels.adjoints`.

Sums accumulate in the dtype the transposed convolution uses (float64, float32 for
float32/float16/bfloat16, int64 for integers) and are converted once to the element
type.  Operands holding infinities or NaNs never go to ``im2col``, whose gathered zeros
would multiply them (``0 * inf`` is NaN where the exact sum has no such term).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from .._choose import planning as _planning
from .._choose.planning import choice_settled, get_planning, measured_choice, problem_key
from .._dtypes import accumulation_dtype
from .._errors import ConvTransposeError
from .._kernels import adjoints as _kernels
from .._kernels.scratch import adjoint_fits, adjoint_scratch_bytes, im2col_budget
from .._plan.problem import Problem
from .._plan.rules import AxisPlan
from .._runtime import blas as _blas
from .._runtime import caches as _caches
from .._runtime.caches import kept
from .._runtime.config import (
    BACKWARD_ALGORITHM_ENV,
    NO_BLAS_ENV,
    NO_NUMBA_ENV,
    switch,
    switches_reader,
)
from .._runtime.memo import derived_from, keeps_derived, owned_view
from .._runtime.target import host, host_state
from . import background
from .transposed import preparable, prepare_call, transposed_convolution

__all__ = ["BACKWARD_ALGORITHM_ENV", "adjoint_candidates", "adjoint_scratch", "as_transposed",
           "data_adjoint_options", "kept_data_adjoint",
           "bias_adjoint", "data_adjoint", "filter_adjoint", "transposed_axes",
           "transposed_weights_shape"]



def adjoint_candidates(kind: str, batch: int, weights_shape: Sequence[int],
                       axes: Sequence[AxisPlan], dtype) -> list[str]:
    """The adjoint algorithms that may compute the ``kind`` ("data" or "filter") adjoint:
    those that apply (``depthwise`` for one channel in and out per group, ``blocked``
    where :func:`~convtranspose._kernels.adjoints.blocked_applies`) and whose
    scratch is within the bound (:func:`~convtranspose._kernels.scratch.adjoint_fits`;
    ``taps`` always is).  Kept per problem and machine: the scratch estimates took a
    fifth of a small strided forward convolution's call."""
    return list(_candidates(kind, batch, tuple(weights_shape), tuple(axes), np.dtype(dtype),
                            host(), _kernels.IM2COL_SCRATCH_BYTES))


@kept("scratch estimates", maxsize=256)
def _candidates(kind, batch, weights_shape, axes, dtype, target,
                im2col_bytes) -> tuple[str, ...]:
    """:func:`adjoint_candidates` on this ``target`` (the host) and ``im2col`` budget
    (parts of the key only: the estimates read both themselves)."""
    groups, ci, co = weights_shape[:3]
    return tuple(name for name in _kernels.ALGORITHMS
                 if (name != "depthwise" or (ci == 1 and co == 1))
                 and (not name.startswith("blocked") or (
                     _kernels.blocked_applies(kind, weights_shape, dtype, len(axes))
                     and (name == "blocked" or kind == "data")))  # planes: data only
                 and adjoint_fits(kind, name, batch, axes, weights_shape, dtype))


def _preset(kind, batch, weights_shape, axes, dtype, candidates) -> str | None:
    """The algorithm decided without measuring: the forced one where it is a candidate,
    else at the ``estimate`` planning level the kernels' rule (``taps`` where the rule's
    pick is not a candidate); None when measured planning decides among the candidates."""
    forced = switch(BACKWARD_ALGORITHM_ENV).strip()
    if forced:
        if forced not in _kernels.ALGORITHMS:
            raise ConvTransposeError(f"{BACKWARD_ALGORITHM_ENV}={forced!r} is not one of"
                                     f" {_kernels.ALGORITHMS} (or unset)")
        if forced in candidates:
            return forced
    if get_planning() != "estimate" and len(candidates) > 1:
        return None
    return _rule_pick(weights_shape, axes, candidates)


def _rule_pick(weights_shape, axes, candidates) -> str:
    """The kernels' rule's algorithm (:func:`convtranspose._kernels.adjoints.choose`)
    where it is among ``candidates``, else ``taps`` (which always is)."""
    default = _kernels.choose(*tuple(weights_shape)[:3], axes)
    return default if default in candidates else "taps"


def data_adjoint_options(batch: int, weights_shape: Sequence[int], axes: Sequence[AxisPlan],
                         dtype) -> tuple[tuple[str, ...], str | None, str]:
    """``(candidates, preset, rule)`` of a strided data adjoint with finite operands:
    the algorithms that may compute it (:func:`adjoint_candidates`), the one decided
    without measuring (the forced one, or the rule's at the ``estimate`` level; None
    when measured planning decides), and the kernels' rule's pick, which runs until
    measured planning has timed the candidates (``ct.explain`` reports them)."""
    candidates = tuple(adjoint_candidates("data", batch, weights_shape, axes, dtype))
    return (candidates, _preset("data", batch, weights_shape, axes, dtype, candidates),
            _rule_pick(weights_shape, axes, candidates))


def adjoint_scratch(kind: str, batch: int, weights_shape: Sequence[int],
                    axes: Sequence[AxisPlan], dtype) -> int:
    """The most scratch the ``kind`` adjoint may take: the largest estimate among the
    algorithms that may run, the decided one (:func:`_preset`) and ``taps`` (which
    replaces ``im2col`` on operands that are not finite), or every candidate where
    measured planning times them."""
    candidates = adjoint_candidates(kind, batch, weights_shape, axes, dtype)
    preset = _preset(kind, batch, weights_shape, axes, dtype, candidates)
    names = candidates if preset is None else {preset, "taps"}
    return max(adjoint_scratch_bytes(kind, name, batch, axes, weights_shape, dtype)
               for name in names)


def as_transposed(axes: Sequence[AxisPlan]) -> bool:
    """Whether :func:`data_adjoint` computes these axes as a transposed convolution
    (every stride 1, no adjoint algorithm forced)."""
    return all(axis.stride == 1 for axis in axes) and not switch(BACKWARD_ALGORITHM_ENV).strip()


def _widened(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return array if array.dtype == dtype else array.astype(dtype)


def _finite(*arrays: np.ndarray) -> bool:
    return all(a.dtype.kind not in "fc" or bool(np.isfinite(a).all()) for a in arrays)


def _finite_filter(memo: dict, weights: np.ndarray) -> bool:
    """Whether ``weights`` are all finite, kept in ``memo`` (the dict the weights memo
    keeps for these bits): the check reads the whole filter (0.9 ms for 8 MiB, more than
    the memo's comparison, ``benchmarks/results/gradients-xeon.json``,
    ``finite_filter_kept``)."""
    finite = memo.get("finite")
    if finite is None:
        finite = memo["finite"] = _finite(weights)
    return finite


def _algorithm(kind, batch, weights_shape, axes, dtype, exact_needed, run,
               warm=None) -> tuple[str, bool]:
    """The ``kind`` ("data" or "filter") adjoint's algorithm among
    :func:`adjoint_candidates`, and whether that pick is final (not a provisional one
    while kernels compile): the forced one where it may run, else measured
    planning's pick (:func:`convtranspose._choose.planning.measured_choice`), the kernels' rule
    deciding at ``estimate``.  ``im2col`` never runs on operands that are not finite (its
    gathered zeros would multiply them), forced or not: such calls take the rule's pick
    among the others, ``blocked`` before ``taps``, and never measure, so that what
    planning decided and keeps for the problem (its finite operands) stays as it is."""
    candidates = [name for name in adjoint_candidates(kind, batch, weights_shape, axes, dtype)
                  if name != "im2col" or not exact_needed]
    preset = _preset(kind, batch, weights_shape, axes, dtype, candidates)
    if preset is not None:
        return preset, True
    default = _kernels.choose(*weights_shape[:3], axes)
    if exact_needed:
        return (default if default in candidates else (
            "blocked" if "blocked" in candidates else "taps")), True
    key = problem_key(Problem(batch, axes, weights_shape, False, np.dtype(dtype)), host())
    # wisdom names the computations "data-adjoint" and "filter-adjoint"
    name = measured_choice(f"{kind}-adjoint", key, candidates, run,
                           _rule_pick(weights_shape, axes, candidates), warm)
    return name, choice_settled(f"{kind}-adjoint", key)


def _warm(kind: str, first: np.ndarray, second: np.ndarray, axes, groups: int, dtype):
    """``warm(names)`` for measured planning (:func:`_algorithm`): the adjoint kernels
    of ``names`` compiled in the background process, where there is one."""
    target = host()
    if not (target.numba and background.available()):
        return None
    return lambda names: background.compile_adjoint_elsewhere(kind, names, first, second,
                                                              axes, groups, dtype, target)


def _channels_first(array: np.ndarray, channels_last: bool) -> np.ndarray:
    return np.moveaxis(array, -1, 1) if channels_last else array


def _finished(result: np.ndarray, channels_last: bool, dtype: np.dtype) -> np.ndarray:
    """``result`` (accumulated, channels first) in the caller's layout and element type,
    C-contiguous and never a view of an operand."""
    if channels_last:
        result = np.moveaxis(result, 1, -1)
    if result.dtype != dtype:
        with np.errstate(all="ignore"):
            return np.ascontiguousarray(result.astype(dtype))
    return np.ascontiguousarray(result)


def data_adjoint(grad: np.ndarray, weights: np.ndarray, axes: Sequence[AxisPlan], *,
                 channels_last: bool, dtype: np.dtype) -> np.ndarray:
    """The data gradient of the canonical problem (a forward convolution of ``grad``).

    A layer's later calls (float32 or float64, the operands of one shape and layout)
    run the prepared call its first call kept (:data:`_prepared_calls`) while the
    planning generation holds: with the weights of the same bits, nothing is chosen,
    packed or set up again.

    Parameters
    ----------
    grad : ndarray
        Shaped like the transposed convolution's result: ``(N, G*Co, Y...)``, or
        ``(N, Y..., G*Co)`` when ``channels_last``.
    weights : ndarray
        ``(G, Ci, Co, K...)``, any strides.
    axes : sequence of AxisPlan
    channels_last : bool
    dtype : numpy dtype
        The element type of the operands and of the result.

    Returns
    -------
    ndarray
        Shaped like the data: ``(N, G*Ci, X...)`` or ``(N, X..., G*Ci)``.
    """
    key = _call_key(grad, weights, axes, channels_last, dtype)
    if key is not None:
        entry = _prepared_calls.get(key)
        if entry is not None and entry[1] == _planning.generation:
            if entry[0] is None:
                key = None  # this layer has no prepared call: none is made again
            else:
                result = entry[0](grad, weights)
                if result is not None:
                    return result
                # another filter, switch or machine: prepared again below
    compute = _as_transposed if as_transposed(axes) else _strided
    result, call = compute(grad, weights, axes, channels_last, dtype, key is not None)
    if key is not None:
        with _prepared_lock:
            _prepared_calls.pop(key, None)
            while len(_prepared_calls) >= _PREPARED_CALLS_KEPT:
                del _prepared_calls[next(iter(_prepared_calls))]
            _prepared_calls[key] = (call, _planning.generation)
    return result


def _call_key(grad, weights, axes, channels_last: bool, dtype) -> tuple | None:
    """The key of :data:`_prepared_calls` for these operands; None where none is kept
    (operands other than native float32 or float64 of one dtype)."""
    if accumulation_dtype(dtype) != dtype or not preparable(grad.dtype, weights.dtype):
        return None
    return (grad.shape, grad.strides, grad.dtype.str, weights.shape, weights.dtype.str,
            tuple(axes), channels_last)


#: Prepared calls of data adjoints (:func:`data_adjoint`), the most recent last: key
#: -> ``(call or None, planning generation)``.
_PREPARED_CALLS_KEPT = 8
_prepared_calls: dict = {}
_prepared_lock = threading.Lock()
_caches.register("resolved plans and prepared calls", _prepared_calls.clear)


def _strided(grad, weights, axes, channels_last, dtype, prepare: bool):
    """``(result, prepared call or None)``: the data adjoint by the adjoint kernels,
    with a :class:`_StridedCall` for the next calls where ``prepare`` asks for one and
    the choice is final."""
    groups, ci, co = weights.shape[:3]
    batch = grad.shape[0]
    accumulate = accumulation_dtype(dtype)
    if grad.size == 0 or weights.size == 0:
        sizes = tuple(axis.input_size for axis in axes)
        return _finished(np.zeros((batch, groups * ci) + sizes, accumulate), channels_last,
                         dtype), None
    grad_ncx = _widened(_channels_first(grad, channels_last), accumulate)
    weights = _widened(weights, accumulate)
    budget = im2col_budget(batch, axes, weights.shape, accumulate)
    memo = derived_from(weights, "forward")  # the blocked kernel's packed weights too
    finite = _finite_filter(memo, weights)

    def run(name):
        with np.errstate(all="ignore"), _blas.at_most(host().threads):
            return _kernels.data_adjoint(grad_ncx, weights, axes, accumulate, name,
                                         budget, finite, memo)

    name, settled = _algorithm("data", batch, weights.shape, axes, accumulate, not finite,
                               run, _warm("data", grad_ncx, weights, axes, groups, accumulate))
    result = _finished(run(name), channels_last, dtype)
    if not (prepare and settled and keeps_derived(weights)):
        return result, None
    compute = _kernels.prepare_data_adjoint(grad_ncx, weights, axes, accumulate, name,
                                            budget, finite, memo)
    return result, _StridedCall(name, weights, memo, compute, channels_last)


#: The switches a prepared data adjoint was set up under (:class:`_StridedCall`).
_switch_state = switches_reader(BACKWARD_ALGORITHM_ENV, NO_NUMBA_ENV, NO_BLAS_ENV)


class _StridedCall:
    """A strided layer's data adjoint prepared (:func:`_strided`).  For a grad of the
    shape at preparation and weights of the same bits, under the same switches and
    machine, ``call(grad, weights, out=None)`` returns what :func:`data_adjoint`
    returns (in ``out`` where given), with the algorithm, the packed weights and the
    kernel's set-up kept; None otherwise.  The weights are the same bits where the
    weights memo returns the same dict for them
    (:func:`~convtranspose._runtime.memo.derived_from`, found without a comparison
    for a prepared layer's own filter), or where they are the very view of a prepared
    layer's filter the call was prepared with.  Skipping the choice and the set-up
    took strided forward convolutions 0.41-0.88x the time on an AMD Zen 4 (ResNet s2
    128->256 28x28: 1.27 -> 1.00 ms; ``benchmarks/results/gradients-zen4.json``,
    ``prepared_strided``)."""

    __slots__ = ("algorithm", "_derived", "_compute", "_numpy", "_channels_last", "_switches",
                 "_host_state", "_target", "_own")

    def __init__(self, algorithm: str, weights: np.ndarray, derived: dict, compute,
                 channels_last: bool):
        #: The adjoint algorithm it runs.
        self.algorithm = algorithm
        self._derived, self._compute = derived, compute
        self._numpy = not algorithm.startswith("blocked")  # else numba's kernels
        self._channels_last = channels_last
        # (the switches :func:`host` reads among them: see ``DirectCall``)
        self._switches, self._host_state = _switch_state(), host_state()
        self._target = host()
        # a view of a filter nobody writes (a prepared layer's): told by identity
        self._own = weights if owned_view(weights) else None

    def __call__(self, grad: np.ndarray, weights: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        if (_switch_state() != self._switches or host_state() != self._host_state
                or weights is not self._own
                and derived_from(weights, "forward") is not self._derived):
            return None
        last = self._channels_last
        grad, into = _channels_first(grad, last), None if out is None else _channels_first(
            out, last)
        if self._numpy:
            with np.errstate(all="ignore"), _blas.at_most(self._target.threads):
                result = self._compute(grad, weights, into)
        else:
            result = self._compute(grad, weights, into)
        return out if out is not None else _finished(result, last, result.dtype)


def kept_data_adjoint(grad: np.ndarray, weights: np.ndarray, axes: Sequence[AxisPlan],
                      channels_last: bool, dtype: np.dtype):
    """``(call, generation)``: the prepared call :func:`data_adjoint` keeps for these
    operands (None if there is none), and the planning generation it holds for;
    ``(None, -1)`` where it has kept none for the current generation yet (as after a
    call whose planning moved the generation).  A caller that keeps it calls ``call(grad,
    weights, out)`` while :data:`convtranspose._choose.planning.generation` is
    unchanged; a None result means: go through :func:`data_adjoint` (and, for ``(None,
    -1)``, ask again after)."""
    generation = _planning.generation
    key = _call_key(grad, weights, axes, channels_last, dtype)
    if key is None:  # these operands have none
        return None, generation
    entry = _prepared_calls.get(key)
    return (entry[0], generation) if entry is not None and entry[1] == generation else (
        None, -1)


def transposed_axes(axes: Sequence[AxisPlan]) -> tuple[AxisPlan, ...]:
    """The axes of the transposed convolution a stride-1 data adjoint is: input ``Y``,
    output ``X``, ``offset' = (K - 1) * d - offset`` (``x + offset' = t + k'*d`` with
    ``k' = K - 1 - k`` is ``t = x + k*d - offset``)."""
    return tuple(AxisPlan(axis.output_size, axis.kernel_size, 1, axis.dilation,
                          (axis.kernel_size - 1) * axis.dilation - axis.offset,
                          axis.input_size)
                 for axis in axes)


def transposed_weights_shape(weights_shape: Sequence[int]) -> tuple[int, ...]:
    """``(G, Co, Ci, K...)``: the filter of :func:`transposed_axes`' problem, its channel
    roles swapped."""
    groups, ci, co = weights_shape[:3]
    return (groups, co, ci) + tuple(weights_shape[3:])


def _flipped(weights: np.ndarray) -> np.ndarray:
    """``(G, Ci, Co, K...)`` weights as the ``(G, Co, Ci, K...)`` filter of
    :func:`transposed_axes`' problem: channel roles swapped, taps reversed (a view)."""
    return weights.swapaxes(1, 2)[(slice(None),) * 3 + (slice(None, None, -1),)
                                  * (weights.ndim - 3)]


def _as_transposed(grad, weights, axes, channels_last, dtype, prepare: bool):
    """``(result, prepared call or None)``: the data adjoint of a stride-1 problem, which
    is itself a stride-1 transposed convolution (:func:`transposed_axes`): of ``grad``,
    with the filter's channel roles swapped and its taps reversed.  So it runs on every
    algorithm and kernel of the transposed convolution, under the same planning.

    Where ``prepare`` asks for one (and ``grad`` is C-contiguous), the call is the
    transposed convolution's prepared call
    (:func:`~convtranspose._execute.transposed.prepare_call`), which later calls run
    with the weights as they are (compared bit for bit): the plan, the flipped filter
    and the kernels' set-up are not made again (stride-1 forward convolutions
    0.69-0.91x the time, ``benchmarks/results/gradients-xeon.json``,
    ``prepared_stride_one``)."""
    t_axes = transposed_axes(axes)
    # contiguous: the kernels and the filter memo read a C-order filter fastest
    result = transposed_convolution(grad, np.ascontiguousarray(_flipped(weights)), t_axes,
                                    dtype=accumulation_dtype(dtype),
                                    channels_last=channels_last, result_dtype=dtype)
    if not (prepare and grad.flags.c_contiguous):
        return result, None
    return result, prepare_call(grad, weights, lambda kept: np.ascontiguousarray(_flipped(kept)),
                                t_axes, channels_last)


def filter_adjoint(data: np.ndarray, grad: np.ndarray, axes: Sequence[AxisPlan],
                   groups: int, *, channels_last: bool, dtype: np.dtype) -> np.ndarray:
    """The filter gradient ``(G, Ci, Co, K...)`` of the canonical problem (a correlation
    of ``data`` with ``grad``), in ``dtype``; layouts as in :func:`data_adjoint`."""
    data_ncx = _channels_first(data, channels_last)
    grad_ncx = _channels_first(grad, channels_last)
    ci, co = data_ncx.shape[1] // groups, grad_ncx.shape[1] // groups
    kernel = tuple(axis.kernel_size for axis in axes)
    accumulate = accumulation_dtype(dtype)
    if data.size == 0 or grad.size == 0:
        result = np.zeros((groups, ci, co) + kernel, accumulate)
    else:
        data_ncx = _widened(data_ncx, accumulate)
        grad_ncx = _widened(grad_ncx, accumulate)
        shape = (groups, ci, co) + kernel
        budget = im2col_budget(data.shape[0], axes, shape, accumulate)

        def run(name):
            with np.errstate(all="ignore"), _blas.at_most(host().threads):
                return _kernels.filter_adjoint(data_ncx, grad_ncx, axes, groups, accumulate,
                                               name, budget)

        name, _ = _algorithm("filter", data.shape[0], shape, axes, accumulate,
                             not _finite(data), run,
                             _warm("filter", data_ncx, grad_ncx, axes, groups, accumulate))
        result = run(name)
    return _finished(result, False, dtype)


def bias_adjoint(grad: np.ndarray, *, channels_last: bool, dtype: np.dtype) -> np.ndarray:
    """The bias gradient: ``grad`` summed over every axis but the channels."""
    axis = tuple(i for i in range(grad.ndim) if i != (grad.ndim - 1 if channels_last else 1))
    accumulate = accumulation_dtype(dtype)
    with np.errstate(all="ignore"):
        total = _widened(grad, accumulate).sum(axis=axis, dtype=accumulate)
    return _finished(total, False, dtype)
