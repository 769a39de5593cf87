"""``Translation.python()``: a translation as Python code for the target framework.

The code is plain text meant to be copied: NumPy for the layout, filter, crop and bias
steps of the translation, the target framework for the op itself (``torch``,
``tf.nn.conv_transpose``, a Keras ``Conv*DTranspose`` layer, a LiteRT model converted
from TensorFlow, ``jax.lax.conv_transpose``, a one-node ONNX model run by onnxruntime,
a one-node OpenVINO model).  Targets without a Python runtime of their own (oneDNN's
``conv_transpose``, TensorRT's deconvolution) are computed by this library's function of
that dialect.

Variable contract: ``x``, ``w`` (and ``b`` when the layer has a bias) are NumPy arrays
in the source layer's layouts; the code leaves the source layer's output in ``y`` (a
float32 NumPy array).  Every step is computed in float32.
"""

from __future__ import annotations

__all__ = ["python_code"]

#: What computes each target, for the header.
_RUNNERS = {
    "torch_conv_transpose": "PyTorch (torch.nn.functional.conv_transpose{r}d)",
    "tf_conv_transpose": "TensorFlow (tf.nn.conv_transpose)",
    "keras_conv_transpose": "Keras 3 (keras.layers.Conv{r}DTranspose)",
    "tflite_transpose_conv": "LiteRT (TRANSPOSE_CONV, converted by tf.lite.TFLiteConverter)",
    "jax_conv_transpose": "JAX (jax.lax.conv_transpose)",
    "onnx_conv_transpose": "onnxruntime (a one-node ConvTranspose model built by onnx.helper)",
    "convolution_backprop_data": "OpenVINO (opset1 ConvolutionBackpropData on CPU)",
    "group_convolution_backprop_data": "OpenVINO (opset1 GroupConvolutionBackpropData on CPU)",
}

_IMPORTS = {
    "torch_conv_transpose": ["import torch"],
    "tf_conv_transpose": ["import tensorflow as tf"],
    "keras_conv_transpose": ["import keras"],
    "tflite_transpose_conv": ["import tensorflow as tf",
                              "from ai_edge_litert.interpreter import Interpreter"],
    "jax_conv_transpose": ["import jax"],
    "onnx_conv_transpose": ["import onnx", "import onnx.helper",
                            "import onnx.numpy_helper", "import onnxruntime"],
    "convolution_backprop_data": ["import openvino as ov", "from openvino import opset1"],
    "group_convolution_backprop_data": ["import openvino as ov", "from openvino import opset1"],
}


def _literal(value) -> str:
    """``value`` as Python source, tuples of ints as lists."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _tf_undilated(t) -> bool:
    """TensorFlow's default CPU kernels refuse dilations above 1 ("Current CPU
    implementations do not yet support dilation rates larger than 1"), under Keras too:
    the code gives them the kernel dilated with zeros, which computes the same."""
    return t.target in ("tf_conv_transpose", "keras_conv_transpose") and \
        max(t.target_plan.dilations) > 1


def python_code(t) -> str:
    """The translation as Python code computing the source layer's output.

    Parameters
    ----------
    t : convtranspose.Translation
        The translation (its target names the framework the code calls); this module
        reads its fields only, so it does not import the class.

    Returns
    -------
    str
        Code that reads ``x``, ``w`` (and ``b`` for a layer with a bias), NumPy arrays
        in the source's layouts, and leaves the source layer's output in ``y``.
    """
    lines = _header(t)
    lines += ["", "x_t = np.asarray(x, np.float32)"]
    if t.data_axes is not None:
        lines.append(f"x_t = np.transpose(x_t, {tuple(t.data_axes)})  # the target's data layout")
    lines.append("x_t = np.ascontiguousarray(x_t)")
    lines += _filter_lines(t)
    lines.append("b_t = " + ("np.asarray(b, np.float32)" if t.has_bias and not t.bias_after
                             else "None") + "  # the bias the target op adds")
    lines += [""] + _layer_function(t) + [""] + _finish_lines(t)
    return "\n".join(lines) + "\n"


def _header(t) -> list[str]:
    plan, rank = t.source_plan, t.source_plan.spatial_rank
    runner = _RUNNERS.get(t.target, f"convtranspose.{t.target} (this library's model of"
                                    " the dialect)")
    lines = [f"# {t.source} -> {t.target}, computed by {runner.format(r=rank)}",
             "# Inputs: NumPy arrays in the source layer's layouts (converted to float32)",
             f"#   x  data,   shape {plan.data_shape}",
             f"#   w  filter, shape {plan.filter_shape}"]
    if t.has_bias:
        lines.append(f"#   b  bias,   shape ({plan.out_channels},)")
    lines.append(f"# Output: y, the source layer's output, shape {plan.output_shape}, float32")
    lines += [f"# note: {note}" for note in t.notes]
    lines.append("import numpy as np")
    lines += _IMPORTS.get(t.target, ["import convtranspose as ct"])
    return lines


def _filter_lines(t) -> list[str]:
    lines = ["w_t = np.asarray(w, np.float32)"]
    for step, value in t.filter_steps:
        if step == "transpose":
            lines.append(f"w_t = np.transpose(w_t, {tuple(value)})")
        elif step == "reshape":
            lines.append(f"w_t = w_t.reshape({tuple(value)})")
        elif step == "flip":
            lines.append(f"w_t = np.flip(w_t, {tuple(value)})  # a correlation kernel")
        elif step == "dilate":
            lines += _dilate_lines(tuple(value), "the dilation the target cannot take (see the note)")
        else:
            lines.append(f"# layer g of the {value[0]} target layers takes w_t[g]")
    if _tf_undilated(t):
        rank, lead = t.target_plan.spatial_rank, int(t.split_groups > 1)
        factors = (1,) * lead + tuple(t.target_plan.dilations) + (1, 1)
        lines += _dilate_lines(factors, "TensorFlow's default CPU kernels take no dilation")
        assert len(factors) == lead + rank + 2
    lines.append("w_t = np.ascontiguousarray(w_t)")
    return lines


def _dilate_lines(factors: tuple, why: str) -> list[str]:
    return [f"# {why}: the kernel dilated with zeros (d - 1 between taps), the same result",
            f"factors = {factors}",
            "w_d = np.zeros([(n - 1) * d + 1 for n, d in zip(w_t.shape, factors)], np.float32)",
            "w_d[tuple(slice(None, None, d) for d in factors)] = w_t",
            "w_t = w_d"]


def _layer_function(t) -> list[str]:
    body = _BODIES.get(t.target, _library_body)(t)
    return ["def layer(x_l, w_l, b_l):",
            f'    """One {t.target} layer: data, filter and bias (or None) in its layouts."""'
            ] + ["    " + line for line in body]


def _call_layers(t) -> list[str]:
    if t.split_groups == 1:
        return ["y_t = layer(x_t, w_t, b_t)"]
    (ci, co), axis = (t.target_plan.in_channels, t.target_plan.out_channels), t.channel_axis
    before = ", ".join([":"] * axis)
    return [f"outputs = []  # one layer per group, {ci} data and {co} output channels each",
            f"for g in range({t.split_groups}):",
            f"    x_g = np.ascontiguousarray(x_t[{before}, {ci} * g:{ci} * (g + 1)])",
            f"    b_g = None if b_t is None else b_t[{co} * g:{co} * (g + 1)]",
            "    outputs.append(layer(x_g, np.ascontiguousarray(w_t[g]), b_g))",
            f"y_t = np.concatenate(outputs, axis={axis})"]


def _finish_lines(t) -> list[str]:
    lines = _call_layers(t)
    rank, channels_last = t.target_plan.spatial_rank, t.target_plan.channels_last
    first = 1 if channels_last else 2
    if any(pair != (0, 0) for pair in t.crop):
        if t.target == "keras_conv_transpose":
            lines += _keras_crop(t.crop, rank)
        else:
            widths = [(0, 0)] * (rank + 2)
            slices = [":"] * (rank + 2)
            for i, (begin, end) in enumerate(t.crop):
                widths[first + i] = (max(-begin, 0), max(-end, 0))
                stop = f"-{end}" if end > 0 else ""
                slices[first + i] = f"{max(begin, 0)}:{stop}"
            lines.append("# the source's window of the target's output (negative crop: zeros)")
            if any(w != (0, 0) for w in widths):
                lines.append(f"y_t = np.pad(y_t, {_literal(widths)})")
            lines.append(f"y_t = y_t[{', '.join(slices)}]")
    if t.has_bias and t.bias_after:
        shape = [1] * (rank + 2)
        shape[rank + 1 if channels_last else 1] = -1
        lines.append(f"y_t = y_t + np.asarray(b, np.float32).reshape({tuple(shape)})"
                     "  # the bias, after the target op")
    if t.output_axes is not None:
        lines.append(f"y = np.transpose(y_t, {tuple(t.output_axes)})  # the source's layout")
    else:
        lines.append("y = y_t")
    return lines


def _keras_crop(crop, rank) -> list[str]:
    """Keras layers for the crop (``Cropping{r}D``) and the zero pad (``ZeroPadding{r}D``),
    channels last."""
    cut = tuple((max(b, 0), max(e, 0)) for b, e in crop)
    pad = tuple((max(-b, 0), max(-e, 0)) for b, e in crop)
    lines = []
    for name, amounts in (("Cropping", cut), ("ZeroPadding", pad)):
        if any(pair != (0, 0) for pair in amounts):
            value = amounts[0] if rank == 1 else amounts
            lines.append(f"y_t = np.asarray(keras.layers.{name}{rank}D({value!r})(y_t))")
    return lines


def _torch_body(t) -> list[str]:
    a, rank = t.attributes, t.target_plan.spatial_rank
    return ["result = torch.nn.functional.conv_transpose%dd(" % rank,
            "    torch.from_numpy(x_l), torch.from_numpy(w_l),",
            "    None if b_l is None else torch.from_numpy(b_l),",
            f"    stride={_literal(a['stride'])}, padding={_literal(a['padding'])},"
            f" output_padding={_literal(a['output_padding'])},",
            f"    groups={a['groups']}, dilation={_literal(a['dilation'])})",
            "return result.numpy()"]


def _tf_body(t) -> list[str]:
    a = t.attributes
    dilations = [1] * t.target_plan.spatial_rank if _tf_undilated(t) else a["dilations"]
    return ["result = tf.nn.conv_transpose(",
            f"    x_l, w_l, output_shape={_literal(a['output_shape'])},"
            f" strides={_literal(a['strides'])},",
            f"    padding={_literal(a['padding'])}, data_format={a['data_format']!r},"
            f" dilations={_literal(dilations)})",
            "return result.numpy()"]


def _keras_body(t) -> list[str]:
    a, plan = t.attributes, t.target_plan
    rank = plan.spatial_rank
    kernel = [a_.dilated_kernel_size if _tf_undilated(t) else a_.kernel_size
              for a_ in plan.axes]
    dilation = [1] * rank if _tf_undilated(t) else list(a["dilation_rate"])
    output_padding = None if a["output_padding"] is None else list(a["output_padding"])
    return [f"conv = keras.layers.Conv{rank}DTranspose(",
            f"    filters={plan.out_channels}, kernel_size={kernel},"
            f" strides={_literal(a['strides'])}, padding={a['padding']!r},",
            f"    output_padding={output_padding}, data_format={a['data_format']!r},",
            f"    dilation_rate={dilation}, use_bias=b_l is not None)",
            "conv.build(x_l.shape)",
            "conv.set_weights([w_l] + ([] if b_l is None else [b_l]))  # kernel: (K..., O, I)",
            "return np.asarray(conv(x_l))"]


def _tflite_body(t) -> list[str]:
    a = t.attributes
    strides = [1, a["stride_h"], a["stride_w"], 1]
    return ["# TRANSPOSE_CONV's weights are (O, H, W, I) (w_l); the converter reads them from",
            "# tf.nn.conv2d_transpose's (H, W, O, I) filter",
            "hwoi = tf.constant(np.ascontiguousarray(w_l.transpose(1, 2, 0, 3)))",
            "",
            "@tf.function(input_signature=[tf.TensorSpec(x_l.shape, tf.float32)])",
            "def model(data):",
            f"    out = tf.nn.conv2d_transpose(data, hwoi, {_literal(a['output_shape'])},"
            f" {strides}, {a['padding']!r})",
            "    return out if b_l is None else out + tf.constant(b_l)",
            "",
            "converter = tf.lite.TFLiteConverter.from_concrete_functions(",
            "    [model.get_concrete_function()], model)",
            "interpreter = Interpreter(model_content=converter.convert())",
            "interpreter.allocate_tensors()",
            "interpreter.set_tensor(interpreter.get_input_details()[0]['index'], x_l)",
            "interpreter.invoke()",
            "return interpreter.get_tensor(interpreter.get_output_details()[0]['index']).copy()"]


def _jax_body(t) -> list[str]:
    a = t.attributes
    return ["result = jax.lax.conv_transpose(",
            f"    x_l, w_l, strides={_literal(a['strides'])}, padding={_literal(a['padding'])},",
            f"    rhs_dilation={_literal(a['rhs_dilation'])},"
            f" dimension_numbers={tuple(a['dimension_numbers'])!r},",
            f"    transpose_kernel={a['transpose_kernel']!r})",
            "return np.asarray(result)"]


def _onnx_body(t) -> list[str]:
    attributes = ", ".join(f"{k}={_literal(v)}" for k, v in t.attributes.items())
    return ["inputs = ['X', 'W'] + ([] if b_l is None else ['B'])",
            "weights = [onnx.numpy_helper.from_array(w_l, 'W')] + (",
            "    [] if b_l is None else [onnx.numpy_helper.from_array(b_l, 'B')])",
            f"node = onnx.helper.make_node('ConvTranspose', inputs, ['Y'], {attributes})",
            "graph = onnx.helper.make_graph(",
            "    [node], 'conv_transpose',",
            "    [onnx.helper.make_tensor_value_info('X', onnx.TensorProto.FLOAT, x_l.shape)],",
            "    [onnx.helper.make_tensor_value_info('Y', onnx.TensorProto.FLOAT,"
            f" {_literal(t.target_plan.output_shape)})], weights)",
            "model = onnx.helper.make_model(graph, ir_version=8,",
            "                               opset_imports=[onnx.helper.make_opsetid('', 17)])",
            "onnx.checker.check_model(model)",
            "session = onnxruntime.InferenceSession(model.SerializeToString(),",
            "                                       providers=['CPUExecutionProvider'])",
            "return session.run(None, {'X': x_l})[0]"]


def _openvino_body(t) -> list[str]:
    attributes = ", ".join(f"{k}={_literal(v)}" for k, v in t.attributes.items()
                           if k != "output_shape")
    shape = t.attributes.get("output_shape")
    extra = "" if shape is None else \
        f", output_shape=opset1.constant(np.array({_literal(shape)}, np.int64))"
    op, weights, why = t.target, "w_l", []
    if op == "group_convolution_backprop_data" and t.target_plan.groups == 1:
        # the CPU plugin cannot compile a one-group GroupConvolutionBackpropData with more
        # than one channel ("could not create a primitive descriptor", docs/semantics.md
        # D9); ConvolutionBackpropData with the group's filter is the same op
        op, weights = "convolution_backprop_data", "w_l[0]"
        why = ["# one group: ConvolutionBackpropData on filter[0] (OpenVINO's CPU plugin does"
               " not compile", "# GroupConvolutionBackpropData with one group)"]
    return why + ["data = opset1.parameter(list(x_l.shape), np.float32)",
            f"node = opset1.{op}(data, opset1.constant({weights}), {attributes}{extra})",
            "compiled = ov.Core().compile_model(ov.Model([node], [data]), 'CPU')",
            "return np.asarray(compiled([x_l])[0])"]


def _library_body(t) -> list[str]:
    attributes = ", ".join(f"{k}={_literal(v)}" for k, v in t.attributes.items())
    return [f"return np.asarray(ct.{t.target}(x_l, w_l, b_l, {attributes}), np.float32)"]


_BODIES = {"torch_conv_transpose": _torch_body, "tf_conv_transpose": _tf_body,
           "keras_conv_transpose": _keras_body, "tflite_transpose_conv": _tflite_body,
           "jax_conv_transpose": _jax_body, "onnx_conv_transpose": _onnx_body,
           "convolution_backprop_data": _openvino_body,
           "group_convolution_backprop_data": _openvino_body}
