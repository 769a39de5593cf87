"""The graph's shape (linear in the chunks, the filter once), chunking, errors, laziness."""

from __future__ import annotations

import doctest
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from dask_cases import random_layer

import convtranspose as ct

da = pytest.importorskip("dask.array")
import dask  # noqa: E402
from dask.core import get_dependencies  # noqa: E402

import convtranspose.dask as ctd  # noqa: E402


def _layer_tasks(lazy):
    """The tasks of the result's own layer, and the whole graph as a dict."""
    graph = dict(lazy.__dask_graph__())
    return {key: graph[key] for key in lazy.__dask_graph__().layers[lazy.name]}, graph


def _volume(blocks_per_axis: int, filter_shape=(4, 3, 4, 4)):
    data = da.ones((2, 4, 6 * blocks_per_axis, 6 * blocks_per_axis), chunks=(1, 4, 6, 6),
                   dtype=np.float32)
    return ctd.convolution_backprop_data(data, np.ones(filter_shape, np.float32), strides=2,
                                         pads_begin=1, pads_end=1)


def test_the_graph_grows_linearly_with_the_number_of_chunks():
    references = []
    for blocks in (2, 4, 8):
        lazy = _volume(blocks)
        tasks, graph = _layer_tasks(lazy)
        chunks = 2 * blocks * blocks                # input blocks (a batch of 2 in 1s)
        # One task per input block, one per output tile (as many), one filter.
        assert len(tasks) == lazy.npartitions == chunks
        assert len(graph) == 2 * chunks + 1
        # Each tile reads its own block, the halo blocks on either side (offset 1 of K'
        # 4: one input before and one after), and the filter.
        dependencies = [len(get_dependencies(graph, key)) for key in tasks]
        assert max(dependencies) <= 3 * 3 + 1
        references.append(sum(dependencies) / chunks)
    assert references == sorted(references) and references[-1] <= 10, references


def test_the_filter_is_one_node_of_the_graph():
    filter = np.random.default_rng(0).standard_normal((4, 64, 16, 16)).astype(np.float32)
    lazy = _volume(4, filter.shape)
    lazy = ctd.convolution_backprop_data(
        da.ones((2, 4, 24, 24), chunks=(1, 4, 6, 6), dtype=np.float32), filter, strides=2)
    tasks, graph = _layer_tasks(lazy)
    holding = [key for key, task in graph.items()
               if len(pickle.dumps(task)) >= filter.nbytes]
    assert len(holding) == 1, holding             # the filter's own node, nothing else
    (filter_key,) = holding
    assert all(filter_key in get_dependencies(graph, key) for key in tasks)
    assert sum(len(pickle.dumps(task)) for task in tasks.values()) < filter.nbytes
    np.testing.assert_array_equal(dask.compute(graph[filter_key])[0], filter)


def test_default_chunks_are_the_input_chunks_times_the_stride():
    data = da.ones((1, 2, 20), chunks=(1, 2, (5, 7, 8)), dtype=np.float32)
    lazy = ctd.onnx_conv_transpose(data, np.ones((2, 1, 4), np.float32), strides=3,
                                   pads=[2, 1])
    # Y = (20-1)*3 + 4 - 3 = 58; input edges 5 and 12 -> output edges 15 and 36.
    assert lazy.chunks[2] == (15, 21, 22)
    wide = ctd.onnx_conv_transpose(data, np.ones((2, 1, 4), np.float32), strides=3,
                                   output_shape=[100])
    # Beyond X*s = 60, chunks of 3 * 8 (the last input chunk's image) go on.
    assert wide.chunks[2] == (15, 21, 24, 24, 16)


def test_large_chunks_are_split_below_the_configured_size():
    data = da.from_array(np.random.default_rng(1).integers(-3, 4, (2, 3, 40, 30))
                         .astype(np.float32), chunks=(2, 3, 40, 30))
    filter = np.random.default_rng(2).integers(-3, 4, (3, 5, 3, 3)).astype(np.float32)
    with dask.config.set({"array.chunk-size": "16KiB"}):
        lazy = ctd.convolution_backprop_data(data, filter, strides=2, pads_begin=1)
    largest = int(np.prod([max(c) for c in lazy.chunks])) * 4
    assert lazy.npartitions > 8 and largest <= 16 * 1024
    np.testing.assert_array_equal(
        lazy.compute(), ct.convolution_backprop_data(data.compute(), filter, strides=2,
                                                     pads_begin=1))


def test_chunks_override_and_zero_regions_with_bias():
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (2, 2, 9, 7)).astype(np.float64)
    w = rng.integers(-3, 4, (2, 3, 3, 2)).astype(np.float64)
    b = rng.integers(-3, 4, 3).astype(np.float64)
    # output_shape far beyond natural (ONNX: zeros split around the result, negative pads)
    attributes = dict(strides=[2, 3], output_shape=[40, 50])
    expected = ct.onnx_conv_transpose(x, w, b, **attributes)
    data = da.from_array(x, chunks=(1, 2, 2, 3))
    for chunks in (None, {2: 7, 3: (10, 40)}, (2, 3, 5, 50)):
        lazy = ctd.onnx_conv_transpose(data, w, b, chunks=chunks, **attributes)
        np.testing.assert_array_equal(lazy.compute(), expected)
    assert lazy.chunks == ((2,), (3,), (5,) * 8, (50,))


def test_inputs_are_not_modified():
    layer = random_layer(7, "conv_transpose", np.float32)
    copies = [a.copy() for a in layer.operands]
    layer.dask_result().compute()
    for before, after in zip(copies, layer.operands):
        np.testing.assert_array_equal(before, after)


def test_channels_in_several_chunks_are_rechunked_with_a_warning():
    x = np.arange(2 * 4 * 6, dtype=np.float32).reshape(2, 4, 6)
    w = np.ones((4, 2, 3), np.float32)
    with pytest.warns(da.core.PerformanceWarning, match="channel axis 1"):
        lazy = ctd.convolution_backprop_data(da.from_array(x, chunks=(1, 2, 3)), w, strides=2)
    np.testing.assert_array_equal(lazy.compute(), ct.convolution_backprop_data(x, w, strides=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctd.convolution_backprop_data(da.from_array(x, chunks=(1, 4, 3)), w, strides=2)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w: ctd.convolution_backprop_data(x, w, strides=0), ct.ConvTransposeError,
     r"strides\[0\] is 0"),
    (lambda x, w: ctd.convolution_backprop_data(x, w, chunks={1: 1}), ct.ConvTransposeError,
     "splits the output channel axis 1"),
    (lambda x, w: ctd.convolution_backprop_data(x, w, chunks=(1, 2, 3, 4)),
     ct.ConvTransposeError, "is not a chunking"),
    (lambda x, w: ctd.convolution_backprop_data(x, w, threads_per_task=0),
     ct.ConvTransposeError, "threads_per_task must be an integer >= 1, got 0"),
    (lambda x, w: ctd.convolution_backprop_data(x, w.astype(np.float64)), TypeError,
     "data has dtype float32 but filter has dtype float64"),
    (lambda x, w: ctd.convolution_backprop_data(x, w, out=np.empty(1)), TypeError,
     "out is not supported"),
    (lambda x, w: ctd.convolution_backprop_data(x[x[:, 0, 0] > 0], w), ct.ConvTransposeError,
     "unknown chunk sizes"),
])
def test_bad_input_is_refused_before_anything_runs(call, error, message):
    x = da.ones((2, 2, 6), chunks=(1, 2, 3), dtype=np.float32)
    with pytest.raises(error, match=message):
        call(x, np.ones((2, 3, 3), np.float32))


def test_import_convtranspose_does_not_import_dask():
    code = "import sys, convtranspose; print('dask' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_docstring_examples():
    result = doctest.testmod(ctd, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
