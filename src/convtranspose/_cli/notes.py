"""The per-layer notes of ``check`` and ``compare`` on stderr, in one format.

Each note is one line, so that a script can read the table on stdout and the reasons on
stderr: ``convtranspose: mismatch: NOTE`` for a layer that failed (``note`` for one that
did not) and ``convtranspose: convention: LABEL: CONVENTION`` for a convention the
layer's owner follows.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

__all__ = ["print_notes"]


def print_notes(label: str, notes: Iterable[str], conventions: Iterable[str], *,
                failed: bool) -> None:
    """Print one layer's ``notes`` (each already naming its layer) and ``conventions``
    (labelled with ``label``) to stderr, one line each.

    Examples
    --------
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     print_notes("up1", ["up1: outputs differ"], ["SAME_UPPER"], failed=True)
    >>> print(err.getvalue(), end="")
    convtranspose: mismatch: up1: outputs differ
    convtranspose: convention: up1: SAME_UPPER
    """
    prefix = "mismatch" if failed else "note"
    for note in notes:
        print(f"convtranspose: {prefix}: {note}", file=sys.stderr)
    for convention in conventions:
        print(f"convtranspose: convention: {label}: {convention}", file=sys.stderr)
