"""The machine figures the cost model needs, measured here instead of looked up in a table.

The estimates (:mod:`convtranspose._choose.estimates`) price BLAS products at the
machine's large-GEMM rate, numba kernels' multiply-adds at shares of one thread's FMA
peak (measured by a numba kernel, :mod:`convtranspose._kernels._numba.peak`, and added
with :func:`keep_figure`), and reading a large filter at the copy rate; the layout
copies split between threads from a size measured here too (:func:`copy_split_bytes`).
Each is measured once per machine, in well under a second, and kept in the wisdom file
(:mod:`.wisdom`), so a later process reads them instead of measuring again.  No CPU
needs an entry written by hand: a machine this library never saw measures its own.
"""

from __future__ import annotations

import math

import numpy as np

from .._kernels import compiling
from .._kernels.compiling import KernelNotCompiled
from .._runtime import blas
from .._runtime.caches import kept
from .._runtime.machine import fastest_seconds, vector_bytes
from .._runtime.target import Target, host, numba_usable
from .._runtime.threads import register_copy_split
from .wisdom import store

__all__ = ["MachineFigures", "copy_split_bytes", "fma_gflops", "gemm_gflops", "keep_figure",
           "keep_numba_import", "machine_figures", "measure_figures", "numba_import_seconds",
           "thread_macs_per_ns"]

#: Square float32 GEMM size for the rate: large enough for OpenBLAS's full-speed kernels
#: and its threads, small enough to take about a millisecond.
_GEMM_SIZE = 768
#: Elements of each float32 copy for the copy rate: 16 MB, past the caches of the CPUs
#: this library runs on, as the large layers' passes are.
_COPY_ELEMENTS = 1 << 22
#: The figures' key in the wisdom file.
_KEY = "machine"


class MachineFigures(dict):
    """``gemm_gflops`` (large float32 GEMM, GFLOP/s, on NumPy's BLAS threads),
    ``copy_gbps`` (a large float32 copy, GB/s read plus written) and, once measured,
    ``fma_gflops`` (one thread's FMA peak,
    :func:`fma_gflops`)."""

    @property
    def gemm_gflops(self) -> float:
        return float(self["gemm_gflops"])

    @property
    def copy_gbps(self) -> float:
        return float(self["copy_gbps"])


def measure_figures() -> MachineFigures:
    """Measure this machine's figures now (about 0.1 s)."""
    rng = np.random.default_rng(0)
    a = rng.random((_GEMM_SIZE, _GEMM_SIZE), dtype=np.float32)
    b = rng.random((_GEMM_SIZE, _GEMM_SIZE), dtype=np.float32)
    product = np.empty_like(a)
    gemm_seconds = fastest_seconds(lambda: np.matmul(a, b, out=product))
    source = np.ones(_COPY_ELEMENTS, np.float32)
    destination = np.empty_like(source)
    copy_seconds = fastest_seconds(lambda: np.copyto(destination, source))
    return MachineFigures(gemm_gflops=2.0 * _GEMM_SIZE ** 3 / gemm_seconds / 1e9,
                          copy_gbps=2.0 * source.nbytes / copy_seconds / 1e9)


@kept("machine figures", maxsize=None)
def _figures_of(path: object) -> MachineFigures:
    del path  # the cache key: wisdom read from another file may hold other figures
    store.ensure_loaded()
    known = store.figures.get(_KEY)
    if isinstance(known, dict):
        try:
            figures = MachineFigures(known)
            if figures.gemm_gflops > 0 and figures.copy_gbps > 0:
                return figures
        except (KeyError, TypeError, ValueError):
            pass
    figures = measure_figures()
    store.record("figures", _KEY, dict(figures))
    return figures


def machine_figures() -> MachineFigures:
    """This machine's figures: from the wisdom file, or measured now and kept there."""
    return _figures_of(store.path())


def keep_figure(name: str, value: float) -> None:
    """Add a figure measured elsewhere (the FMA peak, measured by a numba kernel:
    :func:`fma_gflops`) to this machine's figures
    and to its wisdom file."""
    figures = machine_figures()
    figures[name] = value
    store.record("figures", _KEY, dict(figures))


def forget_figures() -> None:
    """Measure again at the next use (after the wisdom was forgotten or replaced)."""
    _figures_of.cache_clear()


def gemm_gflops() -> float:
    """Large float32 GEMM rate (GFLOP/s) of the BLAS this process uses, measured here."""
    return machine_figures().gemm_gflops


def fma_gflops() -> float | None:
    """One thread's float32 FMA peak (GFLOP/s) at the vector width numba compiles for
    here: from the wisdom file, or measured now
    (:func:`convtranspose._kernels._numba.peak.measure_fma_gflops`, a few milliseconds
    once its kernel is in the kernel cache) and kept there.  None where numba cannot
    run: no numba kernel is offered then, so no estimate needs it.

    One thread's, because an estimate counts the threads its kernel keeps busy (two
    threads on the two hyperthreads of one core would not double the peak).
    """
    known = machine_figures().get("fma_gflops")
    if isinstance(known, (int, float)) and known > 0:
        return float(known)
    if not numba_usable():
        return None
    from .._kernels._numba import peak

    try:
        measured = peak.measure_fma_gflops()
    except KernelNotCompiled:  # a new machine's first call defers compiling (planning)
        return provisional_fma_gflops()
    keep_figure("fma_gflops", measured)
    return measured


def numba_import_seconds() -> float | None:
    """The seconds importing numba takes on this machine (the fastest seen, kept in the
    wisdom file by :func:`keep_numba_import`), or None before it was first seen."""
    known = machine_figures().get("numba_import_seconds")
    return float(known) if isinstance(known, (int, float)) and known > 0 else None


def keep_numba_import() -> None:
    """Keep this process's numba import time as the machine's figure when it is the
    fastest seen: the first import after a reboot reads numba's files from disk, the
    later ones (which a repeated command meets) from the page cache."""
    seconds = compiling.numba_import_seconds
    known = numba_import_seconds()
    if seconds is not None and seconds > 0 and (known is None or seconds < known):
        keep_figure("numba_import_seconds", round(seconds, 4))


def provisional_fma_gflops() -> float:
    """One thread's FMA peak as the BLAS GEMM rate shared by its threads: the estimates'
    figure while the peak kernel is not compiled yet (a large GEMM runs near the peak
    of every core it uses, so this is slightly below the peak); never kept."""
    return machine_figures().gemm_gflops / max(1, blas.threads())


#: The two copy-split figures: after a rest, and right after a native loop.
_SPLIT_FIGURES = {False: "copy_split_bytes", True: "warm_copy_split_bytes"}


def copy_split_bytes(warm: bool) -> int | None:
    """The smallest layout copy (bytes) that numba's threads copy faster together than
    one thread alone on this machine, ``warm``: right after a loop of theirs, else
    after a rest: from the wisdom file, or measured now
    (:func:`convtranspose._kernels._numba.transpose.measure_copy_split`, 0.3-0.4 s on
    an AMD Zen 4 once its kernels are compiled) and kept there.  None (every copy on
    one thread) where it is not known yet: no numba, one thread, or the copy's kernel or numba's
    parallel loop not compiled yet (the next copy tries again).  A kept 0: splitting
    paid at no size measured.

    Read through :func:`convtranspose._runtime.threads.parallel_copy_bytes`; the
    evidence of one machine is in ``benchmarks/results/copy-split-zen4.json``.
    """
    known = machine_figures().get(_SPLIT_FIGURES[warm])
    if isinstance(known, (int, float)) and math.isfinite(known) and known >= 0:
        return int(known) or None  # (a damaged or hostile entry is measured again)
    target = host()
    if target.threads == 1 or not numba_usable():
        return None
    from .._kernels._numba import transpose

    try:
        measured = transpose.measure_copy_split(target)
    except KernelNotCompiled:  # compiling is deferred here (a new layer is planned)
        return None
    if measured is None:
        return None
    found = transpose.split_sizes(measured)
    for is_warm, name in _SPLIT_FIGURES.items():
        keep_figure(name, found[is_warm] or 0)
    return found[warm]


register_copy_split(copy_split_bytes)


def thread_macs_per_ns(target: Target) -> float:
    """One thread's float32 FMA peak in multiply-adds per ns, at ``target``'s vector
    width: the peak measured here (:func:`fma_gflops`)
    scaled by the width's ratio to the width it was measured at.  Where numba cannot
    measure it (and no numba kernel is offered), a thread's share of the GEMM rate."""
    peak = fma_gflops()
    if peak is None:
        return gemm_gflops() / 2.0 / max(1, target.threads)
    return peak / 2.0 * target.vector_bytes / vector_bytes()
