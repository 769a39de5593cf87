"""Run an ONNX model in onnxruntime and capture tensors inside it.

The tensors wanted become extra outputs of a copy of the model, made in memory (the
file is not touched): a name that already is an output is not added again, a name
asked for twice is added once, and a graph input is answered from the feeds.
External tensor data is read by the model's own bounded reader and placed in the
copy, so that the runtime reads nothing the ``onnx`` commands would refuse.
"""

from __future__ import annotations

import os

from ._safety import InteropError, require

__all__ = ["run_capturing"]


def _copy_with_outputs(model, names: list):
    """A copy of ``model.model`` with ``names`` among its outputs and its external data
    read into it."""
    onnx = require("onnx", "interop", "reading ONNX models")
    copy = onnx.ModelProto()
    copy.CopyFrom(model.model)
    outputs = {value.name for value in copy.graph.output}
    for name in names:
        if name not in outputs:
            # Name only: onnxruntime infers the type of an output it computes.
            copy.graph.output.add().name = name
            outputs.add(name)
    for tensor in copy.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            array = model.read_tensor(tensor, f"initializer {tensor.name!r}")
            tensor.CopyFrom(onnx.numpy_helper.from_array(array, tensor.name))
    return copy


def run_capturing(model, feeds: dict, names: list) -> dict:
    """Run ``model`` (an :class:`~convtranspose.interop.onnx_model.ONNXModel`) in
    onnxruntime's CPU provider on ``feeds``; returns ``feeds`` and the value of every
    tensor in ``names``, by name.

    Raises
    ------
    InteropError
        onnxruntime cannot load or run the model (its message, one line).
    MissingDependencyError
        ``onnxruntime`` is not installed.
    """
    ort = require("onnxruntime", "peers", "comparing with onnxruntime")
    wanted = list(dict.fromkeys(name for name in names if name and name not in feeds))
    copy = _copy_with_outputs(model, wanted)
    options = ort.SessionOptions()
    options.log_severity_level = 3  # warnings (unused initializers ...) are not ours to show
    try:
        session = ort.InferenceSession(copy.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        results = session.run(wanted, feeds)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own untyped errors
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise InteropError(f"onnxruntime cannot run {os.path.basename(model.path)}:"
                           f" {lines[0]}") from None
    values = dict(feeds)
    values.update(zip(wanted, results))
    return values
