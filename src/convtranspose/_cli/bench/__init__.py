"""Benchmark suite: convtranspose against the installed peer runtimes, in one process.

Run with ``python -m convtranspose bench`` (or ``python benchmarks/peers.py``): the
fixed suite of real layers, or with ``--random SEED [--count N]`` layers drawn from the
seed (:mod:`.random_suite`), the same on every machine, so that no list can be tuned to.
Every layer is timed for convtranspose and for each installed peer (PyTorch,
OpenVINO, onnxruntime) on identical inputs, after warm-up, reporting medians; the
machine's FMA peak and copy bandwidth (measured once per run) give each layer's floor,
the roofline: the least time any implementation needs (``% of floor``: the share of it
we reach; ``x at peak``: how far the best peer is from it).  Every peer's result is
checked against ours first, so a fast wrong answer is never reported.

Outputs (only inside ``--out``): ``results.md`` (Markdown table), ``results.json``
and ``ratios.png`` (a bar chart, needs matplotlib); stdout gets the short table
(layer, ours, best peer, ratio; ``--wide`` every column), stderr a line per layer
with a counter and the time left, then the paths written.

Each suite's report gives the geometric mean of (best peer time / our time), the worst
layer, and two planning columns (:mod:`.planning`); the CPU is named beside the figures.

With ``--quantized`` the quantized suite (:mod:`.quantized`): each layer in int8 through
the dialect each int8 peer runs (torch's quantized modules, OpenVINO's FakeQuantize,
LiteRT, onnxruntime's QDQ model), against that peer, and in float32 through this
library.

Modules: :mod:`.suite` (the fixed layers), :mod:`.random_suite` (the drawn ones),
:mod:`.peers` (how each implementation is called), :mod:`.machine` (the CPU, peaks and
floors), :mod:`.planning` (the planning columns), :mod:`.report` (table, summaries and
chart), :mod:`.run` (the rounds and the command line).
"""

from .machine import (
                      FLOOR_MIN_MS,
                      bfloat16_factor,
                      copy_bandwidth,
                      cpu_model,
                      floor_ms,
                      fma_peak_flops,
                      parse_model_name,
)
from .peers import PEERS, REUSE_MIN_BYTES, installed_peers, run_ours
from .planning import planning_columns
from .random_suite import FAMILIES, MIN_COUNT, family_of, fit_to_caps, random_layers, within_caps
from .report import markdown, plot, suite_summary
from .run import (
    algorithm_run,
    alternating_rounds,
    bench_layer,
    build_parser,
    check_close,
    forced,
    forced_row,
    main,
)
from .suite import (
                      SETTLE_SECONDS,
                      SUITE,
                      THREADS,
                      Layer,
                      kernel_weights_shape,
                      layer_plan_axes,
                      make_inputs,
                      numpy_dtype,
)

__all__ = ["FAMILIES", "FLOOR_MIN_MS", "Layer", "MIN_COUNT", "PEERS", "REUSE_MIN_BYTES",
           "SETTLE_SECONDS", "SUITE", "THREADS", "algorithm_run", "alternating_rounds", "bench_layer", "build_parser",
           "check_close", "copy_bandwidth", "cpu_model", "family_of", "fit_to_caps", "floor_ms",
           "fma_peak_flops", "forced", "forced_row",
           "installed_peers", "layer_plan_axes", "main", "make_inputs",
           "markdown", "parse_model_name", "planning_columns", "plot",
           "random_layers", "suite_summary", "within_caps", "bfloat16_factor",
           "kernel_weights_shape", "numpy_dtype", "run_ours"]
