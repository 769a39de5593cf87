"""One time estimate per algorithm, in nanoseconds.

Each estimator models its algorithm's work: BLAS products at the machine's measured
GEMM speed (:func:`.figures.gemm_gflops`), NumPy memory passes (:func:`_pass_ns`),
numba kernels' multiply-adds at shares of the machine's measured FMA peak
(:func:`.figures.thread_macs_per_ns`), and fixed per-call overheads.  The pass and overhead
terms are rough: the estimate only has to rank the few most promising algorithms well,
and measured planning times those and makes the final call.  Estimators read the
kernels' own schedules (:mod:`convtranspose._kernels.schedules`), never their code.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._kernels import REGISTRY, offered_algorithms
from .._kernels.col2im import products_in_place, rows_kernels_store
from .._kernels.dense import DENSE_MAX_ELEMENTS
from .._kernels.pointwise import in_place, reached, takes_layer
from .._kernels.schedules import (
    PLANE_CO_BLOCK,
    direct_per_position,
    direct_worth_threads,
    line_segment_inputs,
    line_segmented,
    numba_scatters,
    rows_take_layer,
)
from .._kernels.window import window_plan
from .._plan.geometry import live_classes
from .._plan.rules import AxisPlan
from .._runtime.target import Target
from .costs import Layer, RawCost
from .figures import gemm_gflops, machine_figures, thread_macs_per_ns
from .kernel_estimates import blocked_estimate, depthwise_estimate, disjoint_estimate

__all__ = ["CALL_NS", "ESTIMATES", "Layer", "RawCost", "estimate_ns", "raw_estimates"]

#: What one call of any algorithm costs besides its modelled work (ns): about one
#: call's Python and NumPy dispatch.  Held-out suites ranked best with 10 us against
#: 1 us and about as well as with 30 us (``benchmarks/results/estimate-errors-xeon.json``).
CALL_NS = 10000.0


def estimate_ns(cost: RawCost) -> float:
    """An algorithm's estimate in nanoseconds: its raw parts and one call."""
    return cost.total + CALL_NS


def _pass_ns(elements: float, run: int) -> float:
    """Rough cost of one NumPy memory pass whose contiguous runs have ``run`` elements."""
    return elements * (2.0 + 6.0 / max(1, min(run, 64)))


def _gemm_ns(rows: int, depth: int, width: int, batches: int = 1) -> RawCost:
    """Rough cost of ``batches`` GEMMs ``(rows, depth) @ (depth, width)``.

    The multiply-adds (``gemm``) at :func:`.figures.gemm_gflops` when every
    dimension is large; narrow products are slower (OpenBLAS on 8192 rows: width 8 to
    128 at 30-93% of the widest, ``benchmarks/results/blas-algorithms.json``); writing
    the result and a per-call overhead (``scaled``).
    """
    flops = 2.0 * rows * depth * width * batches
    efficiency = min(1.0, depth / 32) * width / (width + 12) * min(1.0, rows / 64)
    return RawCost(1.0 * rows * width * batches + 2000 * batches,
                   flops / (gemm_gflops() * max(efficiency, 0.02)))


def raw_estimates(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                  channels_last: bool, dtype, target: Target,
                  pairs: bool = False) -> dict[str, RawCost]:
    """Estimated nanoseconds of every algorithm offered for this problem: each offered
    algorithm of the registry whose requirements ``target`` meets for ``dtype``
    (:func:`~convtranspose._kernels.offered_algorithms`), by the estimate its record
    names (:data:`ESTIMATES`), unless that estimate declines the layer.

    ``pairs``: bfloat16 operands that ``direct`` may multiply as pairs.
    """
    dtype = np.dtype(dtype)
    layer = Layer.of(batch, axes, weights_shape, channels_last)
    numba_float = target.numba and dtype.kind == "f"
    rows = numba_float and rows_take_layer(axes, weights_shape, channels_last, target)
    situation = {"target": target, "numba_float": numba_float, "pairs": pairs, "rows": rows}
    costs: dict[str, RawCost] = {}
    for name in offered_algorithms(dtype, len(axes), target):
        entry = REGISTRY[name]
        cost = ESTIMATES[entry.estimate](layer, situation, **entry.options)
        if cost is not None:
            costs[name] = cost
    return costs


def _dense_estimate(layer: Layer) -> RawCost | None:
    """``dense``: the layer as one matrix, for tiny layers only."""
    dense = layer.groups * layer.ci * math.prod(layer.spatial_in) * layer.groups * layer.co * (
        math.prod(axis.output_size for axis in layer.axes))
    if dense > DENSE_MAX_ELEMENTS:
        return None
    return RawCost(2.0 * layer.batch * dense / 20.0 + 0.3 * dense + 5000)


def _pointwise_estimate(layer: Layer) -> RawCost | None:
    """``pointwise``: one GEMM per group (per sample too, channels first) over the inputs
    that reach the output, for layers of one tap per axis; unless the outputs are the
    inputs' places, the output zeroed and the products copied into it, and the inputs
    reached copied."""
    if not takes_layer(layer.axes):
        return None
    positions = reached(layer.axes)
    if layer.channels_last:
        cost = _gemm_ns(layer.batch * positions, layer.ci, layer.co, layer.groups)
    else:
        cost = _gemm_ns(layer.co, layer.ci, positions, layer.batch * layer.groups)
    if not in_place(layer.axes):
        products = layer.batch * layer.groups * layer.co * positions
        cost += RawCost(_pass_ns(layer.outputs, 64) + _pass_ns(products, layer.co)
                        + _pass_ns(layer.inputs, layer.ci))
    return cost


def _phase_estimate(layer: Layer, internal_last: bool) -> RawCost:
    """``phase-*``: per class of phases an im2col copy, one GEMM and a strided store."""
    same_layout = internal_last == layer.channels_last
    cost = RawCost(0.0)
    if layer.padding or not same_layout:
        cost += _pass_ns(layer.inputs, (layer.ci if internal_last else layer.spatial_in[-1])
                         if same_layout else 2)
    for combo in itertools.product(*(p.classes for p in layer.phases)):
        slots = math.prod(len(c.shifts) for c in combo)
        if slots == 0:
            continue
        depth, width = slots * layer.ci, math.prod(c.count for c in combo) * layer.co
        cost += _gemm_ns(layer.rows_phase, depth, width, layer.groups) + 30000
        if slots > 1 or layer.padding:
            cost += _pass_ns(layer.groups * layer.rows_phase * depth,
                             layer.ci if internal_last else layer.blocks[-1])
        run = combo[-1].count * layer.co if internal_last else layer.ncx_run
        cost += _pass_ns(layer.groups * layer.rows_phase * width, run if same_layout else 1)
    return cost


def _gemm_estimate(layer: Layer, internal_last: bool) -> RawCost:
    """``gemm-*``: accumulating products over row-shifted windows, copies only where the
    other axes' shifts or padding need them."""
    same_layout = internal_last == layer.channels_last
    lead_classes, rest_combos = live_classes(layer.phases)
    rest_padding = any(p.pad_low or p.pad_high for p in layer.phases[1:])
    cost = RawCost(0.0)
    for combo in rest_combos:
        slots = math.prod(len(c.shifts) for c in combo)
        # The first axis's padding costs copies only at the ends (views inside).
        if slots > 1 or rest_padding or not same_layout or layer.batch > 1:
            cost += _pass_ns(slots * layer.inputs, (layer.ci if internal_last
                                                    else layer.blocks[-1])
                             if same_layout else 2)
        for lead_class in lead_classes:
            width = lead_class.count * math.prod(c.count for c in combo) * layer.co
            cost += _gemm_ns(layer.rows_phase, slots * layer.ci, width,
                             layer.groups * len(lead_class.shifts)) + 40000
            if len(layer.axes) == 1 and internal_last and layer.channels_last:
                continue  # written straight into the output
            run = (combo[-1].count if combo else lead_class.count) * layer.co
            cost += _pass_ns(layer.groups * layer.rows_phase * width,
                             run if internal_last and same_layout else layer.ncx_run)
    return cost


#: Extra cost of ``col2im-nxc``'s NumPy scatter-add per added element, over the square
#: of its run (the output channels): NumPy's add restarts its inner loop per run, which
#: the pass term undercharges for a few channels (``benchmarks/results/calibration-zen3.json``).
_SHORT_RUN_NS = 200.0


def _col2im_estimate(layer: Layer, internal_last: bool, numba_float: bool) -> RawCost:
    """``col2im-*``: one GEMM of every tap's contribution, then an add per live tap."""
    same_layout = internal_last == layer.channels_last
    rows_in = layer.batch * math.prod(layer.spatial_in)
    cost = (_gemm_ns(rows_in, layer.ci, layer.taps * layer.co, layer.groups)
            + _pass_ns(layer.outputs, 64))
    if not same_layout or layer.batch > 1 and not internal_last:
        cost += _pass_ns(layer.inputs, 2 if not same_layout else layer.spatial_in[-1])
    run = ((layer.co if internal_last else layer.spatial_in[-1] // max(1, layer.axes[-1].stride))
           if same_layout else 1)
    live = layer.live_taps
    adds = live * layer.groups * rows_in * layer.co
    if products_in_place(layer.channels_last, layer.axes, numba_float, layer.batch, layer.ci,
                         internal_last):
        # The packed products store in place: no columns, no pass over them, and the
        # data read as it is (the product's rate, and the output's pass above).
        return (_gemm_ns(rows_in, layer.ci, layer.taps * layer.co, layer.groups)
                + _pass_ns(layer.outputs, 64))
    if not internal_last and rows_kernels_store(layer.channels_last, len(layer.axes),
                                                numba_float):
        # The rows kernels: one compiled pass over the output rows (the pass above),
        # the columns read once (0.7-1.8 ns per add on two threads, about NumPy's
        # long-run pass; benchmarks/results/col2im-rows-zen3.json).
        cost += _pass_ns(adds, 64)
    elif numba_scatters(layer.co, len(layer.axes), numba_float):
        cost += 7.0 * adds  # numba's pass: 3-4 ns per add measured on two threads
    else:
        cost += 1.5 * _pass_ns(adds, run) + live * 3000
        if internal_last:
            cost += adds * _SHORT_RUN_NS / max(1, run) ** 2
    return cost


def _stream_estimate(layer: Layer) -> RawCost:
    """``stream``: the filter read once from memory at the measured copy rate, or its
    multiply-adds at the GEMM rate, whichever is longer; then an add per live tap."""
    rows_in = layer.batch * math.prod(layer.spatial_in)
    filter_bytes = 4.0 * layer.groups * layer.ci * layer.co * layer.taps
    read = filter_bytes / machine_figures().copy_gbps  # bytes / (GB/s) = ns
    compute = 2.0 * layer.groups * rows_in * layer.ci * layer.co * layer.taps / gemm_gflops()
    live = layer.live_taps
    adds = live * layer.groups * rows_in * layer.co
    run = layer.co if layer.channels_last else 1
    return RawCost(max(read, compute) + 1.5 * _pass_ns(adds, run) + live * 3000
                   + _pass_ns(layer.inputs, 2) + 20000)


#: The overhead and pass terms of ``window`` and ``direct`` are measured times scaled by
#: this factor, the ratio between the other algorithms' estimates and their measured
#: times on the benchmark layers (their pass terms assume slower copies than NumPy
#: achieves on cache-sized buffers).
_MODEL_SCALE = 2.5


def _window_estimate(layer: Layer) -> RawCost | None:
    """``window``: a fixed handful of NumPy calls, but FLOPs for absent taps too."""
    phases, combo, unreached = window_plan(layer.axes)
    if combo is None:
        return None
    blocks = [p.blocks for p in phases]
    rows = layer.batch * math.prod(blocks)
    depth = math.prod(len(c.shifts) for c in combo) * layer.ci
    width = math.prod(c.count for c in combo) * layer.co
    inputs = layer.batch * layer.groups * layer.ci * math.prod(
        b + len(c.shifts) - 1 for b, c in zip(blocks, combo))
    cost = _pass_ns(inputs, layer.ci if layer.channels_last else 1)  # the padded copy
    cost += _pass_ns(layer.groups * rows * depth, len(combo[-1].shifts) * layer.ci)  # windows
    cost += _pass_ns(layer.groups * rows * width,
                     combo[-1].count * layer.co if layer.channels_last else 1)
    if unreached:
        cost += 0.5 * layer.outputs
    return _gemm_ns(rows, depth, width, layer.groups) + cost + _MODEL_SCALE * 15000


#: The share of one thread's FMA peak the numba plane kernel's multiply-adds are
#: modelled at, per number of output channels in its register blocks: its modelled
#: rates on AMD Zen 3 (26, 37 and 40 multiply-adds per ns, ``plane-kernel.json``) over
#: that machine's measured one-thread peak (98 GFLOP/s, 49 per ns, ``machines.json``).
#: Scaling by the peak measured here carries the model to other vector widths and FMA
#: units (``benchmarks/results/estimate-errors-zen5.json``).
_DIRECT_PEAK_SHARE = {1: 0.53, 2: 0.755, 3: 0.816}


#: The row kernel's time over the plane kernel's (the model's) on the layers numba
#: ``direct`` gives it: the geometric mean over random layers of last-axis stride 2
#: (``benchmarks/results/row-kernel-zen4.json``).
_ROWS_TIME = 0.8


def _direct_estimate(layer: Layer, pairs: bool, rows: bool, target: Target) -> RawCost:
    """Numba ``direct``.

    Channels-last layers with many groups of at most 4 products go to a per-position
    kernel, priced as passes.  All others go to the plane kernel: per (sample, group)
    plane, every tap of every phase is one vectorised multiply-add over the
    zero-bordered input window (border columns included), per input channel (pair, with
    ``pairs``) and block of up to three output channels.  ``rows``: the row kernel takes
    the layer, priced at :data:`_ROWS_TIME` of the plane kernel.
    """
    axes, phases = layer.axes, layer.phases
    if direct_per_position(layer.groups, layer.ci, layer.co, layer.channels_last):
        return RawCost(1.0 * layer.inputs * layer.co * layer.taps + 1.0 * layer.outputs)
    # Per phase, one pass over the window rows of its blocks (the first axis is cut
    # into bands; the window spans every shift of the others).
    span = 1
    for a, p in enumerate(phases):
        shifts = [shift for c in p.classes for shift in c.shifts] or [0]
        span *= p.blocks + (max(shifts) - min(shifts) if a else 0)
    if len(axes) == 2:  # or blocks of whole rows, in vectors (plane_schedule)
        lanes = target.lanes("float32")
        span = min(span, phases[0].blocks * -(-phases[1].blocks // lanes) * lanes)
    tap_phases = math.prod(sum(len(c.shifts) * c.count for c in p.classes) for p in phases)
    co_block = min(PLANE_CO_BLOCK, layer.co)
    units = -(-layer.ci // 2) if pairs else layer.ci  # input channels per instruction
    macs = (layer.batch * layer.groups * units * -(-layer.co // co_block) * co_block
            * tap_phases * span)
    items = layer.batch * layer.groups * (phases[0].blocks if len(axes) > 1 else 1)
    if len(axes) == 1 and line_segmented(axes[0], layer.ci):
        items *= -(-axes[0].output_size // (axes[0].stride * line_segment_inputs(
            layer.ci, axes[0].stride)))
    threads = (min(target.threads, items)
               if direct_worth_threads(layer.outputs, layer.ci, axes) else 1)
    # Filling the windows (channels last: a pixel's channels read in order, written to
    # Ci windows), and interleaving the last axis's phases into output rows: vector
    # stores for stride 1 and 2, one strided run per phase beyond.
    strided = layer.channels_last and layer.groups * max(layer.ci, layer.co) > 1
    fills = layer.inputs * (1.0 if strided else 0.5)
    stores = layer.outputs * ((2.0 if strided else 1.0) if axes[-1].stride <= 2 else 6.0)
    cost = RawCost(_MODEL_SCALE * ((fills + stores) / threads + 10000),
                   kernel=_MODEL_SCALE * macs / threads
                   / (_DIRECT_PEAK_SHARE[co_block] * thread_macs_per_ns(target)))
    if rows:
        cost = RawCost(cost.scaled * _ROWS_TIME, kernel=cost.kernel * _ROWS_TIME)
    return cost


#: Each estimate an algorithm's record names (``Algorithm.estimate``): a function of the
#: layer, the situation (``target``; ``numba_float``, numba usable on float sums;
#: ``pairs``, bfloat16 pairs; ``rows``, ``direct``'s row kernel takes the layer) and the
#: record's options, returning the raw cost or None where the algorithm is not offered
#: for the layer.
ESTIMATES = {
    "phase": lambda layer, situation, internal_last: _phase_estimate(layer, internal_last),
    "gemm": lambda layer, situation, internal_last: _gemm_estimate(layer, internal_last),
    "col2im": lambda layer, situation, internal_last: _col2im_estimate(
        layer, internal_last, situation["numba_float"]),
    "dense": lambda layer, situation: _dense_estimate(layer),
    "pointwise": lambda layer, situation: _pointwise_estimate(layer),
    "window": lambda layer, situation: _window_estimate(layer),
    "stream": lambda layer, situation: _stream_estimate(layer),
    "direct": lambda layer, situation: _direct_estimate(layer, situation["pairs"],
                                                        situation["rows"], situation["target"]),
    "direct-blocked": lambda layer, situation: blocked_estimate(layer, situation["target"]),
    "depthwise": lambda layer, situation: depthwise_estimate(layer, situation["target"]),
    "disjoint": lambda layer, situation: disjoint_estimate(layer, situation["target"]),
}
