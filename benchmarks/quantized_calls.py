"""Repeated calls of the quantized dialects on the quantized suite's layers, in one process.

    python benchmarks/quantized_calls.py [--rounds 15] [--litert] [--before OLD/src [--runs 4]]
                                         [--out FILE]

Per layer (``convtranspose bench --quantized``'s fixed layers), back-to-back calls in
alternating rounds of: ``qlinear_conv_transpose`` without and with an int32 bias (the
array function), the same through ``ct.prepare``, and TFLite's int8, torch's and
oneDNN's quantized dialects with a bias (each by its array function and through
``ct.prepare``).  With ``--litert`` (tensorflow and ai_edge_litert installed), also the
LiteRT int8 model ``convtranspose bench --quantized`` builds for the layer (its
interpreter's call, ``litert``) and our TFLite dialect on that model's own operands
(``tflite suite`` and ``prepared tflite suite``: the suite's comparison).  Prints the
median milliseconds of each with the CPU and the load average; ``--out`` writes them as JSON.  ``--before OLD/src`` compares two builds: ``--runs``
child processes of this script under each build's sources in turn (alternating which
goes first), then per layer and call the median of their medians and the ratio
before / after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402

#: (name, N, Ci, Co, input size, kernel, stride, pad): the quantized suite's layers.
LAYERS = [
    ("DCGAN N4 256->128 16x16 k4 s2 p1", 4, 256, 128, 16, 4, 2, 1),
    ("U-Net N1 512->256 32x32 k2 s2", 1, 512, 256, 32, 2, 2, 0),
    ("seg head N1 128->64 64x64 k4 s2 p1", 1, 128, 64, 64, 4, 2, 1),
    ("small N1 16->16 8x8 k3 s2 p1", 1, 16, 16, 8, 3, 2, 1),
]


def _litert_calls(name: str) -> dict:
    """The LiteRT interpreter's call of the quantized suite's layer ``name`` and ours on
    its model's operands, by name (``--litert``)."""
    from convtranspose._cli.bench import quantized

    layer = next(layer for layer in quantized.QUANTIZED_SUITE if layer.name == name)
    build = quantized.QUANTIZED_PEERS["litert-int8"][0]
    run, _, (function, data_name, data, arguments) = build(layer,
                                                          quantized.quantized_inputs(layer))
    prepared = ct.prepare(function, **arguments)
    return {"litert": run, "tflite suite": lambda: function(**{data_name: data}, **arguments),
            "prepared tflite suite": lambda: prepared(data)}


def _calls(n, ci, co, size, k, s, p, rng):
    """The timed calls of one layer, by name."""
    x = rng.integers(0, 256, (n, ci, size, size)).astype(np.uint8)
    w = rng.integers(-127, 128, (ci, co, k, k)).astype(np.int8)
    bias = rng.integers(-2000, 2000, co).astype(np.int32)
    onnx = dict(x_scale=np.float32(0.02), x_zero_point=np.uint8(128), w=w,
                w_scale=np.float32(0.01), w_zero_point=np.int8(0), y_scale=np.float32(0.5),
                y_zero_point=np.uint8(120), strides=[s, s], pads=[p] * 4)
    plain, biased = ct.prepare(ct.qlinear_conv_transpose, **onnx), ct.prepare(
        ct.qlinear_conv_transpose, B=bias, **onnx)
    out = (size - 1) * s - 2 * p + k
    nhwc = np.ascontiguousarray(np.moveaxis(x, 1, -1)).view(np.int8)
    ohwi = np.ascontiguousarray(np.transpose(w, (1, 2, 3, 0)))
    hwio = np.ascontiguousarray(np.transpose(w, (2, 3, 0, 1)))
    lite = dict(input_scale=0.02, input_zero_point=0, weights_scale=np.full(co, 0.01),
                weights_zero_point=np.zeros(co, np.int64), output_scale=0.5,
                output_zero_point=-8, padding="SAME" if p else "VALID", stride_h=s,
                stride_w=s)
    real = rng.normal(0, 0.1, co).astype(np.float32)
    torch_like = dict(stride=s, padding=p, input_scale=0.02, input_zero_point=128,
                      weight_scale=0.01, weight_zero_point=0, output_scale=0.5,
                      output_zero_point=120)

    def qlinear(**extra):
        return lambda: ct.qlinear_conv_transpose(x, **dict(onnx, **extra))

    calls = {"qlinear": qlinear(), "qlinear B": qlinear(B=bias),
             "prepared": lambda: plain(x), "prepared B": lambda: biased(x),
             "torch B": lambda: ct.torch_quantized_conv_transpose(x, w, real, **torch_like)}
    torch_layer = ct.prepare(ct.torch_quantized_conv_transpose, weight=w, bias=real,
                             **torch_like)
    calls["prepared torch B"] = lambda: torch_layer(x)
    onednn = dict(filter=hwio, bias=real, src_scale=np.float32(0.02),
                  wei_scales=np.full(co, 0.01, np.float32), dst_scale=np.float32(0.5),
                  src_zero_point=np.int32(128), dst_zero_point=np.int32(120), strides=[s, s],
                  pads_begin=[p, p], pads_end=[p, p])
    source, onednn_layer = nhwc.view(np.uint8), ct.prepare(
        ct.onednn_quantized_conv_transpose, **onednn)
    calls["onednn B"] = lambda: ct.onednn_quantized_conv_transpose(source, **onednn)
    calls["prepared onednn B"] = lambda: onednn_layer(source)
    if p == (k - s) // 2 and (k - s) % 2 == 0:  # TFLite's SAME or VALID padding
        lite.update(output_shape=[n, out, out, co], weights=ohwi, bias=bias)
        tflite_layer = ct.prepare(ct.tflite_quantized_transpose_conv, **lite)
        calls["tflite B"] = lambda: ct.tflite_quantized_transpose_conv(input=nhwc, **lite)
        calls["prepared tflite B"] = lambda: tflite_layer(nhwc)
    return calls


def measure(rounds: int, quiet: bool = False, litert: bool = False) -> list[dict]:
    """Per layer, the median milliseconds of each call over ``rounds`` alternating
    rounds, printed as they come unless ``quiet``."""
    rng = np.random.default_rng(0)
    rows = []
    for name, *layer in LAYERS:
        calls = _calls(*layer, rng)
        if litert:
            calls.update(_litert_calls(name))
        times: dict[str, list[float]] = {key: [] for key in calls}
        for _ in range(rounds + 2):  # the first two rounds warm up
            for key, call in calls.items():
                call()
                start = time.perf_counter()
                call(), call()
                times[key].append((time.perf_counter() - start) / 2 * 1e3)
        medians = {key: round(statistics.median(values[2:]), 4) for key, values in times.items()}
        rows.append(dict(layer=name, ms=medians, load=os.getloadavg()[0]))
        if not quiet:
            print(f"{name:36s} " + " ".join(f"{k} {v:.3f}" for k, v in medians.items()))
    return rows


def _compared(before: str, runs: int, rounds: int, litert: bool) -> dict:
    """Both builds' rows (:func:`measure` in ``runs`` child processes each), each call's
    milliseconds the median over the runs, with before / after per call."""
    from prepared_calls import builds_in_turn  # this folder's script

    found = builds_in_turn(__file__, before, runs, ["--rows", "--rounds", str(rounds)]
                           + ["--litert"] * litert)
    compared = []
    for index, (name, *_) in enumerate(LAYERS):
        ms = {label: {key: statistics.median(run[index]["ms"][key] for run in runs_rows)
                      for key in runs_rows[0][index]["ms"]}
              for label, runs_rows in found.items()}
        ratio = {key: round(ms["before"][key] / ms["after"][key], 2) for key in ms["after"]
                 if key in ms["before"]}
        compared.append(dict(layer=name, ms=ms, before_over_after=ratio))
        print(f"{name:36s} " + " ".join(
            f"{key} {ms['before'][key]:.4f}->{ms['after'][key]:.4f} ({ratio[key]}x)"
            for key in ratio))
    return dict(runs=found, rows=compared)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", help="write the medians, CPU and load to this JSON file")
    parser.add_argument("--before", metavar="SRC",
                        help="compare with the build under this folder (its src)")
    parser.add_argument("--runs", type=int, default=4, help="child processes per build")
    parser.add_argument("--litert", action="store_true",
                        help="also the quantized suite's LiteRT model and ours on its operands")
    parser.add_argument("--rows", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rows:  # a child of --before: the rows as one JSON line
        print(json.dumps(measure(args.rounds, quiet=True, litert=args.litert)))
        return 0
    from convtranspose._cli.bench import cpu_model

    print(f"CPU: {cpu_model()}; ms per call, median of {args.rounds} alternating rounds")
    record = dict(cpu=cpu_model(), rounds=args.rounds)
    if args.before:
        record.update(_compared(args.before, args.runs, args.rounds, args.litert),
                      runs_per_build=args.runs)
    else:
        record["rows"] = measure(args.rounds, litert=args.litert)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(record, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
