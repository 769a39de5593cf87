"""Numba ``direct``'s plane kernel (channels first, and channels-last layers the
per-position kernel does not take).

Per (batch, group) plane, in cache-sized bands of the first axis, the input is copied
into a zero-bordered window in which every tap of every phase reads in range;
flattened, one tap of one phase is then a single long multiply-add over all output
positions of the phase, computed in register blocks of a few vectors of positions
times up to three output channels (:mod:`.vectors`), and the phases of the last axis
are interleaved into the output rows.  In 2-D a block may instead take whole output
rows (no border columns), whichever computes fewer positions.  bfloat16 operands summed
in float32 are multiplied as pairs of input channels with ``vdpbf16ps`` where that is
exact (:func:`.modes.bfloat16_pair_bits`); other float16 and bfloat16 data is widened as
the windows are filled, and float16 and bfloat16 results are rounded as they are stored.
Channels-last layers that the per-position kernel does not take (too few channels for
vectors along them, or more than four products per group) use it too, with the
channel stride.
The block's source is generated per shape (:func:`_plane_block_source`, compiled by
:mod:`.codegen`).
"""

from __future__ import annotations

import math

import numpy as np

from ..._plan.geometry import axis_phases
from ..._plan.rules import AxisPlan
from ..._runtime.caches import kept
from ..schedules import (
    KEEP,
    frozen_all,
    half_load,
    plane_lanes,
    plane_schedule,
    planes_block_shape,
)
from .kernel_cache import cached_njit
from .launch import array_kind, parallel_kernel
from .modes import LOADS, STORES, bfloat16_pair_bits, pair_windows, plain_windows, store_mode

#: The plane kernel computes each plane in bands of the first axis whose window and
#: accumulator hold about this many elements (cache-sized;
#: ``benchmarks/results/plane-kernel.json``).
BAND_ELEMENTS = 1 << 16


#: The plane kernel sums the input channels in chunks whose windows hold about this
#: many elements (128 KB of float32: L2, 32 pages): each block of a run reads every
#: channel's window, and hundreds of windows (a page or more each) overflow the TLB;
#: but each chunk is a pass that reloads and stores the accumulators, so chunks are as
#: large as L2 allows (the whole sum in one pass when a group has at most this many
#: window elements) (``benchmarks/results/plane-kernel.json``).
_CHUNK_WINDOW_ELEMENTS = 1 << 15


def _plane_block_source(lanes: int, co_block: int, vectors: int, pairs: bool = False,
                        segments: int = 0) -> str:
    """Source of the plane kernel's block: ``vectors * lanes`` window positions of ``co_block`` channels.

    The ``co_block * vectors`` accumulators are vector variables (registers) for
    the whole sum over the phase's taps and input channels: per tap and input
    channel, each output channel's weight is broadcast once and each window vector
    loaded once, then used by every channel (a pass over an accumulator array per
    channel instead loads and stores it every few terms: about half the speed;
    ``benchmarks/results/plane-kernel.json``).  Weights
    are laid out ``(..., tap, Ci, co_block)``: per tap, ``starts[m]`` is its first
    weight and ``reads[m]`` its first window element (of input channel 0).

    With ``pairs`` each window and weight element is a pair of bfloat16 input
    channels (``uint32``), multiplied and added by :func:`vector_dot_pairs`.  With
    ``segments`` the block covers ``vectors // segments`` window rows ``row_pitch``
    apart, ``segments`` vectors of each (0: one flat run of positions).
    """
    accumulators = [[f"acc_{c}_{v}" for v in range(vectors)] for c in range(co_block)]
    per_row = segments or vectors
    offsets = [(f"{v // per_row} * row_pitch + " if v >= per_row else "") + str(v % per_row * lanes)
               for v in range(vectors)]
    lines = ["def plane_block(windows, weights, acc, acc_at, channel_pitch, reads, starts, taps,",
             "                channels, window_volume, read_at, factor_at, resume, row_pitch):"]
    lines += ["    if resume:"]
    lines += [f"        {name} = vector_load(acc, acc_at + {c} * channel_pitch + {v * lanes}, {lanes})"
              for c, row in enumerate(accumulators) for v, name in enumerate(row)]
    lines += ["    else:"]
    lines += [f"        {name} = vector_zero(acc, {lanes})" for row in accumulators for name in row]
    lines += ["    for m in range(taps):",
              "        read = reads[m] + read_at",
              "        factor = starts[m] + factor_at",
              "        for _ in range(channels):"]
    lines += [f"            w_{c} = vector_splat_at(weights, factor + {c}, {lanes})"
              for c in range(co_block)]
    for v in range(vectors):
        lines.append(f"            x = vector_load(windows, read + {offsets[v]}, {lanes})")
        lines += [f"            {row[v]} = vector_dot_pairs(x, w_{c}, {row[v]})" if pairs
                  else f"            {row[v]} = vector_fma(x, w_{c}, {row[v]})"
                  for c, row in enumerate(accumulators)]
    lines += ["            read += window_volume",
              f"            factor += {co_block}"]
    lines += [f"    vector_store(acc, acc_at + {c} * channel_pitch + {v * lanes}, {name})"
              for c, row in enumerate(accumulators) for v, name in enumerate(row)]
    return "\n".join(lines) + "\n"


@cached_njit(nogil=True)
def _blocked_weights(weights, co_block, halves):  # pragma: no cover - compiled
    """(G, Ci, Co, K) -> flat (G, Co blocks, K, Ci / halves, co_block, halves), zeros past Co and Ci.

    Per block of output channels and tap, the weights of every input channel in the
    order the plane kernel's block takes them; ``halves = 2`` keeps the weights of
    input channels ``2u`` and ``2u + 1`` side by side (the pairs of bfloat16 bits
    that ``vdpbf16ps`` multiplies), 1 one channel per element.
    """
    groups, ci_count, co_count, k_volume = weights.shape
    co_blocks = (co_count + co_block - 1) // co_block
    units = (ci_count + halves - 1) // halves
    unit_volume = units * co_block * halves  # elements per tap
    blocked = np.zeros(groups * co_blocks * k_volume * unit_volume, weights.dtype)
    for g in range(groups):
        for ci in range(ci_count):
            for co in range(co_count):
                into = (((((g * co_blocks + co // co_block) * k_volume * units + ci // halves)
                          * co_block + co % co_block) * halves) + ci % halves)
                for k in range(k_volume):
                    blocked[into + k * unit_volume] = weights[g, ci, co, k]
    return blocked


@kept("compiled kernels", maxsize=None)
def planes_kernel(lanes: int, co_block: int, vectors: int, pairs: bool = False,
                   segments: int = 0, mode: int = 0, load_mode: int = 0):
    """The channels-first plane kernel for one block shape (compiled on first use).

    ``pairs``: the bfloat16 kernel (:func:`bfloat16_pair_bits`): source is the data's
    ``uint16`` bits, weights ``uint32`` pairs (:func:`_blocked_weights`), and a window
    element holds two input channels (``vdpbf16ps``).  ``segments``: blocks of whole
    output rows, ``segments`` vectors each (2-D layers; see
    :func:`convtranspose._kernels.schedules.plane_schedule`); 0: blocks of one flat run.
    ``mode``: ``KEEP`` stores the sums, ``FLOAT16``/``BFLOAT16`` their float16 or
    bfloat16 bits (plus the bias, if any), rounded once as they are stored.
    ``load_mode``: ``KEEP`` reads the data as it is, ``FLOAT16``/``BFLOAT16`` from
    its ``uint16`` bits (:data:`LOADS`).
    """
    from .codegen import compile_source, compile_template
    from .vectors import vector_interleave, vector_load, vector_store

    block = compile_source(_plane_block_source(lanes, co_block, vectors, pairs, segments),
                           "plane_block")
    put, load = STORES[mode], LOADS[load_mode]
    # Sums stored as they are interleave the two phases of a stride-2 last axis with
    # whole vectors (rounded ones go through `put`, one element at a time).
    interleave_vectors = mode == KEEP
    vector_run = np.uint64(lanes)
    block_length = lanes * vectors
    row_blocks = segments > 0
    block_rows = vectors // segments if row_blocks else 1
    new_windows = pair_windows if pairs else plain_windows
    # Input channel ci fills half (ci & low) of window unit ci >> shift.
    halves, shift, low = (np.uint64(2), np.uint64(1), np.uint64(1)) if pairs else (
        np.uint64(1), np.uint64(0), np.uint64(0))

    return compile_template("planes", dict(
        np=np, _CHUNK_WINDOW_ELEMENTS=_CHUNK_WINDOW_ELEMENTS, block=block, put=put, load=load,
        vector_interleave=vector_interleave, vector_load=vector_load, vector_store=vector_store,
        lanes=lanes, co_block=co_block, segments=segments, interleave_vectors=interleave_vectors,
        vector_run=vector_run, block_length=block_length, row_blocks=row_blocks,
        block_rows=block_rows, new_windows=new_windows, halves=halves, shift=shift, low=low,
    ))["kernel"]


@kept("kernel schedules", maxsize=256)
def _window_tables(axes3: tuple[AxisPlan, ...], groups: int, ci: int, co: int,
                   channel_steps: tuple[int, int] | None = None):
    """Tables of :func:`planes_kernel` (cached per shape; read-only).

    ``channel_steps``: the elements between one channel's data and the next's, and
    between one output channel's results and the next's, channels first (default: the
    layer's own input and output volumes; a line segment reads and writes its part of
    the whole line's).

    ``geometry[a]`` is (window size, first input index in the window, stride,
    output positions per phase); ``tap_offset`` is each tap's start in the
    flattened window, ``tap_k`` its flat kernel index ``k1 * K2 * K3 + k2 * K3 + k3``
    (summed over the axes); ``counts[a, p]`` the output positions of phase ``p``.
    """
    phases = [axis_phases(axis) for axis in axes3]
    widest = max(1, max(len(c.shifts) for p in phases for c in p.classes))
    # Phases are ``y mod stride`` of outputs ``y < Y``: a stride past Y needs Y rows.
    stride_max = max(min(axis.stride, axis.output_size) for axis in axes3)
    kernel3 = tuple(a.kernel_size for a in axes3)
    geometry = np.zeros((3, 4), np.int64)
    for a, (axis, p) in enumerate(zip(axes3, phases)):
        shifts = [shift for c in p.classes for shift in c.shifts] or [0]
        geometry[a] = (p.blocks + max(shifts) - min(shifts), min(shifts), axis.stride, p.blocks)
    window_strides = (geometry[1, 0] * geometry[2, 0], geometry[2, 0], 1)
    kernel_strides = (kernel3[1] * kernel3[2], kernel3[2], 1)
    tap_k = np.zeros((3, stride_max, widest), np.int64)
    tap_offset = np.zeros((3, stride_max, widest), np.int64)
    tap_count = np.zeros((3, stride_max), np.int64)
    counts = np.zeros((3, stride_max), np.int64)
    for a, (axis, p) in enumerate(zip(axes3, phases)):
        for phase in range(min(axis.stride, axis.output_size)):
            counts[a, phase] = -(-(axis.output_size - phase) // axis.stride)
        for c in p.classes:
            for i in range(c.count):
                phase = c.first + i
                tap_count[a, phase] = len(c.shifts)
                for m, (shift, k) in enumerate(zip(c.shifts, c.taps[i])):
                    tap_k[a, phase, m] = k * kernel_strides[a]
                    tap_offset[a, phase, m] = (shift - geometry[a, 1]) * window_strides[a]
    inputs = tuple(a.input_size for a in axes3)
    outputs = tuple(a.output_size for a in axes3)
    steps = channel_steps or (math.prod(inputs), math.prod(outputs))
    sizes = np.array((groups, ci, co, math.prod(inputs), math.prod(outputs), math.prod(kernel3))
                     + outputs + inputs + tuple(steps), np.int64)
    return frozen_all(sizes, geometry, counts, tap_k, tap_offset, tap_count)


def direct_planes(data, weights, axes3, dtype, out, target, threads, channels_last, derived,
                  bias=None):
    """The plane kernel over every (sample, group) plane, into ``out`` (C-contiguous)."""
    source, pairs, load_mode = plane_source(data, weights, dtype, derived, target)
    mode = store_mode(out.dtype, dtype)
    run = plane_runner(data.shape[0], weights, axes3, dtype, target, threads, channels_last,
                       derived, pairs, mode, bias, load_mode)
    run(source, stored(out, mode))


def stored(out: np.ndarray, mode: int) -> np.ndarray:
    """``out`` (C-contiguous) as the plane kernel stores into it in ``mode``: flat, its
    ``uint16`` bits when it rounds to float16 or bfloat16."""
    flat = out.reshape(-1)
    return flat if mode == KEEP else flat.view(np.uint16)


def plane_source(data, weights, dtype, derived, target) -> tuple[np.ndarray, bool, int]:
    """``(source, pairs, load_mode)``: the data as the plane kernel reads it (flat; its
    ``uint16`` bits as bfloat16 pairs or as half-precision loads), whether it multiplies
    bfloat16 pairs (:func:`.modes.bfloat16_pair_bits`) and how it loads the data."""
    lanes = planes_block_shape(np.dtype(dtype).itemsize, weights.shape[2],
                               target.vector_bytes)[0]
    source = bfloat16_pair_bits(data, weights, dtype, lanes, derived, target)
    pairs = source is not None
    load_mode = KEEP if pairs else half_load(data.dtype, target.f16c)
    if load_mode != KEEP:
        source = np.ascontiguousarray(data).view(np.uint16).reshape(-1)
    elif not pairs:
        if data.dtype != dtype or not data.flags.c_contiguous:
            data = np.ascontiguousarray(data, dtype)
        source = data.reshape(-1)
    return source, pairs, load_mode


def plane_runner(batch, weights, axes3, dtype, target, threads, channels_last, derived, pairs,
                 mode=KEEP, bias=None, load_mode=KEEP, channel_steps=None):
    """``run(source, target)``: the plane kernel over flat data (its bits when ``pairs``
    or ``load_mode`` says so) into the flat result (its ``uint16`` bits when rounding to
    ``mode``, the ``bias`` added before), with everything but the data prepared: the
    reordered weights (kept in ``derived``), the tables, the schedule and the kernel.
    ``channel_steps``: as :func:`_window_tables` takes them (channels first).
    """
    groups, ci, co = weights.shape[:3]
    tables = _window_tables(axes3, groups, ci, co, channel_steps)
    lanes, co_block, most_vectors = planes_block_shape(np.dtype(dtype).itemsize, co,
                                                       target.vector_bytes)
    key = ("planes", "pairs" if pairs else np.dtype(dtype).str, co_block)
    w = derived.get(key)
    if w is None:  # milliseconds for a large filter (benchmarks/results/weights-memo.json)
        if pairs:
            bits = np.ascontiguousarray(weights).view(np.uint16)
            w = _blocked_weights(bits.reshape(groups, ci, co, -1), co_block, 2).view(np.uint32)
        else:
            w = _blocked_weights(np.ascontiguousarray(weights, dtype).reshape(groups, ci, co, -1),
                                 co_block, 1)
        w = derived[key] = frozen_all(w)[0]
    units = -(-ci // 2) if pairs else ci  # window elements per position
    geometry = tables[1]
    blocks1 = int(geometry[0, 3])
    plane = int(geometry[1, 0] * geometry[2, 0])
    tail = int((geometry[1, 3] - 1) * geometry[2, 0] + geometry[2, 3])
    # Bands of the first axis: window and accumulator of about BAND_ELEMENTS, and at
    # least two items per thread, or a layer of few planes (FCN-32x: one) leaves the
    # other threads idle (``benchmarks/results/plane-kernel.json``).
    widest = BAND_ELEMENTS // (plane * (units + co_block * int(geometry[2, 2])))
    planes = batch * groups
    min_bands = -(-2 * threads // max(1, planes)) if threads > 1 else 1

    def schedule(lanes):
        # 2-D (the unit middle axis: window rows `plane` apart) may take blocks of rows.
        row_segments = -(-int(geometry[2, 3]) // lanes) if geometry[1, 0] == 1 else 0
        return plane_schedule(blocks1, plane, tail, widest, min_bands, lanes, most_vectors,
                              co_block, row_segments)

    # Half vectors where they compute fewer positions (AVX-512's 32 registers keep the
    # accumulators; bfloat16 pairs take whole vectors).
    lanes, (band, vectors, _, segments) = plane_lanes(schedule, lanes,
                                                      target.vector_bytes == 64 and not pairs)
    items = planes * -(-blocks1 // band)
    kernel = planes_kernel(lanes, co_block, vectors, pairs, segments, mode, load_mode)
    added = np.empty(0, dtype) if bias is None or mode == KEEP else np.ascontiguousarray(
        bias, dtype)

    addresses: dict = {}

    def run(source, result):
        # Only the data and the result vary in type from call to call.
        kept = (addresses, (array_kind(source), array_kind(result)))
        parallel_kernel(kernel, (source, w, result, added, *tables, band, channels_last),
                        items, threads, kept=kept)

    return run
