"""``convtranspose translate``: one layer of one dialect as another's attributes."""

from __future__ import annotations

import argparse
import json

from .parser import add_attribute_flags, int_list, int_or_list, json_value, subparser

__all__ = ["add_translate", "translate_command"]

_EXAMPLES = """examples:
  convtranspose translate onnx_conv_transpose torch_conv_transpose --data-shape 1,1,3 \\
      --filter-shape 1,1,3 --strides 2 --pads 1,2
  convtranspose translate torch_conv_transpose conv_transpose --data-shape 1,8,5,5 \\
      --filter-shape 8,4,3,3 --stride 2 --padding 1 --output-padding 1 --json
  convtranspose translate tf_conv_transpose torch_conv_transpose --data-shape 1,3,3,1 \\
      --filter-shape 3,3,1,1 --output-shape 1,6,6,1 --strides 2 --padding SAME
  convtranspose translate jax_conv_transpose keras_conv_transpose --data-shape 1,3,1 \\
      --filter-shape 3,1,1 --attr strides=[2] --attr 'padding=[[1,1]]'
  convtranspose translate torch_conv_transpose tf_conv_transpose --data-shape 1,8,5,5 \\
      --filter-shape 8,4,3,3 --bias-shape 4 --stride 2 --padding 1 --emit python

--emit python prints code for the target framework (torch, TensorFlow, Keras, LiteRT,
JAX, onnxruntime, OpenVINO; this library for oneDNN and TensorRT) that reads the NumPy
arrays x, w (and b with --bias-shape) in the source's layouts and leaves the source
layer's output in y.  In Python, Translation.run(x, w, b) computes the same with
this library, and .python() gives the code.

Any argument of the source dialect, under its own name, can be given as
--attr NAME=VALUE, VALUE read as JSON (a word that is not JSON is a string):
--attr padding_mode=SAME_UPPER, --attr 'dimension_numbers=["NCH","OIH","NCH"]'.

A grouped layer to a target without groups is one layer per group ("groups:" line,
"split_groups" in --json); a dilation the target cannot take is a kernel dilated with
zeros (a "dilate" filter step).

Exit codes: 0 translated (notes name any crop, pad, bias add, group split or kernel
dilation the target needs), 2 bad input, or with --exact a target that cannot express
the layer exactly.
"""

#: The flags that carry the PyTorch dialect's own argument names.
_TORCH_FLAGS = ("stride", "padding", "dilation")


def add_translate(commands, handler) -> None:
    """Add ``translate`` to the ``convtranspose`` subcommands."""
    from .._frontends.translate import DIALECTS as FLOATS
    from .._frontends.translate import QUANTIZED_DIALECTS

    DIALECTS = FLOATS + QUANTIZED_DIALECTS
    parser = subparser(
        commands, "translate", "one layer of one dialect as another dialect's attributes",
        "Give the attributes, data and filter transforms and any crop or pad that make the"
        " TARGET dialect compute exactly what the SOURCE layer computes.", _EXAMPLES)
    parser.add_argument("source", choices=DIALECTS, metavar="SOURCE", help=" | ".join(DIALECTS))
    parser.add_argument("target", choices=DIALECTS, metavar="TARGET", help=" | ".join(DIALECTS))
    parser.add_argument("--data-shape", required=True, type=int_list, metavar="DIMS")
    parser.add_argument("--filter-shape", required=True, type=int_list, metavar="DIMS")
    parser.add_argument("--bias-shape", type=int_list, metavar="M")
    parser.add_argument("--exact", action="store_true",
                        help="refuse (exit 2) unless the target op alone computes the layer")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--emit", choices=("python",),
                        help="print Python code running the translation in the target"
                             " framework (reads x, w and b; leaves the output in y)")
    add_attribute_flags(parser)
    torch_flags = parser.add_argument_group("torch_conv_transpose arguments")
    for name in _TORCH_FLAGS:
        torch_flags.add_argument("--" + name, dest=name, type=_int_or_word,
                                 metavar="N[,N...]" + ("|MODE" if name == "padding" else ""))
    torch_flags.add_argument("--output-size", dest="output_size", type=int_list,
                             metavar="Y[,Y...]")
    quantized = parser.add_argument_group(
        "quantized dialects (" + ", ".join(QUANTIZED_DIALECTS) + "; scales and zero points"
        " as --attr NAME=VALUE)")
    quantized.add_argument("--dtypes", type=_dtypes, metavar="DATA,FILTER,OUTPUT",
                           help="the source's tensor types, e.g. uint8,int8,uint8")
    quantized.add_argument("--target-engine", dest="target_engine",
                           choices=("x86", "fbgemm", "qnnpack", "onednn"),
                           help="torch_quantized_conv_transpose's engine as the target"
                                " (default fbgemm)")
    parser.add_argument("--attr", dest="attr", action="append", type=_attribute, default=[],
                        metavar="NAME=VALUE",
                        help="any argument of the source dialect, VALUE read as JSON (a word"
                             " that is not JSON is taken as a string); repeatable")
    parser.set_defaults(handler=handler)


def _dtypes(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if len(names) != 3 or not all(name in ("uint8", "int8", "int16") for name in names):
        raise argparse.ArgumentTypeError(
            f"--dtypes takes DATA,FILTER,OUTPUT of uint8, int8, int16; got {text!r}")
    return names


def _int_or_word(text: str):
    """Ints as ``int_or_list`` reads them, or a padding mode such as ``SAME``."""
    return text if text.strip().isalpha() else int_or_list(text)


def _attribute(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` with VALUE read as JSON, or as a string when it is not JSON."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"--attr takes NAME=VALUE, got {text!r}")
    try:
        return name.strip(), json_value(value, f"attribute {name.strip()!r}")
    except json.JSONDecodeError:
        return name.strip(), value


def _source_attributes(args: argparse.Namespace) -> dict:
    """The flags and ``--attr`` values given, under the source dialect's own names."""
    import inspect

    from .. import shapes
    from .._frontends.translate import NAMES
    from .parser import Failure

    parameters = [p for p in inspect.signature(getattr(shapes, args.source)).parameters
                  if p not in NAMES[args.source]]
    if args.source.endswith("backprop_data"):
        parameters.append("output_shape")
    flags = [(name, value, "--" + name.replace("_", "-")) for name, value in vars(args).items()
             if value is not None and name not in (
                 "source", "target", "data_shape", "filter_shape", "bias_shape", "exact", "json",
                 "emit", "handler", "command", "attr", "dtypes", "target_engine")]
    attributes: dict = {}
    for name, value, flag in flags + [(n, v, f"--attr {n}") for n, v in args.attr]:
        if name == "groups" and args.source == "onnx_conv_transpose":
            name = "group"
        if name not in parameters:
            raise Failure(f"{flag} is not an argument of {args.source}; it takes "
                          + ", ".join("--" + p.replace("_", "-") for p in parameters)
                          + " (or --attr NAME=VALUE)")
        if name in attributes:
            raise Failure(f"{flag}: {name} is given twice")
        attributes[name] = value
    return attributes


def _listed(value):
    return [_listed(v) for v in value] if isinstance(value, tuple) else value


def translate_command(args: argparse.Namespace) -> int:
    import convtranspose as ct

    translation = ct.translate(args.source, args.target, args.data_shape, args.filter_shape,
                               args.bias_shape, workarounds=not args.exact,
                               dtypes=args.dtypes, target_engine=args.target_engine,
                               **_source_attributes(args))
    if isinstance(translation, ct.QuantizedTranslation):
        return _quantized_output(args, translation)
    if args.emit is not None:
        if args.json:
            from .parser import Failure

            raise Failure("--emit python prints code; it takes no --json")
        print(translation.python(), end="")
    elif args.json:
        print(json.dumps({
            "source": translation.source, "target": translation.target,
            "exact": translation.exact,
            "attributes": {k: _listed(v) for k, v in translation.attributes.items()},
            "target_data_shape": list(translation.target_plan.data_shape),
            "target_filter_shape": list(translation.target_plan.filter_shape),
            "data_transpose": _listed(translation.data_axes),
            "filter_steps": [[step, list(value)] for step, value in translation.filter_steps],
            "split_groups": None if translation.split_groups == 1 else {
                "groups": translation.split_groups, "axis": translation.channel_axis,
                "data_channels": [list(d) for d, _ in translation.group_channels],
                "output_channels": [list(o) for _, o in translation.group_channels]},
            "crop": _listed(translation.crop), "bias_after": translation.bias_after,
            "output_transpose": _listed(translation.output_axes),
            "output_shape": list(translation.source_plan.output_shape),
            "notes": list(translation.notes)}))
    else:
        print(translation)
        print(_run_hint(translation))
    return 0


def _quantized_output(args: argparse.Namespace, translation) -> int:
    """Print a quantized translation: text, or with --json one object."""
    from .parser import Failure

    if args.emit is not None:
        raise Failure("--emit python is not built for quantized translations yet;"
                      " QuantizedTranslation.run(x, w, b) computes one with this library")
    if not args.json:
        print(translation)
        print("  run: QuantizedTranslation.run(x, w, b) (ct.translate(...).run) computes it"
              " with this library; .operands(x, w, b) and .parameters(g) give each target"
              " layer's operands and quantization arguments")
        return 0
    geometry = translation.geometry
    source, target = translation.source_quantization, translation.target_quantization
    print(json.dumps({
        "source": translation.source, "target": translation.target,
        "exact": translation.exact, "max_difference": translation.max_difference,
        "attributes": {k: _plain(v) for k, v in translation.attributes.items()},
        "source_dtypes": list(source.dtypes), "target_dtypes": list(target.dtypes),
        "requantization": [source.rule, target.rule],
        "target_data_shape": list(geometry.target_plan.data_shape),
        "target_filter_shape": list(geometry.target_plan.filter_shape),
        "data_transpose": _listed(geometry.data_axes),
        "filter_steps": [[step, list(value)] for step, value in geometry.filter_steps],
        "split_groups": geometry.split_groups, "crop": _listed(geometry.crop),
        "output_transpose": _listed(geometry.output_axes),
        "output_shape": list(geometry.source_plan.output_shape),
        "notes": list(geometry.notes) + list(translation.notes)}))
    return 0


def _plain(value):
    """A NumPy value as JSON's (lists and numbers)."""
    import numpy as np

    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return _listed(value)


def _run_hint(translation) -> str:
    """The ways to run the translation, and for an ONNX target how its attributes
    compare with what ``torch.onnx.export`` writes."""
    lines = ["  run: Translation.run(x, w, b) (ct.translate(...).run) computes it with this"
             " library; --emit python prints code for the target framework"]
    if translation.target == "onnx_conv_transpose":
        exported = ("  onnx: torch.onnx.export writes ConvTranspose with kernel_shape, strides,"
                    " dilations, group, pads (torch's padding at both ends) and"
                    " output_padding (torch's, which onnxruntime refuses from the stride up)")
        pads = translation.attributes["pads"]
        same = pads[:len(pads) // 2] == pads[len(pads) // 2:]
        lines.append(exported + "; these are of the same form, with output_padding below the"
                     " stride" + ("" if same else " and pads that differ at the two ends,"
                                  " which torch's padding cannot give"))
    return "\n".join(lines)


translate_command.add_parser = add_translate
