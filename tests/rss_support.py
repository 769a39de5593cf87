"""Peak memory of one call in a fresh process, as the operating system counts it.

tracemalloc counts what Python's allocators hand out: NumPy's buffers, and numba's (its
runtime allocates with ``PyMem_RawMalloc``).  The operating system counts everything the
process maps, outside those allocators too.  :func:`measure` runs a call in a new Python
process under glibc settings that make the peak resident set size count every allocated
byte:

- ``MALLOC_PERTURB_`` fills each allocation as it is made, so every page of it is
  touched (an untouched ``np.empty`` would otherwise cost no RSS);
- ``MALLOC_MMAP_THRESHOLD_`` (fixed, which also turns off glibc's adaptive threshold)
  gives every buffer of 64 KiB or more its own mapping, returned when freed, so freed
  memory is not reused unseen;
- ``MALLOC_ARENA_MAX=1``: one arena, no address space reserved per thread.

The child computes the call once (compiling its kernels), forgets the filter's derived
matrices and the prepared calls (they count as scratch), resets the peak
(``/proc/self/clear_refs``), then computes it again under an address-space limit
(``RLIMIT_AS``) of what it has plus ``address_space`` bytes.  Linux only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import gc, json, os, resource, sys
import numpy as np
import convtranspose as ct
from convtranspose._frontends import specs as _api
from convtranspose._runtime import memo

request = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
data = rng.standard_normal(request["data"]).astype(request["dtype"])
filter = rng.standard_normal(request["filter"]).astype(request["dtype"])
attributes = request["attributes"]
function = getattr(ct, request["function"])
if request["function"] == "conv_transpose":  # NXC data, XIO filter
    data = np.ascontiguousarray(np.moveaxis(data, 1, -1))
    filter = np.ascontiguousarray(np.moveaxis(filter, (0, 1), (-2, -1)))


def status(key):
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024


def call():
    return function(data, filter, **attributes)


result = call()
del result
memo.forget_derived()
_api.prepared_calls.clear()
gc.collect()
with open("/proc/self/clear_refs", "w") as file:
    file.write("5")
resident, mapped = status("VmRSS"), status("VmSize")
limit = mapped + request["address_space"]
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    result = call()
    error = None
except MemoryError as caught:
    result, error = None, repr(caught)
print(json.dumps({"growth": status("VmHWM") - resident, "error": error,
                  "result": None if result is None else result.nbytes}))
"""


def available() -> bool:
    """Whether the measurement works here (Linux with glibc and ``clear_refs``)."""
    return sys.platform.startswith("linux") and os.path.exists("/proc/self/clear_refs")


def measure(function: str, data: tuple[int, ...], filter: tuple[int, ...], dtype: str, *,
            address_space: int, algorithm: str | None = None, **attributes) -> dict:
    """``{"growth", "error", "result"}`` of ``ct.<function>(data, filter, **attributes)``
    in a fresh process: the peak RSS growth of the second call (bytes), a MemoryError it
    raised (its repr) under an address-space limit of ``address_space`` bytes more than
    the process had, and the result's bytes.  ``conv_transpose`` gets its operands
    channels last (NXC data, XIO filter); ``algorithm`` is forced."""
    env = dict(os.environ, MALLOC_PERTURB_="85", MALLOC_MMAP_THRESHOLD_="65536",
               MALLOC_ARENA_MAX="1")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(part for part in (src, env.get("PYTHONPATH")) if part)
    if algorithm is not None:
        env["CONVTRANSPOSE_ALGORITHM"] = algorithm
    request = {"function": function, "data": data, "filter": filter, "dtype": dtype,
               "attributes": attributes, "address_space": address_space}
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(request)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])
