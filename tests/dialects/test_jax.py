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
