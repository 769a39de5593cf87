"""The benchmark's outputs: a Markdown table, summaries per suite and a chart."""

from __future__ import annotations

import math
import os
import statistics
import sys

from ..._errors import install_hint
from ..._runtime import blas as _blas
from ..._runtime.config import WISDOM_ENV
from .planning import ABSENT_NOTE


def _geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


#: OpenBLAS reads its kernel family from this variable when set (it is on some hosts).
CORE_ENV = "OPENBLAS_CORETYPE"


def blas_description() -> str:
    core = _blas.corename()
    if not core:
        return "no OpenBLAS found"
    forced = f", forced by {CORE_ENV}" if os.environ.get(CORE_ENV) else ""
    return f"OpenBLAS {core} kernels{forced}"


#: The short table's columns (``convtranspose bench`` without ``--wide``).
SHORT_HEAD = ["layer", "convtranspose ms", "best peer", "x best peer"]


def markdown(rows: list[dict], peers: list[str], meta: dict, wide: bool = True) -> str:
    """The table (one row per layer) and, per suite, its summary lines; with ``wide``
    False only the layer, our time, the best peer's and the ratio, and the summaries."""
    head = ["layer", "algorithm", "convtranspose ms"] + [f"{p} ms" for p in peers] + [
        "GFLOP/s", "x best peer", "x at peak", "% of floor", "extra mem / output",
        "estimate / measure", "1st-call planning ms"]
    if not wide:
        head = SHORT_HEAD
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = _cells(row, peers) if wide else _short_cells(row)
        lines.append("| " + " | ".join(cells) + " |")
    summary = [""]
    for suite, suite_rows in _by_suite(rows).items():
        summary += _suite_lines(suite, suite_summary(suite_rows), meta)
    if not wide:
        summary += [_skipped_summary(rows),
                    "Ratios > 1 mean convtranspose is faster. --wide: every column (each"
                    " peer, GFLOP/s, floor, memory, planning) and the notes on them."]
        return "\n".join(lines + [line for line in summary if line is not None]) + "\n"
    summary += [
        _best_round_summary(rows),
        _ceiling_summary(rows, meta),
        _skipped_summary(rows),
        f"CPU: {meta.get('cpu', 'not recorded')}. Machine: {meta['machine']}; {meta['threads']}"
        f" threads; NumPy {meta['numpy']} ({meta['blas']}); repeat {meta['repeat']} (medians)."
        " Ratios > 1 mean convtranspose is faster.",
        "convtranspose writes every timed call of an output of 1 MiB or more into one output"
        " array (`out=`), as OpenVINO's request writes into its output tensor; torch and"
        " onnxruntime return a new array.",
        "convtranspose is called through prepared layers (`ct.prepare`, made before the"
        " timing as the peers' compiled models are)." if meta.get("calls") == "prepared layer"
        else None,
        "`% of floor`: the layer's floor (below) over convtranspose's time, the share of"
        " the roofline it reaches; '-' where call overhead binds.",
        "`extra mem / output`: peak bytes NumPy allocated during one repeated call minus the"
        " output, over the output's bytes (tracemalloc; numba/BLAS-internal buffers are not"
        " counted).",
        _planning_note(meta),
    ]
    return "\n".join(lines + [line for line in summary if line is not None]) + "\n"


def _cells(row: dict, peers: list[str]) -> list[str]:
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
    share = row.get("floor_fraction")
    lost = row.get("estimate_over_measure")
    first = row.get("first_call_planning_ms")
    failed = "failed" if "planning_error" in row else "n/a"
    cells += [f"{row['gflops']:.1f}", f"{ratio:.2f}" if ratio else "-",
              f"{ceiling:.2f}" if ceiling else "-",
              f"{100 * share:.0f}%" if share else "-",
              f"{row['extra_bytes'] / max(row['output_bytes'], 1):.2f}",
              failed if lost is None else f"{lost:.2f}",
              failed if first is None else f"{first:.3g}"]
    return cells


def _short_cells(row: dict) -> list[str]:
    times = row["times_ms"]
    best = row.get("best_peer")
    ratio = row.get("ratio_to_best_peer")
    return [row["layer"], f"{times['convtranspose']:.3g}",
            f"{best} {times[best]:.3g}" if best else "-",
            f"{ratio:.2f}" if ratio else "-"]


def _by_suite(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows per suite (``row["suite"]``, the fixed suite when absent), in order of appearance."""
    suites: dict[str, list[dict]] = {}
    for row in rows:
        suites.setdefault(row.get("suite", "fixed suite"), []).append(row)
    return suites


def suite_summary(rows: list[dict]) -> dict:
    """One suite's figures: ``layers``; ``geomean``, ``worst`` and ``best`` of
    ``ratio_to_best_peer`` (best peer time / ours; ``worst``/``best`` as ``(layer,
    ratio)``) over the rows that have one; and where rows have them,
    ``estimate_over_measure`` (geometric mean and the worst, the largest, as ``(layer,
    ratio)``) and ``first_call_planning_ms`` (median and the largest as ``(layer, ms)``).
    """
    summary: dict = {"layers": len(rows)}
    rated = [row for row in rows if "ratio_to_best_peer" in row]
    if rated:
        ratios = [row["ratio_to_best_peer"] for row in rated]
        worst = min(rated, key=lambda row: row["ratio_to_best_peer"])
        best = max(rated, key=lambda row: row["ratio_to_best_peer"])
        summary.update(rated=len(rated), geomean=_geomean(ratios),
                       worst=(worst["layer"], worst["ratio_to_best_peer"]),
                       best=(best["layer"], best["ratio_to_best_peer"]))
    planned = [row for row in rows if "estimate_over_measure" in row]
    if planned:
        lost = max(planned, key=lambda row: row["estimate_over_measure"])
        summary["estimate_over_measure"] = {
            "geomean": _geomean([row["estimate_over_measure"] for row in planned]),
            "worst": (lost["layer"], lost["estimate_over_measure"]), "layers": len(planned)}
    timed = [row for row in rows if "first_call_planning_ms" in row]
    if timed:
        slowest = max(timed, key=lambda row: row["first_call_planning_ms"])
        summary["first_call_planning_ms"] = {
            "median": statistics.median(row["first_call_planning_ms"] for row in timed),
            "max": (slowest["layer"], slowest["first_call_planning_ms"]), "layers": len(timed)}
    return summary


def _suite_lines(suite: str, summary: dict, meta: dict) -> list[str]:
    cpu = meta.get("cpu", "an unrecorded CPU")
    if "geomean" not in summary:
        return [f"{suite} on {cpu}: {summary['layers']} layers, none timed against a peer."]
    lines = [f"{suite} on {cpu}: geometric mean of (best peer time / convtranspose time)"
             f" **{summary['geomean']:.2f}x** over {summary['rated']} layers; worst"
             f" {summary['worst'][1]:.2f}x ({summary['worst'][0]}), best"
             f" {summary['best'][1]:.2f}x ({summary['best'][0]})."]
    lost, first = summary.get("estimate_over_measure"), summary.get("first_call_planning_ms")
    if lost:
        lines.append(f"{suite}: the estimate alone against measured planning (steady-state time"
                     f" of each level's choice): geometric mean {lost['geomean']:.2f}x over"
                     f" {lost['layers']} layers, worst {lost['worst'][1]:.2f}x"
                     f" ({lost['worst'][0]}).")
    if first:
        lines.append(f"{suite}: first-call planning time (first call after forget_wisdom minus"
                     f" a steady-state call, default planning): median {first['median']:.3g} ms"
                     f" over {first['layers']} layers, largest {first['max'][1]:.3g} ms"
                     f" ({first['max'][0]}).")
    return lines


def _planning_note(meta: dict) -> str:
    planning = meta.get("planning") or {}
    if not planning.get("available"):
        return (f"`estimate / measure` and `1st-call planning ms`: {ABSENT_NOTE}; they are"
                " measured once it has one.")
    return ("`estimate / measure`: steady-state time of the choice made under"
            " `use_planning(\"estimate\")` over that made under `use_planning(\"measure\")`"
            " (>1: the estimate alone loses that much); `1st-call planning ms`: the first call"
            " after `forget_wisdom()` under the default planning minus a steady-state call;"
            f" on-disk wisdom {WISDOM_ENV}={planning.get('wisdom_env')!s}.")


def _skipped_summary(rows: list[dict]) -> str | None:
    """Every layer a peer could not run, with the peer's reason (never dropped silently)."""
    skipped = [f"{peer} on {row['layer']} ({reason})" for row in rows
               for peer, reason in row.get("skipped", {}).items()]
    if not skipped:
        return None
    return "Peers that could not run a layer (a dash in the table): " + "; ".join(skipped) + "."


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
        print(f"matplotlib is not installed: no chart ({install_hint('bench')})",
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
