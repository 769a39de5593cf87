"""The 11 ``test_convtranspose*`` ONNX backend node cases, generated in the session.

The onnx wheel ships the generator (``onnx/backend/test/case/node/convtranspose.py``)
but not the data files; each ``export*`` function hands ``(node, inputs, outputs,
name)`` to ``onnx.backend.test.case.node.expect``, which we capture instead.
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

from . import _runtimes as rt

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers

EXPECTED_NAMES = {
    "test_convtranspose", "test_convtranspose_1d", "test_convtranspose_3d",
    "test_convtranspose_output_shape", "test_convtranspose_pad", "test_convtranspose_kernel_shape",
    "test_convtranspose_pads", "test_convtranspose_dilations", "test_convtranspose_autopad_same",
    "test_convtranspose_group_2", "test_convtranspose_group_2_image_3",
}


def generate_cases() -> dict:
    """``{name: (node, inputs, outputs)}`` from the wheel's generator."""
    from onnx.backend.test.case.node import convtranspose

    captured = {}

    def expect(node, inputs, outputs, name, **kwargs):
        captured[name] = (node, inputs, outputs)

    original = convtranspose.expect
    convtranspose.expect = expect
    try:
        for attribute in dir(convtranspose.ConvTranspose):
            if attribute.startswith("export"):
                getattr(convtranspose.ConvTranspose, attribute)()
    finally:
        convtranspose.expect = original
    return captured


CASES = generate_cases()


def test_the_generator_gives_the_eleven_cases():
    assert set(CASES) == EXPECTED_NAMES


def _attributes(node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_node_case(name):
    node, inputs, outputs = CASES[name]
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in _attributes(node).items()}
    result = ct.onnx_conv_transpose(*inputs, **attrs)
    assert result.dtype == outputs[0].dtype
    np.testing.assert_allclose(result, outputs[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_node_case_on_onnxruntime(name):
    """The same expected outputs from onnxruntime: the cases are fair to both."""
    pytest.importorskip("onnxruntime",
                        reason="onnxruntime is not installed (pip install '.[test]')")
    node, inputs, outputs = CASES[name]
    graph = onnx.helper.make_graph(
        [node], name,
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape)
         for n, a in zip(node.input, inputs)],
        [onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, None)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 22)])
    model.ir_version = 10
    peer = rt.onnxruntime_run(model, dict(zip(node.input, inputs)))
    np.testing.assert_allclose(peer, outputs[0], rtol=1e-6, atol=1e-6)
