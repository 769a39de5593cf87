"""SIMD vectors as numba values (LLVM vector types), for register-blocked kernels.

numba has no vector type, and LLVM does not turn a block of accumulators held in
an array into registers (it cannot prove the array distinct from the operands), so
a small matrix-multiply kernel written with scalar loops runs at a few GFLOP/s
(``benchmarks/results/direct-blocked-zen3.json``).
These intrinsics make each accumulator an SSA vector value instead, which LLVM
keeps in a register for a whole loop.  Only imported with numba (optional extra).

Loads and stores take a flat index into a C-contiguous 1-D array and do no bounds
or negative-index checks: the caller guarantees the range.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

from ..._runtime.machine import has_bfloat16_pairs, vector_bytes

__all__ = ["has_bfloat16_pairs", "vector_bytes", "vector_zero", "vector_load",
           "vector_splat_at", "vector_splat_pair", "vector_fma", "vector_dot_pairs",
           "vector_add", "vector_interleave", "vector_shift_in", "vector_store",
           "vector_load_spread", "vector_store_spread", "vector_store_spread_first",
           "vector_load_first", "vector_store_first",
           "vector_load_float16", "vector_store_float16", "vector_pack_pairs",
           "vector_widen_halves", "vector_load_bfloat16", "vector_store_bfloat16"]


class Vector(types.Type):
    """``lanes`` elements of ``dtype`` in one LLVM vector value."""

    def __init__(self, dtype, lanes: int):
        self.dtype, self.lanes = dtype, lanes
        super().__init__(name=f"Vector({dtype} x {lanes})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite.ir has no such type)."""

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloat)

    def __hash__(self):
        return hash("bfloat")


def _element_pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def vector_zero(typingctx, array, lanes):
    """A vector of ``lanes`` zeros of ``array``'s dtype."""
    if not isinstance(lanes, types.IntegerLiteral):
        return None
    vector = Vector(array.dtype, lanes.literal_value)

    def codegen(context, builder, signature, args):
        return ir.Constant(context.get_value_type(vector), None)

    return vector(array, lanes), codegen


@intrinsic
def vector_load(typingctx, array, index, lanes):
    """``array[index:index + lanes]`` as a vector (unaligned load)."""
    if not isinstance(lanes, types.IntegerLiteral):
        return None
    vector = Vector(array.dtype, lanes.literal_value)

    def codegen(context, builder, signature, args):
        pointer = _element_pointer(context, builder, array, args[0], args[1])
        pointer = builder.bitcast(pointer, context.get_value_type(vector).as_pointer())
        return builder.load(pointer, align=array.dtype.bitwidth // 8)

    return vector(array, index, lanes), codegen


@intrinsic
def vector_splat_at(typingctx, array, index, lanes):
    """``array[index]`` in every lane (one broadcast load)."""
    if not isinstance(lanes, types.IntegerLiteral):
        return None
    vector = Vector(array.dtype, lanes.literal_value)

    def codegen(context, builder, signature, args):
        value = builder.load(_element_pointer(context, builder, array, args[0], args[1]))
        return _splat(builder, value, context.get_value_type(vector))

    return vector(array, index, lanes), codegen


@intrinsic
def vector_splat_pair(typingctx, array, index, lanes):
    """``array[index]`` in the even lanes and ``array[index + 1]`` in the odd ones (one
    load of the pair, broadcast: ``vbroadcastsd`` for float32 pairs)."""
    if not (isinstance(lanes, types.IntegerLiteral) and lanes.literal_value % 2 == 0):
        return None
    vector = Vector(array.dtype, lanes.literal_value)

    def codegen(context, builder, signature, args):
        pair_type = ir.VectorType(context.get_value_type(array.dtype), 2)
        pointer = _element_pointer(context, builder, array, args[0], args[1])
        pair = builder.load(builder.bitcast(pointer, pair_type.as_pointer()),
                            align=array.dtype.bitwidth // 8)
        mask = ir.Constant(ir.VectorType(ir.IntType(32), vector.lanes),
                           [lane % 2 for lane in range(vector.lanes)])
        return builder.shuffle_vector(pair, pair, mask)

    return vector(array, index, lanes), codegen


@intrinsic
def vector_fma(typingctx, a, b, c):
    """``a * b + c``, fused where the target has FMA (``llvm.fmuladd``), else mul and add."""
    if not (isinstance(a, Vector) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        return _fma_codegen(builder, a, args)

    return a(a, b, c), codegen


def _fma_codegen(builder, vector: Vector, args):
    vector_type = ir.VectorType(args[0].type.element, vector.lanes)
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vector_type, [vector_type] * 3),
        f"llvm.fmuladd.v{vector.lanes}f{vector.dtype.bitwidth}")
    return builder.call(function, args)


@intrinsic
def vector_dot_pairs(typingctx, pairs, factors, sums):
    """``sums + pairs . factors`` per lane, with ``vdpbf16ps`` (AVX512_BF16).

    ``pairs`` and ``factors`` are 16 ``uint32`` lanes, each holding two bfloat16
    (the low half first); ``sums`` 16 float32.  Per lane the instruction adds the
    high halves' product, then the low halves', each exactly (8-bit significands)
    and rounded to nearest even like an FMA, except that subnormal operands and
    results are flushed to zero: the caller rules those out.
    """
    if not (isinstance(pairs, Vector) and pairs == factors and pairs.lanes == 16
            and pairs.dtype == types.uint32 and isinstance(sums, Vector)
            and sums.lanes == 16 and sums.dtype == types.float32):
        return None

    def codegen(context, builder, signature, args):
        sums_type = ir.VectorType(ir.FloatType(), 16)
        halves = ir.VectorType(_BFloat(), 32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(sums_type, [sums_type, halves, halves]),
            "llvm.x86.avx512bf16.dpbf16ps.512")
        return builder.call(function, [args[2], builder.bitcast(args[0], halves),
                                       builder.bitcast(args[1], halves)])

    return sums(pairs, factors, sums), codegen


@intrinsic
def vector_add(typingctx, a, b):
    """``a + b`` (integer lanes wrap)."""
    if not (isinstance(a, Vector) and a == b):
        return None
    integer = isinstance(a.dtype, types.Integer)

    def codegen(context, builder, signature, args):
        return (builder.add if integer else builder.fadd)(args[0], args[1])

    return a(a, b), codegen


@intrinsic
def vector_interleave(typingctx, a, b, upper):
    """Lanes ``a[i], b[i]`` in turn: those of the lower halves of ``a`` and ``b``
    (``upper`` 0), or of their upper halves (1), one ``shufflevector``."""
    if not (isinstance(a, Vector) and a == b and isinstance(upper, types.IntegerLiteral)
            and upper.literal_value in (0, 1)):
        return None
    half = a.lanes // 2
    first = half * upper.literal_value
    order = [index for i in range(first, first + half) for index in (i, a.lanes + i)]

    def codegen(context, builder, signature, args):
        mask = ir.Constant(ir.VectorType(ir.IntType(32), a.lanes), order)
        return builder.shuffle_vector(args[0], args[1], mask)

    return a(a, b, upper), codegen


@intrinsic
def vector_shift_in(typingctx, a, b, shift):
    """Lanes ``shift`` to ``shift + lanes - 1`` of ``a`` followed by ``b``: ``a``
    moved down by ``shift`` lanes with ``b``'s first ones after it (one
    ``shufflevector``).  Stored ``shift`` lanes before the end of ``b``'s place, it
    writes ``b``'s first ``shift`` lanes without a store past them."""
    if not (isinstance(a, Vector) and a == b and isinstance(shift, types.IntegerLiteral)
            and 0 <= shift.literal_value <= a.lanes):
        return None
    order = list(range(shift.literal_value, shift.literal_value + a.lanes))

    def codegen(context, builder, signature, args):
        mask = ir.Constant(ir.VectorType(ir.IntType(32), a.lanes), order)
        return builder.shuffle_vector(args[0], args[1], mask)

    return a(a, b, shift), codegen


@intrinsic
def prefetch(typingctx, array, index):
    """Ask the cache for the line holding ``array[index]`` (LLVM ``prefetch``: a read,
    into L2 and the levels beyond, ``prefetcht1``; a hint with no effect on the result,
    valid past the end).  Into L1 as well (``prefetcht0``), ``stream``'s prefetches
    gained nothing on an AMD EPYC Zen 4 where into L2 they took 0.71x the time
    (``benchmarks/results/stream-zen4.json``)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        pointer = builder.bitcast(_element_pointer(context, builder, array, args[0], args[1]),
                                  ir.IntType(8).as_pointer())
        function = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [
                ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(32), ir.IntType(32)]))
        integer = ir.IntType(32)
        builder.call(function, [pointer, integer(0), integer(2), integer(1)])
        return context.get_dummy_value()

    return types.none(array, types.intp), codegen


@intrinsic
def vector_store(typingctx, array, index, vector):
    """``array[index:index + lanes] = vector`` (unaligned store)."""
    if not isinstance(vector, Vector):
        return None

    def codegen(context, builder, signature, args):
        pointer = _element_pointer(context, builder, array, args[0], args[1])
        pointer = builder.bitcast(pointer, context.get_value_type(vector).as_pointer())
        builder.store(args[2], pointer, align=array.dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.none(array, index, vector), codegen


def _splat(builder, value, vector_type):
    """``value`` in every lane of ``vector_type`` (one insert and one shuffle)."""
    single = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value,
                                    ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(single, single, ir.Constant(
        ir.VectorType(ir.IntType(32), vector_type.count), [0] * vector_type.count))


def _spread_pointers(context, builder, array_type, array, index, offsets_type, offsets, at,
                     lanes: int, count=None):
    """The vector of addresses of ``array[index + offsets[at + i]]`` for ``i`` below
    ``lanes`` (``offsets`` int64), and the mask a masked gather or scatter of them
    takes: every lane, or with ``count`` the lanes below it (the offsets then read by a
    masked load, nothing past ``at + count``)."""
    data = context.make_array(array_type)(context, builder, array).data
    table = context.make_array(offsets_type)(context, builder, offsets).data
    words = ir.VectorType(ir.IntType(64), lanes)
    table_at = builder.bitcast(builder.gep(table, [at]), words.as_pointer())
    if count is None:
        mask = ir.Constant(ir.VectorType(ir.IntType(1), lanes), [1] * lanes)
        places = builder.load(table_at, align=8)
    else:
        mask = _first_lanes(builder, count, lanes)
        places = builder.call(_masked_intrinsic(builder, "load", words, table_at, words),
                              [table_at, ir.Constant(ir.IntType(32), 8), mask,
                               ir.Constant(words, None)])
    bases = _splat(builder, builder.ptrtoint(builder.gep(data, [index]), ir.IntType(64)),
                   words)
    size = ir.Constant(words, [array_type.dtype.bitwidth // 8] * lanes)
    pointers = builder.inttoptr(builder.add(bases, builder.mul(places, size)),
                                ir.VectorType(data.type, lanes))
    return pointers, mask


def _masked_intrinsic(builder, name: str, vector_type, pointers, returns):
    """LLVM's ``llvm.masked.<name>`` for ``vector_type``: ``gather``/``scatter`` through a
    vector of ``pointers`` (AVX-512's ``vgather``/``vscatter``; elsewhere LLVM splits
    it into one load or store per lane), ``load``/``store`` from one pointer (AVX-512's
    masked moves, AVX2's ``vmaskmov``).  The lanes off the mask are neither read nor
    written."""
    element = "f32" if vector_type.element == ir.FloatType() else (
        "f64" if vector_type.element == ir.DoubleType() else f"i{vector_type.element.width}")
    lanes = vector_type.count
    places = f"v{lanes}p0" if isinstance(pointers.type, ir.VectorType) else "p0"
    full = f"llvm.masked.{name}.v{lanes}{element}.{places}"
    arguments = [pointers.type, ir.IntType(32), ir.VectorType(ir.IntType(1), lanes)]
    if name in ("scatter", "store"):
        arguments.insert(0, vector_type)
    else:
        arguments.append(vector_type)
    function = builder.module.globals.get(full) or ir.Function(
        builder.module, ir.FunctionType(returns, arguments), full)
    return function


def _spread_operands(array, offsets) -> bool:
    return (isinstance(array, types.Array) and isinstance(offsets, types.Array)
            and offsets.dtype == types.int64)


@intrinsic
def vector_load_spread(typingctx, array, index, offsets, at, lanes):
    """The vector of ``array[index + offsets[at + i]]`` for each lane ``i`` (``offsets``
    int64): elements from scattered places (a gather)."""
    if not (_spread_operands(array, offsets) and isinstance(lanes, types.IntegerLiteral)):
        return None
    vector = Vector(array.dtype, lanes.literal_value)

    def codegen(context, builder, signature, args):
        vector_type = context.get_value_type(vector)
        pointers, mask = _spread_pointers(context, builder, array, args[0], args[1], offsets,
                                          args[2], args[3], vector.lanes)
        gather = _masked_intrinsic(builder, "gather", vector_type, pointers, vector_type)
        align = ir.Constant(ir.IntType(32), array.dtype.bitwidth // 8)
        return builder.call(gather, [pointers, align, mask, ir.Constant(vector_type, None)])

    return vector(array, types.intp, offsets, types.intp, lanes), codegen


def _scatter(array, offsets, vector, counted: bool):
    """The codegen of a scatter of ``vector`` through ``offsets`` (arguments: array,
    index, offsets, at, then the count of lanes where ``counted``, then the vector)."""
    def codegen(context, builder, signature, args):
        pointers, mask = _spread_pointers(context, builder, array, args[0], args[1], offsets,
                                          args[2], args[3], vector.lanes,
                                          args[4] if counted else None)
        scatter = _masked_intrinsic(builder, "scatter", args[-1].type, pointers, ir.VoidType())
        align = ir.Constant(ir.IntType(32), array.dtype.bitwidth // 8)
        builder.call(scatter, [args[-1], pointers, align, mask])
        return context.get_dummy_value()

    return codegen


@intrinsic
def vector_store_spread(typingctx, array, index, offsets, at, vector):
    """``array[index + offsets[at + i]] = vector[i]`` for each lane ``i`` (``offsets``
    int64): a vector's lanes to scattered places (a scatter: where the places follow no
    single stride, as outputs a stride apart across input lines); places must differ."""
    if not (_spread_operands(array, offsets) and isinstance(vector, Vector)):
        return None
    return (types.none(array, types.intp, offsets, types.intp, vector),
            _scatter(array, offsets, vector, False))


@intrinsic
def vector_store_spread_first(typingctx, array, index, offsets, at, count, vector):
    """:func:`vector_store_spread` of the lanes below ``count`` (a masked scatter, its
    offsets read up to ``at + count``): a panel's last positions store as its whole
    vectors do instead of one element at a time."""
    if not (_spread_operands(array, offsets) and isinstance(vector, Vector)):
        return None
    return (types.none(array, types.intp, offsets, types.intp, types.intp, vector),
            _scatter(array, offsets, vector, True))


def _first_lanes(builder, count, lanes: int):
    """The mask of the lanes below ``count`` (any integer)."""
    words = ir.VectorType(ir.IntType(64), lanes)
    count = builder.sext(count, ir.IntType(64)) if count.type.width < 64 else count
    return builder.icmp_signed("<", ir.Constant(words, list(range(lanes))),
                               _splat(builder, count, words))


def _float_array(array) -> bool:
    return isinstance(array, types.Array) and array.dtype in (types.float32, types.float64)


@intrinsic
def vector_load_first(typingctx, array, index, count, lanes):
    """``array[index:index + count]`` in the first ``count`` lanes, zeros in the others
    (a masked load: nothing past ``index + count`` is read, so a line's end needs no
    padding)."""
    if not (_float_array(array) and isinstance(lanes, types.IntegerLiteral)):
        return None
    vector = Vector(array.dtype, lanes.literal_value)

    def codegen(context, builder, signature, args):
        vector_type = context.get_value_type(vector)
        pointer = builder.bitcast(_element_pointer(context, builder, array, args[0], args[1]),
                                  vector_type.as_pointer())
        load = _masked_intrinsic(builder, "load", vector_type, pointer, vector_type)
        align = ir.Constant(ir.IntType(32), array.dtype.bitwidth // 8)
        return builder.call(load, [pointer, align, _first_lanes(builder, args[2], vector.lanes),
                                   ir.Constant(vector_type, None)])

    return vector(array, types.intp, types.intp, lanes), codegen


@intrinsic
def vector_store_first(typingctx, array, index, count, vector):
    """``array[index:index + count] = vector[:count]`` (a masked store: nothing past
    ``index + count`` is written)."""
    if not (_float_array(array) and isinstance(vector, Vector) and vector.dtype == array.dtype):
        return None

    def codegen(context, builder, signature, args):
        _masked_store(context, builder, array, args[0], args[1], args[3],
                      _first_lanes(builder, args[2], vector.lanes))
        return context.get_dummy_value()

    return types.none(array, types.intp, types.intp, vector), codegen


def _masked_store(context, builder, array_type, array, index, vector, mask) -> None:
    """``array[index + i] = vector[i]`` for the lanes of ``mask`` (LLVM's masked store)."""
    pointer = builder.bitcast(_element_pointer(context, builder, array_type, array, index),
                              vector.type.as_pointer())
    store = _masked_intrinsic(builder, "store", vector.type, pointer, ir.VoidType())
    align = ir.Constant(ir.IntType(32), array_type.dtype.bitwidth // 8)
    builder.call(store, [vector, pointer, align, mask])


@intrinsic
def vector_store_lanes(typingctx, array, index, low, high, vector):
    """``array[index + i] = vector[i]`` for the lanes ``low <= i < high`` (a masked store:
    nothing else is written, nor read, so ``index + i`` may lie outside the array for
    the other lanes)."""
    if not (_float_array(array) and isinstance(vector, Vector) and vector.dtype == array.dtype):
        return None

    def codegen(context, builder, signature, args):
        from_low = builder.not_(_first_lanes(builder, args[2], vector.lanes))
        _masked_store(context, builder, array, args[0], args[1], args[4],
                      builder.and_(from_low, _first_lanes(builder, args[3], vector.lanes)))
        return context.get_dummy_value()

    return types.none(array, types.intp, types.intp, types.intp, vector), codegen


def _bits_and_lanes(bits, lanes) -> bool:
    """Whether an intrinsic's operands are a ``uint16`` array and a literal lane count."""
    return isinstance(lanes, types.IntegerLiteral) and getattr(bits, "dtype", None) == types.uint16


@intrinsic
def vector_load_float16(typingctx, bits, index, lanes):
    """The float16 numbers whose bits are ``bits[index:index + lanes]`` (``uint16``),
    widened to a float32 vector (exact; the hardware's conversion: only where
    :func:`convtranspose._runtime.machine.host_has_f16c`)."""
    if not _bits_and_lanes(bits, lanes):
        return None
    vector = Vector(types.float32, lanes.literal_value)

    def codegen(context, builder, signature, args):
        halves = ir.VectorType(ir.HalfType(), vector.lanes)
        pointer = _element_pointer(context, builder, bits, args[0], args[1])
        value = builder.load(builder.bitcast(pointer, halves.as_pointer()), align=2)
        return builder.fpext(value, context.get_value_type(vector))

    return vector(bits, index, lanes), codegen


@intrinsic
def vector_store_float16(typingctx, bits, index, vector):
    """``bits[index:index + lanes]`` (``uint16``) = the float32 ``vector`` rounded to
    float16 (to nearest even, overflowing to infinity, subnormals kept: NumPy's
    ``astype`` bit for bit but on signalling NaNs, which come out quiet; sums are never
    signalling).  Only where :func:`convtranspose._runtime.machine.host_has_f16c`."""
    if not (isinstance(vector, Vector) and vector.dtype == types.float32
            and getattr(bits, "dtype", None) == types.uint16):
        return None

    def codegen(context, builder, signature, args):
        halves = builder.fptrunc(args[2], ir.VectorType(ir.HalfType(), vector.lanes))
        pointer = _element_pointer(context, builder, bits, args[0], args[1])
        builder.store(halves, builder.bitcast(pointer, halves.type.as_pointer()), align=2)
        return context.get_dummy_value()

    return types.none(bits, index, vector), codegen


def _halves(context, builder, bits, array, index, lanes):
    """``lanes`` uint16 of ``array`` from ``index``, zero-extended to 32-bit lanes."""
    pointer = _element_pointer(context, builder, bits, array, index)
    halves = ir.VectorType(ir.IntType(16), lanes)
    value = builder.load(builder.bitcast(pointer, halves.as_pointer()), align=2)
    return builder.zext(value, ir.VectorType(ir.IntType(32), lanes))


def _splat_constant(value: int, lanes: int):
    return ir.Constant(ir.VectorType(ir.IntType(32), lanes), [value] * lanes)


@intrinsic
def vector_pack_pairs(typingctx, bits, low_at, high_at, lanes):
    """``uint32`` lanes holding ``bits[low_at + i]`` in their low and ``bits[high_at + i]``
    in their high half (``uint16`` bits: the bfloat16 pairs :func:`vector_dot_pairs`
    multiplies)."""
    if not _bits_and_lanes(bits, lanes):
        return None
    vector = Vector(types.uint32, lanes.literal_value)

    def codegen(context, builder, signature, args):
        low = _halves(context, builder, bits, args[0], args[1], vector.lanes)
        high = _halves(context, builder, bits, args[0], args[2], vector.lanes)
        return builder.or_(low, builder.shl(high, _splat_constant(16, vector.lanes)))

    return vector(bits, low_at, high_at, lanes), codegen


@intrinsic
def vector_widen_halves(typingctx, bits, index, lanes):
    """``uint32`` lanes holding ``bits[index + i]`` in their low half, zeros in the high
    (a pair whose second channel does not exist)."""
    if not _bits_and_lanes(bits, lanes):
        return None
    vector = Vector(types.uint32, lanes.literal_value)

    def codegen(context, builder, signature, args):
        return _halves(context, builder, bits, args[0], args[1], vector.lanes)

    return vector(bits, index, lanes), codegen


@intrinsic
def vector_load_bfloat16(typingctx, bits, index, lanes):
    """The bfloat16 numbers whose bits are ``bits[index:index + lanes]`` (``uint16``) as a
    float32 vector (exact: the top halves of their bits)."""
    if not _bits_and_lanes(bits, lanes):
        return None
    vector = Vector(types.float32, lanes.literal_value)

    def codegen(context, builder, signature, args):
        wide = _halves(context, builder, bits, args[0], args[1], vector.lanes)
        return builder.bitcast(builder.shl(wide, _splat_constant(16, vector.lanes)),
                               context.get_value_type(vector))

    return vector(bits, index, lanes), codegen


@intrinsic
def vector_store_bfloat16(typingctx, bits, index, vector):
    """``bits[index:index + lanes]`` (``uint16``) = the float32 ``vector`` rounded to
    bfloat16 as :func:`convtranspose._kernels._numba.casts.bfloat16_bits` rounds (to nearest
    even; a NaN becomes the quiet NaN 0x7FC0, its sign kept: ml_dtypes' ``astype``)."""
    if not (isinstance(vector, Vector) and vector.dtype == types.float32
            and getattr(bits, "dtype", None) == types.uint16):
        return None

    def codegen(context, builder, signature, args):
        lanes = vector.lanes
        word = builder.bitcast(args[2], ir.VectorType(ir.IntType(32), lanes))
        top = builder.lshr(word, _splat_constant(16, lanes))
        odd = builder.and_(top, _splat_constant(1, lanes))
        rounded = builder.lshr(builder.add(builder.add(word, _splat_constant(0x7FFF, lanes)),
                                           odd), _splat_constant(16, lanes))
        quiet = builder.or_(builder.and_(top, _splat_constant(0x8000, lanes)),
                            _splat_constant(0x7FC0, lanes))
        nan = builder.icmp_unsigned(">", builder.and_(word, _splat_constant(0x7FFFFFFF, lanes)),
                                    _splat_constant(0x7F800000, lanes))
        result = builder.trunc(builder.select(nan, quiet, rounded),
                               ir.VectorType(ir.IntType(16), lanes))
        pointer = _element_pointer(context, builder, bits, args[0], args[1])
        builder.store(result, builder.bitcast(pointer, result.type.as_pointer()), align=2)
        return context.get_dummy_value()

    return types.none(bits, index, vector), codegen
