"""How each implementation is called: this library as a user calls it, and the peer
runtimes (torch, OpenVINO, onnxruntime) set up as their own documentation advises."""

from __future__ import annotations

import numpy as np

from .suite import THREADS, Layer

#: Our timed calls write into one output array (``out=``) when it has at least this
#: many bytes: a new output of tens of MB costs fresh pages (5-16 ms for HiFi-GAN's
#: 64 MB), while a small one comes from memory NumPy's allocator just freed, cheaper
#: than checking ``out`` (the tiny layer: 0.8 us of 9 in a loop).
REUSE_MIN_BYTES = 1 << 20


def run_ours(layer: Layer, inputs, reuse_output: bool = False, library=None,
             prepared: bool = False):
    """Our runner; with ``reuse_output`` every call writes into one output array
    (``out=``, from :data:`REUSE_MIN_BYTES`), as OpenVINO's request writes into its
    output tensor.  ``library``: another build of this package to call (A/B runs).
    ``prepared``: the calls go through a prepared layer (``ct.prepare``) made here,
    outside the timing, as the peers' compiled models and sessions are."""
    import convtranspose

    ct = convtranspose if library is None else library

    data, weights = inputs["data"], inputs["weights"]
    rank = layer.rank
    if layer.layout == "NCX":
        function, filter_name, filter = ct.onnx_conv_transpose, "W", weights
        arguments = dict(group=layer.groups, strides=[layer.stride] * rank,
                         pads=[layer.pad] * (2 * rank), dilations=[layer.dilation] * rank,
                         output_padding=[layer.output_padding] * rank)

        def to_ncx(out):
            return np.asarray(out, np.float32)
    else:
        # Channels-last: NXC data, XIO filter (oneDNN's defaults), prepared outside the timing.
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
        function, filter_name = ct.conv_transpose, "filter"
        filter = np.ascontiguousarray(_iox_to_xio(weights, layer.groups))
        arguments = dict(strides=[layer.stride] * rank, pads_begin=[layer.pad] * rank,
                         pads_end=[layer.pad] * rank, dilations=[layer.dilation] * rank,
                         output_padding=[layer.output_padding] * rank, groups=layer.groups,
                         data_format="NXC", filter_format="XIO")

        def to_ncx(out):
            return np.moveaxis(np.asarray(out, np.float32), -1, 1)
    if prepared:
        # By name: another build loaded beside this one (A/B runs) knows its own
        # functions by identity only where its modules import each other by that name.
        bound = ct.prepare(function.__name__, **{filter_name: filter}, **arguments)

        def call(**out):
            return bound(data, **out)
    else:
        def call(**out):
            return function(data, filter, **arguments, **out)
    output = call() if reuse_output else None
    if output is None or output.nbytes < REUSE_MIN_BYTES:
        return call, to_ncx
    return lambda: call(out=output), to_ncx


def _iox_to_xio(weights: np.ndarray, groups: int) -> np.ndarray:
    """(I, O/g, K...) -> (K..., I, O/g): oneDNN's XIO, I counting every input channel."""
    rank = weights.ndim - 2
    return weights.transpose(tuple(range(2, 2 + rank)) + (0, 1))


def _torch(layer: Layer, inputs):
    import torch

    torch.set_num_threads(THREADS)
    dtype = {"float32": torch.float32, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[layer.dtype]
    data = torch.from_numpy(inputs["data"].astype(np.float32)).to(dtype)
    weights = torch.from_numpy(inputs["weights"].astype(np.float32)).to(dtype)
    function = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
                3: torch.nn.functional.conv_transpose3d}[layer.rank]
    if layer.layout == "NXC":
        if layer.rank == 1:
            data = data.permute(0, 2, 1).contiguous().permute(0, 2, 1)
        else:
            fmt = torch.channels_last if layer.rank == 2 else torch.channels_last_3d
            data = data.contiguous(memory_format=fmt)
            weights = weights.contiguous(memory_format=fmt)
    kwargs = dict(stride=layer.stride, padding=layer.pad, output_padding=layer.output_padding,
                  groups=layer.groups, dilation=layer.dilation)

    def run():
        with torch.inference_mode():
            return function(data, weights, **kwargs)
    return run, lambda out: out.float().contiguous().numpy()


def _openvino(layer: Layer, inputs):
    import openvino as ov
    from openvino import opset1
    from openvino.utils.node_factory import NodeFactory

    if layer.dtype == "bfloat16":
        raise Unsupported("bfloat16 inputs are not accepted by the Python API")
    data, weights = inputs["data"], inputs["weights"]
    rank, groups = layer.rank, layer.groups
    element = {"float32": ov.Type.f32, "float16": ov.Type.f16}[layer.dtype]
    shape = data.shape if layer.layout == "NCX" else (data.shape[0],) + data.shape[2:] + data.shape[1:2]
    parameter = opset1.parameter(list(shape), element)
    node = parameter
    if layer.layout == "NXC":
        node = opset1.transpose(node, opset1.constant(np.array((0, rank + 1) + tuple(range(1, rank + 1)), np.int64)))
    attrs = {"strides": [layer.stride] * rank, "dilations": [layer.dilation] * rank,
             "pads_begin": [layer.pad] * rank, "pads_end": [layer.pad] * rank,
             "output_padding": [layer.output_padding] * rank, "auto_pad": "explicit"}
    if groups == 1:
        filter_node = opset1.constant(weights)
        conv = NodeFactory("opset1").create("ConvolutionBackpropData", [node, filter_node], attrs)
    else:
        ci, co = weights.shape[0] // groups, weights.shape[1]
        filter_node = opset1.constant(weights.reshape((groups, ci, co) + weights.shape[2:]))
        conv = NodeFactory("opset1").create("GroupConvolutionBackpropData", [node, filter_node], attrs)
    node = conv
    if layer.layout == "NXC":
        node = opset1.transpose(node, opset1.constant(np.array((0,) + tuple(range(2, rank + 2)) + (1,), np.int64)))
    model = ov.Model([node], [parameter], "convtranspose_bench")
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                      "INFERENCE_NUM_THREADS": str(THREADS)})
    request = compiled.create_infer_request()
    feed = data if layer.layout == "NCX" else np.ascontiguousarray(np.moveaxis(data, 1, -1))

    def run():
        return request.infer({0: feed}, share_inputs=True, share_outputs=True)[0]

    if layer.layout == "NCX":
        return run, lambda out: np.array(out, np.float32)
    return run, lambda out: np.moveaxis(np.array(out, np.float32), -1, 1)


def _onnxruntime(layer: Layer, inputs):
    from onnx import TensorProto, helper, numpy_helper

    if layer.dtype != "float32":
        raise Unsupported("the CPU provider has ConvTranspose in float32 only")
    data, weights = inputs["data"], inputs["weights"]
    rank = layer.rank
    nodes, x_name = [], "X"
    shape = list(data.shape)
    if layer.layout == "NXC":
        shape = [data.shape[0]] + list(data.shape[2:]) + [data.shape[1]]
        nodes.append(helper.make_node("Transpose", ["X"], ["Xt"], perm=[0, rank + 1] + list(range(1, rank + 1))))
        x_name = "Xt"
    nodes.append(helper.make_node(
        "ConvTranspose", [x_name, "W"], ["Yc"], strides=[layer.stride] * rank,
        pads=[layer.pad] * (2 * rank), dilations=[layer.dilation] * rank, group=layer.groups,
        output_padding=[layer.output_padding] * rank, kernel_shape=[layer.kernel] * rank))
    if layer.layout == "NXC":
        nodes.append(helper.make_node("Transpose", ["Yc"], ["Y"], perm=[0] + list(range(2, rank + 2)) + [1]))
    else:
        nodes[-1].output[0] = "Y"
    graph = helper.make_graph(
        nodes, "bench", [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(weights, "W")])
    session = onnxruntime_session(graph, 22)
    feed = {"X": data if layer.layout == "NCX" else np.ascontiguousarray(np.moveaxis(data, 1, -1))}

    def run():
        return session.run(None, feed)[0]

    if layer.layout == "NCX":
        return run, lambda out: out
    return run, lambda out: np.moveaxis(out, -1, 1)


def onnxruntime_session(graph, opset: int):
    """An onnxruntime CPU session of ``graph`` (a model of IR version 10 at ``opset``) on
    the benchmark's threads, as PEERS.md runs it."""
    import onnxruntime
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


class Unsupported(Exception):
    """The peer cannot run this layer (dtype or layout); the row shows a dash."""


PEERS = {"torch": _torch, "openvino": _openvino, "onnxruntime": _onnxruntime}


def installed_peers(requested: list[str] | None = None) -> list[str]:
    import importlib.util

    names = requested or list(PEERS)
    modules = {"torch": "torch", "openvino": "openvino", "onnxruntime": "onnxruntime"}
    return [name for name in names if importlib.util.find_spec(modules[name]) is not None]
