"""Numba ``direct``: which of its kernels computes a layer, and the threads it uses.

:func:`direct_phase` sends a layer to the per-position kernel (:mod:`.channels_last`),
the row kernel (:mod:`.rows`), the plane kernel (:mod:`.planes`) or, for long 1-D
lines, the plane kernel over segments; :func:`prepare_direct` sets a layer up once for
repeated calls.  Every kernel writes each output element exactly once.
"""

from __future__ import annotations

import math

import numpy as np

from ..._plan.geometry import three_axes
from ..schedules import (
    BFLOAT16,
    direct_per_position,
    direct_worth_threads,
    half_load,
    line_segmented,
    plane_strided,
    rows_apply,
)
from .channels_last import channels_last_runner, direct_channels_last
from .line_segments import LineSegments
from .modes import bfloat16_pair_bits, store_mode
from .planes import direct_planes, plane_runner, plane_source, stored
from .rows import direct_rows, rows_runner


def direct_threads(batch: int, weights_shape: tuple[int, ...], axes, target) -> int:
    """The target's threads, or one where the layer is too small to share out."""
    groups, ci, co = weights_shape[:3]
    out_size = batch * groups * co * math.prod(axis.output_size for axis in axes)
    return target.threads if direct_worth_threads(out_size, ci, axes) else 1


def direct_phase(data, weights, axes, dtype, channels_last, out, derived, bias, target):
    """Fill ``out`` (the layout of ``data``) with the transposed convolution.

    ``out`` has the accumulation ``dtype``, or, with the plane kernel (not
    :func:`convtranspose._kernels.schedules.direct_per_position`), is float16 or bfloat16 (with
    float32 ``dtype``): then the sums, plus ``bias`` (``(G*Co,)``, read only then),
    are rounded once into it as they are stored, bit for bit as ``astype`` rounds
    the float32 result.  ``derived``: a dict kept with these weights across calls
    (the caller's filter memo), where the plane kernel keeps its reordered weights;
    None: reorder anew.  ``target``: the machine (:class:`~convtranspose._runtime.target.Target`).
    """
    groups, ci, co = weights.shape[:3]
    axes3 = three_axes(axes)
    threads = direct_threads(data.shape[0], weights.shape, axes, target)
    result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    if direct_per_position(groups, ci, co, channels_last):
        direct_channels_last(data, weights, axes3, dtype, result, target, threads, derived)
    else:
        strided = plane_strided(groups, ci, co, channels_last)
        derived = {} if derived is None else derived
        if len(axes) == 1 and line_segmented(axes[0], ci):
            LineSegments(weights, axes[0], dtype, target, threads, channels_last, strided,
                         derived, bias)(data, result)
        elif rows_apply(weights.shape, axes3, channels_last, data.dtype, dtype, result.dtype,
                        target):
            direct_rows(data, weights, axes3, dtype, result, target, threads, derived, bias)
        else:
            direct_planes(data, weights, axes3, dtype, result, target, threads, strided,
                          derived, bias)
    if result is not out:
        np.copyto(out, result)


def prepare_direct(batch, weights, axes, dtype, channels_last, derived, target):
    """``compute(data, out)``: :func:`direct_phase` for this layer with its per-position,
    plane or row kernel (or each of its line segments' plane kernels) set up once.

    For repeated calls of one layer (:class:`convtranspose._kernels.direct.DirectCall`): the
    general path's Python around a small kernel costs about as much as the kernel
    (FCN-2x 21->21: 40 us around 45).  ``data`` must have ``dtype`` (float32 or
    float64; no bfloat16 pairs), ``out`` be C-contiguous.
    """
    groups, ci, co = weights.shape[:3]
    axes3, threads = three_axes(axes), direct_threads(batch, weights.shape, axes, target)
    if direct_per_position(groups, ci, co, channels_last):
        run = channels_last_runner(batch, weights, axes3, dtype, target, threads, derived)
    elif len(axes) == 1 and line_segmented(axes[0], ci):
        return LineSegments(weights, axes[0], dtype, target, threads, channels_last,
                            plane_strided(groups, ci, co, channels_last), derived)
    elif rows_apply(weights.shape, axes3, channels_last, dtype, dtype, dtype, target):
        return rows_runner(batch, weights, axes3, dtype, target, threads, derived)
    else:
        run = plane_runner(batch, weights, axes3, dtype, target, threads,
                           plane_strided(groups, ci, co, channels_last), derived, False)

    def compute(data, out):
        run(np.ascontiguousarray(data).reshape(-1), out.reshape(-1))

    return compute


def prepare_direct_rounded(batch, weights, axes, dtype, channels_last, derived, target,
                           data_dtype, result_dtype, bias):
    """``compute(data, out)``: :func:`direct_phase` for this layer rounding its float32
    sums plus ``bias`` into a C-contiguous ``out`` of ``result_dtype`` (float16 or
    bfloat16), with its plane or row kernel (or each line segment's) set up once; None
    where the per-position kernel computes the layer (it does not round).  ``data``
    must have ``data_dtype``.  As in :func:`direct_phase`, each call decides from the
    data whether bfloat16 operands are multiplied in pairs, so the bits are the
    general path's."""
    groups, ci, co = weights.shape[:3]
    if direct_per_position(groups, ci, co, channels_last):
        return None
    axes3, threads = three_axes(axes), direct_threads(batch, weights.shape, axes, target)
    strided = plane_strided(groups, ci, co, channels_last)
    if len(axes) == 1 and line_segmented(axes[0], ci):
        return LineSegments(weights, axes[0], dtype, target, threads, channels_last, strided,
                            derived, bias)
    mode = store_mode(result_dtype, dtype)
    if rows_apply(weights.shape, axes3, channels_last, data_dtype, dtype, result_dtype, target):
        load_mode = half_load(data_dtype, target.f16c)
        rows = rows_runner(batch, weights, axes3, dtype, target, threads, derived, load_mode,
                           mode, bias)

        def compute_rows(data, out):
            if (load_mode == BFLOAT16
                    and bfloat16_pair_bits(data, weights, dtype, 16, derived, target) is None):
                direct_planes(data, weights, axes3, dtype, out, target, threads, False,
                              derived, bias)
            else:
                rows(data, out)

        return compute_rows
    runners: dict = {}  # by whether the data's bfloat16 pairs are multiplied

    def compute_planes(data, out):
        source, pairs, load_mode = plane_source(data, weights, dtype, derived, target)
        run = runners.get(pairs)
        if run is None:
            run = runners[pairs] = plane_runner(batch, weights, axes3, dtype, target, threads,
                                                strided, derived, pairs, mode, bias, load_mode)
        run(source, stored(out, mode))

    return compute_planes
