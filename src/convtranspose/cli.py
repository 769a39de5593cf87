"""The ``convtranspose`` command line (also ``python -m convtranspose``).

Data goes to stdout, diagnostics to stderr.  Exit codes: 0 ok, 1 a check found a
mismatch, 2 bad input (a one-line message, never a traceback), 3 a check or comparison
found no transposed convolution it could check or compare.

Commands: ``shape`` and ``run`` (one op from shapes or ``.npy`` files), ``ir check``,
``ir run`` and ``ir compare`` (OpenVINO IR), ``onnx check``, ``onnx run`` and ``onnx
compare`` (ONNX), ``bench``
(forwarded to :mod:`convtranspose._cli.bench`) and ``demo``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ._cli import compare as _cli_compare
from ._cli import guard as _cli_guard
from ._cli import parser as _cli_parser
from ._cli import translate as _cli_translate
from ._cli.notes import print_notes
from ._cli.parser import EXIT_BAD_INPUT, Failure

EXIT_OK, EXIT_MISMATCH = 0, 1
#: ``ir check`` / ``onnx check`` of a model without any transposed convolution: not a
#: pass (nothing was compared), not a mismatch, not bad input.
EXIT_NOTHING_TO_CHECK = 3


_OPENVINO_OPS = ("convolution_backprop_data", "group_convolution_backprop_data")


def _keywords(op: str) -> dict:
    """The op's attributes (its arguments other than the operands) -> whether each is
    required, read off its ``ct.shapes`` signature."""
    import inspect

    from . import shapes
    from ._plan.dialects import DIALECTS

    operands = DIALECTS[op].operands
    parameters = inspect.signature(getattr(shapes, op)).parameters.values()
    return {p.name: p.default is inspect.Parameter.empty for p in parameters
            if p.name not in operands}


_PROGRESS_MIN_LAYERS = 20


def _error(message: str) -> int:
    return _cli_guard.error(message)


# ---------------------------------------------------------------------------
# shape / run


def _attributes(args: argparse.Namespace) -> dict:
    """The attribute flags given, as the op's keyword arguments; unknown ones refused."""
    accepted = _keywords(args.op)
    given = {}
    for name in _cli_parser.ATTRIBUTES:
        value = getattr(args, name, None)
        if value is None:
            continue
        if name == "groups":
            name = "group" if "group" in accepted else "groups"
            if name not in accepted and args.op in _OPENVINO_OPS:
                raise Failure(f"{args.op} has no groups attribute: the groups come from the"
                               " filter shape [G, C_IN, C_OUT, K...] of"
                               " group_convolution_backprop_data")
        if name not in accepted:
            flags = ", ".join("--" + key.replace("_", "-") for key in accepted)
            raise Failure(f"--{name.replace('_', '-')} is not an attribute of {args.op};"
                           f" it takes {flags}")
        given[name] = value
    missing = [name for name, required in accepted.items() if required and name not in given]
    if missing:
        raise Failure(f"{args.op} needs " + " and ".join(
            "--" + name.replace("_", "-") for name in missing))
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
    """``function`` (the op or its shapes twin) with the operands under the op's own
    names (its record's), every argument by keyword: so any argument order is the op's."""
    from ._plan.dialects import DIALECTS

    data_name, filter_name, bias_name = DIALECTS[args.op].operands
    operands = {data_name: data, filter_name: filter_}
    if bias is not None:
        if bias_name is None:
            with_bias = [op for op in _cli_parser.OPS if DIALECTS[op].operands[2]]
            raise Failure(f"{args.op} has no bias; --bias-shape/--bias apply to "
                          + ", ".join(with_bias))
        operands[bias_name] = bias
    return function(**operands, **attributes)


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
    if args.measure and not args.explain:
        raise Failure("--measure goes with --explain")
    explanation = _explanation(plan, args.dtype, args.measure) if args.explain else None
    if args.json:
        record = _plan_dict(plan)
        if explanation is not None:
            choice = explanation.choice
            record["explain"] = {"dtype": args.dtype, "algorithm": choice.algorithm,
                                 "runs": choice.runs, "threads": choice.threads,
                                 "decided_by": choice.decided_by,
                                 "estimates_ns": dict(choice.estimates),
                                 "measured_ns": dict(choice.measured),
                                 "fallbacks": [list(f) for f in choice.fallbacks]}
        print(json.dumps(record))
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
    if explanation is not None:
        print(explanation)
    return EXIT_OK


def _explanation(plan, dtype: str, measure: bool = False):
    """:func:`convtranspose.explain` of ``plan`` for ``--dtype``, or a one-line failure."""
    import numpy as np

    from . import explain
    from ._dtypes import SUPPORTED_DTYPES

    if dtype not in SUPPORTED_DTYPES:
        raise Failure(f"--dtype {dtype!r} is not supported; expected one of"
                       f" {', '.join(SUPPORTED_DTYPES)}")
    if dtype == "bfloat16":
        from .interop._safety import require

        np_dtype = require("ml_dtypes", "bfloat16", "--dtype bfloat16").bfloat16
    else:
        np_dtype = np.dtype(dtype)
    return explain(plan, np_dtype, measure=measure)


def _load(args: argparse.Namespace, name: str):
    """The array of ``--name``'s ``.npy`` file, read as ``--dtype`` says."""
    from .interop._arrays import load_array

    return load_array(getattr(args, name), name, args.max_bytes, args.dtype)


def _write(args: argparse.Namespace, result, notes: list, source: str = "", **record) -> int:
    """Write ``result`` to ``-o`` (``-``: stdout, the summary then goes to stderr) and
    report it: one line, or with ``--json`` one object (``record`` added)."""
    from .interop._arrays import STDOUT, save_array

    if args.json and args.output == STDOUT:
        raise Failure("-o - writes the array to stdout, where --json would print its text;"
                      " give -o a file name with --json")
    save_array(args.output, result)
    for note in notes:
        print(f"convtranspose: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({"output": args.output, "dtype": str(result.dtype),
                          "shape": list(result.shape), **record, "notes": list(notes)}))
    else:
        print(f"{args.output}: {result.dtype} {list(result.shape)}{source}",
              file=sys.stderr if args.output == STDOUT else sys.stdout)
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    import convtranspose as ct

    from ._frontends.explain import one_call
    from .interop._safety import check_plan_memory

    data, filter_ = _load(args, "data"), _load(args, "filter")
    bias = None if args.bias is None else _load(args, "bias")
    plan, attributes = _plan(args, data.shape, filter_.shape,
                             None if bias is None else bias.shape)
    check_plan_memory(plan, data.dtype, args.max_bytes)
    # One layer, once: a small one skips importing numba (docs/cli.md).
    with one_call(plan, data.dtype):
        result = _call(getattr(ct, args.op), args, data, filter_, bias, attributes)
    return _write(args, result, [], op=args.op, pads_begin=list(plan.pads_begin),
                  pads_end=list(plan.pads_end))


# ---------------------------------------------------------------------------
# ir / onnx


class _Progress:
    """A one-line progress bar on stderr, shown only on a terminal for large models."""

    def __init__(self, total: int, label: str, always: bool = False):
        self.total, self.label = total, label
        self.enabled = (always or total >= _PROGRESS_MIN_LAYERS) and sys.stderr.isatty()
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
        checked = f"{len(reports) - len(unchecked)} of " if unchecked else ""
        summary = (f"{file_name}: {checked}{len(reports)} {items_name} checked,"
                   f" {len(failed)} mismatched")
        if unchecked:
            summary += (f", {len(unchecked)} not checkable (dynamic shapes: give --input-shape"
                        " NAME=DIMS)")
        print(summary)
    for report in reports:
        print_notes(report.name, [_cli_guard.one_line(p) for p in report.problems],
                    report.conventions, failed=report.failed)
    if not reports:
        print(f"convtranspose: nothing to check: {file_name} has no {items_name}"
              f" (exit code {EXIT_NOTHING_TO_CHECK})", file=sys.stderr)
        return EXIT_NOTHING_TO_CHECK
    if len(unchecked) == len(reports):  # every layer dynamic: nothing was compared
        print(f"convtranspose: nothing checked: 0 {items_name} checked: {len(unchecked)}"
              f" {'has' if len(unchecked) == 1 else 'have'} dynamic shapes or shapes computed at"
              f" run time; give --input-shape NAME=DIMS (exit code {EXIT_NOTHING_TO_CHECK})",
              file=sys.stderr)
        return EXIT_NOTHING_TO_CHECK
    return EXIT_MISMATCH if failed else EXIT_OK


def _kind_of_file(path: str) -> str | None:
    """``"onnx"`` or ``"ir"`` when the file's name or first bytes say which model it is."""
    lower = path.lower()
    if lower.endswith(".onnx"):
        return "onnx"
    if lower.endswith(".xml"):
        return "ir"
    try:
        with open(path, "rb") as file:
            head = file.read(64)
    except OSError:
        return None
    # An ONNX ModelProto opens with its ir_version: field 1 as a varint (0x08), a small number.
    if len(head) >= 2 and head[0] == 0x08 and 0 < head[1] < 0x80:
        return "onnx"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        return "ir"
    return None


_OTHER = {"ir": ("onnx", "an ONNX model", "--node NAME"),
          "onnx": ("ir", "an OpenVINO IR", "--layer NAME")}


def _input_shapes(args: argparse.Namespace) -> dict:
    """``--input-shape NAME=DIMS`` flags as name -> dims; a name given twice refused."""
    shapes: dict = {}
    for name, dims in getattr(args, "input_shapes", None) or ():
        if name in shapes:
            raise Failure(f"--input-shape {name} is given twice")
        shapes[name] = dims
    return shapes


def _load_model(kind: str, action: str, args: argparse.Namespace):
    """The OpenVINO IR (``kind`` "ir") or ONNX model ``args.model``; when it cannot be
    read and looks like the other kind, the error names the command for that kind."""
    import os

    from .interop._safety import InteropError

    input_shapes = _input_shapes(args)
    try:
        if kind == "ir":
            from .interop import ir

            return ir.load(args.model, args.bin, max_bytes=args.max_bytes,
                           input_shapes=input_shapes)
        from .interop import onnx_model

        return onnx_model.load(args.model, max_bytes=args.max_bytes, input_shapes=input_shapes)
    except InteropError as error:
        other, what, flag = _OTHER[kind]
        if not os.path.isfile(args.model) or _kind_of_file(args.model) != other:
            raise
        command = f"convtranspose {other} {action} {args.model}"
        if action == "run":
            command += f" {flag} --data X.npy -o Y.npy"
        raise Failure(f"{error}; {os.path.basename(args.model)} looks like {what}:"
                      f" {command}") from None


def _ir_check(args: argparse.Namespace) -> int:
    import os

    from .interop import ir_quantized

    model = _load_model("ir", "check", args)
    reports = _check_each(model.transposed_layers,
                          lambda layer: ir_quantized.check(model, layer))
    return _report_check(reports, "transposed-convolution layers", os.path.basename(args.model),
                         args.json)


def _ir_run(args: argparse.Namespace) -> int:
    from .interop import ir_quantized

    model = _load_model("ir", "run", args)
    layer = model.layer(args.layer)
    result, notes = ir_quantized.run(model, layer, _load(args, "data"))
    return _write(args, result, notes, f" from layer {layer.name!r}", layer=layer.name)


def _onnx_check(args: argparse.Namespace) -> int:
    import os

    model = _load_model("onnx", "check", args)
    reports = _check_each(model.layer_nodes, model.check)
    return _report_check(reports, "ConvTranspose nodes", os.path.basename(args.model), args.json)


def _onnx_run(args: argparse.Namespace) -> int:
    from .interop import onnx_model

    model = _load_model("onnx", "run", args)
    node = model.node(args.node)
    result, notes = model.run(node, _load(args, "data"))
    label = onnx_model.node_label(node)
    return _write(args, result, notes, f" from node {label!r}", node=label)


def _tune(args: argparse.Namespace) -> int:
    from ._cli.tune import tune

    return tune(args, _Progress, _load_model)


def _compare(args: argparse.Namespace) -> int:
    return _cli_compare.compare_command(args, _load_model, _Progress)


_compare.add_parser = _cli_compare.add_compare  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# bench / demo


def _bench(argv: list[str]) -> int:
    import importlib

    try:
        bench = importlib.import_module("convtranspose._cli.bench")
    except ModuleNotFoundError as error:
        if error.name == "convtranspose._cli.bench":
            return _error("the benchmark module convtranspose._cli.bench is not part of this"
                          " installation")
        from ._errors import install_hint

        return _error(f"the benchmark needs {error.name!r}, which is not installed: "
                      + install_hint("bench"))
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
    # The same layer again and again: timed as the array function and as a prepared
    # layer (ct.prepare), which does the per-call work of the function once.
    layer = ct.prepare(ct.convolution_backprop_data, filter=filter, **attributes)
    calls = {"function": lambda: ct.convolution_backprop_data(data, filter, **attributes),
             "prepared": lambda: layer(data)}
    times: dict = {name: [] for name in calls}
    results = {name: call() for name, call in calls.items()}  # warm-up
    for _ in range(args.repeat):
        for name, call in calls.items():  # alternating: noise hits both alike
            start = time.perf_counter()
            results[name] = call()
            times[name].append(time.perf_counter() - start)
    print("ConvolutionBackpropData-1, the spec's example layer (random data):")
    print(f"  data {data.shape} float32, filter {filter.shape}, strides 2, pads 1")
    print(f"  output shape  {results['function'].shape}")
    print(f"  pads_begin    {list(plan.pads_begin)}  pads_end {list(plan.pads_end)}")
    for name, label in (("function", "time"), ("prepared", "prepared")):
        print(f"  {label:13s} {1e3 * float(np.median(times[name])):.2f} ms (median of"
              f" {args.repeat}{', ct.prepare' if name == 'prepared' else ''})")
    choice = ct.explain(plan).choice
    print(f"  algorithm     {choice.runs}" + (
        "" if choice.decided_by != "provisional" else
        " (for now: the kernels of the faster candidates are compiling in the background,"
        " once for this machine; later calls time them)"))
    return EXIT_OK


# ---------------------------------------------------------------------------
# the parser

HANDLERS = {"shape": _shape, "run": _run, "ir check": _ir_check, "ir run": _ir_run,
            "onnx check": _onnx_check, "onnx run": _onnx_run, "tune": _tune, "demo": _demo}
HANDLERS["translate"] = _cli_translate.translate_command
HANDLERS["ir compare"] = HANDLERS["onnx compare"] = _compare


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (:mod:`convtranspose._cli.parser`) with this module's
    command handlers."""
    return _cli_parser.build_parser(HANDLERS)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Without ``argv`` (the console script, ``python -m convtranspose``) the process ends
    with the command, and the garbage collector is told so
    (``benchmarks/results/first-calls-xeon.json``, a small ``run`` with its kernels
    cached): importing numba and loading compiled kernels leaves about 180 000 objects
    for the collector to track (30 000 without numba): the collections they set off take about a tenth of a small ``run``, and
    the interpreter's last collection at exit about a fifth.  ``run`` and ``shape``
    (one op, little garbage) therefore run without collections, and every command
    freezes what is alive at its end, out of the last collection's way; the process's
    memory goes back to the system all the same.
    """
    if argv is None:
        import gc

        argv = sys.argv[1:]
        if argv[:1] in (["run"], ["shape"]):
            gc.disable()
        try:
            return _main(argv)
        finally:
            gc.freeze()
    return _main(list(argv))


def _main(argv: list[str]) -> int:
    return _cli_guard.guarded(_dispatch, argv)


def _dispatch(argv: list[str]) -> int:
    """Parse ``argv`` and run its command; the documented errors become one line."""
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
        _cli_guard.refuse_writing_an_input(args)
        code = args.handler(args)
        sys.stdout.flush()  # inside the try: a closed pipe is reported here, not at exit
        return code
    except (ConvTransposeError, Failure, MissingDependencyError) as error:
        return _error(str(error))
    except TypeError as error:  # the documented dtype errors of the array functions
        return _error(str(error))


if __name__ == "__main__":
    sys.exit(main())
