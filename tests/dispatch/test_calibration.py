"""The machine class that picks the cost model's constants: CPU identity and mapping."""

import pytest

from convtranspose import kernels
from convtranspose._runtime import blas, machine
from convtranspose.dispatch import calibration

ZEN4_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
flags\t\t: fpu avx2 avx512f avx512_bf16

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
"""

XEON_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
"""


def test_parse_cpuinfo_reads_the_first_processor():
    assert machine.parse_cpuinfo(ZEN4_CPUINFO) == ("AuthenticAMD", 25)
    assert machine.parse_cpuinfo(XEON_CPUINFO) == ("GenuineIntel", 6)
    # An ARM kernel's cpuinfo has neither line.
    assert machine.parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n") == ("", 0)


def test_processor_string_of_windows():
    text = "AMD64 Family 25 Model 17 Stepping 1, AuthenticAMD"
    assert machine._parse_processor_string(text) == ("AuthenticAMD", 25)
    assert machine._parse_processor_string("") == ("", 0)


def test_cpu_identity_is_well_formed():
    vendor, family = machine.cpu_identity()
    assert isinstance(vendor, str) and isinstance(family, int) and family >= 0


@pytest.mark.parametrize("core, identity, expected", [
    ("SkylakeX", ("GenuineIntel", 6), "xeon-avx512"),
    ("Cooperlake", ("GenuineIntel", 6), "xeon-avx512"),
    ("SkylakeX", ("AuthenticAMD", 25), "zen4-avx512"),
    ("Cooperlake", ("AuthenticAMD", 25), "zen4-avx512"),
    ("SkylakeX", ("", 0), "xeon-avx512"),
    ("Zen", ("AuthenticAMD", 25), "zen3-avx2"),        # Zen 3: AVX2 kernels
    ("Haswell", ("AuthenticAMD", 25), "zen3-avx2"),    # forced by OPENBLAS_CORETYPE
    ("Haswell", ("GenuineIntel", 6), "zen3-avx2"),
    ("", ("", 0), "zen3-avx2"),                        # no OpenBLAS found
])
def test_machine_class_from_blas_core_and_cpu(monkeypatch, core, identity, expected):
    monkeypatch.setattr(blas, "corename", lambda: core)
    monkeypatch.setattr(calibration, "cpu_identity", lambda: identity)
    calibration.machine_class.cache_clear()
    try:
        machine = calibration.machine_class()
        assert machine.name == expected
        assert calibration.gemm_gflops() == machine.gemm_gflops
        assert calibration.calibration_table() is machine.calibration
    finally:
        calibration.machine_class.cache_clear()


def test_every_calibration_names_known_algorithms_with_positive_scales():
    # (scale, overhead ns) or (scale, overhead ns, kernel scale): see RawCost.
    for kind in (calibration._XEON, calibration._ZEN3, calibration._ZEN4):
        assert set(kind.calibration) <= set(kernels.ALGORITHMS), kind.name
        for scale, overhead, *kernel_scale in kind.calibration.values():
            assert scale > 0 and overhead >= 0 and len(kernel_scale) <= 1, kind.name
            assert all(value > 0 for value in kernel_scale), kind.name
