"""Strided forward convolutions: the data adjoint's prepared call against a build
without it, and the share of each call spent outside the kernel.

    python benchmarks/prepared_adjoints.py [--baseline OTHER/src] [--repeats 15] [--json PATH]

Rows, float32 NCHW, two threads, medians in ms of rounds that alternate between the
set-ups, each call after an untimed one:

- ``baseline``: ``ct.convolution`` of another build (``--baseline``: the ``src`` folder
  of another checkout, loaded beside this one as ``benchmarks/ab_compare.py`` does), for
  example the build before prepared calls of strided layers;
- ``function``: ``ct.convolution`` running the prepared call its first call kept;
- ``prepared``: ``ct.prepare(ct.convolution, ...)`` (its own filter: no comparison);
- ``kernel``: the blocked kernel's own time within the ``prepared`` calls (numba's loop,
  launched; none where planning chose ``im2col`` or ``taps``), and ``outside``: the
  share of a ``function`` or ``prepared`` call spent around its kernel (both within the
  same timed calls).

Prints the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402
from ab_compare import load_baseline  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._execute import adjoints as execute_adjoints  # noqa: E402
from convtranspose._kernels._numba import forward  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

# (name, data shape, filter shape, stride, pad) of ``ct.convolution``
LAYERS = [
    ("stem 7x7 s2 3->64 224x224", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    ("ResNet 3x3 s2 128->256 28x28", (1, 128, 28, 28), (256, 128, 3, 3), 2, 1),
    ("ResNet 3x3 s2 256->512 14x14", (1, 256, 14, 14), (512, 256, 3, 3), 2, 1),
    ("3x3 s2 32->64 56x56", (1, 32, 56, 56), (64, 32, 3, 3), 2, 1),
    ("3x3 s2 16->32 28x28", (1, 16, 28, 28), (32, 16, 3, 3), 2, 1),
    ("3x3 s2 8->16 12x12", (1, 8, 12, 12), (16, 8, 3, 3), 2, 1),
    ("DCGAN 4x4 s2 256->512 N8 16x16", (8, 256, 16, 16), (512, 256, 4, 4), 2, 1),
]


class _KernelTimes:
    """The blocked kernel's launches timed (numba's loop, launched), per runner: wraps
    the launcher the forward kernel calls."""

    def __init__(self):
        self.runner, self.times = None, {}
        launch = forward.parallel_kernel

        def timed(*args, **kwargs):
            start = time.perf_counter()
            launch(*args, **kwargs)
            self.times.setdefault(self.runner, []).append(time.perf_counter() - start)

        forward.parallel_kernel = timed

    def tagged(self, name: str, function):
        """``function`` with its kernel launches counted under ``name``."""
        def run():
            self.runner = name
            function()
        return run

    def timed_calls(self, name: str) -> list:
        """The launches of ``name``'s timed calls in :func:`alternating_rounds` (an
        untimed call before each): every second one (one launch per call)."""
        return self.times.get(name, [])[1::2]


def _row(layer, repeats: int, kernels: _KernelTimes, baseline) -> dict:
    name, data_shape, filter_shape, stride, pad = layer
    rng = np.random.default_rng(0)
    data = rng.standard_normal(data_shape).astype(np.float32)
    weight = rng.standard_normal(filter_shape).astype(np.float32)
    attrs = dict(strides=stride, pads_begin=pad, pads_end=pad)
    prepared = ct.prepare(ct.convolution, filter=weight, **attrs)
    runners = {"function": lambda: ct.convolution(data, weight, **attrs),
               "prepared": lambda: prepared(data)}
    if baseline is not None:
        runners["baseline"] = lambda: baseline.convolution(data, weight, **attrs)
    for function in runners.values():  # planning (which times candidates) and warm-up
        function()
        function()
    kernels.times.clear()
    samples = alternating_rounds({name: kernels.tagged(name, function)
                                  for name, function in runners.items()}, repeats)
    row = {"layer": name}
    row.update((key, statistics.median(values) * 1e3) for key, values in samples.items())
    plan = ct.shapes.convolution(data.shape, weight.shape, **attrs)
    call, _ = execute_adjoints.kept_data_adjoint(
        data, weight.reshape(plan.canonical_filter_shape), plan.axes, False, data.dtype)
    row["algorithm"] = getattr(call, "algorithm", None)
    for runner in ("function", "prepared"):  # none where im2col or taps ran
        launches = kernels.timed_calls(runner)
        kernel = statistics.median(launches) * 1e3 if launches else float("nan")
        row[f"kernel_{runner}"] = kernel
        row[f"outside_{runner}"] = 1 - kernel / row[runner]
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="SRC", help="another build's src folder")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", help="write the rows and the CPU's name to this file")
    arguments = parser.parse_args(argv)
    baseline = None if arguments.baseline is None else load_baseline(arguments.baseline)
    for library in (ct, baseline):
        if library is not None:
            library.set_num_threads(2)
    kernels = _KernelTimes()
    cpu, nan = cpu_model_name(), float("nan")
    print(f"CPU: {cpu}")
    print(f"{'layer':32s} {'algorithm':14s} {'baseline':>8s} {'function':>8s} {'prepared':>8s}"
          f" {'kernel':>8s} {'out fn':>7s} {'out pr':>7s}")
    rows = []
    for layer in LAYERS:
        row = _row(layer, arguments.repeats, kernels, baseline)
        rows.append(row)
        print(f"{row['layer']:32s} {row['algorithm']!s:14s} {row.get('baseline', nan):8.3f}"
              f" {row['function']:8.3f} {row['prepared']:8.3f} {row['kernel_prepared']:8.3f}"
              f" {row['outside_function']:7.1%} {row['outside_prepared']:7.1%}")
    if arguments.json:
        with open(arguments.json, "w") as handle:
            json.dump({"cpu": cpu, "baseline": arguments.baseline, "rows": rows}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
