"""The array functions: one thin frontend per dialect, all computing a plan.

Each function turns its arrays' shapes and its dialect's attributes into a
:class:`~convtranspose._plan.rules.ConvTransposePlan` (exactly what the same-named
function of :mod:`convtranspose.shapes` returns) and hands the plan to the one
kernel.  The per-axis shape formula every docstring refers to is::

    F = (X - 1) * stride + (K - 1) * dilation + 1
    Y = F + output_padding - pads_begin - pads_end      (explicit pads)
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .._choose import planning as _planning
from .._dtypes import accumulation_dtype, check_dtypes
from .._errors import ConvTransposeError
from .._execute import array_api as _array_api
from .._execute.footprint import check_transposed
from .._execute.rounded_calls import half_preparable, kept_result, prepare_kept_call
from .._execute.transposed import preparable, transposed_convolution
from .._kernels.dense import switch_state
from .._plan import dialects as _dialects
from .._plan import rules as _plan
from .._runtime import caches as _caches
from .kept_calls import (
    PREPARED_CALLS_KEPT,
    forget_prepared_keys,
    prepared_calls,
    prepared_key,
    usable_prepared,
)
from .plain_plans import find_plain, forget_plain, keep_plain
from .repeated_calls import may_share_memory, note_prepared, remembers_calls

if TYPE_CHECKING:
    from .._typing import ArrayLike, PerAxis, ShapeLike

__all__ = [
    "clear_caches",
    "convolution_backprop_data",
    "group_convolution_backprop_data",
    "conv_transpose",
    "onnx_conv_transpose",
]


def _is_masked(value: object) -> bool:
    """Whether ``value`` is a NumPy masked array.  NumPy imports ``numpy.ma`` on first
    access (about 8 ms of a process's first call); where it is not loaded, nothing is one."""
    masked = sys.modules.get("numpy.ma")
    return masked is not None and isinstance(value, masked.MaskedArray)


def as_array(name: str, value: object) -> np.ndarray:
    """``value`` as a native-order ndarray, or as it is when another array library's."""
    if type(value) is np.ndarray:  # exactly: a masked array is a subclass
        array = value
    elif _is_masked(value):
        # Computing on the raw data would silently use the masked-out values.
        raise TypeError(
            f"{name} is a masked array, which is not supported; pass {name}.filled(0)"
            f" or the plain data"
        )
    elif _array_api.is_foreign(value):  # computed in its own library (_array_api)
        return cast(np.ndarray, value)  # duck-typed: only its shape and dtype are read
    else:
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"{name} must be an array, got {type(value).__name__}: {error}") from None
    if not array.dtype.isnative:
        # Big-endian (or byte-swapped) operands are read in native order: the kernels
        # and the accumulation dtype assume it.  A copy; the caller's array is untouched.
        array = array.astype(array.dtype.newbyteorder("="))
    return array


PLAN_CACHE_SIZE = 512
plan_cache: dict = {}
_EXACT_INT = frozenset({int})


def _freeze(value: Any) -> object:
    """A hashable key that tells apart every value the resolvers tell apart.

    Exact ints, strings, None and sequences of exact ints (the common case: shapes and
    per-axis attributes) key as themselves; anything else is type-tagged, so that
    ``True``, ``1`` and ``1.0`` (equal and equally hashed) never share an entry.  A
    tagged key holds a type object, so it never equals an untagged one.  Raises
    TypeError for values with no faithful key.
    """
    kind = type(value)
    if kind is int or kind is str or value is None:
        return value
    if kind is tuple or kind is list:
        if _EXACT_INT.issuperset(map(type, value)):
            return tuple(value)
        return (tuple,) + tuple(_freeze(item) for item in value)
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    hash(value)
    return (kind, value)


#: ``(key, plan)`` most recently used: found again, nothing in the cache is reordered.
_recent: tuple = (None, None)


def resolve_plan(resolver, *args, **kwargs) -> _plan.ConvTransposePlan:
    """``resolver(*args, **kwargs)``, memoised: repeated layers skip shape validation.

    Plans are immutable and errors are never cached, so a hit returns exactly what a
    fresh resolution would.  Plain arguments find their plan without the key
    (:mod:`.plain_plans`).
    """
    global _recent
    values = (*args, *kwargs.values())
    slot_key, found = find_plain(resolver, args, kwargs, values)
    if found is not None:
        plan, key = found
        if key is not _recent[0] or not plan_cache:  # the cache as a lookup leaves it
            _bounded_insert(plan_cache, key, plan, PLAN_CACHE_SIZE)
            _recent = key, plan
        return plan
    try:
        key = (resolver, tuple(kwargs), *map(_freeze, args), *map(_freeze, kwargs.values()))
    except TypeError:
        return resolver(*args, **kwargs)
    recent_key, plan = _recent
    if key != recent_key or not plan_cache:  # else the most recent entry: nothing to do
        plan = plan_cache.get(key)
        if plan is None:
            plan = resolver(*args, **kwargs)
            _bounded_insert(plan_cache, key, plan, PLAN_CACHE_SIZE)
        else:
            _touch(plan_cache, key, plan)
        _recent = key, plan
    if slot_key is not None:
        keep_plain(slot_key, values, (plan, key))
    return plan


_insert_lock = threading.Lock()


def _touch(cache: dict, key, value) -> None:
    """Make ``key`` the most recently used entry (dicts keep insertion order: the least
    recently used entry is the first, which :func:`_bounded_insert` drops)."""
    with _insert_lock:
        if cache.pop(key, None) is not None:
            cache[key] = value


def _bounded_insert(cache: dict, key, value, size: int) -> None:
    """``cache[key] = value``, first dropping the least recently used entries beyond
    ``size - 1``."""
    with _insert_lock:  # two threads evicting at once would drop the same key twice
        cache.pop(key, None)
        while len(cache) >= size:
            del cache[next(iter(cache))]
        cache[key] = value


def clear_caches() -> None:
    """Forget everything kept between calls in this process.

    Results do not change; the next calls only take longer.  What is forgotten, by
    name: resolved plans and prepared calls, filters' derived matrices, planning
    decisions, cost-model estimates, scratch estimates, kernel schedules, compiled
    kernels (loaded again from the kernel cache on disk), machine figures, machine
    facts, the host target (its environment switches are read again), the BLAS
    library's entry points, TFLite requantization multipliers, quantized sum choices,
    the kernel folder and the wisdom file's identity.  The wisdom on
    disk stays (:func:`convtranspose.forget_wisdom` forgets it), and so do the compiled
    kernels on disk.

    Examples
    --------
    >>> import convtranspose as ct
    >>> ct.clear_caches()
    """
    _caches.clear_all()


def canonical_weights(plan: _plan.ConvTransposePlan, filter: np.ndarray) -> np.ndarray:
    """The filter as ``(G, Ci, Co, K...)``, a view where the layout allows."""
    if plan.filter_layout == "GIOX":
        return filter
    return filter.transpose(plan._filter_to_canonical).reshape(plan.canonical_filter_shape)


def _forget_kept() -> None:
    global _recent
    with _insert_lock:
        plan_cache.clear()
        prepared_calls.clear()
        forget_prepared_keys()
        forget_plain()
        _recent = (None, None)


_caches.register("resolved plans and prepared calls", _forget_kept)


def direct_out(out: object, plan, arrays: dict, names: tuple[str, ...]) -> bool:
    """Whether the result of ``plan`` on ``arrays`` (name -> operand; ``names[0]`` the
    data's) can be written straight into ``out``; an error if it cannot take it at all.

    Straight in: C-contiguous (as the kernels write) and apart from every operand;
    otherwise the result is computed first and copied, so that each operand is read as
    it was before the call (as NumPy's ufuncs do with overlapping outputs).
    """
    if type(out) is not np.ndarray and (
            not isinstance(out, np.ndarray) or _is_masked(out)):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != plan.output_shape:
        raise ConvTransposeError(
            f"out has shape {out.shape}, but the result has shape {plan.output_shape}")
    dtype = arrays[names[0]].dtype  # the result's, once the operands agree
    if out.dtype != dtype:
        dtype = check_dtypes(**arrays)  # a mismatch among the operands is told first
        raise TypeError(
            f"out has dtype {out.dtype}, but the result has dtype {dtype}; out must have"
            f" exactly the result's dtype (no casting)")
    flags = out.flags
    if not flags.writeable:
        raise ConvTransposeError("out is read-only")
    if not flags.c_contiguous:
        return False
    for array in arrays.values():  # a loop: a generator costs as much as a check
        if may_share_memory(out, array):
            return False
    return True


def _operands(names, data, filter, bias) -> dict:
    """Name -> operand, for the dtype checks' messages (the bias only if given)."""
    arrays = {names[0]: data, names[1]: filter}
    if bias is not None:
        arrays[names[2]] = bias
    return arrays


#: Operand types that never leave the NumPy path (checked before anything else).
_PLAIN = (np.ndarray, type(None))


def execute_plan(plan, data, filter, bias=None, out=None, *, names=("data", "filter", "bias"),
                 output_shape=None):
    if not plan.axes:  # no spatial axis (JAX's 0-D conv_transpose): one of size 1
        if out is not None:
            direct_out(out, plan, _operands(names, data, filter, bias), names)
        result = execute_plan(_plan.with_unit_axis(plan), data[..., None], filter[..., None],
                              bias, None if out is None else out[..., None], names=names)
        return result[..., 0] if out is None else out
    if type(data) is not np.ndarray or type(filter) is not np.ndarray or type(bias) not in _PLAIN:
        result = _array_api.transposed(plan, names, (data, filter, bias), out,
                                       lambda *views: execute_plan(plan, *views, names=names))
        if result is not NotImplemented:
            return result
    check_transposed(plan, data, filter, out, output_shape)
    if out is not None and not direct_out(out, plan, _operands(names, data, filter, bias),
                                          names):
        np.copyto(out, execute_plan(plan, data, filter, bias, names=names))
        return out
    prepared = key = None
    # The prepared calls compute the sums; a bias (an ndarray of the data's dtype: any
    # other gets the checks below) is added to them as transposed_convolution adds it.
    # A half-precision layer's call rounds its sums, which a bias joins before: a call
    # with one keeps a call of its own, prepared with that bias.
    rounds_bias = False
    if bias is None or (type(bias) is np.ndarray and bias.dtype == data.dtype and (
            preparable(data.dtype, filter.dtype)
            or (rounds_bias := half_preparable(data.dtype, filter.dtype)))):
        key = prepared_key(plan, data, filter, rounds_bias)
        prepared = usable_prepared(key)
        if prepared is not None and prepared[0] is not None:
            result = kept_result(prepared[0], data, filter, out, bias, plan.channels_last,
                                 len(plan.axes))
            if result is not None:
                note_prepared(data, filter, key, result, bias, plan.channels_last)
                return result
            prepared = None  # another filter, bias or switch: prepared again below
    dtype = check_dtypes(**_operands(names, data, filter, bias))
    weights = canonical_weights(plan, filter)
    result = transposed_convolution(
        data,  # half precision: widened by the kernel's entry (or read as bfloat16 pairs)
        weights,
        plan.axes,
        dtype=accumulation_dtype(dtype),
        channels_last=plan.channels_last,
        bias=bias,
        result_dtype=dtype,
        out=out,
    )
    if key is not None and prepared is None:
        # Kept when there is none too (the layer's algorithm is another): asking again
        # would run the choice once more on every call.
        def canonical(kept):
            return canonical_weights(plan, kept)

        call = prepare_kept_call(data, filter, bias, canonical, plan.axes, plan.channels_last)
        _bounded_insert(prepared_calls, key, (call, _planning.generation,
                                              None if call is not None else switch_state()),
                        PREPARED_CALLS_KEPT)
        if call is not None:
            note_prepared(data, filter, key, result, bias, plan.channels_last)
    return result


@remembers_calls
def convolution_backprop_data(data: ArrayLike, filter: ArrayLike,
                              output_shape: ShapeLike | None = None, *, strides: PerAxis = None,
                              pads_begin: PerAxis = None, pads_end: PerAxis = None,
                              dilations: PerAxis = None, auto_pad: str = "explicit",
                              output_padding: PerAxis = None,
                              out: np.ndarray | None = None) -> np.ndarray:
    """OpenVINO ConvolutionBackpropData-1: transposed convolution.

    Parameters
    ----------
    data : array_like
        ``[N, C_IN, X1, ..., XD]``, any spatial rank D >= 1; arrays of another library
        give that library's arrays (``docs/arrays.md``).
    filter : array_like
        ``[C_IN, C_OUT, K1, ..., KD]``, the same dtype as ``data``.
    output_shape : sequence of int or 1-D integer array, optional
        The spatial output size ``[Y1, ..., YD]``; pads are then derived from it
        (``auto_pad`` chooses where the odd pad goes; with ``explicit`` the crop starts
        at ``pads_begin`` and ``pads_end`` is unused).  Sizes larger than the natural
        one give zeros at the end.
    strides, dilations : int or sequence of int, optional
        Default 1 on every axis.
    pads_begin, pads_end, output_padding : int or sequence of int, optional
        Default 0 on every axis.  Pads are ignored unless ``auto_pad`` is explicit.
    auto_pad : {"explicit", "same_upper", "same_lower", "valid"}, optional
        Case-insensitive; ``"notset"`` and ``None`` mean ``"explicit"``.
    out : ndarray, optional
        An array of exactly the result's shape and dtype to write the result into
        (and return), as NumPy's ``out=``: repeated calls then reuse its memory.
        Fastest when C-contiguous; it may share memory with the operands.

    Returns
    -------
    ndarray
        ``[N, C_OUT, Y1, ..., YD]`` with the dtype of ``data``, where without
        ``output_shape`` and with explicit pads, per axis::

            Y = (X - 1) * stride + (K - 1) * dilation + 1 + output_padding
                - pads_begin - pads_end

        and with ``same_*``/``valid`` the pads are 0 in that formula.

    Raises
    ------
    ConvTransposeError
        An invalid shape or attribute (a ``ValueError``), or an ``out`` of another
        shape or read-only.
    ResultTooLargeError
        A :class:`ConvTransposeError` and a ``MemoryError``: the result and scratch would
        exceed :func:`convtranspose.get_max_bytes` (or what NumPy can hold); raised before
        anything is allocated, naming the argument and the bytes.
    TypeError
        ``data`` and ``filter`` differ in dtype, or the dtype is not numeric; ``out``
        is not an ndarray of the result's dtype.

    Notes
    -----
    Operands may have any layout and byte order (the result is native), attributes may be
    integers of any size, and any ``np.errstate`` may be in force (results are unchanged).

    See Also
    --------
    convtranspose.shapes.convolution_backprop_data : the same rules on shapes only.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.array([[[1.0, 2.0, 3.0]]])            # N=1, C_IN=1, X=3
    >>> filter = np.array([[[1.0, 10.0, 100.0]]])       # C_IN=1, C_OUT=1, K=3
    >>> ct.convolution_backprop_data(data, filter, strides=2)
    array([[[  1.,  10., 102.,  20., 203.,  30., 300.]]])
    >>> ct.convolution_backprop_data(data, filter, [6], strides=2, auto_pad="same_upper")
    array([[[ 10., 102.,  20., 203.,  30., 300.]]])
    """
    data, filter = as_array("data", data), as_array("filter", filter)
    plan = resolve_plan(
        _dialects.convolution_backprop_data, data.shape, filter.shape, output_shape,
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, output_padding=output_padding)
    return execute_plan(plan, data, filter, out=out, output_shape=output_shape)


@remembers_calls
def group_convolution_backprop_data(data: ArrayLike, filter: ArrayLike,
                                    output_shape: ShapeLike | None = None, *,
                                    strides: PerAxis = None, pads_begin: PerAxis = None,
                                    pads_end: PerAxis = None, dilations: PerAxis = None,
                                    auto_pad: str = "explicit", output_padding: PerAxis = None,
                                    out: np.ndarray | None = None) -> np.ndarray:
    """OpenVINO GroupConvolutionBackpropData-1: grouped transposed convolution.

    Parameters
    ----------
    data : array_like
        ``[N, G * C_IN, X1, ..., XD]``.
    filter : array_like
        ``[G, C_IN, C_OUT, K1, ..., KD]``: group ``g`` maps data channels
        ``[g*C_IN, (g+1)*C_IN)`` to output channels ``[g*C_OUT, (g+1)*C_OUT)``.
    output_shape, strides, pads_begin, pads_end, dilations, auto_pad, output_padding, out
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        ``[N, G * C_OUT, Y1, ..., YD]``, sizes as in :func:`convolution_backprop_data`.

    Raises
    ------
    ConvTransposeError, ResultTooLargeError, TypeError
        As in :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> data = np.ones((1, 4, 5, 5), np.float32)       # G=2 groups of 2 channels
    >>> filter = np.ones((2, 2, 3, 3, 3), np.float32)  # each group: 2 -> 3 channels
    >>> ct.group_convolution_backprop_data(data, filter, strides=2, pads_begin=1,
    ...                                    pads_end=1).shape
    (1, 6, 9, 9)
    """
    data, filter = as_array("data", data), as_array("filter", filter)
    plan = resolve_plan(
        _dialects.group_convolution_backprop_data, data.shape, filter.shape, output_shape,
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, output_padding=output_padding)
    return execute_plan(plan, data, filter, out=out, output_shape=output_shape)


@remembers_calls
def conv_transpose(input: ArrayLike, filter: ArrayLike, bias: ArrayLike | None = None, *,
                   strides: PerAxis = None, pads_begin: PerAxis = None,
                   pads_end: PerAxis = None, dilations: PerAxis = None, auto_pad: str = "none",
                   output_padding: PerAxis = None, groups: int = 1, data_format: str = "NXC",
                   filter_format: str = "XIO", weights_format: str | None = None,
                   output_shape: ShapeLike | None = None,
                   out: np.ndarray | None = None) -> np.ndarray:
    """oneDNN Graph ConvTranspose-1: transposed convolution with groups and bias.

    Parameters
    ----------
    input : array_like
        ``(N, X1, ..., XD, I)`` for ``data_format="NXC"`` (the default) or
        ``(N, I, X1, ..., XD)`` for ``"NCX"``.
    filter : array_like
        With ``I`` the input channels and ``O`` the output channels per group:
        ``XIO`` (default) ``(K..., I, O)``, ``OIX`` ``(O, I, K...)``, ``IOX``
        ``(I, O, K...)`` (PyTorch's and ONNX's layout) or ``XOI`` ``(K..., O, I)``.
    bias : array_like, optional
        ``(O * groups,)``, added to every output position.
    strides, dilations : int or sequence of int, optional
        Default 1.
    pads_begin, pads_end : int or sequence of int, optional
        Default 0; used when ``auto_pad="none"``.
    auto_pad : {"none", "same_upper", "same_lower", "valid"}, optional
        Case-insensitive.  SAME pads ``max(K' - stride, 0)`` in total with the odd pad
        at the END for same_upper (unlike OpenVINO), giving ``Y = X * stride +
        output_padding`` when ``K' >= stride``.
    output_padding : int or sequence of int, optional
        Default 0; each value must be smaller than its stride.
    groups : int, optional
        Default 1; ``I`` must be divisible by it.
    data_format : {"NXC", "NCX"}, optional
    filter_format : {"XIO", "OIX", "IOX", "XOI"}, optional
    weights_format : {"XIO", "OIX", "IOX", "XOI"}, optional
        Today's oneDNN name for ``filter_format``; overrides it when given.
    output_shape : sequence of int, optional
        The spatial output size; pads are derived from it (oneDNN Graph ConvTranspose-1).
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        ``(N, Y..., O * groups)`` for NXC or ``(N, O * groups, Y...)`` for NCX, with
        ``Y = (X - 1) * stride + (K - 1) * dilation + 1 + output_padding - pads_begin
        - pads_end`` per axis for explicit pads.

    Raises
    ------
    ConvTransposeError, ResultTooLargeError, TypeError
        As in :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> x = np.ones((1, 4, 4, 8), np.float32)          # NXC
    >>> w = np.ones((3, 3, 8, 2), np.float32)          # XIO
    >>> ct.conv_transpose(x, w, strides=2, auto_pad="same_upper").shape
    (1, 8, 8, 2)
    """
    input, filter = as_array("input", input), as_array("filter", filter)
    bias = None if bias is None else as_array("bias", bias)
    plan = resolve_plan(
        _dialects.conv_transpose, input.shape, filter.shape, None if bias is None else bias.shape,
        strides=strides, pads_begin=pads_begin, pads_end=pads_end, dilations=dilations,
        auto_pad=auto_pad, output_padding=output_padding, groups=groups, data_format=data_format,
        filter_format=filter_format, weights_format=weights_format, output_shape=output_shape)
    return execute_plan(plan, input, filter, bias, out, names=("input", "filter", "bias"),
                        output_shape=output_shape)


@remembers_calls
def onnx_conv_transpose(X: ArrayLike, W: ArrayLike, B: ArrayLike | None = None, *,
                        auto_pad: str = "NOTSET", dilations: PerAxis = None, group: int = 1,
                        kernel_shape: ShapeLike | None = None, output_padding: PerAxis = None,
                        output_shape: ShapeLike | None = None, pads: ShapeLike | None = None,
                        strides: PerAxis = None, pads_rule: str = "current",
                        out: np.ndarray | None = None) -> np.ndarray:
    """ONNX ConvTranspose (opset 11 and later).

    Parameters
    ----------
    X : array_like
        ``(N, C, D1, ..., Dn)``.
    W : array_like
        ``(C, M / group, K1, ..., Kn)``.
    B : array_like, optional
        ``(M,)``, added to every output position.
    auto_pad : {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}, optional
        Case-insensitive.  SAME_* without ``output_shape`` targets ``X * stride``.
    dilations, strides : int or sequence of int, optional
        Default 1.
    group : int, optional
        Default 1.
    kernel_shape : sequence of int, optional
        Checked against ``W``'s spatial shape.
    output_padding : int or sequence of int, optional
        Default 0.
    output_shape : sequence of int, optional
        Spatial output size (a whole ``(N, M, ...)`` shape is also accepted); pads are
        derived from it, the odd one at the end for SAME_UPPER and at the beginning
        otherwise.
    pads : sequence of int, optional
        ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``; default 0.
    pads_rule : {"current", "pre-2021"}, optional
        How derived pads (``output_shape`` or SAME_*) split an odd total.  "current"
        (default), the text since 2021: the odd pad at the end for SAME_UPPER, at the
        beginning otherwise.  "pre-2021", the opset-11 text before that change (and
        onnxruntime before 1.13): the other way round, for every mode.
    out : ndarray, optional
        As in :func:`convolution_backprop_data`.

    Returns
    -------
    ndarray
        ``(N, M, Y...)`` with ``Y = stride * (D - 1) + output_padding + (K - 1) *
        dilation + 1 - pads_begin - pads_end`` per axis unless ``output_shape`` or
        SAME_* fixes it.

    Raises
    ------
    ConvTransposeError, ResultTooLargeError, TypeError
        As in :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> X = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> W = np.ones((1, 2, 3, 3), np.float32)
    >>> ct.onnx_conv_transpose(X, W, strides=[3, 2], output_shape=[10, 8]).shape
    (1, 2, 10, 8)
    """
    X, W = as_array("X", X), as_array("W", W)
    B = None if B is None else as_array("B", B)
    plan = resolve_plan(
        _dialects.onnx_conv_transpose, X.shape, W.shape, None if B is None else B.shape,
        auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
        output_padding=output_padding, output_shape=output_shape, pads=pads, strides=strides,
        pads_rule=pads_rule)
    return execute_plan(plan, X, W, B, out, names=("X", "W", "B"), output_shape=output_shape)
