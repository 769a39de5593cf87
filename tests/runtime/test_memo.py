"""The memo of matrices derived from a filter, and the environment switches read on
every call."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from convtranspose._plan.rules import AxisPlan
from convtranspose._runtime import config as environment
from convtranspose._runtime import memo
from kernel_support import chosen
from kernel_support import random_case as _random_case
from kernel_support import run_forced as _run
from oracle import canonical_result as _reference

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@pytest.mark.parametrize("algorithm", ["dense", "phase-nxc", "phase-ncx", "gemm-nxc",
                                       "gemm-ncx", "col2im-nxc", "col2im-ncx", "direct-blocked"])
def test_weights_memo_never_returns_a_stale_filter(monkeypatch, algorithm):
    monkeypatch.setattr(memo, "_DERIVED_KEPT", 2)
    memo.forget_derived()  # what earlier tests left is not this test's to count
    rng = np.random.default_rng(17)
    data, weights, axes = _random_case(rng, 2)
    weights = weights.astype(np.float64)
    for _ in range(2):  # the second round hits the memo with the same values
        for trial in range(4):
            weights[(0,) * weights.ndim] = trial  # the caller edits its filter in place
            expected = _reference(data, weights, axes)
            got = _run(data.astype(np.float64), weights, axes, np.float64, False, algorithm)
            np.testing.assert_array_equal(got, expected)
    assert len(memo.derived_kept) <= 2
    if algorithm == "direct-blocked" and HAVE_NUMBA:  # its reordered weights are kept
        assert any(key[-1] == "direct-blocked" for key in memo.derived_kept)


@pytest.mark.parametrize("size", [6, 6000, 60000])  # as bytes objects (within L1) / as views
def test_weights_memo_compares_bits_not_values(size):
    zeros = np.zeros((1, 1, 1, size), np.float32)
    first = memo.derived_from(zeros, "test")
    assert memo.derived_from(zeros.copy(), "test") is first
    assert memo.derived_from(-zeros, "test") is not first  # -0.0 == 0.0, other bits
    assert memo.derived_from(zeros, "other key") is not first


@pytest.mark.parametrize("offset", [-1, 0, 1, 1000])
def test_same_bits_around_the_copies_threshold(offset):
    # Filters of 8 bytes less than, exactly, and 8 and 8000 bytes more than the size
    # compared as bytes objects (the level-1 data cache's), in C and in Fortran order:
    # equal copies are equal, and one bit anywhere (a zero turned into -0.0) tells them
    # apart.
    from convtranspose._runtime.machine import l1_data_cache_bytes

    columns = l1_data_cache_bytes() // 8 + offset  # two rows of float32
    kept = np.random.default_rng(columns).standard_normal((2, columns)).astype(np.float32)
    kept[:, [0, -1]] = 0.0
    for filter in (kept.copy(), np.asfortranarray(kept)):
        assert memo.same_bits(kept, filter)
        for place in ((0, 0), (1, -1)):
            edited = filter.copy(order="K")
            edited[place] = -0.0
            assert not memo.same_bits(kept, edited)


@pytest.mark.parametrize("size", [1, 7, 8, 9, 4095, 4096, 4097, 3 * 4096 + 5])
def test_the_compiled_comparison_finds_one_bit_anywhere(size):
    # Bytes compared eight at a time in pieces of 4 KiB, the last few one by one: one
    # flipped bit in the first or last byte of a piece, a word or the tail tells apart.
    pytest.importorskip("numba")
    kept = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    assert memo.compiled_equal(kept, kept.copy())
    places = {0, size - 1, size // 2, 7, 8, 4095, 4096, 4097, size - 9, size - 8}
    for place in sorted(p for p in places if 0 <= p < size):
        for bit in (0, 7):
            edited = kept.copy()
            edited[place] ^= np.uint8(1 << bit)
            assert not memo.compiled_equal(kept, edited), (place, bit)


def test_same_bits_compares_dense_views_in_their_memory_order():
    # A channels-last filter (a transposed view, neither C nor Fortran order) above the
    # size compared as bytes objects, against a copy in the same memory order.
    from convtranspose._runtime.machine import l1_data_cache_bytes

    channels = int(np.sqrt(l1_data_cache_bytes() // 36)) + 8
    base = np.random.default_rng(2).standard_normal((3, 3, channels, channels + 1))
    view = base.astype(np.float32).transpose(2, 3, 0, 1)[None]
    kept = view.copy(order="K")
    assert kept.nbytes > l1_data_cache_bytes() and not kept.flags.c_contiguous
    assert memo.same_bits(kept, view)
    for place in ((0, 0, 0, 0, 0), (0, channels - 1, channels, 2, 2), (0, 5, 3, 1, 2)):
        edited = view.copy(order="K")
        edited[place] = -edited[place]
        assert not memo.same_bits(kept, edited)


def test_weights_memo_compares_filters_in_any_memory_order():
    # Channels-last frontends pass an XIO filter as a transposed view; the memo keeps
    # that memory order, and an equal filter in another layout still hits.
    base = np.random.default_rng(5).standard_normal((3, 3, 40, 50)).astype(np.float32)
    view = base.transpose(2, 3, 0, 1)[None]
    first = memo.derived_from(view, "test")
    kept = next(entry[0] for entry in memo.derived_kept.values() if entry[1] is first)
    assert np.argsort(kept.strides).tolist() == np.argsort(view.strides).tolist()
    assert memo.derived_from(np.ascontiguousarray(view), "test") is first
    assert memo.derived_from(view, "test") is first
    base[2, 1, 7, 9] += 1  # the caller edits its filter in place
    assert memo.derived_from(view, "test") is not first


def test_weights_memo_keeps_no_filter_above_its_size_cap(monkeypatch):
    monkeypatch.setattr(memo, "_DERIVED_MAX_BYTES", 64)
    memo.derived_kept.clear()
    rng = np.random.default_rng(3)
    data, weights, axes = _random_case(rng, 1)
    assert weights.nbytes > 64
    _run(data, weights, axes, np.float64, False, "col2im-ncx")
    assert not memo.derived_kept


def test_environment_switches_follow_run_time_changes(monkeypatch):
    from convtranspose._runtime.config import switch

    monkeypatch.delenv("CONVTRANSPOSE_TEST_SWITCH", raising=False)
    assert switch("CONVTRANSPOSE_TEST_SWITCH") == ""
    monkeypatch.setenv("CONVTRANSPOSE_TEST_SWITCH", "dense")
    assert switch("CONVTRANSPOSE_TEST_SWITCH") == "dense"
    monkeypatch.setenv(environment.ALGORITHM_ENV, "col2im-ncx")
    assert chosen(1, (AxisPlan(3, 2, 2, 1, 0, 6),), (1, 1, 1, 2)) == "col2im-ncx"


def test_weights_memo_keeps_large_filters_within_its_byte_budget(monkeypatch):
    # A budget of 3 KiB (each filter counted twice): two filters of 600 bytes fit,
    # a third evicts the least recently used; one of more than half the budget is
    # never kept.  Hits return the same dict; evicted filters start a fresh one.
    monkeypatch.setattr(memo, "_DERIVED_BUDGET_BYTES", 3 << 10)
    monkeypatch.setattr(memo, "_DERIVED_MAX_BYTES", 1 << 30)
    memo.derived_kept.clear()
    filters = [np.full(150 + i, float(i), np.float32) for i in range(3)]  # ~600 bytes
    first = memo.derived_from(filters[0], "budget")
    second = memo.derived_from(filters[1], "budget")
    assert memo.derived_from(filters[0], "budget") is first  # hit: now most recent
    memo.derived_from(filters[2], "budget")  # evicts filters[1], the least recent
    assert 2 * sum(entry[0].nbytes for entry in memo.derived_kept.values()) <= 3 << 10
    assert len(memo.derived_kept) == 2
    assert memo.derived_from(filters[0], "budget") is first
    assert memo.derived_from(filters[1], "budget") is not second
    memo.derived_kept.clear()
    memo.derived_from(np.zeros(400, np.float32), "budget")  # 1600 > 1536 bytes
    assert not memo.derived_kept


def test_forgetting_frees_owned_filters_that_derived_matrices_held():
    """An owned filter whose derived matrices hold the only reference to another owned
    filter (the float32 copy a quantized layer keeps, a prepared layer's set-up): clearing
    the first frees the second, whose finalizer drops it from the owned filters while
    they are being cleared."""
    memo.forget_derived()
    outer = np.ones(4, np.float32)
    outer.flags.writeable = False
    memo.own(outer)
    for _ in range(3):
        inner = np.zeros(4, np.float32)
        inner.flags.writeable = False
        memo.derived_from(outer, "holds", id(inner))["inner"] = memo.own(inner)
    del inner
    memo.forget_derived()  # raised "dictionary changed size during iteration"
    assert memo.owned(outer) and memo.derived_from(outer, "holds") == {}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("where", ["first byte", "middle", "last byte", "nowhere"])
def test_large_filters_compare_every_byte_in_any_piece(monkeypatch, threads, where):
    # 3 MiB in pieces of 1 MiB: one piece per thread; a change anywhere, in either
    # piece, is a miss.  (In a process that has run no loop on numba's threads: after
    # one, the caller compares alone.)
    import convtranspose as ct
    from convtranspose._runtime import threads as runtime_threads

    monkeypatch.setattr(memo, "_COMPARED_PIECE_BYTES", 1 << 20)
    monkeypatch.setattr(runtime_threads, "_loops_run", 0)
    filter = np.random.default_rng(3).standard_normal((48, 64, 16, 16)).astype(np.float32)
    with ct.num_threads(threads):
        first = memo.derived_from(filter, "pieces")
        # A transposed view of the same bits (another layout) and a strided one compare
        # by value, not as memory.
        view = np.ascontiguousarray(filter.transpose(3, 2, 1, 0)).transpose(3, 2, 1, 0)
        assert memo.derived_from(view, "pieces") is first
        strided = np.zeros((48, 64, 16, 32), np.float32)
        strided[..., ::2] = filter
        assert memo.derived_from(strided[..., ::2], "pieces") is first
        edited = filter.copy()
        flat = edited.view(np.uint8).reshape(-1)
        index = {"first byte": 0, "middle": flat.size // 2 + 1, "last byte": flat.size - 1}
        if where in index:
            flat[index[where]] ^= 1
        assert (memo.derived_from(edited, "pieces") is first) is (where == "nowhere")


def test_after_a_native_loop_the_caller_compares_alone(monkeypatch):
    # numba's workers spin after their loop; a pool helper would share a CPU with one.
    from convtranspose._runtime import threads as runtime_threads

    monkeypatch.setattr(memo, "_COMPARED_PIECE_BYTES", 1 << 20)
    kept = np.zeros(3 << 18, np.float32)  # 3 MiB: three pieces on the pool otherwise
    filter = kept.copy()
    if memo.memory_equal(kept, filter) is None:
        pytest.skip("no C library memcmp to load here")

    def no_pool(*args):
        raise AssertionError("compared on the pool")

    monkeypatch.setattr(memo, "parallel_parts", no_pool)
    monkeypatch.setattr(runtime_threads, "_loops_run", 0)
    monkeypatch.setattr(memo, "get_num_threads", lambda: 2)
    with pytest.raises(AssertionError, match="on the pool"):  # the premise
        memo.memory_equal(kept, filter)
    runtime_threads.count_native_loop()
    assert memo.memory_equal(kept, filter)
    filter[-1] = -0.0
    assert memo.memory_equal(kept, filter) is False


@pytest.mark.parametrize("elements", [8, 3000, 70000])
def test_memory_equal_tells_apart_one_differing_bit(elements):
    # The memcmp comparison at any size: equal copies, then a zero turned into -0.0
    # (equal as floats, one bit apart) at the last element, which a piece's end reaches.
    kept = np.zeros(elements, np.float32)
    filter = kept.copy()
    answer = memo.memory_equal(kept, filter)
    if answer is None:
        pytest.skip("no C library memcmp to load here")
    assert answer
    filter[-1] = -0.0
    assert memo.memory_equal(kept, filter) is False


def test_large_filters_of_one_memory_but_other_layouts_are_told_apart():
    # A canonical filter of one group is a view with an axis of length 1 added, whose
    # stride the memo's copy need not share: that copy still compares as memory, and
    # an edit anywhere misses.  An array holding the same bytes in another order (its
    # elements transposed) is another filter, although memcmp would find it equal.
    base = np.random.default_rng(11).standard_normal((600, 512)).astype(np.float32)
    view = base.T[None]  # 1.2 MiB, above the size compared with memcmp
    first = memo.derived_from(view, "layouts")
    assert memo.derived_from(np.ascontiguousarray(view), "layouts") is first
    other = base.reshape(1, 512, 600)  # the view's memory, read in C order
    assert other.tobytes(order="A") == view.tobytes(order="A")
    assert not np.array_equal(other, view)
    assert memo.derived_from(other, "layouts") is not first
    base[599, 511] += 1  # the caller edits its filter in place
    assert memo.derived_from(view, "layouts") is not first
