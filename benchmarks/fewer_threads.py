"""Which choice measured planning makes for small layers, how often, and how fast it runs.

    python benchmarks/fewer_threads.py [--plannings 6] [--before OLD/src] [--json PATH]

Each layer is planned ``--plannings`` times afresh (the wisdom forgotten, under
``measure``, on all of the machine's threads); after each planning its chosen
algorithm and thread count are timed in a loop of calls (median of five rounds, each
after a 0.1 s pause).  Prints, per layer, the choices with how often each was made,
the median call time in microseconds and the planning's seconds.  With ``--before``,
the same runs under another build's sources (``OLD/src``) and under this one, in
child processes, alternating which goes first: two builds' planning rules side by
side.  Prints the CPU.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._choose import planning  # noqa: E402

#: (name, data shape, filter shape, stride, pad).
LAYERS = [
    ("small 16->8 8x8 k4 s2 p1", (1, 16, 8, 8), (16, 8, 4, 4), 2, 1),
    ("small 16->16 8x8 k3 s2 p1", (1, 16, 8, 8), (16, 16, 3, 3), 2, 1),
    ("mid 32->16 16x16 k3 s2 p1", (1, 32, 16, 16), (32, 16, 3, 3), 2, 1),
    ("U-Net k2 64->32 24x24", (1, 64, 24, 24), (64, 32, 2, 2), 2, 0),
    ("decoder 128->64 16x16 k4 s2 p1", (1, 128, 16, 16), (128, 64, 4, 4), 2, 1),
    ("decoder N4 256->128 16x16 k4 s2 p1", (4, 256, 16, 16), (256, 128, 4, 4), 2, 1),
]
_PAUSE_SECONDS = 0.1


def _call_us(layer, data) -> float:
    rounds = []
    calls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < 0.002 or calls < 5:
        layer(data)
        calls += 1
    for _ in range(5):
        time.sleep(_PAUSE_SECONDS)
        start = time.perf_counter()
        for _ in range(calls):
            layer(data)
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def run(plannings: int) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for name, data_shape, filter_shape, stride, pad in LAYERS:
        data = rng.standard_normal(data_shape, dtype=np.float32)
        weights = rng.standard_normal(filter_shape, dtype=np.float32)
        picks = []
        for _ in range(plannings):
            ct.forget_wisdom()
            time.sleep(_PAUSE_SECONDS)
            with ct.use_planning("measure"), planning.recording() as choices:
                layer = ct.prepare(ct.onnx_conv_transpose, W=weights, strides=[stride] * 2,
                                   pads=[pad] * 4)
                started = time.perf_counter()
                layer(data)
                seconds = time.perf_counter() - started
            choice = choices[0]
            picks.append({"choice": choice.label, "us": round(_call_us(layer, data), 1),
                          "planning_s": round(seconds, 4)})
        counts = collections.Counter(pick["choice"] for pick in picks)
        rows.append({"layer": name, "picks": picks, "choices": dict(counts),
                     "median_us": round(statistics.median(p["us"] for p in picks), 1),
                     "worst_us": max(p["us"] for p in picks),
                     "median_planning_s": round(statistics.median(
                         p["planning_s"] for p in picks), 4)})
    return rows


def _print(rows: list[dict], label: str = "") -> None:
    for row in rows:
        choices = ", ".join(f"{name} x{count}" for name, count in row["choices"].items())
        print(f"| {label}{row['layer']} | {choices} | {row['median_us']} | {row['worst_us']} "
              f"| {row['median_planning_s']} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plannings", type=int, default=6)
    parser.add_argument("--before", help="another build's src directory to compare with")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        print(json.dumps(run(arguments.plannings)))
        return
    from convtranspose._runtime.machine import cpu_model_name

    print(f"{cpu_model_name()}, {ct.get_num_threads()} threads, float32")
    print("| layer | choices | median us | worst us | planning s |\n|---|---|---|---|---|")
    if arguments.before:
        from prepared_calls import builds_in_turn  # this folder's script

        record = builds_in_turn(__file__, arguments.before, 2,
                                ["--child", "--plannings", str(arguments.plannings)])
        for label, runs in record.items():
            for rows in runs:
                _print(rows, f"{label} ")
    else:
        record = {"rows": run(arguments.plannings)}
        _print(record["rows"])
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), **record}, file, indent=1)


if __name__ == "__main__":
    main()
