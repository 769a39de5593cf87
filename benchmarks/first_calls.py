"""First calls in new processes, with the compiled kernels cached on disk or not.

    python benchmarks/first_calls.py [--runs 5] [--cold-runs 2] [--out FILE]

Every number comes from a new process (``sys.executable``, this checkout's package):

- ``first_call``: the import of NumPy and the library plus the first call of a mid
  layer (DCGAN 256->128 16x16 k4 s2 p1, batch 1, float32), with numba ``direct`` forced
  (``CONVTRANSPOSE_ALGORITHM=direct``) and with the library's own choice;
- ``cli``: ``convtranspose run`` end to end on a small layer (1x16x8x8 data, 16->8
  3x3 filter, stride 2), timed from outside the process (start-up and exit included);
- ``early_calls``: the first ``--calls`` calls of layer N1 (data 1x384x16x16, filter
  384x192x4x4, stride 2, pads 1) in one process with ``gemm-ncx`` forced, each call's
  wall and CPU time and minor page faults; as the library is, and with its helper
  threads' CPU affinity left alone (``_runtime.threads`` steering off).

Bytecode is kept under the temporary folder (``PYTHONPYCACHEPREFIX``) and written by an
untimed first process, as an installed package has it.  Cache states: ``cold`` (an empty cache folder: every kernel is compiled and written),
``warm`` (the folder a previous process filled), ``off`` (``CONVTRANSPOSE_CACHE_DIR=off``)
and ``no-numba`` (``CONVTRANSPOSE_NO_NUMBA=1``, the NumPy algorithms).  The cache
folders are temporary and removed afterwards; ``--out`` writes the minimum and median
of each as JSON.  Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SOURCE))  # this checkout's library, as the timed processes get

from convtranspose._runtime.machine import cpu_model_name  # noqa: E402

_FIRST_CALL = """\
import time
start = time.perf_counter()
import numpy as np
import convtranspose as ct
imported = time.perf_counter()
rng = np.random.default_rng(0)
data = rng.standard_normal((1, 256, 16, 16)).astype(np.float32)
weights = rng.standard_normal((256, 128, 4, 4)).astype(np.float32)
before = time.perf_counter()
ct.convolution_backprop_data(data, weights, strides=2, pads_begin=1, pads_end=1)
done = time.perf_counter()
print(f"{(imported - start) * 1e3:.1f} {(done - before) * 1e3:.1f}")
"""

_EARLY_CALLS = """\
import resource, sys, time
import numpy as np
import convtranspose as ct
if sys.argv[2] == "unpinned":  # the helper threads' CPU affinity left alone
    from convtranspose._runtime import threads
    threads.steering = False
rng = np.random.default_rng(0)
data = rng.standard_normal((1, 384, 16, 16)).astype(np.float32)
weights = rng.standard_normal((384, 192, 4, 4)).astype(np.float32)
def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_minflt
for _ in range(int(sys.argv[1])):
    cpu, faults = usage()
    start = time.perf_counter()
    ct.convolution_backprop_data(data, weights, strides=2, pads_begin=1, pads_end=1)
    wall = time.perf_counter() - start
    cpu_after, faults_after = usage()
    print(f"{wall * 1e3:.1f} {(cpu_after - cpu) * 1e3:.1f} {faults_after - faults}")
"""


def _environment(state: str, folder: str, **changes) -> dict:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("CONVTRANSPOSE_", "NUMBA_CPU"))
                   and k != "PYTHONDONTWRITEBYTECODE"}
    # Bytecode as an installed package has it (pip compiles it), kept apart from the
    # sources: every process after the first untimed one reads it.
    environment["PYTHONPYCACHEPREFIX"] = str(pathlib.Path(folder).parent / "pycache")
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(SOURCE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    environment["CONVTRANSPOSE_CACHE_DIR"] = "off" if state in ("off", "no-numba") else folder
    if state == "no-numba":
        environment["CONVTRANSPOSE_NO_NUMBA"] = "1"
    environment.update(changes)
    return environment


def _timed(command, environment, cwd) -> tuple[float, str]:
    """(wall ms of the whole process, its stdout)."""
    start = time.perf_counter()
    done = subprocess.run(command, env=environment, cwd=cwd, check=True, capture_output=True,
                          text=True)
    return (time.perf_counter() - start) * 1e3, done.stdout


def _summary(values: list[float]) -> dict:
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1),
            "runs": [round(v, 1) for v in values]}


def _measure(state: str, runs: int, work: pathlib.Path, algorithm: str | None) -> dict:
    """First-call and CLI times of ``runs`` new processes in cache ``state``."""
    imports, calls, processes, cli = [], [], [], []
    for run in range(runs):
        folder = str(work / f"cache-{state}-{run}" if state == "cold" else work / "cache-warm")
        changes = {"CONVTRANSPOSE_ALGORITHM": algorithm} if algorithm else {}
        environment = _environment(state, folder, **changes)
        if state == "warm" and run == 0:  # fill the folder once, untimed
            _timed([sys.executable, "-c", _FIRST_CALL], environment, work)
            _timed(_cli_command(), _environment(state, folder), work)
        total, out = _timed([sys.executable, "-c", _FIRST_CALL], environment, work)
        imported, called = (float(v) for v in out.split())
        imports.append(imported)
        calls.append(called)
        processes.append(total)
        if algorithm is None:  # the command line makes the library's own choice
            # Cold: a folder of its own, not the one the first call just filled.
            cli_folder = folder + "-cli" if state == "cold" else folder
            cli.append(_timed(_cli_command(), _environment(state, cli_folder), work)[0])
    entry = {"import_ms": _summary(imports), "first_call_ms": _summary(calls),
             "import_and_first_call_ms": _summary([a + b for a, b in zip(imports, calls)]),
             "process_ms": _summary(processes)}
    if cli:
        entry["cli_run_ms"] = _summary(cli)
    return entry


def _cli_command() -> list[str]:
    return [sys.executable, "-m", "convtranspose", "run", "convolution_backprop_data",
            "--data", "x.npy", "--filter", "w.npy", "-o", "y.npy", "--strides", "2"]


def _early_calls(calls: int, runs: int, work: pathlib.Path) -> dict:
    """Per variant (the library as it is; its helper threads not pinned off the caller's
    CPU), per process, per call: (wall ms, CPU ms, minor page faults).  The variants
    alternate process by process."""
    environment = _environment("warm", str(work / "cache-warm"),
                               CONVTRANSPOSE_ALGORITHM="gemm-ncx")
    results = {"as is": [], "unpinned": []}
    for _ in range(runs):
        for variant, processes in results.items():
            out = _timed([sys.executable, "-c", _EARLY_CALLS, str(calls), variant],
                         environment, work)[1]
            processes.append([[float(v) for v in line.split()] for line in out.splitlines()])
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per warm measurement")
    parser.add_argument("--cold-runs", type=int, default=2,
                        help="processes per cold and off measurement (seconds each)")
    parser.add_argument("--calls", type=int, default=6, help="calls timed in early_calls")
    parser.add_argument("--out", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="first-calls-") as temporary:
        work = pathlib.Path(temporary)
        rng = np.random.default_rng(0)
        np.save(work / "x.npy", rng.standard_normal((1, 16, 8, 8)).astype(np.float32))
        np.save(work / "w.npy", rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
        # Untimed: bytecode for every module the measured processes import.
        _timed([sys.executable, "-c", _FIRST_CALL], _environment("cold", str(work / "c")), work)
        _timed(_cli_command(), _environment("cold", str(work / "c")), work)
        results = {}
        for label, algorithm in (("direct", "direct"), ("default", None)):
            for state in ("warm", "no-numba", "cold", "off"):
                if state == "no-numba" and algorithm == "direct":
                    continue  # direct is numba's
                runs = args.runs if state in ("warm", "no-numba") else args.cold_runs
                results[f"{label} {state}"] = entry = _measure(state, runs, work, algorithm)
                cli = entry.get("cli_run_ms", {}).get("median", float("nan"))
                print(f"{label:8} {state:9} import+first call "
                      f"{entry['import_and_first_call_ms']['median']:8.1f} ms  "
                      f"cli run {cli:8.1f} ms (medians)")
        early = _early_calls(args.calls, args.runs, work)
        for variant, processes in early.items():
            for run in processes:
                print(f"gemm-ncx N1 {variant:8} calls (wall ms):",
                      " ".join(f"{c[0]:.1f}" for c in run))
    if args.out:
        import numba

        report = {"machine": cpu_model_name(), "python": platform.python_version(),
                  "numba": numba.__version__, "numpy": np.__version__,
                  "command": "python benchmarks/first_calls.py " + " ".join(argv or sys.argv[1:]),
                  "first_calls": results,
                  "early_calls_gemm_ncx_n1": {"columns": ["wall ms", "cpu ms", "minor faults"],
                                              "variants": early}}
        pathlib.Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
