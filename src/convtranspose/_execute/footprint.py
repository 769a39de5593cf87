"""The bytes a call needs, counted before it allocates anything: one rule, and one check
(:class:`~convtranspose.ResultTooLargeError` beyond
:func:`~convtranspose._runtime.memory.get_max_bytes`), for the transposed convolution,
the forward convolution and the gradients alike.

A call needs

- its results (none where ``out=`` takes the transposed convolution's);
- for a narrow element type (float16, bfloat16, integers of fewer than 8 bytes) its
  operands widened to the accumulation type and its sums in that type (the transposed
  convolution's in pieces of at most :func:`~._runtime.memory.sums_piece_bytes`);
- the copies around the kernels: a byte per element of the operand whose finiteness
  is checked, the data adjoint's flipped filter, a channels-last or filter-layout copy
  of a gradient;
- the scratch of the algorithms that may compute it: the largest estimate among them
  (:func:`convtranspose._choose.choice.call_scratch_bytes` for the transposed convolution,
  :func:`convtranspose._execute.adjoints.adjoint_scratch` for the adjoints).  Every one is at
  most :func:`~convtranspose._kernels.scratch.scratch_bound` of the problem, max(4 x
  (result + data + filter), 64 MiB) in the accumulation type: the planners offer no
  algorithm beyond it.

The check refuses, in this order: a result NumPy cannot hold; a request whose results
and copies alone exceed the limit (at once, however huge); and then, unless the bound
itself fits, the request with its scratch estimated (which takes time in proportion
to the output's rows).  The gradients' data and filter adjoints run one after the
other: the larger of the two counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._choose.choice import call_scratch_bytes
from .._dtypes import accumulation_dtype
from .._kernels.scratch import bound_of
from .._plan.convolution import ConvolutionPlan, convolution_culprit
from .._plan.problem import Problem
from .._plan.rules import AxisPlan, ConvTransposePlan, size_culprit
from .._runtime import memory as _memory
from . import adjoints as _backward

__all__ = ["check_convolution", "check_gradients", "check_transposed"]


def _wide(dtype: np.dtype) -> np.dtype:
    """The accumulation dtype of a numeric dtype (other dtypes: themselves, refused later
    by the dtype checks)."""
    if dtype.kind in "fiu" or dtype.name == "bfloat16":
        return accumulation_dtype(dtype)
    return dtype


def _check(shape: tuple[int, ...], dtype: np.dtype, wide: np.dtype, *, allocated: bool,
           fixed: int, operands: int, scratch: Callable[[], int],
           culprit: Callable[[], tuple[str, object]]) -> None:
    """Refuse a call whose result of ``shape`` (``allocated`` or not), ``fixed`` bytes
    more and algorithm scratch (``scratch()``) exceed the limit, or whose result (or its
    sums in ``wide``) NumPy cannot hold.  ``operands``: the elements of the problem's
    data, result and filter, whose bound (:func:`~.kernels.scratch.bound_of`) the
    scratch never exceeds; ``culprit()``: the argument to name and its value."""
    elements = math.prod(shape)
    result = elements * dtype.itemsize if allocated else 0
    if elements and (result + fixed + bound_of(operands * wide.itemsize)
                     <= _memory.get_max_bytes()):
        return  # even the bound fits: no estimate needed (the common call)
    argument, value = culprit()
    if wide != dtype:  # the sums' array (even with no elements) must be one NumPy can hold
        _memory.check_request(shape, wide, result_allocated=False, scratch_bytes=0,
                              argument=argument, value=value)
    _memory.check_request(shape, dtype, result_allocated=allocated, scratch_bytes=fixed,
                          argument=argument, value=value)
    _memory.check_request(shape, dtype, result_allocated=allocated,
                          scratch_bytes=fixed + scratch(), argument=argument, value=value)


def check_transposed(plan: ConvTransposePlan, data: np.ndarray, filter: np.ndarray,
                     out: np.ndarray | None, output_shape: object) -> None:
    """The check of a transposed convolution (``output_shape`` as the caller gave it,
    None when not given: it names the argument).

    Its outcome depends on the plan (which fixes the operands' shapes), the dtype,
    whether the result is allocated and the limit, so a pass is kept on the plan for
    these (a repeated tiny layer's call would spend a tenth of its time here); a refusal
    is raised again each time."""
    dtype = data.dtype
    passed = plan.__dict__.get("_passed_checks")
    if passed is not None and (dtype, out is None, _memory.get_max_bytes()) in passed:
        return
    wide = _wide(dtype)
    elements = math.prod(plan.output_shape)
    fixed = 0
    if wide != dtype:  # sums in pieces, and each operand widened once
        fixed = (min(elements * wide.itemsize,
                     _memory.sums_piece_bytes(elements * dtype.itemsize))
                 + (data.size + filter.size) * wide.itemsize)

    def culprit() -> tuple[str, object]:
        if output_shape is not None:
            return "output_shape", output_shape
        return size_culprit(plan)

    _check(plan.output_shape, dtype, wide, allocated=out is None, fixed=fixed,
           operands=data.size + filter.size + elements,
           scratch=lambda: call_scratch_bytes(Problem(
               plan.data_shape[0], plan.axes, plan.canonical_filter_shape, plan.channels_last,
               np.dtype(wide))),
           culprit=culprit)
    if passed is None or len(passed) >= _PASSES_KEPT:
        passed = plan.__dict__["_passed_checks"] = set()
    passed.add((dtype, out is None, _memory.get_max_bytes()))


#: Passed checks kept on one plan (dtypes, allocation, limits), forgotten together beyond.
_PASSES_KEPT = 16


def _data_adjoint_scratch(batch: int, axes: tuple[AxisPlan, ...],
                          weights: tuple[int, ...], channels_last: bool,
                          wide: np.dtype) -> int:
    """The scratch of :func:`convtranspose._execute.adjoints.data_adjoint`: of the transposed
    convolution it computes for stride 1, else of the adjoint algorithms."""
    if _backward.as_transposed(axes):
        return call_scratch_bytes(Problem(batch, _backward.transposed_axes(axes),
                                          _backward.transposed_weights_shape(weights),
                                          channels_last, np.dtype(wide)))
    return _backward.adjoint_scratch("data", batch, weights, axes, wide)


def check_convolution(plan: ConvolutionPlan, data: np.ndarray, filter: np.ndarray) -> None:
    """The check of a forward convolution (the data adjoint of its canonical problem),
    which allocates its result even with ``out=`` (the result is copied into it)."""
    dtype = data.dtype
    wide = _wide(dtype)
    elements = math.prod(plan.output_shape)
    # The filter's finiteness check (a byte a weight) or its flipped copy (stride 1).
    fixed = filter.nbytes
    if wide != dtype:  # the widened operands and the sums
        fixed += (data.size + filter.size + elements) * wide.itemsize
    batch, axes, weights = plan.data_shape[0], plan.axes, plan.canonical_filter_shape
    _check(plan.output_shape, dtype, wide, allocated=True, fixed=fixed,
           operands=data.size + filter.size + elements,
           scratch=lambda: _data_adjoint_scratch(batch, axes, weights, False, wide),
           culprit=lambda: convolution_culprit(plan))


def check_gradients(plan: ConvTransposePlan, names: tuple[str, ...], data: np.ndarray,
                    filter: np.ndarray, grad_output: np.ndarray,
                    bias: np.ndarray | None) -> None:
    """The check of the gradients of a transposed convolution: the data, filter and bias
    gradients, and the larger of the data and the filter adjoint's needs."""
    dtype = data.dtype
    wide = _wide(dtype)
    narrow = wide != dtype
    results = filter.nbytes + (0 if bias is None else bias.size * dtype.itemsize)
    widened = (data.size + filter.size + grad_output.size) * wide.itemsize if narrow else 0
    # The data adjoint: the filter's finiteness check or flipped copy; its sums where
    # they are not the result (narrow, or channels last: then copied), the rounded
    # channels-last copy.  The filter adjoint: the data's finiteness check, its sums
    # where narrow, the filter gradient in the dialect's layout.
    last = plan.channels_last
    data_extra = (filter.nbytes + (data.size * wide.itemsize if narrow or last else 0)
                  + (data.nbytes if narrow and last else 0))
    filter_extra = (data.size + (filter.size * wide.itemsize if narrow else 0)
                    + (filter.nbytes if plan.filter_layout != "GIOX" else 0))
    batch, axes, weights = plan.data_shape[0], plan.axes, plan.canonical_filter_shape

    def scratch() -> int:
        data_need = data_extra + _data_adjoint_scratch(batch, axes, weights, last, wide)
        filter_need = filter_extra + _backward.adjoint_scratch("filter", batch, weights, axes,
                                                               wide)
        return max(data_need, filter_need) - max(data_extra, filter_extra)

    _check(data.shape, dtype, wide, allocated=True,
           fixed=results + widened + max(data_extra, filter_extra),
           operands=data.size + filter.size + grad_output.size, scratch=scratch,
           culprit=lambda: (names[0], data.shape))
