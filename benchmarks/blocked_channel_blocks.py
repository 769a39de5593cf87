"""``direct-blocked`` summing input channels in blocks of several sizes, and in one.

    python benchmarks/blocked_channel_blocks.py [--layers WORDS] [--random SEED] [--rounds 7]
                                                [--out FILE]

For the float32 layers of the benchmark suite (and of the random suites given by
``--random``) of one group, times ``direct-blocked`` with the weights of a block of
input channels held to several shares of the L1 data cache
(:data:`convtranspose._kernels.schedules.BLOCKED_PANEL_L1_SHARE`; ``whole``: every
input channel at once, as before channel blocks), in alternating rounds, each call
after a pause and an untimed call as the benchmark times, on two threads and on one.
Prints a Markdown row per layer; ``--out`` writes them as JSON with the CPU and its
L1 size.  Backs ``BLOCKED_PANEL_L1_SHARE``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import convtranspose as ct
from convtranspose._cli import bench as _bench
from convtranspose._cli.bench.peers import run_ours
from convtranspose._cli.bench.random_suite import random_layers
from convtranspose._cli.bench.run import alternating_rounds
from convtranspose._kernels import schedules
from convtranspose._runtime.machine import cpu_model_name, l1_data_cache_bytes

SHARES = {"0.25": 0.25, "0.5": 0.5, "1": 1.0, "2": 2.0, "whole": float("inf")}


def _runner(run, share: float):
    def call():
        saved = schedules.BLOCKED_PANEL_L1_SHARE
        schedules.BLOCKED_PANEL_L1_SHARE = share
        try:
            run()
        finally:
            schedules.BLOCKED_PANEL_L1_SHARE = saved
    return call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--random", type=int, action="append", default=[],
                        help="also the layers of this random suite (repeatable)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    os.environ["CONVTRANSPOSE_ALGORITHM"] = "direct-blocked"
    words = [word for word in args.layers.split(",") if word]
    layers = [layer for layer in _bench.SUITE if layer.dtype == "float32"]
    for seed in args.random:
        layers += random_layers(seed)
    rows = []
    print(f"CPU: {cpu_model_name()}, L1 data {l1_data_cache_bytes() >> 10} KiB\n")
    print("| layer | threads | " + " | ".join(f"share {name} ms" for name in SHARES)
          + " | fastest |")
    print("|---|---|" + "---|" * (len(SHARES) + 1))
    for layer in layers:
        if words and not any(word in layer.label for word in words) or layer.groups != 1:
            continue
        run, _ = run_ours(layer, _bench.make_inputs(layer), reuse_output=True)
        for threads in (2, 1):
            with ct.num_threads(threads):
                runners = {name: _runner(run, share) for name, share in SHARES.items()}
                samples = alternating_rounds(runners, args.rounds, warmup=1)
            ms = {name: statistics.median(times) * 1e3 for name, times in samples.items()}
            fastest = min(ms, key=ms.get)
            print(f"| {layer.label} | {threads} | "
                  + " | ".join(f"{ms[name]:.3g}" for name in SHARES) + f" | {fastest} |",
                  flush=True)
            rows.append({"layer": layer.label, "threads": threads,
                         "ms_by_share": {name: round(value, 3) for name, value in ms.items()}})
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"machine": cpu_model_name(), "l1_data_bytes": l1_data_cache_bytes(),
                       "share": schedules.BLOCKED_PANEL_L1_SHARE, "rows": rows},
                      handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
