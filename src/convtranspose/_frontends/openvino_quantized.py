"""OpenVINO's FakeQuantize pattern around ConvolutionBackpropData and
GroupConvolutionBackpropData: ``FakeQuantize(data)`` and ``FakeQuantize(filter)`` into the
float operation, optionally ``FakeQuantize`` of its result.

FakeQuantize-1 maps ``x`` to one of ``levels`` values (docs/quantization.md)::

    x <= min(input_low, input_high)  ->  output_low
    x >  max(input_low, input_high)  ->  output_high
    otherwise  round((x - input_low) / (input_high - input_low) * (levels - 1))
               / (levels - 1) * (output_high - output_low) + output_low

The level ``round(...)`` is decided exactly here (half to even, as OpenVINO's reference
rounds with ``nearbyint``): the quotient is compared with ``k + 1/2`` in values scaled
by the divisor, which float64 holds exactly for float16 and float32 operands of
comparable magnitude (:func:`_level` says when).  Every
tensor between the operations has the data's dtype, as in the model: the fake-quantized
data and filter, the float sum and the quantized output are each computed in float64 and
rounded once to that dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .quantized import check_out
from .specs import as_array, execute_plan, resolve_plan

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._typing import ArrayLike, PerAxis, ShapeLike

    #: ``(input_low, input_high, output_low, output_high, levels)``, or a mapping of them.
    FakeQuantizeArgs = Sequence[object] | Mapping[str, object]

__all__ = ["fake_quantize", "fake_quantize_convolution_backprop_data",
           "fake_quantize_group_convolution_backprop_data"]

#: The names of a FakeQuantize's four range inputs, in its input order (inputs 1 to 4).
RANGES = ("input_low", "input_high", "output_low", "output_high")


def _level(x: np.ndarray, low: np.ndarray, high: np.ndarray, steps: int) -> np.ndarray:
    """``round_half_to_even((x - low) / (high - low) * steps)`` decided exactly, for
    ``x`` strictly between ``low`` and ``high`` (either order).

    With ``num = (x - low) * steps`` and ``den = high - low`` (signs made positive), the
    level is ``k = floor(num / den)`` corrected by comparisons, then ``k + 1`` when ``2 *
    num > (2k + 1) * den``, ``k`` when smaller and the even one of the two on a tie.
    Every step is exact in float64 while a difference of two operands (at most 25 bits
    plus their exponent gap, for float32) times ``2 * levels`` fits in 53 bits: float32
    operands within a factor ``2**12`` of each other (or 0) and up to 65,537 levels.
    Beyond that the float64 rounding of ``x - low`` decides a value within ``2**-53`` of
    a half level.
    """
    num, den = (x - low) * steps, high - low
    sign = np.where(den < 0, -1.0, 1.0)
    num, den = num * sign, den * sign
    k = np.floor(num / den)
    k = np.where(k * den > num, k - 1, np.where((k + 1) * den <= num, k + 1, k))
    twice, boundary = 2 * num, (2 * k + 1) * den
    up = (twice > boundary) | ((twice == boundary) & (np.mod(k, 2) == 1))
    return k + up


def fake_quantize(x: np.ndarray, ranges: tuple[np.ndarray, ...], levels: int,
                  dtype: np.dtype) -> np.ndarray:
    """FakeQuantize-1 of ``x`` (float64, already of ``dtype``'s values) with the float64
    ``ranges`` (input_low, input_high, output_low, output_high, broadcastable to ``x``),
    rounded once to ``dtype``."""
    low, high, out_low, out_high = ranges
    steps = levels - 1
    with np.errstate(all="ignore"):  # il == ih and NaNs: the branches below decide
        level = _level(x, low, high, steps)
        inside = level / steps * (out_high - out_low) + out_low
    result = np.where(x <= np.minimum(low, high), out_low,
                      np.where(x > np.maximum(low, high), out_high, inside))
    return np.broadcast_to(result, x.shape).astype(dtype)


def _quantize_operand(name: str, value: object, dtype: np.dtype,
                      tensor_shape: tuple[int, ...] | None = None
                      ) -> tuple[tuple[np.ndarray, ...], int]:
    """``(input_low, input_high, output_low, output_high, levels)`` checked: four finite
    floating-point ranges (used in ``dtype``, FakeQuantize's one element type, then as
    float64) and an integer ``levels`` >= 2."""
    if isinstance(value, dict):
        try:
            value = tuple(value[key] for key in RANGES + ("levels",))
        except KeyError as missing:
            raise ConvTransposeError(f"{name} lacks {missing}; it takes {', '.join(RANGES)}"
                                     f" and levels") from None
    if not isinstance(value, (tuple, list)) or len(value) != 5:
        raise TypeError(f"{name} must be (input_low, input_high, output_low, output_high,"
                        f" levels), FakeQuantize's inputs 1 to 4 and its attribute; got"
                        f" {type(value).__name__}")
    *bounds, levels = value
    if isinstance(levels, (bool, np.bool_)) or not isinstance(levels, (int, np.integer)):
        raise TypeError(f"{name} levels must be an integer, got {type(levels).__name__}")
    if levels < 2:
        raise ConvTransposeError(f"{name} levels = {levels}, but FakeQuantize needs at least"
                                 f" 2 levels (it divides by levels - 1)")
    arrays = []
    for key, bound in zip(RANGES, bounds):
        array = np.asarray(as_array(f"{name} {key}", bound))
        if array.dtype.kind not in "fiu" or array.dtype == np.bool_:
            raise TypeError(f"{name} {key} has dtype {array.dtype} but must be a real number"
                            f" (FakeQuantize's ranges have the data's element type)")
        typed = array.astype(dtype)
        if not np.all(np.isfinite(typed)):
            raise ConvTransposeError(f"{name} {key} must be finite (as {dtype}), got"
                                     f" {array.tolist()}")
        arrays.append(typed.astype(np.float64))
    return tuple(arrays), int(levels)


def _float_operands(data, filter) -> tuple[np.ndarray, np.ndarray]:
    data, filter = as_array("data", data), as_array("filter", filter)
    for name, array in (("data", data), ("filter", filter)):
        if array.dtype.kind != "f":
            raise TypeError(f"{name} has dtype {array.dtype} but must be floating point"
                            f" (FakeQuantize takes and gives floating-point tensors)")
    if data.dtype != filter.dtype:
        raise TypeError(f"data has dtype {data.dtype} but filter has dtype {filter.dtype};"
                        f" ConvolutionBackpropData takes one element type")
    return np.asarray(data), np.asarray(filter)


def _range_shapes(quantize) -> tuple | None:
    """The shape twin's form of a checked ``(ranges, levels)``: ranges' shapes, levels."""
    if quantize is None:
        return None
    ranges, levels = quantize
    return tuple(r.shape for r in ranges) + (levels,)


def _compute(resolver, data, filter, output_shape, quantizers, attributes, out):
    """Fake-quantize ``data`` and ``filter``, the float operation on the results, then the
    output's FakeQuantize: every tensor rounded to the data's dtype in between."""
    dtype = data.dtype
    data_q, filter_q, output_q = (None if value is None
                                  else _quantize_operand(name, value, dtype)
                                  for name, value in zip(
                                      ("data_quantize", "filter_quantize", "output_quantize"),
                                      quantizers))
    plan = resolve_plan(resolver, data.shape, filter.shape, output_shape,
                        data_quantize=_range_shapes(data_q),
                        filter_quantize=_range_shapes(filter_q),
                        output_quantize=_range_shapes(output_q), **attributes)
    check_out(out, plan.output_shape, dtype)
    operands = []
    for array, quantize in ((data, data_q), (filter, filter_q)):
        wide = array.astype(np.float64)
        operands.append(wide if quantize is None else
                        fake_quantize(wide, quantize[0], quantize[1], dtype).astype(np.float64))
    with np.errstate(all="ignore"):  # infinities in, infinities out, as the float op
        result = execute_plan(plan, operands[0], operands[1], None,
                              output_shape=output_shape).astype(dtype)
    if output_q is not None:
        result = fake_quantize(result.astype(np.float64), output_q[0], output_q[1], dtype)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def fake_quantize_convolution_backprop_data(
        data: ArrayLike, filter: ArrayLike, output_shape: ShapeLike | None = None, *,
        data_quantize: FakeQuantizeArgs | None = None,
        filter_quantize: FakeQuantizeArgs | None = None,
        output_quantize: FakeQuantizeArgs | None = None,
        strides: PerAxis = None, pads_begin: PerAxis = None, pads_end: PerAxis = None,
        dilations: PerAxis = None,
        auto_pad: str = "explicit", output_padding: PerAxis = None,
        out: np.ndarray | None = None) -> np.ndarray:
    """OpenVINO's quantized ConvolutionBackpropData: the FakeQuantize-1 pattern.

    ``FakeQuantize(data)`` and ``FakeQuantize(filter)`` into ConvolutionBackpropData-1,
    optionally ``FakeQuantize`` of its result, as an OpenVINO IR carries a quantized
    layer::

        q(x) = output_low                           x <= min(input_low, input_high)
               output_high                          x >  max(input_low, input_high)
               round((x - input_low) / (input_high - input_low) * (levels - 1))
                 / (levels - 1) * (output_high - output_low) + output_low

    with the level rounded half to even and decided exactly; each tensor between the
    operations rounded once to the data's dtype (docs/quantization.md: where OpenVINO's
    CPU plugin differs in a last bit, or by one level at a near-tie).

    Parameters
    ----------
    data : array_like of float
        ``[N, C_IN, X1, ..., XD]``, before its FakeQuantize.
    filter : array_like of float
        ``[C_IN, C_OUT, K1, ..., KD]``, before its FakeQuantize; the data's dtype.
    output_shape
        As in :func:`convolution_backprop_data`.
    data_quantize, filter_quantize : sequence or dict, optional
        ``(input_low, input_high, output_low, output_high, levels)``: the FakeQuantize's
        inputs 1 to 4, each broadcastable (NumPy rules) to its tensor without enlarging
        it (one value, or per channel such as ``(1, C_IN, 1, 1)`` for the data and
        ``(1, C_OUT, 1, 1)`` or ``(C_IN, 1, 1, 1)`` for the filter), and its ``levels``
        attribute (an integer >= 2).  A dict with those five keys is accepted too.
        None: that tensor has no FakeQuantize and goes in as it is.
    output_quantize : sequence or dict, optional
        The same for a FakeQuantize of the result ``[N, C_OUT, Y...]``.
    strides, pads_begin, pads_end, dilations, auto_pad, output_padding
        As in :func:`convolution_backprop_data`.
    out : ndarray, optional
        Receives the result (its shape and the data's dtype).

    Returns
    -------
    ndarray of the data's dtype
        ``[N, C_OUT, Y1, ..., YD]``.

    Raises
    ------
    TypeError
        ``data`` or ``filter`` not floating point or of different dtypes; a quantize
        argument not a 5-sequence, a range not a real number, ``levels`` not an integer.
    ConvTransposeError
        As in :func:`convolution_backprop_data`; ``levels`` below 2, a range not finite
        or not broadcastable to its tensor.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.array([[[0.1, 0.49, 2.0]]], np.float32)
    >>> filter = np.array([[[1.0, 0.3]]], np.float32)
    >>> ct.fake_quantize_convolution_backprop_data(
    ...     data, filter, data_quantize=(0, 1, 0, 1, 3), filter_quantize=(0, 1, 0, 1, 3))
    array([[[0.  , 0.5 , 1.25, 0.5 ]]], dtype=float32)
    """
    data_, filter_ = _float_operands(data, filter)
    return _compute(_dialects.fake_quantize_convolution_backprop_data, data_, filter_,
                    output_shape, (data_quantize, filter_quantize, output_quantize),
                    dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                         dilations=dilations, auto_pad=auto_pad,
                         output_padding=output_padding), out)


def fake_quantize_group_convolution_backprop_data(
        data: ArrayLike, filter: ArrayLike, output_shape: ShapeLike | None = None, *,
        data_quantize: FakeQuantizeArgs | None = None,
        filter_quantize: FakeQuantizeArgs | None = None,
        output_quantize: FakeQuantizeArgs | None = None,
        strides: PerAxis = None, pads_begin: PerAxis = None, pads_end: PerAxis = None,
        dilations: PerAxis = None,
        auto_pad: str = "explicit", output_padding: PerAxis = None,
        out: np.ndarray | None = None) -> np.ndarray:
    """OpenVINO's quantized GroupConvolutionBackpropData: the FakeQuantize-1 pattern.

    As :func:`fake_quantize_convolution_backprop_data`, around
    GroupConvolutionBackpropData-1.

    Parameters
    ----------
    data : array_like of float
        ``[N, G * C_IN, X1, ..., XD]``.
    filter : array_like of float
        ``[G, C_IN, C_OUT, K1, ..., KD]``; per-channel filter ranges broadcast to it
        (``(G, 1, C_OUT, 1, 1)`` per output channel).
    output_shape, data_quantize, filter_quantize, output_quantize, strides, pads_begin, pads_end, dilations, auto_pad, output_padding, out
        As in :func:`fake_quantize_convolution_backprop_data`.

    Returns
    -------
    ndarray of the data's dtype
        ``[N, G * C_OUT, Y1, ..., YD]``.

    Raises
    ------
    TypeError, ConvTransposeError
        As in :func:`fake_quantize_convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.array([[[0.7, 0.7], [0.2, 0.7]]], np.float32)   # G=2, C_IN=1
    >>> filter = np.ones((2, 1, 1, 2), np.float32)               # each group: 1 -> 1
    >>> ct.fake_quantize_group_convolution_backprop_data(
    ...     data, filter, data_quantize=(0, 1, 0, 1, 2), filter_quantize=(0, 1, 0, 1, 2))
    array([[[1., 2., 1.],
            [0., 1., 1.]]], dtype=float32)
    """
    data_, filter_ = _float_operands(data, filter)
    return _compute(_dialects.fake_quantize_group_convolution_backprop_data, data_, filter_,
                    output_shape, (data_quantize, filter_quantize, output_quantize),
                    dict(strides=strides, pads_begin=pads_begin, pads_end=pads_end,
                         dilations=dilations, auto_pad=auto_pad,
                         output_padding=output_padding), out)
