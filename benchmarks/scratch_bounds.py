"""Every algorithm's NumPy scratch against its estimate and the bound of
``convtranspose._kernels.scratch`` (``benchmarks/results/scratch-bounds.json``).

Each algorithm is forced on a few layers, summed in float32 and in int64 (int8 results);
the scratch is tracemalloc's peak beyond the result in a second call, with the filters'
derived matrices and the prepared calls forgotten (they count as scratch).

    python benchmarks/scratch_bounds.py > benchmarks/results/scratch-bounds.json
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tracemalloc

import numpy as np

import convtranspose as ct
from convtranspose._choose.choice import fitting
from convtranspose._dtypes import accumulation_dtype
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._frontends import specs as _api
from convtranspose._kernels import ALGORITHMS, resolve
from convtranspose._kernels.scratch import scratch_bound, scratch_bytes
from convtranspose._plan.problem import Problem
from convtranspose._runtime import memo
from convtranspose._runtime.target import host

#: (data shape, filter shape, stride, pad).
LAYERS = [((2, 16, 16, 16), (16, 8, 3, 3), 2, 1), ((1, 64, 32, 32), (64, 4, 4, 4), 2, 1),
          ((1, 4, 64, 64), (4, 32, 5, 5), 1, 2), ((4, 8, 200), (8, 8, 7), 3, 0),
          ((1, 256, 8, 8), (256, 1, 3, 3), 1, 1), ((2, 32, 64, 64), (32, 16, 4, 4), 2, 1),
          ((1, 3, 256, 256), (3, 8, 3, 3), 1, 1)]


def _cpu() -> str:
    lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("Model name")), platform.processor())


def _row(layer, dtype, name) -> dict:
    data_shape, filter_shape, stride, pad = layer
    plan = ct.shapes.convolution_backprop_data(data_shape, filter_shape, strides=stride,
                                               pads_begin=pad, pads_end=pad)
    data, weights = np.ones(data_shape, dtype), np.ones((1,) + filter_shape, dtype)
    resolved, _ = resolve(name, dtype, len(plan.axes), False, host())
    runs = fitting(resolved, Problem(data_shape[0], plan.axes, weights.shape, False,
                                     np.dtype(dtype)), host())

    def call():
        return transposed_convolution(data, weights, plan.axes, dtype=dtype, algorithm=name)

    call()
    memo.forget_derived()
    _api.prepared_calls.clear()
    tracemalloc.start()
    out = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"data": data_shape, "filter": filter_shape, "stride": stride, "pad": pad,
            "accumulation": dtype.name, "forced": name, "runs": runs,
            "measured_bytes": peak - out.nbytes,
            "estimate_bytes": scratch_bytes(runs, data_shape[0], plan.axes, weights.shape, dtype),
            "bound_bytes": scratch_bound(data_shape[0], plan.axes, weights.shape, dtype)}


def main(argv=None) -> int:
    rows = [_row(layer, accumulation_dtype(np.dtype(result)), name) for layer in LAYERS
            for result in ("float32", "int8") for name in ALGORITHMS]
    json.dump({
        "machine": f"{_cpu()}, {len(os.sched_getaffinity(0))} CPUs",
        "numpy": np.__version__, "python": platform.python_version(),
        "what": "NumPy scratch of every forced algorithm (what runs after the registry's"
                " and the bound's fallbacks) against kernels/scratch.py's estimate and the"
                " bound max(4 x (result + data + filter), 64 MiB) in the accumulation dtype",
        "largest_measured_over_bound": round(max(r["measured_bytes"] / r["bound_bytes"]
                                                 for r in rows), 4),
        "every_measured_within_estimate": all(r["measured_bytes"] <= r["estimate_bytes"]
                                              for r in rows),
        "rows": rows}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
