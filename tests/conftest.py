"""Shared pytest configuration: command-line budgets and hypothesis profiles.

- ``--examples N``: hypothesis examples per property test against the oracle (default 60).
- ``--peer-examples N``: random configurations per dialect against the peer runtimes (default 300).
- ``--runslow``: also run tests marked ``slow`` (large layers, long budgets).
- ``--fuzz-examples N``: draws of the fuzz test, tests/test_fuzz.py (default 400).

CI runs derandomised (profile ``ci``, chosen when ``CI`` is set) so a red build reproduces.
"""

import contextlib
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The shared helpers (oracle.py, cli_support.py) sit here; tests in subfolders import them.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The suite checks results: the cost model decides, and nothing is kept on disk between
# runs (measured planning and wisdom have their own tests in tests/planning/, which turn
# them on per test).  Subprocesses of the tests inherit these.
os.environ.setdefault("CONVTRANSPOSE_PLANNING", "estimate")
os.environ.setdefault("CONVTRANSPOSE_WISDOM", "off")
# Kernels compile in the process that measures (tests/choose/test_background.py turns the
# background compilation on): a test's measurement is then complete, and no background
# process competes with the suite for the CPUs.
os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")
# TensorFlow as the peer tests compare with: Eigen's kernels, whichever test imports it
# first.  With its oneDNN kernels, this Xeon's data gradient of a stride (1, 2) VALID
# conv2d_transpose came out wrong (tests/peers/test_gradients_frameworks.py, after the
# TFLite tests had imported TensorFlow first).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

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
    parser.addoption("--fuzz-examples", type=int, default=400,
                     help="draws of the fuzz test (tests/test_fuzz.py)")


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


@pytest.fixture
def use_target():
    """``use_target(**changes)``: run the rest of the test on this machine's target with
    ``changes`` (``vector_bytes=32`` exercises the AVX2 kernels on an AVX-512 CPU,
    ``threads=3`` splits work three ways on any machine); calls compound."""
    from convtranspose import Target, host_target
    from convtranspose import use_target as enter

    stack = contextlib.ExitStack()

    def use(**changes) -> Target:
        return stack.enter_context(enter(host_target().replace(**changes)))

    with stack:
        yield use
