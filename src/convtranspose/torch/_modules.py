"""``nn.Module`` layers: one per dialect function, any spatial rank.

Each layer creates its weight in torch's own layout (``(C_IN, C_OUT/G, K...)`` for a
transposed convolution as ``nn.ConvTranspose{1,2,3}d``, ``(C_OUT, C_IN/G, K...)`` for a
convolution as ``nn.Conv{1,2,3}d``), initialises it exactly as torch does (Kaiming
uniform with ``a = sqrt(5)``, the bias uniform in ``+-1/sqrt(fan_in)``) and stores it in
the dialect's layout: with the same seed a layer starts from the very values of the
torch layer of the same shape.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .._plan.jax import jax_layouts
from .._plan.rules import filter_axes
from . import _ops
from ._prepared import PreparedForward, layer_forward

__all__ = ["ConvTranspose", "Convolution", "ConvolutionBackpropData", "GroupConvolution",
           "GroupConvolutionBackpropData", "JaxConvTranspose", "KerasConvTranspose",
           "OnnxConvTranspose", "TensorrtDeconvolution", "TfConvTranspose",
           "TfliteTransposeConv", "TorchConvTranspose"]


def _kernel(kernel_size, spatial_rank) -> tuple[int, ...]:
    """The kernel shape: an int repeated ``spatial_rank`` times (2 by default), or a
    sequence (whose length is the rank)."""
    if isinstance(kernel_size, int):
        return (kernel_size,) * (2 if spatial_rank is None else spatial_rank)
    kernel = tuple(int(k) for k in kernel_size)
    if spatial_rank is not None and spatial_rank != len(kernel):
        raise ConvTransposeError(
            f"kernel_size {kernel} has {len(kernel)} axes but spatial_rank is {spatial_rank}")
    return kernel


def _divisible(name: str, value: int, groups_name: str, groups: int) -> None:
    if groups < 1 or value % groups:
        raise ConvTransposeError(
            f"{name}={value} must be divisible by {groups_name}={groups} (a positive int)")


class _Layer(nn.Module):
    """A weight made in torch's layout and initialised as torch does (see the module),
    and computed through a prepared layer where no gradient is recorded
    (:meth:`repack`)."""

    #: The dialect the layer computes (its name in ``DIALECTS``).
    dialect = ""
    _ATTRIBUTES: tuple[str, ...] = ()

    def _make(self, torch_shape, bias_size, device, dtype) -> None:
        factory = dict(device=device, dtype=dtype)
        self._torch_shape = tuple(torch_shape)
        shape = self._layout(torch.empty(self._torch_shape, device="meta")).shape
        self.weight = nn.Parameter(torch.empty(shape, **factory))
        self.bias = None if bias_size is None else nn.Parameter(torch.empty(bias_size, **factory))
        self._prepared = PreparedForward()
        self.reset_parameters()

    def _layout(self, weight):
        """A weight in torch's layout, in the dialect's."""
        return weight

    def reset_parameters(self) -> None:
        """Draw the parameters as torch's layer of the same shape draws them."""
        with torch.no_grad():
            weight = torch.empty(self._torch_shape, dtype=self.weight.dtype,
                                 device=self.weight.device)
            nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
            self.weight.copy_(self._layout(weight))
            if self.bias is not None:
                fan_in = weight.shape[1] * math.prod(weight.shape[2:])
                if fan_in:
                    bound = 1 / math.sqrt(fan_in)
                    nn.init.uniform_(self.bias, -bound, bound)

    def repack(self) -> None:
        """Prepare the weights again on the next call.

        A forward call that records no gradient (under ``torch.no_grad()`` or
        ``torch.inference_mode()``, or with nothing requiring a gradient) on CPU runs a
        prepared layer holding a copy of the weights (:func:`convtranspose.prepare`),
        made again whenever torch reports a change: a new weight or bias, an in-place
        operation on it (``optimizer.step()``, ``load_state_dict``, ``w.add_(1)``),
        another storage, shape, dtype or device, or an attribute of the layer set.
        Writes torch does not count, through ``weight.data`` or a NumPy view of the
        weight, are not seen: call this after them.
        """
        self._prepared.clear()

    def _attributes(self) -> dict:
        return {name: getattr(self, name) for name in self._ATTRIBUTES}

    def _computed(self, data, **per_call):
        """The layer's result for ``data`` and the per-call arguments of ``forward``."""
        return layer_forward(self, data, self._attributes(), per_call, self._prepared)

    def _set(self, attributes: dict, defaults: dict) -> None:
        """Each of ``_ATTRIBUTES`` from ``attributes`` (else its default), as an attribute
        of the layer under the spec's name; a TypeError for any other keyword."""
        unknown = sorted(set(attributes) - set(self._ATTRIBUTES))
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected keyword {unknown[0]!r};"
                            f" its attributes are {', '.join(self._ATTRIBUTES)}")
        for name in self._ATTRIBUTES:
            setattr(self, name, attributes.get(name, defaults.get(name)))

    def extra_repr(self) -> str:
        shown = [f"weight={tuple(self.weight.shape)}", f"bias={self.bias is not None}"]
        shown += [f"{name}={value!r}" for name, value in self._attributes().items()
                  if value is not None]
        return ", ".join(shown)


_OPENVINO = ("strides", "pads_begin", "pads_end", "dilations", "auto_pad")


class ConvolutionBackpropData(_Layer):
    """OpenVINO ConvolutionBackpropData-1 as a layer: weight ``[C_IN, C_OUT, K...]``, no bias.

    Parameters
    ----------
    in_channels, out_channels : int
    kernel_size : int or sequence of int
        An int means that size on every axis of a ``spatial_rank``-D layer (default 2).
    strides, pads_begin, pads_end, dilations, auto_pad, output_padding
        As in :func:`convtranspose.convolution_backprop_data`.
    spatial_rank : int, optional
    device, dtype : optional
        Of the weight.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> layer = ctt.ConvolutionBackpropData(8, 4, 4, strides=2, pads_begin=1, pads_end=1)
    >>> layer(torch.ones(1, 8, 5, 5)).shape
    torch.Size([1, 4, 10, 10])
    """

    dialect = "convolution_backprop_data"

    _ATTRIBUTES = _OPENVINO + ("output_padding",)

    def __init__(self, in_channels, out_channels, kernel_size, *, strides=None, pads_begin=None,
                 pads_end=None, dilations=None, auto_pad="explicit", output_padding=None,
                 spatial_rank=None, device=None, dtype=None):
        super().__init__()
        self._build(1, in_channels, out_channels, kernel_size, spatial_rank, device, dtype,
                    dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                         dilations=dilations, auto_pad=auto_pad, output_padding=output_padding))

    def _build(self, groups, in_channels, out_channels, kernel_size, spatial_rank, device, dtype,
               attributes):
        self._set(attributes, {"auto_pad": "explicit"})
        self._make((in_channels, out_channels // groups) + _kernel(kernel_size, spatial_rank),
                   None, device, dtype)

    def forward(self, data, output_shape=None):
        """``data`` ``[N, C_IN, X...]``; ``output_shape`` the spatial output size, or None."""
        return self._computed(data, output_shape=output_shape)


class _Grouped:
    """The grouped OpenVINO layers' construction (``groups`` dividing both channel
    counts) and their weight's ``[G, ...]`` layout, over the ungrouped layer's."""

    def __init__(self, in_channels, out_channels, kernel_size, groups, *, spatial_rank=None,
                 device=None, dtype=None, **attributes):
        _divisible("in_channels", in_channels, "groups", groups)
        _divisible("out_channels", out_channels, "groups", groups)
        _Layer.__init__(self)
        self.groups = groups
        self._build(groups, in_channels, out_channels, kernel_size, spatial_rank, device, dtype,
                    attributes)

    def _layout(self, weight):
        return weight.reshape((self.groups, weight.shape[0] // self.groups) + weight.shape[1:])


class GroupConvolutionBackpropData(_Grouped, ConvolutionBackpropData):
    """OpenVINO GroupConvolutionBackpropData-1 as a layer: weight
    ``[G, C_IN/G, C_OUT/G, K...]``, no bias.

    Parameters as :class:`ConvolutionBackpropData`, plus ``groups`` (``G``), which must
    divide both channel counts.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> layer = ctt.GroupConvolutionBackpropData(8, 8, 3, 8, strides=2)   # depthwise
    >>> layer.weight.shape, layer(torch.ones(1, 8, 4, 4)).shape
    (torch.Size([8, 1, 1, 3, 3]), torch.Size([1, 8, 9, 9]))
    """

    dialect = "group_convolution_backprop_data"



class ConvTranspose(_Layer):
    """oneDNN Graph ConvTranspose-1 as a layer: weight in ``weights_format``, bias
    ``(out_channels,)``.

    Parameters
    ----------
    in_channels, out_channels : int
        ``groups`` must divide both.
    kernel_size : int or sequence of int
        As in :class:`ConvolutionBackpropData`.
    bias : bool, optional
        Default True.
    strides, pads_begin, pads_end, dilations, auto_pad, output_padding, groups
        As in :func:`convtranspose.conv_transpose`.
    data_format, output_shape
        As in :func:`convtranspose.conv_transpose`.
    weights_format : {"XIO", "OIX", "IOX", "XOI"}, optional
        The weight's layout (default XIO), with ``I = in_channels`` and
        ``O = out_channels / groups``.
    spatial_rank, device, dtype : optional

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> layer = ctt.ConvTranspose(8, 2, 3, strides=2, auto_pad="same_upper")   # NXC, XIO
    >>> layer.weight.shape, layer(torch.ones(1, 4, 4, 8)).shape
    (torch.Size([3, 3, 8, 2]), torch.Size([1, 8, 8, 2]))
    """

    dialect = "conv_transpose"

    _ATTRIBUTES = ("strides", "pads_begin", "pads_end", "dilations", "auto_pad",
                   "output_padding", "groups", "data_format", "weights_format", "output_shape")

    def __init__(self, in_channels, out_channels, kernel_size, *, bias=True, strides=None,
                 pads_begin=None, pads_end=None, dilations=None, auto_pad="none",
                 output_padding=None, groups=1, data_format="NXC", weights_format="XIO",
                 output_shape=None, spatial_rank=None, device=None, dtype=None):
        _divisible("in_channels", in_channels, "groups", groups)
        _divisible("out_channels", out_channels, "groups", groups)
        super().__init__()
        self.strides, self.pads_begin, self.pads_end = strides, pads_begin, pads_end
        self.dilations, self.auto_pad, self.output_padding = dilations, auto_pad, output_padding
        self.groups, self.data_format, self.weights_format = groups, data_format, weights_format
        self.output_shape = output_shape
        kernel = _kernel(kernel_size, spatial_rank)
        self._make((in_channels, out_channels // groups) + kernel,
                   out_channels if bias else None, device, dtype)

    def _layout(self, weight):
        rank = weight.ndim - 2
        if not isinstance(self.weights_format, str) or self.weights_format.upper() not in (
                "XIO", "OIX", "IOX", "XOI"):
            raise ConvTransposeError(f"weights_format must be one of 'XIO', 'OIX', 'IOX',"
                                     f" 'XOI', got {self.weights_format!r}")
        i_axis, o_axis, kernel_axes = filter_axes(self.weights_format.upper(), rank)
        source = {i_axis: 0, o_axis: 1}
        source.update({axis: 2 + i for i, axis in enumerate(kernel_axes)})
        return weight.permute(tuple(source[j] for j in range(weight.ndim)))

    def forward(self, input):
        """``input`` in ``data_format``: ``(N, X..., I)`` (NXC) or ``(N, I, X...)``."""
        return self._computed(input)


class OnnxConvTranspose(_Layer):
    """ONNX ConvTranspose as a layer: ``weight`` is W ``(C, M/group, K...)`` (torch's own
    layout), ``bias`` is B ``(M,)``.

    Parameters
    ----------
    in_channels, out_channels : int
        ``C`` and ``M``; ``group`` must divide both.
    kernel_size : int or sequence of int
        As in :class:`ConvolutionBackpropData`.
    bias : bool, optional
        Default True.
    auto_pad, dilations, group, output_padding, output_shape, pads, strides
        As in :func:`convtranspose.onnx_conv_transpose`.
    spatial_rank, device, dtype : optional

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> layer = ctt.OnnxConvTranspose(4, 2, 3, strides=2, pads=[0, 0, 1, 1])  # asymmetric
    >>> layer(torch.ones(1, 4, 5, 5)).shape
    torch.Size([1, 2, 10, 10])
    """

    dialect = "onnx_conv_transpose"

    _ATTRIBUTES = ("auto_pad", "dilations", "group", "output_padding", "output_shape", "pads",
                   "strides")

    def __init__(self, in_channels, out_channels, kernel_size, *, bias=True, auto_pad="NOTSET",
                 dilations=None, group=1, output_padding=None, output_shape=None, pads=None,
                 strides=None, spatial_rank=None, device=None, dtype=None):
        _divisible("in_channels", in_channels, "group", group)
        _divisible("out_channels", out_channels, "group", group)
        super().__init__()
        self.auto_pad, self.dilations, self.group = auto_pad, dilations, group
        self.output_padding, self.output_shape = output_padding, output_shape
        self.pads, self.strides = pads, strides
        kernel = _kernel(kernel_size, spatial_rank)
        self._make((in_channels, out_channels // group) + kernel,
                   out_channels if bias else None, device, dtype)

    def forward(self, X):
        """``X`` ``(N, C, D...)``."""
        return self._computed(X)


class Convolution(_Layer):
    """OpenVINO Convolution-1 as a layer: weight ``[C_OUT, C_IN, K...]`` (torch's own
    layout), no bias.

    Parameters
    ----------
    in_channels, out_channels : int
    kernel_size : int or sequence of int
        As in :class:`ConvolutionBackpropData`.
    strides, pads_begin, pads_end, dilations, auto_pad
        As in :func:`convtranspose.convolution`.
    spatial_rank, device, dtype : optional

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> layer = ctt.Convolution(4, 8, 3, strides=2, auto_pad="same_upper")
    >>> layer(torch.ones(1, 4, 10, 10)).shape
    torch.Size([1, 8, 5, 5])
    """

    dialect = "convolution"

    _ATTRIBUTES = _OPENVINO

    def __init__(self, in_channels, out_channels, kernel_size, *, strides=None, pads_begin=None,
                 pads_end=None, dilations=None, auto_pad="explicit", spatial_rank=None,
                 device=None, dtype=None):
        super().__init__()
        self._build(1, in_channels, out_channels, kernel_size, spatial_rank, device, dtype,
                    dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                         dilations=dilations, auto_pad=auto_pad))

    def _build(self, groups, in_channels, out_channels, kernel_size, spatial_rank, device, dtype,
               attributes):
        self._set(attributes, {"auto_pad": "explicit"})
        self._make((out_channels, in_channels // groups) + _kernel(kernel_size, spatial_rank),
                   None, device, dtype)

    def forward(self, data):
        """``data`` ``[N, C_IN, X...]``."""
        return self._computed(data)


class GroupConvolution(_Grouped, Convolution):
    """OpenVINO GroupConvolution-1 as a layer: weight ``[G, C_OUT/G, C_IN/G, K...]``, no bias.

    Parameters as :class:`Convolution`, plus ``groups`` (``G``), which must divide both
    channel counts.

    Examples
    --------
    >>> import torch, convtranspose.torch as ctt
    >>> layer = ctt.GroupConvolution(8, 8, 3, 8, pads_begin=1, pads_end=1)   # depthwise
    >>> layer.weight.shape, layer(torch.ones(1, 8, 6, 6)).shape
    (torch.Size([8, 1, 1, 3, 3]), torch.Size([1, 8, 6, 6]))
    """

    dialect = "group_convolution"



# ---------------------------------------------------------------------------
# The frameworks' dialects: one builder, driven by the record of each dialect


@dataclass(frozen=True)
class _Weight:
    """How a frameworks' dialect holds its weight: ``layout(attributes, rank)`` gives its
    axes as letters (``I`` in_channels, ``O`` out_channels/groups, ``X`` the kernel axes
    in order), ``shape`` says it in words; ``groups`` is the attribute holding the
    group count (None: the dialect has no groups); ``per_call`` are the arguments the
    layer's ``forward`` takes after the data (the dialect's output size, given per call
    as the frameworks' own layers take it)."""

    layout: Callable[[dict, int], str]
    shape: str
    groups: str | None = None
    per_call: tuple[str, ...] = ()


def _fixed(letters: str) -> Callable[[dict, int], str]:
    return lambda attributes, rank: letters


def _jax_layout(attributes: dict, rank: int) -> str:
    """JAX's kernel spec (``dimension_numbers``, ``transpose_kernel``) as I, O, X letters."""
    return jax_layouts(attributes.get("dimension_numbers"), rank,
                       bool(attributes.get("transpose_kernel")))[1]


#: Per frameworks' dialect, its weight (see :class:`_Weight`).
_WEIGHTS = {
    "torch_conv_transpose": _Weight(_fixed("IOX"), "``(C_IN, C_OUT/groups, K...)``",
                                    groups="groups", per_call=("output_size",)),
    "tensorrt_deconvolution": _Weight(_fixed("IOX"), "``(C_IN, C_OUT/num_groups, K...)``",
                                      groups="num_groups"),
    "tf_conv_transpose": _Weight(_fixed("XOI"), "``(K..., C_OUT, C_IN)``",
                                 per_call=("output_shape",)),
    "keras_conv_transpose": _Weight(_fixed("XOI"), "``(K..., C_OUT, C_IN)``"),
    "tflite_transpose_conv": _Weight(_fixed("OXI"), "``(C_OUT, KH, KW, C_IN)``",
                                     per_call=("output_shape",)),
    "jax_conv_transpose": _Weight(_jax_layout, "in the layout of ``dimension_numbers``'"
                                  " kernel spec (I and O swapped by ``transpose_kernel``)"),
}

#: Per frameworks' dialect, the docstring's example.
_EXAMPLES = {
    "torch_conv_transpose": """\
    >>> layer = ctt.TorchConvTranspose(8, 4, 4, stride=2, padding=1)
    >>> layer.weight.shape, layer(torch.ones(1, 8, 5, 5)).shape
    (torch.Size([8, 4, 4, 4]), torch.Size([1, 4, 10, 10]))""",
    "tensorrt_deconvolution": """\
    >>> layer = ctt.TensorrtDeconvolution(8, 4, 3, stride_nd=2, padding_mode="SAME_UPPER")
    >>> layer.weight.shape, layer(torch.ones(1, 8, 5, 5)).shape
    (torch.Size([8, 4, 3, 3]), torch.Size([1, 4, 10, 10]))""",
    "tf_conv_transpose": """\
    >>> layer = ctt.TfConvTranspose(8, 4, 3, strides=2)
    >>> layer.weight.shape, layer(torch.ones(1, 5, 5, 8), [1, 10, 10, 4]).shape
    (torch.Size([3, 3, 4, 8]), torch.Size([1, 10, 10, 4]))""",
    "keras_conv_transpose": """\
    >>> layer = ctt.KerasConvTranspose(8, 4, 3, strides=2, padding="same")
    >>> layer.weight.shape, layer(torch.ones(1, 5, 5, 8)).shape
    (torch.Size([3, 3, 4, 8]), torch.Size([1, 10, 10, 4]))""",
    "tflite_transpose_conv": """\
    >>> layer = ctt.TfliteTransposeConv(8, 4, 3, stride_h=2, stride_w=2)
    >>> layer.weight.shape, layer(torch.ones(1, 5, 5, 8), [1, 10, 10, 4]).shape
    (torch.Size([4, 3, 3, 8]), torch.Size([1, 10, 10, 4]))""",
    "jax_conv_transpose": """\
    >>> layer = ctt.JaxConvTranspose(8, 4, 3, strides=(2, 2), padding="SAME")
    >>> layer.weight.shape, layer(torch.ones(1, 5, 5, 8)).shape
    (torch.Size([3, 3, 8, 4]), torch.Size([1, 10, 10, 4]))""",
}

_DOCSTRING = """{owner} as a layer: weight {shape}{bias}.

The weight holds what torch's ``nn.ConvTranspose`` of the same channels, kernel and
groups draws, moved into the dialect's layout.

Parameters
----------
in_channels, out_channels : int{groups}
kernel_size : int or sequence of int
    As in :class:`ConvolutionBackpropData`.{bias_parameter}
{attributes}
    As in :func:`convtranspose.{name}`.
spatial_rank, device, dtype : optional

``forward({call})`` takes them as :func:`convtranspose.{name}` does.

Examples
--------
>>> import torch, convtranspose.torch as ctt
{example}
"""


def _framework_parameters(name: str, weight: _Weight):
    """The layer's parameters and ``forward``'s, from the array function's signature."""
    record = _dialects.DIALECTS[name]
    function = inspect.signature(getattr(_ops, name)).parameters
    keyword = inspect.Parameter.KEYWORD_ONLY
    attributes = [p.replace(kind=keyword, annotation=inspect.Parameter.empty)
                  for n, p in function.items()
                  if n not in record.operands and n not in weight.per_call]
    layer = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
             for n in ("in_channels", "out_channels", "kernel_size")]
    if record.operands[2] is not None:
        layer.append(inspect.Parameter("bias", keyword, default=True))
    layer += attributes + [inspect.Parameter(n, keyword, default=None)
                           for n in ("spatial_rank", "device", "dtype")]
    call = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
            inspect.Parameter(record.operands[0], inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    call += [function[n].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 annotation=inspect.Parameter.empty) for n in weight.per_call]
    return (inspect.Signature(layer), inspect.Signature(call),
            tuple(p.name for p in attributes))


class _FrameworkLayer(_Layer):
    """A frameworks' dialect as a layer (made by :func:`_framework_layer`)."""

    _WEIGHT: _Weight
    _SIGNATURE: inspect.Signature
    _CALL: inspect.Signature
    #: ``forward``'s per-call arguments' defaults (None: one has none).
    _CALL_DEFAULTS: dict | None

    def __init__(self, *args, **kwargs):
        bound = self._SIGNATURE.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        super().__init__()
        self._set({n: values[n] for n in self._ATTRIBUTES}, {})
        groups = 1
        if self._WEIGHT.groups is not None:
            groups = values[self._WEIGHT.groups]
            _divisible("in_channels", values["in_channels"], self._WEIGHT.groups, groups)
            _divisible("out_channels", values["out_channels"], self._WEIGHT.groups, groups)
        kernel = _kernel(values["kernel_size"], values["spatial_rank"])
        i_axis, o_axis, kernel_axes = filter_axes(
            self._WEIGHT.layout(self._attributes(), len(kernel)), len(kernel))
        source = {i_axis: 0, o_axis: 1}
        source.update({axis: 2 + i for i, axis in enumerate(kernel_axes)})
        self._source = tuple(source[j] for j in range(len(kernel) + 2))
        bias = values["out_channels"] if values.get("bias") else None
        self._make((values["in_channels"], values["out_channels"] // groups) + kernel, bias,
                   values["device"], values["dtype"])

    def _layout(self, weight):
        return weight.permute(self._source)

    def forward(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and self._CALL_DEFAULTS is not None:
            return self._computed(args[0], **self._CALL_DEFAULTS)  # nothing to bind
        bound = self._CALL.bind(self, *args, **kwargs)
        bound.apply_defaults()
        per_call = dict(bound.arguments)
        del per_call["self"]
        return self._computed(per_call.pop(_dialects.DIALECTS[self.dialect].operands[0]),
                              **per_call)


def _framework_layer(name: str) -> type:
    """The ``nn.Module`` of the frameworks' dialect ``name``: the array function's
    attributes (its operands and per-call arguments left out) as keyword arguments, a
    weight (and a bias where the dialect has one) made as torch makes them."""
    record = _dialects.DIALECTS[name]
    weight = _WEIGHTS[name]
    signature, call, attributes = _framework_parameters(name, weight)
    class_name = "".join(part.capitalize() for part in name.split("_"))
    groups = "" if weight.groups is None else f"\n    ``{weight.groups}`` must divide both."
    has_bias = record.operands[2] is not None
    doc = _DOCSTRING.format(
        owner=record.owner, shape=weight.shape, name=name, groups=groups,
        bias=", bias ``(out_channels,)``" if has_bias else ", no bias",
        bias_parameter="\nbias : bool, optional\n    Default True." if has_bias else "",
        attributes=", ".join(attributes), call=", ".join(list(call.parameters)[1:]),
        example=inspect.cleandoc("\n" + _EXAMPLES[name]))

    def __init__(self, *args, **kwargs):
        _FrameworkLayer.__init__(self, *args, **kwargs)

    def forward(self, *args, **kwargs):
        return _FrameworkLayer.forward(self, *args, **kwargs)

    per_call = list(call.parameters.values())[2:]
    self_parameter = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    __init__.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=self_parameter + list(signature.parameters.values()))
    forward.__signature__ = call  # type: ignore[attr-defined]
    forward.__doc__ = (f"``{record.operands[0]}`` as :func:`convtranspose.{name}` takes it"
                       + "".join(f", ``{n}``" for n in weight.per_call) + ".")
    return type(class_name, (_FrameworkLayer,), {
        "__doc__": doc, "__module__": __name__, "__init__": __init__, "forward": forward,
        "dialect": name, "_WEIGHT": weight, "_SIGNATURE": signature, "_CALL": call,
        "_CALL_DEFAULTS": None if any(p.default is inspect.Parameter.empty for p in per_call)
        else {p.name: p.default for p in per_call},
        "_ATTRIBUTES": attributes})


TorchConvTranspose = _framework_layer("torch_conv_transpose")
TensorrtDeconvolution = _framework_layer("tensorrt_deconvolution")
TfConvTranspose = _framework_layer("tf_conv_transpose")
KerasConvTranspose = _framework_layer("keras_conv_transpose")
TfliteTransposeConv = _framework_layer("tflite_transpose_conv")
JaxConvTranspose = _framework_layer("jax_conv_transpose")

