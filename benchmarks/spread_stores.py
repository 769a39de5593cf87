"""In-place products of k2 s2 layers: paired rows' interleaved stores against scatters.

    python benchmarks/spread_stores.py [--rounds 10] [--calls 100] [--out FILE]

A channels-first transposed convolution whose taps reach disjoint outputs (U-Net's k2
s2) stores each sum of its packed product straight in its output place
(``col2im-ncx`` in place, ``_kernels/_numba/packed.py``, ``Spread``).  Rows ``2j`` and
``2j + 1`` of its filter matrix (a channel's two taps along the last axis) land side by
side, and a vector of positions along an input row lands two apart: the kernel stores
such a pair of rows as two interleaved vectors, and other vectors by a scatter each.
For each layer this times, in alternating rounds of ``--calls`` calls on all the
library's threads: the same compiled kernel with the pairs table of the layer
(``pairs``) and with one of zeros (every store a scatter: ``scatters``), the product
into a matrix of the same sums (``matrix``, no stores in place), and onnxruntime's
ConvTranspose on the layer where it is installed (a session, its threads as many),
each round after a pause of 0.1 s.  Prints the median and the least round's microseconds per call, with the CPU;
``--out`` writes the rows as JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from prepared_calls import onnxruntime_call  # this folder's script: the same session

import convtranspose as ct
from convtranspose._kernels._numba.packed import (
    Spread,
    pack_matrix,
    paired_runs,
    prepare_packed_product,
)
from convtranspose._runtime.machine import cpu_model_name

#: Seconds before each round: onnxruntime's workers spin 40-56 ms after a call and would
#: take a core from the next round's kernels.
_PAUSE_SECONDS = 0.1

# (input channels, output channels, input rows and columns)
LAYERS = [(256, 128, 14), (64, 32, 24), (64, 32, 32), (128, 64, 56), (512, 256, 32)]


def _runs(ci: int, co: int, size: int, rng) -> dict:
    """The calls to time for one layer (the kernel's outputs checked equal first)."""
    threads = ct.get_num_threads()
    data = rng.standard_normal((1, ci, size, size), dtype=np.float32)
    weights = rng.standard_normal((ci, co, 2, 2), dtype=np.float32)
    plane = 4 * size * size
    rows, columns = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    pos_map = (2 * rows * 2 * size + 2 * columns).reshape(-1).astype(np.int64)
    channel, kh, kw = np.meshgrid(np.arange(co), np.arange(2), np.arange(2), indexing="ij")
    row_base = (channel * plane + kh * 2 * size + kw).reshape(-1).astype(np.int64)
    packed = pack_matrix(weights.reshape(1, ci, -1).transpose(0, 2, 1).copy())
    b = data.reshape(1, 1, ci, -1)
    outputs = {}
    runs = {}
    for name, pairs in (("pairs", paired_runs(pos_map)),
                        ("scatters", np.zeros(size * size, np.int64))):
        spread = Spread(row_base, pos_map, co * plane, pairs)
        product = prepare_packed_product(packed, b.shape, b.dtype, threads, spread)
        out = outputs[name] = np.zeros((1, co, 2 * size, 2 * size), np.float32)
        runs[name] = (lambda product=product, out=out: product(b, out))
        runs[name]()
    if not np.array_equal(outputs["pairs"], outputs["scatters"]):
        raise AssertionError("the paired stores and the scatters disagree")
    matrix = np.empty((1, 1, 4 * co, size * size), np.float32)
    product = prepare_packed_product(packed, b.shape, b.dtype, threads)
    runs["matrix"] = lambda: product(b, matrix)
    session = onnxruntime_call(data, weights, 2, 0)
    if session is not None:
        runs["onnxruntime"] = session
    return runs


def measure(rounds: int, calls: int) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for ci, co, size in LAYERS:
        runs = _runs(ci, co, size, rng)
        times: dict[str, list[float]] = {name: [] for name in runs}
        count = max(1, calls * 64 * 32 * 24 * 24 // (ci * co * size * size))
        for index in range(rounds):
            order = list(runs.items())
            for name, run in (order if index % 2 == 0 else order[::-1]):
                time.sleep(_PAUSE_SECONDS)
                run()
                start = time.perf_counter()
                for _ in range(count):
                    run()
                times[name].append((time.perf_counter() - start) / count * 1e6)
        row = {"layer": f"{ci}->{co} {size}x{size} k2 s2",
               "us": {name: round(statistics.median(values), 1)
                      for name, values in times.items()},
               "least_us": {name: round(min(values), 1) for name, values in times.items()}}
        rows.append(row)
        print(f"| {row['layer']} | " + " | ".join(
            f"{name} {row['us'][name]} (least {row['least_us'][name]})" for name in runs)
            + " |", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100,
                        help="calls per round of the smallest layer (fewer for larger)")
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model_name()}, {ct.get_num_threads()} threads; microseconds per call,"
          f" medians of {args.rounds} rounds\n")
    rows = measure(args.rounds, args.calls)
    if args.out:
        with open(args.out, "w") as file:
            json.dump({"machine": cpu_model_name(), "threads": ct.get_num_threads(),
                       "rounds": args.rounds, "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
