"""The FakeQuantize pattern around an IR's transposed convolutions: checked and run.

An OpenVINO IR carries a quantized ConvolutionBackpropData (or
GroupConvolutionBackpropData) as the float layer between FakeQuantize layers: one on
its data input, one on its weights (a ``Const``, possibly through ``Convert``, into a
FakeQuantize), and optionally one as the only consumer of its output.  Each FakeQuantize
followed here has constant ranges (inputs 1 to 4 read from the ``.bin``) and NumPy (or
no) broadcasting; the layer is then computed by
:func:`convtranspose.fake_quantize_convolution_backprop_data` (or the group one).
A FakeQuantize whose ranges are computed at run time, or that broadcasts otherwise, is
refused by name.

>>> pattern = quantized_pattern(model, model.layer("up1"))       # doctest: +SKIP
>>> pattern.describe()                                             # doctest: +SKIP
'FakeQuantize on data (256 levels), filter (255 levels), output (256 levels)'
"""

from __future__ import annotations

from dataclasses import dataclass

from ._safety import InteropError
from .ir import TRANSPOSED_CONVOLUTIONS, IRModel, Layer, NotConstantError

__all__ = ["FakeQuantizeLayer", "QuantizedPattern", "check", "quantized_pattern", "run"]

_RANGES = ("input_low", "input_high", "output_low", "output_high")


@dataclass(frozen=True)
class FakeQuantizeLayer:
    """One followed FakeQuantize: its layer, its four constant ranges and ``levels``."""

    layer: Layer
    ranges: tuple
    levels: int

    def quantize(self) -> tuple:
        """The ``(input_low, input_high, output_low, output_high, levels)`` argument of
        :func:`convtranspose.fake_quantize_convolution_backprop_data`."""
        return (*self.ranges, self.levels)


@dataclass(frozen=True)
class QuantizedPattern:
    """The FakeQuantize layers around one transposed convolution (``None``: absent)."""

    data: FakeQuantizeLayer | None
    filter: FakeQuantizeLayer | None
    output: FakeQuantizeLayer | None

    def describe(self) -> str:
        parts = [f"{name} ({fq.levels} levels)" for name, fq in
                 (("data", self.data), ("filter", self.filter), ("output", self.output))
                 if fq is not None]
        return "FakeQuantize on " + ", ".join(parts)


def _follow(model: IRModel, fake: Layer) -> FakeQuantizeLayer:
    """The FakeQuantize ``fake`` read, or an InteropError saying why it is not followed."""
    where = fake.describe()
    if len(fake.inputs) != 5 or len(fake.outputs) != 1:
        raise InteropError(f"{where} has {len(fake.inputs)} inputs and {len(fake.outputs)}"
                           " outputs; FakeQuantize-1 takes 5 and has 1")
    broadcast = str(fake.attributes.get("auto_broadcast", "numpy")).lower()
    if broadcast not in ("numpy", "none"):
        raise InteropError(f"{where}: auto_broadcast {broadcast!r} is not followed (only"
                           " 'numpy' and 'none')")
    try:
        levels = int(fake.attributes["levels"])
    except (KeyError, ValueError):
        raise InteropError(f"{where}: needs an integer levels attribute, got"
                           f" {fake.attributes.get('levels')!r}") from None
    ranges = []
    for index, name in enumerate(_RANGES, start=1):
        try:
            ranges.append(model.constant(fake, index))
        except NotConstantError:
            raise InteropError(
                f"{where}: its {name} (input {index}) is computed at run time; only a"
                " FakeQuantize with constant ranges is followed") from None
    return FakeQuantizeLayer(fake, tuple(ranges), levels)


def _consumers(model: IRModel, layer: Layer) -> list[Layer]:
    """The layers reading ``layer``'s first output, one per edge."""
    if not layer.outputs:
        return []
    port = (layer.id, layer.outputs[0].id)
    return [model.layers[to_id] for (to_id, _), source in model.edges.items()
            if source == port and to_id in model.layers]


def quantized_pattern(model: IRModel, layer: Layer) -> QuantizedPattern | None:
    """The FakeQuantize layers around ``layer`` (None: it has none), or an InteropError
    for one that is there but not followed.

    Data: the producer of input 0 is a FakeQuantize.  Filter: the producer of input 1 is
    a FakeQuantize (its input 0 is then read as a constant by :func:`run`).  Output: the
    only consumer of the layer's output is a FakeQuantize, reading it as its input 0.
    """
    if len(layer.inputs) < 2:  # not the op (check reports it invalid)
        return None
    found = {}
    for index, name in ((0, "data"), (1, "filter")):
        source, _ = model.producer(layer, index)
        found[name] = _follow(model, source) if source.type == "FakeQuantize" else None
    consumers = _consumers(model, layer)
    found["output"] = None
    if len(consumers) == 1 and consumers[0].type == "FakeQuantize":
        only = consumers[0]
        source, _ = model.producer(only, 0)
        if source.id == layer.id:
            found["output"] = _follow(model, only)
    if not any(found.values()):
        return None
    return QuantizedPattern(found["data"], found["filter"], found["output"])


def check(model: IRModel, layer: Layer):
    """``model.check(layer)``, with a note naming the FakeQuantize layers around it (or
    why one is not followed) and their ranges' shapes checked against the tensors."""
    import convtranspose as ct

    report = model.check(layer)
    try:
        pattern = quantized_pattern(model, layer)
    except InteropError as error:
        report.conventions.append(f"not followed by `ir run`: {error}")
        return report
    if pattern is None:
        return report
    report.conventions.append(f"{pattern.describe()}; `ir run` computes the quantized layer"
                              " (FakeQuantize-1 around it)")
    data, filter_ = layer.inputs[0].dims, layer.inputs[1].dims
    if report.inferred is None or None in data or None in filter_:
        return report
    planner = getattr(ct.shapes, "fake_quantize_" + TRANSPOSED_CONVOLUTIONS[layer.type])
    shapes = {f"{name}_quantize": None if fq is None else
              tuple(r.shape for r in fq.ranges) + (fq.levels,)
              for name, fq in (("data", pattern.data), ("filter", pattern.filter),
                               ("output", pattern.output))}
    try:
        planner(data, filter_, report.output_shape_input, **shapes,
                **model.attributes(layer))
    except (ct.ConvTransposeError, TypeError) as error:
        report.status, report.reason = "invalid", "FakeQuantize ranges (see below)"
        report.problems.append(f"{layer.describe()}: {error}")
    return report


def run(model: IRModel, layer: Layer, data):
    """Execute ``layer`` as :meth:`IRModel.run` does, following the FakeQuantize layers
    around it: ``data`` is then the data FakeQuantize's input (the float tensor before
    quantization), and the result the output FakeQuantize's output.

    Returns
    -------
    (ndarray, list of str)
        The output and notes worth telling the user.
    """
    import numpy as np

    import convtranspose as ct

    from ._report import compatible, format_dims

    pattern = quantized_pattern(model, layer)
    if pattern is None:
        return model.run(layer, data)
    notes = [f"{layer.describe()}: {pattern.describe()}"]
    declared = layer.inputs[0].dims
    if not compatible(declared, data.shape):
        raise InteropError(f"data has shape {data.shape} but {layer.describe()} declares"
                           f" input 0 as {format_dims(declared)}")
    if pattern.filter is not None:
        filter_ = model.constant(pattern.filter.layer, 0)
    else:
        filter_ = model.constant(layer, 1)
    if data.dtype.kind != "f":
        raise InteropError(f"data has dtype {data.dtype}; a FakeQuantize pattern takes"
                           " floating-point data")
    if filter_.dtype != data.dtype:
        notes.append(f"weights of {layer.describe()} are {filter_.dtype}; cast to the"
                     f" data's {data.dtype}")
        filter_ = filter_.astype(data.dtype)
    output_shape = None
    if len(layer.inputs) == 3:
        output_shape = [int(v) for v in np.asarray(model.constant(layer, 2)).reshape(-1)]
    function = getattr(ct, "fake_quantize_" + TRANSPOSED_CONVOLUTIONS[layer.type])
    quantize = {name: (None if fq is None else fq.quantize())
                for name, fq in (("data_quantize", pattern.data),
                                 ("filter_quantize", pattern.filter),
                                 ("output_quantize", pattern.output))}
    try:
        result = function(data, np.ascontiguousarray(filter_), output_shape, **quantize,
                          **model.attributes(layer))
    except ct.ConvTransposeError as error:
        raise InteropError(f"{layer.describe()}: {error}") from None
    return result, notes
