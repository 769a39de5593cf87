"""Report how many configurations each dialect compared with its peer runtime."""

from . import _runtimes


def pytest_terminal_summary(terminalreporter):
    if not _runtimes.COUNTS:
        return
    terminalreporter.section("peer conformance: configurations compared")
    for name, cases in sorted(_runtimes.COUNTS.items()):
        terminalreporter.write_line(f"{len(cases):6d}  {name}")
