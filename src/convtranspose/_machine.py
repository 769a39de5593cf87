"""Which CPU this is, as far as the cost model needs to know (optional packages are
imported only by the function that needs them).

OpenBLAS names its kernel family (:func:`convtranspose._blas.corename`), but one
family runs at very different speeds on different CPUs: ``SkylakeX`` is chosen both
on Intel Xeons, whose two 512-bit FMA units made sgemm run at about 420 GFLOP/s on
two cores here, and on AMD Zen 4, which splits every 512-bit operation over its
256-bit units (190-200 GFLOP/s).  The vendor and family tell them apart.
"""

from __future__ import annotations

import functools
import platform
import re

__all__ = ["CpuIdentity", "cpu_identity", "parse_cpuinfo", "vector_bytes"]

#: ``(vendor, family)``: the CPUID vendor string (``'GenuineIntel'``, ``'AuthenticAMD'``)
#: and the CPU family number (AMD: 23 Zen 1-2, 25 Zen 3-4, 26 Zen 5), or ``('', 0)``.
CpuIdentity = tuple[str, int]


def parse_cpuinfo(text: str) -> CpuIdentity:
    """The first processor's ``(vendor, family)`` in the text of Linux's ``/proc/cpuinfo``."""
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.MULTILINE)
    family = re.search(r"^cpu family\s*:\s*(\d+)", text, re.MULTILINE)
    return (vendor.group(1) if vendor else "", int(family.group(1)) if family else 0)


def _parse_processor_string(text: str) -> CpuIdentity:
    """``(vendor, family)`` from Windows' ``platform.processor()``.

    For example ``'AMD64 Family 25 Model 17 Stepping 1, AuthenticAMD'``.
    """
    vendor = re.search(r"(GenuineIntel|AuthenticAMD)", text)
    family = re.search(r"Family (\d+)", text)
    return (vendor.group(1) if vendor else "", int(family.group(1)) if family else 0)


@functools.cache
def cpu_identity() -> CpuIdentity:
    """This machine's ``(vendor, family)``, or ``('', 0)`` where the system does not say."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            identity = parse_cpuinfo(handle.read(1 << 16))
    except OSError:
        identity = ("", 0)
    if identity[0]:
        return identity
    return _parse_processor_string(platform.processor())


@functools.cache
def vector_bytes() -> int:
    """The host's widest SIMD register in bytes as LLVM (numba) compiles for it: 64 with
    AVX-512, 32 with AVX, else 16.  Needs llvmlite (numba's dependency)."""
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    if features.get("avx512f"):
        return 64
    return 32 if features.get("avx") else 16
