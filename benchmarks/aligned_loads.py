"""Multiply-adds from loads that do or do not cross cache lines, one thread.

    python benchmarks/aligned_loads.py [--reps 200000] [--out FILE]

The block of ``depthwise``'s lines kernel (``templates/depthwise_lines.py``): 8 vector
accumulators, 25 taps, each tap one broadcast weight and 8 loads from a window held in
L1 (rows a whole number of vectors apart).  Timed with loads at vector-aligned places
(as the kernel's window copies give it) and one element past them (a window read at
each tap's shift: every load spans two cache lines).  Prints nanoseconds per vector
multiply-add and the CPU; ``--out`` writes them as JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit

from convtranspose._kernels._numba.vectors import (
    vector_fma,
    vector_load,
    vector_splat_at,
    vector_store,
    vector_zero,
)
from convtranspose._runtime.machine import cpu_model_name, vector_bytes

LANES = vector_bytes() // 4


@njit(boundscheck=False)
def _block(window, weights, out, reps, row, shift):  # pragma: no cover - compiled
    for _ in range(reps):
        a0, a1, a2, a3 = (vector_zero(window, LANES), vector_zero(window, LANES),
                          vector_zero(window, LANES), vector_zero(window, LANES))
        a4, a5, a6, a7 = (vector_zero(window, LANES), vector_zero(window, LANES),
                          vector_zero(window, LANES), vector_zero(window, LANES))
        for tap in range(25):
            w = vector_splat_at(weights, tap, LANES)
            p = (tap // 5) * row + (tap % 5) * shift
            a0 = vector_fma(vector_load(window, p, LANES), w, a0)
            a1 = vector_fma(vector_load(window, p + row, LANES), w, a1)
            a2 = vector_fma(vector_load(window, p + 2 * row, LANES), w, a2)
            a3 = vector_fma(vector_load(window, p + 3 * row, LANES), w, a3)
            a4 = vector_fma(vector_load(window, p + 4 * row, LANES), w, a4)
            a5 = vector_fma(vector_load(window, p + 5 * row, LANES), w, a5)
            a6 = vector_fma(vector_load(window, p + 6 * row, LANES), w, a6)
            a7 = vector_fma(vector_load(window, p + 7 * row, LANES), w, a7)
        for i, a in enumerate((a0, a1, a2, a3, a4, a5, a6, a7)):
            vector_store(out, i * LANES, a)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200000)
    parser.add_argument("--out")
    options = parser.parse_args(argv)
    raw = np.random.default_rng(0).random(4096 + 64).astype(np.float32)
    window = raw[(-(raw.ctypes.data // 4)) % 16:][:4096]  # 64-byte aligned
    weights, out = np.ones(25, np.float32), np.zeros(8 * LANES, np.float32)
    row = 4 * LANES
    rows = {}
    for name, shift, start in (("aligned", LANES, 0), ("across lines", 1, 1)):
        _block(window[start:], weights, out, 10, row, shift)
        best = min(_timed(window[start:], weights, out, options.reps, row, shift)
                   for _ in range(5))
        rows[name] = best / (options.reps * 200) * 1e9
    print(f"CPU: {cpu_model_name()}, {LANES} float32 lanes; ns per vector multiply-add")
    for name, ns in rows.items():
        print(f"| {name} | {ns:.3f} |")
    print(f"across lines / aligned: {rows['across lines'] / rows['aligned']:.2f}")
    if options.out:
        with open(options.out, "w", encoding="utf-8") as file:
            json.dump({"machine": cpu_model_name(), "lanes": LANES, "ns": rows}, file, indent=1)
    return 0


def _timed(window, weights, out, reps, row, shift) -> float:
    start = time.perf_counter()
    _block(window, weights, out, reps, row, shift)
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
