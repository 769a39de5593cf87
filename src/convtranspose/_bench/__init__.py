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

Modules: :mod:`.suite` (the layers), :mod:`.peers` (how each implementation is
called), :mod:`.machine` (peaks and floors), :mod:`.report` (table and chart),
:mod:`.run` (the rounds and the command line).
"""

from .machine import (
                      FLOOR_MIN_MS,
                      _bfloat16_factor,
                      copy_bandwidth,
                      floor_ms,
                      fma_peak_flops,
                      peak_chains,
)
from .peers import PEERS, REUSE_MIN_BYTES, _ours, installed_peers
from .report import markdown, plot
from .run import alternating_rounds, bench_layer, build_parser, check_close, main
from .suite import (
                      SETTLE_SECONDS,
                      SUITE,
                      THREADS,
                      Layer,
                      _kernel_weights_shape,
                      _numpy_dtype,
                      layer_plan_axes,
                      make_inputs,
)

__all__ = ["FLOOR_MIN_MS", "Layer", "PEERS", "REUSE_MIN_BYTES", "SETTLE_SECONDS", "SUITE",
           "THREADS", "alternating_rounds", "bench_layer", "build_parser", "check_close", "copy_bandwidth",
           "floor_ms", "fma_peak_flops", "installed_peers", "layer_plan_axes", "main",
           "make_inputs", "markdown", "peak_chains", "plot", "_bfloat16_factor",
           "_kernel_weights_shape", "_numpy_dtype", "_ours"]
