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
from dataclasses import dataclass

import numpy as np

from .._kernels import REGISTRY, offered_algorithms
from .._kernels.blocked_channels import blocked_line_taps
from .._kernels.blocked_groups import blocked_group_span, blocked_vector_bytes
from .._kernels.col2im import products_in_place, rows_kernels_store
from .._kernels.dense import DENSE_MAX_ELEMENTS
from .._kernels.depthwise_schedule import (
    block_shape,
    chunk_multiply_adds,
    last_axis_padding,
    lines_multiply_adds,
    takes_lines,
)
from .._kernels.pointwise import in_place, reached, takes_layer
from .._kernels.schedules import (
    PLANE_CO_BLOCK,
    blocked_segments,
    blocked_shape,
    direct_per_position,
    direct_worth_threads,
    line_segment_inputs,
    line_segmented,
    numba_scatters,
    rows_take_layer,
)
from .._kernels.window import window_plan
from .._plan.geometry import (
    AxisPhases,
    axis_phases,
    live_classes,
    tap_reads,
    tap_windows,
    three_axes,
)
from .._plan.rules import AxisPlan
from .._runtime.target import Target
from .figures import gemm_gflops, machine_figures, thread_macs_per_ns

__all__ = ["CALL_NS", "ESTIMATES", "Layer", "RawCost", "blocked_estimate",
           "depthwise_estimate", "estimate_ns", "raw_estimates"]

#: What one call of any algorithm costs besides its modelled work (ns): about one
#: call's Python and NumPy dispatch.  Held-out suites ranked best with 10 us against
#: 1 us and about as well as with 30 us (``benchmarks/results/estimate-errors-xeon.json``).
CALL_NS = 10000.0


@dataclass(frozen=True)
class RawCost:
    """One algorithm's raw estimate (ns): ``scaled``, the modelled passes and per-call
    terms; ``gemm``, BLAS multiply-adds at the measured GEMM rate; and ``kernel``, a
    numba kernel's multiply-adds at a modelled share of the measured FMA peak.  Numbers
    add to ``scaled``.
    """

    scaled: float
    gemm: float = 0.0
    kernel: float = 0.0

    def __add__(self, other):
        if isinstance(other, RawCost):
            return RawCost(self.scaled + other.scaled, self.gemm + other.gemm,
                           self.kernel + other.kernel)
        return RawCost(self.scaled + other, self.gemm, self.kernel)

    __radd__ = __add__

    @property
    def total(self) -> float:
        return self.scaled + self.gemm + self.kernel

    @property
    def parts(self) -> tuple[float, float, float]:
        """``(scaled, gemm, kernel)``: what the wisdom keeps beside a measured time."""
        return (self.scaled, self.gemm, self.kernel)


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


@dataclass(frozen=True)
class Layer:
    """The quantities every estimator needs, derived once per problem."""

    batch: int
    groups: int
    ci: int
    co: int
    axes: tuple[AxisPlan, ...]
    channels_last: bool
    phases: tuple[AxisPhases, ...]

    @classmethod
    def of(cls, batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
           channels_last: bool) -> Layer:
        groups, ci, co = weights_shape[:3]
        return cls(batch, groups, ci, co, tuple(axes), channels_last,
                   tuple(axis_phases(axis) for axis in axes))

    @property
    def taps(self) -> int:
        return math.prod(axis.kernel_size for axis in self.axes)

    @property
    def spatial_in(self) -> tuple[int, ...]:
        return tuple(axis.input_size for axis in self.axes)

    @property
    def inputs(self) -> int:
        return self.batch * self.groups * self.ci * math.prod(self.spatial_in)

    @property
    def outputs(self) -> int:
        return self.batch * self.groups * self.co * math.prod(a.output_size for a in self.axes)

    @property
    def live_taps(self) -> int:
        """Taps (over every axis) that reach some output: col2im's adds, one per tap."""
        return math.prod(sum(w is not None for w in tap_windows(axis)) for axis in self.axes)

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(p.blocks for p in self.phases)

    @property
    def rows_phase(self) -> int:
        return self.batch * math.prod(self.blocks)

    @property
    def padding(self) -> bool:
        return any(p.pad_low or p.pad_high for p in self.phases)

    @property
    def ncx_run(self) -> int:
        """Channels-first products are stored along the last axis: whole rows of blocks
        when its stride is 1, single elements between the other phases' otherwise."""
        return self.blocks[-1] if self.axes[-1].stride == 1 else 1


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


#: ``direct-blocked`` keeps a block of outputs' channels in registers: for at most this
#: many output channels per group, but for wider layers on AVX-512 (see
#: :func:`blocked_offered`; ``benchmarks/results/direct-blocked-zen4.json``).
BLOCKED_MAX_CHANNELS = 64


def blocked_offered(ci: int, co: int, target: Target, channels_last: bool = False) -> bool:
    """Whether the cost model offers ``direct-blocked`` for these channels per group.

    Not for at most half a vector of output channels: the block holds output channels
    in its lanes, so most of each multiply-add would be padding, while the plane kernel
    of ``direct`` vectorises along space.  Nor for at most four products per group
    (``ci * co``), which ``direct``'s per-position kernel takes.  Not for more than
    :data:`BLOCKED_MAX_CHANNELS` output channels of channels-first layers on 32-byte
    vectors; with 64-byte ones, or channels last, for any number of them
    (``benchmarks/results/direct-blocked-zen4.json``, ``calibration-zen4.json``; on an
    AMD EPYC Zen 3, channels-last layers of 128 output channels ran 1.3-1.6x faster
    on it than on what was offered, a channels-first one slower:
    ``direct-blocked-zen3.json``, ``wide_on_avx2``).  Channels first too, where
    ``direct``'s row kernel competes: it was faster on AMD Zen 4, and slower on an Intel Xeon (DCGAN 256->128
    16x16: 24 ms against 31; 512->256 8x8: 33 ms against 48,
    ``benchmarks/results/blocked-channels-first-xeon.json``), so measured planning
    decides between them.
    """
    wide = target.vector_bytes == 64 or channels_last
    return (2 * co > target.lanes("float32") and (co <= BLOCKED_MAX_CHANNELS or wide)
            and ci * co > 4)


#: ``direct-blocked`` on channels-first data pays about one strided pass over the input
#: (a channels-last copy, or each block reading Ci distant planes).
_BLOCKED_NCX_INPUT = 1.0
#: Blocks whose loop over taps and input channels is at least this long stream their
#: weights from L2 or L3 at the FMA rate (``benchmarks/results/direct-blocked-zen4.json``).
_BLOCKED_STREAMED_LOOP = 512


def _blocked_macs(layer: Layer, width: int, pixels: int, edge: int, parts: int,
                  lines: int, segments: int) -> float:
    """Multiply-adds of ``direct-blocked``: the output channels of each of ``parts``
    (the groups, or one of them all side by side) padded to ``width``, each output
    summing the taps that read inside the input.

    Per phase of the last axis, the outputs whose taps all read inside go in blocks of
    ``pixels`` across the lines (unless the lines hold fewer than a block of them).
    The other outputs go in blocks across a group of lines that read with the same
    taps, where the group holds a block; else one at a time, at ``edge`` outputs'
    worth each.  Groups are runs of consecutive lines of one phase, along the axis
    before the last (for 1-D layers: the samples), whose taps all read inside;
    ``segments`` of a line (more than one) are groups of their own; ``lines`` is the
    layer's count of them."""
    *outer, last = layer.axes
    reads, runs = tap_reads(last)
    inside = sum(whole * taps for whole, taps in runs if whole * lines >= pixels)
    outer_reads = [tap_reads(axis) for axis in outer]
    every = math.prod(r for r, _ in outer_reads)  # the lines' taps along the other axes
    grouped = 0
    if segments == 1 and not outer:
        grouped = every if layer.batch >= pixels else 0
    elif segments == 1:
        at = len(outer) - 1 if outer[-1].output_size > 1 else 0
        others = math.prod(r for a, (r, _) in enumerate(outer_reads) if a != at)
        grouped = others * sum(whole * taps for whole, taps in outer_reads[at][1]
                               if whole >= pixels)
    per_sample = every * inside + (reads - inside) * (grouped + edge * (every - grouped))
    return layer.batch * parts * width * layer.ci * per_sample


#: ``direct-blocked``'s estimates are this many times the times it was measured at (the
#: units of the other estimates; ``benchmarks/results/direct-blocked-zen4.json``).
_BLOCKED_SCALE = 3.0


def blocked_estimate(layer: Layer, target: Target) -> RawCost | None:
    """``direct-blocked``, in the units of the other estimates, or None where
    :func:`blocked_offered` declines the layer at the width the kernel takes it at.

    Multiply-adds at the FMA peak of the threads (the ``kernel`` part; on fewer threads
    where the layer has fewer lines, or segments of lines, than threads); lines whose
    output channels are not whole vectors, or are channels first, go through a copy;
    channels-first input costs a strided pass; a line whose weights are far beyond L1
    and whose blocks are few reloads them from L2, its multiply-adds at half the rate
    (unless its loop is long enough to stream them).  Groups taken side by side (blocks across groups, at the width
    :func:`~convtranspose._kernels.blocked_groups.blocked_vector_bytes` gives) are one
    group of their lines."""
    axes, parts, co = layer.axes, layer.groups, layer.co
    target = target.replace(vector_bytes=blocked_vector_bytes(parts, co, 4, axes[-1],
                                                              target.vector_bytes))
    if not blocked_offered(layer.ci, co, target, layer.channels_last):
        return None
    if blocked_group_span(parts, co, 4, axes[-1], target.vector_bytes):
        parts, co = 1, parts * co
    lanes, vectors, _, pixels = blocked_shape(4, co, axes[-1], target.vector_bytes)
    width = lanes * vectors
    edge = 2 if vectors > 4 else 3  # more than four vectors keep one output's FMAs busy
    lines = layer.batch * parts * math.prod(axis.output_size for axis in axes[:-1])
    segments = blocked_segments(lines, axes[-1], target.threads)
    macs = _blocked_macs(layer, width, pixels, edge, parts, lines, segments)
    copied = layer.outputs if co != width or not layer.channels_last else 0
    last = axes[-1]
    line_taps = blocked_line_taps(axes)
    line_weights = line_taps * layer.ci * width
    # Such a line's few blocks per phase find their weights in L2, not L1: the FMAs run
    # at about half rate (FCN-32x: 344 KB per line, two blocks per phase; a loop of
    # 512 or more taps x channels streams them at the full rate).
    reloads = (line_weights * 4 > 131072 and last.output_size < 3 * 8 * last.stride
               and line_taps / last.stride * layer.ci < _BLOCKED_STREAMED_LOOP)
    transposed = 0 if layer.channels_last else layer.inputs * _BLOCKED_NCX_INPUT
    busy = max(1, min(target.threads, lines * segments))
    return RawCost(_BLOCKED_SCALE * (0.3 * copied + transposed + 50.0 * lines + 20000),
                   kernel=_BLOCKED_SCALE * macs * (2 if reloads else 1)
                   / (busy * thread_macs_per_ns(target)))


def depthwise_estimate(layer: Layer, target: Target) -> RawCost | None:
    """``depthwise``, in the units of ``direct-blocked``'s (a register-blocked kernel of
    the same kind), or None for a layer with more than one input channel per group or
    with one group (no depthwise layer; ``direct-blocked`` takes those).

    Memory-bound: the bytes its passes move at the measured copy rate
    (:func:`.figures.machine_figures`, read plus written), and the multiply-adds of
    every block at the FMA peak of the threads, the padding's included.  Along lines
    (:func:`~convtranspose._kernels.depthwise_schedule.takes_lines`): the data read and
    the result written; else the padded copy's pass and the kernel's (the copy read,
    the output written, and again through a line tile for channels-first outputs or
    channels that are not whole vectors), every tap of the last axis's phase in blocks
    of :func:`~convtranspose._kernels.depthwise_schedule.block_shape`.
    """
    if layer.ci != 1 or layer.groups == 1 or len(layer.axes) > 3:
        return None
    lanes = target.lanes("float32")
    if takes_lines((layer.groups, 1, layer.co), layer.axes, layer.channels_last, lanes):
        moved = 4.0 * (layer.inputs + layer.outputs)
        macs = lines_multiply_adds(layer.batch, layer.groups, layer.co, layer.axes, lanes)
        items = layer.batch * layer.groups
    else:
        axes = three_axes(layer.axes)
        outputs, vectors = block_shape(lanes, 4)
        width = lanes * vectors
        channels = -(-layer.groups * layer.co // width) * width
        length = last_axis_padding(axes[2], outputs)[1]
        padded = channels * layer.batch * axes[0].input_size * axes[1].input_size * length
        whole = layer.channels_last and channels == layer.groups * layer.co
        tiled = 0 if whole else layer.outputs
        moved = 4.0 * (layer.inputs + 2 * padded + layer.outputs + 2 * tiled)
        macs = layer.batch * channels * chunk_multiply_adds(axes, outputs)
        items = layer.batch * axes[0].output_size * axes[1].output_size  # lines
        items *= 1 if layer.channels_last else channels // width  # and chunks
    busy = max(1, min(target.threads, items))
    return RawCost(_BLOCKED_SCALE * (moved / machine_figures().copy_gbps + 20000),
                   kernel=_BLOCKED_SCALE * macs / (busy * thread_macs_per_ns(target)))


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
}
