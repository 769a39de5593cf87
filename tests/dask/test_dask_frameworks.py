"""The frameworks' dialects on Dask arrays: the tiled result equals the NumPy function of
the same dialect (``ct.torch_conv_transpose`` ...), element for element, on random layers
(ranks 1-3 where the dialect has them, groups, dilations, strides larger than the kernel,
output_padding and output sizes, SAME/VALID and explicit pads, every data layout the
dialect takes) with data in uneven chunks along batch and spatial axes.

Values are small integers, so every sum is exact in any order.  Layers the dialect
refuses are drawn again.
"""

from __future__ import annotations

import numpy as np
import pytest
from dask_cases import uneven_chunks

import convtranspose as ct

da = pytest.importorskip("dask.array")  # the test extra installs it (make test)
ctd = pytest.importorskip("convtranspose.dask")


def _ints(rng, shape, dtype=np.float64):
    return rng.integers(-3, 4, shape).astype(dtype)


def _per_axis(rng, rank, low, high):
    return tuple(int(v) for v in rng.integers(low, high + 1, rank))


def _torch(rng):
    rank, groups = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    kernel, stride = _per_axis(rng, rank, 1, 3), _per_axis(rng, rank, 1, 3)
    dilation = _per_axis(rng, rank, 1, 2)
    x = _ints(rng, (2, 2 * groups) + _per_axis(rng, rank, 3, 7))
    w = _ints(rng, (2 * groups, int(rng.integers(1, 3))) + kernel)
    b = _ints(rng, (w.shape[1] * groups,)) if rng.random() < 0.5 else None
    return (x, w, b), dict(stride=stride, padding=_per_axis(rng, rank, 0, 2), groups=groups,
                           dilation=dilation, output_padding=tuple(
                               int(rng.integers(0, max(s, d))) for s, d in zip(stride, dilation)))


def _tensorrt(rng):
    rank, groups = int(rng.integers(2, 4)), int(rng.integers(1, 3))
    x = _ints(rng, (2, 2 * groups) + _per_axis(rng, rank, 3, 6))
    w = _ints(rng, (2 * groups, 2) + _per_axis(rng, rank, 1, 3))
    b = _ints(rng, (2 * groups,)) if rng.random() < 0.5 else None
    mode = str(rng.choice(["EXPLICIT_ROUND_DOWN", "SAME_UPPER", "SAME_LOWER"]))
    return (x, w, b), dict(stride_nd=_per_axis(rng, rank, 1, 3), num_groups=groups,
                           dilation_nd=_per_axis(rng, rank, 1, 2), padding_mode=mode,
                           pre_padding=_per_axis(rng, rank, 0, 2),
                           post_padding=_per_axis(rng, rank, 0, 2))


def _tf(rng):
    rank = int(rng.integers(1, 4))
    last = bool(rng.random() < 0.6)
    spatial, kernel = _per_axis(rng, rank, 3, 6), _per_axis(rng, rank, 1, 3)
    strides, padding = _per_axis(rng, rank, 1, 3), str(rng.choice(["SAME", "VALID"]))
    dilations = _per_axis(rng, rank, 1, 2) if rng.random() < 0.3 else (1,) * rank
    sizes = []
    for x, k, s, d in zip(spatial, kernel, strides, dilations):
        low = (x - 1) * s + 1 if padding == "SAME" else (x - 1) * s + (k - 1) * d + 1
        sizes.append(int(rng.integers(low, low + s)))
    c_in, c_out = 2, int(rng.integers(1, 4))
    data = (2,) + spatial + (c_in,) if last else (2, c_in) + spatial
    output = [2] + sizes + [c_out] if last else [2, c_out] + sizes
    formats = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[rank]
    return (_ints(rng, data), _ints(rng, kernel + (c_out, c_in))), dict(
        output_shape=output, strides=strides, padding=padding, dilations=dilations,
        data_format=formats[0 if last else 1])


def _keras(rng):
    rank = int(rng.integers(1, 4))
    last = bool(rng.random() < 0.6)
    strides = _per_axis(rng, rank, 1, 3)
    dilation = (1,) * rank
    if rng.random() < 0.3:
        strides, dilation = (1,) * rank, _per_axis(rng, rank, 1, 2)
    spatial = _per_axis(rng, rank, 3, 6)
    filters = int(rng.integers(1, 4))
    data = (2,) + spatial + (2,) if last else (2, 2) + spatial
    output_padding = None if rng.random() < 0.5 else tuple(
        int(rng.integers(0, s)) for s in strides)
    b = _ints(rng, (filters,)) if rng.random() < 0.5 else None
    return (_ints(rng, data), _ints(rng, _per_axis(rng, rank, 1, 3) + (filters, 2)), b), dict(
        strides=strides, padding=str(rng.choice(["valid", "same"])),
        output_padding=output_padding, dilation_rate=dilation,
        data_format="channels_last" if last else "channels_first")


def _tflite(rng):
    spatial, kernel = _per_axis(rng, 2, 3, 6), _per_axis(rng, 2, 1, 3)
    strides, padding = _per_axis(rng, 2, 1, 3), str(rng.choice(["SAME", "VALID"]))
    sizes = []
    for x, k, s in zip(spatial, kernel, strides):
        low = (x - 1) * s + 1 if padding == "SAME" else (x - 1) * s + k
        sizes.append(int(rng.integers(low, low + s)))
    c_out = int(rng.integers(1, 4))
    b = _ints(rng, (c_out,)) if rng.random() < 0.5 else None
    weights, x = _ints(rng, (c_out,) + kernel + (2,)), _ints(rng, (2,) + spatial + (2,))
    # TFLite's order: output shape, weights, input, bias; the data is the input
    return ([2] + sizes + [c_out], weights, x, b), dict(
        padding=padding, stride_h=strides[0], stride_w=strides[1])


_JAX_SPECS = {1: [("NHC", "HIO", "NHC"), ("NCH", "OIH", "NCH")],
              2: [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWOI", "NHWC")],
              3: [("NCHWD", "OIHWD", "NCHWD")]}


def _jax(rng):
    rank = int(rng.integers(1, 4))
    lhs_spec, rhs_spec, _ = specs = _JAX_SPECS[rank][int(rng.integers(len(_JAX_SPECS[rank])))]
    transpose_kernel = bool(rng.random() < 0.5)
    letters = [c for c in lhs_spec if c not in "NC"]
    sizes = dict(N=2, C=2, **{c: int(rng.integers(3, 7)) for c in letters})
    kernel = {c: int(rng.integers(1, 4)) for c in letters}
    out = int(rng.integers(1, 4))
    io = dict(I=2, O=out) if not transpose_kernel else dict(O=2, I=out)
    lhs = _ints(rng, tuple(sizes[c] for c in lhs_spec))
    rhs = _ints(rng, tuple({**kernel, **io}[c] for c in rhs_spec))
    padding = str(rng.choice(["SAME", "VALID"])) if rng.random() < 0.5 else tuple(
        (int(rng.integers(-1, 4)), int(rng.integers(-1, 4))) for _ in range(rank))
    return (lhs, rhs), dict(strides=_per_axis(rng, rank, 1, 3), padding=padding,
                            rhs_dilation=_per_axis(rng, rank, 1, 2), dimension_numbers=specs,
                            transpose_kernel=transpose_kernel)


#: dialect -> (random layer, the position of the data among the operands)
LAYERS = {"torch_conv_transpose": (_torch, 0), "tensorrt_deconvolution": (_tensorrt, 0),
          "tf_conv_transpose": (_tf, 0), "keras_conv_transpose": (_keras, 0),
          "tflite_transpose_conv": (_tflite, 2), "jax_conv_transpose": (_jax, 0)}


def _valid_layer(dialect, rng):
    draw, _ = LAYERS[dialect]
    while True:
        operands, attributes = draw(rng)
        try:
            return operands, attributes, getattr(ct, dialect)(*operands, **attributes)
        except ct.ConvTransposeError:
            continue


def _data_chunks(rng, data, channel_axis):
    return tuple(data.shape[axis] if axis == channel_axis else uneven_chunks(rng, size)
                 for axis, size in enumerate(data.shape))


@pytest.mark.parametrize("dialect", sorted(LAYERS))
@pytest.mark.parametrize("seed", range(6))
def test_random_layers_equal_the_numpy_result(dialect, seed):
    rng = np.random.default_rng([seed, len(dialect)])
    operands, attributes, expected = _valid_layer(dialect, rng)
    at = LAYERS[dialect][1]
    plan = getattr(ct.shapes, dialect)(*(getattr(o, "shape", o) for o in operands),
                                       **attributes)
    data = operands[at]
    channel = data.ndim - 1 if plan.channels_last else 1
    chunked = da.from_array(data, chunks=_data_chunks(rng, data, channel))
    assert chunked.npartitions > 1  # the batch of 2 alone is two chunks
    arguments = list(operands)
    arguments[at] = chunked
    if seed % 2:  # the filter (and the bias) as Dask arrays too
        arguments = [da.from_array(a) if isinstance(a, np.ndarray) and i != at else a
                     for i, a in enumerate(arguments)]
    lazy = getattr(ctd, dialect)(*arguments, **attributes)
    assert lazy.shape == expected.shape and lazy.dtype == expected.dtype
    result = lazy.compute(scheduler="threads" if seed % 3 else "sync")
    np.testing.assert_array_equal(result, expected, err_msg=f"{dialect} {attributes}")


def test_the_jax_kernel_is_flipped_once():
    # A correlation kernel (transpose_kernel=False) becomes the plan's filter flipped in
    # space; flipping it twice, or never, would give the mirror image
    x = da.from_array(np.array([[[1.0], [2.0], [3.0]]]), chunks=(1, 2, 1))  # NHC
    k = np.array([[[100.0]], [[10.0]], [[1.0]]])                           # HIO
    result = ctd.jax_conv_transpose(x, k, (2,), "VALID").compute()
    np.testing.assert_array_equal(result[0, :, 0], [1, 10, 102, 20, 203, 30, 300])
