"""``depthwise`` against ``direct`` (both forced) and the best installed peer on depthwise layers.

Prints one table row per layer: the median time of each (alternating rounds, each
call after a pause and an untimed call, as ``python -m convtranspose bench`` times),
the memory floor of the layer on this machine (:func:`convtranspose._cli.bench.floor_ms`),
the 1-minute load average when the layer was timed, and the largest relative
difference of our two results from the best peer's.  ``--out`` writes the rows, the
CPU model and the load to a JSON file.  Needs numba and at least one peer runtime
(torch, OpenVINO or onnxruntime) for the peer column.

    python benchmarks/depthwise.py --out benchmarks/results/depthwise-xeon.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess

from convtranspose._cli.bench import (
    Layer,
    copy_bandwidth,
    cpu_model,
    fma_peak_flops,
    forced_row,
    installed_peers,
)

#: The layers: ImageNet-style depthwise upsampling blocks, one 1-D and one 3-D layer,
#: channels-last copies of two of them, and three channels-last layers of the random
#: suites (seed 1).
LAYERS = [
    Layer("dw N1 1024 7x7 k7 s2 p3 op1", 1, 1024, 1024, (7, 7), 7, 2, 3, 1, 1, 1024),
    Layer("dw N8 1024 7x14 k5 s1 p2", 8, 1024, 1024, (7, 14), 5, 1, 2, 1, 0, 1024),
    Layer("dw N8 256 28x28 k4 s2 p1", 8, 256, 256, (28, 28), 4, 2, 1, 1, 0, 256),
    Layer("dw N1 32 112x112 k3 s2 p1 op1", 1, 32, 32, (112, 112), 3, 2, 1, 1, 1, 32),
    Layer("dw N4 512 14x14 k4 s2 p1", 4, 512, 512, (14, 14), 4, 2, 1, 1, 0, 512),
    Layer("dw 1-D N4 256 400 k8 s4 p2", 4, 256, 256, (400,), 8, 4, 2, 1, 0, 256),
    Layer("dw 3-D N1 64 8x8x8 k3 s2 p1 op1", 1, 64, 64, (8, 8, 8), 3, 2, 1, 1, 1, 64),
    Layer("dw N1 1024 7x7 k7 s2 p3 op1", 1, 1024, 1024, (7, 7), 7, 2, 3, 1, 1, 1024, "NXC"),
    Layer("dw N8 256 28x28 k4 s2 p1", 8, 256, 256, (28, 28), 4, 2, 1, 1, 0, 256, "NXC"),
    Layer("dw N8 128 7x14 k4 s2 p1", 8, 128, 128, (7, 14), 4, 2, 1, 1, 0, 128, "NXC"),
    Layer("bilinear N2 64 8x8 k32 s16 p8", 2, 64, 64, (8, 8), 32, 16, 8, 1, 0, 64, "NXC"),
    Layer("bilinear N1 256 32x32 k8 s4 p2", 1, 256, 256, (32, 32), 8, 4, 2, 1, 0, 256, "NXC"),
]


def lscpu_model() -> str | None:
    """The ``Model name`` line of ``lscpu``, or None without it."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found = [line.split(":", 1)[1].strip() for line in text.splitlines()
             if line.startswith("Model name")]
    return found[0] if found else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    peers = installed_peers()
    fma, bandwidth = fma_peak_flops(), copy_bandwidth()
    print(f"{cpu_model()}; load {os.getloadavg()[0]:.2f}; peers {', '.join(peers)}")
    print("| layer | direct ms | depthwise ms | best peer ms | depthwise / direct speed-up "
          "| peer / depthwise | floor ms | load |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for layer in LAYERS:
        row = forced_row(layer, ("direct", "depthwise"), peers, args.repeat, fma, bandwidth)
        rows.append(row)
        t, best = row["times_ms"], row["best_peer"]
        peer = f"{t[best]:.3f} ({best})" if best else "-"
        ratio = f"{t[best] / t['depthwise']:.2f}" if best else "-"
        print(f"| {row['layer']} | {t['direct']:.3f} | {t['depthwise']:.3f} | {peer} | "
              f"{t['direct'] / t['depthwise']:.2f} | {ratio} | {row['floor_ms']:.3f} | "
              f"{row['load_before']:.2f}-{row['load_after']:.2f} |", flush=True)
    if args.out:
        meta = {"cpu": cpu_model(), "lscpu_model": lscpu_model(), "machine": platform.machine(), "cores": os.cpu_count(),
                "fma_peak_flops": fma, "copy_bandwidth": bandwidth, "repeat": args.repeat,
                "peers": peers}
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"meta": meta, "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
