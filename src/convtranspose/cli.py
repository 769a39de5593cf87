"""The ``convtranspose`` command line (also ``python -m convtranspose``).

Data goes to stdout, diagnostics to stderr.  Exit codes: 0 ok, 1 a check found a
mismatch, 2 bad input (a one-line message, never a traceback).

Commands: ``shape`` and ``run`` (one op from shapes or ``.npy`` files), ``ir check``
and ``ir run`` (OpenVINO IR), ``onnx check`` and ``onnx run`` (ONNX), ``bench``
(forwarded to :mod:`convtranspose._bench`) and ``demo``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2

OPS = ("convolution_backprop_data", "group_convolution_backprop_data", "conv_transpose",
       "onnx_conv_transpose")

_OPENVINO_OPS = ("convolution_backprop_data", "group_convolution_backprop_data")


def _keywords(op: str) -> tuple[str, ...]:
    """The op's keyword-only attributes, read off its ``ct.shapes`` signature."""
    import inspect

    from . import shapes

    parameters = inspect.signature(getattr(shapes, op)).parameters.values()
    return tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


_LIST_ATTRIBUTES = ("strides", "pads_begin", "pads_end", "dilations", "output_padding", "pads",
                    "kernel_shape")
_TEXT_ATTRIBUTES = ("auto_pad", "data_format", "filter_format", "weights_format")
_PROGRESS_MIN_LAYERS = 20


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2) instead of the usage dump."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Failure(Exception):
    """A bad input detected by the CLI itself: one line, exit 2."""


def _int_list(text: str) -> tuple[int, ...]:
    """``"1,20,224,224"``, ``"2"`` or ``"[2, 2]"`` -> ints."""
    cleaned = text.strip().strip("[]()")
    items = [item for item in re.split(r"[,\s]+", cleaned) if item]
    try:
        values = tuple(int(item) for item in items)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 2,2, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    return values


def _int_or_list(text: str) -> int | tuple[int, ...]:
    """Like :func:`_int_list`, but a single value stays an int (it applies to every axis)."""
    values = _int_list(text)
    return values[0] if len(values) == 1 else values


def _byte_count(text: str) -> int:
    from .interop._safety import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _error(message: str) -> int:
    print(f"convtranspose: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


# ---------------------------------------------------------------------------
# shape / run


def _attributes(args: argparse.Namespace) -> dict:
    """The attribute flags given, as the op's keyword arguments; unknown ones refused."""
    accepted = _keywords(args.op)
    given = {}
    for name in _LIST_ATTRIBUTES + _TEXT_ATTRIBUTES + ("groups",):
        value = getattr(args, name, None)
        if value is None:
            continue
        if name == "groups":
            name = "group" if args.op == "onnx_conv_transpose" else "groups"
            if name not in accepted:
                raise _Failure(f"{args.op} has no groups attribute: the groups come from the"
                               " filter shape [G, C_IN, C_OUT, K...] of"
                               " group_convolution_backprop_data")
        elif name not in accepted:
            flags = ", ".join("--" + key.replace("_", "-") for key in accepted)
            raise _Failure(f"--{name.replace('_', '-')} is not an attribute of {args.op};"
                           f" it takes {flags}")
        given[name] = value
    return given


def _plan(args: argparse.Namespace, data_shape, filter_shape, bias_shape):
    """Call the op's shape function with the CLI's arguments."""
    from . import shapes
    from .interop._safety import element_count

    for label, dims in (("--data-shape", data_shape), ("--filter-shape", filter_shape),
                        ("--bias-shape", bias_shape)):
        if dims is not None:
            element_count(label, dims)
    attributes = _attributes(args)
    plan = _call(getattr(shapes, args.op), args, data_shape, filter_shape, bias_shape, attributes)
    element_count("the output shape", plan.output_shape)
    return plan, attributes


def _call(function, args: argparse.Namespace, data, filter_, bias, attributes: dict):
    """``function`` (the op or its shapes twin) with the op's own calling convention.

    The OpenVINO ops take ``output_shape`` as their third input and have no bias; the
    others take the bias third and ``output_shape`` as a keyword.
    """
    if args.op in _OPENVINO_OPS:
        if bias is not None:
            raise _Failure(f"{args.op} has no bias; --bias-shape/--bias apply to conv_transpose"
                           " and onnx_conv_transpose")
        return function(data, filter_, args.output_shape, **attributes)
    return function(data, filter_, bias, output_shape=args.output_shape, **attributes)


def _plan_dict(plan) -> dict:
    return {
        "op": plan.op,
        "data_shape": list(plan.data_shape),
        "filter_shape": list(plan.filter_shape),
        "output_shape": list(plan.output_shape),
        "pads_begin": list(plan.pads_begin),
        "pads_end": list(plan.pads_end),
        "offset": list(plan.offset),
        "output_size": list(plan.output_size),
        "strides": list(plan.strides),
        "dilations": list(plan.dilations),
        "output_padding": list(plan.output_padding),
        "auto_pad": plan.auto_pad,
        "groups": plan.groups,
        "data_format": plan.data_format,
        "filter_layout": plan.filter_layout,
        "formulas": list(plan.formulas),
    }


def _shape(args: argparse.Namespace) -> int:
    plan, _ = _plan(args, args.data_shape, args.filter_shape, args.bias_shape)
    if args.json:
        print(json.dumps(_plan_dict(plan)))
        return EXIT_OK
    rows = [
        ("op", plan.op),
        ("data_shape", list(plan.data_shape)),
        ("filter_shape", list(plan.filter_shape)),
        ("output_shape", list(plan.output_shape)),
        ("pads_begin", list(plan.pads_begin)),
        ("pads_end", list(plan.pads_end)),
        ("auto_pad", plan.auto_pad),
        ("groups", plan.groups),
    ]
    rows += [(f"axis {i}", text) for i, text in enumerate(plan.formulas)]
    for key, value in rows:
        print(f"{key:<13} {value}")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    import convtranspose as ct

    from .interop._safety import check_plan_memory, load_npy, save_npy

    data = load_npy(args.data, "data", args.max_bytes)
    filter_ = load_npy(args.filter, "filter", args.max_bytes)
    bias = None if args.bias is None else load_npy(args.bias, "bias", args.max_bytes)
    plan, attributes = _plan(args, data.shape, filter_.shape,
                             None if bias is None else bias.shape)
    check_plan_memory(plan, data.dtype, args.max_bytes)
    result = _call(getattr(ct, args.op), args, data, filter_, bias, attributes)
    save_npy(args.output, result)
    print(f"{args.output}: {result.dtype} {list(result.shape)}")
    return EXIT_OK


# ---------------------------------------------------------------------------
# ir / onnx


class _Progress:
    """A one-line progress bar on stderr, shown only on a terminal for large models."""

    def __init__(self, total: int, label: str):
        self.total, self.label = total, label
        self.enabled = total >= _PROGRESS_MIN_LAYERS and sys.stderr.isatty()
        self.last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.05 and done < self.total):
            return
        self.last = now
        width = 30
        filled = width * done // self.total
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}]"
                         f" {done}/{self.total}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * (len(self.label) + 50) + "\r")
            sys.stderr.flush()


def _check_each(items: list, check) -> list:
    """``[check(item) for item in items]``, with a progress bar for large models."""
    progress = _Progress(len(items), "checking")
    reports = []
    try:
        for done, item in enumerate(items, 1):
            reports.append(check(item))
            progress.update(done)
    finally:
        progress.close()
    return reports


def _report_check(reports, items_name: str, file_name: str, as_json: bool) -> int:
    from .interop._report import format_table

    failed = [report for report in reports if report.failed]
    unchecked = [report for report in reports if report.status == "unchecked"]
    if as_json:
        print(json.dumps({"model": file_name, "layers": [r.to_dict() for r in reports],
                          "mismatches": len(failed)}))
    else:
        if reports:
            print(format_table(reports))
        summary = f"{file_name}: {len(reports)} {items_name} checked, {len(failed)} mismatched"
        if unchecked:
            summary += f", {len(unchecked)} not checkable (dynamic shapes)"
        print(summary)
    for report in reports:
        for problem in report.problems:
            prefix = "mismatch" if report.failed else "note"
            print(f"convtranspose: {prefix}: {problem}", file=sys.stderr)
    return EXIT_MISMATCH if failed else EXIT_OK


def _ir_check(args: argparse.Namespace) -> int:
    import os

    from .interop import ir

    model = ir.load(args.model, args.bin, max_bytes=args.max_bytes)
    reports = _check_each(model.transposed_layers, model.check)
    return _report_check(reports, "transposed-convolution layers", os.path.basename(args.model),
                         args.json)


def _ir_run(args: argparse.Namespace) -> int:
    from .interop import ir
    from .interop._safety import load_npy, save_npy

    model = ir.load(args.model, args.bin, max_bytes=args.max_bytes)
    layer = model.layer(args.layer)
    data = load_npy(args.data, "data", args.max_bytes)
    result, notes = model.run(layer, data)
    for note in notes:
        print(f"convtranspose: note: {note}", file=sys.stderr)
    save_npy(args.output, result)
    print(f"{args.output}: {result.dtype} {list(result.shape)} from layer {layer.name!r}")
    return EXIT_OK


def _onnx_check(args: argparse.Namespace) -> int:
    import os

    from .interop import onnx_model

    model = onnx_model.load(args.model, max_bytes=args.max_bytes)
    reports = _check_each(model.transposed_nodes, model.check)
    return _report_check(reports, "ConvTranspose nodes", os.path.basename(args.model), args.json)


def _onnx_run(args: argparse.Namespace) -> int:
    from .interop import onnx_model
    from .interop._safety import load_npy, save_npy

    model = onnx_model.load(args.model, max_bytes=args.max_bytes)
    node = model.node(args.node)
    data = load_npy(args.data, "data", args.max_bytes)
    result, notes = model.run(node, data)
    for note in notes:
        print(f"convtranspose: note: {note}", file=sys.stderr)
    save_npy(args.output, result)
    print(f"{args.output}: {result.dtype} {list(result.shape)} from node"
          f" {onnx_model.node_label(node)!r}")
    return EXIT_OK


# ---------------------------------------------------------------------------
# bench / demo


def _bench(argv: list[str]) -> int:
    import importlib

    try:
        bench = importlib.import_module("convtranspose._bench")
    except ModuleNotFoundError as error:
        if error.name == "convtranspose._bench":
            return _error("the benchmark module convtranspose._bench is not part of this"
                          " installation")
        return _error(f"the benchmark needs {error.name!r}, which is not installed:"
                      " pip install 'convtranspose[bench]'")
    try:
        code = bench.main(argv)
    except SystemExit as exit_:
        code = exit_.code
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_BAD_INPUT


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


# ---------------------------------------------------------------------------
# the parser

_SHAPE_EXAMPLES = """\
examples:
  convtranspose shape convolution_backprop_data --data-shape 1,20,224,224 \\
      --filter-shape 20,10,3,3 --strides 2,2 --pads-begin 1,1 --pads-end 1,1
  convtranspose shape group_convolution_backprop_data --data-shape 1,20,224,224 \\
      --filter-shape 4,5,2,3,3 --output-shape 450,450 --auto-pad same_upper --strides 2,2
  convtranspose shape conv_transpose --data-shape 1,8,8,16 --filter-shape 3,3,16,4 \\
      --strides 2,2 --auto-pad same_upper --groups 1 --json
  convtranspose shape onnx_conv_transpose --data-shape 1,1,3,3 --filter-shape 1,2,3,3 \\
      --strides 3,2 --output-shape 10,8
"""

_RUN_EXAMPLES = """\
examples:
  convtranspose run convolution_backprop_data --data x.npy --filter w.npy \\
      --strides 2,2 --pads-begin 1,1 --pads-end 1,1 -o y.npy
  convtranspose run onnx_conv_transpose --data x.npy --filter w.npy --bias b.npy \\
      --strides 2,2 --pads 1,1,1,1 -o y.npy
"""

_IR_EXAMPLES = """\
examples:
  convtranspose ir check model.xml            # weights read from model.bin
  convtranspose ir check model.xml --json
  convtranspose ir run model.xml --layer up1 --data x.npy -o y.npy
"""

_ONNX_EXAMPLES = """\
examples:
  convtranspose onnx check model.onnx
  convtranspose onnx run model.onnx --node deconv1 --data x.npy -o y.npy
"""

_MAX_BYTES_HELP = ("refuse any file, constant or computation needing more memory than this"
                   " (e.g. 512M, 8G; default 4G)")


def _add_attribute_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "attributes", "the op's keyword arguments with dashes; lists are comma-separated"
        " (a single value applies to every spatial axis)")
    for name in ("strides", "pads_begin", "pads_end", "dilations", "output_padding"):
        group.add_argument("--" + name.replace("_", "-"), dest=name, type=_int_or_list,
                           metavar="N[,N...]")
    group.add_argument("--auto-pad", dest="auto_pad", metavar="MODE",
                       help="explicit|same_upper|same_lower|valid (OpenVINO), none|... (oneDNN),"
                            " NOTSET|... (ONNX); case-insensitive")
    group.add_argument("--groups", "--group", dest="groups", type=int, metavar="G",
                       help="conv_transpose groups / onnx_conv_transpose group")
    group.add_argument("--data-format", dest="data_format", metavar="NCX|NXC")
    group.add_argument("--filter-format", dest="filter_format", metavar="XIO|OIX|IOX|XOI")
    group.add_argument("--weights-format", dest="weights_format", metavar="XIO|OIX|IOX|XOI")
    group.add_argument("--pads", dest="pads", type=_int_list, metavar="B1,..,E1,..",
                       help="onnx_conv_transpose: all begins, then all ends")
    group.add_argument("--kernel-shape", dest="kernel_shape", type=_int_list, metavar="K[,K...]")
    group.add_argument("--output-shape", dest="output_shape", type=_int_list, metavar="Y[,Y...]",
                       help="the spatial output size (pads are then derived from it)")


def _subparser(commands, name: str, help: str, description: str, epilog: str):
    return commands.add_parser(name, help=help, description=description, epilog=epilog,
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="convtranspose",
        description="Spec-exact transposed convolution (OpenVINO, oneDNN Graph, ONNX): shape"
                    " inference, execution, and checking the layers of real models.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  convtranspose shape convolution_backprop_data --data-shape 1,20,224,224"
               " --filter-shape 20,10,3,3 --strides 2,2 --pads-begin 1,1 --pads-end 1,1\n"
               "  convtranspose run conv_transpose --data x.npy --filter w.npy --strides 2"
               " -o y.npy\n"
               "  convtranspose ir check model.xml\n"
               "  convtranspose onnx check model.onnx\n"
               "  convtranspose bench --quick\n"
               "  convtranspose demo\n"
               "\nexit codes: 0 ok, 1 a check found a mismatch, 2 bad input."
               " Data goes to stdout, diagnostics to stderr.\n",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)

    shape = _subparser(commands, "shape", "output shape, resolved pads and per-axis formulas",
                       "Infer the output shape and resolved pads of one op from shapes alone,"
                       " and show per spatial axis the formula with its numbers.", _SHAPE_EXAMPLES)
    shape.add_argument("op", choices=OPS, metavar="OP", help=" | ".join(OPS))
    shape.add_argument("--data-shape", required=True, type=_int_list, metavar="N,C,X...",
                       help="data (ONNX X, oneDNN input) shape, in the op's own layout")
    shape.add_argument("--filter-shape", required=True, type=_int_list, metavar="DIMS",
                       help="filter (ONNX W) shape, in the op's own layout")
    shape.add_argument("--bias-shape", type=_int_list, metavar="M",
                       help="bias (ONNX B) shape: conv_transpose and onnx_conv_transpose")
    shape.add_argument("--json", action="store_true",
                       help="print one JSON object (output_shape, pads_begin, pads_end, offset,"
                            " output_size, formulas ...)")
    _add_attribute_flags(shape)
    shape.set_defaults(handler=_shape)

    run = _subparser(commands, "run", "compute one op on .npy files",
                     "Compute one op on arrays from .npy files and write the result to a .npy"
                     " file (only that file is written).", _RUN_EXAMPLES)
    run.add_argument("op", choices=OPS, metavar="OP", help=" | ".join(OPS))
    run.add_argument("--data", required=True, metavar="X.npy")
    run.add_argument("--filter", required=True, metavar="W.npy")
    run.add_argument("--bias", metavar="B.npy",
                     help="conv_transpose and onnx_conv_transpose only")
    run.add_argument("-o", "--output", required=True, metavar="Y.npy")
    run.add_argument("--max-bytes", type=_byte_count, default=None, metavar="SIZE",
                     help=_MAX_BYTES_HELP)
    _add_attribute_flags(run)
    run.set_defaults(handler=_run, bias_shape=None)

    ir = _subparser(commands, "ir", "check or run the transposed convolutions of an OpenVINO IR",
                    "OpenVINO IR (.xml + .bin): ConvolutionBackpropData-1 and"
                    " GroupConvolutionBackpropData-1 layers.", _IR_EXAMPLES)
    ir_commands = ir.add_subparsers(dest="ir_command", required=True, metavar="ACTION",
                                    parser_class=_Parser)
    ir_check = _subparser(ir_commands, "check", "recompute every layer's output shape",
                          "Recompute the output shape of every ConvolutionBackpropData and"
                          " GroupConvolutionBackpropData layer from its input dims and"
                          " attributes (output_shape from its Const), compare with the declared"
                          " <output> dims and print a table with the resolved pads."
                          " Exit 1 on any mismatch.", _IR_EXAMPLES)
    ir_check.add_argument("model", metavar="MODEL.xml")
    ir_check.add_argument("--json", action="store_true", help="print one JSON object")
    ir_run = _subparser(ir_commands, "run", "execute one layer with the model's weights",
                        "Execute one transposed-convolution layer on data from a .npy file with"
                        " its weights read from the .bin (Const, or f16 Const + Convert).",
                        _IR_EXAMPLES)
    ir_run.add_argument("model", metavar="MODEL.xml")
    ir_run.add_argument("--layer", required=True, metavar="NAME", help="the layer's name (or id)")
    ir_run.add_argument("--data", required=True, metavar="X.npy")
    ir_run.add_argument("-o", "--output", required=True, metavar="Y.npy")
    for sub in (ir_check, ir_run):
        sub.add_argument("--bin", metavar="MODEL.bin",
                         help="the weights (default: next to the .xml)")
        sub.add_argument("--max-bytes", type=_byte_count, default=None, metavar="SIZE",
                         help=_MAX_BYTES_HELP)
    ir_check.set_defaults(handler=_ir_check)
    ir_run.set_defaults(handler=_ir_run)

    onnx = _subparser(commands, "onnx", "check or run the ConvTranspose nodes of an ONNX model",
                      "ONNX models: ConvTranspose nodes (needs the onnx package).", _ONNX_EXAMPLES)
    onnx_commands = onnx.add_subparsers(dest="onnx_command", required=True, metavar="ACTION",
                                        parser_class=_Parser)
    onnx_check = _subparser(onnx_commands, "check", "recompute every node's output shape",
                            "Recompute the output shape of every ConvTranspose node from its"
                            " input shapes and attributes, compare with the shapes the model"
                            " declares (value_info, graph outputs) and print a table with the"
                            " resolved pads. Exit 1 on any mismatch.", _ONNX_EXAMPLES)
    onnx_check.add_argument("model", metavar="MODEL.onnx")
    onnx_check.add_argument("--json", action="store_true", help="print one JSON object")
    onnx_run = _subparser(onnx_commands, "run", "execute one node with the model's weights",
                          "Execute one ConvTranspose node on data from a .npy file with its"
                          " weights and bias from the model's initializers.", _ONNX_EXAMPLES)
    onnx_run.add_argument("model", metavar="MODEL.onnx")
    onnx_run.add_argument("--node", required=True, metavar="NAME",
                          help="the node's name (or its output's name)")
    onnx_run.add_argument("--data", required=True, metavar="X.npy")
    onnx_run.add_argument("-o", "--output", required=True, metavar="Y.npy")
    for sub in (onnx_check, onnx_run):
        sub.add_argument("--max-bytes", type=_byte_count, default=None, metavar="SIZE",
                         help=_MAX_BYTES_HELP)
    onnx_check.set_defaults(handler=_onnx_check)
    onnx_run.set_defaults(handler=_onnx_run)

    commands.add_parser(
        "bench", help="benchmark against the peer runtimes (arguments go to the benchmark)",
        description="Run the benchmark suite; every argument after 'bench' is passed to it"
                    " (see `convtranspose bench --help`).",
        epilog="examples:\n  convtranspose bench --quick --out bench-results\n",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)

    demo = _subparser(commands, "demo", "run the spec's example layer on random data and time it",
                      "Run ConvolutionBackpropData-1 on data 1x20x224x224 and filter 20x10x3x3"
                      " (strides 2, pads 1), print the output shape, resolved pads and time.",
                      "example:\n  convtranspose demo --repeat 20")
    demo.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":  # everything after it belongs to the benchmark
        return _bench(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on bad usage, 0 on --help
        return int(exit_.code or 0)
    if getattr(args, "max_bytes", "absent") is None:
        from .interop._safety import DEFAULT_MAX_BYTES

        args.max_bytes = DEFAULT_MAX_BYTES
    from ._errors import ConvTransposeError
    from .interop._safety import MissingDependencyError

    try:
        code = args.handler(args)
        sys.stdout.flush()  # inside the try: a closed pipe is reported here, not at exit
        return code
    except (ConvTransposeError, _Failure, MissingDependencyError) as error:
        return _error(str(error))
    except TypeError as error:  # the documented dtype errors of the array functions
        return _error(str(error))
    except MemoryError:
        return _error("out of memory; lower the sizes or the --max-bytes limit")
    except KeyboardInterrupt:
        print("convtranspose: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `| head` closed stdout early: not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
