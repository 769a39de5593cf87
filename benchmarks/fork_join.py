"""The fixed cost of one parallel kernel call: the library's Python thread pool against
numba's native threads (``convtranspose._kernels._numba.launch``).

    python benchmarks/fork_join.py [--calls 300] [--threads 2] [--layers] [--out FILE]

Times ``parallel_kernel`` of a compiled kernel that does nothing, over as many pieces
as threads, with native threads and with ``CONVTRANSPOSE_NATIVE_THREADS=0`` (the pool),
alternating in one process: back to back, and after sleeps of 1 and 10 ms (where the
pool's helpers and the layer's threads have gone to sleep).  Prints the median
microseconds per call with the CPU and numba's threading layer; ``--out`` writes them
as JSON.  Writes nothing else.

``--layers`` also times layers whose kernels share their work between threads, each
through one prepared layer (``ct.prepare``, the algorithm :data:`LAYERS` names forced),
calls back to back, in rounds alternating native threads and the pool.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")

import numba  # noqa: E402
import numpy as np  # noqa: E402

from convtranspose._kernels._numba import launch  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

PAUSES = {"back to back": 0.0, "after 1 ms": 1e-3, "after 10 ms": 1e-2}
# (name, data shape, filter shape (Ci, Co, K, K), stride, pad, algorithm)
LAYERS = [
    ("U-Net k2 64->32 24x24", (1, 64, 24, 24), (64, 32, 2, 2), 2, 0, "direct-blocked"),
    ("DCGAN-like 128->64 16x16 k4 s2", (1, 128, 16, 16), (128, 64, 4, 4), 2, 1,
     "direct-blocked"),
    ("stride-1 64->64 k3 32x32", (1, 64, 32, 32), (64, 64, 3, 3), 1, 1, "direct-blocked"),
    ("head N4 64->4 48x48 k3 s2", (4, 64, 48, 48), (64, 4, 3, 3), 2, 1, "col2im-ncx"),
]


@numba.njit(nogil=True)
def _nothing(marks, start, stop):
    for i in range(start, stop):
        marks[i] = i


def _median_us(calls: int, pause: float, threads: int) -> float:
    marks = np.zeros(threads, np.int64)
    times = []
    for _ in range(calls):
        if pause:
            time.sleep(pause)
        started = time.perf_counter()
        launch.parallel_kernel(_nothing, (marks,), threads, threads, threads)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1e6, 1)


def _layer_rows(calls: int) -> dict:
    import convtranspose as ct

    rows = {}
    for name, data_shape, filter_shape, stride, pad, algorithm in LAYERS:
        os.environ["CONVTRANSPOSE_ALGORITHM"] = algorithm
        rng = np.random.default_rng(0)
        data = rng.standard_normal(data_shape).astype(np.float32)
        layer = ct.prepare(ct.onnx_conv_transpose,
                           W=rng.standard_normal(filter_shape).astype(np.float32),
                           strides=[stride, stride], pads=[pad] * 4)
        out = layer(data)
        times = {"native": [], "pool": []}
        for _ in range(3):
            for mode, value in (("native", "1"), ("pool", "0")):
                os.environ[launch.NATIVE_THREADS_ENV] = value
                runs = []
                for _ in range(calls):
                    started = time.perf_counter()
                    layer(data, out=out)
                    runs.append(time.perf_counter() - started)
                times[mode].append(round(statistics.median(runs) * 1e6, 1))
        rows[f"{name} ({algorithm})"] = times
    os.environ.pop("CONVTRANSPOSE_ALGORITHM")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", action="store_true")
    parser.add_argument("--out")
    options = parser.parse_args()
    rows = {}
    for value in ("1", "0"):
        # Compiles, starts the threads; the pool's first few hundred calls here ran
        # 7x slower than its later ones (AMD Zen 3), whichever ran before.
        os.environ[launch.NATIVE_THREADS_ENV] = value
        _median_us(1000, 0.0, options.threads)
    for name, value in (("native", "1"), ("pool", "0"), ("native", "1"), ("pool", "0")):
        os.environ[launch.NATIVE_THREADS_ENV] = value
        for pause_name, pause in PAUSES.items():
            rows.setdefault(name, {}).setdefault(pause_name, []).append(
                _median_us(options.calls if pause < 5e-3 else options.calls // 3, pause,
                           options.threads))
    layer = numba.threading_layer()
    print(f"CPU: {cpu_model_name()}, {options.threads} threads, numba's threading layer: "
          f"{layer}; microseconds per call, medians of two rounds")
    print(f"{'':10}" + "".join(f"{pause:>16}" for pause in PAUSES))
    for name, by_pause in rows.items():
        print(f"{name:10}" + "".join(f"{'/'.join(map(str, by_pause[p])):>16}" for p in PAUSES))
    result = {"machine": cpu_model_name(), "threads": options.threads,
              "threading_layer": layer, "median_us": rows}
    if options.layers:
        result["layers_us"] = layers = _layer_rows(options.calls)
        print("\nlayers through ct.prepare, microseconds per call back to back, three rounds:")
        for name, times in layers.items():
            print(f"  {name:48} native {'/'.join(map(str, times['native']))}   "
                  f"pool {'/'.join(map(str, times['pool']))}")
    if options.out:
        with open(options.out, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=1)


if __name__ == "__main__":
    main()
