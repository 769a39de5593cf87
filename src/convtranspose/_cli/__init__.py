"""Layer 7, commands: what :mod:`convtranspose.cli` runs.

- :mod:`.parser`: the commands, their options and help;
- :mod:`.guard`: the last lines of defence (any exception or warning is one line);
- :mod:`.notes`: the per-layer notes of ``check`` and ``compare`` on stderr;
- :mod:`.translate`: ``convtranspose translate``;
- :mod:`.tune`: ``convtranspose tune MODEL``;
- :mod:`.bench`: ``convtranspose bench``, the public API timed as a black box against
  the peer runtimes.
"""
