"""Which CPU this is, as far as the cost model needs to know (optional packages are
imported only by the function that needs them).

OpenBLAS names its kernel family (:func:`convtranspose._runtime.blas.corename`), but one
family runs at very different speeds on different CPUs: ``SkylakeX`` is chosen both
on Intel Xeons, with two 512-bit FMA units, and on AMD Zen 4, which splits every
512-bit operation over its 256-bit units and runs sgemm at about half the Xeons'
speed (``benchmarks/results/machines.json``).  The vendor and family tell them apart.
"""

from __future__ import annotations

import os
import platform
import re
import time

from .caches import kept
from .config import AMX_ENV

__all__ = ["CpuIdentity", "fastest_seconds", "cpu_identity", "cpu_model_name", "parse_model_name", "has_bfloat16_pairs", "has_amx_int8", "has_vnni", "integer_vector_bytes", "vnni_vector_bytes", "host_has_f16c", "parse_cpuinfo",
           "last_level_cache_bytes", "vector_bytes"]

#: ``(vendor, family)``: the CPUID vendor string (``'GenuineIntel'``, ``'AuthenticAMD'``)
#: and the CPU family number (AMD: 23 Zen 1-2, 25 Zen 3-4, 26 Zen 5), or ``('', 0)``.
CpuIdentity = tuple[str, int]


def parse_cpuinfo(text: str) -> CpuIdentity:
    """The first processor's ``(vendor, family)`` in the text of Linux's ``/proc/cpuinfo``."""
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.MULTILINE)
    family = re.search(r"^cpu family\s*:\s*(\d+)", text, re.MULTILINE)
    return (vendor.group(1) if vendor else "", int(family.group(1)) if family else 0)


def parse_processor_string(text: str) -> CpuIdentity:
    """``(vendor, family)`` from Windows' ``platform.processor()``.

    For example ``'AMD64 Family 25 Model 17 Stepping 1, AuthenticAMD'``.
    """
    vendor = re.search(r"(GenuineIntel|AuthenticAMD)", text)
    family = re.search(r"Family (\d+)", text)
    return (vendor.group(1) if vendor else "", int(family.group(1)) if family else 0)


@kept("machine facts", maxsize=None)
def cpu_identity() -> CpuIdentity:
    """This machine's ``(vendor, family)``, or ``('', 0)`` where the system does not say."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            identity = parse_cpuinfo(handle.read(1 << 16))
    except OSError:
        identity = ("", 0)
    if identity[0]:
        return identity
    return parse_processor_string(platform.processor())


def parse_model_name(text: str) -> str | None:
    """The first ``model name`` of Linux's ``/proc/cpuinfo`` text (what ``lscpu`` calls
    Model name), with runs of spaces collapsed; None if there is none."""
    found = re.search(r"^model name\s*:\s*(.+?)\s*$", text, re.MULTILINE)
    return " ".join(found.group(1).split()) if found else None


@kept("machine facts", maxsize=None)
def cpu_model_name() -> str:
    """The CPU's name, as every reported figure carries it: ``/proc/cpuinfo``'s model
    name, else ``platform.processor()``, else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            name = parse_model_name(handle.read(1 << 16))
    except OSError:
        name = None
    return name or platform.processor() or platform.machine() or "unknown CPU"


#: LLVM CPU names whose widest vectors are 512 bits (for ``NUMBA_CPU_NAME``).
_AVX512_CPUS = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "sapphirerapids", "graniterapids", "emeraldrapids",
                "knl", "knm", "znver4", "znver5")
#: LLVM CPU names with 256-bit AVX but not AVX-512.
_AVX_CPUS = ("sandybridge", "ivybridge", "haswell", "broadwell", "skylake", "alderlake",
             "raptorlake", "meteorlake", "bdver1", "bdver2", "bdver3", "bdver4", "znver1",
             "znver2", "znver3")


def _named_cpu() -> tuple[str, frozenset[str] | None] | None:
    """``(name, feature flags)`` of the CPU numba compiles for when ``NUMBA_CPU_NAME`` or
    ``NUMBA_CPU_FEATURES`` names another than the host (flags None where only the name is
    given, as ``{"+avx2", "-avx512f", ...}`` where the features are), else None."""
    features = os.environ.get("NUMBA_CPU_FEATURES", "")
    name = os.environ.get("NUMBA_CPU_NAME", "")
    if features:
        return name, frozenset(features.split(","))
    if not name or name == "host":
        return None
    return name, None


def _named_width(name: str) -> int:
    """The widest SIMD register in bytes of the LLVM CPU ``name`` (16 if not listed)."""
    return 64 if name in _AVX512_CPUS else 32 if name in _AVX_CPUS else 16


@kept("machine facts", maxsize=None)
def vector_bytes() -> int:
    """The widest SIMD register in bytes as LLVM (numba) compiles for this process: 64 with
    AVX-512, 32 with AVX, else 16; the CPU ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES``
    names, if set (features first), else the host's.  Needs llvmlite (numba's dependency)."""
    named = _named_cpu()
    if named is not None:
        name, flags = named
        if flags is not None:
            return 64 if "+avx512f" in flags else 32 if flags & {"+avx", "+avx2"} else 16
        return _named_width(name)
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    if features.get("avx512f"):
        return 64
    return 32 if features.get("avx") else 16


#: LLVM CPU names of the lists above whose widest vectors lack integer instructions:
#: Xeon Phi has no AVX512BW (its integer vectors are AVX2's), the first AVX CPUs and
#: AMD's Bulldozer to Steamroller no AVX2 (integer vectors of 16 bytes).
_NARROW_INTEGER_CPUS = {"knl": 32, "knm": 32, "sandybridge": 16, "ivybridge": 16,
                        "bdver1": 16, "bdver2": 16, "bdver3": 16}


@kept("machine facts", maxsize=None)
def integer_vector_bytes() -> int:
    """The widest SIMD register in bytes whose int16 and int32 lanes LLVM (numba)
    compiles for this process (``pmaddwd``): 64 with AVX512BW, 32 with AVX2, else 16
    (SSE2); for the CPU :func:`vector_bytes` reads; 0 on other architectures (no
    ``pmaddwd``)."""
    from llvmlite import binding

    if not binding.get_process_triple().startswith(("x86_64", "i386", "i686")):
        return 0
    named = _named_cpu()
    if named is not None:
        name, flags = named
        if flags is not None:
            return 64 if "+avx512bw" in flags else 32 if "+avx2" in flags else 16
        return _NARROW_INTEGER_CPUS.get(name, _named_width(name))
    features = binding.get_host_cpu_features()
    return 64 if features.get("avx512bw") else 32 if features.get("avx2") else 16


#: The L2 size assumed where the system does not report one: the smallest per-core L2
#: of the x86 CPUs this library has run on (1 MiB, AMD Zen 4; Zen 3 has 512 KiB and
#: is AVX2, where the rule that reads this does not apply).
_DEFAULT_L2_BYTES = 1 << 20


def _sysfs_cache_bytes(level: int, kinds: tuple[str, ...]) -> int | None:
    """Bytes of the cache of ``level`` and one of ``kinds`` (``Data``, ``Unified``) of
    the CPU this process starts on, as Linux sysfs reports it, or None."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            with open(os.path.join(base, entry, "level")) as handle:
                if handle.read().strip() != str(level):
                    continue
            with open(os.path.join(base, entry, "type")) as handle:
                if handle.read().strip() not in kinds:
                    continue
            with open(os.path.join(base, entry, "size")) as handle:
                text = handle.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return None


def _sysconf_bytes(name: str) -> int | None:
    try:
        reported = os.sysconf(name)
    except (OSError, ValueError, AttributeError):
        return None
    return int(reported) if reported > 0 else None


def last_level_cache_bytes() -> int | None:
    """Bytes of the largest cache Linux sysfs reports for the CPU this process starts on
    (the unified level 3, else level 2), or None where it reports none."""
    return _sysfs_cache_bytes(3, ("Unified",)) or _sysfs_cache_bytes(2, ("Unified", "Data"))


@kept("machine facts", maxsize=None)
def l2_cache_bytes() -> int:
    """Bytes of the level-2 cache of the CPU this process starts on, as the system
    reports it (Linux sysfs, else ``sysconf``), else :data:`_DEFAULT_L2_BYTES`."""
    return (_sysfs_cache_bytes(2, ("Unified", "Data")) or _sysconf_bytes("SC_LEVEL2_CACHE_SIZE")
            or _DEFAULT_L2_BYTES)


#: The level-1 data cache assumed where the system does not report it: the smallest of
#: the x86 CPUs this library has run on (32 KiB, AMD Zen 3 and Zen 4; Intel's and Zen
#: 5's hold 48 KiB).
_DEFAULT_L1_BYTES = 32 << 10


@kept("machine facts", maxsize=None)
def l1_data_cache_bytes() -> int:
    """Bytes of the level-1 data cache of the CPU this process starts on, as the system
    reports it (Linux sysfs, else ``sysconf``), else :data:`_DEFAULT_L1_BYTES`."""
    return (_sysfs_cache_bytes(1, ("Data", "Unified"))
            or _sysconf_bytes("SC_LEVEL1_DCACHE_SIZE") or _DEFAULT_L1_BYTES)


@kept("machine facts", maxsize=None)
def host_has_f16c() -> bool:
    """Whether LLVM converts float16 with instructions for the CPU numba compiles for
    (else with a runtime helper numba does not link): x86 with F16C, or 64-bit ARM.  The
    CPU ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` names, if set.  Needs llvmlite."""
    named = _named_cpu()
    if named is not None:
        name, flags = named
        if flags is not None:
            return "+f16c" in flags
        return name in _AVX512_CPUS + _AVX_CPUS and name not in ("sandybridge", "bdver1")
    from llvmlite import binding

    return (bool(binding.get_host_cpu_features().get("f16c"))
            or binding.get_process_triple().startswith("aarch64"))


def _numba_targets_host() -> bool:
    """Whether numba compiles for this host's CPU (``NUMBA_CPU_NAME`` and
    ``NUMBA_CPU_FEATURES`` unset), as numba's configuration says once imported."""
    import sys

    numba = sys.modules.get("numba")
    if numba is not None:
        return numba.config.CPU_NAME is None and numba.config.CPU_FEATURES is None
    return not os.environ.get("NUMBA_CPU_NAME") and not os.environ.get("NUMBA_CPU_FEATURES")


@kept("machine facts", maxsize=None)
def has_bfloat16_pairs() -> bool:
    """Whether ``vdpbf16ps`` (bfloat16 pairs multiplied and added in float32) compiles
    here: AVX512_BF16, LLVM 17 or newer, and numba compiling for this host.

    LLVM 17 gave the instruction's intrinsic ``bfloat`` operands (older versions take
    ``i32`` vectors, not offered); for another target CPU LLVM could not select it.
    Needs llvmlite.
    """
    from llvmlite import binding

    return (bool(binding.get_host_cpu_features().get("avx512bf16"))
            and binding.llvm_version_info >= (17,) and _numba_targets_host())


def has_vnni() -> bool:
    """Whether ``vpdpbusd`` (AVX512-VNNI: unsigned times signed bytes into int32) runs
    here on 512-bit vectors (:func:`vnni_vector_bytes`).  Needs llvmlite."""
    return vnni_vector_bytes() == 64


@kept("machine facts", maxsize=None)
def vnni_vector_bytes() -> int:
    """The widest vectors in bytes on which ``vpdpbusd`` (unsigned times signed bytes
    into int32) runs here, where numba compiles for the host: 64 with AVX512-VNNI
    (which also takes 32-byte vectors: every such CPU has AVX512VL), 32 with AVX-VNNI
    alone (the VEX form, on CPUs without AVX-512), else 0.  Needs llvmlite."""
    from llvmlite import binding

    if not _numba_targets_host():
        return 0
    features = binding.get_host_cpu_features()
    return 64 if features.get("avx512vnni") else 32 if features.get("avxvnni") else 0


#: Linux's ``arch_prctl`` on x86-64: its system call number, the request that
#: permits a process's threads to use a dynamically enabled state component, and AMX's
#: tile data component (``asm/prctl.h``, ``asm/fpu/types.h``).
_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA = 158, 0x1023, 18


@kept("machine facts", maxsize=None)
def has_amx_int8() -> bool:
    """Whether AMX tiles multiply bytes here (``tdpbusd``: 16 x 64 unsigned times
    signed bytes into 16 x 16 int32 per instruction): the host has AMX-TILE and
    AMX-INT8, numba compiles for the host, ``CONVTRANSPOSE_AMX`` is not ``0``, and
    Linux permits this process to use the tiles.  Linux enables the tiles' state only
    for a process that asks (``arch_prctl(ARCH_REQ_XCOMP_PERM)``), so the first call
    asks, once; it refuses where a thread's signal stack is too small for the state,
    and this is then False.  Needs llvmlite."""
    if os.environ.get(AMX_ENV, "").strip() == "0":
        return False
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    if not (features.get("amx-tile") and features.get("amx-int8") and _numba_targets_host()
            and platform.system() == "Linux" and platform.machine() == "x86_64"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


#: Timed calls of :func:`fastest_seconds`: the fastest of a few is the machine's figure
#: (one run can meet a busy core).
_REPEATS = 5


def fastest_seconds(function) -> float:
    """The fastest of :data:`_REPEATS` timed calls of ``function`` (seconds), after one
    untimed call."""
    function()
    best = float("inf")
    for _ in range(_REPEATS):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)
