"""Repeated calls of small layers: the array function, a prepared layer and the peers'
own prepared forms, in one process.

    python benchmarks/prepared_calls.py [--calls 3000] [--rounds 5] [--layers WORD] [--cold]
        [--dtype float32] [--out FILE]
    python benchmarks/prepared_calls.py --before OLD/src [--runs 6] ...

For each layer (float32 unless ``--dtype`` says float16 or bfloat16, NCHW, the
library's default planning, wisdom off) it times
back-to-back calls, in alternating rounds, of: the array function
(``ct.onnx_conv_transpose``), the same layer through ``ct.prepare``, an onnxruntime
session of the one-node model (inputs bound, one thread per intra-op pool as the
benchmark runs it) and ``torch.nn.functional.conv_transpose2d`` under ``torch.no_grad``
(each where installed), each round after a pause of 0.1 s (the peers' workers spin for
a while after their calls).  Prints the median microseconds per call of each and the ratios,
with the CPU; ``--out`` writes the rows as JSON.  Writes nothing else.  The tiny
layer is also timed channels-last (``ct.conv_transpose``, NXC data and an XIO filter, as
``convtranspose bench`` runs its NXC twin), without peers, as is a depthwise layer (256
groups of one channel, which numba ``direct`` computes per output position when it runs
it).  The layers named "bias" carry one (ONNX's ``B``, torch's ``bias``), given to
every runner alike.  In float16 and bfloat16 onnxruntime is left out (its CPU
ConvTranspose is float32 only) and torch runs on tensors of that dtype.

``--cold`` times each call alone after writing a buffer of twice the last-level cache
(``--calls`` of them per round): the caches then hold none of the Python, the plans or
the weights, as after a large layer's kernel has streamed its megabytes through them.

``--before SRC`` compares two builds in one run: child processes of this script import
the build under ``SRC`` (``PYTHONPATH``) and the one this process imports, alternately,
``--runs`` times each; it prints the medians of their medians, and the least, before
and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench import numpy_dtype  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name, last_level_cache_bytes  # noqa: E402

# (name, data shape, filter shape (C_IN, C_OUT / groups, K, K), stride, pad, channels last,
#  bias, groups)
LAYERS = [
    ("tiny 2->3 5x5 k3 s2 p1", (1, 2, 5, 5), (2, 3, 3, 3), 2, 1, False, False, 1),
    ("tiny 2->3 5x5 k3 s2 p1 NXC", (1, 2, 5, 5), (2, 3, 3, 3), 2, 1, True, False, 1),
    ("depthwise 256 28x28 k4 s2 p1 NXC", (1, 256, 28, 28), (256, 1, 4, 4), 2, 1, True, False,
     256),
    ("tiny 2->3 5x5 k3 s2 p1 bias", (1, 2, 5, 5), (2, 3, 3, 3), 2, 1, False, True, 1),
    ("small 16->8 8x8 k4 s2 p1", (1, 16, 8, 8), (16, 8, 4, 4), 2, 1, False, False, 1),
    ("mid 32->16 16x16 k3 s2 p1", (1, 32, 16, 16), (32, 16, 3, 3), 2, 1, False, False, 1),
    ("mid 32->16 16x16 k3 s2 p1 bias", (1, 32, 16, 16), (32, 16, 3, 3), 2, 1, False, True, 1),
    ("U-Net k2 64->32 24x24", (1, 64, 24, 24), (64, 32, 2, 2), 2, 0, False, False, 1),
    # Layers that planning gives to the GEMM algorithms (col2im, pointwise).
    ("pointwise k1 256->512 7x7", (1, 256, 7, 7), (256, 512, 1, 1), 1, 0, False, False, 1),
    ("k1 s4 N8 8->128 5x5", (8, 8, 5, 5), (8, 128, 1, 1), 4, 0, False, False, 1),
    ("head N2 512->3 8x8 k4 s2 p1", (2, 512, 8, 8), (512, 3, 4, 4), 2, 1, False, False, 1),
    ("head N2 512->3 8x8 k4 s2 p1 bias", (2, 512, 8, 8), (512, 3, 4, 4), 2, 1, False, True, 1),
]


def onnxruntime_call(data, weights, stride, pad, bias=None):
    try:
        import onnx
        import onnxruntime
        from onnx import TensorProto, helper
    except ImportError:
        return None
    operands = {"w": weights} if bias is None else {"w": weights, "b": bias}
    node = helper.make_node("ConvTranspose", ["x", *operands], ["y"], strides=[stride, stride],
                            pads=[pad] * 4)
    graph = helper.make_graph(
        [node], "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, data.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(array, name) for name, array in operands.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = ct.get_num_threads()
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": data})


def _tensor(torch, array: np.ndarray):
    """``array`` as a torch tensor; bfloat16 (ml_dtypes') through its bits."""
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _torch_call(data, weights, stride, pad, bias=None):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(ct.get_num_threads())
    x, w = _tensor(torch, data), _tensor(torch, weights)
    b = None if bias is None else _tensor(torch, bias)

    def call():
        with torch.no_grad():
            return torch.nn.functional.conv_transpose2d(x, w, b, stride=stride, padding=pad)
    return call


#: Seconds before each timed round: onnxruntime's workers spin 40-56 ms after a call, and
#: torch's OpenMP workers a while too, taking a core from the next round's calls.
_PAUSE_SECONDS = 0.1


def _microseconds(call, calls: int, sweep: np.ndarray | None = None) -> float:
    """Microseconds per call: back to back, or, given ``sweep``, the median of calls
    each timed alone after ``sweep`` is written through."""
    if sweep is None:
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - start) / calls * 1e6
    times = []
    for _ in range(calls):
        sweep.fill(1)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _cache_sweep() -> np.ndarray:
    """A buffer of twice the last-level cache as sysfs reports it (64 MiB where it does
    not), which writing evicts everything else from the caches."""
    return np.empty(2 * (last_level_cache_bytes() or 32 << 20), np.uint8)


def _runs(data, weights, bias, stride: int, pad: int, channels_last: bool,
          groups: int = 1) -> dict:
    """The calls to time for one layer: the array function, the prepared layer and (in
    NCHW, without groups) the peers installed."""
    if channels_last:  # NXC data, XIO filter: ct.conv_transpose's defaults
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
        filter = np.ascontiguousarray(weights.transpose(2, 3, 0, 1))
        attributes = dict(strides=[stride, stride], pads_begin=[pad, pad],
                          pads_end=[pad, pad], data_format="NXC", filter_format="XIO",
                          groups=groups)
        layer = ct.prepare(ct.conv_transpose, filter=filter, bias=bias, **attributes)
        return {"function": lambda: ct.conv_transpose(data, filter, bias, **attributes),
                "prepared": lambda: layer(data)}
    if groups != 1:
        raise ValueError("grouped layers are timed channels-last only (no peers)")
    attributes = dict(strides=[stride, stride], pads=[pad] * 4)
    layer = ct.prepare(ct.onnx_conv_transpose, W=weights, B=bias, **attributes)
    runs = {"function": lambda: ct.onnx_conv_transpose(data, weights, bias, **attributes),
            "prepared": lambda: layer(data),
            "onnxruntime": (onnxruntime_call(data, weights, stride, pad, bias)
                            if data.dtype == np.float32 else None),
            "torch": _torch_call(data, weights, stride, pad, bias)}
    return {key: call for key, call in runs.items() if call is not None}


def measure(calls: int, rounds: int, only: str | None = None, quiet: bool = False,
            cold: bool = False, dtype: str = "float32") -> list[dict]:
    rng = np.random.default_rng(0)
    kind = numpy_dtype(dtype)
    sweep = _cache_sweep() if cold else None
    rows = []
    for name, data_shape, filter_shape, stride, pad, channels_last, biased, groups in LAYERS:
        data = rng.standard_normal(data_shape, dtype=np.float32).astype(kind)
        weights = rng.standard_normal(filter_shape, dtype=np.float32).astype(kind)
        bias = (rng.standard_normal(filter_shape[1] * groups, dtype=np.float32).astype(kind)
                if biased else None)
        if only is not None and only not in name:
            continue
        runs = _runs(data, weights, bias, stride, pad, channels_last, groups)
        times: dict[str, list[float]] = {key: [] for key in runs}
        for call in runs.values():  # planning, compiling, the peers' first-call work
            for _ in range(20):
                call()
        for _ in range(rounds):
            for key, call in runs.items():
                time.sleep(_PAUSE_SECONDS)
                times[key].append(_microseconds(call, calls, sweep))
        row = {"layer": name, "us": {key: round(statistics.median(values), 2)
                                     for key, values in times.items()}}
        peers = [row["us"][key] for key in ("onnxruntime", "torch") if key in row["us"]]
        row["prepared_over_function"] = round(row["us"]["prepared"] / row["us"]["function"], 3)
        if peers:
            row["best_peer_over_prepared"] = round(min(peers) / row["us"]["prepared"], 3)
        rows.append(row)
        if quiet:
            continue
        print(f"| {name} | " + " | ".join(f"{key} {us}" for key, us in row["us"].items())
              + f" | prepared/function {row['prepared_over_function']}"
              + (f" | best peer/prepared {row['best_peer_over_prepared']}" if peers else "")
              + " |", flush=True)
    return rows


def builds_in_turn(script: str, before: str, runs: int, arguments: list[str]) -> dict:
    """``{"before": [...], "after": [...]}``: what ``runs`` child processes of ``script``
    (with ``arguments``) print as their last line, JSON, under ``before``'s sources and
    under this build's, the two alternating which goes first."""
    after = os.path.dirname(os.path.dirname(os.path.abspath(ct.__file__)))
    builds = {"before": os.path.abspath(before), "after": after}
    found: dict[str, list] = {label: [] for label in builds}
    for run in range(runs):
        for label in (list(builds) if run % 2 == 0 else list(builds)[::-1]):
            environment = dict(os.environ, PYTHONPATH=builds[label])
            child = subprocess.run([sys.executable, os.path.abspath(script), *arguments],
                                   env=environment, capture_output=True, text=True,
                                   check=True)
            found[label].append(json.loads(child.stdout.splitlines()[-1]))
    return found


def compare(before: str, runs: int, child_arguments: list[str]) -> dict:
    """``{"before": rows, "after": rows}``: each build timed in ``runs`` child processes,
    alternating which goes first; each row's microseconds are the medians over the runs
    (``us``) and the least (``best_us``: on a shared machine others' work only adds)."""
    found = builds_in_turn(__file__, before, runs, ["--rows", *child_arguments])
    result = {}
    for label, runs_rows in found.items():
        rows = []
        for index, first in enumerate(runs_rows[0]):
            each = [run_rows[index]["us"] for run_rows in runs_rows]
            rows.append({"layer": first["layer"],
                         "us": {key: round(statistics.median(us[key] for us in each), 2)
                                for key in first["us"]},
                         "best_us": {key: min(us[key] for us in each) for key in first["us"]},
                         "runs": {key: [us[key] for us in each] for key in first["us"]}})
        result[label] = rows
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per timed round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", default=None, help="only layers whose name has this word")
    parser.add_argument("--before", default=None, metavar="SRC",
                        help="compare with the build under this folder (its src)")
    parser.add_argument("--runs", type=int, default=6, help="child processes per build")
    parser.add_argument("--cold", action="store_true",
                        help="time each call alone after evicting the caches")
    parser.add_argument("--rows", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"),
                        help="the layers' dtype")
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    if args.rows:  # a child of --before: the rows as one JSON line
        print(json.dumps(measure(args.calls, args.rounds, args.layers, quiet=True,
                                 cold=args.cold, dtype=args.dtype)))
        return 0
    timing = "each alone after evicting the caches" if args.cold else "back to back"
    print(f"CPU: {cpu_model_name()}, {ct.get_num_threads()} threads; {args.dtype};"
          f" microseconds per call, medians of {args.rounds} rounds of {args.calls} calls,"
          f" {timing}\n")
    record = {"machine": cpu_model_name(), "threads": ct.get_num_threads(),
              "calls": args.calls, "rounds": args.rounds, "cold": args.cold,
              "dtype": args.dtype}
    if args.before is not None:
        child_arguments = ["--calls", str(args.calls), "--rounds", str(args.rounds),
                           "--dtype", args.dtype]
        if args.cold:
            child_arguments.append("--cold")
        if args.layers:
            child_arguments += ["--layers", args.layers]
        compared = compare(args.before, args.runs, child_arguments)
        for label, rows in compared.items():
            for row in rows:
                print(f"| {label} | {row['layer']} | "
                      + " | ".join(f"{key} {us} (best {row['best_us'][key]})"
                                   for key, us in row["us"].items()) + " |")
        record.update(runs=args.runs, **compared)
    else:
        record["rows"] = measure(args.calls, args.rounds, args.layers, cold=args.cold,
                                 dtype=args.dtype)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
