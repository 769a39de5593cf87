"""Fixtures the quantized dialects' tests share."""

from __future__ import annotations

import functools

import pytest


@pytest.fixture
def every_layer_integer(monkeypatch):
    """The integer kernels take every layer, its vector lanes idle or not (the tests'
    layers are small: the library sends many such layers to float32 passes), on any
    CPU."""
    from convtranspose._frontends import quantized

    monkeypatch.setattr(quantized, "lanes_pay", lambda *arguments: True)


@pytest.fixture
def counted(monkeypatch):
    """``counted(name) -> (function, calls)``: ``ct.<name>`` replaced, for the test, by
    a wrapper that appends to ``calls`` on each call (a prepared layer looks its
    function up by name, so its calls of the function are counted too)."""
    import convtranspose as ct

    def replace(name: str):
        function, calls = getattr(ct, name), []

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            calls.append(1)
            return function(*args, **kwargs)

        monkeypatch.setattr(ct, name, wrapper)
        return wrapper, calls

    return replace
