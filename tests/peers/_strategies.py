"""Hypothesis strategies for the differential tests: small random configurations.

Kept apart from the test modules so that importing them never needs a runtime.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ._runtimes import make_case

OPENVINO_AUTO_PADS = ["explicit", "same_upper", "same_lower", "valid"]
# float32 dominates; the other element types the CPU plugin computes (docs/semantics.md
# D8: it computes integer and float64 models in float32, so values stay small and exact).
# int8 is left out: its deconvolution returns garbage and can crash the process (D14).
OPENVINO_DTYPES = (["float32"] * 6 + ["float16"] * 2
                   + ["float64", "int32", "int64", "int16", "uint8", "uint16", "uint32"])


@st.composite
def openvino_cases(draw, op: str):
    """A small random configuration of an OpenVINO op, valid for the spec."""
    rank = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3)) if op == "group_convolution_backprop_data" else 1
    c_in, c_out, batch = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    big = 4 if rank < 3 else 3
    sizes = draw(st.lists(st.integers(1, big), min_size=rank, max_size=rank))
    kernel = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dilations = draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    output_padding = [draw(st.integers(0, max(s - 1, 0) if draw(st.booleans()) else 2))
                      for s in strides]
    auto_pad = draw(st.sampled_from(OPENVINO_AUTO_PADS))
    full = [(x - 1) * s + (k - 1) * d + 1 + p
            for x, k, s, d, p in zip(sizes, kernel, strides, dilations, output_padding)]
    with_output_shape = draw(st.booleans())
    if with_output_shape:
        # smaller than, equal to and larger than the natural size F + output_padding
        output_shape = [max(1, f + draw(st.integers(-3, 2))) for f in full]
        pads_begin = draw(st.lists(st.integers(0, 2), min_size=rank, max_size=rank))
        pads_end = draw(st.lists(st.integers(0, 2), min_size=rank, max_size=rank))
    else:
        output_shape = None
        pads_begin = [draw(st.integers(0, min(2, f - 1))) for f in full]
        pads_end = [draw(st.integers(0, min(2, f - 1 - b))) for f, b in zip(full, pads_begin)]
    dtype = draw(st.sampled_from(OPENVINO_DTYPES))
    values = draw(st.sampled_from(["integer", "normal"])) if dtype in ("float32", "float16") \
        else "integer"
    if op == "group_convolution_backprop_data":
        data_shape, filter_shape = [batch, groups * c_in] + sizes, [groups, c_in, c_out] + kernel
    else:
        data_shape, filter_shape = [batch, c_in] + sizes, [c_in, c_out] + kernel
    return make_case(op, data_shape, filter_shape, dtype=dtype, values=values,
                     seed=draw(st.integers(0, 2**16)), output_shape=output_shape,
                     strides=strides, dilations=dilations, pads_begin=pads_begin,
                     pads_end=pads_end, output_padding=output_padding, auto_pad=auto_pad)


ONNX_AUTO_PADS = ["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


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
    auto_pad = draw(st.sampled_from(ONNX_AUTO_PADS))
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


LAYOUTS = ["XIO", "OIX", "IOX", "XOI"]
ONEDNN_AUTO_PADS = ["none", "none", "same_upper", "same_lower", "valid"]


@st.composite
def onednn_cases(draw):
    rank = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    c_in, c_out, batch = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    big = 4 if rank < 3 else 3
    sizes = draw(st.lists(st.integers(1, big), min_size=rank, max_size=rank))
    kernel = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dilations = draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    output_padding = [draw(st.integers(0, s - 1)) for s in strides]  # oneDNN: < stride
    auto_pad = draw(st.sampled_from(ONEDNN_AUTO_PADS))
    full = [(x - 1) * s + (k - 1) * d + 1 + p
            for x, k, s, d, p in zip(sizes, kernel, strides, dilations, output_padding)]
    attrs = dict(strides=strides, dilations=dilations, output_padding=output_padding,
                 groups=groups, auto_pad=auto_pad)
    if draw(st.integers(0, 3)) == 0:
        attrs["output_shape"] = [max(1, f + draw(st.integers(-3, 2))) for f in full]
    if auto_pad == "none" and "output_shape" not in attrs:
        if draw(st.booleans()):  # symmetric: torch's own padding
            pads = [draw(st.integers(0, (f - 1) // 2)) for f in full]
            attrs.update(pads_begin=pads, pads_end=pads)
        else:
            begin = [draw(st.integers(0, min(2, f - 1))) for f in full]
            attrs.update(pads_begin=begin,
                         pads_end=[draw(st.integers(0, min(2, f - 1 - b)))
                                   for f, b in zip(full, begin)])
    layout = draw(st.sampled_from(LAYOUTS))
    attrs["weights_format" if draw(st.booleans()) else "filter_format"] = layout
    data_format = draw(st.sampled_from(["NXC", "NCX"]))
    attrs["data_format"] = data_format
    i, o = groups * c_in, c_out
    filter_shape = {"IOX": [i, o] + kernel, "OIX": [o, i] + kernel,
                    "XIO": kernel + [i, o], "XOI": kernel + [o, i]}[layout]
    data_shape = [batch] + sizes + [i] if data_format == "NXC" else [batch, i] + sizes
    dtype = draw(st.sampled_from(["float32", "float32", "float32", "float64"]))
    return make_case("conv_transpose", data_shape, filter_shape, dtype=dtype,
                     values=draw(st.sampled_from(["integer", "normal"])),
                     seed=draw(st.integers(0, 2**16)), bias=draw(st.booleans()), **attrs)
