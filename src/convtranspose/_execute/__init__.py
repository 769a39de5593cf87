"""Layer 5, the one execution path: a canonical problem in, its result out.

- :mod:`.transposed`: the transposed convolution: the target, the choice, the
  registry's algorithm, the epilogue (bias, rounding, the exact fallback for
  non-finite operands) and prepared calls;
- :mod:`.adjoints`: its adjoints (data and filter gradients, forward convolutions);
- :mod:`.footprint`: the one memory check every array function makes before it
  allocates;
- :mod:`.array_api`: arrays of other libraries (torch, JAX, CuPy), computed in their
  own namespace or through zero-copy NumPy views.
"""
