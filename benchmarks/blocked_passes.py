"""``direct-blocked`` in passes over output channels against other pass counts.

    python benchmarks/blocked_passes.py [--layers WORDS] [--rounds 7] [--out FILE]
                                        [--channel-blocks]

For the float32 layers of the benchmark suite (and the random suites' large-filter
layers given by ``--random SEED``) whose weights per output line exceed the L2 share of
:data:`convtranspose._kernels.blocked_channels.BLOCKED_LINE_WEIGHTS_L2_SHARE`, times
``direct-blocked`` at several shares (so several pass counts) in alternating rounds,
each call after a pause and an untimed call as the benchmark times, on two threads and
on one.  Prints a Markdown row per layer and share; ``--out`` writes them as JSON with
the CPU and its L2 size.  Backs ``BLOCKED_LINE_WEIGHTS_L2_SHARE``.

``--channel-blocks`` times instead the input-channel blocks of every float32 layer of one
group: their weights held to several shares of the L1 data cache
(``BLOCKED_PANEL_L1_SHARE``; ``whole``: every input channel at once, as before channel
blocks), with the L1 size in the JSON.  Backs ``BLOCKED_PANEL_L1_SHARE``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

import convtranspose as ct
from convtranspose._cli import bench as _bench
from convtranspose._cli.bench.peers import run_ours
from convtranspose._cli.bench.random_suite import random_layers
from convtranspose._cli.bench.run import alternating_rounds
from convtranspose._kernels import blocked_channels
from convtranspose._plan.geometry import three_axes
from convtranspose._runtime.machine import cpu_model_name, l1_data_cache_bytes, l2_cache_bytes

SHARES = (4.0, 1.0, 0.5, 0.25, 0.125)


@contextlib.contextmanager
def _setting(name: str, value: float):
    """``blocked_channels.<name>`` set to ``value`` inside the block (restored after)."""
    saved = getattr(blocked_channels, name)
    setattr(blocked_channels, name, value)
    try:
        yield
    finally:
        setattr(blocked_channels, name, saved)


def _passes(layer, share: float) -> int:
    axes3 = three_axes(tuple(_bench.layer_plan_axes(layer)))
    with _setting("BLOCKED_LINE_WEIGHTS_L2_SHARE", share):
        lanes = ct.host_target().vector_bytes // 4
        return blocked_channels.blocked_channel_passes(
            layer.in_channels, layer.out_channels, axes3, 4, lanes, l2_cache_bytes())


#: ``--channel-blocks``: shares of the L1 data cache, by the label the table shows.
CHANNEL_SHARES = {"0.25": 0.25, "0.5": 0.5, "1": 1.0, "2": 2.0, "whole": float("inf")}


def _runner(run, setting: str, value: float):
    """``run`` with ``blocked_channels.<setting>`` set to ``value`` (restored afterwards)."""
    def call():
        with _setting(setting, value):
            run()
    return call


def _channel_block_rows(layer, run, rounds: int) -> list[dict]:
    rows = []
    for threads in (2, 1):
        with ct.num_threads(threads):
            runners = {name: _runner(run, "BLOCKED_PANEL_L1_SHARE", share)
                       for name, share in CHANNEL_SHARES.items()}
            samples = alternating_rounds(runners, rounds, warmup=1)
        ms = {name: statistics.median(times) * 1e3 for name, times in samples.items()}
        cells = ", ".join(f"{name}: {value:.3g}" for name, value in ms.items())
        print(f"| {layer.label} | {threads} | {cells} | {min(ms, key=ms.get)} |", flush=True)
        rows.append({"layer": layer.label, "threads": threads,
                     "ms_by_share": {name: round(value, 3) for name, value in ms.items()}})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--random", type=int, action="append", default=[],
                        help="also the layers of this random suite (repeatable)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    parser.add_argument("--channel-blocks", action="store_true",
                        help="time the input-channel blocks' L1 shares instead")
    args = parser.parse_args(argv)
    os.environ["CONVTRANSPOSE_ALGORITHM"] = "direct-blocked"
    words = [word for word in args.layers.split(",") if word]
    layers = [layer for layer in _bench.SUITE if layer.dtype == "float32"]
    for seed in args.random:
        layers += random_layers(seed)
    rows = []
    print(f"CPU: {cpu_model_name()}, L1 data {l1_data_cache_bytes() >> 10} KiB,"
          f" L2 {l2_cache_bytes() >> 10} KiB\n")
    print(f"| layer | threads | {'share' if args.channel_blocks else 'passes'}: ms ... |"
          " fastest |")
    print("|---|---|---|---|")
    for layer in layers:
        if words and not any(word in layer.label for word in words):
            continue
        if layer.groups != 1:
            continue
        if args.channel_blocks:
            rows += _channel_block_rows(
                layer, run_ours(layer, _bench.make_inputs(layer), reuse_output=True)[0],
                args.rounds)
            continue
        counts = {}
        for share in SHARES:
            counts.setdefault(_passes(layer, share), share)
        if len(counts) < 2:
            continue
        run, _ = run_ours(layer, _bench.make_inputs(layer), reuse_output=True)
        for threads in (2, 1):
            with ct.num_threads(threads):
                runners = {count: _runner(run, "BLOCKED_LINE_WEIGHTS_L2_SHARE", share)
                           for count, share in counts.items()}
                samples = alternating_rounds(runners, args.rounds, warmup=1)
            ms = {count: statistics.median(times) * 1e3 for count, times in samples.items()}
            fastest = min(ms, key=ms.get)
            rule = _passes(layer, blocked_channels.BLOCKED_LINE_WEIGHTS_L2_SHARE)
            cells = ", ".join(f"{count}{'*' if count == rule else ''}: {value:.3g}"
                              for count, value in sorted(ms.items()))
            print(f"| {layer.label} | {threads} | {cells} | {fastest} |", flush=True)
            rows.append({"layer": layer.label, "threads": threads, "rule_passes": rule,
                         "ms_by_passes": {str(k): round(v, 3) for k, v in ms.items()}})
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"machine": cpu_model_name(), "l1_data_bytes": l1_data_cache_bytes(),
                       "l2_bytes": l2_cache_bytes(),
                       "share": blocked_channels.BLOCKED_PANEL_L1_SHARE if args.channel_blocks
                       else blocked_channels.BLOCKED_LINE_WEIGHTS_L2_SHARE, "rows": rows},
                      handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
