"""The numba kernels (imported only when one runs).

Importing this package imports numba, timed: a process that computes one small layer
and exits (``convtranspose run``) may spend more on importing numba than the layer
costs on NumPy and BLAS alone (:func:`convtranspose._choose.figures.numba_import_seconds`).
"""

import sys
import time

from .. import compiling

if "numba" not in sys.modules:
    _started = time.perf_counter()
    import numba  # noqa: F401  (imported here to be timed)

    compiling.numba_import_seconds = time.perf_counter() - _started
