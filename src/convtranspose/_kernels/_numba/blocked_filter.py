"""The filter gradient in register blocks: a batch-reduce product per group and tap.

For the canonical problem (:mod:`convtranspose._kernels.adjoints`)::

    w_grad[g, ci, co, k] = sum over n, x of data[n, g*Ci + ci, x] * grad[n, g*Co + co, x*s + k*d - offset]

is, per group and tap, a product of the data's ``(pixels, Ci)`` and ``grad``'s
``(pixels, Co)`` over the tap's box of pixels.  ``im2col`` gathers every tap's
``grad`` into one matrix first (for a grouped 256-channel 28x28 layer of batch 4,
29 MB written and read again) and runs small products per group.  Here, with both
operands channels last (channels-first ones copied so group by group,
:func:`_operand`), a block of ``rows`` input channels x ``vectors`` vectors of output
channels keeps its sums in registers while every pixel of the box adds one broadcast
data value times one ``grad`` row per input channel: no gathered matrix, each sum
stored once.  The blocks are compiled per block shape
only (:func:`_block_source`).  For groups whose ``Co`` is a whole number of vectors.
Multiplies only the pairs that exist: exact with non-finite operands.
"""

from __future__ import annotations

import math

import numpy as np

from ..._plan.geometry import three_axes
from ..._runtime.caches import kept
from .depthwise_filter import tap_indices, tap_table
from .launch import parallel_kernel
from .transpose import channels_last_copy

__all__ = ["block_shape", "blocked_filter_adjoint"]

#: Input channels per block, by vectors of output channels, with 32 vector registers
#: (AVX-512): 8-16 accumulators beside the block's ``grad`` vectors and a broadcast,
#: as direct-blocked's blocks hold (:func:`convtranspose._kernels.schedules.blocked_shape`).
_ROWS = {1: 8, 2: 6, 4: 4}
#: The same with 16 (AVX2): as many rows as fit beside the ``grad`` vectors and the
#: broadcast for 2 and 4 vectors (6 x 2 took 0.63-0.89x the time of 3 x 2 on 16
#: channels a group), and 8 for one vector (8-14 rows within 3% of each other on 8
#: channels a group, 4 rows 1.10-1.27x the time; ``benchmarks/results/filter-blocks-zen2.json``).
_AVX2_ROWS = {1: 8, 2: 6, 4: 2}


def _block_source(lanes: int, rows: int, vectors: int) -> str:
    """Source of ``block``: one (group, ``rows`` input channels from ``ci0``, ``vectors *
    lanes`` output channels from ``co0``) block's sums for every tap, into ``out``
    ``(G, T, Ci, Co)`` (flat, zero at first).  Line by line of the data, so that a
    line and the ``grad`` lines its taps read stay in L1 while every tap adds its
    pixels to the block's sums (loaded into registers and stored once per line and
    tap); a block's sums are its own, so blocks run on any thread."""
    accumulators = [[f"acc_{r}_{v}" for v in range(vectors)] for r in range(rows)]
    lines = [
        "def block(data, grad, out, sizes, taps, counts, g, ci0, co0):",
        "    ci, co = sizes[1], sizes[2]",
        "    d_item, d_group, d_pixel = sizes[13], sizes[14], sizes[15]",
        "    e_item, e_group, e_pixel = sizes[16], sizes[17], sizes[18]",
        "    x1, x2, x3, y1, y2, y3 = sizes[3], sizes[4], sizes[5], sizes[6], sizes[7], sizes[8]",
        "    s1, s2, s3, tap_count = sizes[9], sizes[10], sizes[11], sizes[12]",
        "    for n in range(sizes[0]):",
        "        for i1 in range(x1):",
        "            for i2 in range(x2):",
        "                for t in range(tap_count):",
        "                    m1, m3 = t // (counts[1] * counts[2]), t % counts[2]",
        "                    m2 = t // counts[2] % counts[1]",
        "                    if not (taps[0, m1, 2] <= i1 < taps[0, m1, 3]",
        "                            and taps[1, m2, 2] <= i2 < taps[1, m2, 3]):",
        "                        continue",
        "                    low3 = taps[2, m3, 2]",
        "                    d = (n * d_item + g * d_group + ci0",
        "                         + ((i1 * x2 + i2) * x3 + low3) * d_pixel)",
        "                    e = (n * e_item + g * e_group + co0",
        "                         + (((i1 * s1 + taps[0, m1, 1]) * y2 + i2 * s2 + taps[1, m2, 1])",
        "                            * y3 + low3 * s3 + taps[2, m3, 1]) * e_pixel)",
        "                    at = ((g * tap_count + t) * ci + ci0) * co + co0",
    ]
    lines += [f"                    {name} = vector_load(out, at + {r} * co + {v * lanes}, {lanes})"
              for r, row in enumerate(accumulators) for v, name in enumerate(row)]
    lines += ["                    for _ in range(taps[2, m3, 3] - low3):"]
    lines += [f"                        w_{v} = vector_load(grad, e + {v * lanes}, {lanes})"
              for v in range(vectors)]
    for r, row in enumerate(accumulators):
        lines.append(f"                        x = vector_splat_at(data, d + {r}, {lanes})")
        lines += [f"                        {name} = vector_fma(x, w_{v}, {name})"
                  for v, name in enumerate(row)]
    lines += ["                        d += d_pixel",
              "                        e += s3 * e_pixel"]
    lines += [f"                    vector_store(out, at + {r} * co + {v * lanes}, {name})"
              for r, row in enumerate(accumulators) for v, name in enumerate(row)]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def _block(lanes: int, rows: int, vectors: int):
    """The compiled ``block`` of :func:`_block_source`."""
    from .codegen import compile_source

    return compile_source(_block_source(lanes, rows, vectors), "block")


#: ``items``: the blocks of a range of work items, each a (group, block of input
#: channels, chunk of output channels), by ``shape`` = (items per group, chunks per
#: block, rows per block, input channels, output channels per chunk).
_ITEMS_SOURCE = """def items(data, grad, out, sizes, taps, counts, shape, start, stop):
    for item in range(start, stop):
        g, rest = item // shape[0], item % shape[0]
        c0, co0 = rest // shape[1] * shape[2], rest % shape[1] * shape[4]
        if c0 + shape[2] <= shape[3]:
            full(data, grad, out, sizes, taps, counts, g, c0, co0)
        else:
            tail(data, grad, out, sizes, taps, counts, g, c0, co0)
"""


@kept("compiled kernels", maxsize=None)
def _items(lanes: int, rows: int, tail_rows: int, vectors: int):
    """The compiled ``items`` (:data:`_ITEMS_SOURCE`) over blocks of ``rows`` input
    channels and a last one of ``tail_rows``, for :func:`.launch.parallel_kernel`: the
    blocks run on numba's threads, which the layout copies just before leave spinning
    (the library's pool ran beside them: on two threads, channels-first layers took
    0.7-1.4x one thread's time; ``benchmarks/results/filter-blocks-zen2.json``,
    ``group_major``)."""
    from .codegen import compile_source

    full = _block(lanes, rows, vectors)
    tail = _block(lanes, tail_rows, vectors) if tail_rows else full
    return compile_source(_ITEMS_SOURCE, "items", names={"full": full, "tail": tail})


def block_shape(co: int, lanes: int, vector_bytes: int) -> tuple[int, int]:
    """(rows, vectors) of the blocks for ``co`` output channels per group."""
    whole = co // lanes
    vectors = next(v for v in (4, 2, 1) if whole % v == 0)
    return (_ROWS if vector_bytes >= 64 else _AVX2_ROWS)[vectors], vectors


def _operand(array: np.ndarray, groups: int, channels_last: bool, dtype,
             target) -> tuple[np.ndarray, tuple[int, int, int]]:
    """``array`` ``(N, G*C, X...)`` (or ``(N, X..., G*C)``, ``channels_last``) flat and
    C-contiguous in ``dtype``, and the elements from one item, group and pixel to the
    next: channels last as it is, and channels first copied group by group
    (``(N, G, X..., C)``), one group's pixels next to each other.  A copy with every
    group's channels in a pixel's row puts the rows a power of two of bytes apart for
    the usual channel counts (1 KiB for 256 float32 channels), where a block's pixels
    fall into a few of L1's sets and evict each other: a grouped layer took 0.71-0.87x
    the time on copies group by group (``benchmarks/results/filter-blocks-zen2.json``,
    ``group_major``)."""
    batch = array.shape[0]
    if channels_last:
        pixels, channels = math.prod(array.shape[1:-1]), array.shape[-1]
        flat = np.ascontiguousarray(array, dtype).reshape(-1)
        return flat, (pixels * channels, channels // groups, channels)
    channels, spatial = array.shape[1] // groups, array.shape[2:]
    items = array.reshape((batch * groups, channels) + spatial)
    pixels = math.prod(spatial)
    return (channels_last_copy(items, dtype, target).reshape(-1),
            (groups * pixels * channels, pixels * channels, channels))


def blocked_filter_adjoint(data: np.ndarray, grad: np.ndarray, axes, groups: int,
                           channels_last: bool, dtype, target) -> np.ndarray:
    """The filter gradient ``(G, Ci, Co, K...)`` in ``dtype`` (float32 or float64, ``Co``
    whole vectors: :func:`convtranspose._kernels.adjoints.blocked_applies`): ``data``
    ``(N, G*Ci, X...)`` and ``grad`` ``(N, G*Co, Y...)``, or channels last, up to three
    spatial axes; on ``target``'s threads, split over (group, block of input channels,
    chunk of output channels)."""
    dtype = np.dtype(dtype)
    channel_axis = -1 if channels_last else 1
    batch, ci, co = (data.shape[0], data.shape[channel_axis] // groups,
                     grad.shape[channel_axis] // groups)
    data, data_steps = _operand(data, groups, channels_last, dtype, target)
    grad, grad_steps = _operand(grad, groups, channels_last, dtype, target)
    axes3 = three_axes(axes)
    table, counts = tap_table(axes3)
    taps = int(np.prod(counts))
    sizes = np.array((batch, ci, co) + tuple(a.input_size for a in axes3)
                     + tuple(a.output_size for a in axes3) + tuple(a.stride for a in axes3)
                     + (taps,) + data_steps + grad_steps, np.int64)
    lanes = target.lanes(dtype)
    rows, vectors = block_shape(co, lanes, target.vector_bytes)
    chunk = lanes * vectors
    blocks, chunks = -(-ci // rows), co // chunk
    out = np.zeros((groups, taps, ci, co), dtype)
    shape = np.array((blocks * chunks, chunks, rows, ci, chunk), np.int64)
    parallel_kernel(_items(lanes, rows, ci % rows, vectors),
                    (data, grad, out.reshape(-1), sizes, table, counts, shape),
                    groups * blocks * chunks, target.threads)
    kernel = tuple(a.kernel_size for a in axes3)
    result = np.zeros((groups, ci, co) + kernel, dtype)
    for t, index in enumerate(tap_indices(table, counts, kernel)):
        k1, rest = divmod(index, kernel[1] * kernel[2])
        k2, k3 = divmod(rest, kernel[2])
        result[:, :, :, k1, k2, k3] = out[:, t]
    return result.reshape((groups, ci, co) + tuple(a.kernel_size for a in axes))
