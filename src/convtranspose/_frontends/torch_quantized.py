"""PyTorch's quantized ``ConvTranspose1d/2d/3d`` (``torch.ao.nn.quantized``), as each of
its CPU engines computes it.

A quint8 activation, a qint8 weight (per tensor, or per channel along the weight's axis
1) and a float bias give a quint8 result.  The sum ``acc = sum (input -
input_zero_point) * (weight - weight_zero_point)`` is exact here (:func:`exact_sum`) and
wrapped to 32 bits as the engines' int32 accumulators wrap; the engines differ only in
how they bring the float bias in and scale ``acc`` to the output (docs/quantization.md):

- ``fbgemm``: ``M = float32(float32(input_scale * weight_scale) / output_scale)``; the
  bias enters as a float, ``float32(acc) + bias * float32(1 / (input_scale *
  weight_scale))`` (per channel: ``bias / (input_scale * weight_scale[c])``), times ``M``;
- ``qnnpack``: the bias is first quantized to int32 (``round(bias * float32(1 /
  (weight_scale * input_scale)))``) and added to ``acc``; ``float32(acc) * R`` with ``R =
  float32(weight_scale * input_scale) * float32(1 / output_scale)``;
- ``onednn``: ``float32(acc) * S + bias`` with ``S`` the product of the scales as
  oneDNN receives them (each the float32 reciprocal of torch's float32 reciprocal),
  times oneDNN's ``1 / output_scale`` likewise: the rule of its reference and
  post-processing code; its kernels chosen by shape and CPU do not all follow it to
  the last bit (one unit apart on a few elements in ten thousand);
- ``x86`` (torch's default engine): ``onednn`` where torch's x86 engine hands the layer
  to oneDNN (Linux, a CPU with AVX512-VNNI, ``groups <= 100``, weight zero point 0 and
  ``output_padding`` 0), else ``fbgemm``.

Each product is rounded half to even to an integer (``cvtps2dq``), then the output zero
point is added and the result saturated to ``[0, 255]`` as the x86 store sequences do.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .._runtime.caches import kept
from .._runtime.target import host
from .fixed_point import wrap32
from .quantized import (
    check_out,
    exact_sum,
    integer_zero_point,
    kept_weights,
    offset_requantized,
    prepared_offset_call,
    with_defaults,
)
from .repeated_quantized import remembers_quantized_calls
from .specs import as_array, resolve_plan

if TYPE_CHECKING:
    from .._typing import ArrayLike, PerAxis

__all__ = ["torch_quantized_conv_transpose", "torch_requantize", "x86_uses_onednn"]

UINT8, INT8 = np.dtype(np.uint8), np.dtype(np.int8)
F32 = np.float32
#: The largest magnitude ``cvtps2dq`` converts; beyond it (and for NaN) it gives INT32_MIN.
_INT32_LIMIT = 2.0 ** 31


@kept("machine facts", maxsize=1)
def _host_has_avx512_vnni() -> bool:
    """Whether this Linux host's CPU reports ``avx512_vnni`` (torch asks cpuinfo)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return any(line.startswith("flags") and "avx512_vnni" in line.split()
                       for line in info)
    except OSError:
        return False


def x86_uses_onednn(weight_zero_point: np.ndarray, groups: int,
                    output_padding: tuple[int, ...]) -> bool:
    """torch's x86 engine's choice (``should_use_onednn_quant``): oneDNN on Linux with
    AVX512-VNNI for up to 100 groups, a per-tensor weight zero point of 0 and no
    output_padding; FBGEMM otherwise."""
    symmetric = weight_zero_point.size == 1 and int(weight_zero_point.reshape(-1)[0]) == 0
    return (_host_has_avx512_vnni() and groups <= 100 and symmetric
            and not any(output_padding))


def _x86_store(rounded: np.ndarray, zero_point: int) -> np.ndarray:
    """``cvtps2dq`` results (out of range: INT32_MIN), packed to int16 with saturation,
    plus the zero point with int16 saturation, packed to uint8 with saturation."""
    wide = np.where(np.abs(rounded) < _INT32_LIMIT, rounded, -_INT32_LIMIT)
    wide = np.clip(np.clip(wide, -32768, 32767) + zero_point, -32768, 32767)
    return np.clip(wide, 0, 255).astype(UINT8)


def _channels(values: np.ndarray, channels: int) -> np.ndarray:
    """A per-tensor value or one per output channel, as ``(channels,)``."""
    return np.broadcast_to(values.reshape(-1), (channels,)) if values.size == 1 \
        else values.reshape(-1)


def _fbgemm_parameters(input_scale, weight_scale, bias, output_scale, per_channel):
    """FBGEMM's per-channel float32 multiplier and bias term (None without a bias)."""
    act_times_w = (np.float64(F32(input_scale)) * weight_scale).astype(F32)
    multiplier = act_times_w / F32(output_scale)
    term = None
    if bias is not None:
        if per_channel:  # the per-channel loop divides by each channel's scale
            term = (bias / act_times_w).astype(F32)
        else:  # the per-tensor loop multiplies by one reciprocal, taken in double
            term = (bias * F32(1.0 / np.float64(act_times_w[0]))).astype(F32)
    return multiplier, term


def _fbgemm(acc, input_scale, weight_scale, bias, output_scale, per_channel):
    """FBGEMM's ``ReQuantizeOutput`` with a float bias (its AVX2/AVX-512 loops)."""
    multiplier, term = _fbgemm_parameters(input_scale, weight_scale, bias, output_scale,
                                          per_channel)
    real = acc.astype(F32)
    if term is not None:
        real += term[:, None]
    return np.rint(real * multiplier[:, None])


def _qnnpack_parameters(input_scale, weight_scale, bias, output_scale):
    """QNNPACK's per-channel float32 requantization scale and int32 bias (None without
    a bias), or its refusal."""
    weight32 = weight_scale.astype(F32)
    with np.errstate(over="ignore", divide="ignore", under="ignore"):  # checked below
        requant = (weight32 * F32(input_scale)) * (F32(1) / F32(output_scale))
    if not np.all(np.isfinite(requant) & (requant > 0)):
        raise ConvTransposeError(
            f"input_scale * weight_scale / output_scale = {requant.tolist()} as float32:"
            f" QNNPACK refuses a requantization scale that is not finite and positive")
    quantized = None
    if bias is not None:
        inverse = F32(1) / (weight_scale * np.float64(input_scale)).astype(F32)
        # fbgemm's Quantize clamps in double: the float32 product fits after rounding.
        quantized = np.clip(np.rint(bias * inverse).astype(np.float64), -2 ** 31,
                            2 ** 31 - 1).astype(np.int64)
    return requant, quantized


def _qnnpack(acc, input_scale, weight_scale, bias, output_scale):
    """QNNPACK's deconvolution: the bias quantized to int32 by ``quantize_per_tensor``
    (or ``_per_channel``) with scale ``weight_scale * input_scale``, then the SSE2
    requantization ``float32(acc) * requantization_scale``."""
    requant, quantized = _qnnpack_parameters(input_scale, weight_scale, bias, output_scale)
    if quantized is not None:
        acc = wrap32(acc + quantized[:, None])
    return np.rint(acc.astype(F32) * requant[:, None])


def _onednn_parameters(input_scale, weight_scale, output_scale):
    """oneDNN's per-channel float32 source-times-weight scale and its float32 reciprocal
    of the destination scale, as torch and ideep hand the scales over (below)."""
    def back(scale):
        return F32(1) / (1.0 / np.asarray(scale, np.float64)).astype(F32)
    return back(input_scale) * back(weight_scale), F32(1) / back(output_scale)


def _onednn(acc, input_scale, weight_scale, bias, output_scale):
    """oneDNN's int8 deconvolution as torch drives it: torch hands over reciprocal
    scales (``float32(1 / scale)``), ideep inverts them back in float32, oneDNN scales
    the int32 sum by the product of the source and weight scales, adds the float bias
    and multiplies by its float32 reciprocal of the destination scale; the result is
    not rounded yet (oneDNN adds the zero point first, :func:`torch_requantize`)."""
    scale, destination = _onednn_parameters(input_scale, weight_scale, output_scale)
    real = acc.astype(F32) * scale[:, None]
    if bias is not None:
        real += bias[:, None]
    return real * destination


def _compiled_requantize(acc, engine, input_scale, weight_scale, bias, output_scale,
                         output_zero_point, per_channel, threads) -> np.ndarray | None:
    """:func:`torch_requantize` in one compiled pass with the same steps
    (:func:`convtranspose._kernels.requantize.torch_requantized`), or None."""
    from .._kernels.requantize import torch_requantized

    return torch_requantized(acc, *_kernel_steps(acc.shape[1], engine, input_scale,
                                                 weight_scale, bias, output_scale,
                                                 output_zero_point, per_channel),
                             threads)


def _kernel_steps(channels, engine, input_scale, weight_scale, bias, output_scale,
                  output_zero_point, per_channel) -> tuple:
    """The compiled pass's constants for ``engine``: its number, the per-channel scale,
    the float32 offset, the integer bias, the destination scale and the zero point
    (:func:`convtranspose._kernels.requantize.torch_requantized`)."""
    offset, integer_bias, destination = None, None, F32(1)
    if engine == "fbgemm":
        scale, offset = _fbgemm_parameters(input_scale, weight_scale, bias, output_scale,
                                           per_channel)
    elif engine == "qnnpack":
        scale, integer_bias = _qnnpack_parameters(input_scale, weight_scale, bias,
                                                  output_scale)
    else:
        scale, destination = _onednn_parameters(input_scale, weight_scale, output_scale)
        offset = bias
    return (("fbgemm", "qnnpack", "onednn").index(engine), np.broadcast_to(scale, (channels,)),
            offset, integer_bias, destination, output_zero_point)


def torch_requantize(acc: np.ndarray, engine: str, input_scale: float,
                     weight_scale: np.ndarray, bias: np.ndarray | None,
                     output_scale: float, output_zero_point: int,
                     per_channel: bool) -> np.ndarray:
    """The quint8 result of the exact sum ``acc`` ``(N, C_out, Y...)`` (integers, of an
    integer or float type) on ``engine``
    (``fbgemm``, ``qnnpack`` or ``onednn``): ``weight_scale`` (float64) and ``bias``
    (float32) per output channel ``(C_out,)``.  With numba, one compiled pass of the
    same steps."""
    target = host()
    if target.numba:
        result = _compiled_requantize(acc, engine, input_scale, weight_scale, bias,
                                      output_scale, output_zero_point, per_channel,
                                      target.threads)
        if result is not None:
            return result
    channels = acc.shape[1]
    moved = wrap32(np.moveaxis(acc.astype(np.int64), 1, 0).reshape(channels, -1))
    if engine == "fbgemm":
        rounded = _fbgemm(moved, input_scale, weight_scale, bias, output_scale, per_channel)
    elif engine == "qnnpack":
        rounded = _qnnpack(moved, input_scale, weight_scale, bias, output_scale)
    else:
        # oneDNN adds the zero point in float32 before it saturates and rounds (half to
        # even): rint(0.5 + 101) is 102 where rint(0.5) + 101 is 101.
        real = _onednn(moved, input_scale, weight_scale, bias, output_scale)
        real += F32(output_zero_point)
        rounded = np.rint(np.clip(real, 0, 255)) - output_zero_point
    result = _x86_store(rounded, output_zero_point)
    shape = (channels, acc.shape[0]) + acc.shape[2:]
    return np.moveaxis(result.reshape(shape), 0, 1)


def _quantized_tensor(name: str, value: object):
    """``(integers, scale, zero_point, axis)`` of a torch quantized tensor, else None."""
    if not (type(value).__module__.split(".")[0] == "torch"
            and getattr(value, "is_quantized", False)):
        return None
    scheme = str(value.qscheme())  # type: ignore[attr-defined]
    integers = value.int_repr().numpy()  # type: ignore[attr-defined]
    if scheme.endswith("per_tensor_affine"):
        return (integers, np.float64(value.q_scale()),  # type: ignore[attr-defined]
                np.int64(value.q_zero_point()), None)  # type: ignore[attr-defined]
    if scheme.endswith("per_channel_affine"):
        return (integers, value.q_per_channel_scales().numpy(),  # type: ignore[attr-defined]
                value.q_per_channel_zero_points().numpy(),  # type: ignore[attr-defined]
                value.q_per_channel_axis())  # type: ignore[attr-defined]
    raise ConvTransposeError(f"{name} is quantized with {scheme}; torch's quantized"
                             f" ConvTranspose takes per-tensor or per-channel affine")


def _parameters(name, value, scale, zero_point, dtype):
    """The integer tensor, its scale and zero point (float64 and int64 arrays) from a
    torch quantized tensor or from a numpy array and the explicit arguments."""
    unpacked = _quantized_tensor(name, value)
    if unpacked is not None:
        if scale is not None or zero_point is not None:
            raise ConvTransposeError(
                f"{name} is a torch quantized tensor: its own scale and zero point are"
                f" used, so {name}_scale and {name}_zero_point must be None")
        value, scale, zero_point, axis = unpacked
        if axis not in (None, 1):
            raise ConvTransposeError(
                f"{name} is quantized per channel along axis {axis}; torch's ConvTranspose"
                f" weight (C_in, C_out/groups, K...) is quantized along axis 1")
    elif scale is None or zero_point is None:
        raise TypeError(f"{name}_scale and {name}_zero_point are required with a"
                        f" {type(value).__name__} {name} (a torch quantized tensor has its"
                        f" own)")
    array = np.asarray(as_array(name, value))
    if array.dtype != dtype:
        raise TypeError(f"{name} has dtype {array.dtype} but must be {dtype} (torch's"
                        f" {'quint8' if dtype == UINT8 else 'qint8'} integers)")
    return array, _scale(f"{name}_scale", scale), integer_zero_point(f"{name}_zero_point",
                                                              zero_point, dtype)


def _scale(name: str, value: object) -> np.ndarray:
    """A scale as float64 (torch keeps scales in double), positive and finite."""
    array = np.asarray(as_array(name, value))
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{name} has dtype {array.dtype} but must be a real number")
    scale = array.astype(np.float64)
    if not np.all(np.isfinite(scale) & (scale > 0)):
        raise ConvTransposeError(f"{name} must be positive and finite, got {array.tolist()}")
    return scale


def _bias(value: object) -> np.ndarray | None:
    if value is None:
        return None
    array = np.asarray(as_array("bias", value))
    if array.dtype.kind != "f":
        raise TypeError(f"bias has dtype {array.dtype} but must be floating point (torch's"
                        f" quantized ConvTranspose takes a float bias, used as float32)")
    return array.astype(F32)


def _integer_steps(plan, weight, bias, params, engine) -> tuple:
    """``(centred, steps, requantization)``: the weights centred (int16; kept in the
    weights memo), :func:`torch_requantize`'s arguments after the sums and the
    integer kernels' requantization of them
    (:func:`convtranspose._kernels.requantize.torch_requantization`; None without
    numba)."""
    _, _, weight_scale, weight_zero, output_scale, output_zero = params
    rank = weight.ndim - 2
    # 8-bit values minus their zero points fit int16: a quarter of int64's bytes to
    # convert, and for the weights memo to compare.
    zero = weight_zero.reshape((1, -1) + (1,) * rank if weight_zero.size > 1 else ())
    centred = kept_weights(weight, ("int16", zero.shape, zero.tobytes()),
                           lambda w: np.subtract(w, zero, dtype=np.int16))
    channels = plan.output_shape[1]
    per_channel = weight_scale.size > 1
    # Output channel g * C_out/groups + j takes the scale of the weight's column j.
    scales = np.tile(weight_scale.reshape(-1), channels // weight_scale.size)
    if engine == "x86":
        engine = "onednn" if x86_uses_onednn(weight_zero, plan.groups,
                                             plan.output_padding) else "fbgemm"
    steps = (engine, float(params[0].reshape(())), scales, bias,
             float(output_scale.reshape(())), int(output_zero.reshape(())), per_channel)
    requantization = None
    if host().numba:
        from .._kernels.requantize import torch_requantization

        # Channels-last sums, requantized by the threads that sum them: torch's layout
        # is their view.
        requantization = torch_requantization(*_kernel_steps(channels, *steps),
                                              host().threads)
    return centred, steps, requantization


def _compute(plan, data, weight, bias, params, engine) -> np.ndarray:
    """The exact sum of the centred operands, then the engine's requantization: by the
    integer kernels on the input as it is, its zero point's share subtracted in the
    requantization's pass, by the threads that sum each piece of output lines
    (:func:`offset_requantized`), else :func:`exact_sum` of the
    centred input and :func:`torch_requantize`."""
    centred, steps, requantization = _integer_steps(plan, weight, bias, params, engine)
    input_zero = int(params[1].reshape(()))
    if requantization is not None:
        result = offset_requantized(plan, data, centred, input_zero, np.dtype(np.int16),
                                    requantization)
        if result is not None:
            return result
    acc = exact_sum(plan, np.subtract(data, np.int16(input_zero), dtype=np.int16), centred,
                    None, names=("input", "weight", "bias"))
    return torch_requantize(acc, *steps)


def _resolved(input, weight, bias, engine, geometry: dict, quantization: dict) -> tuple:
    """``(plan, input, weight, bias, params)``: the operands checked and the plan
    resolved, as :func:`torch_quantized_conv_transpose` takes them (``geometry``: its
    stride, padding, output_padding, groups and dilation; ``quantization``: its scales
    and zero points, by name)."""
    q = quantization
    data, input_scale_, input_zero = _parameters("input", input, q["input_scale"],
                                                 q["input_zero_point"], UINT8)
    kernel, weight_scale_, weight_zero = _parameters("weight", weight, q["weight_scale"],
                                                     q["weight_zero_point"], INT8)
    output_zero = integer_zero_point("output_zero_point", q["output_zero_point"], UINT8)
    offsets, params = _bias(bias), (input_scale_, input_zero, weight_scale_, weight_zero,
                                    _scale("output_scale", q["output_scale"]), output_zero)
    plan = resolve_plan(
        _dialects.torch_quantized_conv_transpose, data.shape, kernel.shape,
        None if offsets is None else offsets.shape, engine=engine, **geometry,
        **dict(zip(_PARAMETERS, (p.shape for p in params))))
    return plan, data, kernel, offsets, params


def prepare_torch(arguments: dict, data: np.ndarray):
    """``call(input)``: :func:`torch_quantized_conv_transpose` of ``arguments`` (every
    argument but ``input`` and ``out``, by name) for ndarray data of ``data``'s shape
    and dtype, its operands checked and plan resolved once, then
    :func:`convtranspose._frontends.quantized.prepared_offset_call` (what it keeps, and
    when it returns None)."""
    a = with_defaults(torch_quantized_conv_transpose, input=data, **arguments)
    plan, data, kernel, offsets, params = _resolved(
        data, a["weight"], a["bias"], a["engine"], {name: a[name] for name in _GEOMETRY},
        {name: a[name] for name in _PARAMETERS})
    centred, _, requantization = _integer_steps(plan, kernel, offsets, params, a["engine"])
    return prepared_offset_call(plan, data, centred, int(params[1].reshape(())),
                                np.dtype(np.int16), requantization)


@remembers_quantized_calls
def torch_quantized_conv_transpose(
        input: ArrayLike, weight: ArrayLike, bias: ArrayLike | None = None,
        stride: PerAxis = 1, padding: PerAxis = 0, output_padding: PerAxis = 0,
        groups: int = 1, dilation: PerAxis = 1, *, input_scale: ArrayLike | None = None,
        input_zero_point: ArrayLike | None = None, weight_scale: ArrayLike | None = None,
        weight_zero_point: ArrayLike | None = None, output_scale: ArrayLike,
        output_zero_point: ArrayLike, engine: str = "x86",
        out: np.ndarray | None = None) -> np.ndarray:
    """PyTorch's quantized ``ConvTranspose1d/2d/3d`` (``torch.ao.nn.quantized``, and
    ``torch.ops.quantized.conv_transpose{1,2,3}d``) as the CPU engine ``engine``
    computes it::

        acc = sum (input - input_zero_point) * (weight - weight_zero_point)
        y   = saturate(round_half_to_even(requantize(acc, bias)) + output_zero_point)

    with each engine's float32 steps for ``requantize`` (docs/quantization.md).

    Parameters
    ----------
    input : array_like of uint8, or a torch quint8 tensor
        ``(N, C_in, X...)``, the integers of a quint8 activation (``x.int_repr()``).
    weight : array_like of int8, or a torch qint8 tensor
        ``(C_in, C_out/groups, K...)``.
    bias : array_like of float, optional
        ``(C_out,)``, used as float32.
    stride, padding, output_padding, groups, dilation
        As in :func:`torch_conv_transpose` (any spatial rank).
    input_scale, input_zero_point : optional
        One value each (zero point in ``[0, 255]``); required unless ``input`` is a
        torch quantized tensor (its own are used).
    weight_scale, weight_zero_point : optional
        Likewise: one value, or ``(C_out/groups,)`` along the weight's axis 1 (output
        channel ``g * C_out/groups + j`` uses entry ``j``); zero points in [-128, 127].
    output_scale, output_zero_point
        The module's ``scale`` and ``zero_point``.
    engine : {"x86", "fbgemm", "qnnpack", "onednn"}, optional
        The ``torch.backends.quantized.engine`` to reproduce; ``"x86"`` (the default)
        chooses oneDNN or FBGEMM as torch's x86 engine does on this host.
    out : ndarray of uint8, optional

    Returns
    -------
    ndarray of uint8
        ``(N, C_out, Y...)``, the integers of the quint8 result.

    Raises
    ------
    TypeError
        ``input`` not uint8, ``weight`` not int8, a float zero point, an integer bias,
        no scale or zero point for a plain array.
    ConvTransposeError
        As in :func:`torch_conv_transpose`; a parameter of the wrong shape or range, an
        unknown engine, a weight quantized along another axis, a requantization scale
        QNNPACK refuses (not finite and positive).

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.array([[[10, 20, 30]]], np.uint8)
    >>> w = np.array([[[1, 2, 3]]], np.int8)
    >>> ct.torch_quantized_conv_transpose(x, w, stride=2, input_scale=0.5,
    ...     input_zero_point=10, weight_scale=0.25, weight_zero_point=0, output_scale=0.125,
    ...     output_zero_point=100, engine="fbgemm")
    array([[[100, 100, 110, 120, 150, 140, 160]]], dtype=uint8)
    """
    plan, data, kernel, offsets, params = _resolved(
        input, weight, bias, engine, dict(stride=stride, padding=padding,
                                          output_padding=output_padding, groups=groups,
                                          dilation=dilation),
        dict(input_scale=input_scale, input_zero_point=input_zero_point,
             weight_scale=weight_scale, weight_zero_point=weight_zero_point,
             output_scale=output_scale, output_zero_point=output_zero_point))
    check_out(out, plan.output_shape, UINT8)
    result = _compute(plan, data, kernel, offsets, params, engine)
    return result if out is None else _copied(result, out)


#: The quantization parameters in the order ``_compute`` takes them.
_PARAMETERS = ("input_scale", "input_zero_point", "weight_scale", "weight_zero_point",
               "output_scale", "output_zero_point")
#: The geometry's arguments.
_GEOMETRY = ("stride", "padding", "output_padding", "groups", "dilation")


def _copied(result: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.copyto(out, result)
    return out
