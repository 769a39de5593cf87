"""The random benchmark suite (``convtranspose bench --random SEED``): reproducible draws,
every family present, layers valid for every dialect and peer and bounded in work, and
the report's per-suite figures and planning columns."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from dataclasses import asdict, replace

import numpy as np
import pytest

import convtranspose as ct
from convtranspose._cli import bench as _bench
from convtranspose._cli.bench import random_suite as drawn
from convtranspose._cli.bench.planning import planning_columns
from convtranspose._cli.bench.report import markdown, suite_summary

SEEDS = range(12)


def _configs(layers):
    return [asdict(layer) for layer in layers]


# --------------------------------------------------------------------------- the draw


def test_the_same_seed_draws_the_same_layers():
    assert _configs(drawn.random_layers(5)) == _configs(drawn.random_layers(5))
    assert _configs(drawn.random_layers(5, 60)[:40]) != []  # a longer draw also works


def test_the_same_seed_draws_the_same_layers_in_another_process():
    # Another interpreter with another hash seed: no set or dict order, id or address
    # may reach the draw.
    code = ("import json; from dataclasses import asdict;"
            " from convtranspose._cli.bench.random_suite import random_layers;"
            " print(json.dumps([asdict(l) for l in random_layers(11, 45)]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, check=True, timeout=300)
    theirs = json.loads(result.stdout)
    ours = json.loads(json.dumps(_configs(drawn.random_layers(11, 45))))
    assert theirs == ours


def test_the_draw_uses_only_the_generator_method_python_keeps_stable(monkeypatch):
    # Python guarantees the sequence of Random.random() for a seed across versions, and
    # nothing else (randrange, choice, shuffle have changed before).
    expected = _configs(drawn.random_layers(3))

    class OnlyRandom(random.Random):
        def _forbidden(self, *args, **kwargs):
            raise AssertionError("the draw must use Random.random() only")
        getrandbits = randrange = randint = choice = choices = shuffle = sample = _forbidden
        uniform = gauss = normalvariate = randbytes = _forbidden

    monkeypatch.setattr(drawn.random, "Random", OnlyRandom)
    assert _configs(drawn.random_layers(3)) == expected


def test_different_seeds_draw_different_layers():
    draws = [tuple(layer.label for layer in drawn.random_layers(seed)) for seed in SEEDS]
    assert len(set(draws)) == len(draws)


def test_a_draw_has_count_layers_at_least_forty_with_unique_names():
    assert len(drawn.random_layers(0)) == 40 == drawn.MIN_COUNT
    layers = drawn.random_layers(0, 57)
    assert len(layers) == 57
    assert len({layer.label for layer in layers}) == 57


@pytest.mark.parametrize("seed, count, error, words", [
    (0, 39, ValueError, ["count", "39", "at least 40"]),
    (-1, 40, ValueError, ["seed", "-1", "non-negative"]),
    ("1", 40, TypeError, ["seed", "'1'", "int"]),
    (1, 40.0, TypeError, ["count", "40.0", "int"]),
    (True, 40, TypeError, ["seed", "True", "int"]),
])
def test_bad_seed_or_count_names_the_argument_value_and_rule(seed, count, error, words):
    with pytest.raises(error) as raised:
        drawn.random_layers(seed, count)
    for word in words:
        assert word in str(raised.value)


def test_every_family_is_in_every_forty_layer_draw():
    for seed in SEEDS:
        families = {drawn.family_of(layer) for layer in drawn.random_layers(seed)}
        assert families == set(drawn.FAMILIES), seed


def test_layers_stay_in_the_suite_ranges():
    layers = [layer for seed in SEEDS for layer in drawn.random_layers(seed)]
    for layer in layers:
        assert 1 <= layer.batch <= 16, layer.label
        assert 1 <= layer.rank <= 3, layer.label
        assert 1 <= layer.in_channels <= 1024 and 1 <= layer.out_channels <= 1024, layer.label
        assert layer.in_channels % layer.groups == 0 == layer.out_channels % layer.groups
        # Kernels 1-7, or an upsampling kernel twice its stride (up to stride 16).
        assert layer.kernel <= 7 or layer.kernel == 2 * layer.stride <= 32, layer.label
        assert 1 <= layer.stride <= 16 and 1 <= layer.dilation <= 4, layer.label
        # oneDNN's rule (PyTorch's is looser): output_padding below the stride.
        assert 0 <= layer.output_padding < layer.stride, layer.label
        assert 0 <= 2 * layer.pad <= layer.dilation * (layer.kernel - 1), layer.label
        assert layer.layout in ("NCX", "NXC") and layer.dtype == "float32"
    # The draws cover what the suite promises.
    assert {layer.rank for layer in layers} == {1, 2, 3}
    assert {layer.layout for layer in layers} == {"NCX", "NXC"}
    assert {8, 16} <= {layer.stride for layer in layers}
    assert set(range(1, 8)) <= {layer.kernel for layer in layers}
    assert any(layer.groups == layer.in_channels > 1 for layer in layers)  # depthwise
    assert any(1 < layer.groups < layer.in_channels for layer in layers)
    assert any(layer.dilation > 1 for layer in layers)
    assert any(layer.output_padding for layer in layers)
    assert {layer.batch for layer in layers} >= {1, 16}
    assert max(layer.in_channels for layer in layers) == 1024
    assert min(layer.in_channels for layer in layers) == 3


def test_names_say_family_and_shape():
    for layer in drawn.random_layers(1):
        words = layer.label.split()
        assert words[0] in drawn.FAMILIES
        assert f"N{layer.batch}" in words
        assert f"{layer.in_channels}->{layer.out_channels}" in words
        spatial = f"L{layer.spatial[0]}" if layer.rank == 1 else "x".join(map(str, layer.spatial))
        assert spatial in words
        assert {f"k{layer.kernel}", f"s{layer.stride}"} <= set(words)
        assert (f"g{layer.groups}" in words) == (layer.groups > 1)
        assert (f"d{layer.dilation}" in words) == (layer.dilation > 1)
        assert ("NXC" in words) == (layer.layout == "NXC")


# --------------------------------------------------------------------------- the caps


def _elements(layer):
    out = [(x - 1) * layer.stride + (layer.kernel - 1) * layer.dilation + 1
           + layer.output_padding - 2 * layer.pad for x in layer.spatial]
    return (layer.batch * layer.in_channels * math.prod(layer.spatial),
            layer.in_channels * layer.out_channels // layer.groups * layer.kernel ** layer.rank,
            layer.batch * layer.out_channels * math.prod(out))


def test_every_drawn_layer_is_within_the_caps():
    for seed in SEEDS:
        for layer in drawn.random_layers(seed):
            flops = (2 * layer.batch * layer.in_channels * layer.out_channels // layer.groups
                     * layer.kernel ** layer.rank * math.prod(layer.spatial))
            assert flops <= 2e9, layer.label
            assert max(_elements(layer)) * 4 <= 64 << 20, layer.label


def test_fitting_shrinks_sizes_and_keeps_the_geometry():
    huge = [
        _bench.Layer("big", 16, 1024, 1024, (256, 256), 7, 2, 3, 1, 1),
        _bench.Layer("wide filter", 1, 1024, 1024, (2, 2, 2), 7, 1, 3),  # 360M filter elements
        _bench.Layer("depthwise", 16, 1024, 1024, (512, 512), 32, 16, 8, groups=1024),
        _bench.Layer("long", 8, 512, 256, (1 << 20,), 16, 8, 4, layout="NXC"),
    ]
    for layer in huge:
        fitted = drawn.fit_to_caps(layer)
        assert drawn.within_caps(fitted), layer.name
        flops = (2 * fitted.batch * fitted.in_channels * fitted.out_channels // fitted.groups
                 * fitted.kernel ** fitted.rank * math.prod(fitted.spatial))
        assert flops <= 2e9 and max(_elements(fitted)) <= 16 << 20, layer.name
        for name in ("kernel", "stride", "pad", "dilation", "output_padding", "groups",
                     "layout", "rank"):
            assert getattr(fitted, name) == getattr(layer, name), (layer.name, name)
        assert fitted.batch <= layer.batch and fitted.in_channels <= layer.in_channels
        assert all(a <= b for a, b in zip(fitted.spatial, layer.spatial))
    # The image shrinks before the batch, down to the floor.
    fitted = drawn.fit_to_caps(_bench.Layer("N16", 16, 64, 64, (512, 512), 3, 2, 1))
    assert fitted.batch == 16 and fitted.spatial[0] < 512
    assert drawn.fit_to_caps(huge[0]).spatial == (drawn.SPATIAL_FLOOR,) * 2
    small = _bench.Layer("small", 2, 8, 8, (9, 9), 3, 2, 1)
    assert drawn.fit_to_caps(small) == small


# --------------------------------------------------------------------------- validity


def _weights_shapes(layer):
    kernel = (layer.kernel,) * layer.rank
    ci, co = layer.in_channels, layer.out_channels // layer.groups
    return (ci, co) + kernel, (layer.groups, ci // layer.groups, co) + kernel, kernel + (ci, co)


def test_every_drawn_layer_is_valid_for_all_four_dialects():
    # convolution_backprop_data has no groups: it takes the layers with one group.
    for seed in SEEDS:
        for layer in drawn.random_layers(seed):
            rank, iox, giox, xio = layer.rank, *_weights_shapes(layer)
            data = (layer.batch, layer.in_channels) + layer.spatial
            common = dict(strides=[layer.stride] * rank, dilations=[layer.dilation] * rank,
                          output_padding=[layer.output_padding] * rank)
            pads = dict(pads_begin=[layer.pad] * rank, pads_end=[layer.pad] * rank)
            plans = [
                ct.shapes.group_convolution_backprop_data(data, giox, **common, **pads),
                ct.shapes.conv_transpose(data, xio, **common, **pads, groups=layer.groups,
                                         data_format="NCX", filter_format="XIO"),
                ct.shapes.onnx_conv_transpose(data, iox, **common, group=layer.groups,
                                              pads=[layer.pad] * (2 * rank)),
            ]
            if layer.groups == 1:
                plans.append(ct.shapes.convolution_backprop_data(data, iox, **common, **pads))
            expected = (layer.batch, layer.out_channels) + layer.output_spatial
            assert all(plan.output_shape == expected for plan in plans), layer.label
            assert min(layer.output_spatial) >= 1


def _tiny(layer):
    """The layer's geometry (kernel, stride, pads, dilation, output_padding, layout,
    grouping) on at most 2 images, 3 groups of 3 channels and 4 positions per axis."""
    groups = min(layer.groups, 3)
    per_in = min(layer.in_channels // layer.groups, 3)
    per_out = min(layer.out_channels // layer.groups, 3)
    return replace(layer, batch=min(layer.batch, 2), in_channels=groups * per_in,
                   out_channels=groups * per_out, groups=groups,
                   spatial=tuple(min(x, 4) for x in layer.spatial))


def _torch_result(layer, inputs):
    torch = pytest.importorskip("torch")
    function = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
                3: torch.nn.functional.conv_transpose3d}[layer.rank]
    return function(torch.from_numpy(inputs["data"].astype(np.float64)),
                    torch.from_numpy(inputs["weights"].astype(np.float64)),
                    stride=layer.stride, padding=layer.pad, output_padding=layer.output_padding,
                    groups=layer.groups, dilation=layer.dilation).numpy()


def _per_axis(layer) -> dict:
    rank = layer.rank
    return dict(strides=[layer.stride] * rank, dilations=[layer.dilation] * rank,
                output_padding=[layer.output_padding] * rank)


def _oracle_case(layer, inputs):
    """The slow oracle of the benchmark runner's dialect for ``layer``: onnx_conv_transpose
    for NCX rows, oneDNN's conv_transpose with NXC data and XIO filters for NXC rows."""
    from oracle import onednn_conv_transpose_case, onnx_conv_transpose_case

    data, weights, rank = inputs["data"], inputs["weights"], layer.rank
    if layer.layout == "NCX":
        return onnx_conv_transpose_case(data, weights, group=layer.groups,
                                        pads=[layer.pad] * (2 * rank), **_per_axis(layer))
    return onednn_conv_transpose_case(
        np.moveaxis(data, 1, -1), np.moveaxis(weights, (0, 1), (rank, rank + 1)),
        pads_begin=[layer.pad] * rank, pads_end=[layer.pad] * rank, groups=layer.groups,
        data_format="NXC", filter_format="XIO", **_per_axis(layer))


def test_tiny_copies_of_drawn_layers_match_the_oracle_and_torch():
    # The benchmark's own runner (onnx_conv_transpose for NCX rows, conv_transpose
    # with NXC data and XIO filters for NXC rows) against the slow oracle of that
    # dialect; torch (float64) against the same oracle shows every peer's rules admit
    # the geometry (PyTorch's output_padding rule, padding, groups).
    from oracle import assert_matches, onnx_conv_transpose_case

    for layer in [_tiny(layer) for seed in range(2) for layer in drawn.random_layers(seed)]:
        inputs = _bench.make_inputs(layer)
        case = _oracle_case(layer, inputs)
        run, _ = _bench.run_ours(layer, inputs)
        assert_matches(run(), case)
        data, weights, rank = inputs["data"], inputs["weights"], layer.rank
        exact = onnx_conv_transpose_case(data.astype(np.float64), weights.astype(np.float64),
                                         group=layer.groups, pads=[layer.pad] * (2 * rank),
                                         **_per_axis(layer)).exact()
        np.testing.assert_allclose(_torch_result(layer, inputs), exact, rtol=1e-9, atol=1e-9,
                                   err_msg=layer.label)


def test_prepared_runners_of_drawn_layers_match_the_oracle():
    # ``bench --prepared`` times ct.prepare layers: each, called twice (bound, then
    # through its kept call), against the slow oracle of its dialect.
    from oracle import assert_matches

    for layer in [_tiny(layer) for layer in drawn.random_layers(3)][:12]:
        inputs = _bench.make_inputs(layer)
        case = _oracle_case(layer, inputs)
        run, _ = _bench.run_ours(layer, inputs, prepared=True)
        for _ in range(2):
            assert_matches(np.array(run()), case)


def test_markdown_says_when_ours_ran_through_prepared_layers():
    row = _row("a layer", 1.0, "fixed suite")
    meta = {"machine": "m", "threads": 1, "numpy": "n", "blas": "b", "repeat": 1,
            "copy_gb_s": 1.0, "fma_peak_gflops": None, "planning": {"available": False}}
    assert "prepared layers" not in markdown([row], ["p"], meta)
    assert "prepared layers (`ct.prepare`" in markdown([row], ["p"],
                                                        {**meta, "calls": "prepared layer"})


# --------------------------------------------------------------------------- the report


def _row(layer, ratio, suite, **planning):
    return {"layer": layer, "suite": suite, "algorithm": "a", "ratio_to_best_peer": ratio,
            "best_peer": "p", "times_ms": {"convtranspose": 1.0, "p": ratio},
            "gflops": 1.0, "floor_fraction": 0.5, "extra_bytes": 0, "output_bytes": 8,
            "skipped": {}, **planning}


def test_suite_summary_on_a_hand_made_table():
    rows = [_row("a", 2.0, "s", estimate_over_measure=1.0, first_call_planning_ms=3.0),
            _row("b", 0.5, "s", estimate_over_measure=4.0, first_call_planning_ms=1.0),
            _row("c", 1.0, "s", estimate_over_measure=1.0, first_call_planning_ms=2.0),
            {"layer": "d", "times_ms": {"convtranspose": 1.0}}]  # no peer ran it
    summary = suite_summary(rows)
    assert summary["layers"] == 4 and summary["rated"] == 3
    assert summary["geomean"] == pytest.approx(1.0)  # (2 * 0.5 * 1) ** (1/3)
    assert summary["worst"] == ("b", 0.5) and summary["best"] == ("a", 2.0)
    assert summary["estimate_over_measure"]["geomean"] == pytest.approx(4 ** (1 / 3))
    assert summary["estimate_over_measure"]["worst"] == ("b", 4.0)
    assert summary["first_call_planning_ms"]["median"] == 2.0
    assert summary["first_call_planning_ms"]["max"] == ("a", 3.0)


def test_markdown_summarises_each_suite_names_the_cpu_and_says_na_without_planning():
    rows = [_row("a", 2.0, "fixed suite"), _row("b", 8.0, "fixed suite"),
            _row("x", 0.25, "random suite (seed 1, 40 layers)", estimate_over_measure=1.5,
                 first_call_planning_ms=0.75)]
    rows[1]["skipped"] = {"q": "cannot"}
    meta = {"cpu": "Test CPU 9000", "machine": "m", "threads": 2, "numpy": "n", "blas": "b",
            "repeat": 3, "planning": {"available": False}}
    text = markdown(rows, ["p", "q"], meta)
    assert "fixed suite on Test CPU 9000: geometric mean of (best peer time / convtranspose" \
           " time) **4.00x** over 2 layers; worst 2.00x (a), best 8.00x (b)." in text
    assert "random suite (seed 1, 40 layers) on Test CPU 9000: geometric mean" in text
    assert "worst 0.25x (x)" in text and "worst 1.50x (x)" in text
    assert "q on b (cannot)" in text
    table = [line for line in text.splitlines() if line.startswith("| a ")]
    assert table[0].endswith("| n/a | n/a |")
    assert "no planning API" in text


def test_cpu_model_is_read_from_cpuinfo_text():
    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)  Gold 6338"
            " CPU @ 2.00GHz\n\nprocessor\t: 1\nmodel name\t: other\n")
    assert _bench.parse_model_name(text) == "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"
    assert _bench.parse_model_name("processor: 0\n") is None


# --------------------------------------------------------------------------- planning columns


class _FakePlanning:
    """A library with the planning API: the first call after forget_wisdom decides
    (``decide_s`` on the fake clock) under the current level and keeps the choice; a
    call then costs its choice's time."""

    def __init__(self, clock, cost_s, decide_s):
        self.clock, self.cost_s, self.decide_s = clock, cost_s, decide_s
        self.level, self.choice, self.log = "auto", None, []

    def forget_wisdom(self):
        self.choice = None
        self.log.append("forget")

    def use_planning(self, level):
        import contextlib

        @contextlib.contextmanager
        def scope():
            previous, self.level = self.level, level
            self.log.append(level)
            try:
                yield
            finally:
                self.level = previous
        return scope()

    def _call(self, data, weights, **_):
        if self.choice is None:
            self.choice = self.level
            self.clock.now += self.decide_s[self.level]
        self.clock.now += self.cost_s[self.choice]
        return np.zeros(1, np.float32)

    onnx_conv_transpose = conv_transpose = _call


class _Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_planning_columns_compare_levels_decided_afresh():
    clock = _Clock()
    library = _FakePlanning(clock, cost_s={"estimate": 0.006, "measure": 0.002, "auto": 0.003},
                            decide_s={"estimate": 0.0001, "measure": 0.05, "auto": 0.02})
    layer = next(layer for layer in _bench.SUITE if layer.label == "tiny N1 2->3 5x5 k3 s2 p1")
    columns = planning_columns(layer, _bench.make_inputs(layer), repeat=3, library=library,
                               clock=clock)
    assert library.log == ["forget", "estimate", "forget", "measure", "forget"]
    assert columns["estimate_over_measure"] == pytest.approx(3.0)
    assert columns["first_call_planning_ms"] == pytest.approx(20.0)
    assert columns["planning_ms"]["steady"] == pytest.approx(3.0)


def test_planning_columns_are_absent_without_the_api_and_a_failure_is_recorded():
    layer = next(layer for layer in _bench.SUITE if layer.label == "tiny N1 2->3 5x5 k3 s2 p1")
    inputs = _bench.make_inputs(layer)
    assert planning_columns(layer, inputs, 3, library=object()) == {}
    library = _FakePlanning(_Clock(), {}, {})
    library.use_planning = lambda level: (_ for _ in ()).throw(ValueError(f"no level {level}"))
    columns = planning_columns(layer, inputs, 3, library=library)
    assert columns == {"planning_error": "ValueError: no level estimate"}


# --------------------------------------------------------------------------- command line


@pytest.mark.parametrize("argv, words", [
    (["--random", "-2"], ["--random", "-2", "non-negative"]),
    (["--random", "1", "--count", "39"], ["--count", "39", "at least 40"]),
    (["--count", "50"], ["--count", "50", "without --random"]),
    (["--random", "1", "--layers", "no-such-family"], ["--layers", "no-such-family"]),
])
def test_bad_bench_options_are_one_line_errors(argv, words, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        _bench.main(argv + ["--out", str(tmp_path)])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    for word in words:
        assert word in error
    assert not any(tmp_path.iterdir())


def test_a_random_run_writes_its_results_like_the_fixed_suite(monkeypatch, tmp_path):
    # One small drawn layer against a fake peer: results.json names the CPU, the
    # suite with its seed, and each row's suite and family; results.md says the same.
    from oracle import onnx_conv_transpose_case

    def oracle_peer(layer, inputs):
        rank = layer.rank
        case = onnx_conv_transpose_case(
            inputs["data"], inputs["weights"], group=layer.groups,
            pads=[layer.pad] * (2 * rank), strides=[layer.stride] * rank,
            dilations=[layer.dilation] * rank, output_padding=[layer.output_padding] * rank)
        return case.rounded, lambda result: result

    layer = min(drawn.random_layers(4), key=lambda layer: layer.flops)
    monkeypatch.setitem(_bench.PEERS, "oracle", oracle_peer)
    monkeypatch.setattr(_bench.run, "installed_peers", lambda requested: requested)
    monkeypatch.setattr(_bench.run, "SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(_bench.run, "fma_peak_flops", lambda: None)
    monkeypatch.setattr(_bench.run, "copy_bandwidth", lambda: 1e10)
    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", "on")
    code = _bench.main(["--random", "4", "--layers", layer.label, "--peers", "oracle",
                        "--repeat", "1", "--warmup", "0", "--out", str(tmp_path), "--no-plot"])
    assert code == 0
    assert os.environ["CONVTRANSPOSE_WISDOM"] == "off"  # the run turned the store off
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["meta"]["cpu"] == _bench.cpu_model()
    assert results["meta"]["suite"]["seed"] == 4 and results["meta"]["suite"]["count"] == 40
    [row] = results["rows"]
    assert row["layer"] == layer.label and row["family"] == drawn.family_of(layer)
    assert row["suite"] == "random suite (seed 4, 40 layers)"
    assert row["times_ms"].keys() == {"convtranspose", "oracle"}
    assert (("estimate_over_measure" in row) or ("planning_error" in row)) \
        == hasattr(ct, "use_planning")
    text = (tmp_path / "results.md").read_text()
    assert f"random suite (seed 4, 40 layers) on {_bench.cpu_model()}" in text
