"""Compare the kernel's cost model with measured times, algorithm by algorithm.

For every float32 layer of the benchmark suite (both layouts) and a set of random
layers, each algorithm the model considers is forced and timed; the table shows the
model's estimate next to the measurement, the algorithm the model picks and the one
that was fastest.  The summary gives, per algorithm, the geometric mean and spread of
measured / estimated time (what a re-fit of the model should bring to one), and the
time lost to wrong choices (chosen / fastest per layer).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/calibrate.py --out DIR

The estimates use the GEMM speed of this machine's class
(:func:`convtranspose.dispatch.calibration.machine_class`); a new class needs its own entry there
first.  Run it on a quiet machine.  Each time is the median over ``--repeat`` calls timed as
the benchmark times them (a pause, one untimed call, the timed one): calls after a
pause can differ from back-to-back ones (before the numba helper threads were kept
off the caller's CPU, the stride-1 k3 kernel on AMD Zen 3 took 5.9 ms back to back
and 10.7 ms paused), and the model should choose for calls as they come in use, not
for the luckiest.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

from convtranspose import _execute as execute
from convtranspose import dispatch, host_target, kernels
from convtranspose._bench import (
    SETTLE_SECONDS,
    SUITE,
    Layer,
    _kernel_weights_shape,
    layer_plan_axes,
    make_inputs,
)
from convtranspose._runtime import blas
from convtranspose.dispatch import calibration, estimates


def random_layers(count: int, seed: int) -> list[Layer]:
    """Layers of 1-3 axes, 1-512 channels, groups, strides 1-4, kernels 1-7, 1e5-2e9 FLOPs."""
    rng = np.random.default_rng(seed)
    layers = []
    while len(layers) < count:
        rank = int(rng.choice([1, 2, 2, 2, 3]))
        stride = int(rng.integers(1, 5))
        kernel = int(rng.choice([stride, 2 * stride, stride + 1, 3, 1, 7]))
        kernel = max(1, min(kernel, 16))
        groups = int(rng.choice([1, 1, 1, 2, 8, 32]))
        per_group_in = int(rng.choice([1, 3, 8, 16, 32, 64, 128, 256]))
        per_group_out = int(rng.choice([1, 3, 8, 16, 32, 64, 128, 256]))
        batch = int(rng.choice([1, 1, 2, 4, 16]))
        side = int(rng.choice({1: [64, 512, 4096, 16384], 2: [5, 8, 14, 28, 56, 100],
                               3: [4, 8, 16, 24]}[rank]))
        pad = int(rng.integers(0, max(1, (kernel - 1) // 2 + 1)))
        name = (f"random-{len(layers)} N{batch} {groups * per_group_in}->"
                f"{groups * per_group_out} g{groups} {side}^{rank} k{kernel} s{stride} p{pad}")
        layer = Layer(name, batch, groups * per_group_in,
                      groups * per_group_out, (side,) * rank, kernel, stride, pad,
                      groups=groups, layout=str(rng.choice(["NCX", "NXC"])))
        if not 1e5 <= layer.flops <= 2e9 or min(layer.output_spatial) < 1:
            continue
        if layer.batch * layer.out_channels * math.prod(layer.output_spatial) > 2e7:
            continue
        layers.append(layer)
    return layers


def _kernel_inputs(layer: Layer):
    inputs = make_inputs(layer)
    data = inputs["data"]
    weights = np.ascontiguousarray(inputs["weights"].reshape(_kernel_weights_shape(layer)))
    if layer.layout == "NXC":
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    return data, weights


def _typical_seconds(run, repeat: int, budget: float) -> float:
    """The median time of ``run`` called as :func:`convtranspose._bench.bench_layer` does."""
    run()  # warm-up: caches, memo, numba compilation
    samples, spent = [], 0.0
    for _ in range(repeat):
        time.sleep(SETTLE_SECONDS)
        run()
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        samples.append(elapsed)
        spent += 2 * elapsed
        if spent > budget and len(samples) >= 3:
            break
    return statistics.median(samples)


def calibrate_layer(layer: Layer, repeat: int, budget: float) -> dict:
    axes = tuple(layer_plan_axes(layer))
    data, weights = _kernel_inputs(layer)
    channels_last = layer.layout == "NXC"
    dtype = np.dtype(np.float32)
    target = host_target()
    costs = estimates.raw_estimates(layer.batch, axes, weights.shape, channels_last, False,
                                    target, target.blas_for(dtype))
    chosen = dispatch.choose_algorithm(layer.batch, axes, weights.shape,
                                      channels_last=channels_last, dtype=dtype)
    measured = {}
    for name in sorted(costs, key=lambda name: costs[name].total):
        def run(name=name):
            return execute.transposed_convolution(data, weights, axes, dtype=dtype,
                                                  channels_last=channels_last, algorithm=name)
        measured[name] = _typical_seconds(run, repeat, budget) * 1e3
    fastest = min(measured, key=measured.get)
    return {"layer": layer.label, "chosen": chosen, "fastest": fastest,
            "raw_ms": {k: v.scaled / 1e6 for k, v in costs.items()},
            "gemm_ms": {k: v.gemm / 1e6 for k, v in costs.items()},
            "kernel_ms": {k: v.kernel / 1e6 for k, v in costs.items() if v.kernel},
            "measured_ms": measured}


_OVERHEADS_MS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3, 0.5)


def _gemm_ms(result: dict, name: str) -> float:
    """The unscaled BLAS part of an estimate (0 in results files that lack it)."""
    return result.get("gemm_ms", {}).get(name, 0.0)


def _kernel_ms(result: dict, name: str) -> float:
    """The numba multiply-add part of an estimate, scaled on its own (0 in results files
    that lack it, where it is part of ``raw_ms``)."""
    return result.get("kernel_ms", {}).get(name, 0.0)


def _estimate_ms(result: dict, name: str, entry: tuple[float, ...]) -> float:
    """The calibrated estimate of ``name`` with one ``(scale, overhead ns[, kernel
    scale])`` entry of a calibration table."""
    cost = calibration.RawCost(result["raw_ms"][name] * 1e6, _gemm_ms(result, name) * 1e6,
                           _kernel_ms(result, name) * 1e6)
    return calibration.calibrated_ns(cost, entry) / 1e6


def fit(results: list[dict]) -> dict[str, tuple[float, ...]]:
    """Per algorithm, ``(scale, overhead ns[, kernel scale])`` minimising the squared log error.

    The estimate is ``scale * raw + kernel scale * kernel + gemm + overhead``
    (:class:`convtranspose.dispatch.calibration.RawCost`).  For each candidate overhead (and kernel
    scale, where the algorithm has a kernel part) the scale is the geometric mean of
    (measured - gemm - kernel part - overhead) / raw estimate (the rest at least a tenth
    of the measured time); the combination with the smallest mean squared log error wins.
    """
    table = {}
    for name in kernels.ALGORITHMS:
        rows = [(r["raw_ms"][name], _gemm_ms(r, name), _kernel_ms(r, name), r["measured_ms"][name])
                for r in results if name in r["measured_ms"]]
        if not rows:
            continue
        raw, gemm, kernel, measured = (np.array(column) for column in zip(*rows))
        kernel_scales = _KERNEL_SCALES if kernel.any() else (None,)
        best = None
        for overhead in _OVERHEADS_MS:
            if overhead >= measured.min():
                break
            for kernel_scale in kernel_scales:
                fixed = gemm + overhead + (kernel_scale or 0.0) * kernel
                rest = np.maximum(measured - fixed, 0.1 * measured)
                scale = float(np.exp(np.mean(np.log(rest / raw))))
                error = float(np.mean(np.log((scale * raw + fixed) / measured) ** 2))
                if best is None or error < best[0]:
                    best = (error, scale, overhead, kernel_scale)
        _, scale, overhead, kernel_scale = best
        table[name] = (round(scale, 3), round(overhead * 1e6)) + (
            () if kernel_scale is None else (round(kernel_scale, 3),))
    return table


#: Kernel scales the fit tries (see :func:`fit`).
_KERNEL_SCALES = tuple(np.round(np.arange(0.1, 2.0, 0.02), 2))


def choice_losses(results: list[dict], table: dict[str, tuple[float, ...]]) -> list[float]:
    """Per layer, measured time of the algorithm ``table`` would choose / the fastest."""
    losses = []
    for r in results:
        estimate = {name: _estimate_ms(r, name, table.get(name, (1.0, 0.0)))
                    for name in r["raw_ms"]}
        chosen = min(estimate, key=estimate.get)
        losses.append(r["measured_ms"][chosen] / min(r["measured_ms"].values()))
    return losses


def _describe_losses(losses: list[float]) -> str:
    mean = math.exp(sum(map(math.log, losses)) / len(losses))
    return (f"chosen / fastest: geomean {mean:.3f}, worst {max(losses):.2f}; "
            f"{sum(loss > 1.1 for loss in losses)} of {len(losses)} layers lose more than 10%")


def summary(results: list[dict]) -> str:
    ratios: dict[str, list[float]] = {}
    for result in results:
        for name, ms in result["measured_ms"].items():
            raw = result["raw_ms"][name] + _gemm_ms(result, name) + _kernel_ms(result, name)
            ratios.setdefault(name, []).append(ms / raw)
    lines = ["| algorithm | layers | geomean measured/raw estimate | min | max |",
             "|---|---|---|---|---|"]
    for name in kernels.ALGORITHMS:
        values = ratios.get(name)
        if values:
            mean = math.exp(sum(map(math.log, values)) / len(values))
            lines.append(f"| {name} | {len(values)} | {mean:.3g} | {min(values):.3g} "
                         f"| {max(values):.3g} |")
    table = fit(results)
    lines.append("")
    lines.append(f"Current model: {_describe_losses(choice_losses(results, calibration.calibration_table()))}.")
    lines.append(f"Refitted: {_describe_losses(choice_losses(results, table))}, with")
    lines.append("")
    lines.append(f"    calibration of {calibration.machine_class().name} = {{")
    lines.extend(f"        {name!r}: {value!r}," for name, value in table.items())
    lines.append("    }")
    return "\n".join(lines)


def table(result: dict) -> str:
    rows = [f"### {result['layer']}", "", "| algorithm | raw estimate ms | measured ms | |",
            "|---|---|---|---|"]
    for name, ms in sorted(result["measured_ms"].items(), key=lambda item: item[1]):
        marks = ("chosen " if name == result["chosen"] else "") + (
            "fastest" if name == result["fastest"] else "")
        raw = result["raw_ms"][name] + _gemm_ms(result, name) + _kernel_ms(result, name)
        rows.append(f"| {name} | {raw:.3g} | {ms:.3g} | {marks} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="calibration", help="directory for the report")
    parser.add_argument("--layers", default="", help="comma-separated substrings of names")
    parser.add_argument("--random", type=int, default=24, help="random layers to add")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per algorithm")
    parser.add_argument("--refit", metavar="JSON",
                        help="only refit the calibration from an earlier run's calibration.json")
    args = parser.parse_args(argv)
    if args.refit:
        with open(args.refit) as handle:
            print(summary(json.load(handle)["results"]))
        return 0
    layers = [layer for layer in SUITE if layer.dtype == "float32"]
    layers += random_layers(args.random, args.seed)
    if args.layers:
        words = args.layers.split(",")
        layers = [layer for layer in layers if any(w in layer.label for w in words)]
    results = []
    for layer in layers:
        result = calibrate_layer(layer, args.repeat, args.budget)
        results.append(result)
        print(table(result), "\n", flush=True)
    report = summary(results)
    print(report)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "calibration.json"), "w") as handle:
        json.dump({"blas": blas.corename(), "machine": calibration.machine_class().name,
                   "results": results}, handle, indent=1)
    with open(os.path.join(args.out, "calibration.md"), "w") as handle:
        handle.write("\n\n".join(table(r) for r in results) + "\n\n" + report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
