"""The numba kernels compiled for another instruction set than the host's, against the
oracle: ``NUMBA_CPU_NAME`` selects the CPU numba compiles for in a fresh process (AVX2
on an AVX-512 machine; it must be a CPU this one can run), and the kernels take that
CPU's vector width.  Only the ISAs the host can execute are run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

SCRIPT = textwrap.dedent("""\
    import numpy as np
    import convtranspose as ct
    from convtranspose._execute.transposed import transposed_convolution
    from convtranspose._plan.rules import AxisPlan
    import oracle

    target = ct.host_target()
    assert target.vector_bytes == {vector_bytes}, target
    rng = np.random.default_rng(5)
    layers = [((AxisPlan(9, 4, 2, 1, 1, 18), AxisPlan(20, 4, 2, 1, 1, 40)), (2, 3, 24)),
              ((AxisPlan(6, 3, 2, 1, 0, 13),) * 2, (4, 1, 1)),
              ((AxisPlan(60, 4, 2, 1, 1, 120),), (1, 5, 40))]
    for axes, (groups, ci, co) in layers:
        data = rng.integers(-4, 5, (2, groups * ci) + tuple(a.input_size for a in axes))
        weights = rng.integers(-4, 5, (groups, ci, co) + tuple(a.kernel_size for a in axes))
        full = oracle.full_transposed_convolution(
            data.astype(np.float64), weights.astype(np.float64), [a.stride for a in axes],
            [a.dilation for a in axes])
        expected = oracle.crop(full, [a.offset for a in axes], [a.output_size for a in axes])
        for algorithm in ("direct", "direct-blocked", "col2im-nxc"):
            for channels_last in (False, True):
                source = np.moveaxis(data, 1, -1).copy() if channels_last else data
                for dtype, result in ((np.float32, None), (np.float32, np.float16)):
                    got = transposed_convolution(
                        source.astype(dtype), weights.astype(dtype), axes,
                        dtype=np.dtype(dtype), channels_last=channels_last,
                        algorithm=algorithm, result_dtype=result)
                    got = np.moveaxis(got, -1, 1) if channels_last else got
                    want = expected if result is None else expected.astype(result)
                    assert np.array_equal(got, want), (algorithm, axes, channels_last, result)
    # Taps reaching disjoint outputs, none cropped: col2im's products stored in place.
    axes = (AxisPlan(5, 2, 2, 1, 0, 10), AxisPlan(21, 2, 2, 1, 0, 42))
    data = rng.integers(-4, 5, (2, 6, 5, 21))
    weights = rng.integers(-4, 5, (2, 3, 5, 2, 2))
    expected = oracle.full_transposed_convolution(
        data.astype(np.float64), weights.astype(np.float64), [2, 2], [1, 1])
    for dtype in (np.float32, np.float64):
        got = transposed_convolution(data.astype(dtype), weights.astype(dtype), axes,
                                     dtype=np.dtype(dtype), algorithm="col2im-ncx")
        assert np.array_equal(got, expected), dtype
    # Depthwise channels first: summed along the lines of each plane, the last axis's
    # stride 1 (shifted copies), 2 and 4 (interleaved) and 8 (gathered).
    for s1, s2 in ((1, 1), (2, 2), (3, 4), (1, 8)):
        axes = (AxisPlan(11, 3, s1, 2, 1, 10 * s1 + 3), AxisPlan(21, 4, s2, 1, 2, 20 * s2 + 2))
        data = rng.integers(-4, 5, (2, 5, 11, 21))
        weights = rng.integers(-4, 5, (5, 1, 2, 3, 4))
        full = oracle.full_transposed_convolution(
            data.astype(np.float64), weights.astype(np.float64), [s1, s2], [2, 1])
        expected = oracle.crop(full, [1, 2], [a.output_size for a in axes])
        for dtype in (np.float32, np.float64):
            got = transposed_convolution(data.astype(dtype), weights.astype(dtype), axes,
                                         dtype=np.dtype(dtype), algorithm="depthwise")
            assert np.array_equal(got, expected), (dtype, s1, s2)
    print("ok")
    """)

#: Per CPU: the host feature it needs, the vector width the library must read, and the
#: features numba compiles with.  Both name and features are set: with the name alone,
#: numba keeps the host's features (AVX-512 code for "haswell" on an AVX-512 host).
CPUS = {"haswell": ("avx2", 32, "+avx2,+fma,+f16c"),
        "skylake-avx512": ("avx512f", 64, "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,"
                                          "+fma,+f16c")}


@pytest.mark.parametrize("cpu", sorted(CPUS))
def test_kernels_compiled_for_another_cpu(cpu):
    from llvmlite import binding

    feature, vector_bytes, features = CPUS[cpu]
    if not binding.get_host_cpu_features().get(feature):
        pytest.skip(f"this CPU cannot run {cpu} code")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                       PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(vector_bytes=vector_bytes)],
                            capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
