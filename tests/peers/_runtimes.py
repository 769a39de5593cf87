"""Helpers for the differential tests: cases, peer runners and the batched hypothesis driver.

Compiling a model is what costs time in OpenVINO (about 5 ms per tiny subgraph in a
batch, 30-60 ms for a model of its own), so the driver runs every hypothesis test
twice with the same seed: a first pass only records the generated cases, the peer
then computes all of them in a few batched models, and the second pass checks each
case against that cache.  If a check fails, hypothesis shrinks as usual and the
shrunk cases, missing from the cache, are run one by one.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
from hypothesis import given, seed, settings

import convtranspose as ct

#: Per category ("<dialect> vs <peer>: equal", "... excluded: <quirk>"): the distinct
#: configurations that landed there (the summary prints their numbers).
COUNTS: dict = defaultdict(set)


def record(category: str, case) -> None:
    """Count ``case`` once under ``category`` for the end-of-session summary."""
    COUNTS[category].add(case)

OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2"}


# ---------------------------------------------------------------------------
# The batched hypothesis driver


def run_batched(strategy, examples: int, compute: Callable[[list], dict],
                check: Callable[[object, object], None]) -> int:
    """Check ``examples`` hypothesis-generated cases against a peer computed in batches.

    Parameters
    ----------
    strategy : hypothesis strategy of hashable cases.
    examples : int
        ``max_examples`` for hypothesis.
    compute : callable
        ``compute(cases) -> {case: peer_result}``: the peer's results for many cases.
    check : callable
        ``check(case, peer_result)``: raises AssertionError on a mismatch.

    Returns
    -------
    int
        The number of distinct cases checked.
    """
    recording = True
    recorded: list = []
    cache: dict = {}
    checked: set = set()

    def body(case):
        if recording:
            recorded.append(case)
            return
        if case not in cache:
            cache.update(compute([case]))
        checked.add(case)
        check(case, cache[case])

    test = settings(max_examples=examples, database=None)(given(strategy)(body))
    if not settings.default.derandomize:
        test = seed(random.getrandbits(64))(test)
    test()
    unique = list(dict.fromkeys(recorded))
    cache.update(compute(unique))
    recording = False
    test()
    return len(checked)


# ---------------------------------------------------------------------------
# Case descriptions (hashable, so hypothesis examples can key the peer cache)


@dataclass(frozen=True)
class Case:
    """One configuration of one dialect: shapes, attributes, element type, values.

    ``attrs`` holds the dialect's keywords as a sorted tuple of (name, value) pairs
    (values are ints, strings, tuples or None).  ``values`` is ``"integer"`` (small
    integers: every sum is exact in every element type, so results must be equal)
    or ``"normal"`` (standard normal floats: equal up to accumulation order).
    """

    op: str
    data_shape: tuple
    filter_shape: tuple
    attrs: tuple
    dtype: str = "float32"
    values: str = "integer"
    seed: int = 0
    bias: bool = False
    given_arrays: tuple | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def kwargs(self) -> dict:
        return dict(self.attrs)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(data, filter)`` or ``(data, filter, bias)``, reproducible from ``seed``."""
        if self.given_arrays is not None:
            return self.given_arrays
        rng = np.random.default_rng(self.seed)
        dtype = np.dtype(self.dtype)
        shapes = [self.data_shape, self.filter_shape]
        if self.bias:
            shapes.append((self.bias_size,))
        if self.values == "integer":
            # small enough that no sum overflows the element type or leaves the range
            # where float16/float32 represent integers exactly
            high = 1 if dtype.itemsize == 1 else 4
            low = 0 if dtype.kind == "u" else -high
            return tuple(rng.integers(low, high + 1, s).astype(dtype) for s in shapes)
        return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)

    @property
    def bias_size(self) -> int:
        return self.plan().out_channels

    def plan(self) -> ct.ConvTransposePlan:
        shapes = getattr(ct.shapes, self.op)
        if self.op in ("convolution_backprop_data", "group_convolution_backprop_data"):
            kwargs = self.kwargs
            return shapes(self.data_shape, self.filter_shape, kwargs.pop("output_shape", None),
                          **kwargs)
        return shapes(self.data_shape, self.filter_shape, **self.kwargs)

    def compute(self) -> np.ndarray:
        """This library's result."""
        return _run_with(self, self.arrays())

    def reproducer(self) -> str:
        """Everything needed to rebuild the case (shown with every mismatch)."""
        return (f"{self.op}: data {self.data_shape} {self.dtype}, filter {self.filter_shape},"
                f" {self.kwargs}, values={self.values}, seed={self.seed}, bias={self.bias}")


def make_case(op: str, data_shape, filter_shape, dtype="float32", values="integer", seed=0,
              bias=False, **attrs) -> Case:
    return Case(op, tuple(data_shape), tuple(filter_shape),
                tuple(sorted((k, _freeze(v)) for k, v in attrs.items())), dtype, values, seed, bias)


def with_arrays(case: Case, *arrays: np.ndarray) -> Case:
    """The case computed on the given arrays instead of seeded random ones."""
    return dataclasses.replace(case, given_arrays=arrays)


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def taps(case: Case) -> int:
    """The number of products summed into one output element (at most)."""
    plan = case.plan()
    return plan.canonical_filter_shape[1] * math.prod(plan.kernel_shape)


def assert_close(case: Case, peer: np.ndarray, ours: np.ndarray, *, label: str,
                 magnitude: np.ndarray | None = None) -> None:
    """Equal for integer-valued cases; else within the accumulation-order bound.

    The bound is the classic one for a sum of ``n`` products computed in any order,
    ``(n + 2) * eps * sum |products|`` per element (bias included; plus one rounding
    of the result for float16, which every peer accumulates in float32), with
    ``sum |products|`` from the library's float64 run on ``|data|``, ``|filter|``: a
    missing or misplaced product is far larger.
    """
    assert peer.shape == ours.shape, (
        f"{label}: shape {peer.shape} but the library gives {ours.shape}\n  {case.reproducer()}")
    assert peer.dtype == ours.dtype, f"{label}: dtype {peer.dtype} vs {ours.dtype}"
    if case.values == "integer":
        if not np.array_equal(peer, ours):
            bad = np.argwhere(peer != ours)[:5]
            raise AssertionError(
                f"{label}: {int((peer != ours).sum())} of {peer.size} elements differ, first at"
                f" {bad.tolist()}: peer {peer[tuple(bad[0])]} vs library {ours[tuple(bad[0])]}"
                f"\n  {case.reproducer()}")
        return
    if magnitude is None:
        arrays = [np.abs(a.astype(np.float64)) for a in case.arrays()]
        magnitude = _run_with(dataclasses.replace(case, dtype="float64"), arrays)
    eps = float(np.finfo(np.float32).eps)
    bound = (taps(case) + 2) * eps * magnitude
    if case.dtype == "float16":  # plus one rounding of the result to float16
        bound = bound + np.abs(ours.astype(np.float64)) * float(np.finfo(np.float16).eps)
    error = np.abs(peer.astype(np.float64) - ours.astype(np.float64))
    if not (error <= bound).all():
        worst = np.unravel_index(np.argmax(error - bound), error.shape)
        raise AssertionError(
            f"{label}: error {error[worst]:.3g} above the accumulation bound {bound[worst]:.3g}"
            f" at {list(worst)}: peer {peer[worst]} vs library {ours[worst]}"
            f"\n  {case.reproducer()}")


def _run_with(case: Case, arrays) -> np.ndarray:
    function = getattr(ct, case.op)
    if case.op in ("convolution_backprop_data", "group_convolution_backprop_data"):
        kwargs = case.kwargs
        return function(*arrays, kwargs.pop("output_shape", None), **kwargs)
    return function(*arrays, **case.kwargs)


# ---------------------------------------------------------------------------
# OpenVINO


@dataclass
class OpenVINOResult:
    """What OpenVINO says about one case: output, resolved pads, inferred shape, or an error."""

    output: np.ndarray | None = None
    pads_begin: tuple | None = None
    pads_end: tuple | None = None
    pads_before_compile: tuple | None = None
    partial_shape: tuple | None = None
    error: str | None = None
    via: str | None = None


_OV_NAMES = {"convolution_backprop_data": "ConvolutionBackpropData",
             "group_convolution_backprop_data": "GroupConvolutionBackpropData"}


def openvino_node(case: Case):
    """``(parameters, node)`` for one case, built with NodeFactory("opset1").

    The output_shape input is a Constant so that the model's shapes are static.
    Attributes are passed as given (explicit defaults filled in), unlike the
    ``opset1.group_convolution_backprop_data`` helper that drops pads when
    ``output_shape`` is given.
    """
    import openvino as ov
    from openvino import opset1
    from openvino.utils.node_factory import NodeFactory

    element = ov.Type(np.dtype(case.dtype))
    data = opset1.parameter(list(case.data_shape), element)
    filter_ = opset1.parameter(list(case.filter_shape), element)
    kwargs = case.kwargs
    rank = len(case.data_shape) - 2
    inputs = [data.output(0), filter_.output(0)]
    output_shape = kwargs.pop("output_shape", None)
    if output_shape is not None:
        inputs.append(opset1.constant(np.array(output_shape, np.int64)).output(0))
    attrs = {"strides": [1] * rank, "dilations": [1] * rank, "pads_begin": [0] * rank,
             "pads_end": [0] * rank, "output_padding": [0] * rank, "auto_pad": "explicit"}
    attrs.update({k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()})
    node = NodeFactory("opset1").create(_OV_NAMES[case.op], inputs, attrs)
    return [data, filter_], node


def openvino_compute(cases: Iterable[Case], batch: int = 64) -> dict:
    """Run cases on the OpenVINO CPU plugin, ``batch`` independent subgraphs per model."""
    cases = list(cases)
    results = {}
    for start in range(0, len(cases), batch):
        results.update(_openvino_batch(cases[start:start + batch]))
    return results


def openvino_group_compute(cases: Iterable[Case]) -> dict:
    """Like :func:`openvino_compute`, with a fallback for single-group filters.

    The CPU plugin cannot compile GroupConvolutionBackpropData with one group and
    more than one channel (docs/semantics.md, D9); for those cases the values and
    the pads after compilation come from the equivalent ConvolutionBackpropData
    (filter ``[0]``), while the shape and pads OpenVINO infers still come from the
    group node itself.
    """
    results = openvino_compute(cases)
    fallback = {}
    for case, result in results.items():
        if (result.error and result.error.startswith("compile") and case.filter_shape[0] == 1
                and "could not create a primitive descriptor" in result.error):
            data, filter_ = case.arrays()[:2]
            fallback[case] = with_arrays(
                Case("convolution_backprop_data", case.data_shape, case.filter_shape[1:],
                     case.attrs, case.dtype, case.values, case.seed), data, filter_[0])
    if fallback:
        plain = openvino_compute(fallback.values())
        for case, equivalent in fallback.items():
            result, other = results[case], plain[equivalent]
            result.error, result.via = other.error, "ConvolutionBackpropData"
            result.output, result.pads_begin, result.pads_end = (
                other.output, other.pads_begin, other.pads_end)
    return results


def _openvino_batch(cases: list[Case]) -> dict:
    import openvino as ov
    from openvino import opset1

    results, built = {}, []
    for case in cases:
        try:
            parameters, node = openvino_node(case)
        except Exception as error:  # the runtime rejects the attributes
            results[case] = OpenVINOResult(error=f"{type(error).__name__}: {error}")
            continue
        results[case] = OpenVINOResult(
            partial_shape=tuple(d.get_length() for d in node.get_output_partial_shape(0)),
            pads_before_compile=(tuple(node.get_pads_begin()), tuple(node.get_pads_end())))
        built.append((case, parameters, node))
    if not built:
        return results
    model = ov.Model([opset1.result(node) for _, _, node in built],
                     [p for _, parameters, _ in built for p in parameters])
    try:
        compiled = ov.Core().compile_model(model, "CPU", OPENVINO_CONFIG)
    except Exception as error:
        if len(built) == 1:
            results[built[0][0]].error = f"compile: {type(error).__name__}: {error}"
            return results
        half = len(built) // 2  # isolate the subgraph the plugin refuses
        for part in ([c for c, _, _ in built[:half]], [c for c, _, _ in built[half:]]):
            results.update(_openvino_batch(part))
        return results
    inputs = [a for case, _, _ in built for a in case.arrays()[:2]]
    outputs = compiled.create_infer_request().infer(inputs)
    for index, (case, _, node) in enumerate(built):
        result = results[case]
        result.output = np.array(outputs[compiled.outputs[index]], copy=True)
        result.pads_begin = tuple(node.get_pads_begin())
        result.pads_end = tuple(node.get_pads_end())
    return results


def openvino_1x1_quirk(case: Case) -> bool:
    """The family where the CPU plugin may take a wrong shortcut (docs/semantics.md, D3).

    Every axis a 1x1 kernel with stride 1 (the op is a channel mix followed by a crop)
    and an output with no more elements per plane than the input.  In this family the
    plugin returns either the spec's result or :func:`openvino_shortcut`, depending
    on the node in a way we could not reduce to a rule.
    """
    rank = len(case.data_shape) - 2
    ones = (1,) * rank
    plan = case.plan()
    return (tuple(case.filter_shape[-rank:]) == ones
            and tuple(case.kwargs.get("strides") or ones) == ones
            and math.prod(plan.output_size) <= math.prod(case.data_shape[2:]))


def openvino_shortcut(case: Case) -> np.ndarray:
    """The plugin's shortcut for :func:`openvino_1x1_quirk` cases: the channel mix of the
    data, each (n, c) plane flattened and its first ``prod(Y)`` elements reshaped to Y
    (a reshape instead of a crop; when Y == X it is the data mixed at offset 0)."""
    plan = case.plan()
    mix = make_case(case.op, case.data_shape, case.filter_shape, case.dtype, case.values,
                    case.seed, **{**case.kwargs, "auto_pad": "explicit", "pads_begin": None,
                                  "pads_end": None, "output_padding": None,
                                  "output_shape": None})
    mixed = _run_with(mix, case.arrays()[:2])
    planes = mixed.reshape(mixed.shape[:2] + (-1,))
    return planes[..., :math.prod(plan.output_size)].reshape(plan.output_shape)


# ---------------------------------------------------------------------------
# ONNX / onnxruntime


def onnx_model(case: Case, *, opset: int = 22):
    """A single-node ConvTranspose model (opset 22, IR version 10) for a case."""
    from onnx import helper

    element = helper.np_dtype_to_tensor_dtype(np.dtype(case.dtype))
    inputs = [helper.make_tensor_value_info("X", element, list(case.data_shape)),
              helper.make_tensor_value_info("W", element, list(case.filter_shape))]
    names = ["X", "W"]
    if case.bias:
        inputs.append(helper.make_tensor_value_info("B", element, [case.bias_size]))
        names.append("B")
    attrs = {k: (list(v) if isinstance(v, tuple) else v)
             for k, v in case.kwargs.items() if v is not None}
    if "auto_pad" in attrs:
        attrs["auto_pad"] = attrs["auto_pad"].upper()
    node = helper.make_node("ConvTranspose", names, ["Y"], **attrs)
    graph = helper.make_graph([node], "conv_transpose", inputs,
                              [helper.make_tensor_value_info("Y", element, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def onnxruntime_run(model, feeds: dict) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.log_severity_level = 4  # rejected configurations are expected and reported here
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@dataclass
class PeerResult:
    """A peer's output for one case, or the error it raised."""

    output: np.ndarray | None = None
    error: str | None = None


def onnxruntime_compute(cases: Iterable[Case]) -> dict:
    results = {}
    for case in cases:
        arrays = case.arrays()
        feeds = dict(zip(["X", "W", "B"], arrays))
        try:
            results[case] = PeerResult(output=onnxruntime_run(onnx_model(case), feeds))
        except Exception as error:
            results[case] = PeerResult(error=f"{type(error).__name__}: {error}")
    return results
