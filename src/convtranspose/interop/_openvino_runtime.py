"""Run an OpenVINO IR in OpenVINO and capture the ports of its layers.

Each port wanted becomes an extra result of the model as OpenVINO read it
(``Model.add_outputs`` with the port itself, so a port without a tensor name is
reachable too); a port asked for twice is added once.  The model is compiled for the
CPU with ``INFERENCE_PRECISION_HINT=f32``: without it a CPU with bfloat16 units
computes in bfloat16, which is not the IR's float32.
"""

from __future__ import annotations

import os

from ._safety import InteropError, require

__all__ = ["run_capturing"]


def _ports(model, captures: list) -> list:
    """The OpenVINO output of each ``(layer name, type, occurrence, "input"|"output",
    index)`` in ``captures``: the output feeding an input port, or an output port."""
    ops: dict = {}
    for op in model.get_ordered_ops():
        ops.setdefault((op.get_friendly_name(), op.get_type_name()), []).append(op)
    ports = []
    for name, type_name, occurrence, kind, index in captures:
        found = ops.get((name, type_name), [])
        if occurrence >= len(found):
            raise InteropError(f"OpenVINO's reading of the IR has no {type_name} layer {name!r}")
        op = found[occurrence]
        ports.append(op.input_value(index) if kind == "input" else op.output(index))
    return ports


def run_capturing(xml_path: str, bin_path: str, feeds: dict, captures: list) -> list:
    """Run the IR on ``feeds`` (Parameter name -> array); returns the value at each
    port of ``captures`` (:func:`_ports`), in order.

    Raises
    ------
    InteropError
        OpenVINO cannot read, compile or run the model (its message, one line).
    MissingDependencyError
        ``openvino`` is not installed.
    """
    ov = require("openvino", "peers", "comparing with OpenVINO")
    core = ov.Core()
    try:
        model = core.read_model(xml_path, bin_path)
        ports = _ports(model, captures)
        keys = [(port.get_node().get_name(), port.get_index()) for port in ports]
        unique = list(dict.fromkeys(keys))
        # A port that already is a result is not added again: every result is found by
        # the port it reads, after the adding.
        model.add_outputs([ports[keys.index(key)] for key in unique])
        reads = {}
        for position, output in enumerate(model.outputs):
            source = output.get_node().input_value(0)
            reads.setdefault((source.get_node().get_name(), source.get_index()), position)
        parameters = {parameter.get_friendly_name(): index
                      for index, parameter in enumerate(model.get_parameters())}
        inputs = {parameters[name]: array for name, array in feeds.items() if name in parameters}
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        results = compiled(inputs)
        return [results[compiled.outputs[reads[key]]] for key in keys]
    except InteropError:
        raise
    except Exception as error:  # noqa: BLE001 - OpenVINO raises its own untyped errors
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise InteropError(f"OpenVINO cannot run {os.path.basename(xml_path)}:"
                           f" {lines[0]}") from None
