"""Forward convolution and the VJPs against torch (forward and backward) and OpenVINO.

    python benchmarks/gradients.py [--quick] [--json PATH]

Rows, float32, NCHW, each peer run the way it runs fairly (torch on 2 threads
under ``inference_mode`` for the forward and with autograd for the backward; OpenVINO
with the f32 precision hint on 2 threads, one infer request):

- ``conv``: ``ct.convolution`` / ``ct.group_convolution`` against ``torch.nn.functional
  .conv2d`` and OpenVINO Convolution-1 / GroupConvolution-1;
- ``vjp``: ``ct.vjp.onnx_conv_transpose`` (data and filter gradients) against torch's
  ``backward()`` through ``conv_transpose2d`` (the same two gradients).

Each time is the median of rounds that alternate between the implementations, each call
after a pause and an untimed call, after warm-up calls (the library's first call of a
layer plans it; that is not timed).  The table names the CPU and gives each
row's ratio against the fastest peer (> 1: the library is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")  # steady state is timed

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._cli.bench.run import alternating_rounds  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

# (name, N, C_in, C_out, size, kernel, stride, pad, groups) of a forward convolution;
# the VJP rows run the transposed convolution whose data gradient is that convolution.
LAYERS = [
    ("ResNet 3x3 64->64 56x56", 1, 64, 64, 56, 3, 1, 1, 1),
    ("ResNet 3x3 s2 128->256 28x28", 1, 128, 256, 28, 3, 2, 1, 1),
    ("stem 7x7 s2 3->64 224x224", 1, 3, 64, 224, 7, 2, 3, 1),
    ("1x1 256->64 56x56", 1, 256, 64, 56, 1, 1, 0, 1),
    ("depthwise 3x3 32 112x112", 1, 32, 32, 112, 3, 1, 1, 32),
    ("DCGAN 4x4 s2 256->512 N8 16x16", 8, 256, 512, 16, 4, 2, 1, 1),
    ("grouped 3x3 g8 256->256 N4 28x28", 4, 256, 256, 28, 3, 1, 1, 8),
]
QUICK = LAYERS[:4]


def _median_ms(functions: dict, repeats: int) -> dict:
    """Median ms per call, the runners alternating round by round, each after a pause
    and an untimed call (another runtime's spinning threads and trimmed heap would
    otherwise be charged to the next one: :func:`convtranspose._cli.bench.run.alternating_rounds`)."""
    samples = alternating_rounds(functions, repeats, warmup=2)
    return {name: statistics.median(values) * 1e3 for name, values in samples.items()}


def _openvino_conv(data, weight, stride, pad, groups):
    import openvino as ov
    from openvino.utils.node_factory import NodeFactory

    parameter = ov.opset1.parameter(list(data.shape), ov.Type.f32)
    name = "GroupConvolution" if groups > 1 else "Convolution"
    if groups > 1:  # [G, C_OUT/G, C_IN/G, K...]
        weight = weight.reshape((groups, weight.shape[0] // groups) + weight.shape[1:])
    constant = ov.opset1.constant(weight)
    node = NodeFactory("opset1").create(name, [parameter.output(0), constant.output(0)], dict(
        strides=[stride] * 2, dilations=[1, 1], pads_begin=[pad] * 2, pads_end=[pad] * 2,
        auto_pad="explicit"))
    compiled = ov.Core().compile_model(ov.Model([node], [parameter]), "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2"})
    request = compiled.create_infer_request()
    return lambda: request.infer([data], share_inputs=True, share_outputs=True)


def _rows(layer, torch, repeats):
    name, n, c_in, c_out, size, k, s, p, g = layer
    rng = np.random.default_rng(0)
    data = rng.standard_normal((n, c_in, size, size)).astype(np.float32)
    weight = rng.standard_normal((c_out, c_in // g, k, k)).astype(np.float32)
    attrs = dict(strides=s, pads_begin=p, pads_end=p)
    if g > 1:
        grouped = weight.reshape((g, c_out // g, c_in // g, k, k))
        ours = lambda: ct.group_convolution(data, grouped, **attrs)  # noqa: E731
    else:
        ours = lambda: ct.convolution(data, weight, **attrs)  # noqa: E731
    x, w = torch.from_numpy(data), torch.from_numpy(weight)

    def torch_conv():
        with torch.inference_mode():
            torch.nn.functional.conv2d(x, w, stride=s, padding=p, groups=g)

    conv = _median_ms({"convtranspose": ours, "torch": torch_conv,
                       "openvino": _openvino_conv(data, weight, s, p, g)}, repeats)
    # The transposed convolution taking the convolution's output back to its input:
    # its VJP computes a forward convolution (data) and a correlation (filter).
    small = rng.standard_normal(ours().shape).astype(np.float32)
    transposed_weight = rng.standard_normal((c_out, c_in // g, k, k)).astype(np.float32)
    out_padding = (size + 2 * p - k) % s
    vjp_attrs = dict(strides=[s, s], pads=[p] * 4, group=g, output_padding=[out_padding] * 2)
    grad = rng.standard_normal(ct.shapes.onnx_conv_transpose(
        small.shape, transposed_weight.shape, **vjp_attrs).output_shape).astype(np.float32)
    xs = torch.from_numpy(small).requires_grad_()
    ws = torch.from_numpy(transposed_weight).requires_grad_()
    tg = torch.from_numpy(grad)

    def torch_vjp():
        out = torch.nn.functional.conv_transpose2d(xs, ws, stride=s, padding=p, groups=g,
                                                   output_padding=out_padding)
        torch.autograd.grad(out, (xs, ws), tg)

    vjp = _median_ms({"convtranspose": lambda: ct.vjp.onnx_conv_transpose(
        small, transposed_weight, grad, **vjp_attrs), "torch": torch_vjp}, repeats)
    return [dict(layer=name, op="conv", **conv), dict(layer=name, op="vjp", **vjp)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first four layers only")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="write the rows and the CPU's name to this file")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    cpu = cpu_model_name()
    rows = []
    print(f"CPU: {cpu}; float32; ms (median); ratio = fastest peer / convtranspose")
    print(f"{'layer':34s} {'op':5s} {'ours':>8s} {'torch':>8s} {'openvino':>9s} {'ratio':>6s}")
    for layer in (QUICK if args.quick else LAYERS):
        for row in _rows(layer, torch, args.repeats):
            peers = [row[name] for name in ("torch", "openvino") if name in row]
            row["ratio"] = min(peers) / row["convtranspose"]
            rows.append(row)
            ov_text = f"{row['openvino']:9.2f}" if "openvino" in row else f"{'-':>9s}"
            print(f"{row['layer']:34s} {row['op']:5s} {row['convtranspose']:8.2f}"
                  f" {row['torch']:8.2f} {ov_text} {row['ratio']:6.2f}")
    for op in ("conv", "vjp"):
        ratios = [row["ratio"] for row in rows if row["op"] == op]
        print(f"geometric mean, {op}: {float(np.exp(np.mean(np.log(ratios)))):.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu, "threads": 2, "dtype": "float32", "rows": rows}, file,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
