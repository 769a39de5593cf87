"""CPU identity, and the cost model's machine figures (measured, never a per-CPU table)."""


from convtranspose._choose import estimates, figures
from convtranspose._runtime import machine

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
    assert machine.parse_processor_string(text) == ("AuthenticAMD", 25)
    assert machine.parse_processor_string("") == ("", 0)


def test_cpu_identity_is_well_formed():
    vendor, family = machine.cpu_identity()
    assert isinstance(vendor, str) and isinstance(family, int) and family >= 0


def test_cpu_model_name_is_a_name():
    name = machine.cpu_model_name()
    assert isinstance(name, str) and name.strip() == name


def test_estimates_price_gemm_at_the_measured_rate(monkeypatch):
    # No table per CPU kind: the GEMM rate is this machine's measured one.
    monkeypatch.setattr(figures, "machine_figures",
                        lambda: figures.MachineFigures(gemm_gflops=123.0, copy_gbps=9.0))
    assert figures.gemm_gflops() == 123.0
    assert estimates.estimate_ns(estimates.RawCost(5.0, 7.0, 11.0)) == 23.0 + estimates.CALL_NS
