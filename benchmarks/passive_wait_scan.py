"""Layers slower back to back than with OpenMP's passive wait: threads that share a CPU.

    python benchmarks/passive_wait_scan.py [--random SEED ...] [--runs 2] [--out FILE]

After a native loop, numba's GNU OpenMP workers wait spinning for a while; any other
thread the library wakes then (its pool's helpers, OpenBLAS's workers) can land on a
spinning worker's CPU and run at half speed.  With ``OMP_WAIT_POLICY=passive`` the
workers sleep at once, so a layer that runs faster back to back with it has such a
hand-over.  Every float32 layer of the fixed quick suite (and of each ``--random``
suite) runs through the benchmark's own call in child processes: first one untimed
child that plans and compiles them all (its choices kept as wisdom, as a user's
process would), then ``--runs`` children of each wait, alternating.  A child times 9
calls back to back after 3 untimed ones.  Prints a Markdown table of the medians'
least over the children, sorted by default / passive, with the algorithm each ran;
``--out`` writes the rows and the CPU as JSON.  Writes nothing else but the wisdom and
compiled kernels of the library's cache folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from convtranspose._runtime.machine import cpu_model_name

_CHILD = """
import json, statistics, sys, time
from convtranspose._cli import bench
layers = [layer for layer in bench.SUITE if layer.quick]
for seed in map(int, sys.argv[1:]):
    layers += list(bench.random_layers(seed))
rows = {}
for layer in layers:
    if layer.dtype != "float32":
        continue
    run, _ = bench.run_ours(layer, bench.make_inputs(layer))
    for _ in range(3):
        run()
    times = []
    for _ in range(9):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    rows[layer.label] = [statistics.median(times) * 1e3, bench.algorithm_run(layer)]
print(json.dumps(rows))
"""


def _child(seeds: list[int], passive: bool) -> dict:
    environment = dict(os.environ)
    if passive:
        environment["OMP_WAIT_POLICY"] = "passive"
    result = subprocess.run([sys.executable, "-c", _CHILD, *map(str, seeds)],
                            env=environment, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, action="append", default=[],
                        help="also the layers of this random suite (repeatable)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", help="write the rows and the CPU's name to this JSON file")
    args = parser.parse_args(argv)
    _child(args.random, False)  # plans and compiles every layer
    runs: dict = {False: [], True: []}
    for _ in range(args.runs):
        for passive in (False, True):
            runs[passive].append(_child(args.random, passive))
    rows = []
    for label in runs[False][0]:
        default = min(run[label][0] for run in runs[False])
        passive = min(run[label][0] for run in runs[True])
        algorithms = sorted({run[label][1] for kind in runs.values() for run in kind})
        rows.append({"layer": label, "algorithms": algorithms, "default_ms": round(default, 3),
                     "passive_ms": round(passive, 3),
                     "default_over_passive": round(default / passive, 2)})
    rows.sort(key=lambda row: -row["default_over_passive"])
    print(f"CPU: {cpu_model_name()}; ms back to back, least of {args.runs} children's medians\n")
    print("| layer | algorithm | default wait | passive wait | default / passive |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['layer']} | {', '.join(row['algorithms'])} | {row['default_ms']} | "
              f"{row['passive_ms']} | {row['default_over_passive']} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "runs": args.runs, "rows": rows}, file,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
