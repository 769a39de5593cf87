"""Layer 1, the machine: what the kernels run on and how.

- :mod:`.config`: every ``CONVTRANSPOSE_*`` switch, read in one place;
- :mod:`.target`: the frozen :class:`~convtranspose._runtime.target.Target` (vector
  width, F16C, bfloat16 pairs, numba, BLAS, threads) passed down explicitly;
- :mod:`.machine`: which CPU this is; :mod:`.threads`: the one thread pool;
  :mod:`.blas`: direct calls into NumPy's BLAS; :mod:`.memo`: matrices derived from a
  filter, kept between calls; :mod:`.memory`: how much memory a call may take;
  :mod:`.cache`: the per-user cache folder; :mod:`.quiet`: NumPy's floating-point errors
  ignored for a stretch of code, cheaply.
"""
