"""The depthwise filter gradient, compiled: channel vectors summed in registers.

For groups of one input and one output channel the filter adjoint
(:mod:`convtranspose._kernels.adjoints`) is, per channel ``c`` and tap ``k``::

    w_grad[c, k] = sum over n, x of data[n, c, x] * grad[n, c, x*s + k*d - offset]

over the box of ``x`` whose reads fall inside ``grad``.  NumPy computes it as one
product array per tap, summed: each tap moves the whole data and ``grad`` through
memory three times.  Here both are channels last (channels-first operands are
copied so first, :func:`~._numba.transpose.channels_last_copy`), and each line of
the data, while it is in L1, meets every tap's line of ``grad`` in turn: a chunk of
channel vectors summed in registers along the line (one multiply-add per vector and
pixel, no horizontal sums, no per-line tails), then added into the tap's totals of
float64, so that a float32 gradient over a large batch does not lose its small terms
to one long float32 sum.  Channels past the last whole vector are summed one at a
time.  Multiplies only the pairs that exist: exact with non-finite operands.
"""

from __future__ import annotations

import numpy as np

from ..._plan.geometry import axis_taps, three_axes
from ..._runtime.caches import kept
from ..._runtime.threads import PIECES_PER_THREAD, parallel_for
from .kernel_cache import cached_njit
from .launch import parallel_kernel
from .transpose import channels_last_copy

__all__ = ["depthwise_filter_adjoint", "tap_indices", "tap_table"]

#: The most vectors of channels a chunk sums at once: four independent multiply-add
#: chains per pixel, the operands' rows read a cache line at a time.
_MOST_VECTORS = 4


def _tap_sums_source(lanes: int, vectors: int) -> str:
    """Source of ``tap_sums``: per item (band of lines, chunk of ``vectors * lanes``
    channels), every tap's sums over the band, line by line: a data line (in L1) meets
    each tap's ``grad`` line in turn, its sums in ``vectors`` accumulators
    (:mod:`.vectors`) added into the item's float64 totals ``(taps, chunk)``, so that
    the operands pass through memory about once, not once per tap."""
    chunk = lanes * vectors
    lines = [
        "def tap_sums(data, grad, totals, line, sizes, taps, counts, bands, start, stop):",
        "    channels, chunks = sizes[1], sizes[1] // " + str(chunk),
        "    x1, x2, x3, y1, y2, y3 = sizes[2], sizes[3], sizes[4], sizes[5], sizes[6], sizes[7]",
        "    s1, s2, s3 = sizes[10], sizes[11], sizes[12]",
        "    count12, count3 = counts[1] * counts[2], counts[2]",
        "    tap_count = counts[0] * count12",
        "    rows = sizes[0] * x1 * x2",
        "    for item in range(start, stop):",
        "        band, c0 = item // chunks, item % chunks * " + str(chunk),
        f"        base = item * tap_count * {chunk}",
        f"        for j in range(tap_count * {chunk}):",
        "            totals[base + j] = 0",
        "        for r in range(rows * band // bands, rows * (band + 1) // bands):",
        "            n, i1, i2 = r // (x1 * x2), r // x2 % x1, r % x2",
        "            for t in range(tap_count):",
        "                m1, m2, m3 = t // count12, t // count3 % counts[1], t % count3",
        "                if not (taps[0, m1, 2] <= i1 < taps[0, m1, 3]",
        "                        and taps[1, m2, 2] <= i2 < taps[1, m2, 3]):",
        "                    continue",
        "                low3 = taps[2, m3, 2]",
        "                d = (((n * x1 + i1) * x2 + i2) * x3 + low3) * channels + c0",
        "                g = ((((n * y1 + i1 * s1 + taps[0, m1, 1]) * y2 + i2 * s2",
        "                       + taps[1, m2, 1]) * y3 + low3 * s3 + taps[2, m3, 1])",
        "                     * channels + c0)",
    ]
    lines += [f"                acc_{v} = vector_zero(data, {lanes})" for v in range(vectors)]
    lines += ["                for _ in range(taps[2, m3, 3] - low3):"]
    lines += [f"                    acc_{v} = vector_fma(vector_load(data, d + {v * lanes}, "
              f"{lanes}), vector_load(grad, g + {v * lanes}, {lanes}), acc_{v})"
              for v in range(vectors)]
    lines += ["                    d += channels",
              "                    g += s3 * channels"]
    lines += [f"                vector_store(line, {v * lanes}, acc_{v})" for v in range(vectors)]
    lines += [f"                at = base + t * {chunk}",
              f"                for j in range({chunk}):",
              "                    totals[at + j] += line[j]"]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def _tap_sums(lanes: int, vectors: int):
    """The compiled ``tap_sums`` of :func:`_tap_sums_source`."""
    from .codegen import compile_source

    return compile_source(_tap_sums_source(lanes, vectors), "tap_sums")


@cached_njit(nogil=True)
def _channel_sums(data, grad, out, sizes, taps, counts, first, line_zero, start,
                  stop):  # pragma: no cover - compiled
    # tap_sums for channels [first, C), one at a time: the taps with flat index in
    # [start, stop).  Each line's sum starts at line_zero, a zero of the operands'
    # dtype (not at a value times zero: that is NaN for an infinite value).
    channels = sizes[1]
    x1, x2, x3, y1, y2, y3 = sizes[2], sizes[3], sizes[4], sizes[5], sizes[6], sizes[7]
    k2, k3, s1, s2, s3 = sizes[8], sizes[9], sizes[10], sizes[11], sizes[12]
    for t in range(start, stop):
        m1, m2, m3 = t // (counts[1] * counts[2]), t // counts[2] % counts[1], t % counts[2]
        at = ((taps[0, m1, 0] * k2 + taps[1, m2, 0]) * k3 + taps[2, m3, 0]) * channels
        for c in range(first, channels):
            total = 0.0
            for n in range(sizes[0]):
                for i1 in range(taps[0, m1, 2], taps[0, m1, 3]):
                    for i2 in range(taps[1, m2, 2], taps[1, m2, 3]):
                        d = (((n * x1 + i1) * x2 + i2) * x3 + taps[2, m3, 2]) * channels + c
                        g = ((((n * y1 + i1 * s1 + taps[0, m1, 1]) * y2 + i2 * s2
                               + taps[1, m2, 1]) * y3 + taps[2, m3, 2] * s3 + taps[2, m3, 1])
                             * channels + c)
                        line = line_zero
                        for _ in range(taps[2, m3, 3] - taps[2, m3, 2]):
                            line += data[d] * grad[g]
                            d += channels
                            g += s3 * channels
                        total += line
            out[at + c] = total


def tap_table(axes3):
    """Per axis the taps that read inside ``grad``, ``(3, most, 4)`` rows of ``(k, shift,
    low, high)`` (:func:`~convtranspose._plan.geometry.axis_taps`), and their counts."""
    per_axis = [axis_taps(axis) for axis in axes3]
    most = max(1, max(len(taps) for taps in per_axis))
    table = np.zeros((3, most, 4), np.int64)
    for a, taps in enumerate(per_axis):
        if taps:
            table[a, :len(taps)] = taps
    return table, np.array([len(taps) for taps in per_axis], np.int64)


def tap_indices(table: np.ndarray, counts: np.ndarray, kernel3) -> list[int]:
    """The flat kernel index ``(k1 * K2 + k2) * K3 + k3`` of each tap of the table, in
    the kernels' order (``(m1, m2, m3)`` row-major)."""
    return [(int(table[0, m1, 0]) * kernel3[1] + int(table[1, m2, 0])) * kernel3[2]
            + int(table[2, m3, 0])
            for m1 in range(counts[0]) for m2 in range(counts[1]) for m3 in range(counts[2])]


def depthwise_filter_adjoint(data: np.ndarray, grad: np.ndarray, axes, channels_last: bool,
                             dtype: np.dtype, target) -> np.ndarray:
    """The filter gradient ``(C, K...)`` of a depthwise layer (one input and one output
    channel per group, ``C`` groups): ``data`` ``(N, C, X...)`` and ``grad`` ``(N, C,
    Y...)``, or ``(N, X..., C)`` and ``(N, Y..., C)`` when ``channels_last``, float32 or
    float64 (``dtype``), up to three spatial axes; on ``target``'s threads, split over
    (tap, chunk of channels)."""
    if not channels_last:
        data = channels_last_copy(data, dtype, target)
        grad = channels_last_copy(grad, dtype, target)
    data = np.ascontiguousarray(data, dtype)
    grad = np.ascontiguousarray(grad, dtype)
    axes3 = three_axes(axes)
    channels = data.shape[-1]
    kernel3 = tuple(axis.kernel_size for axis in axes3)
    sizes = np.array((data.shape[0], channels) + tuple(a.input_size for a in axes3)
                     + tuple(a.output_size for a in axes3) + kernel3[1:]
                     + tuple(a.stride for a in axes3), np.int64)
    table, counts = tap_table(axes3)
    taps = int(np.prod(counts))
    out = np.zeros(kernel3 + (channels,), dtype)
    source, window, flat = data.reshape(-1), grad.reshape(-1), out.reshape(-1)
    lanes = target.lanes(dtype)
    whole = channels // lanes
    vectors = next((v for v in (_MOST_VECTORS, 2, 1) if whole and whole % v == 0), 0)
    if vectors:
        kernel, chunk = _tap_sums(lanes, vectors), lanes * vectors
        chunks = whole // vectors
        # Bands of lines: a few per thread, each item's totals summed afterwards.
        bands = max(1, min(data.shape[0] * axes3[0].input_size * axes3[1].input_size,
                           -(-PIECES_PER_THREAD * target.threads // chunks)))
        totals = np.empty((bands, chunks, taps, chunk), np.float64)

        def work(start, stop):
            line = np.empty(chunk, dtype)
            kernel(source, window, totals.reshape(-1), line, sizes, table, counts, bands,
                   start, stop)

        parallel_for(work, bands * chunks, target.threads)
        # (chunks, taps, chunk) -> the taps' rows of channels [0, whole * lanes)
        summed = totals.sum(axis=0).transpose(1, 0, 2).reshape(taps, chunks * chunk)
        for t, index in enumerate(tap_indices(table, counts, kernel3)):
            flat[index * channels:index * channels + chunks * chunk] = summed[t]
    if whole * lanes < channels:
        zero = np.dtype(dtype).type(0)
        parallel_kernel(_channel_sums, (source, window, flat, sizes, table, counts,
                                        whole * lanes, zero), taps, target.threads)
    return np.moveaxis(out, -1, 0).reshape((channels,) + tuple(a.kernel_size for a in axes))
