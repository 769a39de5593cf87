"""Per dialect: the oracle's case builder, the random-configuration strategy of the peer
tests, and which dialects take a bias (shared by the gradient and array-library tests)."""

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
