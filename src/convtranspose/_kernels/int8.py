"""Exact transposed convolutions of 8- and 16-bit integers with integer vector products.

For the quantized dialects' exact sums (:func:`convtranspose._frontends.quantized.exact_sum`):
the data's values (zero point already subtracted) shifted by a constant into ``[0,
255]``, the weights in ``[-128, 127]``, so that every product is one of ``vpdpbusd``'s
unsigned-times-signed byte products (:mod:`._numba.int8`).  Per group, one product of
the input pixels ``(M, Ci)`` with the weights ``(Ci, Co * K)`` gives every (pixel, output
channel, tap) sum in int32 (every group's in one pass over the threads), the shift's
share ``shift * sum_ci w`` is subtracted from each column, and each tap's column block
is added into the outputs it reaches (col2im, with ``col2im-nxc``'s compiled scatter,
every group in one pass).  Exact: the products' sums stay within int32, and
the outputs are summed in int32 where the bound allows, else int64.

The packed weights and their column sums are kept in the weights memo
(:func:`convtranspose._runtime.memo.derived_from`): a layer called again with the same
weights packs nothing (packing a DCGAN 256->128 4x4 filter takes about 1.5 ms, comparing
it with the kept copy 0.15 ms, of a call of about 4 ms on an Intel Xeon).

Where ``vpdpbusd`` is missing or the operands are not bytes, :func:`s16_blocked` sums
signed int16 pairs with ``pmaddwd`` (every x86-64 CPU) in the same loop nest.
"""

from __future__ import annotations

import math

import numpy as np

from .._plan.geometry import taps_per_output
from .._runtime.memo import derived_from, frozen, spare_array
from .common import move_axis
from .requantize import BYTE_RANGES, corrected_sums

__all__ = ["BlockedSums", "in_layout", "prepare_blocked_sums", "products_per_lane", "s16_blocked",
           "u8s8_blocked", "u8s8_transposed", "word_products"]

#: The largest magnitude an int32 holds.
_INT32_MAX = 2 ** 31 - 1


def _span(data: np.ndarray) -> tuple[int, int]:
    """A range that holds every value of ``data``: a one-byte integer type's own range
    (every such array fits the byte words as it is or shifted by 128, and finding the
    least and greatest values costs a pass over the data), else the least and greatest
    values (0, 0 when empty)."""
    span = BYTE_RANGES.get(data.dtype.char)
    if span is not None:
        return span
    return (int(data.min()), int(data.max())) if data.size else (0, 0)


def _packed_weights(weights: np.ndarray) -> tuple | None:
    """Per group, the weights ``(Ci, Co * K)`` (columns: tap, output channel) packed for
    the products, with their column sums (int64) for the shift's share; None where a
    weight lies outside int8.  Kept in the weights memo, which compares the filter value
    by value, so weights edited in place are packed again."""
    derived = derived_from(weights, "u8s8")
    packed = derived.get("u8s8 packed")
    if packed is None:
        from ._numba.int8 import pack_signed

        if int(weights.min(initial=0)) < -128 or int(weights.max(initial=0)) > 127:
            packed = ()  # not bytes: the caller sums another way
        else:
            groups, ci = weights.shape[:2]
            kept = []
            for g in range(groups):
                matrix = np.moveaxis(weights[g], 1, -1).reshape(ci, -1).astype(np.int8)
                words, k4, width = pack_signed(matrix)
                sums = matrix.sum(axis=0, dtype=np.int64)
                kept.append((frozen(words), k4, width, frozen(sums)))
            packed = tuple(kept)
        derived["u8s8 packed"] = packed
    return packed or None


def _shifted_rows(data: np.ndarray, channels_last: bool, groups: int, ci: int, k4: int,
                  shift: int) -> np.ndarray:
    """``data + shift`` as bytes ``(G, M, k4 * 4)``: each group's input pixels as rows of
    its ``Ci`` channels, zero past them; one cast pass over the data, whatever its
    layout and integer type."""
    rank = data.ndim - 2
    pixels = data if channels_last else move_axis(data, 1, -1)  # (N, X..., G*Ci)
    rows = math.prod(pixels.shape[:-1])
    shifted = np.empty((groups, rows, k4 * 4), np.uint8)
    if k4 * 4 > ci:
        shifted[:, :, ci:] = 0
    source = pixels.reshape(pixels.shape[:-1] + (groups, ci)).transpose(
        (rank + 1,) + tuple(range(rank + 1)) + (rank + 2,))  # (G, N, X..., Ci)
    target = shifted[:, :, :ci].reshape(source.shape)
    if shift:
        np.add(source, shift, out=target, casting="unsafe")
    else:
        np.copyto(target, source, casting="unsafe")
    return shifted


def u8s8_transposed(data: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                    target) -> np.ndarray | None:
    """The exact transposed convolution of integer ``data`` ``(N, G*Ci, X...)`` (or
    channels last) with integer ``weights`` ``(G, Ci, Co, K...)``, as int32 or int64;
    None where the data span more than 256 values, a weight lies outside int8 or the
    layer has more than three spatial axes (the caller sums another way).  Needs numba and AVX512-VNNI (the caller checks);
    ``target``: the machine (its threads).  The channels-first result is a view of a
    channels-last array."""
    if not 1 <= len(axes) <= 3:  # the compiled scatter's ranks
        return None
    low, high = _span(data)
    if high - low > 255:
        return None
    packed = _packed_weights(weights)
    if packed is None:
        return None
    from ._numba.int8 import group_products
    from ._numba.scatter import col2im_scatter

    groups, ci, co = weights.shape[:3]
    kernel = weights.shape[3:]
    shift = -low  # data + shift is in [0, 255]
    k4, width = packed[0][1], packed[0][2]  # every group's: one Ci, one Co * K
    shifted = _shifted_rows(data, channels_last, groups, ci, k4, shift)
    batch = data.shape[0]
    inputs = data.shape[1:-1] if channels_last else data.shape[2:]
    bound = ci * taps_per_output(axes) * 255 * 128
    out = np.zeros((batch,) + tuple(a.output_size for a in axes) + (groups, co),
                   np.int32 if bound <= _INT32_MAX else np.int64)
    # Columns (group, pixel, tap, output channel), every group's in one pass: each tap's
    # sums are rows of Co contiguous values.  The padded columns are skipped by the
    # scatter's strides, not copied away.
    columns = co * math.prod(kernel)
    flat = group_products(shifted, [p[0] for p in packed], k4, width, target.threads)
    cols = flat.reshape(groups, -1, width)[:, :, :columns]
    if cols.dtype != out.dtype:
        cols = cols.astype(out.dtype)
    if shift:
        cols -= (shift * np.stack([p[3] for p in packed]))[:, None, :].astype(out.dtype)
    # col2im: each tap's sums into the outputs it reaches, every group in one compiled pass.
    region = out.transpose((out.ndim - 2,) + tuple(range(out.ndim - 2)) + (out.ndim - 1,))
    col2im_scatter(cols.reshape((groups, batch) + inputs + kernel + (co,)), out, region, axes,
                   target)
    return in_layout(out.reshape(out.shape[:-2] + (groups * co,)), channels_last)


def in_layout(sums: np.ndarray, channels_last: bool) -> np.ndarray:
    """Channels-last sums ``(N, Y..., M)`` in a layer's layout: as they are, or their
    channels-first view ``(N, M, Y...)`` (:func:`~.common.move_axis`)."""
    return sums if channels_last else move_axis(sums, -1, 1)


#: Per packing of the weights into int32 words: the memo key, the weights per word, the
#: dtype of one, the range of weights it takes (``vpdpbusd``'s signed bytes;
#: ``pmaddwd``'s int16 halves, whose pair sums stay below 2**31 without -32768) and the
#: data word whose every part is 1 (the share of a constant in the data is the kernel's
#: sum of it).
_WORDS = {"bytes": ("u8s8 words", 4, np.int8, (-128, 127), 0x01010101),
          "halves": ("s16 words", 2, np.int16, (-(2 ** 15 - 1), 2 ** 15 - 1), 0x00010001)}
#: AMX's tiles take VNNI's byte words (:mod:`.tiles`).
_WORDS["tiles"] = _WORDS["bytes"]


def products_per_lane(kind: str, per_group: tuple[int, int], vector_bytes: int) -> float:
    """The useful products :class:`BlockedSums`' kernel adds per 32-bit lane of each
    vector instruction, for ``per_group`` ``(Ci, Co)`` channels of a group: ``kind``'s
    words hold 4 (``bytes``) or 2 (``halves``) input channels per lane, zero past ``Ci``,
    and the lanes run over a group's ``Co`` output channels, idle past them.  A float32
    kernel whose lanes are all busy adds 1; below 1 the integer kernel issues more
    vector products than such a kernel (a depthwise layer's single channel per group
    uses 1 byte of 4 in 1 lane of 16: 1/16), and the exact float32 passes, whose
    depthwise and grouped algorithms keep their lanes busy, run fewer."""
    ci, co = per_group
    per_word = _WORDS[kind][1]
    lanes = vector_bytes // 4
    return ci / -(-ci // per_word) * co / (lanes * -(-co // lanes))


def word_products(kind: str) -> int:
    """The products one lane of ``kind``'s words adds per instruction when every part of
    the word and every lane is busy: :func:`products_per_lane`'s most."""
    return _WORDS[kind][1]


def _word_weights(weights: np.ndarray, derived: dict, kind: str = "bytes"
                  ) -> np.ndarray | None:
    """The weights ``(G, Ci, Co, K...)`` as int32 words ``(G, Ci / per word, Co, K...)``
    (:data:`_WORDS`): each word the ``bytes`` (int8 weights of input channels ``4c ..
    4c + 3``, in the byte order ``vpdpbusd`` pairs with four input bytes) or ``halves``
    (int16 weights of channels ``2c``, ``2c + 1``) of consecutive input channels, zero
    past ``Ci``; None where a weight lies outside the kind's range.  Kept in
    ``derived``."""
    key, per_word, dtype, (low, high), _ = _WORDS[kind]
    words = derived.get(key)
    if words is None:
        if int(weights.min(initial=0)) < low or int(weights.max(initial=0)) > high:
            words = ()
        else:
            groups, ci = weights.shape[:2]
            count = -(-ci // per_word)
            padded = np.zeros((groups, count * per_word) + weights.shape[2:], dtype)
            padded[:, :ci] = weights
            parts = padded.reshape((groups, count, per_word) + weights.shape[2:])
            words = np.ascontiguousarray(np.moveaxis(parts, 2, -1)).view(np.int32)
            words = frozen(words.reshape(words.shape[:-1]))
        derived[key] = words
    return words if isinstance(words, np.ndarray) else None


def _word_data(data: np.ndarray, channels_last: bool, groups: int, ci: int, ci4: int,
               shift: int, target) -> np.ndarray:
    """``data + shift`` as int32 words ``(N, X..., G*Ci4)`` of four bytes each (input
    channels ``4c .. 4c + 3`` of a group, zero past ``Ci``): the channels-last bytes
    themselves where they already are (uint8, ``Ci`` a multiple of 4, no shift), else
    compiled passes (:func:`._numba.int8.word_bytes`, blocks of ``target``'s float32
    lanes)."""
    from ._numba.int8 import word_bytes

    if (channels_last and data.dtype == np.uint8 and ci == ci4 * 4 and not shift
            and data.flags.c_contiguous):
        return data.view(np.int32)
    words = word_bytes(np.ascontiguousarray(data), channels_last, groups, ci, ci4 * 4, shift,
                       target.threads, target.lanes(np.float32))
    return words.reshape(words.shape[:-2] + (-1,)).view(np.int32)


def u8s8_blocked(data: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                 target) -> np.ndarray | None:
    """:func:`u8s8_transposed`'s exact int32 sums by ``direct-blocked``'s kernel with
    ``vpdpbusd`` products: each output's sums stay in registers over every tap and
    input channel and are written once (no columns, no scatter).  None where
    :func:`u8s8_transposed`'s conditions fail or a sum could leave int32.

    The data shifted into ``[0, 255]`` (by ``shift``, 0 where it already is) adds
    ``shift`` times the sum of the weights each output's taps reach; that share
    depends on the output's place only, is computed once per filter and layer by the
    same kernel on bytes of ones, and is subtracted.
    """
    run = prepare_blocked_sums("bytes", data.shape[0], weights, axes, channels_last, target)
    return None if run is None else run(data)


def _layer(count, words, axes, blocked, target, product):
    """``(layer, shape)``: ``direct-blocked``'s kernel with ``product`` on int32 words,
    set up once for ``count`` samples (:class:`._numba.blocked.BlockedLayer`, kept in
    ``blocked``), and the shape ``(count, Y..., G*Co)`` of the int32 sums it fills."""
    from ._numba.blocked import blocked_layer
    from .schedules import KEEP

    layer = blocked_layer(count, words, axes, np.dtype(np.int32), True, KEEP, blocked,
                          target, product)
    return layer, (count,) + tuple(a.output_size for a in axes) + (
        words.shape[0] * words.shape[2],)


def _halves_data(data: np.ndarray, channels_last: bool, groups: int, ci: int, pairs: int,
                 target) -> np.ndarray:
    """``data`` (integers within int16) as int32 words ``(N, X..., G * pairs)`` of two
    int16 halves each: input channels ``2c`` and ``2c + 1`` of a group, zero past
    ``Ci``.  Channels-first data in compiled passes
    (:func:`._numba.int8.word_halves`, blocks of ``target``'s float32 lanes),
    channels-last data by NumPy."""
    if not channels_last:
        from ._numba.int8 import word_halves

        return word_halves(data, groups, ci, pairs, target.threads, target.lanes(np.float32))
    lead = data.shape[:-1]
    make = np.zeros if ci % 2 else np.empty
    halves = make(lead + (groups, 2 * pairs), np.int16)
    halves[..., :ci] = data.reshape(lead + (groups, ci))
    return halves.reshape(lead + (-1,)).view(np.int32)


def s16_blocked(data: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                target) -> np.ndarray | None:
    """The exact int32 sums of the transposed convolution of integer ``data`` ``(N,
    G*Ci, X...)`` (``(N, X..., G*Ci)`` with ``channels_last``) and ``weights`` ``(G, Ci,
    Co, K...)`` by ``direct-blocked``'s kernel with ``pmaddwd`` pair products
    (``vector_dot_words``): two input channels per product, each output's sums in
    registers over every tap and input channel, written once.  Signed times signed, so
    neither operand is shifted.  Every x86-64 CPU has the instruction: the fast exact
    path where ``vpdpbusd`` is missing, or the data are not bytes (TFLite's int16 x
    int8).  Returns ``(N, Y..., G*Co)`` int32 (a channels-first view of it without
    ``channels_last``); None for more than three axes, operands outside ``[-32767,
    32767]``, where a sum could leave int32, or on a CPU other than x86.
    """
    run = prepare_blocked_sums("halves", data.shape[0], weights, axes, channels_last, target)
    return None if run is None else run(data)


class BlockedSums:
    """The exact int32 sums of one layer's integer data and weights by ``direct-blocked``'s
    kernel with integer word products (``kind`` ``"bytes"``: VNNI's ``vpdpbusd``;
    ``"halves"``: ``pmaddwd``), or on AMX tiles (``"tiles"``: VNNI's words, the kernel
    of :mod:`.tiles`), set up once for data of ``batch`` samples: the weights'
    words, the kernel and its thread split.  Make one with :func:`prepare_blocked_sums`.

    ``sums(data, offset)`` leaves the share of a constant in the data to its caller:
    data that the kind's words do not take as they are (bytes: outside ``[0, 255]``)
    are summed shifted, and the sums of ``data - offset`` are ``acc - factor * share``,
    with ``share`` the sums of data of ones, per output place and channel (computed
    once per layer by the same kernel, kept with the weights).  A requantization that
    reads ``share`` as it reads ``acc`` subtracts it in the same pass (and a uint8
    input with its zero point as ``offset`` is summed as it is, not centred).
    Calling the object subtracts it at once (``offset`` 0).
    """

    def __init__(self, kind: str, batch: int, words: np.ndarray, weights: np.ndarray,
                 derived: dict, axes, channels_last: bool, target) -> None:
        self.kind, self.batch, self.axes, self.channels_last = kind, batch, axes, channels_last
        self._words, self._weights, self._derived, self._target = words, weights, derived, target
        self._groups, ci = weights.shape[:2]
        largest = derived.get(kind + " largest")
        if largest is None:
            largest = derived[kind + " largest"] = max(-int(weights.min(initial=0)),
                                                        int(weights.max(initial=0)))
        # The most a sum of data of magnitude 1 reaches: each sum's bound per unit of data.
        self._unit = ci * taps_per_output(axes) * largest
        self._ci = ci
        self._layers: dict = {}

    def _layer(self, count: int):
        """``(layer, shape)`` of the kernel set up for ``count`` samples (:func:`_layer`;
        the share's made at first use)."""
        made = self._layers.get(count)
        if made is None and self.kind == "tiles":
            from .tiles import tile_layer

            made = self._layers[count] = tile_layer(count, self._weights, self.axes,
                                                    self._derived, self._target)
        if made is None:
            product = "vector_dot_bytes" if self.kind == "bytes" else "vector_dot_words"
            blocked = self._derived.setdefault(self.kind + " blocked", {})
            made = self._layers[count] = _layer(count, self._words, self.axes, blocked,
                                               self._target, product)
        return made

    def _sums_array(self, shape: tuple) -> np.ndarray:
        """A new array for the kernel's int32 sums (the tiles' on a cache line)."""
        if self.kind == "tiles":
            from .tiles import aligned

            return aligned(shape, np.int32)
        return np.empty(shape, np.int32)

    def _fill(self, count: int, words: np.ndarray) -> np.ndarray:
        """The int32 sums of ``count`` samples' ``words``."""
        layer, shape = self._layer(count)
        out = self._sums_array(shape)
        layer(words, out)
        return out

    def _words_of(self, data: np.ndarray, shift: int) -> np.ndarray:
        """``data + shift`` as the kind's words ``(N, X..., G * words per group)``."""
        count = self._words.shape[1]
        if self.kind != "halves":
            return _word_data(data, self.channels_last, self._groups, self._ci, count, shift,
                              self._target)
        return _halves_data(data, self.channels_last, self._groups, self._ci, count,
                            self._target)

    def _shift(self, low: int, high: int) -> int | None:
        """What data spanning ``[low, high]`` are summed plus, or None where the words
        cannot hold them or a sum of the words could leave int32."""
        if self.kind == "halves":
            magnitude = max(-low, high)
            fits = magnitude <= _WORDS["halves"][3][1] and self._unit * magnitude <= _INT32_MAX
            return 0 if fits else None
        if high - low > 255 or self._unit * 255 > _INT32_MAX:
            return None
        return 0 if 0 <= low and high <= 255 else -low

    def takes(self, data: np.ndarray) -> bool:
        """Whether :meth:`sums` takes ``data`` (its words hold the data's values and no
        sum can leave int32)."""
        return self._shift(*_span(data)) is not None

    def share(self) -> np.ndarray | None:
        """The sums of data of ones ``(Y..., G*Co)`` int32 (read-only, kept with the
        weights), or None where they could leave int32."""
        key = (self.kind + " share", tuple(self.axes))
        share = self._derived.get(key)
        if share is None:
            if self._unit > _INT32_MAX:
                return None
            inputs = tuple(a.input_size for a in self.axes)
            ones = np.full((1,) + inputs + (self._words.shape[0] * self._words.shape[1],),
                           _WORDS[self.kind][4], np.int32)
            share = self._derived[key] = frozen(self._fill(1, ones)[0])
        return share

    def sums(self, data: np.ndarray, offset: int = 0):
        """``(acc, factor, share)`` for ``data`` of ``batch`` samples (the set-up's
        layout): the exact sums of ``data - offset`` are ``acc - factor * share`` (int64
        arithmetic; ``acc`` ``(N, Y..., G*Co)`` int32, channels last whatever the data's
        layout; ``share`` None where ``factor`` is 0).  None where the words cannot
        hold the data or a sum could leave int32."""
        return self._sums(data, offset, _span(data))

    def _sums(self, data, offset, span):
        prepared = self._prepared(data, offset, span)
        if prepared is None:
            return None
        words, factor, share = prepared
        return self._fill(self.batch, words), factor, share

    def _prepared(self, data, offset, span):
        """``(words, factor, share)`` of :meth:`sums`, or None where it declines."""
        shift = self._shift(*span)
        if shift is None:
            return None
        factor = shift + offset
        share = self.share() if factor else None
        if factor and share is None:
            return None
        return self._words_of(data, shift), factor, share

    def requantized(self, data: np.ndarray, offset: int, requantization):
        """``requantization(acc, factor, share)`` of :meth:`sums` (a
        :class:`~convtranspose._kernels.requantize.CorrectedRequantization` or
        :class:`~convtranspose._kernels.requantize.RowsRequantization`), each
        piece of output lines requantized by the thread that summed it as soon as it
        did, while its sums are in that core's caches, where the kernel's pieces are
        whole lines (one group, one pass of output channels); after every sum
        otherwise.  None where :meth:`sums` declines."""
        low, high = span = _span(data)
        prepared = self._prepared(data, offset, span)
        if prepared is None:
            return None
        words, factor, share = prepared
        # The sums of data - offset: each at most unit * the data's largest distance
        # from the offset.
        bound = self._unit * max(abs(low - offset), abs(high - offset))
        layer, shape = self._layer(self.batch)
        # The sums die with the call: one array of them is kept with the weights for
        # the next (a new one's fresh pages cost 0.04-0.09 ms of the quantized suite's
        # 0.9-1.2 ms prepared calls on an Intel Xeon: ``benchmarks/results/quantized-
        # calls-xeon.json``, kept_sums).
        with spare_array(self._derived, ("int32 sums", self.kind, shape),
                         lambda: self._sums_array(shape)) as acc:
            if not layer.fusable:
                layer(words, acc)
                return requantization(acc, factor, share, bound)
            result, lines = requantization.start(acc, factor, share, bound)
            layer(words, acc, after=lines)
            return result

    def requantizer(self, offset: int, requantization):
        """``requantizer(x)``: :meth:`requantized` of ``x``, ``offset`` and
        ``requantization``, each dtype of data bound once where :meth:`chained` can
        (:class:`~.chained_sums.Requantizer`)."""
        from .chained_sums import Requantizer

        return Requantizer(self, offset, requantization)

    def chained(self, data: np.ndarray, offset: int, requantization):
        """:meth:`requantized` for data of ``data``'s shape and dtype, C-contiguous, bound
        once: a :class:`~.chained_sums.ChainedSums` whose calls run the words, the sums
        and the requantization in one compiled call.  None where the call would not run
        as one pass of each on one thread, the data are not one-byte integers (the
        span of other data, and so their shift, is found on each call), the sums are
        the AMX tiles' or ``requantization`` has no ``bind``."""
        span = BYTE_RANGES.get(data.dtype.char)
        if span is None or self.kind == "tiles" or not hasattr(requantization, "bind"):
            return None
        shift = self._shift(*span)
        factor = None if shift is None else shift + offset
        share = self.share() if factor else None
        if factor is None or (factor and share is None):
            return None
        from ._numba.chains import ChainedPasses
        from ._numba.transpose import copy_threads
        from .chained_sums import ChainedSums

        layer, shape = self._layer(self.batch)
        make_words = self._words_pass(data, shift)
        if make_words is None or copy_threads(math.prod(shape) * 4, self._target.threads) > 1:
            return None
        bound = self._unit * max(abs(span[0] - offset), abs(span[1] - offset))

        def make_scratch(source: np.ndarray) -> tuple:
            # One set of working arrays, with each pass's (kernel, arguments, count) on it.
            words, words_pass = make_words(source)
            acc = np.empty(shape, np.int32)
            summed = frozen((source if words is None else words).reshape(-1).view(np.int32))
            sums_pass = layer.single_pass(summed, acc)
            kernel, arguments, new_result = requantization.bind(acc, factor, share, bound)
            rows_pass = (kernel, arguments + (new_result()[1],), acc.size // shape[-1])
            return words, words_pass, sums_pass, rows_pass, new_result

        def scratch_set(made: tuple) -> tuple:
            # ChainedSums' set: the words, then each pass's arguments and count.
            words, words_pass, sums_pass, rows_pass, _ = made
            return ((words,) + (words_pass[1:] if words_pass else ((), 0)) + sums_pass[1:]
                    + rows_pass[1:])

        example = np.empty(math.prod(data.shape), data.dtype)  # as writable as the data
        made = make_scratch(example if data.flags.writeable else frozen(example))
        _, words_pass, sums_pass, rows_pass, new_result = made
        if sums_pass is None:
            return None
        passes = ChainedPasses(words_pass and words_pass[:2], sums_pass[:2], rows_pass[:2])
        if not passes.ready:
            return None
        return ChainedSums(data.shape, passes,
                           lambda source: scratch_set(make_scratch(source)), new_result,
                           scratch_set(made))

    def _words_pass(self, data: np.ndarray, shift: int):
        """``make`` for :meth:`chained`: ``make(source)`` gives ``(words, words_pass)`` for
        the flat data ``source``, a new array of ``data + shift`` as the kind's words and
        the compiled pass that fills it, ``(kernel, arguments, count)`` (both None where
        the data are the words as they are); None where the pass would split between
        threads."""
        from ._numba.int8 import channel_words_pass, shifted_pixels_pass
        from ._numba.transpose import copy_threads

        groups, ci, count = self._groups, self._ci, self._words.shape[1]
        halves = self.kind == "halves"
        if not self.channels_last:
            words_shape = (data.shape[0], math.prod(data.shape[2:]), groups * count)
            if copy_threads(math.prod(words_shape) * 4, self._target.threads) > 1:
                return None
            lanes = self._target.lanes(np.float32)

            def make(source):
                words = np.empty(words_shape, np.uint32)
                return words, channel_words_pass(source.reshape(data.shape), words, shift,
                                                 groups, ci, lanes, halves)

            return make
        if not halves and data.dtype == np.uint8 and ci == count * 4 and not shift:
            return lambda source: (None, None)
        per_word = 2 if halves else 4
        words_shape = data.shape[:-1] + (groups, count * per_word)

        def make_shifted(source):
            words = np.zeros(words_shape, np.int16 if halves else np.uint8)
            return words, shifted_pixels_pass(source, words, shift, groups, ci)

        return make_shifted

    def __call__(self, data: np.ndarray) -> np.ndarray | None:
        """The exact sums of ``data`` ``(N, Y..., G*Co)`` int32 (a channels-first view of
        it where the layer is channels first), or None where :meth:`sums` declines or
        the result or the shift's share could leave int32."""
        low, high = span = _span(data)
        if self.kind != "halves" and self._unit * max(255, -low, high) > _INT32_MAX:
            return None
        summed = self._sums(data, 0, span)
        if summed is None:
            return None
        out, factor, share = summed
        if factor:
            corrected_sums(out, factor, share, None, self._target.threads, out=out)
        return in_layout(out, self.channels_last)


def _word_target(kind: str, target):
    """``target`` on the vectors whose lanes ``kind``'s word product takes on this CPU,
    the widest up to the target's (``bytes``: ``vpdpbusd``, from AVX-VNNI's 32 bytes;
    ``halves``: ``pmaddwd``), or None where it has none."""
    from .._runtime.machine import integer_vector_bytes, vnni_vector_bytes

    widest, least = (vnni_vector_bytes(), 32) if kind == "bytes" else (
        integer_vector_bytes(), 1)
    width = min(target.vector_bytes, widest)
    return target.replace(vector_bytes=width) if width >= least else None


def prepare_blocked_sums(kind: str, batch: int, weights: np.ndarray, axes,
                         channels_last: bool, target) -> BlockedSums | None:
    """:func:`u8s8_blocked` (``kind`` ``"bytes"``), :func:`s16_blocked` (``"halves"``)
    or the AMX tiles' sums (``"tiles"``: :func:`.tiles.tile_layer`) set up once for data
    of ``batch`` samples (:class:`BlockedSums`).  None where the layer or its weights
    do not qualify at all: more than three axes, weights outside the kind's range, a
    CPU other than x86 for ``halves``, one without ``vpdpbusd`` on 32 bytes or more
    for ``bytes``, a layer the tiles do not take (:func:`.tiles.tiles_take`) or a CPU
    without them for ``tiles``."""
    if not 1 <= len(axes) <= 3:
        return None
    if kind == "tiles":
        from .._runtime.machine import has_amx_int8
        from .tiles import tiles_take

        if not (has_amx_int8() and tiles_take(*weights.shape[:3], len(axes))):
            return None
    else:
        target = _word_target(kind, target)
        if target is None:
            return None
    derived = derived_from(weights, "s16" if kind == "halves" else "u8s8")
    words = _word_weights(weights, derived, kind)
    if words is None:
        return None
    return BlockedSums(kind, batch, words, weights, derived, axes, channels_last, target)
