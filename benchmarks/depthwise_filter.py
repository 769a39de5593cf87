"""The depthwise filter gradient of channels-first operands: on their planes as they
are against channels-last copies and the channel-vector kernel (the previous path).

    python benchmarks/depthwise_filter.py [--repeats 15] [--json PATH]

Both run :func:`convtranspose._kernels._numba.depthwise_filter.depthwise_filter_adjoint`
on the host's threads, float32: ``planes`` on the channels-first operands (a last axis
of stride 1), ``copies`` on channels-last copies made in the call (what a
channels-first call did before).  The two alternate round by round; medians in ms.
Prints the CPU; each row's ratio is planes over copies (< 1: planes faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from convtranspose._kernels._numba.depthwise_filter import depthwise_filter_adjoint
from convtranspose._kernels._numba.transpose import channels_last_copy
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime.machine import cpu_model_name
from convtranspose._runtime.target import host

# (name, N, C, spatial sizes, kernel, pad): stride 1, "same" sizes
LAYERS = [
    ("MobileNet 32 112x112 k3", 1, 32, (112, 112), 3, 1),
    ("MobileNet N4 256 28x28 k3", 4, 256, (28, 28), 3, 1),
    ("N16 64 14x14 k3", 16, 64, (14, 14), 3, 1),
    ("N8 1024 7x14 k5", 8, 1024, (7, 14), 5, 2),
    ("MobileNet 144 56x56 k3", 1, 144, (56, 56), 3, 1),
    ("MobileNet N8 960 7x7 k3", 8, 960, (7, 7), 3, 1),
    ("N4 128 20x20 k5", 4, 128, (20, 20), 5, 2),
    ("1-D N4 512 L1024 k7", 4, 512, (1024,), 7, 3),
    ("3-D 32 16x32x32 k3", 1, 32, (16, 32, 32), 3, 1),
]


def _axes(sizes, kernel, pad):
    return tuple(AxisPlan(size, kernel, 1, 1, pad, size) for size in sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", help="write the rows and the CPU's name to this file")
    options = parser.parse_args()
    target, dtype = host(), np.dtype(np.float32)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{cpu_model_name()}, {target.threads} threads, float32")
    for name, batch, channels, sizes, kernel, pad in LAYERS:
        axes = _axes(sizes, kernel, pad)
        data = rng.standard_normal((batch, channels) + sizes, np.float32)
        grad = rng.standard_normal((batch, channels) + sizes, np.float32)

        def planes():
            return depthwise_filter_adjoint(data, grad, axes, False, dtype, target)

        def copies():
            return depthwise_filter_adjoint(channels_last_copy(data, dtype, target),
                                            channels_last_copy(grad, dtype, target),
                                            axes, True, dtype, target)

        np.testing.assert_allclose(planes(), copies(), rtol=1e-4, atol=1e-3)
        times: dict[str, list[float]] = {"planes": [], "copies": []}
        for _ in range(options.repeats):
            for label, function in (("planes", planes), ("copies", copies)):
                function()
                start = time.perf_counter()
                function()
                times[label].append(time.perf_counter() - start)
        row = {"layer": name, **{label: round(statistics.median(values) * 1e3, 4)
                                 for label, values in times.items()}}
        row["ratio"] = round(row["planes"] / row["copies"], 3)
        rows.append(row)
        print(f"{name:28s} planes {row['planes']:8.3f} ms  copies {row['copies']:8.3f} ms"
              f"  ratio {row['ratio']:.2f}")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "threads": target.threads, "rows": rows},
                      file, indent=1)


if __name__ == "__main__":
    main()
