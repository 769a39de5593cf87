"""Measured planning and wisdom: results, levels, sharing between dialects, persistence,
damaged and foreign files, threads and processes.

Every result is checked against the direct-loop oracle; no test asserts which algorithm
wins on this machine, only what measuring is observed to do (timed candidates, records
kept, files read and written).
"""

import json
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._choose import figures, planning, wisdom
from convtranspose._choose.choice import split_label
from convtranspose._execute import transposed
from convtranspose._execute.transposed import transposed_convolution
from convtranspose._frontends import kept_calls
from convtranspose._kernels import resolve
from kernel_support import random_case
from oracle import canonical_result

LAYER = dict(strides=2, pads_begin=1, pads_end=1)


def _operands(seed=0, channels=(6, 5), size=9, kernel=3):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((2, channels[0], size, size)).astype(np.float32)
    filter = rng.standard_normal((channels[0], channels[1], kernel, kernel)).astype(np.float32)
    return data, filter


def _oracle(data, filter, **layer):
    plan = ct.shapes.convolution_backprop_data(data.shape, filter.shape, **layer)
    return canonical_result(data.astype(np.float64), filter.astype(np.float64)[None],
                            plan.axes)


@pytest.mark.parametrize("level", ["measure", "exhaustive"])
def test_measured_results_equal_the_oracle(wisdom_file, level):
    rng = np.random.default_rng(3)
    for _ in range(6):
        data, weights, axes = random_case(rng, int(rng.integers(1, 4)))
        data, weights = data.astype(np.float64), weights.astype(np.float64)
        with ct.use_planning(level), planning.recording() as choices:
            result = transposed_convolution(data, weights, axes, dtype=np.float64)
        np.testing.assert_array_equal(result, canonical_result(data, weights, axes))
        if data.size and weights.size:
            assert choices and choices[0].decided_by in ("measured", "wisdom")
            assert choices[0].measured, "the candidates' times are reported"


def test_exhaustive_times_every_applicable_algorithm(wisdom_file):
    data, filter = _operands()
    with ct.use_planning("exhaustive"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    choice = choices[0]
    timed = {name for name, _ in choice.measured if split_label(name)[1] is None}
    runs = {resolve(name, np.float32, 2, False, ct.host_target())[0]
            for name, _ in choice.estimates}
    assert len(timed) == len(runs)  # one per distinct code that runs
    assert choice.label == choice.measured[0][0]  # the fastest measured is chosen


def test_small_layers_are_timed_on_fewer_threads(wisdom_file):
    data, filter = _operands(seed=6)
    with ct.num_threads(2), ct.use_planning("measure"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    choice = choices[0]
    fewer = [label for label, _ in choice.measured if split_label(label)[1] is not None]
    # A layer of microseconds: its candidates are timed on one thread too.
    assert fewer and all(split_label(label)[1] == 1 for label in fewer)
    assert choice.label == choice.measured[0][0]
    wisdom.store.flush()
    (entry,) = json.loads(wisdom_file.read_text())["choices"].values()
    assert entry.get("threads") == choice.threads and set(entry["times_ns"]) >= set(fewer)


def test_every_candidate_is_timed_on_fewer_threads_whatever_its_threaded_time(wisdom_file):
    # A threaded time holds wake-ups that vary between kernels, so it does not decide
    # which candidates are timed on one thread: under exhaustive, every one is.
    data, filter = _operands(seed=7)
    with ct.num_threads(2), ct.use_planning("exhaustive"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    labels = [split_label(label) for label, _ in choices[0].measured]
    on_all = {name for name, threads in labels if threads is None}
    assert len(on_all) > 3
    assert {name for name, threads in labels if threads == 1} == on_all
    assert choices[0].label == choices[0].measured[0][0]


def test_candidates_with_prepared_calls_are_timed_prepared(wisdom_file, monkeypatch):
    # Repeated calls run a prepared compute (no filter comparison, matrices made once):
    # planning times that, one preparation per timed label.
    data, filter = _operands(seed=8, channels=(8, 6))
    made, runs = [], []

    def counting_prepare(name, *arguments):
        compute = prepare(name, *arguments)
        if compute is None:
            return None
        made.append(name)

        def timed(data, out):
            runs.append(name)
            compute(data, out)
        return timed

    prepare = transposed.prepare
    monkeypatch.setattr(transposed, "prepare", counting_prepare)
    with ct.num_threads(2), ct.use_planning("exhaustive"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    timed = [label for label, _ in choices[0].measured]
    resolved = {resolve(split_label(label)[0], np.float32, 2, False, ct.host_target())[0]
                for label in timed}
    # col2im's prepared form takes any filter (direct's only one known to be finite).
    assert "col2im-ncx" in made and set(made) <= resolved
    assert len(made) <= len(timed) and len(runs) > len(made)  # prepared once, run often
    # A filter whose repeated calls of the array function run the general path (over
    # the prepared calls' bound, not a prepared layer's own) is timed on that path.
    made.clear()
    monkeypatch.setattr(transposed, "PREPARED_MAX_FILTER_BYTES", filter.nbytes - 1)
    with ct.num_threads(2), ct.use_planning("exhaustive"):
        ct.convolution_backprop_data(data[:1], filter, **LAYER)
    assert not made


def test_dense_is_timed_as_its_repeated_calls_run(wisdom_file, monkeypatch):
    # A tiny layer's repeated calls run a DenseCall; planning times that, not dense's
    # general path (which costs several times the product).
    data, filter = _operands(seed=9, channels=(2, 3), size=5)
    made = []

    class CountedDenseCall(transposed.DenseCall):
        __slots__ = ()

        def __init__(self, *arguments):
            made.append(1)
            super().__init__(*arguments)

    monkeypatch.setattr(transposed, "DenseCall", CountedDenseCall)
    with ct.use_planning("exhaustive"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    assert "dense" in {split_label(label)[0] for label, _ in choices[0].measured}
    assert made


def _recorded_wisdom(wisdom_file, **changes):
    """Measure the test layer, then rewrite its wisdom entry with ``changes``."""
    data, filter = _operands(seed=7)
    with ct.num_threads(2), ct.use_planning("measure"):
        ct.convolution_backprop_data(data, filter, **LAYER)
    wisdom.store.flush()
    document = json.loads(wisdom_file.read_text())
    (key,) = document["choices"]
    document["choices"][key].update(changes)
    ct.forget_wisdom()
    ct.import_wisdom(document)
    return data, filter


def test_a_thread_count_in_wisdom_is_what_the_kernels_get(wisdom_file, monkeypatch):
    data, filter = _recorded_wisdom(wisdom_file, threads=1)
    seen = []
    original = transposed.run

    def spy(name, *args):
        seen.append((name, args[-1].threads))
        return original(name, *args)

    monkeypatch.setattr(transposed, "run", spy)
    with ct.num_threads(2), ct.use_planning("measure"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    assert choices[0].decided_by == "wisdom" and choices[0].threads == 1
    assert seen == [(choices[0].runs, 1)]
    assert "threads      1" in str(ct.explain(
        ct.shapes.convolution_backprop_data(data.shape, filter.shape, **LAYER)))


@pytest.mark.parametrize("threads", [0, -3, True, "1", 1.5])
def test_a_damaged_thread_count_in_wisdom_is_dropped(wisdom_file, threads):
    from convtranspose._runtime import cache
    cache.warned_keys.clear()  # the warning comes once per process
    with pytest.warns(RuntimeWarning, match="1 damaged entries"):
        data, filter = _recorded_wisdom(wisdom_file, threads=threads)
    with ct.num_threads(2), ct.use_planning("measure"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    assert choices[0].decided_by == "measured"  # the entry was dropped: measured again


def test_a_thread_count_above_the_targets_is_the_targets(wisdom_file):
    data, filter = _recorded_wisdom(wisdom_file, threads=64)
    with ct.num_threads(2), ct.use_planning("measure"), planning.recording() as choices:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    assert choices[0].decided_by == "wisdom" and choices[0].threads is None


def test_estimate_never_measures(wisdom_file):
    data, filter = _operands()
    with ct.use_planning("estimate"), planning.recording() as choices:
        ct.convolution_backprop_data(data, filter, **LAYER)
    assert choices[0].decided_by == "estimates" and not choices[0].measured
    # The machine figures the estimates use are measured once per machine and kept in
    # the wisdom file (in a process that has not measured them yet); no choice is.
    assert not wisdom_file.exists() or not json.loads(wisdom_file.read_text())["choices"]


def test_half_precision_and_bias_under_measure(wisdom_file):
    data, filter = _operands(seed=1)
    bias = np.linspace(-1, 1, 5).astype(np.float16)
    with ct.use_planning("measure"):
        result = ct.conv_transpose(data.astype(np.float16), np.moveaxis(
            filter.astype(np.float16), (0, 1), (-2, -1)), bias, data_format="NCX", **LAYER)
    expected = _oracle(data.astype(np.float16).astype(np.float32),
                       filter.astype(np.float16).astype(np.float32), **LAYER)
    expected = (expected + bias.astype(np.float64)[:, None, None]).astype(np.float16)
    assert result.dtype == np.float16
    np.testing.assert_allclose(result.astype(np.float32), expected.astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_wisdom_is_shared_by_every_dialect(wisdom_file):
    data, filter = _operands(seed=2)
    with ct.use_planning("measure"), planning.recording() as first:
        ct.convolution_backprop_data(data, filter, **LAYER)
    assert first[0].decided_by == "measured"
    # The ONNX layer computes the same problem with the same filter layout, so it would
    # run the OpenVINO layer's prepared call (where its algorithm has one) without asking
    # the planner; this test is of the planner's wisdom.
    kept_calls.prepared_calls.clear()
    with ct.use_planning("measure"), planning.recording() as second:
        result = ct.onnx_conv_transpose(data, filter, strides=[2, 2], pads=[1, 1, 1, 1])
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    assert second[0].decided_by == "wisdom"
    assert second[0].algorithm == first[0].algorithm


def test_levels_from_the_api_the_context_and_the_environment(monkeypatch):
    monkeypatch.delenv(planning.PLANNING_ENV, raising=False)
    previous = ct.set_planning("exhaustive")
    try:
        assert ct.get_planning() == "exhaustive"
        with ct.use_planning("estimate"):
            assert ct.get_planning() == "estimate"
        assert ct.get_planning() == "exhaustive"
    finally:
        assert ct.set_planning(previous) == "exhaustive"
    monkeypatch.setenv(planning.PLANNING_ENV, "measure")
    assert ct.get_planning() == "measure"
    monkeypatch.setenv(planning.PLANNING_ENV, "fastest")
    with pytest.raises(ct.ConvTransposeError, match="CONVTRANSPOSE_PLANNING='fastest'"):
        ct.get_planning()
    for bad in ("quick", "", 3):
        with pytest.raises(ct.ConvTransposeError, match="planning level"):
            ct.set_planning(bad)


def test_wisdom_persists_across_processes(wisdom_file):
    script = (
        "import numpy as np, convtranspose as ct\n"
        "from convtranspose._choose import planning\n"
        "rng = np.random.default_rng(0)\n"
        "x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)\n"
        "w = rng.standard_normal((8, 4, 4, 4)).astype(np.float32)\n"
        "with ct.use_planning('measure'), planning.recording() as seen:\n"
        "    ct.convolution_backprop_data(x, w, strides=2, pads_begin=1, pads_end=1)\n"
        "print(seen[0].decided_by, seen[0].algorithm)\n")
    env = {**os.environ, wisdom.WISDOM_ENV: str(wisdom_file)}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, check=True).stdout.split()
    assert first[0] == "measured" and second == ["wisdom", first[1]]
    document = json.loads(wisdom_file.read_text())
    assert document["identity"]["cpu"] and len(document["choices"]) == 1
    assert document["figures"]["machine"]["gemm_gflops"] > 0


@pytest.mark.parametrize("damage", ["garbage", "foreign", "stale", "not-a-mapping"])
def test_damaged_foreign_or_stale_files_are_ignored_with_one_warning(wisdom_file, damage):
    data, filter = _operands(seed=4)
    document = wisdom.new_document({}, {"anything": {"algorithm": "dense"}})
    if damage == "garbage":
        wisdom_file.write_text("{not json")
    else:
        if damage == "foreign":
            document["identity"] = {**document["identity"], "cpu": "Some Other CPU"}
        elif damage == "stale":
            document["identity"] = {**document["identity"], "convtranspose": "0.0.1"}
        else:
            document["choices"] = ["dense"]
        wisdom_file.write_text(json.dumps(document))
    from convtranspose._runtime import cache
    cache.warned_keys.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ct.use_planning("measure"):
            for _ in range(3):
                result = ct.convolution_backprop_data(data, filter, **LAYER)
    messages = [str(w.message) for w in caught if "wisdom" in str(w.message)]
    assert len(messages) == 1, messages
    expected = {"garbage": "damaged", "foreign": "foreign", "stale": "stale",
                "not-a-mapping": "damaged"}[damage]
    assert expected in messages[0]
    np.testing.assert_allclose(result, _oracle(data, filter, **LAYER), rtol=1e-4, atol=1e-4)
    wisdom.store.flush()  # the entries recorded after the first come in a batch
    rewritten = json.loads(wisdom_file.read_text())  # replaced by a valid file of this machine
    wisdom.check_document(rewritten, "the rewritten file")
    assert "anything" not in rewritten["choices"] and rewritten["choices"]


def test_export_forget_and_import(wisdom_file, tmp_path):
    data, filter = _operands(seed=5)
    with ct.use_planning("measure"):
        ct.convolution_backprop_data(data, filter, **LAYER)
    exported = tmp_path / "exported.json"
    document = ct.export_wisdom(exported)
    assert len(document["choices"]) == 1 and exported.exists()
    ct.forget_wisdom(disk=True)
    assert not wisdom_file.exists()
    with ct.use_planning("estimate"), planning.recording() as seen:
        ct.convolution_backprop_data(data, filter, **LAYER)
    assert seen[0].decided_by == "estimates"
    assert ct.import_wisdom(str(exported)) == 1
    with ct.use_planning("measure"), planning.recording() as seen:
        ct.convolution_backprop_data(data, filter, **LAYER)
    assert seen[0].decided_by == "wisdom"  # taken from the import, not measured again
    assert seen[0].algorithm == document["choices"].popitem()[1]["algorithm"]


def test_importing_foreign_or_damaged_wisdom_raises(tmp_path):
    foreign = wisdom.new_document({}, {})
    foreign["identity"] = {**foreign["identity"], "vector_bytes": 7}
    with pytest.raises(ct.ConvTransposeError, match="foreign.*vector_bytes"):
        ct.import_wisdom(foreign)
    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2")
    with pytest.raises(ct.ConvTransposeError, match="import_wisdom"):
        ct.import_wisdom(str(broken))
    with pytest.raises(ct.ConvTransposeError, match="import_wisdom"):
        ct.import_wisdom(str(tmp_path / "missing.json"))


def test_wisdom_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(wisdom.WISDOM_ENV, "off")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ct.forget_wisdom()
    data, filter = _operands(seed=6)
    with ct.use_planning("measure"), planning.recording() as seen:
        ct.convolution_backprop_data(data, filter, **LAYER)
    assert seen[0].decided_by == "measured"
    assert not any(tmp_path.rglob("wisdom*"))
    ct.forget_wisdom()


def test_non_finite_operands_are_not_measured(wisdom_file):
    data, filter = _operands(seed=7)
    data[0, 0, 2, 2] = np.nan
    data[1, 3, 0, 1] = np.inf
    with ct.use_planning("measure"), planning.recording() as seen:
        result = ct.convolution_backprop_data(data, filter, **LAYER)
    expected = _oracle(data, filter, **LAYER)
    np.testing.assert_array_equal(np.isnan(result), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(result[finite], expected[finite], rtol=1e-4, atol=1e-4)
    assert seen[0].decided_by == "estimates" and not wisdom_file.exists()


def test_two_threads_planning_one_problem_measure_once(wisdom_file, monkeypatch):
    calls = []
    original = planning.measure

    def counted(candidates, run, **options):
        calls.append(threading.get_ident())
        return original(candidates, run, **options)

    monkeypatch.setattr(planning, "measure", counted)
    data, filter = _operands(seed=8, channels=(16, 8), size=20)
    expected = _oracle(data, filter, **LAYER)
    barrier, results = threading.Barrier(2), []

    def plan_and_run():
        barrier.wait()
        with ct.use_planning("measure"):
            results.append(ct.convolution_backprop_data(data, filter, **LAYER))

    workers = [threading.Thread(target=plan_and_run) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    # One thread measured (its races on fewer threads too); the other waited for it.
    assert calls and len(set(calls)) == 1
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4)


_WRITER = """
import sys
from convtranspose._choose.wisdom import store
for i in range(40):
    store.record("choices", f"{sys.argv[1]}-{i}", {"algorithm": "dense", "level": "measure"})
"""


def test_processes_writing_one_file_never_tear_it(tmp_path):
    path = tmp_path / "shared.json"
    env = {**os.environ, wisdom.WISDOM_ENV: str(path)}
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, f"p{n}"], env=env)
               for n in range(3)]
    assert all(writer.wait(timeout=120) == 0 for writer in writers)
    document = json.loads(path.read_text())
    wisdom.check_document(document, str(path))
    assert {f"p{n}-{i}" for n in range(3) for i in range(40)} <= set(document["choices"])


def test_machine_figures_are_measured_and_kept(wisdom_file):
    measured = figures.machine_figures()
    assert measured.gemm_gflops > 0.1 and measured.copy_gbps > 0.01
    kept = json.loads(wisdom_file.read_text())["figures"]["machine"]
    assert kept["gemm_gflops"] == pytest.approx(measured.gemm_gflops)
    # A later process (here: after forgetting the in-memory copy) reads them back.
    doctored = wisdom.new_document({"machine": {"gemm_gflops": 1234.5, "copy_gbps": 6.0}}, {})
    wisdom_file.write_text(json.dumps(doctored))
    wisdom.store._loaded_from = None  # as a new process: read the file at first use
    figures.forget_figures()
    assert figures.machine_figures().gemm_gflops == 1234.5


def test_the_adjoint_kernels_are_measured_and_kept_as_wisdom(wisdom_file):
    """Forward convolutions and VJPs go through measured planning too: the first call
    of a problem times the adjoint algorithms and keeps the winner; the results equal
    the oracle's under every level."""
    from oracle import forward_convolution

    rng = np.random.default_rng(11)
    data = rng.integers(-4, 5, (2, 6, 9, 9)).astype(np.float64)
    filter = rng.integers(-4, 5, (4, 6, 3, 3)).astype(np.float64)
    expected = forward_convolution(data, filter[None], (2, 2), (1, 1), (1, 1), (5, 5))
    for level in ("estimate", "measure", "measure", "exhaustive"):
        with ct.use_planning(level):
            result = ct.convolution(data, filter, strides=2, pads_begin=1, pads_end=1)
        np.testing.assert_array_equal(result, expected)
    choices = ct.export_wisdom()["choices"]
    measured = [key for key in choices if key.startswith("data-adjoint ")]
    assert len(measured) == 1, choices
    assert set(choices[measured[0]]["times_ns"]) <= {"im2col", "taps", "blocked", "blocked-planes"}


@pytest.mark.parametrize("stride", [1, 2])
def test_a_layer_prepared_under_estimate_is_measured_under_measure(wisdom_file, stride):
    """What a layer's calls keep after its first call (prepared calls) holds for the
    planning level it was made under: the same layer called under ``measure`` after
    ``estimate`` (``use_planning``) is measured and kept as wisdom."""
    rng = np.random.default_rng(12)
    data = rng.integers(-4, 5, (1, 6, 9, 9)).astype(np.float32)
    filter = rng.integers(-4, 5, (6, 4, 3, 3)).astype(np.float32)
    attributes = dict(strides=stride, pads_begin=1, pads_end=1)
    calls = (lambda: ct.convolution_backprop_data(data, filter, **attributes),
             lambda: ct.convolution(data, filter.swapaxes(0, 1).copy(), **attributes))
    for call in calls:
        with ct.use_planning("estimate"):
            call()
            call()
        assert not ct.export_wisdom()["choices"]
        with ct.use_planning("measure"):
            call()
        assert len(ct.export_wisdom()["choices"]) == 1
        ct.forget_wisdom()
