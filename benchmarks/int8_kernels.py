"""The two exact int8 kernels against each other: byte products then a scatter
(``u8s8_transposed``) and direct-blocked's loop nest with byte products (``u8s8_blocked``).

Prints one row per layer and layout: each kernel's median time (alternating rounds,
each call after a pause and an untimed call, as ``python -m convtranspose bench``
times them), the ratio, the blocked kernel's multiply-adds per second, and the
1-minute load average.  Both results are checked equal first.  ``--out`` writes the
rows, the CPU model and its int8 dot-product flags to a JSON file.  Needs numba and a
CPU with AVX512-VNNI (``--peak`` runs on any x86-64 CPU).

    python benchmarks/int8_kernels.py --out benchmarks/results/int8-kernels-xeon.json
    python benchmarks/int8_kernels.py --peak
    python benchmarks/int8_kernels.py --words

``--words`` times instead the channels-first data's casts into the kernels' words, one
thread, on the layers' uint8 data: four bytes per word (``word_bytes``, the VNNI and
AMX kernels' operand) and two int16 halves (``word_halves``, the pair products'), each
against NumPy's copy of the transposed view of the same values (checked equal first),
alternating rounds.  It runs on any CPU with numba.

``--peak`` prints instead the ``vpdpbusd`` peak of this CPU (16 independent chains of
register-only products on one thread, then on two threads at once) and the blocked
kernel's multiply-adds per second on each layer and layout, one and two threads, as a
share of that peak; the same for the int16 pair products (``pmaddwd``, every x86-64
CPU: the only kind on a CPU without VNNI, where ``--peak`` is the one mode that runs);
on a CPU with AMX-INT8 tiles the same for the tiles (``tdpbusd`` into four tiles,
operands from L1; the tiles' kernel on the layers it takes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np

from convtranspose._cli.bench import alternating_rounds, cpu_model
from convtranspose._kernels.int8 import prepare_blocked_sums, u8s8_blocked, u8s8_transposed
from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime.machine import has_amx_int8, has_vnni
from convtranspose._runtime.target import host

#: (name, N, Ci, Co, input size, kernel, stride, pad, output size): the quantized
#: suite's layers (``convtranspose bench --quantized``) and a grouped one.
LAYERS = [
    ("DCGAN N4 256->128 16x16 k4 s2 p1", 4, 256, 128, 16, 4, 2, 1, 32, 1),
    ("U-Net N1 512->256 32x32 k2 s2", 1, 512, 256, 32, 2, 2, 0, 64, 1),
    ("seg head N1 128->64 64x64 k4 s2 p1", 1, 128, 64, 64, 4, 2, 1, 128, 1),
    ("small N1 16->16 8x8 k3 s2 p1", 1, 16, 16, 8, 3, 2, 1, 15, 1),
    ("grouped N2 256->256 g32 16x16 k4 s2 p1", 2, 256, 256, 16, 4, 2, 1, 32, 32),
]


def _load() -> float:
    return os.getloadavg()[0]


def _product_peak(kind: str, threads: int, iterations: int = 1_000_000) -> float:
    """G multiply-adds per second of ``threads`` threads of register-only products of
    ``kind`` (``"bytes"``: ``vpdpbusd``, 16 lanes of four byte pairs; ``"halves"``:
    ``pmaddwd`` and an add on this CPU's widest vectors, two int16 pairs per lane, the
    product fed back as an operand so that it cannot leave the loop) on independent
    chains, 16 with AVX-512's 32 registers, 12 with AVX2's 16 (the fastest of five
    runs)."""
    from convtranspose._cli.bench.machine import fastest_together
    from convtranspose._kernels._numba.codegen import compile_source

    if kind == "bytes":
        lanes, chains, per_lane, operand = 16, 16, 4, "x"
    else:
        lanes = host().vector_bytes // 4
        chains, per_lane, operand = (16 if lanes == 16 else 12), 2, "a{i}"
    product = {"bytes": "vector_dot_bytes", "halves": "vector_dot_words"}[kind]
    lines = ["def peak(buffer, count):"]
    lines += [f"    a{i} = vector_load(buffer, {i * lanes}, {lanes})" for i in range(chains)]
    lines += [f"    x = vector_load(buffer, {chains * lanes}, {lanes})",
              f"    y = vector_load(buffer, {(chains + 1) * lanes}, {lanes})",
              "    for _ in range(count):"]
    lines += [f"        a{i} = {product}({operand.format(i=i)}, y, a{i})" for i in range(chains)]
    lines += [f"    vector_store(buffer, {i * lanes}, a{i})" for i in range(chains)]
    peak = compile_source("\n".join(lines) + "\n", "peak")
    buffers = [np.full((chains + 2) * lanes, 0x01010101, np.int32) for _ in range(threads)]
    peak(buffers[0], 1)  # compiled outside the timing
    seconds = fastest_together(peak, buffers, iterations, rounds=5)
    return threads * per_lane * lanes * chains * iterations / seconds / 1e9


def _tile_peak(threads: int, iterations: int = 200_000) -> float:
    """G multiply-adds per second of ``threads`` threads of ``tdpbusd`` into four
    tiles each, operands from L1 (the fastest of five runs)."""
    from convtranspose._cli.bench.machine import fastest_together
    from convtranspose._kernels._numba.tiles import tile_peak
    from convtranspose._kernels.tiles import aligned, tile_config

    config = tile_config()
    buffers = [aligned(4096, np.uint8) for _ in range(threads)]
    for buffer in buffers:
        buffer[:] = 1
    tile_peak(config, buffers[0], 1)  # compiled outside the timing
    seconds = fastest_together(lambda buffer, count: tile_peak(config, buffer, count),
                               buffers, iterations, rounds=5)
    return threads * 4 * 16 * 16 * 64 * iterations / seconds / 1e9


def _rates(repeat: int) -> list[dict]:
    """Each integer kernel's rate (VNNI's, and AMX's where the CPU has the tiles) on
    each layer, layout and thread count, with its peak on as many threads."""
    kinds = ("bytes", "halves") if has_vnni() else ("halves",)
    peaks = {kind: {threads: _product_peak(kind, threads) for threads in (1, 2)}
             for kind in kinds}
    if has_amx_int8():
        peaks["tiles"] = {threads: _tile_peak(threads) for threads in (1, 2)}
    for kind, peak in peaks.items():
        print(f"{kind} peak: {peak[1]:.0f} G multiply-adds/s on one thread,"
              f" {peak[2]:.0f} on two")
    rows = [{{"bytes": "peak_gmacs", "tiles": "tile_peak_gmacs"}.get(kind, f"{kind}_peak_gmacs"):
             peak} for kind, peak in peaks.items()]
    for kind in peaks:
        rows += _kernel_rates(kind, peaks[kind], repeat)
    return rows


def _kernel_rates(kind: str, peaks: dict, repeat: int) -> list[dict]:
    """The rates of the kernel of ``kind`` on the layers it takes."""
    rng = np.random.default_rng(0)
    rows = []
    for name, n, ci, co, size, k, s, p, out, groups in LAYERS:
        axes = (AxisPlan(size, k, s, 1, p, out),) * 2
        weights = rng.integers(-63, 64, (groups, ci // groups, co // groups, k, k))
        weights = weights.astype(np.int8)
        macs = n * ci * (co // groups) * k * k * size * size
        for channels_last in (False, True):
            shape = (n, size, size, ci) if channels_last else (n, ci, size, size)
            data = rng.integers(0, 256, shape).astype(np.uint8)
            for threads in (1, 2):
                target = host().replace(threads=threads)
                sums = prepare_blocked_sums(kind, n, weights, axes, channels_last, target)
                if sums is None:
                    continue
                samples = alternating_rounds({"sums": lambda: sums.sums(data)}, repeat,
                                             warmup=2, pause=0)["sums"]
                rate = macs / statistics.median(samples) / 1e9
                rows.append(dict(layer=name, kind=kind,
                                 layout="NXC" if channels_last else "NCX", threads=threads,
                                 gmacs=rate, share=rate / peaks[threads]))
                print(f"{name:40s} {kind:6s} {rows[-1]['layout']} {threads} thread(s):"
                      f" {rate:5.0f} G multiply-adds/s, {rows[-1]['share']:.0%} of the peak")
    return rows


def _word_casts(repeat: int) -> list[dict]:
    """``--words``: per layer, the compiled word casts against NumPy's, ms."""
    from convtranspose._kernels._numba.int8 import word_bytes, word_halves

    lanes = host().lanes(np.float32)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'layer':40s} {'cast':6s} {'numpy':>7s} {'ours':>7s} {'ratio':>6s}")
    for name, n, ci, co, size, k, s, p, out, groups in LAYERS[:-1]:
        data = rng.integers(0, 256, (n, ci, size, size)).astype(np.uint8)
        halves = data.astype(np.int16) - 128
        runs = {
            "bytes": {"numpy": lambda: np.ascontiguousarray(np.moveaxis(data, 1, -1)),
                      "ours": lambda: word_bytes(data, False, 1, ci, ci, 0, 1, lanes)},
            "halves": {"numpy": lambda: np.ascontiguousarray(np.moveaxis(halves, 1, -1)),
                       "ours": lambda: word_halves(halves, 1, ci, ci // 2, 1, lanes)},
        }
        for cast, pair in runs.items():
            expected = pair["numpy"]().reshape(-1)
            np.testing.assert_array_equal(pair["ours"]().reshape(-1).view(expected.dtype),
                                          expected)
            samples = alternating_rounds(pair, repeat, warmup=2)
            ms = {key: statistics.median(values) * 1e3 for key, values in samples.items()}
            rows.append(dict(layer=name, cast=cast, **ms, ratio=ms["ours"] / ms["numpy"]))
            print(f"{name:40s} {cast:6s} {ms['numpy']:7.3f} {ms['ours']:7.3f}"
                  f" {rows[-1]['ratio']:6.2f}")
    return rows


def _write(path: str | None, rows: list[dict], **facts) -> None:
    """The rows, the CPU's name and ``facts`` as JSON at ``path``, where given."""
    if path:
        with open(path, "w", encoding="utf-8") as file:
            json.dump({"cpu": cpu_model(), **facts, "rows": rows}, file, indent=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", help="write the rows and the CPU's name to this JSON file")
    parser.add_argument("--peak", action="store_true",
                        help="the vpdpbusd peak and the blocked kernel's share of it")
    parser.add_argument("--words", action="store_true",
                        help="the channels-first data's word casts against NumPy's")
    args = parser.parse_args(argv)
    if args.words:
        print(f"CPU: {cpu_model()}; one thread; ms (median of {args.repeat})")
        _write(args.out, _word_casts(args.repeat))
        return 0
    if not has_vnni() and not args.peak:
        raise SystemExit("this CPU has no AVX512-VNNI: the byte products cannot run here")
    if args.peak:
        print(f"CPU: {cpu_model()}")
        _write(args.out, _rates(args.repeat))
        return 0
    target = host()
    rng = np.random.default_rng(0)
    rows = []
    print(f"CPU: {cpu_model()}; {target.threads} threads; ms (median of {args.repeat})")
    print(f"{'layer':40s} {'layout':6s} {'scatter':>8s} {'blocked':>8s} {'ratio':>6s}"
          f" {'GMAC/s':>7s} {'load':>5s}")
    for name, n, ci, co, size, k, s, p, out, groups in LAYERS:
        axes = (AxisPlan(size, k, s, 1, p, out),) * 2
        weights = rng.integers(-63, 64, (groups, ci // groups, co // groups, k, k))
        weights = weights.astype(np.int8)
        for channels_last in (False, True):
            shape = (n, size, size, ci) if channels_last else (n, ci, size, size)
            data = rng.integers(0, 256, shape).astype(np.uint8)
            runs = {"scatter": lambda: u8s8_transposed(data, weights, axes, channels_last,
                                                       target),
                    "blocked": lambda: u8s8_blocked(data, weights, axes, channels_last,
                                                    target)}
            np.testing.assert_array_equal(runs["scatter"](), runs["blocked"]())
            samples = alternating_rounds(runs, args.repeat, warmup=2)
            ms = {key: statistics.median(values) * 1e3 for key, values in samples.items()}
            macs = n * ci * (co // groups) * k * k * size * size
            row = dict(layer=name, layout="NXC" if channels_last else "NCX", **ms,
                       ratio=ms["scatter"] / ms["blocked"],
                       blocked_gmacs=macs / ms["blocked"] / 1e6, load=_load())
            rows.append(row)
            print(f"{name:40s} {row['layout']:6s} {ms['scatter']:8.3f} {ms['blocked']:8.3f}"
                  f" {row['ratio']:6.2f} {row['blocked_gmacs']:7.0f} {row['load']:5.2f}")
    ratios = [row["ratio"] for row in rows]
    print(f"geometric mean, scatter / blocked: {float(np.exp(np.mean(np.log(ratios)))):.2f}x")
    _write(args.out, rows, threads=target.threads, vnni=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
