"""Layers on each of numba's threading layers, in a process that loaded OpenVINO first.

    python benchmarks/threading_layers.py [--children 3] [--rounds 7] [--out FILE]

OpenVINO ships its own TBB library; once a process has loaded it, numba's own order
(TBB, then GNU OpenMP, then workqueue) would start its threads on TBB.  Each child
process here imports OpenVINO and torch and compiles a convolution in each (64->64
56x56), then the library's layers with ``NUMBA_THREADING_LAYER`` set to ``tbb`` or
``omp``, or left unset (``default``: the layer the library then starts is printed).
Children of the three settings alternate, ``--children`` of each.  Each layer is
timed as ``convtranspose bench`` times its peers: rounds alternating between the
library's call, torch's and OpenVINO's convolutions, each call after a 0.1 s pause and
an untimed call, ``--rounds`` rounds.  The table gives, per layer and setting, the
medians over the children of the library's and torch's median ms, with the CPU.
``--out`` writes them as JSON, with every child's medians.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import json, os, statistics, sys, time
os.environ["CONVTRANSPOSE_WISDOM"] = "off"
os.environ["CONVTRANSPOSE_BACKGROUND_COMPILE"] = "off"
import numpy as np
import openvino as ov
parameter = ov.opset1.parameter([1, 64, 56, 56], ov.Type.f32)
convolution = ov.opset1.convolution(parameter, ov.opset1.constant(
    np.ones((64, 64, 3, 3), np.float32)), [1, 1], [1, 1], [1, 1], [1, 1])
request = ov.Core().compile_model(ov.Model([convolution], [parameter]), "CPU", {
    "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2"}).create_infer_request()
request.infer([np.ones((1, 64, 56, 56), np.float32)])
import torch
torch.set_num_threads(2)
tx, tw = torch.ones((1, 64, 56, 56)), torch.ones((64, 64, 3, 3))
import convtranspose as ct
rng = np.random.default_rng(0)

def operands(*shapes):
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]

x1, w1 = operands((1, 64, 56, 56), (64, 64, 3, 3))
x2, w2 = operands((4, 256, 16, 16), (256, 128, 4, 4))
x3, w3 = operands((1, 21, 16, 16), (21, 21, 4, 4))
x4, w4 = operands((1, 512, 32, 32), (512, 256, 2, 2))
dcgan = ct.prepare(ct.onnx_conv_transpose, W=w2, strides=[2, 2], pads=[1] * 4)
layers = {
    "conv ResNet 3x3 64->64 56x56": lambda: ct.convolution(x1, w1, strides=1, pads_begin=1,
                                                           pads_end=1),
    "DCGAN N4 256->128 16x16 k4 s2 p1 (prepared)": lambda: dcgan(x2),
    "FCN-2x N1 21->21 16x16 k4 s2 p1": lambda: ct.onnx_conv_transpose(
        x3, w3, strides=[2, 2], pads=[1] * 4),
    "U-Net N1 512->256 32x32 k2 s2": lambda: ct.onnx_conv_transpose(x4, w4, strides=[2, 2]),
}
from convtranspose._cli.bench.run import alternating_rounds

def torch_conv():
    with torch.inference_mode():
        torch.nn.functional.conv2d(tx, tw, padding=1)

def openvino_conv():
    request.infer([np.ones((1, 64, 56, 56), np.float32)])

rows = {}
for name, call in layers.items():
    samples = alternating_rounds({"convtranspose": call, "torch": torch_conv,
                                  "openvino": openvino_conv}, int(sys.argv[1]), warmup=2)
    rows[name] = [statistics.median(samples[runner]) * 1e3 for runner in ("convtranspose",
                                                                        "torch")]
import numba
print(json.dumps({"layer": numba.threading_layer(), "rows": rows}))
"""

SETTINGS = ("tbb", "omp", "default")


def run_child(setting: str, rounds: int) -> dict:
    """One child's threading layer and per-layer (ours, torch's) median ms."""
    environment = dict(os.environ)
    environment.pop("NUMBA_THREADING_LAYER", None)
    if setting != "default":
        environment["NUMBA_THREADING_LAYER"] = setting
    child = subprocess.run([sys.executable, "-c", _CHILD, str(rounds)], env=environment,
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout.splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=3, help="processes per setting")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per process")
    parser.add_argument("--out", help="write the medians as JSON to this file")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from convtranspose._runtime.machine import cpu_model_name

    children = {setting: [] for setting in SETTINGS}
    for _ in range(args.children):
        for setting in SETTINGS:
            children[setting].append(run_child(setting, args.rounds))
    layers = list(children[SETTINGS[0]][0]["rows"])
    result = {"cpu": cpu_model_name(), "children": args.children, "rounds": args.rounds,
              "ran_on": {s: sorted({c["layer"] for c in children[s]}) for s in SETTINGS},
              "rows": {}, "every_process": {s: [c["rows"] for c in children[s]]
                                            for s in SETTINGS}}
    print(f"CPU: {result['cpu']}; ms, medians over {args.children} processes per setting;"
          f" 'default' ran on {result['ran_on']['default']}")
    print(f"{'layer':46s} " + " ".join(f"{s + ' ours':>13s} {s + ' torch':>13s}"
                                       for s in SETTINGS))
    for name in layers:
        row = {s: [round(statistics.median(c["rows"][name][i] for c in children[s]), 3)
                   for i in (0, 1)] for s in SETTINGS}
        result["rows"][name] = row
        print(f"{name:46s} " + " ".join(f"{row[s][0]:13.3f} {row[s][1]:13.3f}"
                                         for s in SETTINGS))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
