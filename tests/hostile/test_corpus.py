"""Every case of the hostile corpus (``tests/hostile/corpus.py``) through the real
command line, in a subprocess with a time limit and a 4 GiB address-space limit: it
ends in time (and, where the case sets one, under its resident-memory limit, read from
the child's own high-water mark) with its documented exit code, prints one error line
(after at most the library's notices, one line each; never a traceback or a raw Python
warning), and changes no file but the ones it was asked to write (no temporary file
left behind)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import corpus
import pytest

from cli_support import cli_command

pytest.importorskip("onnx")
pytest.importorskip("defusedxml")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs, /dev/full and rlimits")

TIME_LIMIT = 60  # seconds; every refusal takes about one (an import), a run a few
ADDRESS_SPACE = 4 * 2**30
SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def _limit_memory() -> None:  # runs in the child, before it executes the command line
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _snapshot(folder: Path) -> dict:
    """Every entry under ``folder``: its kind, size, modification time and inode."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        status = path.lstat()
        entries[str(path.relative_to(folder))] = (status.st_mode, status.st_size,
                                                  status.st_mtime_ns, status.st_ino)
    return entries


def _peak_resident_kib(pid: int, done: threading.Event, peak: list[int]) -> None:
    """The child's ``VmHWM`` (its address space's own high-water mark, started afresh by
    its exec) read every 20 ms until it ends.  Not ``wait4``'s ``ru_maxrss``: that keeps
    the high-water mark from before the exec, which a fork of a large test process (one
    that imported torch) already holds."""
    while not done.is_set():
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
        except OSError:
            return
        done.wait(0.02)


def _run(argv: list[str], env: dict, cwd: Path, stdout_path: str | None):
    """Run ``argv`` under the limits: its exit code, its stderr and its peak resident
    memory in KiB (:func:`_peak_resident_kib`)."""
    with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as errors:
        stdout = open(stdout_path, "wb") if stdout_path else output
        try:
            child = subprocess.Popen(argv, stdout=stdout, stderr=errors, env=env, cwd=cwd,
                                     preexec_fn=_limit_memory)
        finally:
            if stdout_path:
                stdout.close()
        timer = threading.Timer(TIME_LIMIT, child.kill)
        timer.start()
        done, peak = threading.Event(), [0]
        watcher = threading.Thread(target=_peak_resident_kib, args=(child.pid, done, peak))
        watcher.start()
        try:
            child.wait()
        finally:
            timer.cancel()
            done.set()
            watcher.join()
        assert child.returncode != -9, f"not done within {TIME_LIMIT} s"
        errors.seek(0)
        return child.returncode, errors.read(), peak[0]


def _params():
    for case in corpus.CASES:
        marks = [pytest.mark.slow] if case.slow else []
        yield pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_a_hostile_case_ends_in_time_with_one_line(tmp_path, case):
    folder = tmp_path / "case"
    argv, changes = corpus.build(case, folder)
    before = _snapshot(folder)
    env = {**os.environ, "PYTHONPATH": SOURCE, **changes}
    started = time.monotonic()
    returncode, stderr_bytes, peak_kb = _run(cli_command() + argv, env, tmp_path,
                                             case.stdout_path)
    elapsed = time.monotonic() - started
    if case.max_rss_mb is not None:
        assert peak_kb < case.max_rss_mb * 1024, (peak_kb // 1024, case.max_rss_mb)
    stderr = stderr_bytes.decode("utf-8", "replace")
    lines = stderr.strip().splitlines()
    assert returncode == case.exit_code, (returncode, stderr[-3000:])
    assert "Traceback" not in stderr and "Warning:" not in stderr, stderr[-3000:]
    assert all(line.startswith("convtranspose") for line in lines), stderr[-3000:]
    errors = [line for line in lines if ": error: " in line]
    if case.exit_code != 0:  # an error: one line, last (after a cold cache's notice)
        assert errors == lines[-1:], stderr[-3000:]
        assert case.stderr in errors[0].lower(), (case.stderr, errors[0])
    else:  # a success may tell what it followed or ignored: one line each
        assert not errors, stderr[-3000:]
        if case.stderr:
            assert sum(case.stderr in line.lower() for line in lines) == 1, stderr
    after = _snapshot(folder)
    for name in case.writes if case.exit_code == 0 else ():
        after.pop(name, None)
        before.pop(name, None)
    assert after == before, (set(after) ^ set(before), elapsed)
