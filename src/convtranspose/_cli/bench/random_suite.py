"""The random suite: layers drawn from a seed, so that no fixed list can be tuned to.

``convtranspose bench --random SEED [--count N]`` times ``N`` layers (at least
:data:`MIN_COUNT`) drawn by :func:`random_layers`.  Each layer comes from one of
:data:`FAMILIES`, shapes of real networks with their sizes drawn from lists of the sizes
those networks use; the families take turns in a seeded order, so that every family
appears in every draw of :data:`MIN_COUNT` layers.

Reproducible everywhere: every choice is made from :meth:`random.Random.random` of
``random.Random(seed)``, the one generator method whose sequence Python guarantees
across versions, with integer arithmetic only (no ``math.log``, whose last bit may
differ between C libraries; no NumPy, whose ``Generator`` methods may change streams
between versions).  The same seed gives the same layers on every machine.

Every layer is valid for all four dialects and every peer: ``output_padding`` is below
the stride (oneDNN's rule, stricter than PyTorch's "below the stride or the
dilation"), and the pads are at most half the dilated kernel extent, so every output
axis is positive.  Each layer's work is then bounded by :func:`fit_to_caps`.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from .suite import Layer

#: The fewest layers a random suite has: enough for every family to appear several times.
MIN_COUNT = 40

#: Per-layer bounds that keep a 40-layer run with three peers to a few minutes on two
#: cores: FLOPs of the uncropped result (:attr:`Layer.flops`), and elements of each of
#: data, filter and output (16 Mi float32 elements = 64 MiB per tensor).
MAX_FLOPS = 2_000_000_000
MAX_ELEMENTS = 16 << 20

#: Spatial axes above this are halved before the batch is (see :func:`fit_to_caps`).
SPATIAL_FLOOR = 8


class _Draw:
    """Choices made from ``random.Random(seed).random()`` alone (see the module notes)."""

    def __init__(self, seed: int):
        self._random = random.Random(seed)

    def below(self, n: int) -> int:
        """An integer in ``[0, n)``."""
        return min(int(self._random.random() * n), n - 1)

    def choice(self, items):
        return items[self.below(len(items))]

    def between(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        return low + self.below(high - low + 1)

    def shuffled(self, items) -> list:
        """A Fisher-Yates shuffle driven by :meth:`below`."""
        items = list(items)
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]
        return items


def _same_upsampling(kernel: int, stride: int) -> tuple[int, int]:
    """``(pad, output_padding)`` that make the output ``stride`` times the input, as
    decoders choose them (k4 s2 p1, k16 s8 p4, k3 s2 p1 op1); output_padding stays
    below the stride, so stride 1 with an even kernel leaves the output one longer."""
    if kernel <= stride:
        return 0, stride - kernel
    pad = (kernel - stride + 1) // 2
    output_padding = 2 * pad - (kernel - stride)
    if output_padding >= stride:  # stride 1, even kernel
        return (kernel - 1) // 2, 0
    return pad, output_padding


def _batch(draw: _Draw) -> int:
    return draw.choice([1, 1, 2, 4, 8, 16])


def _side(draw: _Draw, rank: int, sizes: list[int]) -> tuple[int, ...]:
    """Square (cubic) inputs mostly; one in four images twice as wide as high."""
    side = draw.choice(sizes)
    if rank == 2 and draw.below(4) == 0:
        return side, 2 * side
    return (side,) * rank


def _dcgan_up(draw: _Draw) -> Layer:
    """DCGAN/StyleGAN generator stages: k4 s2 p1, channels halving as the image doubles."""
    side = draw.choice([4, 8, 16, 32])
    in_channels = 4096 // side
    out_channels = draw.choice([in_channels // 2, in_channels // 2, 3])
    return Layer("", _batch(draw), in_channels, out_channels, (side, side), 4, 2, 1)


def _unet_up(draw: _Draw) -> Layer:
    """U-Net decoder upsampling: k2 s2, channels halving."""
    in_channels = draw.choice([64, 128, 256, 512, 1024])
    spatial = _side(draw, 2, [8, 16, 28, 32, 56, 64])
    return Layer("", draw.choice([1, 1, 2, 4]), in_channels, in_channels // 2, spatial, 2, 2)


def _volume_up(draw: _Draw) -> Layer:
    """3D U-Net / V-Net decoders: k2 s2, k3 s2 p1 op1 or k4 s2 p1 on volumes."""
    in_channels = draw.choice([16, 32, 64, 128, 256])
    kernel, pad, output_padding = draw.choice([(2, 0, 0), (3, 1, 1), (4, 1, 0)])
    return Layer("", draw.choice([1, 1, 2]), in_channels, in_channels // 2,
                 _side(draw, 3, [4, 8, 12, 16, 24]), kernel, 2, pad,
                 output_padding=output_padding)


def _vocoder_up(draw: _Draw) -> Layer:
    """HiFi-GAN / MelGAN upsampling on audio: kernel twice the stride, strides up to 16."""
    stride = draw.choice([2, 3, 4, 5, 8, 8, 16])
    kernel = 2 * stride
    pad, output_padding = _same_upsampling(kernel, stride)
    in_channels = draw.choice([64, 128, 256, 512])
    return Layer("", draw.choice([1, 1, 2, 4]), in_channels, in_channels // 2,
                 (draw.choice([64, 256, 1024, 4096, 8192]),), kernel, stride, pad,
                 output_padding=output_padding)


def _bilinear_up(draw: _Draw) -> Layer:
    """FCN / segmentation heads: bilinear-style upsampling by 2-16, kernel twice the
    stride, one filter per channel (depthwise groups), class counts as channels."""
    stride = draw.choice([2, 4, 8, 16])
    channels = draw.choice([3, 19, 21, 64, 150, 256])
    return Layer("", draw.choice([1, 1, 2, 4]), channels, channels,
                 _side(draw, 2, [8, 16, 32, 64]), 2 * stride, stride, stride // 2,
                 groups=channels)


def _depthwise(draw: _Draw) -> Layer:
    """Depthwise transposed convolutions (MobileNet-style decoders), channel multiplier 1-2."""
    channels = draw.choice([32, 64, 128, 256, 512, 1024])
    kernel, stride = draw.choice([3, 4, 5, 7]), draw.choice([1, 2])
    pad, output_padding = _same_upsampling(kernel, stride)
    rank = draw.choice([1, 2, 2])
    sizes = [7, 14, 28, 56] if rank == 2 else [128, 512, 2048]
    multiplier = draw.choice([1, 1, 2]) if channels <= 512 else 1  # at most 1024 outputs
    return Layer("", _batch(draw), channels, channels * multiplier,
                 _side(draw, rank, sizes), kernel, stride, pad,
                 output_padding=output_padding, groups=channels)


def _grouped(draw: _Draw) -> Layer:
    """Grouped transposed convolutions (ResNeXt-style decoders): 2-32 groups."""
    groups = draw.choice([2, 4, 8, 16, 32])
    per_in = draw.choice([4, 8, 16, 32])
    per_out = draw.choice([4, 8, 16, 32])
    kernel, stride = draw.choice([3, 4]), draw.choice([1, 2])
    pad, output_padding = _same_upsampling(kernel, stride)
    return Layer("", _batch(draw), groups * per_in, groups * per_out,
                 _side(draw, 2, [7, 14, 28]), kernel, stride, pad,
                 output_padding=output_padding, groups=groups)


def _dilated(draw: _Draw) -> Layer:
    """Dilated (atrous) transposed convolutions, the pad none or half the dilated kernel."""
    dilation, kernel, stride = draw.choice([2, 3, 4]), draw.choice([2, 3]), draw.choice([1, 2])
    pad = draw.choice([0, dilation * (kernel - 1) // 2])
    channels = draw.choice([16, 32, 64, 128, 256])
    rank = draw.choice([1, 2, 2])
    sizes = [14, 28, 56] if rank == 2 else [256, 1024]
    return Layer("", _batch(draw), channels, channels, _side(draw, rank, sizes), kernel, stride,
                 pad, dilation, draw.below(stride))


def _stride_one(draw: _Draw) -> Layer:
    """Stride-1 transposed convolutions (the adjoint of a "same" convolution), k1-7."""
    kernel = draw.choice([1, 3, 5, 7])
    in_channels = draw.choice([16, 32, 64, 128, 256, 512])
    return Layer("", draw.choice([1, 1, 2, 4]), in_channels,
                 draw.choice([in_channels, in_channels // 2, 3]),
                 _side(draw, 2, [14, 28, 56, 64]), kernel, 1, (kernel - 1) // 2)


def _pointwise(draw: _Draw) -> Layer:
    """1x1 kernels, strided or not (projection shortcuts of decoders)."""
    stride = draw.between(1, 4)
    rank = draw.choice([1, 2, 2])
    sizes = [7, 14, 28, 56] if rank == 2 else [256, 1024, 4096]
    return Layer("", _batch(draw), draw.choice([32, 64, 256, 1024]),
                 draw.choice([16, 64, 256, 512]), _side(draw, rank, sizes), 1, stride,
                 output_padding=draw.below(stride))


def _any_geometry(draw: _Draw) -> Layer:
    """Any geometry the specs allow within the suite's ranges: rank 1-3, kernel 1-7,
    stride 1-4, dilation 1-3, any valid pad and output_padding, groups incl. depthwise."""
    rank = draw.choice([1, 2, 2, 3])
    kernel, stride, dilation = draw.between(1, 7), draw.between(1, 4), draw.choice([1, 1, 2, 3])
    pad = draw.between(0, dilation * (kernel - 1) // 2)
    groups = draw.choice([1, 1, 1, 2, 4, 0])  # 0: depthwise
    if groups:
        in_channels = groups * draw.choice([3, 8, 16, 32, 64, 128, 256])
        out_channels = groups * draw.choice([3, 8, 16, 64, 128])
    else:
        in_channels = groups = draw.choice([3, 8, 16, 32, 64, 128])
        out_channels = in_channels * draw.choice([1, 1, 2])
    sizes = {1: [16, 100, 1000, 4000], 2: [5, 9, 17, 33, 50], 3: [3, 6, 10, 16]}[rank]
    spatial = tuple(draw.choice(sizes) for _ in range(rank))
    return Layer("", _batch(draw), in_channels, out_channels, spatial, kernel, stride, pad,
                 dilation, draw.below(stride), groups)


#: The families, each a function drawing one layer (its name is set afterwards).
FAMILIES = {
    "DCGAN-up": _dcgan_up,
    "U-Net-up": _unet_up,
    "3D-up": _volume_up,
    "vocoder-up": _vocoder_up,
    "bilinear-up": _bilinear_up,
    "depthwise": _depthwise,
    "grouped": _grouped,
    "dilated": _dilated,
    "stride-1": _stride_one,
    "pointwise": _pointwise,
    "any-geometry": _any_geometry,
}


def tensor_elements(layer: Layer) -> dict[str, int]:
    """Elements of the layer's data, filter and output."""
    return {
        "data": layer.batch * layer.in_channels * math.prod(layer.spatial),
        "filter": layer.in_channels * (layer.out_channels // layer.groups) * layer.kernel ** layer.rank,
        "output": layer.batch * layer.out_channels * math.prod(layer.output_spatial),
    }


def within_caps(layer: Layer) -> bool:
    """Whether the layer's FLOPs and every tensor are within :data:`MAX_FLOPS` and
    :data:`MAX_ELEMENTS`."""
    return layer.flops <= MAX_FLOPS and max(tensor_elements(layer).values()) <= MAX_ELEMENTS


def _halve_channels(layer: Layer) -> Layer:
    """Halve the larger per-group channel count (groups stay, so depthwise stays depthwise)."""
    per_in, per_out = layer.in_channels // layer.groups, layer.out_channels // layer.groups
    if per_in >= per_out:
        per_in = max(1, per_in // 2)
    else:
        per_out = max(1, per_out // 2)
    return replace(layer, in_channels=per_in * layer.groups, out_channels=per_out * layer.groups)


def _halve_largest_axis(layer: Layer) -> Layer:
    axis = max(range(layer.rank), key=lambda i: layer.spatial[i])
    spatial = list(layer.spatial)
    spatial[axis] = max(1, spatial[axis] // 2)
    return replace(layer, spatial=tuple(spatial))


def fit_to_caps(layer: Layer) -> Layer:
    """The layer shrunk until :func:`within_caps`, the geometry (kernel, stride, pads,
    dilation, groups, layout) untouched.

    Rule: a filter over the cap halves the larger per-group channel count; otherwise
    the largest spatial axis is halved while it is above :data:`SPATIAL_FLOOR`, then the
    batch, then the spatial axes down to 1, and last the per-group channels.  Pads stay
    valid at any size (at most half the dilated kernel extent), and sizes only fall,
    so this ends.
    """
    while not within_caps(layer):
        if tensor_elements(layer)["filter"] > MAX_ELEMENTS:
            layer = _halve_channels(layer)
        elif max(layer.spatial) > SPATIAL_FLOOR:
            layer = _halve_largest_axis(layer)
        elif layer.batch > 1:
            layer = replace(layer, batch=layer.batch // 2)
        elif max(layer.spatial) > 1:
            layer = _halve_largest_axis(layer)
        else:
            layer = _halve_channels(layer)
    return layer


def layer_name(family: str, layer: Layer) -> str:
    """``family N.. Ci->Co spatial k.. s.. [p..] [d..] [op..] [g..]``, the fixed suite's style
    (``L`` and a length for one axis; the layout is added by :attr:`Layer.label`)."""
    spatial = f"L{layer.spatial[0]}" if layer.rank == 1 else "x".join(map(str, layer.spatial))
    parts = [family, f"N{layer.batch}", f"{layer.in_channels}->{layer.out_channels}", spatial,
             f"k{layer.kernel}", f"s{layer.stride}"]
    parts += [f"p{layer.pad}"] if layer.pad else []
    parts += [f"d{layer.dilation}"] if layer.dilation > 1 else []
    parts += [f"op{layer.output_padding}"] if layer.output_padding else []
    parts += [f"g{layer.groups}"] if layer.groups > 1 else []
    return " ".join(parts)


def _check_arguments(seed: int, count: int) -> None:
    for name, value in (("seed", seed), ("count", count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed} (Random seeds a negative"
                         " int by its absolute value, so -s and s would draw the same layers)")
    if count < MIN_COUNT:
        raise ValueError(f"count must be at least {MIN_COUNT}, got {count} (fewer layers would"
                         f" leave some of the {len(FAMILIES)} families out of the suite)")


def random_layers(seed: int, count: int = MIN_COUNT) -> list[Layer]:
    """``count`` layers drawn from ``seed``: the same on every machine and version.

    Parameters
    ----------
    seed : int
        Non-negative; seeds ``random.Random``.
    count : int
        At least :data:`MIN_COUNT`.

    Returns
    -------
    list of Layer
        Float32 layers named ``family N.. Ci->Co spatial k.. s.. ...``; the families
        take turns in an order shuffled per round of ``len(FAMILIES)`` layers, each
        layer is NCX or NXC at even odds and shrunk by :func:`fit_to_caps`.

    Raises
    ------
    TypeError
        If ``seed`` or ``count`` is not an int.
    ValueError
        If ``seed`` is negative or ``count`` is below :data:`MIN_COUNT`.
    """
    _check_arguments(seed, count)
    draw = _Draw(seed)
    names = list(FAMILIES)
    layers, seen = [], set()
    while len(layers) < count:
        for family in draw.shuffled(names)[:count - len(layers)]:
            layer = fit_to_caps(FAMILIES[family](draw))
            layer = replace(layer, name=layer_name(family, layer),
                            layout=draw.choice(["NCX", "NXC"]), quick=False)
            label, copy = layer.label, 2
            while label in seen:  # the same shape drawn twice keeps its own row
                layer = replace(layer, name=f"{layer_name(family, layer)} #{copy}")
                label, copy = layer.label, copy + 1
            seen.add(label)
            layers.append(layer)
    return layers


def family_of(layer: Layer) -> str:
    """The family a random layer was drawn from (the first word of its name)."""
    return layer.name.split()[0]
