"""The registry of algorithms: every way this library computes the canonical transposed
convolution, what each requires, and what replaces it where a requirement is missing.

Every algorithm fills ``out`` with the same sums, from data ``(N, G*Ci, X...)`` (or
channels last ``(N, X..., G*Ci)``), weights ``(G, Ci, Co, K...)`` and one
:class:`~convtranspose._plan.rules.AxisPlan` per spatial axis, in the accumulation dtype;
they differ in speed only.  An algorithm never decides whether it runs: the choice
lives in :mod:`convtranspose._choose.choice`, and :func:`resolve` follows the registry's
fallbacks where a requirement is missing, so the name :func:`resolve` returns is
always the code that runs.

``-nxc``/``-ncx`` name the internal layout of an algorithm's GEMM and copies
(channels or spatial positions contiguous), independent of the caller's layout.
One module per algorithm: :mod:`.phase`, :mod:`.gemm`, :mod:`.stream`,
:mod:`.col2im`, :mod:`.window`, :mod:`.dense`, :mod:`.pointwise`, :mod:`.direct`,
:mod:`.direct_blocked`, :mod:`.depthwise`, :mod:`.disjoint`; their numba kernels live
in :mod:`._numba`, imported only when numba is usable; their pure integer schedules in
:mod:`.schedules`.

Infinities and NaNs
    The result is the IEEE sum over the (input, tap) pairs that exist, so an
    infinite or NaN operand reaches only the outputs its pairs reach.  Algorithms
    that multiply zeros of a padded input by filter taps, or inputs by zeros of a
    matrix, would add NaNs the sum does not have (``inf * 0`` is NaN): they check the
    operand that meets those zeros and raise :class:`~._common.NonFinite`, and the
    call then runs the cheapest algorithm whose ``exact`` flag is set, even when an
    algorithm was forced: correctness wins over the request.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import numpy as np

from .._runtime import blas as _blas
from .._runtime import memo as _memo
from .._runtime.target import Target
from . import schedules as _schedules

__all__ = ["ALGORITHMS", "REGISTRY", "Algorithm", "exact_algorithms", "missing",
           "offered_algorithms", "prepare", "prepare_rounded", "resolve", "rounds_as_it_stores",
           "run", "run_rounded"]


def _filter_comparison():
    """The weights memo's compiled comparison of filters (numba, imported when first
    needed): the memo's layer lies below the kernels'."""
    from ._numba.compare import bytes_differ

    return bytes_differ


_memo.comparison_loader = _filter_comparison


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm.

    ``module`` and ``function`` name its code (a module of this package);
    ``options`` are keyword arguments it is called with.  ``requires`` lists what it
    needs: ``"blas"`` (NumPy's OpenBLAS callable for the dtype) or ``"numba"`` (numba
    usable, a float dtype and at most three spatial axes) or ``"one tap"`` (a kernel of
    one tap on every axis: :mod:`.pointwise`) or ``"disjoint taps"`` (no dilated kernel
    longer than its stride: :mod:`.disjoint`).  ``fallback`` is the
    algorithm that runs instead when a requirement is missing (``{layout}`` stands
    for ``nxc`` or ``ncx``, the caller's layout).  ``exact``: multiplies only the
    (input, tap) pairs that exist, so it is exact with non-finite operands.
    ``offered``: the cost model may choose it (the others run only as a fallback or
    when forced).  ``rounding``: a function of ``module`` that can round float32 sums
    to float16 or bfloat16 as it stores them and add the bias (no float32 result).
    ``rounds_when``: the name of a function of :mod:`.schedules`,
    ``(weights_shape, axes, channels_last) -> bool``, saying which layers that
    ``rounding`` function takes (None: every layer; it may still decline a call, see
    :func:`run_rounded`).
    ``estimate``: the name of its time estimate
    (:data:`convtranspose._choose.estimates.ESTIMATES`, called with ``options``).
    ``scratch``: the name of its scratch rule (:data:`.scratch.SCRATCH_RULES`).
    ``prepare``: a function of ``module``, ``(batch, weights, axes, dtype,
    channels_last, target, **options) -> compute or None``, that sets the layer up
    once for repeated calls: ``compute(data, out)`` then fills a C-contiguous ``out``
    of ``dtype`` as the algorithm does, for any data of the layer's shape (see
    :func:`prepare`).  ``prepare_rounding``: the same for ``rounding``, ``(batch,
    weights, axes, dtype, channels_last, data_dtype, result_dtype, bias, target) ->
    compute or None``: ``compute(data, out)`` fills a C-contiguous ``out`` of
    ``result_dtype`` as ``rounding`` does with that ``bias``, for any data of
    ``data_dtype`` and the layer's shape (see :func:`prepare_rounded`).
    """

    name: str
    module: str
    function: str
    summary: str
    options: dict = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    fallback: str | None = None
    exact: bool = False
    offered: bool = True
    rounding: str | None = None
    rounds_when: str | None = None
    estimate: str | None = None
    scratch: str = "padded-columns"
    prepare: str | None = None
    prepare_rounding: str | None = None


def _entries() -> dict[str, Algorithm]:
    entries = []
    # The order is the estimates' order of ties (a stable sort keeps it).
    for layout, last in (("nxc", True), ("ncx", False)):
        entries += [
            Algorithm(f"phase-{layout}", "phase", "_phase",
                      "sub-pixel decomposition: one im2col and one GEMM per class of phases",
                      {"internal_last": last}, estimate="phase"),
            Algorithm(f"gemm-{layout}", "gemm", "_phase_gemm",
                      "stride phases as accumulating BLAS products over row-shifted windows",
                      {"internal_last": last}, ("blas",), f"phase-{layout}", estimate="gemm"),
            Algorithm(f"col2im-{layout}", "col2im", "_col2im",
                      "one GEMM of every tap's contribution, then a strided add per tap",
                      {"internal_last": last}, exact=True, estimate="col2im",
                      scratch="columns", prepare="prepare_col2im"),
        ]
    entries += [
        Algorithm("dense", "dense", "_dense",
                  "the whole layer as one matrix and one product (tiny layers)",
                  estimate="dense", scratch="dense"),
        Algorithm("pointwise", "pointwise", "_pointwise",
                  "one product per group over the inputs (a kernel of one tap per axis)",
                  requires=("blas", "one tap"), fallback="phase-{layout}", exact=True,
                  estimate="pointwise", scratch="pointwise", prepare="prepare_pointwise"),
        Algorithm("window", "window", "_window",
                  "every phase in one GEMM over copied input windows (zeros where no tap)",
                  estimate="window"),
        Algorithm("stream", "stream", "_stream",
                  "the filter read once as stored, numba products of few input positions, "
                  "then an add per tap", requires=("numba",), fallback="col2im-{layout}",
                  exact=True, estimate="stream", scratch="stream"),
        Algorithm("direct", "direct", "_direct_numba",
                  "numba per-tap multiply-adds in vector registers (planes, rows, positions)",
                  requires=("numba",), fallback="direct-numpy", rounding="_direct_numba_rounded",
                  rounds_when="direct_rounds", estimate="direct", scratch="direct",
                  prepare="_prepare_direct_numba",
                  prepare_rounding="_prepare_direct_numba_rounded"),
        Algorithm("direct-numpy", "direct", "_direct_numpy",
                  "per-tap multiply-adds with NumPy broadcasting", offered=False,
                  scratch="direct-numpy"),
        Algorithm("direct-blocked", "direct_blocked", "_direct_blocked",
                  "numba blocks of outputs with their channels in vector registers",
                  requires=("numba",), fallback="phase-{layout}", exact=True,
                  rounding="_direct_blocked_rounded", estimate="direct-blocked",
                  scratch="direct-blocked", prepare="prepare_blocked",
                  prepare_rounding="prepare_blocked_rounded"),
        Algorithm("depthwise", "depthwise", "_depthwise",
                  "numba blocks of outputs along the last axis, a vector of depthwise "
                  "channels each, over a padded channel-blocked copy (channels-first "
                  "planes of two axes: vectors along their lines)",
                  requires=("numba",), fallback="direct", estimate="depthwise",
                  scratch="depthwise", prepare="prepare_depthwise"),
        Algorithm("disjoint", "disjoint", "_disjoint",
                  "numba lines of channels-first outputs, each summed once in vector "
                  "registers, where every tap reaches outputs of its own (kernel no longer "
                  "than its stride)", requires=("numba", "disjoint taps"), fallback="direct",
                  exact=True, estimate="disjoint", scratch="disjoint",
                  prepare="prepare_disjoint"),
    ]
    return {entry.name: entry for entry in entries}


#: Every algorithm by name.
REGISTRY: dict[str, Algorithm] = _entries()
#: The names that may be forced (``CONVTRANSPOSE_ALGORITHM``, ``algorithm=``).
ALGORITHMS: tuple[str, ...] = tuple(REGISTRY)


def offered_algorithms(dtype: np.dtype, rank: int, target: Target) -> tuple[str, ...]:
    """The algorithms the cost model may choose for this dtype and rank on ``target``: the
    offered ones whose requirements are met, in the registry's order (an estimate may
    still decline a layer)."""
    return tuple(name for name, entry in REGISTRY.items()
                 if entry.offered and missing(name, dtype, rank, target) is None)


def rounds_as_it_stores(name: str, weights_shape: tuple[int, ...], axes,
                        channels_last: bool) -> bool:
    """Whether ``name`` rounds a half-precision result as it stores it on this layer (its
    ``rounding`` and ``rounds_when`` entries), with no whole float32 result to round
    afterwards."""
    entry = REGISTRY[name]
    if entry.rounding is None:
        return False
    return entry.rounds_when is None or getattr(_schedules, entry.rounds_when)(
        weights_shape, axes, channels_last)


def exact_algorithms() -> frozenset[str]:
    """Names of the algorithms that are exact with non-finite operands."""
    return frozenset(name for name, entry in REGISTRY.items() if entry.exact)


def missing(name: str, dtype: np.dtype, rank: int, target: Target,
            axes=None) -> str | None:
    """The first requirement of ``name`` that ``target`` (or, where ``axes`` are given,
    the layer) does not meet, or None."""
    for requirement in REGISTRY[name].requires:
        if requirement == "blas" and not target.blas_for(dtype):
            return f"no BLAS products for {np.dtype(dtype)}"
        if requirement == "numba":
            if not target.numba:
                return "numba not usable"
            if np.dtype(dtype).kind != "f":
                return "integer sums (the numba kernels are float only)"
            if rank > 3:
                return "more than three spatial axes"
        if requirement == "one tap" and axes is not None and not _pointwise_layer(axes):
            return "an axis has more than one tap"
        if requirement == "disjoint taps" and axes is not None and not _disjoint_layer(axes):
            return "taps reach the same outputs (a dilated kernel longer than its stride)"
    return None


def _pointwise_layer(axes) -> bool:
    from .pointwise import takes_layer

    return takes_layer(tuple(axes))


def _disjoint_layer(axes) -> bool:
    from .disjoint_plan import takes_layer

    return takes_layer(tuple(axes))


def resolve(name: str, dtype: np.dtype, rank: int, channels_last: bool,
            target: Target, axes=None) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The algorithm that runs for ``name`` on ``target`` (and the layer of ``axes``, which
    every caller that runs it gives), and each fallback taken with its reason."""
    taken = []
    while (reason := missing(name, dtype, rank, target, axes)) is not None:
        taken.append((name, reason))
        name = REGISTRY[name].fallback.format(layout="nxc" if channels_last else "ncx")
    return name, tuple(taken)


def run(name: str, data, weights, axes, dtype, channels_last, out, target: Target) -> None:
    """Fill ``out`` with the registered algorithm ``name`` (resolved beforehand).

    Raises :class:`~._common.NonFinite` when an operand may not be finite and the
    algorithm would multiply it by a zero of its own (``out`` may hold anything then).
    OpenBLAS runs on at most ``target.threads`` threads meanwhile.
    """
    entry = REGISTRY[name]
    function = _function(entry.module, entry.function)
    with _blas.at_most(target.threads):  # OpenBLAS's own count comes back afterwards
        function(data, weights, axes, dtype, channels_last, out, target=target,
                 **entry.options)


def prepare(name: str, batch: int, weights, axes, dtype, channels_last, target: Target):
    """``compute(data, out)``: the registered algorithm ``name`` (resolved beforehand) set
    up once for this layer (its ``prepare`` entry), or None where it has none or declines
    the layer.  The data must have ``dtype`` (float32 or float64) and ``out`` be
    C-contiguous; the sums are the ones :func:`run` gives, for any data."""
    entry = REGISTRY[name]
    if entry.prepare is None:
        return None
    function = _function(entry.module, entry.prepare)
    return function(batch, weights, axes, dtype, channels_last, target, **entry.options)


def prepare_rounded(name: str, batch: int, weights, axes, dtype, channels_last, data_dtype,
                    result_dtype, bias, target: Target):
    """``compute(data, out)``: what :func:`run_rounded` does with algorithm ``name``
    (resolved beforehand) and ``bias``, set up once for this layer (its
    ``prepare_rounding`` entry), or None where it has none or declines the layer.  The
    data must have ``data_dtype`` and ``out`` be C-contiguous of ``result_dtype``."""
    entry = REGISTRY[name]
    if entry.prepare_rounding is None:
        return None
    function = _function(entry.module, entry.prepare_rounding)
    return function(batch, weights, axes, dtype, channels_last, data_dtype, result_dtype,
                    bias, target)


def run_rounded(name: str, data, weights, axes, dtype, channels_last, out, bias,
                target: Target) -> bool:
    """Fill ``out`` (float16 or bfloat16) with the rounded sums plus ``bias`` using the
    algorithm's ``rounding`` function; False where it declines (the caller then computes
    the float32 result and rounds it)."""
    entry = REGISTRY[name]
    function = _function(entry.module, entry.rounding)
    with _blas.at_most(target.threads):
        return function(data, weights, axes, dtype, channels_last, out, bias, target)


_modules: dict = {}


def _function(module: str, name: str):
    """``module.name`` of this package (the module imported on first use)."""
    imported = _modules.get(module)
    if imported is None:
        _modules[module] = imported = importlib.import_module(f"{__name__}.{module}")
    return getattr(imported, name)
