"""``ct.jax_conv_transpose`` against ``jax.lax.conv_transpose``: random layers over
padding modes and pairs, dimension numbers, ``transpose_kernel``,
``use_consistent_padding`` and ``rhs_dilation``; equal shapes and values."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

from ._cases import assert_same, integer_array

jax = pytest.importorskip("jax", reason="jax is installed by the test extra")
jax.config.update("jax_enable_x64", True)
lax = jax.lax

pytestmark = pytest.mark.peers

SPECS = {  # rank -> dimension numbers to draw from
    1: [("NHC", "HIO", "NHC"), ("NCH", "OIH", "NCH"), ("NCH", "IOH", "NCH")],
    2: [None, ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWOI", "NHWC"), ("NCHW", "IOHW", "NCHW")],
    3: [None, ("NCHWD", "OIHWD", "NCHWD")],
}


def shape_for(spec: str, sizes: dict) -> tuple[int, ...]:
    return tuple(sizes[letter] for letter in spec)


def random_layer(rng):
    rank = int(rng.integers(1, 4))
    specs = SPECS[rank][int(rng.integers(len(SPECS[rank])))]
    lhs_spec, rhs_spec, _ = specs or ({2: "NHWC", 3: "NHWDC"}[rank], {2: "HWIO", 3: "HWDIO"}[rank], "")
    transpose_kernel = bool(rng.random() < 0.5)
    letters = [c for c in lhs_spec if c not in "NC"]
    sizes = dict(N=int(rng.integers(1, 3)), C=int(rng.integers(1, 4)))
    out_channels = int(rng.integers(1, 4))
    sizes.update({c: int(rng.integers(1, 6)) for c in letters})
    kernel = {c: int(rng.integers(1, 4)) for c in letters}
    # the kernel's I axis meets the input channels (its O axis with transpose_kernel)
    io = dict(I=sizes["C"], O=out_channels) if not transpose_kernel else dict(
        O=sizes["C"], I=out_channels)
    strides = tuple(int(s) for s in rng.integers(1, 4, rank))
    dilation = tuple(int(d) for d in rng.integers(1, 3, rank)) if rng.random() < 0.5 else None
    kind = rng.random()
    if kind < 0.5:
        padding = str(rng.choice(["SAME", "VALID"]))
    else:
        padding = tuple((int(rng.integers(-1, 4)), int(rng.integers(-1, 4)))
                        for _ in range(rank))
    return dict(lhs=shape_for(lhs_spec, sizes),
                rhs=shape_for(rhs_spec, {**kernel, **io}),
                strides=strides, padding=padding, rhs_dilation=dilation,
                dimension_numbers=specs, transpose_kernel=transpose_kernel,
                use_consistent_padding=bool(rng.random() < 0.3))


def test_random_layers_match_jax():
    rng = np.random.default_rng(5)
    compared = 0
    for _ in range(80):
        layer = random_layer(rng)
        lhs, rhs = integer_array(rng, layer["lhs"]), integer_array(rng, layer["rhs"])
        arguments = {k: v for k, v in layer.items() if k not in ("lhs", "rhs")}
        try:
            expected = np.asarray(lax.conv_transpose(lhs, rhs, **arguments))
        except ValueError as error:  # negative pads longer than the dilated input
            assert "Negative padding is larger" in str(error)
            with pytest.raises(ct.ConvTransposeError, match="output size"):
                ct.jax_conv_transpose(lhs, rhs, **arguments)
            continue
        if 0 in expected.shape:  # JAX returns an empty result; we refuse (documented)
            with pytest.raises(ct.ConvTransposeError, match="output size"):
                ct.jax_conv_transpose(lhs, rhs, **arguments)
            continue
        assert_same(ct.jax_conv_transpose(lhs, rhs, **arguments), expected, layer)
        plan = ct.shapes.jax_conv_transpose(layer["lhs"], layer["rhs"], **arguments)
        assert plan.output_shape == expected.shape
        compared += 1
    assert compared > 50


def test_valid_is_keras_like_not_the_full_result():
    # VALID: Y = X*s + max(K' - s, 0), so with K < s the output grows past F.
    x, k = np.ones((1, 3, 1)), np.ones((1, 1, 1))
    expected = np.asarray(lax.conv_transpose(x, k, (3,), "VALID"))
    assert expected.shape == (1, 9, 1)
    assert_same(ct.jax_conv_transpose(x, k, (3,), "VALID"), expected, "K=1, s=3")


def test_unsupported_dimension_numbers_are_refused():
    with pytest.raises(ct.ConvTransposeError, match="not supported"):
        ct.shapes.jax_conv_transpose((1, 2, 4, 4), (2, 3, 3, 3), (1, 1), "SAME",
                                     dimension_numbers=("NCHW", "IHWO", "NCHW"))


def _jax_or_error(lhs, rhs, *args, **kwargs):
    try:
        return np.asarray(lax.conv_transpose(lhs, rhs, *args, **kwargs))
    except (ValueError, TypeError) as error:
        return str(error)


def test_no_spatial_axis_is_the_matrix_product_as_in_jax():
    lhs, rhs = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    for padding in ("VALID", "SAME"):
        expected = np.asarray(lax.conv_transpose(lhs, rhs, (), padding,
                                                 dimension_numbers=("NC", "IO", "NC")))
        assert expected.ravel().tolist() == [10, 13, 28, 40]
        assert_same(ct.jax_conv_transpose(lhs, rhs, (), padding,
                                          dimension_numbers=("NC", "IO", "NC")), expected, padding)
    plan = ct.shapes.jax_conv_transpose((2, 3), (3, 2), (), "VALID")
    assert plan.output_shape == (2, 2) and plan.axes == ()
    out = np.empty((2, 2))
    assert ct.jax_conv_transpose(lhs, rhs, (), "VALID", out=out) is out
    assert out.ravel().tolist() == [10, 13, 28, 40]


@pytest.mark.parametrize("b, i, j", [(2, 3, 2), (3, 2, 3)])
@pytest.mark.parametrize("padding", ["VALID", "SAME", ()])
@pytest.mark.parametrize("options", [dict(), dict(rhs_dilation=()),
                                     dict(transpose_kernel=True), dict(dimension_numbers=None),
                                     dict(use_consistent_padding=True)])
def test_jax_suite_conv_transpose_0d(b, i, j, padding, options):
    # jax-ml/jax tests/lax_test.py testConvTranspose0D: lhs (b, i), rhs (i, j), strides
    # (), dimension numbers ("NC", "IO", "NC") (JAX's default for rank 2), rhs_dilation
    # None or (); compared with JAX itself and with the matrix product.
    rng = np.random.default_rng([b, i, j])
    lhs = integer_array(rng, (b, i))
    rhs = integer_array(rng, (j, i) if options.get("transpose_kernel") else (i, j))
    arguments = dict(dimension_numbers=("NC", "IO", "NC")) | options
    expected = np.asarray(lax.conv_transpose(lhs, rhs, (), padding, **arguments))
    assert_same(expected, lhs @ (rhs.T if options.get("transpose_kernel") else rhs), "dot")
    assert_same(ct.jax_conv_transpose(lhs, rhs, (), padding, **arguments), expected,
                (b, i, j, padding, options))


EMPTY_JAX_LAYERS = [  # lhs shape, rhs shape, strides, padding: an empty spatial axis
    ((1, 0, 1), (3, 1, 2), (2,), "VALID"), ((1, 0, 1), (3, 1, 2), (2,), "SAME"),
    ((1, 0, 1), (1, 1, 2), (3,), "VALID"), ((1, 0, 1), (1, 1, 2), (3,), "SAME"),
    ((1, 0, 1), (5, 1, 2), (1,), "VALID"), ((1, 0, 1), (3, 1, 2), (1,), ((2, 2),)),
    ((1, 0, 1), (3, 1, 2), (1,), ((3, 3),)), ((1, 0, 1), (3, 1, 2), (1,), ((0, 0),)),
    ((1, 0, 1), (3, 1, 2), (1,), ((-1, 0),)), ((1, 0, 2, 1), (2, 2, 1, 2), (2, 2), "VALID"),
    ((2, 3, 0, 2, 1), (2, 1, 3, 1, 2), (1, 2, 2), "SAME"),
]


@pytest.mark.parametrize("layer", EMPTY_JAX_LAYERS, ids=str)
def test_empty_spatial_inputs_match_jax(layer):
    # The dilated input has no element: the window slides over the pads alone.
    lhs_shape, rhs_shape, strides, padding = layer
    lhs, rhs = np.zeros(lhs_shape), np.ones(rhs_shape)
    expected = _jax_or_error(lhs, rhs, strides, padding)
    if isinstance(expected, str) or 0 in expected.shape:  # refused, or empty (documented)
        with pytest.raises(ct.ConvTransposeError, match="output size"):
            ct.jax_conv_transpose(lhs, rhs, strides, padding)
        return
    assert_same(ct.jax_conv_transpose(lhs, rhs, strides, padding), expected, layer)
    assert ct.shapes.jax_conv_transpose(lhs_shape, rhs_shape, strides, padding).output_shape \
        == expected.shape


@pytest.mark.parametrize("arguments", [dict(strides=2), dict(strides=(1, 1), rhs_dilation=2),
                                       dict(strides=None)])
def test_a_single_int_for_strides_or_dilation_is_refused_as_in_jax(arguments):
    lhs, rhs = np.ones((1, 3, 3, 1)), np.ones((2, 2, 1, 1))
    assert isinstance(_jax_or_error(lhs, rhs, padding="SAME", **arguments), str)
    with pytest.raises(ct.ConvTransposeError, match="strides|rhs_dilation"):
        ct.jax_conv_transpose(lhs, rhs, padding="SAME", **arguments)


@pytest.mark.parametrize("rank, strides, padding, rhs_dilation, transpose_kernel", [
    # jax-ml/jax tests/lax_test.py testConvTranspose1D, testConvTranspose2D and
    # testConvTranspose2DT: lhs (b, 10, i) or (b, 9, 10, i), rhs (k, i, j), (k, k, i, j)
    # or, transposed, (k, k, j, i), default dimension numbers; compared with JAX itself.
    (1, s, p, d, False) for s in [(1,), (2,), (3,)] for p in ["VALID", "SAME"]
    for d in [None, (2,)]] + [
    (2, s, p, d, t) for s in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 3)] for p in ["VALID", "SAME"]
    for d in [None, (2, 2)] for t in [False, True]])
def test_jax_suite_conv_transpose_1d_2d(rank, strides, padding, rhs_dilation,
                                        transpose_kernel):
    seed = [rank, *strides, padding == "SAME", rhs_dilation is None, transpose_kernel]
    rng = np.random.default_rng(seed)
    shapes = [(2, 2, 3, 3), (3, 3, 2, 4), (2, 3, 3, 5)]  # b, i, j, k: one per layer
    for b, i, j, k in [shapes[int(rng.integers(3))]]:
        lhs = integer_array(rng, (b, 10, i) if rank == 1 else (b, 9, 10, i))
        channels = (j, i) if transpose_kernel else (i, j)
        rhs = integer_array(rng, (k,) * rank + channels)
        arguments = dict(rhs_dilation=rhs_dilation, transpose_kernel=transpose_kernel)
        expected = np.asarray(lax.conv_transpose(lhs, rhs, strides, padding, **arguments))
        assert_same(ct.jax_conv_transpose(lhs, rhs, strides, padding, **arguments), expected,
                    (rank, strides, padding, arguments, b, i, j, k))


def test_xla_aborts_on_a_valid_3d_layer():
    # docs/semantics.md: XLA's algebraic simplifier aborts the process on this valid
    # layer (output (1, 1, 10, 2, 6)); run in a subprocess, which it kills.
    import subprocess
    import sys

    script = ("import numpy as np; from jax import lax; lax.conv_general_dilated("
              "np.ones((1,1,5,1,4),np.float32), np.ones((1,1,2,3,2),np.float32), (1,1,1),"
              " ((0,-1),(0,3),(0,0)), (3,1,2), (2,1,1)).block_until_ready()")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode != 0 and "Window dimensions do not match" in run.stderr, \
        (run.returncode, run.stderr[-2000:])
