"""The benchmark helper scripts run (on the tiny suite layers, which take milliseconds),
and the calibration fit recovers a known table from synthetic measurements."""

import importlib.util
import json
import os
import pathlib

import pytest

from convtranspose._kernels import ALGORITHMS
from convtranspose._runtime import target as runtime_target

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_profile_layers_prints_a_row_per_selected_layer(capsys):
    assert _load("profile_layers").main(["--layers", "tiny", "--pause", "0.001"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny")]
    assert len(rows) == 2  # NCX and NXC
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] in ALGORITHMS  # which one depends on the CPU
        assert all(float(cell) > 0 for cell in cells[2:6] + cells[7:8])  # times, rate
        assert 0 <= float(cells[9].rstrip("%")) <= 100  # outside the compiled kernels


def test_profile_layers_profiles_prepared_layers_of_a_random_suite(capsys):
    name = "depthwise N2 64->64 L128"  # a layer of the random suite of seed 1
    assert _load("profile_layers").main(["--random", "1", "--prepared", "--layers", name,
                                         "--pause", "0.001"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(f"| {name}")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] in ALGORITHMS and float(cells[2]) > 0
    assert 0 <= float(cells[9].rstrip("%")) <= 100


def test_fewer_threads_plans_each_layer_and_times_its_choice(monkeypatch):
    script = _load("fewer_threads")
    monkeypatch.setattr(script, "LAYERS", script.LAYERS[:1])
    monkeypatch.setattr(script, "_PAUSE_SECONDS", 0.001)
    (row,) = script.run(2)
    assert sum(row["choices"].values()) == 2 and len(row["picks"]) == 2
    for pick in row["picks"]:
        assert pick["choice"].partition("@")[0] in ALGORITHMS  # which one depends on the CPU
        assert pick["us"] > 0 and pick["planning_s"] > 0


def test_aligned_loads_times_both_placements(capsys):
    pytest.importorskip("numba")
    assert _load("aligned_loads").main(["--reps", "200"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows] == ["aligned", "across lines"]
    assert all(float(row.split("|")[2]) > 0 for row in rows)


def test_narrow_groups_times_every_width_and_names_the_rule(capsys):
    pytest.importorskip("numba")
    forced = os.environ.get("CONVTRANSPOSE_ALGORITHM")
    assert _load("narrow_groups").main(["--rounds", "1", "--layers", "16->16"]) == 0
    assert os.environ.get("CONVTRANSPOSE_ALGORITHM") == forced  # the forcing undone
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("| grouped")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] == "16 B"  # 4 float32 channels a group
    assert len(cells) >= 3 and all(float(cell) > 0 for cell in cells[2:])


def _perf_usable() -> bool:
    import shutil
    import subprocess

    if shutil.which("perf") is None:
        return False
    try:
        done = subprocess.run(["perf", "record", "-o", "/dev/null", "--", "true"],
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.parametrize("caller", [False, True], ids=["every-thread", "caller"])
def test_kernel_share_splits_every_sample_of_a_layer(capsys, caller):
    if not _perf_usable():
        pytest.skip("Linux perf is not installed or may not sample here")
    only = ["--caller"] if caller else []
    assert _load("kernel_share").main(["--layers", "FCN", "--seconds", "0.5", *only]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| FCN")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] in ALGORITHMS and float(cells[2].split()[0]) > 0
    shares = [float(part.rsplit(" ", 1)[1].rstrip("%")) for part in cells[3].split(", ")]
    assert sum(shares) == pytest.approx(100, abs=1.5)  # every sample in one part


def test_row_kernel_script_times_layers_the_row_kernel_takes(capsys):
    pytest.importorskip("numba")
    from convtranspose._kernels import schedules

    strides = schedules.ROWS_CHANNEL_STRIDES
    assert _load("row_kernel").main(["--layers", "2", "--rounds", "1", "--any-stride"]) == 0
    assert schedules.ROWS_CHANNEL_STRIDES == strides  # restored
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("| N")]
    assert len(rows) == 2
    assert all(float(row.split("|")[5]) < 1e-5 for row in rows)  # the kernels agree


def test_calibrate_reports_the_estimate_loss(tmp_path, monkeypatch):
    # Two levels on one tiny layer: each result is a positive time, and the loss is
    # the ratio of the two times (1.0 when both levels chose the same algorithm).
    calibrate = _load("calibrate")
    out = tmp_path / "report"
    assert calibrate.main(["--layers", "tiny", "--repeat", "2", "--out", str(out)]) == 0
    report = json.loads((out / "calibration.json").read_text())
    assert report["cpu"] and report["layers"]
    for row in report["layers"]:
        estimate, measured = row["estimate"], row["exhaustive"]
        assert estimate["ms"] > 0 and measured["ms"] > 0
        expected = (1.0 if estimate["algorithm"] == measured["algorithm"]
                    else estimate["ms"] / measured["ms"])
        assert row["loss"] == pytest.approx(expected)


# --------------------------------------------------------------------------- machine bounds


def _pairs_inside(layer):
    """(input, tap) pairs per channel pair landing in the cropped result, counted by
    the oracle's own transposed convolution of ones (an independent count)."""
    import numpy as np

    from oracle import crop, full_transposed_convolution

    ones = np.ones((1, 1) + layer.spatial)
    taps = np.ones((1, 1, 1) + (layer.kernel,) * layer.rank)
    full = full_transposed_convolution(ones, taps, [layer.stride] * layer.rank,
                                       [layer.dilation] * layer.rank)
    return crop(full, [layer.pad] * layer.rank, list(layer.output_spatial)).sum()


def test_useful_flops_count_only_products_inside_the_result():
    from convtranspose._cli.bench import SUITE, Layer

    layers = [layer for layer in SUITE if layer.name.split()[0] in ("FCN-2x", "dilated", "tiny")]
    layers += [Layer("odd", 2, 6, 4, (5, 3), 3, 2, 2, 1, 1, groups=2),
               Layer("1-D", 1, 3, 2, (9,), 5, 3, 4, 2, 2)]
    for layer in layers:
        pairs = _pairs_inside(layer)
        expected = 2 * layer.batch * layer.in_channels * layer.out_channels // layer.groups * pairs
        assert layer.useful_flops == expected, layer.label
        assert layer.useful_flops <= layer.flops


def test_floor_is_the_longer_of_compute_at_peak_and_moving_the_arrays():
    import numpy as np

    from convtranspose._cli.bench import SUITE, floor_ms, make_inputs

    layer = next(layer for layer in SUITE if layer.label == "FCN-2x N1 21->21 16x16 k4 s2 p1")
    inputs = make_inputs(layer)
    output_bytes = 4 * layer.batch * layer.out_channels * int(np.prod(layer.output_spatial))
    moved = inputs["data"].nbytes + inputs["weights"].nbytes + output_bytes
    assert floor_ms(layer, None, 1e9) == pytest.approx(1e3 * moved / 1e9)
    assert floor_ms(layer, 1e9, 1e30) == pytest.approx(1e3 * layer.useful_flops / 1e9)
    assert floor_ms(layer, 1e9, 1e9) == max(floor_ms(layer, None, 1e9),
                                            floor_ms(layer, 1e9, 1e30))


def test_peak_kernel_chains_leave_room_for_its_two_operands():
    # AVX-512 has 32 vector registers, AVX2 16: the accumulators and the two operands
    # must fit, or the loop spills (16 chains measured 76 GFLOP/s on Zen 3 against 194).
    from convtranspose._kernels._numba.peak import peak_chains

    for vector_bytes, registers in ((64, 32), (32, 16), (16, 16)):
        chains = peak_chains(vector_bytes)
        assert 8 <= chains and chains + 2 <= registers, vector_bytes


def test_machine_peaks_are_measured_and_plausible():
    from convtranspose._cli import bench as _bench

    assert 1e8 < _bench.copy_bandwidth(megabytes=8) < 1e13
    peak = _bench.fma_peak_flops(threads=1, count=200_000)
    if runtime_target.numba_usable():
        assert 1e8 < peak < 1e13
    else:
        assert peak is None


# --------------------------------------------------------------------------- bench rows


def test_bench_row_keeps_every_round_and_the_fastest_rounds_ratio(monkeypatch):
    # A fake peer computes the tiny layer with the oracle's direct loop, sleeping a
    # known time in its second timed round: the row must keep each round, take the
    # median of them, and compare the fastest rounds (which the sleep never is).
    import statistics
    import time

    import numpy as np

    from convtranspose._cli import bench as _bench
    from oracle import crop, full_transposed_convolution

    layer = next(layer for layer in _bench.SUITE if layer.label == "tiny N1 2->3 5x5 k3 s2 p1")
    calls = []

    def oracle_peer(layer, inputs):
        weights = inputs["weights"][None].astype(np.float64)  # (G=1, Ci, Co, K, K)

        def run():
            calls.append(1)
            if len(calls) == 6:  # the check, a warm-up, then (untimed, timed) per round
                time.sleep(0.05)
            full = full_transposed_convolution(inputs["data"], weights, [layer.stride] * 2,
                                               [layer.dilation] * 2)
            return crop(full, [layer.pad] * 2, list(layer.output_spatial))
        return run, lambda result: result.astype(np.float32)

    monkeypatch.setitem(_bench.PEERS, "oracle", oracle_peer)
    monkeypatch.setattr(_bench.run, "SETTLE_SECONDS", 0.0)  # the rounds read it there
    row = _bench.bench_layer(layer, ["oracle"], repeat=5, warmup=1, budget=60.0)
    rounds = row["rounds_ms"]
    assert sorted(rounds) == ["convtranspose", "oracle"]
    assert all(len(values) == 5 for values in rounds.values())
    for name, values in rounds.items():
        assert row["times_ms"][name] == statistics.median(values)
    assert max(rounds["oracle"]) >= 50.0 > statistics.median(rounds["oracle"])
    assert row["best_round_ratio"] == min(rounds["oracle"]) / min(rounds["convtranspose"])
    summary = _bench.markdown([row, dict(row, best_round_ratio=4.0)], ["oracle"],
                              {"machine": "m", "threads": 2, "numpy": "n", "blas": "b",
                               "repeat": 5})
    geomean = (row["best_round_ratio"] * 4.0) ** 0.5
    assert f"geometric mean {geomean:.2f}x, worst {min(row['best_round_ratio'], 4.0):.2f}x" \
        in summary


# --------------------------------------------------------------------------- bench's output


def _oracle_peer(layer, inputs):
    """A fake peer: the oracle's direct loop on the layer (NCX in, NCX out)."""
    import numpy as np

    from oracle import crop, full_transposed_convolution

    weights = inputs["weights"][None].astype(np.float64)  # (G=1, Ci, Co, K...)

    def run():
        full = full_transposed_convolution(inputs["data"], weights, [layer.stride] * layer.rank,
                                           [layer.dilation] * layer.rank)
        return crop(full, [layer.pad] * layer.rank, list(layer.output_spatial))
    return run, lambda result: result.astype(np.float32)


#: The fake machine: an FMA peak of 1 MFLOP/s puts the tiny layers' floors near a
#: millisecond (well above the call-overhead bound) and the copy rate never binds.
FAKE_PEAK, FAKE_COPY = 1e6, 1e12


def _bench_tiny(monkeypatch, tmp_path, capsys, *extra):
    """``convtranspose bench`` on the two tiny layers (NCX, NXC) against the fake peer:
    ``(stdout, stderr lines, results.json)``."""
    from convtranspose._cli import bench as _bench

    monkeypatch.setitem(_bench.PEERS, "oracle", _oracle_peer)
    monkeypatch.setattr(_bench.run, "installed_peers", lambda requested: requested)
    monkeypatch.setattr(_bench.run, "SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(_bench.run, "fma_peak_flops", lambda: FAKE_PEAK)
    monkeypatch.setattr(_bench.run, "copy_bandwidth", lambda: FAKE_COPY)
    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", "off")  # main sets it; restored after
    code = _bench.main(["--layers", "tiny N1 2->3 5x5 k3 s2 p1", "--peers", "oracle",
                        "--repeat", "1", "--warmup", "0", "--out", str(tmp_path),
                        "--no-plot", *extra])
    assert code == 0
    captured = capsys.readouterr()
    results = json.loads((tmp_path / "results.json").read_text())
    assert [row["layer"] for row in results["rows"]] == ["tiny N1 2->3 5x5 k3 s2 p1",
                                                         "tiny N1 2->3 5x5 k3 s2 p1 NXC"]
    return captured.out, captured.err.strip().splitlines(), results


def _table(text, first_cell):
    """The Markdown table of ``text``: its header's cells and the rows' cells."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    assert cells[0][0] == first_cell
    return cells[0], cells[1:]


def test_bench_prints_a_short_table_counts_the_layers_and_says_where_it_wrote(
        monkeypatch, tmp_path, capsys):
    import re

    out, err, results = _bench_tiny(monkeypatch, tmp_path, capsys)
    head, rows = _table(out, "layer")
    assert head == ["layer", "convtranspose ms", "best peer", "x best peer"]
    assert "GFLOP/s" not in head and "--wide" in out
    for cells, row in zip(rows, results["rows"], strict=True):
        ours, theirs = row["times_ms"]["convtranspose"], row["times_ms"]["oracle"]
        assert cells == [row["layer"], f"{ours:.3g}", f"oracle {theirs:.3g}",
                         f"{theirs / ours:.2f}"]
    progress = [line for line in err if line.startswith("[")]
    assert re.match(r"\[1/2\] tiny N1 2->3 5x5 k3 s2 p1 .*  ETA \d+ s$", progress[0])
    assert progress[1].startswith("[2/2] tiny N1 2->3 5x5 k3 s2 p1 NXC")
    assert "ETA" not in progress[1]
    assert err[-1] == (f"results written to {tmp_path / 'results.md'},"
                       f" {tmp_path / 'results.json'}")
    # results.md keeps every column.
    wide_head, _ = _table((tmp_path / "results.md").read_text(), "layer")
    assert {"algorithm", "oracle ms", "GFLOP/s", "% of floor"} <= set(wide_head)


def test_bench_floor_share_is_the_roofline_floor_over_our_time(monkeypatch, tmp_path,
                                                               capsys):
    # The column once divided a NumPy sgemm's time by ours: a GEMM timed on a busy
    # machine (OpenBLAS's threads waiting for a core: 16 ms for any GEMM from 121x121
    # up) read as 34965%.  It is now the layer's floor (the useful multiply-adds at the
    # FMA peak or the arrays moved at the copy rate, whichever is longer) over our time.
    import numpy as np

    out, _, results = _bench_tiny(monkeypatch, tmp_path, capsys, "--wide")
    head, rows = _table(out, "layer")
    assert head[:3] == ["layer", "algorithm", "convtranspose ms"] and "% of floor" in head
    from convtranspose._cli.bench import SUITE

    for cells, row in zip(rows, results["rows"], strict=True):
        layer = next(layer for layer in SUITE if layer.label == row["layer"])
        useful = 2 * layer.in_channels * layer.out_channels * _pairs_inside(layer)
        moved = 4 * (2 * 25 + 2 * 3 * 9 + 3 * int(np.prod(layer.output_spatial)))
        floor = 1e3 * max(useful / FAKE_PEAK, moved / FAKE_COPY)
        ours = row["times_ms"]["convtranspose"]
        assert row["floor_ms"] == pytest.approx(floor)
        assert cells[head.index("% of floor")] == f"{100 * floor / ours:.0f}%"
        assert "sgemm_ms" not in row and "roofline_fraction" not in row


def test_bench_eta_is_the_mean_time_per_layer_times_the_layers_left(monkeypatch):
    from convtranspose._cli.bench import run

    monkeypatch.setattr(run.time, "perf_counter", lambda: 1120.0)
    assert run.eta(1000.0, 12, 36) == "  ETA 4 min"  # 10 s a layer, 24 left
    assert run.eta(1000.0, 60, 66) == "  ETA 12 s"
    assert run.eta(1000.0, 36, 36) == ""


def test_blocked_passes_script_times_channel_blocks_and_restores_the_share(capsys,
                                                                           monkeypatch):
    pytest.importorskip("numba")
    from convtranspose._kernels import blocked_channels

    # The script forces its algorithm through the environment: restored afterwards.
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-blocked")
    share = blocked_channels.BLOCKED_PANEL_L1_SHARE
    assert _load("blocked_passes").main(["--layers", "tiny", "--rounds", "1",
                                         "--channel-blocks"]) == 0
    assert blocked_channels.BLOCKED_PANEL_L1_SHARE == share
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny")]
    assert len(rows) == 4  # NCX and NXC, on two threads and one
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        times = dict(cell.split(": ") for cell in cells[2].split(", "))
        assert set(times) == {"0.25", "0.5", "1", "2", "whole"}
        assert all(float(value) > 0 for value in times.values()) and cells[3] in times


def test_prepared_calls_script_times_each_form(capsys, tmp_path):
    out = tmp_path / "calls.json"
    assert _load("prepared_calls").main(["--calls", "5", "--rounds", "1",
                                         "--out", str(out)]) == 0
    script = _load("prepared_calls")
    rows = json.loads(out.read_text())["rows"]
    assert [row["layer"] for row in rows] == [layer[0] for layer in script.LAYERS]
    for row in rows:
        assert {"function", "prepared"} <= set(row["us"]) and all(
            value > 0 for value in row["us"].values())


def test_prepared_calls_script_times_calls_alone_in_cold_caches(capsys, tmp_path):
    out = tmp_path / "cold.json"
    assert _load("prepared_calls").main(["--cold", "--calls", "2", "--rounds", "1",
                                         "--layers", "NXC", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["cold"] is True and "evicting the caches" in capsys.readouterr().out
    assert [row["layer"] for row in record["rows"]] == [
        "tiny 2->3 5x5 k3 s2 p1 NXC", "depthwise 256 28x28 k4 s2 p1 NXC"]
    assert all(value > 0 for row in record["rows"] for value in row["us"].values())


def test_spread_stores_script_times_paired_and_scattered_stores(capsys, tmp_path,
                                                                 monkeypatch):
    # The script checks the paired stores' output against the scatters' before timing.
    pytest.importorskip("numba")
    monkeypatch.syspath_prepend(str(SCRIPTS))  # it takes onnxruntime's call from a sibling
    out = tmp_path / "rows.json"
    assert _load("spread_stores").main(["--rounds", "1", "--calls", "1",
                                        "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == len(capsys.readouterr().out.splitlines()) - 2
    assert all(row["us"][form] > 0 for row in rows for form in ("pairs", "scatters", "matrix"))


def test_block_rates_script_times_each_block_shape(capsys, tmp_path):
    pytest.importorskip("numba")
    out = tmp_path / "rates.json"
    assert _load("block_rates").main(["--shapes", "1", "--calls", "2", "--rounds", "1",
                                      "--out", str(out)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 and "x" in rows[1]  # the header and one shape
    report = json.loads(out.read_text())
    assert report["cpu"] and report["fma_peak_gflops"] > 0
    (row,) = report["rows"]
    assert all(row[key] > 0 for key in ("line_l1", "line_l2", "cross_l1", "cross_l2"))


def test_block_rates_script_times_blocks_of_few_channels(capsys, tmp_path):
    pytest.importorskip("numba")
    out = tmp_path / "rates.json"
    assert _load("block_rates").main(["--shapes", "1", "--calls", "2", "--rounds", "1",
                                      "--channel-blocks", "--out", str(out)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 and rows[1].count("|") == 7  # a shape and five channel counts
    (row,) = json.loads(out.read_text())["rows"]
    assert set(row["gflops_by_channels"]) == {"1", "3", "7", "16", "64"}
    assert all(rate > 0 for rate in row["gflops_by_channels"].values())


def test_int8_kernels_script_compares_the_two_kernels(capsys, tmp_path):
    pytest.importorskip("numba")
    from convtranspose._runtime.machine import has_vnni

    if not has_vnni():
        pytest.skip("this CPU has no AVX512-VNNI: the byte products cannot run here")
    out = tmp_path / "int8.json"
    script = _load("int8_kernels")
    assert script.main(["--repeat", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * len(script.LAYERS)
    assert all(row["scatter"] > 0 and row["blocked"] > 0 for row in rows)


def test_int8_kernels_script_times_the_word_casts(capsys, tmp_path):
    pytest.importorskip("numba")
    out = tmp_path / "words.json"
    script = _load("int8_kernels")
    assert script.main(["--words", "--repeat", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {row["cast"] for row in rows} == {"bytes", "halves"}
    assert len(rows) == 2 * (len(script.LAYERS) - 1)
    assert all(row["numpy"] > 0 and row["ours"] > 0 for row in rows)


def test_int8_kernels_script_measures_the_pair_products_on_any_x86_cpu(tmp_path,
                                                                       monkeypatch):
    pytest.importorskip("numba")
    from convtranspose._runtime.target import host

    if not host().numba or host().vector_bytes < 32:
        pytest.skip("the pair products' kernel runs on x86-64 with numba")
    script = _load("int8_kernels")
    monkeypatch.setattr(script, "LAYERS", script.LAYERS[-2:-1])  # the small layer
    monkeypatch.setattr(script, "has_vnni", lambda: False)
    monkeypatch.setattr(script, "has_amx_int8", lambda: False)
    out = tmp_path / "peak.json"
    assert script.main(["--peak", "--repeat", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["halves_peak_gmacs"]["1"] > 0
    kernels = rows[1:]
    assert {row["kind"] for row in kernels} == {"halves"} and len(kernels) == 4
    assert all(0 < row["share"] for row in kernels)


def test_small_layers_takes_the_geometric_mean_over_layers_whose_best_peer_is_fast(
        tmp_path, capsys):
    def results(calls, rows):
        # Rows as the benchmark writes them: its best peer and ratio where a peer ran.
        return {"meta": {"calls": calls, "suite": {"name": "suite"}},
                "rows": [{"layer": name, "times_ms": times,
                          **({"best_peer": best, "ratio_to_best_peer": ratio} if best else {})}
                         for name, times, best, ratio in rows]}

    functions = tmp_path / "functions.json"
    functions.write_text(json.dumps(results("array function", [
        # best peers 0.1 ms (b) and 0.4 ms (a): ratios 2.0 and 0.5 -> geometric mean 1.0
        ("fast", {"convtranspose": 0.05, "a": 0.3, "b": 0.1}, "b", 2.0),
        ("mid", {"convtranspose": 0.8, "a": 0.4}, "a", 0.5),
        ("slow", {"convtranspose": 1.0, "a": 8.0}, "a", 8.0),  # best peer 8 ms: left out
        ("alone", {"convtranspose": 1.0}, None, None),  # no peer ran it: left out everywhere
    ])))
    prepared = tmp_path / "prepared.json"
    prepared.write_text(json.dumps(results("prepared layer", [
        ("fast", {"convtranspose": 0.025, "a": 0.2}, "a", 8.0),
    ])))
    assert _load("small_layers").main([str(functions), str(prepared)]) == 0
    lines = capsys.readouterr().out.splitlines()
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
             for line in lines if line.startswith(("| suite", "| **"))}
    assert cells["suite (array function)"][1:6] == ["3", "2.000x", "2", "1.000x", "1"]
    assert cells["suite (prepared layer)"][1:6] == ["1", "8.000x", "1", "8.000x", "0"]
    assert cells["**all files (array function)**"][3:5] == ["2", "1.000x"]
    assert any("mid: 800.0 us against a's 400.0 (0.50x)" in line for line in lines)


def test_ab_compare_against_this_build_finds_equal_outputs_prepared(capsys, tmp_path):
    # This checkout as its own baseline: the same code, so the same algorithm and the
    # same bits, through prepared layers of both builds.
    out = tmp_path / "ab.json"
    source = str(pathlib.Path(__file__).resolve().parents[2] / "src")
    assert _load("ab_compare").main(["--baseline", source, "--layers", "FCN-2x",
                                     "--prepared", "--rounds", "1", "--pause", "0",
                                     "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["prepared"] is True
    assert [row["layer"] for row in record["rows"]] == [
        "FCN-2x N1 21->21 16x16 k4 s2 p1", "FCN-2x N1 21->21 16x16 k4 s2 p1 NXC"]
    for row in record["rows"]:
        assert row["equal"] and row["baseline_algorithm"] == row["current_algorithm"]
        assert row["current_algorithm"] in ALGORITHMS


def test_packed_products_script_times_the_products_asked_for(capsys, tmp_path):
    out = tmp_path / "products.json"
    assert _load("packed_products").main(["--products", "mid,k1 s4", "--rounds", "1",
                                          "--calls", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [row["product"] for row in rows] == ["k1 s4 N8 8->128 5x5",
                                                "mid 32->16x9 taps 16x16 (col2im)"]
    assert all(value > 0 for row in rows for value in row["us"].values())


def test_bench_counts_a_prepared_layers_repeated_call_not_its_set_up(monkeypatch):
    # direct-blocked's set-up packs the 1 MiB filter at the layer's first call; a
    # repeated call allocates far less (its 4 KiB output and Python's own objects).
    from convtranspose._cli import bench as _bench
    from convtranspose._cli.bench.suite import Layer

    layer = Layer("wide filter N1 256->64 2x2 k4 s2 p1", 1, 256, 64, (2, 2), 4, 2, 1)
    filter_bytes = 256 * 64 * 4 * 4 * 4
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "direct-blocked")
    monkeypatch.setattr(_bench.run, "SETTLE_SECONDS", 0.0)
    row = _bench.bench_layer(layer, [], repeat=1, warmup=0, budget=60.0, prepared=True)
    assert row["extra_bytes"] < filter_bytes // 8
