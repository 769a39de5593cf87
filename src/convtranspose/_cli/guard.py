"""The command line's last lines of defence: whatever goes wrong is one line on stderr.

:func:`guarded` runs a command and turns every exception the command's own handlers
let through into ``convtranspose: error: <Type>: <message>`` and exit code 2 (no
traceback), a full or closed stdout into one line too, and every warning into
``convtranspose: warning: <message>``.  :func:`refuse_writing_an_input` keeps ``-o``
off the command's own input files.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings
from collections.abc import Callable

from .parser import EXIT_BAD_INPUT, Failure

__all__ = ["MAX_LINE", "error", "guarded", "one_line", "refuse_writing_an_input"]

#: The longest error line: a message embedding a whole tensor's text is cut here.
MAX_LINE = 1000
_EXIT_OK, _EXIT_INTERRUPTED = 0, 130
# Errors of a write that found no room or no reader: stdout on /dev/full, a full disk.
_WRITING = {errno.ENOSPC, errno.EFBIG, errno.EIO, errno.EPIPE,
            getattr(errno, "EDQUOT", errno.ENOSPC)}


def one_line(message: object) -> str:
    """``message`` folded to one line (its lines joined by spaces) of at most
    :data:`MAX_LINE` characters: the command line promises one line per error, and
    messages from NumPy (a ``.npy`` header) or onnx (a tensor's text) span several."""
    folded = " ".join(line.strip() for line in str(message).splitlines() if line.strip())
    return folded if len(folded) <= MAX_LINE else folded[:MAX_LINE - 3] + "..."


def error(message: object) -> int:
    """Print ``message`` as the one error line; the exit code for bad input."""
    print(f"convtranspose: error: {one_line(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr, without the source line Python adds."""
    print(f"convtranspose: warning: {one_line(message)}", file=sys.stderr)


def _settle_stdout(failed: bool = False) -> None:
    """Flush stdout; when it cannot take its bytes (a full device, a closed pipe) or
    ``failed`` says it could not, point it at the null device, so that the interpreter's
    own flush at exit prints no second error."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        failed = True
    if failed:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def guarded(command: Callable[[list[str]], int], argv: list[str]) -> int:
    """``command(argv)``'s exit code; any exception it raises becomes one line on
    stderr and exit code 2 (130 for an interrupt, 0 for a reader that closed stdout)."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return command(argv)
    except KeyboardInterrupt:
        print("convtranspose: interrupted", file=sys.stderr)
        return _EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `| head` closed stdout early: not an error of ours
        _settle_stdout(failed=True)
        return _EXIT_OK
    except MemoryError:
        return error("out of memory; lower the sizes or the --max-bytes limit")
    except OSError as failure:  # stdout on a full device, a file that vanished ...
        writing = failure.errno in _WRITING
        _settle_stdout(failed=writing and not failure.filename)
        reason = failure.strerror or failure
        if failure.filename:
            return error(f"{failure.filename!r}: {reason}")
        return error(f"{'cannot write the output' if writing else type(failure).__name__}:"
                     f" {reason}")
    except Exception as failure:  # noqa: BLE001 - the last line of defence: one line, exit 2
        _settle_stdout()
        lines = str(failure).strip().splitlines() or [""]
        return error(f"{type(failure).__name__}: {lines[0]}")


def refuse_writing_an_input(args: argparse.Namespace) -> None:
    """Refuse an ``-o`` that names one of the command's input files (the same file by
    any name: a link, another path): inputs are never modified."""
    output = getattr(args, "output", None)
    if not output or output == "-" or not os.path.exists(output):
        return
    inputs = [(f"--{name}", getattr(args, name, None)) for name in ("data", "filter", "bias")]
    model = getattr(args, "model", None)
    if model:
        weights = getattr(args, "bin", None) or os.path.splitext(model)[0] + ".bin"
        inputs += [("the model", model), ("the model's weights", weights)]
    for flag, path in inputs:
        if path and os.path.exists(path) and os.path.samefile(path, output):
            raise Failure(f"-o {output!r} is {flag} {path!r}: the result would overwrite an"
                          " input; write it to another file")
