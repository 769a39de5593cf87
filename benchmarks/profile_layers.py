"""Where each benchmark layer's time goes: ``python benchmarks/profile_layers.py [--layers WORDS]
[--random SEED] [--prepared]``.

For every float32/float16/bfloat16 layer of the benchmark suite (``--random``: of the
random suite of that seed; in either, those whose names contain one of ``--layers``'
comma-separated words), called through its array function (``--prepared``: through a
prepared layer made first, as ``convtranspose bench --prepared`` calls it; outputs
from 1 MiB written into one array, as the benchmark writes them), prints a Markdown
row: the
algorithm; the median time of the public call back to back, back to back on a one-thread
target (BLAS keeps its own threads), and after a pause (as the
benchmark's rounds); the useful multiply-adds' rate back to back and its share of the
machine's FMA peak on all threads (:func:`convtranspose._cli.bench.fma_peak_flops`; "-"
without numba); and how cProfile splits the calling thread's time over ten back-to-back
calls.  Helper threads are not profiled: their share shows as the caller waiting for
them.  The last column is the share of the call spent outside the compiled kernels,
BLAS and the wait for helpers (Python, the kernels' launches, NumPy's copies, casts and
fills), measured within each profiled batch: its time less what the profiler found in
those (it times them as they run) and less the profiler's own cost (its measured cost
per call it records, times the calls it recorded: that cost falls on the Python
callers), over its time less that cost; the median of five batches.  Comparing a
profiled batch with a plain one instead read 0-16% on an AMD EPYC Zen 4 VM for the same
layers, the noise between two batches above the 5% being measured.  Writes nothing.

As ``convtranspose bench``, it plans without the stored wisdom and compiles every
candidate's kernels in this process before the timed calls (a layer timed while they
compile in the background runs a provisional choice: a grouped float16 layer's
``gemm-ncx`` at 139 ms against ``direct``'s 28 on an AMD EPYC Zen 1).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import statistics
import sys
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import convtranspose as ct  # noqa: E402
from convtranspose._cli import bench as _bench  # noqa: E402

#: (category, test on cProfile's (file name, function name)), first match wins.
CATEGORIES = (
    ("BLAS", lambda file, name: name == "gemm" and file.endswith("blas.py")
     or name == "threaded_matmul" or "matmul" in name),
    ("copies", lambda file, name: name == "copy" and file.endswith("threads.py")),
    ("adds", lambda file, name: name == "add" and file.endswith("threads.py")),
    ("compiled kernels", lambda file, name: _compiled(file, name)),
    ("kernel launches", lambda file, name: "_numba" in file),
    ("zeroing", lambda file, name: "fill" in name or "zeros" in name),
    ("waiting for helpers", lambda file, name: "acquire" in name),
    ("casts", lambda file, name: file.endswith("casts.py") or "astype" in name),
)
#: The categories of compiled work: the rest of a call is outside its kernels.
KERNELS = ("BLAS", "compiled kernels", "waiting for helpers")


@functools.lru_cache(maxsize=None)
def _compiled(file: str, name: str) -> bool:
    """Whether cProfile's entry is a numba-compiled function: numba reports each call of
    one to the profiler under its Python source, a module of the library's (then the
    module's attribute of that name is a dispatcher) or a kernel it generated into its
    cache folder."""
    if f"{os.sep}kernels{os.sep}numba-" in file:
        return True
    module = next((module for module in list(sys.modules.values())
                   if getattr(module, "__file__", None) == file), None)
    return hasattr(getattr(module, name, None), "py_func")


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


def _outside_share(run, rounds: int = 5) -> tuple[float, dict[str, float], float]:
    """:func:`_split`'s ``(ms, shares)`` of the median batch and the percentage of a
    call spent outside the compiled work (:data:`KERNELS`), measured within each of
    ``rounds`` profiled batches of about 0.2 s (the module docstring): the median."""
    calls = max(5, min(200, int(0.2 / (_median_ms(run, 0.0) / 1e3))))
    cost = _profiler_cost_ms()
    splits, outside = [], []
    for _ in range(rounds):
        total, shares, events = _split(run, calls)
        own = min(total, events * cost)
        inside = sum(ms for label, ms in shares.items() if label in KERNELS)
        outside.append(100 * max(0.0, total - own - inside) / max(total - own, 1e-9))
        splits.append((total, shares))
    total, shares = sorted(splits, key=lambda split: split[0])[len(splits) // 2]
    return total, shares, statistics.median(outside)


@functools.lru_cache(maxsize=None)
def _profiler_cost_ms(calls: int = 50_000) -> float:
    """What cProfile adds per call it records (ms): a loop of calls of an empty
    function, profiled against plain, the least of five of each."""
    def empty():
        pass

    def loop():
        for _ in range(calls):
            empty()

    plain, profiled = [], []
    for _ in range(5):
        start = time.perf_counter()
        loop()
        plain.append(time.perf_counter() - start)
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.runcall(loop)
        profiled.append(time.perf_counter() - start)
    return max(0.0, min(profiled) - min(plain)) / calls * 1e3


def _split(run, calls: int = 10) -> tuple[float, dict[str, float], float]:
    """``(ms per call, {category: ms per call}, calls recorded per call)`` of the calling
    thread, by cProfile."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        run()
    profile.disable()
    shares: dict[str, float] = {}
    events = 0
    for (file, _, name), entry in pstats.Stats(profile).stats.items():
        category = next((label for label, test in CATEGORIES if test(file, name)), "other")
        shares[category] = shares.get(category, 0.0) + entry[2] / calls * 1e3
        events += entry[1]
    return sum(shares.values()), shares, events / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--pause", type=float, default=_bench.SETTLE_SECONDS,
                        help="seconds slept before each paused call")
    parser.add_argument("--random", type=int, default=None, metavar="SEED",
                        help="the random suite of this seed instead of the fixed suite")
    parser.add_argument("--prepared", action="store_true",
                        help="call each layer through a prepared layer (ct.prepare)")
    args = parser.parse_args(argv)
    words = [word for word in args.layers.split(",") if word]
    layers = _bench.SUITE if args.random is None else _bench.random_layers(args.random)
    peak = _bench.fma_peak_flops()
    print("| layer | algorithm | back to back ms | one thread ms | paused ms | useful GFLOP/s "
          "| % of FMA peak | profiled ms | calling thread | outside kernels |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for layer in layers:
        if words and not any(word in layer.label for word in words):
            continue
        run, _ = _bench.run_ours(layer, _bench.make_inputs(layer), reuse_output=True,
                                 prepared=args.prepared)
        for _ in range(3):  # plans, compiles numba kernels, fills the filter memo
            run()
        algorithm = _bench.algorithm_run(layer)
        total, shares, outside = _outside_share(run)
        split = ", ".join(f"{label} {100 * ms / total:.0f}%" for label, ms in
                          sorted(shares.items(), key=lambda item: -item[1])
                          if ms > 0.03 * total)
        back_to_back = _median_ms(run, 0.0)
        rate = layer.useful_flops / back_to_back / 1e6  # GFLOP/s
        factor = _bench.bfloat16_factor() if layer.dtype == "bfloat16" else 1.0  # vdpbf16ps
        share = "-" if peak is None else f"{100 * rate * 1e9 / (peak * factor):.0f}%"
        print(f"| {layer.label} | {algorithm} | {back_to_back:.3g} | {_one_thread_ms(run):.3g} | "
              f"{_median_ms(run, args.pause):.3g} | {rate:.3g} | {share} | {total:.3g} | "
              f"{split} | {outside:.1f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
