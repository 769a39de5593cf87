"""The array functions of the frameworks' dialects (PyTorch, JAX, TensorFlow, Keras,
TFLite, TensorRT), with each framework's
own argument names and layouts, all computing a canonical plan like the functions of
:mod:`convtranspose._frontends.specs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._execute import array_api as _array_api
from .._plan import dialects as _dialects
from .repeated_calls import remembers_calls
from .specs import as_array, execute_plan, resolve_plan

if TYPE_CHECKING:
    from typing import Any

    import numpy as np

    from .._typing import ArrayLike, PerAxis, ShapeLike

__all__ = ["jax_conv_transpose", "jax_planned_rhs", "keras_conv_transpose",
           "tensorrt_deconvolution", "tf_conv_transpose", "tflite_transpose_conv",
           "torch_conv_transpose"]


@remembers_calls
def torch_conv_transpose(input: ArrayLike, weight: ArrayLike, bias: ArrayLike | None = None,
                         stride: PerAxis = 1, padding: PerAxis = 0, output_padding: PerAxis = 0,
                         groups: int = 1, dilation: PerAxis = 1,
                         output_size: ShapeLike | None = None, *,
                         out: np.ndarray | None = None) -> np.ndarray:
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
    input, weight = as_array("input", input), as_array("weight", weight)
    bias = None if bias is None else as_array("bias", bias)
    plan = resolve_plan(
        _dialects.torch_conv_transpose, input.shape, weight.shape,
        None if bias is None else bias.shape, stride=stride, padding=padding,
        output_padding=output_padding, groups=groups, dilation=dilation,
        output_size=output_size)
    return execute_plan(plan, input, weight, bias, out, names=("input", "weight", "bias"))


@remembers_calls
def jax_conv_transpose(lhs: ArrayLike, rhs: ArrayLike, strides: PerAxis, padding: Any,
                       rhs_dilation: PerAxis = None, dimension_numbers: Any = None,
                       transpose_kernel: bool = False, use_consistent_padding: bool = False, *,
                       out: np.ndarray | None = None) -> np.ndarray:
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
    lhs, rhs = as_array("lhs", lhs), as_array("rhs", rhs)
    plan = resolve_plan(
        _dialects.jax_conv_transpose, lhs.shape, rhs.shape, strides, padding,
        rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
        transpose_kernel=transpose_kernel, use_consistent_padding=use_consistent_padding)
    return execute_plan(plan, lhs, jax_planned_rhs(plan, rhs, transpose_kernel), None, out,
                        names=("lhs", "rhs", "bias"))


def jax_planned_rhs(plan, rhs, transpose_kernel: bool, flip=_array_api.flip):
    """``rhs`` as the plan's filter: JAX correlates with ``rhs`` unless
    ``transpose_kernel``, so the plan's (convolution) filter is ``rhs`` flipped in space
    (by ``flip(array, axes)``).  The flip is its own inverse and its own adjoint: it also
    takes the plan's filter gradient to ``rhs``'s."""
    if transpose_kernel:
        return rhs
    rank = plan.spatial_rank
    kernel_axes = tuple(range(rank)) if plan.filter_layout.startswith("X") \
        else tuple(range(2, rank + 2))
    return flip(rhs, kernel_axes)


@remembers_calls
def tf_conv_transpose(input: ArrayLike, filters: ArrayLike, output_shape: ShapeLike,
                      strides: PerAxis, padding: Any = "SAME", data_format: str | None = None,
                      dilations: PerAxis = None, *, out: np.ndarray | None = None) -> np.ndarray:
    """TensorFlow's ``tf.nn.conv_transpose`` (``conv1d/2d/3d_transpose``): the gradient of
    the forward convolution whose input has ``output_shape``.

    Parameters
    ----------
    input : array_like
        Channels last (``data_format`` None or ``"NWC"``/``"NHWC"``/``"NDHWC"``) or
        channels first (``"NCW"``/``"NCHW"``/``"NCDHW"``).
    filters : array_like
        ``(K..., C_out, C_in)``, not flipped.
    output_shape : sequence of int
        The whole output shape (3 to 5 values, in ``data_format``): required.  The
        forward convolution of the output must give back the input's spatial sizes.
    strides, dilations : int or sequence of int
        Length 1, N or N+2 (the batch and channel entries then 1).
    padding : {"SAME", "VALID"} or list of pairs, optional
        "SAME": ``X = ceil(Y/s)``, the crop ``max((X-1)*s + K' - Y, 0)`` split with
        the odd element at the end; "VALID": no crop, ``X = (Y - K' + s) // s``;
        a list of N+2 ``(before, after)`` pairs (2-D only): the forward padding.
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        Of shape ``output_shape``.

    Raises
    ------
    ConvTransposeError
        An invalid shape or argument, or an ``output_shape`` TensorFlow refuses.
    TypeError
        ``input`` and ``filters`` differ in dtype, or the dtype is not numeric.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1)
    >>> w = np.array([1.0, 10.0, 100.0]).reshape(3, 1, 1)
    >>> ct.tf_conv_transpose(x, w, [1, 5, 1], 2, "SAME").ravel()
    array([ 10., 102.,  20., 203.,  30.])
    """
    input, filters = as_array("input", input), as_array("filters", filters)
    plan = resolve_plan(_dialects.tf_conv_transpose, input.shape, filters.shape, output_shape,
                        strides, padding, data_format, dilations)
    return execute_plan(plan, input, filters, None, out, names=("input", "filters", "bias"))


@remembers_calls
def keras_conv_transpose(inputs: ArrayLike, kernel: ArrayLike, bias: ArrayLike | None = None, *,
                         strides: PerAxis = 1, padding: str = "valid",
                         output_padding: PerAxis = None, data_format: str = "channels_last",
                         dilation_rate: PerAxis = 1,
                         out: np.ndarray | None = None) -> np.ndarray:
    """Keras 3's ``Conv1DTranspose``/``Conv2DTranspose``/``Conv3DTranspose`` layer call
    (TensorFlow backend), with its kernel and optional bias.

    Parameters
    ----------
    inputs : array_like
        ``(N, X..., C_in)`` or, with ``data_format="channels_first"``, ``(N, C_in, X...)``.
    kernel : array_like
        ``(K..., filters, C_in)``, not flipped.
    bias : array_like, optional
        ``(filters,)`` (``use_bias=True``).
    strides, dilation_rate : int or tuple of int, optional
        Default 1; strides above 1 and dilation_rate above 1 together are refused.
    padding : {"valid", "same"}, optional
        With ``output_padding=None``: "valid" gives ``Y = (X-1)*s + max(K', s)``,
        "same" ``Y = X*s``.  With ``output_padding=p``: "valid" ``Y = F + p``, "same"
        ``Y = (X-1)*s + K' % 2 + p``.  TensorFlow then crops as in
        :func:`tf_conv_transpose` and refuses sizes its forward rule does not map back.
    output_padding : int or tuple of int, optional
        None (default) differs from 0; each must be smaller than its stride.
    data_format : {"channels_last", "channels_first"}, optional
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray

    Raises
    ------
    ConvTransposeError
        An invalid shape or argument, with the rule Keras or TensorFlow applies.
    TypeError
        ``inputs`` and ``kernel`` differ in dtype, or the dtype is not numeric.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1)
    >>> ct.keras_conv_transpose(x, np.ones((1, 1, 1)), strides=3).ravel()
    array([1., 0., 0., 2., 0., 0., 3., 0., 0.])
    """
    inputs, kernel = as_array("inputs", inputs), as_array("kernel", kernel)
    bias = None if bias is None else as_array("bias", bias)
    plan = resolve_plan(_dialects.keras_conv_transpose, inputs.shape, kernel.shape,
                        None if bias is None else bias.shape, strides=strides, padding=padding,
                        output_padding=output_padding, data_format=data_format,
                        dilation_rate=dilation_rate)
    return execute_plan(plan, inputs, kernel, bias, out, names=("inputs", "kernel", "bias"))


@remembers_calls
def tflite_transpose_conv(output_shape: ShapeLike, weights: ArrayLike, input: ArrayLike,
                          bias: ArrayLike | None = None, *, padding: str = "SAME",
                          stride_h: int = 1, stride_w: int = 1,
                          out: np.ndarray | None = None) -> np.ndarray:
    """TFLite / LiteRT ``TRANSPOSE_CONV``: its inputs in the op's order (output shape,
    weights, input, optional bias) and its options.

    Parameters
    ----------
    output_shape : sequence of int
        ``[N, H, W, C_out]`` (the op's input 0).
    weights : array_like
        ``(C_out, KH, KW, C_in)`` (OHWI), not flipped.
    input : array_like
        ``(N, H, W, C_in)``.
    bias : array_like, optional
        ``(C_out,)`` (the op's optional input 3).
    padding : {"SAME", "VALID"}, optional
        TensorFlow's rule (:func:`tf_conv_transpose`) without dilation.
    stride_h, stride_w : int, optional
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        Of shape ``output_shape``.

    Raises
    ------
    ConvTransposeError
        An invalid shape or option, or an ``output_shape`` LiteRT refuses.
    TypeError
        ``input`` and ``weights`` differ in dtype, or the dtype is not numeric.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 3, 1)
    >>> w = np.array([1.0, 10.0, 100.0]).reshape(1, 1, 3, 1)
    >>> ct.tflite_transpose_conv([1, 1, 6, 1], w, x, np.array([5.0]), stride_w=2).ravel()
    array([  6.,  15., 107.,  25., 208.,  35.])
    """
    input, weights = as_array("input", input), as_array("weights", weights)
    bias = None if bias is None else as_array("bias", bias)
    plan = resolve_plan(_dialects.tflite_transpose_conv, output_shape, weights.shape, input.shape,
                        None if bias is None else bias.shape, padding=padding, stride_h=stride_h,
                        stride_w=stride_w)
    return execute_plan(plan, input, weights, bias, out, names=("input", "weights", "bias"))


@remembers_calls
def tensorrt_deconvolution(input: ArrayLike, kernel: ArrayLike, bias: ArrayLike | None = None,
                           *, num_output_maps: int | None = None, stride_nd: PerAxis = 1,
                           padding_nd: PerAxis = 0, pre_padding: PerAxis = None,
                           post_padding: PerAxis = None,
                           padding_mode: str = "EXPLICIT_ROUND_DOWN", num_groups: int = 1,
                           dilation_nd: PerAxis = 1,
                           out: np.ndarray | None = None) -> np.ndarray:
    """TensorRT's ``IDeconvolutionLayer`` (``add_deconvolution_nd``), computed here
    from TensorRT's documented formulas (no TensorRT runtime is used).

    Parameters
    ----------
    input : array_like
        ``(N, C_in, X...)`` with 2 or 3 spatial axes.
    kernel : array_like
        ``(C_in, C_out / num_groups, K...)``, the layout PyTorch converters pass unchanged.
    bias : array_like, optional
        ``(C_out,)``.
    num_output_maps : int, optional
        ``C_out``, checked against the kernel when given.
    stride_nd, dilation_nd : int or sequence of int, optional
    padding_nd : int or sequence of int, optional
        Symmetric padding: both ``pre_padding`` and ``post_padding`` unless given.
    pre_padding, post_padding : int or sequence of int, optional
        ``B`` and ``A``, cropped from the start and the end of the full result.
    padding_mode : str, optional
        ``"EXPLICIT_ROUND_DOWN"`` (default) or ``"EXPLICIT_ROUND_UP"``: ``O = (I-1)*S +
        DK - (B + A)``; ``"SAME_UPPER"``/``"SAME_LOWER"``: ``O = min(I*S, (I-1)*S +
        DK)``, the crop ``max(DK - S, 0)`` split with the odd element last or first
        (these ignore the paddings).
    num_groups : int, optional
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray

    Raises
    ------
    ConvTransposeError
        An invalid shape or attribute.
    TypeError
        ``input`` and ``kernel`` differ in dtype, or the dtype is not numeric.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 1, 3)
    >>> w = np.array([1.0, 10.0, 100.0]).reshape(1, 1, 1, 3)
    >>> ct.tensorrt_deconvolution(x, w, stride_nd=2, padding_mode="SAME_LOWER").ravel()
    array([ 10., 102.,  20., 203.,  30., 300.])
    """
    input, kernel = as_array("input", input), as_array("kernel", kernel)
    bias = None if bias is None else as_array("bias", bias)
    plan = resolve_plan(_dialects.tensorrt_deconvolution, input.shape, kernel.shape,
                        None if bias is None else bias.shape, num_output_maps=num_output_maps,
                        stride_nd=stride_nd, padding_nd=padding_nd, pre_padding=pre_padding,
                        post_padding=post_padding, padding_mode=padding_mode,
                        num_groups=num_groups, dilation_nd=dilation_nd)
    return execute_plan(plan, input, kernel, bias, out, names=("input", "kernel", "bias"))
