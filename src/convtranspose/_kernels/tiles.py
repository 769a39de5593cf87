"""Exact int8 transposed convolutions on AMX tiles (``tdpbusd``).

The sums of :class:`convtranspose._kernels.int8.BlockedSums` of kind ``"tiles"``:
those of VNNI's byte words (unsigned data bytes times signed weight bytes, the data
shifted into ``[0, 255]`` and the shift's share subtracted by the caller's pass), on
the tile registers of Intel's AMX where the CPU has them
(:func:`convtranspose._runtime.machine.has_amx_int8`): one instruction adds 16 x 16 x
64 products, 16 times ``vpdpbusd``'s.  On an Intel
Xeon ``tdpbusd``'s peak is 2.9 T multiply-adds/s on one thread against ``vpdpbusd``'s
0.42, and this kernel sums the quantized suite's large layers at 0.50-0.72 T, 1.2-2.6x
VNNI's kernel (``benchmarks/results/int8-kernels-xeon.json``, amx_tiles).

The kernel (:func:`._numba.tiles.tile_sums`) keeps four tiles of 16 output pixels x
16 output channels in registers over every tap and input channel of a stride phase,
reading the data's pixels as the tiles' rows straight from a zero-padded
channels-last copy (so that border outputs run the same code) and the weights from
panels packed once per filter (kept in the weights memo).  It takes layers whose
groups have a multiple of 64 input channels and a multiple of 16 output channels,
each group in turn on every line; others run on VNNI.
"""

from __future__ import annotations

import numpy as np

from .._plan.geometry import axis_phases, three_axes
from .._runtime.memo import frozen, spare_array
from .._runtime.threads import parallel_for

__all__ = ["TileLayer", "aligned", "tile_config", "tile_layer", "tiles_take"]

#: Input channels one tile row holds, output channels one tile's row of words holds.
_CHANNELS_PER_ROW, _OUTPUTS_PER_TILE = 64, 16
#: Zero pixels past the end of the last axis: a block of two tiles reads 32 pixels
#: from its first, whether or not the line has them.
_OVERREAD = 32
#: Bytes of a cache line.
_LINE = 64


def tiles_take(groups: int, ci: int, co: int, rank: int) -> bool:
    """Whether :func:`._numba.tiles.tile_sums` takes a layer: per group, whole tile rows
    of input channels and whole tiles of output channels; one to three axes."""
    return ci % _CHANNELS_PER_ROW == 0 and co % _OUTPUTS_PER_TILE == 0 and 1 <= rank <= 3


def aligned(shape, dtype, make=np.empty) -> np.ndarray:
    """An array of ``shape`` (by ``make``: ``np.empty`` or ``np.zeros``) whose first
    byte is on a 64-byte boundary: a tile's rows are whole cache lines only then
    (NumPy aligns to 16 bytes).  On an Intel Xeon, aligning the data, weights and sums
    took the tiles from 430-740 to 940 G multiply-adds/s on one thread
    (``benchmarks/results/int8-kernels-xeon.json``, amx_tiles)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = make(size + _LINE, np.uint8)
    start = -raw.ctypes.data % _LINE
    return raw[start:start + size].view(dtype).reshape(shape)


def tile_config() -> np.ndarray:
    """The tiles' shapes (``ldtilecfg``'s 64 bytes, palette 1): tiles 0-3 the sums (16
    rows of 16 int32), 4-5 the data (16 pixels x 64 bytes), 6-7 the weights (16 rows
    of 16 words of four bytes)."""
    config = np.zeros(64, np.uint8)
    config[0] = 1
    row_bytes, rows = config[16:48].view(np.uint16), config[48:64]
    row_bytes[:8] = 64
    rows[:8] = 16
    return frozen(config)


def _panels(weights: np.ndarray, axes3) -> np.ndarray:
    """The weights ``(G, Ci, Co, K...)`` as the kernel reads them: int8 ``[group][tap]
    [block of 16 output channels][Ci / 4][16][4]``, taps in the order of the three
    axes."""
    groups, ci, co = weights.shape[:3]
    taps = int(np.prod([a.kernel_size for a in axes3]))
    parts = weights.reshape(groups, ci // 4, 4, co // _OUTPUTS_PER_TILE, _OUTPUTS_PER_TILE,
                            taps)
    panels = aligned(parts.size, np.int8)
    panels[:] = parts.transpose(0, 5, 3, 1, 4, 2).reshape(-1)
    return frozen(panels)


def _axis_taps(phases) -> tuple[np.ndarray, np.ndarray]:
    """``(taps, starts)`` of one axis for the kernel: per output phase, rows
    ``starts[p]:starts[p + 1]`` of ``taps`` hold ``(k, shift + pad_low)``."""
    rows, starts = [], [0]
    for phase_class in phases.classes:
        for taps in phase_class.taps:
            rows.extend((k, shift + phases.pad_low)
                        for k, shift in zip(taps, phase_class.shifts))
            starts.append(len(rows))
    taps = np.array(rows, np.int64).reshape(-1, 2)
    return frozen(taps), frozen(np.array(starts, np.int64))


class TileLayer:
    """The AMX kernel set up for one layer and batch: ``layer(words, out, after=None)``
    fills the int32 sums ``out`` ``(N, Y..., G * Co)`` (channels last) from the data
    bytes ``words`` (``(N, X..., G * Ci / 4)`` int32 words of four channels, as
    :class:`~convtranspose._kernels.int8.BlockedSums` makes them), as
    :class:`._numba.blocked.BlockedLayer` does; ``after(starts, pixels)``, where
    :attr:`fusable`, with each piece of output lines a thread has just summed.
    ``derived``: the weights memo's dict, where the padded copy of the data is kept
    between calls (:func:`convtranspose._runtime.memo.spare_array`)."""

    def __init__(self, batch: int, panels: np.ndarray, axes, groups: int, ci: int, co: int,
                 threads: int, derived: dict) -> None:
        axes3 = three_axes(axes)
        phases = [axis_phases(axis) for axis in axes3]
        self._axis_taps = [_axis_taps(p) for p in phases]
        self._inputs = (batch,) + tuple(a.input_size for a in axes3) + (groups * ci,)
        self._pads = [(p.pad_low, p.pad_high) for p in phases]
        # Each axis padded for its taps, the last also for the blocks' over-reads.
        padded = [a.input_size + low + high for a, (low, high) in zip(axes3, self._pads)]
        self._padded = (batch, padded[0], padded[1], padded[2] + _OVERREAD, groups * ci)
        outputs = tuple(a.output_size for a in axes3)
        self._line_pixels, self._lines = outputs[2], batch * outputs[0] * outputs[1]
        self._sizes = frozen(np.array(
            (batch,) + outputs + tuple(a.stride for a in axes3) + self._padded[1:4]
            + (ci, co // _OUTPUTS_PER_TILE, axes3[1].kernel_size, axes3[2].kernel_size,
               groups, int(np.prod([a.kernel_size for a in axes3]))), np.int64))
        self._panels, self._threads = panels, threads
        # One piece of lines per thread: each piece costs two compiled calls' dispatch
        # (10-20 us of Python); on an Intel Xeon 2 pieces on two threads took 0.90-1.06
        # ms per call where 16 took 1.02-1.35 (``benchmarks/results/int8-kernels-
        # xeon.json``, amx_tiles).
        self._pieces = max(1, min(threads, self._lines))
        self._config = tile_config()
        # A padded copy of the data whose borders stay zero, kept with the weights for
        # the next call of this layout (the same interior, so the borders stay zero): a
        # new one's fresh pages cost 5-15% of the quantized suite's calls on an Intel
        # Xeon (``benchmarks/results/int8-kernels-xeon.json``, amx_tiles).
        self._derived = derived
        self._buffer_key = ("tiles padded data", self._padded, tuple(self._pads),
                            self._inputs)

    @property
    def fusable(self) -> bool:
        """Whether a call takes each piece's lines as it ends: always (on one thread,
        all of them at once)."""
        return True

    def _fill(self, buffer: np.ndarray, words: np.ndarray) -> None:
        (l0, _), (l1, _), (l2, _) = self._pads
        n, x0, x1, x2, ci = self._inputs
        buffer[:, l0:l0 + x0, l1:l1 + x1, l2:l2 + x2] = words.view(np.uint8).reshape(
            self._inputs)

    def __call__(self, words, out, bias=None, after=None) -> None:
        from ._numba.tiles import tile_sums

        with spare_array(self._derived, self._buffer_key,
                         lambda: aligned(self._padded, np.uint8, np.zeros)) as buffer:
            self._fill(buffer, words)
            data, flat = buffer.reshape(-1), out.reshape(-1)
            (taps0, starts0), (taps1, starts1), (taps2, starts2) = self._axis_taps
            pixels = self._line_pixels

            def run(first: int, stop: int) -> None:
                tile_sums(data, self._panels, flat, self._config, self._sizes, taps0, taps1,
                          taps2, starts0, starts1, starts2, first, stop)
                if after is not None:
                    after(np.array([first * pixels], np.int64), (stop - first) * pixels)

            parallel_for(run, self._lines, self._threads, self._pieces)


def tile_layer(count: int, weights: np.ndarray, axes, derived: dict, target):
    """``(layer, shape)``: the :class:`TileLayer` of ``count`` samples of a layer of
    ``weights`` ``(G, Ci, Co, K...)`` (int8 values; its panels kept in ``derived``, the
    weights memo), and the shape ``(count, Y..., G * Co)`` of the sums it fills."""
    from ._numba.direct import direct_threads

    panels = derived.get("tiles panels")
    if panels is None:
        panels = derived["tiles panels"] = _panels(weights, three_axes(axes))
    groups, ci, co = weights.shape[:3]
    # Threads by the rule of the vector kernels, counting one tile row of 64 input
    # channels as one product (the vector kernels count one word: 1 float32 channel, 4
    # byte channels): one thread for a layer too small to share out.  On an Intel Xeon
    # a 64->16 32x32 k3 layer took 100-129 us on two threads and 23-31 on one
    # (``benchmarks/results/int8-kernels-xeon.json``, amx_tiles).
    threads = direct_threads(count, (groups, -(-ci // 64), co) + weights.shape[3:], axes,
                             target)
    return (TileLayer(count, panels, axes, groups, ci, co, threads, derived),
            (count,) + tuple(a.output_size for a in axes) + (groups * co,))
