"""The quantized suite (``convtranspose bench --quantized``): its table and results.json,
every peer checked against the dialect that reproduces it, and the CPU's VNNI flags.

Oracles: a direct scatter loop (``tests/oracle.py``) on the dequantized operands,
quantized here, as a fake int8 peer; the installed runtimes themselves; the flags read
from ``/proc/cpuinfo`` independently of the code under test."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from convtranspose._cli import bench as _bench
from convtranspose._cli.bench import quantized

SMALL = "small N1 16->16 8x8 k3 s2 p1"


def _oracle_int8(offset: int = 0):
    """A fake int8 peer: the oracle's direct loop on the dequantized operands in
    float64, rounded half to even to the output's units (plus ``offset`` units)."""
    def build(layer, q):
        from oracle import crop, full_transposed_convolution

        data = q["float"]["data"].astype(np.float64)
        weights = q["float"]["weights"][None].astype(np.float64)

        def run():
            full = full_transposed_convolution(data, weights, [layer.stride] * layer.rank,
                                               [layer.dilation] * layer.rank)
            real = crop(full, [layer.pad] * layer.rank, list(layer.output_spatial))
            return np.clip(np.rint(real / float(q["y_scale"])) + int(q["y_zero_point"]) + offset,
                           0, 255)
        return run, lambda result: result
    return build


def _run(monkeypatch, tmp_path, peer, *peers, options=()):
    monkeypatch.setitem(quantized.QUANTIZED_PEERS, "oracle-int8",
                        (peer, quantized.QLINEAR, "numpy", True))
    monkeypatch.setattr(_bench.run, "SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(_bench.run, "fma_peak_flops", lambda: None)
    monkeypatch.setattr(_bench.run, "copy_bandwidth", lambda: 1e10)
    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", "off")
    code = _bench.main(["--quantized", "--layers", SMALL, "--peers", ",".join(peers),
                        "--repeat", "1", "--warmup", "0", "--out", str(tmp_path), *options])
    assert code == 0
    return json.loads((tmp_path / "results.json").read_text())


def test_vnni_flags_are_read_from_cpuinfo_text():
    text = ("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni amx_int8\n\n"
            "processor\t: 1\nflags\t\t: fpu\n")
    assert quantized.vnni_flags(text) == ["avx512_vnni"]
    assert quantized.vnni_flags("flags : avx_vnni avx2\n") == ["avx_vnni"]
    assert quantized.vnni_flags("flags : avx2 fma\n") == []
    assert quantized.vnni_flags("processor : 0\n") == []


@pytest.mark.peers
def test_a_quantized_run_writes_its_table_and_results(monkeypatch, tmp_path, capsys):
    # The installed peers and the oracle peer on one small layer: every peer that ran
    # agrees within one unit, the ratios are the times' ratios, and the CPU and its
    # VNNI flags are named.
    installed = quantized.installed_quantized_peers()
    results = _run(monkeypatch, tmp_path, _oracle_int8(), "oracle-int8", *installed)
    meta, [row] = results["meta"], results["rows"]
    assert meta["cpu"] == _bench.cpu_model()
    assert meta["suite"]["name"] == "quantized fixed suite"
    try:
        with open("/proc/cpuinfo") as handle:
            flags = next(line for line in handle if line.startswith("flags")).split()
    except (OSError, StopIteration):
        flags = []
    assert meta["vnni"] == [f for f in ("avx512_vnni", "avx_vnni") if f in flags]
    assert row["layer"] == SMALL
    times = row["times_ms"]
    assert "oracle-int8" in times and row["units_apart"]["oracle-int8"] <= 1
    for peer in installed:
        assert (peer in times) != (peer in row["skipped"])
        if peer in times:
            assert row["units_apart"][peer] <= 1
            assert row["dialects"][peer] in times
    assert row["int8_speedup_over_float32"] == pytest.approx(
        times[quantized.FLOAT] / times[quantized.QLINEAR])
    best = row["best_int8_peer"]
    assert quantized.is_int8_peer(best, row) and "onnxruntime" not in best
    int8 = [p for p in times if p in quantized.QUANTIZED_PEERS and quantized.is_int8_peer(p, row)]
    assert times[best] == min(times[p] for p in int8)
    assert row["ratio_to_best_int8_peer"] == pytest.approx(
        times[best] / times[quantized.QUANTIZED_PEERS[best][1]])
    text = (tmp_path / "results.md").read_text()
    assert text.strip() == capsys.readouterr().out.strip()
    head = text.splitlines()[0]
    for column in ["ours float32 ms", "ours qlinear ms", "oracle-int8 ms", "int8 x float32",
                   "x best int8 peer"] + [f"{p} ms" for p in installed]:
        assert column in head
    assert f"CPU: {_bench.cpu_model()}; int8 dot-product flags:" in text


def test_a_peer_two_units_apart_is_skipped_with_the_reason(monkeypatch, tmp_path):
    results = _run(monkeypatch, tmp_path, _oracle_int8(offset=2), "oracle-int8")
    [row] = results["rows"]
    assert "oracle-int8" not in row["times_ms"] and "best_int8_peer" not in row
    # Two units added to values within one unit: two or three apart.
    reason = re.search(r"differs from convtranspose by (\d+) units", row["skipped"]["oracle-int8"])
    assert reason and int(reason.group(1)) in (2, 3)
    assert "oracle-int8" in (tmp_path / "results.md").read_text().split("Peers that could not")[1]


def test_prepared_runs_time_ours_through_prepared_layers(monkeypatch, tmp_path):
    # --prepared: our int8 and float32 runners are prepared layers made before the
    # timing; their results still agree with the oracle peer, and the table says how
    # ours were called.
    import convtranspose as ct

    prepared = []
    original = ct.prepare

    def spy(function, **arguments):
        prepared.append(getattr(function, "__name__", function))
        return original(function, **arguments)

    monkeypatch.setattr(ct, "prepare", spy)
    results = _run(monkeypatch, tmp_path, _oracle_int8(), "oracle-int8",
                   options=("--prepared",))
    [row] = results["rows"]
    assert results["meta"]["calls"] == "prepared layer"
    assert {"qlinear_conv_transpose", "onnx_conv_transpose"} <= set(prepared)
    assert row["units_apart"]["oracle-int8"] <= 1
    assert "ours through prepared layers (ct.prepare)" in (tmp_path / "results.md").read_text()


@pytest.mark.parametrize("argv, words", [
    (["--peers", "no-such-peer"], ["unknown peer", "no-such-peer"]),
    (["--layers", "no-such-layer"], ["quantized fixed suite", "no-such-layer"]),
])
def test_bad_quantized_options_are_one_line_errors(argv, words, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        _bench.main(["--quantized", *argv, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert all(word in error for word in words)
    assert not (tmp_path / "out").exists()
