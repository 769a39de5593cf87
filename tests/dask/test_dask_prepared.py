"""Tiles of one layer that repeat a problem run a prepared call after the first: the
tiled result stays bit for bit what the canonical path computes tile by tile (random
values, so only the same additions give the same bits), run after run and after the
filter is edited, and equals the slow oracle where sums are exact."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convtranspose as ct
import oracle

da = pytest.importorskip("dask.array")  # the test extra installs it (make test)
import convtranspose.dask as ctd  # noqa: E402  (after the skip: it needs Dask)
from convtranspose.dask import _graph  # noqa: E402

#: (array function, Dask function, data shape, data chunks, operands' shapes by name,
#: attributes): many tiles of a few problems each, channels first and last, 1-D to 3-D.
LAYERS = {
    "onnx 2-D bias": (ct.onnx_conv_transpose, ctd.onnx_conv_transpose, (3, 4, 24, 20),
                      (1, 4, 6, 5), dict(W=(4, 3, 3, 3), B=(3,)),
                      dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "onednn NXC bias groups": (ct.conv_transpose, ctd.conv_transpose, (2, 18, 16, 4),
                               (1, 6, 4, 4), dict(filter=(4, 4, 4, 4), bias=(8,)),
                               dict(strides=2, groups=2, pads_begin=1, pads_end=2)),
    "openvino 1-D dilated": (ct.convolution_backprop_data, ctd.convolution_backprop_data,
                             (2, 3, 40), (1, 3, 8), dict(filter=(3, 2, 3)),
                             dict(strides=3, dilations=2, pads_begin=2)),
    "torch 3-D bias": (ct.torch_conv_transpose, ctd.torch_conv_transpose, (1, 2, 8, 6, 6),
                       (1, 2, 4, 3, 3), dict(weight=(2, 2, 2, 2, 2), bias=(2,)),
                       dict(stride=2, padding=1, output_padding=1)),
}


def _operands(shapes: dict, dtype, rng) -> dict:
    return {name: rng.standard_normal(shape).astype(dtype) for name, shape in shapes.items()}


def _canonical(lazy, monkeypatch):
    """The result with every tile computed by the canonical path (no prepared call)."""
    with monkeypatch.context() as patch:
        patch.setattr(_graph, "preparable", lambda *dtypes: False)
        patch.setattr(_graph, "half_preparable", lambda *dtypes: False)
        return lazy.compute(scheduler="sync")


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=["float32", "float64", "float16", "bfloat16"])
def test_repeated_tile_problems_give_the_canonical_bits(name, dtype, monkeypatch):
    # Half-precision tiles run prepared calls that round their sums (plus the layer's
    # bias, which the call is prepared with).
    _, tiled, shape, chunks, shapes, attributes = LAYERS[name]
    rng = np.random.default_rng(11)
    data = rng.standard_normal(shape).astype(dtype)
    lazy = tiled(da.from_array(data, chunks=chunks), **_operands(shapes, dtype, rng),
                 **attributes)
    expected = _canonical(lazy, monkeypatch)
    _graph.tile_calls.clear()
    for scheduler in ("sync", "threads", "sync"):  # the later runs all prepared
        np.testing.assert_array_equal(lazy.compute(scheduler=scheduler).view(np.uint8),
                                      expected.view(np.uint8))
    calls = [call for call, _ in _graph.tile_calls.values() if call is not None]
    assert calls


def test_layers_of_two_filters_alternate_without_mixing(monkeypatch):
    # Two layers of one problem and one data array, run in turns: each keeps its tiles'
    # calls apart (and each call checks the filter it is given).
    _, tiled, shape, chunks, shapes, attributes = LAYERS["onednn NXC bias groups"]
    rng = np.random.default_rng(12)
    data = da.from_array(rng.standard_normal(shape).astype(np.float32), chunks=chunks)
    layers = [tiled(data, **_operands(shapes, np.float32, rng), **attributes)
              for _ in range(2)]
    expected = [_canonical(lazy, monkeypatch) for lazy in layers]
    assert not np.array_equal(*expected)
    for _ in range(2):
        for lazy, result in zip(layers, expected):
            np.testing.assert_array_equal(lazy.compute(scheduler="sync"), result)


def test_tiles_with_a_bias_equal_the_oracle():
    # Small integers (exact sums): the slow direct loop, bias included.
    rng = np.random.default_rng(13)
    data = rng.integers(-3, 4, (2, 4, 12, 10)).astype(np.float32)
    filter = rng.integers(-3, 4, (4, 3, 3, 3)).astype(np.float32)
    bias = rng.integers(-3, 4, (3,)).astype(np.float32)
    lazy = ctd.onnx_conv_transpose(da.from_array(data, chunks=(1, 4, 3, 5)), filter, bias,
                                   strides=[2, 2], pads=[1, 0, 0, 1])
    expected = oracle.onnx_conv_transpose(data, filter, bias, strides=[2, 2],
                                          pads=[1, 0, 0, 1])
    for _ in range(2):
        np.testing.assert_array_equal(lazy.compute(scheduler="sync"), expected)
