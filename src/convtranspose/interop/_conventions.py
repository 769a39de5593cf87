"""Convention-sensitive layers: attributes whose meaning depends on which framework or
which edition of a specification reads them.  ``ir check`` and ``onnx check`` print one
line per finding; none of them is an error of the model."""

from __future__ import annotations

from .._errors import ConvTransposeError

__all__ = ["onnx_conventions", "openvino_conventions"]


def _derived_total(plan, axis: int) -> int:
    """``F + output_padding - Y``: the total pad a derived-pads rule split on ``axis``."""
    a = plan.axes[axis]
    return a.full_size + plan.output_padding[axis] - a.output_size


def _common(plan) -> list[str]:
    notes = []
    for i, (op_, s, d) in enumerate(zip(plan.output_padding, plan.strides, plan.dilations)):
        if op_ >= s:
            refused_by = "oneDNN" + ("" if op_ < d else " and PyTorch")
            notes.append(
                f"output_padding[{i}] = {op_} >= strides[{i}] = {s}: {refused_by} refuse it"
                f" (the extra outputs hold only zeros and the bias)")
    negative = [i for i, (b, e) in enumerate(zip(plan.pads_begin, plan.pads_end))
                if b < 0 or e < 0]
    if negative:
        notes.append(
            f"negative pads {list(plan.pads_begin)}/{list(plan.pads_end)} (axes {negative}):"
            f" the output reaches outside the full result; onnxruntime refuses or clamps"
            f" them, PyTorch cannot express them")
    return notes


def onnx_conventions(plan, attributes: dict) -> list[str]:
    """Findings for an ONNX ConvTranspose's plan and its attributes."""
    notes = []
    derived = attributes.get("output_shape") is not None or plan.auto_pad in (
        "same_upper", "same_lower")
    odd = [i for i in range(plan.spatial_rank) if _derived_total(plan, i) % 2]
    if derived and odd:
        from .. import shapes

        try:
            old = shapes.onnx_conv_transpose(plan.data_shape, plan.filter_shape,
                                             pads_rule="pre-2021", **attributes)
            old_pads = f"{list(old.pads_begin)}/{list(old.pads_end)}"
        except ConvTransposeError:  # the note stays useful without the numbers
            old_pads = "the other split"
        mode = plan.auto_pad.upper() if plan.auto_pad != "notset" else "NOTSET with output_shape"
        notes.append(
            f"{mode} with an odd total pad on axes {odd}: pads {list(plan.pads_begin)}/"
            f"{list(plan.pads_end)} by the ConvTranspose text since 2021, {old_pads} by the"
            f" opset-11 text before it (and onnxruntime before 1.13); pads_rule='pre-2021'"
            f" computes the latter")
    return notes + _common(plan)


def openvino_conventions(plan, output_shape) -> list[str]:
    """Findings for an OpenVINO (Group)ConvolutionBackpropData's plan."""
    notes = []
    if output_shape is None and plan.auto_pad in ("same_upper", "same_lower"):
        notes.append(
            f"auto_pad={plan.auto_pad} without output_shape acts as valid in OpenVINO (pads 0,"
            f" output {list(plan.output_size)}); ONNX's and oneDNN's SAME would pad to about"
            f" input * stride")
    if output_shape is not None and plan.auto_pad == "same_upper" and any(
            (plan.pads_begin[i] + plan.pads_end[i]) % 2 for i in range(plan.spatial_rank)):
        notes.append("same_upper with an odd total pad: OpenVINO puts the odd pad at the"
                     " beginning, ONNX and oneDNN at the end")
    return notes + _common(plan)
