"""A 3D decoder layer on a Zarr volume, computed tile by tile on a Dask cluster.

The layer upsamples a ``(1, C_IN, S, S, S)`` float32 volume by 2 with a 4x4x4 filter
(``strides=2, pads_begin=1, pads_end=1``, OpenVINO ConvolutionBackpropData-1): the
output ``(1, C_OUT, 2S, 2S, 2S)`` is larger than the memory limit given to each worker
(at the default size, 1 GiB of output against 500 MiB per worker), so no single worker
could hold it; each task reads its input chunk plus a one-voxel halo from Zarr, computes
its output tile exactly and the tile is written back to Zarr.

    pip install '.[dask]' zarr      # in a checkout of the repository
    python examples/volume.py                       # a LocalCluster of 2 worker processes
    python examples/volume.py --scheduler tcp://scheduler:8786 --folder /shared/volume

With ``--scheduler`` the workers of that cluster compute (``Client("tcp://...")``); the
folder must then be storage every worker can reach (a shared file system, or an
``s3://`` / ``gs://`` URL with the matching fsspec package).  ``--check`` compares the
result with the single-machine call (small volumes only: it holds the whole output).
"""

from __future__ import annotations

import argparse
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, progress

import convtranspose as ct
import convtranspose.dask as ctd

LAYER = dict(strides=2, pads_begin=1, pads_end=1)


def make_input(url: str, size: int, channels: int, chunk: int) -> da.Array:
    """A random float32 volume ``(1, channels, size, size, size)`` stored in Zarr."""
    volume = da.random.default_rng(0).standard_normal(
        (1, channels, size, size, size), chunks=(1, channels, chunk, chunk, chunk),
        dtype=np.float32)
    volume.to_zarr(url, overwrite=True)
    return da.from_zarr(url)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="input edge S (default 256)")
    parser.add_argument("--in-channels", type=int, default=4)
    parser.add_argument("--out-channels", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=64, help="input chunk edge (default 64)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--memory-limit", default="500MiB", help="per LocalCluster worker")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler")
    parser.add_argument("--folder", default="volume-example", help="where the Zarr arrays go")
    parser.add_argument("--check", action="store_true",
                        help="compare with the single-machine call (small volumes only)")
    args = parser.parse_args(argv)

    if args.scheduler:
        client = Client(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                               memory_limit=args.memory_limit, dashboard_address=None)
        client = Client(cluster)
    with client:
        start = time.perf_counter()
        data = make_input(f"{args.folder}/input.zarr", args.size, args.in_channels, args.chunk)
        print(f"input  {data.shape} {data.dtype}, {data.nbytes / 2**20:.0f} MiB in chunks of"
              f" {data.chunksize} ({time.perf_counter() - start:.1f} s to write)")
        filter = np.random.default_rng(1).standard_normal(
            (args.in_channels, args.out_channels, 4, 4, 4)).astype(np.float32)
        result = ctd.convolution_backprop_data(data, filter, **LAYER)
        limit = client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
        print(f"output {result.shape}, {result.nbytes / 2**20:.0f} MiB in {result.npartitions}"
              f" tiles of {result.chunksize}; worker memory limits"
              f" {[f'{v / 2**20:.0f} MiB' for v in limit.values() if v]}")
        start = time.perf_counter()
        stored = client.compute(result.to_zarr(f"{args.folder}/output.zarr", overwrite=True,
                                               compute=False))
        progress(stored)
        stored.result()
        seconds = time.perf_counter() - start
        print(f"\nwritten to {args.folder}/output.zarr in {seconds:.1f} s"
              f" ({result.nbytes / 2**20 / seconds:.0f} MiB of output per second)")
        if args.check:
            expected = ct.convolution_backprop_data(data.compute(), filter, **LAYER)
            written = da.from_zarr(f"{args.folder}/output.zarr").compute()
            same = np.array_equal(written, expected)
            error = float(np.max(np.abs(written - expected)) / np.max(np.abs(expected)))
            print(f"check: {'bit-identical to' if same else 'differs from'} the single-machine"
                  f" call (largest difference {error:.1e} of the largest output)")
            if error > 1e-5:
                raise SystemExit("check failed")


if __name__ == "__main__":
    main()
