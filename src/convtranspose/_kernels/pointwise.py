"""``pointwise``: a layer whose every axis has one tap, stride 1 and no crop (a 1x1
convolution run backwards, and every 1x1 forward convolution) is one matrix product
per group, written straight into the output.

Output position ``o`` reads input position ``o`` alone, so the layer is ``out[n, :, o] =
W_g^T x[n, :, o]`` per group ``g``: no im2col, no padded copy and no scatter, where the
``phase`` and ``gemm`` algorithms copy the data into windows and the result out of
their products.  Every product term is one the sum has: exact with non-finite
operands.
"""

from __future__ import annotations

import math

import numpy as np

from .._plan.rules import AxisPlan
from .._runtime.memo import derived_from
from .gemm import run_gemms

__all__ = ["takes_layer"]


def takes_layer(axes: tuple[AxisPlan, ...]) -> bool:
    """Whether output position ``o`` of every axis is input position ``o`` times the one
    tap: kernel size 1, stride 1, no offset, as many outputs as inputs."""
    return all(axis.kernel_size == 1 and axis.stride == 1 and axis.offset == 0
               and axis.output_size == axis.input_size for axis in axes)


def _matrices(weights: np.ndarray, dtype, channels_last: bool) -> np.ndarray:
    """The filter as ``(G, Ci, Co)`` (channels last) or ``(G, Co, Ci)`` in ``dtype``,
    contiguous, kept with the filter."""
    derived = derived_from(weights, "pointwise", np.dtype(dtype).str, channels_last)
    matrices = derived.get("matrices")
    if matrices is None:
        groups, ci, co = weights.shape[:3]
        square = weights.reshape(groups, ci, co)
        matrices = np.ascontiguousarray(square if channels_last else square.swapaxes(1, 2),
                                        dtype)
        matrices.flags.writeable = False
        derived["matrices"] = matrices
    return matrices


def _pointwise(data, weights, axes, dtype, channels_last, out, *, target):
    """Fill ``out`` with one product per group (and per sample, channels first)."""
    groups, ci, co = weights.shape[:3]
    batch = data.shape[0]
    positions = math.prod(axis.input_size for axis in axes)
    matrices = _matrices(weights, dtype, channels_last)
    if data.dtype != dtype:
        data = data.astype(dtype)
    if channels_last:
        # (N*P, G, Ci) @ (Ci, Co) per group, into the (N*P, G, Co) output's columns.
        rows = data.reshape(batch * positions, groups, ci)
        into = out.reshape(batch * positions, groups, co)
        calls = [[(rows[:, g], matrices[g], into[:, g], False)] for g in range(groups)]
        flops_each = 2.0 * batch * positions * ci * co
    else:
        # (Co, Ci) @ (Ci, P) per sample and group, into the (N, G, Co, P) output.
        planes = data.reshape(batch, groups, ci, positions)
        into = out.reshape(batch, groups, co, positions)
        calls = [[(matrices[g], planes[n, g], into[n, g], False)]
                 for n in range(batch) for g in range(groups)]
        flops_each = 2.0 * positions * ci * co
    run_gemms(calls, flops_each, target.threads)
