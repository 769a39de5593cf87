"""Every transposed convolution of a model, as its runtime computes it and as this
library does.

The whole model runs once in its runtime (onnxruntime for ONNX, OpenVINO for an IR),
on given inputs or random ones of the declared shapes, with each transposed
convolution's input and output captured as extra model outputs (:mod:`._onnx_runtime`,
:mod:`._openvino_runtime`).  Each layer is then computed again by this library from the
captured input with the model's weights, as ``onnx run`` / ``ir run`` computes it
(weights computed at run time are captured too), and the two results are compared:

- ``max_abs``: the largest ``|library - runtime|``;
- ``max_rel``: the largest ``|library - runtime| / max(|runtime|, atol)`` (an output
  near zero counts as ``atol``, so a cancellation does not read as a huge error);
- ``ulp``: ``max_abs`` in units of the output dtype's spacing at the runtime output's
  largest magnitude (``numpy.spacing``): how many roundings apart the two are;
- ``pass``: every element within ``atol + rtol * |runtime|`` (``numpy.isclose``, NaN
  equal to NaN), the shapes equal.

A runtime that departs from the operator's specification shows as a mismatch with the
note that explains it (:mod:`._conventions`): e.g. onnxruntime clamps the negative
pads of ``ConvTranspose(strides=[3], auto_pad="SAME_UPPER")`` on a 1-tap filter and
gives 7 outputs for a length-3 input where the specification gives 9.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import numpy as np

from .._errors import ConvTransposeError
from ._report import compatible, format_dims
from ._safety import InteropError, check_bytes, element_count

__all__ = ["LayerComparison", "compare_ir", "compare_onnx", "measure", "random_inputs",
           "source_name", "tolerances"]

#: Default (atol, rtol) by the output's dtype; float32 and float64 take the last entry.
_TOLERANCES = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}
_DEFAULT_TOLERANCES = (1e-4, 1e-4)
#: The metadata key a torch.export-based ONNX export gives each node: its module scopes.
NAME_SCOPES = "pkg.torch.onnx.name_scopes"


def tolerances(dtype, atol: float | None = None, rtol: float | None = None):
    """``(atol, rtol)``: the given ones, else the defaults for ``dtype`` (1e-4 and 1e-4
    for float32 and float64, 1e-2 for float16, 5e-2 for bfloat16)."""
    default_atol, default_rtol = _TOLERANCES.get(np.dtype(dtype).name, _DEFAULT_TOLERANCES)
    return (default_atol if atol is None else atol, default_rtol if rtol is None else rtol)


@dataclass
class LayerComparison:
    """One layer of ``onnx compare`` / ``ir compare``.

    Attributes
    ----------
    name : str
        The layer's (node's) name in the model.
    source : str
        Where it came from: the module of the exporting framework when the model says
        (:func:`source_name`), else ``name``.
    op : str
        Its type in the model.
    attributes : dict
        Its attributes as the model gives them, with ``kernel_shape``, ``groups`` and
        the resolved ``pads_begin`` / ``pads_end`` added when the layer could be planned.
    data_shape, runtime_shape, library_shape : tuple or None
        The captured input's shape and the two outputs' shapes.
    max_abs, max_rel, ulp : float or None
        The errors of :func:`measure`; ``None`` when not measured.
    atol, rtol : float or None
        The tolerances the layer was judged with.
    status : {"pass", "mismatch", "not compared"}
    notes : list of str
        Why a layer is a mismatch or was not compared, and what the run noticed.
    conventions : list of str
        The attribute readings that differ between frameworks (:mod:`._conventions`):
        the usual explanation of a mismatch.
    """

    name: str
    source: str
    op: str
    attributes: dict = field(default_factory=dict)
    data_shape: tuple | None = None
    runtime_shape: tuple | None = None
    library_shape: tuple | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    ulp: float | None = None
    atol: float | None = None
    rtol: float | None = None
    status: str = "pass"
    notes: list = field(default_factory=list)
    conventions: list = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == "mismatch"

    @property
    def compared(self) -> bool:
        return self.status != "not compared"

    def to_dict(self) -> dict:
        def listed(dims):
            return None if dims is None else list(dims)

        return {"name": self.name, "source": self.source, "op": self.op,
                "attributes": {key: _plain(value) for key, value in self.attributes.items()},
                "data_shape": listed(self.data_shape),
                "runtime_shape": listed(self.runtime_shape),
                "library_shape": listed(self.library_shape),
                "max_abs_error": _number(self.max_abs), "max_rel_error": _number(self.max_rel),
                "ulp_error": _number(self.ulp), "atol": self.atol, "rtol": self.rtol,
                "status": self.status, "notes": list(self.notes),
                "conventions": list(self.conventions)}


def _number(value):
    """A float as strict JSON holds it: infinities and NaN as the strings ``"inf"``,
    ``"-inf"`` and ``"nan"``."""
    if value is None or np.isfinite(value):
        return value
    return str(value)


def _plain(value):
    """An attribute value as JSON holds it."""
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def measure(reference, computed, atol: float, rtol: float) -> dict:
    """The errors of ``computed`` against ``reference`` (same shape): ``max_abs``,
    ``max_rel``, ``ulp`` and ``passed`` as the module docstring defines them."""
    if reference.size == 0:
        return {"max_abs": 0.0, "max_rel": 0.0, "ulp": 0.0, "passed": True}
    wide_reference = reference.astype(np.float64)
    wide_computed = computed.astype(np.float64)
    close = np.isclose(wide_computed, wide_reference, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        error = np.abs(wide_computed - wide_reference)
        both_same = (wide_computed == wide_reference) | (
            np.isnan(wide_computed) & np.isnan(wide_reference))
        error = np.where(both_same, 0.0, error)
        error = np.where(np.isnan(error), np.inf, error)
        max_abs = float(error.max())
        relative = np.where(error == 0, 0.0,
                            error / np.maximum(np.abs(wide_reference), atol))
        max_rel = float(np.where(np.isnan(relative), np.inf, relative).max())
        finite = np.abs(wide_reference[np.isfinite(wide_reference)])
        peak = finite.max() if finite.size else 0.0
        output_dtype = reference.dtype if reference.dtype.kind == "f" else np.dtype(np.float32)
        spacing = float(np.spacing(np.asarray(peak, output_dtype)))
        ulp = max_abs / spacing if max_abs else 0.0
    return {"max_abs": max_abs, "max_rel": max_rel, "ulp": ulp, "passed": bool(close.all())}


def source_name(name: str, metadata: dict | None = None) -> str:
    """The module a layer came from: the innermost module scope a torch.export-based
    ONNX export records (``metadata`` key ``pkg.torch.onnx.name_scopes``), the
    ``__module.NAME`` part of the names OpenVINO's PyTorch frontend gives, else
    ``name`` itself."""
    scopes_text = (metadata or {}).get(NAME_SCOPES)
    if scopes_text:
        try:
            scopes = ast.literal_eval(scopes_text)
        except (ValueError, SyntaxError):
            scopes = None
        if isinstance(scopes, (list, tuple)) and len(scopes) > 1:
            modules = [str(scope) for scope in scopes[:-1] if scope]  # the last: the op's
            if modules:
                return modules[-1]
    found = re.findall(r"__module\.([^/]+)", name)
    return found[-1] if found else name


def random_inputs(specs: dict, given: dict, seed: int, max_bytes: int) -> dict:
    """The model's input arrays: the ``given`` ones (name -> array), the others random
    with ``seed``.

    ``specs`` maps each input to ``(dims or None, NumPy dtype or None)``; a random input needs
    static dims.  Floats are standard normal, integers in ``[0, 10)``, booleans fair.

    Raises
    ------
    InteropError
        A given name that is no input, a given array of another shape or dtype, or an
        input with dynamic dims and no array.
    """
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise InteropError(f"--input {unknown[0]}=...: the model has no input {unknown[0]!r};"
                           f" its inputs are: {', '.join(specs) or 'none'}")
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (dims, dtype) in specs.items():
        if dtype is None:
            if name in given:
                feeds[name] = given[name]
                continue
            raise InteropError(f"input {name!r} has an element type NumPy cannot make: give it"
                               f" with --input {name}=FILE.npy")
        dtype = np.dtype(dtype)
        if name in given:
            array = given[name]
            if not compatible(dims, array.shape):
                raise InteropError(f"--input {name}: the array has shape {list(array.shape)} but"
                                   f" the model declares {format_dims(dims)}")
            if array.dtype != dtype:
                raise InteropError(f"--input {name}: the array holds {array.dtype}, the model's"
                                   f" input is {dtype}")
            feeds[name] = array
            continue
        if dims is None or None in dims:
            raise InteropError(f"input {name!r} has dynamic dims {format_dims(dims)}: give"
                               f" --input-shape {name}=DIMS or --input {name}=FILE.npy")
        check_bytes(f"the random input {name!r}",
                    element_count(f"input {name!r}", dims) * dtype.itemsize, max_bytes)
        if dtype.kind == "f":
            feeds[name] = rng.standard_normal(dims).astype(dtype)
        elif dtype.kind in "iu":
            feeds[name] = rng.integers(0, 10, dims).astype(dtype)
        elif dtype.kind == "b":
            feeds[name] = rng.random(dims) < 0.5
        else:
            raise InteropError(f"input {name!r} is {dtype}: give it with --input {name}=FILE.npy")
    return feeds


def _judge(row: LayerComparison, reference, compute, conventions, atol, rtol) -> None:
    """Fill ``row`` from the runtime's output ``reference`` and ``compute()``, the
    library's ``(result, notes)``; ``conventions()`` gives the convention notes."""
    row.runtime_shape = tuple(reference.shape)
    try:
        row.conventions = conventions()
    except ConvTransposeError:
        pass  # the planning error itself is reported by compute()
    try:
        result, notes = compute()
    except InteropError as error:
        row.status = "not compared"
        row.notes.append(str(error))
        return
    except ConvTransposeError as error:
        row.status = "mismatch"
        row.notes.append(f"the runtime computed the layer, the specification refuses it: {error}")
        return
    row.notes += notes
    row.library_shape = tuple(result.shape)
    row.atol, row.rtol = tolerances(reference.dtype if reference.dtype.kind == "f"
                                    else np.float32, atol, rtol)
    if result.shape != reference.shape:
        row.status = "mismatch"
        row.notes.append(f"the runtime gives shape {list(reference.shape)}, the specification"
                         f" {list(result.shape)}")
        return
    errors = measure(reference, result, row.atol, row.rtol)
    row.max_abs, row.max_rel, row.ulp = errors["max_abs"], errors["max_rel"], errors["ulp"]
    if not errors["passed"]:
        row.status = "mismatch"
        row.notes.append(f"outputs differ by up to {row.max_abs:.3g} (atol {row.atol:g}, rtol"
                         f" {row.rtol:g})")


def _planned(row: LayerComparison, plan) -> None:
    """Add the plan's kernel shape, groups and resolved pads to ``row.attributes``."""
    row.attributes.update(kernel_shape=list(plan.kernel_shape), groups=plan.groups,
                          pads_begin=list(plan.pads_begin), pads_end=list(plan.pads_end))


def _each(rows_and_work, progress) -> None:
    for done, (row, work) in enumerate(rows_and_work, 1):
        work(row)
        if progress is not None:
            progress(done)


def compare_onnx(model, feeds: dict, *, atol=None, rtol=None, progress=None) -> list:
    """:class:`LayerComparison` of every ConvTranspose node of ``model`` (an
    :class:`~convtranspose.interop.onnx_model.ONNXModel`) run by onnxruntime on ``feeds``.

    Nodes inside subgraphs and functions are listed as not compared (their tensors
    cannot be outputs of the model).  ``progress(done)`` is called per node compared.
    """
    import convtranspose as ct

    from ._conventions import onnx_conventions
    from ._onnx_runtime import run_capturing

    rows, work, wanted = [], [], []
    for item in model.transposed_nodes:
        node = item.node
        metadata = {entry.key: entry.value for entry in node.metadata_props}
        row = LayerComparison(item.label, source_name(item.label, metadata), node.op_type)
        rows.append(row)
        try:
            row.attributes = model.attributes(node, item.scope)
        except ConvTransposeError as error:
            row.status, row.notes = "not compared", [str(error)]
            continue
        names = list(node.input) + [""] * 3
        if item.scope.path or not names[0] or not names[1] or not node.output:
            row.status = "not compared"
            row.notes.append("inside a subgraph or function: its tensors cannot be model"
                             " outputs" if item.scope.path else "lacks its X or W input")
            continue
        x, w, b, y = names[0], names[1], names[2], node.output[0]
        constants = {}
        for name in (w, b):
            if name:
                try:
                    constants[name] = model.constant(name, f"{name!r} of {item.label!r}",
                                                     item.scope, row.notes)
                except InteropError:  # computed at run time: the runtime gives its value
                    wanted.append(name)
        wanted += [x, y]

        def compare(row, item=item, x=x, w=w, b=b, y=y, constants=constants):
            data, weights = values[x], constants.get(w, values.get(w))
            bias = constants.get(b, values.get(b)) if b else None
            row.data_shape = tuple(data.shape)
            attributes = model.attributes(item.node, item.scope)

            def conventions():
                plan = ct.shapes.onnx_conv_transpose(
                    data.shape, weights.shape, None if bias is None else bias.shape,
                    **attributes)
                _planned(row, plan)
                return onnx_conventions(plan, attributes)

            _judge(row, values[y], lambda: model.run(item, data, weights, bias), conventions,
                   atol, rtol)

        work.append((row, compare))
    values = run_capturing(model, feeds, wanted) if work else {}
    _each(work, progress)
    return rows


def compare_ir(model, feeds: dict, *, atol=None, rtol=None, progress=None) -> list:
    """:class:`LayerComparison` of every transposed convolution of ``model`` (an
    :class:`~convtranspose.interop.ir.IRModel`) run by OpenVINO on ``feeds``
    (Parameter name -> array).  ``progress(done)`` is called per layer compared."""
    from ._conventions import openvino_conventions
    from ._openvino_runtime import run_capturing
    from .ir import NotConstantError

    rows, work, captures = [], [], []
    seen: dict = {}
    for layer in model.transposed_layers:
        row = LayerComparison(layer.name, source_name(layer.name), layer.type)
        rows.append(row)
        occurrence = seen[(layer.name, layer.type)] = seen.get((layer.name, layer.type), -1) + 1
        if len(layer.inputs) not in (2, 3) or len(layer.outputs) != 1:
            row.status = "not compared"
            row.notes.append(f"{layer.describe()} has {len(layer.inputs)} inputs and"
                             f" {len(layer.outputs)} outputs; the op takes 2 or 3 and has 1")
            continue
        try:
            row.attributes = model.attributes(layer)
        except ConvTransposeError as error:
            row.status, row.notes = "not compared", [str(error)]
            continue
        given: dict = {}
        ports = [("input", 0), ("output", 0)]
        for index in range(1, len(layer.inputs)):
            try:
                given[index] = model.constant(layer, index)
            except NotConstantError:  # computed at run time: the runtime gives its value
                ports.append(("input", index))
        first = len(captures)
        captures += [(layer.name, layer.type, occurrence, kind, index) for kind, index in ports]
        where = {port: first + position for position, port in enumerate(ports)}

        def compare(row, layer=layer, given=given, where=where):
            data, reference = captured[where[("input", 0)]], captured[where[("output", 0)]]
            inputs = {index: given[index] if index in given else captured[where[("input", index)]]
                      for index in range(1, len(layer.inputs))}
            row.data_shape = tuple(data.shape)
            filter_, output_shape = inputs[1], inputs.get(2)
            spatial = None if output_shape is None else [
                int(v) for v in np.asarray(output_shape).reshape(-1)]

            def conventions():
                plan = model.plan(layer, data.shape, filter_.shape, spatial)
                _planned(row, plan)
                return openvino_conventions(plan, spatial)

            _judge(row, reference, lambda: model.run(layer, data, filter_, output_shape),
                   conventions, atol, rtol)

        work.append((row, compare))
    captured = run_capturing(model.xml_path, model.bin_path, feeds, captures) if work else []
    _each(work, progress)
    return rows
