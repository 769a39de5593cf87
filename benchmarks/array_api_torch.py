"""PyTorch CPU tensors: zero-copy NumPy kernels against the generic array-API computation.

    python benchmarks/array_api_torch.py [--rounds 7] [--layers TEXT] [--out FILE]

For a few layers of the benchmark suite (float32, channels first) the same public call
``ct.onnx_conv_transpose(X, W, ...)`` on torch CPU tensors is timed both ways, in one
process, the two routes alternating round by round: ``zero_copy`` (the tensors read
through ``tensor.numpy()`` views by the NumPy kernels, the result wrapped by
``torch.from_numpy``; the library's default) and ``generic`` (the array-API computation of
``convtranspose._execute.array_api`` with torch's own functions, ``ZERO_COPY = False``).  The
VJP ``ct.vjp.onnx_conv_transpose`` and the forward convolution ``ct.convolution`` are
timed the same way.  Both routes' results are compared before timing.  Prints a table;
``--out`` writes the medians and the ratios as JSON, naming the CPU.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import subprocess
import sys
import time

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SOURCE))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._execute import array_api as _array_api  # noqa: E402

#: (name, batch, in, out, spatial, kernel, stride, pad, groups)
LAYERS = [
    ("DCGAN N16 256->128 16x16 k4 s2 p1", 16, 256, 128, (16, 16), 4, 2, 1, 1),
    ("U-Net N1 512->256 32x32 k2 s2", 1, 512, 256, (32, 32), 2, 2, 0, 1),
    ("FCN-2x N1 21->21 16x16 k4 s2 p1", 1, 21, 21, (16, 16), 4, 2, 1, 1),
    ("stride-1 N1 64->64 64x64 k3 p1", 1, 64, 64, (64, 64), 3, 1, 1, 1),
    ("depthwise N8 256 28x28 k4 s2 p1 g256", 8, 256, 256, (28, 28), 4, 2, 1, 256),
    ("grouped N8 256->256 28x28 k4 s2 p1 g8", 8, 256, 256, (28, 28), 4, 2, 1, 8),
    ("3D N1 128->64 16^3 k2 s2", 1, 128, 64, (16, 16, 16), 2, 2, 0, 1),
    ("tiny N1 2->3 5x5 k3 s2 p1", 1, 2, 3, (5, 5), 3, 2, 1, 1),
]


def cpu_model() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _calls(layer):
    """name -> a no-argument call on fresh torch tensors, for each timed operation."""
    _, n, c_in, c_out, spatial, k, s, p, g = layer
    rng = np.random.default_rng(0)
    rank = len(spatial)
    X = torch.from_numpy(rng.standard_normal((n, c_in) + spatial, np.float32))
    W = torch.from_numpy(rng.standard_normal((c_in, c_out // g) + (k,) * rank, np.float32))
    attrs = dict(strides=s, pads=[p] * (2 * rank), group=g)
    out_shape = ct.shapes.onnx_conv_transpose(tuple(X.shape), tuple(W.shape), **attrs).output_shape
    grad = torch.from_numpy(rng.standard_normal(out_shape, np.float32))
    # the forward convolution whose adjoint this layer is: data shaped like the output
    # (data of the output's shape back to the input's: [C_OUT, C_IN, K...] = W's own
    # memory, or [G, C_OUT/G, C_IN/G, K...] grouped)
    conv_filter = W if g == 1 else W.reshape((g, c_in // g, c_out // g) + (k,) * rank)
    conv = ct.convolution if g == 1 else ct.group_convolution
    conv_attrs = dict(strides=s, pads_begin=p, pads_end=p)
    return {
        "transposed": lambda: ct.onnx_conv_transpose(X, W, **attrs),
        "vjp": lambda: ct.vjp.onnx_conv_transpose(X, W, grad, **attrs),
        "convolution": lambda: conv(grad, conv_filter, **conv_attrs),
    }


def _time(call, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def _agree(call) -> float:
    """The largest difference between the two routes' results, relative to the largest
    magnitude."""
    _array_api.ZERO_COPY = True
    fast = call()
    _array_api.ZERO_COPY = False
    generic = call()
    _array_api.ZERO_COPY = True
    fast = fast if isinstance(fast, tuple) else (fast,)
    generic = generic if isinstance(generic, tuple) else (generic,)
    worst = 0.0
    for a, b in zip(fast, generic):
        if a is None:
            continue
        scale = max(float(a.abs().max()), 1e-30)
        worst = max(worst, float((a - b).abs().max()) / scale)
    return worst


def measure(rounds: int, layers=LAYERS):
    rows = []
    for layer in layers:
        for op, call in _calls(layer).items():
            difference = _agree(call)
            call()
            single = _time(call, 1)
            repeats = max(1, min(50, int(0.2 / max(single, 1e-6))))
            times = {"zero_copy": [], "generic": []}
            for _ in range(rounds):  # alternate the routes, round by round
                for route in times:
                    _array_api.ZERO_COPY = route == "zero_copy"
                    times[route].append(_time(call, repeats))
            _array_api.ZERO_COPY = True
            medians = {route: statistics.median(t) for route, t in times.items()}
            rows.append(dict(layer=layer[0], op=op,
                             zero_copy_ms=round(medians["zero_copy"] * 1e3, 4),
                             generic_ms=round(medians["generic"] * 1e3, 4),
                             generic_over_zero_copy=round(medians["generic"]
                                                          / medians["zero_copy"], 2),
                             max_relative_difference=float(f"{difference:.2e}")))
            print(f"{layer[0]:40s} {op:12s} zero-copy {medians['zero_copy'] * 1e3:9.3f} ms"
                  f"  generic {medians['generic'] * 1e3:9.3f} ms"
                  f"  ratio {medians['generic'] / medians['zero_copy']:6.2f}", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--layers", default="", help="only the layers whose name has this text")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(ct.get_num_threads())
    try:
        rows = measure(args.rounds, [layer for layer in LAYERS if args.layers in layer[0]])
    finally:
        torch.set_num_threads(threads)
    ratios = [row["generic_over_zero_copy"] for row in rows]
    result = {
        "machine": f"{cpu_model()}, {ct.get_num_threads()} threads (torch and the library)",
        "what": ("torch CPU float32 tensors through the public functions: the zero-copy NumPy"
                 " route against the generic array-API computation with torch's functions,"
                 " one process, routes alternating per round; medians of the rounds"),
        "versions": {"torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "rounds": args.rounds,
        "geometric_mean_generic_over_zero_copy": round(
            float(np.exp(np.mean(np.log(ratios)))), 2),
        "fewest_generic_over_zero_copy": min(ratios),
        "rows": rows,
    }
    print(f"generic / zero-copy: geometric mean {result['geometric_mean_generic_over_zero_copy']}"
          f", smallest {min(ratios)}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
