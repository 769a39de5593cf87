"""ONNX ConvTranspose against onnxruntime (single node, opset 22, IR 10, float32, CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import convtranspose as ct

from . import _runtimes as rt
from ._runtimes import make_case, record

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install '.[test]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers

AUTO_PADS = ["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


@st.composite
def onnx_cases(draw, max_rank: int = 3, dtypes=("float32",) * 4 + ("float16",)):
    """A small random ONNX ConvTranspose configuration (float32 or float16: the element
    types onnxruntime's CPU provider implements ConvTranspose for)."""
    rank = draw(st.integers(1, max_rank))
    group = draw(st.integers(1, 3))
    c_in, c_out, batch = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    big = 4 if rank < 3 else 3
    sizes = draw(st.lists(st.integers(1, big), min_size=rank, max_size=rank))
    kernel = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dilations = draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    # the ONNX spec: each output_padding value must be less than its stride or dilation;
    # onnxruntime only accepts less than the stride (D5), so that case is rarer
    wide = draw(st.integers(0, 7)) == 0
    output_padding = [draw(st.integers(0, (max(s, d) if wide else s) - 1))
                      for s, d in zip(strides, dilations)]
    auto_pad = draw(st.sampled_from(AUTO_PADS))
    full = [(x - 1) * s + (k - 1) * d + 1 + p
            for x, k, s, d, p in zip(sizes, kernel, strides, dilations, output_padding)]
    attrs = dict(strides=strides, dilations=dilations, output_padding=output_padding,
                 group=group, auto_pad=auto_pad)
    if draw(st.booleans()):
        # smaller than, equal to or (rarer: onnxruntime refuses it, D5) larger than natural
        deltas = st.sampled_from([-3, -2, -2, -1, -1, 0, 0, 0, 1, 2])
        attrs["output_shape"] = [max(1, f + draw(deltas)) for f in full]
    elif auto_pad == "NOTSET":
        begin = [draw(st.integers(0, min(2, f - 1))) for f in full]
        end = [draw(st.integers(0, min(2, f - 1 - b))) for f, b in zip(full, begin)]
        attrs["pads"] = begin + end
    if draw(st.booleans()):
        attrs["kernel_shape"] = kernel
    values = draw(st.sampled_from(["integer", "normal"]))
    dtype = draw(st.sampled_from(dtypes))
    return make_case("onnx_conv_transpose", [batch, group * c_in] + sizes,
                     [group * c_in, c_out] + kernel, dtype=dtype, values=values,
                     seed=draw(st.integers(0, 2**16)), bias=draw(st.booleans()), **attrs)


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


def onnxruntime_clamped_output(case: rt.Case) -> np.ndarray:
    """What onnxruntime computes for :func:`onnxruntime_pads_at_end` cases (in float32,
    rounded once to the element type, as onnxruntime does)."""
    plan = case.plan()
    natural = [min(y, a.full_size + p)
               for y, a, p in zip(case.kwargs["output_shape"], plan.axes, plan.output_padding)]
    arrays = [a.astype(np.float32) for a in case.arrays()]
    inner = rt.with_arrays(
        rt.make_case(case.op, case.data_shape, case.filter_shape, "float32", case.values,
                     case.seed, **{**case.kwargs, "output_shape": natural}), *arrays[:2])
    out = np.zeros(plan.output_shape, np.float32)
    out[tuple(slice(0, n) for n in inner.plan().output_shape)] = inner.compute()
    if case.bias:
        out += arrays[2].reshape((-1,) + (1,) * plan.spatial_rank)
    return out.astype(case.dtype)


def check_onnxruntime(case: rt.Case, result: rt.PeerResult) -> None:
    rejection = onnxruntime_rejects(case)
    if rejection:
        assert result.error is not None and rejection in result.error, (
            f"onnxruntime did not refuse with {rejection!r}: {result.error}\n  {case.reproducer()}")
        record("onnx_conv_transpose vs onnxruntime: excluded, refused (D5)", case)
        return
    assert result.error is None, f"onnxruntime failed: {result.error}\n  {case.reproducer()}"
    if onnxruntime_pads_at_end(case):
        rt.assert_close(case, result.output, onnxruntime_clamped_output(case),
                        label="onnxruntime clamped output_shape")
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
    # about a fifth of the cases land in a documented onnxruntime divergence: draw more
    # so that at least peer_examples are compared for equality
    rt.run_batched(onnx_cases(), peer_examples * 4 // 3, rt.onnxruntime_compute,
                   check_onnxruntime)
