"""Vector-Jacobian products of every dialect: the gradients of every transposed
convolution (the spec dialects and the frameworks') and of the forward convolutions.

``vjp.<dialect function>(data, filter, grad_output, ..., **the same attributes)``
returns the gradients of ``sum(grad_output * f(data, filter[, bias]))`` with respect to
the data, the filter and (for the dialects with a bias) the bias, in that order, each
shaped and typed like its operand, in the dialect's own layouts.  The arguments are the
forward function's, in its order, with ``grad_output`` after the data and filter
operands: ``tflite_transpose_conv(output_shape, weights, input, grad_output, bias)``
keeps TFLite's order (its gradients still come data first).  Every attribute means what
it means in the forward function: output_padding, output_shape, SAME rules, clamped and
negative pads, groups and every filter layout.

With ``out[n, g*Co+co, o] = sum data[n, g*Ci+ci, x] * w[g, ci, co, k]`` over
``x*s + k*d = o + offset`` (``docs/semantics.md``)::

    grad_data[n, g*Ci+ci, x] = sum over co, k of w[g, ci, co, k] * grad_output[n, g*Co+co, x*s + k*d - offset]
    grad_filter[g, ci, co, k] = sum over n, x of data[n, g*Ci+ci, x] * grad_output[n, g*Co+co, x*s + k*d - offset]
    grad_bias[c] = sum over n and every position of grad_output[n, c, ...]

(``grad_output`` read as 0 outside its extent): the data gradient is a forward
convolution (:func:`convtranspose.convolution`), the filter gradient a correlation of
the data with ``grad_output``.  Sums accumulate as in the forward functions (float32 for
half precision, int64 wrapping for integers).

>>> import numpy as np, convtranspose as ct
>>> data = np.array([[[1.0, 2.0, 3.0]]])
>>> filter = np.array([[[1.0, 10.0, 100.0]]])
>>> grad = np.ones((1, 1, 7))
>>> grad_data, grad_filter = ct.vjp.convolution_backprop_data(data, filter, grad, strides=2)
>>> grad_data, grad_filter
(array([[[111., 111., 111.]]]), array([[[6., 6., 6.]]]))
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import numpy as np

from ._dtypes import check_dtypes
from ._errors import ConvTransposeError
from ._execute import array_api as _array_api
from ._execute.adjoints import bias_adjoint, data_adjoint, filter_adjoint
from ._execute.footprint import check_gradients
from ._frontends import frameworks as _frameworks
from ._frontends import specs as _specs
from ._frontends.specs import as_array, canonical_weights, resolve_plan
from ._plan import dialects as _dialects

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._typing import ArrayLike, PerAxis, ShapeLike

__all__ = ["conv_transpose", "convolution", "convolution_backprop_data", "group_convolution",
           "group_convolution_backprop_data", "jax_conv_transpose", "keras_conv_transpose",
           "onnx_conv_transpose", "tensorrt_deconvolution", "tf_conv_transpose",
           "tflite_transpose_conv", "torch_conv_transpose"]


def _filter_gradient(plan, canonical: np.ndarray) -> np.ndarray:
    """The canonical ``(G, Ci, Co, K...)`` gradient in the dialect's filter layout."""
    if plan.filter_layout == "GIOX":
        return canonical
    order = plan._filter_to_canonical
    transposed = tuple(plan.filter_shape[axis] for axis in order)
    return np.ascontiguousarray(canonical.reshape(transposed).transpose(np.argsort(order)))


def _gradients(plan, names, data, filter, grad_output, bias=None):
    data, filter = as_array(names[0], data), as_array(names[1], filter)
    grad_output = as_array("grad_output", grad_output)
    if not all(type(a) is np.ndarray for a in (data, filter, grad_output)) or (
            bias is not None and type(bias) is not np.ndarray):
        result = _array_api.gradients(plan, names, (data, filter, grad_output, bias),
                                      lambda *views: _gradients(plan, names, *views))
        if result is not NotImplemented:
            return result
    arrays = {names[0]: data, names[1]: filter, "grad_output": grad_output}
    if bias is not None:
        arrays[names[2]] = bias
    dtype = check_dtypes(**arrays)
    if grad_output.shape != plan.output_shape:
        raise ConvTransposeError(
            f"grad_output has shape {grad_output.shape}, but the {plan.op} result has shape"
            f" {plan.output_shape}; grad_output must have exactly the result's shape")
    check_gradients(plan, names, data, filter, grad_output, bias)
    layout = plan.channels_last
    grad_data = data_adjoint(grad_output, canonical_weights(plan, filter), plan.axes,
                             channels_last=layout, dtype=dtype)
    grad_filter = _filter_gradient(plan, filter_adjoint(
        data, grad_output, plan.axes, plan.groups, channels_last=layout, dtype=dtype))
    if len(names) == 2:
        return grad_data, grad_filter
    grad_bias = None if bias is None else bias_adjoint(grad_output, channels_last=layout,
                                                       dtype=dtype)
    return grad_data, grad_filter, grad_bias


def _shape_of(name: str, value):
    """An operand's shape for planning, read without converting an array (the operands
    are converted once, by :func:`_gradients`)."""
    if value is None:
        return None
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else as_array(name, value).shape


def convolution_backprop_data(data: ArrayLike, filter: ArrayLike, grad_output: ArrayLike,
                              output_shape: ShapeLike | None = None, *,
                              strides: PerAxis = None, pads_begin: PerAxis = None,
                              pads_end: PerAxis = None, dilations: PerAxis = None,
                              auto_pad: str = "explicit", output_padding: PerAxis = None,
                              ) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of :func:`convtranspose.convolution_backprop_data`.

    Parameters
    ----------
    data, filter, output_shape, strides, pads_begin, pads_end, dilations, auto_pad, output_padding
        As in :func:`convtranspose.convolution_backprop_data`.
    grad_output : array_like
        The gradient with respect to its result: ``[N, C_OUT, Y...]``, the same dtype.

    Returns
    -------
    grad_data : ndarray
        ``[N, C_IN, X...]``.
    grad_filter : ndarray
        ``[C_IN, C_OUT, K...]``.

    Raises
    ------
    ConvTransposeError
        As the forward function, or ``grad_output`` not of the result's shape.
    ResultTooLargeError
        As the forward function, and where the gradients, widened operands and scratch
        would exceed :func:`convtranspose.get_max_bytes` (``argument`` names the data
        operand: ``data``, ``input`` or ``X``).
    TypeError
        The operands differ in dtype, or the dtype is not numeric.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data, filter = np.ones((1, 2, 4, 4)), np.ones((2, 3, 3, 3))
    >>> grad = np.ones((1, 3, 7, 7))
    >>> [g.shape for g in ct.vjp.convolution_backprop_data(data, filter, grad, strides=2,
    ...                                                    pads_begin=1, pads_end=1)]
    [(1, 2, 4, 4), (2, 3, 3, 3)]
    """
    plan = resolve_plan(_dialects.convolution_backprop_data, _shape_of("data", data),
                        _shape_of("filter", filter), output_shape, strides=strides,
                        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
                        auto_pad=auto_pad, output_padding=output_padding)
    return _gradients(plan, ("data", "filter"), data, filter, grad_output)


def group_convolution_backprop_data(data: ArrayLike, filter: ArrayLike,
                                    grad_output: ArrayLike,
                                    output_shape: ShapeLike | None = None, *,
                                    strides: PerAxis = None, pads_begin: PerAxis = None,
                                    pads_end: PerAxis = None, dilations: PerAxis = None,
                                    auto_pad: str = "explicit", output_padding: PerAxis = None,
                                    ) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of :func:`convtranspose.group_convolution_backprop_data`.

    Parameters and errors as :func:`convolution_backprop_data`; returns ``grad_data``
    ``[N, G*C_IN, X...]`` and ``grad_filter`` ``[G, C_IN, C_OUT, K...]``.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data, filter = np.ones((1, 4, 3)), np.ones((2, 2, 1, 2))
    >>> ct.vjp.group_convolution_backprop_data(data, filter, np.ones((1, 2, 4)))[1].shape
    (2, 2, 1, 2)
    """
    plan = resolve_plan(_dialects.group_convolution_backprop_data, _shape_of("data", data),
                        _shape_of("filter", filter), output_shape, strides=strides,
                        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
                        auto_pad=auto_pad, output_padding=output_padding)
    return _gradients(plan, ("data", "filter"), data, filter, grad_output)


def conv_transpose(input: ArrayLike, filter: ArrayLike, grad_output: ArrayLike,
                   bias: ArrayLike | None = None, *, strides: PerAxis = None,
                   pads_begin: PerAxis = None, pads_end: PerAxis = None,
                   dilations: PerAxis = None, auto_pad: str | None = "none",
                   output_padding: PerAxis = None, groups: int = 1, data_format: str = "NXC",
                   filter_format: str = "XIO", weights_format: str | None = None,
                   output_shape: ShapeLike | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The gradients of :func:`convtranspose.conv_transpose` (oneDNN Graph).

    Parameters
    ----------
    input, filter, bias, strides, pads_begin, pads_end, dilations, auto_pad, output_padding, groups, data_format, filter_format, weights_format, output_shape
        As in :func:`convtranspose.conv_transpose`; the bias's values do not change the
        gradients (only its shape and dtype are used).
    grad_output : array_like
        Shaped like the result, in ``data_format``.

    Returns
    -------
    grad_input, grad_filter : ndarray
        Shaped like ``input`` and ``filter`` (in their formats).
    grad_bias : ndarray or None
        ``(O * groups,)``; None when no ``bias`` is given.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x, w, b = np.ones((1, 3, 3, 4)), np.ones((2, 2, 4, 5)), np.zeros(5)
    >>> grads = ct.vjp.conv_transpose(x, w, np.ones((1, 6, 6, 5)), b, strides=2)
    >>> [g.shape for g in grads], grads[2]
    ([(1, 3, 3, 4), (2, 2, 4, 5), (5,)], array([36., 36., 36., 36., 36.]))
    """
    bias = None if bias is None else as_array("bias", bias)
    plan = resolve_plan(
        _dialects.conv_transpose, _shape_of("input", input), _shape_of("filter", filter),
        None if bias is None else bias.shape, strides=strides, pads_begin=pads_begin,
        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
        output_padding=output_padding, groups=groups, data_format=data_format,
        filter_format=filter_format, weights_format=weights_format, output_shape=output_shape)
    return _gradients(plan, ("input", "filter", "bias"), input, filter, grad_output, bias)


def onnx_conv_transpose(X: ArrayLike, W: ArrayLike, grad_output: ArrayLike,
                        B: ArrayLike | None = None, *, auto_pad: str = "NOTSET",
                        dilations: PerAxis = None, group: int = 1,
                        kernel_shape: ShapeLike | None = None, output_padding: PerAxis = None,
                        output_shape: ShapeLike | None = None, pads: ShapeLike | None = None,
                        strides: PerAxis = None, pads_rule: str = "current",
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The gradients of :func:`convtranspose.onnx_conv_transpose`.

    Parameters
    ----------
    X, W, B, auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides, pads_rule
        As in :func:`convtranspose.onnx_conv_transpose` (``B``'s values are not used).
    grad_output : array_like
        ``(N, M, Y...)``.

    Returns
    -------
    grad_X, grad_W : ndarray
        Shaped like ``X`` and ``W``.
    grad_B : ndarray or None
        ``(M,)``; None when no ``B`` is given.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> X, W = np.ones((1, 1, 3, 3)), np.ones((1, 2, 3, 3))
    >>> [g.shape for g in ct.vjp.onnx_conv_transpose(X, W, np.ones((1, 2, 5, 5)))[:2]]
    [(1, 1, 3, 3), (1, 2, 3, 3)]
    """
    B = None if B is None else as_array("B", B)
    plan = resolve_plan(
        _dialects.onnx_conv_transpose, _shape_of("X", X), _shape_of("W", W),
        None if B is None else B.shape, auto_pad=auto_pad, dilations=dilations, group=group,
        kernel_shape=kernel_shape, output_padding=output_padding, output_shape=output_shape,
        pads=pads, strides=strides, pads_rule=pads_rule)
    return _gradients(plan, ("X", "W", "B"), X, W, grad_output, B)


# ---------------------------------------------------------------------------
# The frameworks' dialects: one builder, driven by the record of each dialect


#: Per dialect, how its filter operand becomes the plan's filter, where it is not as
#: given: ``(plan, arguments, filter) -> filter``, its own inverse and adjoint (so the
#: same map takes the plan's filter gradient back to the operand's).
_PLANNED_FILTER = {
    "jax_conv_transpose": lambda plan, arguments, rhs: _frameworks.jax_planned_rhs(
        plan, rhs, arguments["transpose_kernel"]),
}

#: Per dialect, the docstring's example: values worked out from the definition (the
#: forward function's own example, with the gradient of its result).
_EXAMPLES = {
    "torch_conv_transpose": """\
    >>> x = np.array([[[1.0, 2.0, 3.0]]])              # N=1, C_in=1, X=3
    >>> w = np.array([[[1.0, 10.0, 100.0]]])           # C_in=1, C_out=1, K=3
    >>> ct.vjp.torch_conv_transpose(x, w, np.ones((1, 1, 6)), stride=2, padding=1,
    ...                             output_padding=1)
    (array([[[110., 111., 111.]]]), array([[[5., 6., 6.]]]), None)""",
    "tensorrt_deconvolution": """\
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 1, 3)
    >>> w = np.array([1.0, 10.0, 100.0]).reshape(1, 1, 1, 3)
    >>> grads = ct.vjp.tensorrt_deconvolution(x, w, np.ones((1, 1, 1, 6)), np.zeros(1),
    ...                                       stride_nd=2, padding_mode="SAME_LOWER")
    >>> [g.ravel() for g in grads]
    [array([110., 111., 111.]), array([5., 6., 6.]), array([6.])]""",
    "tf_conv_transpose": """\
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1)
    >>> w = np.array([1.0, 10.0, 100.0]).reshape(3, 1, 1)
    >>> grads = ct.vjp.tf_conv_transpose(x, w, np.ones((1, 5, 1)), [1, 5, 1], 2, "SAME")
    >>> [g.ravel() for g in grads]
    [array([110., 111.,  11.]), array([5., 6., 3.])]""",
    "keras_conv_transpose": """\
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1)
    >>> grad = np.arange(9.0).reshape(1, 9, 1)        # the result is x at 0, 3 and 6
    >>> grads = ct.vjp.keras_conv_transpose(x, np.ones((1, 1, 1)), grad, np.zeros(1),
    ...                                     strides=3)
    >>> [g.ravel() for g in grads]
    [array([0., 3., 6.]), array([24.]), array([36.])]""",
    "tflite_transpose_conv": """\
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 3, 1)
    >>> w = np.array([1.0, 10.0, 100.0]).reshape(1, 1, 3, 1)
    >>> grads = ct.vjp.tflite_transpose_conv([1, 1, 6, 1], w, x, np.ones((1, 1, 6, 1)),
    ...                                      np.array([5.0]), stride_w=2)
    >>> [g.ravel() for g in grads]                # input, weights, bias
    [array([111., 111.,  11.]), array([6., 6., 3.]), array([6.])]""",
    "jax_conv_transpose": """\
    >>> x = np.array([[[1.0], [2.0], [3.0]]])          # NHC: N=1, X=3, C=1
    >>> k = np.array([[[100.0]], [[10.0]], [[1.0]]])    # HIO, correlation order
    >>> grad = np.arange(7.0).reshape(1, 7, 1)
    >>> [g.ravel() for g in ct.vjp.jax_conv_transpose(x, k, grad, (2,), "VALID")]
    [array([210., 432., 654.]), array([28., 22., 16.])]""",
}

_DOCSTRING = """The gradients of :func:`convtranspose.{name}` ({owner}).
{order}
Parameters
----------
{arguments}
    As in :func:`convtranspose.{name}`{bias_note}.
grad_output : array_like
    The gradient with respect to its result: shaped like the result (in the data's
    layout), the same dtype.

Returns
-------
grad_{data} : ndarray
    Shaped and typed like ``{data}``, in its layout.
grad_{filter} : ndarray
    Shaped and typed like ``{filter}``, in its layout.{bias_return}

Raises
------
ConvTransposeError
    As the forward function, or ``grad_output`` not of the result's shape.
ResultTooLargeError
    As :func:`convolution_backprop_data`.
TypeError
    The operands differ in dtype, or the dtype is not numeric.

Examples
--------
>>> import numpy as np, convtranspose as ct
{example}
"""

_BIAS_RETURN = """
grad_{bias} : ndarray or None
    ``(C_out,)``; None when no ``{bias}`` is given."""


def _docstring(record, parameters) -> str:
    data, filter, bias = record.operands
    names = [p.name for p in parameters if p.name != "grad_output"]
    example = inspect.cleandoc("\n" + _EXAMPLES[record.name])
    order = ""
    if names.index(filter) < names.index(data):
        order = ("\nThe arguments keep the op's order, ``grad_output`` after its data and"
                 " filter;\nthe gradients come data first, as every function of this module"
                 " returns them.\n")
    return _DOCSTRING.format(
        name=record.name, owner=record.owner, order=order, arguments=", ".join(names),
        bias_note="" if bias is None else f" (``{bias}``'s values are not used)",
        data=data, filter=filter, example=example,
        bias_return="" if bias is None else _BIAS_RETURN.format(bias=bias))


def _contiguous(array):
    """A NumPy array C-contiguous (as every gradient is), another library's as it is."""
    return np.ascontiguousarray(array) if type(array) is np.ndarray else array


def _framework_gradients(name: str):
    """The VJP of the frameworks' dialect ``name``, from its record in
    :data:`~convtranspose._plan.dialects.DIALECTS` and its array function: the array
    function's parameters (``out`` left out) with ``grad_output`` after the data and
    filter operands, the gradients of the data, the filter and (where the dialect has
    one) the bias."""
    record = _dialects.DIALECTS[name]
    data_name, filter_name, bias_name = record.operands
    names = record.operands if bias_name else (data_name, filter_name)
    parameters = [p for p in inspect.signature(getattr(_frameworks, name)).parameters.values()
                  if p.name != "out"]
    at = 1 + max(i for i, p in enumerate(parameters) if p.name in (data_name, filter_name))
    parameters.insert(at, inspect.Parameter("grad_output", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            annotation="ArrayLike"))
    signature = inspect.Signature(parameters, return_annotation=(
        "tuple[np.ndarray, np.ndarray]" if bias_name is None
        else "tuple[np.ndarray, np.ndarray, np.ndarray | None]"))
    planned = _PLANNED_FILTER.get(name)

    def gradients(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        grad_output = arguments.pop("grad_output")
        data, filter = arguments[data_name], as_array(filter_name, arguments[filter_name])
        bias = None if bias_name is None else arguments[bias_name]
        bias = None if bias is None else as_array(bias_name, bias)
        shapes = {data_name: _shape_of(data_name, data), filter_name: tuple(filter.shape)}
        if bias_name is not None:
            shapes[bias_name] = None if bias is None else tuple(bias.shape)
        plan = resolve_plan(record.rule, **{**arguments, **shapes})
        if planned is None:
            return _gradients(plan, names, data, filter, grad_output, bias)
        grads = _gradients(plan, names, data, planned(plan, arguments, filter), grad_output,
                           bias)
        return (grads[0], _contiguous(planned(plan, arguments, grads[1])), *grads[2:])

    gradients.__name__ = gradients.__qualname__ = name
    gradients.__signature__ = signature  # type: ignore[attr-defined]
    gradients.__doc__ = _docstring(record, parameters)
    return gradients


torch_conv_transpose = _framework_gradients("torch_conv_transpose")
tensorrt_deconvolution = _framework_gradients("tensorrt_deconvolution")
tf_conv_transpose = _framework_gradients("tf_conv_transpose")
keras_conv_transpose = _framework_gradients("keras_conv_transpose")
tflite_transpose_conv = _framework_gradients("tflite_transpose_conv")
jax_conv_transpose = _framework_gradients("jax_conv_transpose")


# ---------------------------------------------------------------------------
# The forward convolution


def convolution_gradients(plan, data: ArrayLike, filter: ArrayLike, grad_output: ArrayLike,
                          needs: Sequence[bool] = (True, True)) -> tuple[Any, Any]:
    """A forward convolution's gradients through its adjoint: the one formula of
    :func:`convolution`, :func:`group_convolution` and ``convtranspose.torch``'s
    convolution backward.

    ``plan`` is the convolution's (:class:`~convtranspose.shapes.ConvolutionPlan`).  The
    adjoint is GroupConvolutionBackpropData with the convolution's resolved pads and
    ``output_shape`` its data's sizes: ``<conv(x, w), g> = <x, T(g, w)>``, so the data
    gradient is ``T(g, w)`` and the filter gradient is T's filter gradient at ``(g, w)``
    with ``x`` as its cotangent.  ``needs`` says which of the two to compute; one not
    needed is None (the torch op skips its work).  Each is shaped like its operand, in
    the operands' array library.
    """
    data, filter = as_array("data", data), as_array("filter", filter)
    grad_output = as_array("grad_output", grad_output)
    if tuple(grad_output.shape) != plan.output_shape:
        raise ConvTransposeError(
            f"grad_output has shape {tuple(grad_output.shape)}, but the {plan.op} result has"
            f" shape {plan.output_shape}; grad_output must have exactly the result's shape")
    grouped = filter.reshape(plan.canonical_filter_shape)  # [G, C_OUT/G, C_IN/G, K...]
    adjoint: dict[str, Any] = dict(
        output_shape=list(plan.data_shape[2:]), strides=list(plan.strides),
        pads_begin=list(plan.pads_begin), pads_end=list(plan.pads_end),
        dilations=list(plan.dilations))
    grad_data = (_specs.group_convolution_backprop_data(grad_output, grouped, **adjoint)
                 if needs[0] else None)
    grad_filter = (group_convolution_backprop_data(grad_output, grouped, data, **adjoint)[1]
                   .reshape(plan.filter_shape) if needs[1] else None)
    return grad_data, grad_filter


def convolution(data: ArrayLike, filter: ArrayLike, grad_output: ArrayLike, *,
                strides: PerAxis = None, pads_begin: PerAxis = None, pads_end: PerAxis = None,
                dilations: PerAxis = None, auto_pad: str = "explicit",
                ) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of :func:`convtranspose.convolution` (OpenVINO Convolution-1).

    Parameters
    ----------
    data, filter, strides, pads_begin, pads_end, dilations, auto_pad
        As in :func:`convtranspose.convolution`.
    grad_output : array_like
        The gradient with respect to its result: ``[N, C_OUT, Y...]``, the same dtype.

    Returns
    -------
    grad_data : ndarray
        ``[N, C_IN, X...]``: :func:`convtranspose.convolution_backprop_data` of
        ``grad_output`` with the convolution's filter, resolved pads and
        ``output_shape`` the data's sizes.
    grad_filter : ndarray
        ``[C_OUT, C_IN, K...]``.

    Raises
    ------
    ConvTransposeError, ResultTooLargeError, TypeError
        As :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]])   # N=1, C_IN=1, X=5
    >>> filter = np.array([[[1.0, 10.0, 100.0]]])          # C_OUT=1, C_IN=1, K=3
    >>> ct.vjp.convolution(data, filter, np.array([[[1.0, 0.0, 2.0]]]))
    (array([[[  1.,  10., 102.,  20., 200.]]]), array([[[ 7., 10., 13.]]]))
    """
    plan = resolve_plan(_dialects.convolution, _shape_of("data", data),
                        _shape_of("filter", filter), strides=strides, pads_begin=pads_begin,
                        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad)
    return convolution_gradients(plan, data, filter, grad_output)


def group_convolution(data: ArrayLike, filter: ArrayLike, grad_output: ArrayLike, *,
                      strides: PerAxis = None, pads_begin: PerAxis = None,
                      pads_end: PerAxis = None, dilations: PerAxis = None,
                      auto_pad: str = "explicit") -> tuple[np.ndarray, np.ndarray]:
    """The gradients of :func:`convtranspose.group_convolution` (OpenVINO
    GroupConvolution-1).

    Parameters and errors as :func:`convolution`; returns ``grad_data``
    ``[N, G*C_IN, X...]`` and ``grad_filter`` ``[G, C_OUT, C_IN, K...]``.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data, filter = np.ones((1, 4, 5, 5)), np.ones((4, 1, 1, 3, 3))
    >>> grad_data, grad_filter = ct.vjp.group_convolution(data, filter, np.ones((1, 4, 3, 3)))
    >>> grad_data[0, 0, 0], grad_filter[0, 0, 0]
    (array([1., 2., 3., 2., 1.]), array([[9., 9., 9.],
           [9., 9., 9.],
           [9., 9., 9.]]))
    """
    plan = resolve_plan(_dialects.group_convolution, _shape_of("data", data),
                        _shape_of("filter", filter), strides=strides, pads_begin=pads_begin,
                        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad)
    return convolution_gradients(plan, data, filter, grad_output)
