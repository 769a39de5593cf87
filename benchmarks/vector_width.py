"""Kernels whose loops LLVM vectorises, timed in this source tree and in another one.

For the full-width kernels (``src/convtranspose/_kernels/_numba/full_width.py``): the
float16 and bfloat16 casts, the col2im scatter and the per-position channels-last
kernel, one thread, operands that fit in L2.  Each tree runs in its own processes,
alternating (``--rounds`` each); a kernel's time is its smallest median over them.
Prints a table; ``--out FILE`` also writes the figures as JSON.  Needs numba.

    python benchmarks/vector_width.py --before /path/to/old/src --out result.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

#: Elements per cast: 1 MiB of float32, in L2.
CAST_ELEMENTS = 1 << 18


def _median_ms(call, calls: int = 30) -> float:
    call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _casts():
    import numpy as np

    from convtranspose._kernels._numba import casts

    rng = np.random.default_rng(0)
    wide = rng.standard_normal(CAST_ELEMENTS).astype(np.float32)
    half = wide.astype(np.float16).view(np.uint16)
    bits = np.empty(CAST_ELEMENTS, np.uint16)
    values, words = np.empty(CAST_ELEMENTS, np.float32), np.empty(CAST_ELEMENTS, np.uint32)
    n = CAST_ELEMENTS
    return {"narrow_float16 256K": lambda: casts.narrow_float16(wide, bits, 0, n),
            "widen_float16 256K": lambda: casts.widen_float16(half, values, 0, n),
            "narrow_bfloat16 256K": lambda: casts.narrow_bfloat16(wide, bits, 0, n),
            "widen_bfloat16 256K": lambda: casts.widen_bfloat16(bits, words, 0, n)}


def _layers(target):
    import numpy as np

    from convtranspose._kernels._numba import channels_last, scatter
    from convtranspose._plan.geometry import three_axes
    from convtranspose._plan.rules import AxisPlan

    rng = np.random.default_rng(1)
    axes = (AxisPlan(32, 4, 2, 1, 0, 66),) * 2
    columns = rng.standard_normal((1, 1, 32, 32, 4, 4, 8), dtype=np.float32)
    out = np.zeros((1, 1, 66, 66, 8), np.float32)
    axes3 = (AxisPlan(32, 3, 2, 1, 1, 63),) * 2
    data = rng.standard_normal((1, 32, 32, 128), dtype=np.float32)
    weights = rng.standard_normal((64, 2, 2, 3, 3), dtype=np.float32)
    result = np.empty((1, 63, 63, 128), np.float32)
    return {
        "col2im scatter 32x32 k4 s2 Co8":
            lambda: scatter.col2im_scatter(columns, out, out, axes, target),
        "per-position g64 2->2 32x32 k3 s2":
            lambda: channels_last.direct_channels_last(
                data, weights, three_axes(axes3), np.float32, result, target, 1)}


def measure() -> dict[str, float]:
    """Each kernel's median time in ms, in this process's source tree."""
    import convtranspose as ct

    target = ct.host_target().replace(threads=1)
    calls = {**_casts(), **_layers(target)}
    return {name: _median_ms(call) for name, call in calls.items()}


def _child(source: str, cache: str) -> dict[str, float]:
    environment = dict(os.environ, PYTHONPATH=source, CONVTRANSPOSE_CACHE_DIR=cache)
    done = subprocess.run([sys.executable, __file__, "--child"], capture_output=True,
                          text=True, env=environment, check=True)
    return json.loads(done.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=False, help="the other tree's src folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="write the figures to this JSON file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure()))
        return 0
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    trees = {"before": args.before, "after": here} if args.before else {"after": here}
    best: dict[str, dict[str, float]] = {tree: {} for tree in trees}
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(args.rounds):
            for tree, source in trees.items():
                for name, ms in _child(source, os.path.join(cache, tree)).items():
                    best[tree][name] = min(ms, best[tree].get(name, float("inf")))
    _report(best, args.out)
    return 0


def _report(best: dict[str, dict[str, float]], out: str | None) -> None:
    from convtranspose._runtime.machine import cpu_model_name

    names = list(best["after"])
    header = " | ".join(f"{tree} ms" for tree in best)
    print(f"| kernel | {header} | after / before |" if "before" in best
          else f"| kernel | {header} |")
    print("|---" * (len(best) + 1 + ("before" in best)) + "|")
    rows = []
    for name in names:
        row = {"kernel": name, **{f"{tree}_ms": round(best[tree][name], 4) for tree in best}}
        cells = " | ".join(f"{best[tree][name]:.4f}" for tree in best)
        if "before" in best:
            row["after_over_before"] = round(best["after"][name] / best["before"][name], 3)
            cells += f" | {row['after_over_before']:.2f}"
        print(f"| {name} | {cells} |")
        rows.append(row)
    if out:
        with open(out, "w", encoding="utf-8") as file:
            json.dump({"machine": cpu_model_name(), "rows": rows}, file, indent=1)
            file.write("\n")


if __name__ == "__main__":
    sys.exit(main())
