"""The array functions of the frameworks' dialects (PyTorch, JAX), with each framework's
own argument names and layouts, all computing a canonical plan like the functions of
:mod:`convtranspose._api`.
"""

from __future__ import annotations

from . import _dialects
from ._api import _as_array, _execute, _resolve

__all__ = ["jax_conv_transpose", "torch_conv_transpose"]


def torch_conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                         groups=1, dilation=1, output_size=None, *, out=None):
    """PyTorch's transposed convolution: ``torch.nn.functional.conv_transpose{1,2,3}d`` and
    ``torch.nn.ConvTranspose{1,2,3}d.forward(input, output_size)``, in any spatial rank.

    Parameters
    ----------
    input : array_like
        ``(N, C_in, X1, ..., XD)`` (batched; add a batch axis to unbatched input).
    weight : array_like
        ``(C_in, C_out / groups, K1, ..., KD)``, the same dtype as ``input``.
    bias : array_like, optional
        ``(C_out,)``, added to every output position.
    stride, dilation : int or sequence of int, optional
        Default 1; a one-element sequence applies to every axis, as in PyTorch.
    padding : int or sequence of int, optional
        Default 0: ``dilation * (K - 1) - padding`` zeros pad each end of the
        input, i.e. ``padding`` elements are cropped from both ends of the full result.
        Symmetric only, never negative.
    output_padding : int or sequence of int, optional
        Default 0: elements added at the end; each must be smaller than its stride or
        its dilation.  Ignored when ``output_size`` is given (as the module does).
    groups : int, optional
        Default 1; ``C_in`` must be divisible by it.
    output_size : sequence of int, optional
        The module's ``forward(input, output_size)``: the spatial output sizes (or the
        whole ``(N, C_out, ...)`` shape), each in ``[Ymin, Ymin + stride - 1]`` with
        ``Ymin`` the size at ``output_padding=0``; it chooses ``output_padding``.
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        ``(N, C_out, Y...)`` with ``Y = (X - 1) * stride - 2 * padding + dilation *
        (K - 1) + output_padding + 1`` per axis.

    Raises
    ------
    ConvTransposeError
        An invalid shape or argument, with the rule PyTorch applies.
    TypeError
        ``input`` and ``weight`` differ in dtype, or the dtype is not numeric.

    See Also
    --------
    convtranspose.shapes.torch_conv_transpose : the same rules on shapes only.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([[[1.0, 2.0, 3.0]]])            # N=1, C_in=1, X=3
    >>> w = np.array([[[1.0, 10.0, 100.0]]])         # C_in=1, C_out=1, K=3
    >>> ct.torch_conv_transpose(x, w, stride=2, padding=1, output_padding=1)
    array([[[ 10., 102.,  20., 203.,  30., 300.]]])
    """
    input, weight = _as_array("input", input), _as_array("weight", weight)
    bias = None if bias is None else _as_array("bias", bias)
    plan = _resolve(
        _dialects.torch_conv_transpose, input.shape, weight.shape,
        None if bias is None else bias.shape, stride=stride, padding=padding,
        output_padding=output_padding, groups=groups, dilation=dilation,
        output_size=output_size)
    return _execute(plan, input, weight, bias, out, names=("input", "weight", "bias"))


def jax_conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                       transpose_kernel=False, use_consistent_padding=False, *, out=None):
    """JAX ``jax.lax.conv_transpose``: a forward convolution of the stride-dilated input.

    Parameters
    ----------
    lhs : array_like
        The input, laid out as ``dimension_numbers[0]`` (default channels last,
        ``"NHWC"`` in 2-D).
    rhs : array_like
        The kernel, laid out as ``dimension_numbers[1]`` (default ``"HWIO"``): used as
        a correlation kernel (not flipped) unless ``transpose_kernel`` is True, which
        flips its spatial axes and swaps I and O, as JAX does.
    strides : sequence of int
        The fractional strides, one per spatial axis.
    padding : {"SAME", "VALID"} or sequence of (int, int)
        "SAME" gives ``Y = X * stride``; "VALID" ``Y = X * stride + max(K' - stride,
        0)``; pairs are the zeros added before and after the stride-dilated input
        (with ``use_consistent_padding``: the forward convolution's padding, PyTorch's
        meaning: ``Y = F - before - after``).  Pairs may be negative.
    rhs_dilation : sequence of int, optional
        Kernel dilation; default 1.
    dimension_numbers : tuple of three str, optional
        ``(lhs, rhs, out)`` specs such as ``("NCHW", "OIHW", "NCHW")``: the data spec
        N, C, spatial or N, spatial, C; the kernel's I and O both first or both last;
        the output spec equal to the data spec.
    transpose_kernel, use_consistent_padding : bool, optional
        As in JAX.
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        In the data's layout, with ``Y = F + a + b - 2 (K' - 1)`` per axis for pads
        ``(a, b)`` of the dilated input, ``F = (X - 1) * stride + K'``.

    Raises
    ------
    ConvTransposeError
        An invalid shape or argument, or dimension numbers outside the supported set.
    TypeError
        ``lhs`` and ``rhs`` differ in dtype, or the dtype is not numeric.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([[[1.0], [2.0], [3.0]]])           # NHC: N=1, X=3, C=1
    >>> k = np.array([[[100.0]], [[10.0]], [[1.0]]])     # HIO, correlation order
    >>> ct.jax_conv_transpose(x, k, (2,), "VALID")[0, :, 0]
    array([  1.,  10., 102.,  20., 203.,  30., 300.])
    """
    import numpy as np

    lhs, rhs = _as_array("lhs", lhs), _as_array("rhs", rhs)
    plan = _resolve(
        _dialects.jax_conv_transpose, lhs.shape, rhs.shape, strides, padding,
        rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
        transpose_kernel=transpose_kernel, use_consistent_padding=use_consistent_padding)
    if not transpose_kernel:  # a correlation kernel: the canonical filter is its flip
        rank = plan.spatial_rank
        kernel_axes = tuple(range(rank)) if plan.filter_layout.startswith("X") \
            else tuple(range(2, rank + 2))
        rhs = np.flip(rhs, kernel_axes)
    return _execute(plan, lhs, rhs, None, out, names=("lhs", "rhs", "bias"))
