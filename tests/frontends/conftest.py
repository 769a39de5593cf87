"""Fixtures the quantized dialects' tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def every_layer_integer(monkeypatch):
    """The integer kernels take every layer, its vector lanes idle or not (the tests'
    layers are small: the library sends many such layers to float32 passes), on any
    CPU."""
    from convtranspose._frontends import quantized

    monkeypatch.setattr(quantized, "lanes_pay", lambda *arguments: True)
