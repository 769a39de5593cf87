"""Layer 4, the choice: which algorithm computes a problem, and why.

- :mod:`.choice`: ``choose`` ranks the registry's algorithms by estimate and returns
  an :class:`~convtranspose._choose.choice.Explanation`;
- :mod:`.estimates`: one time estimate per algorithm, from the kernels' schedules and
  this machine's measured figures;
- :mod:`.planning`, :mod:`.measure`: measured planning, which times the best
  candidates on the real operands (FFTW's planner);
- :mod:`.wisdom`: what was measured, kept per machine across processes;
- :mod:`.figures`: the machine figures (GEMM rate, copy rate, FMA peak, copy split),
  measured once per machine and kept in the wisdom.
"""
