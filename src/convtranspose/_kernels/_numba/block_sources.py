"""The sources of ``direct-blocked``'s register blocks, generated per block shape.

A block keeps the sums of a few outputs' chunk of output channels in vector registers
while every tap and input channel adds one broadcast input times one weight row
(:func:`block_source`); :func:`cross_block_source` takes outputs anywhere in the data
(blocks across lines), :func:`single_source` one output with its own taps (a line's
ends).  ``direct-blocked`` (:mod:`.blocked`), ``stream`` and the forward convolution's
data adjoint (:mod:`.forward`) compile them.  With ``span``, a block's output channels
are those of several groups side by side, each group's vectors multiplying that
group's inputs (blocks across groups,
:func:`~convtranspose._kernels.blocked_groups.blocked_group_span`).
"""

from __future__ import annotations

__all__ = ["PRODUCTS", "block_source", "cross_block_source", "single_source"]

#: The products a block may multiply its broadcast inputs and weight rows with:
#: ``vector_fma`` for float lanes; for int32 lanes, ``vector_dot_bytes`` (AVX512-VNNI),
#: each lane holding four unsigned input bytes and four signed weight bytes, so that one
#: instruction adds four input channels, or ``vector_dot_words`` (any x86-64 CPU), two
#: int16 halves each, two input channels (:mod:`convtranspose._kernels.int8`).
PRODUCTS = ("vector_fma", "vector_dot_bytes", "vector_dot_words")


def _products(lanes: int, at: str, sums: list[str], weight, product: str,
              span: int | None, indent: str) -> list[str]:
    """Source lines that add one input channel of one output into its accumulators
    ``sums``: the input read at ``at`` broadcast, times weight vector ``weight(v)`` of
    each accumulator ``v``, by the intrinsic ``product``.  With ``span`` (vectors per
    group of a block across groups, :func:`block_source`) one broadcast per group,
    group ``i``'s input ``i * group_step`` further on, each just before its products
    (one register for them all)."""
    step = span or len(sums)
    lines = []
    for first in range(0, len(sums), step):
        shift = f" + {first // step} * group_step" if first else ""
        lines.append(f"{indent}x = vector_splat_at(source, {at}{shift}, {lanes})")
        lines += [f"{indent}{sums[v]} = {product}(x, {weight(v)}, {sums[v]})"
                  for v in range(first, min(len(sums), first + step))]
    return lines


def _taps_loop(lanes: int, accumulators: list[list[str]], offsets: list[str],
               product: str, span: int | None = None) -> list[str]:
    """The body of a block's loop over one tap's input channels (source lines): the
    tap's weight row of ``vectors`` vectors loaded once, each output's input (at
    ``read`` plus its ``offsets`` entry; per group with ``span``, :func:`_products`)
    broadcast and multiplied into its accumulators by the intrinsic ``product``
    (:data:`PRODUCTS`)."""
    vectors = len(accumulators[0])
    lines = ["        tap = taps[m] + column",
             "        for _ in range(channels):"]
    lines += [f"            w_{v} = vector_load(weights, tap + {v * lanes}, {lanes})"
              for v in range(vectors)]
    for offset, row in zip(offsets, accumulators):
        lines += _products(lanes, f"read + {offset}", row, lambda v: f"w_{v}", product,
                           span, " " * 12)
    return lines + ["            tap += row_width",
                    "            read += channel_step"]


def _block_body(lanes: int, accumulators: list[list[str]], accumulate: bool, read: str,
                stores: list[str], offsets: list[str], product: str,
                span: int | None = None) -> list[str]:
    """A block's body (source lines): its accumulators zeroed, or loaded from where
    output ``p`` is stored (``stores[p]``) with ``accumulate``; for every tap, the read
    ``read`` and :func:`_taps_loop` with the outputs' read ``offsets``; then each
    output's sums stored at ``stores[p]``."""
    if accumulate:
        lines = [f"    {name} = vector_load(dest, {stores[p]} + {v * lanes}, {lanes})"
                 for p, row in enumerate(accumulators) for v, name in enumerate(row)]
    else:
        lines = [f"    {name} = vector_zero(weights, {lanes})" for row in accumulators
                 for name in row]
    lines += ["    for m in range(count):",
              f"        read = {read}"]
    lines += _taps_loop(lanes, accumulators, offsets, product, span)
    for p, row in enumerate(accumulators):
        lines += [f"    vector_store(dest, {stores[p]} + {v * lanes}, {name})"
                  for v, name in enumerate(row)]
    return lines


def _group_step(span: int | None) -> str:
    """The parameter a block across groups takes last (``span`` not None)."""
    return "" if span is None else ", group_step"


def block_source(lanes: int, vectors: int, pixels: int, accumulate: bool = False,
                 product: str = "vector_fma", span: int | None = None) -> str:
    """Source of the register-blocked kernel for ``pixels`` outputs of ``vectors * lanes`` channels.

    Every accumulator is its own vector variable (``pixels * vectors`` of them, all
    in registers); per tap and input channel, the channel's weight row is loaded
    once and multiplied into every pixel's accumulators with that pixel's input
    value broadcast.  The channels are those from ``column`` of weight rows
    ``row_width`` long (a slice of wider rows when those need too many registers).
    The sums start at zero, or with ``accumulate`` at what ``dest`` holds.

    ``span``: a block across groups, whose output channels are those of several
    groups side by side, ``span`` vectors each: the kernel takes one more argument,
    ``group_step``, the distance between two groups' first input channels, and each
    group's vectors multiply that group's inputs (None: no such argument; 0: taken,
    and the block is of one group).
    """
    accumulators = [[f"acc_{p}_{v}" for v in range(vectors)] for p in range(pixels)]
    lines = ["def block(source, weights, dest, dest_at, dest_step, reads, taps, count, read_at,",
             f"          pixel_step, channel_step, channels, column, row_width"
             f"{_group_step(span)}):"]
    lines += _block_body(lanes, accumulators, accumulate, "reads[m] + read_at",
                         [f"dest_at + {p} * dest_step" for p in range(pixels)],
                         [f"{p} * pixel_step" for p in range(pixels)], product, span)
    return "\n".join(lines) + "\n"


def cross_block_source(lanes: int, vectors: int, pixels: int, accumulate: bool = False,
                       product: str = "vector_fma", span: int | None = None) -> str:
    """Source of the register-blocked kernel for ``pixels`` outputs anywhere in the data.

    :func:`block_source`'s block (``span`` as there), each output with its own place:
    output ``p`` reads at ``read_at + bases[p]`` plus each tap's read and is stored at
    ``dest_at + dests[p]``, so that a block can take outputs of several lines (those
    with the same taps), never a short block at a line's end.
    """
    accumulators = [[f"acc_{p}_{v}" for v in range(vectors)] for p in range(pixels)]
    lines = ["def block(source, weights, dest, dest_at, dests, bases, reads, taps, count,",
             f"          read_at, channel_step, channels, column, row_width{_group_step(span)}):"]
    lines += [f"    at_{p} = dest_at + dests[{p}]" for p in range(pixels)]
    lines += [f"    base_{p} = read_at + bases[{p}]" for p in range(pixels)]
    lines += _block_body(lanes, accumulators, accumulate, "reads[m]",
                         [f"at_{p}" for p in range(pixels)], [f"base_{p}" for p in range(pixels)],
                         product, span)
    return "\n".join(lines) + "\n"


def single_source(lanes: int, vectors: int, splits: int = 4,
                  product: str = "vector_fma", span: int | None = None) -> str:
    """Source of the kernel for one output (with its own taps) of ``vectors * lanes`` channels.

    For the outputs at the ends of a line, whose taps differ from their neighbours':
    ``splits`` sets of accumulators take the input channels in turn (independent
    FMA chains, so their latency overlaps) and are summed at the end.  The channels
    are those from ``column`` of weight rows ``row_width`` long, as in
    :func:`block_source`, and ``span`` as there.
    """
    sets = [[f"acc_{k}_{v}" for v in range(vectors)] for k in range(splits)]
    lines = ["def single(source, weights, dest, dest_at, reads, taps, count, read_at,",
             f"           channel_step, channels, column, row_width{_group_step(span)}):"]
    lines += [f"    {name} = vector_zero(weights, {lanes})" for row in sets for name in row]
    lines += ["    for m in range(count):",
              "        read = reads[m] + read_at",
              "        tap = taps[m] + column",
              f"        for _ in range(channels // {splits}):"]
    for k, row in enumerate(sets):
        lines += _products(lanes, f"read + {k} * channel_step", row,
                           lambda v, k=k: f"vector_load(weights, tap + {k} * row_width +"
                                          f" {v * lanes}, {lanes})", product, span, " " * 12)
    lines += [f"            tap += {splits} * row_width",
              f"            read += {splits} * channel_step",
              f"        for _ in range(channels % {splits}):"]
    lines += _products(lanes, "read", sets[0],
                       lambda v: f"vector_load(weights, tap + {v * lanes}, {lanes})", product,
                       span, " " * 12)
    lines += ["            tap += row_width",
              "            read += channel_step"]
    for v in range(vectors):
        total = sets[0][v]
        for row in sets[1:]:
            total = f"vector_add({total}, {row[v]})"
        lines.append(f"    vector_store(dest, dest_at + {v * lanes}, {total})")
    return "\n".join(lines) + "\n"
