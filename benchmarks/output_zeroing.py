"""Zeroing outputs that strides leave mostly unreached: NumPy's one-thread fill against
the fill split between numba's threads (:func:`convtranspose._kernels._numba.fill.zero_fill`).

    python benchmarks/output_zeroing.py [--repeats 11] [--json PATH]

First the fill alone, float32 arrays of 256 KiB to 64 MiB: ``numpy`` (``out.fill(0)``)
and ``split`` (on every thread), each into the same array call after call (``kept``)
and into a new array each call (``new``: its pages are fresh from the system where
the allocator maps them anew), medians in ms.  Then layers whose outputs are mostly
unreached (strides 3-4), each through ``ct.prepare`` with its algorithm forced, the
split fill (``split``) and the one-thread fill (``one thread``: the split rule made to
answer one thread) alternating round by round, each call after an untimed one; medians
in ms.  Prints the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._kernels._numba import fill  # noqa: E402
from convtranspose._runtime.config import ALGORITHM_ENV  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose._runtime.target import host  # noqa: E402

# (name, algorithm, data shape, filter shape (C_IN, C_OUT / group, K...), stride,
# further ONNX attributes)
LAYERS = [
    ("pointwise N4 256->256 28x28 k1 s4", "phase-nxc", (4, 256, 28, 28), (256, 256, 1, 1), 4,
     {}),
    ("pointwise N4 256->256 28x28 k1 s4", "col2im-ncx", (4, 256, 28, 28), (256, 256, 1, 1), 4,
     {}),
    ("N4 32->512 8x3x3 k4 s4 op3 g4", "col2im-ncx", (4, 32, 8, 3, 3), (32, 128, 4, 4, 4), 4,
     dict(group=4, output_padding=[3, 3, 3])),
    ("N2 64->64 56x56 k2 s3", "phase-ncx", (2, 64, 56, 56), (64, 64, 2, 2), 3, {}),
    ("N8 32->32 32x32 k1 s3", "gemm-ncx", (8, 32, 32, 32), (32, 32, 1, 1), 3, {}),
]
FILL_MIB = (0.25, 1, 4, 16, 64)


def _median_ms(function, repeats: int, new: bool, mib: float) -> float:
    kept = np.empty(int(mib * (1 << 20)) // 4, np.float32)
    function(kept)  # untimed: the first split fill measures the machine's copy split
    times = []
    for _ in range(repeats):
        array = np.empty_like(kept) if new else kept
        started = time.perf_counter()
        function(array)
        times.append(time.perf_counter() - started)
        del array
    return statistics.median(times) * 1e3


def _fills(threads: int, repeats: int) -> list:
    ways = {"numpy": lambda array: array.fill(0),
            "split": lambda array: fill.zero_fill(array, threads)}
    rows = []
    for mib in FILL_MIB:
        row = {"mib": mib}
        for new in (False, True):
            for way, function in ways.items():
                row[f"{way} {'new' if new else 'kept'}"] = round(
                    _median_ms(function, repeats, new, mib), 3)
        print(f"fill {mib:6.2f} MiB  " + "  ".join(f"{k} {v:7.3f}" for k, v in row.items()
                                                   if k != "mib"), flush=True)
        rows.append(row)
    return rows


def _layer_row(layer, repeats: int) -> dict:
    name, algorithm, data_shape, filter_shape, stride, attributes = layer
    rng = np.random.default_rng(0)
    data = rng.standard_normal(data_shape).astype(np.float32)
    weights = rng.standard_normal(filter_shape).astype(np.float32)
    os.environ[ALGORITHM_ENV] = algorithm
    try:
        prepared = ct.prepare(ct.onnx_conv_transpose, W=weights,
                              strides=[stride] * (len(data_shape) - 2), **attributes)
        measured = fill.copy_threads

        def one_thread():
            fill.copy_threads = lambda nbytes, threads: 1
            try:
                return prepared(data)
            finally:
                fill.copy_threads = measured

        result = prepared(data)
        np.testing.assert_array_equal(result, one_thread())
        samples = alternating_rounds({"split": lambda: prepared(data), "one thread": one_thread},
                                     repeats, warmup=2)
    finally:
        del os.environ[ALGORITHM_ENV]
    ms = {way: statistics.median(values) * 1e3 for way, values in samples.items()}
    output_mib = result.nbytes / (1 << 20)
    print(f"{name:36s} {algorithm:11s} output {output_mib:6.1f} MiB  split {ms['split']:8.3f}"
          f"  one thread {ms['one thread']:8.3f}  split/one {ms['split'] / ms['one thread']:.2f}",
          flush=True)
    return dict(layer=name, algorithm=algorithm, output_mib=round(output_mib, 2),
                ms={way: round(value, 3) for way, value in ms.items()},
                split_over_one_thread=round(ms["split"] / ms["one thread"], 3))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--json", help="write the rows and the CPU's name to this file")
    options = parser.parse_args(argv)
    threads = host().threads
    print(f"{cpu_model_name()}, {threads} threads; ms (median)")
    fills = _fills(threads, options.repeats)
    layers = [_layer_row(layer, options.repeats) for layer in LAYERS]
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "threads": threads, "fills": fills,
                       "layers": layers}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
