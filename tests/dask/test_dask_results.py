"""The tiled Dask result equals the single-machine NumPy result and the oracle, element
for element, on random layers of every dialect and layout (``dask_cases``)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from dask_cases import DIALECTS, random_layer

pytest.importorskip("dask.array")  # the test extra installs it (make test)

SEEDS = range(12)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_layers_equal_the_numpy_result(dialect, seed):
    dtype = (np.float32, np.float64, np.int32)[seed % 3]
    layer = random_layer(seed, dialect, dtype)
    expected = layer.numpy_result()
    np.testing.assert_array_equal(expected, layer.oracle_result())  # small integers: exact
    lazy = layer.dask_result()
    assert lazy.shape == expected.shape and lazy.dtype == expected.dtype
    scheduler = "threads" if seed % 2 else "sync"
    result = lazy.compute(scheduler=scheduler)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected, err_msg=f"{layer}")


def test_the_tiles_are_real_tiles():
    # The random layers above really are cut into many tiles with halos across chunks
    # (otherwise they would test a single-machine call).
    tiled = 0
    for seed in SEEDS:
        for dialect in DIALECTS:
            lazy = random_layer(seed, dialect).dask_result()
            tiled += lazy.npartitions > 2
    assert tiled >= len(SEEDS) * len(DIALECTS) * 3 // 4


@pytest.mark.parametrize("seed", range(4))
def test_float32_is_bit_exact_where_the_same_kernel_path_runs(seed, monkeypatch):
    # With random (non-integer) float32 values, the tiles equal the whole layer bit for
    # bit when both run the same algorithm and it sums each output in an order that does
    # not depend on the layer's extent: gemm-ncx adds one product per tap, tap by tap.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "gemm-ncx")
    layer = random_layer(100 + seed, ("conv_transpose", "onnx_conv_transpose")[seed % 2])
    rng = np.random.default_rng(seed)
    layer.operands = tuple(rng.standard_normal(a.shape).astype(np.float32)
                           for a in layer.operands)
    expected = layer.numpy_result()
    result = layer.dask_result().compute(scheduler="sync")
    np.testing.assert_array_equal(result.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("seed", range(4))
def test_float32_within_rounding_whatever_each_tile_runs(seed):
    # Without forcing, a tile may get another algorithm than the whole layer (chosen for
    # its own shape): equal within the documented accumulation error of either.
    import oracle

    assert "CONVTRANSPOSE_ALGORITHM" not in os.environ
    layer = random_layer(200 + seed, "conv_transpose")
    rng = np.random.default_rng(seed)
    layer.operands = tuple(rng.standard_normal(a.shape).astype(np.float32)
                           for a in layer.operands)
    case = oracle.onednn_conv_transpose_case(*layer.operands, **layer.attributes)
    oracle.assert_matches(layer.dask_result().compute(), case)
