"""Every offered algorithm's estimate beside its measured time, per layer, on this machine.

For each layer of a suite (the fixed one, ``--quick`` its quick part, or ``--random
SEED``), exhaustive planning times every applicable algorithm on the layer's operands
(alternating rounds, :mod:`convtranspose._choose.measure`), and the cost model's
estimate of each is recorded with its parts (passes, BLAS, numba multiply-adds).  The
JSON report is the evidence the estimate's per-machine figures are judged on:

    loss = time of the estimate's first choice / time of the fastest measured

    python benchmarks/estimate_errors.py --random 1 --out results

``--reprice REPORT...`` keeps each report's measured times and records the raw
estimates the cost model gives now (a changed model judged on the same measurements;
the reports must come from this machine, whose figures the estimates read).  It writes
``<report>-repriced.json`` beside the other outputs and prints both models' losses.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from types import SimpleNamespace

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._choose import choice as dispatch  # noqa: E402
from convtranspose._choose import planning, wisdom  # noqa: E402
from convtranspose._choose.candidates import candidate_names  # noqa: E402
from convtranspose._choose.figures import fma_gflops, forget_figures, machine_figures  # noqa: E402
from convtranspose._cli.bench.peers import run_ours  # noqa: E402
from convtranspose._cli.bench.random_suite import random_layers  # noqa: E402
from convtranspose._cli.bench.suite import SUITE, make_inputs, numpy_dtype  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose._runtime.target import host  # noqa: E402


def _recording_raw_estimates(store: list):
    """Wrap the cost model's raw estimates so that each problem's parts are kept."""
    original = dispatch.raw_estimates

    def wrapped(*args, **kwargs):
        costs = original(*args, **kwargs)
        store.append({name: {"scaled": c.scaled, "gemm": c.gemm, "kernel": c.kernel}
                      for name, c in costs.items()})
        return costs

    dispatch.raw_estimates = wrapped
    return original


def _planned_once(layer, level: str, figures: dict | None = None):
    """Plan and run ``layer`` once at planning ``level`` from no wisdom (but the machine
    ``figures``, where given): its planning decision, the raw estimates of its last
    estimate and the call's time (ms)."""
    inputs = make_inputs(layer)
    raw: list = []
    original = _recording_raw_estimates(raw)
    try:
        ct.forget_wisdom()
        if figures:
            wisdom.store.record("figures", "machine", dict(figures))
            forget_figures()
        dispatch.forget_estimates()
        with ct.use_planning(level), planning.recording() as choices:
            call, _ = run_ours(layer, inputs, reuse_output=True)
            started = time.perf_counter()
            call()
            planning_ms = (time.perf_counter() - started) * 1e3
    finally:
        dispatch.raw_estimates = original
    return choices[-1], (raw[-1] if raw else {}), planning_ms


def layer_row(layer) -> dict:
    """Estimates and measured times of every algorithm for ``layer``."""
    choice, raw, planning_ms = _planned_once(layer, "exhaustive")
    measured = dict(choice.measured)
    estimated = dict(choice.estimates)
    best = min(measured.values())
    first = choice.estimates[0][0]
    loss = measured.get(first, math.nan) / best
    return {"layer": layer.label, "estimates_ns": estimated, "measured_ns": measured,
            "raw": raw, "estimate_first": first,
            "fastest": min(measured, key=measured.get), "loss": loss,
            "planning_ms": planning_ms}


def geomean(values) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def _first_choice_loss(row: dict) -> float:
    """The loss of the estimate's first choice for one report row."""
    estimates, measured = row["estimates_ns"], row["measured_ns"]
    return measured[min(estimates, key=estimates.get)] / min(measured.values())


def _timed_loss(row: dict, layer) -> float:
    """The loss of measured planning (level ``measure``) by this row's estimates: the
    fastest of the candidates it would time (with their runs on fewer threads) over the
    fastest measured (algorithms since removed from the registry are not candidates)."""
    estimates, measured = row["estimates_ns"], row["measured_ns"]
    known = {name: ns for name, ns in estimates.items() if name in ct.ALGORITHMS}
    ranked = SimpleNamespace(estimates=sorted(known.items(), key=lambda item: item[1]))
    timed = candidate_names(ranked, "measure", np.dtype(numpy_dtype(layer.dtype)),
                            layer.rank, layer.layout == "NXC", host())
    return min(ns for label, ns in measured.items()
               if label.split("@")[0] in timed) / min(measured.values())


def _suite_layers(suite: str) -> dict:
    """Label -> layer of a report's suite (``fixed`` or ``random-SEED``)."""
    layers = random_layers(int(suite.split("-")[1])) if suite.startswith("random-") else SUITE
    return {layer.label: layer for layer in layers}


def reprice(paths: list[str], out: str) -> None:
    """Write each report again with the raw estimates of the cost model as it is now
    beside the measured times, and print the first choice's loss under either model."""
    os.makedirs(out, exist_ok=True)
    for path in paths:
        report = json.load(open(path))
        if report["cpu"] != cpu_model_name():
            print(f"warning: {path} was measured on {report['cpu']}, not on this"
                  f" {cpu_model_name()}: the estimates read this machine's figures")
        layers = _suite_layers(report["suite"])
        before = [_first_choice_loss(row) for row in report["layers"]]
        timed_before = [_timed_loss(row, layers[row["layer"]]) for row in report["layers"]]
        for row in report["layers"]:
            choice, raw, _ = _planned_once(layers[row["layer"]], "estimate",
                                           report["figures"])
            row["raw"] = {name: parts for name, parts in raw.items()
                          if name in row["measured_ns"]}
            row["estimates_ns"] = {name: ns for name, ns in dict(choice.estimates).items()
                                   if name in row["measured_ns"]}
            row["estimate_first"] = min(row["estimates_ns"], key=row["estimates_ns"].get)
            row["loss"] = _first_choice_loss(row)
            row["timed_loss"] = _timed_loss(row, layers[row["layer"]])
        after = [row["loss"] for row in report["layers"]]
        timed_after = [row["timed_loss"] for row in report["layers"]]
        report["figures"] = dict(machine_figures(), fma_gflops=fma_gflops())
        report["summary"] = (f"{report['cpu']}: repriced, the estimate's first choice loses"
                             f" {geomean(after):.3f}x (was {geomean(before):.3f}x; worst"
                             f" {max(after):.2f}x, was {max(before):.2f}x); measured"
                             f" planning's choice loses {geomean(timed_after):.3f}x (was"
                             f" {geomean(timed_before):.3f}x; worst {max(timed_after):.2f}x,"
                             f" was {max(timed_before):.2f}x)")
        print(report["suite"], report["summary"])
        name = os.path.splitext(os.path.basename(path))[0] + "-repriced.json"
        with open(os.path.join(out, name), "w") as handle:
            json.dump(report, handle, indent=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the fixed suite's quick part")
    parser.add_argument("--random", type=int, default=None, metavar="SEED",
                        help="the random suite of this seed instead of the fixed one")
    parser.add_argument("--layers", default="", help="comma-separated substrings of names")
    parser.add_argument("--out", default=".", help="directory for estimate-errors-*.json")
    parser.add_argument("--reprice", nargs="+", metavar="REPORT",
                        help="record the current model's estimates beside these reports'"
                             " measured times")
    args = parser.parse_args(argv)
    if args.reprice:
        reprice(args.reprice, args.out)
        return 0
    layers = (random_layers(args.random) if args.random is not None
              else [layer for layer in SUITE if layer.quick or not args.quick])
    words = [w for w in args.layers.split(",") if w]
    layers = [layer for layer in layers if not words or any(w in layer.label for w in words)]
    figures = dict(machine_figures(), fma_gflops=fma_gflops())
    rows = []
    for layer in layers:
        row = layer_row(layer)
        rows.append(row)
        print(f"{row['layer'][:60]:<60} est {row['estimate_first']:<15} fastest"
              f" {row['fastest']:<15} {min(row['measured_ns'].values()) / 1e6:8.3f} ms"
              f"  loss {row['loss']:.2f}", flush=True)
    summary = (f"{cpu_model_name()}: the estimate's first choice loses "
               f"{geomean([r['loss'] for r in rows]):.3f}x (geometric mean over {len(rows)}"
               f" layers), worst {max((r['loss'] for r in rows), default=math.nan):.2f}x")
    print(summary)
    suite = f"random-{args.random}" if args.random is not None else "fixed"
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"estimate-errors-{suite}.json")
    with open(path, "w") as handle:
        json.dump({"cpu": cpu_model_name(), "numpy": np.__version__, "figures": figures,
                   "suite": suite, "summary": summary, "layers": rows}, handle, indent=1)
    print("written", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
