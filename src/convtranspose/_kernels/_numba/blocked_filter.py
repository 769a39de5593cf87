"""The filter gradient in register blocks: a batch-reduce product per group and tap.

For the canonical problem (:mod:`convtranspose._kernels.adjoints`)::

    w_grad[g, ci, co, k] = sum over n, x of data[n, g*Ci + ci, x] * grad[n, g*Co + co, x*s + k*d - offset]

is, per group and tap, a product of the data's ``(pixels, Ci)`` and ``grad``'s
``(pixels, Co)`` over the tap's box of pixels.  ``im2col`` gathers every tap's
``grad`` into one matrix first (for a grouped 256-channel 28x28 layer of batch 4,
29 MB written and read again) and runs small products per group.  Here, with both
operands channels last (channels-first ones copied so first,
:func:`~._numba.transpose.channels_last_copy`), a block of ``rows`` input channels x
``vectors`` vectors of output channels keeps its sums in registers while every pixel
of the box adds one broadcast data value times one ``grad`` row per input channel:
no gathered matrix, each sum stored once.  The blocks are compiled per block shape
only (:func:`_block_source`).  For groups whose ``Co`` is a whole number of vectors.
Multiplies only the pairs that exist: exact with non-finite operands.
"""

from __future__ import annotations

import numpy as np

from ..._plan.geometry import three_axes
from ..._runtime.caches import kept
from ..._runtime.threads import parallel_for
from .depthwise_filter import tap_indices, tap_table
from .transpose import channels_last_copy

__all__ = ["blocked_filter_adjoint"]

#: Input channels per block, by vectors of output channels, with 32 vector registers
#: (AVX-512): 8-16 accumulators beside the block's ``grad`` vectors and a broadcast,
#: as direct-blocked's blocks hold (:func:`convtranspose._kernels.schedules.blocked_shape`).
_ROWS = {1: 8, 2: 6, 4: 4}
#: The same with 16 (AVX2): as many rows as fit beside the ``grad`` vectors and the
#: broadcast for 2 and 4 vectors (6 x 2 ran at 0.88x the time of 3 x 2 on 16 channels
#: a group), and 8 for one vector, where 8-14 ran alike and 4-6 1.1x slower
#: (``benchmarks/results/filter-blocks-zen2.json``).
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
        "    ci, co, d_row, g_row = sizes[1], sizes[2], sizes[13], sizes[14]",
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
        "                    d = (((n * x1 + i1) * x2 + i2) * x3 + low3) * d_row + g * ci + ci0",
        "                    e = ((((n * y1 + i1 * s1 + taps[0, m1, 1]) * y2 + i2 * s2",
        "                           + taps[1, m2, 1]) * y3 + low3 * s3 + taps[2, m3, 1])",
        "                         * g_row + g * co + co0)",
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
    lines += ["                        d += d_row",
              "                        e += s3 * g_row"]
    lines += [f"                    vector_store(out, at + {r} * co + {v * lanes}, {name})"
              for r, row in enumerate(accumulators) for v, name in enumerate(row)]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def _block(lanes: int, rows: int, vectors: int):
    """The compiled ``block`` of :func:`_block_source`."""
    from .codegen import compile_source

    return compile_source(_block_source(lanes, rows, vectors), "block")


def _shape(co: int, lanes: int, vector_bytes: int) -> tuple[int, int]:
    """(rows, vectors) of the blocks for ``co`` output channels per group."""
    whole = co // lanes
    vectors = next(v for v in (4, 2, 1) if whole % v == 0)
    return (_ROWS if vector_bytes >= 64 else _AVX2_ROWS)[vectors], vectors


def blocked_filter_adjoint(data: np.ndarray, grad: np.ndarray, axes, groups: int,
                           channels_last: bool, dtype, target) -> np.ndarray:
    """The filter gradient ``(G, Ci, Co, K...)`` in ``dtype`` (float32 or float64, ``Co``
    whole vectors: :func:`convtranspose._kernels.adjoints.blocked_applies`): ``data`` ``(N, G*Ci, X...)`` and ``grad`` ``(N, G*Co, Y...)``, or
    channels last, up to three spatial axes; on ``target``'s threads, split over
    (group, tap, block of input channels, chunk of output channels)."""
    dtype = np.dtype(dtype)
    if not channels_last:
        data = channels_last_copy(data, dtype, target)
        grad = channels_last_copy(grad, dtype, target)
    d_row, g_row = data.shape[-1], grad.shape[-1]  # channels per pixel
    batch, ci, co = data.shape[0], d_row // groups, g_row // groups
    data = np.ascontiguousarray(data, dtype).reshape(-1)
    grad = np.ascontiguousarray(grad, dtype).reshape(-1)
    axes3 = three_axes(axes)
    table, counts = tap_table(axes3)
    taps = int(np.prod(counts))
    sizes = np.array((batch, ci, co) + tuple(a.input_size for a in axes3)
                     + tuple(a.output_size for a in axes3) + tuple(a.stride for a in axes3)
                     + (taps, d_row, g_row), np.int64)
    lanes = target.lanes(dtype)
    rows, vectors = _shape(co, lanes, target.vector_bytes)
    chunk = lanes * vectors
    blocks = [(c0, min(rows, ci - c0)) for c0 in range(0, ci, rows)]
    kernels = {count: _block(lanes, count, vectors) for count in {b[1] for b in blocks}}
    chunks = co // chunk
    out = np.zeros((groups, taps, ci, co), dtype)
    flat = out.reshape(-1)
    per_group = len(blocks) * chunks

    def work(start, stop):
        for item in range(start, stop):
            g, rest = divmod(item, per_group)
            b, q = divmod(rest, chunks)
            c0, count = blocks[b]
            kernels[count](data, grad, flat, sizes, table, counts, g, c0, q * chunk)

    parallel_for(work, groups * per_group, target.threads)
    kernel = tuple(a.kernel_size for a in axes3)
    result = np.zeros((groups, ci, co) + kernel, dtype)
    for t, index in enumerate(tap_indices(table, counts, kernel)):
        k1, rest = divmod(index, kernel[1] * kernel[2])
        k2, k3 = divmod(rest, kernel[2])
        result[:, :, :, k1, k2, k3] = out[:, t]
    return result.reshape((groups, ci, co) + tuple(a.kernel_size for a in axes))
