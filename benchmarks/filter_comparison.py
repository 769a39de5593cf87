"""What the weights memo's check of a caller's filter costs: comparing a filter with the
memo's copy of it, for filters of 8 KiB to 32 MiB (float32, C order).

Prints one row per size: the median milliseconds of NumPy's comparison of the two as
unsigned integers (the memo's check for filters of different layouts), of the two as
bytes objects (its check up to the level-1 data cache's size), of the numba loop
(``memo.compiled_equal``, its check of dense filters below 1 MiB), of ``memcmp`` as
``memo.same_bits`` calls it, and the same under ``ct.num_threads`` of one thread and of
every thread (in pieces from 8 MiB; the context's own cost included), and their ratios
to NumPy's, with the CPU and the 1-minute load average.  The six are timed in
alternating rounds.  The kept copy is read-only, as the memo's is.  ``--out`` writes
the rows as JSON.

    python benchmarks/filter_comparison.py [--rounds 15] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

import convtranspose as ct
from convtranspose._cli.bench import cpu_model
from convtranspose._runtime import memo

SIZES_KIB = (8, 16, 32, 64, 96, 128, 256, 512, 1024, 4096, 8192, 16384, 32768)


def _numpy_equal(kept: np.ndarray, filter: np.ndarray) -> bool:
    return np.array_equal(kept.view(np.uint32), filter.view(np.uint32))


def _bytes_equal(kept: np.ndarray, filter: np.ndarray) -> bool:
    return kept.tobytes() == filter.tobytes()


def _memcmp_on(threads: int):
    def compare(kept, filter):
        with ct.num_threads(threads):
            return memo.memory_equal(kept, filter)
    return compare


def measure(rounds: int) -> list[dict]:
    threads = ct.get_num_threads()
    ways = {"numpy": _numpy_equal, "bytes": _bytes_equal, "numba": memo.compiled_equal,
            "memcmp": memo.memory_equal,
            "memcmp, 1 thread": _memcmp_on(1), f"memcmp, {threads} threads": _memcmp_on(threads)}
    rows = []
    for kib in SIZES_KIB:
        filter = np.random.default_rng(kib).standard_normal((kib << 10) // 4,
                                                            dtype=np.float32)
        kept = filter.copy()
        kept.flags.writeable = False
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, compare in ways.items():
                start = time.perf_counter()
                assert compare(kept, filter)
                times[name].append((time.perf_counter() - start) * 1e3)
        ms = {name: round(statistics.median(values), 4) for name, values in times.items()}
        numpy_ms = ms["numpy"]
        rows.append({"KiB": kib, "ms": ms,
                     "numpy_over": {name: round(numpy_ms / value, 2)
                                    for name, value in ms.items() if name != "numpy"}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args()
    rows = measure(args.rounds)
    load = os.getloadavg()[0]
    print(f"CPU: {cpu_model()}, {ct.get_num_threads()} threads, load {load:.2f};"
          f" medians of {args.rounds} alternating rounds, milliseconds")
    for row in rows:
        cells = " | ".join(f"{name} {value}" for name, value in row["ms"].items())
        speedups = ", ".join(f"{name} {value}x" for name, value in row["numpy_over"].items())
        print(f"| {row['KiB']} KiB | {cells} | numpy over: {speedups} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"machine": cpu_model(), "threads": ct.get_num_threads(),
                       "load_average": load, "rounds": args.rounds, "rows": rows},
                      file, indent=1)


if __name__ == "__main__":
    main()
