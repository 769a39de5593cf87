"""Quantized transposed convolution: ONNX's QDQ ConvTranspose and QLinearConvTranspose.

The sum is exact: ``acc = sum (x - x_zero_point) * (w - w_zero_point) + B`` is computed
by the library's kernels on float64 operands where every partial sum is an integer
below 2**53 (so each operation is exact, :func:`sum_dtype`), else on int64 operands
(which accumulate in int64; no 8-bit layer overflows it); only the requantization of
``acc`` is a floating-point step, done in float32 as ONNX's ``DequantizeLinear`` and
``QuantizeLinear`` do (docs/quantization.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._execute.footprint import check_transposed
from .._execute.transposed import transposed_convolution
from .._plan import dialects as _dialects
from .._plan.geometry import taps_per_output
from .._runtime.machine import has_vnni
from .._runtime.memo import derived_from, frozen, own
from .._runtime.target import host
from .specs import as_array, canonical_weights, execute_plan, resolve_plan

if TYPE_CHECKING:
    from .._typing import ArrayLike, PerAxis, ShapeLike

__all__ = ["check_out", "exact_sum", "float32_scale", "integer_qlinear", "integer_sum",
           "integer_zero_point", "kept_weights", "offset_sums", "prepare_qlinear",
           "qlinear_conv_transpose", "requantize", "sum_dtype", "typed_operand"]

#: The element types of x, w and y (T1, T2 and T3 of the contrib operator).
_QUANTIZED = (np.dtype(np.uint8), np.dtype(np.int8))


def typed_operand(name: str, value: object, dtypes: tuple[np.dtype, ...],
                  why: str) -> np.ndarray:
    """``value`` as an array of one of ``dtypes``, or a TypeError that says ``why``."""
    array = np.asarray(as_array(name, value))
    if array.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {array.dtype} but must be"
                        f" {' or '.join(map(str, dtypes))} ({why})")
    return array


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


def integer_zero_point(name: str, value: object, dtype: np.dtype) -> np.ndarray:
    """Zero points of any integer type (frameworks that store them as plain integers,
    whatever the tensor's type) within ``dtype``'s range, as int64, or an error."""
    array = np.asarray(as_array(name, np.int64(value) if type(value) is int else value))
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} has dtype {array.dtype} but must be an integer")
    info = np.iinfo(dtype)
    wide = array.astype(np.int64)
    if wide.size and not (info.min <= wide.min() and wide.max() <= info.max):
        raise ConvTransposeError(f"{name} = {array.tolist()} is outside the range of the"
                                 f" {dtype} tensor [{info.min}, {info.max}]")
    return wide


def float32_scale(name: str, value: object, why: str = "it is used as float32") -> np.ndarray:
    """A scale as float32 (the operator's type; a float64 scale is rounded to float32
    first), positive and finite, or an error; ``why`` says why it must be floating point."""
    array = np.asarray(as_array(name, value))
    if array.dtype.kind != "f":
        raise TypeError(f"{name} has dtype {array.dtype} but must be floating point"
                        f" ({why})")
    with np.errstate(over="ignore"):  # too large for float32: refused below, as inf
        scale = array.astype(np.float32)
    # One value (the common per-tensor scale) in Python: NumPy's reductions cost
    # microseconds of a small layer's call, three times over.
    valid = (0 < float(scale.reshape(-1)[0]) < math.inf if scale.size == 1
             else bool(np.all(np.isfinite(scale) & (scale > 0))))
    if not valid:
        raise ConvTransposeError(f"{name} must be positive and finite (as float32), got"
                                 f" {array.tolist()}")
    return scale


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


def kept_weights(w: np.ndarray, key: tuple, make) -> np.ndarray:
    """``make(w)`` (the weights as the exact sum takes them: centred, widened), kept in
    the weights memo with ``w`` under ``key`` (compared value by value: an edited filter
    or another zero point gives new ones) and marked as the memo's own
    (:func:`convtranspose._runtime.memo.own`), so that the byte products find their
    packed weights without comparing the derived copy again: 0.05 ms of comparing the
    8-bit filter instead of 0.3 ms of centring and comparing for a DCGAN 256->128 4x4
    filter.  A prepared layer's filter is itself owned, so its calls compare nothing.
    The memo's budget counts the 8-bit filter's bytes twice; what is kept for it (the
    derived copy and the packed bytes) takes about three times them."""
    return _kept_entry(w, key, make)["kept"]


def _kept_entry(w: np.ndarray, key: tuple, make) -> dict:
    """:func:`kept_weights`' entry in the weights memo: ``"kept"``, the weights, and
    whatever else is kept with them (it goes when they go)."""
    derived = derived_from(w, "kept", *key)
    if "kept" not in derived:
        derived["kept"] = own(frozen(make(w)))
    return derived


def _centred_entry(w: np.ndarray, w_zero_point: np.ndarray, group: int) -> dict:
    """The weights memo's entry of :func:`_centred_weights` (:func:`_kept_entry`)."""
    return _kept_entry(w, ("centred", w_zero_point.dtype.str, w_zero_point.shape,
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


def check_out(out: object, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse an ``out`` that cannot receive a quantized result of ``shape`` and ``dtype``."""
    if out is None:
        return
    if not isinstance(out, np.ndarray) or out.dtype != dtype:
        raise TypeError(f"out must be a numpy.ndarray of dtype {dtype} (the result's), got"
                        f" {getattr(out, 'dtype', type(out).__name__)}")
    if out.shape != shape:
        raise ConvTransposeError(f"out has shape {out.shape}, but the result has shape {shape}")
    if not out.flags.writeable:
        raise ConvTransposeError("out is read-only")


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


#: Below this magnitude every integer is a float64 (53-bit significand).
FLOAT64_EXACT = 2 ** 53


def sum_dtype(plan, bias: np.ndarray | None, largest_product: int = 255 ** 2) -> np.dtype:
    """The operand dtype the exact sum runs in: float64 where no sum can reach 2**53,
    else int64.

    The centred operands are integers whose products have magnitude at most
    ``largest_product`` (``255**2`` for two 8-bit operands minus their zero points), so
    every partial sum of one output (at most ``K = C/group * prod(kernel)`` products
    plus the bias) is an integer of magnitude below ``K * largest_product + max|B|``.
    While that is below 2**53 every float64 multiply and add is exact, in any order and
    by any of the algorithms (all sum products; none transforms the operands), so
    float64 gives the integer sum exactly, through BLAS and about 25 times faster than
    the int64 kernels.
    """
    channels = plan.data_shape[1 if plan.data_format == "NCX" else -1]
    taps = channels // plan.groups * int(np.prod(plan.kernel_shape))
    largest = taps * largest_product + (0 if bias is None or bias.size == 0
                                        else int(np.abs(bias.astype(np.int64)).max()))
    return np.dtype(np.float64 if largest < FLOAT64_EXACT else np.int64)


#: Below this magnitude every integer is a float32 (24-bit significand).
FLOAT32_EXACT = 2 ** 24


def _magnitude(array: np.ndarray) -> int:
    """The largest magnitude in an integer array (two reductions, no temporary)."""
    return max(-int(array.min(initial=0)), int(array.max(initial=0)))


def float32_channels(plan, data: np.ndarray, weights: np.ndarray) -> int:
    """How many input channels (per group) one float32 pass may sum exactly: every
    partial sum of one output is then an integer of magnitude at most
    ``channels * taps_per_output * max|data| * max|weights|`` <= 2**24, so each
    float32 multiply and add is exact, in any order and by any algorithm.  0 where not
    even one channel's taps fit (the float64 or int64 path then runs)."""
    largest = _magnitude(data) * _magnitude(weights) * taps_per_output(plan.axes)
    return FLOAT32_EXACT // largest if largest else FLOAT32_EXACT


def _vnni_bytes(target) -> bool:
    """Whether the integer sums try the VNNI byte products first (512-bit vectors and
    AVX512-VNNI)."""
    return target.vector_bytes == 64 and has_vnni()


def _integer_kinds(target) -> tuple[str, ...]:
    """The blocked integer kernels' kinds of word, in the order they are tried: VNNI's
    bytes where :func:`_vnni_bytes`, then int16 pairs."""
    return (("bytes",) if _vnni_bytes(target) else ()) + ("halves",)


def offset_sums(plan, data: np.ndarray, weights: np.ndarray, offset: int,
                centred: np.dtype, output_shape=None):
    """``(acc, factor, share)``: the exact sums of ``data - offset`` (a dialect's data
    and zero point, not centred) with the centred ``weights``, by the first blocked
    integer kernel that takes them (:meth:`convtranspose._kernels.int8.BlockedSums.sums`:
    the sums are ``acc - factor * share``, channels last), for a requantization that
    subtracts the share and adds the bias in its own pass; the memory check is the
    dialect's on its data centred as ``centred``.  None where no kernel takes them (no
    numba, not x86, more than three axes, operands out of range): the dialect then
    centres its data and runs :func:`exact_sum`."""
    target = host()
    if not target.numba:
        return None
    from .._kernels.int8 import prepare_blocked_sums

    check_transposed(plan, np.broadcast_to(centred.type(0), data.shape), weights, None,
                     output_shape)
    weights = canonical_weights(plan, weights)
    for kind in _integer_kinds(target):
        sums = prepare_blocked_sums(kind, data.shape[0], weights, plan.axes,
                                    plan.channels_last, target)
        summed = None if sums is None else sums.sums(data, offset)
        if summed is not None:
            return summed
    return None


def integer_sum(plan, data: np.ndarray, weights: np.ndarray, output_shape,
                bias: np.ndarray | None = None) -> np.ndarray | None:
    """The exact sum, plus ``bias`` per output channel where given, by the integer
    kernels (:mod:`convtranspose._kernels.int8`): AVX512-VNNI byte products where this
    machine has them and the operands are bytes (the data spanning at most 256 values,
    the weights in int8), else int16 pair products (``pmaddwd``, every x86-64 CPU) for
    operands within ``[-32767, 32767]``; None where neither applies (more than three
    axes, sums that could leave int32, no numba, another architecture).  int32, or
    int64 with a bias (added in the pass that subtracts the shift's share,
    :func:`convtranspose._kernels.requantize.corrected_sums`)."""
    target = host()
    if not target.numba:
        return None
    from .._kernels.int8 import prepare_blocked_sums, u8s8_transposed
    from .._kernels.requantize import corrected_sums

    check_transposed(plan, data, weights, None, output_shape)
    weights = canonical_weights(plan, weights)
    # The VNNI byte products' second way (then col2im) right after their first.
    for kind in ("bytes", "columns", "halves") if _vnni_bytes(target) else ("halves",):
        if kind == "columns":  # the byte products then col2im
            total = u8s8_transposed(data, weights, plan.axes, plan.channels_last, target)
            if total is not None:
                return total if bias is None else _plus_bias(plan, total.astype(np.int64),
                                                              bias)
            continue
        sums = prepare_blocked_sums(kind, data.shape[0], weights, plan.axes,
                                    plan.channels_last, target)
        if sums is None:
            continue
        if bias is None:
            total = sums(data)
            if total is not None:
                return total
            continue
        summed = sums.sums(data)
        if summed is not None:
            acc, factor, share = summed
            total = corrected_sums(acc, factor, share, bias, target.threads)
            last = total.ndim - 1
            return total if plan.channels_last else total.transpose(
                (0, last) + tuple(range(1, last)))
    return None


def exact_sum(plan, data: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, *,
              names: tuple[str, str, str], largest_product: int = 255 ** 2,
              output_shape=None) -> np.ndarray:
    """``sum data * weights + bias`` of ``plan``, exact: the integer operands (their zero
    points already subtracted) run through the library's float32 kernels, in passes over
    the input channels small enough for every sum to be exact
    (:func:`float32_channels`), the passes and the bias added in int64; where even one
    channel is too many, in the dtype of :func:`sum_dtype`.  The result holds the exact
    integers: int64, float64, or float32 (one pass and no bias: every value below 2**24).

    float32 runs at the library's full speed: on an Intel Xeon a 64-channel 32x32 k4 s2
    layer took about 5 times as long in float64 (docs/quantization.md).
    """
    total = integer_sum(plan, data, weights, output_shape, bias)
    if total is not None:
        return total
    channels = float32_channels(plan, data, weights)
    if not channels or _float64_sooner(plan, channels, bias, largest_product):
        dtype = sum_dtype(plan, bias, largest_product)
        return execute_plan(plan, data.astype(dtype), weights.astype(dtype),
                            None if bias is None else bias.astype(dtype), names=names,
                            output_shape=output_shape)
    # The check reads the data's dtype and both operands' sizes only: a float32 stand-in
    # of the data's shape (no copy) and the weights as they are, rather than converting
    # the filter on every call.
    check_transposed(plan, np.broadcast_to(np.float32(0), data.shape), weights, None,
                     output_shape)
    groups, per_group = plan.canonical_filter_shape[:2]  # (G, Ci, Co, K...)
    axis = -1 if plan.channels_last else 1  # the channels'
    if channels >= per_group and bias is None:  # one pass, which is the result
        return transposed_convolution(data.astype(np.float32),
                                      _float32_pass(plan, weights, 0, per_group),
                                      plan.axes, dtype=np.dtype(np.float32),
                                      channels_last=plan.channels_last)
    total = np.zeros(plan.output_shape, np.int64)
    for first in range(0, per_group, channels):
        stop = min(per_group, first + channels)
        picked = np.add.outer(np.arange(groups) * per_group, np.arange(first, stop))
        total += transposed_convolution(
            np.take(data, picked.reshape(-1), axis=axis).astype(np.float32),
            _float32_pass(plan, weights, first, stop), plan.axes,
            dtype=np.dtype(np.float32), channels_last=plan.channels_last).astype(np.int64)
    return total if bias is None else _plus_bias(plan, total, bias)


#: Bytes each float32 pass moves per output beyond its products: its float32 result
#: written, read and widened to int64, and the int64 total read and written.
_PASS_BYTES = 4 + 4 + 8 + 16


def _float64_sooner(plan, channels: int, bias, largest_product: int) -> bool:
    """Whether one float64 pass (exact: :func:`sum_dtype`) takes less time than float32
    passes of ``channels`` input channels each: those move :data:`_PASS_BYTES` per
    output and pass at this machine's copy rate, where float64's only extra cost is
    its products at half float32's rate (half the lanes per vector), one float32
    GEMM's worth at this machine's GEMM rate (:mod:`convtranspose._choose.figures`).
    Never for the int64 sums (about 25 times slower than float64's)."""
    per_group = plan.canonical_filter_shape[1]
    passes = -(-per_group // channels)
    if passes < 2 or sum_dtype(plan, bias, largest_product) != np.float64:
        return False
    from .._choose.figures import machine_figures

    figures = machine_figures()
    passes_seconds = passes * _PASS_BYTES / (figures.copy_gbps * 1e9)
    float64_seconds = 2.0 * per_group * taps_per_output(plan.axes) / (
        figures.gemm_gflops * 1e9)
    return float64_seconds < passes_seconds


def _float32_pass(plan, weights: np.ndarray, first: int, stop: int) -> np.ndarray:
    """Input channels ``first:stop`` of each group of the canonical weights ``(G, Ci, Co,
    K...)`` as contiguous float32, kept in the weights memo with ``weights`` and marked
    as its own, so that the float32 kernels find their matrices without comparing the
    float32 copy: the weights themselves are compared once (not at all for a prepared
    layer's, or the centred weights :func:`kept_weights` keeps)."""
    key = ("float32 pass", plan.filter_layout, plan.canonical_filter_shape, first, stop)
    derived = derived_from(weights, *key)
    kept = derived.get("float32")
    if kept is None:
        part = canonical_weights(plan, weights)[:, first:stop]
        kept = derived["float32"] = own(frozen(np.array(part, np.float32, order="C")))
    return kept


def _plus_bias(plan, total: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``total`` (int64, the plan's layout) plus ``bias`` per output channel, in place."""
    total += bias.astype(np.int64).reshape((-1,) if plan.channels_last
                                           else (-1,) + (1,) * len(plan.axes))
    return total


def _compute(plan, x, w, zero_points, scales, bias, output_shape) -> np.ndarray:
    """The integer kernels' fused call (:func:`integer_qlinear`), else the exact sum
    (:func:`exact_sum`), then :func:`requantize`."""
    call = integer_qlinear(plan, w, zero_points, scales, bias, output_shape)
    result = None if call is None else call(x)
    if result is not None:
        return result
    data = _centred(x, zero_points[0])
    weights = _kept_centred_weights(w, zero_points[1], plan.groups)
    acc = exact_sum(plan, data, weights, bias, names=("x", "w", "B"),
                    output_shape=output_shape)
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
    (:func:`convtranspose._kernels.requantize.prepare_corrected`).  The sums are
    exact, so the bytes are those of :func:`exact_sum` and :func:`requantize`.
    ``call`` returns None where the kernels decline the data; None instead of
    ``call`` where no integer kernel takes the layer (no numba, weights beyond
    int16, more than three axes, not x86, a multiplier not finite)."""
    target = host()
    if not target.numba:
        return None
    from .._kernels.int8 import prepare_blocked_sums
    from .._kernels.requantize import prepare_corrected

    weights = canonical_weights(plan, _kept_centred_weights(filter_, zero_points[1],
                                                           plan.groups))
    runs = [run for run in (prepare_blocked_sums(kind, plan.data_shape[0], weights, plan.axes,
                                                 plan.channels_last, target)
                            for kind in _integer_kinds(target)) if run is not None]
    requantize_sums = prepare_corrected(_multiplier(plan, scales), scales[2], zero_points[2],
                                        bias, target.threads)
    if not runs or requantize_sums is None:
        return None
    offset = int(zero_points[0].reshape(()))
    # The function checks its centred int16 data: a stand-in of their shape (no copy).
    centred = np.broadcast_to(np.int16(0), plan.data_shape)
    last = len(plan.output_shape) - 1

    def call(x: np.ndarray) -> np.ndarray | None:
        check_transposed(plan, centred, weights, None, output_shape)
        for run in runs:
            summed = run.sums(x, offset)
            if summed is not None:
                result = requantize_sums(*summed)
                return result if plan.channels_last else result.transpose(
                    (0, last) + tuple(range(1, last)))
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
    key = (plan, target, _vnni_bytes(target), repr(output_shape),
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
