"""``depthwise``'s numba kernel: a block of outputs along the last axis times one vector
of channels in registers, over a zero-padded, channel-blocked copy of the input.

Rows of many channels lie a power of two apart (1024 float32 channels: 4 KiB), so the
taps of one channel block in the caller's layout fall in one L1 set; the copy puts a
chunk's channels together instead (:func:`depthwise` documents the layout, the kernel
is ``templates/depthwise.py``).  The block source is generated per block shape
(:func:`block_source`) and the kernel compiled per block shape only (numba adds the
dtype): channel counts, taps, strides and sizes are run-time values.
"""

from __future__ import annotations

import math

import numpy as np

from ..._plan.geometry import three_axes
from ..._runtime.caches import kept
from ..depthwise_schedule import block_shape, copy_step, last_axis_padding, takes_lines
from ..schedules import frozen_all
from .blocked import phase_tables
from .channels_last import gather_row_taps
from .depthwise_lines import LinesLayer
from .launch import array_kind, parallel_kernel
from .transpose import tile_transposer
from .vectors import vector_load, vector_store

__all__ = ["DepthwiseLayer", "block_source", "depthwise_kernels", "depthwise_layer"]


def block_source(lanes: int, vectors: int, outputs: int) -> str:
    """Source of the block for ``outputs`` outputs of ``vectors * lanes`` channels.

    Every accumulator is its own vector variable (``outputs * vectors`` of them, all in
    registers); per tap ``[first, stop)`` of the lists (offsets ``read_at`` and
    ``tap_at`` added), the tap's weight vectors are loaded once and multiplied into
    every output's accumulators with that output's input vector (output ``r`` of a tap
    reads ``r * read_step`` elements further along the padded line).  Outputs from
    ``valid`` on are computed but not stored (the padded line holds their reads).
    """
    accumulators = [[f"acc_{r}_{v}" for v in range(vectors)] for r in range(outputs)]
    lines = ["def block(source, weights, dest, dest_at, dest_step, reads, taps, first, stop,",
             "          read_at, read_step, tap_at, valid):"]
    lines += [f"    {name} = vector_zero(weights, {lanes})" for row in accumulators
              for name in row]
    lines += ["    for m in range(first, stop):",
              "        read = reads[m] + read_at",
              "        tap = taps[m] + tap_at"]
    lines += [f"        w_{v} = vector_load(weights, tap + {v * lanes}, {lanes})"
              for v in range(vectors)]
    for r, row in enumerate(accumulators):
        lines += [f"        {name} = vector_fma(vector_load(source, read + {r} * read_step + "
                  f"{v * lanes}, {lanes}), w_{v}, {name})" for v, name in enumerate(row)]
    for r, row in enumerate(accumulators):
        lines.append(f"    if {r} < valid:")
        lines += [f"        vector_store(dest, dest_at + {r} * dest_step + {v * lanes}, {name})"
                  for v, name in enumerate(row)]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def depthwise_kernels(lanes: int, vectors: int, outputs: int) -> dict:
    """The ``depthwise`` kernel and its padded copy for one block shape (compiled on
    first use; numba compiles each for the dtypes it is called with)."""
    from .codegen import compile_source, compile_template

    block = compile_source(block_source(lanes, vectors, outputs), "block")
    return compile_template("depthwise", dict(
        np=np, block=block, gather_row_taps=gather_row_taps, lanes=lanes, outputs=outputs,
        transpose=tile_transposer(lanes), vector_load=vector_load, vector_store=vector_store,
        width=lanes * vectors))


def _packed_weights(weights, derived, dtype, width: int) -> np.ndarray:
    """The filter as ``(chunks, taps, width)``: output channel ``c = g * Co + o`` at lane
    ``c % width`` of chunk ``c // width``, zeros past the last channel (flat,
    read-only).  Kept in ``derived``."""
    key = ("depthwise", np.dtype(dtype).str, width)
    packed = derived.get(key)
    if packed is None:
        groups, _, co = weights.shape[:3]
        channels, taps = groups * co, math.prod(weights.shape[3:])
        chunks = -(-channels // width)
        rows = np.zeros((chunks * width, taps), dtype)
        rows[:channels] = weights.reshape(channels, taps)
        packed = rows.reshape(chunks, width, taps).transpose(0, 2, 1)
        packed = derived[key] = frozen_all(np.ascontiguousarray(packed).reshape(-1))[0]
    return packed


class DepthwiseLayer:
    """``depthwise`` set up for one layer: the kernels, packed weights, tables, sizes and
    thread split, made once; calling it fills an output from data.

    ``derived``: the weights memo of the filter (the packed weights are kept there).
    """

    __slots__ = ("_dtype", "_kernels", "_weights", "_tables", "_sizes", "_copy_sizes",
                 "_padded", "_items", "_rows", "_tile", "_threads", "_addresses")

    def __init__(self, batch, weights, axes, dtype, channels_last, derived, target):
        groups, _, co = weights.shape[:3]
        axes3 = three_axes(axes)
        lanes = target.lanes(dtype)
        outputs, vectors = block_shape(lanes, np.dtype(dtype).itemsize)
        width = lanes * vectors
        channels = groups * co
        chunks = -(-channels // width)
        pad, length = last_axis_padding(axes3[2], outputs)
        step = copy_step(channels, width, np.dtype(dtype).itemsize, channels_last)
        x1, x2, x3 = (a.input_size for a in axes3)
        y1, y2, y3 = (a.output_size for a in axes3)
        rows = batch * x1 * x2
        self._dtype = np.dtype(dtype)
        self._kernels = depthwise_kernels(lanes, vectors, outputs)
        self._weights = _packed_weights(weights, {} if derived is None else derived, dtype,
                                        width)
        self._tables = phase_tables(axes3)
        self._sizes = frozen_all(np.array(
            (chunks, batch, x1, x2, length, pad, y1, y2, y3, channels,
             math.prod(a.kernel_size for a in axes3), axes3[1].kernel_size,
             axes3[2].kernel_size) + tuple(a.stride for a in axes3)
            + (int(channels_last), step, width if channels_last else rows * length * width),
            np.int64))[0]
        self._copy_sizes = frozen_all(np.array(
            (chunks, batch, x1, x2, x3, length, pad, groups, co, int(channels_last), step),
            np.int64))[0]
        # The copy's rows and the kernel's items (:mod:`templates/depthwise.py`): per
        # chunk channels first, whole positions channels last.
        self._rows = rows if channels_last else chunks * rows
        self._padded = rows * length * (step if channels_last else chunks * width)
        self._items = batch * y1 * y2 * (1 if channels_last else chunks)
        self._tile = y3 * width
        self._threads = target.threads  # all: see ..depthwise's docstring
        # Per kernel, its code addresses by the kinds of the arrays that vary in type
        # from call to call (:func:`.launch.parallel_kernel`'s ``kept``).
        self._addresses: tuple[dict, dict] = ({}, {})

    def __call__(self, data, out) -> None:
        """Fill ``out`` (the set-up's layout and shape, the sums' dtype) from ``data``."""
        kernels, dtype = self._kernels, self._dtype
        # Read-only views of the operands read, whatever the caller's flags: a writable
        # and a read-only array are two numba types, each compiling the kernel.
        # Data of the sums' dtype: the copy moves blocks of it in vector registers.
        (source,) = frozen_all(np.ascontiguousarray(data, dtype).reshape(-1).view())
        padded = np.empty(self._padded, dtype)
        copy, sizes = kernels["pad_copy"], self._copy_sizes
        source_kind = array_kind(source)
        parallel_kernel(copy, (source, padded, sizes), self._rows, self._threads,
                        kept=(self._addresses[0], source_kind))
        result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        flat = result.reshape(-1)
        (padded,) = frozen_all(padded)  # one numba type for the kernel's operands
        parallel_kernel(kernels["kernel"], (padded, self._weights, flat, self._sizes,
                                            *self._tables), self._items, self._threads,
                        scratch=(3, self._tile, dtype),
                        kept=(self._addresses[1], array_kind(flat)))
        if result is not out:
            np.copyto(out, result)


#: Set-ups (:class:`DepthwiseLayer`) kept per filter, the most recently made last.
_LAYERS_KEPT = 8


def _made(batch, weights, axes, dtype, channels_last, derived, target):
    if takes_lines(weights.shape, axes, channels_last, target.lanes(dtype)):
        return LinesLayer(batch, weights, axes, dtype, target)
    return DepthwiseLayer(batch, weights, axes, dtype, channels_last, derived, target)


def depthwise_layer(batch, weights, axes, dtype, channels_last, derived,
                    target) -> DepthwiseLayer | LinesLayer:
    """The set-up of these arguments (a :class:`~.depthwise_lines.LinesLayer` where the
    lines kernel takes the layer, else a :class:`DepthwiseLayer`), kept in ``derived``
    (the weights memo's dict of this filter, if given), so that a repeated call, and
    each timed run of measured planning, pays the kernels and not the set-up again."""
    if derived is None:
        return _made(batch, weights, axes, dtype, channels_last, None, target)
    layers = derived.setdefault("depthwise layers", {})
    key = (batch, tuple(axes), np.dtype(dtype).str, channels_last, target)
    layer = layers.get(key)
    if layer is None:
        layer = _made(batch, weights, axes, dtype, channels_last, derived, target)
        while len(layers) >= _LAYERS_KEPT:
            layers.pop(next(iter(layers), None), None)  # another thread may drop it first
        layers[key] = layer
    return layer
