"""The cost model learns this machine from what measured planning timed: the fit
against known coefficients, damaged samples, and the loop from measurement to wisdom
to a better estimate, on a scripted clock (whatever this machine's speed)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import types

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._choose import calibration, planning, wisdom
from convtranspose._choose import choice as dispatch
from convtranspose._runtime.target import host

measure_module = importlib.import_module("convtranspose._choose.measure")


def test_the_fit_recovers_the_coefficients_that_made_the_times():
    # Times made by known coefficients from random parts, with 5% log-normal noise: the
    # fit finds the coefficients (the prior's pull is one sample's worth of 400).
    rng = np.random.default_rng(3)
    parts = rng.uniform(0, 1e6, (400, 3)) * (rng.random((400, 3)) < 0.7)
    truth = np.array([0.3, 2.0, 0.6])
    overhead = 4 * calibration.OVERHEAD_UNIT_NS
    times = (parts @ truth + overhead) * np.exp(rng.normal(0, 0.05, 400))
    fit = calibration.fit_coefficients(parts, times)
    assert fit.samples == 400
    np.testing.assert_allclose([fit.passes, fit.blas, fit.numba], truth, rtol=0.1)
    assert 2 < fit.calls < 8  # a small term: only the smallest samples tell it


def test_without_samples_the_fit_is_the_prior():
    fit = calibration.fit_coefficients(np.zeros((0, 3)), [])
    assert (fit.passes, fit.blas, fit.numba, fit.calls) == (1.0, 1.0, 1.0, 1.0)
    cost = calibration.RawCost(5e5, 2e5, 1e5)
    assert fit.ns(cost) == cost.total + calibration.OVERHEAD_UNIT_NS


def test_damaged_samples_are_skipped():
    choices = {
        "good": {"times_ns": {"a": 2000, "b": 10}, "parts": {"a": [1.0, 2.0, 3.0], "b": [1, 1, 1]}},
        "not a dict": "x",
        "no parts": {"times_ns": {"a": 5}},
        "parts not a dict": {"times_ns": {"a": 5}, "parts": [1, 2, 3]},
        "bad numbers": {"times_ns": {"a": 5, "b": 0, "c": "7", "d": 9, "e": 1},
                        "parts": {"a": [1, "x", 3], "b": [1, 2, 3], "c": [1, 2, 3],
                                  "d": [1, -2, 3], "e": [1, math.nan, 3], "f": [1, 2, 3]}},
        "short": {"times_ns": {"a": 5}, "parts": {"a": [1, 2]}},
    }
    samples = calibration.samples_of(choices)
    # "c" has a numeric string for its time, which float() reads; all else is unusable.
    assert samples == {"a": ([[1.0, 2.0, 3.0]], [2000.0]), "b": ([[1, 1, 1]], [10.0]),
                       "c": ([[1, 2, 3]], [7.0])}


def _problem(size, channels, kernel, stride):
    plan = ct.shapes.convolution_backprop_data((2, channels, size, size),
                                               (channels, channels, kernel, kernel),
                                               strides=stride)
    return plan.axes, plan.canonical_filter_shape


#: The algorithm the scripted machine runs this many times faster than the model says.
FAST, SPEED_UP = "phase-ncx", 20.0


def _scripted_machine(monkeypatch):
    """A clock that each candidate's run moves by its estimate as written (``FAST``'s
    by a twentieth of it), so the measured times follow a known rule."""
    clock = types.SimpleNamespace(now=0)
    monkeypatch.setattr(measure_module, "time", types.SimpleNamespace(
        perf_counter_ns=lambda: clock.now, perf_counter=lambda: clock.now / 1e9))

    def plan(axes, weights_shape):
        costs = dispatch.raw_costs(2, axes, weights_shape, channels_last=False,
                                   dtype=np.float32, result_dtype=None, target=host())

        def run(name):
            clock.now += round(costs[name].total / (SPEED_UP if name == FAST else 1.0))

        return planning.planned_choice(2, axes, weights_shape, channels_last=False,
                                       dtype=np.dtype(np.float32), result_dtype=None,
                                       target=host(), run=run, finite=lambda: True)

    return plan


def _lead_over_others(name, axes, weights_shape):
    """``name``'s estimate over the lowest estimate of the other algorithms."""
    estimates = dict(dispatch.choose(2, axes, weights_shape).estimates)
    return estimates.pop(name) / min(estimates.values())


def test_measured_times_teach_the_estimate(wisdom_file, monkeypatch):
    plan = _scripted_machine(monkeypatch)
    problems = [_problem(size, channels, kernel, stride) for size in (6, 11)
                for channels, kernel, stride in ((4, 3, 2), (16, 4, 2), (8, 5, 3), (32, 2, 2))]
    held_out = _problem(9, 12, 3, 2)
    as_written = _lead_over_others(FAST, *held_out)
    with ct.use_planning("exhaustive"):
        for axes, weights_shape in problems:
            plan(axes, weights_shape)
    learned = calibration.learned_coefficients()[FAST]
    assert learned.samples == len(problems)
    held_out_cost = dispatch.raw_costs(2, *held_out, channels_last=False, dtype=np.float32,
                                       result_dtype=None, target=host())[FAST]
    assert learned.ns(held_out_cost) < held_out_cost.total / 5  # it runs at a twentieth
    # A problem never measured: the estimate alone now ranks FAST far better.
    assert _lead_over_others(FAST, *held_out) < as_written / 5

    # The samples are in the file, and a new process learns the same from it.
    document = json.loads(wisdom_file.read_text())
    entries = list(document["choices"].values())
    assert all(set(entry["parts"]) == set(entry["times_ns"]) for entry in entries)
    wisdom.store.choices, wisdom.store._loaded_from = {}, None
    reread = calibration.learned_coefficients()[FAST]  # samples in the file's order
    assert dataclasses.astuple(reread) == pytest.approx(dataclasses.astuple(learned))

    ct.forget_wisdom()  # forgetting the wisdom forgets what was learned
    assert FAST not in calibration.learned_coefficients()
    assert _lead_over_others(FAST, *held_out) == pytest.approx(as_written)
