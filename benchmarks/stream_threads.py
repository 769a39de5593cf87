"""``stream`` layers called back to back and after pauses, in two builds or two waits.

    python benchmarks/stream_threads.py [--runs 3] [--before OLD/src] [--out FILE]

Each layer (large filters on few input positions, the kind ``stream`` is for) runs with
``CONVTRANSPOSE_ALGORITHM=stream`` in fresh child processes (wisdom and background
compiles off), ``--runs`` of each kind, alternating.  A child times 15 calls back to
back and 8 calls each after a 50 ms pause, after 3 untimed calls, and prints the
medians.  The kinds:

- with ``--before SRC``: the build under ``SRC`` (``PYTHONPATH``) and this build;
- always: this build with ``OMP_WAIT_POLICY=passive``, whose numba workers sleep at
  once after a loop instead of spinning: where a layer is slower back to back than
  with it, a thread woken right after a native loop shared a CPU with a spinning worker.

Prints the CPU and the medians over the processes in milliseconds; ``--out`` writes
them as JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from convtranspose._runtime.machine import cpu_model_name

#: (batch, input channels, output channels, input size): k4 s2 p1, the DCGAN ups.
LAYERS = [(1, 1024, 512, 4), (2, 1024, 512, 4), (1, 512, 256, 8), (4, 512, 256, 4)]

_CHILD = """
import statistics, sys, time, numpy as np
import convtranspose as ct
n, ci, co, size = map(int, sys.argv[1:])
rng = np.random.default_rng(0)
x = rng.random((n, ci, size, size), dtype=np.float32)
w = rng.random((ci, co, 4, 4), dtype=np.float32)
def call():
    ct.onnx_conv_transpose(x, w, strides=[2, 2], pads=[1, 1, 1, 1])
for _ in range(3):
    call()
def timed():
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
back = [timed() for _ in range(15)]
paused = []
for _ in range(8):
    time.sleep(0.05)
    paused.append(timed())
print(statistics.median(back) * 1e3, statistics.median(paused) * 1e3)
"""


def _child(layer: tuple, source: str, passive: bool) -> tuple[float, float]:
    environment = dict(os.environ, CONVTRANSPOSE_WISDOM="off", CONVTRANSPOSE_ALGORITHM="stream",
                       CONVTRANSPOSE_BACKGROUND_COMPILE="off", PYTHONPATH=source)
    if passive:
        environment["OMP_WAIT_POLICY"] = "passive"
    result = subprocess.run([sys.executable, "-c", _CHILD, *map(str, layer)], env=environment,
                            capture_output=True, text=True, check=True)
    back, paused = map(float, result.stdout.split()[-2:])
    return back, paused


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="the src folder of the build to compare with")
    parser.add_argument("--out", help="write the rows and the CPU's name to this JSON file")
    args = parser.parse_args(argv)
    this_build = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "src")
    kinds = {"this build": (this_build, False), "this build, passive wait": (this_build, True)}
    if args.before:
        kinds = {"before": (args.before, False), **kinds}
    print(f"CPU: {cpu_model_name()}; ms per call (back to back / after 50 ms), medians of "
          f"{args.runs} processes")
    rows = []
    for layer in LAYERS:
        times: dict = {kind: [] for kind in kinds}
        for _ in range(args.runs):
            for kind, (source, passive) in kinds.items():
                times[kind].append(_child(layer, source, passive))
        row = {"layer": "N{} {}->{} {}x{} k4 s2 p1".format(*layer, layer[-1])}
        for kind, pairs in times.items():
            row[kind] = [round(statistics.median(pair[i] for pair in pairs), 2)
                         for i in (0, 1)]
        rows.append(row)
        print(f"{row['layer']:24s} " + "  ".join(
            f"{kind} {row[kind][0]:6.2f} / {row[kind][1]:6.2f}" for kind in kinds))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "runs": args.runs, "rows": rows}, file,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
