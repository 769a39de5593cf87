"""Per dialect: the oracle's case builder, the random-configuration strategy of the peer
tests, which dialects take a bias, and random forward-convolution layers (shared by the
gradient and array-library tests)."""

from hypothesis import strategies as st

import oracle
from peers._strategies import onednn_cases, onnx_cases, openvino_cases

ORACLE_CASES = {
    "convolution_backprop_data": oracle.openvino_cbpd_case,
    "group_convolution_backprop_data": oracle.openvino_group_cbpd_case,
    "conv_transpose": oracle.onednn_conv_transpose_case,
    "onnx_conv_transpose": oracle.onnx_conv_transpose_case,
}
STRATEGIES = {
    "convolution_backprop_data": lambda: openvino_cases("convolution_backprop_data"),
    "group_convolution_backprop_data": lambda: openvino_cases("group_convolution_backprop_data"),
    "conv_transpose": onednn_cases,
    "onnx_conv_transpose": onnx_cases,
}
HAS_BIAS = {"conv_transpose", "onnx_conv_transpose"}


@st.composite
def convolution_layers(draw, largest_dilation, largest_sizes, largest_stride, largest_pad):
    """A random OpenVINO Convolution-1 or GroupConvolution-1 layer: ranks 1-3, every
    ``auto_pad``, inputs at least as large as the dilated kernel (up to
    ``largest_sizes[rank]`` per axis), as ``dict(grouped, groups, data_shape,
    filter_shape, seed, attrs)``."""
    rank = draw(st.integers(1, 3))
    lists = lambda lo, hi: draw(st.lists(st.integers(lo, hi), min_size=rank,  # noqa: E731
                                         max_size=rank))
    kernel, dilations = lists(1, 3), lists(1, largest_dilation)
    sizes = [max((k - 1) * d + 1, x)
             for k, d, x in zip(kernel, dilations, lists(1, largest_sizes[rank]))]
    groups = draw(st.integers(1, 3))
    grouped = groups > 1 or draw(st.booleans())
    c_in, c_out = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return dict(grouped=grouped, groups=groups,
                data_shape=[draw(st.integers(1, 2)), groups * c_in] + sizes,
                filter_shape=([groups, c_out, c_in] if grouped else [c_out, c_in]) + kernel,
                seed=draw(st.integers(0, 2**16)),
                attrs=dict(strides=lists(1, largest_stride), dilations=dilations,
                           pads_begin=lists(0, largest_pad), pads_end=lists(0, largest_pad),
                           auto_pad=draw(st.sampled_from(
                               ["explicit", "same_upper", "same_lower", "valid"]))))
