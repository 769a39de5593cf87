"""Prepared calls whose numba kernels keep their code addresses between calls, given data
and results of alternating kinds (read-only or writeable, aligned to their dtype or
not, ``out`` given or not): every call gives the oracle's sums, and writes them into
``out`` where one is given."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle

RNG = np.random.default_rng(20261207)


def _values(shape):
    # Small integers: every sum is exact in float32, so results compare with ==.
    return RNG.integers(-3, 4, size=shape).astype(np.float32)


def _unaligned(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``array`` one byte off its dtype's alignment."""
    raw = np.empty(array.nbytes + 1, np.uint8)
    moved = raw[1:].view(array.dtype).reshape(array.shape)
    moved[...] = array
    assert not moved.flags.aligned
    return moved


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _kinds(data: np.ndarray):
    """The data in each kind, in an order that changes kind on every call."""
    return [data, _read_only(data), _unaligned(data), data.copy(),
            _read_only(_unaligned(data))]


def _outs(shape):
    """A result array per call: none, aligned and not."""
    return [None, np.full(shape, np.nan, np.float32),
            _unaligned(np.full(shape, np.nan, np.float32)), None, None]


# (algorithm, data shape, filter shape (G*Ci, Co, K...), groups, strides, pads): a
# depthwise layer (numba depthwise, and direct's row or plane kernels), a dense one.
LAYERS = [
    ("depthwise", (2, 16, 6, 7), (16, 1, 4, 4), 16, 2, 1),
    ("direct", (2, 16, 6, 7), (16, 1, 4, 4), 16, 2, 1),
    ("direct", (1, 5, 7, 6), (5, 3, 3, 3), 1, 2, 1),
    ("direct", (2, 6, 5, 9), (6, 4, 3, 3), 2, 1, 1),
]


@pytest.mark.parametrize("algorithm, data_shape, filter_shape, groups, stride, pad", LAYERS)
def test_transposed_layer_calls_alternating_operand_kinds(monkeypatch, algorithm, data_shape,
                                                          filter_shape, groups, stride, pad):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    ct.clear_caches()
    data, filter = _values(data_shape), _values(filter_shape)
    attributes = dict(group=groups, strides=[stride] * 2, pads=[pad] * 4)
    expected = oracle.onnx_conv_transpose(data, filter, **attributes)
    layer = ct.prepare(ct.onnx_conv_transpose, W=filter, **attributes)
    for given, out in zip(_kinds(data), _outs(expected.shape)):
        np.testing.assert_array_equal(layer(given, out=out), expected)
        if out is not None:
            np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(
            ct.onnx_conv_transpose(given, filter, **attributes), expected)


def _convolution_oracle(x, w, stride, pad):
    """Cross-correlation of NCHW ``x`` with OIHW ``w``: a sum over sliding windows."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, w.shape[2:], axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    return np.einsum("ncijkl,ockl->noij", windows, w.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("algorithm", ["blocked", "blocked-planes"])
def test_strided_convolution_calls_alternating_operand_kinds(monkeypatch, algorithm):
    monkeypatch.setenv("CONVTRANSPOSE_BACKWARD_ALGORITHM", algorithm)
    ct.clear_caches()
    data, filter = _values((2, 5, 9, 8)), _values((7, 5, 3, 3))
    expected = _convolution_oracle(data, filter, 2, 1)
    layer = ct.prepare(ct.convolution, filter=filter, strides=2, pads_begin=1, pads_end=1)
    for given, out in zip(_kinds(data), _outs(expected.shape)):
        np.testing.assert_array_equal(layer(given, out=out), expected)
        np.testing.assert_array_equal(
            ct.convolution(given, filter, strides=2, pads_begin=1, pads_end=1), expected)
