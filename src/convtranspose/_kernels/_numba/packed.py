"""Products of a constant filter matrix and data, with the filter packed once.

``c[n, g] = a[g] @ b[n, g]`` for a filter matrix ``a`` of ``(G, M, K)`` (output
channels, or output channels times taps, by input channels) and channels-first data
``b`` of ``(N, G, K, P)`` (``P`` positions): the product of ``pointwise`` and
``col2im-ncx``.

- **Packed filter** (:func:`pack_matrix`, made once per filter): blocks of
  ``block_rows`` rows of ``a``, each stored along the reduction (``K`` steps of
  ``block_rows`` values, contiguous, zero rows past ``M``), so that a block's loop
  reads its weights in order from L1.
- **Micro-kernel**: a block of ``block_rows`` rows times ``vectors`` vectors of positions
  keeps its sums in vector registers over a pass of the reduction: one broadcast weight
  times one or two vectors of data per multiply-add, as oneDNN's and XNNPACK's GEMM
  kernels do (:func:`block_shape` takes its size from the vector registers).
- **Cache blocking**: the data of one sample and group is copied, a chunk of positions
  (:func:`chunk_positions`: half of L2) and a pass of the reduction (:func:`pass_steps`:
  a panel in half of L1) at a time, into panels of ``vectors`` vectors laid along the
  reduction (zeros past ``P``: the last panel runs the same code); every row block then
  runs through the panels, and later passes add to its sums.
- **Threads**: blocks of rows of every sample, group and chunk are split between
  numba's native threads (:func:`.launch.parallel_kernel`), each with its own panels;
  no BLAS call, so no BLAS lock and no BLAS thread to wake: OpenBLAS runs products of
  a few MFLOP on one thread (``SERIAL_GEMM_FLOPS``).

Every sum is the product's own terms in order of ``K``: padded rows and positions only
fill outputs that are dropped, so it is exact with non-finite operands.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..._runtime.caches import kept
from ..._runtime.machine import l1_data_cache_bytes, l2_cache_bytes, vector_bytes
from ..schedules import frozen_all
from ..tiles import aligned
from .codegen import compile_source
from .launch import array_kind, parallel_kernel
from .packed_sources import product_source, rows_source

__all__ = ["PackedColumns", "PackedMatrix", "PreparedProduct", "Spread", "block_shape",
           "chunk_positions", "one_chunk", "pack_columns", "pack_matrix", "packed_product",
           "packed_rows_product", "paired_runs", "pass_steps", "prepare_packed_product",
           "spread_rows"]

#: Vector registers of an x86 core: 16 with AVX2, 32 with AVX-512.
_REGISTERS = {32: 16, 64: 32}
#: Vectors of positions per block: two loads per reduction step feed every row.
_VECTORS = 2


def block_shape(itemsize: int, width: int) -> tuple[int, int, int]:
    """``(block_rows, vectors, lanes)`` of the micro-kernel for ``width``-byte vectors:
    every register but the data vectors and one broadcast weight holds sums (6 rows of
    2 vectors with AVX2's 16 registers, 14 with AVX-512's 32)."""
    registers = _REGISTERS.get(width, 16)
    return (registers - _VECTORS - 1) // _VECTORS, _VECTORS, width // itemsize


def spread_rows(rows: int, most: int) -> int:
    """Rows per block for a matrix of ``rows``: as few blocks as blocks of ``most`` rows
    make, with the rows spread evenly over them (rounded up to an even count, so that
    few block shapes are compiled).  Each block costs its rows' multiply-adds whether
    they are live or padding: 48 rows (a decoder head's 3 outputs of 16 taps) in blocks
    of 14 compute 56, in blocks of 12, 48."""
    blocks = max(1, -(-rows // most))
    even = -(-rows // blocks)
    return min(most, even + even % 2)


class PackedMatrix(NamedTuple):
    """A filter matrix ``(G, M, K)`` packed for :func:`packed_product`.

    Attributes
    ----------
    data : numpy.ndarray
        1-D, 64-byte aligned: per group and block of ``block_rows`` rows, ``K`` steps of
        ``block_rows`` values (zeros past ``M``).
    groups, rows, depth : int
        ``G``, ``M`` and ``K``.
    block_rows, vectors, lanes : int
        The micro-kernel's shape (:func:`block_shape`, its rows spread by
        :func:`spread_rows`).
    """

    data: np.ndarray
    groups: int
    rows: int
    depth: int
    block_rows: int
    vectors: int
    lanes: int

    @property
    def row_blocks(self) -> int:
        return -(-self.rows // self.block_rows)


def pack_matrix(matrix: np.ndarray, width: int | None = None) -> PackedMatrix:
    """``matrix`` ``(G, M, K)`` (float32 or float64) packed for the micro-kernel of
    ``width``-byte vectors (this machine's by default); a new read-only array."""
    groups, rows, depth = matrix.shape
    most_rows, vectors, lanes = block_shape(matrix.itemsize, width or vector_bytes())
    block_rows = spread_rows(rows, most_rows)
    blocks = -(-rows // block_rows)
    data = aligned((groups * blocks * block_rows * depth,), matrix.dtype, np.zeros)
    padded = np.zeros((groups, blocks * block_rows, depth), matrix.dtype)
    padded[:, :rows] = matrix
    data.reshape(groups, blocks, depth, block_rows)[...] = padded.reshape(
        groups, blocks, block_rows, depth).transpose(0, 1, 3, 2)
    data.flags.writeable = False
    return PackedMatrix(data, groups, rows, depth, block_rows, vectors, lanes)


class Spread(NamedTuple):
    """Where :func:`packed_product` stores each sum instead of a matrix ``c``: row ``m``
    and position ``p`` of image ``i`` (sample times groups plus group) at ``i *
    image_size + row_base[m] + pos_map[p]`` (int64 tables, read-only).  ``pairs``: per
    position ``p``, how many positions from ``p`` on land two elements apart
    (:func:`paired_runs`); where a vector's positions do and rows ``2j`` and ``2j + 1``
    land side by side (``row_base`` one apart: a stride-2 axis's two taps), the two
    rows' sums go out interleaved by plain stores instead of two scatters."""

    row_base: np.ndarray
    pos_map: np.ndarray
    image_size: int
    pairs: np.ndarray


def paired_runs(pos_map: np.ndarray) -> np.ndarray:
    """Per position ``p`` of ``pos_map``, the length of the run from ``p`` on whose places
    step by exactly two (:class:`Spread`'s ``pairs``; int64, at least 1)."""
    positions = len(pos_map)
    ends = np.append(np.flatnonzero(np.diff(pos_map) != 2), positions - 1)
    starts = np.arange(positions, dtype=np.int64)
    return ends[np.searchsorted(ends, starts)] - starts + 1


def packed_product(packed: PackedMatrix, b: np.ndarray, c: np.ndarray, threads: int,
                   spread: Spread | None = None) -> None:
    """``c[n, g] = A[g] @ b[n, g]`` for the matrix ``A`` that ``packed`` holds.

    ``b`` is C-contiguous ``(N, G, K, P)`` and ``c`` C-contiguous ``(N, G, M, P)``, both
    of the packed dtype; ``c`` is overwritten.  With ``spread``, ``c`` is any
    C-contiguous array of the packed dtype and the sum of row ``m`` and position ``p``
    of sample and group ``i = n * G + g`` goes to ``c.flat[i * spread.image_size +
    spread.row_base[m] + spread.pos_map[p]]`` (places that must not overlap: a
    transposed convolution whose taps reach disjoint outputs stores its products in
    place, :mod:`..col2im`); nothing else of ``c`` is written, and nothing at all for
    ``K = 0``.
    """
    batch, groups, depth, columns = b.shape
    if batch * groups * columns == 0 or packed.rows == 0:
        return
    if depth == 0:  # every sum is zero; spread, the caller has zeroed its places
        if spread is None:
            c[...] = 0
        return
    prepare_packed_product(packed, b.shape, b.dtype, threads, spread)(b, c)


class PreparedProduct(NamedTuple):
    """:func:`packed_product` for one shape of ``b``, worked out once
    (:func:`prepare_packed_product`): ``product(b, c)`` runs it; ``kernel`` over
    ``range(units)`` (sample-major) with :meth:`arguments` and a working row per
    thread (``scratch``, as :func:`.launch.parallel_kernel` takes it) is the same run,
    for a caller that launches it with another kernel (:func:`.launch.parallel_pair`).
    ``addresses``: the kernel's code addresses by the types of the data and result
    (:func:`.launch.parallel_kernel`'s ``kept``)."""

    kernel: object
    weights: np.ndarray
    sizes: tuple
    units: int
    threads: int
    scratch: tuple
    addresses: dict

    def arguments(self, b: np.ndarray, c: np.ndarray) -> tuple:
        """The kernel's arguments but the scratch row and the units' bounds."""
        return (self.weights, b.reshape(-1), c.reshape(-1)) + self.sizes

    def __call__(self, b: np.ndarray, c: np.ndarray) -> None:
        arguments = self.arguments(b, c)
        # Only the data and the result vary in type from call to call.
        kinds = (array_kind(arguments[1]), array_kind(arguments[2]))
        parallel_kernel(self.kernel, arguments, self.units, self.threads,
                        scratch=self.scratch, kept=(self.addresses, kinds))


def prepare_packed_product(packed: PackedMatrix, shape: tuple[int, ...], dtype, threads: int,
                           spread: Spread | None = None) -> PreparedProduct:
    """:func:`packed_product` for ``b`` of ``shape`` ``(N, G, K, P)`` (no size zero) and
    ``dtype``, its kernel, passes, chunks and scratch worked out once, for the calls of
    a prepared layer (:func:`..col2im.prepare_col2im`)."""
    batch, groups, depth, columns = shape
    itemsize = np.dtype(dtype).itemsize
    width = packed.vectors * packed.lanes
    steps = pass_steps(depth, width, itemsize, spread is not None)
    chunk = chunk_positions(steps, columns, width, itemsize)
    chunks = -(-columns // chunk)
    blocks = packed.row_blocks
    panels = -(-chunk // width) * width * steps
    kernel = _product_kernel(packed.block_rows, packed.vectors, packed.lanes, spread is not None)
    sizes = (depth, steps, packed.rows, columns, chunk, blocks, chunks, groups) + (
        () if spread is None else tuple(spread))
    scratch = (3, panels + packed.block_rows * width + 64 // itemsize, np.dtype(dtype))
    return PreparedProduct(kernel, packed.data, sizes, batch * groups * chunks * blocks,
                           threads, scratch, {})


def pass_steps(depth: int, width: int, itemsize: int, spread: bool = False) -> int:
    """Reduction steps per pass: a panel of them fills at most half of L1, beside the
    row block's weights for as many steps, so both stay there while the block's sums
    build up (a deeper reduction goes in several passes, each adding to the sums).
    ``spread``: up to a quarter of L2, as each pass after the first gathers and
    scatters its sums (:class:`Spread`), which costs more than the panel's loads from L2
    (U-Net 512->256 on 32x32, K = 512: three passes 4.09 ms, one 3.54, the products
    into a matrix 3.59; ``benchmarks/results/col2im-in-place-xeon.json``, passes)."""
    cache = l2_cache_bytes() // 4 if spread else l1_data_cache_bytes() // 2
    return max(1, min(depth, cache // (width * itemsize)))


def _chunk_capacity(steps: int, width: int, itemsize: int) -> int:
    """The most positions a chunk holds: whole panels whose copy fills at most half of
    L2 (the rest holds the row blocks streaming through and the output), one at least."""
    return max(width, l2_cache_bytes() // 2 // (steps * itemsize) // width * width)


def chunk_positions(steps: int, columns: int, width: int, itemsize: int) -> int:
    """Positions per chunk (:func:`_chunk_capacity`), all of them if they fit."""
    return min(columns, _chunk_capacity(steps, width, itemsize))


def one_chunk(depth: int, positions: int, dtype) -> bool:
    """Whether :func:`packed_product` takes every one of ``positions`` (of a reduction
    of ``depth`` steps, this machine's vectors) in fewer than one chunk
    (:func:`chunk_positions`), so that it streams each weight from memory once."""
    itemsize = np.dtype(dtype).itemsize
    _, vectors, lanes = block_shape(itemsize, vector_bytes())
    width = vectors * lanes
    return positions < _chunk_capacity(pass_steps(depth, width, itemsize), width, itemsize)


@kept("compiled kernels", maxsize=None)
def _product_kernel(block_rows: int, vectors: int, lanes: int, spread: bool = False):
    """The compiled product for one block shape (any dtype, sizes at run time), storing
    into a matrix or, ``spread``, through :class:`Spread`'s tables."""
    return compile_source(product_source(block_rows, vectors, lanes, spread),
                          "packed_product")



# Channels last: the same register block with the roles swapped.  ``c[r, g] = b[r, g] @
# a[g]`` for data rows ``b`` of ``(R, G, K)`` (``R``: samples times positions) and a filter
# matrix ``a`` of ``(G, K, M)``: the vectors run along the output channels ``M``, loaded
# from the packed filter, and each data value is broadcast where it lies (rows of
# channels-last data are contiguous along ``K``, so nothing is copied).


class PackedColumns(NamedTuple):
    """A filter matrix ``(G, K, M)`` packed for :func:`packed_rows_product`.

    Attributes
    ----------
    data : numpy.ndarray
        1-D, 64-byte aligned: per group and block of ``vectors * lanes`` columns, ``K``
        steps of that many values (zeros past ``M``).
    groups, depth, columns : int
        ``G``, ``K`` and ``M``.
    block_rows, vectors, lanes : int
        The micro-kernel's shape (:func:`block_shape`): data rows by column vectors.
    """

    data: np.ndarray
    groups: int
    depth: int
    columns: int
    block_rows: int
    vectors: int
    lanes: int

    @property
    def column_blocks(self) -> int:
        return -(-self.columns // (self.vectors * self.lanes))


def pack_columns(matrix: np.ndarray, width: int | None = None) -> PackedColumns:
    """``matrix`` ``(G, K, M)`` (float32 or float64) packed for the channels-last
    micro-kernel of ``width``-byte vectors (this machine's by default); a new read-only
    array."""
    groups, depth, columns = matrix.shape
    block_rows, vectors, lanes = block_shape(matrix.itemsize, width or vector_bytes())
    block = vectors * lanes
    blocks = -(-columns // block)
    data = aligned((groups * blocks * depth * block,), matrix.dtype, np.zeros)
    padded = np.zeros((groups, depth, blocks * block), matrix.dtype)
    padded[:, :, :columns] = matrix
    data.reshape(groups, blocks, depth, block)[...] = padded.reshape(
        groups, depth, blocks, block).transpose(0, 2, 1, 3)
    data.flags.writeable = False
    return PackedColumns(data, groups, depth, columns, block_rows, vectors, lanes)


def packed_rows_product(packed: PackedColumns, b: np.ndarray, c: np.ndarray,
                        threads: int, c_rows: np.ndarray | None = None,
                        zeros: np.ndarray | None = None,
                        columns_at: np.ndarray | None = None, runs: bool = False) -> None:
    """``c[r, g] = b[r, g] @ A[g]`` for the matrix ``A`` that ``packed`` holds.

    ``b`` is C-contiguous ``(R, G, K)`` and ``c`` C-contiguous ``(R, G, M)``, both of the
    packed dtype; ``c`` is overwritten.  Units of (group, block of columns, block of
    rows), rows fastest, so that a thread's consecutive blocks share their weights,
    which stay in L1 while the data rows stream through.

    With ``c_rows`` (int64, one per data row) row ``r``'s ``G * M`` sums go to
    ``c.reshape(-1)[c_rows[r]:]`` instead, any C-contiguous ``c``, and each thread also
    sets its share of the spans ``zeros`` (int64 ``(Z, 2)``: first element and length)
    to zero: a strided output filled in one pass of the threads, without a temporary
    (``pointwise`` with strides).  Spans and rows must not overlap.  With ``columns_at``
    too (int64, one per column of every group, ``G * M``), column ``m`` of row ``r``
    goes to ``c.reshape(-1)[c_rows[r] + columns_at[m]]``: a transposed convolution whose
    taps reach disjoint outputs, channels last, stores each tap's product in place
    (:mod:`..col2im`); no place may be written twice.  ``runs``: the places of every
    aligned run of ``lanes`` columns of a group (``packed.lanes``) lie side by side, so
    each vector takes one store, not a scatter.
    """
    rows, groups, depth = b.shape
    # Read-only views: one compiled kernel for every call (:data:`_NO_ROWS`).
    c_rows, zeros = frozen_all(_NO_ROWS if c_rows is None else c_rows.view(),
                               _NO_SPANS if zeros is None else zeros.view())
    if rows * groups * packed.columns == 0 or depth == 0:
        if columns_at is None:
            _zero_rows_and_spans(c, c_rows, zeros, rows, groups * packed.columns)
        elif rows:
            c.reshape(-1)[np.add.outer(c_rows[:rows], columns_at)] = 0
            _zero_rows_and_spans(c, c_rows[:0], zeros, 0, 0)
        return
    row_blocks = -(-rows // packed.block_rows)
    column_blocks = packed.column_blocks
    kernel = _rows_kernel(packed.block_rows, packed.vectors, packed.lanes,
                          "" if columns_at is None else "runs" if runs else "scattered")
    tile = packed.block_rows * packed.vectors * packed.lanes + 64 // b.itemsize
    table = () if columns_at is None else (columns_at,)
    parallel_kernel(kernel, (packed.data, b.reshape(-1), c.reshape(-1), c_rows, zeros, rows,
                             groups, depth, packed.columns, row_blocks, column_blocks) + table,
                    groups * column_blocks * row_blocks, threads,
                    scratch=(5, tile, b.dtype))


#: No row offsets (rows at ``c``'s own places) and no spans to set to zero; read-only,
#: as ``pointwise``'s tables are, so that both calls share one compiled kernel (numba
#: types a read-only array apart from a writeable one).
_NO_ROWS = np.zeros(0, np.int64)
_NO_SPANS = np.zeros((0, 2), np.int64)
_NO_ROWS.flags.writeable = _NO_SPANS.flags.writeable = False


def _zero_rows_and_spans(c, c_rows, zeros, rows, width) -> None:
    """What a product with nothing to sum leaves: zeros in every row (at ``c_rows``
    where given) and span."""
    flat = c.reshape(-1)
    if not len(c_rows):
        flat[:rows * width] = 0
    for at in c_rows[:rows]:
        flat[at:at + width] = 0
    for at, length in zeros:
        flat[at:at + length] = 0


@kept("compiled kernels", maxsize=None)
def _rows_kernel(block_rows: int, vectors: int, lanes: int, spread: str = ""):
    """The compiled channels-last product for one block shape (any dtype, sizes at run
    time); ``spread``: its columns at the places of a table (:func:`packed_rows_product`'s
    ``columns_at``), ``"runs"`` where each vector's columns lie side by side."""
    return compile_source(rows_source(block_rows, vectors, lanes, spread),
                          "packed_rows_product")
