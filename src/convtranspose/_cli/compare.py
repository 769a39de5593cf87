"""``convtranspose onnx compare`` and ``ir compare``: every transposed convolution of a
model as its runtime computes it and as this library does
(:mod:`convtranspose.interop.compare`)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .notes import print_notes
from .parser import Failure, add_input_shape_flag, byte_count, subparser

__all__ = ["add_compare", "compare_command"]

#: Exit codes: every layer within the tolerances, a mismatch, nothing compared.
EXIT_OK, EXIT_MISMATCH, EXIT_NOTHING_COMPARED = 0, 1, 3

_RUNTIMES = {"onnx": "onnxruntime", "ir": "OpenVINO"}


def _input_file(text: str) -> tuple[str, str]:
    name, separator, path = text.partition("=")
    if not separator or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {text!r}")
    return name, path


def add_compare(commands, handler, kind: str) -> None:
    """Add ``compare`` to the ``ir`` or ``onnx`` (``kind``) actions."""
    model = "MODEL.xml" if kind == "ir" else "MODEL.onnx"
    examples = (f"examples:\n  convtranspose {kind} compare {model}\n"
                f"  convtranspose {kind} compare {model} --input-shape x=1,3,64,64 --json\n"
                f"  convtranspose {kind} compare {model} --input x=x.npy --atol 1e-3\n")
    parser = subparser(
        commands, "compare", f"compare every layer as {_RUNTIMES[kind]} computes it",
        f"Run the whole model in {_RUNTIMES[kind]} (on random inputs of the declared shapes,"
        " or on --input arrays), capture every transposed convolution's input and output,"
        " compute each layer again with convtranspose and report per layer the largest"
        " absolute and relative error, the error in units of the output's float spacing"
        " (ULP) and pass or MISMATCH under --atol/--rtol, with the convention notes that"
        " explain a difference. Exit 0 all pass, 1 a mismatch, 2 bad input, 3 nothing"
        " compared.", examples)
    parser.add_argument("model", metavar=model)
    if kind == "ir":
        parser.add_argument("--bin", metavar="MODEL.bin",
                            help="the weights (default: next to the .xml)")
    parser.add_argument("--input", dest="inputs", action="append", type=_input_file,
                        default=[], metavar="NAME=FILE.npy",
                        help="the array of one model input (repeatable); the others are"
                             " random")
    add_input_shape_flag(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--atol", type=float, default=None,
                        help="absolute tolerance (default 1e-4; float16 1e-2, bfloat16 5e-2)")
    parser.add_argument("--rtol", type=float, default=None,
                        help="relative tolerance (default 1e-4; float16 1e-2, bfloat16 5e-2)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--max-bytes", type=byte_count, default=None, metavar="SIZE",
                        help="refuse any file, constant or input needing more memory than this"
                             " (e.g. 512M, 8G; default 4G)")
    parser.set_defaults(handler=handler, compare_kind=kind)


def _feeds(model, kind: str, args: argparse.Namespace) -> dict:
    """The model's inputs: ``--input`` files, the others random of the declared dims."""
    from ..interop._arrays import load_array
    from ..interop.compare import random_inputs

    specs = model.graph_inputs() if kind == "onnx" else model.parameters()
    given = {}
    for name, path in args.inputs:
        if name in given:
            raise Failure(f"--input {name} is given twice")
        given[name] = load_array(path, "input", args.max_bytes)
    return random_inputs(specs, given, args.seed, args.max_bytes)


_COLUMNS = ("layer", "op", "kernel", "strides", "dilations", "pads", "groups",
            "output_padding", "auto_pad", "max_abs", "max_rel", "ulp", "status")


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(item) for item in value) + "]"
    return str(value)


def _row(row) -> tuple:
    attributes = row.attributes
    pads = attributes.get("pads")
    if "pads_begin" in attributes:
        pads = list(attributes["pads_begin"]) + list(attributes.get("pads_end") or [])
    number = "{:.3g}".format
    return (row.source, row.op, _cell(attributes.get("kernel_shape")),
            _cell(attributes.get("strides")), _cell(attributes.get("dilations")), _cell(pads),
            _cell(attributes.get("groups", attributes.get("group"))),
            _cell(attributes.get("output_padding")), _cell(attributes.get("auto_pad")),
            "-" if row.max_abs is None else number(row.max_abs),
            "-" if row.max_rel is None else number(row.max_rel),
            "-" if row.ulp is None else f"{row.ulp:.1f}",
            row.status.upper() if row.failed else row.status)


def _table(rows) -> str:
    lines = [_COLUMNS] + [_row(row) for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(_COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
                     for line in lines)


def _report(rows, args: argparse.Namespace, kind: str) -> int:
    name = os.path.basename(args.model)
    failed = [row for row in rows if row.failed]
    compared = [row for row in rows if row.compared]
    if args.json:
        print(json.dumps({"model": name, "runtime": _RUNTIMES[kind],
                          "layers": [row.to_dict() for row in rows],
                          "compared": len(compared), "mismatches": len(failed)}))
    else:
        if rows:
            print(_table(rows))
        print(f"{name}: {len(compared)} of {len(rows)} transposed-convolution layers compared"
              f" with {_RUNTIMES[kind]}, {len(failed)} mismatched")
    for row in rows:
        label = row.source if row.source == row.name else f"{row.source} ({row.name})"
        print_notes(label, [f"{label}: {note}" for note in row.notes], row.conventions,
                    failed=row.failed)
    if not compared:
        what = "has no transposed convolution" if not rows else (
            f"has {len(rows)} transposed convolutions, none comparable")
        print(f"convtranspose: nothing compared: {name} {what}"
              f" (exit code {EXIT_NOTHING_COMPARED})", file=sys.stderr)
        return EXIT_NOTHING_COMPARED
    return EXIT_MISMATCH if failed else EXIT_OK


def compare_command(args: argparse.Namespace, load_model, progress_class) -> int:
    """The ``compare`` action (``load_model(kind, action, args)`` reads the model, with
    ``args.input_shapes``; ``progress_class`` is the CLI's progress bar)."""
    from ..interop import compare

    kind = args.compare_kind
    model = load_model(kind, "compare", args)
    count = len(model.transposed_nodes if kind == "onnx" else model.transposed_layers)
    if kind == "onnx" and len(model.layer_nodes) > count:
        # onnxruntime's CPU provider has no kernel for the contrib node: the model cannot
        # run there, so nothing of it can be captured.
        raise Failure(f"{os.path.basename(args.model)} has com.microsoft."
                      "QLinearConvTranspose nodes, which onnxruntime's CPU provider"
                      " cannot run; use onnx check and onnx run on them")
    if not count:  # nothing to compare: the model is not run (nor its inputs made)
        return _report([], args, kind)
    feeds = _feeds(model, kind, args)
    progress = progress_class(count, "comparing", always=True)
    run = compare.compare_onnx if kind == "onnx" else compare.compare_ir
    try:
        rows = run(model, feeds, atol=args.atol, rtol=args.rtol, progress=progress.update)
    finally:
        progress.close()
    return _report(rows, args, kind)
