"""ONNX ConvTranspose against onnxruntime (single node, opset 22, IR 10, float32/float16, CPU)."""

from __future__ import annotations

import numpy as np
import pytest

from . import _runtimes as rt
from ._runtimes import record
from ._strategies import onnx_cases

ort = pytest.importorskip("onnxruntime",
                          reason="onnxruntime is not installed (pip install '.[test]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers


def onnxruntime_same_clamp(case: rt.Case) -> bool:
    """D4: SAME_* without output_shape where some axis has K' + output_padding < stride."""
    kwargs = case.kwargs
    if kwargs.get("auto_pad") not in ("SAME_UPPER", "SAME_LOWER") or kwargs.get("output_shape"):
        return False
    plan = case.plan()
    return any(a.dilated_kernel_size + p < a.stride
               for a, p in zip(plan.axes, plan.output_padding))


def onnxruntime_same_size(case: rt.Case) -> list[int]:
    """The SAME output size onnxruntime computes: the total pad clamped at 0."""
    plan = case.plan()
    return [a.full_size + p - max(a.full_size + p - a.input_size * a.stride, 0)
            for a, p in zip(plan.axes, plan.output_padding)]


def onnxruntime_rejects(case: rt.Case) -> str | None:
    """D5: the message onnxruntime refuses a case with that the ONNX spec allows, if any.

    It refuses an output_padding not smaller than the stride (the spec also allows
    smaller than the dilation), and an output_shape larger than F + output_padding
    unless it is smaller than F + stride (measured on a grid of 1-D cases).
    """
    plan = case.plan()
    if any(p >= a.stride for a, p in zip(plan.axes, plan.output_padding)):
        return "inconsistent with input spatial dimensions"
    output_shape = case.kwargs.get("output_shape")
    if output_shape and any(y > a.full_size + p and y >= a.full_size + a.stride
                            for y, a, p in zip(output_shape, plan.axes, plan.output_padding)):
        return "Explicit output_shape is inconsistent"
    return None


def onnxruntime_pads_at_end(case: rt.Case) -> bool:
    """D5: an output_shape beyond F + output_padding that onnxruntime accepts: it clamps
    the negative total pad to 0 and fills the excess with zeros (plus bias) at the end."""
    output_shape = case.kwargs.get("output_shape")
    plan = case.plan()
    return bool(output_shape) and any(
        y > a.full_size + p for y, a, p in zip(output_shape, plan.axes, plan.output_padding))


def onnxruntime_clamped_output(case: rt.Case, arrays=None, dtype=None) -> np.ndarray:
    """What onnxruntime computes for :func:`onnxruntime_pads_at_end` cases (in float32,
    rounded once to the element type, as onnxruntime does); ``arrays`` and ``dtype``
    replace the case's (for the error bound)."""
    plan = case.plan()
    natural = [min(y, a.full_size + p)
               for y, a, p in zip(case.kwargs["output_shape"], plan.axes, plan.output_padding)]
    arrays = [a.astype(np.float64) for a in (case.arrays() if arrays is None else arrays)]
    inner = rt.with_arrays(
        rt.make_case(case.op, case.data_shape, case.filter_shape, "float64", case.values,
                     case.seed, **{**case.kwargs, "output_shape": natural}), *arrays[:2])
    out = np.zeros(plan.output_shape, np.float64)
    out[tuple(slice(0, n) for n in inner.plan().output_shape)] = inner.compute()
    if case.bias:
        out += arrays[2].reshape((-1,) + (1,) * plan.spatial_rank)
    return out.astype(dtype or case.dtype)


def check_onnxruntime(case: rt.Case, result: rt.PeerResult) -> None:
    rejection = onnxruntime_rejects(case)
    if rejection:
        assert result.error is not None and rejection in result.error, (
            f"onnxruntime did not refuse with {rejection!r}: {result.error}\n  {case.reproducer()}")
        record("onnx_conv_transpose vs onnxruntime: excluded, refused (D5)", case)
        return
    assert result.error is None, f"onnxruntime failed: {result.error}\n  {case.reproducer()}"
    if onnxruntime_pads_at_end(case):
        magnitude = onnxruntime_clamped_output(case, [np.abs(a) for a in case.arrays()],
                                               np.float64)
        rt.assert_close(case, result.output, onnxruntime_clamped_output(case),
                        label="onnxruntime clamped output_shape", magnitude=magnitude)
        record("onnx_conv_transpose vs onnxruntime: excluded, output_shape > natural clamped (D5)",
               case)
        return
    if onnxruntime_same_clamp(case):
        # onnxruntime clamps a negative total pad to 0 per axis: the output is then the
        # one for output_shape = F + output_padding - max(total, 0) per axis
        clamped = rt.make_case(case.op, case.data_shape, case.filter_shape, case.dtype,
                               case.values, case.seed, case.bias,
                               **{**case.kwargs, "output_shape": onnxruntime_same_size(case)})
        rt.assert_close(clamped, result.output, clamped.compute(), label="onnxruntime SAME clamp")
        record("onnx_conv_transpose vs onnxruntime: excluded, SAME clamp (D4)", case)
        return
    rt.assert_close(case, result.output, case.compute(), label="onnxruntime")
    record("onnx_conv_transpose vs onnxruntime: equal", case)


def test_against_onnxruntime(peer_examples):
    # about a quarter of the cases land in a documented onnxruntime divergence: draw more
    # so that at least peer_examples are compared for equality
    rt.run_batched(onnx_cases(), peer_examples * 3 // 2, rt.onnxruntime_compute,
                   check_onnxruntime)
