"""oneDNN's int8 deconvolution: ``dnnl::deconvolution_forward`` on a u8 or s8 source and
s8 weights, with its quantization attributes (scales and zero points) and a u8, s8, s32
or f32 destination.

The rule, as oneDNN's x64 JIT kernels compute it (docs/quantization.md)::

    acc = sum (src - src_zero_point) * wei            exact integers (int32, wrapped)
    v   = float32(acc) * src_scale * wei_scales[oc]   two float32 products, this order
    v   = v + bias[oc]                                 float32, after the scales
    v   = v * float32(1 / dst_scale)                   (scaling="reference": v / dst_scale)
    v   = v + float32(dst_zero_point)                  before the rounding
    dst = v (f32), else round_half_even(saturate(v))

The sum is the library's exact sum (:func:`convtranspose._frontends.quantized.exact_sum`);
every later step is one float32 operation in the order above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .._plan.quantized import onednn_dst_type
from .._runtime.target import host
from .fixed_point import wrap32
from .quantized import (
    check_out,
    exact_sum,
    float32_scale,
    integer_zero_point,
    kept_weights,
    offset_requantized,
    prepared_offset_call,
    typed_operand,
    with_defaults,
)
from .repeated_quantized import remembers_quantized_calls
from .specs import as_array, resolve_plan

if TYPE_CHECKING:
    from .._typing import ArrayLike, PerAxis, ShapeLike

__all__ = ["onednn_quantized_conv_transpose", "onednn_requantize"]

F32 = np.float32
UINT8, INT8 = np.dtype(np.uint8), np.dtype(np.int8)
#: oneDNN's destination types and the interval each saturates to before rounding.  The
#: s32 upper bound is oneDNN's ``max_value<float>(s32)``: the float32 below 2**31, since
#: ``cvtps2dq`` turns 2**31 into INT32_MIN.
_DESTINATIONS: dict[str, tuple[np.dtype, float | None, float | None]] = {
    "u8": (np.dtype(np.uint8), 0.0, 255.0), "s8": (np.dtype(np.int8), -128.0, 127.0),
    "s32": (np.dtype(np.int32), -2.0 ** 31, 2147483520.0),
    "f32": (np.dtype(np.float32), None, None)}


def _optional_scale(name: str, value: object) -> np.ndarray | None:
    """A scale attribute as float32 (positive and finite), or None when it is not set."""
    return None if value is None else float32_scale(
        name, value, "oneDNN's scales are f32")


def _optional_zero_point(name: str, value: object) -> np.ndarray | None:
    """A zero point attribute (oneDNN's are s32) as int64, or None when it is not set."""
    return None if value is None else integer_zero_point(name, value, np.dtype(np.int32))


def _bias(value: object) -> np.ndarray | None:
    if value is None:
        return None
    array = np.asarray(as_array("bias", value))
    if array.dtype.kind != "f":
        raise TypeError(f"bias has dtype {array.dtype} but must be floating point (an f32"
                        f" bias, added after the source and weight scales)")
    bias = array.astype(F32)
    if not np.all(np.isfinite(bias)):
        raise ConvTransposeError(f"bias must be finite (as float32), got {array.tolist()}")
    return bias


def onednn_requantize(acc: np.ndarray, channel_axis: int, src_scale: np.ndarray | None,
                      wei_scales: np.ndarray | None, bias: np.ndarray | None,
                      dst_scale: np.ndarray | None, dst_zero_point: np.ndarray | None,
                      dst_type: str, scaling: str = "jit") -> np.ndarray:
    """oneDNN's steps after the int32 sum ``acc`` (int32, or int64 holding int32 values), one
    float32 operation each, in its kernels' order; an attribute that is None is not set
    and its step is skipped (as oneDNN skips it).

    ``scaling="jit"``: the destination scale is applied as ``float32(1 / dst_scale)``
    (the reciprocal oneDNN's JIT kernels take once per call); ``"reference"``: divided
    by, as its reference deconvolution does.
    """
    dtype, low, high = _DESTINATIONS[dst_type]
    if host().numba:
        from .._kernels.requantize import onednn_requantized

        attributes, divides, bounds, _ = _kernel_steps(src_scale, wei_scales, bias, dst_scale,
                                                       dst_zero_point, dst_type, scaling)
        result = onednn_requantized(acc, channel_axis == -1, attributes, divides, bounds,
                                    dtype, host().threads)
        if result is not None:
            return result
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    value = acc.astype(F32)  # cvtdq2ps: exact while |acc| <= 2**24
    with np.errstate(over="ignore"):  # huge scales give infinities, saturated below
        if src_scale is not None:
            value *= src_scale.reshape(())
        if wei_scales is not None:
            value *= wei_scales.reshape(-1).reshape(shape)
        if bias is not None:
            value += bias.reshape(shape)
        if dst_scale is not None:
            if scaling == "jit":
                value *= F32(1) / dst_scale.reshape(())
            else:
                value /= dst_scale.reshape(())
        if dst_zero_point is not None:
            value += F32(dst_zero_point.reshape(()))
    if low is None:
        return value
    # Saturate, then round half to even (cvtps2dq under the default MXCSR): rounding an
    # in-range value cannot leave the integer interval, so the order is oneDNN's.
    np.clip(value, low, high, out=value)
    np.rint(value, out=value)
    return value.astype(dtype)


def _check_reciprocal(dst_scale: np.ndarray | None, scaling: str) -> None:
    """The JIT kernels multiply by ``float32(1 / dst_scale)``: refuse a scale whose
    reciprocal overflows float32 (a zero sum would then give NaN)."""
    if dst_scale is None or scaling != "jit":
        return
    with np.errstate(over="ignore", divide="ignore"):
        inverse = F32(1) / dst_scale.reshape(())
    if not np.isfinite(inverse):
        raise ConvTransposeError(
            f"dst_scale = {float(dst_scale.reshape(()))} has no finite float32 reciprocal;"
            f" oneDNN's JIT kernels multiply by 1 / dst_scale")


def _operands(input, filter, bias, scales, zero_points, dst_dtype):
    """The operands checked: source, weights, bias, the three scales and two zero
    points (None where not set) and the destination's oneDNN name."""
    data = typed_operand("input", input, (UINT8, INT8),
                         "oneDNN's int8 deconvolution takes a u8 or s8 source")
    weights = typed_operand("filter", filter, (INT8,),
                            "oneDNN's int8 deconvolution takes s8 weights")
    scales = tuple(_optional_scale(name, value) for name, value in
                   zip(("src_scale", "wei_scales", "dst_scale"), scales))
    zero_points = tuple(_optional_zero_point(name, value) for name, value in
                        zip(("src_zero_point", "dst_zero_point"), zero_points))
    return data, weights, _bias(bias), scales, zero_points, onednn_dst_type(dst_dtype)


def _resolve(data, weights, bias, scales, zero_points, dst_type, scaling, geometry):
    """The plan of the shape twin (memoised), then the check of ``dst_scale``'s
    reciprocal that the shapes alone cannot make."""
    shapes = [None if v is None else v.shape for v in scales + zero_points]
    plan = resolve_plan(
        _dialects.onednn_quantized_conv_transpose, data.shape, weights.shape,
        None if bias is None else bias.shape, src_scale=shapes[0], wei_scales=shapes[1],
        dst_scale=shapes[2], src_zero_point=shapes[3], dst_zero_point=shapes[4],
        dst_dtype=dst_type, scaling=scaling, **geometry)
    _check_reciprocal(scales[2], scaling)
    return plan


def _offset_operands(weights, src_zero_point) -> tuple[np.ndarray, int, np.dtype]:
    """``(weights, offset, centred)`` of :func:`offset_requantized` on the source as it
    is: the weights widened (kept in the weights memo), the zero point, the centred
    source's type (as :func:`_int32_sum`'s)."""
    zero = 0 if src_zero_point is None else int(src_zero_point.reshape(()))
    narrow = np.int16 if abs(zero) <= 2 ** 15 - 256 else np.int64
    wide = kept_weights(weights, ("int64",), lambda w: w.astype(np.int64))
    return wide, zero, np.dtype(narrow)


def _requantization(plan, steps):
    """The compiled pass of :func:`onednn_requantize`'s ``steps`` on channels-last sums
    (:func:`convtranspose._kernels.requantize.onednn_requantization`), or None without
    numba."""
    if not host().numba:
        return None
    from .._kernels.requantize import onednn_requantization

    attributes, divides, bounds, dtype = _kernel_steps(*steps)
    channels = plan.output_shape[-1 if plan.channels_last else 1]
    return onednn_requantization(attributes, divides, bounds, dtype, channels,
                                 host().threads)


def _kernel_steps(src_scale, wei_scales, bias, dst_scale, dst_zero_point, dst_type,
                  scaling) -> tuple:
    """``(attributes, divides, bounds, dtype)`` of the compiled pass
    (:func:`convtranspose._kernels.requantize.onednn_requantized`) for
    :func:`onednn_requantize`'s steps."""
    dtype, low, high = _DESTINATIONS[dst_type]
    with np.errstate(over="ignore", divide="ignore"):
        dst = None if dst_scale is None else (
            dst_scale.reshape(()) if scaling != "jit" else F32(1) / dst_scale.reshape(()))
    attributes = (None if src_scale is None else src_scale.reshape(()), wei_scales, bias,
                  dst, None if dst_zero_point is None else F32(dst_zero_point.reshape(())))
    return attributes, scaling != "jit", (low, high), dtype


def _int32_sum(plan, data, weights, src_zero_point, output_shape) -> np.ndarray:
    """``sum (src - src_zero_point) * wei``, exact, wrapped to int32 as oneDNN's int32
    accumulators wrap (its zero-point compensation is integer arithmetic too)."""
    zero = 0 if src_zero_point is None else int(src_zero_point.reshape(()))
    # 8-bit values minus a zero point within int16's range less 255 fit int16: a
    # quarter of int64's bytes to write and for the sums to read.
    narrow = np.int16 if abs(zero) <= 2 ** 15 - 256 else np.int64
    centred = np.subtract(data, narrow(zero), dtype=narrow)
    largest = max(abs(int(data.min(initial=0)) - zero), abs(int(data.max(initial=0)) - zero),
                  1) * 128
    wide = kept_weights(weights, ("int64",), lambda w: w.astype(np.int64))
    total = exact_sum(plan, centred, wide, None, names=("input", "filter", "bias"),
                      largest_product=largest, output_shape=output_shape)
    if total.dtype == np.int32:  # already int32's values (the VNNI sums' type when no
        return total             # sum can leave it): wrapping would change nothing
    return wrap32(total.astype(np.int64))


@remembers_quantized_calls
def onednn_quantized_conv_transpose(
        input: ArrayLike, filter: ArrayLike, bias: ArrayLike | None = None, *,
        src_scale: ArrayLike | None = None, wei_scales: ArrayLike | None = None,
        dst_scale: ArrayLike | None = None, src_zero_point: ArrayLike | None = None,
        dst_zero_point: ArrayLike | None = None, dst_dtype: object = "u8",
        scaling: str = "jit", strides: PerAxis = None, pads_begin: PerAxis = None,
        pads_end: PerAxis = None, dilations: PerAxis = None, auto_pad: str = "none",
        output_padding: PerAxis = None, groups: int = 1, data_format: str = "NXC",
        filter_format: str = "XIO", weights_format: str | None = None,
        output_shape: ShapeLike | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """oneDNN's int8 deconvolution (u8/s8 source, s8 weights) with its attributes::

        acc = sum (src - src_zero_point) * wei                  exact, int32
        v   = float32(acc) * src_scale * wei_scales[oc] + bias[oc]
        dst = saturate(round_half_to_even(v * float32(1 / dst_scale) + dst_zero_point))

    each later step one float32 operation in this order, f32 unrounded; the geometry
    and layouts are :func:`conv_transpose`'s, any rank, groups (docs/quantization.md).

    Parameters
    ----------
    input : array_like of uint8 or int8
        The source, ``(N, X..., I)`` (NXC, the default) or ``(N, I, X...)`` (NCX).
    filter : array_like of int8
        The weights in ``filter_format`` (default ``XIO``); their zero point is 0.
    bias : array_like of float, optional
        ``(O * groups,)`` as float32, added after the source and weight scales.
    src_scale, dst_scale : float, optional
        The source and destination scales, one float32 value each, positive and
        finite.  None: not set (scale 1, the step skipped).
    wei_scales : float or array_like of float, optional
        One value, or ``(O * groups,)``, one per output channel.  None: not set.
    src_zero_point, dst_zero_point : int, optional
        One value each in int32's range (oneDNN's s32 zero points).  None: not set.
    dst_dtype : {"u8", "s8", "s32", "f32"} or a NumPy dtype, optional
        The destination type (default ``"u8"``; or uint8, int8, int32, float32).
    scaling : {"jit", "reference"}, optional
        Multiply by ``float32(1 / dst_scale)`` as oneDNN's x64 JIT kernels do (the
        default), or divide by ``dst_scale`` as its reference implementation does.
    strides, pads_begin, pads_end, dilations, auto_pad, output_padding, groups, data_format, filter_format, weights_format, output_shape
        As in :func:`conv_transpose`.
    out : ndarray, optional
        Receives the result (its shape, the destination dtype).

    Returns
    -------
    ndarray of uint8, int8, int32 or float32
        ``(N, Y..., O * groups)`` for NXC or ``(N, O * groups, Y...)`` for NCX.

    Raises
    ------
    TypeError
        ``input`` not u8/s8, ``filter`` not s8, a scale or bias not float, a zero point
        not an integer.
    ConvTransposeError
        As in :func:`conv_transpose`; an attribute of the wrong shape, a scale (or with
        ``"jit"`` the reciprocal of ``dst_scale``) not positive and finite, a zero
        point outside int32, a bias not finite, an unknown ``dst_dtype`` or ``scaling``.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x, w = np.array([[[10], [20], [30]]], np.uint8), np.array([[[1]], [[2]], [[3]]], np.int8)
    >>> ct.onednn_quantized_conv_transpose(x, w, src_scale=0.5, wei_scales=0.25,
    ...     dst_scale=0.125, src_zero_point=10, dst_zero_point=100, strides=2)[..., 0]
    array([[100, 100, 110, 120, 150, 140, 160]], dtype=uint8)
    """
    plan, data, weights, src_zero_point, steps = _resolved(
        input, filter, bias, (src_scale, wei_scales, dst_scale),
        (src_zero_point, dst_zero_point), dst_dtype, scaling,
        dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
             dilations=dilations, auto_pad=auto_pad, output_padding=output_padding,
             groups=groups, data_format=data_format, filter_format=filter_format,
             weights_format=weights_format, output_shape=output_shape))
    check_out(out, plan.output_shape, _DESTINATIONS[steps[5]][0])
    result = _compute(plan, data, weights, src_zero_point, steps, output_shape)
    return result if out is None else _copied(result, out)


def _resolved(input, filter, bias, scales, zero_points, dst_dtype, scaling,
              geometry: dict) -> tuple:
    """``(plan, input, filter, src_zero_point, steps)``: the operands checked and the
    plan resolved, as :func:`onednn_quantized_conv_transpose` takes them; ``steps``
    are :func:`onednn_requantize`'s arguments after the sums and the channel axis."""
    data, weights, offsets, scales, zero_points, dst_type = _operands(
        input, filter, bias, scales, zero_points, dst_dtype)
    plan = _resolve(data, weights, offsets, scales, zero_points, dst_type, scaling, geometry)
    steps = (scales[0], scales[1], offsets, scales[2], zero_points[1], dst_type, scaling)
    return plan, data, weights, zero_points[0], steps


def prepare_onednn(arguments: dict, data: np.ndarray):
    """``call(input)``: :func:`onednn_quantized_conv_transpose` of ``arguments`` (every
    argument but ``input`` and ``out``, by name) for ndarray data of ``data``'s shape
    and dtype, its operands checked and plan resolved once, then
    :func:`convtranspose._frontends.quantized.prepared_offset_call` (what it keeps, and
    when it returns None)."""
    a = with_defaults(onednn_quantized_conv_transpose, input=data, **arguments)
    plan, data, weights, src_zero_point, steps = _resolved(
        data, a["filter"], a["bias"], tuple(a[name] for name in _SCALES),
        (a["src_zero_point"], a["dst_zero_point"]), a["dst_dtype"], a["scaling"],
        {name: a[name] for name in _GEOMETRY})
    from .._kernels.int8 import in_layout

    return prepared_offset_call(plan, data, *_offset_operands(weights, src_zero_point),
                                _requantization(plan, steps), a["output_shape"],
                                finish=lambda result: in_layout(result, plan.channels_last))


#: The scales' and the geometry's arguments.
_SCALES = ("src_scale", "wei_scales", "dst_scale")
_GEOMETRY = ("strides", "pads_begin", "pads_end", "dilations", "auto_pad", "output_padding",
             "groups", "data_format", "filter_format", "weights_format", "output_shape")


def _compute(plan, data, weights, src_zero_point, steps, output_shape) -> np.ndarray:
    """The int32 sums, then :func:`onednn_requantize` (``steps``: its arguments after
    the sums and the channel axis): by the integer kernels on the source as it is
    (:func:`offset_requantized` of :func:`_offset_operands`: each piece of output lines
    by the thread that summed it), else :func:`_int32_sum` of the centred source."""
    # Channels-last sums, requantized by the threads that sum them: a channels-first
    # layer's result is a view of them.
    requantization = _requantization(plan, steps)
    if requantization is not None:
        from .._kernels.int8 import in_layout

        result = offset_requantized(plan, data, *_offset_operands(weights, src_zero_point),
                                    requantization, output_shape)
        if result is not None:
            return in_layout(result, plan.channels_last)
    acc = _int32_sum(plan, data, weights, src_zero_point, output_shape)
    return onednn_requantize(acc, -1 if plan.channels_last else 1, *steps)


def _copied(result: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.copyto(out, result)
    return out
