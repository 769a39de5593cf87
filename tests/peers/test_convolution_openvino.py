"""``ct.convolution`` and ``ct.group_convolution`` against OpenVINO Convolution-1 and
GroupConvolution-1 on the CPU plugin: output shape, the pads OpenVINO resolves, and
the values (small integers in float32: exact), for random configurations of every
auto_pad mode, ranks 1-3, groups (depthwise included), strides and dilations.

All configurations run as independent subgraphs of a few models, since compiling is
what costs time in OpenVINO.
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

from ._runtimes import OPENVINO_CONFIG

ov = pytest.importorskip("openvino", reason="openvino is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers

AUTO_PADS = ["explicit", "explicit", "same_upper", "same_lower", "valid"]


def random_layer(rng):
    rank = int(rng.integers(1, 4))
    groups = int(rng.integers(1, 4))
    depthwise = rng.random() < 0.3
    c_in, c_out = (1, 1) if depthwise else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    strides = [int(s) for s in rng.integers(1, 4, rank)]
    dilations = [int(d) for d in rng.integers(1, 3, rank)]
    pads_begin = [int(p) for p in rng.integers(0, 3, rank)]
    pads_end = [int(p) for p in rng.integers(0, 3, rank)]
    auto_pad = str(rng.choice(AUTO_PADS))
    largest = {1: 9, 2: 6, 3: 4}[rank]
    sizes = [int(max((k - 1) * d + 1, rng.integers(1, largest + 1)))
             for k, d in zip(kernel, dilations)]
    grouped = groups > 1 or rng.random() < 0.3
    data_shape = [int(rng.integers(1, 3)), groups * c_in] + sizes
    filter_shape = ([groups, c_out, c_in] + kernel if grouped
                    else [c_out, c_in] + kernel)
    return dict(grouped=grouped, data_shape=data_shape, filter_shape=filter_shape,
                attrs=dict(strides=strides, dilations=dilations, pads_begin=pads_begin,
                           pads_end=pads_end, auto_pad=auto_pad))


def _node(layer, data, filter_):
    from openvino.utils.node_factory import NodeFactory

    name = "GroupConvolution" if layer["grouped"] else "Convolution"
    return NodeFactory("opset1").create(name, [data.output(0), filter_.output(0)],
                                        dict(layer["attrs"]))


def test_convolution_matches_openvino(peer_examples):
    from openvino import opset1

    rng = np.random.default_rng(20261126)
    layers = [random_layer(rng) for _ in range(max(peer_examples // 4, 20))]
    parameters, nodes, inputs = [], [], []
    for layer in layers:
        data = opset1.parameter(layer["data_shape"], ov.Type.f32)
        filter_ = opset1.parameter(layer["filter_shape"], ov.Type.f32)
        parameters += [data, filter_]
        nodes.append(_node(layer, data, filter_))
        layer["arrays"] = [rng.integers(-3, 4, layer[k]).astype(np.float32)
                           for k in ("data_shape", "filter_shape")]
        inputs += layer["arrays"]
    model = ov.Model([opset1.result(node) for node in nodes], parameters)
    compiled = ov.Core().compile_model(model, "CPU", OPENVINO_CONFIG)
    outputs = compiled.create_infer_request().infer(inputs)
    for index, (layer, node) in enumerate(zip(layers, nodes)):
        function = ct.group_convolution if layer["grouped"] else ct.convolution
        plan_function = ct.shapes.group_convolution if layer["grouped"] else ct.shapes.convolution
        plan = plan_function(layer["data_shape"], layer["filter_shape"], **layer["attrs"])
        expected = outputs[compiled.outputs[index]]
        context = f"{layer['data_shape']} {layer['filter_shape']} {layer['attrs']}"
        assert plan.output_shape == expected.shape, context
        assert plan.pads_begin == tuple(node.get_pads_begin()), context
        assert plan.pads_end == tuple(node.get_pads_end()), context
        np.testing.assert_array_equal(function(*layer["arrays"], **layer["attrs"]), expected,
                                      err_msg=context)
