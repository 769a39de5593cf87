"""The benchmark's outputs: a Markdown table, summaries and a chart."""

from __future__ import annotations

import math
import os
import sys

from .._runtime import blas as _blas


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
    return f"OpenBLAS {core} kernels{forced}"


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
