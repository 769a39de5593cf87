"""The depthwise filter gradient, compiled: channel vectors summed in registers.

For groups of one input and one output channel the filter adjoint
(:mod:`convtranspose._kernels.adjoints`) is, per channel ``c`` and tap ``k``::

    w_grad[c, k] = sum over n, x of data[n, c, x] * grad[n, c, x*s + k*d - offset]

over the box of ``x`` whose reads fall inside ``grad``.  NumPy computes it as one
product array per tap, summed: each tap moves the whole data and ``grad`` through
memory three times.  Channels-first operands whose rows fill their vectors
(:func:`_planes_pay`) are summed on their planes as they are, along the rows
(:func:`_plane_sums_source`).  Otherwise both are channels last (channels-first operands
are copied so first, :func:`~._numba.transpose.channels_last_copy`), and each line of
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
from ..._plan.rules import AxisPlan
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


#: Accumulators of :func:`_plane_sums_source`: independent multiply-add chains, so that
#: a row's vectors do not wait on each other's latency.
_PLANE_ACCUMULATORS = 4


def _plane_sums_source(lanes: int) -> str:
    """Source of ``plane_sums``: per item (an image's channel: a plane of the data and
    one of ``grad``, channels first, the last axis of stride 1), every tap's sum over
    the plane, tap by tap.  Along each row the products go in
    :data:`_PLANE_ACCUMULATORS` accumulators in turn (the reads of ``grad`` contiguous
    and in step with the data's), the row's last part through masked loads (zeros in
    the other lanes); the accumulators carry from row to row and are added lane by lane
    into float64 totals every ``lanes`` rows, so that a float32 partial sum has about
    as many terms as a line of the channel-vector kernel's."""
    count = _PLANE_ACCUMULATORS
    step = count * lanes
    zero = [f"acc_{v} = vector_zero(data, {lanes})" for v in range(count)]
    total = "acc_0"
    for v in range(1, count):
        total = f"vector_add({total}, acc_{v})"
    added = [f"vector_store(line, 0, {total})", f"for j in range({lanes}):",
             "    totals[j] += line[j]"]

    def fma(v: int, at: str) -> list[str]:
        return [f"acc_{v} = vector_fma(vector_load(data, d + {at}, {lanes}),",
                f"                     vector_load(grad, g + {at}, {lanes}), acc_{v})"]

    row = [f"for x in range(0, runs, {step}):"]
    for v in range(count):
        row += ["    " + text for text in fma(v, f"x + {v * lanes}")]
    for v in range(count - 1):  # the whole vectors after the runs, one per accumulator
        row += [f"if whole > runs + {v * lanes}:"]
        row += ["    " + text for text in fma(v, f"runs + {v * lanes}")]
    row += ["if whole < length:",
            f"    acc_{count - 1} = vector_fma(",
            f"        vector_load_first(data, d + whole, length - whole, {lanes}),",
            f"        vector_load_first(grad, g + whole, length - whole, {lanes}),",
            f"        acc_{count - 1})",
            "d += x3",
            "g += s2 * y3",
            "rows += 1",
            f"if rows == {lanes}:",
            "    rows = 0"] + ["    " + text for text in added + zero]
    lines = [
        "def plane_sums(data, grad, partial, sizes, taps, counts, start, stop):",
        "    x1, x2, x3, y1, y2, y3 = sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5]",
        "    s1, s2 = sizes[6], sizes[7]",
        "    count12, count3 = counts[1] * counts[2], counts[2]",
        "    tap_count = counts[0] * count12",
        f"    line = np.empty({lanes}, data.dtype)",
        f"    totals = np.empty({lanes}, np.float64)",
        "    for item in range(start, stop):",
        "        data_plane, grad_plane = item * x1 * x2 * x3, item * y1 * y2 * y3",
        "        for t in range(tap_count):",
        "            m1, m2, m3 = t // count12, t // count3 % counts[1], t % count3",
        "            shift1, low1, high1 = taps[0, m1, 1], taps[0, m1, 2], taps[0, m1, 3]",
        "            shift2, low2, high2 = taps[1, m2, 1], taps[1, m2, 2], taps[1, m2, 3]",
        "            shift3, low3 = taps[2, m3, 1], taps[2, m3, 2]",
        "            length = taps[2, m3, 3] - low3",
        f"            runs, whole = length // {step} * {step}, length // {lanes} * {lanes}",
        f"            for j in range({lanes}):",
        "                totals[j] = 0.0",
        "            rows = 0",
    ] + [f"            {text}" for text in zero] + [
        "            for i1 in range(low1, high1):",
        "                d = data_plane + (i1 * x2 + low2) * x3 + low3",
        "                g = (grad_plane + ((i1 * s1 + shift1) * y2 + low2 * s2 + shift2) * y3",
        "                     + low3 + shift3)",
        "                for _ in range(high2 - low2):",
    ] + [f"                    {text}" for text in row] + [
    ] + [f"            {text}" for text in added] + [
        "            total = 0.0",
        f"            for j in range({lanes}):",
        "                total += totals[j]",
        "            partial[item * tap_count + t] = total",
    ]
    return "\n".join(lines) + "\n"


@kept("compiled kernels", maxsize=None)
def _plane_sums(lanes: int):
    """The compiled ``plane_sums`` of :func:`_plane_sums_source`."""
    from .codegen import compile_source

    return compile_source(_plane_sums_source(lanes), "plane_sums")


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
    axes3 = three_axes(axes)
    if not channels_last and _planes_pay(axes3[2], data.shape[1], target.lanes(dtype)):
        return _planes_filter_adjoint(data, grad, axes, axes3, dtype, target)
    if not channels_last:
        data = channels_last_copy(data, dtype, target)
        grad = channels_last_copy(grad, dtype, target)
    data = np.ascontiguousarray(data, dtype)
    grad = np.ascontiguousarray(grad, dtype)
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


#: The least share of the lanes of the vectors a row spans that its elements fill for
#: which channels-first operands are summed on their planes (:func:`_plane_sums_source`)
#: rather than copied channels last for the channel-vector kernel: on an AMD Zen 4 (16
#: float32 lanes) rows filling 88-100% took 0.13-0.76x the time, rows of 7 (44%) 1.85x
#: and of 20 (62%) 1.25x; with fewer channels than lanes the planes took 0.15-0.67x on
#: rows filling 44-62%, ``benchmarks/results/depthwise-filter-zen4.json``.
PLANE_LANE_SHARE = 0.75


def _planes_pay(last: AxisPlan, channels: int, lanes: int) -> bool:
    """Whether :func:`depthwise_filter_adjoint` sums channels-first operands on their
    planes: the last axis has stride 1 (its reads of ``grad`` contiguous) and its rows
    fill :data:`PLANE_LANE_SHARE` of their vectors' lanes, or there are fewer channels
    than lanes (the channel-vector kernel would sum them one at a time)."""
    if last.stride != 1:
        return False
    spanned = -(-last.input_size // lanes) * lanes
    return channels < lanes or last.input_size >= PLANE_LANE_SHARE * spanned


def _planes_filter_adjoint(data: np.ndarray, grad: np.ndarray, axes, axes3, dtype,
                           target) -> np.ndarray:
    """:func:`depthwise_filter_adjoint` of channels-first operands whose last axis has
    stride 1, on their planes as they are (:func:`_plane_sums_source`): no channels-last
    copies; on ``target``'s threads, split over the (image, channel) planes."""
    data = np.ascontiguousarray(data, dtype)
    grad = np.ascontiguousarray(grad, dtype)
    batch, channels = data.shape[:2]
    kernel3 = tuple(axis.kernel_size for axis in axes3)
    sizes = np.array(tuple(a.input_size for a in axes3) + tuple(a.output_size for a in axes3)
                     + (axes3[0].stride, axes3[1].stride), np.int64)
    table, counts = tap_table(axes3)
    taps = int(np.prod(counts))
    partial = np.zeros(batch * channels * taps, np.float64)
    parallel_kernel(_plane_sums(target.lanes(dtype)),
                    (data.reshape(-1), grad.reshape(-1), partial, sizes, table, counts),
                    batch * channels, target.threads)
    sums = partial.reshape(batch, channels, taps).sum(axis=0)
    out = np.zeros((channels, int(np.prod(kernel3))), dtype)
    for t, index in enumerate(tap_indices(table, counts, kernel3)):
        out[:, index] = sums[:, t]
    return out.reshape((channels,) + tuple(axis.kernel_size for axis in axes))
