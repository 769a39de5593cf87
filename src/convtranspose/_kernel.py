"""The one N-D grouped kernel that computes every dialect's canonical plan.

Input: data ``(N, G*Ci, X...)`` (or channels last ``(N, X..., G*Ci)``), weights
``(G, Ci, Co, K...)`` and one :class:`~convtranspose._plan.AxisPlan` per spatial axis.
Output: ``(N, G*Co, Y...)`` (or channels last), in the accumulation dtype.

Several algorithms (:data:`ALGORITHMS`) compute the same sums;
:func:`choose_algorithm` picks one per shape (cached) from a cost model, and
``CONVTRANSPOSE_ALGORITHM`` (or the ``algorithm`` argument of
:func:`transposed_convolution`) forces one.  ``-nxc``/``-ncx`` variants differ
only in the internal layout of their GEMM and copies (see docs/performance.md).

``phase-nxc``, ``phase-ncx`` (sub-pixel decomposition)
    Output element ``o`` of an axis with stride ``s`` belongs to phase ``o mod s``;
    a phase only receives the taps ``k`` with ``k*d = o + offset (mod s)``, each
    from input ``o // s + shift``.  Adjacent phases with the same shifts form a
    class: one im2col of the shifted inputs and one dense GEMM (phases and output
    channels as the GEMM's columns) computes the whole class, and the result is
    copied once into a strided view of the output.  No scatter-add, no
    zero-inserted input, FLOPs only for taps that exist.
``col2im-nxc``, ``col2im-ncx``
    One GEMM gives every tap's contribution ``(taps * Co)`` per input position,
    then a strided add per tap.  Cheapest when ``Co * taps`` is small next to
    ``Ci * taps / stride**D`` (few output channels).
``dense``
    For tiny layers: the layer as one ``(C_in*X, C_out*Y)`` matrix (index
    pattern cached per shape) and one matrix product, in the caller's layout;
    a handful of NumPy calls, for the lowest call overhead.
``direct``
    Per-tap multiply-add for depthwise and few-channel groups (a numba kernel
    when numba is installed, else NumPy), where a GEMM would have tiny operands.
``direct-blocked``
    For up to 64 output channels per group (numba only; without it the NumPy
    phases): blocks of outputs with their channels in SIMD registers, each tap
    and input channel one broadcast multiply-add, no im2col and no scatter.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import _blas
from ._environment import switch
from ._plan import AxisPlan

__all__ = ["ALGORITHMS", "choose_algorithm", "describe_algorithm", "transposed_convolution"]

#: Every algorithm; ``-nxc``/``-ncx`` name the layout of the GEMM and of its copies
#: (channels or spatial positions contiguous), independent of the input's layout.
ALGORITHMS = ("gemm-nxc", "gemm-ncx", "phase-nxc", "phase-ncx", "col2im-nxc", "col2im-ncx",
              "direct", "direct-blocked", "dense")

#: ``dense`` (one matrix product with the whole layer as a matrix) is chosen only
#: when that matrix has at most this many elements: it exists for call overhead.
DENSE_MAX_ELEMENTS = 1 << 16

#: Environment variable forcing an algorithm (one of ALGORITHMS) for every call.
ALGORITHM_ENV = "CONVTRANSPOSE_ALGORITHM"
#: Environment variable: set to 1 to never use numba, even when it is installed.
NO_NUMBA_ENV = "CONVTRANSPOSE_NO_NUMBA"

#: Scratch (im2col/column) buffers are split over the batch (or the first spatial
#: axis) to stay under this many bytes.  Fewer, larger chunks mean fewer BLAS calls
#: (2 MiB made DCGAN/stride-1 layers 3-4x slower on a loaded 2-core machine), but
#: glibc serves blocks of 32 MiB and more with fresh mmaps whose page faults cost
#: more than the copies themselves (a 64 MiB im2col buffer: ~55 ms of faults), while
#: smaller blocks are recycled from the heap: so the budget stays under 32 MiB.
_SCRATCH_BYTES = 24 << 20


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class _PhaseClass:
    """Adjacent output phases ``[first, first + count)`` of one axis sharing input shifts.

    ``taps[i][slot]`` is the kernel index that phase ``first + i`` takes from input
    ``j + shifts[slot]`` for its ``j``-th output ``o = j*s + first + i``.
    """

    first: int
    count: int
    shifts: tuple[int, ...]
    taps: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class _AxisPhases:
    stride: int
    whole_blocks: int  # Y // s: blocks of s outputs entirely inside the output
    blocks: int  # ceil(Y / s): output positions j computed per phase
    remainder: int  # Y % s: phases present in the last, partial block
    pad_low: int  # input zeros needed before x = 0 so that every shift is in range
    pad_high: int
    classes: tuple[_PhaseClass, ...]


def _axis_phases(axis: AxisPlan) -> _AxisPhases:
    s, d, size = axis.stride, axis.dilation, axis.input_size
    blocks = -(-axis.output_size // s)
    per_phase = []
    for phase in range(min(s, axis.output_size)):
        pairs = []
        for k in range(axis.kernel_size):
            numerator = phase + axis.offset - k * d
            if numerator % s:
                continue
            shift = numerator // s
            if shift + blocks - 1 < 0 or shift > size - 1:
                continue  # this tap only ever reads zeros
            pairs.append((shift, k))
        pairs.sort()
        per_phase.append(pairs)
    classes = []
    for phase, pairs in enumerate(per_phase):
        shifts = tuple(shift for shift, _ in pairs)
        taps = tuple(k for _, k in pairs)
        if classes and classes[-1].shifts == shifts:
            last = classes[-1]
            classes[-1] = _PhaseClass(last.first, last.count + 1, shifts, last.taps + (taps,))
        else:
            classes.append(_PhaseClass(phase, 1, shifts, (taps,)))
    all_shifts = [shift for c in classes for shift in c.shifts] or [0]
    return _AxisPhases(
        stride=s,
        whole_blocks=axis.output_size // s,
        blocks=blocks,
        remainder=axis.output_size % s,
        pad_low=max(0, -min(all_shifts)),
        pad_high=max(0, max(all_shifts) + blocks - size),
        classes=tuple(classes),
    )


def _some_output_unreached(phases: tuple[_AxisPhases, ...]) -> bool:
    """Whether some output phase receives no tap at all (so stays zero)."""
    return any(math.prod(len(c.shifts) for c in combo) == 0
               for combo in itertools.product(*(p.classes for p in phases)))


def _live_classes(phases: tuple[_AxisPhases, ...]):
    """(classes of the first axis, combinations of the others' classes) that have taps."""
    lead_classes = [c for c in phases[0].classes if c.shifts]
    rest_combos = [combo for combo in itertools.product(*(p.classes for p in phases[1:]))
                   if all(c.shifts for c in combo)]
    return lead_classes, rest_combos


def _tap_windows(axis: AxisPlan) -> tuple[tuple[slice, slice] | None, ...]:
    """Per kernel tap, the (input, output) slices it connects along one axis.

    Tap ``k`` sends input ``x`` to output ``o = x*s + k*d - offset``; the slices
    keep the ``x`` whose ``o`` lies in ``[0, Y)``.  ``None`` marks a tap that lands
    entirely outside the output.
    """
    s, windows = axis.stride, []
    for k in range(axis.kernel_size):
        first = k * axis.dilation - axis.offset  # output index of input 0
        lo = max(0, -(first // s))  # the first x with x*s + first >= 0
        hi = min(axis.input_size - 1, (axis.output_size - 1 - first) // s)
        if lo > hi:
            windows.append(None)
        else:
            windows.append((slice(lo, hi + 1), slice(first + lo * s, first + hi * s + 1, s)))
    return tuple(windows)


# --------------------------------------------------------------------------- choice


def _numba_usable() -> bool:
    if switch(NO_NUMBA_ENV) not in ("", "0"):
        return False
    return _numba_installed()


@functools.cache
def _numba_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def _pass_ns(elements: float, run: int) -> float:
    """Rough cost of one NumPy memory pass whose contiguous runs have ``run`` elements."""
    return elements * (2.0 + 6.0 / max(1, min(run, 64)))


def _gemm_ns(rows: int, depth: int, width: int, batches: int = 1) -> float:
    """Rough cost of ``batches`` GEMMs ``(rows, depth) @ (depth, width)``.

    About 150 GFLOP/s on two cores when every dimension is large, less when one is
    small, plus writing the result and a per-call overhead.
    """
    flops = 2.0 * rows * depth * width * batches
    efficiency = min(1.0, depth / 128) * min(1.0, width / 48) * min(1.0, rows / 64)
    return flops / (150.0 * max(efficiency, 0.02)) + 1.0 * rows * width * batches + 2000 * batches


def _costs(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
           channels_last: bool, numba: bool, integer: bool, blas: bool = False
           ) -> dict[str, float]:
    """Estimated nanoseconds per algorithm (calibrated on a 2-core AVX-512 machine)."""
    groups, ci, co = weights_shape[:3]
    rank = len(axes)
    spatial_in = tuple(axis.input_size for axis in axes)
    spatial_out = tuple(axis.output_size for axis in axes)
    taps = math.prod(weights_shape[3:])
    rows_in = batch * math.prod(spatial_in)
    outputs = batch * groups * co * math.prod(spatial_out)
    inputs = batch * groups * ci * math.prod(spatial_in)
    costs = {}
    phases = [_axis_phases(axis) for axis in axes]
    blocks = [p.blocks for p in phases]
    rows_phase = batch * math.prod(blocks)
    padding = any(p.pad_low or p.pad_high for p in phases)
    for internal_last in (True, False):
        cost = 0.0
        same_layout = internal_last == channels_last
        if padding or not same_layout:
            cost += _pass_ns(inputs, (ci if internal_last else spatial_in[-1])
                             if same_layout else 2)
        for combo in itertools.product(*(p.classes for p in phases)):
            slots = math.prod(len(c.shifts) for c in combo)
            if slots == 0:
                continue
            depth, count = slots * ci, math.prod(c.count for c in combo)
            width = count * co
            cost += _gemm_ns(rows_phase, depth, width, groups) + 30000
            if slots > 1 or padding:
                cost += _pass_ns(groups * rows_phase * depth, ci if internal_last else blocks[-1])
            run = (combo[-1].count * co if internal_last else 1)
            cost += _pass_ns(groups * rows_phase * width, run if same_layout else 1)
        costs["phase-nxc" if internal_last else "phase-ncx"] = cost
    if blas:
        lead_classes, rest_combos = _live_classes(tuple(phases))
        for internal_last in (True, False):
            same_layout = internal_last == channels_last
            cost = 0.0
            for combo in rest_combos:
                slots = math.prod(len(c.shifts) for c in combo)
                if slots > 1 or padding or not same_layout or batch > 1:
                    cost += _pass_ns(slots * inputs, (ci if internal_last else blocks[-1])
                                     if same_layout else 2)
                for lead_class in lead_classes:
                    width = lead_class.count * math.prod(c.count for c in combo) * co
                    cost += _gemm_ns(rows_phase, slots * ci, width,
                                     groups * len(lead_class.shifts)) + 40000
                    run = (combo[-1].count if combo else lead_class.count) * co
                    cost += _pass_ns(groups * rows_phase * width,
                                     run if internal_last and same_layout else 1)
            costs["gemm-nxc" if internal_last else "gemm-ncx"] = cost
    live = math.prod(sum(w is not None for w in _tap_windows(axis)) for axis in axes)
    for internal_last in (True, False):
        same_layout = internal_last == channels_last
        cost = _gemm_ns(rows_in, ci, taps * co, groups) + _pass_ns(outputs, 64)
        if not same_layout or batch > 1 and not internal_last:
            cost += _pass_ns(inputs, 2 if not same_layout else spatial_in[-1])
        run = co if internal_last else spatial_in[-1] // max(1, axes[-1].stride)
        adds = live * groups * rows_in * co
        cost += 1.5 * _pass_ns(adds, run if same_layout else 1) + live * 3000
        costs["col2im-nxc" if internal_last else "col2im-ncx"] = cost
    dense = groups * ci * math.prod(spatial_in) * groups * co * math.prod(spatial_out)
    if dense <= DENSE_MAX_ELEMENTS:
        costs["dense"] = 2.0 * batch * dense / 20.0 + 0.3 * dense + 5000
    if ci * co <= 4 and numba and not integer and rank <= 3:
        costs["direct"] = 1.0 * inputs * co * taps + 1.0 * outputs
    if co <= BLOCKED_MAX_CHANNELS and ci * co > 4 and numba and not integer and rank <= 3:
        costs["direct-blocked"] = _blocked_ns(batch, groups, ci, co, axes, channels_last)
    return costs


#: ``direct-blocked`` keeps a block of outputs' channels in registers: for at most
#: this many output channels per group.
BLOCKED_MAX_CHANNELS = 64


def _blocked_ns(batch: int, groups: int, ci: int, co: int, axes: tuple[AxisPlan, ...],
                channels_last: bool) -> float:
    """Rough cost of ``direct-blocked`` (in the units of the other estimates).

    Multiply-adds at about 220 GFLOP/s on two cores (the machine's FMA peak), with
    the output channels padded to whole vectors (16 float32) and each phase's run
    of outputs with all taps inside the input covered by blocks of about 8 (the
    others, at line ends, cost about three outputs each); lines whose output
    channels are not whole vectors, or are channels first, go through a copy.  The
    other algorithms' estimates run about 3x their measured times, so this one is
    scaled alike.
    """
    width = -(-co // 16) * 16
    per_axis = []
    for index, axis in enumerate(axes):
        total = 0
        for c in _axis_phases(axis).classes:
            shifts = c.shifts or (0,)
            for phase in range(c.first, c.first + c.count):
                count = -(-(axis.output_size - phase) // axis.stride)
                if index == len(axes) - 1:
                    inside = max(0, min(count, axis.input_size - max(shifts))
                                 - max(0, -min(shifts)))
                    inside = inside if inside >= 8 else 0
                    count = -(-inside // 8) * 8 + 3 * (count - inside)
                total += count * max(1, len(c.shifts))
        per_axis.append(total)
    macs = batch * groups * width * ci * math.prod(per_axis)
    outputs = batch * groups * co * math.prod(axis.output_size for axis in axes)
    lines = batch * groups * math.prod(axis.output_size for axis in axes[:-1])
    copied = outputs if co != width or not channels_last else 0
    # A line whose weights (all phases of the last axis) are far beyond L1 reloads
    # each phase's from L2 for its few blocks: FCN-32x (344 KB per line, 2 blocks per
    # phase) ran at half the FLOP rate; 64 KB per line (3D 128->64 k2 s2) did not.
    tap_counts = [sum(len(c.shifts) * c.count for c in _axis_phases(axis).classes) /
                  max(1, axis.stride) for axis in axes]
    last = axes[-1]
    line_weights = math.prod(tap_counts) * last.stride * ci * width
    reloaded = 0.0
    if line_weights * 4 > 131072 and last.output_size < 3 * 8 * last.stride:
        reloaded = lines * line_weights
    return 3.0 * (2.0 * macs / 220.0 + 0.3 * copied + 0.25 * reloaded + 50.0 * lines + 20000)


@functools.lru_cache(maxsize=512)
def _choose(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
            channels_last: bool, dtype: np.dtype, numba: bool, blas: bool) -> str:
    if batch * math.prod(weights_shape) * math.prod(a.input_size for a in axes) == 0:
        return "phase-nxc" if channels_last else "phase-ncx"
    costs = _costs(batch, axes, weights_shape, channels_last, numba, dtype.kind != "f", blas)
    return min(costs, key=costs.get)


def choose_algorithm(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int], *,
                     channels_last: bool = False, dtype=np.float32) -> str:
    """The algorithm :func:`transposed_convolution` uses for these shapes (cached).

    ``CONVTRANSPOSE_ALGORITHM`` overrides the choice.
    """
    forced = switch(ALGORITHM_ENV)
    if forced:
        if forced not in ALGORITHMS:
            raise ValueError(f"{ALGORITHM_ENV}={forced!r}; expected one of {ALGORITHMS}")
        return forced
    return _choose(batch, tuple(axes), tuple(weights_shape), bool(channels_last),
                   np.dtype(dtype), _numba_usable(), _blas.available(dtype))


def describe_algorithm(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int], *,
                       channels_last: bool = False, dtype=np.float32) -> str:
    """A short human-readable name of the chosen algorithm (for benchmark tables)."""
    name = choose_algorithm(batch, axes, weights_shape, channels_last=channels_last, dtype=dtype)
    if name == "direct":
        return "direct (numba)" if _numba_usable() else "direct (numpy)"
    return name


# --------------------------------------------------------------------------- entry point


def transposed_convolution(
    data: np.ndarray,
    weights: np.ndarray,
    axes: Sequence[AxisPlan],
    *,
    dtype: np.dtype,
    channels_last: bool = False,
    bias: np.ndarray | None = None,
    algorithm: str | None = None,
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
        One of :data:`ALGORITHMS`, to force an algorithm (tests and benchmarks);
        by default :func:`choose_algorithm` decides.

    Returns
    -------
    ndarray
        ``(N, G*Co, Y...)``, or ``(N, Y..., G*Co)`` when ``channels_last``; a fresh
        C-contiguous array, never a view of an input.
    """
    dtype = np.dtype(dtype)
    axes = tuple(axes)
    groups, in_per_group, out_per_group = weights.shape[:3]
    batch = data.shape[0]
    out_spatial = tuple(axis.output_size for axis in axes)
    if channels_last:
        out = np.empty((batch,) + out_spatial + (groups * out_per_group,), dtype)
    else:
        out = np.empty((batch, groups * out_per_group) + out_spatial, dtype)
    if algorithm is None:
        algorithm = choose_algorithm(batch, axes, weights.shape, channels_last=channels_last,
                                     dtype=dtype)
    if out.size == 0:
        pass
    elif data.size == 0 or weights.size == 0:
        out.fill(0)
    else:
        with np.errstate(over="ignore"):
            if algorithm.startswith("gemm") and _blas.available(dtype):
                _phase_gemm(data, weights, axes, dtype, channels_last, out,
                            algorithm == "gemm-nxc")
            elif algorithm.startswith(("phase", "gemm")):
                _phase(data, weights, axes, dtype, channels_last, out,
                       algorithm.endswith("-nxc"))
            elif algorithm.startswith("col2im"):
                _col2im(data, weights, axes, dtype, channels_last, out, algorithm == "col2im-nxc")
            elif algorithm == "dense":
                _dense(data, weights, axes, dtype, channels_last, out)
            elif algorithm == "direct":
                _direct(data, weights, axes, dtype, channels_last, out)
            elif algorithm == "direct-blocked":
                _direct_blocked(data, weights, axes, dtype, channels_last, out)
            else:
                raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    if bias is not None and out.size:
        shape = (-1,) if channels_last else (-1,) + (1,) * len(axes)
        out += bias.astype(dtype, copy=False).reshape(shape)
    return out


# --------------------------------------------------------------------------- threads

#: NumPy copies and adds run on one core; large ones are split between this many
#: threads (NumPy releases the GIL inside them).  BLAS has its own threads.
_THREADS = max(1, min(os.cpu_count() or 1, 4))
_PARALLEL_ELEMENTS = 1 << 18
_pool = None


#: Stacks of products with fewer FLOPs in total than four times this stay on one thread.
_PARALLEL_FLOPS = 2e6


def _thread_pool():
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="convtranspose")
    return _pool


def _split_axis(shape: tuple[int, ...]) -> int | None:
    for axis, size in enumerate(shape[:3]):
        if size >= _THREADS:
            return axis
    return None


def _parallel(operation, destination: np.ndarray, source: np.ndarray) -> None:
    """``operation(destination, source)`` (a copy or an in-place add), split between threads.

    Both arrays have the same shape; the work is split along one of the leading axes,
    so every thread writes a disjoint part of ``destination``.
    """
    axis = _split_axis(destination.shape)
    if _THREADS == 1 or destination.size < _PARALLEL_ELEMENTS or axis is None:
        operation(destination, source)
        return
    size = destination.shape[axis]
    bounds = [size * i // _THREADS for i in range(_THREADS + 1)]
    index = [slice(None)] * destination.ndim

    def part(i):
        index_i = list(index)
        index_i[axis] = slice(bounds[i], bounds[i + 1])
        operation(destination[tuple(index_i)], source[tuple(index_i)])

    for future in [_thread_pool().submit(part, i) for i in range(_THREADS)]:
        future.result()


#: GEMMs with fewer FLOPs than this run on the calling thread only: waking BLAS
#: worker threads costs up to a scheduler tick (milliseconds) on a busy machine,
#: more than splitting such a product can save.
_SERIAL_GEMM_FLOPS = 64e6


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)``; small products run on one BLAS thread each.

    A stack of small products is split between this module's threads instead, each
    with a single BLAS thread (OpenBLAS's setting is per calling thread).
    """
    flops = 2.0 * a.shape[-2] * a.shape[-1] * b.shape[-1]
    setter = _blas.local_threads() if flops < _SERIAL_GEMM_FLOPS else None
    if setter is None:
        return np.matmul(a, b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    stack = batch[0] if batch else 1
    if stack < 2 or _THREADS == 1 or flops * math.prod(batch) < 4 * _PARALLEL_FLOPS:
        previous = setter(1)
        try:
            return np.matmul(a, b)
        finally:
            setter(previous)
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), np.result_type(a, b))
    threads = min(_THREADS, stack)
    bounds = [stack * i // threads for i in range(threads + 1)]

    def part(operand, lo, hi):
        owns_axis = operand.ndim - 2 == len(batch) and operand.shape[0] == stack
        return operand[lo:hi] if owns_axis else operand

    def work(i):
        lo, hi = bounds[i], bounds[i + 1]
        previous = setter(1)
        try:
            np.matmul(part(a, lo, hi), part(b, lo, hi), out=out[lo:hi])
        finally:
            setter(previous)

    for future in [_thread_pool().submit(work, i) for i in range(threads)]:
        future.result()
    return out


def _copy(destination, source):
    np.copyto(destination, source, casting="unsafe")


def _add(destination, source):
    np.add(destination, source, out=destination)


# --------------------------------------------------------------------------- weights memo

#: Matrices derived from a filter (class matrices, the dense layer matrix) are kept
#: for repeated calls with the same filter: a model run layer by layer, or a
#: benchmark, calls each layer with the same weights again, and rebuilding them
#: costs milliseconds (DCGAN 512->256: 4 of 20 ms).  At most this many filters,
#: each of at most _DERIVED_MAX_BYTES (the memo holds a copy of the filter and
#: about as much again in matrices).
_DERIVED_KEPT = 8
_DERIVED_MAX_BYTES = 16 << 20
_derived: dict = {}
_derived_lock = threading.Lock()


def _same_bits(kept: np.ndarray, weights: np.ndarray) -> bool:
    """Whether two filters of one shape and dtype hold the same bits (-0.0 is not 0.0)."""
    if kept.nbytes <= 4096:
        return kept.tobytes() == weights.tobytes()
    unsigned = np.dtype(f"u{weights.itemsize}") if weights.itemsize in (1, 2, 4, 8) else None
    return unsigned is not None and np.array_equal(kept.view(unsigned), weights.view(unsigned))


def _derived_from(weights: np.ndarray, *key) -> dict:
    """The dict of matrices derived from ``weights`` for ``key`` (a fresh one if new).

    Callers fill it on a miss; later calls with a filter of the same bits and the
    same ``key`` get the same dict.  The filter is compared value by value (a
    quarter of a millisecond for 8 MB), so a filter edited in place never hits.
    """
    full_key = (weights.shape, weights.dtype.str) + key
    with _derived_lock:
        entry = _derived.pop(full_key, None)
        if entry is not None and _same_bits(entry[0], weights):
            _derived[full_key] = entry  # most recently used last
            return entry[1]
    derived: dict = {}
    if weights.nbytes <= _DERIVED_MAX_BYTES:
        kept = _frozen(np.array(weights, copy=True, order="C"))
        with _derived_lock:
            while len(_derived) >= max(1, _DERIVED_KEPT):
                del _derived[next(iter(_derived))]
            _derived[full_key] = (kept, derived)
    return derived


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


# --------------------------------------------------------------------------- layouts


def _input_glxc(data: np.ndarray, groups: int, channels_last: bool) -> np.ndarray:
    """A view of the data as ``(G, N, X..., Ci)``."""
    rank = data.ndim - 2
    if channels_last:
        split = data.reshape(data.shape[:-1] + (groups, -1))  # (N, X..., G, Ci)
        return np.moveaxis(split, -2, 0)
    split = data.reshape((data.shape[0], groups, -1) + data.shape[2:])  # (N, G, Ci, X...)
    return split.transpose((1, 0) + tuple(range(3, 3 + rank)) + (2,))


def _output_glyc(out: np.ndarray, groups: int, channels_last: bool) -> np.ndarray:
    """A writable view of the output as ``(G, N, Y..., Co)``."""
    return _input_glxc(out, groups, channels_last)


# --------------------------------------------------------------------------- phase


def _chunks(batch: int, first_blocks: int, bytes_per_block_row: int, out_bytes: int):
    """(n0, n1, j0, j1) pieces of work whose scratch stays under the budget.

    Whole samples are grouped while they fit; a sample too large on its own is split
    along the blocks of its first spatial axis.
    """
    budget = _SCRATCH_BYTES
    if first_blocks == 0:
        return
    per_sample = bytes_per_block_row * first_blocks
    if per_sample <= budget:
        step = max(1, min(batch, budget // max(per_sample, 1)))
        for n0 in range(0, batch, step):
            yield n0, min(batch, n0 + step), 0, first_blocks
        return
    rows = max(1, budget // max(bytes_per_block_row, 1))
    for n0 in range(batch):
        for j0 in range(0, first_blocks, rows):
            yield n0, n0 + 1, j0, min(first_blocks, j0 + rows)


def _phase(data, weights, axes, dtype, channels_last, out, internal_last):
    """Sub-pixel decomposition: one im2col + GEMM per class of phases (module docstring).

    With ``internal_last`` the GEMM is ``(n, j...) x (slots, Ci) @ (slots, Ci) x
    (phases..., Co)`` (channels contiguous in every copy); otherwise its transpose
    ``(phases..., Co) x (slots, Ci) @ (slots, Ci) x (n, j...)`` (spatial axes
    contiguous), whatever the layouts of ``data`` and ``out``.
    """
    groups, ci, co = weights.shape[:3]
    rank = len(axes)
    batch = data.shape[0]
    phases = tuple(_axis_phases(axis) for axis in axes)
    combos = list(itertools.product(*(p.classes for p in phases)))
    if _some_output_unreached(phases):
        out.fill(0)
    source = _input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if not internal_last:
        source = np.moveaxis(source, -1, 1)  # (G, Ci, N, X...)
    spatial_at = 2 if internal_last else 3  # index of the first spatial axis in `padded`
    if any(p.pad_low or p.pad_high for p in phases):
        shape = list(source.shape)
        for index, (axis, p) in enumerate(zip(axes, phases)):
            shape[spatial_at + index] = (
                axis.input_size + p.pad_low + p.pad_high)
        padded = np.zeros(shape, dtype)
        interior = [slice(None)] * padded.ndim
        for index, (axis, p) in enumerate(zip(axes, phases)):
            interior[spatial_at + index] = slice(
                p.pad_low, p.pad_low + axis.input_size)
        _parallel(_copy, padded[tuple(interior)], source)
    else:
        padded = source
        if padded.dtype != dtype or not padded.flags.c_contiguous:
            padded = np.empty(source.shape, dtype)
            _parallel(_copy, padded, source)
    first = spatial_at  # the batch axis of `padded` is first - 1
    target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    blocks = tuple(p.blocks for p in phases)
    co_first = internal_last and not channels_last
    derived = _derived_from(weights, "phase", axes, dtype, internal_last, co_first)
    for combo in combos:
        slots = list(itertools.product(*(range(len(c.shifts)) for c in combo)))
        if not slots:
            continue
        counts = tuple(c.count for c in combo)
        depth = len(slots) * ci
        width = math.prod(counts) * co
        matrix = derived.get(combo)
        if matrix is None:
            # Rows-major products for a channels-first output keep the phases innermost,
            # so that the copy into the output moves runs of adjacent phases.
            matrix = _class_matrix(_taps_first(weights, derived), combo, slots, counts, dtype,
                                   co_first)  # (G, depth, width)
            if not internal_last:
                matrix = np.ascontiguousarray(matrix.transpose(0, 2, 1))  # (G, width, depth)
            derived[combo] = matrix = _frozen(matrix)
        row_bytes = groups * math.prod(blocks[1:]) * (depth + width) * dtype.itemsize
        for n0, n1, j0, j1 in _chunks(batch, blocks[0], row_bytes, out.nbytes):
            sub_blocks = (j1 - j0,) + blocks[1:]
            rows = (n1 - n0) * math.prod(sub_blocks)

            def window(slot):
                index = [slice(None)] * padded.ndim
                index[first - 1] = slice(n0, n1)
                for a, (p, c, s_, b) in enumerate(zip(phases, combo, slot, sub_blocks)):
                    low = p.pad_low + c.shifts[s_] + (j0 if a == 0 else 0)
                    index[first + a] = slice(low, low + b)
                return tuple(index)

            if internal_last:
                # columns (G, n, j..., slots, Ci) -> product (G, n, j..., phases..., Co)
                if len(slots) == 1:
                    columns = np.ascontiguousarray(padded[window(slots[0])])
                else:
                    columns = np.empty((groups, n1 - n0) + sub_blocks + (len(slots), ci), dtype)
                    for index, slot in enumerate(slots):
                        _parallel(_copy, columns[..., index, :], padded[window(slot)])
                product = _matmul(columns.reshape(groups, rows, depth), matrix)
                if co_first:
                    product = product.reshape((groups, n1 - n0) + sub_blocks + (co,) + counts)
                    product = np.moveaxis(product, 2 + rank, -1)
                else:
                    product = product.reshape((groups, n1 - n0) + sub_blocks + counts + (co,))
            else:
                # columns (G, slots, Ci, n, j...) -> product (G, phases..., Co, n, j...)
                if len(slots) == 1:
                    columns = np.ascontiguousarray(padded[window(slots[0])])
                else:
                    columns = np.empty((groups, len(slots), ci, n1 - n0) + sub_blocks, dtype)
                    for index, slot in enumerate(slots):
                        _parallel(_copy, columns[:, index], padded[window(slot)])
                product = _matmul(matrix, columns.reshape(groups, depth, rows))
                product = product.reshape((groups,) + counts + (co, n1 - n0) + sub_blocks)
                # view as (G, n, j..., phases..., Co)
                product = product.transpose(
                    (0, rank + 2) + tuple(range(rank + 3, 2 * rank + 3))
                    + tuple(range(1, rank + 1)) + (rank + 1,))
            _scatter_phases(target[:, n0:n1], product, combo, phases, rank, j0)


def _taps_first(weights, derived: dict) -> np.ndarray:
    """The filter as ``(G, K..., Ci, Co)``, contiguous (built once per memo entry)."""
    taps_first = derived.get("taps first")
    if taps_first is None:
        taps_first = np.ascontiguousarray(np.moveaxis(weights, (1, 2), (-2, -1)))
        derived["taps first"] = taps_first
    return taps_first


def _class_matrix(taps_first, combo, slots, counts, dtype, channels_first_width=False):
    """Weights as ``(G, slots*Ci, phases*Co)``: column (phase..., co) of row (slot..., ci).

    ``taps_first`` is the filter as ``(G, K..., Ci, Co)`` (contiguous), so that the
    gather below moves whole ``(Ci, Co)`` blocks.  With ``channels_first_width`` the
    columns are ordered (co, phase...) instead.
    """
    rank = len(combo)
    groups, ci, co = taps_first.shape[0], taps_first.shape[-2], taps_first.shape[-1]
    # One fancy index per axis, shaped so that the result is (G, S_1..S_D, C_1..C_D, Ci, Co).
    index = []
    for a, c in enumerate(combo):
        taps = np.array(c.taps, np.intp).T  # (slots_a, count_a)
        shape = [1] * (2 * rank)
        shape[a], shape[rank + a] = taps.shape
        index.append(taps.reshape(shape))
    gathered = taps_first[(slice(None),) + tuple(index)]
    slot_axes = tuple(range(1, 1 + rank))
    phase_axes = tuple(range(1 + rank, 1 + 2 * rank))
    in_axis, out_axis = 1 + 2 * rank, 2 + 2 * rank
    if channels_first_width:
        order = (0,) + slot_axes + (in_axis, out_axis) + phase_axes
    else:
        order = (0,) + slot_axes + (in_axis,) + phase_axes + (out_axis,)
    matrix = np.ascontiguousarray(gathered.transpose(order), dtype)
    return matrix.reshape(groups, len(slots) * ci, math.prod(counts) * co)


def _scatter_phases(target, product, combo, phases, rank, j_start=0):
    """Copy a class's result into the output.

    ``product`` is (a view of) ``(G, n, j..., phases..., Co)`` whose first block axis
    starts at block ``j_start``; ``target`` is the output as ``(G, n, Y..., Co)``.
    """
    j_stop = j_start + product.shape[2]
    pieces_per_axis = []
    for a, (p, c) in enumerate(zip(phases, combo)):
        low, high = (j_start, j_stop) if a == 0 else (0, p.blocks)
        pieces = []
        if min(high, p.whole_blocks) > low:
            pieces.append((low, min(high, p.whole_blocks), c.count, low))
        keep = min(c.count, p.remainder - c.first)
        if p.remainder and keep > 0 and low <= p.whole_blocks < high:
            pieces.append((p.whole_blocks, p.whole_blocks + 1, keep, low))
        if not pieces:
            return
        pieces_per_axis.append(pieces)
    # product axes (G, n, j_1..j_D, p_1..p_D, Co) -> (G, n, j_1, p_1, ..., j_D, p_D, Co)
    order = (0, 1) + tuple(itertools.chain.from_iterable(
        (2 + a, 2 + rank + a) for a in range(rank))) + (2 + 2 * rank,)
    interleaved = product.transpose(order)
    strides = target.strides
    for pieces in itertools.product(*pieces_per_axis):
        start = tuple(j0 * p.stride + c.first for (j0, _, _, _), p, c in zip(pieces, phases, combo))
        corner = target[(slice(None), slice(None)) + start]  # (G, n, Co) view at the corner
        shape = (target.shape[0], target.shape[1])
        new_strides = (strides[0], strides[1])
        for (j0, j1, keep, _), p, axis_stride in zip(pieces, phases, strides[2:2 + rank]):
            shape += (j1 - j0, keep)
            new_strides += (axis_stride * p.stride, axis_stride)
        shape += (target.shape[-1],)
        new_strides += (strides[-1],)
        destination = as_strided(corner, shape, new_strides, writeable=True)
        source = interleaved[(slice(None), slice(None)) + tuple(itertools.chain.from_iterable(
            (slice(j0 - base, j1 - base), slice(0, keep)) for j0, j1, keep, base in pieces))]
        _parallel(_copy, destination, source)


# --------------------------------------------------------------------------- gemm


#: Scratch of the ``gemm`` algorithms (input windows plus one class's products) per
#: chunk of the first spatial axis.
_GEMM_SCRATCH_BYTES = 8 << 20


def _merged_rows(array: np.ndarray, start: int, stop: int) -> np.ndarray | None:
    """``array`` with axes ``[start, stop)`` merged into one, as a view; None if impossible."""
    shape, strides = array.shape, array.strides
    live = [(size, step) for size, step in zip(shape[start:stop], strides[start:stop]) if size > 1]
    stride = live[-1][1] if live else array.itemsize
    expected = stride
    for size, step in reversed(live):
        if step != expected:
            return None
        expected = step * size
    return as_strided(array, shape[:start] + (math.prod(shape[start:stop]),) + shape[stop:],
                      strides[:start] + (stride,) + strides[stop:], writeable=False)


def _gemm_windows(source, lead_range, rest, rest_combo, slots, dtype, internal_last):
    """The input windows of one class of the axes after the first, for BLAS.

    ``source`` is the data as ``(X_1, N, X_2..., G, Ci)`` (``internal_last``) or
    ``(G, Ci, X_1, N, X_2...)``; the result is ``(H, N, J_2..., G, S, Ci)`` or
    ``(G, S, Ci, H, N, J_2...)`` where ``H`` covers inputs ``lead_range`` of the
    first axis (zeros outside the data), ``J_a`` the blocks of axis ``a`` and ``S``
    the class's slots: slot ``s`` of block ``j`` holds input ``j + shift_s``.  A view
    of ``source`` when that is already the layout (no padding, one slot).
    """
    lo, hi = lead_range
    lead_size = source.shape[0] if internal_last else source.shape[2]
    blocks = tuple(p.blocks for p in rest)
    spatial_at = 2 if internal_last else 4  # first axis after (H, N) in `source`
    sizes = source.shape[spatial_at:spatial_at + len(rest)]
    if (len(slots) == 1 and lo == 0 and hi == lead_size and source.dtype == dtype
            and all(c.shifts[0] == 0 for c in rest_combo) and blocks == sizes):
        view = np.expand_dims(source, -2 if internal_last else 1)
        first = 0 if internal_last else 3
        if _merged_rows(view, first, first + 1 + len(blocks) + 1) is not None:
            return view
    groups = source.shape[-2] if internal_last else source.shape[0]
    ci = source.shape[-1] if internal_last else source.shape[1]
    if internal_last:
        windows = np.zeros((hi - lo, source.shape[1]) + blocks + (groups, len(slots), ci), dtype)
    else:
        windows = np.zeros((groups, len(slots), ci, hi - lo, source.shape[3]) + blocks, dtype)
    h0, h1 = max(lo, 0), min(hi, lead_size)
    if h0 >= h1:
        return windows
    for index, slot in enumerate(slots):
        into, take = [slice(h0 - lo, h1 - lo), slice(None)], [slice(h0, h1), slice(None)]
        for p, c, s, size in zip(rest, rest_combo, slot, sizes):
            shift = c.shifts[s]
            j0, j1 = max(0, -shift), min(p.blocks, size - shift)
            into.append(slice(j0, j1))
            take.append(slice(j0 + shift, j1 + shift))
        if any(window.start >= window.stop for window in into[2:]):
            continue  # this slot only reads zeros
        if internal_last:
            destination = windows[tuple(into) + (slice(None), index)]
            _parallel(_copy, destination, source[tuple(take)])
        else:
            destination = windows[(slice(None), index, slice(None)) + tuple(into)]
            _parallel(_copy, destination, source[(slice(None), slice(None)) + tuple(take)])
    return windows


def _run_gemms(calls, flops_each: float) -> None:
    """Run ``calls`` (lists of ``gemm`` argument tuples, one list per independent unit).

    Units run in order on the calling thread, with one BLAS thread when the products
    are small, or split between this module's threads when there are several.
    """
    setter = _blas.local_threads() if flops_each < _SERIAL_GEMM_FLOPS else None

    def work(units):
        previous = setter(1) if setter is not None else None
        try:
            for unit in units:
                for arguments in unit:
                    _blas.gemm(*arguments)
        finally:
            if setter is not None:
                setter(previous)

    total = flops_each * sum(len(unit) for unit in calls)
    if setter is None or _THREADS == 1 or len(calls) < 2 or total < 4 * _PARALLEL_FLOPS:
        work(calls)
        return
    threads = min(_THREADS, len(calls))
    parts = [calls[i::threads] for i in range(threads)]
    for future in [_thread_pool().submit(work, part) for part in parts]:
        future.result()


def _phase_gemm(data, weights, axes, dtype, channels_last, out, internal_last):
    """Stride phases as accumulating BLAS products over row-shifted windows (``gemm-*``).

    Like :func:`_phase`, but the slots of the first spatial axis are not copied:
    the windows of the other axes are laid out with the first axis outermost
    (``(X_1, N, J_2..., G, S, Ci)``), so that shifting the first axis by one input
    is an offset of one block of rows; each class of the first axis is then one
    BLAS product per slot and group, accumulated into the class's result (``beta =
    1``), which is copied once into a strided view of the output.
    """
    groups, ci, co = weights.shape[:3]
    rank = len(axes)
    batch = data.shape[0]
    phases = tuple(_axis_phases(axis) for axis in axes)
    lead, rest = phases[0], phases[1:]
    if _some_output_unreached(phases):
        out.fill(0)
    lead_classes, rest_combos = _live_classes(phases)
    if not lead_classes or not rest_combos:
        return
    source = _input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if internal_last:
        source = source.transpose((2, 1) + tuple(range(3, rank + 2)) + (0, rank + 2))
    else:
        source = source.transpose((0, rank + 2, 2, 1) + tuple(range(3, rank + 2)))
    target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    low_shift = min(c.shifts[0] for c in lead_classes)
    high_shift = max(c.shifts[-1] for c in lead_classes)
    pitch = batch * math.prod(p.blocks for p in rest)  # rows per block of the first axis
    widest_slots = max(math.prod(len(c.shifts) for c in combo) for combo in rest_combos)
    widest = max(math.prod(c.count for c in combo) for combo in rest_combos) * max(
        c.count for c in lead_classes)
    row_bytes = pitch * groups * (widest_slots * ci + widest * co) * dtype.itemsize
    step = max(1, _GEMM_SCRATCH_BYTES // max(1, row_bytes))
    matrices = _derived_from(weights, "gemm", axes, dtype)
    for j0 in range(0, lead.blocks, step):
        j1 = min(lead.blocks, j0 + step)
        lead_range = (j0 + low_shift, j1 + high_shift)
        rows = (j1 - j0) * pitch
        for rest_combo in rest_combos:
            slots = list(itertools.product(*(range(len(c.shifts)) for c in rest_combo)))
            windows = _gemm_windows(source, lead_range, rest, rest_combo, slots, dtype,
                                    internal_last)
            depth = len(slots) * ci
            if internal_last:
                inputs = _merged_rows(windows, 0, rank + 1)
                inputs = inputs.reshape(inputs.shape[0], groups, depth)
            else:
                inputs = _merged_rows(windows, 3, rank + 4)
                inputs = inputs.reshape(groups, depth, inputs.shape[-1])
            for lead_class in lead_classes:
                combo = (lead_class,) + rest_combo
                counts = tuple(c.count for c in combo)
                width = math.prod(counts) * co
                key = (lead_class, rest_combo)
                if key not in matrices:
                    all_slots = list(itertools.product(*(range(len(c.shifts)) for c in combo)))
                    matrices[key] = _frozen(_class_matrix(
                        _taps_first(weights, matrices), combo, all_slots, counts, dtype
                    ).reshape(groups, len(lead_class.shifts), depth, width))
                matrix = matrices[key]
                if internal_last:
                    products = np.empty((j1 - j0, batch) + tuple(p.blocks for p in rest)
                                        + (groups,) + counts + (co,), dtype)
                    flat = products.reshape(rows, groups, width)
                else:
                    products = np.empty((groups,) + counts + (co, j1 - j0, batch)
                                        + tuple(p.blocks for p in rest), dtype)
                    flat = products.reshape(groups, width, rows)
                flops = 2.0 * rows * depth * width
                parts = 1 if flops >= _SERIAL_GEMM_FLOPS else max(1, _THREADS // groups)
                calls = []
                for g, part in itertools.product(range(groups), range(parts)):
                    r0, r1 = rows * part // parts, rows * (part + 1) // parts
                    unit = []
                    for slot, shift in enumerate(lead_class.shifts):
                        first = (j0 + shift - lead_range[0]) * pitch
                        if internal_last:
                            unit.append((inputs[first + r0:first + r1, g], matrix[g, slot],
                                         flat[r0:r1, g], slot > 0))
                        else:
                            unit.append((matrix[g, slot].T, inputs[g, :, first + r0:first + r1],
                                         flat[g, :, r0:r1], slot > 0))
                    calls.append(unit)
                _run_gemms(calls, flops / parts)
                if internal_last:
                    order = (rank + 1, 1, 0) + tuple(range(2, rank + 1)) + tuple(
                        range(rank + 2, 2 * rank + 3))
                else:
                    order = (0, rank + 3, rank + 2) + tuple(range(rank + 4, 2 * rank + 3)) + tuple(
                        range(1, rank + 2))
                _scatter_phases(target, products.transpose(order), combo, phases, rank, j0)


# --------------------------------------------------------------------------- col2im


def _col2im_matrix(weights, dtype, internal_last: bool) -> np.ndarray:
    """The filter as col2im's GEMM operand (memoised with the filter).

    ``(G, Ci, taps*Co)`` when ``internal_last`` (columns come out as ``(G, rows, K...,
    Co)``), else ``(G, taps*Co, Ci)`` (columns ``(n, G, K..., Co, X...)``).
    """
    derived = _derived_from(weights, "col2im", dtype, internal_last)
    matrix = derived.get("matrix")
    if matrix is None:
        groups, ci, co = weights.shape[:3]
        rank, taps = weights.ndim - 3, math.prod(weights.shape[3:])
        if internal_last:
            matrix = np.moveaxis(weights, 2, -1).reshape(groups, ci, taps * co)
        else:
            matrix = weights.transpose((0,) + tuple(range(3, 3 + rank)) + (2, 1)).reshape(
                groups, taps * co, ci)
        derived["matrix"] = matrix = _frozen(matrix.astype(dtype))
    return matrix


def _col2im(data, weights, axes, dtype, channels_last, out, internal_last):
    """One GEMM for every tap's contribution, then one strided add per live tap.

    The columns buffer (``taps * Co`` values per input position) is built for a chunk
    of samples, or of one sample's first spatial axis, at a time.
    """
    groups, ci, co = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    batch = data.shape[0]
    spatial = tuple(axis.input_size for axis in axes)
    taps = math.prod(kernel)
    out.fill(0)
    if internal_last:
        target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
        source = _input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    else:
        target = np.moveaxis(_output_glyc(out, groups, channels_last), (0, -1), (1, 2))
        source = np.moveaxis(_input_glxc(data, groups, channels_last), (0, -1), (1, 2))
        # target (N, G, Co, Y...), source (N, G, Ci, X...): views, NCX-natural.
    matrix = _col2im_matrix(weights, dtype, internal_last)
    row_bytes = groups * math.prod(spatial[1:]) * (taps * co + ci) * dtype.itemsize
    first = axes[0]
    for n0, n1, x0, x1 in _chunks(batch, spatial[0], row_bytes, out.nbytes):
        n = n1 - n0
        sub = (x1 - x0,) + spatial[1:]
        # Tap k sends chunk input x' (= x - x0) to output x'*s + k*d - (offset - x0*s).
        sub_axes = (AxisPlan(x1 - x0, first.kernel_size, first.stride, first.dilation,
                             first.offset - x0 * first.stride, first.output_size),) + axes[1:]
        windows = [_tap_windows(axis) for axis in sub_axes]
        live = [(tap, tuple(w[k] for w, k in zip(windows, tap))) for tap in np.ndindex(*kernel)
                if all(w[k] is not None for w, k in zip(windows, tap))]
        if not live:
            continue
        if internal_last:
            rows = np.ascontiguousarray(source[:, n0:n1, x0:x1], dtype).reshape(groups, -1, ci)
            columns = _matmul(rows, matrix).reshape((groups, n) + sub + kernel + (co,))
            for tap, window in live:
                src = (slice(None), slice(None)) + tuple(w[0] for w in window) + tap
                dst = (slice(None), slice(n0, n1)) + tuple(w[1] for w in window)
                _parallel(_add, target[dst], columns[src])
        else:
            rows = source[n0:n1, :, :, x0:x1]
            if rows.dtype != dtype or not _blasable_rows(rows):
                rows = np.ascontiguousarray(rows, dtype)
            columns = _matmul(matrix, rows.reshape((n, groups, ci, -1)))
            columns = columns.reshape((n, groups) + kernel + (co,) + sub)
            for tap, window in live:
                src = (slice(None), slice(None)) + tap + (slice(None),) + tuple(
                    w[0] for w in window)
                dst = (slice(n0, n1), slice(None), slice(None)) + tuple(w[1] for w in window)
                _parallel(_add, target[dst], columns[src])


def _blasable_rows(rows: np.ndarray) -> bool:
    """Whether ``(n, G, Ci, X...)`` reshapes to ``(n, G, Ci, prod X)`` with unit inner stride."""
    item = rows.itemsize
    expected = item
    for size, stride in zip(rows.shape[:2:-1], rows.strides[:2:-1]):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return rows.shape[3] <= 1 or rows.strides[3] == expected


# --------------------------------------------------------------------------- dense


@functools.lru_cache(maxsize=128)
def _dense_pattern(axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                   channels_last: bool):
    """(row count, flat index, weight index) of every nonzero of the layer's matrix.

    The flat index is ``row * columns + column`` with row = flat index of one
    sample's input element and column = flat index of one sample's output element,
    both in the caller's layout; no two entries collide (an input and an output
    position determine the tap).
    """
    groups, ci, co = weights_shape[:3]
    kernel = weights_shape[3:]
    spatial_in = tuple(a.input_size for a in axes)
    spatial_out = tuple(a.output_size for a in axes)
    g, i, o = np.meshgrid(np.arange(groups), np.arange(ci), np.arange(co), indexing="ij")
    channel_in, channel_out = (g * ci + i).reshape(-1, 1), (g * co + o).reshape(-1, 1)
    weight_base = ((g * ci + i) * co + o).reshape(-1, 1) * math.prod(kernel)
    rows, cols, taps = [], [], []
    windows = [_tap_windows(axis) for axis in axes]
    for tap in np.ndindex(*kernel):
        window = [w[k] for w, k in zip(windows, tap)]
        if any(x is None for x in window):
            continue
        xs = np.meshgrid(*(np.arange(src.start, src.stop) for src, _ in window), indexing="ij")
        ys = np.meshgrid(*(np.arange(dst.start, dst.stop, dst.step) for _, dst in window),
                         indexing="ij")
        x_flat = np.ravel_multi_index(tuple(x.ravel() for x in xs), spatial_in).reshape(1, -1)
        y_flat = np.ravel_multi_index(tuple(y.ravel() for y in ys), spatial_out).reshape(1, -1)
        if channels_last:
            rows.append(x_flat * (groups * ci) + channel_in)
            cols.append(y_flat * (groups * co) + channel_out)
        else:
            rows.append(channel_in * math.prod(spatial_in) + x_flat)
            cols.append(channel_out * math.prod(spatial_out) + y_flat)
        taps.append(np.broadcast_to(weight_base + np.ravel_multi_index(tap, kernel),
                                    rows[-1].shape))
    row_count = groups * ci * math.prod(spatial_in)
    if not rows:
        empty = np.zeros(0, np.intp)
        return row_count, empty, empty
    flat = (np.concatenate([r.ravel() for r in rows]) * (groups * co * math.prod(spatial_out))
            + np.concatenate([c.ravel() for c in cols]))
    return row_count, flat, np.concatenate([t.ravel() for t in taps])


def _dense_matrix(weights, axes, dtype, channels_last, out_size):
    """The layer as a ``(C_in*X, C_out*Y)`` matrix (memoised with the filter)."""
    derived = _derived_from(weights, "dense", axes, dtype, channels_last)
    matrix = derived.get("matrix")
    if matrix is None:
        values = np.ascontiguousarray(weights, dtype)
        rows, flat, taps = _dense_pattern(axes, weights.shape, channels_last)
        matrix = np.zeros((rows, out_size), dtype)
        matrix.reshape(-1)[flat] = values.reshape(-1)[taps]
        derived["matrix"] = _frozen(matrix)
    return matrix


def _dense(data, weights, axes, dtype, channels_last, out):
    batch = data.shape[0]
    matrix = _dense_matrix(weights, axes, dtype, channels_last, out[0].size)
    np.matmul(data.reshape(batch, -1).astype(dtype, copy=False), matrix, out=out.reshape(batch, -1))


# --------------------------------------------------------------------------- direct


def _direct(data, weights, axes, dtype, channels_last, out):
    """Per-tap multiply-add over the phase classes: no GEMM, for tiny channel counts."""
    if dtype.kind == "f" and _numba_usable() and len(axes) <= 3:
        from ._kernel_numba import direct_phase

        direct_phase(data, weights, axes, dtype, channels_last, out)
        return
    _direct_numpy(data, weights, axes, dtype, channels_last, out)


def _direct_blocked(data, weights, axes, dtype, channels_last, out):
    """Register-blocked multiply-adds per output line (numba), for groups of a few dozen channels.

    Without numba (or for integers) the NumPy phase algorithm computes the same sums.
    """
    if dtype.kind == "f" and _numba_usable() and len(axes) <= 3:
        from ._kernel_numba import direct_blocked

        direct_blocked(data, weights, axes, dtype, channels_last, out)
        return
    _phase(data, weights, axes, dtype, channels_last, out, channels_last)


def _direct_numpy(data, weights, axes, dtype, channels_last, out):
    groups, ci, co = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    windows = [_tap_windows(axis) for axis in axes]
    out.fill(0)
    target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    source = np.ascontiguousarray(_input_glxc(data, groups, channels_last), dtype)
    w = weights.astype(dtype, copy=False)
    for tap in np.ndindex(*kernel):
        window = tuple(wins[k] for wins, k in zip(windows, tap))
        if any(x is None for x in window):
            continue
        src = source[(slice(None), slice(None)) + tuple(x[0] for x in window)]
        dst = target[(slice(None), slice(None)) + tuple(x[1] for x in window)]
        tap_weights = w[(slice(None), slice(None), slice(None)) + tap]  # (G, Ci, Co)
        shape = (groups,) + (1,) * (src.ndim - 2)
        for i in range(ci):
            for o in range(co):
                dst[..., o] += src[..., i] * tap_weights[:, i, o].reshape(shape)
