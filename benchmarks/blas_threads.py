"""Large products on OpenBLAS's threads against the library's split, and what follows them.

    python benchmarks/blas_threads.py [--rounds 7] [--out FILE]

Two tables, in one process:

- per product shape, the median time of ``np.matmul`` on OpenBLAS's own threads and of
  :func:`convtranspose._kernels.common.threaded_matmul` (blocks on the library's threads,
  one BLAS thread each), each timed after a 0.3 s pause so that neither meets the
  other's leftovers;
- DCGAN 512->256 (N16 8x8 k4 s2 p1) with ``direct-blocked`` timed right after a
  product of each kind, and after a 0.3 s pause: OpenBLAS's workers spin for about
  2**28 cycles after a threaded product and take a core from what runs next.

``--out`` writes the rows and the machine (``lscpu`` model name) as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")

import convtranspose as ct  # noqa: E402
from convtranspose._execute.transposed import transposed_convolution  # noqa: E402
from convtranspose._kernels.common import threaded_matmul  # noqa: E402
from convtranspose._runtime import blas  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose._runtime.target import host  # noqa: E402

SHAPES = [(4096, 512, 1024), (1024, 512, 4096), (2048, 256, 2048), (256, 512, 1024),
          (16384, 64, 64)]
PAUSE_SECONDS = 0.3


def _ms(function) -> float:
    start = time.perf_counter()
    function()
    return 1e3 * (time.perf_counter() - start)


def products(rounds: int) -> list[dict]:
    """Per shape: OpenBLAS-threaded and split medians (ms), each after a pause."""
    rows, threads = [], host().threads
    for m, k, n in SHAPES:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        times: dict[str, list[float]] = {"openblas": [], "split": []}
        for _ in range(rounds):
            for name, run in (("openblas", lambda: np.matmul(a, b)),
                              ("split", lambda: threaded_matmul(a, b, threads))):
                time.sleep(PAUSE_SECONDS)
                run()
                times[name].append(_ms(run))
        row = {"shape": [m, k, n], **{name: statistics.median(v) for name, v in times.items()}}
        row["split_over_openblas"] = row["split"] / row["openblas"]
        print(f"| {m}x{k}x{n} | {row['openblas']:.2f} ms | {row['split']:.2f} ms | "
              f"{row['split_over_openblas']:.2f} |", flush=True)
        rows.append(row)
    return rows


def after_products(rounds: int) -> dict:
    """DCGAN 512->256 with ``direct-blocked``: right after either product, and alone."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 512, 8, 8)).astype(np.float32)
    w = rng.standard_normal((512, 256, 4, 4)).astype(np.float32)[None]
    plan = ct.shapes.convolution_backprop_data(x.shape, w.shape[1:], strides=2, pads_begin=1,
                                               pads_end=1)
    out = np.empty(plan.output_shape, np.float32)
    a = rng.standard_normal((4096, 512)).astype(np.float32)
    b = rng.standard_normal((512, 1024)).astype(np.float32)

    def layer():
        transposed_convolution(x, w, plan.axes, dtype=np.dtype(np.float32),
                               algorithm="direct-blocked", out=out)

    before = {"openblas product": lambda: np.matmul(a, b),
              "split product": lambda: threaded_matmul(a, b, host().threads),
              "pause": lambda: time.sleep(PAUSE_SECONDS)}
    layer()
    times: dict[str, list[float]] = {name: [] for name in before}
    for _ in range(rounds):
        for name, run in before.items():
            time.sleep(PAUSE_SECONDS)
            layer()
            run()
            times[name].append(_ms(layer))
    medians = {name: statistics.median(v) for name, v in times.items()}
    for name, value in medians.items():
        print(f"| direct-blocked after {name} | {value:.1f} ms |", flush=True)
    return medians


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    if not blas.available(np.float32):
        raise SystemExit("NumPy's OpenBLAS is not loadable here")
    print(f"{cpu_model_name()}, {host().threads} threads, OpenBLAS {blas.corename()}")
    print("| product (m x k x n) | OpenBLAS threads | split | split / OpenBLAS |")
    product_rows = products(args.rounds)
    print("| DCGAN 512->256 N16 8x8 | median |")
    layer = after_products(args.rounds)
    if args.out:
        with open(args.out, "w") as file:
            json.dump({"machine": cpu_model_name(), "threads": host().threads,
                       "load_average": os.getloadavg(), "products": product_rows,
                       "direct_blocked_after": layer}, file, indent=1)


if __name__ == "__main__":
    main()
