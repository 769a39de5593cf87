"""Depthwise and grouped quantized layers: the integer kernel, the float32 passes, and
the library's choice between them, in one process.

    python benchmarks/grouped_quantized.py [--rounds 15] [--out FILE]

Per layer, back-to-back calls of ``qlinear_conv_transpose`` (uint8 data, int8
weights) in alternating rounds: as the library runs it (``choice``), with the blocked
integer kernel forced (``integer``: every layer's lanes taken to pay, planning at
``estimate`` so that nothing is timed), with the exact float32 passes forced
(``float32 passes``), and ``onnx_conv_transpose`` on the same layer dequantized to
float32 (``float32 layer``).  Then ONNX's requantization pass alone on int32 sums of
1-4 MiB, on one thread and split between two whatever their size
(``requantization``).  Prints the median
milliseconds with the CPU and the load average; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
# The warm-up calls compile every kernel they time here, not in a background process.
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._frontends import quantized  # noqa: E402

#: (name, N, C, M, groups, input size, kernel, stride, pad).
LAYERS = [
    ("depthwise 256 32x32 k3 s1 p1", 1, 256, 256, 256, 32, 3, 1, 1),
    ("depthwise 128 64x64 k4 s2 p1", 1, 128, 128, 128, 64, 4, 2, 1),
    ("groups of 8: 256->256 g32 32x32 k4 s2 p1", 1, 256, 256, 32, 32, 4, 2, 1),
    ("groups of 64: 256->256 g4 16x16 k4 s2 p1", 1, 256, 256, 4, 16, 4, 2, 1),
    ("dense 256->128 16x16 k4 s2 p1 N4", 4, 256, 128, 1, 16, 4, 2, 1),
]


@contextlib.contextmanager
def _lanes_pay(value):
    """Every layer's integer lanes taken to pay (True) or not (False); as is for None."""
    kept = quantized.lanes_pay
    if value is not None:
        quantized.lanes_pay = lambda *arguments: value
    try:
        yield
    finally:
        quantized.lanes_pay = kept


def _calls(n, c, m, groups, size, k, s, p, rng):
    """The timed calls of one layer, by name."""
    x = rng.integers(0, 256, (n, c, size, size)).astype(np.uint8)
    w = rng.integers(-127, 128, (c, m // groups, k, k)).astype(np.int8)
    attributes = dict(strides=[s, s], pads=[p] * 4, group=groups)
    operands = (np.float32(0.02), np.uint8(128), w, np.float32(0.01), np.int8(0),
                np.float32(0.5), np.uint8(128))
    real_x = (x.astype(np.float32) - 128) * np.float32(0.02)
    real_w = w.astype(np.float32) * np.float32(0.01)

    def qlinear(pay, planning=None):
        def call():
            with _lanes_pay(pay), (ct.use_planning(planning) if planning
                                   else contextlib.nullcontext()):
                return ct.qlinear_conv_transpose(x, *operands, **attributes)
        return call

    return {"choice": qlinear(None), "integer": qlinear(True, "estimate"),
            "float32 passes": qlinear(False),
            "float32 layer": lambda: ct.onnx_conv_transpose(real_x, real_w, **attributes)}


def _median_ms(call, count: int = 5) -> float:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _requantization_threads(rounds: int) -> dict:
    """Median ms of the compiled ONNX requantization of int32 sums ``(N, M, Y, X)`` on
    one thread and on two (split whatever its size), alternating, per shape."""
    from convtranspose._kernels import requantize
    from convtranspose._kernels._numba import transpose

    rng = np.random.default_rng(1)
    table = {}
    for shape in [(1, 256, 32, 32), (4, 128, 32, 32), (1, 256, 64, 64)]:
        acc = rng.integers(-300000, 300000, shape).astype(np.int32)
        multiplier = (rng.random(shape[1]) * 1e-3).astype(np.float32)
        times: dict = {1: [], 2: []}
        rule = transpose.copy_threads  # the pass's split, forced either way here
        for _ in range(rounds):
            for threads, kept in times.items():
                transpose.copy_threads = lambda nbytes, asked: asked
                try:
                    kept.append(_median_ms(lambda threads=threads: requantize.requantized(
                        acc, multiplier, np.float32(0.5), np.uint8(128), threads), 20))
                finally:
                    transpose.copy_threads = rule
        name = f"{shape} int32 ({acc.nbytes >> 10} KiB)"
        table[name] = {f"{threads} thread(s)": statistics.median(kept)
                       for threads, kept in times.items()}
        print(f"requantization {name:32s} " + "  ".join(
            f"{label} {ms:6.3f}" for label, ms in table[name].items()), flush=True)
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", help="write the medians, CPU and load to this JSON file")
    args = parser.parse_args(argv)
    from convtranspose._cli.bench import cpu_model

    rng = np.random.default_rng(0)
    table = {}
    for name, *shape in LAYERS:
        calls = _calls(*shape, rng)
        for call in calls.values():  # set up, measure and compile outside the rounds
            for _ in range(3):
                call()
        rounds = {label: [] for label in calls}
        for _ in range(args.rounds):
            for label, call in calls.items():
                rounds[label].append(_median_ms(call))
        table[name] = {label: statistics.median(times) for label, times in rounds.items()}
        print(f"{name:42s} " + "  ".join(f"{label} {ms:7.3f}" for label, ms
                                          in table[name].items()), flush=True)
    requantization = _requantization_threads(args.rounds)
    report = {"cpu": cpu_model(), "load_average": os.getloadavg(), "median_ms": table,
              "requantization_median_ms": requantization}
    print(f"cpu: {report['cpu']}; load average {report['load_average']}")
    if args.out:
        with open(args.out, "w") as stream:
            json.dump(report, stream, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
