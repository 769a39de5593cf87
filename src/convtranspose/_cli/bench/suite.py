"""The benchmark suite: real layers (DCGAN, U-Net, FCN, HiFi-GAN, 3D U-Net, depthwise,
grouped, dilated, tiny), their inputs and their canonical shapes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

THREADS = 2


#: Pause before each implementation's calls in a round (see bench_layer).
SETTLE_SECONDS = 0.1


@dataclass(frozen=True)
class Layer:
    """One benchmark layer, in PyTorch/ONNX terms (symmetric pads)."""

    name: str
    batch: int
    in_channels: int
    out_channels: int
    spatial: tuple[int, ...]
    kernel: int
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    output_padding: int = 0
    groups: int = 1
    layout: str = "NCX"  # "NXC": channels-last through conv_transpose
    dtype: str = "float32"
    quick: bool = True

    @property
    def rank(self) -> int:
        return len(self.spatial)

    @property
    def label(self) -> str:
        suffix = "" if self.layout == "NCX" else " NXC"
        suffix += "" if self.dtype == "float32" else f" {self.dtype}"
        return self.name + suffix

    @property
    def flops(self) -> int:
        """Multiply-adds times two over the uncropped result."""
        return (2 * self.batch * self.in_channels * (self.out_channels // self.groups)
                * self.kernel ** self.rank * math.prod(self.spatial))

    @property
    def useful_flops(self) -> int:
        """Multiply-adds times two whose products land inside the (cropped) result:
        what any exact implementation must compute."""
        pairs = 1
        for size, out_size in zip(self.spatial, self.output_spatial):
            at = (np.arange(size)[:, None] * self.stride
                  + np.arange(self.kernel)[None, :] * self.dilation - self.pad)
            pairs *= int(np.count_nonzero((at >= 0) & (at < out_size)))
        return 2 * self.batch * self.in_channels * (self.out_channels // self.groups) * pairs

    @property
    def output_spatial(self) -> tuple[int, ...]:
        return tuple((x - 1) * self.stride + (self.kernel - 1) * self.dilation + 1
                     + self.output_padding - 2 * self.pad for x in self.spatial)


def _variants(layer: Layer, **changes) -> Layer:
    values = asdict(layer)
    values.update(changes)
    return Layer(**values)


_BASE = [
    Layer("DCGAN N16 512->256 8x8 k4 s2 p1", 16, 512, 256, (8, 8), 4, 2, 1),
    Layer("DCGAN N16 256->128 16x16 k4 s2 p1", 16, 256, 128, (16, 16), 4, 2, 1),
    Layer("DCGAN N16 128->3 32x32 k4 s2 p1", 16, 128, 3, (32, 32), 4, 2, 1),
    Layer("U-Net N1 512->256 32x32 k2 s2", 1, 512, 256, (32, 32), 2, 2),
    Layer("FCN-32x N1 21->21 16x16 k64 s32 p16", 1, 21, 21, (16, 16), 64, 32, 16),
    Layer("FCN-2x N1 21->21 16x16 k4 s2 p1", 1, 21, 21, (16, 16), 4, 2, 1),
    Layer("stride-1 N1 64->64 64x64 k3 p1", 1, 64, 64, (64, 64), 3, 1, 1),
    Layer("dilated N4 64->64 28x28 k3 s2 p2 d2 op1", 4, 64, 64, (28, 28), 3, 2, 2, 2, 1),
    Layer("depthwise N8 256 28x28 k4 s2 p1 g256", 8, 256, 256, (28, 28), 4, 2, 1, groups=256),
    Layer("grouped N8 256->256 28x28 k4 s2 p1 g8", 8, 256, 256, (28, 28), 4, 2, 1, groups=8),
    Layer("HiFi-GAN N1 512->256 L8192 k16 s8 p4", 1, 512, 256, (8192,), 16, 8, 4, quick=False),
    Layer("HiFi-GAN N1 256->128 L65536 k4 s2 p1", 1, 256, 128, (65536,), 4, 2, 1, quick=False),
    Layer("3D N1 128->64 16^3 k2 s2", 1, 128, 64, (16, 16, 16), 2, 2),
    Layer("3D N1 64->32 32^3 k3 s2 p1 op1", 1, 64, 32, (32, 32, 32), 3, 2, 1, 1, 1, quick=False),
    Layer("tiny N1 2->3 5x5 k3 s2 p1", 1, 2, 3, (5, 5), 3, 2, 1),
]


_QUICK_NXC = {"DCGAN N16 256->128 16x16 k4 s2 p1", "depthwise N8 256 28x28 k4 s2 p1 g256",
              "tiny N1 2->3 5x5 k3 s2 p1"}


_HALF = ["DCGAN N16 256->128 16x16 k4 s2 p1", "U-Net N1 512->256 32x32 k2 s2",
         "grouped N8 256->256 28x28 k4 s2 p1 g8"]


#: The whole suite: float32 NCX, the same layers channels-last, and a few half-precision rows.
SUITE: list[Layer] = (
    _BASE
    + [_variants(layer, layout="NXC", quick=layer.name in _QUICK_NXC) for layer in _BASE]
    + [_variants(layer, dtype=dtype, quick=False)
       for dtype in ("float16", "bfloat16") for layer in _BASE if layer.name in _HALF]
)


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def make_inputs(layer: Layer, seed: int = 0) -> dict[str, np.ndarray]:
    """Data (NCX) and weights (Ci, Co/g, K...) in float32, plus the layer-dtype copies."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((layer.batch, layer.in_channels) + layer.spatial, dtype=np.float32)
    weights = rng.standard_normal(
        (layer.in_channels, layer.out_channels // layer.groups) + (layer.kernel,) * layer.rank,
        dtype=np.float32) / math.sqrt(layer.in_channels // layer.groups * layer.kernel ** layer.rank)
    dtype = numpy_dtype(layer.dtype)
    return {"data": data.astype(dtype), "weights": weights.astype(dtype)}


def kernel_weights_shape(layer: Layer) -> tuple[int, ...]:
    g = layer.groups
    return (g, layer.in_channels // g, layer.out_channels // g) + (layer.kernel,) * layer.rank


def layer_plan_axes(layer: Layer):
    from ... import shapes

    rank = layer.rank
    plan = shapes.onnx_conv_transpose(
        (layer.batch, layer.in_channels) + layer.spatial,
        (layer.in_channels, layer.out_channels // layer.groups) + (layer.kernel,) * rank,
        group=layer.groups, strides=[layer.stride] * rank, pads=[layer.pad] * (2 * rank),
        dilations=[layer.dilation] * rank, output_padding=[layer.output_padding] * rank)
    return plan.axes
