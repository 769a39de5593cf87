"""The background process of :mod:`.background`: ``python -m
convtranspose._execute.background_worker`` reads jobs (JSON, one per layer) from standard
input and runs each job's algorithms once on zeros of its problem, which compiles their
kernels into the kernel cache folder, and the weights memo's comparison of filters;
then it exits.  After each algorithm it writes a line ``"<job index> <algorithm>"`` to
standard output, where the caller reads which kernels are ready.  One such process
compiles at a time on the machine (a lock in the cache folder).  Failures are ignored:
a kernel that did not compile here compiles in the process that needs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import numpy as np

from .._choose.figures import fma_gflops
from .._plan.rules import AxisPlan
from .._runtime.cache import cache_dir, file_lock
from .._runtime.target import Target
from .transposed import transposed_convolution

__all__ = ["main"]


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16: registered with NumPy by ml_dtypes
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def _zeros(layout: dict) -> np.ndarray:
    order = layout["order"]
    shape = [layout["shape"][axis] for axis in order]
    return np.zeros(shape, _dtype(layout["dtype"])).transpose(np.argsort(order))


def _report(index: int, name: str) -> None:
    """Tell the caller that the kernels of job ``index``'s algorithm ``name`` are ready
    (nobody listening, as after the caller ended, changes nothing)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(f"{index} {name}\n")
        sys.stdout.flush()


def _run_each(index: int, names, run) -> None:
    """``run(name)`` for each of job ``index``'s algorithms ``names`` (compiling their
    kernels), reporting each that ran.  A failure only means: its kernels compile
    later, in the process that needs them."""
    for name in names:
        try:
            run(name)
        except Exception:  # noqa: BLE001, S112 - any failure: not ready, go on
            continue
        _report(index, name)


def _compile_adjoint(index: int, job: dict) -> None:
    """Run every adjoint algorithm of job ``index`` once on zeros (compiling its
    kernels)."""
    from .._kernels import adjoints

    axes = tuple(AxisPlan(*axis) for axis in job["axes"])
    first, second, dtype = _zeros(job["first"]), _zeros(job["second"]), _dtype(job["dtype"])

    def run(name):
        if job["adjoint"] == "data":  # (zeros: the kernels of a finite filter)
            adjoints.data_adjoint(first, second, axes, dtype, name, finite_weights=True)
        else:
            adjoints.filter_adjoint(first, second, axes, job["groups"], dtype, name)

    _run_each(index, job["algorithms"], run)


def _compile_native_gemms() -> None:
    """Compile the BLAS products called from compiled code, for every dtype with a BLAS
    (:mod:`convtranspose._kernels._numba.native_gemm`; a second to compile)."""
    from .._kernels._numba.native_gemm import compile_entries

    compile_entries()


#: The helper kernels a job may name (:func:`convtranspose._execute.background
#: .compile_helpers`), each with what compiles them.
HELPERS = {"native-gemm": _compile_native_gemms}


def _compile(index: int, job: dict) -> None:
    """Run every algorithm of job ``index`` once on zeros (compiling its kernels)."""
    if "helpers" in job:
        _run_each(index, [job["helpers"]], lambda name: HELPERS[name]())
        return
    if "adjoint" in job:
        _compile_adjoint(index, job)
        return
    target = Target(**job["target"])
    axes = tuple(AxisPlan(*axis) for axis in job["axes"])
    data, weights = _zeros(job["data"]), _zeros(job["weights"])
    bias = None if job["bias"] is None else _zeros(job["bias"])
    result_dtype = None if job["result_dtype"] is None else _dtype(job["result_dtype"])

    def run(name):
        transposed_convolution(data, weights, axes, dtype=_dtype(job["dtype"]),
                               channels_last=job["channels_last"], bias=bias,
                               algorithm=name, result_dtype=result_dtype, target=target)

    _run_each(index, job["algorithms"], run)


def main() -> None:
    """Compile the jobs read from standard input as JSON (and measure the FMA peak the
    estimates use, if the wisdom has none yet)."""
    jobs = json.load(sys.stdin)
    folder = cache_dir()
    if folder is None:
        return
    # One background compilation at a time on the machine: a process that starts while
    # another compiles waits, then finds most of its kernels compiled (they load).
    with file_lock(os.path.join(folder, "background-compile")):
        with contextlib.suppress(Exception):
            fma_gflops()
        for index, job in enumerate(jobs):
            _compile(index, job)
        for compile_helpers in (_compile_filter_check, _compile_native_gemms):
            with contextlib.suppress(Exception):
                compile_helpers()


def _compile_filter_check() -> None:
    """Compile the weights memo's comparison of filters (a layer's second call checks
    its filter with it; half a second to compile), for the memo's read-only copy and a
    caller's filter, writeable or not (numba compiles each combination of the flags)."""
    from .._runtime.memo import compiled_equal

    kept = np.zeros(64, np.uint8)
    kept.flags.writeable = False
    for writeable in (True, False):
        filter = np.zeros(64, np.uint8)
        filter.flags.writeable = writeable
        compiled_equal(kept, filter)


if __name__ == "__main__":
    main()
