"""What the differential tests against torch's int8 engines need to know of this CPU."""

from __future__ import annotations


def cpu_flag(flag: str) -> bool:
    """Whether this Linux CPU reports ``flag`` in /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return any(line.startswith("flags") and flag in line.split() for line in info)
    except OSError:
        return False


def pairs_saturate() -> bool:
    """Whether the int8 kernels of torch's FBGEMM and oneDNN engines and of OpenVINO's
    CPU plugin may saturate on this CPU: without AVX512-VNNI they multiply with
    ``vpmaddubsw``, which saturates each pair of u8 x s8 products to int16 (2 * 255 *
    128 > 32767), a step this library does not reproduce (docs/quantization.md)."""
    return not cpu_flag("avx512_vnni")


def unsaturated(case: dict, weights: str = "w") -> dict:
    """``case`` as torch's FBGEMM and oneDNN kernels multiply it exactly on this CPU:
    without AVX512-VNNI they multiply with ``vpmaddubsw``, which saturates each pair of
    u8 x s8 products to int16 (2 * 255 * 128 > 32767), a step this library does not
    reproduce (docs/quantization.md); with the weights (``case[weights]``, int8)
    halved into [-64, 63] no pair can saturate.  With AVX512-VNNI, the case as it
    is."""
    return case if cpu_flag("avx512_vnni") else dict(case, **{weights: case[weights] // 2})
