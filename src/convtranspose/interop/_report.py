"""The per-layer result of ``check``, shared by the IR and ONNX readers."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LayerReport", "compatible", "format_attributes", "format_dims", "format_table",
           "given_input_shape", "infer_output", "merge_dims"]

Dims = tuple  # of int or None (a dynamic dimension)


def compatible(declared: Dims | None, inferred: Dims | None) -> bool:
    """Equal ranks and equal dims, a dynamic (``None``) dim matching anything."""
    if declared is None or inferred is None:
        return True
    return len(declared) == len(inferred) and all(
        a is None or b is None or a == b for a, b in zip(declared, inferred)
    )


def merge_dims(declared: Dims | None, inferred: Dims | None) -> Dims | None:
    """``declared`` with its dynamic dims taken from ``inferred`` where that knows them
    (a static declared dim always wins; different ranks keep ``declared``)."""
    if declared is None:
        return inferred
    if inferred is None or len(inferred) != len(declared):
        return declared
    return tuple(d if d is not None else i for d, i in zip(declared, inferred))


def given_input_shape(name: str, declared: Dims, given: Dims) -> tuple:
    """The dims ``--input-shape NAME=DIMS`` gives an input declared as ``declared``.

    Only dynamic dims can be given: a model's static dims are the ones its other shapes
    were computed from, so changing one would leave them stale.

    Raises
    ------
    InteropError
        Another rank, a dim below 1, or a static dim given another value.
    """
    from ._safety import InteropError

    given = tuple(given)
    if len(given) != len(declared):
        raise InteropError(f"--input-shape {name}={format_dims(given)}: {name} has rank"
                           f" {len(declared)} ({format_dims(declared)}), not {len(given)}")
    for axis, (old, new) in enumerate(zip(declared, given)):
        if new < 1:
            raise InteropError(f"--input-shape {name}={format_dims(given)}: dim {axis} must be"
                               " at least 1")
        if old is not None and old != new:
            raise InteropError(f"--input-shape {name}={format_dims(given)}: dim {axis} of"
                               f" {name} is declared {old} ({format_dims(declared)}); only its"
                               " dynamic dims (?) can be given")
    return given


def format_dims(dims: Dims | None) -> str:
    """``(1, 20, None)`` -> ``"[1,20,?]"``; ``None`` -> ``"-"``."""
    if dims is None:
        return "-"
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


@dataclass
class LayerReport:
    """What ``check`` found for one transposed-convolution layer or node.

    Attributes
    ----------
    name : str
        The layer's (node's) name in the model.
    op : str
        Its type in the model (``ConvolutionBackpropData``, ``ConvTranspose`` ...).
    data_shape, filter_shape : tuple or None
        The input shapes the model declares (``None`` entries are dynamic).
    output_shape_input : tuple or None
        The spatial ``output_shape`` the layer receives, if any.
    declared : tuple or None
        The output shape the model declares.
    inferred : tuple or None
        The output shape recomputed from the inputs and attributes.
    pads_begin, pads_end : tuple or None
        The resolved pads.
    status : {"ok", "mismatch", "invalid", "unchecked"}
        ``mismatch``: declared and inferred shapes differ (or an input's declared
        shape differs from its producer's); ``invalid``: the attributes and shapes
        break the op's rules; ``unchecked``: dynamic or run-time-computed shapes.
    problems : list of str
        One line per finding, naming the layer and both shapes.
    conventions : list of str
        Attributes whose meaning depends on the framework or the specification's edition
        reading them (:mod:`convtranspose.interop._conventions`); never a failure.
    attributes : dict or None
        The resolved attributes of the layer, once its output was inferred:
        ``kernel_shape``, ``strides``, ``dilations``, ``groups``, ``output_padding``
        (lists of int) and ``auto_pad`` (as the op spells it).
    module : str or None
        The source-framework module the layer came from, when the model records it
        (``torch.onnx.export(dynamo=True)``: the node's ``pkg.torch.onnx.name_scopes``).
    reason : str or None
        Why the layer is ``mismatch`` or ``invalid``, short (the table's status cell);
        :attr:`problems` has the full sentences.
    quantization : dict or None
        A quantized layer (an ONNX QDQ pattern or QLinearConvTranspose): its dialect,
        whether it is followed (else the reason), its quantized input and output and
        their types; None for a float layer.
    """

    name: str
    op: str
    data_shape: Dims | None = None
    filter_shape: Dims | None = None
    output_shape_input: Dims | None = None
    declared: Dims | None = None
    inferred: Dims | None = None
    pads_begin: Dims | None = None
    pads_end: Dims | None = None
    status: str = "ok"
    problems: list[str] = field(default_factory=list)
    conventions: list[str] = field(default_factory=list)
    attributes: dict | None = None
    module: str | None = None
    reason: str | None = None
    quantization: dict | None = None

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "invalid")

    def to_dict(self) -> dict:
        def listed(dims):
            return None if dims is None else list(dims)

        return {
            "name": self.name,
            "op": self.op,
            "data_shape": listed(self.data_shape),
            "filter_shape": listed(self.filter_shape),
            "output_shape_input": listed(self.output_shape_input),
            "declared": listed(self.declared),
            "inferred": listed(self.inferred),
            "pads_begin": listed(self.pads_begin),
            "pads_end": listed(self.pads_end),
            "attributes": None if self.attributes is None else dict(self.attributes),
            "module": self.module,
            "status": self.status,
            "reason": self.reason,
            "quantization": None if self.quantization is None else dict(self.quantization),
            "problems": list(self.problems),
            "conventions": list(self.conventions),
        }


_COLUMNS = ("layer", "op", "data", "filter", "attributes", "output_shape", "declared",
            "inferred", "pads_begin", "pads_end", "status")


def _axes(values) -> str:
    """Per-axis values, one number when every axis has it: ``[2, 2]`` -> ``"2"``."""
    values = list(values)
    return str(values[0]) if values and len(set(values)) == 1 else "x".join(map(str, values))


def format_attributes(attributes: dict | None) -> str:
    """The table's compact attribute cell: ``k3x3 s2 d1 g1 op1 notset`` (kernel, strides,
    dilations, groups, output_padding, auto_pad; one number for equal axes)."""
    if attributes is None:
        return "-"
    return " ".join([f"k{'x'.join(map(str, attributes['kernel_shape']))}",
                     f"s{_axes(attributes['strides'])}", f"d{_axes(attributes['dilations'])}",
                     f"g{attributes['groups']}", f"op{_axes(attributes['output_padding'])}",
                     str(attributes["auto_pad"])])


def _status(report: LayerReport) -> str:
    if not report.failed:
        return report.status
    return report.status.upper() + (f": {report.reason}" if report.reason else "")


def format_table(reports: list[LayerReport]) -> str:
    """An aligned text table, one row per layer: its shapes, a compact attribute cell
    (:func:`format_attributes`, the key under the table), the resolved pads and the
    status (with the reason of a mismatch); the source module after the layer's name
    when the model records one."""
    rows = [_COLUMNS] + [
        (r.name + (f" ({r.module})" if r.module else ""), r.op, format_dims(r.data_shape),
         format_dims(r.filter_shape), format_attributes(r.attributes),
         format_dims(r.output_shape_input), format_dims(r.declared), format_dims(r.inferred),
         format_dims(r.pads_begin), format_dims(r.pads_end), _status(r))
        for r in reports
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    if any(r.attributes is not None for r in reports):
        lines.append("attributes: k kernel, s strides, d dilations, g groups, op output_padding,"
                     " then auto_pad")
    return "\n".join(lines)


def infer_output(report: "LayerReport", label: str, plan_for, data: Dims) -> bool:
    """Record on ``report`` the output shape and pads that ``plan_for(data)`` infers.

    A dynamic batch (``None``) is planned as 1 and reported as dynamic again.  An
    input the op's rules refuse marks the report ``invalid``.  Returns whether a plan
    was made.
    """
    from .._errors import ConvTransposeError

    dynamic_batch = bool(data) and data[0] is None
    try:
        plan = plan_for((1,) + tuple(data[1:]) if dynamic_batch else data)
    except ConvTransposeError as error:
        report.status, report.reason = "invalid", "the op's rules refuse it (see below)"
        report.problems.append(f"{label}: {error}")
        return False
    inferred = plan.output_shape
    report.inferred = (None,) + inferred[1:] if dynamic_batch else inferred
    report.pads_begin, report.pads_end = plan.pads_begin, plan.pads_end
    report.attributes = {"kernel_shape": list(plan.kernel_shape), "strides": list(plan.strides),
                         "dilations": list(plan.dilations), "groups": plan.groups,
                         "output_padding": list(plan.output_padding),
                         "auto_pad": plan.auto_pad}
    return True
