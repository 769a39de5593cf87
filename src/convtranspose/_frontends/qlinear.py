"""ONNX's quantized ConvTranspose: the QDQ pattern and ``com.microsoft.QLinearConvTranspose``.

The sum is exact (:mod:`.quantized`); only its requantization is a floating-point step,
done in float32 as ONNX's ``DequantizeLinear`` and ``QuantizeLinear`` do
(docs/quantization.md).  With the integer kernels the data are summed as they are and
one pass subtracts the zero point's share, adds the bias and requantizes
(:func:`integer_qlinear`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._execute.footprint import check_transposed
from .._plan import dialects as _dialects
from .._runtime.target import host
from .quantized import (
    check_out,
    exact_sum,
    float32_scale,
    float_sum,
    integer_kinds,
    integer_sooner,
    kept_entry,
    typed_operand,
)
from .repeated_quantized import remembers_quantized_calls
from .specs import as_array, canonical_weights, resolve_plan

if TYPE_CHECKING:
    from .._typing import ArrayLike, PerAxis, ShapeLike

__all__ = ["integer_qlinear", "prepare_qlinear", "qlinear_conv_transpose", "requantize"]


#: The element types of x, w and y (T1, T2 and T3 of the contrib operator).
_QUANTIZED = (np.dtype(np.uint8), np.dtype(np.int8))


def _quantized(name: str, value: object) -> np.ndarray:
    """An 8-bit quantized operand (uint8 or int8), or a TypeError."""
    return typed_operand(name, value, _QUANTIZED, "QLinearConvTranspose's quantized types")


def _zero_point(name: str, value: object, dtype: np.dtype) -> np.ndarray:
    """A zero point of ``dtype`` (its operand's type); a Python int is accepted if it
    fits, any other dtype is a TypeError (ONNX types a zero point as its tensor)."""
    if type(value) is int:
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ConvTransposeError(f"{name} = {value} is outside the range of {dtype}"
                                     f" [{info.min}, {info.max}]")
        return np.asarray(value, dtype)
    array = np.asarray(as_array(name, value))
    if array.dtype != dtype:
        raise TypeError(f"{name} has dtype {array.dtype} but its tensor has dtype {dtype};"
                        f" a zero point has its tensor's type")
    return array


def _bias(value: object) -> np.ndarray | None:
    if value is None:
        return None
    array = np.asarray(as_array("B", value))
    if array.dtype != np.int32:
        raise TypeError(f"B has dtype {array.dtype} but must be int32, quantized with scale"
                        f" x_scale * w_scale and zero point 0")
    return array


def _centred_weights(w: np.ndarray, w_zero_point: np.ndarray, group: int) -> np.ndarray:
    """``w - w_zero_point`` in int16 (two 8-bit values' difference: a quarter of int64's
    bytes for the weights memo to compare); a per-channel zero point ``(M,)`` is laid out on
    ``w``'s ``(C, M/group)`` axes: row ``c`` of group ``g = c // (C/group)`` and column
    ``j`` feed output channel ``g * M/group + j``."""
    zero: np.ndarray = w_zero_point.astype(np.int16).reshape(-1)
    if zero.size > 1:
        channels, per_group = w.shape[0], w.shape[1]
        zero = np.repeat(zero.reshape(group, per_group), channels // group, axis=0)
        zero = zero.reshape(zero.shape + (1,) * (w.ndim - 2))
    else:
        zero = zero.reshape(())
    return np.subtract(w, zero, dtype=np.int16)


def _centred_entry(w: np.ndarray, w_zero_point: np.ndarray, group: int) -> dict:
    """The weights memo's entry of :func:`_centred_weights` (:func:`kept_entry`)."""
    return kept_entry(w, ("centred", w_zero_point.dtype.str, w_zero_point.shape,
                           w_zero_point.tobytes(), group),
                       lambda w: _centred_weights(w, w_zero_point, group))


def _kept_centred_weights(w: np.ndarray, w_zero_point: np.ndarray, group: int) -> np.ndarray:
    """:func:`_centred_weights`, kept in the weights memo (:func:`kept_weights`)."""
    return _centred_entry(w, w_zero_point, group)["kept"]


def _operands(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
              B) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...],
                          tuple[np.ndarray, ...], np.ndarray | None]:
    """The operands checked: ``x``, ``w``, the three zero points, the three float32
    scales and the bias."""
    x, w = _quantized("x", x), _quantized("w", w)
    # A Python int y_zero_point means uint8, QuantizeLinear's default output type.
    y_type = np.dtype(np.uint8) if type(y_zero_point) is int else np.asarray(y_zero_point).dtype
    if y_type not in _QUANTIZED:
        raise TypeError(f"y_zero_point has dtype {y_type} but must be uint8 or int8;"
                        f" it sets the result's type")
    zero_points = (_zero_point("x_zero_point", x_zero_point, x.dtype),
                   _zero_point("w_zero_point", w_zero_point, w.dtype),
                   _zero_point("y_zero_point", y_zero_point, y_type))
    scales = tuple(float32_scale(name, value) for name, value in
                   (("x_scale", x_scale), ("w_scale", w_scale), ("y_scale", y_scale)))
    return x, w, zero_points, scales, _bias(B)


def _copied(result: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.copyto(out, result)
    return out


def requantize(acc: np.ndarray, multiplier: np.ndarray, y_scale: np.ndarray,
               y_zero_point: np.ndarray) -> np.ndarray:
    """``saturate(round_half_to_even(float32(acc) * multiplier / y_scale) + y_zero_point)``.

    ``acc`` is the exact integer sum ``(N, M, Y...)`` (int64, or float64 or float32 holding
    integers: all convert to the same float32); ``multiplier`` the float32 ``x_scale *
    w_scale`` per output channel ``(M,)`` (one float32 product, the scale ONNX gives the
    int32 bias); each step is one float32 operation, as ``DequantizeLinear`` of the sum
    followed by ``QuantizeLinear`` computes it.  The zero point is added in float32 too:
    exact below 2**24, and a value beyond that saturates either way.  With numba, one
    compiled pass does the same float32 steps (:func:`convtranspose._kernels.requantize.requantized`;
    a 64x128x128 result in 0.45 ms against the NumPy passes' 1.8).
    """
    target = host()
    if target.numba and acc.ndim >= 2:
        from .._kernels.requantize import requantized

        result = requantized(acc, multiplier, y_scale, y_zero_point, target.threads)
        if result is not None:
            return result
    return _numpy_requantize(acc, multiplier, y_scale, y_zero_point)


def _numpy_requantize(acc: np.ndarray, multiplier: np.ndarray, y_scale: np.ndarray,
                      y_zero_point: np.ndarray) -> np.ndarray:
    """:func:`requantize`'s NumPy steps."""
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    real = acc.astype(np.float32)
    real *= multiplier.reshape(shape)
    real /= y_scale.reshape(())
    np.rint(real, out=real)  # rint: half to even, as ONNX rounds
    real += y_zero_point.astype(np.float32).reshape(())
    info = np.iinfo(y_zero_point.dtype)
    np.clip(real, info.min, info.max, out=real)
    return real.astype(y_zero_point.dtype)


def _compute(plan, x, w, zero_points, scales, bias, output_shape) -> np.ndarray:
    """The integer kernels' fused call (:func:`integer_qlinear`), else the exact sum
    (:func:`exact_sum`; :func:`float_sum` at once where no integer kernel is worth
    trying, :func:`~.quantized.lanes_pay`), then :func:`requantize`."""
    target = host()
    if target.numba and not integer_kinds(target, plan):
        # Lanes mostly idle and one float32 pass sums the layer (depthwise, groups of
        # one or two outputs): it takes x centred as float32, bounded by its type.
        info, zero = np.iinfo(x.dtype), int(zero_points[0].reshape(()))
        acc = float_sum(plan, np.subtract(x, np.float32(zero), dtype=np.float32),
                        _kept_centred_weights(w, zero_points[1], plan.groups), bias,
                        names=("x", "w", "B"), output_shape=output_shape,
                        data_magnitude=max(zero - info.min, info.max - zero))
        return requantize(acc, _multiplier(plan, scales), scales[2], zero_points[2])
    call = integer_qlinear(plan, w, zero_points, scales, bias, output_shape)
    result = None if call is None else call(x)
    if result is not None:
        return result
    acc = exact_sum(plan, _centred(x, zero_points[0]),
                    _kept_centred_weights(w, zero_points[1], plan.groups), bias,
                    names=("x", "w", "B"), output_shape=output_shape)
    return requantize(acc, _multiplier(plan, scales), scales[2], zero_points[2])


def _centred(x: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """``x - zero_point``: centred 8-bit values span [-255, 255], int16 holds them."""
    return np.subtract(x, zero_point.astype(np.int16).reshape(()), dtype=np.int16)


def _multiplier(plan, scales: tuple[np.ndarray, ...]) -> np.ndarray:
    """The float32 ``x_scale * w_scale`` per output channel ``(M,)`` (a read-only view)."""
    return np.broadcast_to(scales[0].reshape(()) * scales[1].reshape(-1),
                           (plan.output_shape[1],))


def _qlinear_plan(data_shape, filter_, zero_points, scales, bias, **attributes):
    """The plan of :func:`qlinear_conv_transpose` for checked operands and its
    attributes."""
    return resolve_plan(
        _dialects.qlinear_conv_transpose, data_shape, scales[0].shape,
        zero_points[0].shape, filter_.shape, scales[1].shape, zero_points[1].shape,
        scales[2].shape, zero_points[2].shape, None if bias is None else bias.shape,
        **attributes)


def _integer_qlinear(plan, filter_, zero_points, scales, bias, output_shape):
    """``call(x)``: :func:`qlinear_conv_transpose` of checked operands by the integer
    kernels, set up for data of the plan's shape: the weights centred and the
    kernel's set-up made here (:func:`convtranspose._kernels.int8.prepare_blocked_sums`:
    the VNNI byte products where :func:`integer_sum` takes them first, then the int16
    pair products).  Each call checks the memory limit, sums ``x`` as it is, and
    requantizes in one pass that also subtracts ``x_zero_point``'s share (and any
    shift of the data into the kernel's range) and adds the bias
    (:func:`convtranspose._kernels.requantize.prepare_corrected`), each thread its
    lines as it sums them where the kernel allows
    (:meth:`convtranspose._kernels.int8.BlockedSums.requantized`).  The sums are
    exact, so the bytes are those of :func:`exact_sum` and :func:`requantize`.
    ``call`` returns None where the kernels decline the data; None instead of
    ``call`` where no integer kernel takes the layer (no numba, weights beyond
    int16, more than three axes, not x86, a multiplier not finite)."""
    target = host()
    if not target.numba:
        return None
    from .._kernels.int8 import in_layout, prepare_blocked_sums
    from .._kernels.requantize import prepare_corrected

    centred_weights = _kept_centred_weights(filter_, zero_points[1], plan.groups)
    weights = canonical_weights(plan, centred_weights)
    runs = [(kind, run) for kind, run in (
        (kind, prepare_blocked_sums(kind, plan.data_shape[0], weights, plan.axes,
                                    plan.channels_last, target))
        for kind in integer_kinds(target, plan)) if run is not None]
    requantize_sums = prepare_corrected(_multiplier(plan, scales), scales[2], zero_points[2],
                                        bias, target.threads)
    if not runs or requantize_sums is None:
        return None
    offset = int(zero_points[0].reshape(()))
    requantizers = [run.requantizer(offset, requantize_sums) for _, run in runs]
    # The function checks its centred int16 data: a stand-in of their shape (no copy).
    centred = np.broadcast_to(np.int16(0), plan.data_shape)

    def call(x: np.ndarray) -> np.ndarray | None:
        check_transposed(plan, centred, weights, None, output_shape)
        for (kind, run), requantize in zip(runs, requantizers):
            if not integer_sooner(plan, kind, target, lambda: run.sums(x, offset),
                                  lambda: float_sum(plan, _centred(x, zero_points[0]),
                                                    centred_weights, None)):
                return None
            result = requantize(x)
            if result is not None:
                return in_layout(result, plan.channels_last)
        return None

    return call


#: Set-ups of :func:`integer_qlinear` kept per filter and weight zero point, for as
#: many combinations of plan, scales, zero points and bias; all forgotten beyond.
_CALLS_KEPT = 8


def integer_qlinear(plan, filter_, zero_points, scales, bias, output_shape):
    """The function's ``call(x)`` by the integer kernels (:func:`_integer_qlinear`),
    kept with the filter's centred weights in the weights memo (which compares the
    filter value by value, so an edited filter gets new ones): a repeated call of
    the function sets up nothing (0.1-0.2 ms of a large layer's call, most of a small
    one's: ``benchmarks/results/quantized-calls-xeon.json``)."""
    target = host()
    # Kept beside the centred weights, in the filter's entry (not in the centred
    # weights' own: the calls hold those, which would then never be freed).
    calls = _centred_entry(filter_, zero_points[1], plan.groups).setdefault("calls", {})
    key = (plan, target, integer_kinds(target, plan), repr(output_shape),
           None if bias is None else bias.tobytes()) + tuple(
        (a.dtype.str, a.shape, a.tobytes()) for a in zero_points + scales)
    call = calls.get(key, False)
    if call is False:
        if len(calls) >= _CALLS_KEPT:
            calls.clear()
        call = calls[key] = _integer_qlinear(plan, filter_, zero_points, scales, bias,
                                             output_shape)
    return call


def prepare_qlinear(arguments: dict, data: np.ndarray):
    """``call(x)``: :func:`qlinear_conv_transpose` of ``arguments`` (every argument but
    ``x`` and ``out``, by name) set up for ndarray data of ``data``'s shape and dtype,
    for a prepared layer's repeated calls: the operands checked and the plan resolved
    here, once, then :func:`integer_qlinear`'s set-up (its own: the layer keeps it).
    ``call`` returns None where the kernels decline the data (the function then
    decides); None instead of ``call`` where :func:`integer_qlinear` is."""
    given = dict(arguments, B=arguments.get("B"))
    _, filter_, zero_points, scales, bias = _operands(
        data, given["x_scale"], given["x_zero_point"], given["w"], given["w_scale"],
        given["w_zero_point"], given["y_scale"], given["y_zero_point"], given["B"])
    attributes = {name: value for name, value in arguments.items()
                  if name not in _QLINEAR_OPERANDS}
    plan = _qlinear_plan(data.shape, filter_, zero_points, scales, bias, **attributes)
    return _integer_qlinear(plan, filter_, zero_points, scales, bias,
                            arguments.get("output_shape"))


#: :func:`qlinear_conv_transpose`'s operands after ``x`` (the rest are attributes).
_QLINEAR_OPERANDS = ("x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
                     "y_zero_point", "B")


@remembers_quantized_calls
def qlinear_conv_transpose(x: ArrayLike, x_scale: ArrayLike, x_zero_point: ArrayLike,
                           w: ArrayLike, w_scale: ArrayLike, w_zero_point: ArrayLike,
                           y_scale: ArrayLike, y_zero_point: ArrayLike,
                           B: ArrayLike | None = None, *, auto_pad: str = "NOTSET",
                           dilations: PerAxis = None, group: int = 1,
                           kernel_shape: ShapeLike | None = None,
                           output_padding: PerAxis = None,
                           output_shape: ShapeLike | None = None,
                           pads: ShapeLike | None = None, strides: PerAxis = None,
                           out: np.ndarray | None = None) -> np.ndarray:
    """``com.microsoft.QLinearConvTranspose``: ONNX ConvTranspose on quantized tensors.

    The ONNX QDQ pattern ``DequantizeLinear -> ConvTranspose -> QuantizeLinear`` with
    the sum exact in integers, each later step one float32 operation::

        acc = sum (x - x_zero_point) * (w - w_zero_point) + B
        y   = saturate(round_half_to_even(float32(acc) * float32(x_scale * w_scale[m])
                                          / y_scale) + y_zero_point)

    (docs/quantization.md: where a float32-summing runtime differs, by one unit).

    Parameters
    ----------
    x : array_like of uint8 or int8
        ``(N, C, D1, ..., Dn)``.
    x_scale, y_scale, x_zero_point : array_like
        One value each (shape ``()`` or ``(1,)``): scales positive, used as float32;
        the zero point of ``x``'s dtype (or a Python int in its range).
    w : array_like of uint8 or int8
        ``(C, M / group, K1, ..., Kn)``.
    w_scale, w_zero_point : array_like
        Per tensor (one value) or per output channel (``(M,)``: output channel ``m``
        uses ``w_scale[m]``), the zero point of ``w``'s dtype.  A QDQ model's
        ``DequantizeLinear(w, axis=1)``: pass ``np.tile(scale, group)``.
    y_zero_point : array_like of uint8 or int8
        One value; its dtype is the result's (a Python int means uint8, the default
        output type of ONNX QuantizeLinear).
    B : array_like of int32, optional
        ``(M,)``, quantized with scale ``x_scale * w_scale`` and zero point 0.
    auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides
        As in :func:`onnx_conv_transpose`.
    out : ndarray, optional
        Receives the result: the result's shape and ``y_zero_point``'s dtype.

    Returns
    -------
    ndarray of y_zero_point's dtype
        ``(N, M, Y...)``, as :func:`onnx_conv_transpose`'s.

    Raises
    ------
    TypeError
        ``x``, ``w``, ``y_zero_point`` not uint8/int8; a zero point not of its tensor's
        dtype; a scale not floating point; ``B`` not int32.
    ConvTransposeError
        As in :func:`onnx_conv_transpose`; a scale or zero point of the wrong shape; a
        scale not positive and finite.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([[[10, 20, 30]]], np.uint8)
    >>> w = np.array([[[1, 2, 3]]], np.int8)
    >>> ct.qlinear_conv_transpose(x, 0.5, 10, w, 0.25, np.int8(0), 0.125, 100, strides=2)
    array([[[100, 100, 110, 120, 150, 140, 160]]], dtype=uint8)
    """
    data, filter_, zero_points, scales, bias = _operands(
        x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B)
    plan = _qlinear_plan(data.shape, filter_, zero_points, scales, bias, auto_pad=auto_pad,
                         dilations=dilations, group=group, kernel_shape=kernel_shape,
                         output_padding=output_padding, output_shape=output_shape, pads=pads,
                         strides=strides)
    check_out(out, plan.output_shape, zero_points[2].dtype)
    result = _compute(plan, data, filter_, zero_points, scales, bias, output_shape)
    return result if out is None else _copied(result, out)
