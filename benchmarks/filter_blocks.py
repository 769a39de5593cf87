"""The filter gradient's register blocks (``blocked``'s filter adjoint) by block shape.

    python benchmarks/filter_blocks.py [--repeats 7] [--json PATH]

For layers of 8 to 64 output channels per group, float32, channels first, on the
machine's threads: :func:`convtranspose._kernels._numba.blocked_filter.blocked_filter_adjoint`
with each block shape ``rows x vectors`` (input channels x vectors of output channels)
that fits the machine's vector registers beside its ``grad`` vectors and a broadcast,
alternating round by round; medians in ms, each shape's time over the fastest one's, and
the shape the library takes.  Every shape's result is checked against the library's.
Prints the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")

import numpy as np  # noqa: E402

from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._kernels._numba import blocked_filter  # noqa: E402
from convtranspose._plan.rules import AxisPlan  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose._runtime.target import host  # noqa: E402

# (name, batch, groups, input channels a group, output channels a group, size, kernel)
LAYERS = [
    ("g8 256->256 28x28 k3 N4", 4, 8, 32, 32, 28, 3),
    ("g16 128->128 28x28 k3 N4", 4, 16, 8, 8, 28, 3),
    ("g4 64->64 56x56 k3 N2", 2, 4, 16, 16, 56, 3),
    ("64->64 56x56 k3 N1", 1, 1, 64, 64, 56, 3),
]


def _shapes(whole: int, registers: int) -> list[tuple[int, int]]:
    """``(rows, vectors)`` blocks whose vectors divide ``whole`` and whose accumulators,
    ``grad`` vectors and broadcast fit ``registers``."""
    return [(rows, vectors) for vectors in (1, 2, 3, 4) if whole % vectors == 0
            for rows in (2, 3, 4, 6, 8, 12, 14)
            if rows * vectors + vectors + 1 <= registers]


def _row(layer, target, repeats: int) -> dict:
    name, batch, groups, ci, co, size, kernel = layer
    rng = np.random.default_rng(0)
    data = rng.standard_normal((batch, groups * ci, size, size)).astype(np.float32)
    grad = rng.standard_normal((batch, groups * co, size, size)).astype(np.float32)
    axes = (AxisPlan(size, kernel, 1, 1, kernel // 2, size),) * 2
    lanes = target.lanes(np.float32)
    chosen = blocked_filter.block_shape(co, lanes, target.vector_bytes)
    registers = 32 if target.vector_bytes == 64 else 16

    def run(shape):
        rule = blocked_filter.block_shape
        blocked_filter.block_shape = lambda *_: shape
        try:
            return blocked_filter.blocked_filter_adjoint(data, grad, axes, groups, False,
                                                         np.float32, target)
        finally:
            blocked_filter.block_shape = rule

    reference = run(chosen)
    shapes = _shapes(co // lanes, registers)
    for shape in shapes:
        np.testing.assert_allclose(run(shape), reference, rtol=1e-4, atol=1e-3)
    samples = alternating_rounds({shape: (lambda shape=shape: run(shape)) for shape in shapes},
                                 repeats, pause=0.0)
    ms = {shape: statistics.median(values) * 1e3 for shape, values in samples.items()}
    best = min(ms.values())
    print(f"{name:28s} chosen {chosen[0]}x{chosen[1]}: "
          + "  ".join(f"{r}x{v} {t:6.2f} ({t / best:.2f})" for (r, v), t in ms.items()),
          flush=True)
    return dict(layer=name, chosen=f"{chosen[0]}x{chosen[1]}",
                ms={f"{r}x{v}": round(t, 3) for (r, v), t in ms.items()},
                chosen_over_fastest=round(ms[chosen] / best, 3) if chosen in ms else None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="write the rows and the CPU's name to this file")
    options = parser.parse_args(argv)
    target = host()
    print(f"{cpu_model_name()}, {target.threads} threads, {target.vector_bytes}-byte vectors;"
          " ms (median), in brackets over the fastest shape; blocks rows x vectors")
    rows = [_row(layer, target, options.repeats) for layer in LAYERS]
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "threads": target.threads,
                       "vector_bytes": target.vector_bytes, "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
