"""The ``blocked`` data adjoint's kernels against each other on forward convolutions.

    python benchmarks/forward_kernels.py [--threads N] [--repeats 11] [--json PATH]

The forward convolution ``ct.convolution`` computes with strides is the data adjoint of
:mod:`convtranspose._kernels._numba.forward`.  Per layer (float32 unless named,
channels-first data and result) it times, alternating round by round, each call after
an untimed one:

- ``planes``: the line kernel reading the data's planes where they are
  (``blocked-planes``);
- ``lines``: the line kernel over the data's channels-last copy, the outputs at a
  line's ends one at a time (what ``blocked`` runs for a filter with non-finite
  weights);
- ``padded``: the padded kernel (``blocked`` for a finite filter): a channels-last copy
  with zeros around it, every output in whole blocks across lines and images;
- ``im2col``: the gathered matrix and BLAS products, for scale.

Medians in ms and each kernel's multiply-adds per second per thread; prints the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._kernels import adjoints  # noqa: E402
from convtranspose._kernels._numba.forward import prepare_forward_adjoint  # noqa: E402
from convtranspose._plan.rules import AxisPlan  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose._runtime.target import host  # noqa: E402

# (name, data shape (N, C, spatial...), output channels, groups, kernel, stride, pad,
# dilation, dtype) of a forward convolution, the same on every spatial axis
LAYERS = [
    ("stem 7x7 s2 3->64 224x224", (1, 3, 224, 224), 64, 1, 7, 2, 3, 1, np.float32),
    ("ResNet 3x3 s2 128->256 28x28", (1, 128, 28, 28), 256, 1, 3, 2, 1, 1, np.float32),
    ("DCGAN 4x4 s2 256->512 N8 16x16", (8, 256, 16, 16), 512, 1, 4, 2, 1, 1, np.float32),
    ("3x3 s2 32->64 N4 112x112", (4, 32, 112, 112), 64, 1, 3, 2, 1, 1, np.float32),
    ("3x3 s2 512->512 N4 14x14", (4, 512, 14, 14), 512, 1, 3, 2, 1, 1, np.float32),
    ("1x1 s2 256->512 56x56", (1, 256, 56, 56), 512, 1, 1, 2, 0, 1, np.float32),
    ("gray 3x3 s2 1->32 N4 128x128", (4, 1, 128, 128), 32, 1, 3, 2, 1, 1, np.float32),
    ("grouped g8 3x3 s2 256->256 N4 28x28", (4, 256, 28, 28), 256, 8, 3, 2, 1, 1, np.float32),
    ("dilated 3x3 d2 s2 64->64 56x56", (1, 64, 56, 56), 64, 1, 3, 2, 2, 2, np.float32),
    ("1-D k15 s4 64->128 N4 4096", (4, 64, 4096), 128, 1, 15, 4, 7, 1, np.float32),
    ("3-D 3x3x3 s2 32->64 N2 32^3", (2, 32, 32, 32, 32), 64, 1, 3, 2, 1, 1, np.float32),
    ("stem float64", (1, 3, 224, 224), 64, 1, 7, 2, 3, 1, np.float64),
]


def _operands(rng, shape, out_channels, groups, k, s, p, d, dtype):
    """``grad`` (the convolution's data), the canonical weights ``(G, Ci, Co, K...)``
    (``Ci`` the convolution's output channels per group) and the axes."""
    rank = len(shape) - 2
    size = shape[-1]
    out_size = (size + 2 * p - (k - 1) * d - 1) // s + 1
    axes = (AxisPlan(out_size, k, s, d, p, size),) * rank
    grad = rng.standard_normal(shape).astype(dtype)
    weights = rng.standard_normal((groups, out_channels // groups, shape[1] // groups)
                                  + (k,) * rank).astype(dtype)
    return axes, grad, weights


def _row(layer, target, repeats: int) -> dict:
    name, shape, out_channels, groups, k, s, p, d, dtype = layer
    axes, grad, weights = _operands(np.random.default_rng(0), shape, out_channels, groups,
                                    k, s, p, d, dtype)
    dtype = np.dtype(dtype)
    calls = {way: (lambda run=prepare_forward_adjoint(shape[0], weights, axes, False, dtype,
                                                      {}, target, padded, planes): run(grad))
             for way, (padded, planes) in {"planes": (False, True), "lines": (False, False),
                                           "padded": (True, False)}.items()}
    calls["im2col"] = lambda: adjoints.data_adjoint(grad, weights, axes, dtype, "im2col")
    reference = calls["im2col"]()
    for way in ("planes", "lines", "padded"):
        np.testing.assert_allclose(calls[way](), reference, rtol=1e-3, atol=1e-3)
    samples = alternating_rounds(calls, repeats, pause=0.0)
    row = {way: statistics.median(values) * 1e3 for way, values in samples.items()}
    macs = reference.size * weights.shape[2] * k ** len(axes)
    rates = {way: round(macs / ms / 1e6 / target.threads, 1) for way, ms in row.items()}
    best_line = min(row["planes"], row["lines"])
    print(f"{name:38s} " + "  ".join(f"{way} {ms:8.3f}" for way, ms in row.items())
          + f"  padded/best line {row['padded'] / best_line:.2f}", flush=True)
    return dict(layer=name, ms=row, gmacs_per_thread=rates,
                padded_over_best_line=row["padded"] / best_line)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=host().threads)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--json", help="write the rows and the CPU's name to this file")
    options = parser.parse_args(argv)
    target = dataclasses.replace(host(), threads=options.threads)
    print(f"{cpu_model_name()}, {target.threads} threads; ms (median)")
    rows = [_row(layer, target, options.repeats) for layer in LAYERS]
    ratios = [row["padded_over_best_line"] for row in rows]
    print(f"geometric mean padded/best line: {float(np.exp(np.mean(np.log(ratios)))):.2f}")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model_name(), "threads": target.threads, "rows": rows}, file,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
