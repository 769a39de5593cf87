"""Integer dot products of SIMD vectors (:class:`.vectors.Vector`) for the int8 and
int16 kernels: ``vpdpbusd`` (VNNI) and ``pmaddwd``, as numba intrinsics.  The generated
kernels take them with :mod:`.vectors`' intrinsics (:mod:`.codegen`)."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .vectors import Vector

__all__ = ["vector_dot_bytes", "vector_dot_words"]


#: ``vpdpbusd`` by vector width in int32 lanes: LLVM's x86 intrinsics.  The 8-lane one
#: is AVX512-VNNI's with AVX512VL, or AVX-VNNI's VEX form on CPUs without AVX-512
#: (LLVM encodes whichever the target has).
_VPDPBUSD = {8: "llvm.x86.avx512.vpdpbusd.256", 16: "llvm.x86.avx512.vpdpbusd.512"}


@intrinsic
def vector_dot_bytes(typingctx, unsigned, signed, sums):
    """``sums + unsigned . signed`` per lane, with ``vpdpbusd`` (AVX512-VNNI, or
    AVX-VNNI on 8 lanes: :func:`convtranspose._runtime.machine.vnni_vector_bytes`).

    ``unsigned`` and ``signed`` are 8 or 16 ``int32`` lanes, each holding four bytes:
    per lane the four unsigned bytes of ``unsigned`` times the four signed bytes of
    ``signed``, summed and added to the lane of ``sums`` (as many ``int32``), exactly:
    no intermediate saturates, and the sum wraps as int32 arithmetic does.
    """
    if not (isinstance(unsigned, Vector) and unsigned == signed == sums
            and unsigned.lanes in _VPDPBUSD and unsigned.dtype == types.int32):
        return None

    def codegen(context, builder, signature, args):
        vector_type = ir.VectorType(ir.IntType(32), unsigned.lanes)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector_type, [vector_type] * 3),
            _VPDPBUSD[unsigned.lanes])
        return builder.call(function, [args[2], args[0], args[1]])

    return sums(unsigned, signed, sums), codegen


#: ``pmaddwd`` by vector width in int32 lanes: LLVM's x86 intrinsics (SSE2, AVX2,
#: AVX512BW), each taking twice as many int16 lanes.
_PMADDWD = {4: "llvm.x86.sse2.pmadd.wd", 8: "llvm.x86.avx2.pmadd.wd",
            16: "llvm.x86.avx512.pmaddw.d.512"}


@intrinsic
def vector_dot_words(typingctx, pairs, factors, sums):
    """``sums + pairs . factors`` per lane, with ``pmaddwd`` (SSE2, AVX2 or AVX512BW).

    ``pairs`` and ``factors`` are 4, 8 or 16 ``int32`` lanes, each holding two int16
    halves: per lane the low halves' product plus the high halves', added to the lane
    of ``sums``.  Exact for halves in ``[-32767, 32767]`` (the pair's sum is then below
    2**31); the add to ``sums`` wraps as int32 arithmetic does.  Twice the multiply-adds
    of a float32 FMA per instruction, on every x86-64 CPU: the exact 8- and 16-bit
    products of CPUs without VNNI (``vpmaddubsw`` would saturate unsigned-times-signed
    byte pairs past 32767).
    """
    if not (isinstance(pairs, Vector) and pairs == factors == sums
            and pairs.lanes in _PMADDWD and pairs.dtype == types.int32):
        return None

    def codegen(context, builder, signature, args):
        lanes = pairs.lanes
        vector_type = ir.VectorType(ir.IntType(32), lanes)
        halves = ir.VectorType(ir.IntType(16), 2 * lanes)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector_type, [halves, halves]), _PMADDWD[lanes])
        products = builder.call(function, [builder.bitcast(args[0], halves),
                                           builder.bitcast(args[1], halves)])
        return builder.add(products, args[2])

    return sums(pairs, factors, sums), codegen
