"""The two exact int8 kernels against each other: byte products then a scatter
(``u8s8_transposed``) and direct-blocked's loop nest with byte products (``u8s8_blocked``).

Prints one row per layer and layout: each kernel's median time (alternating rounds,
each call after a pause and an untimed call, as ``python -m convtranspose bench``
times them), the ratio, the blocked kernel's multiply-adds per second, and the
1-minute load average.  Both results are checked equal first.  ``--out`` writes the
rows, the CPU model and its int8 dot-product flags to a JSON file.  Needs numba and a
CPU with AVX512-VNNI.

    python benchmarks/int8_kernels.py --out benchmarks/results/int8-kernels-xeon.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np

from convtranspose._cli.bench import alternating_rounds, cpu_model
from convtranspose._kernels.int8 import u8s8_blocked, u8s8_transposed
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime.machine import has_vnni
from convtranspose._runtime.target import host

#: (name, N, Ci, Co, input size, kernel, stride, pad, output size): the quantized
#: suite's layers (``convtranspose bench --quantized``) and a grouped one.
LAYERS = [
    ("DCGAN N4 256->128 16x16 k4 s2 p1", 4, 256, 128, 16, 4, 2, 1, 32, 1),
    ("U-Net N1 512->256 32x32 k2 s2", 1, 512, 256, 32, 2, 2, 0, 64, 1),
    ("seg head N1 128->64 64x64 k4 s2 p1", 1, 128, 64, 64, 4, 2, 1, 128, 1),
    ("small N1 16->16 8x8 k3 s2 p1", 1, 16, 16, 8, 3, 2, 1, 15, 1),
    ("grouped N2 256->256 g32 16x16 k4 s2 p1", 2, 256, 256, 16, 4, 2, 1, 32, 32),
]


def _load() -> float:
    return os.getloadavg()[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", help="write the rows and the CPU's name to this JSON file")
    args = parser.parse_args(argv)
    if not has_vnni():
        raise SystemExit("this CPU has no AVX512-VNNI: the byte products cannot run here")
    target = host()
    rng = np.random.default_rng(0)
    rows = []
    print(f"CPU: {cpu_model()}; {target.threads} threads; ms (median of {args.repeat})")
    print(f"{'layer':40s} {'layout':6s} {'scatter':>8s} {'blocked':>8s} {'ratio':>6s}"
          f" {'GMAC/s':>7s} {'load':>5s}")
    for name, n, ci, co, size, k, s, p, out, groups in LAYERS:
        axes = (AxisPlan(size, k, s, 1, p, out),) * 2
        weights = rng.integers(-63, 64, (groups, ci // groups, co // groups, k, k))
        weights = weights.astype(np.int8)
        for channels_last in (False, True):
            shape = (n, size, size, ci) if channels_last else (n, ci, size, size)
            data = rng.integers(0, 256, shape).astype(np.uint8)
            runs = {"scatter": lambda: u8s8_transposed(data, weights, axes, channels_last,
                                                       target),
                    "blocked": lambda: u8s8_blocked(data, weights, axes, channels_last,
                                                    target)}
            np.testing.assert_array_equal(runs["scatter"](), runs["blocked"]())
            samples = alternating_rounds(runs, args.repeat, warmup=2)
            ms = {key: statistics.median(values) * 1e3 for key, values in samples.items()}
            macs = n * ci * (co // groups) * k * k * size * size
            row = dict(layer=name, layout="NXC" if channels_last else "NCX", **ms,
                       ratio=ms["scatter"] / ms["blocked"],
                       blocked_gmacs=macs / ms["blocked"] / 1e6, load=_load())
            rows.append(row)
            print(f"{name:40s} {row['layout']:6s} {ms['scatter']:8.3f} {ms['blocked']:8.3f}"
                  f" {row['ratio']:6.2f} {row['blocked_gmacs']:7.0f} {row['load']:5.2f}")
    ratios = [row["ratio"] for row in rows]
    print(f"geometric mean, scatter / blocked: {float(np.exp(np.mean(np.log(ratios)))):.2f}x")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model(), "threads": target.threads, "vnni": True,
                       "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
