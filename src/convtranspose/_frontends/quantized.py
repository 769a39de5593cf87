"""What the quantized dialects share: their operands' checks, the weights they keep, and
the exact sum ``sum (x - x_zero_point) * (w - w_zero_point) + B``.

The sum is exact: by the integer kernels (:func:`integer_sum`,
:func:`offset_requantized`), or by the library's float kernels on float32 operands in
passes small enough for every partial sum to be exact, on float64 operands where every
partial sum is an integer below 2**53 (:func:`sum_dtype`), else on int64 operands
(which accumulate in int64; no 8-bit layer overflows it).  Each dialect's requantization
of the sum follows its own rule (docs/quantization.md); ONNX's is :mod:`.qlinear`.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from .._choose.planning import get_planning
from .._errors import ConvTransposeError
from .._execute.footprint import check_transposed
from .._execute.transposed import transposed_convolution
from .._kernels.int8 import products_per_lane, word_products
from .._plan.geometry import taps_per_output
from .._runtime.caches import register
from .._runtime.machine import fastest_seconds, has_amx_int8, vnni_vector_bytes
from .._runtime.memo import derived_from, frozen, own
from .._runtime.target import host
from .specs import as_array, canonical_weights, execute_plan

__all__ = ["check_out", "exact_sum", "float32_scale", "float_sum", "integer_kinds",
           "integer_sooner", "integer_sum", "integer_zero_point", "kept_entry", "kept_weights",
           "lanes_pay", "offset_kernels", "offset_requantized", "prepared_offset_call",
           "sum_dtype", "typed_operand", "with_defaults"]


def typed_operand(name: str, value: object, dtypes: tuple[np.dtype, ...],
                  why: str) -> np.ndarray:
    """``value`` as an array of one of ``dtypes``, or a TypeError that says ``why``."""
    array = np.asarray(as_array(name, value))
    if array.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {array.dtype} but must be"
                        f" {' or '.join(map(str, dtypes))} ({why})")
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
    if array.dtype == np.float32:  # a copy, without np.errstate's microseconds
        scale = array.copy()
    else:
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
    return kept_entry(w, key, make)["kept"]


def kept_entry(w: np.ndarray, key: tuple, make) -> dict:
    """:func:`kept_weights`' entry in the weights memo: ``"kept"``, the weights, and
    whatever else is kept with them (it goes when they go)."""
    derived = derived_from(w, "kept", *key)
    if "kept" not in derived:
        derived["kept"] = own(frozen(make(w)))
    return derived


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


def float32_channels(plan, data: np.ndarray, weights: np.ndarray,
                     data_magnitude: int | None = None) -> int:
    """How many input channels (per group) one float32 pass may sum exactly: every
    partial sum of one output is then an integer of magnitude at most
    ``channels * taps_per_output * max|data| * max|weights|`` <= 2**24, so each
    float32 multiply and add is exact, in any order and by any algorithm.  0 where not
    even one channel's taps fit (the float64 or int64 path then runs).
    ``data_magnitude``: a bound of ``max|data|`` the caller knows (the data's own is
    two reductions over it otherwise)."""
    if data_magnitude is None:
        data_magnitude = _magnitude(data)
    largest = data_magnitude * _magnitude(weights) * taps_per_output(plan.axes)
    return FLOAT32_EXACT // largest if largest else FLOAT32_EXACT


def _vnni_bytes(target) -> bool:
    """Whether the integer sums try the VNNI byte products first: ``vpdpbusd`` on the
    target's vectors, 32 bytes or more (AVX512-VNNI, or AVX-VNNI on 32:
    :func:`~convtranspose._runtime.machine.vnni_vector_bytes`)."""
    return min(target.vector_bytes, vnni_vector_bytes()) >= 32


def _vnni_columns(target) -> bool:
    """Whether the byte products then col2im run here
    (:func:`~convtranspose._kernels.int8.u8s8_transposed`: its products take 512-bit
    vectors)."""
    return target.vector_bytes == 64 and vnni_vector_bytes() == 64


def _byte_kinds(target) -> tuple[str, ...]:
    """The kernels of unsigned times signed bytes this machine runs, the fastest first:
    AMX's tiles (:func:`~convtranspose._runtime.machine.has_amx_int8`; 16 times
    ``vpdpbusd``'s products per instruction), then VNNI's vectors (:func:`_vnni_bytes`)."""
    if not _vnni_bytes(target):
        return ()
    return ("tiles", "bytes") if has_amx_int8() else ("bytes",)


def integer_kinds(target, plan=None, largest_product: int = 255 ** 2) -> tuple[str, ...]:
    """The blocked integer kernels' kinds of word, in the order they are tried: AMX's
    and VNNI's bytes (:func:`_byte_kinds`), then int16 pairs; with ``plan``, only those
    worth trying on it (:func:`lanes_pay`, for products of at most
    ``largest_product``)."""
    kinds = _byte_kinds(target) + ("halves",)
    return kinds if plan is None else tuple(
        k for k in kinds if lanes_pay(plan, k, target, largest_product))


def lanes_pay(plan, kind: str, target, largest_product: int = 255 ** 2) -> bool:
    """Whether the blocked integer kernel of ``kind`` is worth trying on ``plan``: not
    where it adds less than one useful product per lane of each vector instruction
    (:func:`convtranspose._kernels.int8.products_per_lane`: depthwise layers, groups
    of one or two output channels) while one float32 pass sums the layer exactly,
    whatever its data (products of at most ``largest_product``,
    :func:`float32_channels`): the float32 pass then runs fewer vector products.  (Where
    the float32 sums take several passes, as a 512->3 7x7 head's 25, the kernel is
    tried: :func:`integer_sooner`.)"""
    per_lane, products = _lane_use(plan, kind, target.vector_bytes)
    return per_lane >= 1 or products * largest_product > FLOAT32_EXACT


def _lane_use(plan, kind: str, vector_bytes: int) -> tuple[float, int]:
    """``(products per lane, products per output)`` of the integer kernel of ``kind``
    on ``plan`` (:func:`convtranspose._kernels.int8.products_per_lane`; a group's
    input channels times the most taps that meet one output), kept on the plan: a
    small layer's call asks several times, and hashing a plan costs more."""
    kept_uses = plan.__dict__.setdefault("_lane_uses", {})
    use = kept_uses.get((kind, vector_bytes))
    if use is None:
        ci, co = plan.canonical_filter_shape[1:3]
        use = kept_uses[kind, vector_bytes] = (products_per_lane(kind, (ci, co), vector_bytes),
                                               ci * taps_per_output(plan.axes))
    return use


#: Per layer, kind of word and machine: whether the integer kernel summed the layer
#: sooner than the float32 passes when both were timed (:func:`integer_sooner`); all
#: forgotten beyond :data:`_SOONER_KEPT` layers.
_sooner: dict = {}
_SOONER_KEPT = 4096
register("quantized sum choices", _sooner.clear)


def integer_sooner(plan, kind: str, target, integer, floating) -> bool:
    """Whether the layer's sums go to the blocked integer kernel of ``kind`` (a call of
    it: ``integer()``) rather than the exact float32 passes (``floating()``).

    Where each of the kernel's lanes adds all the products its words hold, it runs the
    same loop nest as float32's ``direct-blocked`` with 2-4 times the products per
    instruction: taken.  Where some lanes idle (groups of fewer input channels than a
    word holds, or fewer output channels than a vector), the float32 planner's grouped
    and depthwise algorithms may run sooner (groups of 8 channels on an Intel Xeon:
    1.8 ms against the kernel's 2.9-4.5,
    ``benchmarks/results/grouped-quantized-xeon.json``): both are timed once per layer
    and the faster kept (not under ``CONVTRANSPOSE_PLANNING=estimate``, which takes
    the integer kernel).  Every way gives the same exact sums."""
    if (_lane_use(plan, kind, target.vector_bytes)[0] >= word_products(kind)
            or get_planning() == "estimate"):
        return True
    key = (plan, kind, target)
    chosen = _sooner.get(key)
    if chosen is None:
        if integer() is None:  # the kernel declines these data: its caller goes on
            return True
        if len(_sooner) >= _SOONER_KEPT:
            _sooner.clear()
        chosen = _sooner[key] = fastest_seconds(integer) <= fastest_seconds(floating)
    return chosen


def offset_requantized(plan, data: np.ndarray, weights: np.ndarray, offset: int,
                       centred: np.dtype, requantization, output_shape=None):
    """``requantization(acc, factor, share)`` of the exact sums of ``data - offset`` (a
    dialect's data and zero point, not centred) with the centred ``weights``, by the
    first blocked integer kernel that takes them
    (:meth:`convtranspose._kernels.int8.BlockedSums.requantized`: the sums are ``acc -
    factor * share``, channels last), so that the requantization subtracts the share
    and adds the bias in its own pass, run on each piece of output lines by the
    thread that summed it where the kernel allows (``requantization`` has a ``start``
    method: a :class:`~convtranspose._kernels.requantize.RowsRequantization`); the
    memory check is the dialect's on its data centred as ``centred``.  None where no
    kernel takes them (no numba, not x86, more than three axes, operands out of
    range, lanes that would mostly idle on a layer of one float32 pass:
    :func:`lanes_pay`; the float32 passes timed sooner: :func:`integer_sooner`): the
    dialect then centres its data and runs :func:`exact_sum`."""
    for sums in offset_kernels(plan, data, weights, offset, centred, output_shape):
        result = sums.requantized(data, offset, requantization)
        if result is not None:
            return result
    return None


def offset_kernels(plan, data, weights, offset, centred, output_shape=None):
    """The blocked integer kernels (:class:`convtranspose._kernels.int8.BlockedSums`)
    set up for :func:`offset_requantized`'s sums, in turn, until one is timed slower
    than the float32 passes; the memory check first."""
    target = host()
    if not target.numba:
        return
    from .._kernels.int8 import prepare_blocked_sums

    check_transposed(plan, np.broadcast_to(centred.type(0), data.shape), weights, None,
                     output_shape)
    canonical = canonical_weights(plan, weights)
    info = np.iinfo(data.dtype)  # the data's span bounds |data - offset|; 8-bit weights'
    for kind in integer_kinds(target, plan, (int(info.max) - int(info.min)) * 255):
        sums = prepare_blocked_sums(kind, data.shape[0], canonical, plan.axes,
                                    plan.channels_last, target)
        if sums is None:
            continue
        if not integer_sooner(plan, kind, target, lambda: sums.sums(data, offset),
                              lambda: float_sum(plan, np.subtract(data, offset, dtype=centred),
                                                weights, None)):
            return
        yield sums


def with_defaults(function, **arguments) -> dict:
    """``arguments`` by name, with ``function``'s own defaults for the parameters they
    leave out (a prepared layer's preparers read every argument the function would)."""
    given = inspect.signature(function).bind(**arguments)
    given.apply_defaults()
    return given.arguments


def prepared_offset_call(plan, data: np.ndarray, weights: np.ndarray, offset: int,
                         centred: np.dtype, requantization, output_shape=None, finish=None):
    """``call(x)``: :func:`offset_requantized` set up once for data of ``data``'s shape
    and dtype, for a prepared layer's repeated calls: the first kernel it would take
    that takes ``data`` (int16 data pass over the byte kernels; the timing against the
    float32 passes included) is kept, so that each call
    checks the memory limit, sums and requantizes, and hands the result to
    ``finish`` where given (a dialect's layout).  ``call`` returns None where the
    kernel declines the data (the dialect's function then decides); None instead of
    ``call`` where no kernel takes the layer or ``requantization`` is None (no
    numba)."""
    kernels = None if requantization is None else offset_kernels(
        plan, data, weights, offset, centred, output_shape)
    sums = None if kernels is None else next((s for s in kernels if s.takes(data)), None)
    if sums is None:
        return None
    stand_in = np.broadcast_to(centred.type(0), data.shape)  # the memory check's
    requantize = sums.requantizer(offset, requantization)

    def call(x: np.ndarray) -> np.ndarray | None:
        check_transposed(plan, stand_in, weights, None, output_shape)
        result = requantize(x)
        return result if result is None or finish is None else finish(result)

    return call


def integer_sum(plan, data: np.ndarray, weights: np.ndarray, output_shape,
                bias: np.ndarray | None = None,
                largest_product: int = 255 ** 2) -> np.ndarray | None:
    """The exact sum, plus ``bias`` per output channel where given, by the integer
    kernels (:mod:`convtranspose._kernels.int8`): AVX512-VNNI byte products where this
    machine has them and the operands are bytes (the data spanning at most 256 values,
    the weights in int8), else int16 pair products (``pmaddwd``, every x86-64 CPU) for
    operands within ``[-32767, 32767]``; None where neither applies (more than three
    axes, sums that could leave int32, no numba, another architecture).  int32, or
    int64 with a bias (added in the pass that subtracts the shift's share,
    :func:`convtranspose._kernels.requantize.corrected_sums`).  None too where the
    kernels' lanes would mostly idle and one float32 pass sums the layer
    (:func:`lanes_pay`, for products of at most ``largest_product``), or where the
    float32 passes were timed sooner (:func:`integer_sooner`)."""
    target = host()
    if not target.numba:
        return None
    from .._kernels.int8 import in_layout, prepare_blocked_sums, u8s8_transposed
    from .._kernels.requantize import corrected_sums

    check_transposed(plan, data, weights, None, output_shape)
    canonical = canonical_weights(plan, weights)
    # The VNNI byte products' second way (then col2im) right after their first.
    for kind in _byte_kinds(target) + (("columns",) if _vnni_columns(target) else ()) + (
            "halves",):
        if not lanes_pay(plan, "bytes" if kind == "columns" else kind, target,
                         largest_product):
            continue
        if kind == "columns":  # the byte products then col2im
            total = u8s8_transposed(data, canonical, plan.axes, plan.channels_last, target)
            if total is not None:
                return total if bias is None else _plus_bias(plan, total.astype(np.int64),
                                                              bias)
            continue
        sums = prepare_blocked_sums(kind, data.shape[0], canonical, plan.axes,
                                    plan.channels_last, target)
        if sums is None:
            continue
        if not integer_sooner(plan, kind, target, lambda: sums.sums(data),
                              lambda: float_sum(plan, data, weights, bias)):
            return None
        if bias is None:
            total = sums(data)
            if total is not None:
                return total
            continue
        summed = sums.sums(data)
        if summed is not None:
            acc, factor, share = summed
            return in_layout(corrected_sums(acc, factor, share, bias, target.threads),
                             plan.channels_last)
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
    total = integer_sum(plan, data, weights, output_shape, bias, largest_product)
    if total is not None:
        return total
    return float_sum(plan, data, weights, bias, names=names, largest_product=largest_product,
                     output_shape=output_shape)


def float_sum(plan, data: np.ndarray, weights: np.ndarray, bias: np.ndarray | None, *,
              names: tuple[str, str, str] = ("data", "weights", "bias"),
              largest_product: int = 255 ** 2, output_shape=None,
              data_magnitude: int | None = None) -> np.ndarray:
    """:func:`exact_sum` by the library's float kernels alone (no integer kernel);
    ``data`` may be the centred integers as float32 already (no cast then), and
    ``data_magnitude`` a bound of their magnitude (:func:`float32_channels`)."""
    channels = float32_channels(plan, data, weights, data_magnitude)
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
    if channels >= per_group:  # one pass, whose sums are the result
        # As the float32 dialects run it: a repeated call runs the layer's prepared call.
        total = execute_plan(plan, data.astype(np.float32, copy=False),
                             _float32_filter(plan, weights), names=names,
                             output_shape=output_shape)
        return total if bias is None else _plus_bias(plan, total.astype(np.int64), bias)
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
    return kept_weights(weights, ("float32 pass", plan.filter_layout,
                                  plan.canonical_filter_shape, first, stop),
                        lambda w: np.array(canonical_weights(plan, w)[:, first:stop],
                                           np.float32, order="C"))


def _float32_filter(plan, weights: np.ndarray) -> np.ndarray:
    """``weights`` (the plan's filter layout) as float32, kept with them
    (:func:`kept_weights`): the float32 dialects' prepared call of the layer is set up
    from it once, and knows it by identity."""
    return kept_weights(weights, ("float32 filter", plan.filter_layout, weights.shape),
                        lambda w: np.array(w, np.float32, order="C"))


def _plus_bias(plan, total: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``total`` (int64, the plan's layout) plus ``bias`` per output channel, in place."""
    total += bias.astype(np.int64).reshape((-1,) if plan.channels_last
                                           else (-1,) + (1,) * len(plan.axes))
    return total


