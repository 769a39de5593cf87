"""Shared pytest configuration: command-line budgets and hypothesis profiles.

- ``--examples N``: hypothesis examples per property test against the oracle (default 60).
- ``--peer-examples N``: random configurations per dialect against the peer runtimes (default 300).
- ``--runslow``: also run tests marked ``slow`` (large layers, long budgets).

CI runs derandomised (profile ``ci``, chosen when ``CI`` is set) so a red build reproduces.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", **_COMMON)
settings.register_profile("ci", derandomize=True, print_blob=True, **_COMMON)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser):
    parser.addoption("--examples", type=int, default=60,
                     help="hypothesis examples per property test against the oracle")
    parser.addoption("--peer-examples", type=int, default=300,
                     help="random configurations per dialect against the peer runtimes")
    parser.addoption("--runslow", action="store_true", help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def examples(pytestconfig):
    """The hypothesis example budget for property tests (``--examples``)."""
    return pytestconfig.getoption("--examples")


@pytest.fixture(scope="session")
def peer_examples(pytestconfig):
    """The per-dialect budget for differential tests against runtimes (``--peer-examples``)."""
    return pytestconfig.getoption("--peer-examples")
