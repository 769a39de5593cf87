"""The data adjoint (a forward convolution, any stride) in ``direct-blocked``'s blocks.

For the canonical problem (:mod:`convtranspose._kernels.adjoints`)::

    data_adjoint[n, g*Ci + ci, x] = sum over co, k of w[g, ci, co, k] * grad[n, g*Co + co, x*s + k*d - offset]

Per output line (``n``, the first axes' outputs, a group), the outputs whose taps all
read inside ``grad`` go in blocks of ``direct-blocked``'s register-blocked kernel
(:func:`.block_sources.block_source`) with the pixels of a block ``s`` source pixels apart:
each block keeps a chunk of its ``Ci`` output channels in vector registers while every
tap and ``grad`` channel adds one broadcast value times one packed weight row.  Where
the filter is finite and enough of a line's outputs have taps outside
``grad`` (:func:`~convtranspose._kernels.adjoints.line_end_zeros`), ``grad``'s
channels-last copy has zeros before and after the last axis as far as the taps reach,
so that the line's ends go in the same blocks (a tap reading a zero adds nothing: 0.82x
the time on lines of 8 with 2 such outputs, ``benchmarks/results/gradients-xeon.json``,
``padded_line_ends``).  Otherwise those outputs go one at a time with the taps they
have (:func:`.block_sources.single_source`) and only pairs that exist are multiplied:
exact with non-finite operands.  No im2col matrix.  ``grad`` is read channels last (a
channels-first one is copied so first); the sums are written channels last, each
group's channels padded to whole chunks; a channels-first caller gets them stored
channels first by each item as soon as its sums are done, without the padding.  The
weight panel of one chunk of output channels serves a thread's run of lines (the work
is chunk-major); the weights are not blocked further,
so layers whose panel leaves L2 (hundreds of channels, many taps) run slower than
``im2col``'s BLAS products, and measured planning keeps ``im2col`` there.
"""

from __future__ import annotations

import numpy as np

from ..._plan.geometry import three_axes
from ..._plan.rules import AxisPlan
from ..._runtime.caches import kept
from ..._runtime.machine import l1_data_cache_bytes
from ..blocked_channels import blocked_channel_block
from ..schedules import blocked_shape
from .block_sources import block_source, single_source
from .blocked import pass_weights
from .launch import parallel_kernel
from .transpose import channels_last_copy, partial_tile_transposer, tile_transposer

__all__ = ["forward_adjoint", "prepare_forward_adjoint"]


@kept("compiled kernels", maxsize=None)
def _forward_kernel(lanes: int, chunk: int, pixels: int):
    """The template's kernel for one block shape (compiled on first use)."""
    from .codegen import compile_source, compile_template

    block = compile_source(block_source(lanes, chunk, pixels), "block")
    block_on = compile_source(block_source(lanes, chunk, pixels, accumulate=True), "block")
    single = compile_source(single_source(lanes, chunk, max(1, min(4, pixels))), "single")
    return compile_template("forward", dict(
        np=np, block=block, block_on=block_on, single=single, pixels=pixels, chunk_width=lanes * chunk,
        lanes=lanes, tile=tile_transposer(lanes),
        partial_tile=partial_tile_transposer(lanes),
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


def _line_end_padded(grad: np.ndarray, zeros: tuple[int, int]) -> np.ndarray:
    """``grad`` ``(N, Y1, Y2, Y3, C)`` in a new array with ``zeros`` before and after
    its last spatial axis."""
    before, after = zeros
    shape = grad.shape[:3] + (before + grad.shape[3] + after,) + grad.shape[4:]
    padded = np.zeros(shape, grad.dtype)
    padded[:, :, :, before:before + grad.shape[3]] = grad
    return padded


def _source(grad: np.ndarray, axes3, channels_last: bool, dtype, target,
            zeros: tuple[int, int], planes: bool) -> np.ndarray:
    """``grad`` as the kernel reads it, C-contiguous ``(N, Y1, Y2, Y3', C)`` with three
    spatial axes: channels last (a channels-first ``grad`` copied so), ``zeros`` added
    before and after the last axis; or, with ``planes``, a channels-first ``grad`` as it
    is, ``(N, C, Y1, Y2, Y3)``."""
    spatial = tuple(a.output_size for a in axes3)
    if planes:
        return np.ascontiguousarray(grad.reshape(grad.shape[:2] + spatial), dtype)
    if not channels_last:
        grad = channels_last_copy(grad, dtype, target)
    grad = np.ascontiguousarray(grad.reshape(grad.shape[:1] + spatial + grad.shape[-1:]),
                                dtype)
    return _line_end_padded(grad, zeros) if any(zeros) else grad


def forward_adjoint(grad: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                    dtype, derived, target, zeros: tuple[int, int] = (0, 0),
                    planes: bool = False) -> np.ndarray:
    """The data adjoint ``(N, G*Ci, X...)`` (or ``(N, X..., G*Ci)`` when
    ``channels_last``), C-contiguous, of ``grad`` ``(N, G*Co, Y...)`` (or channels
    last) and ``weights`` ``(G, Ci, Co, K...)``, float32 or float64 (``dtype``), up to
    three spatial axes; the packed weights kept in ``derived`` (a dict, or None).
    ``zeros``: the zeros before and after the last axis of ``grad``'s copy, so that the
    line ends go in the blocks
    (:func:`~convtranspose._kernels.adjoints.line_end_zeros`; a finite filter only).
    ``planes``: read a channels-first ``grad``'s planes where they are instead of a
    channels-last copy (the ``blocked-planes`` algorithm; ``zeros`` must be none)."""
    return prepare_forward_adjoint(grad.shape[0], weights, axes, channels_last, dtype,
                                   derived, target, zeros, planes)(grad)


def prepare_forward_adjoint(batch: int, weights: np.ndarray, axes, channels_last: bool,
                            dtype, derived, target, zeros: tuple[int, int] = (0, 0),
                            planes: bool = False):
    """:func:`forward_adjoint` for ``batch`` items with everything but ``grad`` set up
    once: ``run(grad, out=None)`` returns the adjoint of ``grad``, in ``out`` (of the
    result's shape and dtype) where given: channels first and C-contiguous, the kernel
    stores into it.  The weights are packed now (kept in ``derived`` as well)."""
    dtype = np.dtype(dtype)
    groups, ci, co = weights.shape[:3]
    axes3 = three_axes(axes)
    if planes and (channels_last or any(zeros)):
        raise ValueError("only a channels-first grad without zeros at its line ends is "
                         "read in planes")
    outputs = tuple(a.input_size for a in axes3)
    lanes, vectors, chunk, pixels = blocked_shape(
        dtype.itemsize, ci, AxisPlan(outputs[2], 1, 1, 1, 0, outputs[2]), target.vector_bytes)
    width = lanes * vectors
    kernel3 = tuple(a.kernel_size for a in axes3)
    # A view: pass_weights copies it only to pack it, on a miss of ``derived``.
    packed = pass_weights(weights.swapaxes(1, 2), {} if derived is None else derived, dtype,
                          kernel3, (0, ci), width, lanes * chunk).reshape(-1)
    table, counts = _tap_table(axes3)
    table[2, :, 1] += zeros[0]
    sizes = np.array((batch, groups, co, width) + outputs
                     + tuple(a.output_size for a in axes3[:2])
                     + (axes3[2].output_size + sum(zeros),) + kernel3
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

    def run(grad: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        source = _source(grad, axes3, channels_last, dtype, target, zeros, planes)
        sums = np.empty(sums_shape, dtype)
        # Channels first, each item stores its own sums transposed while they are in
        # its core's cache: with a copy of the whole result after the kernel instead,
        # the stem's 64-channel 112x112 result took 1.83 ms against 1.60 on an AMD Zen 4
        # in a slow spell of the host, 1.66 against 1.62 in a fast one; other layers
        # 0.98-1.07x (``benchmarks/results/copy-split-zen4.json``, ``fused_store``,
        # ``third_run``).
        direct = not channels_last and out is not None and out.flags.c_contiguous
        first = no_first if channels_last else out if direct else np.empty(result_shape, dtype)
        parallel_kernel(kernel, (source.reshape(-1), packed, sums.reshape(-1),
                                 first.reshape(-1), sizes, table, counts),
                        items, target.threads)
        # (channels last, a copy only where the groups' channels were padded)
        result = sums[..., :ci].reshape(result_shape) if channels_last else first
        if out is None or direct:
            return result
        out[...] = result
        return out

    return run
