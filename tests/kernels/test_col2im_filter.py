"""``col2im`` reads a C-contiguous filter of the sums' dtype as it is (channel-major
columns, no kept copy), and reorders any other one once (tap-major columns): both sum
to the oracle, in both internal layouts, and the first compares no filter bytes."""

from __future__ import annotations

import numpy as np
import pytest

from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import memo
from kernel_support import run_forced
from oracle import canonical_result

# (groups, input channels, output channels, sizes, kernel, stride, pad)
LAYERS = [
    (1, 6, 5, (4, 3), 4, 2, 1),
    (2, 3, 4, (7,), 3, 3, 0),
    (1, 4, 3, (2, 3, 2), 2, 2, 0),
]


def _operands(groups, ci, co, sizes, kernel, stride, pad, contiguous):
    axes = tuple(AxisPlan(x, kernel, stride, 1, pad, (x - 1) * stride + kernel - 2 * pad)
                 for x in sizes)
    rng = np.random.default_rng(ci * co + len(sizes))
    data = rng.integers(-4, 5, (2, groups * ci) + sizes).astype(np.float32)
    weights = rng.integers(-4, 5, (groups, ci, co) + (kernel,) * len(sizes)).astype(np.float32)
    if not contiguous:  # the same values, laid out channels last (a view, as XIO gives)
        weights = np.moveaxis(np.ascontiguousarray(np.moveaxis(weights, (1, 2), (-2, -1))),
                              (-2, -1), (1, 2))
        assert not weights.flags.c_contiguous
    return data, weights, axes


@pytest.mark.parametrize("contiguous", [True, False], ids=["as-is", "reordered"])
@pytest.mark.parametrize("algorithm", ["col2im-nxc", "col2im-ncx"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("layer", LAYERS, ids=["2d", "1d-groups", "3d"])
def test_col2im_sums_to_the_oracle_with_either_filter_layout(layer, channels_last, algorithm,
                                                            contiguous):
    data, weights, axes = _operands(*layer, contiguous)
    result = run_forced(data, weights, axes, np.float32, channels_last, algorithm)
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


def test_a_contiguous_filter_is_never_compared_with_a_kept_copy(monkeypatch):
    data, weights, axes = _operands(*LAYERS[0], contiguous=True)
    compared = []
    monkeypatch.setattr(memo, "same_bits", lambda *a: compared.append(1) or False)
    for algorithm in ("col2im-nxc", "col2im-ncx"):
        run_forced(data, weights, axes, np.float32, False, algorithm)
        run_forced(data, weights, axes, np.float32, False, algorithm)
    assert not compared
