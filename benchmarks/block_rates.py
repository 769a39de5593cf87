"""``direct-blocked``'s register blocks alone: the rate each block shape reaches.

    python benchmarks/block_rates.py [--calls 200] [--rounds 3] [--out FILE]
                                     [--channel-blocks]

For every block shape ``direct-blocked`` may use on this machine's vectors (``chunk``
vectors of output channels x ``pixels`` outputs), times the compiled block alone, in a
compiled loop, over four taps and a run of input channels: its weights in L1 (64
channels) and in L2 (512), and both the block along one line
(:func:`~convtranspose._kernels._numba.block_sources.block_source`) and the block across
lines (:func:`~convtranspose._kernels._numba.block_sources.cross_block_source`).  Prints a
Markdown row per shape with GFLOP/s and the share of the FMA peak of one thread
(:func:`~convtranspose._kernels._numba.peak.measure_fma_gflops`, register-only FMAs):
the ceiling of a layer that runs nothing but that block.  ``--out`` writes the rows and
the CPU as JSON.  Runs on one thread; each rate is the fastest of five timed runs in
each of ``--rounds`` rounds over every shape, so that a moment when another job slows
the core (on a shared virtual machine, by a third or more) does not set a shape's rate.

``--channel-blocks`` times instead the blocks across lines over the 49 taps of a
stride-1 7x7 phase, channels first, with 1 to 64 input channels a block: what a channel
block of few channels costs (``blocked_channels.BLOCKED_LEAST_CHANNELS``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("CONVTRANSPOSE_BACKGROUND_COMPILE", "off")

import numba  # noqa: E402
import numpy as np  # noqa: E402

from convtranspose._kernels._numba.block_sources import block_source, cross_block_source  # noqa: E402
from convtranspose._kernels._numba.codegen import compile_source  # noqa: E402
from convtranspose._kernels._numba.peak import measure_fma_gflops  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name, vector_bytes  # noqa: E402

#: (chunk, pixels) per vector width: the shapes ``schedules.blocked_shape`` chooses from,
#: and a few wider ones.
SHAPES = {64: [(4, 4), (4, 5), (4, 6), (3, 8), (2, 6), (2, 7), (2, 8), (2, 12), (1, 8),
               (1, 16)],
          32: [(2, 5), (2, 6), (3, 4), (1, 5), (1, 6), (1, 12)]}
TAPS = 4


def _looped(block, cross: bool):
    """A compiled loop calling ``block`` ``n`` times over the same operands."""
    if cross:
        @numba.njit(nogil=True)
        def loop(n, source, weights, dest, places, reads, taps, channels, width,
                 channel_step):
            for _ in range(n):
                block(source, weights, dest, 0, places[0], places[1], reads, taps,
                      reads.size, 0, channel_step, channels, 0, width)
    else:
        @numba.njit(nogil=True)
        def loop(n, source, weights, dest, places, reads, taps, channels, width,
                 channel_step):
            for _ in range(n):
                block(source, weights, dest, 0, width, reads, taps, reads.size, 0, channels,
                      channel_step, channels, 0, width)
    return loop


_LOOPS: dict = {}


def _loop_of(lanes: int, chunk: int, pixels: int, cross: bool):
    """The compiled loop of one block shape (compiled once per process)."""
    key = (lanes, chunk, pixels, cross)
    if key not in _LOOPS:
        source_code = (cross_block_source if cross else block_source)(lanes, chunk, pixels)
        _LOOPS[key] = _looped(compile_source(source_code, "block"), cross)
    return _LOOPS[key]


def _aligned(count: int, rng) -> np.ndarray:
    """``count`` float32 numbers in [0.5, 1) starting on a 64-byte boundary (the packed
    weights' alignment; values far from subnormal)."""
    raw = (0.5 + 0.5 * rng.random(count + 16)).astype(np.float32)
    start = ((-raw.ctypes.data) % 64) // 4
    return raw[start:start + count]


def block_rate(lanes: int, chunk: int, pixels: int, channels: int, cross: bool,
               calls: int, taps: int = TAPS, plane: int = 0) -> float:
    """GFLOP/s of one block shape over ``taps`` taps of ``channels`` input channels.

    The input is channels last (outputs ``channels`` apart), taps a row of 16 outputs
    apart; or with ``plane``, channels first (outputs adjacent, channels ``plane``
    apart), taps seven to a row of the filter (a 7x7 filter's with 49)."""
    rng = np.random.default_rng(0)
    loop = _loop_of(lanes, chunk, pixels, cross)
    width = chunk * lanes
    pixel_step, channel_step = (1, plane) if plane else (channels, 1)
    tap = np.arange(taps, dtype=np.int64)
    reads = ((tap // 7) * 16 + tap % 7 if plane else tap * 16) * pixel_step
    source = _aligned(int(reads[-1]) + pixels * pixel_step + channels * channel_step, rng)
    weights = _aligned(taps * channels * width, rng)
    dest = np.zeros(pixels * width, np.float32)
    places = (np.arange(pixels, dtype=np.int64) * width,
              np.arange(pixels, dtype=np.int64) * pixel_step)
    offsets = tap * channels * width
    loop(1, source, weights, dest, places, reads, offsets, channels, width,
         channel_step)  # compiles
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        loop(calls, source, weights, dest, places, reads, offsets, channels, width,
             channel_step)
        best = min(best, time.perf_counter() - start)
    return 2.0 * calls * taps * channels * pixels * width / best / 1e9


#: ``--channel-blocks``: input channels per block, over the 49 taps of a stride-1 7x7
#: phase, channels first (a plane of 14x14 between channels).
CHANNEL_COUNTS = (1, 3, 7, 16, 64)


def _channel_block_rows(lanes: int, shapes, peak: float, rounds: int, calls: int) -> list:
    """``--channel-blocks``: each block shape's rate per channel count of a block."""
    print("| block (vectors x outputs) | " + " | ".join(
        f"{count} channels" for count in CHANNEL_COUNTS) + " |")
    print("|---|" + "---|" * len(CHANNEL_COUNTS))
    best: dict = {}
    for _ in range(rounds):
        for shape in shapes:
            for count in CHANNEL_COUNTS:
                # About as many multiply-adds per timed run as the default's L1 rows.
                rate = block_rate(lanes, *shape, count, True,
                                  max(1, calls * TAPS * 64 // (49 * count)), taps=49,
                                  plane=196)
                best[shape, count] = max(best.get((shape, count), 0.0), rate)
    rows = []
    for chunk, pixels in shapes:
        rates = [best[(chunk, pixels), count] for count in CHANNEL_COUNTS]
        print(f"| {chunk} x {pixels} | " + " | ".join(
            f"{rate:.1f} ({rate / peak:.0%})" for rate in rates) + " |", flush=True)
        rows.append({"chunk": chunk, "pixels": pixels, "taps": 49, "plane": 196,
                     "gflops_by_channels": dict(zip(map(str, CHANNEL_COUNTS),
                                                    (round(r, 1) for r in rates))),
                     "peak_share_by_channels": dict(zip(map(str, CHANNEL_COUNTS),
                                                        (round(r / peak, 3) for r in rates)))})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="block calls per timed run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every shape")
    parser.add_argument("--shapes", type=int, default=0,
                        help="only the first this many shapes (0: all)")
    parser.add_argument("--out", help="write the rows as JSON to this file")
    parser.add_argument("--channel-blocks", action="store_true",
                        help="time blocks of few input channels over many taps instead")
    args = parser.parse_args(argv)
    width = vector_bytes()
    lanes = width // 4
    peak = measure_fma_gflops()
    shapes = SHAPES[64 if width >= 64 else 32]
    shapes = shapes[:args.shapes] if args.shapes else shapes
    print(f"CPU: {cpu_model_name()}, {width}-byte vectors, FMA peak of one thread "
          f"{peak:.1f} GFLOP/s, load {os.getloadavg()[0]:.2f}\n")
    if args.channel_blocks:
        rows = _channel_block_rows(lanes, shapes, peak, args.rounds, args.calls)
        _write(args.out, width, peak, rows)
        return 0
    print("| block (vectors x outputs) | along a line, L1 | along a line, L2 | across lines, L1 "
          "| across lines, L2 |")
    print("|---|---|---|---|---|")
    kinds = [(f"{'cross' if cross else 'line'}_{level}", cross, channels)
             for cross in (False, True) for level, channels in (("l1", 64), ("l2", 512))]
    best: dict = {}
    for _ in range(args.rounds):
        for shape in shapes:
            for name, cross, channels in kinds:
                rate = block_rate(lanes, *shape, channels, cross, args.calls)
                best[shape, name] = max(best.get((shape, name), 0.0), rate)
    rows = []
    for chunk, pixels in shapes:
        rates = {name: best[(chunk, pixels), name] for name, _, _ in kinds}
        cells = " | ".join(f"{rate:.1f} ({rate / peak:.0%})" for rate in rates.values())
        print(f"| {chunk} x {pixels} | {cells} |", flush=True)
        rows.append({"chunk": chunk, "pixels": pixels,
                     **{key: round(rate, 1) for key, rate in rates.items()},
                     **{f"{key}_share": round(rate / peak, 3) for key, rate in rates.items()}})
    _write(args.out, width, peak, rows)
    return 0


def _write(out: str | None, width: int, peak: float, rows: list) -> None:
    """``--out``: the rows, the CPU, its vector width and FMA peak as JSON."""
    if out:
        with open(out, "w") as handle:
            json.dump({"cpu": cpu_model_name(), "vector_bytes": width,
                       "fma_peak_gflops": round(peak, 1), "load": os.getloadavg()[0],
                       "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    raise SystemExit(main())
