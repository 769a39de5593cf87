"""The int16 pair products (``pmaddwd``, :func:`convtranspose._kernels.int8.s16_blocked`):
the exact integer sums of CPUs without VNNI and of operands wider than bytes, against
the integer oracle at every vector width (16, 32 and 64 bytes: SSE2, AVX2 and AVX-512
code, each run on any CPU that has it), and compiled to full-width ``vpmaddwd`` for an
AVX2 and an AVX-512 CPU whatever the host."""

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
from convtranspose._runtime.machine import integer_vector_bytes  # noqa: E402
from kernel_support import random_case  # noqa: E402
from oracle import canonical_result  # noqa: E402

#: The vector widths this host runs: each is the code another CPU gets.
WIDTHS = [width for width in (16, 32, 64) if width <= integer_vector_bytes()]

needs_x86 = pytest.mark.skipif(not WIDTHS, reason="pmaddwd is an x86 instruction")


def _s16(data, weights, axes, channels_last, width, threads=2):
    from convtranspose._kernels.int8 import s16_blocked

    target = host_target().replace(threads=threads, vector_bytes=width)
    return s16_blocked(data, weights, axes, channels_last, target)


@needs_x86
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("seed", range(8))
def test_random_layers_equal_the_oracle(seed, width):
    """Random layers of 1-3 axes, groups, crops and dilations; uint8-minus-zero-point
    data (``[-255, 255]``) against int8 weights, both layouts."""
    rng = np.random.default_rng(seed)
    data, weights, axes = random_case(rng, 1 + seed % 3)
    data = rng.integers(-255, 256, data.shape)
    weights = rng.integers(-128, 128, weights.shape)
    expected = canonical_result(data, weights, axes)
    np.testing.assert_array_equal(_s16(data, weights, axes, False, width), expected)
    last = _s16(np.ascontiguousarray(np.moveaxis(data, 1, -1)), weights, axes, True, width, 1)
    np.testing.assert_array_equal(np.moveaxis(last, -1, 1), expected)


@needs_x86
@pytest.mark.parametrize("width", WIDTHS)
def test_sums_at_the_int16_ends(width):
    """Operands at +-32767: two channels and one tap per output (a pair's two products
    at their largest magnitude, summing to 2 * 32767**2, just below 2**31), an odd
    channel count (a zero half in each group's last word), and 65793 channels of
    uint8-times-int8 products (255 * -128 each) summing to just above -2**31."""
    from convtranspose._plan.rules import AxisPlan

    axes = (AxisPlan(3, 2, 2, 1, 0, 6), AxisPlan(2, 1, 1, 1, 0, 2))  # one tap per output
    rng = np.random.default_rng(1)
    for groups, ci in ((1, 2), (3, 1)):
        data = np.where(rng.random((2, groups * ci, 3, 2)) < 0.5, -32767, 32767)
        weights = np.where(rng.random((groups, ci, 5, 2, 1)) < 0.5, -32767, 32767)
        data.flat[0], weights.flat[0] = 32767, 32767
        expected = canonical_result(data, weights, axes)
        np.testing.assert_array_equal(_s16(data, weights, axes, False, width), expected)
    many = (AxisPlan(1, 1, 1, 1, 0, 1),)
    channels = 65793  # 65793 * 255 * 128 = 2**31 - 2**31 % 32640: the most that fit
    data, weights = np.full((1, channels, 1), 255), np.full((1, channels, 3, 1), -128)
    np.testing.assert_array_equal(_s16(data, weights, many, False, width),
                                  np.full((1, 3, 1), -channels * 255 * 128))


@needs_x86
def test_what_the_pairs_cannot_sum_is_left_to_the_caller():
    """-32768 (whose pair of products would pass 2**31), sums that could leave int32 and
    four axes are refused (None): the caller's float or int64 paths sum those."""
    from convtranspose._plan.rules import AxisPlan

    width = WIDTHS[-1]
    rng = np.random.default_rng(2)
    data, weights, axes = random_case(rng, 2)
    assert _s16(data, weights, axes, False, width) is not None
    low = data.copy()
    low.flat[0] = -32768
    assert _s16(low, weights, axes, False, width) is None
    wide = weights.copy()
    wide.flat[0] = -32768
    assert _s16(data, wide, axes, False, width) is None
    one = (AxisPlan(1, 1, 1, 1, 0, 1),)
    assert _s16(np.full((1, 65794, 1), 255), np.full((1, 65794, 1, 1), 128), one,
                False, width) is None  # 65794 * 255 * 128 > 2**31 - 1
    data4, weights4, axes4 = random_case(rng, 4)
    assert _s16(data4, weights4, axes4, False, width) is None


@needs_x86
def test_words_are_made_again_after_an_edit():
    """The weights' words are kept with the filter: a fresh copy of equal weights gives
    the same sums, weights edited in place their own."""
    rng = np.random.default_rng(6)
    data, weights, axes = random_case(rng, 2)
    width = WIDTHS[-1]
    for copy in (weights, weights.copy()):
        np.testing.assert_array_equal(_s16(data, copy, axes, False, width),
                                      canonical_result(data, weights, axes))
    weights.flat[0] += 5
    np.testing.assert_array_equal(_s16(data, weights, axes, False, width),
                                  canonical_result(data, weights, axes))


@pytest.mark.parametrize("threads, lanes", [(1, 16), (2, 8)])
def test_word_halves_equal_numpys_cast(threads, lanes, monkeypatch):
    """Channels-first data as int32 words of two channels' int16 halves: each group's
    channels per pixel, zero past them; 3 groups of 11 channels (five whole words and
    a half one: 18 words per pixel, a whole band of 16 and a partial one), 300 pixels
    (two chunks, whole blocks of the transpose and a partial one), int16's ends."""
    from convtranspose._kernels._numba import int8

    monkeypatch.setattr(int8, "copy_threads", lambda nbytes, threads: threads)
    rng = np.random.default_rng(3)
    data = rng.integers(-32767, 32768, (2, 33, 10, 30)).astype(np.int32)
    data[0, 0, 0, :2] = -32767, 32767
    result = int8.word_halves(data, 3, 11, 6, threads, lanes)
    expected = np.zeros((2, 10, 30, 3, 12), np.int16)
    expected[..., :11] = np.moveaxis(data, 1, -1).reshape(2, 10, 30, 3, 11)
    np.testing.assert_array_equal(result, expected.reshape(2, 10, 30, 36).view(np.int32))


@needs_x86
@pytest.mark.parametrize("name, features, width", [
    ("znver3", "", 32), ("sapphirerapids", "", 64), ("sandybridge", "", 16),
    ("knl", "", 32), ("", "+avx2,+fma", 32), ("", "+avx512f,+avx512bw", 64),
    ("", "+avx512f,+avx2", 32)])
def test_the_integer_vectors_of_a_named_cpu(monkeypatch, name, features, width):
    """The pair products' vector width follows the CPU numba compiles for: AVX512BW's
    64 bytes, AVX2's 32, else SSE2's 16 (Xeon Phi: AVX-512 without BW; Sandy Bridge:
    AVX without AVX2)."""
    monkeypatch.setenv("NUMBA_CPU_NAME", name)
    monkeypatch.setenv("NUMBA_CPU_FEATURES", features)
    assert integer_vector_bytes.__wrapped__() == width


SCRIPT = textwrap.dedent("""\
    import json, sys
    import numba
    import numpy as np
    from convtranspose._kernels._numba.blocked import _blocked_kernel
    from convtranspose._kernels.schedules import KEEP

    lanes, register = int(sys.argv[1]), sys.argv[2]
    i32, i64 = np.int32, np.int64
    kernel = _blocked_kernel(lanes, 2, 6, KEEP, "vector_dot_words")
    args = (np.zeros(64, i32), np.zeros(64, i32), np.zeros(64, i32), np.zeros(0, np.uint16),
            np.zeros(0, i32), np.zeros(19, i64), np.zeros(5, i64), np.zeros(5, i64),
            np.zeros(8, i64), np.zeros((3, 2, 2), i64), np.zeros((3, 2, 2), i64),
            np.zeros((3, 2), i64), 1, 0, 1)
    signature = tuple(numba.typeof(a) for a in args)
    kernel.compile(signature)
    lines = [line.split(None, 1) for line in kernel.inspect_asm(signature).splitlines()]
    found = [fields[1] for fields in lines if len(fields) == 2 and fields[0] == "vpmaddwd"]
    print(json.dumps({"wide": sum(register in f for f in found), "all": len(found)}))
    """)


@pytest.mark.parametrize("cpu, features, lanes, register", [
    ("znver3", "+avx2,+fma,+f16c", 8, "%ymm"),
    ("skylake-avx512", "+avx512f,+avx512bw,+f16c", 16, "%zmm")])
def test_the_pair_products_compile_to_full_width_vpmaddwd(cpu, features, lanes, register):
    # Compiled (not run) for the named CPU in a fresh process, whatever the host: the
    # blocks of 6 pixels x 2 vectors (12 products each; LLVM may merge the three block
    # sources' loops) and the line ends' single outputs, every product on the CPU's
    # widest registers.  The features are named too: with the name alone numba keeps
    # the host's (no AVX512BW for the 512-bit products on an AVX2 host).
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                       CONVTRANSPOSE_CACHE_DIR="off",
                       PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(lanes), register],
                            capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    assert counts["all"] >= 12 and counts["wide"] == counts["all"], counts
