"""``convtranspose tune MODEL``: measure every transposed-convolution layer of a model.

Each layer runs once on random data of its declared input shape (a dynamic batch as
``--batch``) with the model's own weights, under measured planning: the algorithms
are timed and the fastest is kept as wisdom, so the model's later runs (in any
process on this machine, through any of the four dialect functions) start with it.
A layer already in the wisdom is not measured again unless ``--force`` asks for it
(its entry is then replaced).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import numpy as np

__all__ = ["tune"]


def _model(args, load_model):
    """``(items, check, run, kind)`` of an OpenVINO IR (``.xml``) or ONNX model, read by
    ``load_model(kind, action, args)`` (with ``--input-shape``)."""
    if args.model.lower().endswith(".xml"):
        model = load_model("ir", "tune", args)
        return model.transposed_layers, model.check, model.run, "layers"
    model = load_model("onnx", "tune", args)
    return model.transposed_nodes, model.check, model.run, "nodes"


def _tune_one(item, check, run, batch: int, rng) -> dict:
    """One layer's row: its choice, time and runner-up, or why it was not measured."""
    from .._choose.planning import recording

    report = check(item)
    row = {"layer": report.name, "op": report.op}
    shape = report.data_shape
    if report.status in ("invalid", "unchecked") or shape is None or None in shape[1:]:
        row["skipped"] = (report.problems[0] if report.problems
                          else f"status {report.status}: no static input shape")
        if report.status == "unchecked":
            row["skipped"] += "; give --input-shape NAME=DIMS"
        return row
    shape = (batch if shape[0] is None else shape[0],) + tuple(shape[1:])
    row["data_shape"] = list(shape)
    data = (rng.random(shape, dtype=np.float32) * 2 - 1)
    with recording() as choices:
        run(item, data)
    if not choices:
        row["skipped"] = "nothing to plan (an empty layer)"
        return row
    choice = choices[0]
    times = dict(sorted(choice.measured, key=lambda item: item[1]))
    row.update(algorithm=choice.runs, threads=choice.threads, decided_by=choice.decided_by,
               times_ns=times)
    # The choice's own time and the fastest other, by time (never by the times' order).
    if choice.label in times:
        row["time_ns"] = times[choice.label]
        others = [(name, ns) for name, ns in times.items() if name != choice.label]
        if others:
            row["runner_up"] = list(min(others, key=lambda item: item[1]))
    return row


def _format_row(row: dict) -> str:
    from .._choose.choice import format_ns

    if "skipped" in row:
        return f"  {row['layer']}: not measured ({row['skipped']})"
    if "time_ns" not in row:
        return (f"  {row['layer']}: {row['algorithm']} (by {row['decided_by']};"
                " nothing measured)")
    ns = row["time_ns"]
    on = f" on {row['threads']} thread{'s' * (row['threads'] > 1)}" if row.get("threads") else ""
    best = f"{row['algorithm']}{on} {format_ns(ns)}"
    runner = ""
    if "runner_up" in row:
        name, other = row["runner_up"]
        runner = f"; runner-up {name} {format_ns(other)} ({other / ns:.2f}x)"
    return f"  {row['layer']}  {row['data_shape']}: {best}{runner}"


def tune(args, progress_class, load_model) -> int:
    """The ``tune`` command (``args`` from the parser; ``progress_class`` the CLI's bar;
    ``load_model(kind, action, args)`` the CLI's model reader)."""
    from .._choose.planning import remeasuring, use_planning
    from .._execute.background import compiling_here

    items, check, run, kind = _model(args, load_model)
    rng = np.random.default_rng(args.seed)
    progress = progress_class(len(items), "tuning", always=True)
    rows = []
    try:
        # Tuning is the explicit request to measure: every candidate compiles here.
        with use_planning(args.level), compiling_here(), (
                remeasuring() if args.force else contextlib.nullcontext()):
            for done, item in enumerate(items, 1):
                rows.append(_tune_one(item, check, run, args.batch, rng))
                progress.update(done)
    finally:
        progress.close()
    from .._choose.planning import store_path

    path = store_path()
    if args.json:
        print(json.dumps({"model": os.path.basename(args.model), "level": args.level,
                          "wisdom": path, "layers": rows}))
        return 0
    print(f"{os.path.basename(args.model)}: {len(items)} transposed-convolution {kind},"
          f" planning {args.level}")
    for row in rows:
        print(_format_row(row))
    print("wisdom kept in " + (path or "memory only (CONVTRANSPOSE_WISDOM=off)"),
          file=sys.stderr)
    return 0
