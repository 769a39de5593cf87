"""The integer sums with their correction left to the requantization
(:meth:`convtranspose._kernels.int8.BlockedSums.sums`) and the pass that applies it
(:func:`convtranspose._kernels.requantize.prepare_corrected`): the sums of ``data -
offset`` rebuilt from ``(acc, factor, share)`` against the integer oracle, and the
requantized result against ONNX's float32 steps in NumPy on the oracle's sums."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from convtranspose import host_target  # noqa: E402
from convtranspose._kernels.int8 import prepare_blocked_sums  # noqa: E402
from convtranspose._kernels.requantize import prepare_corrected  # noqa: E402
from convtranspose._runtime.machine import has_vnni, integer_vector_bytes  # noqa: E402
from kernel_support import random_case  # noqa: E402
from oracle import canonical_result  # noqa: E402

#: The kinds of word this host runs: VNNI's bytes, pmaddwd's int16 halves (any x86).
KINDS = (["bytes"] if has_vnni() else []) + (["halves"] if integer_vector_bytes() else [])

needs_words = pytest.mark.skipif(not KINDS, reason="no integer word products on this CPU")


def _channels_last(array):
    return np.moveaxis(array, 1, -1)


def _case(seed, dtype):
    """A random 1-3-D layer with int8 weights and ``dtype`` data, and an offset (a zero
    point) of that dtype."""
    rng = np.random.default_rng(seed)
    data, weights, axes = random_case(rng, 1 + seed % 3)
    info = np.iinfo(dtype)
    data = rng.integers(info.min, info.max + 1, data.shape).astype(dtype)
    weights = rng.integers(-128, 128, weights.shape).astype(np.int8)
    return data, weights, axes, int(rng.integers(info.min, info.max + 1))


@needs_words
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("seed", range(6))
def test_sums_and_their_correction_equal_the_oracle(seed, dtype, kind):
    data, weights, axes, offset = _case(seed, dtype)
    kept = data.copy()
    expected = _channels_last(canonical_result(data.astype(np.int64) - offset, weights, axes))
    for channels_last in (False, True):
        source = np.ascontiguousarray(_channels_last(data)) if channels_last else data
        sums = prepare_blocked_sums(kind, data.shape[0], weights, axes, channels_last,
                                    host_target())
        acc, factor, share = sums.sums(source, offset)
        assert acc.dtype == np.int32 and (share is None) == (factor == 0)
        total = acc.astype(np.int64)
        if share is not None:
            total -= factor * share.astype(np.int64)
        np.testing.assert_array_equal(total, expected)
    np.testing.assert_array_equal(data, kept)  # the data are read, never shifted in place


@needs_words
@pytest.mark.parametrize("kind", KINDS)
def test_uint8_data_without_offset_need_no_correction(kind):
    data, weights, axes, _ = _case(3, np.uint8)
    sums = prepare_blocked_sums(kind, data.shape[0], weights, axes, False, host_target())
    acc, factor, share = sums.sums(data)
    assert factor == 0 and share is None
    np.testing.assert_array_equal(
        acc, _channels_last(canonical_result(data.astype(np.int64), weights, axes)))


def _onnx_steps(total, multiplier, y_scale, y_zero_point):
    """QuantizeLinear of ``float32(total) * multiplier``, as ONNX's reference runs it
    in NumPy: float32 steps, half to even, the zero point, saturation."""
    info = np.iinfo(y_zero_point.dtype)
    value = total.astype(np.float32) * multiplier / y_scale
    value = np.rint(value) + np.float32(y_zero_point)
    return np.clip(value, info.min, info.max).astype(y_zero_point.dtype)


@needs_words
@pytest.mark.parametrize("seed", range(6))
def test_the_corrected_requantization_equals_numpys_steps(seed):
    """Each sum minus its share plus the bias, requantized in one pass, against the
    oracle's sums of the centred data through NumPy's float32 steps; ties included
    (power-of-two scales on even seeds)."""
    data, weights, axes, offset = _case(seed, np.uint8)
    rng = np.random.default_rng(seed)
    co = weights.shape[0] * weights.shape[2]
    bias = rng.integers(-5000, 5000, co).astype(np.int32) if seed % 3 else None
    multiplier = (np.float32(2.0 ** -int(rng.integers(0, 9))) if seed % 2 == 0
                  else rng.uniform(1e-3, 1, co).astype(np.float32))
    multiplier = np.broadcast_to(np.float32(multiplier), (co,))
    y_scale = np.float32(1.0 if seed % 2 == 0 else 0.37)
    y_zero_point = np.uint8(rng.integers(0, 256)) if seed % 2 else np.int8(-3)
    total = _channels_last(canonical_result(data.astype(np.int64) - offset, weights, axes))
    if bias is not None:
        total = total + bias.astype(np.int64)
    expected = _onnx_steps(total, multiplier, y_scale, y_zero_point)
    sums = prepare_blocked_sums(KINDS[0], data.shape[0], weights, axes, False, host_target())
    apply = prepare_corrected(multiplier, np.asarray(y_scale), np.asarray(y_zero_point), bias,
                              2)
    result = apply(*sums.sums(data, offset))
    assert result.dtype == y_zero_point.dtype
    np.testing.assert_array_equal(result, expected)


@needs_words
@pytest.mark.parametrize("seed", range(4))
def test_sums_requantized_as_they_are_made_equal_numpys_steps(seed):
    """``BlockedSums.requantized``, whose pass sums in int32 where the data's range and
    the bias keep every sum in it: an ordinary bias, and one at int32's limits whose
    exact sums leave int32 on some outputs, against the oracle's sums through NumPy's
    float32 steps, in both layouts; each set-up called again on other data (the sums'
    array it keeps between calls holds nothing of the last)."""
    data, weights, axes, offset = _case(seed, np.uint8)
    rng = np.random.default_rng(seed)
    co = weights.shape[0] * weights.shape[2]
    multiplier = np.broadcast_to(rng.uniform(1e-3, 1, co).astype(np.float32), (co,))
    y_scale, y_zero_point = np.asarray(np.float32(0.37)), np.asarray(np.uint8(100))
    others = 255 - data
    exact = [_channels_last(canonical_result(d.astype(np.int64) - offset, weights, axes))
             for d in (data, others)]
    limits = np.where(np.arange(co) % 2, 2 ** 31 - 1, 1 - 2 ** 31).astype(np.int32)
    for bias in (rng.integers(-5000, 5000, co).astype(np.int32), limits):
        apply = prepare_corrected(multiplier, y_scale, y_zero_point, bias, 2)
        for channels_last in (False, True):
            sums = prepare_blocked_sums(KINDS[0], data.shape[0], weights, axes,
                                        channels_last, host_target())
            for values, sums_of in zip((data, others, data), exact + exact[:1]):
                source = (np.ascontiguousarray(_channels_last(values)) if channels_last
                          else values)
                np.testing.assert_array_equal(
                    sums.requantized(source, offset, apply),
                    _onnx_steps(sums_of + bias, multiplier, y_scale, y_zero_point))


def _rows_requantizations(rng, co: int) -> dict:
    """Each dialect's requantization of ``co`` channels-last output channels, by name,
    with a bias and per-channel constants."""
    from convtranspose._kernels.requantize import (
        fixed_point_requantization,
        onednn_requantization,
        torch_requantization,
    )

    bias = rng.integers(-5000, 5000, co).astype(np.int32)
    scales = rng.uniform(1e-4, 1e-3, co).astype(np.float32)
    offsets = rng.normal(0, 50, co).astype(np.float32)
    found = {"qlinear": prepare_corrected(
        np.broadcast_to(scales, (co,)), np.asarray(np.float32(0.37)),
        np.asarray(np.uint8(100)), bias, 2)}
    found["tflite"] = fixed_point_requantization(
        rng.integers(1 << 30, (1 << 31) - 1, co), rng.integers(-12, -6, co), -3, (-128, 127),
        np.dtype(np.int8), bias, co, 2)
    for engine in range(3):
        found[f"torch engine {engine}"] = torch_requantization(
            engine, scales, offsets, bias.astype(np.int64), np.float32(1.25), 128, 2)
    found["onednn"] = onednn_requantization(
        (np.float32(0.02), scales * 50, offsets, np.float32(0.3), np.float32(10)), False,
        (np.float32(0), np.float32(255)), np.dtype(np.uint8), co, 2)
    return found


@needs_words
@pytest.mark.parametrize("vector_bytes", [32, 64])
def test_lines_requantized_by_the_threads_that_sum_them_equal_a_whole_pass(monkeypatch,
                                                                           vector_bytes):
    """Each dialect's rows kernel run by ``direct-blocked``'s threads on the output
    lines each has just summed, in one compiled loop with the sums (two threads, whole
    lines of one pass), against the same requantization's whole pass over the sums
    afterwards: the same bytes, every line requantized once; AVX2's and AVX-512's
    vectors."""
    if vector_bytes > integer_vector_bytes():
        pytest.skip(f"this CPU has no {vector_bytes}-byte integer vectors")
    from convtranspose._kernels._numba import blocked
    from convtranspose._kernels._numba.lines import fused_lines_kernel
    from convtranspose._plan.rules import AxisPlan

    fused = []

    def counted(kernel, arity, rows, rows_arity):
        fused.append(rows)
        return fused_lines_kernel(kernel, arity, rows, rows_arity)

    monkeypatch.setattr(blocked, "fused_lines_kernel", counted)
    rng = np.random.default_rng(41)
    ci, co = 64, 16  # enough work for two threads, one pass of channels
    # Three axes of unequal sizes: a line's place depends on the first two.
    axes = (AxisPlan(6, 3, 2, 1, 1, 12), AxisPlan(10, 3, 2, 1, 1, 19),
            AxisPlan(12, 3, 2, 1, 1, 24))
    weights = rng.integers(-128, 128, (1, ci, co, 3, 3, 3)).astype(np.int8)
    data = rng.integers(0, 256, (2, ci, 6, 10, 12)).astype(np.uint8)
    target = host_target().replace(threads=2, vector_bytes=vector_bytes)
    requantizations = _rows_requantizations(rng, co)
    for name, requantization in requantizations.items():
        sums = prepare_blocked_sums(KINDS[0], 2, weights, axes, False, target)
        acc, factor, share = sums.sums(data, 3)
        whole = requantization(acc.copy(), factor, share)
        lines = sums.requantized(data, 3, requantization)
        np.testing.assert_array_equal(lines, whole, err_msg=name)
    assert len(fused) == len(requantizations)  # each through the fused loop
