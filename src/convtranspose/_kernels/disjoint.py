"""``disjoint``: layers whose taps reach disjoint outputs, each output line written once
(numba; the kernel is :mod:`._numba.disjoint`).

Where a dilated kernel is no longer than its stride on every axis (``(K - 1) * d < s``:
every ``k == s`` upsampling layer, and ``k < s``), each output takes at most one tap per
axis: output ``y`` of an axis reads input ``x`` with tap ``t`` where ``y + offset = x *
s + t * d``, or nothing. Along a channels-first output line, the outputs then read the
input line repeated ``s`` times over, each with the tap of its place in the stride: per
input channel, one input vector (the line's inputs, each at every output it reaches)
times one weight vector (each lane's tap; a few patterns of lanes repeat along every
line). The kernel sums blocks of four output channels by a few line vectors that share
their weight vectors in vector registers over the input channels, into a tile of a row
of the first axis, and copies the tile out: every output plane is written once, in
order, the outputs no tap reaches as zeros. ``col2im`` and ``direct`` write such a layer
one stride phase at a time instead, every store ``s`` elements from the last, and zero
the output first: a grouped 3-D ``k4 s4`` layer of 8 input channels per group, whose
time is its 64 MB output, took 2.6x (``col2im-ncx``) to 7x (``direct-blocked``) as long
as here. With 16 or more input channels a group the multiply-adds decide, and this
kernel took 1.9-3.2x the others' time (``benchmarks/results/disjoint-zen4.json``):
measured planning decides.

A lane multiplies a weight only where it holds an input that tap reads, and zeros
elsewhere with zero weights: exact with non-finite operands.
"""

from __future__ import annotations

import numpy as np

from .._runtime.memo import derived_from
from .disjoint_plan import takes_layer

__all__ = ["prepare_disjoint"]


def _disjoint(data, weights, axes, dtype, channels_last, out, *, target):
    """Fill ``out`` with the disjoint kernel (float dtypes, up to 3-D; channels-last
    layers through channels-first copies).  Only disjoint layers come here: the
    registry's ``"disjoint taps"`` requirement resolves the others to ``direct``."""
    prepare_disjoint(data.shape[0], weights, axes, dtype, channels_last, target)(data, out)


def prepare_disjoint(batch, weights, axes, dtype, channels_last, target):
    """``compute(data, out)``: ``disjoint`` for this layer set up once
    (:class:`._numba.disjoint.DisjointLayer`), its weight vectors kept with the filter;
    None for a layer whose taps overlap."""
    if not takes_layer(axes):
        return None
    from ._numba.disjoint import DisjointLayer

    # One memo entry per filter and dtype: the weight vectors inside are kept by the
    # lanes' patterns they follow (:class:`._numba.disjoint.DisjointLayer`).
    derived = derived_from(weights, "disjoint", np.dtype(dtype).str)
    layer = DisjointLayer(batch, weights, tuple(axes), dtype, target, derived)
    if not channels_last:
        return layer
    rank = len(axes)
    first = (0, rank + 1, *range(1, rank + 1))  # channels-last to channels-first

    def compute_channels_last(data, out):
        result = np.empty(tuple(out.shape[i] for i in first), out.dtype)
        layer(np.transpose(data, first), result)
        np.copyto(out, np.moveaxis(result, 1, -1))

    return compute_channels_last
