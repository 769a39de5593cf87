"""Which grouped layers ``direct-blocked`` takes with their groups side by side (blocks
across groups, :mod:`._numba.block_sources`): a pure rule of the layer's shape and the
vector width, read by the kernel (:mod:`._numba.blocked`), its cost estimate and its
memory bound alike."""

from __future__ import annotations

from .._plan.rules import AxisPlan
from .schedules import blocked_shape

__all__ = ["blocked_group_span", "blocked_vector_bytes"]


def blocked_group_span(groups: int, co: int, itemsize: int, last_axis: AxisPlan,
                       vector_bytes: int) -> int:
    """Vectors per group of ``direct-blocked``'s blocks across groups, or 0 for blocks
    of one group.

    A grouped layer whose groups each have a few whole vectors of output channels
    (``Co`` a multiple of the lanes) takes them side by side, as one layer of ``G *
    Co`` output channels whose vectors each multiply their own group's inputs: a block
    holds several groups' vectors, and a line all of them, where blocks of one group
    held one vector each (a grouped layer of 8 channels per group took twice the time
    of an ungrouped one of the same multiply-adds on an AMD Zen 3,
    ``benchmarks/results/direct-blocked-zen3.json``, ``blocks_across_groups``).  Only
    where a block (:func:`blocked_shape` of ``G * Co`` channels) spans whole groups and
    more than one, and no vector is padding (a padded vector's group would read past
    the data)."""
    lanes = max(1, vector_bytes // itemsize)
    if groups < 2 or co % lanes:
        return 0
    span = co // lanes
    _, vectors, chunk, _ = blocked_shape(itemsize, groups * co, last_axis, vector_bytes)
    if chunk % span or chunk == span or vectors != groups * span:
        return 0
    return span


def blocked_vector_bytes(groups: int, co: int, itemsize: int, last_axis: AxisPlan,
                         vector_bytes: int) -> int:
    """The vector width ``direct-blocked`` computes a layer at: ``vector_bytes``, or, for
    a grouped layer whose groups each have exactly a 16- or 32-byte vector of output
    channels, narrower than ``vector_bytes``, that width, where its blocks go across
    groups (:func:`blocked_group_span`).

    At the full width such a group's one vector is half or three quarters padding,
    and its blocks hold one group: on an Intel Xeon, layers of 8 float32 channels per
    group took 0.29-0.50x the time at 32 bytes, and of 4 channels 0.50x at 16 bytes.
    Groups of other counts (12, 20, 24 or 40 float32 channels) took 0.93-1.37x the
    full width's time at 32 bytes, so they keep the full width
    (``benchmarks/results/blocked-narrow-groups-xeon.json``, ``benchmarks/narrow_groups.py``)."""
    narrow = co * itemsize
    if (groups > 1 and narrow in (16, 32) and narrow < vector_bytes
            and blocked_group_span(groups, co, itemsize, last_axis, narrow)):
        return narrow
    return vector_bytes
