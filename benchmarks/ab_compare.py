"""This checkout against another build of the library, layer by layer, in one process.

    python benchmarks/ab_compare.py --baseline /path/to/other/src [--layers WORDS] [--rounds 9]
        [--prepared]

``--baseline`` is the ``src`` folder of another checkout (for example ``git worktree add
/tmp/base <commit>`` and ``/tmp/base/src``); its ``convtranspose`` package is loaded under
another name beside this one.  For every float32/float16/bfloat16 layer of the benchmark
suite (``--quick``: its quick layers; ``--random SEED``: a random suite's layers instead,
or as well with ``--quick``) it prints a Markdown row: the algorithm each build chooses, whether the outputs
are equal, and the median time of each over alternating rounds (each call after a pause
and an untimed call, as the benchmark times; ``--prepared``: through prepared layers, as
``convtranspose bench --prepared``), with the ratio current / baseline and
their geometric mean.  As ``convtranspose bench``, it plans without the stored wisdom and
compiles every candidate's kernels in this process, not in the background, whose
compiling would share the cores with the timed calls.  ``--out FILE`` writes the rows
and the machine as JSON.  Writes nothing else.

``--estimates`` compares instead, number for number, every offered algorithm's estimate
of both builds on every layer (float32 and float64, numba usable or not): a change that
must not move the cost model shows no difference.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

import convtranspose  # noqa: E402
from convtranspose._choose import choice as dispatch  # noqa: E402
from convtranspose._cli import bench as _bench  # noqa: E402
from convtranspose._cli.bench.random_suite import random_layers  # noqa: E402
from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._plan.problem import Problem  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

BASELINE = "convtranspose_baseline"


def load_baseline(source: str):
    """The ``convtranspose`` package under ``source``, imported as :data:`BASELINE`."""
    init = f"{source.rstrip('/')}/convtranspose/__init__.py"
    spec = importlib.util.spec_from_file_location(
        BASELINE, init, submodule_search_locations=[init.rsplit("/", 1)[0]])
    module = importlib.util.module_from_spec(spec)
    sys.modules[BASELINE] = module
    spec.loader.exec_module(module)
    return module


def chosen(library, layer) -> str:
    """The algorithm ``library`` chose for ``layer``'s calls: planning's decision where the
    build records it (measured at the first call), else the estimate's (the current or
    an earlier layout)."""
    arguments = (layer.batch, tuple(_bench.layer_plan_axes(layer)),
                 _bench.kernel_weights_shape(layer))
    result_dtype = None if layer.dtype == "float32" else _bench.numpy_dtype(layer.dtype)
    channels_last = layer.layout == "NXC"
    if library is convtranspose:
        return _bench.algorithm_run(layer)
    try:  # the build's own account of what ran (planning's decision)
        return importlib.import_module(f"{BASELINE}._cli.bench.run").algorithm_run(layer)
    except (ModuleNotFoundError, AttributeError):
        pass
    try:  # the layout with one Problem
        problem_module = importlib.import_module(f"{BASELINE}._plan.problem")
        chooser = importlib.import_module(f"{BASELINE}._choose.choice")
        problem = problem_module.Problem(*arguments, channels_last, np.dtype(np.float32),
                                         result_dtype)
        return chooser.choose(problem).algorithm
    except ModuleNotFoundError:
        pass
    try:
        chooser = importlib.import_module(f"{BASELINE}.dispatch")
    except ModuleNotFoundError:
        chooser = importlib.import_module(f"{BASELINE}._kernel")  # the earlier layout's home
    return chooser.choose_algorithm(*arguments, channels_last=channels_last,
                                    result_dtype=result_dtype)


def _estimates(library, layer, dtype, numba: bool) -> tuple:
    """Every offered algorithm's estimate (ns) for ``layer`` by ``library``."""
    arguments = (layer.batch, tuple(_bench.layer_plan_axes(layer)),
                 _bench.kernel_weights_shape(layer))
    channels_last = layer.layout == "NXC"
    target = library.host_target().replace(numba=numba and library.host_target().numba)
    if library is convtranspose:
        return dispatch.estimates_ns(Problem(*arguments, channels_last, dtype), target)
    try:
        problem_module = importlib.import_module(f"{BASELINE}._plan.problem")
        chooser = importlib.import_module(f"{BASELINE}._choose.choice")
        return chooser.estimates_ns(problem_module.Problem(*arguments, channels_last, dtype),
                                    target)
    except ModuleNotFoundError:
        chooser = importlib.import_module(f"{BASELINE}.dispatch")
        return chooser._estimates(*arguments, channels_last, dtype, None, target)


def compare_estimates(baseline, layers) -> int:
    """Print how many estimate tables of the two builds differ; 1 if any does."""
    tables = differ = 0
    for layer in layers:
        for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
            for numba in (True, False):
                tables += 1
                ours, theirs = (_estimates(library, layer, dtype, numba)
                                for library in (convtranspose, baseline))
                if ours != theirs:
                    differ += 1
                    print(f"{layer.label} {dtype} numba={numba}: {theirs} -> {ours}")
    print(f"{tables} estimate tables compared, {differ} differ")
    return 1 if differ else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the other checkout's src folder")
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--quick", action="store_true",
                        help="only the fixed suite's quick layers")
    parser.add_argument("--random", type=int, action="append", default=[],
                        help="also the layers of this random suite (repeatable)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--pause", type=float, default=_bench.SETTLE_SECONDS)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    parser.add_argument("--prepared", action="store_true",
                        help="call both builds through prepared layers (ct.prepare)")
    parser.add_argument("--current-first", action="store_true",
                        help="time this build before the baseline in each round")
    parser.add_argument("--estimates", action="store_true",
                        help="compare the two builds' estimates instead of timing")
    args = parser.parse_args(argv)
    baseline = load_baseline(args.baseline)
    if args.estimates:
        fixed = args.quick or not args.random
        return compare_estimates(baseline, [layer for layer in _bench.SUITE if fixed] + [
            layer for seed in args.random for layer in random_layers(seed)])
    words = [word for word in args.layers.split(",") if word]
    prepared = args.prepared
    rows = []
    print(f"CPU: {cpu_model_name()}\n")
    print("| layer | baseline algorithm | current algorithm | equal | baseline ms | current ms "
          "| current / baseline |")
    print("|---|---|---|---|---|---|---|")
    fixed = args.quick or not args.random  # --random alone: only the random layers
    layers = [layer for layer in _bench.SUITE if fixed and (layer.quick or not args.quick)]
    for seed in args.random:
        layers += random_layers(seed)
    for layer in layers:
        if words and not any(word in layer.label for word in words):
            continue
        inputs = _bench.make_inputs(layer)
        runs = {"baseline": _bench.run_ours(layer, inputs, library=baseline,
                                            prepared=prepared)[0],
                "current": _bench.run_ours(layer, inputs, prepared=prepared)[0]}
        if args.current_first:  # each round times the builds in this order
            runs = {"current": runs["current"], "baseline": runs["baseline"]}
        outputs = {name: np.asarray(run(), np.float32) for name, run in runs.items()}
        equal = bool(np.array_equal(outputs["baseline"], outputs["current"], equal_nan=True))
        seconds = alternating_rounds(runs, args.rounds, pause=args.pause)
        ms = {name: 1e3 * statistics.median(values) for name, values in seconds.items()}
        row = {"layer": layer.label, "baseline_algorithm": chosen(baseline, layer),
               "current_algorithm": chosen(convtranspose, layer), "equal": equal,
               "baseline_ms": ms["baseline"], "current_ms": ms["current"],
               "ratio": ms["current"] / ms["baseline"]}
        rows.append(row)
        print(f"| {layer.label} | {row['baseline_algorithm']} | {row['current_algorithm']} | "
              f"{'yes' if equal else 'NO'} | {row['baseline_ms']:.3g} | {row['current_ms']:.3g} "
              f"| {row['ratio']:.3f} |", flush=True)
    if not rows:
        return 0
    geomean = math.exp(statistics.fmean(math.log(row["ratio"]) for row in rows))
    same = sum(row["baseline_algorithm"] == row["current_algorithm"] for row in rows)
    print(f"\ncurrent / baseline, geometric mean {geomean:.3f} (worst "
          f"{max(row['ratio'] for row in rows):.3f}, best {min(row['ratio'] for row in rows):.3f});"
          f" the same algorithm on {same} of {len(rows)} layers; "
          f"{sum(row['equal'] for row in rows)} of {len(rows)} outputs equal")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"machine": cpu_model_name(), "rounds": args.rounds, "pause_s": args.pause,
                       "prepared": prepared,
                       "geometric_mean_ratio": geomean, "rows": rows}, handle, indent=1)
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
