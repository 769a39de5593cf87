"""Running the benchmark: every layer checked against every peer, then timed in
alternating rounds; ``convtranspose bench``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict

import numpy as np

from ..._choose import planning
from ..._plan.problem import Problem
from ..._runtime import blas as _blas
from ..._runtime.cache import atomic_write
from ..._runtime.config import BACKGROUND_COMPILE_ENV, WISDOM_ENV
from ..._runtime.target import host
from ..guard import error
from . import quantized
from .machine import (
    FLOOR_MIN_MS,
    copy_bandwidth,
    cpu_model,
    floor_ms,
    fma_peak_flops,
    peak_extra_bytes,
)
from .peers import PEERS, Unsupported, installed_peers, run_ours
from .planning import planning_columns, planning_library
from .random_suite import FAMILIES, MAX_ELEMENTS, MAX_FLOPS, MIN_COUNT, family_of, random_layers
from .report import CORE_ENV, blas_description, markdown, plot
from .suite import (
    SETTLE_SECONDS,
    SUITE,
    THREADS,
    Layer,
    kernel_weights_shape,
    layer_plan_axes,
    make_inputs,
    numpy_dtype,
)


def check_close(name: str, layer: Layer, ours: np.ndarray, theirs: np.ndarray) -> float:
    """Relative max difference; raises AssertionError on a shape or value mismatch."""
    if ours.shape != theirs.shape:
        raise AssertionError(f"{layer.label}: {name} shape {theirs.shape} != ours {ours.shape}")
    scale = float(np.max(np.abs(ours))) or 1.0
    error = float(np.max(np.abs(ours - theirs))) / scale if ours.size else 0.0
    tolerance = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 6e-2}[layer.dtype]
    if not error <= tolerance:
        raise AssertionError(
            f"{layer.label}: {name} differs from convtranspose by {error:.3g} (relative to the"
            f" largest output value; tolerance {tolerance:g})")
    return error


def algorithm_run(layer: Layer) -> str:
    """The algorithm that ran ``layer``'s timed calls: planning's decision, which the
    calls took (measured at the first one, or from wisdom), not the estimate alone."""
    problem = Problem(layer.batch, tuple(layer_plan_axes(layer)), kernel_weights_shape(layer),
                      layer.layout == "NXC", np.dtype(np.float32),
                      None if layer.dtype == "float32" else np.dtype(numpy_dtype(layer.dtype)))
    return planning.planned_choice(problem, host()).runs


def forced(algorithm: str, call):
    """``call`` with ``CONVTRANSPOSE_ALGORITHM`` set to ``algorithm`` around it (array
    functions and prepared layers read it on every call), for scripts that time one
    algorithm against another."""
    def run():
        previous = os.environ.get("CONVTRANSPOSE_ALGORITHM")
        os.environ["CONVTRANSPOSE_ALGORITHM"] = algorithm
        try:
            return call()
        finally:
            if previous is None:
                del os.environ["CONVTRANSPOSE_ALGORITHM"]
            else:
                os.environ["CONVTRANSPOSE_ALGORITHM"] = previous
    return run


def forced_row(layer: Layer, algorithms, peers: list[str], repeat: int, fma, bandwidth,
               prepared: bool = False) -> dict:
    """One table row of a script that times algorithms against each other: the median
    time of each of ``algorithms`` (forced; with ``prepared``, calls of a prepared layer
    writing into one output array) and of each of ``peers`` (alternating rounds), the
    layer's floor, the 1-minute load average around it, and each algorithm's largest
    relative difference from the best peer's result."""
    inputs = make_inputs(layer)
    runners, results = {}, {}
    for name in algorithms:
        call, to_ncx = forced(name, lambda: run_ours(layer, inputs, reuse_output=prepared,
                                                     prepared=prepared))()
        runners[name] = forced(name, call)
        results[name] = np.array(to_ncx(runners[name]()))
    for peer in peers:
        try:
            run, to_ncx = PEERS[peer](layer, inputs)
            results[peer] = np.asarray(to_ncx(run()))
        except Exception as failure:  # a peer that cannot run this layer: no column
            print(f"  {peer} skipped: {type(failure).__name__}", flush=True)
            continue
        runners[peer] = run
    load = os.getloadavg()[0]
    samples = alternating_rounds(runners, repeat, warmup=1)
    times = {name: 1e3 * statistics.median(values) for name, values in samples.items()}
    peer_times = {name: t for name, t in times.items() if name in peers}
    best = min(peer_times, key=peer_times.get) if peer_times else None
    errors = {name: check_close(name, layer, results[best], results[name])
              for name in algorithms} if best else {}
    return {"layer": layer.label, "times_ms": times, "best_peer": best,
            "floor_ms": floor_ms(layer, fma, bandwidth), "load_before": load,
            "load_after": os.getloadavg()[0], "max_relative_error": errors}


def alternating_rounds(runners: dict, repeat: int, warmup: int = 0, budget: float = float("inf"),
                       pause: float | None = None) -> dict:
    """Seconds per call of each runner over ``repeat`` rounds that alternate between them:
    in every round each runner gets a pause (``pause``, default :data:`SETTLE_SECONDS`)
    and an untimed call before its timed one.  ``warmup`` untimed calls each first; no
    new round after ``budget`` seconds once three are done."""
    pause = SETTLE_SECONDS if pause is None else pause
    samples = {name: [] for name in runners}
    for name, function in runners.items():
        for _ in range(warmup):
            function()
    started = time.perf_counter()
    for round_index in range(repeat):
        for name, function in runners.items():
            time.sleep(pause)
            function()
            start = time.perf_counter()
            function()
            samples[name].append(time.perf_counter() - start)
        if round_index >= 2 and time.perf_counter() - started > budget:
            break
    return samples


def bench_layer(layer: Layer, peers: list[str], repeat: int, warmup: int, budget: float,
                fma_flops: float | None = None, bandwidth: float | None = None,
                planning: bool = False, prepared: bool = False) -> dict:
    """One row: medians per implementation, memory, (given the machine's ``fma_flops``
    and copy ``bandwidth``) the floor that bounds every implementation and our share of
    it, and with ``planning`` the planning columns (:func:`.planning.planning_columns`);
    with ``prepared`` ours through a prepared layer (:func:`.peers.run_ours`)."""
    inputs = make_inputs(layer)
    run, to_ncx = run_ours(layer, inputs, reuse_output=True, prepared=prepared)
    reference = np.array(to_ncx(run()))  # a copy: later calls write into the same array
    row: dict = {"layer": layer.label, "config": asdict(layer), "flops": layer.flops, "times_ms": {},
                 "max_relative_error": {}, "skipped": {}}
    runners = {"convtranspose": run}
    for peer in peers:
        try:
            peer_run, peer_to_ncx = PEERS[peer](layer, inputs)
            result = peer_to_ncx(peer_run())
        except Unsupported as reason:
            row["skipped"][peer] = str(reason)
            continue
        except Exception as error:  # a peer that cannot build or run this layer
            row["skipped"][peer] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            print(f"  {peer} skipped on {layer.label}: {row['skipped'][peer]}", file=sys.stderr)
            continue
        row["max_relative_error"][peer] = check_close(peer, layer, reference, result)
        runners[peer] = peer_run
    # Alternate the implementations round by round so that machine noise hits all alike,
    # but let each start clean: a call right after another runtime's pays for that
    # runtime's leftovers, which a program using one runtime never sees.  Its worker
    # threads go on spinning for tens of ms (onnxruntime's: DCGAN 512->256 NXC 20 ->
    # 40 ms right after it), hence a pause; it may have trimmed the heap (grouped g8
    # right after torch: 2500 page faults, +17 ms), hence an untimed call first.
    samples = alternating_rounds(runners, repeat, warmup, budget)
    # Every round, for analysis: this machine's noise comes in bursts of contention
    # that slow every implementation's calls by up to 2x for seconds at a time.
    row["rounds_ms"] = {name: [1e3 * value for value in values]
                        for name, values in samples.items()}
    for name, values in row["rounds_ms"].items():
        row["times_ms"][name] = statistics.median(values)
    call = run_ours(layer, inputs, prepared=prepared)[0]  # a new output each call
    if prepared:  # its set-up (binding, packed weights) before, as the peers' models'
        call()
    peak, output_bytes = peak_extra_bytes(call)
    row["peak_bytes"] = peak
    row["output_bytes"] = output_bytes
    row["extra_bytes"] = max(peak - output_bytes, 0)
    ours = row["times_ms"]["convtranspose"]
    peer_times = {k: v for k, v in row["times_ms"].items() if k != "convtranspose"}
    if peer_times:
        best = min(peer_times, key=peer_times.get)
        row["best_peer"] = best
        row["ratio_to_best_peer"] = peer_times[best] / ours
        fastest = {name: min(values) for name, values in row["rounds_ms"].items()}
        row["best_round_ratio"] = min(v for k, v in fastest.items()
                                      if k != "convtranspose") / fastest["convtranspose"]
    row["gflops"] = layer.flops / ours / 1e6
    if bandwidth:
        row["useful_flops"] = layer.useful_flops
        row["floor_ms"] = floor_ms(layer, fma_flops, bandwidth)
        if row["floor_ms"] >= FLOOR_MIN_MS:
            # The roofline: the floor (the FMA peak's roof or the copy rate's, whichever
            # binds) over our time; below FLOOR_MIN_MS call overhead binds instead.
            row["floor_fraction"] = row["floor_ms"] / ours
            if peer_times:
                # The most any implementation could gain on the best peer here.
                row["ceiling"] = peer_times[row["best_peer"]] / row["floor_ms"]
    try:
        row["algorithm"] = algorithm_run(layer)
    except Exception as error:  # the description is informative only
        row["algorithm"] = f"? ({error})"
    if planning:
        row.update(planning_columns(layer, inputs, repeat))
    return row


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convtranspose bench",
        description="Time convtranspose against the installed peers on a suite of real layers"
                    " (the fixed suite), or on layers drawn from a seed (--random).")
    parser.add_argument("--quick", action="store_true",
                        help="a subset of the fixed suite's layers with fewer repeats (about two"
                             " minutes); with --random, the fewer repeats only")
    parser.add_argument("--random", type=int, default=None, metavar="SEED",
                        help="instead of the fixed suite, layers drawn from this non-negative"
                             " seed: the same layers on every machine")
    parser.add_argument("--count", type=int, default=None, metavar="N",
                        help=f"with --random: how many layers (at least {MIN_COUNT}, the"
                             f" default)")
    parser.add_argument("--layers", default=None,
                        help="only layers whose name contains one of these comma-separated words")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed rounds per layer (default 9, --random 5, --quick 3)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
    parser.add_argument("--prepared", action="store_true",
                        help="time convtranspose through prepared layers (ct.prepare, made"
                             " before the timing as the peers' compiled models are), not"
                             " through its array functions (with --quantized: the int8"
                             " dialects' layers too)")
    parser.add_argument("--quantized", action="store_true",
                        help="the quantized suite: each layer in int8 through the dialect each"
                             " int8 peer runs (torch's quantized modules, OpenVINO's FakeQuantize,"
                             " onnxruntime's QDQ) and in float32 through convtranspose")
    parser.add_argument("--peers", default=None,
                        help="comma-separated subset of torch,openvino,onnxruntime (with"
                             " --quantized: torch-fbgemm, torch-x86, openvino-int8,"
                             " litert-int8, 'onnxruntime-qdq (float)', or a runtime's name"
                             " for all of its own)")
    parser.add_argument("--out", default="bench-results",
                        help="directory for results.md/.json/.png (default ./bench-results)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    parser.add_argument("--wide", action="store_true",
                        help="print every column (each peer, GFLOP/s, floor, memory, planning),"
                             " not only layer, ours, best peer and ratio; results.md has them"
                             " all either way")
    return parser


def _suite(args, parser) -> tuple[list[Layer], dict]:
    """The layers the options select and the suite's description for the results."""
    kind = "quantized " if args.quantized else ""
    if args.random is None:
        if args.count is not None:
            parser.error(f"--count {args.count} is given without --random; it sets how many"
                         " random layers are drawn")
        base = quantized.QUANTIZED_SUITE if args.quantized else SUITE
        layers = [layer for layer in base if layer.quick or not args.quick]
        suite = {"name": f"{kind}fixed suite" + (" (quick)" if args.quick else "")}
    else:
        count = MIN_COUNT if args.count is None else args.count
        if args.random < 0:
            parser.error(f"--random must be a non-negative seed, got {args.random}")
        if count < MIN_COUNT:
            parser.error(f"--count must be at least {MIN_COUNT}, got {count}, so that every"
                         f" one of the {len(FAMILIES)} layer families is drawn")
        layers = (quantized.quantized_random_layers(args.random, count)
                  if args.quantized else random_layers(args.random, count))
        suite = {"name": f"{kind}random suite (seed {args.random}, {count} layers)",
                 "seed": args.random, "count": count, "families": list(FAMILIES),
                 "caps": {"flops": MAX_FLOPS, "elements_per_tensor": MAX_ELEMENTS}}
    if args.layers:
        words = [w.strip().lower() for w in args.layers.split(",") if w.strip()]
        layers = [layer for layer in layers if any(w in layer.label.lower() for w in words)]
    if not layers:
        parser.error(f"no layer of the {suite['name']} matches --layers {args.layers!r}")
    return layers, suite


def _meta(repeat: int, peers: list[str], fma_flops, bandwidth: float, suite: dict,
          prepared: bool = False) -> dict:
    return {"cpu": cpu_model(), "calls": "prepared layer" if prepared else "array function",
            "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.python_version()}",
            "threads": THREADS, "numpy": np.__version__, "blas": blas_description(),
            "repeat": repeat, "peers": peers, "suite": suite,
            "planning": {"available": planning_library() is not None,
                         "wisdom_env": os.environ.get(WISDOM_ENV)},
            "fma_peak_gflops": fma_flops / 1e9 if fma_flops else None,
            "copy_gb_s": bandwidth / 1e9,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def _progress(layer: Layer, row: dict) -> str:
    if "int8_speedup_over_float32" in row:
        return quantized.quantized_progress(row)
    ratio = row.get("ratio_to_best_peer")
    lost, first = row.get("estimate_over_measure"), row.get("first_call_planning_ms")
    planning = "" if lost is None else f"  estimate/measure {lost:.2f}, 1st-call plan {first:.3g} ms"
    return (f"{layer.label:48s} {row['times_ms']['convtranspose']:9.3f} ms  "
            f"{'' if ratio is None else format(ratio, '5.2f') + 'x vs ' + row['best_peer']}"
            f"  [{row.get('algorithm', '')}]{planning}")


def eta(started: float, done: int, total: int) -> str:
    """The time the remaining layers should take, at the mean time of those done."""
    if done >= total:
        return ""
    seconds = (time.perf_counter() - started) / done * (total - done)
    return f"  ETA {seconds:.0f} s" if seconds < 90 else f"  ETA {seconds / 60:.0f} min"


def _refused_out(out: str) -> str | None:
    """Why ``--out`` cannot take the results, or None (the folder is made now): a path
    that cannot take them fails in a second, not after the whole run."""
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as failure:
        return (f"--out {out!r} cannot be made a folder for the results:"
                f" {failure.strerror or failure}")
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out {out!r} is a folder this user cannot write the results into"
    return None


def _write(out: str, rows: list[dict], peers: list[str], meta: dict,
           with_plot: bool) -> list[str]:
    """Write the results into ``out``; the paths of the files written."""
    os.makedirs(out, exist_ok=True)
    written = [os.path.join(out, "results.md"), os.path.join(out, "results.json")]
    text = (quantized.quantized_markdown(rows, peers, meta) if "vnni" in meta
            else markdown(rows, peers, meta))
    # Each file is replaced whole (a temporary file renamed over it): an interrupted
    # write leaves the previous results, not half of new ones.
    atomic_write(written[0], text, private=False)
    atomic_write(written[1], json.dumps({"meta": meta, "rows": rows}, indent=1),
                 private=False)
    if with_plot and plot(rows, os.path.join(out, "ratios.png")):
        written.append(os.path.join(out, "ratios.png"))
    return written


def main(argv: list[str] | None = None) -> int:
    """Run the suite; returns 0, 1 when a peer disagrees with us, 2 on bad options."""
    # Set before the library is first called: an earlier run's stored choices would
    # decide for this one, and the planning columns time deciding afresh.
    os.environ[WISDOM_ENV] = "off"
    # The kernels compile in this process before the timed rounds, not in a background
    # process that would change the choice halfway through them: steady state is timed.
    os.environ[BACKGROUND_COMPILE_ENV] = "off"
    parser = build_parser()
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 9 if args.random is None else 5)
    if repeat < 1:
        parser.error(f"--repeat must be at least 1, got {repeat}")
    requested = args.peers.split(",") if args.peers else None
    known = set(PEERS) | (set(quantized.QUANTIZED_PEERS) if args.quantized else set())
    if requested and set(requested) - known:
        parser.error(f"unknown peer(s): {sorted(set(requested) - known)}")
    peers = (quantized.installed_quantized_peers(requested) if args.quantized
             else installed_peers(requested))
    layers, suite = _suite(args, parser)
    refused = _refused_out(args.out)
    if refused:
        return error(refused)
    budget = 1.5 if args.quick else 6.0 if args.random is None else 3.0
    rows = []
    if os.environ.get(CORE_ENV):
        print(f"note: {CORE_ENV}={os.environ[CORE_ENV]} is set, so NumPy's OpenBLAS (which "
              f"convtranspose's GEMMs use) runs {_blas.corename() or 'those'} kernels while the "
              "peers use the CPU's own; to compare like with like, unset it (and "
              "OPENBLAS_L2_SIZE) for this command alone", file=sys.stderr)
    print(f"{suite['name']} on {cpu_model()}; peers: {', '.join(peers) or 'none installed'};"
          f" {len(layers)} layers", file=sys.stderr)
    fma_flops, bandwidth = fma_peak_flops(), copy_bandwidth()
    started = time.perf_counter()
    for done, layer in enumerate(layers, 1):
        try:
            if args.quantized:
                row = quantized.bench_quantized_layer(layer, peers, repeat, args.warmup, budget,
                                                      alternating_rounds, args.prepared)
            else:
                row = bench_layer(layer, peers, repeat, args.warmup, budget, fma_flops, bandwidth,
                                  planning=True, prepared=args.prepared)
        except AssertionError as mismatch:
            print(f"MISMATCH: {mismatch}", file=sys.stderr)
            return 1
        row["suite"] = suite["name"]
        if "seed" in suite:
            row["family"] = family_of(layer)
        rows.append(row)
        print(f"[{done}/{len(layers)}] {_progress(layer, row)}"
              f"{eta(started, done, len(layers))}", file=sys.stderr, flush=True)
    meta = _meta(repeat, peers, fma_flops, bandwidth, suite, args.prepared)
    if args.quantized:
        meta["vnni"] = quantized.vnni_flags()
        meta["command"] = "convtranspose bench " + " ".join(sys.argv[1:] if argv is None else argv)
    written = _write(args.out, rows, peers, meta, not args.no_plot and not args.quantized)
    print(quantized.quantized_markdown(rows, peers, meta) if args.quantized
          else markdown(rows, peers, meta, wide=args.wide), flush=True)
    print("results written to " + ", ".join(os.path.abspath(path) for path in written),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
