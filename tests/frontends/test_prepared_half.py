"""Prepared layers of float16 and bfloat16: their repeated calls run the rounding kernels
set up once (``DirectCall``), with the layer's bias added before the one rounding, for
every kernel the general path rounds in (``direct``'s plane kernel, channels first and
last, its row kernel and line segments, and ``direct-blocked``), and the float32
prepared call on widened data (``WidenedCall``) for the algorithms that do not round;
every call gives the oracle's bits (exact sums rounded once).  The array functions keep
such calls too, one without a bias and one with the bias they were called with."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._frontends import specs

HALF = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]

# (name, data shape, bound arguments: shapes for the arrays) of layers whose sums are
# exact in float32 but not in float16 or bfloat16, one per kernel of ``direct``.
LAYERS = [
    ("planes", ct.onnx_conv_transpose, (2, 16, 5, 6),
     dict(W=(16, 4, 4, 4), B=(8,), group=2, strides=[2, 2], pads=[1, 1, 1, 1])),
    ("rows", ct.onnx_conv_transpose, (1, 8, 4, 40),
     dict(W=(8, 8, 3, 3), B=(8,), strides=[1, 2], pads=[1, 1, 1, 1])),
    ("line segments", ct.onnx_conv_transpose, (1, 4, 14000),
     dict(W=(4, 3, 4), B=(3,), strides=[2], pads=[1, 1])),
    ("channels last", ct.conv_transpose, (2, 5, 6, 3),
     dict(filter=(3, 3, 3, 4), bias=(4,), strides=2, pads_begin=1, pads_end=1)),
]


def _oracle(function, data, bound):
    if function is ct.onnx_conv_transpose:
        return oracle.onnx_conv_transpose(data, **bound)
    return oracle.onednn_conv_transpose(data, **bound)


def _bits(array):
    return np.ascontiguousarray(array).view(np.uint16)


def _bound(rng, arguments, dtype):
    # Integers: exact float32 sums up to about 2**17, which float16 and bfloat16 round
    # (float16 overflows to infinity above 65504, as astype does).
    return {key: (rng.integers(-9, 10, value) * (64 if key in ("B", "bias") else 1)
                  ).astype(dtype) if isinstance(value, tuple) else value
            for key, value in arguments.items()}


def _kind(layer) -> str:
    return type(next(iter(layer._bindings.values())).fast[0]).__name__


def _into_out(layer, data, expected) -> None:
    """A call into ``out`` (NaN before) writes the expected bits into it."""
    out = np.full(expected.shape, np.nan, expected.dtype)
    assert layer(data, out=out) is out
    np.testing.assert_array_equal(_bits(out), _bits(expected))


def _general_calls(monkeypatch) -> list:
    """The calls that go through the array functions' general path from now on."""
    calls: list = []
    general = specs.transposed_convolution

    def counted(*arguments, **named):
        calls.append(arguments[0].shape)
        return general(*arguments, **named)

    monkeypatch.setattr(specs, "transposed_convolution", counted)
    return calls


@pytest.mark.parametrize("algorithm", ["direct", "direct-blocked"])
@pytest.mark.parametrize("dtype", HALF, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name, function, data_shape, arguments", LAYERS,
                         ids=[layer[0] for layer in LAYERS])
def test_half_precision_prepared_layers_round_once_with_their_bias(
        monkeypatch, algorithm, dtype, name, function, data_shape, arguments):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    rng = np.random.default_rng(len(name))
    bound = _bound(rng, arguments, dtype)
    layer = ct.prepare(function, **bound)
    general = _general_calls(monkeypatch)
    for call in range(3):
        data = (rng.integers(-9, 10, data_shape) * 8).astype(dtype)
        expected = _oracle(function, data, bound)
        got = layer(data if call != 2 else np.asfortranarray(data))  # any memory layout
        assert got.dtype == dtype
        np.testing.assert_array_equal(_bits(got), _bits(expected))
        if call == 0:
            assert np.abs(expected.astype(np.float32)).max() > 512  # sums that round
    _into_out(layer, data, expected)
    assert _kind(layer) == "DirectCall" and len(general) == 1  # the later calls ran it


# (algorithm, function, data shape, bound arguments) of layers whose algorithm does not
# round: ``direct``'s per-position kernel (channels last, many groups of few channels)
# among them.
WIDENED = [
    ("dense", ct.onnx_conv_transpose, (1, 2, 5, 5),
     dict(W=(2, 3, 3, 3), B=(3,), strides=[2, 2], pads=[1, 1, 1, 1])),
    ("col2im-ncx", ct.onnx_conv_transpose, (2, 8, 5, 6),
     dict(W=(8, 4, 3, 3), B=(4,), strides=[2, 2], pads=[1, 1, 1, 1])),
    ("col2im-nxc", ct.conv_transpose, (2, 5, 6, 8),
     dict(filter=(3, 3, 8, 4), bias=(4,), strides=2, pads_begin=1, pads_end=0)),
    ("direct", ct.conv_transpose, (2, 5, 6, 16),
     dict(filter=(4, 4, 16, 1), bias=(16,), groups=16, strides=2, pads_begin=1,
          pads_end=1)),
]


@pytest.mark.parametrize("dtype", HALF, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("algorithm, function, data_shape, arguments", WIDENED,
                         ids=[layer[0] for layer in WIDENED])
def test_half_precision_prepared_layers_widen_for_algorithms_that_do_not_round(
        monkeypatch, dtype, algorithm, function, data_shape, arguments):
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    rng = np.random.default_rng(len(algorithm))
    bound = _bound(rng, arguments, dtype)
    layer = ct.prepare(function, **bound)
    general = _general_calls(monkeypatch)
    for call in range(4):
        data = (rng.integers(-9, 10, data_shape) * 8).astype(dtype)
        if call == 2:  # an infinity: the float32 call declines or sums it exactly
            data.reshape(-1)[5] = np.inf
        expected = _oracle(function, data, bound)
        got = layer(data)
        assert got.dtype == dtype
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))
    _into_out(layer, data, expected)
    assert np.abs(expected.astype(np.float32)).max() > 512  # sums that round
    # The later calls ran it, but for dense's decline of the infinity.
    assert _kind(layer) == "WidenedCall" and len(general) == (2 if algorithm == "dense" else 1)


@pytest.mark.skipif(not ct.host_target().bfloat16_pairs, reason="bfloat16 pairs need AVX512_BF16")
def test_bfloat16_prepared_layer_decides_pairs_by_the_data_of_each_call(monkeypatch):
    # The row kernel multiplies bfloat16 pairs (vdpbf16ps, which reads subnormal operands
    # as zero) only where their sums stay exact; subnormal data runs the plane kernel in
    # the same prepared call.  Each call gives the oracle's bits.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct")
    rng = np.random.default_rng(3)
    dtype = np.dtype(ml_dtypes.bfloat16)
    w = rng.integers(-9, 10, (8, 8, 3, 3)).astype(dtype)
    attributes = dict(strides=[1, 2], pads=[1, 1, 1, 1])
    layer = ct.prepare(ct.onnx_conv_transpose, W=w, **attributes)
    general = _general_calls(monkeypatch)
    for scale in (1.0, 2.0 ** -130, 1.0):  # 9 * 2**-130: subnormal, exact in bfloat16
        data = (rng.integers(-9, 10, (1, 8, 4, 40)) * scale).astype(dtype)
        expected = oracle.onnx_conv_transpose(data, w, **attributes)
        assert np.count_nonzero(expected.astype(np.float32)) > expected.size // 2
        np.testing.assert_array_equal(_bits(layer(data)), _bits(expected))
    assert _kind(layer) == "DirectCall" and len(general) == 1


@pytest.mark.parametrize("algorithm", ["direct", "col2im-ncx"])
@pytest.mark.parametrize("dtype", HALF, ids=["float16", "bfloat16"])
def test_half_precision_array_functions_run_kept_calls_with_and_without_a_bias(
        monkeypatch, dtype, algorithm):
    # Repeated calls run the kept prepared call, which rounds its sums (plus the bias
    # it was prepared with: ``direct``'s rounding kernels take it in, ``col2im-ncx``'s
    # widened call adds it); a filter or a bias edited in place is not served by it.
    # Every call gives the oracle's bits.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", algorithm)
    rng = np.random.default_rng(9)
    w = rng.integers(-9, 10, (16, 4, 4, 4)).astype(dtype)
    b = (rng.integers(-9, 10, 8) * 64).astype(dtype)
    attributes = dict(group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    general = _general_calls(monkeypatch)

    def check(*operands):
        np.testing.assert_array_equal(
            _bits(ct.onnx_conv_transpose(data, *operands, **attributes)),
            _bits(oracle.onnx_conv_transpose(data, *operands, **attributes)))

    for call in range(4):
        if call == 2:
            w[0] += 1  # edited in place: the kept call must not serve it
        data = (rng.integers(-9, 10, (2, 16, 5, 6)) * 8).astype(dtype)
        check(w)
    assert len(general) == 2  # the first call and the one after the edit
    for call in range(5):
        if call == 2:
            b[3] += 64  # edited in place: prepared again with the new bits
        check(w, b if call != 4 else b.copy())  # another object of the same bits: kept
    assert len(general) == 4
    check(w)  # the bias-free call is still kept beside the biased one
    assert len(general) == 4
