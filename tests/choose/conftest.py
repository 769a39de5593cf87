"""The planning tests' shared fixture: a fresh wisdom file per test."""

import pytest

import convtranspose as ct
from convtranspose._choose import planning, wisdom


@pytest.fixture
def wisdom_file(tmp_path, monkeypatch):
    """A fresh wisdom file for the test, measured planning at ``measure``."""
    path = tmp_path / "wisdom.json"
    monkeypatch.setenv(wisdom.WISDOM_ENV, str(path))
    monkeypatch.delenv(planning.PLANNING_ENV, raising=False)
    ct.forget_wisdom()
    yield path
    ct.forget_wisdom()
