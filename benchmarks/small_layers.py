"""The prepared-layer target's figure: ``python benchmarks/small_layers.py RESULTS.json ...
[--under-ms 0.5]``.

Reads the ``results.json`` files that ``convtranspose bench`` wrote (the fixed suite and
random suites; through the array functions or, with ``bench --prepared``, prepared
layers) and prints, per file and for all files of each kind of call together, the
geometric mean of the best peer's time over ours on the layers whose best peer takes
under ``--under-ms`` milliseconds: the figure the prepared-layer target states ("the
layers whose best peer takes under 0.5 ms: geometric mean >= 1.2x the best peer, fixed
suite plus two random suites, against the functional API and the peers' prepared
forms"), with the count of those layers below 1.0x and the slowest five.  The best peer
and the ratio are the benchmark's own (``best_peer``, ``ratio_to_best_peer``: the
fastest peer that ran the layer and agreed with it), the geometric mean
:func:`convtranspose._cli.bench.report.suite_summary`'s.  Writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys

from convtranspose._cli.bench.report import suite_summary

#: The threshold the prepared-layer target names, in milliseconds.
UNDER_MS = 0.5
#: Slowest rows listed per group.
SHOWN = 5


def rated_rows(results: dict) -> list[dict]:
    """The rows of one ``results.json`` that a peer ran: those with the benchmark's
    ``best_peer`` and ``ratio_to_best_peer``."""
    return [row for row in results["rows"] if "ratio_to_best_peer" in row]


def _peer_ms(row: dict) -> float:
    return row["times_ms"][row["best_peer"]]


def summary(name: str, rows: list[dict], under_ms: float) -> list[str]:
    """Markdown lines for one group of rows: all layers, then those under the threshold."""
    small = [row for row in rows if _peer_ms(row) < under_ms]
    every, fast = suite_summary(rows), suite_summary(small)
    lines = [f"| {name} | {len(rows)} | {every.get('geomean', float('nan')):.3f}x "
             f"| {len(small)} | {fast.get('geomean', float('nan')):.3f}x "
             f"| {sum(row['ratio_to_best_peer'] < 1.0 for row in small)} |"]
    for row in sorted(small, key=lambda row: row["ratio_to_best_peer"])[:SHOWN]:
        lines.append(f"|   {row['layer']}: {row['times_ms']['convtranspose'] * 1e3:.1f} us"
                     f" against {row['best_peer']}'s {_peer_ms(row) * 1e3:.1f}"
                     f" ({row['ratio_to_best_peer']:.2f}x) | | | | | |")
    return lines


def report(paths: list[str], under_ms: float = UNDER_MS) -> list[str]:
    """The table's lines for the given results files."""
    header = ["| results (calls) | layers | all: best peer / ours | under "
              f"{under_ms:g} ms | geometric mean | below 1.0x |", "|---|---|---|---|---|---|"]
    by_calls: dict[str, list[dict]] = {}
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            results = json.load(file)
        calls = results.get("meta", {}).get("calls", "array function")
        rows = rated_rows(results)
        by_calls.setdefault(calls, []).extend(rows)
        suite = results.get("meta", {}).get("suite", {}).get("name", path)
        lines += summary(f"{suite} ({calls})", rows, under_ms)
    if len(paths) > 1:
        for calls, rows in by_calls.items():
            lines += summary(f"**all files ({calls})**", rows, under_ms)
    return header + lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="results.json files of convtranspose bench")
    parser.add_argument("--under-ms", type=float, default=UNDER_MS,
                        help=f"the best peer's time below which a layer counts (default"
                             f" {UNDER_MS})")
    args = parser.parse_args(argv)
    if not args.under_ms > 0:
        parser.error(f"--under-ms must be positive, got {args.under_ms}")
    try:
        lines = report(args.results, args.under_ms)
    except (OSError, ValueError, KeyError) as error:
        parser.error(f"cannot read the results: {error}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
