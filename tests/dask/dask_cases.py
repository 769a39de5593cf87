"""Random layers for the Dask tests: every dialect and layout, ranks 1-3, uneven chunks
(some smaller than the halo), strides larger than the kernel, dilations, output_shape
larger and smaller than natural, negative ONNX pads, bias.

Values are small integers (in float32, float64 or int32), so every sum is exact in any
order: the tiled result must equal the single-machine one and the oracle bit for bit,
whichever algorithm each tile gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import convtranspose as ct
import oracle

FILTER_FORMATS = ("XIO", "OIX", "IOX", "XOI")


@dataclass
class Layer:
    dialect: str            # the function's name, in convtranspose and convtranspose.dask
    operands: tuple         # data, filter[, bias]
    attributes: dict
    data_chunks: tuple      # channel axis in one chunk
    out_chunks: object = None   # a chunks= override, or None for the default
    keywords: dict = field(default_factory=dict)

    def numpy_result(self):
        return getattr(ct, self.dialect)(*self.operands, **self.attributes)

    def oracle_result(self):
        function = {"convolution_backprop_data": oracle.openvino_cbpd,
                    "group_convolution_backprop_data": oracle.openvino_group_cbpd,
                    "conv_transpose": oracle.onednn_conv_transpose,
                    "onnx_conv_transpose": oracle.onnx_conv_transpose}[self.dialect]
        return function(*self.operands, **self.attributes)

    def dask_result(self, **keywords):
        import dask.array as da

        import convtranspose.dask as ctd

        data = da.from_array(self.operands[0], chunks=self.data_chunks)
        return getattr(ctd, self.dialect)(data, *self.operands[1:], chunks=self.out_chunks,
                                          **self.attributes, **self.keywords, **keywords)


def uneven_chunks(rng, size: int, smallest: int = 1) -> tuple[int, ...]:
    """A random partition of ``size`` into chunks of 1 to about half of it."""
    chunks, left = [], size
    while left:
        piece = min(left, int(rng.integers(smallest, max(smallest, size // 2) + 1)))
        chunks.append(piece)
        left -= piece
    return tuple(chunks)


def _values(rng, shape, dtype):
    return rng.integers(-3, 4, shape).astype(dtype)


def _geometry(rng, rank):
    top = {1: 12, 2: 7, 3: 4}[rank]
    spatial = tuple(int(v) for v in rng.integers(1, top + 1, rank))
    kernel = tuple(int(v) for v in rng.integers(1, 5, rank))
    strides = [int(v) for v in rng.integers(1, 5, rank)]
    dilations = [int(v) for v in rng.choice([1, 1, 2, 3], rank)]
    return spatial, kernel, strides, dilations


def _natural(spatial, kernel, strides, dilations):
    return [(x - 1) * s + (k - 1) * d + 1 for x, k, s, d in zip(spatial, kernel, strides, dilations)]


def _output_shape(rng, natural):
    """Larger or smaller than natural, or None."""
    if rng.random() < 0.4:
        return None
    return [max(1, n + int(rng.integers(-4, 6))) for n in natural]


def _openvino(rng, rank, dtype, grouped):
    spatial, kernel, strides, dilations = _geometry(rng, rank)
    groups = int(rng.integers(1, 3)) if grouped else 1
    ci, co, n = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    data = _values(rng, (n, groups * ci) + spatial, dtype)
    shape = (groups, ci, co) + kernel if grouped else (ci, co) + kernel
    filter = _values(rng, shape, dtype)
    auto_pad = str(rng.choice(["explicit", "same_upper", "same_lower", "valid"]))
    attributes = dict(strides=strides, dilations=dilations, auto_pad=auto_pad,
                      pads_begin=[int(v) for v in rng.integers(0, 4, rank)],
                      pads_end=[int(v) for v in rng.integers(0, 4, rank)],
                      output_padding=[int(v) for v in rng.integers(0, 3, rank)])
    attributes["output_shape"] = _output_shape(rng, _natural(spatial, kernel, strides, dilations))
    dialect = "group_convolution_backprop_data" if grouped else "convolution_backprop_data"
    return dialect, (data, filter), attributes, False


def _onednn(rng, rank, dtype):
    spatial, kernel, strides, dilations = _geometry(rng, rank)
    groups = int(rng.integers(1, 3))
    ci, co, n = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    channels_last = bool(rng.random() < 0.5)
    shape = (n,) + spatial + (groups * ci,) if channels_last else (n, groups * ci) + spatial
    layout = str(rng.choice(FILTER_FORMATS))
    io = {"I": groups * ci, "O": co}
    filter_shape = (kernel + tuple(io[c] for c in layout if c != "X") if layout[0] == "X"
                    else tuple(io[c] for c in layout if c != "X") + kernel)
    operands = (_values(rng, shape, dtype), _values(rng, filter_shape, dtype))
    if rng.random() < 0.5:
        operands += (_values(rng, (groups * co,), dtype),)
    attributes = dict(strides=strides, dilations=dilations, groups=groups,
                      auto_pad=str(rng.choice(["none", "same_upper", "same_lower", "valid"])),
                      pads_begin=[int(v) for v in rng.integers(0, 4, rank)],
                      pads_end=[int(v) for v in rng.integers(0, 4, rank)],
                      output_padding=[int(rng.integers(0, s)) for s in strides],
                      data_format="NXC" if channels_last else "NCX", filter_format=layout)
    if rng.random() < 0.3:
        attributes["output_shape"] = _output_shape(
            rng, _natural(spatial, kernel, strides, dilations)) or None
    return "conv_transpose", operands, attributes, channels_last


def _onnx(rng, rank, dtype):
    spatial, kernel, strides, dilations = _geometry(rng, rank)
    group = int(rng.integers(1, 3))
    ci, co, n = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    operands = (_values(rng, (n, group * ci) + spatial, dtype),
                _values(rng, (group * ci, co) + kernel, dtype))
    if rng.random() < 0.5:
        operands += (_values(rng, (group * co,), dtype),)
    attributes = dict(strides=strides, dilations=dilations, group=group,
                      auto_pad=str(rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER",
                                               "VALID"])),
                      pads=[int(v) for v in rng.integers(0, 4, 2 * rank)],
                      output_padding=[int(v) for v in rng.integers(0, 3, rank)])
    attributes["output_shape"] = _output_shape(rng, _natural(spatial, kernel, strides, dilations))
    return "onnx_conv_transpose", operands, attributes, False


DIALECTS = ("convolution_backprop_data", "group_convolution_backprop_data", "conv_transpose",
            "onnx_conv_transpose")


def random_layer(seed: int, dialect: str, dtype=np.float32) -> Layer:
    """A random valid layer of ``dialect`` with random data chunks (and, for a quarter of
    the seeds, random output chunks)."""
    rng = np.random.default_rng(seed)
    while True:
        rank = int(rng.integers(1, 4))
        if dialect == "conv_transpose":
            name, operands, attributes, channels_last = _onednn(rng, rank, dtype)
        elif dialect == "onnx_conv_transpose":
            name, operands, attributes, channels_last = _onnx(rng, rank, dtype)
        else:
            name, operands, attributes, channels_last = _openvino(
                rng, rank, dtype, dialect == "group_convolution_backprop_data")
        try:
            plan = getattr(ct.shapes, name)(*(a.shape for a in operands), **attributes)
        except ct.ConvTransposeError:
            continue  # an invalid draw (a dialect's own rule): draw again
        break
    data = operands[0]
    channel = data.ndim - 1 if channels_last else 1
    chunks = tuple((size,) if axis == channel else uneven_chunks(rng, size)
                   for axis, size in enumerate(data.shape))
    layer = Layer(name, operands, attributes, chunks)
    if rng.random() < 0.25:
        out_channel = len(plan.output_shape) - 1 if channels_last else 1
        layer.out_chunks = tuple((size,) if axis == out_channel else uneven_chunks(rng, size)
                                 for axis, size in enumerate(plan.output_shape))
    return layer
