"""The measurement's rounds and its candidate list, on a scripted clock: which
candidates are timed, how often, and which wins, whatever this machine's speed."""

from __future__ import annotations

import importlib
import types

import numpy as np

import convtranspose as ct
from convtranspose._choose import planning
from convtranspose._choose.choice import Choice

measure_module = importlib.import_module("convtranspose._choose.measure")


class _Clock:
    """A clock that only the scripted runs move: ``script[name]`` lists each call's
    nanoseconds (the last repeats)."""

    def __init__(self, script):
        self.now, self.script, self.calls = 0, script, []

    def ns(self):
        return self.now

    def seconds(self):
        return self.now / 1e9

    def run(self, name):
        times = self.script[name]
        self.now += times[min(len(self.calls_of(name)), len(times) - 1)]
        self.calls.append(name)

    def calls_of(self, name):
        return [call for call in self.calls if call == name]


def _measured(monkeypatch, script):
    clock = _Clock(script)
    monkeypatch.setattr(measure_module, "time",
                        types.SimpleNamespace(perf_counter_ns=clock.ns, perf_counter=clock.seconds))
    return measure_module.measure(list(script), clock.run), clock


def test_a_slow_first_timed_run_does_not_lose_the_race(monkeypatch):
    # "a" is the fastest once warm, but its untimed and first timed runs are cold.
    result, clock = _measured(monkeypatch, {"b": [60_000], "a": [500_000, 300_000, 40_000]})
    assert result.fastest == "a" and dict(result.times)["a"] == 40_000


def test_short_calls_get_more_rounds_within_the_budget(monkeypatch):
    result, clock = _measured(monkeypatch, {"a": [50_000], "b": [60_000]})
    # One untimed run, then per round an untimed warm-up and a timed run.
    timed = (len(clock.calls_of("a")) - 1) // 2
    budget_rounds = measure_module.ROUND_BUDGET_SECONDS * 1e9 / (2 * 110_000)
    assert measure_module.TIMED_RUNS < timed <= measure_module.MAX_RUNS
    assert timed <= budget_rounds + 2


def test_each_timed_run_of_a_short_call_follows_its_own_warm_up(monkeypatch):
    # "a" runs fast only right after itself (its data in the caches); "b" always takes
    # the same.  Timed right after "b", "a" would lose.
    clock = _Clock({})
    times = {"a": (30_000, 90_000), "b": (60_000, 60_000)}

    def run(name):
        warm = bool(clock.calls) and clock.calls[-1] == name
        clock.now += times[name][0 if warm else 1]
        clock.calls.append(name)

    monkeypatch.setattr(measure_module, "time",
                        types.SimpleNamespace(perf_counter_ns=clock.ns, perf_counter=clock.seconds))
    result = measure_module.measure(["b", "a"], run)
    assert result.fastest == "a" and dict(result.times)["a"] == 30_000


def test_long_calls_get_the_minimum_rounds_and_slow_ones_leave(monkeypatch):
    result, clock = _measured(monkeypatch, {"a": [40_000_000], "b": [45_000_000],
                                            "c": [400_000_000]})
    assert len(clock.calls_of("a")) == 1 + measure_module.TIMED_RUNS
    assert len(clock.calls_of("c")) == 2  # untimed, then over GIVE_UP_AT_ONCE at once
    assert result.fastest == "a" and [name for name, _ in result.times] == ["a", "b", "c"]


def _choice(names, first_ns=50e6):
    return Choice(algorithm=names[0], runs=names[0], decided_by="estimates",
                  estimates=tuple((name, first_ns * (i + 1)) for i, name in enumerate(names)),
                  fallbacks=())


def test_measure_times_the_best_ranked_kernel_of_the_other_kind():
    target = ct.host_target().replace(numba=True, blas=True)
    f32 = np.dtype(np.float32)
    blas_first = ["gemm-ncx", "gemm-nxc", "col2im-ncx", "phase-ncx", "direct", "window"]
    names = planning.candidate_names(_choice(blas_first), "measure", f32, 2, False, target)
    # The best-ranked of each way of making BLAS products (PRODUCT_FORMS) too.
    assert names == ["gemm-ncx", "gemm-nxc", "col2im-ncx", "direct", "phase-ncx"]
    numba_first = ["direct", "direct-blocked", "dense", "gemm-ncx", "phase-ncx"]
    names = planning.candidate_names(_choice(numba_first), "measure", f32, 2, False, target)
    # dense is no numba kernel
    assert names == ["direct", "direct-blocked", "dense", "phase-ncx", "gemm-ncx"]
    all_numba = ["direct", "direct-blocked", "stream", "gemm-ncx", "depthwise"]
    names = planning.candidate_names(_choice(all_numba), "measure", f32, 2, False, target)
    assert names == ["direct", "direct-blocked", "stream", "gemm-ncx"]
    mixed = ["direct", "gemm-ncx", "phase-ncx", "window", "direct-blocked", "stream"]
    names = planning.candidate_names(_choice(mixed), "measure", f32, 2, False, target)
    # A second numba kernel, however far down the estimates put it (NUMBA_KERNELS_TIMED).
    assert names == ["direct", "gemm-ncx", "phase-ncx", "direct-blocked"]
    assert planning.candidate_names(_choice(mixed), "exhaustive", f32, 2, False, target) == mixed


def test_measure_times_every_candidate_of_a_small_layer_within_its_budget():
    target = ct.host_target().replace(numba=True, blas=True)
    f32 = np.dtype(np.float32)
    names = ["gemm-ncx", "gemm-nxc", "col2im-ncx", "phase-ncx", "direct", "window"]
    small = planning.candidate_names(_choice(names, first_ns=20e3), "measure", f32, 2, False, target)
    assert small == ["gemm-ncx", "gemm-nxc", "col2im-ncx", "direct", "phase-ncx", "window"]
    # The first five (estimates 1, 2, 3, 5 and 4 units) already cost the budget to
    # time, so nothing more is added.
    budget_ms = measure_module.MEASURE_ALL_BELOW_SECONDS * 1e3
    runs = measure_module.RUNS_PER_CANDIDATE
    first_ms = budget_ms / (runs * (1 + 2 + 3 + 5 + 4)) * 1.01
    large = planning.candidate_names(_choice(names, first_ns=first_ms * 1e6), "measure", f32, 2,
                                 False, target)
    assert large == ["gemm-ncx", "gemm-nxc", "col2im-ncx", "direct", "phase-ncx"]
    # Just under the budget with the sixth (window, 6x the first) added too.
    first_ms = budget_ms / (runs * (1 + 2 + 3 + 5 + 4 + 6)) * 0.99
    every = planning.candidate_names(_choice(names, first_ns=first_ms * 1e6), "measure", f32, 2,
                                     False, target)
    assert every == ["gemm-ncx", "gemm-nxc", "col2im-ncx", "direct", "phase-ncx", "window"]


def test_measure_times_the_best_ranked_of_each_way_of_making_blas_products():
    # However far down the estimates rank them (within GIVE_UP_AT_ONCE times the
    # first's estimate): each of phase, gemm and col2im once, the best-ranked of its
    # layouts.
    target = ct.host_target().replace(numba=True, blas=True)
    f32 = np.dtype(np.float32)
    ranked = ["direct", "direct-blocked", "stream", "window", "gemm-nxc", "phase-ncx",
              "col2im-nxc", "phase-nxc", "col2im-ncx", "gemm-ncx"]
    names = planning.candidate_names(_choice(ranked), "measure", f32, 2, True, target)
    assert names == ["direct", "direct-blocked", "stream", "window", "phase-ncx", "gemm-nxc",
                     "col2im-nxc"]
    # Not one estimated beyond GIVE_UP_AT_ONCE times the first: it would leave at once.
    assert measure_module.GIVE_UP_AT_ONCE == 8
    far = ["direct", "direct-blocked", "stream", "gemm-nxc", "window", "depthwise", "dense",
           "phase-nxc", "col2im-ncx"]  # 1 to 9 units
    names = planning.candidate_names(_choice(far), "measure", f32, 2, True, target)
    assert names == ["direct", "direct-blocked", "stream", "gemm-nxc", "phase-nxc"]
