"""What the machine is and can do, measured when the benchmark runs: the CPU's name,
the FMA peak of the vector units, copy bandwidth, and each layer's floor from them."""

from __future__ import annotations

import gc
import math
import time
import tracemalloc

import numpy as np

from ..._runtime.machine import cpu_model_name as cpu_model  # noqa: F401 (re-exported)
from ..._runtime.machine import parse_model_name  # noqa: F401 (re-exported)
from ..._runtime.target import numba_usable
from .suite import THREADS, Layer, numpy_dtype


def peak_extra_bytes(run) -> tuple[int, int]:
    """(peak bytes NumPy allocated during one call, bytes of the result)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result.nbytes


def fma_peak_flops(threads: int = THREADS, count: int = 10_000_000) -> float | None:
    """The float32 FMA peak (FLOP/s) of ``threads`` threads: register-only vector FMAs
    on independent chains, as numba compiles them for this CPU (the kernels' own
    instructions); the best of three runs.  None without numba."""
    if not numba_usable():
        return None
    from ..._kernels._numba.peak import peak_chains, peak_kernel
    from ..._runtime.machine import vector_bytes

    lanes = vector_bytes() // 4
    chain_count = peak_chains(vector_bytes())
    peak = peak_kernel(lanes, chain_count)
    buffers = [np.full((chain_count + 2) * lanes, 0.5, np.float32) for _ in range(threads)]
    peak(buffers[0], 1000)  # compiled outside the timing
    return 2 * lanes * chain_count * count * threads / fastest_together(peak, buffers, count)


def fastest_together(kernel, buffers: list, count: int, rounds: int = 3) -> float:
    """The fewest seconds, over ``rounds``, that one thread per buffer takes to run
    ``kernel(buffer, count)`` at once (a peak kernel of :mod:`..._kernels._numba.peak`
    or the like, which releases the GIL)."""
    import threading

    fastest = float("inf")
    for _ in range(rounds):
        workers = [threading.Thread(target=kernel, args=(buffer, count)) for buffer in buffers]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def copy_bandwidth(threads: int = THREADS, megabytes: int = 64) -> float:
    """Bytes per second read plus written by a large NumPy copy (out of cache), split
    between ``threads`` threads (NumPy releases the GIL); the best of five."""
    from concurrent.futures import ThreadPoolExecutor

    source = np.ones((megabytes << 20) // 4, np.float32)
    target = np.zeros_like(source)
    bounds = [source.size * i // threads for i in range(threads + 1)]
    pieces = [(target[a:b], source[a:b]) for a, b in zip(bounds, bounds[1:])]
    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(5):
            start = time.perf_counter()
            list(pool.map(lambda piece: np.copyto(*piece), pieces))
            best = max(best, 2 * source.nbytes / (time.perf_counter() - start))
    return best


def bfloat16_factor() -> float:
    """Products per float32 FMA lane that bfloat16 dot-product instructions give (2
    with AVX512_BF16, which torch uses; float16 has no such instruction here)."""
    if not numba_usable():
        return 1.0
    from ..._runtime.machine import has_bfloat16_pairs

    return 2.0 if has_bfloat16_pairs() else 1.0


#: A row whose floor is below this is bound by call overhead, which no floor captures.
FLOOR_MIN_MS = 0.05


def floor_ms(layer: Layer, fma_flops: float | None, bandwidth: float) -> float:
    """The least time any implementation needs on this machine: the useful
    multiply-adds at the FMA peak (bfloat16 at :func:`bfloat16_factor` times it), or
    reading the input and filter and writing the output once, whichever is longer."""
    itemsize = np.dtype(numpy_dtype(layer.dtype)).itemsize
    moved = itemsize * (layer.batch * layer.in_channels * math.prod(layer.spatial)
                        + layer.in_channels * layer.out_channels // layer.groups
                        * layer.kernel ** layer.rank
                        + layer.batch * layer.out_channels * math.prod(layer.output_spatial))
    compute = 0.0
    if fma_flops:
        factor = bfloat16_factor() if layer.dtype == "bfloat16" else 1.0
        compute = layer.useful_flops / (fma_flops * factor)
    return 1e3 * max(compute, moved / bandwidth)
