"""How ``direct-blocked`` splits its channels: passes over the output channels (each
pass's weights per line in L2) and blocks of input channels (each block's weights in
L1), with the floors under both that keep its register blocks busy.

Pure integer rules, as :mod:`.schedules`: the kernel (:mod:`._numba.blocked`) and the
forward convolution's blocked kernel (:mod:`._numba.forward`) read them; the cache sizes
come as arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._plan.geometry import axis_phases
from .._plan.rules import AxisPlan

__all__ = ["BLOCKED_LEAST_CHANNELS", "BLOCKED_LEAST_PASS_VECTORS",
           "BLOCKED_LINE_WEIGHTS_L2_SHARE", "BLOCKED_PANEL_L1_SHARE", "blocked_channel_block",
           "blocked_channel_passes", "blocked_line_taps"]


#: ``direct-blocked`` splits a layer's output channels into passes (runs of whole vectors,
#: every line computed once per pass) when the weights one output line reads (every tap
#: it uses, all input channels, the line's channels) exceed this share of the L2 cache.
#: Consecutive lines read the same taps, so a pass's weights stay in L2 from one line to
#: the next instead of streaming from L3 for every line.  On an Intel Xeon (2 MiB of L2)
#: DCGAN 512->256 (4 MiB of weights per line) ran 1.7-2.4x faster in passes of 0.5-1 MiB
#: per line, and DCGAN 256->128 (1 MiB) fastest whole; a share of a quarter was best
#: on some layers and 1.3x slower on others (``benchmarks/results/direct-blocked-xeon.json``,
#: ``python benchmarks/blocked_passes.py``).
BLOCKED_LINE_WEIGHTS_L2_SHARE = 0.5

#: ... but each pass holds at least this many vectors of output channels: a pass of one
#: vector runs blocks of one vector x 8 outputs, eight broadcast inputs per weight row
#: loaded, at 48-62% of the FMA peak alone, where 2 x 8 runs at 92-98%
#: (``benchmarks/results/blocked-channel-blocks-xeon.json``, ``least_channels``).  On an
#: Intel Xeon, N1 256->256 14x14 k7 s1 channels first (1.6 MiB of weights a line for two
#: vectors, past the share) ran in 0.85-0.89x the time in 8 passes of 2 vectors and
#: blocks of 16 channels than in 16 passes of one and blocks of 7.
BLOCKED_LEAST_PASS_VECTORS = 2


def blocked_line_taps(axes3: Sequence[AxisPlan]) -> float:
    """The taps one output line of ``direct-blocked`` reads, over every phase of the last
    axis (the mean over the first two axes' phases)."""
    counts = [sum(len(c.shifts) * c.count for c in axis_phases(axis).classes)
              / max(1, axis.stride) for axis in axes3]
    return math.prod(counts) * axes3[-1].stride


#: ``direct-blocked`` sums a phase's input channels in blocks whose weights (its taps,
#: the block's channels, one chunk of output channels) take at most this share of the
#: L1 data cache, the rest holding the input rows: every block of outputs along a line
#: then reads them from L1, not all of them from L2 for every few outputs
#: (``benchmarks/results/blocked-channel-blocks-xeon.json``).
BLOCKED_PANEL_L1_SHARE = 0.5

#: ... but at least this many input channels (all, where fewer).  Layers of many taps
#: (stride 1, k5-k7) fit only 1-7 channels in the L1 share, and each channel block costs
#: outside the block's loop too: every output's sums stored and loaded again, the
#: blocks' places found again.  On an Intel Xeon, 16 channels a block ran N1 128->64
#: 28x56 k5 s1 channels first in 0.76-0.79x the time of blocks of 3, and 3-7 channel
#: layers of k3-k7 in 0.80-0.96x; a block of 2 x 8 outputs alone runs at 61% of the FMA
#: peak with one channel and 92-98% with 3-64
#: (``benchmarks/results/blocked-channel-blocks-xeon.json``, ``least_channels``).
BLOCKED_LEAST_CHANNELS = 16


def blocked_channel_block(ci: int, taps: int, chunk_width: int, itemsize: int,
                          l1_bytes: int) -> int:
    """How many input channels ``direct-blocked`` sums at a time: as many (up to ``ci``)
    as keep ``taps`` taps of ``chunk_width`` output channels within
    :data:`BLOCKED_PANEL_L1_SHARE` of ``l1_bytes`` (the share may be infinite), and at
    least :data:`BLOCKED_LEAST_CHANNELS`."""
    fitting = BLOCKED_PANEL_L1_SHARE * l1_bytes / (max(1, taps) * chunk_width * itemsize)
    return max(1, int(min(max(fitting, BLOCKED_LEAST_CHANNELS), ci)))


def blocked_channel_passes(ci: int, co: int, axes3: Sequence[AxisPlan], itemsize: int,
                           lanes: int, l2_bytes: int) -> int:
    """Into how many passes ``direct-blocked`` splits ``co`` output channels (one group):
    as few as keep each pass's weights per line within
    :data:`BLOCKED_LINE_WEIGHTS_L2_SHARE` of ``l2_bytes``, at most one per
    :data:`BLOCKED_LEAST_PASS_VECTORS` vectors."""
    vectors = -(-co // lanes)
    per_vector = blocked_line_taps(axes3) * ci * lanes * itemsize
    fitting = int(BLOCKED_LINE_WEIGHTS_L2_SHARE * l2_bytes // max(1.0, per_vector))
    return -(-vectors // max(BLOCKED_LEAST_PASS_VECTORS, fitting))
