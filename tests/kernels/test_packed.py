"""The packed-filter product (``_kernels/_numba/packed.py``) against NumPy's products,
and ``pointwise`` and ``col2im-ncx`` running it against the direct-loop oracle."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from convtranspose._execute.transposed import transposed_convolution  # noqa: E402
from convtranspose._kernels import packed as packed_products  # noqa: E402
from convtranspose._kernels import prepare  # noqa: E402
from convtranspose._kernels._numba import launch  # noqa: E402
from convtranspose._kernels._numba import packed as packed_kernel  # noqa: E402
from convtranspose._plan.rules import AxisPlan  # noqa: E402
from convtranspose._runtime.target import host, use_target  # noqa: E402
from oracle import canonical_result  # noqa: E402

# (samples, groups, rows M, reduction K, positions P): rows past a whole block, positions
# past a whole panel within one vector and beyond it, one reduction step, a lone position;
# a vector and up to half a vector more left in a panel (the tail summed along the rows:
# 19 and 49 with 16 lanes, 11 with 8, 29 and 70 with 4).
_SHAPES = [(1, 1, 16, 8, 40), (2, 3, 7, 5, 3), (3, 1, 13, 1, 19), (1, 2, 30, 33, 1),
           (2, 1, 48, 64, 70), (1, 1, 9, 4, 29), (2, 2, 30, 20, 49), (1, 1, 17, 9, 11)]


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", _SHAPES, ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_products_equal_numpy_products(shape, dtype, width, threads):
    batch, groups, rows, depth, columns = shape
    rng = np.random.default_rng(sum(shape))
    # Small integers: every partial sum is exact, so any order of sums agrees.
    matrix = rng.integers(-8, 9, (groups, rows, depth)).astype(dtype)
    data = rng.integers(-8, 9, (batch, groups, depth, columns)).astype(dtype)
    kept = data.copy()
    packed = packed_kernel.pack_matrix(matrix, width)
    # The product fills the front of a buffer whose last vector must stay untouched: a
    # short block's masked stores write its live rows and positions only.
    size = batch * groups * rows * columns
    buffer = np.full(size + width // np.dtype(dtype).itemsize, np.nan, dtype)
    out = buffer[:size].reshape(batch, groups, rows, columns)
    packed_kernel.packed_product(packed, data, out, threads)
    np.testing.assert_array_equal(out, np.matmul(matrix, data))
    assert np.isnan(buffer[size:]).all()
    np.testing.assert_array_equal(data, kept)


@pytest.mark.parametrize("threads", [1, 2])
def test_chunks_and_passes_cover_every_position_and_step(monkeypatch, threads):
    # An L1 of 512 bytes makes passes of 4 reduction steps (the last shorter), an L2 of
    # 1 KiB chunks of one panel: every pass adds to every chunk's sums, tiles included.
    monkeypatch.setattr(packed_kernel, "l1_data_cache_bytes", lambda: 512)
    monkeypatch.setattr(packed_kernel, "l2_cache_bytes", lambda: 1024)
    rng = np.random.default_rng(3)
    matrix = rng.integers(-8, 9, (1, 20, 27)).astype(np.float32)
    data = rng.integers(-8, 9, (2, 1, 27, 75)).astype(np.float32)
    packed = packed_kernel.pack_matrix(matrix, 32)
    assert packed_kernel.pass_steps(27, 16, 4) == 4
    assert packed_kernel.chunk_positions(4, 75, 16, 4) < 75
    out = np.full((2, 1, 20, 75), np.nan, np.float32)
    packed_kernel.packed_product(packed, data, out, threads)
    np.testing.assert_array_equal(out, np.matmul(matrix, data))


def _spread_case(shape, dtype, seed):
    """Operands, spread tables of distinct places in a buffer with gaps between them (rows
    and positions in shuffled order), the buffer full of NaN, and what it must hold."""
    batch, groups, rows, depth, columns = shape
    rng = np.random.default_rng(seed)
    matrix = rng.integers(-8, 9, (groups, rows, depth)).astype(dtype)
    data = rng.integers(-8, 9, (batch, groups, depth, columns)).astype(dtype)
    span = 2 * columns + 1
    row_base = (rng.permutation(rows) * span + 1).astype(np.int64)
    pos_map = rng.permutation(span - 1)[:columns].astype(np.int64)
    image_size = rows * span + 3
    return _spread_operands(matrix, data, row_base, pos_map, image_size)


def _spread_operands(matrix, data, row_base, pos_map, image_size):
    """:func:`_spread_case`'s result for these tables: the Spread, the buffer full of NaN
    and what it must hold (each product at its place, found by the tables alone)."""
    batch, groups = data.shape[:2]
    spread = packed_kernel.Spread(row_base, pos_map, image_size,
                                  packed_kernel.paired_runs(pos_map))
    out = np.full(batch * groups * image_size + 5, np.nan, data.dtype)
    expected = out.copy()
    images = np.arange(batch * groups)[:, None, None] * image_size
    places = images + row_base[None, :, None] + pos_map[None, None, :]
    assert len(np.unique(places)) == places.size
    expected[places.reshape(-1)] = np.matmul(matrix, data).reshape(-1)
    return matrix, data, spread, out, expected


def _paired_case(dtype, seed):
    """:func:`_spread_case` with tables where pairs of rows land side by side (rows 2j
    and 2j + 1 one element apart), but for one pair near the end, and positions land two
    apart in runs of 21, 5, 2, 3, 30 and 14 in turn (each run 4 elements past the last):
    some vectors of positions lie in one run, some in two, some in three or more."""
    rng = np.random.default_rng(seed)
    batch, groups, rows, depth, columns = 2, 1, 20, 9, 75
    matrix = rng.integers(-8, 9, (groups, rows, depth)).astype(dtype)
    data = rng.integers(-8, 9, (batch, groups, depth, columns)).astype(dtype)
    lengths = np.resize([21, 5, 2, 3, 30, 14], columns)
    runs = np.repeat(np.arange(columns), lengths)[:columns]  # each position's run
    pos_map = 2 * (np.arange(columns, dtype=np.int64) + 2 * runs)
    span = int(pos_map[-1]) + 2
    row_base = np.arange(rows, dtype=np.int64) // 2 * span + np.arange(rows) % 2
    row_base[17] = rows // 2 * span  # a pair apart: its own span past the others
    return _spread_operands(matrix, data, row_base, pos_map, (rows // 2 + 1) * span + 1)


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", _SHAPES, ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_spread_products_go_to_their_places_and_nowhere_else(shape, dtype, width, threads):
    matrix, data, spread, out, expected = _spread_case(shape, dtype, sum(shape) + width)
    kept = data.copy()
    packed = packed_kernel.pack_matrix(matrix, width)
    packed_kernel.packed_product(packed, data, out, threads, spread)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(data, kept)


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_landing_side_by_side_go_out_interleaved_to_their_places(dtype, width):
    matrix, data, spread, out, expected = _paired_case(dtype, width)
    packed = packed_kernel.pack_matrix(matrix, width)
    packed_kernel.packed_product(packed, data, out, 2, spread)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_spread_passes_add_to_the_sums_in_their_places(monkeypatch, threads):
    # An L2 of 1 KiB makes spread passes of 4 reduction steps (the last shorter): each
    # pass after the first gathers the sums from their places and adds to them.
    monkeypatch.setattr(packed_kernel, "l2_cache_bytes", lambda: 1024)
    assert packed_kernel.pass_steps(27, 16, 4, spread=True) == 4
    matrix, data, spread, out, expected = _spread_case((2, 1, 20, 27, 75), np.float32, 4)
    packed = packed_kernel.pack_matrix(matrix, 32)
    packed_kernel.packed_product(packed, data, out, threads, spread)
    np.testing.assert_array_equal(out, expected)


def test_non_finite_data_reaches_only_its_own_sums():
    # Padded rows and positions multiply the data too: none of that may leak into an
    # output, and every term the product has must be in its sum (inf * 0 is NaN).
    matrix = np.zeros((1, 7, 3), np.float32)
    matrix[0, 0] = [1, 0, 2]
    data = np.ones((1, 1, 3, 9), np.float32)
    data[0, 0, 1, 4] = np.inf
    data[0, 0, 2, 8] = np.nan
    packed = packed_kernel.pack_matrix(matrix, 32)
    out = np.empty((1, 1, 7, 9), np.float32)
    packed_kernel.packed_product(packed, data, out, 1)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, np.matmul(matrix, data))


@pytest.mark.parametrize("threads", [1, 2])
def test_scratch_kept_from_a_non_finite_call_leaks_into_no_later_sum(threads):
    # The threads' panels are kept between calls of one kernel (launch._scratch_rows):
    # 70 positions of NaN fill more of the last panel than the next call's 66, whose
    # padded positions then multiply those NaNs; only dropped outputs may see them.
    rng = np.random.default_rng(11)
    matrix = rng.integers(-8, 9, (1, 9, 20)).astype(np.float32)
    packed = packed_kernel.pack_matrix(matrix, 32)
    first = np.full((1, 1, 20, 70), np.nan, np.float32)
    packed_kernel.packed_product(packed, first, np.empty((1, 1, 9, 70), np.float32), threads)
    data = rng.integers(-8, 9, (1, 1, 20, 66)).astype(np.float32)
    out = np.full((1, 1, 9, 66), np.nan, np.float32)
    packed_kernel.packed_product(packed, data, out, threads)
    np.testing.assert_array_equal(out, np.matmul(matrix, data))


# Channels last (rows R, groups, reduction K, columns M): rows past a whole block,
# columns within one vector of the end and beyond it, fewer columns than a vector.
_ROW_SHAPES = [(40, 1, 8, 16), (7, 3, 5, 3), (19, 1, 1, 13), (1, 2, 33, 30), (70, 1, 64, 48),
               (29, 2, 4, 9), (50, 1, 40, 17)]


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", _ROW_SHAPES, ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_channels_last_products_equal_numpy_products(shape, dtype, width, threads):
    rows, groups, depth, columns = shape
    rng = np.random.default_rng(sum(shape))
    matrix = rng.integers(-8, 9, (groups, depth, columns)).astype(dtype)
    data = rng.integers(-8, 9, (rows, groups, depth)).astype(dtype)
    kept = data.copy()
    packed = packed_kernel.pack_columns(matrix, width)
    out = np.full((rows, groups, columns), np.nan, dtype)
    packed_kernel.packed_rows_product(packed, data, out, threads)
    np.testing.assert_array_equal(out, np.einsum("rgk,gkm->rgm", data, matrix))
    np.testing.assert_array_equal(data, kept)


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("shape", [(40, 1, 8, 16), (7, 3, 5, 3), (29, 2, 4, 9)], ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_channels_last_products_at_given_rows_with_zero_spans(shape, width, threads):
    # Rows scattered over a larger buffer (in another order than the data's), spans of
    # zeros between and around them of lengths that are not whole vectors, and gaps
    # that neither cover: those must keep their NaNs.
    rows, groups, depth, columns = shape
    rng = np.random.default_rng(sum(shape) + width)
    matrix = rng.integers(-8, 9, (groups, depth, columns)).astype(np.float32)
    data = rng.integers(-8, 9, (rows, groups, depth)).astype(np.float32)
    row_width = groups * columns
    slots = rng.permutation(3 * rows)[:rows]
    c_rows = (slots * (row_width + 5) + 2).astype(np.int64)
    out = np.full(3 * rows * (row_width + 5) + 40, np.nan, np.float32)
    expected = out.copy()
    products = np.einsum("rgk,gkm->rgm", data, matrix).reshape(rows, row_width)
    for at, product in zip(c_rows, products):
        expected[at:at + row_width] = product
    free = sorted(set(range(3 * rows)) - set(slots.tolist()))
    zeros = np.array([[slot * (row_width + 5), row_width + 5 - slot % 3] for slot in free]
                     + [[out.size - 37, 37]], np.int64)
    for at, length in zeros:
        expected[at:at + length] = 0
    packed = packed_kernel.pack_columns(matrix, width)
    packed_kernel.packed_rows_product(packed, data, out, threads, c_rows, zeros)
    np.testing.assert_array_equal(out, expected)


def _columns_case(rows, groups, depth, columns, seed, run=1):
    """Operands of the channels-last product, row and column places in shuffled order
    (aligned runs of ``run`` columns side by side) in a buffer with gaps, the buffer
    full of NaN, and what it must hold."""
    rng = np.random.default_rng(seed)
    matrix = rng.integers(-8, 9, (groups, depth, columns)).astype(np.float32)
    data = rng.integers(-8, 9, (rows, groups, depth)).astype(np.float32)
    runs = -(-groups * columns // run)
    span = runs * (run + 1) + 2
    c_rows = (rng.permutation(rows) * span + 1).astype(np.int64)
    columns_at = (rng.permutation(runs)[:, None] * (run + 1) + np.arange(run)).reshape(-1)
    columns_at = columns_at[:groups * columns].astype(np.int64)
    out = np.full(rows * span + 4, np.nan, np.float32)
    expected = out.copy()
    products = np.einsum("rgk,gkm->rgm", data, matrix).reshape(rows, -1)
    expected[np.add.outer(c_rows, columns_at)] = products
    return matrix, data, c_rows, columns_at, out, expected


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("shape", [(40, 1, 8, 16), (7, 3, 5, 3), (29, 2, 4, 9), (50, 2, 40, 37)],
                         ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_channels_last_products_at_given_columns(shape, width, threads):
    # Every row's columns scattered to their own places (a transposed convolution's taps
    # stored in place); every other element keeps its NaN.
    matrix, data, c_rows, columns_at, out, expected = _columns_case(*shape, sum(shape))
    packed = packed_kernel.pack_columns(matrix, width)
    packed_kernel.packed_rows_product(packed, data, out, threads, c_rows, None, columns_at)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("width", [32, 64], ids=["avx2", "avx512"])
@pytest.mark.parametrize("threads", [1, 2])
def test_channels_last_products_in_runs_of_a_vector(width, threads):
    # Runs of a vector's columns side by side (a tap's channels): one store per vector,
    # from its first column's place; rows and columns past whole blocks too.
    lanes = width // 4
    for rows, groups, columns in ((33, 1, 4 * lanes), (9, 2, 2 * lanes)):
        matrix, data, c_rows, columns_at, out, expected = _columns_case(
            rows, groups, 7, columns, rows + width, run=lanes)
        packed = packed_kernel.pack_columns(matrix, width)
        packed_kernel.packed_rows_product(packed, data, out, threads, c_rows, None, columns_at,
                                          runs=True)
        np.testing.assert_array_equal(out, expected)


def test_channels_last_non_finite_data_reaches_only_its_own_rows():
    # Rows past the last block read the block's first row again: its inf and NaN must
    # reach its own sums alone (inf * 0 is NaN), none of the padded columns' either.
    matrix = np.zeros((1, 3, 5), np.float32)
    matrix[0, :, 0] = [1, 0, 2]
    data = np.ones((8, 1, 3), np.float32)
    data[6, 0, 1] = np.inf
    data[7, 0, 2] = np.nan
    packed = packed_kernel.pack_columns(matrix, 32)
    out = np.empty((8, 1, 5), np.float32)
    packed_kernel.packed_rows_product(packed, data, out, 1)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, np.einsum("rgk,gkm->rgm", data, matrix))


def test_block_shape_fills_the_vector_registers():
    assert packed_kernel.block_shape(4, 32) == (6, 2, 8)
    assert packed_kernel.block_shape(8, 64) == (14, 2, 8)


# Layers whose products the packed kernels run on two threads: (algorithm, data,
# weights, axis, channels last); channels last in place, and strided into a box.
_LAYERS = {
    "pointwise": ("pointwise", (2, 48, 9, 9), (1, 48, 40, 1, 1), AxisPlan(9, 1, 1, 1, 0, 9),
                  False),
    "col2im-ncx": ("col2im-ncx", (2, 32, 10, 10), (1, 32, 12, 3, 3),
                   AxisPlan(10, 3, 2, 1, 1, 19), False),
    "col2im-ncx in place": ("col2im-ncx", (2, 32, 10, 10), (1, 32, 12, 2, 2),
                            AxisPlan(10, 2, 2, 1, 0, 20), False),
    # Channel-major columns: a vector holds several taps, whose places lie apart.
    "col2im-nxc in place": ("col2im-nxc", (2, 32, 10, 10), (1, 32, 16, 2, 2),
                            AxisPlan(10, 2, 2, 1, 0, 20), True),
    # A filter in another order gives tap-major columns: a vector holds one tap's channels.
    "col2im-nxc in place, taps side by side": ("col2im-nxc", (2, 32, 10, 10), (1, 32, 16, 2, 2),
                                               AxisPlan(10, 2, 2, 1, 0, 20), True),
    # Past SERIAL_GEMM_FLOPS (an 8192 x 256 filter matrix by 16 positions, 67 MFLOP a
    # sample), both samples' 32 positions in one chunk.
    "col2im-ncx large, few positions": ("col2im-ncx", (2, 256, 4, 4), (1, 256, 512, 4, 4),
                                        AxisPlan(4, 4, 2, 1, 1, 8), False),
    "pointwise NXC": ("pointwise", (2, 48, 9, 9), (2, 24, 21, 1, 1),
                      AxisPlan(9, 1, 1, 1, 0, 9), True),
    "pointwise NXC s2": ("pointwise", (3, 20, 7, 7), (1, 20, 35, 1, 1),
                         AxisPlan(7, 1, 2, 1, 1, 13), True),
    "pointwise NXC s3 cropped": ("pointwise", (2, 16, 7, 7), (2, 8, 11, 1, 1),
                                 AxisPlan(7, 1, 3, 1, 1, 18), True),
}


@pytest.mark.parametrize("path", ["prepared", "function"])
@pytest.mark.parametrize("layer", list(_LAYERS))
def test_layers_on_two_threads_use_it_and_match_the_oracle(layer, path, monkeypatch):
    # Prepared calls and the general path run it (col2im's general path packs the
    # filter anew rather than compare it with a kept copy).
    if not launch.native_threads(2):
        pytest.skip("numba's threading layer here is not thread-safe, or has fewer than "
                    "2 threads: products stay on BLAS")
    algorithm, data_shape, weights_shape, axis, channels_last = _LAYERS[layer]
    runs = []
    # Channels first, a prepared call may make its product once (prepare_packed_product).
    names = (["packed_rows_product"] if channels_last
             else ["packed_product", "prepare_packed_product"])
    for name in names:
        monkeypatch.setattr(packed_kernel, name,
                            lambda *arguments, _product=getattr(packed_kernel, name):
                            runs.append(1) or _product(*arguments))
    rng = np.random.default_rng(11)
    data = rng.integers(-4, 5, data_shape).astype(np.float32)
    weights = rng.integers(-4, 5, weights_shape).astype(np.float32)
    if "side by side" in layer:
        weights = np.asfortranarray(weights)
    expected = canonical_result(data, weights, (axis, axis))
    if channels_last:
        data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
        expected = np.moveaxis(expected, 1, -1)
    float32 = np.dtype(np.float32)
    target = host().replace(threads=2)
    assert packed_products.packs_product(1e6, 2, np.float32)
    if path == "prepared":
        compute = prepare(algorithm, data.shape[0], weights, (axis, axis), float32,
                          channels_last, target)
        got = np.full(expected.shape, np.nan, np.float32)
        compute(data, got)
    else:
        with use_target(target):
            got = transposed_convolution(data, weights, (axis, axis), dtype=float32,
                                         channels_last=channels_last, algorithm=algorithm)
    np.testing.assert_array_equal(got, expected)
    assert runs


def test_first_and_repeated_calls_give_the_same_bits():
    # A layer's first call runs the general path and its repeated calls a prepared one:
    # both take the packed products on two threads, so the sums are the same, bit for
    # bit.  The first case is a fuzzer's, whose grouped products NumPy sums in another
    # order (1 ulp apart in float64 when the general path kept BLAS).
    if not launch.native_threads(2):
        pytest.skip("numba's threading layer here is not thread-safe, or has fewer than "
                    "2 threads: products stay on BLAS")
    rng = np.random.default_rng(5)
    cases = [(np.array([[[-0.18860392], [2.33287575], [0.97523589], [1.98184341]]]),
              np.array([0.48916786, 0.5472964, -0.81940521, 1.27234718, 1.69273194,
                        1.67276472, 2.17262439, 0.23499333, -2.07337871, -0.18901556,
                        -0.11803619, -1.11118764, -1.02491239, -0.29654726, -0.68853622,
                        1.11210451]).reshape(2, 2, 2, 2),
              (AxisPlan(1, 2, 2, 3, 0, 4),)),
             (rng.standard_normal((2, 24, 9, 9)), rng.standard_normal((1, 24, 10, 3, 3)),
              (AxisPlan(9, 3, 2, 1, 1, 17),) * 2)]
    float64 = np.dtype(np.float64)
    target = host().replace(threads=2)
    for data, weights, axes in cases:
        with use_target(target):
            first = transposed_convolution(data, weights, axes, dtype=float64,
                                           channels_last=False, algorithm="col2im-ncx")
        compute = prepare("col2im-ncx", data.shape[0], weights, axes, float64, False, target)
        for _ in range(2):  # the general path, then the prepared products where they run
            again = np.empty_like(first)
            compute(data, again)
            np.testing.assert_array_equal(again, first)


# col2im-ncx layers whose packed product covers the batch in one chunk, the columns
# stored by a rows kernel: overlapping taps (adds), disjoint taps with cropped outputs
# (not in place: the disjoint rows kernel), one spatial axis; and a layer whose
# products go in place.
_PREPARED_PRODUCTS = {
    "k3 s2 adds": ((2, 32, 10, 10), (1, 32, 12, 3, 3), (AxisPlan(10, 3, 2, 1, 1, 19),) * 2),
    "k4 s2 p1, 3 outputs": ((2, 40, 6, 6), (1, 40, 3, 4, 4), (AxisPlan(6, 4, 2, 1, 1, 12),) * 2),
    "k2 s2 p1 disjoint": ((2, 36, 6, 6), (1, 36, 5, 2, 2), (AxisPlan(6, 2, 2, 1, 1, 10),) * 2),
    "1-D k4 s2 p1": ((3, 24, 11), (1, 24, 5, 4), (AxisPlan(11, 4, 2, 1, 1, 22),)),
    "k2 s2 in place": ((2, 24, 6, 6), (1, 24, 5, 2, 2), (AxisPlan(6, 2, 2, 1, 0, 12),) * 2),
}


@pytest.mark.parametrize("layer", list(_PREPARED_PRODUCTS))
def test_repeated_col2im_calls_run_the_prepared_products_and_match_the_oracle(layer,
                                                                               monkeypatch):
    if not launch.native_threads(2):
        pytest.skip("numba's threading layer here is not thread-safe, or has fewer than "
                    "2 threads: products stay on BLAS")
    data_shape, weights_shape, axes = _PREPARED_PRODUCTS[layer]
    # The general path's products go through `packed_product`; the prepared ones were
    # set up with the layer and do not.  Where the two threads divide the batch, the
    # product and the store of each call run in one loop.
    general, paired = [], []
    product, pair = packed_kernel.packed_product, launch.parallel_pair
    monkeypatch.setattr(packed_kernel, "packed_product",
                        lambda *arguments: general.append(1) or product(*arguments))
    monkeypatch.setattr(launch, "parallel_pair",
                        lambda *arguments: paired.append(pair(*arguments)) or paired[-1])
    rng = np.random.default_rng(len(layer))
    weights = rng.integers(-4, 5, weights_shape).astype(np.float32)
    float32 = np.dtype(np.float32)
    compute = prepare("col2im-ncx", data_shape[0], weights, axes, float32, False,
                      host().replace(threads=2))
    for _ in range(3):  # new data each time, into a result full of NaN
        data = rng.integers(-4, 5, data_shape).astype(np.float32)
        kept = data.copy()
        got = np.full(canonical_result(data, weights, axes).shape, np.nan, np.float32)
        compute(data, got)
        np.testing.assert_array_equal(got, canonical_result(data, weights, axes))
        np.testing.assert_array_equal(data, kept)
    assert not general
    # The products in place store their sums themselves: no store to pair them with.
    assert paired == ([] if "in place" in layer else [data_shape[0] % 2 == 0] * 3)


@pytest.mark.parametrize("threads, dtype, flops", [(1, np.float32, 1e6),
                                                   (2, np.int64, 1e6),
                                                   (2, np.float32, 1e9)])
def test_products_stay_on_blas_on_one_thread_in_integers_and_when_large(threads, dtype,
                                                                        flops):
    assert not packed_products.packs_product(flops, threads, dtype)


def test_products_of_fewer_positions_than_a_chunk_leave_blas_at_any_size(monkeypatch):
    # AVX2 float32 blocks take 16 positions per panel; half of a 32 KiB L1 holds 256
    # reduction steps of a panel, half of a 512 KiB L2 256 positions of such passes.
    if not launch.native_threads(2):
        pytest.skip("numba's threading layer here is not thread-safe, or has fewer than "
                    "2 threads: products stay on BLAS")
    monkeypatch.setattr(packed_kernel, "vector_bytes", lambda: 32)
    monkeypatch.setattr(packed_kernel, "l1_data_cache_bytes", lambda: 32 << 10)
    monkeypatch.setattr(packed_kernel, "l2_cache_bytes", lambda: 512 << 10)
    large = 1e9
    assert packed_products.packs_product(large, 2, np.float32, (1024, 16))
    assert packed_products.packs_product(large, 2, np.float32, (1024, 255))
    assert not packed_products.packs_product(large, 2, np.float32, (1024, 256))
    # A shallow reduction makes short passes, so a chunk holds more positions: 64 steps.
    assert packed_products.packs_product(large, 2, np.float32, (64, 1023))
    assert not packed_products.packs_product(large, 2, np.float32, (64, 1024))
    assert not packed_products.packs_product(large, 1, np.float32, (1024, 16))
    assert not packed_products.packs_product(large, 2, np.float32)
    # The layer of _LAYERS that takes this rule: each sample's product is past it.
    _, data_shape, weights_shape, _, _ = _LAYERS["col2im-ncx large, few positions"]
    flops = 2.0 * np.prod(weights_shape) * np.prod(data_shape[2:])
    assert flops >= packed_products.SERIAL_GEMM_FLOPS
