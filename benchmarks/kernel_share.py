"""Where a warm prepared layer's CPU time goes, sampled with Linux ``perf``.

    python benchmarks/kernel_share.py [--seconds 3] [--layers WORD] [--caller] [--out FILE]

For each layer (float32, NCHW, ``ct.prepare(ct.onnx_conv_transpose, ...)``, the
library's default planning, wisdom off) it warms the layer up, then samples this
process with ``perf record -F 4999`` for ``--seconds`` while calling the layer back to
back, and prints the microseconds per call, the algorithm, and the share of the
samples (every thread's) in each part: the compiled kernels (numba's JIT code), BLAS
(OpenBLAS), NumPy, the Python interpreter with numba's dispatcher and ctypes (the
call's own overhead), the C library (copies, zeroing), the operating system, and the
threading runtimes (GNU OpenMP, TBB: numba's workers spinning or waiting between and
within calls).  ``--caller``: the calling thread's samples only, so that idle workers'
spinning is left out and a wait for the workers counts where the caller spends it.
Needs ``perf`` (Linux) with permission to attach to this process.  ``--out`` writes
the rows as JSON; nothing else is written but perf's data file in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")

import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

# (name, data shape, filter shape (C_IN, C_OUT, K, K), stride, pad): layers of 0.1 ms
# and more.
LAYERS = [
    ("FCN-2x 21->21 16x16 k4 s2 p1", (1, 21, 16, 16), (21, 21, 4, 4), 2, 1),
    ("U-Net k2 64->32 24x24", (1, 64, 24, 24), (64, 32, 2, 2), 2, 0),
    ("k1 s4 N8 8->128 5x5", (8, 8, 5, 5), (8, 128, 1, 1), 4, 0),
    ("head N2 512->3 8x8 k4 s2 p1", (2, 512, 8, 8), (512, 3, 4, 4), 2, 1),
    ("pointwise k1 256->512 7x7", (1, 256, 7, 7), (256, 512, 1, 1), 1, 0),
    ("stride-1 64->64 64x64 k3 p1", (1, 64, 64, 64), (64, 64, 3, 3), 1, 1),
    ("DCGAN-up 128->64 32x32 k4 s2 p1", (1, 128, 32, 32), (128, 64, 4, 4), 2, 1),
]

#: (part, test on perf's shared-object name), first match wins.
PARTS = (
    ("compiled kernels", lambda dso: dso.startswith("[JIT]")),
    ("BLAS", lambda dso: "openblas" in dso),
    ("NumPy", lambda dso: "_multiarray_umath" in dso),
    ("Python and dispatch", lambda dso: dso.startswith(("libpython", "_dispatcher", "_ctypes",
                                                         "libffi", "_nrt_python"))),
    ("C library", lambda dso: dso.startswith("libc.")),
    ("thread waits", lambda dso: dso.startswith(("libgomp", "libtbb", "libiomp"))),
    ("operating system", lambda dso: dso.startswith("[kernel")),
)


def _shares(data_file: str, thread: int | None = None) -> dict[str, float]:
    """Percent of the samples per part (perf report by shared object), of ``thread``'s
    samples only where given."""
    only = [] if thread is None else ["--tid", str(thread), "--percentage", "relative"]
    report = subprocess.run(["perf", "report", "-i", data_file, "--no-children", "--sort",
                             "dso", "--stdio", *only], capture_output=True, text=True,
                            check=True)
    shares: dict[str, float] = {}
    for line in report.stdout.splitlines():
        fields = line.split(None, 1)
        if len(fields) != 2 or not fields[0].endswith("%") or line.startswith("#"):
            continue
        percent, dso = float(fields[0][:-1]), fields[1].strip()
        part = next((name for name, test in PARTS if test(dso)), "other")
        shares[part] = round(shares.get(part, 0.0) + percent, 1)
    return shares


def profile(layer, seconds: float, folder: str, caller: bool = False) -> dict:
    name, data_shape, filter_shape, stride, pad = layer
    rng = np.random.default_rng(0)
    data = rng.standard_normal(data_shape).astype(np.float32)
    weights = rng.standard_normal(filter_shape).astype(np.float32)
    prepared = ct.prepare(ct.onnx_conv_transpose, W=weights, strides=[stride] * 2,
                          pads=[pad] * 4)
    warm_until = time.perf_counter() + 0.5
    while time.perf_counter() < warm_until:
        prepared(data)
    data_file = os.path.join(folder, "perf.data")
    sampler = subprocess.Popen(["perf", "record", "-F", "4999", "-p", str(os.getpid()), "-o",
                                data_file, "--", "sleep", str(seconds)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # perf attaches
    start, calls = time.perf_counter(), 0
    while sampler.poll() is None:
        prepared(data)
        calls += 1
    per_call = (time.perf_counter() - start) / max(1, calls) * 1e6
    if sampler.returncode != 0 or not os.path.exists(data_file):
        raise SystemExit(f"perf record failed (exit {sampler.returncode}): it needs "
                         "permission to attach (kernel.perf_event_paranoid)")
    return {"layer": name, "algorithm": prepared.explain().choice.runs,
            "us_per_call": round(per_call, 1),
            "shares_percent": _shares(data_file, threading.get_native_id() if caller else None)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--layers", default=None, help="only layers whose name has this word")
    parser.add_argument("--caller", action="store_true",
                        help="count the calling thread's samples only")
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    rows = []
    whose = "the calling thread's" if args.caller else "every thread's"
    print(f"CPU: {cpu_model_name()}, {ct.get_num_threads()} threads; share of perf's samples"
          f" ({whose}) per part of a warm prepared layer's calls")
    with tempfile.TemporaryDirectory() as folder:
        for layer in LAYERS:
            if args.layers and args.layers not in layer[0]:
                continue
            row = profile(layer, args.seconds, folder, args.caller)
            rows.append(row)
            parts = ", ".join(f"{part} {share}%" for part, share in
                              sorted(row["shares_percent"].items(), key=lambda p: -p[1]))
            print(f"| {row['layer']} | {row['algorithm']} | {row['us_per_call']} us | {parts} |",
                  flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"machine": cpu_model_name(), "threads": ct.get_num_threads(),
                       "seconds": args.seconds, "caller_only": args.caller, "rows": rows},
                      handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
