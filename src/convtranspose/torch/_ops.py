"""The custom operators (``torch.ops.convtranspose.*``) and the differentiable functions."""

from __future__ import annotations

import inspect
import json
import operator
from typing import Optional

import torch
from torch import Tensor

from .. import vjp
from .._frontends import convolution as _convolution
from .._frontends import frameworks as _frameworks
from .._frontends import specs as _transposed_api
from .._plan import dialects as _dialects

__all__ = [
    "conv_transpose",
    "convolution",
    "convolution_backprop_data",
    "group_convolution",
    "group_convolution_backprop_data",
    "jax_conv_transpose",
    "keras_conv_transpose",
    "onnx_conv_transpose",
    "tensorrt_deconvolution",
    "tf_conv_transpose",
    "tflite_transpose_conv",
    "torch_conv_transpose",
]


def _operands(op: str, data, filter, bias=None) -> dict:
    """The operands under the dialect's own names (:data:`DIALECTS`' record), so that
    every dialect's function (array, shape or gradient) is called the same way, whatever
    its argument order: by keyword.  The bias only where the dialect has one."""
    data_name, filter_name, bias_name = _dialects.DIALECTS[op].operands
    named = {data_name: data, filter_name: filter}
    if bias_name is not None:
        named[bias_name] = bias
    return named


# ---------------------------------------------------------------------------
# Attributes: one JSON string per layer, so that a custom op's schema stays fixed


def _plain(value):
    """An attribute as JSON: ints (any integer type) and sequences of them, strings, None."""
    if value is None or isinstance(value, (str, bool)):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return [_plain(item) for item in value]


@torch.compiler.assume_constant_result
def _encode(attributes: dict) -> str:
    """The attributes (None ones left out) as a JSON string; ``torch.compile`` runs this
    once while tracing and keeps the string as a constant of the graph."""
    return json.dumps({name: _plain(value) for name, value in attributes.items()
                       if value is not None}, sort_keys=True)


def library_arguments(attributes: dict) -> dict:
    """The attributes as the custom operators hand them to the array function: encoded
    and decoded (None ones left out, integers and sequences of them as JSON's)."""
    return json.loads(_encode(attributes))


def _checked(op: str, data, filter, bias, attributes: dict) -> str:
    """The encoded attributes, after the dialect's own checks on the shapes when running
    eagerly (a bad attribute fails at the call, with the library's message); while
    ``torch.compile`` traces, the shape functions below make the same checks."""
    if not torch.compiler.is_compiling():
        _plan_of(op, tuple(data.shape), tuple(filter.shape), _shape(bias),
                 {name: value for name, value in attributes.items() if value is not None})
    return _encode(attributes)


def _plan_of(op, data_shape, filter_shape, bias_shape, attributes):
    return _dialects.DIALECTS[op].rule(**_operands(op, data_shape, filter_shape, bias_shape),
                                       **attributes)


def _library(op: str):
    for module in (_convolution, _transposed_api, _frameworks):
        if op in module.__all__:
            return getattr(module, op)
    raise ValueError(f"no array function {op!r}")


# ---------------------------------------------------------------------------
# The custom operators


@torch.library.custom_op("convtranspose::transposed", mutates_args=())
def _transposed(data: Tensor, filter: Tensor, bias: Optional[Tensor], op: str,
                attributes: str) -> Tensor:
    function, kwargs = _library(op), json.loads(attributes)
    return function(**_operands(op, data, filter, bias), **kwargs).contiguous()


@_transposed.register_fake
def _(data, filter, bias, op, attributes):
    plan = _plan_of(op, tuple(data.shape), tuple(filter.shape),
                    None if bias is None else tuple(bias.shape), json.loads(attributes))
    return data.new_empty(plan.output_shape)


@torch.library.custom_op("convtranspose::transposed_backward", mutates_args=())
def _transposed_backward(data: Tensor, filter: Tensor, grad: Tensor, bias: Optional[Tensor],
                         op: str, attributes: str) -> list[Tensor]:
    function, kwargs = getattr(vjp, op), json.loads(attributes)
    grads = function(**_operands(op, data, filter, bias), grad_output=grad, **kwargs)
    return [g.contiguous() for g in grads if g is not None]


@_transposed_backward.register_fake
def _(data, filter, grad, bias, op, attributes):
    shapes = [data, filter] + ([] if bias is None else [bias])
    return [torch.empty_like(t, memory_format=torch.contiguous_format) for t in shapes]


def _save_transposed(ctx, inputs, output):
    data, filter, bias, op, attributes = inputs
    ctx.save_for_backward(data, filter, bias)
    ctx.op, ctx.attributes = op, attributes


def _transposed_grad(ctx, grad):
    data, filter, bias = ctx.saved_tensors
    grads = _transposed_backward(data, filter, grad.contiguous(), bias, ctx.op, ctx.attributes)
    return grads[0], grads[1], grads[2] if bias is not None else None, None, None


_transposed.register_autograd(_transposed_grad, setup_context=_save_transposed)


@torch.library.custom_op("convtranspose::convolution", mutates_args=())
def _forward_convolution(data: Tensor, filter: Tensor, op: str, attributes: str) -> Tensor:
    return _library(op)(data, filter, **json.loads(attributes)).contiguous()


@_forward_convolution.register_fake
def _(data, filter, op, attributes):
    plan = _plan_of(op, tuple(data.shape), tuple(filter.shape), None, json.loads(attributes))
    return data.new_empty(plan.output_shape)


@torch.library.custom_op("convtranspose::convolution_backward", mutates_args=())
def _convolution_backward(data: Tensor, filter: Tensor, grad: Tensor, op: str, attributes: str,
                          needs: list[bool]) -> list[Tensor]:
    """A convolution's gradients, :func:`convtranspose.vjp.convolution_gradients`' (the
    one formula of :func:`convtranspose.vjp.convolution`); a gradient autograd does not
    need is not computed, and zeros stand in its place."""
    plan = _plan_of(op, tuple(data.shape), tuple(filter.shape), None, json.loads(attributes))
    grad_data, grad_filter = vjp.convolution_gradients(plan, data, filter, grad, needs)
    return [(torch.zeros_like(data) if grad_data is None else grad_data).contiguous(),
            (torch.zeros_like(filter) if grad_filter is None else grad_filter).contiguous()]


@_convolution_backward.register_fake
def _(data, filter, grad, op, attributes, needs):
    return [torch.empty_like(data, memory_format=torch.contiguous_format),
            torch.empty_like(filter, memory_format=torch.contiguous_format)]


def _save_convolution(ctx, inputs, output):
    data, filter, op, attributes = inputs
    ctx.save_for_backward(data, filter)
    ctx.op, ctx.attributes = op, attributes


def _convolution_grad(ctx, grad):
    data, filter = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:2]]
    grad_data, grad_filter = _convolution_backward(data, filter, grad.contiguous(), ctx.op,
                                                   ctx.attributes, needs)
    return (grad_data if needs[0] else None), (grad_filter if needs[1] else None), None, None


_forward_convolution.register_autograd(_convolution_grad, setup_context=_save_convolution)


# ---------------------------------------------------------------------------
# The functions


def _shape(tensor):
    return None if tensor is None else tuple(tensor.shape)


def convolution_backprop_data(data: Tensor, filter: Tensor, output_shape=None, *, strides=None,
                              pads_begin=None, pads_end=None, dilations=None,
                              auto_pad="explicit", output_padding=None) -> Tensor:
    """OpenVINO ConvolutionBackpropData-1 on tensors, differentiable.

    Arguments and result as :func:`convtranspose.convolution_backprop_data` (no ``out``).

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> data = torch.tensor([[[1.0, 2.0, 3.0]]], requires_grad=True)
    >>> y = ctt.convolution_backprop_data(data, torch.tensor([[[1.0, 10.0, 100.0]]]), strides=2)
    >>> y.detach()
    tensor([[[  1.,  10., 102.,  20., 203.,  30., 300.]]])
    >>> y.sum().backward()
    >>> data.grad
    tensor([[[111., 111., 111.]]])
    """
    attributes = dict(output_shape=output_shape, strides=strides, pads_begin=pads_begin,
                      pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
                      output_padding=output_padding)
    encoded = _checked("convolution_backprop_data", data, filter, None, attributes)
    return _transposed(data, filter, None, "convolution_backprop_data", encoded)


def group_convolution_backprop_data(data: Tensor, filter: Tensor, output_shape=None, *,
                                    strides=None, pads_begin=None, pads_end=None,
                                    dilations=None, auto_pad="explicit",
                                    output_padding=None) -> Tensor:
    """OpenVINO GroupConvolutionBackpropData-1 on tensors, differentiable.

    Arguments and result as :func:`convtranspose.group_convolution_backprop_data`.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> ctt.group_convolution_backprop_data(torch.ones(1, 4, 5, 5), torch.ones(2, 2, 3, 3, 3),
    ...                                     strides=2, pads_begin=1, pads_end=1).shape
    torch.Size([1, 6, 9, 9])
    """
    attributes = dict(output_shape=output_shape, strides=strides, pads_begin=pads_begin,
                      pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
                      output_padding=output_padding)
    encoded = _checked("group_convolution_backprop_data", data, filter, None, attributes)
    return _transposed(data, filter, None, "group_convolution_backprop_data", encoded)


def conv_transpose(input: Tensor, filter: Tensor, bias: Optional[Tensor] = None, *,
                   strides=None, pads_begin=None, pads_end=None, dilations=None,
                   auto_pad="none", output_padding=None, groups=1, data_format="NXC",
                   filter_format="XIO", weights_format=None, output_shape=None) -> Tensor:
    """oneDNN Graph ConvTranspose-1 on tensors, differentiable.

    Arguments and result as :func:`convtranspose.conv_transpose`.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> ctt.conv_transpose(torch.ones(1, 4, 4, 8), torch.ones(3, 3, 8, 2), strides=2,
    ...                    auto_pad="same_upper").shape
    torch.Size([1, 8, 8, 2])
    """
    attributes = dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                      dilations=dilations, auto_pad=auto_pad, output_padding=output_padding,
                      groups=groups, data_format=data_format, filter_format=filter_format,
                      weights_format=weights_format, output_shape=output_shape)
    encoded = _checked("conv_transpose", input, filter, bias, attributes)
    return _transposed(input, filter, bias, "conv_transpose", encoded)


def onnx_conv_transpose(X: Tensor, W: Tensor, B: Optional[Tensor] = None, *, auto_pad="NOTSET",
                        dilations=None, group=1, kernel_shape=None, output_padding=None,
                        output_shape=None, pads=None, strides=None) -> Tensor:
    """ONNX ConvTranspose on tensors, differentiable.

    Arguments and result as :func:`convtranspose.onnx_conv_transpose`.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> ctt.onnx_conv_transpose(torch.ones(1, 1, 3, 3), torch.ones(1, 2, 3, 3), strides=[3, 2],
    ...                         output_shape=[10, 8]).shape
    torch.Size([1, 2, 10, 8])
    """
    attributes = dict(auto_pad=auto_pad, dilations=dilations, group=group,
                      kernel_shape=kernel_shape, output_padding=output_padding,
                      output_shape=output_shape, pads=pads, strides=strides)
    encoded = _checked("onnx_conv_transpose", X, W, B, attributes)
    return _transposed(X, W, B, "onnx_conv_transpose", encoded)


def convolution(data: Tensor, filter: Tensor, *, strides=None, pads_begin=None, pads_end=None,
                dilations=None, auto_pad="explicit") -> Tensor:
    """OpenVINO Convolution-1 on tensors, differentiable.

    Arguments and result as :func:`convtranspose.convolution`.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> ctt.convolution(torch.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]),
    ...                 torch.tensor([[[1.0, 10.0, 100.0]]]))
    tensor([[[321., 432., 543.]]])
    """
    attributes = dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                      dilations=dilations, auto_pad=auto_pad)
    encoded = _checked("convolution", data, filter, None, attributes)
    return _forward_convolution(data, filter, "convolution", encoded)


def group_convolution(data: Tensor, filter: Tensor, *, strides=None, pads_begin=None,
                      pads_end=None, dilations=None, auto_pad="explicit") -> Tensor:
    """OpenVINO GroupConvolution-1 on tensors, differentiable.

    Arguments and result as :func:`convtranspose.group_convolution`.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> ctt.group_convolution(torch.ones(1, 4, 5, 5), torch.ones(4, 1, 1, 3, 3)).shape
    torch.Size([1, 4, 3, 3])
    """
    attributes = dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                      dilations=dilations, auto_pad=auto_pad)
    encoded = _checked("group_convolution", data, filter, None, attributes)
    return _forward_convolution(data, filter, "group_convolution", encoded)


# ---------------------------------------------------------------------------
# The frameworks' dialects: one builder, driven by the record of each dialect

#: Per dialect, the docstring's example (shapes from the dialect's documented rule).
_EXAMPLES = {
    "torch_conv_transpose": """\
    >>> x = torch.tensor([[[1.0, 2.0, 3.0]]], requires_grad=True)
    >>> y = ctt.torch_conv_transpose(x, torch.tensor([[[1.0, 10.0, 100.0]]]), stride=2,
    ...                              padding=1, output_padding=1)
    >>> y.detach()
    tensor([[[ 10., 102.,  20., 203.,  30., 300.]]])
    >>> y.sum().backward()
    >>> x.grad
    tensor([[[110., 111., 111.]]])""",
    "tensorrt_deconvolution": """\
    >>> ctt.tensorrt_deconvolution(torch.ones(1, 4, 5, 5), torch.ones(4, 2, 3, 3),
    ...                            stride_nd=2, padding_mode="SAME_UPPER").shape
    torch.Size([1, 2, 10, 10])""",
    "tf_conv_transpose": """\
    >>> ctt.tf_conv_transpose(torch.ones(1, 5, 5, 4), torch.ones(3, 3, 2, 4),
    ...                       [1, 10, 10, 2], 2).shape
    torch.Size([1, 10, 10, 2])""",
    "keras_conv_transpose": """\
    >>> ctt.keras_conv_transpose(torch.ones(1, 5, 5, 4), torch.ones(3, 3, 2, 4),
    ...                          torch.zeros(2), strides=2, padding="same").shape
    torch.Size([1, 10, 10, 2])""",
    "tflite_transpose_conv": """\
    >>> ctt.tflite_transpose_conv([1, 10, 10, 2], torch.ones(2, 3, 3, 4),
    ...                           torch.ones(1, 5, 5, 4), stride_h=2, stride_w=2).shape
    torch.Size([1, 10, 10, 2])""",
    "jax_conv_transpose": """\
    >>> ctt.jax_conv_transpose(torch.ones(1, 5, 5, 4), torch.ones(3, 3, 4, 2), (2, 2),
    ...                        "SAME").shape
    torch.Size([1, 10, 10, 2])""",
}

_DOCSTRING = """{owner} on tensors, differentiable.

Arguments and result as :func:`convtranspose.{name}` (no ``out``); the gradients of
{operands} are :func:`convtranspose.vjp.{name}`'s.

Examples
--------
>>> import torch, convtranspose.torch as ctt
{example}
"""


def _framework_function(name: str):
    """The differentiable function of the frameworks' dialect ``name``: the array
    function's parameters (``out`` left out), computed by the custom operator with the
    dialect's own argument names."""
    record = _dialects.DIALECTS[name]
    data_name, filter_name, bias_name = record.operands
    parameters = [p for p in inspect.signature(getattr(_frameworks, name)).parameters.values()
                  if p.name != "out"]
    signature = inspect.Signature(parameters, return_annotation="Tensor")

    def function(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        attributes = dict(bound.arguments)
        data, filter = attributes.pop(data_name), attributes.pop(filter_name)
        bias = None if bias_name is None else attributes.pop(bias_name)
        encoded = _checked(name, data, filter, bias, attributes)
        return _transposed(data, filter, bias, name, encoded)

    function.__name__ = function.__qualname__ = name
    function.__signature__ = signature  # type: ignore[attr-defined]
    operands = ", ".join(f"``{n}``" for n in record.operands if n)
    function.__doc__ = _DOCSTRING.format(owner=record.owner, name=name, operands=operands,
                                         example=inspect.cleandoc("\n" + _EXAMPLES[name]))
    return function


torch_conv_transpose = _framework_function("torch_conv_transpose")
tensorrt_deconvolution = _framework_function("tensorrt_deconvolution")
tf_conv_transpose = _framework_function("tf_conv_transpose")
keras_conv_transpose = _framework_function("keras_conv_transpose")
tflite_transpose_conv = _framework_function("tflite_transpose_conv")
jax_conv_transpose = _framework_function("jax_conv_transpose")
