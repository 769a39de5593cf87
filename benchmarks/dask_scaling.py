"""Tiled transposed convolution on Dask against the single-machine call, on this machine.

    python benchmarks/dask_scaling.py [--repeats 3] [--out FILE]

- ``throughput``: a 3D decoder layer (data 1x16x64x64x64 float32 in 8 chunks of 32^3,
  filter 16x8x4x4x4, stride 2, pads 1: a 64 MiB output) computed by the single-machine
  call (on all of this machine's threads, and on one), by Dask's threaded scheduler (two
  tasks at a time, one thread each, tiles stored into one preallocated array as the
  single call writes its output), and by a ``LocalCluster`` of 1 and 2 worker processes
  of one thread each (the data already on the workers, the tiles kept there:
  ``client.persist``; each run's filter differs in its last bits, so no run reuses
  another's tiles).  Output MiB and multiply-adds per second.
- ``halo``: per layer type, the tiling's cost on one thread: the extra input the tiles
  read (their windows' total over the input; the halo) and the time of every tile
  computed in turn (Dask's synchronous scheduler, into one array) against the
  single-machine call, both on one thread.

Every time is the median of ``--repeats`` runs after one untimed run (which also lets
measured planning choose each shape's algorithm).  Writes nothing unless ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
import sys
import time

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SOURCE))

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402

import convtranspose as ct  # noqa: E402
import convtranspose.dask as ctd  # noqa: E402
from convtranspose._runtime.machine import cpu_model_name  # noqa: E402
from convtranspose.dask import _tiling  # noqa: E402

DECODER = dict(data=(1, 16, 64, 64, 64), chunk=32, filter=(16, 8, 4, 4, 4),
               attributes=dict(strides=2, pads_begin=1, pads_end=1))

#: name -> data shape, spatial chunk edge, filter shape, attributes (OpenVINO dialect).
LAYERS = {
    "3D decoder k4 s2 p1": ((1, 16, 48, 48, 48), 24, (16, 8, 4, 4, 4),
                            dict(strides=2, pads_begin=1, pads_end=1)),
    "2D upsampling k4 s2 p1": ((1, 64, 128, 128), 64, (64, 32, 4, 4),
                               dict(strides=2, pads_begin=1, pads_end=1)),
    "2D stride 1 k3 p1": ((1, 32, 256, 256), 64, (32, 32, 3, 3),
                          dict(strides=1, pads_begin=1, pads_end=1)),
    "2D dilated k3 d2 p2": ((1, 32, 256, 256), 64, (32, 32, 3, 3),
                            dict(strides=1, dilations=2, pads_begin=2, pads_end=2)),
    "1D vocoder k16 s8 p4": ((1, 256, 4096), 512, (256, 128, 16),
                             dict(strides=8, pads_begin=4, pads_end=4)),
    "2D FCN-32x k64 s32 p16": ((1, 21, 16, 16), 4, (21, 21, 64, 64),
                               dict(strides=32, pads_begin=16, pads_end=16)),
}


def _median_ms(run, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _operands(data_shape, filter_shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(data_shape).astype(np.float32),
            rng.standard_normal(filter_shape).astype(np.float32))


def _macs(plan) -> int:
    """Multiply-adds of the layer: every input element times every tap and output channel."""
    return (math.prod(plan.data_shape) * math.prod(plan.kernel_shape)
            * plan.out_channels // plan.groups)


def throughput(repeats: int) -> dict:
    from distributed import Client, LocalCluster, wait

    data, filter = _operands(DECODER["data"], DECODER["filter"])
    attributes = DECODER["attributes"]
    chunks = (1, data.shape[1]) + (DECODER["chunk"],) * 3
    plan = ct.shapes.convolution_backprop_data(data.shape, filter.shape, **attributes)
    out_bytes = math.prod(plan.output_shape) * 4
    target = np.empty(plan.output_shape, np.float32)
    results = {}

    def record(name, ms):
        results[name] = dict(ms=round(ms, 1), output_mib_per_s=round(out_bytes / 2**20 / ms * 1e3),
                             gmacs_per_s=round(_macs(plan) / ms / 1e6, 1))
        print(f"  {name:<40} {ms:9.1f} ms  {results[name]['output_mib_per_s']:6} MiB/s",
              flush=True)

    record(f"single-machine call, {ct.get_num_threads()} threads", _median_ms(
        lambda: ct.convolution_backprop_data(data, filter, **attributes, out=target), repeats))
    with ct.num_threads(1):
        record("single-machine call, 1 thread", _median_ms(
            lambda: ct.convolution_backprop_data(data, filter, **attributes, out=target),
            repeats))
    lazy = ctd.convolution_backprop_data(da.from_array(data, chunks=chunks), filter, **attributes)
    with dask.config.set(scheduler="threads", num_workers=2):
        record("dask threaded scheduler, 2 threads", _median_ms(
            lambda: da.store(lazy, target, lock=False), repeats))
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            on_workers = client.persist(da.from_array(data, chunks=chunks))
            wait(on_workers)
            runs = iter(range(1, 1000))

            def run():
                # A filter of other bits each run: a graph of new keys, so nothing is
                # reused from the run before (the scheduler may not have let it go yet).
                changed = filter * np.float32(1 + 2**-20 * next(runs))
                tiles = client.persist(
                    ctd.convolution_backprop_data(on_workers, changed, **attributes))
                wait(tiles)
                del tiles

            record(f"LocalCluster, {workers} worker process{'es' if workers > 1 else ''}"
                   " x 1 thread", _median_ms(run, repeats))
    return dict(layer=dict(data=list(data.shape), filter=list(filter.shape), **attributes,
                           data_chunks=list(chunks), tiles=lazy.npartitions,
                           output_mib=round(out_bytes / 2**20, 1)), results=results)


def _read_overhead(plan, data_chunks) -> float:
    """The tiles' input windows in total, over the input, minus one (default chunks)."""
    ratio = 1.0
    for position, axis in enumerate(plan.axes, start=2):
        out_chunks = _tiling.default_chunks(axis, data_chunks[position])
        edges = _tiling.edges(out_chunks)
        windows = [_tiling.input_window(axis, a, b) for a, b in zip(edges, edges[1:])]
        ratio *= sum(x1 - x0 for x0, x1 in windows) / axis.input_size
    return ratio - 1


def halo(repeats: int) -> dict:
    results = {}
    for name, (data_shape, chunk, filter_shape, attributes) in LAYERS.items():
        data, filter = _operands(data_shape, filter_shape)
        chunks = (1, data_shape[1]) + (chunk,) * (len(data_shape) - 2)
        lazy = ctd.convolution_backprop_data(da.from_array(data, chunks=chunks), filter,
                                             **attributes)
        plan = ct.shapes.convolution_backprop_data(data_shape, filter_shape, **attributes)
        target = np.empty(plan.output_shape, np.float32)
        with ct.num_threads(1):
            single = _median_ms(lambda: ct.convolution_backprop_data(
                data, filter, **attributes, out=target), repeats)
            tiled = _median_ms(lambda: da.store(lazy, target, lock=False, scheduler="sync"),
                               repeats)
        read = _read_overhead(plan, da.core.normalize_chunks(chunks, data_shape))
        results[name] = dict(data=list(data_shape), filter=list(filter_shape), **attributes,
                             data_chunk=chunk, tiles=lazy.npartitions,
                             input_read_overhead_percent=round(100 * read, 1),
                             single_ms=round(single, 1), tiled_ms=round(tiled, 1),
                             time_overhead_percent=round(100 * (tiled / single - 1), 1))
        print(f"  {name:<26} {lazy.npartitions:3} tiles  read +{100 * read:5.1f}%"
              f"  {single:8.1f} ms -> {tiled:8.1f} ms ({100 * (tiled / single - 1):+.1f}%)",
              flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args(argv)
    machine = cpu_model_name()
    print(f"{machine}, {ct.get_num_threads()} threads")
    print("throughput (3D decoder layer, 64 MiB output):")
    report = dict(machine=machine, threads=ct.get_num_threads(),
                  throughput=throughput(args.repeats))
    print("halo overhead per layer type (one thread):")
    report["halo"] = halo(args.repeats)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
