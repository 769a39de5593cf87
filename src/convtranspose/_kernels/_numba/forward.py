"""The data adjoint (a forward convolution, any stride) in ``direct-blocked``'s blocks.

For the canonical problem (:mod:`convtranspose._kernels.adjoints`)::

    data_adjoint[n, g*Ci + ci, x] = sum over co, k of w[g, ci, co, k] * grad[n, g*Co + co, x*s + k*d - offset]

Two kernels, both with ``direct-blocked``'s register blocks: each block keeps a chunk
of its ``Ci`` output channels for a few outputs in vector registers while every tap and
``grad`` channel adds one broadcast value times one packed weight row.

``padded`` (a finite filter): ``grad``'s channels-last copy has zeros around it as far
as the taps reach (:func:`~convtranspose._plan.geometry.tap_zeros`; a channels-first
``grad`` is transposed into it in one pass), so that every output has every tap and a
group's outputs form one run over the batch and all axes, taken in whole blocks across
lines and images (:func:`.block_sources.cross_block_source`), the last few one at a
time: no block recomputes a neighbour's outputs at a line's end, no line end goes
output by output.  One group's taps along an undilated last axis read one run of
``K3 * Co`` source values against as many weight rows (a block's loop over three
channels per tap ran at 70% of its loop over 21).  The channels go in blocks only where
a chunk's weight panel leaves half of L2 (L1-sized blocks, as the line kernel takes,
made DCGAN 256->512 30.4 ms against 23.1 on one thread, ``l2_channel_blocks``).  On an
AMD EPYC Zen 2, against the line kernel over the same channels-last copy: 0.62-0.99x the
time on twelve layers on two threads (DCGAN 256->512 19.2 -> 11.9 ms, the stem 0.70x),
0.61-0.92x on one but 1.10x on a layer of one input channel (where the planes run faster
than both); the stem's kernel alone 2.50 ms merged against 3.56 with a loop over three
channels per tap (``benchmarks/results/forward-kernels-zen2.json``).

The line kernel (non-finite filters, and ``blocked-planes``): per output line (``n``,
the first axes' outputs, a group), the outputs whose taps all read inside ``grad`` go
in blocks (:func:`.block_sources.block_source`) with the pixels of a block ``s`` source
pixels apart; the others one at a time with the taps they have
(:func:`.block_sources.single_source`), and only pairs that exist are multiplied: exact
with non-finite operands.  It reads ``grad`` channels last (a channels-first one is
copied so first) or, in planes, where it is.

No im2col matrix.  The sums are written channels last, each group's channels padded to
whole chunks; a channels-first caller gets them stored channels first by each item as
soon as its sums are done, without the padding (the padded kernel keeps them in its
thread's rows until then, never in a result-sized array).  The weight panel of one chunk of
output channels serves a thread's run of outputs (the work is chunk-major).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..._plan.geometry import tap_zeros, three_axes
from ..._plan.rules import AxisPlan
from ..._runtime.caches import kept
from ..._runtime.machine import l1_data_cache_bytes, l2_cache_bytes
from ..blocked_channels import blocked_channel_block
from ..schedules import blocked_shape
from .block_sources import block_source, cross_block_source, single_source
from .blocked import pass_weights
from .launch import array_kind, parallel_kernel
from .transpose import (
    channels_last_copy,
    first_store_kernel,
    padded_channels_last_copy,
    zero_bordered,
)

__all__ = ["forward_adjoint", "prepare_forward_adjoint"]


@kept("compiled kernels", maxsize=None)
def _forward_kernel(lanes: int, chunk: int, pixels: int):
    """The template's kernel for one block shape (compiled on first use)."""
    from .codegen import compile_source, compile_template

    block = compile_source(block_source(lanes, chunk, pixels), "block")
    block_on = compile_source(block_source(lanes, chunk, pixels, accumulate=True), "block")
    single = compile_source(single_source(lanes, chunk, max(1, min(4, pixels))), "single")
    return compile_template("forward", dict(
        np=np, block=block, block_on=block_on, single=single, pixels=pixels,
        chunk_width=lanes * chunk, store_first=first_store_kernel(lanes),
    ))["kernel"]


@kept("compiled kernels", maxsize=None)
def _padded_kernel(lanes: int, chunk: int, pixels: int):
    """The padded template's kernel for one block shape (compiled on first use)."""
    from .codegen import compile_source, compile_template

    block = compile_source(cross_block_source(lanes, chunk, pixels), "block")
    block_on = compile_source(cross_block_source(lanes, chunk, pixels, accumulate=True),
                              "block")
    single = compile_source(single_source(lanes, chunk, max(1, min(4, pixels))), "single")
    return compile_template("forward_padded", dict(
        np=np, block=block, block_on=block_on, single=single, pixels=pixels,
        chunk_width=lanes * chunk, store_first=first_store_kernel(lanes),
    ))["kernel"]


def _tap_table(axes3) -> tuple[np.ndarray, np.ndarray]:
    """Per axis every tap as ``(k, shift)`` with ``shift = k*d - offset`` (the source
    index output 0 reads), ``(3, most, 2)``, and the counts."""
    most = max(axis.kernel_size for axis in axes3)
    table = np.zeros((3, most, 2), np.int64)
    for a, axis in enumerate(axes3):
        for k in range(axis.kernel_size):
            table[a, k] = (k, k * axis.dilation - axis.offset)
    return table, np.array([axis.kernel_size for axis in axes3], np.int64)


def _source(grad: np.ndarray, axes3, channels_last: bool, dtype, target,
            pads, planes: bool) -> np.ndarray:
    """``grad`` as the kernel reads it, C-contiguous ``(N, Y1', Y2', Y3', C)`` with three
    spatial axes: channels last (a channels-first ``grad`` copied so), ``pads[a] =
    (before, after)`` zeros on either side of axis ``a``; or, with ``planes``, a
    channels-first ``grad`` as it is, ``(N, C, Y1, Y2, Y3)``."""
    spatial = tuple(a.output_size for a in axes3)
    if planes:
        return np.ascontiguousarray(grad.reshape(grad.shape[:2] + spatial), dtype)
    zeros = any(map(any, pads))
    if not channels_last:
        grad = grad.reshape(grad.shape[:2] + spatial)
        if zeros:
            return padded_channels_last_copy(grad, pads, dtype, target)
        grad = channels_last_copy(grad, dtype, target)
    grad = np.ascontiguousarray(grad.reshape(grad.shape[:1] + spatial + grad.shape[-1:]),
                                dtype)
    if not zeros:
        return grad
    padded, inside = zero_bordered(grad.shape[0], spatial, pads, grad.shape[-1], dtype)
    padded[inside] = grad
    return padded


def forward_adjoint(grad: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                    dtype, derived, target, padded: bool = False,
                    planes: bool = False) -> np.ndarray:
    """The data adjoint ``(N, G*Ci, X...)`` (or ``(N, X..., G*Ci)`` when
    ``channels_last``), C-contiguous, of ``grad`` ``(N, G*Co, Y...)`` (or channels
    last) and ``weights`` ``(G, Ci, Co, K...)``, float32 or float64 (``dtype``), up to
    three spatial axes; the packed weights kept in ``derived`` (a dict, or None).
    ``padded``: read a copy of ``grad`` with zeros around it as far as the taps reach,
    every output in whole blocks across lines (a finite filter only).  ``planes``: read
    a channels-first ``grad``'s planes where they are instead of a channels-last copy
    (the ``blocked-planes`` algorithm; not ``padded``)."""
    return prepare_forward_adjoint(grad.shape[0], weights, axes, channels_last, dtype,
                                   derived, target, padded, planes)(grad)


def _run_length(blocks: int, chunks: int, threads: int, block_bytes: int) -> int:
    """The whole blocks of a run of the padded kernel: as many as keep the run's sums
    within half of L1 (its later channel blocks add into them), and few enough that
    the runs of all chunks make at least four per thread."""
    runs_wanted = -(-4 * threads // max(1, chunks))
    return max(1, min(l1_data_cache_bytes() // 2 // block_bytes, blocks // runs_wanted))


def _padded_arguments(batch, axes3, groups, ci, co, width, chunk_width, pixels, dtype,
                      threads, channels_first: bool):
    """``(pads, sizes, reads, rows, items)`` of the padded kernel (``channels_first``:
    the result's layout): the zeros on either
    side of each axis of ``grad``'s copy (:func:`~convtranspose._plan.geometry.tap_zeros`),
    the kernel's sizes, each tap's read from its output's source pixel and its weight
    rows, and the kernel's items."""
    pads = tuple(tap_zeros(axis) for axis in axes3)
    padded = tuple(b + a.output_size + e for (b, e), a in zip(pads, axes3))
    steps = (padded[1] * padded[2] * groups * co, padded[2] * groups * co, groups * co)
    # One group's taps along the last axis, undilated, read one run of source values
    # (pixels side by side, channels last) against one run of weight rows: one entry of
    # K3 * Co channels, so that a block's loop over an entry's channels is long even
    # where the channels are few (the stem's three)
    merged = groups == 1 and axes3[2].dilation == 1
    ranges = [range(a.kernel_size) for a in axes3[:2]] + [
        range(1 if merged else axes3[2].kernel_size)]
    entry = co * (axes3[2].kernel_size if merged else 1)
    taps = list(itertools.product(*ranges))
    reads = np.array([sum((k * a.dilation - a.offset + b) * step
                          for k, a, (b, _), step in zip(tap, axes3, pads, steps))
                      for tap in taps], np.int64)
    rows = np.arange(len(taps), dtype=np.int64) * entry * chunk_width
    outputs = tuple(a.input_size for a in axes3)
    blocks = batch * math.prod(outputs) // pixels
    chunks = width // chunk_width * groups
    run = _run_length(blocks, chunks, threads, pixels * chunk_width * dtype.itemsize)
    sizes = np.array((batch, groups, co, width) + outputs + padded
                     + (len(taps),) + tuple(a.stride for a in axes3)
                     + (blocked_channel_block(entry, len(taps), chunk_width, dtype.itemsize,
                                              l2_cache_bytes()), ci, channels_first, run,
                        entry), np.int64)
    return pads, sizes, reads, rows, chunks * max(1, -(-blocks // run))


def prepare_forward_adjoint(batch: int, weights: np.ndarray, axes, channels_last: bool,
                            dtype, derived, target, padded: bool = False,
                            planes: bool = False):
    """:func:`forward_adjoint` for ``batch`` items with everything but ``grad`` set up
    once: ``run(grad, out=None)`` returns the adjoint of ``grad``, in ``out`` (of the
    result's shape and dtype) where given: channels first and C-contiguous, the kernel
    stores into it.  The weights are packed now (kept in ``derived`` as well)."""
    dtype = np.dtype(dtype)
    groups, ci, co = weights.shape[:3]
    axes3 = three_axes(axes)
    if planes and (channels_last or padded):
        raise ValueError("only a channels-first grad without zeros is read in planes")
    outputs = tuple(a.input_size for a in axes3)
    lanes, vectors, chunk, pixels = blocked_shape(
        dtype.itemsize, ci, AxisPlan(outputs[2], 1, 1, 1, 0, outputs[2]), target.vector_bytes)
    width = lanes * vectors
    kernel3 = tuple(a.kernel_size for a in axes3)
    # A view: pass_weights copies it only to pack it, on a miss of ``derived``.
    packed = pass_weights(weights.swapaxes(1, 2), {} if derived is None else derived, dtype,
                          kernel3, (0, ci), width, lanes * chunk).reshape(-1)
    if padded:
        pads, sizes, table, counts, items = _padded_arguments(
            batch, axes3, groups, ci, co, width, lanes * chunk, pixels, dtype,
            target.threads, not channels_last)
        kernel = _padded_kernel(lanes, chunk, pixels)
    else:
        pads = ((0, 0),) * 3
        table, counts = _tap_table(axes3)
        sizes = np.array((batch, groups, co, width) + outputs
                         + tuple(a.output_size for a in axes3) + kernel3
                         + (axes3[2].stride, axes3[0].stride, axes3[1].stride,
                            blocked_channel_block(co, int(np.prod(kernel3)), lanes * chunk,
                                                  dtype.itemsize, l1_data_cache_bytes()),
                            ci, not channels_last, planes),
                         np.int64)
        kernel = _forward_kernel(lanes, chunk, pixels)
        items = width // (lanes * chunk) * batch * outputs[0] * outputs[1] * groups
    sums_shape = (batch,) + outputs + (groups, width)
    result_shape = ((batch,) + tuple(a.input_size for a in axes) + (groups * ci,)
                    if channels_last else (batch, groups * ci) + tuple(a.input_size
                                                                      for a in axes))
    no_first = np.empty(1, dtype)
    # The padded kernel's sums of a channels-first result stay in rows of each thread's
    # own (a run's outputs), never written out whole: on an AMD EPYC Zen 2, two threads,
    # the stem's kernel took 3.5-4.0 ms with its 3.2 MB of sums, written and read back,
    # against 1.43 without (``benchmarks/results/forward-kernels-zen2.json``,
    # ``local_sums``)
    local = padded and not channels_last
    scratch = (4, int(sizes[17] + 1) * pixels * lanes * chunk, dtype) if local else None
    # (the padded kernel's rows argument, unused with a channels-last result)
    no_rows = (no_first,) if padded and not local else ()
    addresses: dict = {}

    def run(grad: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        source = _source(grad, axes3, channels_last, dtype, target, pads, planes)
        sums = no_first if local else np.empty(sums_shape, dtype)
        # Channels first, each item stores its own sums transposed while they are in
        # its core's cache: with a copy of the whole result after the kernel instead,
        # the stem's 64-channel 112x112 result took 1.83 ms against 1.60 on an AMD Zen 4
        # in a slow spell of the host, 1.66 against 1.62 in a fast one; other layers
        # 0.98-1.07x (``benchmarks/results/copy-split-zen4.json``, ``fused_store``,
        # ``third_run``).
        direct = not channels_last and out is not None and out.flags.c_contiguous
        first = no_first if channels_last else out if direct else np.empty(result_shape, dtype)
        arrays = (source.reshape(-1), packed, sums.reshape(-1), first.reshape(-1))
        # Only the source, the sums and the result vary in type from call to call.
        kept = (addresses, (array_kind(arrays[0]), array_kind(arrays[2]), array_kind(arrays[3])))
        parallel_kernel(kernel, arrays + no_rows + (sizes, table, counts), items,
                        target.threads, scratch=scratch, kept=kept)
        # (channels last, a copy only where the groups' channels were padded)
        result = sums[..., :ci].reshape(result_shape) if channels_last else first
        if out is None or direct:
            return result
        out[...] = result
        return out

    return run
