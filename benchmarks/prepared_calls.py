"""Repeated calls of small layers: the array function, a prepared layer and the peers'
own prepared forms, in one process.

    python benchmarks/prepared_calls.py [--calls 3000] [--rounds 5] [--out FILE]

For each layer (float32, NCHW, the library's default planning, wisdom off) it times
back-to-back calls, in alternating rounds, of: the array function
(``ct.onnx_conv_transpose``), the same layer through ``ct.prepare``, an onnxruntime
session of the one-node model (inputs bound, one thread per intra-op pool as the
benchmark runs it) and ``torch.nn.functional.conv_transpose2d`` under ``torch.no_grad``
(each where installed).  Prints the median microseconds per call of each and the ratios,
with the CPU; ``--out`` writes the rows as JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

# (name, data shape, filter shape (C_IN, C_OUT, K, K), stride, pad)
LAYERS = [
    ("tiny 2->3 5x5 k3 s2 p1", (1, 2, 5, 5), (2, 3, 3, 3), 2, 1),
    ("small 16->8 8x8 k4 s2 p1", (1, 16, 8, 8), (16, 8, 4, 4), 2, 1),
    ("mid 32->16 16x16 k3 s2 p1", (1, 32, 16, 16), (32, 16, 3, 3), 2, 1),
    ("U-Net k2 64->32 24x24", (1, 64, 24, 24), (64, 32, 2, 2), 2, 0),
]


def _onnxruntime_call(data, weights, stride, pad):
    try:
        import onnx
        import onnxruntime
        from onnx import TensorProto, helper
    except ImportError:
        return None
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[stride, stride],
                            pads=[pad] * 4)
    graph = helper.make_graph(
        [node], "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, data.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = ct.get_num_threads()
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": data})


def _torch_call(data, weights, stride, pad):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(ct.get_num_threads())
    x, w = torch.from_numpy(data), torch.from_numpy(weights)

    def call():
        with torch.no_grad():
            return torch.nn.functional.conv_transpose2d(x, w, stride=stride, padding=pad)
    return call


def _microseconds(call, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def measure(calls: int, rounds: int) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for name, data_shape, filter_shape, stride, pad in LAYERS:
        data = rng.standard_normal(data_shape, dtype=np.float32)
        weights = rng.standard_normal(filter_shape, dtype=np.float32)
        attributes = dict(strides=[stride, stride], pads=[pad] * 4)
        layer = ct.prepare(ct.onnx_conv_transpose, W=weights, **attributes)
        runs = {"function": lambda: ct.onnx_conv_transpose(data, weights, **attributes),
                "prepared": lambda: layer(data),
                "onnxruntime": _onnxruntime_call(data, weights, stride, pad),
                "torch": _torch_call(data, weights, stride, pad)}
        runs = {key: call for key, call in runs.items() if call is not None}
        times: dict[str, list[float]] = {key: [] for key in runs}
        for call in runs.values():  # planning, compiling, the peers' first-call work
            for _ in range(20):
                call()
        for _ in range(rounds):
            for key, call in runs.items():
                times[key].append(_microseconds(call, calls))
        row = {"layer": name, "us": {key: round(statistics.median(values), 2)
                                     for key, values in times.items()}}
        peers = [row["us"][key] for key in ("onnxruntime", "torch") if key in row["us"]]
        row["prepared_over_function"] = round(row["us"]["prepared"] / row["us"]["function"], 3)
        if peers:
            row["best_peer_over_prepared"] = round(min(peers) / row["us"]["prepared"], 3)
        rows.append(row)
        print(f"| {name} | " + " | ".join(f"{key} {us}" for key, us in row["us"].items())
              + f" | prepared/function {row['prepared_over_function']}"
              + (f" | best peer/prepared {row['best_peer_over_prepared']}" if peers else "")
              + " |", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per timed round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model_name()}, {ct.get_num_threads()} threads; microseconds per call,"
          f" medians of {args.rounds} rounds of {args.calls} calls\n")
    rows = measure(args.calls, args.rounds)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"machine": cpu_model_name(), "threads": ct.get_num_threads(),
                       "calls": args.calls, "rounds": args.rounds, "rows": rows}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
