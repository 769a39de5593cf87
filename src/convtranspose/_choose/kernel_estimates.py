"""The estimates of the register-block numba kernels: ``direct-blocked``, ``depthwise``
and ``disjoint``, in ``direct-blocked``'s units (:data:`_BLOCKED_SCALE` times the
measured times), read by :data:`.estimates.ESTIMATES`.  Each models its kernel's
schedule (:mod:`convtranspose._kernels`' pure modules), never its code."""

from __future__ import annotations

import math

import numpy as np

from .._kernels.blocked_channels import blocked_line_taps
from .._kernels.blocked_groups import blocked_group_span, blocked_vector_bytes
from .._kernels.depthwise_schedule import (
    block_shape,
    chunk_multiply_adds,
    last_axis_padding,
    lines_multiply_adds,
    takes_lines,
)
from .._kernels.disjoint_plan import CHANNEL_BLOCK, block_entries, disjoint_plan
from .._kernels.disjoint_plan import takes_layer as takes_disjoint
from .._kernels.schedules import blocked_segments, blocked_shape
from .._plan.geometry import tap_reads, three_axes
from .._runtime.machine import l1_data_cache_bytes, l2_cache_bytes
from .._runtime.target import Target
from .costs import Layer, RawCost
from .figures import machine_figures, thread_macs_per_ns

__all__ = ["blocked_estimate", "blocked_offered", "depthwise_estimate", "disjoint_estimate"]


def blocked_offered(ci: int, co: int, target: Target) -> bool:
    """Whether the cost model offers ``direct-blocked`` for these channels per group.

    Not for at most half a vector of output channels: the block holds output channels
    in its lanes, so most of each multiply-add would be padding, while the plane kernel
    of ``direct`` vectorises along space.  Nor for at most four products per group
    (``ci * co``), which ``direct``'s per-position kernel takes.  Beyond that, for
    any number of output channels, in either layout and on every vector width: where
    ``direct``'s row kernel or the BLAS forms compete, measured planning decides.  It
    was once withheld from channels-first layers of more than 64 output channels on
    32-byte vectors, where it then ran slower; with its passes over output channels
    it is the fastest of them on some (prepared calls on an AMD EPYC Zen 3, AVX2:
    DCGAN-up N1 1024->512 4x4 3.2 ms against 4.7-5.1, DCGAN N16 256->128 16x16 30.5
    against 32.2-36.5) and slower on others (U-Net N1 512->256 32x32 k2 s2 11.3 against
    ``col2im-ncx``'s 6.8; ``benchmarks/results/direct-blocked-zen3.json``,
    ``wide_channels_first``).
    """
    return 2 * co > target.lanes("float32") and ci * co > 4


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
    if not blocked_offered(layer.ci, co, target):
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


#: ``disjoint`` pays this many nanoseconds per input it copies along the output lines
#: (a scalar loop: a load, a test and a store).
_DISJOINT_COPY_NS = 1.0


def disjoint_estimate(layer: Layer, target: Target) -> RawCost | None:
    """``disjoint``, in the units of ``direct-blocked``'s, or None for a channels-last
    layer or one whose taps overlap.

    The kernel's plan (:func:`~convtranspose._kernels.disjoint_plan.disjoint_plan`)
    gives its register blocks: their vector multiply-adds (unused entries of a block and
    lanes past a line's end included) at the FMA peak of the threads, twice as long
    where a block's vectors over the input channels exceed half the L1 cache or a band's
    copies of the input lines half the L2 cache (one output row reading that much),
    three times where both; the data read and the result written at the measured copy
    rate, and the inputs copied along the lines, band by band and once per chunk of
    output channels, at :data:`_DISJOINT_COPY_NS` each."""
    if layer.channels_last or not takes_disjoint(layer.axes):
        return None
    lanes = target.lanes("float32")
    shape = (layer.groups, layer.ci, layer.co)
    plan = disjoint_plan(layer.batch, shape, layer.axes, lanes, target.threads, 4,
                         l2_cache_bytes())
    ci, x1, co, line, chunks = (int(plan.sizes[i]) for i in (0, 4, 1, 10, 11))
    entries = block_entries(lanes, 4)
    per_row = int((-(-np.diff(plan.group_first) // entries)).sum()) * entries
    rows0 = int((plan.rows0 >= 0).sum())
    images = layer.batch * layer.groups
    vector_fmas = images * -(-co // CHANNEL_BLOCK) * CHANNEL_BLOCK * rows0 * per_row * ci
    copies = images * chunks * ci * int(plan.band_rows.sum()) * x1 * line
    from_l3 = 4 * ci * int(plan.sizes[15]) * x1 * line > l2_cache_bytes() // 2
    # A block's loop over the input channels reads its input and weight vectors from
    # L2 once they pass half of L1 (3-D k2 s2 128->64: ranked second, 1.4x the fastest,
    # ``benchmarks/results/disjoint-zen4.json``, ``random_suite_1_exhaustive``).
    from_l2 = 4 * ci * (CHANNEL_BLOCK + entries) * lanes > l1_data_cache_bytes() // 2
    moved = 4.0 * (layer.inputs + layer.outputs)
    busy = max(1, min(target.threads, plan.items))
    return RawCost(_BLOCKED_SCALE * (moved / machine_figures().copy_gbps
                                     + _DISJOINT_COPY_NS * copies / busy + 20000),
                   kernel=_BLOCKED_SCALE * vector_fmas * lanes * (1 + from_l2 + from_l3)
                   / (busy * thread_macs_per_ns(target)))
