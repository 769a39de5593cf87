"""JAX arrays (immutable: any in-place write raises) through the array-API path, eagerly,
under ``jax.jit`` and differentiated by ``jax.grad``, against the oracle.

JAX is not in the ``test`` extra (jax and jaxlib are about 90 MB of wheels and 600 MB
installed, with scipy); this module runs where JAX is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct
import oracle

jax = pytest.importorskip("jax", reason="JAX is not in the test extra: pip install jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture(autouse=True)
def float64():
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def _ints(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 5, shape).astype(np.float64) for shape in shapes]


ATTRIBUTES = dict(strides=[2, 3], pads_begin=[1, 0], pads_end=[0, 2], output_padding=[1, 0],
                  dilations=[1, 2])


def test_transposed_convolution_eagerly_and_under_jit():
    data, filter = _ints(0, (2, 4, 3, 4), (2, 2, 3, 3, 2))
    expected = oracle.openvino_group_cbpd_case(data, filter, **ATTRIBUTES).rounded()
    eager = ct.group_convolution_backprop_data(jnp.asarray(data), jnp.asarray(filter),
                                               **ATTRIBUTES)
    assert isinstance(eager, jax.Array)
    np.testing.assert_array_equal(np.asarray(eager), expected)
    jitted = jax.jit(lambda d, f: ct.group_convolution_backprop_data(d, f, **ATTRIBUTES))
    np.testing.assert_array_equal(np.asarray(jitted(data, filter)), expected)


def test_vjp_and_jax_grad_agree_with_the_definition():
    data, filter, bias = _ints(1, (1, 3, 4, 3), (2, 2, 3, 2), (2,))
    attributes = dict(strides=2, pads_begin=[0, 1], pads_end=[1, 0], data_format="NXC",
                      filter_format="XIO")
    shape = ct.shapes.conv_transpose(data.shape, filter.shape, bias.shape,
                                     **attributes).output_shape
    (grad,) = _ints(2, shape)
    expected = ct.vjp.conv_transpose(data, filter, grad, bias, **attributes)
    ours = ct.vjp.conv_transpose(*(jnp.asarray(a) for a in (data, filter, grad, bias)),
                                 **attributes)
    for mine, want in zip(ours, expected):
        np.testing.assert_array_equal(np.asarray(mine), want)
    # jax.grad differentiates the array-API computation itself
    loss = lambda d, f, b: jnp.sum(jnp.asarray(grad)  # noqa: E731
                                   * ct.conv_transpose(d, f, b, **attributes))
    grads = jax.grad(loss, argnums=(0, 1, 2))(jnp.asarray(data), jnp.asarray(filter),
                                              jnp.asarray(bias))
    for mine, want in zip(grads, expected):
        np.testing.assert_array_equal(np.asarray(mine), want)


def test_forward_convolution():
    data, filter = _ints(3, (2, 2, 7, 6), (3, 2, 3, 2))
    attributes = dict(strides=2, auto_pad="same_lower", dilations=[1, 2])
    plan = ct.shapes.convolution(data.shape, filter.shape, **attributes)
    expected = oracle.forward_convolution(data, filter.reshape(plan.canonical_filter_shape),
                                          plan.strides, plan.dilations, plan.pads_begin,
                                          plan.output_shape[2:])
    result = ct.convolution(jnp.asarray(data), jnp.asarray(filter), **attributes)
    np.testing.assert_array_equal(np.asarray(result), expected)


def test_a_numpy_operand_beside_a_jax_array_is_refused():
    data, filter = _ints(4, (1, 2, 3), (2, 1, 2))
    with pytest.raises(TypeError, match="filter is a numpy.ndarray but data is a jax"):
        ct.convolution_backprop_data(jnp.asarray(data), filter)
