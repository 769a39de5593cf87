"""Shape plans against the runtimes' own shape inference (no compilation: cheap, run many).

- ONNX: ``onnx.shape_inference.infer_shapes(strict_mode=True)`` on a single node.
- OpenVINO: the output partial shape and the pads a freshly built opset1 node reports.
"""

from __future__ import annotations

import pytest

from . import _runtimes as rt
from ._runtimes import record
from ._strategies import onnx_cases, openvino_cases

pytestmark = pytest.mark.peers

#: shape checks are cheap: this many per dialect for each --peer-examples
SCALE = 3


def onnx_shapes(cases) -> dict:
    import onnx

    results = {}
    for case in cases:
        inferred = onnx.shape_inference.infer_shapes(rt.onnx_model(case), strict_mode=True)
        dims = inferred.graph.output[0].type.tensor_type.shape.dim
        results[case] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
    return results


def check_onnx_shape(case: rt.Case, inferred: tuple) -> None:
    plan = case.plan()
    output_shape = case.kwargs.get("output_shape")
    smaller = [i for i, (y, x) in enumerate(zip(output_shape or (), case.data_shape[2:])) if y < x]
    if smaller:
        # D10: onnx stops inferring at the first axis where output_shape < X, leaving a
        # shape of lower rank (N, M and the axes before it)
        assert inferred == plan.output_shape[:2 + smaller[0]], (
            f"onnx shape inference {inferred}: expected it to give up\n  {case.reproducer()}")
        record("onnx_conv_transpose shape vs onnx.shape_inference: excluded, gives up (D10)", case)
        return
    if case.kwargs["auto_pad"].startswith("SAME") and not output_shape:
        # D11: onnx infers F + output_padding - max(K' - s, 0) for SAME_*, the spec and
        # the reference evaluator X * s: they differ when K' < s or output_padding > 0
        onnx_rule = tuple(a.full_size + p - max(a.dilated_kernel_size - a.stride, 0)
                          for a, p in zip(plan.axes, plan.output_padding))
        if onnx_rule != plan.output_size:
            assert inferred == plan.output_shape[:2] + onnx_rule, (
                f"onnx shape inference {inferred}, expected its SAME rule {onnx_rule}\n"
                f"  {case.reproducer()}")
            record("onnx_conv_transpose shape vs onnx.shape_inference: excluded, SAME rule (D11)",
                   case)
            return
    assert inferred == plan.output_shape, (
        f"onnx shape inference {inferred}, the plan {plan.output_shape}\n  {case.reproducer()}")
    record("onnx_conv_transpose shape vs onnx.shape_inference: equal", case)


def test_onnx_shape_inference(peer_examples):
    pytest.importorskip("onnx", reason="onnx is not installed (pip install '.[test]')")
    rt.run_batched(onnx_cases(), peer_examples * SCALE, onnx_shapes, check_onnx_shape)


def openvino_shapes(cases) -> dict:
    results = {}
    for case in cases:
        _, node = rt.openvino_node(case)
        results[case] = (tuple(d.get_length() for d in node.get_output_partial_shape(0)),
                         (tuple(node.get_pads_begin()), tuple(node.get_pads_end())))
    return results


def check_openvino_shape(case: rt.Case, inferred) -> None:
    plan = case.plan()
    shape, pads = inferred
    assert shape == plan.output_shape, (
        f"OpenVINO infers {shape}, the plan {plan.output_shape}\n  {case.reproducer()}")
    assert pads == (plan.pads_begin, plan.pads_end), (
        f"OpenVINO resolves pads {pads}, the plan {plan.pads_begin}/{plan.pads_end}\n"
        f"  {case.reproducer()}")
    record(f"{case.op} shape and pads vs OpenVINO Model: equal", case)


@pytest.mark.parametrize("op", ["convolution_backprop_data", "group_convolution_backprop_data"])
def test_openvino_shape_inference(op, peer_examples):
    pytest.importorskip("openvino", reason="openvino is not installed (pip install '.[test]')")
    rt.run_batched(openvino_cases(op), peer_examples * SCALE, openvino_shapes,
                   check_openvino_shape)
