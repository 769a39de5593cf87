"""TFLite / LiteRT's quantized ``TRANSPOSE_CONV``: uint8, int8 and int16 x int8.

Bit for bit as TFLite's reference kernels compute it; three kernels, one rule each
(docs/quantization.md):

- uint8 input, weights and output, per-tensor scales, int32 bias: ``acc = sum (input
  - input_zp)(weights - weights_zp) + bias`` in int32, scaled by the multiplier of
  ``double(float32(input_scale * weights_scale)) / output_scale``;
- int8 input and output, int8 weights per tensor or per output channel with zero point
  0, int32 bias: the same sum, scaled per output channel by ``input_scale *
  weights_scale[c] / output_scale`` computed in double;
- int16 input and output (zero points 0), int8 weights as above, int64 bias: the sum
  in int64, scaled by the 64-bit rule; with ``quantized_bias_type="INT32"`` an int32
  bias, the sum in int32 and the 32-bit rule.

Each scale becomes a 32-bit multiplier and a shift (``QuantizeMultiplier``) and each
sum is scaled by :mod:`convtranspose._frontends.fixed_point`'s integer rules, then the
output zero point is added and the result clamped to the output type (narrowed by the
fused activation).  The sum itself is exact here (:func:`exact_sum`); the 8-bit
kernels' int32 accumulator is then wrapped to 32 bits, as TFLite's wraps when a layer
overflows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .._runtime.caches import register
from .._runtime.memo import frozen
from .._runtime.target import host
from .fixed_point import (
    activation_range,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_64,
    quantize_multiplier,
    wrap32,
)
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
from .specs import resolve_plan

if TYPE_CHECKING:
    from .._typing import ArrayLike, ShapeLike

__all__ = ["accumulator", "tflite_quantized_transpose_conv", "tflite_requantization"]

UINT8, INT8, INT16 = np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.int16)
INT32, INT64 = np.dtype(np.int32), np.dtype(np.int64)
#: input dtype -> weights dtype, TFLite's quantized kernels.
_WEIGHTS: dict[np.dtype, np.dtype] = {UINT8: UINT8, INT8: INT8, INT16: INT8}
#: The largest shift each scaling rule computes without an undefined C++ shift: the
#: 32-bit rule multiplies by ``1 << shift``, the 64-bit one shifts by ``15 - shift``.
_LARGEST_SHIFT = {INT32: 30, INT64: 14}


def accumulator(input_dtype: np.dtype, quantized_bias_type: str | None) -> np.dtype:
    """The accumulator (and bias) type of TFLite's kernel: int32 for uint8 and int8;
    int64 for int16 unless ``quantized_bias_type`` is ``"INT32"``."""
    if input_dtype != INT16 and quantized_bias_type == "INT64":
        raise ConvTransposeError(
            f"quantized_bias_type 'INT64' is for int16 inputs; TFLite's {input_dtype}"
            f" kernel has an int32 bias and accumulator")
    return INT32 if input_dtype != INT16 or quantized_bias_type == "INT32" else INT64


def _operands(input, weights, bias, zero_points, scales, quantized_bias_type) -> tuple[
        np.ndarray, np.ndarray, np.ndarray | None, tuple[np.ndarray, ...],
        tuple[np.ndarray, ...]]:
    """The operands checked: ``input``, ``weights`` and ``bias`` of one of TFLite's
    kernels, the three zero points (int64) and the three scales (float32)."""
    input = typed_operand("input", input, tuple(_WEIGHTS), "TRANSPOSE_CONV's quantized kernels")
    weights = typed_operand("weights", weights, (_WEIGHTS[input.dtype],),
                      f"with a {input.dtype} input")
    bias_type = accumulator(input.dtype, quantized_bias_type)
    bias = None if bias is None else typed_operand(
        "bias", bias, (bias_type,), f"with a {input.dtype} input and quantized_bias_type"
        f" {quantized_bias_type!r}")
    zero_points = tuple(integer_zero_point(f"{name}_zero_point", value, dtype)
                        for name, value, dtype in zip(("input", "weights", "output"), zero_points,
                               (input.dtype, weights.dtype, input.dtype)))
    scales = tuple(float32_scale(f"{name}_scale", value, "TFLite stores it as float32")
                   for name, value in zip(("input", "weights", "output"), scales))
    return input, weights, bias, zero_points, scales


def _checked(input: np.ndarray, zero_points, per_channel: bool) -> None:
    """TFLite's rules on the zero points that the kernels' arithmetic assumes."""
    dtype = input.dtype
    if dtype != UINT8 and np.any(zero_points[1] != 0):
        raise ConvTransposeError(
            f"weights_zero_point = {zero_points[1].tolist()} but int8 weights are"
            f" symmetric in TFLite: zero point 0 (its {dtype} kernel ignores it)")
    if dtype == INT16 and (np.any(zero_points[0] != 0) or np.any(zero_points[2] != 0)):
        raise ConvTransposeError(
            f"input_zero_point = {zero_points[0].tolist()} and output_zero_point ="
            f" {zero_points[2].tolist()}, but TFLite's int16 activations have zero point 0")
    if dtype == UINT8 and per_channel:
        raise ConvTransposeError(
            "weights_scale holds one value per output channel, but TFLite quantizes uint8"
            " weights per tensor (per-channel weights are int8)")


def tflite_requantization(input_dtype: np.dtype, input_scale: np.ndarray,
                          weights_scale: np.ndarray, output_scale: np.ndarray,
                          channels: int, acc_type: np.dtype = INT32
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel, the multiplier and shift TFLite derives from the scales
    (``PopulateConvolutionQuantizationParams``).

    uint8: one real multiplier ``double(float32(input_scale * weights_scale)) /
    double(output_scale)`` (the float32 product of ``GetQuantizedConvolutionMultipler``);
    int8 and int16: ``double(input_scale) * double(weights_scale[c]) /
    double(output_scale)`` per channel; each through :func:`quantize_multiplier`.
    Raises ConvTransposeError for a multiplier whose shift the scaling rule of the
    accumulator ``acc_type`` cannot take (a real multiplier of ``2**30`` or more for
    int32, ``2**14`` for int64).
    """
    scales = np.broadcast_to(weights_scale.reshape(-1), (channels,))
    if input_dtype == UINT8:
        product = np.float32(input_scale.reshape(())) * np.float32(scales[0])
        reals = [float(product) / float(output_scale.reshape(()))] * channels
    else:
        reals = [float(input_scale.reshape(())) * float(s) / float(output_scale.reshape(()))
                 for s in scales]
    pairs = [quantize_multiplier(real) for real in reals]
    multiplier = np.array([m for m, _ in pairs], np.int64)
    shift = np.array([s for _, s in pairs], np.int64)
    if shift.size and shift.max() > _LARGEST_SHIFT[acc_type]:
        raise ConvTransposeError(
            f"input_scale * weights_scale / output_scale = {max(reals)} is too large:"
            f" TFLite's scaling of an {acc_type} sum takes a shift of at most"
            f" {_LARGEST_SHIFT[acc_type]}, this needs {int(shift.max())}")
    return multiplier, shift


def _requantized(acc, input, acc_type, multiplier, shift, output_zero_point,
                 bounds) -> np.ndarray:
    """The exact sum ``acc`` (NHWC) scaled, offset and clamped as TFLite's kernels do."""
    target = host()
    if target.numba:  # one compiled pass of the same int64 steps
        from .._kernels.requantize import fixed_point_requantized

        result = fixed_point_requantized(acc, multiplier, shift, int(output_zero_point.reshape(())),
                                         bounds, input.dtype, target.threads,
                                         wide=acc_type == INT64)
        if result is not None:
            return result
    if acc_type == INT64:  # int64 accumulator (int16 inputs)
        scaled = multiply_by_quantized_multiplier_64(acc, multiplier, shift)
    else:  # int32 accumulator: the exact sum wrapped as TFLite's int32 sum wraps
        scaled = multiply_by_quantized_multiplier(wrap32(acc), multiplier, shift)
    scaled = wrap32(scaled + output_zero_point.reshape(()))
    return np.clip(scaled, *bounds).astype(input.dtype)


#: :func:`tflite_requantization`'s results by scales, kept for repeated calls (its
#: Python loop over the channels took 0.2 ms of a 256-channel call); all forgotten
#: beyond this many.
_REQUANTIZATIONS_KEPT = 64
_requantizations: dict = {}
register("TFLite requantization multipliers", _requantizations.clear)


def _kept_requantization(input_dtype: np.dtype, scales: tuple, channels: int,
                         acc_type: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tflite_requantization` of ``scales`` (input, weights, output), kept in
    :data:`_requantizations` (read-only arrays); its refusals are raised each time."""
    key = (input_dtype.str, channels, acc_type.str) + tuple(
        (scale.dtype.str, scale.shape, scale.tobytes()) for scale in scales)
    pair = _requantizations.get(key)
    if pair is None:
        pair = tuple(frozen(array) for array in tflite_requantization(
            input_dtype, scales[0], scales[1], scales[2], channels, acc_type))
        if len(_requantizations) >= _REQUANTIZATIONS_KEPT:
            _requantizations.clear()
        _requantizations[key] = pair
    return pair


def _compute(plan, input, weights, bias, zero_points, scales, activation,
             acc_type) -> np.ndarray:
    """The exact sum of the centred operands, then TFLite's integer requantization: by
    the integer kernels on the input as it is, with its zero point's share subtracted
    and the bias added in the requantization's pass, each piece of output lines by the
    thread that summed it (:func:`_integer_steps`, :func:`offset_requantized`), else
    :func:`exact_sum` of the centred input and :func:`_requantized`."""
    filter_, multiplier, shift, bounds, requantization = _integer_steps(
        plan, input.dtype, weights, bias, zero_points, scales, activation, acc_type)
    if requantization is not None:
        result = offset_requantized(plan, input, filter_, int(zero_points[0].reshape(())),
                                    np.dtype(np.int32), requantization)
        if result is not None:
            return result
    data = np.subtract(input, zero_points[0].reshape(()), dtype=np.int32)
    span = [int(np.iinfo(t).max) - int(np.iinfo(t).min) for t in (input.dtype, weights.dtype)]
    acc = exact_sum(plan, data, filter_, bias, names=("input", "weights", "bias"),
                    largest_product=span[0] * span[1]).astype(np.int64, copy=False)
    return _requantized(acc, input, acc_type, multiplier, shift, zero_points[2], bounds)


def _integer_steps(plan, input_dtype, weights, bias, zero_points, scales, activation,
                   acc_type) -> tuple:
    """``(filter, multiplier, shift, bounds, requantization)``: the weights centred
    (int16; kept in the weights memo), the per-channel multipliers and shifts, the
    activation's bounds and the integer kernels' requantization
    (:func:`convtranspose._kernels.requantize.fixed_point_requantization`; None
    without numba)."""
    # The centred values fit int32 (16-bit inputs) and int16 (8-bit weights): the
    # smaller types are cheaper to convert and for the weights memo to compare.
    zero = zero_points[1].reshape((-1, 1, 1, 1) if zero_points[1].size > 1 else ())
    filter_ = kept_weights(weights, ("int16", zero.shape, zero.tobytes()),
                           lambda w: np.subtract(w, zero, dtype=np.int16))
    multiplier, shift = _kept_requantization(input_dtype, scales, plan.output_shape[-1],
                                             acc_type)
    bounds = activation_range(activation, scales[2].reshape(()),
                              int(zero_points[2].reshape(())), input_dtype)
    requantization = None
    if host().numba:
        from .._kernels.requantize import fixed_point_requantization

        requantization = fixed_point_requantization(
            multiplier, shift, int(zero_points[2].reshape(())), bounds, input_dtype, bias,
            plan.output_shape[-1], host().threads, wide=acc_type == INT64)
    return filter_, multiplier, shift, bounds, requantization


def _resolved(output_shape, weights, input, bias, zero_points, scales, padding, stride_h,
              stride_w, fused_activation_function, quantized_bias_type) -> tuple:
    """``(plan, input, weights, bias, zero_points, scales, acc_type)``: the operands
    checked and the plan resolved, as :func:`tflite_quantized_transpose_conv` takes
    them."""
    data, kernel, offsets, zero_points, scales = _operands(
        input, weights, bias, zero_points, scales, quantized_bias_type)
    plan = resolve_plan(
        _dialects.tflite_quantized_transpose_conv, output_shape, kernel.shape, data.shape,
        None if offsets is None else offsets.shape, padding=padding, stride_h=stride_h,
        stride_w=stride_w, fused_activation_function=fused_activation_function,
        quantized_bias_type=quantized_bias_type, **_parameter_shapes(zero_points, scales))
    _checked(data, zero_points, scales[1].size > 1 and kernel.shape[0] > 1)
    return (plan, data, kernel, offsets, zero_points, scales,
            accumulator(data.dtype, quantized_bias_type))


def prepare_tflite(arguments: dict, data: np.ndarray):
    """``call(input)``: :func:`tflite_quantized_transpose_conv` of ``arguments`` (every
    argument but ``input`` and ``out``, by name) for ndarray data of ``data``'s shape
    and dtype, its operands checked, plan resolved and requantization constants made
    once, then :func:`convtranspose._frontends.quantized.prepared_offset_call` (what it
    keeps, and when it returns None)."""
    a = with_defaults(tflite_quantized_transpose_conv, input=data, **arguments)
    tensors = ("input", "weights", "output")
    plan, data, kernel, offsets, zero_points, scales, acc_type = _resolved(
        a["output_shape"], a["weights"], data, a["bias"],
        tuple(a[f"{name}_zero_point"] for name in tensors),
        tuple(a[f"{name}_scale"] for name in tensors), a["padding"], a["stride_h"],
        a["stride_w"], a["fused_activation_function"], a["quantized_bias_type"])
    filter_, _, _, _, requantization = _integer_steps(
        plan, data.dtype, kernel, offsets, zero_points, scales,
        a["fused_activation_function"], acc_type)
    return prepared_offset_call(plan, data, filter_, int(zero_points[0].reshape(())),
                                np.dtype(np.int32), requantization)


@remembers_quantized_calls
def tflite_quantized_transpose_conv(
        output_shape: ShapeLike, weights: ArrayLike, input: ArrayLike,
        bias: ArrayLike | None = None, *, input_scale: ArrayLike, input_zero_point: ArrayLike,
        weights_scale: ArrayLike, weights_zero_point: ArrayLike, output_scale: ArrayLike,
        output_zero_point: ArrayLike, padding: str = "SAME", stride_h: int = 1,
        stride_w: int = 1, fused_activation_function: str = "NONE",
        quantized_bias_type: str | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """TFLite / LiteRT ``TRANSPOSE_CONV`` on quantized tensors, bit for bit: the op's
    inputs in its order, each tensor's ``scale`` and ``zero_point`` (as the interpreter's
    ``get_tensor_details()`` reports them) and the op's options::

        acc = sum (input - input_zero_point) * (weights - weights_zero_point) + bias
        y   = clamp(MultiplyByQuantizedMultiplier(acc, M[c], shift[c]) + output_zero_point)

    with ``M[c] * 2**(shift[c] - 31) ~= input_scale * weights_scale[c] / output_scale``
    (``QuantizeMultiplier``) and TFLite's integer rounding (docs/quantization.md).

    Parameters
    ----------
    output_shape : sequence of int
        ``[N, H, W, C_out]`` (the op's input 0).
    weights : array_like of uint8 or int8
        ``(C_out, KH, KW, C_in)`` (OHWI); uint8 with a uint8 input, else int8.
    input : array_like of uint8, int8 or int16
        ``(N, H, W, C_in)``; its dtype is the result's.
    bias : array_like, optional
        ``(C_out,)``, quantized with scale ``input_scale * weights_scale`` and zero point
        0: int32 (uint8, int8 inputs), int64 (int16 input) or int32 with
        ``quantized_bias_type="INT32"``.
    input_scale, output_scale, input_zero_point, output_zero_point : array_like
        One value each: scales positive (used as float32), zero points integers in the
        range of the input's dtype (0 for int16).
    weights_scale, weights_zero_point : array_like
        One value, or ``(C_out,)`` per output channel (int8 weights only); the zero
        point is 0 for int8 weights.
    padding, stride_h, stride_w
        As in :func:`tflite_transpose_conv`.
    fused_activation_function : {"NONE", "RELU", "RELU6", "RELU_N1_TO_1"}, optional
        Narrows the clamp to the activation's interval, quantized.
    quantized_bias_type : {None, "INT32", "INT64"}, optional
        For int16: an int64 (None) or int32 bias and accumulator, as the op's option.
    out : ndarray, optional
        Receives the result.

    Returns
    -------
    ndarray of the input's dtype, of shape ``output_shape``

    Raises
    ------
    TypeError
        Dtypes TFLite's kernels do not take; a zero point or scale of another kind.
    ConvTransposeError
        As in :func:`tflite_transpose_conv`; a parameter of the wrong shape, a scale not
        positive and finite, a zero point outside its type or not 0 where TFLite
        requires 0, per-channel uint8 weights, a multiplier too large for the rule.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([10, 20, 30], np.int8).reshape(1, 1, 3, 1)
    >>> w = np.array([1, 2, 3], np.int8).reshape(1, 1, 3, 1)
    >>> ct.tflite_quantized_transpose_conv([1, 1, 6, 1], w, x, input_scale=0.5,
    ...     input_zero_point=10, weights_scale=0.25, weights_zero_point=0, output_scale=0.125,
    ...     output_zero_point=-100, stride_w=2).ravel()
    array([-100, -100,  -90,  -80,  -50,  -60], dtype=int8)
    """
    plan, data, kernel, offsets, zero_points, scales, acc_type = _resolved(
        output_shape, weights, input, bias,
        (input_zero_point, weights_zero_point, output_zero_point),
        (input_scale, weights_scale, output_scale), padding, stride_h, stride_w,
        fused_activation_function, quantized_bias_type)
    check_out(out, plan.output_shape, data.dtype)
    result = _compute(plan, data, kernel, offsets, zero_points, scales,
                      fused_activation_function, acc_type)
    return result if out is None else _copied(result, out)


def _parameter_shapes(zero_points, scales) -> dict[str, tuple[int, ...]]:
    """The shape twin's keywords: each quantization parameter's shape."""
    shapes: dict[str, tuple[int, ...]] = {}
    for tensor, zero_point, scale in zip(("input", "weights", "output"), zero_points, scales):
        shapes[f"{tensor}_scale"], shapes[f"{tensor}_zero_point"] = scale.shape, zero_point.shape
    return shapes


def _copied(result: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.copyto(out, result)
    return out
