"""First calls of several layer shapes, one after another, sharing one cold kernel cache.

    python benchmarks/kernel_reuse.py [--baseline /other/src] [--algorithms direct-blocked,direct]
                                      [--out FILE]

For each build (this checkout, and ``--baseline``'s ``src`` folder if given) and each
forced algorithm (``CONVTRANSPOSE_ALGORITHM``), an empty cache folder is made and the
layers of :data:`LAYERS` are called once each, every one in a new process in that
order: the first call compiles the kernels, a later one compiles only what its shape
does not share with the earlier ones (kernels compiled per dtype and block shape are
found in the cache).  Prints one line per call and ``--out`` writes them as JSON with
the machine.  The cache folders are temporary and removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SOURCE))

from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

#: (batch, Ci, Co, size, kernel, stride) of float32 2-D layers with pads 1: three output
#: channel counts that direct-blocked takes in one block shape on AVX-512 (4 vectors by
#: 4 pixels; the widest in passes of 64 channels).
LAYERS = ((1, 64, 64, 32, 4, 2), (1, 32, 128, 32, 4, 2), (1, 64, 256, 32, 4, 2))

_CALL = """\
import sys, time
import numpy as np
import convtranspose as ct
batch, ci, co, size, k, s = map(int, sys.argv[1:])
rng = np.random.default_rng(0)
data = rng.standard_normal((batch, ci, size, size)).astype(np.float32)
weights = rng.standard_normal((ci, co, k, k)).astype(np.float32)
start = time.perf_counter()
ct.convolution_backprop_data(data, weights, strides=s, pads_begin=1, pads_end=1)
print(f"{(time.perf_counter() - start) * 1e3:.1f}")
"""


def first_calls(source: str, algorithm: str) -> list[dict]:
    """Each layer's first call (ms) in a new process, one cold cache folder for all."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernel-reuse-") as cache:
        env = dict(os.environ, PYTHONPATH=source, CONVTRANSPOSE_CACHE_DIR=cache,
                   CONVTRANSPOSE_ALGORITHM=algorithm)
        for layer in LAYERS:
            done = subprocess.run([sys.executable, "-c", _CALL, *map(str, layer)], env=env,
                                  check=True, capture_output=True, text=True)
            batch, ci, co, size, k, s = layer
            rows.append({"layer": f"N{batch} {ci}->{co} {size}x{size} k{k} s{s} p1",
                         "first_call_ms": float(done.stdout.split()[-1])})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another checkout's src folder")
    parser.add_argument("--algorithms", default="direct-blocked,direct")
    parser.add_argument("--out", help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    builds = {"current": str(SOURCE)}
    if args.baseline:
        builds = {"baseline": args.baseline, **builds}
    results = {}
    for algorithm in args.algorithms.split(","):
        for build, source in builds.items():
            rows = results.setdefault(algorithm, {})[build] = first_calls(source, algorithm)
            for row in rows:
                print(f"{algorithm:15s} {build:8s} {row['layer']:28s} "
                      f"{row['first_call_ms']:9.1f} ms", flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"machine": cpu_model_name(), "results": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
