"""``direct-blocked``'s channel passes on two threads: whole passes per thread on the
library's pool against each pass's lines shared on numba's native threads.

    python benchmarks/passes_on_threads.py [--rounds 9] [--out FILE]

For float32 layers of several channel passes (``direct-blocked`` forced) and the int8
DCGAN layer of the quantized suite (``qlinear_conv_transpose``, whose sums run the same
kernel after a words pass on numba's threads), times in alternating rounds, in one
process: the passes split between the threads on the pool (``pool``, the split taken
where numba's threads cannot run) and on numba's threads (``native``), each call

- ``alone``: after a pause of 0.1 s and an untimed call, as the benchmark times;
- ``after a native loop``: right after a small parallel loop on numba's threads (as a
  layer of a model runs right after another), whose workers then spin for a while.

Prints the median milliseconds of each with the CPU; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")
os.environ["CONVTRANSPOSE_ALGORITHM"] = "direct-blocked"  # the float32 layers' passes

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench import quantized  # noqa: E402
from convtranspose._kernels._numba import blocked, launch  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

# (name, data shape, filter shape (Ci, Co, K...), stride, pad, channels last)
LAYERS = [
    ("N1 768->96 8x8 k4 s2 p1", (1, 768, 8, 8), (768, 96, 4, 4), 2, 1, False),
    ("N4 1024->80 8x8 k4 s2 p1 NXC", (4, 1024, 8, 8), (1024, 80, 4, 4), 2, 1, True),
    ("N1 256->256 14x14 k7 s1 p3", (1, 256, 14, 14), (256, 256, 7, 7), 1, 3, False),
    ("N4 128->128 14x14 k7 s1 p3 NXC", (4, 128, 14, 14), (128, 128, 7, 7), 1, 3, True),
    ("U-Net N1 1024->512 16x16 k2 s2", (1, 1024, 16, 16), (1024, 512, 2, 2), 2, 0, False),
    ("DCGAN N1 512->256 8x8 k4 s2 p1", (1, 512, 8, 8), (512, 256, 4, 4), 2, 1, False),
]


def _float_call(data_shape, filter_shape, stride, pad, channels_last):
    """A prepared layer's call (``ct.conv_transpose``, IOX or XIO filter)."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal(data_shape, dtype=np.float32)
    weights = rng.standard_normal(filter_shape, dtype=np.float32)
    rank = len(data_shape) - 2
    arguments = dict(strides=[stride] * rank, pads_begin=[pad] * rank, pads_end=[pad] * rank,
                     data_format="NCX", filter_format="IOX")
    if channels_last:
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
        weights = np.ascontiguousarray(np.moveaxis(weights, (0, 1), (-2, -1)))  # XIO
        arguments.update(data_format="NXC", filter_format="XIO")
    layer = ct.prepare(ct.conv_transpose, filter=weights, **arguments)
    return lambda: layer(data)


def _int8_call() -> tuple:
    layer = quantized.QUANTIZED_SUITE[0]  # DCGAN N4 256->128 16x16 k4 s2 p1
    return layer.name + " int8 (qlinear)", quantized.ours_qlinear(
        layer, quantized.quantized_inputs(layer), prepared=True)


def _split_on_pool(on_pool: bool) -> None:
    """The passes split between the threads on the pool (the rule where numba's threads
    cannot run), or on numba's threads."""
    blocked.native_threads = (lambda threads: False) if on_pool else launch.native_threads


def _timed(call, before) -> float:
    time.sleep(0.1)
    call()
    if before is not None:
        before()
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def measure(rounds: int) -> list[dict]:
    calls = [(name, _float_call(*shape)) for name, *shape in LAYERS]
    calls.append(_int8_call())
    # A layer whose one pass shares its lines on numba's threads: a native loop.
    small = _float_call((4, 32, 16, 16), (32, 32, 3, 3), 2, 1, False)
    cases = {"alone": None, "after a native loop": small}
    rows = []
    for name, call in calls:
        samples: dict[str, list[float]] = {}
        for on_pool in (True, False):
            _split_on_pool(on_pool)
            call()
            small()
        for _ in range(rounds):
            for mode in ("pool", "native"):
                _split_on_pool(mode == "pool")
                for case, before in cases.items():
                    samples.setdefault(f"{mode}, {case}", []).append(_timed(call, before))
        _split_on_pool(False)
        ms = {key: round(statistics.median(values), 3) for key, values in samples.items()}
        rows.append({"layer": name, "ms": ms})
        print(f"| {name} | " + " | ".join(f"{key} {value}" for key, value in ms.items())
              + " |", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args()
    print(f"CPU: {cpu_model_name()}, {ct.get_num_threads()} threads; medians of"
          f" {args.rounds} alternating rounds, milliseconds")
    rows = measure(args.rounds)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"machine": cpu_model_name(), "threads": ct.get_num_threads(),
                       "load_average": os.getloadavg()[0], "rounds": args.rounds,
                       "rows": rows}, file, indent=1)


if __name__ == "__main__":
    main()
