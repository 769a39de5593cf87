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
is the fastest peer that ran the layer and agreed with it (the benchmark leaves a peer
that disagrees out of ``times_ms``).  Writes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable
from typing import NamedTuple

#: The threshold the prepared-layer target names, in milliseconds.
UNDER_MS = 0.5
#: Slowest rows listed per group.
SHOWN = 5


class Row(NamedTuple):
    """One layer of one results file: our time, its best peer's and the ratio."""

    layer: str
    ours_ms: float
    peer: str
    peer_ms: float

    @property
    def ratio(self) -> float:
        return self.peer_ms / self.ours_ms


def rows_of(results: dict) -> list[Row]:
    """The rows of one ``results.json`` that a peer ran, with their best peer."""
    rows = []
    for row in results["rows"]:
        times = row.get("times_ms", {})
        ours = times.get("convtranspose")
        peers = {name: ms for name, ms in times.items() if name != "convtranspose" and ms}
        if ours and peers:
            peer = min(peers, key=peers.__getitem__)
            rows.append(Row(row["layer"], ours, peer, peers[peer]))
    return rows


def geometric_mean(ratios: Iterable[float]) -> float:
    values = list(ratios)
    return math.exp(sum(math.log(value) for value in values) / len(values)) if values else math.nan


def summary(name: str, rows: list[Row], under_ms: float) -> list[str]:
    """Markdown lines for one group of rows: all layers, then those under the threshold."""
    small = [row for row in rows if row.peer_ms < under_ms]
    lines = [f"| {name} | {len(rows)} | {geometric_mean(r.ratio for r in rows):.3f}x "
             f"| {len(small)} | {geometric_mean(r.ratio for r in small):.3f}x "
             f"| {sum(r.ratio < 1.0 for r in small)} |"]
    for row in sorted(small, key=lambda row: row.ratio)[:SHOWN]:
        lines.append(f"|   {row.layer}: {row.ours_ms * 1e3:.1f} us against {row.peer}'s "
                     f"{row.peer_ms * 1e3:.1f} ({row.ratio:.2f}x) | | | | | |")
    return lines


def report(paths: list[str], under_ms: float = UNDER_MS) -> list[str]:
    """The table's lines for the given results files."""
    header = ["| results (calls) | layers | all: best peer / ours | under "
              f"{under_ms:g} ms | geometric mean | below 1.0x |", "|---|---|---|---|---|---|"]
    by_calls: dict[str, list[Row]] = {}
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            results = json.load(file)
        calls = results.get("meta", {}).get("calls", "array function")
        rows = rows_of(results)
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
