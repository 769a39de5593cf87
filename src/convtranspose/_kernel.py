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
``shift-nxc``, ``shift-ncx``
    The same classes, but every tap of every axis is a row shift of one
    zero-padded copy of the input, so each tap is one accumulating BLAS product
    straight from a view (no im2col at all); rows past the blocks' ends are
    computed and dropped, so it suits large spatial extents.
``col2im-nxc``, ``col2im-ncx``
    One GEMM gives every tap's contribution ``(taps * Co)`` per input position,
    then a strided add per tap.  Cheapest when ``Co * taps`` is small next to
    ``Ci * taps / stride**D`` (few output channels).
``window``
    Every phase of every axis in one GEMM: the input windows spanning all the
    phases' shifts are copied once (a single strided copy of a padded input), the
    phases' taps become one ``(window*Ci, phases*Co)`` matrix (zeros where a phase
    has no tap at a shift), and one interleaving copy writes the output.  Extra
    FLOPs (up to ``(K/s + 1)**D / (K/s)**D``) in exchange for a handful of NumPy
    calls: for small layers and for stride 1 (no waste).
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

Infinities and NaNs
    The result is the IEEE sum over the (input, tap) pairs that exist, so an
    infinite or NaN operand reaches only the outputs its pairs reach.  The
    ``phase``, ``gemm`` and ``shift`` algorithms, ``window`` and numba's ``direct``
    multiply zeros of the padded input by filter taps, and ``window`` and ``dense``
    multiply inputs by zeros of their matrices: with a non-finite operand (``inf *
    0`` is NaN) they would add NaNs the sum does not have.  They check that
    operand (:func:`_all_finite`: the filter once per weights-memo entry; the data
    only in ``window``, and in ``dense`` when one output per sample is not finite)
    and, if it may be non-finite, the call runs the cheapest exact algorithm
    (``col2im-*`` or numba's ``direct-blocked``) instead, even when an algorithm
    was forced: correctness wins over the request.  Special values arise silently
    (``np.errstate``), whichever algorithm runs.
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
from ._machine import cpu_identity, vector_bytes
from ._plan import AxisPlan

__all__ = ["ALGORITHMS", "choose_algorithm", "describe_algorithm", "transposed_convolution"]

#: Every algorithm; ``-nxc``/``-ncx`` name the layout of the GEMM and of its copies
#: (channels or spatial positions contiguous), independent of the input's layout.
ALGORITHMS = ("gemm-nxc", "gemm-ncx", "shift-nxc", "shift-ncx", "phase-nxc", "phase-ncx",
              "col2im-nxc", "col2im-ncx", "window", "direct", "direct-blocked", "dense")

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


def bfloat16_pairs(dtype: np.dtype, operand_dtype: np.dtype) -> bool:
    """Whether ``direct`` may multiply ``operand_dtype`` operands summed in ``dtype`` as
    pairs of bfloat16 (``vdpbf16ps``: numba, AVX512_BF16; see
    :func:`convtranspose._kernel_numba._bfloat16_pairs`, which also checks the values).
    """
    return (dtype == np.float32 and operand_dtype.name == "bfloat16" and _numba_usable()
            and _host_bfloat16_pairs())


@functools.cache
def _host_bfloat16_pairs() -> bool:
    from ._numba_vectors import has_bfloat16_pairs

    return has_bfloat16_pairs()


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


#: OpenBLAS kernel families with AVX-512 sgemm.
_AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


@dataclass(frozen=True, eq=False)
class MachineClass:
    """What the cost model knows of one kind of CPU and the BLAS kernels it runs.

    ``gemm_gflops`` is the large-sgemm speed on two cores; ``calibration`` maps an
    algorithm to the ``(scale, overhead ns)`` that turn its raw estimate into the
    times measured on that kind (``benchmarks/calibrate.py``; absent: as is).
    """

    name: str
    gemm_gflops: float
    calibration: dict[str, tuple[float, ...]]


@functools.cache
def machine_class() -> MachineClass:
    """The :class:`MachineClass` of this process's CPU and of NumPy's OpenBLAS.

    OpenBLAS's AVX-512 kernels run on Intel Xeons (the raw model's constants were
    measured on them) and on AMD Zen 4 (family 25), which executes each 512-bit
    operation in two 256-bit halves: there sgemm runs at half the Xeons' speed and
    the Xeons' raw model chose badly (lost 25% to wrong choices over 54 layers), so Zen
    4 is a class of its own.  Everything else (AVX2 kernels, or no BLAS found) is
    taken for Zen 3.
    """
    if _blas.corename().lower() not in _AVX512_CORES:
        return _ZEN3
    vendor, family = cpu_identity()
    return _ZEN4 if (vendor, family) == ("AuthenticAMD", 25) else _XEON


def _gemm_gflops() -> float:
    """Large-GEMM speed (GFLOP/s, two cores) of the BLAS this process uses."""
    return machine_class().gemm_gflops


@dataclass(frozen=True)
class RawCost:
    """One algorithm's raw estimate (ns): ``scaled``, which the calibration scales;
    ``gemm``, BLAS multiply-adds at the machine class's GEMM speed, which it does not;
    and ``kernel``, a numba kernel's multiply-adds at their modelled rate, which it
    scales on its own where the class's table gives a third number (else as ``scaled``).

    The GEMM speed is measured (:func:`_gemm_gflops`); the pass and call terms are rough
    models whose errors the calibration absorbs.  Scaling both alike, as the calibration
    did until session 19, let the pass terms' scales (0.5-0.85 for the BLAS algorithms)
    shrink the products too: on Zen 4 large GEMM-bound layers then took BLAS at 0.65-0.7
    of its measured time (DCGAN 512->256, U-Net NCX), and ``direct``, often faster there,
    lost.  Numbers add to ``scaled``.
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


def _gemm_ns(rows: int, depth: int, width: int, batches: int = 1) -> RawCost:
    """Rough cost of ``batches`` GEMMs ``(rows, depth) @ (depth, width)``.

    The multiply-adds (``gemm``) at :func:`_gemm_gflops` when every dimension is large;
    narrow products are slower (measured with OpenBLAS on 8192 rows: width 8, 16, 32,
    64, 128 at 30, 60, 75, 87, 93% of the widest, depth mattering little from 32 up);
    writing the result and a per-call overhead (``scaled``).
    """
    flops = 2.0 * rows * depth * width * batches
    efficiency = min(1.0, depth / 32) * width / (width + 12) * min(1.0, rows / 64)
    return RawCost(1.0 * rows * width * batches + 2000 * batches,
                   flops / (_gemm_gflops() * max(efficiency, 0.02)))


#: Per algorithm, ``(scale, overhead ns)`` turning :func:`_raw_costs` into measured
#: float32 times on AMD's two-core VMs: the least-squares fit (in log time) of
#: ``benchmarks/calibrate.py`` over the benchmark suite and 24 random layers on an
#: AMD EPYC Zen 3 (AVX2).  On 24 other random layers (seed 2, not fitted) it cut the
#: time lost to wrong choices from a geometric mean of 28% to 14%, on the suite from
#: 10% to 9% (over all fitted layers: 23% to 12%).  Timed the benchmark's way instead
#: (a pause before each call; that run measured every algorithm 1.5-1.8x slower, the
#: tiny `dense` 3.8x) the same table loses 12%, and a refit on those times did no
#: better (12%).  The scales were fitted with the GEMM term at 200 GFLOP/s and kept
#: when it moved to 160 (session 13: over its 54 measured layers the loss to wrong
#: choices went 13.2% -> 12.7%, and refitted tables did no better).
#: On AMD Zen 4 (session 15, two runs of the 54 layers, GEMM term at 200 GFLOP/s) the
#: same table loses 14-15% (suite 7-8%, random layers 23-25%), against 25-34% for the
#: raw model and 18-21% for least-squares refits; scales tuned to one half of a run's
#: choices gained 2-14% on that half and lost 1.5-11% on the other, so Zen 4 shares
#: this table, but for ``direct`` (see ``_ZEN4``).
#: Since session 19 the scales apply to the pass and call terms only, not to the BLAS
#: multiply-adds (:class:`RawCost`), which stay at the class's measured GEMM speed: on
#: Zen 4's two calibration runs with the current kernels (sessions 17 and 19) the time
#: lost to wrong choices went 8.2% -> 7.1% and 10.3% -> 8.5% (suite 3.4 -> 1.2%, 4.4 ->
#: 1.0%; random layers 14.4 -> 15.0%, 18.2 -> 18.8%: one 512->8192 g32 layer, 1.12x),
#: and on a third run, recording the split, 11.0% -> 9.6% (suite 6.4 -> 4.7%).
#: DCGAN 512->256, U-Net and HiFi-GAN k16 NCX moved from BLAS to ``direct`` (35 -> 28,
#: 7.3 -> 7.2, 224-252 -> 198 ms timed with pauses).  Session 15's runs, of kernels
#: since replaced (``direct`` then up to 1.5x slower), would have lost more (14.5 ->
#: 19%).  Zen 3 (not measured since session 14) takes the same structure: there, in
#: session 13, the GEMM terms' fitted scales came out 1.6-2.3 times the rest's.
_AMD_CALIBRATION: dict[str, tuple[float, float]] = {
    "gemm-nxc": (0.7, 200000),
    "gemm-ncx": (0.612, 200000),
    "shift-nxc": (0.925, 200000),
    "shift-ncx": (0.782, 200000),
    "phase-nxc": (0.563, 120000),
    "phase-ncx": (0.484, 120000),
    "col2im-nxc": (0.541, 80000),
    "col2im-ncx": (0.502, 80000),
    "window": (0.562, 120000),
    "direct": (0.45, 20000),
    "direct-blocked": (0.579, 50000),
    "dense": (1.325, 0),
}

#: The Xeons (AVX-512) the raw model was measured on: sgemm at about 400 GFLOP/s.
_XEON = MachineClass("xeon-avx512", 400.0, {})
#: AMD Zen 3 (AVX2): sgemm 147-175 GFLOP/s in the benchmark's roofline.  The GEMM
#: speed was 200 until session 13, which made the GEMM part of every BLAS algorithm
#: cheap next to its copies (fitted separately, the GEMM terms' scales came out
#: 1.6-2.3 times the rest's).
#: Its ``direct`` scales its multiply-adds (0.70) apart from its fills, stores and
#: call terms (0.25): the kernels of sessions 15-24 (the row kernel, wider blocks)
#: left the one scale of session 13 (0.45 for both) pricing the large GEMM-like layers
#: at 0.5-0.65x their measured times, and the layers made of copies at 1.5-5x
#: (session 25, ``benchmarks/calibrate.py`` on the suite and 12 random layers, seed 1:
#: squared log error 20.7 -> 4.4 with the two scales fitted alone).  Kernel scales of
#: 0.76-0.92 lost least to wrong choices in that run, in a second run of the same
#: layers and on 20 other random layers (seed 2, not fitted); the AVX2 row kernel then
#: got 0.84x faster (:func:`convtranspose._kernel_numba.rows_block`), and 0.70 is the
#: highest scale that keeps DCGAN 512->256 NCX on it (alternating: 42.6 ms against
#: ``gemm-ncx``'s 46.8; with 0.88 the benchmark took ``gemm-ncx``, 0.68x the best
#: peer).  ``direct-blocked`` keeps its scale but costs 0.1 ms more per call: called
#: as users call it (``conv_transpose``), FCN-2x took 0.39-0.47 ms with it against
#: 0.20-0.23 with ``direct`` (the calibration's own calls, 0.37 ms both), and only the
#: higher overhead keeps the grouped layers on ``direct`` (bfloat16: 17 against 26
#: ms; float32 even).  Time lost to wrong choices, geometric mean, on those runs' old
#: row kernel: seed 1 runs 1.106 / 1.104 -> 1.070 / 1.114, seed 2 1.131 -> 1.068.
#: HiFi-GAN k16 NCX moves to ``col2im-ncx`` (371 -> 295 ms, alternating), DCGAN
#: 512->256 NXC to ``gemm-nxc`` (45 -> 29.5-33.6).
_ZEN3 = MachineClass("zen3-avx2", 160.0, {**_AMD_CALIBRATION, "direct": (0.25, 50000, 0.70),
                                           "direct-blocked": (0.579, 100000)})
#: AMD Zen 4 (AVX-512 in 256-bit halves): sgemm 190-200 GFLOP/s on two cores for
#: large products (NumPy's OpenBLAS runs its SkylakeX kernels there).  The AMD table
#: but for numba ``direct``, whose plane kernel runs its 24-accumulator AVX-512 blocks
#: at 54-56 GMAC/s per core here (Zen 3's 12-accumulator AVX2 blocks: 30-35), so that
#: the BLAS algorithms measured 1.2-1.4x their estimates in session 17's benchmark and
#: ``direct`` 0.7-0.8x.  Its scale, 0.37 instead of 0.45, is the middle of the range
#: (0.36-0.385) that loses least to wrong choices in all three calibration runs on Zen 4
#: (sessions 15 and 17, 54 layers each): 14.5% -> 11.0% with session 17's kernel
#: (suite 8.5 -> 8.4%, random layers 22.5 -> 14.3%), 13.9 -> 12.7% and 15.1 -> 11.8% in
#: session 15's.  It gives HiFi-GAN k4 NCX (139 -> 117 ms measured) and DCGAN 256->128
#: NXC (29.1 -> 23.7) to ``direct``, and dilated NXC too (1.83 -> 2.58 ms, against
#: ``direct-blocked``'s 1.39, which the model ranked third).  ``direct-blocked``'s
#: AVX-512 blocks gain alike: its scale, 0.40 instead of 0.579, is at the low end of
#: the plateau (0.40-0.46; 0.38 and below lose more again) that loses least in
#: session 17's run once it is no longer offered for a few output channels
#: (:func:`blocked_offered`): 11.0% -> 8.2% (suite 8.4 -> 3.4%).  It gives dilated NXC
#: (2.71 -> 1.74 ms, timed with pauses in session 18), stride-1 NXC (1.87 -> 1.69) and
#: 3D k3 NCX (36.6 -> 31.2) to ``direct-blocked``.
_ZEN4 = MachineClass("zen4-avx512", 200.0, {**_AMD_CALIBRATION, "direct": (0.37, 20000),
                                             "direct-blocked": (0.40, 50000)})


def _calibration() -> dict[str, tuple[float, ...]]:
    """The ``(scale, overhead ns[, kernel scale])`` per algorithm for this machine (none:
    as is; see :class:`RawCost`)."""
    return machine_class().calibration


def _costs(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
           channels_last: bool, numba: bool, integer: bool, blas: bool = False,
           pairs: bool = False) -> dict[str, float]:
    """Estimated nanoseconds per algorithm: :func:`_raw_costs` calibrated (:func:`_calibration`)."""
    raw = _raw_costs(batch, axes, weights_shape, channels_last, numba, integer, blas, pairs)
    calibration = _calibration()
    return {name: calibrated_ns(cost, calibration.get(name, (1.0, 0.0)))
            for name, cost in raw.items()}


def calibrated_ns(cost: RawCost, entry: tuple[float, ...]) -> float:
    """``cost`` through one calibration ``entry``, ``(scale, overhead ns[, kernel
    scale])``: the kernel part scaled by the third number if there is one, else as
    ``scaled``; the BLAS part as is."""
    scale, overhead, *kernel_scale = entry
    return (scale * cost.scaled + (kernel_scale or [scale])[0] * cost.kernel + cost.gemm
            + overhead)


#: Extra cost of ``col2im-nxc``'s scatter-add per added element, over the square of
#: its run (the output channels): NumPy's add restarts its inner loop per run, which
#: the pass term undercharges for a few channels (calibration run of session 10: Co 3
#: and 8 measured 2.8-3.2x their estimates, Co 64-256 0.5-1.4x; with this term the
#: suite and 24 random layers lose 9.4% to wrong choices instead of 12%, worst 1.65x
#: instead of 3.15x).
_SHORT_RUN_NS = 200.0


#: ``col2im-nxc`` adds its columns with numba (:func:`convtranspose._kernel_numba.col2im_scatter`)
#: below this many output channels per group, where NumPy's strided adds restart their
#: loop every few elements (DCGAN 128->3 NXC: 11.3 -> 5.3 ms); runs this long NumPy
#: adds vectorised.
SCATTER_MAX_CHANNELS = 16


def _numba_scatters(internal_last: bool, co: int, rank: int, numba: bool) -> bool:
    """Whether ``col2im`` adds its columns with numba (``numba``: usable for this dtype)."""
    return numba and internal_last and co < SCATTER_MAX_CHANNELS and rank <= 3


def _raw_costs(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
               channels_last: bool, numba: bool, integer: bool, blas: bool = False,
               pairs: bool = False) -> dict[str, RawCost]:
    """Estimated nanoseconds per algorithm, before calibration (a model per algorithm).

    ``pairs``: bfloat16 operands that ``direct`` may multiply as pairs
    (:func:`bfloat16_pairs`).
    """
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
    # Channels-first products are stored along the last axis: whole rows of blocks
    # when its stride is 1, single elements between the other phases' otherwise.
    ncx_run = blocks[-1] if axes[-1].stride == 1 else 1
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
            run = combo[-1].count * co if internal_last else ncx_run
            cost += _pass_ns(groups * rows_phase * width, run if same_layout else 1)
        costs["phase-nxc" if internal_last else "phase-ncx"] = cost
    if blas:
        lead_classes, rest_combos = _live_classes(tuple(phases))
        rest_padding = any(p.pad_low or p.pad_high for p in phases[1:])
        for internal_last in (True, False):
            same_layout = internal_last == channels_last
            cost = 0.0
            for combo in rest_combos:
                slots = math.prod(len(c.shifts) for c in combo)
                # The first axis's padding costs copies only at the ends (views inside).
                if slots > 1 or rest_padding or not same_layout or batch > 1:
                    cost += _pass_ns(slots * inputs, (ci if internal_last else blocks[-1])
                                     if same_layout else 2)
                for lead_class in lead_classes:
                    width = lead_class.count * math.prod(c.count for c in combo) * co
                    cost += _gemm_ns(rows_phase, slots * ci, width,
                                     groups * len(lead_class.shifts)) + 40000
                    if rank == 1 and internal_last and channels_last:
                        continue  # written straight into the output
                    run = (combo[-1].count if combo else lead_class.count) * co
                    cost += _pass_ns(groups * rows_phase * width,
                                     run if internal_last and same_layout else ncx_run)
            costs["gemm-nxc" if internal_last else "gemm-ncx"] = cost
        sizes, _, _ = _shift_grid(axes, tuple(phases))
        grid_rows = batch * math.prod(sizes)
        for internal_last in (True, False):
            same_layout = internal_last == channels_last
            cost = _pass_ns(inputs, (ci if internal_last else spatial_in[-1])
                            if same_layout else 2)
            for combo in itertools.product(*(p.classes for p in phases)):
                slots = math.prod(len(c.shifts) for c in combo)
                if slots == 0:
                    continue
                width = math.prod(c.count for c in combo) * co
                cost += _gemm_ns(grid_rows, ci, width, groups * slots) + 30000
                run = combo[-1].count * co if internal_last else ncx_run
                cost += _pass_ns(groups * rows_phase * width, run if same_layout else 1)
            costs["shift-nxc" if internal_last else "shift-ncx"] = cost
    live = math.prod(sum(w is not None for w in _tap_windows(axis)) for axis in axes)
    for internal_last in (True, False):
        same_layout = internal_last == channels_last
        cost = _gemm_ns(rows_in, ci, taps * co, groups) + _pass_ns(outputs, 64)
        if not same_layout or batch > 1 and not internal_last:
            cost += _pass_ns(inputs, 2 if not same_layout else spatial_in[-1])
        run = ((co if internal_last else spatial_in[-1] // max(1, axes[-1].stride))
               if same_layout else 1)
        adds = live * groups * rows_in * co
        if _numba_scatters(internal_last, co, rank, numba and not integer):
            cost += 7.0 * adds  # numba's pass: 3-4 ns per add measured on two threads
        else:
            cost += 1.5 * _pass_ns(adds, run) + live * 3000
            if internal_last:
                cost += adds * _SHORT_RUN_NS / max(1, run) ** 2
        costs["col2im-nxc" if internal_last else "col2im-ncx"] = cost
    dense = groups * ci * math.prod(spatial_in) * groups * co * math.prod(spatial_out)
    if dense <= DENSE_MAX_ELEMENTS:
        costs["dense"] = 2.0 * batch * dense / 20.0 + 0.3 * dense + 5000
    window = _window_cost(batch, axes, weights_shape, channels_last)
    if window is not None:
        costs["window"] = window
    if numba and not integer and rank <= 3:
        rows = _rows_take_layer(axes, weights_shape, channels_last)
        costs["direct"] = _direct_cost(batch, axes, weights_shape, channels_last, pairs, rows)
        if blocked_offered(ci, co, channels_last, rows):
            costs["direct-blocked"] = _blocked_ns(batch, groups, ci, co, axes, channels_last)
    # Estimates without BLAS products (or no live class) are plain numbers.
    return {name: cost if isinstance(cost, RawCost) else RawCost(cost)
            for name, cost in costs.items()}


#: The overhead and pass terms of ``window`` and ``direct`` are measured times
#: scaled by this factor, the ratio between the other algorithms' estimates and
#: their measured times on the benchmark layers (their pass terms assume slower
#: copies than NumPy achieves on cache-sized buffers).
_MODEL_SCALE = 2.5


def _window_cost(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                 channels_last: bool) -> RawCost | None:
    """Estimated nanoseconds of ``window``: few calls, but FLOPs for absent taps too."""
    groups, ci, co = weights_shape[:3]
    phases, combo, unreached = _window_plan(axes)
    if combo is None:
        return None
    blocks = [p.blocks for p in phases]
    rows = batch * math.prod(blocks)
    depth = math.prod(len(c.shifts) for c in combo) * ci
    width = math.prod(c.count for c in combo) * co
    inputs = batch * groups * ci * math.prod(b + len(c.shifts) - 1 for b, c in zip(blocks, combo))
    outputs = batch * groups * co * math.prod(axis.output_size for axis in axes)
    cost = _pass_ns(inputs, ci if channels_last else 1)  # the padded copy
    cost += _pass_ns(groups * rows * depth, len(combo[-1].shifts) * ci)  # the windows
    cost += _pass_ns(groups * rows * width, combo[-1].count * co if channels_last else 1)
    if unreached:
        cost += 0.5 * outputs
    # A fixed handful of NumPy calls, against the per-class calls of phase and gemm.
    return cost + _gemm_ns(rows, depth, width, groups) + _MODEL_SCALE * 15000


#: Layers of the numba direct kernels with fewer multiply-adds than this run on the
#: calling thread: waking a helper thread costs 0.1-0.2 ms on a loaded 2-core VM, about
#: this much work (FCN-2x 21->21 16^2, 1.8 M: 0.12 ms back to back on one thread, 0.19
#: on two).
DIRECT_PARALLEL_MACS = 1 << 22
#: Output channels per register block of the numba plane kernel (fewer when the layer
#: has fewer; zero weights pad a short last block).
PLANE_CO_BLOCK = 3


#: Channels-last layers with fewer channels than this (per side, G * max(Ci, Co)) are
#: computed by the numba plane kernel: vectors along so few channels are too short.
DIRECT_CHANNELS_LAST_MIN_WIDTH = 8


def direct_per_position(groups: int, ci: int, co: int, channels_last: bool) -> bool:
    """Whether numba ``direct`` takes its per-position kernel (else the plane kernel).

    Channels-last layers with many groups of few channels, which the plane kernel
    would read and write with large strides; at most 4 products per group, or the
    per-position kernel's channel loops have run-time bounds and do not vectorise
    (FCN-2x 21->21 channels-last: 0.40 ms there, 0.13 ms in the plane kernel).
    """
    return (channels_last and groups * max(ci, co) >= DIRECT_CHANNELS_LAST_MIN_WIDTH
            and ci * co <= 4)


def _direct_rounds(weights_shape: tuple[int, ...], axes: Sequence[AxisPlan],
                   channels_last: bool) -> bool:
    """Whether numba ``direct`` rounds half results as it stores them: its plane kernel
    does, the per-position kernel (and the NumPy fallback beyond 3-D) does not."""
    return len(axes) <= 3 and not direct_per_position(*weights_shape[:3], channels_last)


def direct_worth_threads(out_size: int, ci: int, axes: Sequence[AxisPlan]) -> bool:
    """Whether a numba direct layer has enough multiply-adds for helper threads."""
    taps = math.prod(axis.kernel_size for axis in axes)
    return (out_size * max(1, ci) * taps
            >= DIRECT_PARALLEL_MACS * math.prod(axis.stride for axis in axes))


#: The plane kernel's blocks keep at least this many accumulators (channels times
#: vectors) when :func:`plane_schedule` shortens them: Zen 3's two FMA pipes with a
#: latency of 4 cycles need 8 independent sums to stay busy (Zen 4's one 512-bit FMA
#: per cycle needs 4).
PLANE_MIN_ACCUMULATORS = 8


@functools.lru_cache(maxsize=256)
def plane_schedule(blocks: int, plane: int, tail: int, widest_band: int, min_bands: int,
                   lanes: int, most_vectors: int, co_block: int = PLANE_CO_BLOCK,
                   row_segments: int = 0) -> tuple[int, int, int, int]:
    """``(band, vectors, positions, segments)``: how the numba plane kernel covers one
    phase's runs.

    A plane's ``blocks`` output rows (of the first axis) are cut into bands of ``band``
    rows, at most ``widest_band`` (cache) and at least ``min_bands`` bands (threads); a
    band of ``b`` rows is one run of ``(b - 1) * plane + tail`` window positions, which
    the kernel covers with whole register blocks of ``lanes * vectors`` positions.
    The choice computes the fewest ``positions`` per phase and plane (ties: longer
    blocks, then fewer bands), among equal bands and blocks of half to all of
    ``most_vectors`` that keep :data:`PLANE_MIN_ACCUMULATORS` for ``co_block`` output
    channels.  A fixed block of 128 positions (AVX-512, Zen 4) covered DCGAN
    256->128's runs of 232 and 52 positions (bands of 13 and 3 rows) with 384 positions
    per phase for its 256 outputs; two bands of 8 rows in blocks of 80 take 320
    (alternating runs, two threads: 35.9 -> 30.2 ms; FCN-32x 15.3 -> 12.0).

    ``row_segments`` (2-D layers, whose window rows are ``plane`` apart): the kernel
    may instead take blocks of whole output rows, ``row_segments`` vectors each (the
    outputs of a row, rounded up to whole vectors), so that no border column is
    computed; a band of ``b`` rows then costs ``b`` rows rounded up to whole blocks.
    ``segments`` is 0 for flat runs, else ``row_segments`` (ties: flat runs).
    DCGAN 256->128 (16 outputs per row, 16 lanes): 256 positions per phase instead
    of 320.
    """
    fewest = max(min_bands, -(-blocks // max(1, widest_band)))
    shortest = min(most_vectors, max(-(-most_vectors // 2),
                                     -(-PLANE_MIN_ACCUMULATORS // max(1, co_block))))
    best = None
    for bands in range(min(fewest, blocks), min(fewest + 2, blocks) + 1):
        band = -(-blocks // bands)
        sizes = [band] * (blocks // band) + ([blocks % band] if blocks % band else [])
        for vectors in range(shortest, most_vectors + 1):
            length = lanes * vectors
            positions = sum(-(-((size - 1) * plane + tail) // length) * length
                            for size in sizes)
            key = (positions, 0, -vectors, len(sizes))
            if best is None or key < best[0]:
                best = (key, band, vectors, positions, 0)
            if row_segments and vectors % row_segments == 0:
                rows = vectors // row_segments
                positions = sum(-(-size // rows) * length for size in sizes)
                key = (positions, 1, -vectors, len(sizes))
                if key < best[0]:
                    best = (key, band, vectors, positions, row_segments)
    return best[1:]


#: The plane kernel takes half vectors (8 float32 lanes on AVX-512, which keeps its 32
#: registers) when whole ones would compute at least this many times the positions.
#: On Zen 4 (one thread, alternating), half vectors with as many accumulators ran DCGAN
#: 256->128 1.19x slower (same positions: 42 -> 50 ms), but DCGAN 512->256, whose rows
#: of 8 outputs take 80 positions per phase in whole vectors and 64 in halves, 7-11%
#: faster (51.3 -> 47.6 ms; two threads, paused: 27.1-27.9 -> 24.9-25.3).
HALF_VECTOR_WASTE = 1.2


def plane_lanes(schedule, lanes: int, halves: bool) -> tuple[int, tuple[int, int, int, int]]:
    """``(lanes, schedule(lanes))`` for the plane kernel, or half the lanes where that pays.

    ``schedule(lanes)`` is the :func:`plane_schedule` of the layer's plane for that many
    lanes; ``halves``: the kernel may take half vectors (32 vector registers, and no
    bfloat16 pairs, whose instruction takes whole ones).  Half vectors are taken when
    whole ones compute at least :data:`HALF_VECTOR_WASTE` times their positions.
    """
    whole = schedule(lanes)
    if halves and lanes % 2 == 0:
        half = schedule(lanes // 2)
        if half[2] and whole[2] >= HALF_VECTOR_WASTE * half[2]:
            return lanes // 2, half
    return lanes, whole


#: A long 1-D line is cut into segments whose window (every input channel's inputs)
#: and accumulators hold about this many elements, like the bands of a 2-D plane.
LINE_SEGMENT_ELEMENTS = 1 << 16


def line_segment_inputs(ci: int, stride: int) -> int:
    """Inputs per segment of a long 1-D line in the numba plane kernel
    (:func:`convtranspose._kernel_numba._direct_line_segments`)."""
    return max(64, LINE_SEGMENT_ELEMENTS // (ci + PLANE_CO_BLOCK * stride))


def line_segmented(axis: AxisPlan, ci: int) -> bool:
    """Whether the plane kernel cuts this 1-D layer's line into segments (at least
    three): one line's window would hold every input channel's whole line, out of
    cache and one piece of work (HiFi-GAN 256->128 L65536: 64 MB, 1.2 s instead of
    0.11-0.16)."""
    return axis.input_size > 2 * line_segment_inputs(ci, axis.stride)


#: Multiply-adds per nanosecond of the numba plane kernel on one thread, per number of
#: output channels in its register blocks (vectorised along the spatial axes, the
#: window in cache).  The former kernel, a pass over an accumulator row per channel
#: and four taps, ran at 20-25 on AVX-512; the register blocks were measured against
#: it on Zen 3 (AVX2): 1.3x with one channel per block, 1.85x with two, 2x with three.
_DIRECT_MACS_PER_NS = {1: 26.0, 2: 37.0, 3: 40.0}


def _rows_take_layer(axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                     channels_last: bool) -> bool:
    """Whether numba ``direct`` gives this float32 layer to its row kernel
    (:func:`convtranspose._kernel_numba.rows_apply`; the model prices half data alike)."""
    if len(axes) > 3:
        return False
    from ._kernel_numba import _three_axes, rows_apply

    f32 = np.dtype(np.float32)
    return rows_apply(weights_shape, _three_axes(axes), channels_last, f32, f32, f32)


def _direct_cost(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                 channels_last: bool, pairs: bool, rows: bool) -> RawCost:
    """Estimated nanoseconds of numba ``direct`` (see :mod:`convtranspose._kernel_numba`).

    Channels-last layers with many groups of at most 4 products go to a
    per-position kernel (constant channel loops); all other layers to the plane
    kernel (channels-last data read and written with strides): per (sample, group)
    plane, every tap of every phase is one long vectorised multiply-add over the
    zero-bordered input window (its border columns included), for every input channel
    and block of up to three output channels (a short last block computes padding).
    With ``pairs`` (bfloat16, :func:`bfloat16_pairs`) one instruction multiplies and
    adds two input channels.  ``rows``: the row kernel takes the layer
    (:func:`_rows_take_layer`), priced at :data:`_ROWS_TIME` of the plane kernel.
    """
    groups, ci, co = weights_shape[:3]
    outputs = batch * groups * co * math.prod(axis.output_size for axis in axes)
    inputs = batch * groups * ci * math.prod(axis.input_size for axis in axes)
    taps = math.prod(weights_shape[3:])
    if direct_per_position(groups, ci, co, channels_last):
        # Scalar loops over a few channels per position: priced, and scaled, as passes.
        return RawCost(1.0 * inputs * co * taps + 1.0 * outputs)
    phases = [_axis_phases(axis) for axis in axes]
    # Per phase, one pass over the window rows of its blocks (the first axis is cut
    # into bands; the window spans every shift of the others).
    span = 1
    for a, p in enumerate(phases):
        shifts = [shift for c in p.classes for shift in c.shifts] or [0]
        span *= p.blocks + (max(shifts) - min(shifts) if a else 0)
    if len(axes) == 2:  # or blocks of whole rows, in vectors (plane_schedule)
        lanes = vector_bytes() // 4  # float32 lanes (numba is usable here)
        span = min(span, phases[0].blocks * -(-phases[1].blocks // lanes) * lanes)
    tap_phases = math.prod(sum(len(c.shifts) * c.count for c in p.classes) for p in phases)
    co_block = min(PLANE_CO_BLOCK, co)
    units = -(-ci // 2) if pairs else ci  # input channels per multiply-add instruction
    macs = batch * groups * units * -(-co // co_block) * co_block * tap_phases * span
    rate = _DIRECT_MACS_PER_NS[co_block]
    items = batch * groups * (phases[0].blocks if len(axes) > 1 else 1)
    if len(axes) == 1 and line_segmented(axes[0], ci):
        items *= -(-axes[0].output_size // (axes[0].stride * line_segment_inputs(
            ci, axes[0].stride)))
    threads = min(_THREADS, items) if direct_worth_threads(outputs, ci, axes) else 1
    # Copying the input into the windows (channels last: a pixel's channels read in
    # order, written to Ci windows), and interleaving the phases of the last axis into
    # output rows: vector stores for stride 1 and 2, one strided run per phase beyond.
    strided = channels_last and groups * max(ci, co) > 1
    fills = inputs * (1.0 if strided else 0.5)
    stores = outputs * ((2.0 if strided else 1.0) if axes[-1].stride <= 2 else 6.0)
    cost = RawCost(_MODEL_SCALE * ((fills + stores) / threads + 10000),
                   kernel=_MODEL_SCALE * macs / rate / threads)
    if rows:
        cost = RawCost(cost.scaled * _ROWS_TIME, kernel=cost.kernel * _ROWS_TIME)
    return cost


#: The row kernel's time over the plane kernel's (the model's) on the layers numba
#: ``direct`` gives it (:func:`convtranspose._kernel_numba.rows_apply`): 0.79x, the
#: geometric mean of 14 random layers of last-axis stride 2 in session 23
#: (``benchmarks/row_kernel.py --seed 1 --layers 24 --any-stride``).  Without it
#: ``direct-blocked`` took the grouped NCX layer (11.8 ms against the row kernel's 10.3).
_ROWS_TIME = 0.8


#: ``direct-blocked`` keeps a block of outputs' channels in registers: for at most
#: this many output channels per group, but for channels-last layers on AVX-512
#: (wider pixels in chunks of vectors, :func:`convtranspose._kernel_numba.blocked_shape`)
#: and channels-first ones that numba ``direct``'s row kernel does not take.
BLOCKED_MAX_CHANNELS = 64


def blocked_offered(ci: int, co: int, channels_last: bool, rows: bool) -> bool:
    """Whether the cost model offers ``direct-blocked`` for these channels per group.

    ``rows``: numba ``direct`` gives the layer to its row kernel (:func:`_rows_take_layer`).

    Not for more than :data:`BLOCKED_MAX_CHANNELS` output channels on AVX2.  On AVX-512,
    for any number of them channels last: there, in session 20, it beat the algorithm
    chosen before on seven of eight such layers tried (up to 2.2x; U-Net NXC 7.1-7.6 ->
    6.0-6.2 ms) and lost on a 3D k1 s4 one (1.1 -> 1.6-1.9 ms).  Channels first (each
    line's wide tile written back transposed, a plane per channel), not where the row
    kernel takes the layer, where it still loses (session 26: U-Net 5.96 against 5.49 ms,
    DCGAN 256->128 20.9 against 19.9).  Elsewhere it beat the plane kernel by up to 1.6x
    since its line ends go in blocks across lines and a segment's tile holds only the
    segment (sessions 26 and 27; 3-D k4 s2 128->128 11.1 against 16.3 ms, HiFi-GAN k16 177
    against 189, k4 109 against 98, which the model leaves to ``direct``; DCGAN 512->256
    0.93-1.12x, within the noise).  Offering it cut the time lost to the model's choices
    from 35% to 5.9% on 20 random wide channels-first layers, and from 55% to 20% on 10
    random 1-D ones of one sample, whose lines are cut into segments (forced runs, two
    threads, alternating with pauses; the worst new choice took 1.14x the plane kernel's
    time, the best was up to 6.3x faster).

    Nor for at most half a vector of output channels (8 float32 on AVX-512, 4 on AVX2):
    the block holds output channels in its lanes, so most of each multiply-add would be
    padding, while the plane kernel of ``direct`` vectorises along space.  In session
    17's calibration run (Zen 4), ``direct`` beat it on all eleven layers with 1-8
    output channels (1.02-4.6x), and its estimate missed by 0.55-2.05x there, too
    scattered to calibrate.  Nor for at most four products per group (``ci * co``),
    which the per-position kernel of ``direct`` takes.
    """
    wide = vector_bytes() == 64 and (channels_last or not rows)
    return 2 * co > vector_bytes() // 4 and (co <= BLOCKED_MAX_CHANNELS or wide) and ci * co > 4


#: ``direct-blocked`` cuts the lines of a layer with fewer lines than threads into
#: segments of at least this many outputs per phase of the last axis.
BLOCKED_SEGMENT_OUTPUTS = 256


def blocked_segments(lines: int, last_axis: AxisPlan, threads: int) -> int:
    """Into how many runs of the last axis ``direct-blocked`` cuts each of its ``lines``.

    One, unless there are fewer lines than ``threads`` (a 1-D layer of one sample,
    HiFi-GAN, would run on one core: 354 instead of about 190 ms for k16 NXC): then
    enough segments for every thread to take several, each at least
    :data:`BLOCKED_SEGMENT_OUTPUTS` outputs per phase.
    """
    if lines >= threads:
        return 1
    longest = last_axis.output_size // (BLOCKED_SEGMENT_OUTPUTS * last_axis.stride)
    return max(1, min(-(-8 * threads // lines), longest))


#: ``direct-blocked`` on channels-first data pays about one strided pass over the
#: input (a channels-last copy, or each block reading Ci distant planes): without it
#: stride-1 64->64 64^2 NCX was estimated at half its time and took it over BLAS
#: (5.8 against gemm's 3.9 ms in the calibration run of session 10).
_BLOCKED_NCX_INPUT = 1.0


#: ``direct-blocked``'s blocks whose loop over taps and input channels is at least
#: this long stream their weights from L2 or L3 at the FMA rate (see :func:`_blocked_ns`).
_BLOCKED_STREAMED_LOOP = 512


def _blocked_ns(batch: int, groups: int, ci: int, co: int, axes: tuple[AxisPlan, ...],
                channels_last: bool) -> float:
    """Rough cost of ``direct-blocked`` (in the units of the other estimates).

    Multiply-adds at about 220 GFLOP/s on two cores (the machine's FMA peak; on fewer
    where the layer has fewer lines, or segments of lines, than threads), with
    the output channels padded to whole vectors and each phase's run of outputs
    with all taps inside the input covered by the kernel's blocks
    (:func:`convtranspose._kernel_numba.blocked_shape`; the others, at line ends,
    cost about three outputs each, two for more than four vectors of output channels,
    which keep one output's FMAs busy; since session 26 the line ends of whole lines go
    in blocks across consecutive lines, about 1 output each, which this estimate
    leaves out: it charges them as before, so the choices it made stay as measured);
    lines whose output
    channels are not whole vectors, or are channels first, go through a copy, and
    channels-first input costs a strided pass (:data:`_BLOCKED_NCX_INPUT`).  The
    other algorithms' estimates run about 3x their measured times, so this one is
    scaled alike.
    """
    from ._kernel_numba import blocked_shape

    lanes, vectors, _, pixels = blocked_shape(4, co, axes[-1])
    width = lanes * vectors
    # DCGAN 512->256 NXC, 2 of 16 outputs per line at its ends: 24.0 ms against
    # gemm-nxc's 29.0 alternating, which three each ranked first.
    edge = 2 if vectors > 4 else 3
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
                    inside = inside if inside >= pixels else 0
                    count = -(-inside // pixels) * pixels + edge * (count - inside)
                total += count * len(c.shifts)  # a phase no tap reaches is only zeroed
        per_axis.append(total)
    macs = batch * groups * width * ci * math.prod(per_axis)
    outputs = batch * groups * co * math.prod(axis.output_size for axis in axes)
    lines = batch * groups * math.prod(axis.output_size for axis in axes[:-1])
    copied = outputs if co != width or not channels_last else 0
    # A line whose weights (all phases of the last axis) are far beyond L1 reloads
    # each phase's from L2 for its few blocks: FCN-32x (344 KB per line, 2 blocks per
    # phase) ran at half the FLOP rate; 64 KB per line (3D 128->64 k2 s2) did not.
    # Nor did blocks with a long loop over taps and input channels, which the
    # prefetcher streams (DCGAN 512->256 NXC, 4 taps x 512 channels a block, 4 MB a
    # line: 22-35 ms, 0.87-0.92x of `gemm-nxc`'s time alternating; FCN-32x: 4 x 21).
    tap_counts = [sum(len(c.shifts) * c.count for c in _axis_phases(axis).classes) /
                  max(1, axis.stride) for axis in axes]
    last = axes[-1]
    line_weights = math.prod(tap_counts) * last.stride * ci * width
    reloaded = 0.0
    if (line_weights * 4 > 131072 and last.output_size < 3 * 8 * last.stride
            and math.prod(tap_counts) * ci < _BLOCKED_STREAMED_LOOP):
        reloaded = lines * line_weights
    inputs = batch * groups * ci * math.prod(axis.input_size for axis in axes)
    transposed = 0 if channels_last else inputs * _BLOCKED_NCX_INPUT
    # The lines (or their segments) are shared out among the threads.
    items = lines * blocked_segments(lines, axes[-1], _THREADS)
    idle = _THREADS / max(1, min(_THREADS, items))
    return 3.0 * (2.0 * macs / 220.0 * idle + 0.3 * copied + transposed + 0.25 * reloaded
                  + 50.0 * lines + 20000)


#: Nanoseconds per output element of a float32 result that is then rounded to float16
#: or bfloat16 (allocated, written, rounded): 1.0-1.4 measured on Zen 3 for 6.4 M.
_ROUNDING_NS = 1.0


@functools.lru_cache(maxsize=512)
def _choose(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
            channels_last: bool, dtype: np.dtype, numba: bool, blas: bool,
            rounded: bool = False, pairs: bool = False) -> str:
    if batch * math.prod(weights_shape) * math.prod(a.input_size for a in axes) == 0:
        return "phase-nxc" if channels_last else "phase-ncx"
    costs = _costs(batch, axes, weights_shape, channels_last, numba, dtype.kind != "f", blas,
                   pairs)
    if rounded:  # only direct-blocked and direct's plane kernel round as they store
        outputs = batch * weights_shape[0] * weights_shape[2] * math.prod(
            axis.output_size for axis in axes)
        in_kernel = ({"direct-blocked", "direct"} if _direct_rounds(weights_shape, axes,
                                                                    channels_last)
                     else {"direct-blocked"})
        costs = {name: cost + (0 if name in in_kernel else _ROUNDING_NS * outputs)
                 for name, cost in costs.items()}
    return min(costs, key=costs.get)


#: Algorithms that multiply only the (input, tap) pairs that exist, so that an
#: infinite or NaN operand reaches exactly the outputs of the canonical sum (the
#: fallback of the others, see "Infinities and NaNs" in the module docstring).
#: ``direct-blocked`` is listed as its numba kernel: the cost model offers it only
#: with numba.
_EXACT_ALGORITHMS = frozenset({"col2im-nxc", "col2im-ncx", "direct-blocked"})


@functools.lru_cache(maxsize=512)
def _choose_exact(batch: int, axes: tuple[AxisPlan, ...], weights_shape: tuple[int, ...],
                  channels_last: bool, dtype: np.dtype, numba: bool, blas: bool) -> str:
    costs = _costs(batch, axes, weights_shape, channels_last, numba, dtype.kind != "f", blas)
    exact = {name: cost for name, cost in costs.items() if name in _EXACT_ALGORITHMS}
    return min(exact, key=exact.get)


def choose_algorithm(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int], *,
                     channels_last: bool = False, dtype=np.float32, result_dtype=None) -> str:
    """The algorithm :func:`transposed_convolution` uses for these shapes (cached).

    ``result_dtype``: float16 or bfloat16 when the ``dtype`` sums are rounded to it;
    the algorithms that need a whole ``dtype`` result first are charged for it.
    ``CONVTRANSPOSE_ALGORITHM`` overrides the choice.
    """
    forced = switch(ALGORITHM_ENV)
    if forced:
        if forced not in ALGORITHMS:
            raise ValueError(f"{ALGORITHM_ENV}={forced!r}; expected one of {ALGORITHMS}")
        return forced
    from ._casts import rounds_in_kernels

    numba = _numba_usable()
    rounded = (result_dtype is not None and numba
               and rounds_in_kernels(np.dtype(dtype), np.dtype(result_dtype)))
    pairs = result_dtype is not None and bfloat16_pairs(np.dtype(dtype), np.dtype(result_dtype))
    return _choose(batch, tuple(axes), tuple(weights_shape), bool(channels_last),
                   np.dtype(dtype), numba, _blas.available(dtype), rounded, pairs)


def describe_algorithm(batch: int, axes: Sequence[AxisPlan], weights_shape: Sequence[int], *,
                       channels_last: bool = False, dtype=np.float32, result_dtype=None) -> str:
    """A short human-readable name of the chosen algorithm (for benchmark tables)."""
    name = choose_algorithm(batch, axes, weights_shape, channels_last=channels_last, dtype=dtype,
                            result_dtype=result_dtype)
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
    result_dtype: np.dtype | None = None,
    out: np.ndarray | None = None,
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
    result_dtype : numpy dtype, optional
        The result's dtype if not ``dtype``: the sums (and the bias) are accumulated
        in ``dtype`` and converted once, to the bits of ``result.astype(result_dtype)``
        (float16 and bfloat16 round to nearest even, integers wrap), silently (an
        overflow to infinity is the defined result, not an error).
    out : ndarray, optional
        Where to write the result: C-contiguous, of its shape and dtype, sharing no
        memory with the operands (the caller checks).

    Returns
    -------
    ndarray
        ``(N, G*Co, Y...)``, or ``(N, Y..., G*Co)`` when ``channels_last``: ``out``, or
        a fresh C-contiguous array, never a view of an input.
    """
    dtype = np.dtype(dtype)
    if result_dtype is not None and np.dtype(result_dtype) != dtype:
        return _rounded(data, weights, tuple(axes), dtype, np.dtype(result_dtype),
                        channels_last, bias, algorithm, out)
    axes = tuple(axes)
    batch = data.shape[0]
    if out is None:
        out = _empty_result(batch, weights.shape, axes, channels_last, dtype)
    if algorithm is None:
        algorithm = choose_algorithm(batch, axes, weights.shape, channels_last=channels_last,
                                     dtype=dtype)
    if out.size == 0:
        pass
    elif data.size == 0 or weights.size == 0:
        out.fill(0)
    else:
        # Special values arise silently, whichever algorithm runs (BLAS never warns; NumPy
        # would, in some algorithms only), and the finiteness checks may overflow.
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                _compute(algorithm, data, weights, axes, dtype, channels_last, out)
            except _NonFinite:
                exact = _choose_exact(batch, axes, tuple(weights.shape), bool(channels_last),
                                      dtype, _numba_usable(), _blas.available(dtype))
                from ._casts import widen

                _compute(exact, widen(data), weights, axes, dtype, channels_last, out)
    if bias is not None and out.size:
        shape = (-1,) if channels_last else (-1,) + (1,) * len(axes)
        out += bias.astype(dtype, copy=False).reshape(shape)
    return out


def _result_shape(batch: int, weights_shape: tuple[int, ...], axes: tuple[AxisPlan, ...],
                  channels_last: bool) -> tuple[int, ...]:
    """``(N, G*Co, Y...)``, or ``(N, Y..., G*Co)`` when ``channels_last``."""
    channels = weights_shape[0] * weights_shape[2]
    spatial = tuple(axis.output_size for axis in axes)
    return (batch,) + spatial + (channels,) if channels_last else (batch, channels) + spatial


def _empty_result(batch: int, weights_shape: tuple[int, ...], axes: tuple[AxisPlan, ...],
                  channels_last: bool, dtype: np.dtype) -> np.ndarray:
    """The uninitialised result (:func:`_result_shape`)."""
    return np.empty(_result_shape(batch, weights_shape, axes, channels_last), dtype)


def _rounded(data, weights, axes, dtype, result_dtype, channels_last, bias, algorithm, out):
    """:func:`transposed_convolution` rounded once to ``result_dtype`` (into ``out``, if given).

    ``direct-blocked`` and numba ``direct``'s plane kernel round the sums as they
    store them, so no float32 result is ever allocated; every other algorithm
    computes the float32 result, rounded afterwards (:func:`convtranspose._casts.narrow`).
    """
    from . import _casts

    if algorithm is None:
        algorithm = choose_algorithm(data.shape[0], axes, weights.shape,
                                     channels_last=channels_last, dtype=dtype,
                                     result_dtype=result_dtype)
    # Both numba kernels can round as they store, for non-empty layers.
    in_kernel = bool(data.size and weights.size and _casts.rounds_in_kernels(dtype, result_dtype)
                     and _numba_usable())
    if (in_kernel and algorithm == "direct"
            and _direct_rounds(weights.shape, axes, channels_last)):
        derived = _derived_from(weights, "direct")
        try:
            _require_finite(weights, dtype, derived)
        except _NonFinite:
            pass  # the general path's exact fallback
        else:
            from ._kernel_numba import direct_phase

            # Half data as it is: the plane and row kernels widen it as they fill their
            # windows (or the plane kernel multiplies bfloat16 pairs).
            if out is None:
                out = _empty_result(data.shape[0], weights.shape, axes, channels_last,
                                    result_dtype)
            direct_phase(data, weights, axes, dtype, channels_last, out, derived, bias)
            return out
    # Half-precision data is widened once: the kernels' own copies would each cast it
    # with NumPy's slower loops.
    data = _casts.widen(data)
    if in_kernel and algorithm == "direct-blocked" and len(axes) <= 3:
        from ._kernel_numba import direct_blocked

        if out is None:
            out = _empty_result(data.shape[0], weights.shape, axes, channels_last, result_dtype)
        direct_blocked(data, weights, axes, dtype, channels_last, out, bias=bias,
                       derived=_derived_from(weights, "direct-blocked"))
        return out
    result = transposed_convolution(data, weights, axes, dtype=dtype,
                                    channels_last=channels_last, bias=bias, algorithm=algorithm)
    return _casts.narrow(result, result_dtype, out)


def _compute(algorithm, data, weights, axes, dtype, channels_last, out):
    """Fill ``out`` with ``algorithm``.

    Raises :class:`_NonFinite` when an operand may not be finite and the algorithm
    would multiply it by a zero of its own (``out`` may hold anything then: the exact
    algorithm that follows writes every element).
    """
    if algorithm.startswith("gemm") and _blas.available(dtype):
        _phase_gemm(data, weights, axes, dtype, channels_last, out, algorithm == "gemm-nxc")
    elif algorithm.startswith("shift") and _blas.available(dtype):
        _shift_gemm(data, weights, axes, dtype, channels_last, out, algorithm == "shift-nxc")
    elif algorithm.startswith(("phase", "gemm", "shift")):
        _phase(data, weights, axes, dtype, channels_last, out, algorithm.endswith("-nxc"))
    elif algorithm.startswith("col2im"):
        _col2im(data, weights, axes, dtype, channels_last, out, algorithm == "col2im-nxc")
    elif algorithm == "window":
        _window(data, weights, axes, dtype, channels_last, out)
    elif algorithm == "dense":
        _dense(data, weights, axes, dtype, channels_last, out)
    elif algorithm == "direct":
        _direct(data, weights, axes, dtype, channels_last, out)
    elif algorithm == "direct-blocked":
        _direct_blocked(data, weights, axes, dtype, channels_last, out)
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")


# --------------------------------------------------------------------------- non-finite


class _NonFinite(Exception):
    """An operand may hold an infinity or a NaN that this algorithm would multiply by
    a zero of its own (padding, an absent tap): :func:`transposed_convolution` then
    runs the cheapest algorithm of :data:`_EXACT_ALGORITHMS` instead."""


def _all_finite(array: np.ndarray) -> bool:
    """Whether every element of ``array`` is finite (at once for integers).

    For float32/float64 one BLAS dot product of the elements with themselves: an
    infinite or NaN element makes the sum of squares infinite or NaN, so a finite
    one proves every element finite.  Squares of finite elements beyond about 1e19
    (float32) overflow too; that only sends the caller to an exact algorithm.  The
    dot is the cheapest pass NumPy offers (16x512x8x8 float32: 45 us, against 56 us
    for ``np.isfinite(x).all()`` and 110 us for ``np.add.reduce``) and needs no
    temporary.  Narrower floats (float16, bfloat16) are tested element by element.
    Runs under the caller's ``np.errstate``.
    """
    kind = array.dtype.kind
    if kind in "iub" or array.size == 0:
        return True
    if kind == "f" and array.dtype.itemsize >= 4:
        flat = array.ravel(order="K")  # a view unless the elements have gaps
        return math.isfinite(np.dot(flat, flat))
    return bool(np.isfinite(array).all())


def _require_finite(array: np.ndarray, dtype: np.dtype, derived: dict | None = None) -> None:
    """Raise :class:`_NonFinite` unless ``array`` is finite (integer sums never need it).

    With ``derived`` (the weights memo of the filter) the answer is kept there, so a
    filter used again costs nothing more than the memo lookup the algorithm makes anyway.
    """
    if dtype.kind != "f":
        return
    if derived is None:
        finite = _all_finite(array)
    else:
        finite = derived.get("finite")
        if finite is None:
            derived["finite"] = finite = _all_finite(array)
    if not finite:
        raise _NonFinite


# --------------------------------------------------------------------------- threads

#: Python threads for stacks of small products (each on one BLAS thread).
_THREADS = max(1, min(os.cpu_count() or 1, 4))
#: Python threads for NumPy copies and adds of at least _PARALLEL_ELEMENTS (NumPy
#: releases the GIL in them).  One: they run between BLAS products, and OpenBLAS's
#: worker threads spin for tens of milliseconds after each product, so a second copy
#: thread waits for a core (3D k3 s2: its 20 window copies took 17 ms on one thread,
#: 17-65 ms on two; the whole layer was 1.25x faster on one, most layers 1.0-1.2x).
_COPY_THREADS = 1
_PARALLEL_ELEMENTS = 1 << 18
_pool = None


#: Stacks of products with fewer FLOPs in total than four times this stay on one thread.
_PARALLEL_FLOPS = 2e6


def _thread_pool():
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(max(_THREADS, _COPY_THREADS),
                                   thread_name_prefix="convtranspose")
    return _pool


def _split_axis(shape: tuple[int, ...]) -> int | None:
    for axis, size in enumerate(shape[:3]):
        if size >= _COPY_THREADS:
            return axis
    return None


def _parallel(operation, destination: np.ndarray, source: np.ndarray) -> None:
    """``operation(destination, source)`` (a copy or an in-place add), split between threads.

    Both arrays have the same shape; the work is split along one of the leading axes,
    so every thread writes a disjoint part of ``destination``.
    """
    axis = _split_axis(destination.shape)
    if _COPY_THREADS == 1 or destination.size < _PARALLEL_ELEMENTS or axis is None:
        operation(destination, source)
        return
    size = destination.shape[axis]
    bounds = [size * i // _COPY_THREADS for i in range(_COPY_THREADS + 1)]
    index = [slice(None)] * destination.ndim

    def part(i):
        index_i = list(index)
        index_i[axis] = slice(bounds[i], bounds[i + 1])
        operation(destination[tuple(index_i)], source[tuple(index_i)])

    for future in [_thread_pool().submit(part, i) for i in range(_COPY_THREADS)]:
        future.result()


#: GEMMs with fewer FLOPs than this run on the calling thread only: waking BLAS
#: worker threads costs up to a scheduler tick (milliseconds) on a busy machine,
#: more than splitting such a product can save.
_SERIAL_GEMM_FLOPS = 64e6


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)``; small products run on one BLAS thread each.

    A stack of small products is split between this module's threads instead.
    """
    flops = 2.0 * a.shape[-2] * a.shape[-1] * b.shape[-1]
    if flops >= _SERIAL_GEMM_FLOPS:
        return np.matmul(a, b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    stack = batch[0] if batch else 1
    with _blas.one_thread:
        if stack < 2 or _THREADS == 1 or flops * math.prod(batch) < 4 * _PARALLEL_FLOPS:
            return np.matmul(a, b)
        out = np.empty(batch + (a.shape[-2], b.shape[-1]), np.result_type(a, b))
        threads = min(_THREADS, stack)
        bounds = [stack * i // threads for i in range(threads + 1)]

        def part(operand, lo, hi):
            owns_axis = operand.ndim - 2 == len(batch) and operand.shape[0] == stack
            return operand[lo:hi] if owns_axis else operand

        def work(i):
            lo, hi = bounds[i], bounds[i + 1]
            np.matmul(part(a, lo, hi), part(b, lo, hi), out=out[lo:hi])

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
    same ``key`` get the same dict.  The filter is compared value by value, so a
    filter edited in place never hits.  The copy kept for that keeps the filter's
    memory order (a channels-last ``XIO`` filter arrives as a transposed view):
    comparing in memory order takes 0.9 ms for 8 MB on AMD Zen 3, against 4-5 ms
    for a C-order copy read across the view's strides.
    """
    full_key = (weights.shape, weights.dtype.str) + key
    with _derived_lock:
        entry = _derived.pop(full_key, None)
        if entry is not None and _same_bits(entry[0], weights):
            _derived[full_key] = entry  # most recently used last
            return entry[1]
    derived: dict = {}
    if weights.nbytes <= _DERIVED_MAX_BYTES:
        kept = _frozen(np.array(weights, copy=True, order="K"))
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
    co_first = internal_last and not channels_last
    derived = _derived_from(weights, "phase", axes, dtype, internal_last, co_first)
    _require_finite(weights, dtype, derived)  # taps meet the padding
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
#: chunk of the first spatial axis; at most the output's size, too, unless that is
#: below :data:`_GEMM_MIN_SCRATCH_BYTES` (DCGAN 512->256, output 4 MB: 12.6 MB of
#: scratch in one chunk with two classes' windows alive at once, 3.7 MB in two chunks).
_GEMM_SCRATCH_BYTES = 8 << 20
#: Small layers keep whole chunks: a chunk per block of a small output would be
#: many small products, each a few Python calls.
_GEMM_MIN_SCRATCH_BYTES = 1 << 20


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
    of ``source`` when that is already the layout (the range inside the data, one slot).
    """
    lo, hi = lead_range
    lead_size = source.shape[0] if internal_last else source.shape[2]
    blocks = tuple(p.blocks for p in rest)
    spatial_at = 2 if internal_last else 4  # first axis after (H, N) in `source`
    sizes = source.shape[spatial_at:spatial_at + len(rest)]
    if (len(slots) == 1 and 0 <= lo and hi <= lead_size and source.dtype == dtype
            and all(c.shifts[0] == 0 for c in rest_combo) and blocks == sizes):
        inside = source[lo:hi] if internal_last else source[:, :, lo:hi]
        view = np.expand_dims(inside, -2 if internal_last else 1)
        first = 0 if internal_last else 3
        rows = _merged_rows(view, first, first + 1 + len(blocks) + 1)
        # BLAS needs Ci packed (rows x Ci operands) or the rows packed (Ci x rows).
        packed = (view.shape[-1] == 1 or view.strides[-1] == view.itemsize if internal_last
                  else rows is not None and rows.strides[first] == view.itemsize)
        if rows is not None and packed:
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
    def work(units):
        for unit in units:
            for arguments in unit:
                _blas.gemm(*arguments)

    if flops_each >= _SERIAL_GEMM_FLOPS:
        work(calls)
        return
    total = flops_each * sum(len(unit) for unit in calls)
    with _blas.one_thread:
        if _THREADS == 1 or len(calls) < 2 or total < 4 * _PARALLEL_FLOPS:
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
    matrices = _derived_from(weights, "gemm", axes, dtype)
    _require_finite(weights, dtype, matrices)  # taps meet the zeros around the windows
    phases = tuple(_axis_phases(axis) for axis in axes)
    lead, rest = phases[0], phases[1:]
    if _some_output_unreached(phases):
        out.fill(0)
    lead_classes, rest_combos = _live_classes(phases)
    if not lead_classes or not rest_combos:
        return
    if data.dtype != dtype:
        # Cast once, contiguously: the windows copy runs of Ci elements, and NumPy's
        # casting copies are several times slower than plain ones on short runs.
        data = data.astype(dtype)
    source = _input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if internal_last:
        source = source.transpose((2, 1) + tuple(range(3, rank + 2)) + (0, rank + 2))
    else:
        source = source.transpose((0, rank + 2, 2, 1) + tuple(range(3, rank + 2)))
    target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    low_shift = min(c.shifts[0] for c in lead_classes)
    high_shift = max(c.shifts[-1] for c in lead_classes)
    rest_shape = (batch,) + tuple(p.blocks for p in rest)
    pitch = math.prod(rest_shape)  # rows per block of the first axis
    widest_slots = max(math.prod(len(c.shifts) for c in combo) for combo in rest_combos)
    widest = max(math.prod(c.count for c in combo) for combo in rest_combos) * max(
        c.count for c in lead_classes)
    window_row = pitch * groups * widest_slots * ci * dtype.itemsize
    product_row = pitch * groups * widest * co * dtype.itemsize
    # Blocks of the first axis per chunk: a chunk's windows (its blocks plus the
    # shifts' span) and one class's products stay under the scratch budget.
    budget = (min(_GEMM_SCRATCH_BYTES, max(out.nbytes, _GEMM_MIN_SCRATCH_BYTES))
              - (high_shift - low_shift) * window_row)
    step = max(1, budget // max(1, window_row + product_row))
    # A 1-D channels-last result can take whole blocks straight from BLAS.
    direct_to_output = rank == 1 and internal_last and channels_last
    for j0 in range(0, lead.blocks, step):
        j1 = min(lead.blocks, j0 + step)
        lead_range = (j0 + low_shift, j1 + high_shift)
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
                j_rest = j0  # blocks from here on go through a products buffer
                if direct_to_output and (groups == 1 or lead_class.count == 1):
                    j_rest = max(j0, min(j1, lead.whole_blocks))
                    _gemms_into_output(out, inputs, matrix, lead_class, lead.stride,
                                       (j0, j_rest), (j0 - lead_range[0]) * pitch, batch, co)
                if j_rest == j1:
                    continue
                shape = ((j1 - j_rest,) + rest_shape + (groups,) + counts + (co,)
                         if internal_last else
                         (groups,) + counts + (co, j1 - j_rest) + rest_shape)
                first_rows = [(j_rest + shift - lead_range[0]) * pitch
                              for shift in lead_class.shifts]
                products = _class_products(inputs, matrix, first_rows, (j1 - j_rest) * pitch,
                                           shape, internal_last)
                if internal_last:
                    order = (rank + 1, 1, 0) + tuple(range(2, rank + 1)) + tuple(
                        range(rank + 2, 2 * rank + 3))
                else:
                    order = (0, rank + 3, rank + 2) + tuple(range(rank + 4, 2 * rank + 3)) + tuple(
                        range(1, rank + 2))
                _scatter_phases(target, products.transpose(order), combo, phases, rank, j_rest)
                del products
            del windows, inputs  # before the next combination's are made


def _class_products(inputs, matrix, first_rows, rows, shape, internal_last):
    """One class's products, accumulated over its slots of the first axis, in a new
    array of ``shape``.

    ``matrix`` is ``(G, S, depth, width)``; slot ``s`` multiplies ``rows`` rows of
    ``inputs`` (``(rows, G, depth)`` if ``internal_last``, else ``(G, depth, rows)``)
    from row ``first_rows[s]`` on.  The result is ``(rows, G, width)`` or ``(G, width,
    rows)`` in memory.
    """
    groups, _, depth, width = matrix.shape
    products = np.empty(shape, matrix.dtype)
    flat = products.reshape((rows, groups, width) if internal_last else (groups, width, rows))
    flops = 2.0 * rows * depth * width
    parts = 1 if flops >= _SERIAL_GEMM_FLOPS else max(1, _THREADS // groups)
    calls = []
    for g, part in itertools.product(range(groups), range(parts)):
        r0, r1 = rows * part // parts, rows * (part + 1) // parts
        unit = []
        for slot, first in enumerate(first_rows):
            if internal_last:
                unit.append((inputs[first + r0:first + r1, g], matrix[g, slot],
                             flat[r0:r1, g], slot > 0))
            else:
                unit.append((matrix[g, slot].T, inputs[g, :, first + r0:first + r1],
                             flat[g, :, r0:r1], slot > 0))
        calls.append(unit)
    _run_gemms(calls, flops / parts)
    return products


def _gemms_into_output(out, inputs, matrix, lead_class, stride, j_range, row_offset, batch, co):
    """A class's products for whole blocks ``j_range`` of a 1-D layer, written by BLAS
    straight into the channels-last output (no products buffer, no scatter).

    Output ``j*stride + lead_class.first + i`` of phase ``i`` of the class holds the
    class's ``count * Co`` columns of row ``j`` side by side, so for one sample and
    group the rows are a strided matrix BLAS can write (``ldc = stride * G * Co``).
    ``inputs`` is ``(rows, G, depth)`` with rows ``(h, n)``, ``h`` counted from the
    chunk's first input (``row_offset`` rows before block ``j_range[0]``).
    """
    j0, j1 = j_range
    if j1 <= j0:
        return
    groups = matrix.shape[0]
    width = lead_class.count * co
    item = out.itemsize
    row_stride = stride * out.strides[1]
    calls = []
    for n, g in itertools.product(range(batch), range(groups)):
        start = out[n, j0 * stride + lead_class.first, g * co:]
        target = as_strided(start, (j1 - j0, width), (row_stride, item), writeable=True)
        unit = []
        for slot, shift in enumerate(lead_class.shifts):
            first = row_offset + shift * batch + n
            rows = inputs[first:first + (j1 - j0) * batch:batch, g]
            unit.append((rows, matrix[g, slot], target, slot > 0))
        calls.append(unit)
    _run_gemms(calls, 2.0 * (j1 - j0) * matrix.shape[2] * width)


# --------------------------------------------------------------------------- shift

#: Bytes of input rows plus products per chunk of the ``shift`` algorithms: a
#: chunk's rows stay in cache while every tap's product is added to them.
_SHIFT_CHUNK_BYTES = 2 << 20


def _shift_grid(axes: tuple[AxisPlan, ...], phases: tuple[_AxisPhases, ...]):
    """(padded sizes, rows per step of each axis, rows of slack) of the ``shift`` grid."""
    sizes = tuple(a.input_size + p.pad_low + p.pad_high for a, p in zip(axes, phases))
    pitches = tuple(math.prod(sizes[a + 1:]) for a in range(len(sizes)))
    slack = sum((max(s for c in p.classes for s in c.shifts) + p.pad_low) * pitch
                for p, pitch in zip(phases, pitches) if any(c.shifts for c in p.classes))
    return sizes, pitches, slack


def _shift_gemm(data, weights, axes, dtype, channels_last, out, internal_last):
    """Every tap as one accumulating BLAS product over a row-shifted view (``shift-*``).

    The input is copied once onto a grid padded so that every shift of every axis
    stays inside it.  Row ``r`` of the grid (``(n, x_1, ..., x_D)`` flattened) then
    stands for block ``j = x`` of every phase, and slot shifts ``t_a`` read grid row
    ``r + sum((t_a + pad_a) * pitch_a)``: each class's product over a chunk of rows
    is one GEMM per slot, added up in place (``beta = 1``) straight from views of
    the grid.  Rows with some ``x_a >= blocks_a`` are computed and dropped.
    """
    groups, ci, co = weights.shape[:3]
    rank = len(axes)
    batch = data.shape[0]
    matrices = _derived_from(weights, "shift", axes, dtype)
    _require_finite(weights, dtype, matrices)  # taps meet the grid's padding
    phases = tuple(_axis_phases(axis) for axis in axes)
    if _some_output_unreached(phases):
        out.fill(0)
    combos = [combo for combo in itertools.product(*(p.classes for p in phases))
              if all(c.shifts for c in combo)]
    if not combos:
        return
    sizes, pitches, slack = _shift_grid(axes, phases)
    plane = pitches[0]  # grid rows per step of the first axis
    grid_rows = batch * sizes[0] * plane
    interior = tuple(slice(p.pad_low, p.pad_low + a.input_size) for a, p in zip(axes, phases))
    source = _input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    if internal_last:
        grid = np.zeros((grid_rows + slack, groups, ci), dtype)
        spatial = grid[:grid_rows].reshape((batch,) + sizes + (groups, ci))
        _parallel(_copy, spatial[(slice(None),) + interior],
                  np.moveaxis(source, 0, -2))  # (N, X..., G, Ci)
    else:
        grid = np.zeros((groups, ci, grid_rows + slack), dtype)
        spatial = grid[:, :, :grid_rows].reshape((groups, ci, batch) + sizes)
        _parallel(_copy, spatial[(slice(None),) * 3 + interior],
                  np.moveaxis(source, -1, 1))  # (G, Ci, N, X...)
    target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    widest = max(math.prod(c.count for c in combo) for combo in combos) * co
    step = max(1, _SHIFT_CHUNK_BYTES // (plane * groups * (ci + widest) * dtype.itemsize))
    planes = batch * sizes[0]
    last_plane = (batch - 1) * sizes[0] + phases[0].blocks  # planes past it are all padding
    blocks_rest = tuple(slice(0, p.blocks) for p in phases[1:])
    for q0 in range(0, last_plane, step):
        q1 = min(planes, q0 + step)
        rows = (q1 - q0) * plane
        for combo in combos:
            counts = tuple(c.count for c in combo)
            width = math.prod(counts) * co
            all_slots = list(itertools.product(*(range(len(c.shifts)) for c in combo)))
            matrix = matrices.get(combo)
            if matrix is None:
                matrix = _class_matrix(_taps_first(weights, matrices), combo, all_slots, counts,
                                       dtype).reshape(groups, len(all_slots), ci, width)
                matrices[combo] = matrix = _frozen(matrix)
            offsets = [sum((c.shifts[t] + p.pad_low) * pitch
                           for c, t, p, pitch in zip(combo, slot, phases, pitches))
                       for slot in all_slots]
            if internal_last:
                products = np.empty((rows, groups, width), dtype)
            else:
                products = np.empty((groups, width, rows), dtype)
            flops = 2.0 * rows * ci * width
            parts = 1 if flops >= _SERIAL_GEMM_FLOPS else max(1, _THREADS // groups)
            calls = []
            for g, part in itertools.product(range(groups), range(parts)):
                r0, r1 = rows * part // parts, rows * (part + 1) // parts
                base = q0 * plane
                if internal_last:
                    calls.append([(grid[base + offset + r0:base + offset + r1, g],
                                   matrix[g, index], products[r0:r1, g], index > 0)
                                  for index, offset in enumerate(offsets)])
                else:
                    calls.append([(matrix[g, index].T,
                                   grid[g, :, base + offset + r0:base + offset + r1],
                                   products[g, :, r0:r1], index > 0)
                                  for index, offset in enumerate(offsets)])
            _run_gemms(calls, flops / parts)
            # (G, planes, x_2.., phases.., Co) over this chunk's planes
            if internal_last:
                view = products.reshape((q1 - q0,) + sizes[1:] + (groups,) + counts + (co,))
                view = np.moveaxis(view, rank, 0)
            else:
                view = products.reshape((groups,) + counts + (co, q1 - q0) + sizes[1:])
                view = view.transpose((0,) + tuple(range(rank + 2, 2 * rank + 2))
                                      + tuple(range(1, rank + 2)))
            for n in range(q0 // sizes[0], -(-q1 // sizes[0])):
                x0 = max(q0 - n * sizes[0], 0)
                x1 = min(q1 - n * sizes[0], phases[0].blocks)
                if x0 >= x1:
                    continue
                piece = view[(slice(None), slice(n * sizes[0] + x0 - q0, n * sizes[0] + x1 - q0))
                             + blocks_rest]
                _scatter_phases(target[:, n:n + 1], piece[:, None], combo, phases, rank, x0)


# --------------------------------------------------------------------------- window


def _window_class(axis: AxisPlan, phases: _AxisPhases) -> _PhaseClass | None:
    """All live phases of one axis as one class over every shift any of them uses.

    Phases ``[first, first + count)`` span the phases that have taps; slot ``m``
    reads input ``j + shifts[0] + m``.  A phase without a tap at a slot takes the
    kernel index ``K`` (a zero tap appended to the filter).  None when no phase has
    a tap.
    """
    live = [c for c in phases.classes if c.shifts]
    if not live:
        return None
    low = min(c.shifts[0] for c in live)
    high = max(c.shifts[-1] for c in live)
    first = live[0].first
    count = live[-1].first + live[-1].count - first
    table = [[axis.kernel_size] * (high - low + 1) for _ in range(count)]
    for c in live:
        for i, taps in enumerate(c.taps):
            for shift, k in zip(c.shifts, taps):
                table[c.first + i - first][shift - low] = k
    return _PhaseClass(first, count, tuple(range(low, high + 1)),
                       tuple(tuple(row) for row in table))


@functools.lru_cache(maxsize=256)
def _window_plan(axes: tuple[AxisPlan, ...]):
    """(per-axis phases, per-axis window classes or None, whether an output stays zero)."""
    phases = tuple(_axis_phases(axis) for axis in axes)
    combo = tuple(_window_class(axis, p) for axis, p in zip(axes, phases))
    if any(c is None for c in combo):
        return phases, None, True
    unreached = any(c.first > 0 or c.first + c.count < min(p.stride, axis.output_size)
                    for axis, p, c in zip(axes, phases, combo))
    return phases, combo, unreached


def _window(data, weights, axes, dtype, channels_last, out):
    """Every phase in one GEMM over full input windows (``window``, module docstring).

    Rows are ``(n, j...)``, the depth ``(slots..., Ci)`` and the width ``(phases...,
    Co)`` (channels contiguous in every copy), one product per group.
    """
    # Taps meet the padded input, and inputs the matrix's zeros (no weights memo here:
    # the matrix is rebuilt on every call, which costs more than the check).
    _require_finite(weights, dtype)
    _require_finite(data, dtype)
    groups, ci, co = weights.shape[:3]
    kernel = tuple(weights.shape[3:])
    rank = len(axes)
    batch = data.shape[0]
    phases, combo, unreached = _window_plan(tuple(axes))
    if unreached:
        out.fill(0)
    if combo is None:
        return
    blocks = tuple(p.blocks for p in phases)
    sizes = tuple(len(c.shifts) for c in combo)
    counts = tuple(c.count for c in combo)
    depth, width = math.prod(sizes) * ci, math.prod(counts) * co
    # Padded input (G, N, H..., Ci) with H = J + window - 1 and padded[t] = x[t + shift_0].
    padded = np.zeros((groups, batch) + tuple(b + w - 1 for b, w in zip(blocks, sizes)) + (ci,),
                      dtype)
    into, take = [slice(None), slice(None)], [slice(None), slice(None)]
    for axis, b, w, c in zip(axes, blocks, sizes, combo):
        low = c.shifts[0]
        t0, t1 = max(0, -low), min(b + w - 1, axis.input_size - low)
        into.append(slice(t0, max(t0, t1)))
        take.append(slice(t0 + low, max(t0, t1) + low))
    _parallel(_copy, padded[tuple(into)], _input_glxc(data, groups, channels_last)[tuple(take)])
    # Zero tap K appended on every kernel axis: (G, K+1..., Ci, Co).
    taps_first = np.zeros((groups,) + tuple(k + 1 for k in kernel) + (ci, co), dtype)
    taps_first[(slice(None),) + tuple(slice(0, k) for k in kernel)] = np.moveaxis(
        weights, (1, 2), (-2, -1))
    slots = list(itertools.product(*(range(w) for w in sizes)))
    matrix = _class_matrix(taps_first, combo, slots, counts, dtype)  # (G, depth, width)
    strides = padded.strides
    windows = as_strided(padded, padded.shape[:2] + blocks + sizes + (ci,),
                         strides[:2] + strides[2:-1] + strides[2:-1] + strides[-1:],
                         writeable=False)
    target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
    row_bytes = groups * math.prod(blocks[1:]) * (depth + width) * dtype.itemsize
    for n0, n1, j0, j1 in _chunks(batch, blocks[0], row_bytes, out.nbytes):
        sub_blocks = (j1 - j0,) + blocks[1:]
        rows = (n1 - n0) * math.prod(sub_blocks)
        columns = np.empty((groups, n1 - n0) + sub_blocks + sizes + (ci,), dtype)
        _parallel(_copy, columns, windows[:, n0:n1, j0:j1])
        product = _matmul(columns.reshape(groups, rows, depth), matrix)
        product = product.reshape((groups, n1 - n0) + sub_blocks + counts + (co,))
        _scatter_phases(target[:, n0:n1], product, combo, phases, rank, j0)


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
    matrix = _col2im_matrix(weights, dtype, internal_last)
    scatter = None
    if (_numba_scatters(internal_last, co, len(axes), dtype.kind == "f" and _numba_usable())
            and out.flags.c_contiguous):
        from ._kernel_numba import col2im_scatter as scatter
    # Taps that span less than a stride (U-Net's k2 s2) reach every output at most
    # once, so their columns are copied, not added to zeros.
    disjoint = scatter is None and all(
        (axis.kernel_size - 1) * axis.dilation < axis.stride for axis in axes)
    if not disjoint or not all(_disjoint_taps_cover(axis) for axis in axes):
        out.fill(0)
    store = _copy if disjoint else _add
    if internal_last:
        target = _output_glyc(out, groups, channels_last)  # (G, N, Y..., Co)
        source = _input_glxc(data, groups, channels_last)  # (G, N, X..., Ci)
    else:
        target = np.moveaxis(_output_glyc(out, groups, channels_last), (0, -1), (1, 2))
        source = np.moveaxis(_input_glxc(data, groups, channels_last), (0, -1), (1, 2))
        # target (N, G, Co, Y...), source (N, G, Ci, X...): views, NCX-natural.
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
            if scatter is not None:
                scatter(columns, out, target[:, n0:n1], sub_axes)
                continue
            for tap, window in live:
                src = (slice(None), slice(None)) + tuple(w[0] for w in window) + tap
                dst = (slice(None), slice(n0, n1)) + tuple(w[1] for w in window)
                _parallel(store, target[dst], columns[src])
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
                _parallel(store, target[dst], columns[src])


def _disjoint_taps_cover(axis: AxisPlan) -> bool:
    """Whether taps that reach disjoint outputs of ``axis`` together reach all of them."""
    outputs = range(axis.output_size)
    reached = sum(len(outputs[window[1]]) for window in _tap_windows(axis) if window is not None)
    return reached == axis.output_size


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


def _dense_product(data, matrix, dtype, out) -> bool:
    """``out`` = every sample times ``matrix``; whether that proves the data finite.

    Inputs meet the zeros of the matrix (taps meet only inputs).  Every output sums
    a product with every input of its sample, so a non-finite input makes all of
    them non-finite (a BLAS that skipped zero entries would be exact anyway): one
    finite output per sample proves its inputs finite, cheaper than a pass over them.
    """
    batch = data.shape[0]
    products = out.reshape(batch, -1)
    np.matmul(data.reshape(batch, -1).astype(dtype, copy=False), matrix, out=products)
    return all(map(math.isfinite, products[:, 0].tolist()))


def _dense(data, weights, axes, dtype, channels_last, out):
    matrix = _dense_matrix(weights, axes, dtype, channels_last, out[0].size)
    if not _dense_product(data, matrix, dtype, out):
        _require_finite(data, dtype)


def _switch_state() -> tuple[str, str, str]:
    return switch(ALGORITHM_ENV), switch(NO_NUMBA_ENV), switch(_blas.NO_BLAS_ENV)


class DenseCall:
    """A layer that :func:`transposed_convolution` computes with ``dense``, prepared.

    Calling it with data and a filter as at preparation (same shapes and dtype,
    filter of the same bytes, the same environment switches) returns what
    :func:`transposed_convolution` returns without bias, in one product with the
    kept matrix: no algorithm choice or filter memo, each of which costs about as
    much as the product in a call made after the process slept
    (``benchmarks/results/small-layer-calls.json``).  Returns None when it cannot vouch for the result (another filter
    or switch, or an output that is not finite: the general path then decides,
    exactly).
    """

    __slots__ = ("_filter_bytes", "_matrix", "_shape", "_dtype", "_switches", "_safe_squares")

    def __init__(self, filter_bytes: bytes, matrix: np.ndarray, shape: tuple[int, ...],
                 dtype: np.dtype):
        self._filter_bytes, self._matrix = filter_bytes, matrix
        self._shape, self._dtype = shape, dtype
        self._switches = _switch_state()
        # Inputs below this magnitude cannot overflow any output (a quarter of the
        # largest float over the largest column sum of |matrix|); 0 if no bound.
        with np.errstate(over="ignore", invalid="ignore"):
            column_sum = float(np.abs(matrix).sum(axis=0, dtype=np.float64).max(initial=0.0))
        largest = float(np.finfo(dtype).max)
        safe_input = largest / 4 / max(column_sum, 1.0) if math.isfinite(column_sum) else 0.0
        # The data's sum of squares below this proves every input below safe_input:
        # the largest square is at most the exact sum, which the computed one (n
        # non-negative terms, relative error below n * eps) underestimates by far
        # less than the factor 4 (a Python product: inf rather than OverflowError).
        self._safe_squares = (safe_input / 2) * (safe_input / 2)

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        if filter.tobytes() != self._filter_bytes or _switch_state() != self._switches:
            return None
        if out is None:
            out = np.empty(self._shape, self._dtype)
        # One BLAS dot, which raises no floating-point flags (a NaN or an overflow to
        # inf fails the comparison): a third of the time of a min and a max.
        if float(np.vdot(data, data)) < self._safe_squares:
            # No product can overflow or be NaN, so NumPy has no error flag to report:
            # the error-state context of the general path (a cost in cold calls) is moot,
            # and so is the finiteness check of _dense_product.
            batch = self._shape[0]
            np.matmul(data.reshape(batch, -1), self._matrix, out=out.reshape(batch, -1))
            return out
        with np.errstate(over="ignore", invalid="ignore"):  # as transposed_convolution
            finite = _dense_product(data, self._matrix, self._dtype, out)
        return out if finite else None


class DirectCall:
    """A layer that :func:`transposed_convolution` computes with numba ``direct``, prepared.

    The same contract as :class:`DenseCall`: for data and a filter as at preparation
    (float32 or float64, the filter of the same bits, the same environment switches)
    it returns what :func:`transposed_convolution` returns without bias, calling the
    plane kernel with everything but the data set up
    (:func:`convtranspose._kernel_numba.prepare_direct`).  The filter is finite (its
    taps meet the windows' zero borders), so any data gives the exact sums; None only
    for another filter or switch.
    """

    __slots__ = ("_filter", "_compute", "_shape", "_dtype", "_switches")

    def __init__(self, filter: np.ndarray, compute, shape: tuple[int, ...], dtype: np.dtype):
        self._filter = _frozen(np.array(filter, copy=True, order="K"))
        self._compute, self._shape, self._dtype = compute, shape, dtype
        self._switches = _switch_state()

    def __call__(self, data: np.ndarray, filter: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray | None:
        if _switch_state() != self._switches or not _same_bits(self._filter, filter):
            return None
        if out is None:
            out = np.empty(self._shape, self._dtype)
        self._compute(data, out)
        return out


#: Filters of at most this many bytes are kept by a :class:`DirectCall`, which
#: compares them with the caller's in every call (as the filter memo does anyway).
PREPARED_MAX_FILTER_BYTES = 1 << 20


def prepare_call(data: np.ndarray, filter: np.ndarray, weights: np.ndarray,
                 axes: tuple[AxisPlan, ...], channels_last: bool):
    """A :class:`DenseCall` or :class:`DirectCall` for this layer, or None.

    ``filter`` is the caller's filter and ``weights`` its ``(G, Ci, Co, K...)`` view.
    Only float32 and float64 layers (no rounding afterwards) that :func:`choose_algorithm`
    gives to ``dense`` or to numba ``direct`` (a filter of at most
    :data:`PREPARED_MAX_FILTER_BYTES`, finite) qualify.
    """
    dtype = data.dtype
    if dtype not in (np.float32, np.float64) or not dtype.isnative or filter.dtype != dtype:
        return None
    batch = data.shape[0]
    algorithm = choose_algorithm(batch, axes, weights.shape, channels_last=channels_last,
                                 dtype=dtype)
    shape = _result_shape(batch, weights.shape, axes, channels_last)
    if algorithm == "dense":
        matrix = _dense_matrix(weights, axes, dtype, channels_last, math.prod(shape[1:]))
        return DenseCall(filter.tobytes(), matrix, shape, dtype)
    if (algorithm != "direct" or not _numba_usable() or len(axes) > 3
            or filter.nbytes > PREPARED_MAX_FILTER_BYTES):
        return None
    derived = _derived_from(weights, "direct")
    if not derived.get("finite"):
        return None
    from ._kernel_numba import prepare_direct

    compute = prepare_direct(batch, weights, axes, dtype, channels_last, derived)
    return None if compute is None else DirectCall(filter, compute, shape, dtype)


# --------------------------------------------------------------------------- direct


def _direct(data, weights, axes, dtype, channels_last, out):
    """Per-tap multiply-add over the phase classes: no GEMM, for tiny channel counts."""
    if dtype.kind == "f" and _numba_usable() and len(axes) <= 3:
        from ._kernel_numba import direct_phase

        derived = _derived_from(weights, "direct")
        _require_finite(weights, dtype, derived)  # taps meet the zero-bordered windows
        direct_phase(data, weights, axes, dtype, channels_last, out, derived)
        return
    _direct_numpy(data, weights, axes, dtype, channels_last, out)


def _direct_blocked(data, weights, axes, dtype, channels_last, out):
    """Register-blocked multiply-adds per output line (numba), for groups of a few dozen channels.

    Without numba (or for integers) the NumPy phase algorithm computes the same sums.
    """
    if dtype.kind == "f" and _numba_usable() and len(axes) <= 3:
        from ._kernel_numba import direct_blocked

        direct_blocked(data, weights, axes, dtype, channels_last, out,
                       derived=_derived_from(weights, "direct-blocked"))
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
