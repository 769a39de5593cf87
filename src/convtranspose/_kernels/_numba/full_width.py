"""The library's kernels compiled for full-width vectors, and nothing else.

LLVM tunes its loop vectoriser for Intel's AVX-512 server CPUs (``skylake-avx512`` to
``sapphirerapids``, the ``prefer-256-bit`` tuning) to 256-bit vectors: loops that
numba leaves to the vectoriser (casts, the col2im scatter, window fills, the
channels-last loops) then run at half width on the CPUs with the widest ones, while
the register-blocked kernels, written in explicit vectors (:mod:`.vectors`), use all
512 bits.  numba's global switch (``NUMBA_CPU_FEATURES`` with ``-prefer-256-bit``)
would change the user's own numba code as well, and the library leaves numba's
settings alone.  LLVM also reads the preference per function, from the attribute
``"prefer-vector-width"="512"`` (what clang's ``-mprefer-vector-width=512`` sets);
numba has no option for function attributes, so the kernels are compiled by a numba
pipeline (njit's ``pipeline_class``, :class:`FullWidthCompiler`) whose lowering adds
it to every function it lowers.  On a CPU without AVX-512 it changes nothing: LLVM
takes the narrower of the preference and the widest register.
``tests/kernels/test_vector_width.py`` reads the machine code of the hot kernels
compiled for AVX-512 and AVX2 CPUs; ``benchmarks/results/vector-width-xeon.json``
has the speed.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import lowering
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import register_pass
from numba.core.typed_passes import NativeLowering

__all__ = ["PREFER_FULL_WIDTH", "FullWidthCompiler", "full_width_njit"]

#: The LLVM function attribute that overrides the CPU's preferred vector width.
PREFER_FULL_WIDTH = '"prefer-vector-width"="512"'


class _Attributes(ir.values.FunctionAttributes):
    # llvmlite's attribute set takes only the names it knows; LLVM reads a
    # "key"="value" string attribute written into the function's definition as is.
    _known = ir.values.FunctionAttributes._known | {PREFER_FULL_WIDTH}


class _FullWidthLower(lowering.Lower):
    """numba's lowering, with :data:`PREFER_FULL_WIDTH` on the function it lowers."""

    def pre_lower(self):
        super().pre_lower()
        attributes = self.function.attributes
        attributes.__class__ = _Attributes
        attributes.add(PREFER_FULL_WIDTH)


@register_pass(mutates_CFG=True, analysis_only=False)
class _FullWidthLowering(NativeLowering):
    _name = "convtranspose_full_width_lowering"

    @property
    def lowering_class(self):
        return _FullWidthLower


class FullWidthCompiler(CompilerBase):
    """numba's nopython pipeline with :class:`_FullWidthLowering` for its lowering."""

    def define_pipelines(self):
        pipeline = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pipeline.passes = [(_FullWidthLowering if step is NativeLowering else step, about)
                           for step, about in pipeline.passes]
        pipeline.finalize()
        return [pipeline]


def full_width_njit(**options):
    """``numba.njit(**options)`` compiling with :class:`FullWidthCompiler`."""
    return numba.njit(pipeline_class=FullWidthCompiler, **options)
