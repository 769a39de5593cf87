"""The tiled layer on ``dask.distributed``: a ``LocalCluster`` of two worker processes,
each with a memory limit that the whole problem exceeds.  One cluster per module (a
start costs seconds); tasks travel pickled between processes, as on any cluster."""

from __future__ import annotations

import numpy as np
import pytest
from dask_cases import DIALECTS, random_layer

import convtranspose as ct

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import convtranspose.dask as ctd  # noqa: E402

#: Per worker.  A worker process with NumPy, numba, Dask and this library loaded holds
#: about 200 MiB; Dask pauses a worker at 80% of its limit and ends it at 95%.
WORKER_MEMORY = 400 * 2**20


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       memory_limit=WORKER_MEMORY, dashboard_address=None)
    with cluster, distributed.Client(cluster, set_as_default=False) as client:
        yield client


def _worker_pids(client):
    return client.run(lambda: __import__("os").getpid())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_random_layers_on_two_worker_processes(client, dialect):
    for seed in range(2):
        layer = random_layer(300 + seed, dialect, np.float32)
        result = client.compute(layer.dask_result()).result(timeout=120)
        np.testing.assert_array_equal(result, layer.numpy_result())


def test_an_output_larger_than_a_worker_memory_limit(client):
    # A 3D decoder layer (stride 2, 4x4x4 taps: a halo of one input per axis) whose
    # 512 MiB float32 output exceeds each worker's 400 MiB limit.  The data is made on
    # the workers; the tiles come back one by one and are compared with the NumPy call's.
    # Small-integer values make every sum exact, whichever algorithm a tile gets.
    data = da.random.default_rng(0).integers(-3, 4, (1, 2, 128, 128, 128),
                                             chunks=(1, 2, 32, 32, 32)).astype(np.float32)
    filter = np.random.default_rng(1).integers(-3, 4, (2, 8, 4, 4, 4)).astype(np.float32)
    attributes = dict(strides=2, pads_begin=1, pads_end=1)
    lazy = ctd.convolution_backprop_data(data, filter, **attributes)
    assert lazy.nbytes > 1.25 * WORKER_MEMORY and lazy.npartitions == 64
    limits = [w["memory_limit"] for w in client.scheduler_info()["workers"].values()]
    assert limits == [WORKER_MEMORY] * 2
    pids = _worker_pids(client)
    expected = ct.convolution_backprop_data(client.compute(data).result(), filter,
                                            **attributes)
    tiles = lazy.to_delayed().ravel()
    futures = {future: tile.key[1:] for tile, future in zip(tiles, client.compute(list(tiles)))}
    edges = [np.cumsum((0,) + chunks) for chunks in lazy.chunks]
    with client.as_current():
        for future in distributed.as_completed(list(futures), timeout=300):
            index = futures.pop(future)
            where = tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, index))
            np.testing.assert_array_equal(future.result(), expected[where], err_msg=f"{index}")
            del future                       # the worker lets the tile go
    assert _worker_pids(client) == pids          # no worker was restarted for its memory
