"""No hot loop at half width: the hot numba kernels' machine code, compiled for AVX-512
and AVX2 CPUs, computes in that CPU's widest registers.

LLVM's loop vectoriser prefers 256-bit vectors on Intel's AVX-512 server CPUs (its
``prefer-256-bit`` tuning); the library compiles its kernels for 512
(:mod:`convtranspose._kernels._numba.full_width`).  Each CPU gets a fresh process with
``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` set (the features too: with the name alone
numba keeps the host's features, AVX-512 on an AVX-512 host), which compiles each
kernel for small arrays' types (``dispatcher.compile``, nothing is run: the host may
lack the instructions) and reports, per kernel, how many vector instructions compute
(moves, broadcasts, zeroing and scalar operations left out) in ``xmm``, ``ymm`` and
``zmm`` registers, each by the widest register it names.  The plane kernel's count is
mostly its register blocks' (explicit vectors); the loops that fill its windows are the
casts' and copies' kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

SCRIPT = textwrap.dedent("""\
    import json, re, sys
    import numba
    import numpy as np
    import convtranspose as ct
    from convtranspose._kernels._numba import (blocked_filter, casts, channels_last, compare,
                                               depthwise_filter, depthwise_lines, forward,
                                               int8, packed, peak, planes, scatter,
                                               transpose)
    from convtranspose._kernels.schedules import blocked_shape, planes_block_shape
    from convtranspose._plan.rules import AxisPlan

    target = ct.host_target()
    lanes = target.lanes(np.float32)
    i64, f32, u16 = np.int64, np.float32, np.uint16

    def zeros(dtype, *shape):
        return np.zeros(shape or (64,), dtype)

    taps = (zeros(i64, 3, 2, 2), zeros(i64, 3, 2, 2), zeros(i64, 3, 2))

    def plane(source_dtype):
        _, co_block, vectors = planes_block_shape(4, 8, target.vector_bytes)
        kernel = planes.planes_kernel(lanes, co_block, vectors)
        return kernel, (zeros(source_dtype), zeros(f32), zeros(f32), zeros(f32, 0),
                        zeros(i64, 12), zeros(i64, 3, 4), zeros(i64, 3, 2), *taps,
                        1, False, 0, 1)

    def blocked_data_adjoint():
        lanes_, _, chunk, pixels = blocked_shape(4, 64, AxisPlan(8, 1, 1, 1, 0, 8),
                                                 target.vector_bytes)
        return forward._forward_kernel(lanes_, chunk, pixels), (
            zeros(f32), zeros(f32), zeros(f32), zeros(f32), zeros(i64, 19),
            zeros(i64, 3, 2, 2), zeros(i64, 3), 0, 1)

    def per_position(ci, co):
        return channels_last.channels_last_kernel(ci, co, lanes), (
            zeros(f32), zeros(f32), zeros(f32), zeros(i64, 9), zeros(i64, 3), *taps, 0, 1)

    kernels = {
        "narrow_float16": (casts.narrow_float16, (zeros(f32), zeros(u16), 0, 64)),
        "widen_float16": (casts.widen_float16, (zeros(u16), zeros(f32), 0, 64)),
        "narrow_bfloat16": (casts.narrow_bfloat16, (zeros(f32), zeros(u16), 0, 64)),
        "widen_bfloat16": (casts.widen_bfloat16, (zeros(u16), zeros(np.uint32), 0, 64)),
        "col2im scatter": (scatter.scatter_kernel, (
            zeros(f32), zeros(i64, 8), zeros(f32), zeros(i64, 6), zeros(i64, 3, 6),
            1, 1, 1, 0, 1)),
        "channels-last copy": (
            transpose.transpose_kernel(lanes, transpose.uses_masked_tiles(target)),
            (zeros(f32), zeros(f32), 1, 1, 0, 1)),
        "per-position 2x2": per_position(2, 2),
        "per-position any": per_position(0, 0),
        "plane": plane(f32),
        "peak": (peak.peak_kernel(lanes, 4), (zeros(f32), 1)),
        "packed product": (packed._product_kernel(*packed.block_shape(4, target.vector_bytes)),
                           (zeros(f32), zeros(f32), zeros(f32), zeros(f32), *(1,) * 10)),
        "packed rows product": (packed._rows_kernel(*packed.block_shape(4, target.vector_bytes)),
                                (zeros(f32), zeros(f32), zeros(f32), zeros(i64),
                                 zeros(i64, 0, 2), zeros(f32), *(1,) * 8)),
        "blocked data adjoint": blocked_data_adjoint(),
        "blocked filter adjoint": (blocked_filter._block(lanes, 4, 1), (
            zeros(f32), zeros(f32), zeros(f32), zeros(i64, 15), zeros(i64, 3, 2, 4),
            zeros(i64, 3), 0, 0, 0)),
        "depthwise filter adjoint": (depthwise_filter._tap_sums(lanes, 2), (
            zeros(f32), zeros(f32), zeros(np.float64), zeros(f32), zeros(i64, 13),
            zeros(i64, 3, 2, 4), zeros(i64, 3), 1, 0, 1)),
        "depthwise filter adjoint, planes": (depthwise_filter._plane_sums(lanes), (
            zeros(f32), zeros(f32), zeros(np.float64), zeros(i64, 8), zeros(i64, 3, 2, 4),
            zeros(i64, 3), 0, 1)),
        "depthwise lines unrolled": (depthwise_lines.lines_kernel(lanes, 5), (
            zeros(f32), zeros(f32), zeros(f32), zeros(f32), zeros(i64, 16), zeros(i64, 2),
            zeros(i64, 5), zeros(i64, 5), zeros(i64), 0, 1)),
        "int8 channel words": (int8.words_kernel(lanes, False), (
            zeros(np.int16), zeros(np.uint32), 0, 1, 8, 2, 16, 0, 1)),
        "int16 channel halves": (int8.words_kernel(lanes, True), (
            zeros(np.int16), zeros(np.uint32), 0, 1, 8, 4, 16, 0, 1)),
        "filter comparison": (compare.bytes_differ, (zeros(np.uint8), zeros(np.uint8))),
    }
    def user_loop(a, b):  # the user's own numba code, compiled as numba compiles it
        for i in range(a.size):
            b[i] = np.uint32(a[i]) << 16

    kernels["user's loop"] = (numba.njit(user_loop), (zeros(u16), zeros(np.uint32)))
    not_work = re.compile(r"v(p?mov|zeroupper|p?xor|p?broadcast|p?extract|p?insert)")
    report = {}
    for name, (kernel, args) in kernels.items():
        signature = tuple(numba.typeof(a) for a in args)
        kernel.compile(signature)
        counts = dict.fromkeys(("xmm", "ymm", "zmm"), 0)
        for line in kernel.inspect_asm(signature).splitlines():
            fields = line.split(None, 1)
            if (len(fields) < 2 or not fields[0].startswith("v") or not_work.match(fields[0])
                    or fields[0].endswith(("ss", "sd"))):
                continue
            widest = [r for r in ("zmm", "ymm", "xmm") if "%" + r in fields[1]]
            if widest:
                counts[widest[0]] += 1
        report[name] = counts
    print(json.dumps(report))
    """)

#: The CPUs compiled for: LLVM's name, the features (the vector width the library
#: reads from them, and F16C for the float16 conversions) and the full-width register.
#: Intel's AVX-512 CPUs from skylake-avx512 on share the 256-bit preference (LLVM gives
#: Zen 4 none); one AVX2 CPU stands for the others.
TARGETS = {
    "sapphirerapids": ("+avx512f,+f16c", "zmm"),
    "znver4": ("+avx512f,+f16c", "zmm"),
    "haswell": ("+avx2,+fma,+f16c", "ymm"),
}
#: The CPUs of :data:`TARGETS` for which LLVM prefers 256-bit vectors.
PREFERS_256 = {"sapphirerapids"}


def _compiling(cpu: str) -> subprocess.Popen:
    """The process compiling the kernels for ``cpu`` (its report on stdout)."""
    features, _ = TARGETS[cpu]
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                       CONVTRANSPOSE_CACHE_DIR="off",
                       PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment)


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, dict[str, int]]]:
    """Per CPU, the kernels' instruction counts.  The CPUs compile at once (about 15 s
    of one core each)."""
    running = {cpu: _compiling(cpu) for cpu in TARGETS}
    found = {}
    for cpu, process in running.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, (cpu, err[-3000:])
        found[cpu] = json.loads(out.strip().splitlines()[-1])
    return found


def narrow(report: dict[str, dict[str, int]], register: str) -> dict[str, dict[str, int]]:
    """The kernels of ``report`` not at the full width ``register`` (``ymm`` or ``zmm``):
    none of their instructions in it, some in a wider one, or (``zmm``) more in ``ymm``.

    ``xmm`` is not counted against a kernel: in a loop over two element sizes the
    narrower ones fill half the register the wider ones do (a float32 to float16 cast
    reads ``zmm`` and writes ``ymm``, or reads ``ymm`` and writes ``xmm``)."""
    wider = {"ymm": "zmm", "zmm": None}[register]
    return {name: counts for name, counts in report.items() if (
        not counts[register] or (wider and counts[wider])
        or (register == "zmm" and counts["ymm"] > counts["zmm"]))}


@pytest.mark.parametrize("cpu", sorted(TARGETS))
def test_hot_kernels_compute_at_full_width(cpu, reports):
    report = reports[cpu]
    register = TARGETS[cpu][1]
    user = report.pop("user's loop")
    assert len(report) == 20
    assert not narrow(report, register), (cpu, narrow(report, register))
    # numba's own setting is left alone: the same loop in the user's code keeps LLVM's
    # 256-bit preference where the CPU has one.
    assert narrow({"user's loop": user}, "ymm" if cpu in PREFERS_256 else register) == {}


def test_the_check_can_fail():
    # Half-width code is reported: more ymm than zmm instructions, or only xmm.
    report = {"plane": {"xmm": 2, "ymm": 30, "zmm": 60},
              "cast": {"xmm": 4, "ymm": 20, "zmm": 0},
              "copy": {"xmm": 40, "ymm": 0, "zmm": 0}}
    assert narrow(report, "zmm") == {"cast": report["cast"], "copy": report["copy"]}
    assert narrow(report, "ymm") == {"plane": report["plane"], "copy": report["copy"]}
