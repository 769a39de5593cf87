"""Where splitting a layout copy between numba's threads pays on this machine, and what
the measured rule does to whole layers against the previous fixed 4 MiB.

    python benchmarks/copy_split.py [--repeats 15] [--json PATH]

First the machine figure's own measurement
(:func:`convtranspose._kernels._numba.transpose.measure_copy_split`): float32 copies of
128 KiB to 16 MiB on one thread and split, after a 2 ms rest and right after a copy
(ms, fastest of five), with the sizes it derives.  Then forward convolutions of
``benchmarks/gradients.py`` whose channels-first results are copied out of the blocked
kernel's channels-last blocks, and one quantized layer's word pass: ``measured`` (this
machine's figures) and ``fixed`` (every copy below 4 MiB on one thread, as before)
alternate round by round, each call after an untimed one; medians in ms.  Last, the
blocked forward kernel's channels-first result (``forward_adjoint``) stored by each
item from its cache (``fused``) against the sums stored channels last and copied
channels first after the kernel (``copy after``, as before), alternating; and the
kernel reading a channels-first ``grad``'s planes where they are (``blocked-planes``)
against its channels-last copy (``blocked``), on those layers and on more of few and
many channels, each along lines and ``blocked`` also over a copy with zeros around it
(``blocked, padded``).  Prints the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._kernels._numba import int8, transpose  # noqa: E402
from convtranspose._kernels._numba.forward import forward_adjoint  # noqa: E402
from convtranspose._plan.rules import AxisPlan  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose._runtime.target import host  # noqa: E402

# (name, data shape, filter shape, stride, pad) of ``ct.convolution``
LAYERS = [
    ("stem 7x7 s2 3->64 224x224", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    ("ResNet 3x3 s2 128->256 28x28", (1, 128, 28, 28), (256, 128, 3, 3), 2, 1),
    ("DCGAN 4x4 s2 256->512 N8 16x16", (8, 256, 16, 16), (512, 256, 4, 4), 2, 1),
    ("3x3 s2 32->64 N4 112x112", (4, 32, 112, 112), (64, 32, 3, 3), 2, 1),
]
#: The rule before the machine figure: split from 4 MiB, whatever the threads' state.
_FIXED_BYTES = 1 << 22


def _fixed_threads(nbytes: int, threads: int) -> int:
    return threads if nbytes >= _FIXED_BYTES else 1


def _split_table() -> dict:
    target = host()
    measured = transpose.measure_copy_split(target)
    if measured is None:
        raise SystemExit("numba's threads did not run the copies (one thread, or no "
                         "thread-safe threading layer): nothing to measure")
    print("copy      alone  split(rested)  alone(warm)  split(warm)   ms")
    for index, size in enumerate(measured["sizes"]):
        print(f"{size >> 10:6d} KiB " + "  ".join(
            f"{measured[way][index] * 1e3:10.4f}"
            for way in ("alone", "cold", "alone_warm", "warm")))
    found = transpose.split_sizes(measured)
    derived = {"rested": found[False], "warm": found[True]}
    print(f"split from: {derived} bytes (None: at no size measured)")
    return {"measured": measured, "split_from": derived}


def _layer_rows(repeats: int) -> list:
    rng = np.random.default_rng(0)
    rules = {"measured": transpose.copy_threads, "fixed": _fixed_threads}
    rows = []
    for name, data_shape, filter_shape, stride, pad in LAYERS:
        data = rng.standard_normal(data_shape).astype(np.float32)
        weight = rng.standard_normal(filter_shape).astype(np.float32)

        def call():
            ct.convolution(data, weight, strides=stride, pads_begin=pad, pads_end=pad)

        rows.append(_alternate(name, call, rules, repeats))
    return rows


def _alternate(name: str, call, rules: dict, repeats: int) -> dict:
    call()  # plans the layer

    def under(function):
        def run():
            transpose.copy_threads = int8.copy_threads = function
            call()
        return run

    row = _alternating({rule: under(function) for rule, function in rules.items()}, repeats)
    transpose.copy_threads = int8.copy_threads = rules["measured"]
    row["ratio"] = row["measured"] / row["fixed"]
    print(f"{name:34s} measured {row['measured']:7.3f}  fixed {row['fixed']:7.3f}  "
          f"measured/fixed {row['ratio']:.2f}", flush=True)
    return dict(layer=name, **row)


def _fused_rows(repeats: int) -> list:
    target, dtype = host(), np.dtype(np.float32)
    rng = np.random.default_rng(1)
    rows = []
    for name, data_shape, filter_shape, stride, pad in LAYERS:
        axes, grad, weights = _adjoint_operands(rng, data_shape, filter_shape, stride, pad,
                                                np.float32)
        memo: dict = {}

        def copy_after():
            last = transpose.channels_last_copy(grad, dtype, target)
            result = forward_adjoint(last, weights, axes, True, dtype, memo, target)
            transpose.channels_first_copy(result, dtype, target)

        row = _alternating({"fused": lambda: forward_adjoint(grad, weights, axes, False, dtype,
                                                             memo, target),
                            "copy after": copy_after}, repeats)
        row["ratio"] = row["fused"] / row["copy after"]
        print(f"{name:34s} fused {row['fused']:7.3f}  copy after {row['copy after']:7.3f}  "
              f"fused/copy after {row['ratio']:.2f}", flush=True)
        rows.append(dict(layer=name, **row))
    return rows


#: More layers for the planes: (name, data shape, filter shape, stride, pad, dtype).
PLANES_LAYERS = [(*layer, np.float32) for layer in LAYERS] + [
    ("gray 3x3 s2 1->32 N4 128x128", (4, 1, 128, 128), (32, 1, 3, 3), 2, 1, np.float32),
    ("3x3 s2 8->32 N2 112x112", (2, 8, 112, 112), (32, 8, 3, 3), 2, 1, np.float32),
    ("3x3 s2 16->32 N2 112x112", (2, 16, 112, 112), (32, 16, 3, 3), 2, 1, np.float32),
    ("3x3 s2 256->512 14x14", (1, 256, 14, 14), (512, 256, 3, 3), 2, 1, np.float32),
    ("3x3 s2 512->512 N4 14x14", (4, 512, 14, 14), (512, 512, 3, 3), 2, 1, np.float32),
    ("stem float64", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3, np.float64),
    ("3x3 s2 32->64 N2 56x56 float64", (2, 32, 56, 56), (64, 32, 3, 3), 2, 1, np.float64),
]


def _adjoint_operands(rng, data_shape, filter_shape, stride, pad, dtype):
    """The forward convolution as the data adjoint: ``grad`` is the data, the weights
    ``(1, Ci, Co, K, K)`` with ``Ci`` the convolution's output channels."""
    size, kernel = data_shape[-1], filter_shape[-1]
    out_size = (size + 2 * pad - kernel) // stride + 1
    axes = (AxisPlan(out_size, kernel, stride, 1, pad, size),) * 2
    grad = rng.standard_normal(data_shape).astype(dtype)
    weights = rng.standard_normal((1,) + filter_shape).astype(dtype)
    return axes, grad, weights


def _planes_rows(repeats: int) -> list:
    target = host()
    rng = np.random.default_rng(2)
    rows = []
    for name, data_shape, filter_shape, stride, pad, dtype in PLANES_LAYERS:
        axes, grad, weights = _adjoint_operands(rng, data_shape, filter_shape, stride, pad,
                                                dtype)
        memo: dict = {}
        ways = {"blocked-planes": (False, True), "blocked": (False, False),
                "blocked, padded": (True, False)}
        calls = {way: (lambda padded=padded, planes=planes: forward_adjoint(
            grad, weights, axes, False, np.dtype(dtype), memo, target, padded, planes))
            for way, (padded, planes) in ways.items()}
        row = _alternating(calls, repeats)
        row["ratio"] = row["blocked-planes"] / min(v for k, v in row.items()
                                                    if k != "blocked-planes")
        print(f"{name:34s} " + "  ".join(f"{way} {ms:7.3f}" for way, ms in row.items()
                                          if way != "ratio")
              + f"  planes/best copy {row['ratio']:.2f}", flush=True)
        rows.append(dict(layer=name, **row))
    return rows


def _alternating(calls: dict, repeats: int) -> dict:
    """Median ms of each of ``calls``, alternating round by round, each call after an
    untimed one (no pause between them)."""
    samples = alternating_rounds(calls, repeats, pause=0.0)
    return {name: statistics.median(values) * 1e3 for name, values in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", help="write the tables and the CPU's name to this file")
    options = parser.parse_args(argv)
    print(f"{cpu_model_name()}, {host().threads} threads, float32")
    record = {"cpu": cpu_model_name(), "threads": host().threads, **_split_table()}
    record["layers"] = _layer_rows(options.repeats)
    record["fused_store"] = _fused_rows(options.repeats)
    record["source_planes"] = _planes_rows(options.repeats)
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump(record, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
