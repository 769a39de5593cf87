"""``direct-blocked`` on grouped layers at each vector width, alternating in one process.

    python benchmarks/narrow_groups.py [--rounds 5] [--layers WORDS] [--out FILE]

Grouped channels-last layers of 4 to 40 output channels per group, computed by
``direct-blocked`` (forced) at 64-, 32- and 16-byte vectors (the widths this CPU runs;
LLVM splits vectors wider than the host's), every width's call in turn per round.  The
width rule (``blocked_groups.blocked_vector_bytes``) is switched off for the timing, so
that each column is the width it names; the ``rule`` column gives the width the rule
picks.  Prints the median milliseconds per call and the CPU; ``--out`` writes them as
JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import timeit

import numpy as np

from convtranspose._cli import bench
from convtranspose._cli.bench.suite import Layer
from convtranspose._kernels._numba import blocked
from convtranspose._kernels.blocked_groups import blocked_vector_bytes
from convtranspose._runtime.machine import cpu_model_name, vector_bytes
from convtranspose._runtime.target import host, use_target

#: (batch, channels, spatial, kernel, stride, pad, output padding, groups, layout).
LAYERS = [
    (16, 32, (7, 7), 3, 2, 1, 1, 4, "NXC"),  # 8 per group
    (16, 32, (7, 7), 3, 2, 1, 1, 4, "NCX"),
    (4, 64, (14, 14), 4, 2, 1, 0, 8, "NXC"),
    (8, 64, (256,), 4, 2, 1, 0, 8, "NXC"),
    (8, 16, (14, 14), 3, 1, 1, 0, 4, "NXC"),  # 4 per group
    (8, 48, (14, 14), 4, 2, 1, 0, 4, "NXC"),  # 12
    (8, 80, (14, 14), 3, 2, 1, 1, 4, "NXC"),  # 20
    (2, 96, (28, 28), 3, 2, 1, 1, 4, "NXC"),  # 24
    (4, 48, (28, 28), 4, 2, 1, 0, 2, "NXC"),  # 24, two groups
    (4, 160, (14, 14), 4, 2, 1, 0, 4, "NXC"),  # 40
]


def _layer(batch, channels, spatial, kernel, stride, pad, extra, groups, layout) -> Layer:
    sizes = "x".join(map(str, spatial)) if len(spatial) > 1 else f"L{spatial[0]}"
    name = (f"grouped N{batch} {channels}->{channels} {sizes} k{kernel} s{stride} p{pad}"
            + (f" op{extra}" if extra else "") + f" g{groups} ({channels // groups} a group)")
    return Layer(name, batch, channels, channels, spatial, kernel, stride, pad, 1, extra,
                 groups, layout)


def _rule_width(layer: Layer) -> int:
    return blocked_vector_bytes(layer.groups, layer.out_channels // layer.groups, 4,
                                bench.layer_plan_axes(layer)[-1], vector_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--out")
    options = parser.parse_args(argv)
    widths = [w for w in (64, 32, 16) if w <= vector_bytes()]
    words = [word for word in options.layers.split(",") if word]
    layers = [layer for layer in map(lambda row: _layer(*row), LAYERS)
              if not words or any(word in layer.label for word in words)]
    print("| layer | rule | " + " | ".join(f"{w} B ms" for w in widths) + " |")
    print("|---|---|" + "---|" * len(widths))
    forced = os.environ.get("CONVTRANSPOSE_ALGORITHM")
    os.environ["CONVTRANSPOSE_ALGORITHM"] = "direct-blocked"
    blocked.blocked_vector_bytes = lambda *arguments: arguments[-1]  # each width as named
    try:
        rows = [_row(layer, widths, options.rounds) for layer in layers]
    finally:
        blocked.blocked_vector_bytes = blocked_vector_bytes
        if forced is None:
            del os.environ["CONVTRANSPOSE_ALGORITHM"]
        else:
            os.environ["CONVTRANSPOSE_ALGORITHM"] = forced
    print(f"CPU: {cpu_model_name()}")
    if options.out:
        with open(options.out, "w", encoding="utf-8") as file:
            json.dump({"machine": cpu_model_name(), "rounds": options.rounds, "rows": rows},
                      file, indent=1)
    return 0


def _row(layer: Layer, widths: list[int], rounds: int) -> dict:
    """Time ``layer`` at each width (alternating), print its row, return it."""
    inputs = bench.make_inputs(layer)
    calls, times, first = {}, {w: [] for w in widths}, None
    for width in widths:
        with use_target(host().replace(vector_bytes=width)):
            calls[width] = bench.run_ours(layer, inputs)[0]
            result = np.asarray(calls[width](), np.float64)
        first = result if first is None else first
        np.testing.assert_allclose(result, first, rtol=1e-4, atol=1e-4)
    for _ in range(rounds):
        for width in widths:
            with use_target(host().replace(vector_bytes=width)):
                times[width].append(min(timeit.repeat(calls[width], number=20,
                                                      repeat=3)) / 20 * 1e3)
    medians = {w: statistics.median(t) for w, t in times.items()}
    print(f"| {layer.label} | {_rule_width(layer)} B | "
          + " | ".join(f"{medians[w]:.3f}" for w in widths) + " |")
    return {"layer": layer.label, "rule_bytes": _rule_width(layer),
            "ms_by_vector_bytes": medians}


if __name__ == "__main__":
    raise SystemExit(main())
