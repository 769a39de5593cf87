"""The VNNI byte products: exact against int64 arithmetic, and compiled to ``vpdpbusd``
on ``zmm`` registers for an AVX512-VNNI CPU and on ``ymm`` for an AVX-VNNI one, on any
host.

The exactness tests run the kernel, so they need a CPU with AVX512-VNNI (with AVX-VNNI
for the 32-byte vectors; skipped elsewhere, saying so); the instruction tests only
compile, for a named CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba")

from convtranspose import host_target  # noqa: E402
from convtranspose._runtime.machine import has_vnni, vnni_vector_bytes  # noqa: E402
from kernel_support import random_case  # noqa: E402
from oracle import canonical_result  # noqa: E402

needs_vnni = pytest.mark.skipif(not has_vnni(), reason="this CPU has no AVX512-VNNI: the"
                                " kernel's instructions cannot run here")

#: The two exact byte-product kernels: products then a scatter, and direct-blocked's
#: loop nest with byte products.
KERNELS = ["u8s8_transposed", "u8s8_blocked"]


def _kernel(name):
    from convtranspose._kernels import int8

    return getattr(int8, name)


@needs_vnni
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 5, 3), (9, 13, 70), (130, 64, 64),
                                   (65, 257, 129)])
def test_byte_products_equal_int64_products(shape):
    from convtranspose._kernels._numba.int8 import pack_signed, u8s8_products

    rows, depth, columns = shape
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(0, 256, (rows, depth), dtype=np.uint8)
    w = rng.integers(-128, 128, (depth, columns), dtype=np.int8)
    a[0], w[:, 0] = 255, -128  # the extremes: 255 * -128 in every product of a sum
    packed, k4, width = pack_signed(w)
    padded = np.zeros((rows, k4 * 4), np.uint8)
    padded[:, :depth] = a
    for threads in (1, 2):
        products = u8s8_products(padded, packed, k4, width, threads)
        np.testing.assert_array_equal(products[:, :columns],
                                      a.astype(np.int64) @ w.astype(np.int64))


@needs_vnni
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("seed", range(12))
def test_transposed_convolutions_equal_the_oracle(seed, kernel):
    u8s8_transposed = _kernel(kernel)
    rng = np.random.default_rng(seed)
    data, weights, axes = random_case(rng, 1 + seed % 3)
    # Data spanning 256 values around an odd offset; weights across int8.
    low = int(rng.integers(-255, 1))
    data = rng.integers(low, low + 256, data.shape)
    weights = rng.integers(-128, 128, weights.shape)
    expected = canonical_result(data, weights, axes)
    result = u8s8_transposed(data, weights, axes, False, host_target().replace(threads=2))
    np.testing.assert_array_equal(result, expected)
    last = u8s8_transposed(np.ascontiguousarray(np.moveaxis(data, 1, -1)), weights, axes,
                           True, host_target().replace(threads=1))
    np.testing.assert_array_equal(np.moveaxis(last, -1, 1), expected)


@pytest.mark.skipif(vnni_vector_bytes() < 32, reason="this CPU has no VNNI: the kernel's"
                    " instructions cannot run here")
@pytest.mark.parametrize("seed", range(6))
def test_byte_products_on_32_byte_vectors_equal_the_oracle(seed, monkeypatch):
    """direct-blocked's loop nest with byte products on 8 int32 lanes (AVX-VNNI's width,
    and the EVEX form's on AVX512-VNNI CPUs): whole and partial vectors of output
    channels, partial words of input channels, 1-3 axes, data spanning 256 values."""
    from convtranspose._kernels import int8
    from convtranspose._kernels._numba import blocked

    made, kernels = blocked.blocked_layer, []

    def spy(*args, **kwargs):
        kernels.append((args[7].vector_bytes, args[8]))
        return made(*args, **kwargs)

    monkeypatch.setattr(blocked, "blocked_layer", spy)
    rng = np.random.default_rng(seed)
    data, weights, axes = random_case(rng, 1 + seed % 3)
    groups, ci, co = weights.shape[0], 5 + seed, 17 + seed
    low = int(rng.integers(-255, 1))
    data = rng.integers(low, low + 256, (data.shape[0], groups * ci) + data.shape[2:])
    weights = rng.integers(-128, 128, (groups, ci, co) + weights.shape[3:])
    target = host_target().replace(vector_bytes=32, threads=2)
    sums = int8.prepare_blocked_sums("bytes", data.shape[0], weights, axes, False, target)
    np.testing.assert_array_equal(sums(data), canonical_result(data, weights, axes))
    assert kernels and set(kernels) == {(32, "vector_dot_bytes")}, kernels


@needs_vnni
@pytest.mark.parametrize("kernel", KERNELS)
def test_operands_beyond_bytes_or_three_axes_are_left_to_the_caller(kernel):
    u8s8_transposed = _kernel(kernel)
    rng = np.random.default_rng(0)
    data, weights, axes = random_case(rng, 2)
    wide = data.copy()
    wide.flat[0], wide.flat[-1] = -128, 128  # 257 values
    assert u8s8_transposed(wide, weights, axes, False, host_target()) is None
    big = weights.copy()
    big.flat[0] = 128
    assert u8s8_transposed(data, big, axes, False, host_target()) is None
    assert u8s8_transposed(data, weights, axes, False, host_target()) is not None
    data4, weights4, axes4 = random_case(rng, 4)  # beyond the compiled scatter's ranks
    assert u8s8_transposed(data4, weights4, axes4, False, host_target()) is None


@needs_vnni
def test_packed_weights_are_kept_and_packed_again_after_an_edit(monkeypatch):
    """A second call with the same weights (a fresh copy of equal values) packs
    nothing; weights edited in place are packed again and give their own exact sum."""
    from convtranspose._kernels import int8
    from convtranspose._kernels._numba import int8 as compiled

    packed = []
    pack = compiled.pack_signed
    monkeypatch.setattr(compiled, "pack_signed", lambda w: packed.append(1) or pack(w))
    rng = np.random.default_rng(5)
    data, weights, axes = random_case(rng, 2)
    data = rng.integers(-40, 200, data.shape)
    weights = rng.integers(-128, 128, weights.shape)
    groups = weights.shape[0]
    target = host_target().replace(threads=2)
    for copy in (weights, weights.copy()):
        result = int8.u8s8_transposed(data, copy, axes, False, target)
        np.testing.assert_array_equal(result, canonical_result(data, weights, axes))
        assert len(packed) == groups  # packed by the first call only
    weights.flat[0] = -128 if weights.flat[0] > 0 else 127
    result = int8.u8s8_transposed(data, weights, axes, False, target)
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))
    assert len(packed) == 2 * groups


@needs_vnni
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("low", [-255, 0, 1])
def test_sums_at_the_byte_products_ends(low, kernel):
    """Data spanning exactly 256 values (shift 255, 0, or -1 for ``u8s8_transposed``)
    against weights at int8's ends: every product at its largest magnitude, 255 *
    -128, through the shift's compensation and the int32 sums."""
    u8s8_transposed = _kernel(kernel)
    rng = np.random.default_rng(8)
    data, weights, axes = random_case(rng, 2)
    data = np.where(rng.random(data.shape) < 0.5, low, low + 255)
    weights = np.where(rng.random(weights.shape) < 0.5, -128, 127)
    weights.flat[0], data.flat[0] = -128, low + 255
    result = u8s8_transposed(data, weights, axes, False, host_target())
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


@needs_vnni
@pytest.mark.parametrize("kernel", KERNELS)
def test_many_groups_in_one_pass(kernel):
    """Sixteen groups of five channels (padded to eight bytes, 3 * 6 columns padded to
    64), many pieces of rows per group across two threads: every group's products run in
    one pass and scatter in one, each into its own output channels."""
    from convtranspose._plan.rules import AxisPlan

    u8s8_transposed = _kernel(kernel)

    rng = np.random.default_rng(17)
    axes = (AxisPlan(40, 3, 2, 1, 1, 79), AxisPlan(9, 2, 1, 2, 0, 11))
    data = rng.integers(-100, 156, (2, 16 * 5, 40, 9))
    weights = rng.integers(-128, 128, (16, 5, 3, 3, 2))
    result = u8s8_transposed(data, weights, axes, False, host_target().replace(threads=2))
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


@needs_vnni
def test_blocked_sums_that_could_leave_int32_are_left_to_the_caller():
    """``u8s8_blocked`` keeps int32 sums in registers: a layer whose sums could pass
    2**31 (here 8192 channels x 16 taps x 255 x 128) is refused, and
    ``u8s8_transposed`` (int64 outputs) still sums it exactly."""
    from convtranspose._kernels.int8 import u8s8_blocked, u8s8_transposed
    from convtranspose._plan.rules import AxisPlan

    axes = (AxisPlan(2, 4, 1, 1, 0, 5), AxisPlan(2, 4, 1, 1, 0, 5))
    data = np.full((1, 8192, 2, 2), 255)
    weights = np.full((1, 8192, 1, 4, 4), -128)
    assert u8s8_blocked(data, weights, axes, False, host_target()) is None
    result = u8s8_transposed(data, weights, axes, False, host_target())
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


@needs_vnni
def test_blocked_words_and_shares_are_kept_and_made_again_after_an_edit():
    """``u8s8_blocked`` keeps its weight words and the shift's share with the filter: a
    fresh copy of equal weights gives the same exact sums, weights edited in place are
    packed again and give their own."""
    from convtranspose._kernels.int8 import u8s8_blocked

    rng = np.random.default_rng(6)
    data, weights, axes = random_case(rng, 2)
    data = rng.integers(-40, 200, data.shape)
    weights = rng.integers(-128, 128, weights.shape)
    target = host_target().replace(threads=2)
    for copy in (weights, weights.copy()):
        result = u8s8_blocked(data, copy, axes, False, target)
        np.testing.assert_array_equal(result, canonical_result(data, weights, axes))
    weights.flat[0] = -128 if weights.flat[0] > 0 else 127
    result = u8s8_blocked(data, weights, axes, False, target)
    np.testing.assert_array_equal(result, canonical_result(data, weights, axes))


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("threads, lanes", [(1, 16), (2, 8)])
def test_word_bytes_equal_numpys_cast(channels_last, threads, lanes, monkeypatch):
    """The data as bytes of whole channel words: each group's channels per pixel, zero
    past them, shifted; 3 groups of 22 channels (five whole words and a partial one:
    18 words per pixel, a whole band of 16 and a partial one), 300 pixels (two
    chunks, whole blocks of the transpose and a partial one), split between threads."""
    from convtranspose._kernels._numba import int8

    monkeypatch.setattr(int8, "copy_threads", lambda nbytes, threads: threads)
    rng = np.random.default_rng(3)
    data = rng.integers(-7, 249, (2, 66, 10, 30)).astype(np.int16)
    source = np.ascontiguousarray(np.moveaxis(data, 1, -1)) if channels_last else data
    result = int8.word_bytes(source, channels_last, 3, 22, 24, 7, threads, lanes)
    expected = np.zeros((2, 10, 30, 3, 24), np.uint8)
    expected[..., :22] = np.moveaxis(data, 1, -1).reshape(2, 10, 30, 3, 22) + 7
    np.testing.assert_array_equal(result, expected)


SCRIPT = textwrap.dedent("""\
    import json
    import sys
    import numba
    import numpy as np
    from convtranspose._kernels._numba import int8

    from convtranspose._kernels._numba.blocked import _blocked_kernel
    from convtranspose._kernels.schedules import KEEP

    def products(kernel, args):
        signature = tuple(numba.typeof(a) for a in args)
        kernel.compile(signature)
        lines = [line.split(None, 1) for line in kernel.inspect_asm(signature).splitlines()]
        found = [fields[1] for fields in lines if len(fields) == 2
                 and fields[0] in ("vpdpbusd", "{vex}")
                 and "vpdpbusd" in fields[0] + fields[1]]
        return {"zmm": sum("%zmm" in f for f in found),
                "ymm": sum("%ymm" in f for f in found), "all": len(found)}

    i32, i64 = np.int32, np.int64
    lanes = int(sys.argv[1])
    counts = {}
    if lanes == 16:
        counts["panel"] = products(int8._panel(), (np.zeros(64, i32), np.zeros(64, i32),
                                                   np.zeros(64, i32), 1, 64, 0, 4))
    counts["blocked"] = products(_blocked_kernel(lanes, 2, 6, KEEP, "vector_dot_bytes"), (
        np.zeros(64, i32), np.zeros(64, i32), np.zeros(64, i32), np.zeros(0, np.uint16),
        np.zeros(0, i32), np.zeros(19, i64), np.zeros(5, i64), np.zeros(5, i64),
        np.zeros(8, i64), np.zeros((3, 2, 2), i64), np.zeros((3, 2, 2), i64),
        np.zeros((3, 2), i64), 1, 0, 1))
    print(json.dumps(counts))
    """)


@pytest.mark.parametrize("cpu, features, lanes, register", [
    ("sapphirerapids", "+avx512f,+avx512vnni,+avx512bw,+f16c", 16, "zmm"),
    ("alderlake", "+avx2,+fma,+avxvnni,+f16c", 8, "ymm"),
])
def test_the_kernels_compile_to_full_width_vnni_products(cpu, features, lanes, register):
    # Compiled (not run) for a VNNI CPU in a fresh process, whatever the host: 512-bit
    # AVX512-VNNI, and AVX-VNNI's 256-bit VEX form on a CPU without AVX-512.
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                       CONVTRANSPOSE_CACHE_DIR="off",
                       PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(lanes)], capture_output=True,
                            text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    if lanes == 16:
        # A block of 4 rows x 4 vectors and a single row of 4: 20 products, all on zmm.
        panel = counts["panel"]
        assert panel["all"] >= 20 and panel["zmm"] == panel["all"], counts
    # direct-blocked's kernel with byte products: blocks of 6 pixels x 2 vectors (its
    # three block sources) and the line ends' single outputs, all full width.
    blocked = counts["blocked"]
    assert blocked["all"] >= 3 * 12 and blocked[register] == blocked["all"], counts
