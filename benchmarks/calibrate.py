"""How much time the cost model's estimate alone loses against measured planning, here.

For every layer of the fixed suite (``--quick``: its quick part), this script lets each
planning level decide afresh (no wisdom kept: ``CONVTRANSPOSE_WISDOM=off``, forgotten
between levels) and times the steady-state call of the algorithm each level chose:

    loss = time of the ``estimate`` choice / time of the ``exhaustive`` choice

A loss of 1.00 means the estimate already picked the fastest algorithm.  The report
(text and JSON) names the CPU; nothing in the library is fitted to it.

    python benchmarks/calibrate.py --quick --out calibration
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._choose import planning  # noqa: E402
from convtranspose._cli.bench.peers import run_ours  # noqa: E402
from convtranspose._cli.bench.suite import SUITE, make_inputs  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402


def steady_ms(call, repeat: int) -> float:
    """The fastest of ``repeat`` timed calls after two untimed ones (milliseconds)."""
    call()
    call()
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def level_result(layer, inputs, level: str, repeat: int) -> dict:
    """The algorithm ``level`` chooses for ``layer`` and its steady-state time."""
    ct.forget_wisdom()
    with ct.use_planning(level), planning.recording() as choices:
        call, _ = run_ours(layer, inputs, reuse_output=True)
        started = time.perf_counter()
        call()
        first_ms = (time.perf_counter() - started) * 1e3
        ms = steady_ms(call, repeat)
    runs = choices[0].runs if choices else "?"
    return {"algorithm": runs, "ms": ms, "first_call_ms": first_ms}


def geomean(values) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick part of the suite")
    parser.add_argument("--layers", default="", help="comma-separated substrings of names")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per choice")
    parser.add_argument("--out", default="calibration", help="directory for the report")
    args = parser.parse_args(argv)
    words = [w for w in args.layers.split(",") if w]
    layers = [layer for layer in SUITE if (layer.quick or not args.quick)
              and (not words or any(w in layer.label for w in words))]
    rows = []
    for layer in layers:
        inputs = make_inputs(layer)
        estimate = level_result(layer, inputs, "estimate", args.repeat)
        measured = level_result(layer, inputs, "exhaustive", args.repeat)
        loss = estimate["ms"] / measured["ms"] if estimate["algorithm"] != measured[
            "algorithm"] else 1.0
        rows.append({"layer": layer.label, "estimate": estimate, "exhaustive": measured,
                     "loss": loss})
        print(f"{layer.label:<48} estimate {estimate['algorithm']:<15} {estimate['ms']:8.3f} ms"
              f"  measured {measured['algorithm']:<15} {measured['ms']:8.3f} ms  loss"
              f" {loss:.2f}  (planning {measured['first_call_ms']:.0f} ms)", flush=True)
    summary = (f"{cpu_model_name()}: estimate loses {geomean([r['loss'] for r in rows]):.3f}x"
               f" (geometric mean over {len(rows)} layers), worst "
               f"{max((r['loss'] for r in rows), default=math.nan):.2f}x")
    print(summary)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "calibration.json"), "w") as handle:
        json.dump({"cpu": cpu_model_name(), "numpy": np.__version__, "summary": summary,
                   "layers": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
