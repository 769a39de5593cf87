"""OpenBLAS products in a fresh process, before and after its buffers are touched.

    python benchmarks/blas_first_products.py [--runs 3] [--before OLD/src] [--out FILE]

Each row is timed in fresh child processes (OpenBLAS's buffers are per process),
``--runs`` of each kind, alternating, and prints the median microseconds per call:

- products on one OpenBLAS thread (``np.matmul``, float32 and float64), set to one
  thread by OpenBLAS's own setter, in a process where no other product ran
  ("untouched") and after :func:`convtranspose._runtime.blas.touch_buffers` on one
  thread ("touched");
- with ``--before SRC``: calls through the library in a child importing the build
  under ``SRC`` (``PYTHONPATH``) and one importing this build: products through
  ``split_gemms`` on two threads and on one, and a layer that ``col2im-nxc`` computes with
  one OpenBLAS product (``CONVTRANSPOSE_ALGORITHM``), after a first call that plans it.

Prints the CPU; ``--out`` writes the rows as JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from convtranspose._runtime.machine import cpu_model_name

#: (rows, inner, columns) of the products on one thread.
PRODUCTS = [(128, 512, 48), (256, 256, 256), (512, 256, 49), (196, 64, 16)]

_PRODUCT_CHILD = """
import sys, time, numpy as np
from convtranspose._runtime import blas
rows, inner, columns, dtype, touched = sys.argv[1:]
setter = blas.thread_setter()
if touched == "1":
    blas.touch_buffers(1, setter)
setter(1)
rng = np.random.default_rng(0)
a = rng.random((int(rows), int(inner))).astype(dtype)
b = rng.random((int(inner), int(columns))).astype(dtype)
c = np.empty((a.shape[0], b.shape[1]), dtype)
calls = max(5, int(3e7 / (2 * a.size * b.shape[1])))
times = []
for _ in range(5):
    start = time.perf_counter()
    for _ in range(calls):
        np.matmul(a, b, out=c)
    times.append((time.perf_counter() - start) / calls)
print(min(times) * 1e6)
"""

_LIBRARY_CHILD = """
import os, sys, time, numpy as np
os.environ["CONVTRANSPOSE_ALGORITHM"] = "col2im-nxc"
import convtranspose as ct
from convtranspose._kernels.common import split_gemms
rng = np.random.default_rng(0)
if sys.argv[1] != "layer":
    rows, inner, columns, threads = map(int, sys.argv[1:])
    a = rng.random((rows, inner), np.float32); b = rng.random((inner, columns), np.float32)
    c = np.empty((rows, columns), np.float32)
    call = lambda: split_gemms([[(a, b, c, False)]], threads)
else:
    x = rng.random((2, 8, 8, 512), np.float32); w = rng.random((4, 4, 512, 3), np.float32)
    call = lambda: ct.conv_transpose(x, w, strides=2, pads_begin=1, pads_end=1)
call()
times = []
for _ in range(5):
    start = time.perf_counter()
    for _ in range(100):
        call()
    times.append((time.perf_counter() - start) / 100)
print(min(times) * 1e6)
"""

#: The library's calls timed in both builds: products through ``split_gemms`` on two
#: threads and on one (for reference), and a layer.
LIBRARY_ROWS = {
    **{f"split_gemms {'x'.join(map(str, shape))} float32, {threads} thread(s)":
       [*map(str, shape), str(threads)]
       for shape in [(196, 64, 16), (128, 512, 48), (512, 256, 49)] for threads in (2, 1)},
    "DCGAN-up N2 512->3 8x8 k4 s2 p1 NXC, col2im-nxc": ["layer"],
}


def _child(script: str, arguments: list[str], source: str | None = None) -> float:
    environment = dict(os.environ, CONVTRANSPOSE_WISDOM="off",
                       CONVTRANSPOSE_BACKGROUND_COMPILE="off")
    if source is not None:
        environment["PYTHONPATH"] = source
    result = subprocess.run([sys.executable, "-c", script, *arguments], env=environment,
                            capture_output=True, text=True, check=True)
    return float(result.stdout.split()[-1])


def _alternating(runs: int, kinds: dict) -> dict:
    """``{kind: median us}`` of ``runs`` calls of each ``kinds[kind]()``, alternating."""
    times: dict = {kind: [] for kind in kinds}
    for _ in range(runs):
        for kind, measure in kinds.items():
            times[kind].append(measure())
    return {kind: round(statistics.median(values), 1) for kind, values in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="the src folder of the build to compare with")
    parser.add_argument("--out", help="write the rows and the CPU's name to this JSON file")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model_name()}; microseconds per call, medians of {args.runs} processes")
    rows = []
    for shape in PRODUCTS:
        for dtype in ("float32", "float64"):
            arguments = [*map(str, shape), dtype]
            row = {"product": "x".join(map(str, shape)), "dtype": dtype, **_alternating(
                args.runs, {kind: (lambda flag=flag: _child(_PRODUCT_CHILD, arguments + [flag]))
                            for kind, flag in (("untouched", "0"), ("touched", "1"))})}
            row["speedup"] = round(row["untouched"] / row["touched"], 2)
            rows.append(row)
            print(f"{row['product']:14s} {dtype:8s} untouched {row['untouched']:9.1f}  "
                  f"touched {row['touched']:9.1f}  {row['speedup']:.2f}x")
    if args.before:
        this_build = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
            __file__))), "src")
        for name, kind in LIBRARY_ROWS.items():
            row = {"call": name, **_alternating(args.runs, {
                "before": lambda: _child(_LIBRARY_CHILD, kind, args.before),
                "after": lambda: _child(_LIBRARY_CHILD, kind, this_build)})}
            row["speedup"] = round(row["before"] / row["after"], 2)
            rows.append(row)
            print(f"{name:48s} before {row['before']:8.1f}  after {row['after']:8.1f}  "
                  f"{row['speedup']:.2f}x")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "runs": args.runs, "rows": rows}, file,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
