"""The ``convtranspose`` command line (also ``python -m convtranspose``).

Data goes to stdout, diagnostics to stderr.  Exit codes: 0 ok, 1 a check found a
mismatch, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import time

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


def _demo(args: argparse.Namespace) -> int:
    import numpy as np

    import convtranspose as ct

    rng = np.random.default_rng(args.seed)
    data = rng.standard_normal((1, 20, 224, 224), dtype=np.float32)
    filter = rng.standard_normal((20, 10, 3, 3), dtype=np.float32)
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    plan = ct.shapes.convolution_backprop_data(data.shape, filter.shape, **attributes)
    ct.convolution_backprop_data(data, filter, **attributes)  # warm-up
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = ct.convolution_backprop_data(data, filter, **attributes)
        times.append(time.perf_counter() - start)
    print("ConvolutionBackpropData-1, the spec's example layer (random data):")
    print(f"  data {data.shape} float32, filter {filter.shape}, strides 2, pads 1")
    print(f"  output shape  {result.shape}")
    print(f"  pads_begin    {list(plan.pads_begin)}  pads_end {list(plan.pads_end)}")
    print(f"  time          {1e3 * float(np.median(times)):.2f} ms (median of {args.repeat})")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convtranspose",
        description="Spec-exact transposed convolution (OpenVINO, oneDNN Graph, ONNX).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  convtranspose demo\n",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the spec's example layer on random data and time it",
        description="Run ConvolutionBackpropData-1 on data 1x20x224x224 and filter "
        "20x10x3x3 (strides 2, pads 1), print the output shape, resolved pads and time.",
        epilog="example:\n  convtranspose demo --repeat 20",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on bad usage, 0 on --help
        return int(exit_.code or 0)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
