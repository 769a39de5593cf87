"""AMX tiles as numba operations, and the transposed convolution's int8 sums on them.

An AMX tile register holds up to 16 rows of 64 bytes.  ``tdpbusd`` multiplies a tile
of 16 rows x 64 unsigned bytes (16 output pixels, 64 input channels) with one of 16
rows x 16 int32 words of four signed bytes each (64 input channels x 16 output
channels, four channels per word: ``vpdpbusd``'s byte order) and adds the products,
four to a word, into a tile of 16 x 16 int32 sums: 16384 multiply-adds per
instruction, 16 times ``vpdpbusd``'s on 512-bit vectors.  The tiles' shapes come from
a 64-byte configuration loaded at run time (``ldtilecfg``), so one compiled kernel
serves every layer; the tile registers themselves are operands fixed in the code.

Each operation takes its tile register as an integer literal and an array with a
byte offset; none checks bounds (the caller guarantees the range).  Only imported
where :func:`convtranspose._runtime.machine.has_amx_int8` holds: the instructions
fault elsewhere.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import errors
from numba.extending import intrinsic

from .kernel_cache import cached_njit

__all__ = ["TILE_ROWS", "tile_peak", "tile_sums"]

#: Rows of a tile (output pixels), and 32-bit words in a row of one (output channels).
TILE_ROWS = 16
_BYTE = ir.IntType(8)
_BYTE_POINTER = _BYTE.as_pointer()


def _literals(*values) -> list[int]:
    """The tile numbers, which must be compile-time integers (the instructions encode
    their registers)."""
    for value in values:
        if not isinstance(value, types.IntegerLiteral):
            raise errors.RequireLiteralValue(value)
    return [value.literal_value for value in values]


def _byte_pointer(context, builder, array_type, array, offset):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(builder.bitcast(data, _BYTE_POINTER), [offset])


def _call(builder, name: str, arguments: list, kinds: list) -> None:
    function = builder.module.declare_intrinsic(
        name, fnty=ir.FunctionType(ir.VoidType(), kinds))
    builder.call(function, arguments)


@intrinsic
def tile_configure(typingctx, config):
    """``ldtilecfg``: the tiles' shapes from the 64 bytes of ``config``."""
    def codegen(context, builder, signature, args):
        pointer = _byte_pointer(context, builder, signature.args[0], args[0],
                                ir.Constant(ir.IntType(64), 0))
        _call(builder, "llvm.x86.ldtilecfg", [pointer], [_BYTE_POINTER])
        return context.get_dummy_value()

    return types.none(config), codegen


@intrinsic
def tile_release(typingctx):
    """``tilerelease``: the tiles back to their initial state (the system then saves
    none of them on a context switch)."""
    def codegen(context, builder, signature, args):
        _call(builder, "llvm.x86.tilerelease", [], [])
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def tile_zero(typingctx, tile):
    """``tilezero``: every sum of ``tile`` to 0."""
    number, = _literals(tile)

    def codegen(context, builder, signature, args):
        _call(builder, "llvm.x86.tilezero", [ir.Constant(_BYTE, number)], [_BYTE])
        return context.get_dummy_value()

    return types.none(tile), codegen


def _memory_operation(name: str):
    def operation(typingctx, tile, array, offset, stride):
        number, = _literals(tile)

        def codegen(context, builder, signature, args):
            pointer = _byte_pointer(context, builder, signature.args[1], args[1], args[2])
            _call(builder, name, [ir.Constant(_BYTE, number), pointer, args[3]],
                  [_BYTE, _BYTE_POINTER, ir.IntType(64)])
            return context.get_dummy_value()

        return types.none(tile, array, types.int64, types.int64), codegen

    return operation


#: ``tileloadd``: ``tile``'s rows from ``array``, the first at byte ``offset``, each
#: ``stride`` bytes after the one before.
tile_load = intrinsic(_memory_operation("llvm.x86.tileloadd64"))
#: ``tilestored``: ``tile``'s rows into ``array``, laid out as :data:`tile_load` reads.
tile_store = intrinsic(_memory_operation("llvm.x86.tilestored64"))


@intrinsic
def tile_dot_bytes(typingctx, sums, unsigned, signed):
    """``tdpbusd``: ``sums`` plus the products of the rows of unsigned bytes
    ``unsigned`` with the words of four signed bytes ``signed``."""
    numbers = _literals(sums, unsigned, signed)

    def codegen(context, builder, signature, args):
        _call(builder, "llvm.x86.tdpbusd", [ir.Constant(_BYTE, n) for n in numbers],
              [_BYTE] * 3)
        return context.get_dummy_value()

    return types.none(sums, unsigned, signed), codegen


@cached_njit(nogil=True, inline="always")
def _accumulate(data, weights, sizes, taps0, taps1, taps2, starts0, starts1, starts2,
                n, j0, j1, p0, p1, p2, first, block, wide, group,
                second):  # pragma: no cover - compiled
    """Tiles 0-3 summed over every tap of a line's phases and every input channel of
    ``group``: pixels ``first`` to ``first + 15`` of phase ``p2`` and the 16 pixels
    whose data start ``second`` bytes further (the next 16 of the line, or the same
    of the next line of the phase) by output channel blocks ``block`` and ``block +
    1`` (tile ``2 * half + side``), or with ``wide`` pixels ``first`` to ``first +
    15`` by blocks ``block`` to ``block + 3`` (tile ``side``); a tile whose channel
    block is past the last stays zero."""
    channels, blocks, kernel1, kernel2 = sizes[10], sizes[11], sizes[12], sizes[13]
    row = sizes[14] * channels  # bytes of one input pixel, every group's channels
    panel = channels * TILE_ROWS  # bytes of one (tap, channel block) weight panel
    first_tap = group * sizes[15]  # the group's panels follow the groups' before it
    sides = min(4 if wide else 2, blocks - block)
    tile_zero(0)
    tile_zero(1)
    tile_zero(2)
    tile_zero(3)
    for a in range(starts0[p0], starts0[p0 + 1]):
        for b in range(starts1[p1], starts1[p1 + 1]):
            line = ((n * sizes[7] + j0 + taps0[a, 1]) * sizes[8] + j1 + taps1[b, 1]) * sizes[9]
            tap = first_tap + (taps0[a, 0] * kernel1 + taps1[b, 0]) * kernel2
            for c in range(starts2[p2], starts2[p2 + 1]):
                pixels = (line + first + taps2[c, 1]) * row + group * channels
                panels = ((tap + taps2[c, 0]) * blocks + block) * panel
                for chunk in range(0, channels, 64):
                    at = panels + chunk * TILE_ROWS
                    tile_load(4, data, pixels + chunk, row)
                    tile_load(6, weights, at, 64)
                    if wide:
                        _four_blocks(weights, at, panel, sides)
                        continue
                    tile_load(5, data, pixels + second + chunk, row)
                    tile_dot_bytes(0, 4, 6)
                    tile_dot_bytes(2, 5, 6)
                    if sides == 2:
                        tile_load(7, weights, at + panel, 64)
                        tile_dot_bytes(1, 4, 7)
                        tile_dot_bytes(3, 5, 7)


@cached_njit(nogil=True, inline="always")
def _four_blocks(weights, at, panel, sides):  # pragma: no cover - compiled
    """The products of tile 4's pixels with ``sides`` channel blocks of panels from
    ``at`` (the first loaded in tile 6) into tiles 0 to ``sides - 1``."""
    tile_dot_bytes(0, 4, 6)
    if sides > 1:
        tile_load(7, weights, at + panel, 64)
        tile_dot_bytes(1, 4, 7)
    if sides > 2:
        tile_load(6, weights, at + 2 * panel, 64)
        tile_dot_bytes(2, 4, 6)
    if sides > 3:
        tile_load(7, weights, at + 3 * panel, 64)
        tile_dot_bytes(3, 4, 7)


@cached_njit(nogil=True)
def tile_sums(data, weights, out, config, sizes, taps0, taps1, taps2, starts0, starts1,
              starts2, first_line, stop_line):  # pragma: no cover - compiled
    """The int32 sums of output lines ``[first_line, stop_line)`` (lines of the last
    axis, over ``N x Y0 x Y1``) of a transposed convolution of ``G`` groups, on AMX
    tiles.

    ``data``: the input bytes ``(N, P0, P1, P2, G * Ci)`` (uint8), zero-padded on every
    axis so that every tap of every output reads inside it, and the last axis 32
    pixels beyond that (a block's pixels past the line's end are read, summed and
    dropped); ``Ci`` (per group) a multiple of 64.  ``weights``: int8 panels
    ``[group][tap][block of 16 output channels][Ci / 4][16][4]`` (taps ``(k0 * K1 +
    k1) * K2 + k2``).  ``out``: the sums ``(N, Y0, Y1, Y2, G * Co)`` (int32, channels
    last, flat), ``Co`` a multiple of 16.  ``config``: the tiles' shapes
    (:func:`convtranspose._kernels.tiles.tile_config`).  ``sizes``: ``N, Y0, Y1, Y2,
    s0, s1, s2, P0, P1, P2, Ci, Co / 16, K1, K2, G, K0 * K1 * K2``.  Per axis,
    ``taps`` ``(T, 2)``: ``(k, shift + pad)`` of the taps of each output phase ``p``,
    rows ``starts[p]`` to ``starts[p + 1]``: output ``j * s + p`` takes tap ``k`` from
    input ``j + shift``.

    Each phase's outputs along a line go in blocks of 32 pixels by 32 output channels
    (16 by 64 for a line's last 16 or fewer; where every phase of the lines holds 16
    or fewer, two lines of a phase together, 16 pixels of each by 32 channels): four
    tiles of sums stay in their registers over every tap and input channel, then are
    stored once (a block with pixels past the line's end through a buffer, keeping the
    pixels that exist)."""
    y0, y1, y2, s2, blocks = sizes[1], sizes[2], sizes[3], sizes[6], sizes[11]
    outputs = sizes[14] * blocks * TILE_ROWS  # every group's output channels
    step = s2 * outputs * 4  # bytes between a phase's consecutive outputs
    rest = np.empty((4, TILE_ROWS, TILE_ROWS), np.int32)
    # Lines whose phases hold 16 outputs or fewer go in pairs: each line with the next
    # line of its phase along axis 1 (axis 0 where axis 1 has one line): the same taps,
    # one input line further.  Each weight tile loaded then serves 32 pixels, not 16.
    axis = 1 if y1 > 1 else 0
    paired = (y2 + s2 - 1) // s2 <= TILE_ROWS and (y1 if axis else y0) > 1
    apart = sizes[5] if axis else sizes[4] * y1  # lines between a line and its partner
    row = sizes[14] * sizes[10]
    inputs = sizes[9] * row * (1 if axis else sizes[8])  # bytes of one input line step
    tile_configure(config)
    for line in range(first_line, stop_line):
        n, o0, o1 = line // (y0 * y1), (line // y1) % y0, line % y1
        j0, p0, j1, p1 = o0 // sizes[4], o0 % sizes[4], o1 // sizes[5], o1 % sizes[5]
        j, o, size = (j1, o1, y1) if axis else (j0, o0, y0)
        pair = paired and j % 2 == 0 and o + sizes[4 + axis] < size and (
            line + apart < stop_line)
        if paired and j % 2 == 1 and line - apart >= first_line:
            continue  # summed with its partner
        for group in range(sizes[14]):
            _group_line(data, weights, out, sizes, taps0, taps1, taps2, starts0, starts1,
                        starts2, rest, n, j0, j1, p0, p1,
                        line * y2 * outputs + group * blocks * TILE_ROWS, step, group,
                        inputs if pair else 0, apart * y2 * outputs if pair else 0)
    tile_release()


@cached_njit(nogil=True, inline="always")
def _group_line(data, weights, out, sizes, taps0, taps1, taps2, starts0, starts1, starts2,
                rest, n, j0, j1, p0, p1, base, step, group, partner,
                partner_out):  # pragma: no cover
    """One group's sums of one output line, from element ``base`` of ``out``, with
    those of its partner line where ``partner`` (the bytes from the line's data to
    the partner's; the partner's outputs ``partner_out`` elements further on)."""
    y2, s2, blocks = sizes[3], sizes[6], sizes[11]
    outputs = sizes[14] * blocks * TILE_ROWS
    row = sizes[14] * sizes[10]
    for p2 in range(min(s2, y2)):
        count = (y2 - p2 + s2 - 1) // s2  # this phase's outputs on the line
        first = 0
        while first < count:
            wide = partner == 0 and count - first <= TILE_ROWS
            second = partner if partner else TILE_ROWS * row
            for block in range(0, blocks, 4 if wide else 2):
                _accumulate(data, weights, sizes, taps0, taps1, taps2, starts0,
                            starts1, starts2, n, j0, j1, p0, p1, p2, first, block, wide,
                            group, second)
                at = base + (p2 + first * s2) * outputs + block * TILE_ROWS
                left = count - first
                rows = (left, left) if partner else (left, left - TILE_ROWS)
                _store(out, rest, at, step, rows[0], rows[1],
                       partner_out if partner else TILE_ROWS * step // 4,
                       min(4 if wide else 2, blocks - block), wide)
            first += TILE_ROWS if wide or partner else 2 * TILE_ROWS


@cached_njit(nogil=True)
def _store(out, rest, at, step, rows, second_rows, second, sides,
           wide):  # pragma: no cover - compiled
    """Tiles 0-3 of :func:`_accumulate` into ``out`` from element ``at``, a phase's
    consecutive outputs ``step`` bytes apart and the second half's pixels ``second``
    elements after the first's: straight where all their rows are outputs, else
    through ``rest``, keeping the first ``rows`` rows of the first half and
    ``second_rows`` of the second."""
    if rows >= TILE_ROWS and (wide or second_rows >= TILE_ROWS):
        for tile in range(4):
            half, side = (0, tile) if wide else (tile // 2, tile % 2)
            if side < sides:
                _store_tile(out, tile, (at + half * second + side * TILE_ROWS) * 4, step)
        return
    for tile in range(4):
        _store_tile(rest, tile, tile * TILE_ROWS * TILE_ROWS * 4, TILE_ROWS * 4)
    elements = step // 4
    for tile in range(4):
        half, side = (0, tile) if wide else (tile // 2, tile % 2)
        if side >= sides:
            continue
        for row in range(min(TILE_ROWS, second_rows if half else rows)):
            place = at + half * second + row * elements + side * TILE_ROWS
            for lane in range(TILE_ROWS):
                out[place + lane] = rest[tile, row, lane]


@cached_njit(nogil=True, inline="always")
def _store_tile(array, tile, offset, stride):  # pragma: no cover - compiled
    """Tile ``tile`` (0-3, a run-time number) into ``array`` from byte ``offset``."""
    if tile == 0:
        tile_store(0, array, offset, stride)
    elif tile == 1:
        tile_store(1, array, offset, stride)
    elif tile == 2:
        tile_store(2, array, offset, stride)
    else:
        tile_store(3, array, offset, stride)


@cached_njit(nogil=True)
def tile_peak(config, data, count):  # pragma: no cover - compiled
    """``count`` rounds of four ``tdpbusd`` into four independent tiles of sums, their
    operands loaded once per round from the first 4 KiB of ``data`` (L1): this CPU's
    tile peak, for ``benchmarks/int8_kernels.py --peak``."""
    tile_configure(config)
    tile_zero(0)
    tile_zero(1)
    tile_zero(2)
    tile_zero(3)
    for _ in range(count):
        tile_load(4, data, 0, 64)
        tile_load(5, data, 1024, 64)
        tile_load(6, data, 2048, 64)
        tile_load(7, data, 3072, 64)
        tile_dot_bytes(0, 4, 6)
        tile_dot_bytes(1, 4, 7)
        tile_dot_bytes(2, 5, 6)
        tile_dot_bytes(3, 5, 7)
    _store_tile(data, 0, 0, 64)
    tile_release()
