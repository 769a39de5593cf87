"""The forward convolution: OpenVINO Convolution-1 and GroupConvolution-1.

ConvolutionBackpropData is by definition the gradient of Convolution with respect to
its input; this is the other half.  A convolution is computed as the adjoint of the
transposed convolution its plan names (:attr:`ConvolutionPlan.axes`), by the kernels
of :mod:`convtranspose._kernels.adjoints`.  Per spatial axis::

    Y = floor((X + pads_begin + pads_end - (K - 1) * dilation - 1) / stride) + 1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._dtypes import check_dtypes
from .._execute import array_api as _array_api
from .._execute.adjoints import data_adjoint
from .._execute.footprint import check_convolution
from .._plan import dialects as _dialects
from .specs import as_array, direct_out, resolve_plan

if TYPE_CHECKING:
    from .._typing import ArrayLike, PerAxis

__all__ = ["convolution", "execute_convolution", "group_convolution"]


def execute_convolution(plan, data, filter, out, weights=None):
    """The forward convolution ``plan`` on ``data`` and ``filter`` (into ``out``, if given),
    as :func:`convolution` and :func:`group_convolution` compute it once they have it.
    ``weights``: the filter's canonical view, if the caller keeps one (a prepared
    layer: the data adjoint's prepared call then knows it by identity)."""
    if type(data) is not np.ndarray or type(filter) is not np.ndarray:
        result = _array_api.convolution(plan, (data, filter), out,
                                        lambda *views: execute_convolution(plan, *views, None))
        if result is not NotImplemented:
            return result
    if out is not None and not direct_out(out, plan, {"data": data, "filter": filter},
                                          ("data", "filter")):
        np.copyto(out, execute_convolution(plan, data, filter, None, weights))
        return out
    dtype = check_dtypes(data=data, filter=filter)
    check_convolution(plan, data, filter)
    if weights is None:
        weights = filter.reshape(plan.canonical_filter_shape)
    result = data_adjoint(data, weights, plan.axes, channels_last=False, dtype=dtype)
    if out is None:
        return result
    out[...] = result
    return out


def convolution(data: ArrayLike, filter: ArrayLike, *, strides: PerAxis = None,
                pads_begin: PerAxis = None, pads_end: PerAxis = None,
                dilations: PerAxis = None, auto_pad: str = "explicit",
                out: np.ndarray | None = None) -> np.ndarray:
    """OpenVINO Convolution-1: the forward convolution (a cross-correlation).

    Parameters
    ----------
    data : array_like
        ``[N, C_IN, X1, ..., XD]``, any spatial rank D >= 1.
    filter : array_like
        ``[C_OUT, C_IN, K1, ..., KD]``, the same dtype as ``data``.
    strides, dilations : int or sequence of int, optional
        Default 1 on every axis.
    pads_begin, pads_end : int or sequence of int, optional
        Zeros added before and after the data on each axis, default 0; used when
        ``auto_pad`` is explicit.
    auto_pad : {"explicit", "same_upper", "same_lower", "valid"}, optional
        Case-insensitive; ``"notset"`` and ``None`` mean ``"explicit"``.  ``same_*``
        give ``Y = ceil(X / stride)`` with the odd pad at the end (upper) or the
        beginning (lower); ``valid`` pads nothing.
    out : ndarray, optional
        As in :func:`convtranspose.convolution_backprop_data`.

    Returns
    -------
    ndarray
        ``[N, C_OUT, Y1, ..., YD]`` with the dtype of ``data``::

            out[n, co, y] = sum over ci, k of data[n, ci, y*stride + k*dilation - pads_begin]
                                              * filter[co, ci, k]
            Y = floor((X + pads_begin + pads_end - (K - 1) * dilation - 1) / stride) + 1

        (data read as 0 outside its extent).  Sums accumulate as in the transposed
        convolution (float32 for half precision, int64 wrapping for integers).

    Raises
    ------
    ConvTransposeError
        An invalid shape or attribute (a ``ValueError``), naming it, or an ``out`` of
        another shape or read-only.
    ResultTooLargeError
        A :class:`ConvTransposeError` and a ``MemoryError``: an output of more than 2**60
        elements (from the shape rules, as :func:`convtranspose.shapes.convolution`), or
        a result, widened operands and scratch beyond
        :func:`convtranspose.get_max_bytes`; raised before anything is allocated, naming
        the argument (``pads_begin and pads_end``, ``data`` or ``filter``), the bytes
        and the limit.
    TypeError
        ``data`` and ``filter`` differ in dtype, or the dtype is not numeric.

    See Also
    --------
    convtranspose.shapes.convolution : the same rules on shapes only.
    convtranspose.convolution_backprop_data : its adjoint (the gradient with respect
        to ``data``), with the same attributes.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]])   # N=1, C_IN=1, X=5
    >>> filter = np.array([[[1.0, 10.0, 100.0]]])          # C_OUT=1, C_IN=1, K=3
    >>> ct.convolution(data, filter)
    array([[[321., 432., 543.]]])
    >>> ct.convolution(data, filter, strides=2, auto_pad="same_upper")
    array([[[210., 432.,  54.]]])
    """
    data, filter = as_array("data", data), as_array("filter", filter)
    plan = resolve_plan(_dialects.convolution, data.shape, filter.shape, strides=strides,
                        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
                        auto_pad=auto_pad)
    return execute_convolution(plan, data, filter, out)


def group_convolution(data: ArrayLike, filter: ArrayLike, *, strides: PerAxis = None,
                      pads_begin: PerAxis = None, pads_end: PerAxis = None,
                      dilations: PerAxis = None, auto_pad: str = "explicit",
                      out: np.ndarray | None = None) -> np.ndarray:
    """OpenVINO GroupConvolution-1: grouped forward convolution.

    Parameters
    ----------
    data : array_like
        ``[N, G * C_IN, X1, ..., XD]``.
    filter : array_like
        ``[G, C_OUT, C_IN, K1, ..., KD]``: group ``g`` maps data channels
        ``[g*C_IN, (g+1)*C_IN)`` to output channels ``[g*C_OUT, (g+1)*C_OUT)``
        (depthwise: ``C_IN = C_OUT = 1``).
    strides, pads_begin, pads_end, dilations, auto_pad, out
        As in :func:`convolution`.

    Returns
    -------
    ndarray
        ``[N, G * C_OUT, Y1, ..., YD]``, sizes as in :func:`convolution`.

    Raises
    ------
    ConvTransposeError, ResultTooLargeError, TypeError
        As in :func:`convolution`.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.ones((1, 4, 5, 5), np.float32)         # G=4 depthwise channels
    >>> filter = np.ones((4, 1, 1, 3, 3), np.float32)
    >>> ct.group_convolution(data, filter, pads_begin=1, pads_end=1)[0, 0]
    array([[4., 6., 6., 6., 4.],
           [6., 9., 9., 9., 6.],
           [6., 9., 9., 9., 6.],
           [6., 9., 9., 9., 6.],
           [4., 6., 6., 6., 4.]], dtype=float32)
    """
    data, filter = as_array("data", data), as_array("filter", filter)
    plan = resolve_plan(_dialects.group_convolution, data.shape, filter.shape, strides=strides,
                        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
                        auto_pad=auto_pad)
    return execute_convolution(plan, data, filter, out)
