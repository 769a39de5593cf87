"""The ``convtranspose`` command line's parser: commands, options and their help.

Apart from :mod:`convtranspose.cli`, which holds what each command does, so that the
parser can be read (and its help checked) on its own.
"""

from __future__ import annotations

import argparse
import json
import re

from .._plan.dialects import DIALECTS, dialects_on

__all__ = ["ATTRIBUTES", "EXIT_BAD_INPUT", "MAX_NESTING", "OPS", "Failure", "build_parser",
           "byte_count", "input_shape", "json_value"]

#: Exit code of bad input (a one-line message on stderr).
EXIT_BAD_INPUT = 2

#: The dialects ``shape`` and ``run`` take.
OPS = dialects_on("cli")
_WITH_BIAS = ", ".join(op for op in OPS if DIALECTS[op].operands[2])


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2) instead of the usage dump."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class Failure(Exception):
    """A bad input detected by the CLI itself: one line, exit 2."""


def int_list(text: str) -> tuple[int, ...]:
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


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``--input-shape``: ``"x=1,3,32,32"`` -> ``("x", (1, 3, 32, 32))``."""
    name, separator, dims = text.rpartition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=DIMS such as x=1,3,32,32, got {text!r}")
    return name, int_list(dims)


def int_or_list(text: str) -> int | tuple[int, ...]:
    """Like :func:`int_list`, but a single value stays an int (it applies to every axis)."""
    values = int_list(text)
    return values[0] if len(values) == 1 else values


def _counting(least: int):
    """An argparse type: an integer of at least ``least`` (a count, a seed)."""
    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return read


def byte_count(text: str) -> int:
    from ..interop._safety import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


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
  convtranspose shape torch_conv_transpose --data-shape 1,8,5,5 --filter-shape 8,4,3,3 \\
      --stride 2 --padding 1 --output-padding 1
  convtranspose shape tf_conv_transpose --data-shape 1,3,3,1 --filter-shape 3,3,1,1 \\
      --output-shape 1,6,6,1 --strides 2 --padding SAME
"""

_RUN_EXAMPLES = """\
examples:
  convtranspose run convolution_backprop_data --data x.npy --filter w.npy \\
      --strides 2,2 --pads-begin 1,1 --pads-end 1,1 -o y.npy
  convtranspose run onnx_conv_transpose --data x.npy --filter w.npy --bias b.npy \\
      --strides 2,2 --pads 1,1,1,1 -o y.npy
  convtranspose run jax_conv_transpose --data x.npy --filter w.npy --strides 2,2 \\
      --padding '[[1,2],[0,1]]' --dimension-numbers NCHW,OIHW,NCHW -o y.npy
"""

_IR_EXAMPLES = """\
examples:
  convtranspose ir check model.xml            # weights read from model.bin
  convtranspose ir check model.xml --json
  convtranspose ir check model.xml --input-shape x=1,3,64,64
  convtranspose ir compare model.xml          # every layer against OpenVINO
  convtranspose ir run model.xml --layer up1 --data x.npy -o y.npy
"""

_ONNX_EXAMPLES = """\
examples:
  convtranspose onnx check model.onnx
  convtranspose onnx check model.onnx --input-shape x=1,3,64,64
  convtranspose onnx compare model.onnx       # every node against onnxruntime
  convtranspose onnx run model.onnx --node deconv1 --data x.npy -o y.npy
"""

def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    """``-o``, ``--dtype`` and ``--json`` of the commands that write a result."""
    parser.add_argument("-o", "--output", required=True, metavar="Y.npy",
                        help="the result's .npy file; - writes it to stdout")
    parser.add_argument("--dtype", metavar="DTYPE",
                        help="the dtype the .npy files hold; bfloat16 also reads NumPy's raw"
                             " 2-byte values (|V2), as NumPy stores bfloat16")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (output, dtype, shape, notes ...)")


_MAX_BYTES_HELP = ("refuse any file, constant or computation needing more memory than this"
                   " (e.g. 512M, 8G; default 4G)")


def add_attribute_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "attributes", "the op's keyword arguments with dashes; lists are comma-separated"
        " (a single value applies to every spatial axis)")
    for name in ("strides", "pads_begin", "pads_end", "dilations", "output_padding"):
        group.add_argument("--" + name.replace("_", "-"), dest=name, type=int_or_list,
                           metavar="N[,N...]")
    group.add_argument("--auto-pad", dest="auto_pad", metavar="MODE",
                       help="explicit|same_upper|same_lower|valid (OpenVINO), none|... (oneDNN),"
                            " NOTSET|... (ONNX); case-insensitive")
    group.add_argument("--groups", "--group", dest="groups", type=int, metavar="G",
                       help="conv_transpose groups / onnx_conv_transpose group")
    group.add_argument("--data-format", dest="data_format", metavar="NCX|NXC")
    group.add_argument("--filter-format", dest="filter_format", metavar="XIO|OIX|IOX|XOI")
    group.add_argument("--weights-format", dest="weights_format", metavar="XIO|OIX|IOX|XOI")
    group.add_argument("--pads", dest="pads", type=int_list, metavar="B1,..,E1,..",
                       help="onnx_conv_transpose: all begins, then all ends")
    group.add_argument("--kernel-shape", dest="kernel_shape", type=int_list, metavar="K[,K...]")
    group.add_argument("--output-shape", dest="output_shape", type=int_list, metavar="Y[,Y...]",
                       help="the spatial output size (pads are then derived from it)")


#: The deepest nesting of brackets a JSON value on the command line may have: an
#: attribute is a number, a string or a list of lists at most, and Python's JSON reader
#: recurses once per bracket (50 000 of them raised RecursionError).
MAX_NESTING = 32


def json_value(text: str, option: str):
    """``text`` read as JSON, its nesting checked first (:data:`MAX_NESTING`).

    Raises
    ------
    argparse.ArgumentTypeError
        Brackets nested deeper than :data:`MAX_NESTING`, naming ``option``.
    json.JSONDecodeError
        Not JSON.
    """
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:  # brackets inside a string are text
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise argparse.ArgumentTypeError(
                    f"{option} nests brackets more than {MAX_NESTING} deep;"
                    " an attribute is a number, a string or a list of them")
        elif char in "]}":
            depth -= 1
    return json.loads(text)


def any_value(text: str):
    """A value of any type: ints as :func:`int_or_list` reads them, else JSON
    (``[[0, 0], [1, 1]]``, ``true``), else comma-separated words as a tuple, else the
    word itself (``SAME``)."""
    try:
        return int_or_list(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        return json_value(text, "the value")
    except json.JSONDecodeError:
        pass
    words = tuple(word.strip() for word in text.split(","))
    return words if len(words) > 1 else text


#: The attributes :func:`add_attribute_flags` has flags for (``groups`` also as ``group``).
_SHARED = ("strides", "pads_begin", "pads_end", "dilations", "output_padding", "auto_pad",
           "groups", "group", "data_format", "filter_format", "weights_format", "pads",
           "kernel_shape", "output_shape")

#: How a flag reads its value, by the annotation of the argument it sets.
_READERS = {"PerAxis": (int_or_list, "N[,N...]"), "ShapeLike": (int_list, "N[,N...]"),
            "ShapeLike | None": (int_list, "N[,N...]"), "int": (int, "N"),
            "int | None": (int, "N"), "str": (str, "WORD"), "str | None": (str, "WORD")}


def _dialect_arguments(ops) -> dict:
    """Every argument of the dialects ``ops`` that is not an operand and has no flag of
    :func:`add_attribute_flags`: name -> (its annotations, the dialects that take it), in
    the order the dialects list them."""
    import inspect

    from .. import shapes

    arguments: dict = {}
    for op in ops:
        operands = set(DIALECTS[op].operands)
        for parameter in inspect.signature(getattr(shapes, op)).parameters.values():
            if parameter.name in operands or parameter.name in _SHARED:
                continue
            annotations, takers = arguments.setdefault(parameter.name, (set(), []))
            annotations.add(str(parameter.annotation))
            takers.append(op)
    return arguments


def add_dialect_flags(parser: argparse.ArgumentParser, ops) -> None:
    """:func:`add_attribute_flags`, then a flag for every other argument of the dialects
    ``ops`` under its own name (``--stride``, ``--padding-mode``, ``--transpose-kernel``
    ...), read as its annotation says (an argument whose dialects disagree on its type,
    such as ``padding``, reads any value: :func:`any_value`)."""
    add_attribute_flags(parser)
    group = parser.add_argument_group(
        "the frameworks' arguments", "each dialect's other arguments under their own names;"
        " a value that is not ints is read as JSON ([[1, 0], [0, 1]], true) or as a word")
    arguments = _dialect_arguments(ops)
    for name, (types, takers) in arguments.items():
        flag, owners = "--" + name.replace("_", "-"), ", ".join(takers)
        if types == {"bool"}:
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction,
                               default=None, help=owners)
            continue
        reader, metavar = _READERS.get(types.pop(), (any_value, "VALUE")) \
            if len(types) == 1 else (any_value, "VALUE")
        group.add_argument(flag, dest=name, type=reader, metavar=metavar, help=owners)


#: The destinations of every attribute flag of ``shape`` and ``run``.
ATTRIBUTES = tuple(name for name in _SHARED if name != "group") + tuple(
    _dialect_arguments(OPS))


def add_input_shape_flag(parser: argparse.ArgumentParser) -> None:
    """``--input-shape NAME=DIMS`` (repeatable) of the commands that read a model."""
    parser.add_argument("--input-shape", dest="input_shapes", action="append", type=input_shape,
                        default=[], metavar="NAME=DIMS",
                        help="the dims of a model input declared with dynamic dims, e.g."
                             " x=1,3,32,32 (repeatable); the shapes inside the model are"
                             " inferred again from them")


def subparser(commands, name: str, help: str, description: str, epilog: str):
    return commands.add_parser(name, help=help, description=description, epilog=epilog,
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser(handlers: dict) -> argparse.ArgumentParser:
    """The ``convtranspose`` parser; ``handlers`` maps each command (``shape``, ``run``,
    ``ir check``, ``ir run``, ``ir compare``, ``onnx check``, ``onnx run``, ``onnx
    compare``, ``tune``, ``demo``) to its function."""
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
               "  convtranspose onnx compare model.onnx --input-shape x=1,3,64,64\n"
               "  convtranspose tune model.xml\n"
               "  convtranspose bench --quick\n"
               "  convtranspose bench --random 7\n"
               "  convtranspose demo\n"
               "\nexit codes: 0 ok, 1 a check found a mismatch, 2 bad input, 3 a check or"
               " comparison found no transposed convolution to check or compare."
               " Data goes to stdout, diagnostics to stderr.\n",
    )
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"convtranspose {__version__}",
                        help="print the library's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)

    _add_shape(commands, handlers)
    _add_run(commands, handlers)
    _add_ir(commands, handlers)
    _add_onnx(commands, handlers)
    _add_tune(commands, handlers)
    _add_bench_and_demo(commands, handlers)
    if "translate" in handlers:  # the handler brings its own parser (_cli_translate)
        handlers["translate"].add_parser(commands, handlers["translate"])
    return parser


def _add_shape(commands, handlers: dict) -> None:
    """``convtranspose shape``."""
    shape = subparser(commands, "shape", "output shape, resolved pads and per-axis formulas",
                      "Infer the output shape and resolved pads of one op from shapes alone,"
                      " and show per spatial axis the formula with its numbers.", _SHAPE_EXAMPLES)
    shape.add_argument("op", choices=OPS, metavar="OP", help=" | ".join(OPS))
    shape.add_argument("--data-shape", required=True, type=int_list, metavar="N,C,X...",
                       help="data (ONNX X, oneDNN input) shape, in the op's own layout")
    shape.add_argument("--filter-shape", required=True, type=int_list, metavar="DIMS",
                       help="filter (ONNX W) shape, in the op's own layout")
    shape.add_argument("--bias-shape", type=int_list, metavar="M",
                       help="bias (ONNX B) shape: " + _WITH_BIAS)
    shape.add_argument("--json", action="store_true",
                       help="print one JSON object (output_shape, pads_begin, pads_end, offset,"
                            " output_size, formulas ...)")
    shape.add_argument("--explain", action="store_true",
                       help="also show which algorithm computes the layer on this machine and"
                            " why: every candidate's estimate, the choice, what runs")
    shape.add_argument("--dtype", default="float32", metavar="DTYPE",
                       help="operand dtype for --explain (default float32)")
    shape.add_argument("--measure", action="store_true",
                       help="with --explain: time the candidates now on random data (unless"
                            " this machine has measured the layer) and show the times beside"
                            " the estimates")
    add_dialect_flags(shape, OPS)
    shape.set_defaults(handler=handlers["shape"])


def _add_run(commands, handlers: dict) -> None:
    """``convtranspose run``."""
    run = subparser(commands, "run", "compute one op on .npy files",
                    "Compute one op on arrays from .npy files and write the result to a .npy"
                    " file (only that file is written).", _RUN_EXAMPLES)
    run.add_argument("op", choices=OPS, metavar="OP", help=" | ".join(OPS))
    run.add_argument("--data", required=True, metavar="X.npy")
    run.add_argument("--filter", required=True, metavar="W.npy")
    run.add_argument("--bias", metavar="B.npy", help=_WITH_BIAS + " only")
    _add_output_flags(run)
    run.add_argument("--max-bytes", type=byte_count, default=None, metavar="SIZE",
                     help=_MAX_BYTES_HELP)
    add_dialect_flags(run, OPS)
    run.set_defaults(handler=handlers["run"], bias_shape=None)


def _add_ir(commands, handlers: dict) -> None:
    """``convtranspose ir check|run``."""
    ir = subparser(commands, "ir", "check, run or compare the transposed convolutions of an"
                   " OpenVINO IR",
                   "OpenVINO IR (.xml + .bin): ConvolutionBackpropData-1 and"
                   " GroupConvolutionBackpropData-1 layers.", _IR_EXAMPLES)
    ir_commands = ir.add_subparsers(dest="ir_command", required=True, metavar="ACTION",
                                    parser_class=_Parser)
    ir_check = subparser(ir_commands, "check", "recompute every layer's output shape",
                         "Recompute the output shape of every ConvolutionBackpropData and"
                         " GroupConvolutionBackpropData layer from its input dims and"
                         " attributes (output_shape from its Const), compare with the declared"
                         " <output> dims and print a table with the resolved pads."
                         " Exit 1 on any mismatch.", _IR_EXAMPLES)
    ir_check.add_argument("model", metavar="MODEL.xml")
    ir_check.add_argument("--json", action="store_true", help="print one JSON object")
    ir_run = subparser(ir_commands, "run", "execute one layer with the model's weights",
                       "Execute one transposed-convolution layer on data from a .npy file with"
                       " its weights read from the .bin (Const, or f16 Const + Convert).",
                       _IR_EXAMPLES)
    ir_run.add_argument("model", metavar="MODEL.xml")
    ir_run.add_argument("--layer", required=True, metavar="NAME", help="the layer's name (or id)")
    ir_run.add_argument("--data", required=True, metavar="X.npy")
    _add_output_flags(ir_run)
    for sub in (ir_check, ir_run):
        sub.add_argument("--bin", metavar="MODEL.bin",
                         help="the weights (default: next to the .xml)")
        sub.add_argument("--max-bytes", type=byte_count, default=None, metavar="SIZE",
                         help=_MAX_BYTES_HELP)
    for sub in (ir_check, ir_run):
        add_input_shape_flag(sub)
    if "ir compare" in handlers:  # the handler brings its own parser (_cli.compare)
        handlers["ir compare"].add_parser(ir_commands, handlers["ir compare"], "ir")
    ir_check.set_defaults(handler=handlers["ir check"])
    ir_run.set_defaults(handler=handlers["ir run"])


def _add_onnx(commands, handlers: dict) -> None:
    """``convtranspose onnx check|run``."""
    onnx = subparser(commands, "onnx", "check, run or compare the ConvTranspose nodes of an"
                     " ONNX model",
                     "ONNX models: ConvTranspose nodes (needs the onnx package).", _ONNX_EXAMPLES)
    onnx_commands = onnx.add_subparsers(dest="onnx_command", required=True, metavar="ACTION",
                                        parser_class=_Parser)
    onnx_check = subparser(onnx_commands, "check", "recompute every node's output shape",
                           "Recompute the output shape of every ConvTranspose node from its"
                           " input shapes and attributes, compare with the shapes the model"
                           " declares (value_info, graph outputs) and print a table with the"
                           " resolved pads. Exit 1 on any mismatch.", _ONNX_EXAMPLES)
    onnx_check.add_argument("model", metavar="MODEL.onnx")
    onnx_check.add_argument("--json", action="store_true", help="print one JSON object")
    onnx_run = subparser(onnx_commands, "run", "execute one node with the model's weights",
                         "Execute one ConvTranspose node on data from a .npy file with its"
                         " weights and bias from the model's initializers.", _ONNX_EXAMPLES)
    onnx_run.add_argument("model", metavar="MODEL.onnx")
    onnx_run.add_argument("--node", required=True, metavar="NAME",
                          help="the node's name (or its output's name)")
    onnx_run.add_argument("--data", required=True, metavar="X.npy")
    _add_output_flags(onnx_run)
    for sub in (onnx_check, onnx_run):
        sub.add_argument("--max-bytes", type=byte_count, default=None, metavar="SIZE",
                         help=_MAX_BYTES_HELP)
    for sub in (onnx_check, onnx_run):
        add_input_shape_flag(sub)
    if "onnx compare" in handlers:  # the handler brings its own parser (_cli.compare)
        handlers["onnx compare"].add_parser(onnx_commands, handlers["onnx compare"], "onnx")
    onnx_check.set_defaults(handler=handlers["onnx check"])
    onnx_run.set_defaults(handler=handlers["onnx run"])


_TUNE_EXAMPLES = ("examples:\n  convtranspose tune model.xml\n"
                  "  convtranspose tune model.onnx --level exhaustive --json\n"
                  "  convtranspose tune model.xml --force\n")


def _add_tune(commands, handlers: dict) -> None:
    """``convtranspose tune``."""
    tune = subparser(commands, "tune", "measure every layer of a model and keep the wisdom",
                     "Run every transposed-convolution layer of an OpenVINO IR (.xml) or ONNX"
                     " model once on random data with the model's weights, under measured"
                     " planning: time the candidate algorithms, keep the fastest as this"
                     " machine's wisdom (CONVTRANSPOSE_WISDOM), and print each layer's"
                     " choice, its time and the runner-up.", _TUNE_EXAMPLES)
    tune.add_argument("model", metavar="MODEL", help="an OpenVINO IR .xml or an ONNX model")
    tune.add_argument("--bin", metavar="MODEL.bin",
                      help="the IR's weights (default: next to the .xml)")
    tune.add_argument("--level", choices=("measure", "exhaustive"), default="measure",
                      help="time the estimate's best three (measure, default) or every"
                           " applicable algorithm (exhaustive)")
    tune.add_argument("--batch", type=int, default=1, metavar="N",
                      help="the batch of layers whose batch is dynamic (default 1)")
    tune.add_argument("--seed", type=int, default=0, help="seed of the random data")
    tune.add_argument("--force", action="store_true",
                      help="measure again the layers the wisdom already has (a choice"
                           " measured on a busy machine) and replace their entries")
    tune.add_argument("--json", action="store_true", help="print one JSON object")
    tune.add_argument("--max-bytes", type=byte_count, default=None, metavar="SIZE",
                      help=_MAX_BYTES_HELP)
    add_input_shape_flag(tune)
    tune.set_defaults(handler=handlers["tune"])


def _add_bench_and_demo(commands, handlers: dict) -> None:
    """``convtranspose bench`` (its arguments go to the benchmark) and ``demo``."""
    commands.add_parser(
        "bench", help="benchmark against the peer runtimes (arguments go to the benchmark)",
        description="Run the benchmark suite; every argument after 'bench' is passed to it"
                    " (see `convtranspose bench --help`).",
        epilog="examples:\n  convtranspose bench --quick --out bench-results\n"
               "  convtranspose bench --random 7 --count 40 --out bench-random\n"
               "  convtranspose bench --quantized --quick --out bench-quantized\n",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)

    demo = subparser(commands, "demo", "run the spec's example layer on random data and time it",
                     "Run ConvolutionBackpropData-1 on data 1x20x224x224 and filter 20x10x3x3"
                     " (strides 2, pads 1), print the output shape, resolved pads and time.",
                     "example:\n  convtranspose demo --repeat 20")
    demo.add_argument("--repeat", type=_counting(1), default=10,
                      help="timed runs (default 10)")
    demo.add_argument("--seed", type=_counting(0), default=0, help="random seed (default 0)")
    demo.set_defaults(handler=handlers["demo"])
