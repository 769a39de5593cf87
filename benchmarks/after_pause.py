"""Calls back to back against calls after a pause: ours (``qlinear``) and OpenVINO int8
on the quantized suite's layers, in one process.

    python benchmarks/after_pause.py [--rounds 10] [--pause 0.1] [--out FILE]

Per layer and runtime: the median of 20 calls back to back, then of ``--rounds`` rounds
of a pause, a first call (timed) and a second call (timed): ``convtranspose bench``
times the second.  Also the kernel OpenVINO's CPU plugin chose for the deconvolution
(its runtime model's ``primitiveType``: ``..._amx_...`` where it runs on AMX tiles).
Needs OpenVINO (the benchmark extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from convtranspose._cli.bench import cpu_model
from convtranspose._cli.bench.quantized import (
    QUANTIZED_PEERS,
    QUANTIZED_SUITE,
    ours_qlinear,
    quantized_inputs,
)


def _primitive(run) -> str:
    """The deconvolution's ``primitiveType`` in the compiled model behind ``run``."""
    for cell in run.__closure__ or ():
        request = cell.cell_contents
        if hasattr(request, "get_compiled_model"):
            for op in request.get_compiled_model().get_runtime_model().get_ordered_ops():
                info = op.get_rt_info()
                if info["layerType"].astype(str) == "Deconvolution":
                    return info["primitiveType"].astype(str)
    return "?"


def _times(run, rounds: int, pause: float) -> dict:
    run()
    run()
    back = []
    for _ in range(20):
        start = time.perf_counter()
        run()
        back.append(time.perf_counter() - start)
    first, second = [], []
    for _ in range(rounds):
        time.sleep(pause)
        for samples in (first, second):
            start = time.perf_counter()
            run()
            samples.append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(values) for name, values in
            (("back to back", back), ("first after pause", first),
             ("second after pause", second))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.1)
    parser.add_argument("--out", help="write the rows and the CPU's name to this JSON file")
    args = parser.parse_args(argv)
    rows = []
    print(f"CPU: {cpu_model()}; ms, medians; pause {args.pause} s")
    for layer in (layer for layer in QUANTIZED_SUITE if layer.quick):
        q = quantized_inputs(layer)
        openvino = QUANTIZED_PEERS["openvino-int8"][0](layer, q)[0]
        row = {"layer": layer.label, "openvino_primitive": _primitive(openvino)}
        for name, run in (("ours qlinear", ours_qlinear(layer, q)), ("openvino-int8", openvino)):
            row[name] = _times(run, args.rounds, args.pause)
            print(f"{layer.label:36s} {name:14s} " + "  ".join(
                f"{key} {value:.2f}" for key, value in row[name].items()))
        print(f"{'':36s} OpenVINO's kernel: {row['openvino_primitive']}")
        rows.append(row)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model(), "pause_s": args.pause, "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
