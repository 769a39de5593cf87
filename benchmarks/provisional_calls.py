"""A layer's repeated calls on a machine that has compiled nothing yet: while its other
candidates' kernels compile in the background process, and after.

    python benchmarks/provisional_calls.py [--seconds 40] [--before OLD/src] [--out FILE]
    python benchmarks/provisional_calls.py --grouped [--seconds 70] [--runs 2] [--before OLD/src]

Each build runs in a child process with an empty cache folder of its own
(``CONVTRANSPOSE_CACHE_DIR``, a temporary folder removed after), the default planning,
wisdom off: the tiny 2->3 5x5 k3 s2 p1 layer (float32, NCHW) is called through
``ct.prepare`` and through ``ct.onnx_conv_transpose`` in alternating blocks of 500 calls
for ``--seconds``.  Each block is tagged with how the layer's choice stood after it
(``ct.explain``'s "decided by" line: provisional while it names the background process).
Prints, per build and phase, the median microseconds per call of each way and the
number of blocks, with the CPU; ``--out`` writes them as JSON.  Writes nothing else.

``--grouped``: the grouped g8 256->256 28x28 k4 s2 p1 layer, N8, float16 (whose
stand-in, ``gemm-ncx``, takes several times the time of the numba kernels compiling
meanwhile), called back to back through ``ct.onnx_conv_transpose`` for ``--seconds``,
the builds alternating ``--runs`` times: per run, when the first call that ran a numba
kernel and the first settled call ended (seconds from the first call's start), the
calls made until settled, and the median milliseconds per call of each phase
(``stand-in``: provisional on NumPy's code or BLAS; ``provisional``: on a numba
kernel ready before the others; ``settled``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = """
import json, os, sys, time
os.environ["CONVTRANSPOSE_WISDOM"] = "off"
import numpy as np, convtranspose as ct
rng = np.random.default_rng(0)
x = rng.normal(size=(1, 2, 5, 5)).astype(np.float32)
w = rng.normal(size=(2, 3, 3, 3)).astype(np.float32)
layer = ct.prepare(ct.onnx_conv_transpose, W=w, strides=[2, 2], pads=[1] * 4)
ways = {"prepared": lambda: layer(x),
        "function": lambda: ct.onnx_conv_transpose(x, w, strides=[2, 2], pads=[1] * 4)}
for call in ways.values():
    call()
blocks, end = [], time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    for name, call in ways.items():
        start = time.perf_counter()
        for _ in range(500):
            call()
        us = (time.perf_counter() - start) / 500 * 1e6
        decided = next(line for line in str(layer.explain(x.shape, x.dtype)).splitlines()
                       if line.startswith("decided by"))
        blocks.append((name, "provisional" if "background" in decided else "settled", us))
print(json.dumps(blocks))
"""


_GROUPED_CHILD = """
import json, os, sys, time
os.environ["CONVTRANSPOSE_WISDOM"] = "off"
import numpy as np, convtranspose as ct
from convtranspose._choose import planning
from convtranspose._kernels import REGISTRY
rng = np.random.default_rng(0)
x = rng.normal(size=(8, 256, 28, 28)).astype(np.float16)
w = rng.normal(size=(256, 32, 4, 4)).astype(np.float16)
calls, start = [], time.perf_counter()
while time.perf_counter() < start + float(sys.argv[1]):
    with planning.recording() as choices:
        began = time.perf_counter()
        ct.onnx_conv_transpose(x, w, strides=[2, 2], pads=[1] * 4, group=8)
    ended = time.perf_counter()
    kinds = {(choice.decided_by, choice.runs) for choice in choices}
    phase = ("settled" if not any(by == "provisional" for by, _ in kinds) else "stand-in"
             if any("numba" not in REGISTRY[runs].requires for _, runs in kinds)
             else "provisional")
    calls.append((ended - start, ended - began, phase))
print(json.dumps(calls))
"""


def _child_output(script: str, source: str | None, seconds: float):
    """What ``script`` prints last (JSON), run for ``seconds`` in a child process with an
    empty cache folder of its own, importing the build under ``source`` where given."""
    with tempfile.TemporaryDirectory() as cache:
        environment = dict(os.environ, CONVTRANSPOSE_CACHE_DIR=cache)
        if source:
            environment["PYTHONPATH"] = source
        child = subprocess.run([sys.executable, "-c", script, str(seconds)], env=environment,
                               capture_output=True, text=True, check=True)
    return json.loads(child.stdout.splitlines()[-1])


def run_grouped(source: str | None, seconds: float) -> dict:
    """One child's phases of the grouped float16 layer (``--grouped``)."""
    calls = _child_output(_GROUPED_CHILD, source, seconds)
    ends = {phase: next((end for end, _, seen in calls if seen == phase), None)
            for phase in ("provisional", "settled")}
    settled = ends["settled"] or float("inf")
    ends = {phase: None if end is None else round(end, 2) for phase, end in ends.items()}
    row = dict(numba_from_s=ends["provisional"], settled_from_s=ends["settled"],
               calls_until_settled=sum(end < settled for end, _, _ in calls))
    for phase in ("stand-in", "provisional", "settled"):
        times = [ms for _, ms, seen in calls if seen == phase][1:]  # not the planning call
        row[f"{phase}_ms"] = round(statistics.median(times) * 1e3, 1) if times else None
    return row


def grouped_main(args, record: dict) -> None:
    """``--grouped``: the builds alternating ``args.runs`` times."""
    builds = ([("before", args.before)] if args.before else []) + [("after", None)]
    print(f"CPU: {record['cpu']}; grouped g8 float16 layer, {args.seconds:.0f} s per run")
    for run in range(args.runs):
        for label, source in builds:
            row = run_grouped(source, args.seconds)
            record["builds"].setdefault(label, []).append(row)
            print(f"{label:6s} run {run + 1}: " + ", ".join(
                f"{key} {value}" for key, value in row.items()))


def run_build(source: str | None, seconds: float) -> dict:
    """Per way and phase, the median us per call and the block count of one child."""
    blocks = _child_output(_CHILD, source, seconds)
    summary: dict = {}
    for name, phase, us in blocks:
        summary.setdefault(f"{name} {phase}", []).append(us)
    return {key: dict(us=round(statistics.median(values), 2), blocks=len(values))
            for key, values in summary.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, help="per run (default 40; --grouped 70)")
    parser.add_argument("--before", metavar="SRC", help="also the build under this src")
    parser.add_argument("--grouped", action="store_true",
                        help="the grouped float16 layer instead of the tiny one")
    parser.add_argument("--runs", type=int, default=2, help="--grouped: runs per build")
    parser.add_argument("--out", help="write the medians and the CPU to this JSON file")
    args = parser.parse_args(argv)
    from convtranspose._runtime.machine import cpu_model_name

    if args.seconds is None:
        args.seconds = 70.0 if args.grouped else 40.0
    record = dict(cpu=cpu_model_name(), seconds=args.seconds, builds={})
    if args.grouped:
        grouped_main(args, record)
        builds = []
    else:
        builds = ([("before", args.before)] if args.before else []) + [("after", None)]
        print(f"CPU: {record['cpu']}; us per call, median of blocks of 500 calls")
    for label, source in builds:
        record["builds"][label] = rows = run_build(source, args.seconds)
        for key, row in sorted(rows.items()):
            print(f"{label:6s} {key:24s} {row['us']:9.2f} us  ({row['blocks']} blocks)")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(record, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
