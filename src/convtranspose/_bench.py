"""Benchmark suite: convtranspose against the installed peer runtimes, in one process.

Run with ``python -m convtranspose bench`` (or ``python benchmarks/peers.py``).
Every layer is timed for convtranspose and for each installed peer (PyTorch,
OpenVINO, onnxruntime) on identical inputs, after warm-up, reporting medians; a
NumPy sgemm of the layer's FLOP count gives the roofline, and the machine's FMA
peak and copy bandwidth (measured once per run) each layer's floor, the least time
any implementation needs (``x at peak``: how far the best peer is from it).  Every
peer's result is checked against ours first, so a fast wrong answer is never
reported.

Outputs (only inside ``--out``): ``results.md`` (Markdown table), ``results.json``
and ``ratios.png`` (a bar chart, needs matplotlib).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass

import numpy as np

from . import _blas, _kernel

__all__ = ["Layer", "SUITE", "main"]

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


# --------------------------------------------------------------------------- inputs


def _numpy_dtype(name: str) -> np.dtype:
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
    dtype = _numpy_dtype(layer.dtype)
    return {"data": data.astype(dtype), "weights": weights.astype(dtype)}


# --------------------------------------------------------------------------- runners
# Each runner factory returns a zero-argument callable computing the layer (inputs prepared
# and, for the runtimes, the model compiled beforehand) and a function turning its result
# into an NCX float32 NumPy array for the check.


#: Our timed calls write into one output array (``out=``) when it has at least this
#: many bytes: a new output of tens of MB costs fresh pages (5-16 ms for HiFi-GAN's
#: 64 MB), while a small one comes from memory NumPy's allocator just freed, cheaper
#: than checking ``out`` (the tiny layer: 0.8 us of 9 in a loop).
REUSE_MIN_BYTES = 1 << 20


def _ours(layer: Layer, inputs, reuse_output: bool = False):
    """Our runner; with ``reuse_output`` every call writes into one output array
    (``out=``, from :data:`REUSE_MIN_BYTES`), as OpenVINO's request writes into its
    output tensor."""
    import convtranspose as ct

    data, weights = inputs["data"], inputs["weights"]
    rank = layer.rank
    if layer.layout == "NCX":
        def call(**out):
            return ct.onnx_conv_transpose(
                data, weights, group=layer.groups, strides=[layer.stride] * rank,
                pads=[layer.pad] * (2 * rank), dilations=[layer.dilation] * rank,
                output_padding=[layer.output_padding] * rank, **out)

        def to_ncx(out):
            return np.asarray(out, np.float32)
    else:
        # Channels-last: NXC data, XIO filter (oneDNN's defaults), prepared outside the timing.
        data_nxc = np.ascontiguousarray(np.moveaxis(data, 1, -1))
        weights_xio = np.ascontiguousarray(_iox_to_xio(weights, layer.groups))

        def call(**out):
            return ct.conv_transpose(
                data_nxc, weights_xio, strides=[layer.stride] * rank,
                pads_begin=[layer.pad] * rank, pads_end=[layer.pad] * rank,
                dilations=[layer.dilation] * rank, output_padding=[layer.output_padding] * rank,
                groups=layer.groups, data_format="NXC", filter_format="XIO", **out)

        def to_ncx(out):
            return np.moveaxis(np.asarray(out, np.float32), -1, 1)
    output = call() if reuse_output else None
    if output is None or output.nbytes < REUSE_MIN_BYTES:
        return call, to_ncx
    return lambda: call(out=output), to_ncx


def _iox_to_xio(weights: np.ndarray, groups: int) -> np.ndarray:
    """(I, O/g, K...) -> (K..., I, O/g): oneDNN's XIO, I counting every input channel."""
    rank = weights.ndim - 2
    return weights.transpose(tuple(range(2, 2 + rank)) + (0, 1))


def _torch(layer: Layer, inputs):
    import torch

    torch.set_num_threads(THREADS)
    dtype = {"float32": torch.float32, "float16": torch.float16,
             "bfloat16": torch.bfloat16}[layer.dtype]
    data = torch.from_numpy(inputs["data"].astype(np.float32)).to(dtype)
    weights = torch.from_numpy(inputs["weights"].astype(np.float32)).to(dtype)
    function = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
                3: torch.nn.functional.conv_transpose3d}[layer.rank]
    if layer.layout == "NXC":
        if layer.rank == 1:
            data = data.permute(0, 2, 1).contiguous().permute(0, 2, 1)
        else:
            fmt = torch.channels_last if layer.rank == 2 else torch.channels_last_3d
            data = data.contiguous(memory_format=fmt)
            weights = weights.contiguous(memory_format=fmt)
    kwargs = dict(stride=layer.stride, padding=layer.pad, output_padding=layer.output_padding,
                  groups=layer.groups, dilation=layer.dilation)

    def run():
        with torch.inference_mode():
            return function(data, weights, **kwargs)
    return run, lambda out: out.float().contiguous().numpy()


def _openvino(layer: Layer, inputs):
    import openvino as ov
    from openvino import opset1
    from openvino.utils.node_factory import NodeFactory

    if layer.dtype == "bfloat16":
        raise _Unsupported("bfloat16 inputs are not accepted by the Python API")
    data, weights = inputs["data"], inputs["weights"]
    rank, groups = layer.rank, layer.groups
    element = {"float32": ov.Type.f32, "float16": ov.Type.f16}[layer.dtype]
    shape = data.shape if layer.layout == "NCX" else (data.shape[0],) + data.shape[2:] + data.shape[1:2]
    parameter = opset1.parameter(list(shape), element)
    node = parameter
    if layer.layout == "NXC":
        node = opset1.transpose(node, opset1.constant(np.array((0, rank + 1) + tuple(range(1, rank + 1)), np.int64)))
    attrs = {"strides": [layer.stride] * rank, "dilations": [layer.dilation] * rank,
             "pads_begin": [layer.pad] * rank, "pads_end": [layer.pad] * rank,
             "output_padding": [layer.output_padding] * rank, "auto_pad": "explicit"}
    if groups == 1:
        filter_node = opset1.constant(weights)
        conv = NodeFactory("opset1").create("ConvolutionBackpropData", [node, filter_node], attrs)
    else:
        ci, co = weights.shape[0] // groups, weights.shape[1]
        filter_node = opset1.constant(weights.reshape((groups, ci, co) + weights.shape[2:]))
        conv = NodeFactory("opset1").create("GroupConvolutionBackpropData", [node, filter_node], attrs)
    node = conv
    if layer.layout == "NXC":
        node = opset1.transpose(node, opset1.constant(np.array((0,) + tuple(range(2, rank + 2)) + (1,), np.int64)))
    model = ov.Model([node], [parameter], "convtranspose_bench")
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                      "INFERENCE_NUM_THREADS": str(THREADS)})
    request = compiled.create_infer_request()
    feed = data if layer.layout == "NCX" else np.ascontiguousarray(np.moveaxis(data, 1, -1))

    def run():
        return request.infer({0: feed}, share_inputs=True, share_outputs=True)[0]

    if layer.layout == "NCX":
        return run, lambda out: np.array(out, np.float32)
    return run, lambda out: np.moveaxis(np.array(out, np.float32), -1, 1)


def _onnxruntime(layer: Layer, inputs):
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    if layer.dtype != "float32":
        raise _Unsupported("the CPU provider has ConvTranspose in float32 only")
    data, weights = inputs["data"], inputs["weights"]
    rank = layer.rank
    nodes, x_name = [], "X"
    shape = list(data.shape)
    if layer.layout == "NXC":
        shape = [data.shape[0]] + list(data.shape[2:]) + [data.shape[1]]
        nodes.append(helper.make_node("Transpose", ["X"], ["Xt"], perm=[0, rank + 1] + list(range(1, rank + 1))))
        x_name = "Xt"
    nodes.append(helper.make_node(
        "ConvTranspose", [x_name, "W"], ["Yc"], strides=[layer.stride] * rank,
        pads=[layer.pad] * (2 * rank), dilations=[layer.dilation] * rank, group=layer.groups,
        output_padding=[layer.output_padding] * rank, kernel_shape=[layer.kernel] * rank))
    if layer.layout == "NXC":
        nodes.append(helper.make_node("Transpose", ["Yc"], ["Y"], perm=[0] + list(range(2, rank + 2)) + [1]))
    else:
        nodes[-1].output[0] = "Y"
    graph = helper.make_graph(
        nodes, "bench", [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(weights, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    feed = {"X": data if layer.layout == "NCX" else np.ascontiguousarray(np.moveaxis(data, 1, -1))}

    def run():
        return session.run(None, feed)[0]

    if layer.layout == "NCX":
        return run, lambda out: out
    return run, lambda out: np.moveaxis(out, -1, 1)


class _Unsupported(Exception):
    """The peer cannot run this layer (dtype or layout); the row shows a dash."""


PEERS = {"torch": _torch, "openvino": _openvino, "onnxruntime": _onnxruntime}


def installed_peers(requested: list[str] | None = None) -> list[str]:
    import importlib.util

    names = requested or list(PEERS)
    modules = {"torch": "torch", "openvino": "openvino", "onnxruntime": "onnxruntime"}
    return [name for name in names if importlib.util.find_spec(modules[name]) is not None]


# --------------------------------------------------------------------------- measuring


def _median_seconds(run, repeat: int, warmup: int, budget: float) -> float:
    for _ in range(warmup):
        run()
    times = []
    started = time.perf_counter()
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
        if len(times) >= 3 and time.perf_counter() - started > budget:
            break
    return statistics.median(times)


def _peak_extra_bytes(run) -> tuple[int, int]:
    """(peak bytes NumPy allocated during one call, bytes of the result)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result.nbytes


def _sgemm_seconds(flops: int, repeat: int) -> float:
    """A square-ish NumPy float32 GEMM with (at least) the layer's FLOP count."""
    side = max(32, round((flops / 2) ** (1 / 3)))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((side, side), dtype=np.float32)
    b = rng.standard_normal((side, side), dtype=np.float32)
    seconds = _median_seconds(lambda: a @ b, repeat, 2, 2.0)
    return seconds * flops / (2 * side ** 3)


def peak_chains(vector_bytes: int) -> int:
    """Independent FMA chains per thread in :func:`fma_peak_flops`.

    Enough to hide the FMA latency on any x86 core (two pipes, 4-5 cycles), and with
    the two operands few enough to stay in registers: 16 with AVX-512's 32, 12 with
    AVX2's 16.  Sixteen chains on AVX2 spill to the stack every iteration (Zen 3, two
    threads: 76 GFLOP/s, against 194 with 12 chains and 189 with 8).
    """
    return 16 if vector_bytes >= 64 else 12


def _peak_kernel(lanes: int, chain_count: int):
    from ._numba_vectors import compile_source

    chains = range(chain_count)
    lines = ["def peak(buffer, count):"]
    lines += [f"    a{i} = vector_load(buffer, {i * lanes}, {lanes})" for i in chains]
    lines += [f"    x = vector_load(buffer, {chain_count * lanes}, {lanes})",
              f"    y = vector_load(buffer, {(chain_count + 1) * lanes}, {lanes})",
              "    for _ in range(count):"]
    lines += [f"        a{i} = vector_fma(a{i}, x, y)" for i in chains]
    lines += [f"    vector_store(buffer, {i * lanes}, a{i})" for i in chains]
    return compile_source("\n".join(lines) + "\n", "peak")


def fma_peak_flops(threads: int = THREADS, count: int = 10_000_000) -> float | None:
    """The float32 FMA peak (FLOP/s) of ``threads`` threads: register-only vector FMAs
    on independent chains, as numba compiles them for this CPU (the kernels' own
    instructions); the best of three runs.  None without numba."""
    if not _kernel._numba_usable():
        return None
    import threading

    from ._numba_vectors import vector_bytes

    lanes = vector_bytes() // 4
    chain_count = peak_chains(vector_bytes())
    peak = _peak_kernel(lanes, chain_count)
    buffers = [np.full((chain_count + 2) * lanes, 0.5, np.float32) for _ in range(threads)]
    peak(buffers[0], 1000)  # compiled outside the timing
    best = 0.0
    for _ in range(3):
        workers = [threading.Thread(target=peak, args=(buffer, count)) for buffer in buffers]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        seconds = time.perf_counter() - start
        best = max(best, 2 * lanes * chain_count * count * threads / seconds)
    return best


def copy_bandwidth(threads: int = THREADS, megabytes: int = 64) -> float:
    """Bytes per second read plus written by a large NumPy copy (out of cache), split
    between ``threads`` threads (NumPy releases the GIL); the best of five."""
    from concurrent.futures import ThreadPoolExecutor

    source = np.ones((megabytes << 20) // 4, np.float32)
    target = np.zeros_like(source)
    bounds = [source.size * i // threads for i in range(threads + 1)]
    pieces = [(target[a:b], source[a:b]) for a, b in zip(bounds, bounds[1:])]
    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(5):
            start = time.perf_counter()
            list(pool.map(lambda piece: np.copyto(*piece), pieces))
            best = max(best, 2 * source.nbytes / (time.perf_counter() - start))
    return best


def _bfloat16_factor() -> float:
    """Products per float32 FMA lane that bfloat16 dot-product instructions give (2
    with AVX512_BF16, which torch uses; float16 has no such instruction here)."""
    if not _kernel._numba_usable():
        return 1.0
    from ._numba_vectors import has_bfloat16_pairs

    return 2.0 if has_bfloat16_pairs() else 1.0


#: A row whose floor is below this is bound by call overhead, which no floor captures.
FLOOR_MIN_MS = 0.05


def floor_ms(layer: Layer, fma_flops: float | None, bandwidth: float) -> float:
    """The least time any implementation needs on this machine: the useful
    multiply-adds at the FMA peak (bfloat16 at :func:`_bfloat16_factor` times it), or
    reading the input and filter and writing the output once, whichever is longer."""
    itemsize = np.dtype(_numpy_dtype(layer.dtype)).itemsize
    moved = itemsize * (layer.batch * layer.in_channels * math.prod(layer.spatial)
                        + layer.in_channels * layer.out_channels // layer.groups
                        * layer.kernel ** layer.rank
                        + layer.batch * layer.out_channels * math.prod(layer.output_spatial))
    compute = 0.0
    if fma_flops:
        factor = _bfloat16_factor() if layer.dtype == "bfloat16" else 1.0
        compute = layer.useful_flops / (fma_flops * factor)
    return 1e3 * max(compute, moved / bandwidth)


def check_close(name: str, layer: Layer, ours: np.ndarray, theirs: np.ndarray) -> float:
    """Relative max difference; raises AssertionError on a shape or value mismatch."""
    if ours.shape != theirs.shape:
        raise AssertionError(f"{layer.label}: {name} shape {theirs.shape} != ours {ours.shape}")
    scale = float(np.max(np.abs(ours))) or 1.0
    error = float(np.max(np.abs(ours - theirs))) / scale if ours.size else 0.0
    tolerance = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 6e-2}[layer.dtype]
    if not error <= tolerance:
        raise AssertionError(
            f"{layer.label}: {name} differs from convtranspose by {error:.3g} (relative to the"
            f" largest output value; tolerance {tolerance:g})")
    return error


def bench_layer(layer: Layer, peers: list[str], repeat: int, warmup: int, budget: float,
                fma_flops: float | None = None, bandwidth: float | None = None) -> dict:
    """One row: medians per implementation, memory, roofline and (given the machine's
    ``fma_flops`` and copy ``bandwidth``) the floor that bounds every implementation."""
    inputs = make_inputs(layer)
    run, to_ncx = _ours(layer, inputs, reuse_output=True)
    reference = np.array(to_ncx(run()))  # a copy: later calls write into the same array
    row: dict = {"layer": layer.label, "config": asdict(layer), "flops": layer.flops, "times_ms": {},
                 "max_relative_error": {}, "skipped": {}}
    runners = {"convtranspose": run}
    for peer in peers:
        try:
            peer_run, peer_to_ncx = PEERS[peer](layer, inputs)
            result = peer_to_ncx(peer_run())
        except _Unsupported as reason:
            row["skipped"][peer] = str(reason)
            continue
        except Exception as error:  # a peer that cannot build or run this layer
            row["skipped"][peer] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            print(f"  {peer} skipped on {layer.label}: {row['skipped'][peer]}", file=sys.stderr)
            continue
        row["max_relative_error"][peer] = check_close(peer, layer, reference, result)
        runners[peer] = peer_run
    # Alternate the implementations round by round so that machine noise hits all alike,
    # but let each start clean: a call right after another runtime's pays for that
    # runtime's leftovers, which a program using one runtime never sees.  Its worker
    # threads go on spinning for tens of ms (onnxruntime's: DCGAN 512->256 NXC 20 ->
    # 40 ms right after it), hence a pause; it may have trimmed the heap (grouped g8
    # right after torch: 2500 page faults, +17 ms), hence an untimed call first.
    samples = {name: [] for name in runners}
    for name, function in runners.items():
        for _ in range(warmup):
            function()
    started = time.perf_counter()
    for round_index in range(repeat):
        for name, function in runners.items():
            time.sleep(SETTLE_SECONDS)
            function()
            start = time.perf_counter()
            function()
            samples[name].append(time.perf_counter() - start)
        if round_index >= 2 and time.perf_counter() - started > budget:
            break
    # Every round, for analysis: this machine's noise comes in bursts of contention
    # that slow every implementation's calls by up to 2x for seconds at a time.
    row["rounds_ms"] = {name: [1e3 * value for value in values]
                        for name, values in samples.items()}
    for name, values in row["rounds_ms"].items():
        row["times_ms"][name] = statistics.median(values)
    peak, output_bytes = _peak_extra_bytes(_ours(layer, inputs)[0])  # a new output each call
    row["peak_bytes"] = peak
    row["output_bytes"] = output_bytes
    row["extra_bytes"] = max(peak - output_bytes, 0)
    row["sgemm_ms"] = 1e3 * _sgemm_seconds(layer.flops, max(3, repeat // 2))
    ours = row["times_ms"]["convtranspose"]
    peer_times = {k: v for k, v in row["times_ms"].items() if k != "convtranspose"}
    if peer_times:
        best = min(peer_times, key=peer_times.get)
        row["best_peer"] = best
        row["ratio_to_best_peer"] = peer_times[best] / ours
        fastest = {name: min(values) for name, values in row["rounds_ms"].items()}
        row["best_round_ratio"] = min(v for k, v in fastest.items()
                                      if k != "convtranspose") / fastest["convtranspose"]
    row["gflops"] = layer.flops / ours / 1e6
    row["roofline_fraction"] = row["sgemm_ms"] / ours
    if bandwidth:
        row["useful_flops"] = layer.useful_flops
        row["floor_ms"] = floor_ms(layer, fma_flops, bandwidth)
        if peer_times and row["floor_ms"] >= FLOOR_MIN_MS:
            # The most any implementation could gain on the best peer here.
            row["ceiling"] = peer_times[row["best_peer"]] / row["floor_ms"]
    try:
        row["algorithm"] = _kernel.describe_algorithm(
            layer.batch, layer_plan_axes(layer), _kernel_weights_shape(layer),
            channels_last=layer.layout == "NXC", dtype=np.dtype(np.float32),
            result_dtype=None if layer.dtype == "float32" else _numpy_dtype(layer.dtype))
    except Exception as error:  # the description is informative only
        row["algorithm"] = f"? ({error})"
    return row


def _kernel_weights_shape(layer: Layer) -> tuple[int, ...]:
    g = layer.groups
    return (g, layer.in_channels // g, layer.out_channels // g) + (layer.kernel,) * layer.rank


def layer_plan_axes(layer: Layer):
    from . import shapes

    rank = layer.rank
    plan = shapes.onnx_conv_transpose(
        (layer.batch, layer.in_channels) + layer.spatial,
        (layer.in_channels, layer.out_channels // layer.groups) + (layer.kernel,) * rank,
        group=layer.groups, strides=[layer.stride] * rank, pads=[layer.pad] * (2 * rank),
        dilations=[layer.dilation] * rank, output_padding=[layer.output_padding] * rank)
    return plan.axes


# --------------------------------------------------------------------------- reporting


def _geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


#: OpenBLAS reads its kernel family from this variable when set (it is on some hosts).
CORE_ENV = "OPENBLAS_CORETYPE"


def _blas_description() -> str:
    core = _blas.corename()
    if not core:
        return "no OpenBLAS found"
    forced = f", forced by {CORE_ENV}" if os.environ.get(CORE_ENV) else ""
    return (f"OpenBLAS {core} kernels{forced}; cost model of machine class "
            f"{_kernel.machine_class().name}")


def markdown(rows: list[dict], peers: list[str], meta: dict) -> str:
    head = ["layer", "algorithm", "convtranspose ms"] + [f"{p} ms" for p in peers] + [
        "GFLOP/s", "x best peer", "x at peak", "% roofline", "extra mem / output"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        times = row["times_ms"]
        best = row.get("best_peer")
        cells = [row["layer"], row.get("algorithm", ""), f"{times['convtranspose']:.3g}"]
        for peer in peers:
            if peer in times:
                text = f"{times[peer]:.3g}"
                cells.append(f"**{text}**" if peer == best else text)
            else:
                cells.append("-")
        ratio = row.get("ratio_to_best_peer")
        ceiling = row.get("ceiling")
        cells += [f"{row['gflops']:.1f}", f"{ratio:.2f}" if ratio else "-",
                  f"{ceiling:.2f}" if ceiling else "-",
                  f"{100 * row['roofline_fraction']:.0f}%",
                  f"{row['extra_bytes'] / max(row['output_bytes'], 1):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    ratios = [row["ratio_to_best_peer"] for row in rows if "ratio_to_best_peer" in row]
    summary = [
        "",
        f"Geometric mean of (best peer time / convtranspose time): **{_geomean(ratios):.2f}x** over"
        f" {len(ratios)} layers; worst {min(ratios):.2f}x, best {max(ratios):.2f}x." if ratios else "",
        _best_round_summary(rows),
        _ceiling_summary(rows, meta),
        f"Machine: {meta['machine']}; {meta['threads']} threads; NumPy {meta['numpy']}"
        f" ({meta['blas']});"
        f" repeat {meta['repeat']} (medians). Ratios > 1 mean convtranspose is faster.",
        "convtranspose writes every timed call of an output of 1 MiB or more into one output"
        " array (`out=`), as OpenVINO's request writes into its output tensor; torch and"
        " onnxruntime return a new array.",
        "`extra mem / output`: peak bytes NumPy allocated during one call minus the output, over the"
        " output's bytes (tracemalloc; numba/BLAS-internal buffers are not counted).",
    ]
    return "\n".join(lines + summary) + "\n"


def _best_round_summary(rows: list[dict]) -> str:
    best = [row["best_round_ratio"] for row in rows if "best_round_ratio" in row]
    if not best:
        return ""
    return (f"Fastest rounds (any peer's fastest round over convtranspose's, less exposed to "
            f"bursts of contention on a shared machine than the medians): geometric mean "
            f"{_geomean(best):.2f}x, worst {min(best):.2f}x, best {max(best):.2f}x.")


def _ceiling_summary(rows: list[dict], meta: dict) -> str:
    bounded = [row for row in rows if "ceiling" in row]
    if not bounded:
        return ""
    ceilings = [row["ceiling"] for row in bounded]
    shares = [row["ratio_to_best_peer"] / row["ceiling"] for row in bounded]
    peak = meta.get("fma_peak_gflops")
    return (f"`x at peak`: best peer time over the floor, the least time any implementation "
            f"needs here (useful multiply-adds at the FMA peak, "
            f"{f'{peak:.0f} GFLOP/s' if peak else 'not measured without numba'}, or moving "
            f"input, filter and output once at {meta['copy_gb_s']:.1f} GB/s, whichever is "
            f"longer; '-': bound by call overhead).  Geometric mean {_geomean(ceilings):.2f}x "
            f"over {len(ceilings)} layers, {sum(c < 1.2 for c in ceilings)} of them below 1.2x; "
            f"convtranspose reaches {100 * _geomean(shares):.0f}% of it (geometric mean).")


def plot(rows: list[dict], path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install 'convtranspose[bench]')",
              file=sys.stderr)
        return False
    rows = [row for row in rows if "ratio_to_best_peer" in row]
    figure, axis = plt.subplots(figsize=(10, max(3.0, 0.28 * len(rows) + 1)))
    ratios = [row["ratio_to_best_peer"] for row in rows]
    colours = ["tab:green" if r >= 1 else "tab:red" for r in ratios]
    axis.barh(range(len(rows)), ratios, color=colours)
    axis.set_yticks(range(len(rows)), [row["layer"] for row in rows], fontsize=7)
    axis.invert_yaxis()
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_xlabel("best peer time / convtranspose time (>1: convtranspose faster)")
    axis.set_title("convtranspose vs the best of torch, OpenVINO, onnxruntime")
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return True


# --------------------------------------------------------------------------- entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convtranspose bench",
        description="Time convtranspose against the installed peers on a suite of real layers.")
    parser.add_argument("--quick", action="store_true",
                        help="a subset of layers with fewer repeats (about two minutes)")
    parser.add_argument("--layers", default=None,
                        help="only layers whose name contains one of these comma-separated words")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed rounds per layer (default 9, --quick 3)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
    parser.add_argument("--peers", default=None,
                        help="comma-separated subset of torch,openvino,onnxruntime")
    parser.add_argument("--out", default="bench-results",
                        help="directory for results.md/.json/.png (default ./bench-results)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the suite; returns 0, 1 when a peer disagrees with us, 2 on bad options."""
    parser = build_parser()
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 9)
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    requested = args.peers.split(",") if args.peers else None
    if requested and set(requested) - set(PEERS):
        parser.error(f"unknown peer(s): {sorted(set(requested) - set(PEERS))}")
    peers = installed_peers(requested)
    layers = [layer for layer in SUITE if layer.quick or not args.quick]
    if args.layers:
        words = [w.strip().lower() for w in args.layers.split(",") if w.strip()]
        layers = [layer for layer in layers if any(w in layer.label.lower() for w in words)]
    if not layers:
        parser.error("no layer matches --layers")
    budget = 1.5 if args.quick else 6.0
    rows = []
    if os.environ.get(CORE_ENV):
        print(f"note: {CORE_ENV}={os.environ[CORE_ENV]} is set, so NumPy's OpenBLAS (which "
              f"convtranspose's GEMMs use) runs {_blas.corename() or 'those'} kernels while the "
              "peers use the CPU's own; to compare like with like, unset it (and "
              "OPENBLAS_L2_SIZE) for this command alone", file=sys.stderr)
    print(f"peers: {', '.join(peers) or 'none installed'}; {len(layers)} layers", file=sys.stderr)
    fma_flops, bandwidth = fma_peak_flops(), copy_bandwidth()
    for layer in layers:
        try:
            row = bench_layer(layer, peers, repeat, args.warmup, budget, fma_flops, bandwidth)
        except AssertionError as mismatch:
            print(f"MISMATCH: {mismatch}", file=sys.stderr)
            return 1
        rows.append(row)
        ratio = row.get("ratio_to_best_peer")
        print(f"{layer.label:48s} {row['times_ms']['convtranspose']:9.3f} ms  "
              f"{'' if ratio is None else format(ratio, '5.2f') + 'x vs ' + row['best_peer']}"
              f"  [{row.get('algorithm', '')}]", file=sys.stderr)
    meta = {"machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.python_version()}",
            "threads": THREADS, "numpy": np.__version__, "blas": _blas_description(),
            "repeat": repeat, "peers": peers,
            "fma_peak_gflops": fma_flops / 1e9 if fma_flops else None,
            "copy_gb_s": bandwidth / 1e9,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    os.makedirs(args.out, exist_ok=True)
    table = markdown(rows, peers, meta)
    with open(os.path.join(args.out, "results.md"), "w") as handle:
        handle.write(table)
    with open(os.path.join(args.out, "results.json"), "w") as handle:
        json.dump({"meta": meta, "rows": rows}, handle, indent=1)
    if not args.no_plot:
        plot(rows, os.path.join(args.out, "ratios.png"))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
