"""Vector-Jacobian products of the transposed-convolution dialects (the API reference
lists which dialects have them).

``vjp.<dialect function>(data, filter, grad_output, ..., **the same attributes)``
returns the gradients of ``sum(grad_output * f(data, filter[, bias]))`` with respect to
the data, the filter and (for the dialects with a bias) the bias, in that order, each
shaped and typed like its operand.  Every attribute means what it means in the forward
function: output_padding, output_shape, SAME rules, clamped and negative pads, groups
and every filter layout.

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

from typing import TYPE_CHECKING

import numpy as np

from ._dtypes import check_dtypes
from ._errors import ConvTransposeError
from ._execute import array_api as _array_api
from ._execute.adjoints import bias_adjoint, data_adjoint, filter_adjoint
from ._execute.footprint import check_gradients
from ._frontends.specs import as_array, canonical_weights, resolve_plan
from ._plan import dialects as _dialects

if TYPE_CHECKING:
    from ._typing import ArrayLike, PerAxis, ShapeLike

__all__ = ["conv_transpose", "convolution_backprop_data", "group_convolution_backprop_data",
           "onnx_conv_transpose"]


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
