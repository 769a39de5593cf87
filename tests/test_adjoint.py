"""The adjoint identity: transposed convolution is the adjoint of convolution.

For a forward (cross-correlation) convolution written here from scratch, gathering
with padding,

    conv(x, w)[n, co, o] = sum over ci, k of x[n, ci, o*s + k*d - p] * w[ci -> co, k]
                           (x is zero outside its extent; o in [0, X_t))

the transposed convolution with crop offset ``p`` and output size ``Y`` (the spatial
size of x) must satisfy, for every x and y,

    <conv(x, w), y> == <x, convT(y, w)>.

This checks the library's numbers by an algebraic identity that shares nothing
with its scatter-add formulation nor with the oracle's loop (only the per-axis
offset comes from the docs/semantics.md tables, through ``oracle.*_geometry``).  Values
are small integers held in float64, so every inner product is exact and the test
asserts equality.
"""


import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import convtranspose as ct
import oracle

forward_convolution = oracle.forward_convolution


@st.composite
def problem(draw):
    rank = draw(st.integers(1, 3))
    max_size = {1: 7, 2: 4, 3: 3}[rank]
    lists = lambda lo, hi: draw(st.lists(st.integers(lo, hi), min_size=rank, max_size=rank))  # noqa: E731
    return dict(
        rank=rank, spatial=lists(1, max_size), kernel=lists(1, 3), strides=lists(1, 3),
        dilations=lists(1, 3), pads_begin=lists(0, 3), pads_end=lists(0, 3),
        output_padding=lists(0, 2), groups=draw(st.integers(1, 3)),
        ci=draw(st.integers(1, 3)), co=draw(st.integers(1, 3)), batch=draw(st.integers(1, 2)),
        output_shape=(None if draw(st.booleans()) else lists(1, 12)),
        seed=draw(st.integers(0, 2**32 - 1)))


def small_ints(rng, shape):
    return rng.integers(-5, 6, shape).astype(np.float64)


def check_adjoint(p, w_gcok, transposed, geometry):
    """``transposed(y)`` computes convT in NCX; ``geometry`` is the oracle's per-axis plan."""
    rng = np.random.default_rng(p["seed"])
    y = small_ints(rng, [p["batch"], p["groups"] * p["ci"]] + p["spatial"])
    ct_y = transposed(y)
    offsets = [a[0] for a in geometry]
    sizes = [a[1] for a in geometry]
    assert list(ct_y.shape[2:]) == sizes
    x = small_ints(rng, ct_y.shape)
    conv_x = forward_convolution(x, w_gcok, p["strides"], p["dilations"], offsets, p["spatial"])
    assert conv_x.shape == y.shape
    assert np.sum(conv_x * y) == np.sum(x * ct_y)


def run(examples, check):
    settings(max_examples=examples)(given(problem())(check))()


def test_adjoint_openvino_explicit_pads(examples):
    def check(p):
        rng = np.random.default_rng(p["seed"] + 1)
        w = small_ints(rng, [p["groups"], p["ci"], p["co"]] + p["kernel"])
        keywords = dict(strides=p["strides"], dilations=p["dilations"],
                        pads_begin=p["pads_begin"], pads_end=p["pads_end"],
                        output_padding=p["output_padding"])
        try:
            geometry = oracle.openvino_geometry(p["spatial"], p["kernel"],
                                                output_shape=p["output_shape"], **keywords)
        except oracle.Rejected:
            return
        check_adjoint(p, w, lambda y: ct.group_convolution_backprop_data(
            y, w, p["output_shape"], **keywords), geometry)
        if p["groups"] == 1:
            check_adjoint(p, w, lambda y: ct.convolution_backprop_data(
                y, w[0], p["output_shape"], **keywords), geometry)
    run(examples, check)


def test_adjoint_openvino_auto_pad(examples):
    @st.composite
    def with_mode(draw):
        return draw(problem()), draw(st.sampled_from(["same_upper", "same_lower", "valid"]))

    def check(drawn):
        p, mode = drawn
        rng = np.random.default_rng(p["seed"] + 1)
        w = small_ints(rng, [p["groups"], p["ci"], p["co"]] + p["kernel"])
        keywords = dict(strides=p["strides"], dilations=p["dilations"], auto_pad=mode,
                        output_padding=p["output_padding"])
        geometry = oracle.openvino_geometry(p["spatial"], p["kernel"],
                                            output_shape=p["output_shape"], **keywords)
        check_adjoint(p, w, lambda y: ct.group_convolution_backprop_data(
            y, w, p["output_shape"], **keywords), geometry)
    settings(max_examples=examples)(given(with_mode())(check))()


def test_adjoint_onednn(examples):
    @st.composite
    def with_mode(draw):
        return (draw(problem()), draw(st.sampled_from(["none", "same_upper", "same_lower", "valid"])),
                draw(st.sampled_from(["XIO", "OIX", "IOX", "XOI"])))

    def check(drawn):
        p, mode, layout = drawn
        rank = p["rank"]
        rng = np.random.default_rng(p["seed"] + 1)
        w = small_ints(rng, [p["groups"], p["ci"], p["co"]] + p["kernel"])
        # (G, Ci, Co, K) -> IOX (G*Ci, Co, K) -> the drawn layout
        iox = w.reshape((p["groups"] * p["ci"], p["co"]) + tuple(p["kernel"]))
        filter = {"IOX": iox, "OIX": np.swapaxes(iox, 0, 1),
                  "XIO": np.moveaxis(iox, (0, 1), (rank, rank + 1)),
                  "XOI": np.moveaxis(iox, (0, 1), (rank + 1, rank))}[layout]
        output_padding = [min(o, s - 1) for o, s in zip(p["output_padding"], p["strides"])]
        keywords = dict(strides=p["strides"], dilations=p["dilations"], auto_pad=mode,
                        pads_begin=p["pads_begin"], pads_end=p["pads_end"],
                        output_padding=output_padding, output_shape=p["output_shape"])
        try:
            geometry = oracle.onednn_geometry(p["spatial"], p["kernel"], **keywords)
        except oracle.Rejected:
            return
        check_adjoint(p, w, lambda y: np.moveaxis(ct.conv_transpose(
            np.moveaxis(y, 1, -1), filter, groups=p["groups"], weights_format=layout,
            **keywords), -1, 1), geometry)
    settings(max_examples=examples)(given(with_mode())(check))()


def test_adjoint_onnx(examples):
    @st.composite
    def with_mode(draw):
        return draw(problem()), draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER",
                                                       "VALID"]))

    def check(drawn):
        p, mode = drawn
        rng = np.random.default_rng(p["seed"] + 1)
        w = small_ints(rng, [p["groups"], p["ci"], p["co"]] + p["kernel"])
        W = w.reshape((p["groups"] * p["ci"], p["co"]) + tuple(p["kernel"]))
        keywords = dict(strides=p["strides"], dilations=p["dilations"], auto_pad=mode,
                        pads=p["pads_begin"] + p["pads_end"],
                        output_padding=p["output_padding"], output_shape=p["output_shape"])
        try:
            geometry = oracle.onnx_geometry(p["spatial"], p["kernel"], **keywords)
        except oracle.Rejected:
            return
        check_adjoint(p, w, lambda y: ct.onnx_conv_transpose(y, W, group=p["groups"],
                                                             **keywords), geometry)
    settings(max_examples=examples)(given(with_mode())(check))()


def test_forward_convolution_by_hand():
    # The forward op itself, checked on numbers: x = [1, 2, 3, 4, 5], w = [1, 10],
    # s = 2, p = 1 (so index -1 reads 0): o=0 reads x[-1], x[0] -> 0*1 + 1*10 = 10;
    # o=1 reads x[1], x[2] -> 2 + 30 = 32; o=2 reads x[3], x[4] -> 4 + 50 = 54.
    x = np.array([[[1.0, 2, 3, 4, 5]]])
    w = np.array([[[[1.0, 10.0]]]])
    y = forward_convolution(x, w, [2], [1], [1], [3])
    assert y.tolist() == [[[10, 32, 54]]]
