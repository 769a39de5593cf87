"""``direct-blocked``'s blocks across groups: grouped layers whose groups have a few
whole vectors of output channels run as one group of all of them side by side, each
vector multiplying its own group's inputs.  Integer operands, so every order of the
sums gives the oracle's value; AVX2 and AVX-512 vector widths on any machine (LLVM
splits vectors wider than the host's)."""

from __future__ import annotations

import numpy as np
import pytest

from convtranspose._execute.transposed import transposed_convolution
from convtranspose._kernels.blocked_groups import blocked_group_span, blocked_vector_bytes
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime.target import host, use_target
from kernel_support import run_forced
from oracle import canonical_result

pytest.importorskip("numba")


def _axes(sizes, kernel, stride, dilation=1, pad=0, extra=0):
    return tuple(AxisPlan(x, kernel, stride, dilation, pad,
                          (x - 1) * stride + (kernel - 1) * dilation + 1 - 2 * pad + extra)
                 for x in sizes)


# (vector bytes, dtype, batch, groups, Ci per group, Co per group, axes): one vector per
# group (AVX2 float32 and float64, AVX-512 float32) and two (AVX-512 float32), strides,
# output padding, crops, dilation, 1-D to 3-D, lines shorter than a block.
CASES = {
    "avx2 g4 8->8 s2 op1": (32, np.float32, 3, 4, 8, 8, _axes((7, 6), 3, 2, pad=1, extra=1)),
    "avx2 g3 5->8 1-D k4 s2": (32, np.float32, 2, 3, 5, 8, _axes((19,), 4, 2, pad=1)),
    "avx2 g2 3->8 3-D s1": (32, np.float32, 1, 2, 3, 8, _axes((3, 4, 5), 3, 1, pad=1)),
    "avx2 g6 2->8 dilated": (32, np.float32, 2, 6, 2, 8, _axes((6, 9), 3, 1, dilation=2)),
    "avx2 float64 g4 6->4": (32, np.float64, 2, 4, 6, 4, _axes((5, 8), 4, 2, pad=1)),
    "avx512 g4 8->16 s2": (64, np.float32, 2, 4, 8, 16, _axes((6, 11), 4, 2, pad=1)),
    "avx512 g2 7->32 s3": (64, np.float32, 2, 2, 7, 32, _axes((5, 5), 3, 3)),
    # Groups of one narrower vector on AVX-512: computed at 32 and 16 bytes.
    "avx512 g4 8->8 s2 op1": (64, np.float32, 3, 4, 8, 8, _axes((7, 6), 3, 2, pad=1, extra=1)),
    "avx512 g8 3->4 s1": (64, np.float32, 2, 8, 3, 4, _axes((5, 9), 3, 1, pad=1)),
    "avx512 float64 g4 5->4 1-D": (64, np.float64, 2, 4, 5, 4, _axes((21,), 4, 2, pad=1)),
}


def _case(name):
    vector_bytes, dtype, batch, groups, ci, co, axes = CASES[name]
    itemsize = np.dtype(dtype).itemsize
    # The premise: these layers' blocks span groups at the width they are computed at.
    narrow = blocked_vector_bytes(groups, co, itemsize, axes[-1], vector_bytes)
    assert blocked_group_span(groups, co, itemsize, axes[-1], narrow) > 0
    rng = np.random.default_rng(len(name))
    data = rng.integers(-4, 5, (batch, groups * ci) + tuple(a.input_size for a in axes))
    weights = rng.integers(-4, 5, (groups, ci, co) + tuple(a.kernel_size for a in axes))
    return vector_bytes, dtype, data.astype(dtype), weights.astype(dtype), axes


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("name", list(CASES))
def test_blocks_across_groups_sum_to_the_oracle(name, channels_last, threads):
    vector_bytes, dtype, data, weights, axes = _case(name)
    target = host().replace(vector_bytes=vector_bytes, threads=threads)
    with use_target(target):
        result = run_forced(data, weights, axes, dtype, channels_last, "direct-blocked")
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


@pytest.mark.parametrize("vector_bytes", [32, 64], ids=["avx2", "avx512"])
def test_a_groups_non_finite_inputs_reach_only_its_own_outputs(vector_bytes):
    # Each vector reads its own group's inputs: an infinity and a NaN in group 1's data
    # must leave the other groups' outputs finite and equal to the oracle's.
    co = vector_bytes // 4
    axes = _axes((6, 7), 3, 2, pad=1, extra=1)
    assert blocked_group_span(4, co, 4, axes[-1], vector_bytes) > 0
    rng = np.random.default_rng(3)
    data = rng.integers(-4, 5, (2, 4 * 3, 6, 7)).astype(np.float32)
    data[0, 4, 2, 3], data[1, 5, 0, 0] = np.inf, np.nan
    weights = rng.integers(-4, 5, (4, 3, co, 3, 3)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        expected = canonical_result(data, weights, axes)
    for channels_last in (False, True):
        source = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
        with use_target(host().replace(vector_bytes=vector_bytes)), \
                np.errstate(invalid="ignore"):
            result = transposed_convolution(source, weights, axes, dtype=np.dtype(np.float32),
                                            channels_last=channels_last,
                                            algorithm="direct-blocked")
        result = np.moveaxis(result, -1, 1) if channels_last else result
        np.testing.assert_array_equal(result, expected)
        others = np.delete(result, np.s_[co:2 * co], axis=1)
        assert np.isfinite(others).all()


def test_group_span_needs_whole_vectors_of_several_groups_per_block():
    line = AxisPlan(16, 3, 1, 1, 1, 16)
    assert blocked_group_span(4, 8, 4, line, 32) == 1  # AVX2: 4 groups of one vector
    assert blocked_group_span(2, 32, 4, line, 64) == 2  # AVX-512: two vectors a group
    assert blocked_group_span(1, 8, 4, line, 32) == 0  # one group
    assert blocked_group_span(4, 12, 4, line, 32) == 0  # Co not whole vectors
    assert blocked_group_span(4, 16, 4, line, 32) == 0  # a block is one group
    assert blocked_group_span(5, 8, 4, line, 32) == 0  # the last chunk would be padded


def test_groups_of_one_narrow_vector_are_computed_at_its_width():
    line = AxisPlan(16, 3, 1, 1, 1, 16)
    assert blocked_vector_bytes(4, 8, 4, line, 64) == 32  # 8 float32 channels a group
    assert blocked_vector_bytes(8, 4, 4, line, 64) == 16  # 4 float32 channels
    assert blocked_vector_bytes(4, 4, 8, line, 64) == 32  # 4 float64 channels
    assert blocked_vector_bytes(4, 4, 4, line, 32) == 16  # AVX2, 4 float32 channels
    assert blocked_vector_bytes(4, 8, 4, line, 32) == 32  # already that width
    assert blocked_vector_bytes(4, 12, 4, line, 64) == 64  # not one vector of a width
    assert blocked_vector_bytes(4, 16, 4, line, 64) == 64  # one whole vector
    assert blocked_vector_bytes(1, 8, 4, line, 64) == 64  # one group
    assert blocked_vector_bytes(5, 8, 4, line, 64) == 64  # no blocks across groups there
