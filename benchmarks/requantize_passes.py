"""The quantized dialects' compiled requantization pass on numba's threads (split by the
layout copies' measured rule) against another build's pass.

    python benchmarks/requantize_passes.py --baseline OTHER/src [--repeats 15] [--json PATH]

``--baseline`` is the ``src`` folder of another checkout (for example the build whose
passes ran on the library's Python pool from 4 MiB on), loaded beside this one as
``benchmarks/ab_compare.py`` does.  Three tables, medians in ms of rounds alternating
between the builds, each call after an untimed one:

- the pass alone (``convtranspose._kernels.requantize.requantized``) on channels-first
  int32 sums of 256 KiB to 16 MiB, two threads;
- whole ``ct.qlinear_conv_transpose`` calls (uint8 data, int8 weights) whose results
  are requantized from sums of those sizes, two threads;
- each dialect's compiled rows kernel (``qlinear``'s ``corrected_rows``, oneDNN's
  ``onednn_rows`` with a bias and a zero point, TFLite's ``fixed_point_rows``) called
  directly on one thread, on a small layer's channels-last sums (225 x 16) and on
  4 MiB of them.

Prints the CPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402
from ab_compare import BASELINE, load_baseline  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._kernels import requantize  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

#: Sums ``(N, M, Y, Y)`` of the pass alone: 256 KiB to 16 MiB of int32.
PASS_SHAPES = [(1, 64, 32, 32), (1, 64, 64, 64), (1, 64, 128, 128), (4, 64, 128, 128)]
#: ``ct.qlinear_conv_transpose`` layers: (name, data shape, W shape, stride, pad).
LAYERS = [
    ("k4 s2 64->32 32x32", (1, 64, 32, 32), (64, 32, 4, 4), 2, 1),
    ("k4 s2 64->64 64x64", (1, 64, 64, 64), (64, 64, 4, 4), 2, 1),
    ("k3 s1 32->64 N4 64x64", (4, 32, 64, 64), (32, 64, 3, 3), 1, 1),
]


def _alternating(calls: dict, repeats: int) -> dict:
    """Median ms of each of ``calls``, alternating round by round, each call after an
    untimed one (no pause between them)."""
    samples = alternating_rounds(calls, repeats, pause=0.0)
    return {name: statistics.median(values) * 1e3 for name, values in samples.items()}


def _pass_rows(repeats: int) -> list:
    rng = np.random.default_rng(0)
    rows = []
    for shape in PASS_SHAPES:
        acc = rng.integers(-(2 ** 20), 2 ** 20, shape).astype(np.int32)
        multiplier = rng.uniform(1e-4, 1e-3, shape[1]).astype(np.float32)
        scale, zero = np.float32(0.05), np.uint8(128)
        builds = {"this": requantize.requantized, "baseline": importlib.import_module(
            f"{BASELINE}._kernels.requantize").requantized}
        row = _alternating({name: (lambda f=f: f(acc, multiplier, scale, zero, 2))
                            for name, f in builds.items()}, repeats)
        row.update(sums=f"{acc.nbytes >> 10} KiB", ratio=row["this"] / row["baseline"])
        print(f"pass {row['sums']:>10s}  this {row['this']:7.3f}  baseline"
              f" {row['baseline']:7.3f}  this/baseline {row['ratio']:.2f}", flush=True)
        rows.append(row)
    return rows


def _layer_rows(baseline, repeats: int) -> list:
    rng = np.random.default_rng(1)
    rows = []
    for name, data_shape, filter_shape, stride, pad in LAYERS:
        x = rng.integers(0, 256, data_shape).astype(np.uint8)
        w = rng.integers(-128, 128, filter_shape).astype(np.int8)
        arguments = (np.float32(0.02), np.uint8(128), w,
                     rng.uniform(0.001, 0.01, filter_shape[1]).astype(np.float32),
                     np.zeros(filter_shape[1], np.int8), np.float32(0.5), np.uint8(100))
        attributes = dict(strides=[stride] * 2, pads=[pad] * 4)
        builds = {"this": ct.qlinear_conv_transpose,
                  "baseline": baseline.qlinear_conv_transpose}
        row = _alternating({build: (lambda f=f: f(x, *arguments, **attributes))
                            for build, f in builds.items()}, repeats)
        row.update(layer=name, ratio=row["this"] / row["baseline"])
        print(f"{name:24s}  this {row['this']:7.3f}  baseline {row['baseline']:7.3f}"
              f"  this/baseline {row['ratio']:.2f}", flush=True)
        rows.append(row)
    return rows


def _kernel_calls(module, acc: np.ndarray) -> dict:
    """Each dialect's rows kernel of ``module`` (a build's ``_kernels._numba.requantize``)
    over every row of the channels-last sums ``acc``, by dialect."""
    rows, channels = acc.shape
    rng = np.random.default_rng(2)
    share = rng.integers(-1000, 1000, acc.shape).astype(np.int32)
    starts, scales = np.zeros(1, np.int64), np.full(channels, 0.01, np.float32)
    bias = rng.normal(0, 5, channels).astype(np.float32)
    out = np.empty(acc.shape, np.uint8)
    f32, i64 = np.float32, np.int64
    fixed_point = _fixed_point_constants(module, channels)
    return {
        "qlinear": lambda: module.corrected_rows(
            acc, share, i64(128), np.zeros(channels, np.int32), scales, f32(0.5), f32(120),
            f32(0), f32(255), out, starts, rows),
        "onednn": lambda: module.onednn_rows(
            acc, share, i64(128), False, f32(0.02), scales, bias, f32(2.0), False, f32(120),
            3, True, f32(0), f32(255), out, starts, rows),
        "tflite": lambda: module.fixed_point_rows(
            acc, share, i64(128), *fixed_point, i64(-3), i64(0),
            i64(255), out, starts, rows)}


def _fixed_point_constants(module, channels: int) -> tuple:
    """``fixed_point_rows``' per-channel arguments in ``module``'s form: one table where
    the build has ``fixed_point_table``, else the bias, multipliers and shifts."""
    constants = (np.zeros(channels, np.int64), np.full(channels, 1288490189, np.int64),
                 np.full(channels, -8, np.int64))
    table = getattr(module, "fixed_point_table", None)
    return constants if table is None else (table(*constants),)


def _kernel_rows(repeats: int) -> list:
    this = importlib.import_module("convtranspose._kernels._numba.requantize")
    other = importlib.import_module(f"{BASELINE}._kernels._numba.requantize")
    rng = np.random.default_rng(3)
    rows = []
    for shape in ((225, 16), (8192, 128)):
        acc = rng.integers(-100000, 100000, shape).astype(np.int32)
        mine, theirs = _kernel_calls(this, acc), _kernel_calls(other, acc)
        for dialect in mine:
            row = _alternating({"this": mine[dialect], "baseline": theirs[dialect]}, repeats)
            row.update(dialect=dialect, sums=list(shape), ratio=row["this"] / row["baseline"])
            print(f"rows {dialect:8s} {shape[0]:5d} x {shape[1]:3d}  this {row['this']:7.4f}"
                  f"  baseline {row['baseline']:7.4f}  this/baseline {row['ratio']:.2f}",
                  flush=True)
            rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="SRC", required=True,
                        help="another build's src folder")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", help="write the tables and the CPU's name to this file")
    options = parser.parse_args(argv)
    baseline = load_baseline(options.baseline)
    for library in (ct, baseline):
        library.set_num_threads(2)
    cpu = cpu_model_name()
    print(f"CPU: {cpu}; two threads, then one for the kernels alone")
    record = {"cpu": cpu, "baseline": options.baseline,
              "passes": _pass_rows(options.repeats),
              "layers": _layer_rows(baseline, options.repeats),
              "kernels_one_thread": _kernel_rows(options.repeats)}
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(record, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
