"""The adjoint kernels against loops written from their definitions (tests/oracle.py).

Every algorithm of :mod:`convtranspose._kernels.adjoints` is run on random canonical
problems (ranks 1-3, groups, strides larger than the kernel, dilations, negative
offsets, outputs shorter and longer than the full result) with small integers held
in float64 (every sum exact, so equality is asserted) and in int64.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
from convtranspose._execute import adjoints as execute_adjoints
from convtranspose._execute.adjoints import adjoint_candidates
from convtranspose._kernels import adjoints as backward
from convtranspose._plan.rules import AxisPlan


@st.composite
def canonical_problems(draw):
    rank = draw(st.integers(1, 3))
    largest = {1: 7, 2: 4, 3: 3}[rank]
    axes = []
    for _ in range(rank):
        x, k = draw(st.integers(1, largest)), draw(st.integers(1, 3))
        s, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
        full = (x - 1) * s + (k - 1) * d + 1
        offset = draw(st.integers(-3, full + 1))
        size = draw(st.integers(1, full + 4))
        axes.append(AxisPlan(x, k, s, d, offset, size))
    depthwise = draw(st.booleans())
    ci, co = (1, 1) if depthwise else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return dict(axes=tuple(axes), groups=draw(st.integers(1, 3)), ci=ci, co=co,
                batch=draw(st.integers(1, 3)), seed=draw(st.integers(0, 2**32 - 1)))


def _operands(p, dtype):
    rng = np.random.default_rng(p["seed"])
    axes, g = p["axes"], p["groups"]
    data = rng.integers(-5, 6, (p["batch"], g * p["ci"]) + tuple(a.input_size for a in axes))
    grad = rng.integers(-5, 6, (p["batch"], g * p["co"]) + tuple(a.output_size for a in axes))
    weights = rng.integers(-5, 6, (g, p["ci"], p["co"]) + tuple(a.kernel_size for a in axes))
    return data.astype(dtype), grad.astype(dtype), weights.astype(dtype)


def _geometry(axes):
    return ([a.stride for a in axes], [a.dilation for a in axes], [a.offset for a in axes],
            [a.input_size for a in axes], [a.kernel_size for a in axes])


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("algorithm", backward.ALGORITHMS)
def test_data_adjoint_matches_the_forward_convolution_loop(algorithm, dtype, examples):
    @settings(max_examples=examples)
    @given(canonical_problems())
    def check(p):
        if algorithm == "depthwise" and (p["ci"], p["co"]) != (1, 1):
            return
        if algorithm.startswith("blocked") and not backward.blocked_applies(
                "data", (1, 1, 1), dtype, len(p["axes"])):
            return  # int64, or no numba: blocked never runs (adjoint_candidates)
        data, grad, weights = _operands(p, dtype)
        strides, dilations, offsets, sizes, _ = _geometry(p["axes"])
        expected = oracle.forward_convolution(grad.astype(np.float64), weights, strides,
                                              dilations, offsets, sizes)
        # blocked reads zeros at a line's ends where told the weights are finite
        actual = backward.data_adjoint(grad, weights, p["axes"], np.dtype(dtype), algorithm,
                                       finite_weights=bool(p["seed"] % 2))
        assert actual.dtype == dtype
        np.testing.assert_array_equal(actual, expected)

    check()


@pytest.mark.parametrize("channels_last", [False, True], ids=["ncx", "nxc"])
@pytest.mark.parametrize("algorithm", backward.ALGORITHMS)
def test_prepared_data_adjoint_follows_new_grads_and_weights_edited_in_place(
        monkeypatch, algorithm, channels_last, examples):
    """The data adjoint's prepared call (kept after a layer's first call, float32 and
    float64) gives the definition's sums for new grads, and for the very weights array
    of the first call edited in place."""
    monkeypatch.setenv("CONVTRANSPOSE_BACKWARD_ALGORITHM", algorithm)

    @settings(max_examples=examples)
    @given(canonical_problems(), st.sampled_from([np.float32, np.float64]))
    def check(p, dtype):
        if all(axis.stride == 1 for axis in p["axes"]):
            return  # a transposed convolution's prepared call (test_convolution.py)
        _, grad, weights = _operands(p, dtype)
        strides, dilations, offsets, sizes, _ = _geometry(p["axes"])
        rng = np.random.default_rng(p["seed"] + 1)
        for edit in (False, False, True):
            if edit:
                weights.flat[rng.integers(weights.size)] += 3
            grad = rng.integers(-5, 6, grad.shape).astype(dtype)
            expected = oracle.forward_convolution(grad.astype(np.float64), weights, strides,
                                                  dilations, offsets, sizes)
            given_grad = np.ascontiguousarray(np.moveaxis(grad, 1, -1)) if channels_last else grad
            actual = execute_adjoints.data_adjoint(given_grad, weights, p["axes"],
                                                   channels_last=channels_last,
                                                   dtype=np.dtype(dtype))
            np.testing.assert_array_equal(
                np.moveaxis(actual, -1, 1) if channels_last else actual, expected)

    check()


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("algorithm", [name for name in backward.ALGORITHMS
                                       if name != "blocked-planes"])  # data adjoints only
def test_filter_adjoint_matches_the_definition(algorithm, dtype, examples):
    @settings(max_examples=examples)
    @given(canonical_problems())
    def check(p):
        if algorithm == "depthwise" and (p["ci"], p["co"]) != (1, 1):
            return
        shape = (p["groups"], p["ci"], p["co"])
        if algorithm == "blocked" and not backward.blocked_applies("filter", shape, dtype,
                                                                   len(p["axes"])):
            p = dict(p, co=16)  # whole vectors of float64 on any machine
            if not backward.blocked_applies("filter", (1, 1, 16), dtype, len(p["axes"])):
                return  # int64, or no numba: blocked never runs (adjoint_candidates)
        data, grad, _ = _operands(p, dtype)
        strides, dilations, offsets, _, kernel = _geometry(p["axes"])
        expected = oracle.filter_gradient(data, grad, p["groups"], kernel, strides, dilations,
                                          offsets)
        actual = backward.filter_adjoint(data, grad, p["axes"], p["groups"], np.dtype(dtype),
                                         algorithm)
        np.testing.assert_array_equal(actual, expected)

    check()


def test_blocked_planes_takes_no_filter_adjoint():
    axes = (AxisPlan(5, 3, 2, 1, 1, 9),)
    p = dict(axes=axes, groups=1, ci=2, co=2, batch=1, seed=3)
    data, grad, _ = _operands(p, np.float64)
    with pytest.raises(ValueError, match="data adjoints only"):
        backward.filter_adjoint(data, grad, axes, 1, np.dtype(np.float64), "blocked-planes")
    assert "blocked-planes" not in adjoint_candidates("filter", 1, (1, 2, 2, 3), axes,
                                                      np.float64)


def test_im2col_batch_slices_give_the_same_sums(monkeypatch):
    """A scratch budget smaller than one batch item cuts the batch into single items."""
    axes = (AxisPlan(5, 3, 2, 1, 1, 9), AxisPlan(4, 2, 1, 2, 0, 6))
    p = dict(axes=axes, groups=2, ci=3, co=2, batch=5, seed=7)
    data, grad, weights = _operands(p, np.float64)
    whole = backward.data_adjoint(grad, weights, axes, np.dtype(np.float64), "im2col")
    filters = backward.filter_adjoint(data, grad, axes, 2, np.dtype(np.float64), "im2col")
    monkeypatch.setattr(backward, "IM2COL_SCRATCH_BYTES", 1)
    np.testing.assert_array_equal(
        backward.data_adjoint(grad, weights, axes, np.dtype(np.float64), "im2col"), whole)
    np.testing.assert_array_equal(
        backward.filter_adjoint(data, grad, axes, 2, np.dtype(np.float64), "im2col"), filters)


def test_huge_stride_reads_only_the_taps_inside():
    """A stride of 10**12 with a matching offset: no padded copy of that length is made."""
    stride = 10**12
    axes = (AxisPlan(2, 2, stride, 1, stride - 1, 3),)
    grad = np.arange(1.0, 7.0).reshape(1, 2, 3)
    weights = np.ones((1, 1, 2, 2))
    # x = 1 reads grad positions stride + k - (stride - 1) = 1 + k; x = 0 reads nothing.
    result = backward.data_adjoint(grad, weights, axes, np.dtype(np.float64), "taps")
    np.testing.assert_array_equal(result, [[[0.0, 2 + 3 + 5 + 6]]])


# (input, kernel, stride, dilation, offset, output) per axis: a short last axis; one of
# 45 (pairs of vectors, a single one and a tail); 1-D dilated; 3-D
_DEPTHWISE_GEOMETRIES = [
    (AxisPlan(6, 3, 2, 1, 1, 11), AxisPlan(9, 3, 1, 2, -1, 12)),
    (AxisPlan(4, 2, 2, 1, 0, 8), AxisPlan(45, 5, 1, 1, 2, 45)),
    (AxisPlan(70, 3, 1, 3, 3, 70),),
    (AxisPlan(3, 2, 1, 1, 0, 4), AxisPlan(4, 3, 2, 1, 1, 7), AxisPlan(20, 3, 1, 1, 1, 20)),
]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype, channels", [(np.float32, 35), (np.float32, 64),
                                             (np.float64, 40), (np.float64, 3)])
@pytest.mark.parametrize("vector_bytes", [32, 64])
@pytest.mark.parametrize("axes", _DEPTHWISE_GEOMETRIES)
def test_compiled_depthwise_filter_adjoint_matches_the_definition(dtype, channels,
                                                                  channels_last, vector_bytes,
                                                                  axes):
    """The compiled depthwise filter gradient (:mod:`._numba.depthwise_filter`): chunks
    of 4, 2 and 1 channel vectors, channels past the last whole vector, both layouts,
    bands of lines over two threads; channels-first planes along a last axis of
    stride 1; small integers, so every sum is exact."""
    pytest.importorskip("numba")
    from convtranspose import host_target
    from convtranspose._kernels._numba.depthwise_filter import depthwise_filter_adjoint

    p = dict(axes=axes, groups=channels, ci=1, co=1, batch=2, seed=channels)
    data, grad, _ = _operands(p, dtype)
    strides, dilations, offsets, _, kernel = _geometry(axes)
    expected = oracle.filter_gradient(data, grad, channels, kernel, strides, dilations, offsets)
    if channels_last:
        data, grad = (np.ascontiguousarray(np.moveaxis(a, 1, -1)) for a in (data, grad))
    # AVX2's vectors (32 bytes) and AVX-512's, whatever the host
    actual = depthwise_filter_adjoint(data, grad, axes, channels_last, np.dtype(dtype),
                                      host_target().replace(threads=2,
                                                            vector_bytes=vector_bytes))
    np.testing.assert_array_equal(actual, expected[:, 0, 0])


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype, ci, co", [(np.float32, 7, 16), (np.float32, 13, 64),
                                           (np.float32, 11, 8), (np.float64, 5, 16),
                                           (np.float64, 9, 24), (np.float64, 11, 12)])
@pytest.mark.parametrize("vector_bytes", [32, 64])
def test_blocked_filter_adjoint_matches_the_definition(dtype, ci, co, channels_last,
                                                       vector_bytes):
    """The compiled register-blocked filter gradient (:mod:`._numba.blocked_filter`):
    blocks of input channels with a shorter last one, 1-4 vectors of output channels,
    three groups, both layouts, strides, dilations and negative offsets, over two
    threads; small integers, so every sum is exact."""
    pytest.importorskip("numba")
    from convtranspose import host_target
    from convtranspose._kernels._numba.blocked_filter import blocked_filter_adjoint

    target = host_target().replace(threads=2, vector_bytes=vector_bytes)
    if co % target.lanes(dtype):
        co = target.lanes(dtype) * 2
    for axes in [(AxisPlan(9, 4, 3, 1, -1, 30),),
                 (AxisPlan(6, 3, 2, 1, 1, 11), AxisPlan(5, 3, 1, 2, -1, 8)),
                 (AxisPlan(3, 2, 1, 1, 0, 4), AxisPlan(4, 3, 2, 1, 1, 7), AxisPlan(3, 2, 2, 1, 0, 6))]:
        p = dict(axes=axes, groups=3, ci=ci, co=co, batch=2, seed=ci + co)
        data, grad, _ = _operands(p, dtype)
        strides, dilations, offsets, _, kernel = _geometry(axes)
        expected = oracle.filter_gradient(data, grad, 3, kernel, strides, dilations, offsets)
        if channels_last:
            data, grad = (np.ascontiguousarray(np.moveaxis(a, 1, -1)) for a in (data, grad))
        actual = blocked_filter_adjoint(data, grad, axes, 3, channels_last, np.dtype(dtype),
                                        target)
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("padded", [False, True], ids=["lines", "padded"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype, ci, co", [(np.float32, 70, 5), (np.float32, 16, 3),
                                           (np.float64, 9, 11), (np.float64, 40, 2)])
@pytest.mark.parametrize("vector_bytes", [32, 64])
def test_blocked_data_adjoint_matches_the_forward_convolution_loop(dtype, ci, co,
                                                                   channels_last,
                                                                   vector_bytes, padded):
    """The compiled data adjoint (:mod:`._numba.forward`): output channels padded to
    whole vectors and taken in several chunks; along lines, blocks of pixels a stride
    apart with the last block overlapping and line ends with fewer taps one output at a
    time, or (``padded``, for a finite filter) over a copy of grad with zeros around it
    in blocks across lines and images, the last outputs one at a time; three groups,
    both layouts (a channels-first grad copied channels last, and read in place); small
    integers, so every sum is exact."""
    pytest.importorskip("numba")
    from convtranspose import host_target
    from convtranspose._kernels._numba.forward import forward_adjoint
    from convtranspose._plan.geometry import tap_zeros

    target = host_target().replace(threads=2, vector_bytes=vector_bytes)
    cases = [(AxisPlan(30, 4, 3, 1, -1, 95),),
             (AxisPlan(6, 3, 2, 1, 1, 11), AxisPlan(19, 3, 2, 2, 1, 41)),
             (AxisPlan(3, 2, 1, 1, 0, 4), AxisPlan(4, 3, 2, 1, 1, 7), AxisPlan(12, 2, 2, 1, 0, 24)),
             (AxisPlan(5, 3, 2, 1, 1, 9), AxisPlan(8, 4, 2, 1, 1, 16)),
             (AxisPlan(6, 3, 1, 2, 2, 6),), (AxisPlan(2, 5, 3, 1, 2, 4),)]
    # the premise: zeros before and after an axis, on the first axes too, and none
    assert {tap_zeros(axis) for axes in cases for axis in axes} >= {(1, 1), (2, 2), (0, 0)}
    assert any(any(tap_zeros(axis)) for axes in cases for axis in axes[:-1])
    for axes in cases:
        p = dict(axes=axes, groups=3, ci=ci, co=co, batch=2, seed=ci + co)
        _, grad, weights = _operands(p, dtype)
        strides, dilations, offsets, sizes, _ = _geometry(axes)
        expected = oracle.forward_convolution(grad.astype(np.float64), weights, strides,
                                              dilations, offsets, sizes)
        if channels_last:
            grad = np.ascontiguousarray(np.moveaxis(grad, 1, -1))
        # A channels-first grad's planes read in place, and its channels-last copy.
        for planes in [False] if channels_last or padded else [False, True]:
            actual = forward_adjoint(grad, weights, axes, channels_last, np.dtype(dtype), {},
                                     target, padded, planes)
            np.testing.assert_array_equal(
                np.moveaxis(actual, -1, 1) if channels_last else actual, expected,
                err_msg=f"{axes}, planes {planes}")


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("vector_bytes", [32, 64])
def test_padded_data_adjoint_takes_channel_blocks_and_merged_taps(monkeypatch, groups,
                                                                   threads, vector_bytes):
    """The padded kernel's sums in parts: with a tiny L2 it adds the source channels in
    blocks of 16 (the later ones into the sums the first stored); one group's taps
    along an undilated last axis read as one run of K3 * Co channels, a dilated last
    axis tap by tap; runs of blocks across images, outputs past the last whole block
    one at a time, several chunks of output channels; channels-first and channels-last
    results.  Small integers: every sum exact."""
    pytest.importorskip("numba")
    from convtranspose import host_target
    from convtranspose._kernels._numba import forward

    monkeypatch.setattr(forward, "l2_cache_bytes", lambda: 1)
    target = host_target().replace(threads=threads, vector_bytes=vector_bytes)
    for axes, co in [((AxisPlan(7, 3, 2, 1, 1, 13), AxisPlan(9, 3, 2, 1, 1, 17)), 7),
                     ((AxisPlan(5, 2, 2, 1, 0, 10), AxisPlan(6, 3, 2, 2, 2, 12)), 20),
                     ((AxisPlan(11, 7, 2, 1, 3, 21),), 3)]:
        p = dict(axes=axes, groups=groups, ci=21, co=co, batch=3, seed=co)
        _, grad, weights = _operands(p, np.float32)
        strides, dilations, offsets, sizes, _ = _geometry(axes)
        expected = oracle.forward_convolution(grad.astype(np.float64), weights, strides,
                                              dilations, offsets, sizes)
        for channels_last in (False, True):
            source = np.ascontiguousarray(np.moveaxis(grad, 1, -1)) if channels_last else grad
            actual = forward.forward_adjoint(source, weights, axes, channels_last,
                                             np.dtype(np.float32), {}, target, True)
            np.testing.assert_array_equal(
                np.moveaxis(actual, -1, 1) if channels_last else actual, expected,
                err_msg=f"{axes}, channels last {channels_last}")


def _stride_two_convolution(data, filter):
    """The definition of a stride-2, pad-1 convolution, pair by pair: only the taps
    that read inside the data are multiplied."""
    n, _, size, _ = data.shape
    out, k = (size + 2 - filter.shape[-1]) // 2 + 1, filter.shape[-1]
    expected = np.zeros((n, filter.shape[0], out, out))
    for oy, ox, ky, kx in itertools.product(range(out), range(out), range(k), range(k)):
        iy, ix = 2 * oy + ky - 1, 2 * ox + kx - 1
        if 0 <= iy < size and 0 <= ix < size:
            expected[:, :, oy, ox] += (data[:, None, :, iy, ix]
                                       * filter[None, :, :, ky, kx].astype(np.float64)).sum(-1)
    return expected


def test_blocked_forward_convolution_keeps_infinite_weights_where_taps_reach(monkeypatch):
    """Taps that reach past grad's edges (``tap_zeros``): with an infinite weight, also
    one written into a filter already called with, the forward convolution never
    multiplies it by a zero it made up (which would give NaN where the definition has
    an infinity or a finite sum)."""
    pytest.importorskip("numba")
    import convtranspose as ct
    from convtranspose._plan.geometry import tap_zeros

    monkeypatch.setenv("CONVTRANSPOSE_BACKWARD_ALGORITHM", "blocked")
    axis = AxisPlan(8, 4, 2, 1, 1, 16)  # a stride-2 k4 layer's 16 -> 8
    assert tap_zeros(axis) != (0, 0)  # the premise: finite weights would pad
    rng = np.random.default_rng(5)
    data = rng.integers(1, 4, (2, 3, 16, 16)).astype(np.float32)  # no 0 * inf
    filter = rng.integers(-3, 4, (20, 3, 4, 4)).astype(np.float32)
    for _ in range(2):  # the finite filter, called twice (its finiteness then kept)
        actual = ct.convolution(data, filter, strides=2, pads_begin=1, pads_end=1)
        np.testing.assert_array_equal(actual, _stride_two_convolution(data, filter))
    filter[4, 1, 0, 3] = np.inf  # edited in place
    filter[7, 2, 3, 0] = -np.inf
    expected = _stride_two_convolution(data, filter)
    assert np.isinf(expected[:, 4]).any() and np.isfinite(expected[:, 4]).any()  # the premise
    actual = ct.convolution(data, filter, strides=2, pads_begin=1, pads_end=1)
    np.testing.assert_array_equal(actual, expected.astype(np.float32))


def test_an_infinite_weight_never_runs_the_im2col_planning_chose(monkeypatch):
    """Measured planning decides a problem's algorithm for its finite operands and keeps
    it; a later call whose filter holds an infinity must still not run ``im2col``
    (whose gathered zeros times the infinity give NaN where the definition has an
    infinity).  Planning's decision is made ``im2col`` here, as a measurement may make
    it."""
    import convtranspose as ct
    from convtranspose._execute import adjoints as execute_adjoints

    monkeypatch.setenv("CONVTRANSPOSE_PLANNING", "measure")
    monkeypatch.setattr(execute_adjoints, "measured_choice", lambda *args, **kwargs: "im2col")
    rng = np.random.default_rng(8)
    data = rng.integers(1, 4, (1, 6, 12, 12)).astype(np.float32)  # no 0 * inf
    filter = rng.integers(-3, 4, (5, 6, 3, 3)).astype(np.float32)
    filter[2, 3, 0, 0] = np.inf  # read past the top and left edges by the first outputs
    expected = _stride_two_convolution(data, filter)
    assert np.isinf(expected).any() and not np.isnan(expected).any()  # the premise
    actual = ct.convolution(data, filter, strides=2, pads_begin=1, pads_end=1)
    np.testing.assert_array_equal(actual, expected.astype(np.float32))


def test_compiled_depthwise_filter_adjoint_keeps_an_infinity_an_infinity():
    """Channels past the last whole vector (3 channels: all of them) summed one at a
    time: an infinite data value read by a tap gives an infinite sum, not NaN (a line
    sum must start from zero, not from the first value times zero)."""
    pytest.importorskip("numba")
    from convtranspose import host_target
    from convtranspose._kernels._numba.depthwise_filter import depthwise_filter_adjoint

    axes = (AxisPlan(5, 3, 1, 1, 1, 5),)
    data = np.ones((1, 3, 5))
    data[0, 1, 0] = np.inf
    grad = np.ones((1, 3, 5))
    actual = depthwise_filter_adjoint(data, grad, axes, False, np.dtype(np.float64),
                                      host_target())
    expected = oracle.filter_gradient(data, grad, 3, (3,), [1], [1], [1])[:, 0, 0]
    np.testing.assert_array_equal(actual, expected)
    assert np.isinf(actual[1]).any() and not np.isnan(actual).any()
