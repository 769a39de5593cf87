"""``disjoint`` against the algorithms planning chose before it (each forced) and the best
installed peer, on layers whose taps reach disjoint outputs.

Prints one table row per layer: the median time of each algorithm through a prepared
layer writing into one output array (as ``convtranspose bench --prepared`` calls them;
alternating rounds, each call after a pause and an untimed call), the best peer's, the
memory floor (:func:`convtranspose._cli.bench.floor_ms`) and the 1-minute load average.
``--threads 1`` times on one thread.  ``--out`` writes the rows, the CPU and the load to
a JSON file.  Needs numba; the peer column needs torch, OpenVINO or onnxruntime.

    python benchmarks/disjoint.py --out benchmarks/results/disjoint-zen4.json
"""

from __future__ import annotations

import argparse
import json
import os

import convtranspose as ct
from convtranspose._cli.bench import (
    Layer,
    copy_bandwidth,
    cpu_model,
    fma_peak_flops,
    forced_row,
    installed_peers,
)

#: Grouped and few-channel layers whose time is their output (the random suite's
#: 3-D layer and its 2-D and 1-D cousins, a stride wider than the kernel), then layers
#: of many channels per group, where the multiply-adds decide.
LAYERS = [
    Layer("any-geometry N4 32->512 8x3x3 k4 s4 op3 g4", 4, 32, 512, (8, 3, 3), 4, 4, 0, 1, 3, 4),
    Layer("k4 s4 g4 N4 32->512 24x24", 4, 32, 512, (24, 24), 4, 4, 0, 1, 0, 4),
    Layer("k4 s4 N8 16->64 L256", 8, 16, 64, (256,), 4, 4),
    Layer("k2 s3 N2 16->32 56x56 (gaps)", 2, 16, 32, (56, 56), 2, 3),
    Layer("3D k2 s2 N1 16->16 32x32x32", 1, 16, 16, (32, 32, 32), 2, 2),
    Layer("pointwise N1 64->16 14x14 k1 s3", 1, 64, 16, (14, 14), 1, 3),
    Layer("U-Net N4 256->128 16x16 k2 s2", 4, 256, 128, (16, 16), 2, 2),
    Layer("U-Net N2 64->32 16x16 k2 s2", 2, 64, 32, (16, 16), 2, 2),
]

ALGORITHMS = ("disjoint", "col2im-ncx", "direct", "direct-blocked")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        ct.set_num_threads(args.threads)
    peers = installed_peers()
    fma, bandwidth = fma_peak_flops(), copy_bandwidth()
    print(f"{cpu_model()}; {ct.get_num_threads()} threads; load {os.getloadavg()[0]:.2f}; "
          f"peers {', '.join(peers)}")
    print("| layer | " + " | ".join(f"{name} ms" for name in ALGORITHMS)
          + " | best peer ms | floor ms | load |")
    print("|---" * (len(ALGORITHMS) + 4) + "|")
    rows = []
    for layer in LAYERS:
        row = forced_row(layer, ALGORITHMS, peers, args.repeat, fma, bandwidth, prepared=True)
        rows.append(row)
        t, best = row["times_ms"], row["best_peer"]
        peer = f"{t[best]:.3f} ({best})" if best else "-"
        print(f"| {row['layer']} | " + " | ".join(f"{t[name]:.3f}" for name in ALGORITHMS)
              + f" | {peer} | {row['floor_ms']:.3f} | {row['load_before']:.2f}-"
              f"{row['load_after']:.2f} |", flush=True)
    if args.out:
        meta = {"cpu": cpu_model(), "threads": ct.get_num_threads(), "fma_peak_flops": fma,
                "copy_bandwidth": bandwidth, "repeat": args.repeat, "peers": peers}
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"meta": meta, "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
