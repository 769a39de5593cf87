"""The FMA peak of one thread, measured with the kernels' own vector instructions.

The cost model prices the numba kernels' multiply-adds at shares of it
(:func:`convtranspose._choose.figures.fma_gflops`), and the benchmark sets each
layer's floor by it (:func:`convtranspose._cli.bench.fma_peak_flops`).
"""

from __future__ import annotations

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.machine import fastest_seconds, vector_bytes
from .codegen import compile_source

__all__ = ["measure_fma_gflops", "peak_chains", "peak_kernel"]

#: Iterations of the loop per timed run: about a millisecond at the peak of a current
#: AVX-512 core (16 chains of 16 lanes), ten on a slow one.
_ITERATIONS = 1_000_000


def peak_chains(vector_bytes: int) -> int:
    """Independent FMA chains per thread in :func:`peak_kernel`.

    Enough to hide the FMA latency on any x86 core (two pipes, 4-5 cycles), and with
    the two operands few enough to stay in registers: 16 with AVX-512's 32, 12 with
    AVX2's 16.  Sixteen chains on AVX2 spill to the stack every iteration (Zen 3, two
    threads: 76 GFLOP/s, against 194 with 12 chains and 189 with 8;
    ``benchmarks/results/benchmark-method.json``).
    """
    return 16 if vector_bytes >= 64 else 12


@kept("compiled kernels", maxsize=None)
def peak_kernel(lanes: int, chain_count: int):
    """A numba kernel ``peak(buffer, count)``: ``count`` rounds of one vector FMA on each
    of ``chain_count`` independent register chains of ``lanes`` float32 lanes."""
    chains = range(chain_count)
    lines = ["def peak(buffer, count):"]
    lines += [f"    a{i} = vector_load(buffer, {i * lanes}, {lanes})" for i in chains]
    lines += [f"    x = vector_load(buffer, {chain_count * lanes}, {lanes})",
              f"    y = vector_load(buffer, {(chain_count + 1) * lanes}, {lanes})",
              "    for _ in range(count):"]
    lines += [f"        a{i} = vector_fma(a{i}, x, y)" for i in chains]
    lines += [f"    vector_store(buffer, {i * lanes}, a{i})" for i in chains]
    return compile_source("\n".join(lines) + "\n", "peak")


def measure_fma_gflops(iterations: int = _ITERATIONS) -> float:
    """One thread's float32 FMA peak (GFLOP/s) now: register-only vector FMAs on
    independent chains, as numba compiles them for this process's CPU (the kernels'
    own instructions and vector width); the fastest of a few runs."""
    width = vector_bytes()
    lanes, chain_count = width // 4, peak_chains(width)
    peak = peak_kernel(lanes, chain_count)
    buffer = np.full((chain_count + 2) * lanes, 0.5, np.float32)
    seconds = fastest_seconds(lambda: peak(buffer, iterations))  # the untimed call compiles
    return 2.0 * lanes * chain_count * iterations / seconds / 1e9
