"""Where each benchmark layer's time goes: ``python benchmarks/profile_layers.py [--layers WORDS]``.

For every float32/float16/bfloat16 layer of the benchmark suite (or those whose names
contain one of ``--layers``' comma-separated words), prints a Markdown row: the
algorithm; the median time of the public call back to back, back to back on a one-thread
target (BLAS keeps its own threads), and after a pause (as the
benchmark's rounds); the useful multiply-adds' rate back to back and its share of the
machine's FMA peak on all threads (:func:`convtranspose._cli.bench.fma_peak_flops`; "-"
without numba); and how cProfile splits the calling thread's time over ten back-to-back
calls.  Helper threads are not profiled: their share shows as the caller waiting for
them.  Writes nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time

import convtranspose as ct
from convtranspose._cli import bench as _bench

#: (category, test on cProfile's (file name, function name)), first match wins.
CATEGORIES = (
    ("BLAS", lambda file, name: name == "gemm" and file.endswith("blas.py")
     or name == "threaded_matmul" or "matmul" in name),
    ("copies", lambda file, name: name == "copy" and file.endswith("threads.py")),
    ("adds", lambda file, name: name == "add" and file.endswith("threads.py")),
    ("numba", lambda file, name: "_numba" in file),
    ("zeroing", lambda file, name: "fill" in name or "zeros" in name),
    ("waiting for helpers", lambda file, name: "acquire" in name),
    ("casts", lambda file, name: file.endswith("casts.py") or "astype" in name),
)


def _median_ms(run, pause: float, repeat: int = 9) -> float:
    times = []
    for _ in range(repeat):
        time.sleep(pause)
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _one_thread_ms(run) -> float:
    """Back-to-back median on a one-thread target (BLAS keeps its own threads)."""
    with ct.use_target(ct.host_target().replace(threads=1)):
        return _median_ms(run, 0.0)


def _split(run, calls: int = 10) -> tuple[float, dict[str, float]]:
    """(ms per call, {category: ms per call}) of the calling thread, by cProfile."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        run()
    profile.disable()
    shares: dict[str, float] = {}
    for (file, _, name), entry in pstats.Stats(profile).stats.items():
        category = next((label for label, test in CATEGORIES if test(file, name)), "other")
        shares[category] = shares.get(category, 0.0) + entry[2] / calls * 1e3
    return sum(shares.values()), shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--pause", type=float, default=_bench.SETTLE_SECONDS,
                        help="seconds slept before each paused call")
    args = parser.parse_args(argv)
    words = [word for word in args.layers.split(",") if word]
    peak = _bench.fma_peak_flops()
    print("| layer | algorithm | back to back ms | one thread ms | paused ms | useful GFLOP/s "
          "| % of FMA peak | profiled ms | calling thread |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layer in _bench.SUITE:
        if words and not any(word in layer.label for word in words):
            continue
        run, _ = _bench.run_ours(layer, _bench.make_inputs(layer))
        run()  # plans, compiles numba kernels, prepares tiny layers, fills the filter memo
        algorithm = _bench.algorithm_run(layer)
        total, shares = _split(run)
        split = ", ".join(f"{label} {100 * ms / total:.0f}%" for label, ms in
                          sorted(shares.items(), key=lambda item: -item[1])
                          if ms > 0.03 * total)
        back_to_back = _median_ms(run, 0.0)
        rate = layer.useful_flops / back_to_back / 1e6  # GFLOP/s
        factor = _bench.bfloat16_factor() if layer.dtype == "bfloat16" else 1.0  # vdpbf16ps
        share = "-" if peak is None else f"{100 * rate * 1e9 / (peak * factor):.0f}%"
        print(f"| {layer.label} | {algorithm} | {back_to_back:.3g} | {_one_thread_ms(run):.3g} | "
              f"{_median_ms(run, args.pause):.3g} | {rate:.3g} | {share} | {total:.3g} | "
              f"{split} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
