"""A new user's first calls on a fresh machine: an empty cache folder, measured planning.

    python benchmarks/cold_start.py [--runs 2] [--out FILE]

Each row is one new process (``sys.executable``, this checkout's package), timed from
outside (interpreter start and exit included) and, for the README's first example, also
from inside (the first call alone):

- ``readme``: the README's first example (OpenVINO ConvolutionBackpropData-1, data
  1x20x224x224, filter 20x10x3x3, strides 2, pads 1), run as a script;
- ``readme block``: the README's whole first code block (five calls of four dialects,
  read from ``README.md``), from outside only;
- ``demo``: ``convtranspose demo``, the same layer through the command line.

Cache states, each in a fresh temporary folder: ``cold`` (the first process on the
machine; with background compilation, the candidates whose kernels are not compiled are
timed later), ``compiled`` (the first process after the background compilation of the
``cold`` one ended: every candidate is timed, the winner kept as wisdom), ``warm``
(the next process: the wisdom decides), and ``cold, background off``
(``CONVTRANSPOSE_BACKGROUND_COMPILE=off``: the first process compiles every candidate
itself, as before).  Prints a table; ``--out`` writes the medians as JSON.  The folders
are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SOURCE))

from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

_README = """\
import time
started = time.perf_counter()
import numpy as np
import convtranspose as ct
from convtranspose._choose.planning import recording
data = np.random.rand(1, 20, 224, 224).astype(np.float32)
filter = np.random.rand(20, 10, 3, 3).astype(np.float32)
before = time.perf_counter()
with recording() as choices:
    y = ct.convolution_backprop_data(data, filter, strides=2, pads_begin=1, pads_end=1)
print(time.perf_counter() - before, sorted({c.decided_by for c in choices}))
"""



def _readme_block() -> str:
    """The README's first Python code block, as a script."""
    text = (SOURCE.parent / "README.md").read_text(encoding="utf-8")
    start = text.index("```python\n") + len("```python\n")
    return text[start:text.index("```", start)]


#: Seconds to wait for a cold process's background compilation at most.
_WAIT_SECONDS = 600


def _environment(folder: str, background: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONVTRANSPOSE_")}
    environment.update(CONVTRANSPOSE_CACHE_DIR=folder, CONVTRANSPOSE_BACKGROUND_COMPILE=background,
                       PYTHONPATH=str(SOURCE))
    return environment


def _process(command: list[str], environment: dict) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def _readme(environment: dict) -> tuple[float, float, str]:
    wall, output = _process([sys.executable, "-c", _README], environment)
    first_call, decided = output.split(" ", 1)
    return wall, float(first_call), decided.strip()


def _one_machine(work: pathlib.Path, background: str) -> dict:
    """The rows of one fresh machine (cache folder)."""
    folder = tempfile.mkdtemp(dir=work)
    environment = _environment(folder, background)
    rows = {"cold": _readme(environment)}
    if background == "on":
        deadline = time.monotonic() + _WAIT_SECONDS
        while True:  # the first process whose plan is not provisional any more
            row = _readme(environment)
            if "provisional" not in row[2] or time.monotonic() > deadline:
                break
            time.sleep(2)
        rows["compiled"] = row
        rows["warm"] = _readme(environment)
    block, _ = _process([sys.executable, "-c", _readme_block()],
                        _environment(tempfile.mkdtemp(dir=work), background))
    demo, _ = _process([sys.executable, "-m", "convtranspose", "demo"],
                       _environment(tempfile.mkdtemp(dir=work), background))
    return {"rows": rows, "readme_block_cold": block, "demo_cold": demo}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="fresh machines per setting")
    parser.add_argument("--out", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    results = {"machine": cpu_model_name(), "runs": args.runs,
               "command": "python benchmarks/cold_start.py " + " ".join(argv or sys.argv[1:]),
               "load_average_before": os.getloadavg(), "states": {}}
    with tempfile.TemporaryDirectory() as work:
        machines = {background: [_one_machine(pathlib.Path(work), background)
                                 for _ in range(args.runs)] for background in ("on", "off")}
    print(f"{'state':<28}{'process s':>11}{'first call s':>14}  decided by")
    for background, runs in machines.items():
        for state in runs[0]["rows"]:
            label = state if background == "on" else f"{state}, background off"
            walls = [run["rows"][state][0] for run in runs]
            calls = [run["rows"][state][1] for run in runs]
            decided = runs[0]["rows"][state][2]
            results["states"][label] = {"process_s": statistics.median(walls),
                                        "first_call_s": statistics.median(calls),
                                        "decided_by": decided}
            print(f"{label:<28}{statistics.median(walls):>11.2f}"
                  f"{statistics.median(calls):>14.2f}  {decided}")
        for key, name in (("readme_block_cold", "readme block, cold"),
                          ("demo_cold", "demo, cold")):
            wall = statistics.median(run[key] for run in runs)
            label = name + ("" if background == "on" else ", background off")
            results["states"][label] = {"process_s": wall}
            print(f"{label:<28}{wall:>11.2f}")
    results["load_average_after"] = os.getloadavg()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
