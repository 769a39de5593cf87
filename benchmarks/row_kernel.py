"""numba ``direct``'s row kernel against its plane kernel on random channels-first layers.

Prints one table row per layer: the two kernels' median times (alternating calls, each
after a short pause and an untimed call), their ratio and the largest difference
between their results, then the geometric mean of the ratios per last-axis stride.
By default only layers the row kernel takes (:func:`convtranspose._kernel_numba.rows_apply`);
``--any-stride`` also times layers with channels whose last axis has stride 1, which the
plane kernel keeps.  Needs numba.

    python benchmarks/row_kernel.py --seed 1 --layers 16
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from convtranspose import host_target
from convtranspose._kernels import schedules
from convtranspose._kernels._numba import direct, planes
from convtranspose._plan.geometry import three_axes
from convtranspose._plan.rules import AxisPlan


def random_layer(rng):
    """(batch, weights shape, axes) of a random layer of 2-400 M multiply-adds."""
    while True:
        rank = int(rng.choice([1, 2, 2, 2, 3]))
        kernel, stride = int(rng.integers(1, 6)), int(rng.integers(1, 3))
        dilation = 1 if rng.random() < 0.8 else 2
        size = {1: int(rng.integers(64, 2048)), 2: int(rng.integers(8, 72)),
                3: int(rng.integers(6, 20))}[rank]
        pad = int(rng.integers(0, kernel))
        full = (size - 1) * stride + (kernel - 1) * dilation + 1
        axes = tuple(AxisPlan(size, kernel, stride, dilation, pad, full - 2 * pad)
                     for _ in range(rank))
        groups = int(rng.choice([1, 1, 2, 4, 8]))
        ci, co = (int(rng.choice([1, 2, 3, 8, 16, 32, 64, 128])) for _ in range(2))
        batch = int(rng.integers(1, 5))
        macs = batch * groups * ci * co * math.prod(a.output_size for a in axes) * (
            kernel / stride) ** rank
        if min(a.output_size for a in axes) >= 1 and 2e6 <= macs <= 4e8:
            return batch, (groups, ci, co) + (kernel,) * rank, axes


def median_seconds(calls, rounds):
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            time.sleep(0.05)
            call()
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--any-stride", action="store_true",
                        help="also layers with channels and a last-axis stride of 1")
    args = parser.parse_args(argv)
    strides = schedules.ROWS_CHANNEL_STRIDES
    if args.any_stride:
        schedules.ROWS_CHANNEL_STRIDES = (1, 2)
    try:
        return _run(args)
    finally:
        schedules.ROWS_CHANNEL_STRIDES = strides


def _run(args):
    rng = np.random.default_rng(args.seed)
    f32 = np.dtype(np.float32)
    target = host_target()
    ratios = {}
    print("| layer | plane kernel ms | row kernel ms | row / plane | max difference |")
    print("|---|---|---|---|---|")
    done = 0
    while done < args.layers:
        batch, shape, axes = random_layer(rng)
        axes3 = three_axes(axes)
        if not schedules.rows_apply(shape, axes3, False, f32, f32, f32, target):
            continue
        groups, ci, co = shape[:3]
        data = rng.standard_normal((batch, groups * ci) + tuple(a.input_size for a in axes),
                                   dtype=np.float32)
        weights = rng.standard_normal(shape, dtype=np.float32)
        out_shape = (batch, groups * co) + tuple(a.output_size for a in axes)
        planes_out, rows_out = np.empty(out_shape, f32), np.empty(out_shape, f32)
        threads = direct.direct_threads(batch, shape, axes, target)
        planes_memo, rows_memo = {}, {}
        seconds = median_seconds({
            "planes": lambda: planes.direct_planes(data, weights, axes3, f32, planes_out,
                                                    target, threads, False, planes_memo),
            "rows": lambda: direct.direct_phase(data, weights, axes, f32, False, rows_out,
                                                rows_memo, None, target)}, args.rounds)
        difference = np.abs(planes_out - rows_out).max() / max(1e-30, np.abs(planes_out).max())
        ratio = seconds["rows"] / seconds["planes"]
        ratios.setdefault(axes[-1].stride, []).append(ratio)
        a = axes[-1]
        label = (f"N{batch} g{groups} {ci}->{co} {a.input_size}^{len(axes)} k{a.kernel_size}"
                 f" s{a.stride} d{a.dilation} p{a.offset}")
        print(f"| {label} | {1e3 * seconds['planes']:.3f} | {1e3 * seconds['rows']:.3f} | "
              f"{ratio:.2f} | {difference:.0e} |", flush=True)
        done += 1
    for stride, values in sorted(ratios.items()):
        mean = math.exp(statistics.fmean(math.log(r) for r in values))
        print(f"\nlast-axis stride {stride}: {len(values)} layers, row / plane geometric mean "
              f"{mean:.2f}, {min(values):.2f}-{max(values):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
