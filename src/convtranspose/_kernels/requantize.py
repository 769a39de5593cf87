"""The quantized dialects' requantization of exact integer sums, in one compiled pass
(:mod:`._numba.requantize`), bit for bit the NumPy steps it replaces.

Each function returns None where it does not apply; the caller then runs its NumPy
steps.  Needs numba (the caller checks).
"""

from __future__ import annotations

import numpy as np

from .common import move_axis

__all__ = ["BYTE_RANGES", "CorrectedRequantization", "RowsRequantization", "corrected_sums",
           "fixed_point_requantization", "fixed_point_requantized", "onednn_requantization",
           "onednn_requantized", "prepare_corrected", "prepare_requantized", "requantized",
           "torch_requantization", "torch_requantized"]

#: The largest int32.
_INT32_MAX = 2 ** 31 - 1
#: The one-byte integer types' ranges by type character, for the quantized results and
#: data (``np.iinfo`` costs a microsecond or more per call).
BYTE_RANGES = {"B": (0, 255), "b": (-128, 127)}


def _rows_on_native_threads(kernel, args: tuple, rows: np.ndarray, threads: int) -> None:
    """``kernel(*args, first_row, stop_row)`` (a compiled kernel) over every row of
    ``rows`` ``(R, L)``, on numba's threads where the layout copies' measured rule
    splits a copy of the rows' bytes (:func:`._numba.transpose.copy_threads`): the pass
    reads and writes memory as a copy does, and numba's threads wake faster than the
    pool's, from which a 4 MiB pass gained nothing on an AMD Zen 4
    (``benchmarks/results/copy-split-zen4.json``, ``requantization_passes``)."""
    from ._numba.launch import parallel_kernel
    from ._numba.transpose import copy_threads

    parallel_kernel(kernel, args, rows.shape[0], copy_threads(rows.nbytes, threads))


def _pass_of_rows(kernel, args: tuple, threads: int) -> None:
    """``kernel(*args, starts, run)`` (a compiled rows kernel) over every row of
    ``args[0]``, split between threads as :func:`_rows_on_native_threads` splits a pass
    (:func:`._numba.lines.span_kernel`); on one thread, one call."""
    from ._numba.transpose import copy_threads

    rows = args[0]
    threads = copy_threads(rows.nbytes, threads)
    if threads == 1:
        kernel(*args, np.zeros(1, np.int64), rows.shape[0])
        return
    from ._numba.launch import parallel_kernel
    from ._numba.lines import span_kernel

    parallel_kernel(span_kernel(kernel, len(args)), args, rows.shape[0], threads)


class RowsCall:
    """``lines(starts, run)``: a compiled rows kernel on some rows of the sums,
    ``kernel(*arguments, starts, run)``, as :meth:`CorrectedRequantization.start` and
    :meth:`RowsRequantization.start` give it; ``direct-blocked``'s threads run
    ``kernel`` in their own compiled loop
    (:meth:`convtranspose._kernels._numba.blocked.BlockedLayer.__call__`)."""

    __slots__ = ("kernel", "arguments")

    def __init__(self, kernel, arguments: tuple) -> None:
        self.kernel, self.arguments = kernel, arguments

    def __call__(self, starts: np.ndarray, run: int) -> None:
        self.kernel(*self.arguments, starts, run)


def requantized(acc: np.ndarray, multiplier: np.ndarray, y_scale: np.ndarray,
                y_zero_point: np.ndarray, threads: int) -> np.ndarray | None:
    """``saturate(round_half_to_even(float32(acc) * multiplier[m] / y_scale) +
    y_zero_point)`` of the sums ``acc`` ``(N, M, Y...)`` (int32, int64, float32 or
    float64), in one compiled pass with the same float32 steps as
    :func:`convtranspose._frontends.qlinear.requantize`'s NumPy ones, in ``acc``'s
    memory order (C-contiguous, or a channels-last array's channels-first view, as the
    VNNI sum returns it): the result has that order too, as NumPy's ``astype`` keeps it.
    None for other layouts, an empty ``acc``, a result type other than uint8 and int8, or
    where a multiplier is not finite (its NaN products are left to NumPy's rules).
    Needs numba."""
    apply = prepare_requantized(multiplier, y_scale, y_zero_point, threads)
    return None if apply is None else apply(acc)


def _constants(multiplier: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray):
    """The requantization's constants as its kernels take them: the result type, its
    float32 bounds, the float32 multipliers, scale and zero point; None for a result
    type other than uint8 and int8 or a multiplier not finite."""
    bounds = BYTE_RANGES.get(y_zero_point.dtype.char)
    if bounds is None or not np.isfinite(multiplier).all():
        return None
    return (y_zero_point.dtype, np.float32(bounds[0]), np.float32(bounds[1]),
            np.ascontiguousarray(multiplier, np.float32), np.float32(y_scale.reshape(())),
            np.float32(y_zero_point.reshape(())))


def prepare_requantized(multiplier: np.ndarray, y_scale: np.ndarray,
                        y_zero_point: np.ndarray, threads: int):
    """:func:`requantized` with everything but the sums made once: ``apply(acc)``
    (the result, or None for a layout it does not take or an empty ``acc``), or None
    where no sums qualify (a result type other than uint8 and int8, a multiplier not
    finite)."""
    constants = _constants(multiplier, y_scale, y_zero_point)
    if constants is None:
        return None
    from ._numba.requantize import requantize_rows

    dtype, low, high, factors, scale, zero = constants

    def apply(acc: np.ndarray) -> np.ndarray | None:
        layout = _rows(acc) if acc.size else None
        if layout is None:
            return None
        rows, per_row, shape = layout
        out = np.empty(rows.shape, dtype)
        args = (rows, factors, per_row, scale, zero, low, high, out)
        _rows_on_native_threads(requantize_rows, args, rows, threads)
        return _in_acc_order(out, per_row, shape)

    return apply


def prepare_corrected(multiplier: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray,
                      bias: np.ndarray | None, threads: int):
    """``apply(acc, factor, share)`` (a :class:`CorrectedRequantization`):
    :func:`requantized` of ``acc - factor * share + bias`` in one compiled pass
    (:func:`._numba.requantize.corrected_rows`; the integer steps exact: in int64, or
    in int32 where a bound keeps the sums in it), for
    the channels-last int32 sums ``acc`` ``(N, Y..., M)`` and ``share`` ``(Y..., M)``
    (None where ``factor`` is 0) of
    :meth:`convtranspose._kernels.int8.BlockedSums.sums`, so that neither the shift's
    share nor the bias costs a pass of its own.  The result is channels last ``(N,
    Y..., M)``.  None where :func:`prepare_requantized` is."""
    constants = _constants(multiplier, y_scale, y_zero_point)
    return None if constants is None else CorrectedRequantization(constants, bias, threads)


class _RowsPass:
    """What both requantizations of :meth:`convtranspose._kernels.int8.BlockedSums.requantized`
    share: a compiled rows kernel (``_kernel``) over the rows of channels-last sums
    ``acc`` ``(N, Y..., M)``, whose arguments (``_arguments``) are followed by the
    rows of the result (``_dtype``, channels last, or its channels-first view where
    ``_channels_first``)."""

    _channels_first = False

    def _result(self, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
        """A new result for sums of ``shape``, and its rows as the kernel fills them."""
        out = np.empty(shape, self._dtype)
        result = move_axis(out, -1, 1) if self._channels_first else out
        return result, out.reshape(-1, shape[-1])

    def start(self, acc: np.ndarray, factor: int, share: np.ndarray | None,
              bound: int | None = None):
        """``(out, lines)``: the result to be, and ``lines(starts, run)``, which
        requantizes rows ``[start, start + run)`` of ``acc`` (rows of ``M`` sums) for
        each of ``starts`` into it, on the calling thread (a :class:`RowsCall`): the
        blocked kernel calls it for the lines each thread has just summed.  ``bound``
        as in the call."""
        result, out_rows = self._result(acc.shape)
        return result, RowsCall(self._kernel, self._arguments(acc, factor, share, bound)
                                + (out_rows,))

    def bind(self, acc: np.ndarray, factor: int, share: np.ndarray | None,
             bound: int | None = None):
        """``(kernel, arguments, new_result)`` for a caller that runs the whole pass on
        these sums (the same array each time) itself: ``kernel(*arguments, out_rows,
        starts, run)`` requantizes rows ``[start, start + run)`` for each of ``starts``
        into ``out_rows``, and ``new_result()`` gives ``(result, out_rows)``, a new
        result and its rows."""
        shape = acc.shape
        return (self._kernel, self._arguments(acc, factor, share, bound),
                lambda: self._result(shape))


class CorrectedRequantization(_RowsPass):
    """:func:`prepare_corrected`'s ``apply``: called on ``(acc, factor, share)``, the
    whole pass; :meth:`start` gives it in pieces of output lines instead
    (:func:`._numba.requantize.corrected_rows`)."""

    def __init__(self, constants: tuple, bias: np.ndarray | None, threads: int) -> None:
        self._dtype, low, high, factors, scale, zero = constants
        self._channels = factors.shape[0]
        # The bias as the kernel adds it in int64, and in int32 where it fits (else
        # None), with the most it adds to a sum.
        self._wide_bias = _addend(bias, self._channels)
        self._bias_magnitude = int(np.abs(self._wide_bias).max(initial=0))
        self._narrow_bias = (self._wide_bias.astype(np.int32)
                             if self._bias_magnitude <= _INT32_MAX else None)
        self._constants = (factors, scale, zero, low, high)
        self._threads = threads
        # Imported once here, not per call: an import statement costs about 0.6 us even
        # of a module already loaded.
        from ._numba.requantize import corrected_rows

        self._kernel = corrected_rows

    def _arguments(self, acc: np.ndarray, factor: int, share: np.ndarray | None,
                   bound: int | None):
        """The compiled pass's arguments but the result's rows: the bias in int32
        where every corrected sum stays in its range (``bound``, the largest magnitude
        of ``acc - factor * share``, plus the bias's), else in int64."""
        narrow = bound is not None and bound + self._bias_magnitude <= _INT32_MAX
        addend = self._narrow_bias if narrow and self._narrow_bias is not None else (
            self._wide_bias)
        return (acc.reshape(-1, self._channels), _places(share, self._channels),
                np.int64(factor), addend, *self._constants)

    def __call__(self, acc: np.ndarray, factor: int, share: np.ndarray | None,
                 bound: int | None = None) -> np.ndarray:
        """The whole pass; ``bound``: the largest magnitude of ``acc - factor * share``
        where the caller knows one (the sums in int32 where it allows)."""
        out, out_rows = self._result(acc.shape)
        _pass_of_rows(self._kernel, self._arguments(acc, factor, share, bound) + (out_rows,),
                      self._threads)
        return out


def _places(share: np.ndarray | None, width: int) -> np.ndarray:
    """The share as the correction kernels read it: rows of ``width`` sums, one per
    output place (``share[r % P]`` for row ``r`` of the sums), or one row of zeros for
    every place where there is none."""
    return np.zeros((1, width), np.int32) if share is None else share.reshape(-1, width)


def _addend(bias: np.ndarray | None, channels: int) -> np.ndarray:
    """The bias per output channel as the correction kernels add it (int64, zeros for
    none)."""
    return np.zeros(channels, np.int64) if bias is None else np.ascontiguousarray(
        bias.reshape(-1), np.int64)


def corrected_sums(acc: np.ndarray, factor: int, share: np.ndarray | None,
                   bias: np.ndarray | None, threads: int,
                   out: np.ndarray | None = None) -> np.ndarray:
    """``acc - factor * share + bias`` for the channels-last int32 sums ``acc`` ``(N,
    Y..., M)`` and ``share`` ``(Y..., M)`` (None where ``factor`` is 0) of
    :meth:`convtranspose._kernels.int8.BlockedSums.sums`, in one compiled pass
    (:func:`._numba.requantize.corrected_sum_rows`, int64 arithmetic) into ``out``
    (channels last; ``acc`` itself to correct it in place; default a new int64
    array): no temporary for the share's product, no pass for the bias.  Needs
    numba."""
    from ._numba.requantize import corrected_sum_rows

    channels = acc.shape[-1]
    rows = acc.reshape(-1, channels)
    places = _places(share, channels)
    total = np.empty(acc.shape, np.int64) if out is None else out
    args = (rows, places, np.int64(factor), _addend(bias, channels),
            total.reshape(rows.shape))
    _rows_on_native_threads(corrected_sum_rows, args, rows, threads)
    return total


def _rows(acc: np.ndarray) -> tuple[np.ndarray, bool, tuple] | None:
    """``acc`` ``(N, M, Y...)`` as C-contiguous rows in its memory order: ``(N * M, S)``
    (channels first: ``True``) or ``(N * S, M)`` (a channels-last array's channels-first
    view: ``False``), with the memory's shape; None for other layouts."""
    per_row = acc.flags.c_contiguous
    memory = acc if per_row else acc.transpose((0,) + tuple(range(2, acc.ndim)) + (1,))
    if not memory.flags.c_contiguous:
        return None
    rows = memory.reshape(acc.shape[0] * acc.shape[1], -1) if per_row else memory.reshape(
        -1, acc.shape[1])
    return rows, per_row, memory.shape


def _in_acc_order(out: np.ndarray, per_row: bool, shape: tuple) -> np.ndarray:
    """The rows' results ``(N, M, Y...)``, in the memory order of the sums."""
    result = out.reshape(shape)
    return result if per_row else move_axis(result, -1, 1)


def torch_requantized(acc: np.ndarray, engine: int, scale: np.ndarray,
                      offset: np.ndarray | None, integer_bias: np.ndarray | None,
                      destination: np.float32, zero_point: int,
                      threads: int) -> np.ndarray | None:
    """torch's quint8 result of the exact sums ``acc`` ``(N, M, Y...)`` (int32 or
    int64) on ``engine`` (0 fbgemm, 1 qnnpack, 2 oneDNN) with its per-channel float32
    ``scale``, float32 ``offset`` (fbgemm's bias term, oneDNN's bias) or int32
    ``integer_bias`` (QNNPACK's) and oneDNN's ``destination`` reciprocal scale, in one
    compiled pass (:func:`._numba.requantize.torch_rows`), in ``acc``'s memory order;
    None for an empty ``acc`` or another layout."""
    layout = None if acc.size == 0 or acc.dtype.kind != "i" else _rows(acc)
    if layout is None:
        return None
    from ._numba.requantize import torch_rows

    rows, per_row, shape = layout
    out = np.empty(rows.shape, np.uint8)
    constants = _torch_constants(per_row, scale, offset, integer_bias, destination,
                                 zero_point)
    _pass_of_rows(torch_rows(engine), (rows, _places(None, rows.shape[1]), np.int64(0),
                                 *constants, out), threads)
    return _in_acc_order(out, per_row, shape)


def _torch_constants(per_row, scale, offset, integer_bias, destination, zero_point):
    """The arguments of :func:`._numba.requantize.torch_rows`'s kernels between the
    factor and the result."""
    channels = scale.shape[0]
    return (per_row, np.ascontiguousarray(scale, np.float32),
            np.zeros(channels, np.float32) if offset is None
            else np.ascontiguousarray(offset, np.float32),
            np.zeros(channels, np.int64) if integer_bias is None
            else np.ascontiguousarray(integer_bias, np.int64),
            np.float32(destination), np.float32(zero_point))


def torch_requantization(engine: int, scale: np.ndarray, offset: np.ndarray | None,
                         integer_bias: np.ndarray | None, destination: np.float32,
                         zero_point: int, threads: int) -> RowsRequantization:
    """:func:`torch_requantized` of channels-last sums as
    :meth:`convtranspose._kernels.int8.BlockedSums.requantized` takes it (a
    :class:`RowsRequantization`); its result is the channels-first view torch's
    layout is."""
    from ._numba.requantize import torch_rows

    return RowsRequantization(torch_rows(engine), _torch_constants(
        False, scale, offset, integer_bias, destination, zero_point), np.uint8,
        threads, channels_first=True)


def fixed_point_requantized(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                            zero_point: int, bounds: tuple[int, int], dtype: np.dtype,
                            threads: int, wide: bool = False, factor: int = 0,
                            share: np.ndarray | None = None,
                            bias: np.ndarray | None = None) -> np.ndarray | None:
    """TFLite's requantization (:mod:`convtranspose._frontends.fixed_point`'s rules) of
    the exact sums ``acc - factor * share + bias`` (``acc`` ``(..., M)`` of integers,
    channels last; ``share`` and ``bias`` as in :func:`corrected_sums`, None for none)
    with per-channel ``multiplier`` and ``shift``, plus ``zero_point``, clamped to
    ``bounds`` (within ``dtype``), as ``dtype``, C-contiguous: the int32 accumulator's
    double rounding, or with ``wide`` the int64 accumulator's rule of the int16 x int8
    kernels.  The correction is exact (int64) in the same pass.  None for a
    non-contiguous or empty ``acc``."""
    return fixed_point_requantization(multiplier, shift, zero_point, bounds, dtype, bias,
                                      acc.shape[-1], threads, wide)(acc, factor, share)


def fixed_point_requantization(multiplier: np.ndarray, shift: np.ndarray, zero_point: int,
                               bounds: tuple[int, int], dtype, bias: np.ndarray | None,
                               channels: int, threads: int,
                               wide: bool = False) -> RowsRequantization:
    """:func:`fixed_point_requantized` of sums of ``channels`` output channels as
    :meth:`convtranspose._kernels.int8.BlockedSums.requantized` takes it (a
    :class:`RowsRequantization`)."""
    from ._numba.requantize import fixed_point_64_rows, fixed_point_rows, fixed_point_table

    def per_channel(values):
        return np.ascontiguousarray(np.broadcast_to(values, (channels,)), np.int64)

    bias, multiplier, shift = _addend(bias, channels), per_channel(multiplier), per_channel(shift)
    tail = (np.int64(zero_point), np.int64(bounds[0]), np.int64(bounds[1]))
    if wide:
        return RowsRequantization(fixed_point_64_rows, (bias, multiplier, shift) + tail, dtype,
                                  threads)
    return RowsRequantization(fixed_point_rows, (fixed_point_table(bias, multiplier, shift),)
                              + tail, dtype, threads)


def onednn_requantized(acc: np.ndarray, channels_last: bool, attributes: tuple,
                       dst_scale_divides: bool, bounds: tuple, dtype: np.dtype,
                       threads: int) -> np.ndarray | None:
    """oneDNN's steps after the int32 sums ``acc`` (int32 or int64, C-contiguous, in the
    layer's layout: channels last ``(N, Y..., M)`` or first ``(N, M, Y...)``), in one
    compiled pass (:func:`._numba.requantize.onednn_rows`): ``attributes`` are the
    float32 source scale, per-channel weight scales and bias (``(M,)``), the destination
    scale (its reciprocal unless ``dst_scale_divides``) and the destination zero point
    as float32, each None where not set; the result ``dtype`` and, for an integer one,
    the float32 ``bounds`` it saturates to.  None for an empty or non-contiguous
    ``acc``."""
    if acc.size == 0 or not acc.flags.c_contiguous or acc.dtype.kind != "i":
        return None
    if channels_last:
        return onednn_requantization(attributes, dst_scale_divides, bounds, dtype,
                                     acc.shape[-1], threads)(acc)
    from ._numba.requantize import onednn_rows

    channels = acc.shape[1]
    rows = acc.reshape(acc.shape[0] * channels, -1)
    out = np.empty(rows.shape, dtype)
    constants = _onednn_constants(attributes, dst_scale_divides, bounds, channels, True)
    _pass_of_rows(onednn_rows, (rows, _places(None, rows.shape[1]), np.int64(0),
                                  *constants, out), threads)
    return out.reshape(acc.shape)


def _onednn_constants(attributes: tuple, dst_scale_divides: bool, bounds: tuple,
                      channels: int, per_row: bool) -> tuple:
    """:func:`._numba.requantize.onednn_rows`'s arguments between the factor and the
    result."""
    src_scale, wei_scales, bias, dst_scale, dst_zero_point = attributes

    def scalar(value, unset):
        return np.float32(unset if value is None else value)

    def per_channel(value, unset):
        return np.ascontiguousarray(np.broadcast_to(
            np.float32(unset) if value is None else value.astype(np.float32).reshape(-1),
            (channels,)))

    low, high = bounds
    return (per_row, scalar(src_scale, 1), per_channel(wei_scales, 1), per_channel(bias, 0),
            scalar(dst_scale, 1), dst_scale_divides, scalar(dst_zero_point, 0),
            (bias is not None) + 2 * (dst_zero_point is not None), low is not None,
            scalar(low, 0), scalar(high, 0))


def onednn_requantization(attributes: tuple, dst_scale_divides: bool, bounds: tuple, dtype,
                          channels: int, threads: int) -> RowsRequantization:
    """:func:`onednn_requantized` of channels-last sums of ``channels`` output channels
    as :meth:`convtranspose._kernels.int8.BlockedSums.requantized` takes it (a
    :class:`RowsRequantization`)."""
    from ._numba.requantize import onednn_rows

    return RowsRequantization(onednn_rows, _onednn_constants(
        attributes, dst_scale_divides, bounds, channels, False), dtype, threads)


class RowsRequantization(_RowsPass):
    """A compiled requantization pass over the rows of channels-last sums ``acc``
    ``(N, Y..., M)`` less ``factor * share``, as
    :meth:`convtranspose._kernels.int8.BlockedSums.requantized` takes it: called on
    ``(acc, factor, share)``, the whole pass; :meth:`start` gives it in pieces of
    output lines instead (as :class:`CorrectedRequantization`).  ``kernel(rows,
    share rows, factor, *constants, out rows, starts, run)`` fills rows ``[start,
    start + run)`` of the result for each of ``starts``; the result has ``dtype``, as
    a channels-first view where ``channels_first``."""

    def __init__(self, kernel, constants: tuple, dtype, threads: int,
                 channels_first: bool = False) -> None:
        self._kernel, self._constants, self._dtype = kernel, constants, np.dtype(dtype)
        self._threads, self._channels_first = threads, channels_first

    def _arguments(self, acc: np.ndarray, factor: int, share: np.ndarray | None,
                   bound: int | None = None):
        """The kernel's arguments but the result's rows (``bound`` unused: each
        kernel corrects the sums in a width that holds them, or, as TFLite's, wraps as
        its owner does)."""
        channels = acc.shape[-1]
        return (acc.reshape(-1, channels), _places(share, channels), np.int64(factor),
                *self._constants)

    def __call__(self, acc: np.ndarray, factor: int = 0, share: np.ndarray | None = None,
                 bound: int | None = None) -> np.ndarray | None:
        """The whole pass (``bound`` unused); None for a non-contiguous or empty
        ``acc``."""
        if acc.size == 0 or not acc.flags.c_contiguous or acc.dtype.kind != "i":
            return None
        result, out_rows = self._result(acc.shape)
        _pass_of_rows(self._kernel, self._arguments(acc, factor, share) + (out_rows,),
                      self._threads)
        return result
