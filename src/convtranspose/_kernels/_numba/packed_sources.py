"""The sources of :mod:`.packed`'s micro-kernels, generated per block shape.

Each kernel is written out as Python for numba with its register block unrolled: one
named sum per row and vector (``s{row}_{vector}``), so that LLVM keeps every sum in a
vector register over the whole reduction, as oneDNN's and XNNPACK's GEMM kernels do.
:func:`product_source` is the channels-first product ``c[n, g] = a[g] @ b[n, g]``
(vectors along the positions, one weight broadcast per row); :func:`rows_source` the
channels-last one ``c[r, g] = b[r, g] @ a[g]`` (vectors along the output channels, one
data value broadcast per row).  :mod:`.packed` compiles them and documents their
arguments.
"""

from __future__ import annotations

__all__ = ["product_source", "rows_source"]


def _sums_lines(block_rows: int, vectors: int, lanes: int, indent: str, steps: str,
                loaded: tuple, broadcast: tuple) -> list[str]:
    """A register block's sums ``s{row}_{vector}`` over ``steps`` steps ``k``: per step,
    ``vectors`` vectors loaded into ``{name}{vector}`` from ``loaded`` (its name, and the
    array and index of vector 0 in that step), and for each of ``block_rows`` rows one
    value broadcast into a register from ``broadcast`` (its name, and the array and
    index of that row's value as a function of the row) and multiplied into the row's
    sums, as both micro-kernels of this module run them."""
    (load, at), (splat, value) = loaded, broadcast
    lines = [f"{indent}s{r}_{v} = vector_zero(packed, {lanes})"
             for r in range(block_rows) for v in range(vectors)]
    lines.append(f"{indent}for k in range({steps}):")
    lines += [f"{indent}    {load}{v} = vector_load({at} + {v * lanes}, {lanes})"
              for v in range(vectors)]
    for r in range(block_rows):
        lines.append(f"{indent}    {splat} = vector_splat_at({value(r)}, {lanes})")
        lines += [f"{indent}    s{r}_{v} = vector_fma({splat}, {load}{v}, s{r}_{v})"
                  for v in range(vectors)]
    return lines


def _block_lines(block_rows: int, vectors: int, lanes: int, width: int,
                 indent: str, spread: bool = False, tail: int = 0) -> list[str]:
    """The micro-kernel: the sums of one row block over a pass of the reduction, for the
    first ``vectors`` vectors of a panel of ``width`` positions, then their store: set
    on the first pass, added on the others; straight into ``c`` when the block is
    whole, else through the tile.  ``spread``: row ``m`` and position ``q`` go to
    ``c[c_at + row_base[m] + pos_map[q]]`` rather than to row ``m`` of a matrix.  A
    block short of rows or positions stores its first pass by masked stores (scatters)
    of its live rows: one element at a time through the tile, a 5x5 image's 25
    positions, all of them tail, took most of a stride-4 1x1 layer's call.  ``tail``:
    the loop also sums up to that many positions after the vectors the other way round
    (:func:`_tail_lines`)."""
    lines = _sums_lines(block_rows, vectors, lanes, indent, "count_k",
                        ("b", f"scratch, panel_at + k * {width}"),
                        ("a", lambda r: f"packed, a_at + k * {block_rows} + {r}"))
    if spread:
        element = "c_at + row_base[m0 + r] + pos_map[first + p + j]"
    else:
        element = "c_at + r * columns + p + j"
    if tail:
        start, step, store = _tail_lines(block_rows, vectors * lanes, lanes, width, indent,
                                         tail, element)
        lines = start + lines + step
    else:
        store = []
    return lines + _block_stores(block_rows, vectors, lanes, indent, spread, element) + store


def _tail_lines(block_rows: int, first: int, lanes: int, width: int, indent: str, tail: int,
                element: str) -> tuple[list[str], list[str], list[str]]:
    """A panel's last few positions, after its first ``first`` (whole vectors), summed
    with the vectors along the block's rows: per step one masked load of the block's
    weights (``ceil(block_rows / lanes)`` vectors) and, for each of ``tail`` positions,
    one broadcast data value and as many multiply-adds.  A position then costs
    ``ceil(block_rows / lanes)`` multiply-adds per step rather than the ``block_rows`` of
    a vector of positions, of which a 7x7 image's 49th would use one lane.  Positions
    past the panel's last are zeros of the panel and are never stored.  Returns the
    lines that start the sums ``t{position}_{vector}``, those of each step (in the
    block's loop, so that both blocks' multiply-adds overlap), and the stores through
    the tile (set on the first pass, added on the others)."""
    row_vectors = -(-block_rows // lanes)
    sums = [(q, u) for q in range(tail) for u in range(row_vectors)]
    start = [f"{indent}t{q}_{u} = vector_zero(packed, {lanes})" for q, u in sums]
    step = [f"{indent}    w{u} = vector_load_first(packed, a_at + k * {block_rows} + "
            f"{u * lanes}, {min(lanes, block_rows - u * lanes)}, {lanes})"
            for u in range(row_vectors)]
    for q in range(tail):
        step.append(f"{indent}    x = vector_splat_at(scratch, panel_at + k * {width} + "
                    f"{first + q}, {lanes})")
        step += [f"{indent}    t{q}_{u} = vector_fma(x, w{u}, t{q}_{u})"
                 for u in range(row_vectors)]
    store = [f"{indent}vector_store(scratch, tile_at + {(q * row_vectors + u) * lanes}, "
             f"t{q}_{u})" for q, u in sums]
    store += [f"{indent}for j in range({first}, min(count - p, {first + tail})):",
              f"{indent}    for r in range(live):",
              f"{indent}        sums = scratch[tile_at + (j - {first}) * "
              f"{row_vectors * lanes} + r]",
              f"{indent}        at = {element}",
              f"{indent}        c[at] = sums if k0 == 0 else c[at] + sums"]
    return start, step, store


def _block_stores(block_rows: int, vectors: int, lanes: int, indent: str, spread: bool,
                  element: str) -> list[str]:
    """:func:`_block_lines`'s stores of the sums ``s{row}_{vector}``."""
    lines = []
    stored = vectors * lanes
    whole = f"live == {block_rows} and p + {stored} <= count"
    if spread:
        def place(r, v):
            return f"c, c_at + row_base[m0 + {r}], pos_map, first + p + {v * lanes}"

        set_lines = [f"vector_store_spread({place(r, v)}, s{r}_{v})"
                     for r in range(block_rows) for v in range(vectors)]
        add_lines = [f"vector_store_spread({place(r, v)}, vector_add(vector_load_spread("
                     f"{place(r, v)}, {lanes}), s{r}_{v}))"
                     for r in range(block_rows) for v in range(vectors)]

        def masked_store(r, v):
            return f"vector_store_spread_first({place(r, v)}, count - p - {v * lanes}, s{r}_{v})"
    else:
        set_lines = [f"vector_store(c, c_at + p + {r} * columns + {v * lanes}, s{r}_{v})"
                     for r in range(block_rows) for v in range(vectors)]
        add_lines = [f"at = c_at + p + {r} * columns + {v * lanes}\n{indent}    "
                     f"vector_store(c, at, vector_add(vector_load(c, at, {lanes}), s{r}_{v}))"
                     for r in range(block_rows) for v in range(vectors)]

        def masked_store(r, v):
            return (f"vector_store_first(c, c_at + p + {r} * columns + {v * lanes}, "
                    f"count - p - {v * lanes}, s{r}_{v})")
    lines.append(f"{indent}if {whole} and k0 == 0:")
    if spread:
        lines += _paired_stores(block_rows, vectors, lanes, indent + "    ", set_lines)
    else:
        lines += [f"{indent}    {line}" for line in set_lines]
    lines.append(f"{indent}elif {whole}:")
    lines += [f"{indent}    {line}" for line in add_lines]
    # A panel's last positions or a block's last rows, first pass: masked stores of
    # the live rows.
    lines.append(f"{indent}elif k0 == 0:")
    for r in range(block_rows):
        lines.append(f"{indent}    if live > {r}:")
        lines += [f"{indent}        {masked_store(r, v)}" for v in range(vectors)]
    lines.append(f"{indent}else:")
    lines += [f"{indent}    vector_store(scratch, tile_at + {r * stored + v * lanes}, s{r}_{v})"
              for r in range(block_rows) for v in range(vectors)]
    lines += [f"{indent}    for r in range(live):",
              f"{indent}        for j in range(min({stored}, count - p)):",
              f"{indent}            sums = scratch[tile_at + r * {stored} + j]",
              f"{indent}            at = {element}",
              f"{indent}            c[at] = sums if k0 == 0 else c[at] + sums"]
    return lines


def _paired_stores(block_rows: int, vectors: int, lanes: int, indent: str,
                   scatters: list[str]) -> list[str]:
    """A whole spread block's first-pass stores, vector by vector: where the block's rows
    pair up (``paired``: rows ``2j`` and ``2j + 1`` land side by side) and the vector's
    positions land two apart (:class:`.packed.Spread`'s ``pairs``), each pair of rows
    goes out interleaved by two plain stores; where its positions make two such runs
    (a vector across the end of an input row), by four masked stores, each run's part of
    the interleaved pair; else by the ``scatters`` (one line per row and vector, rows
    first).  A scatter stores a lane at a time: with scatters alone, the in-place
    products of five k2 s2 layers took 1.09-1.39x the time (AMD Zen 4,
    ``benchmarks/results/spread-stores-zen4.json``)."""
    if block_rows % 2:
        return [indent + line for line in scatters]
    lines = []
    for v in range(vectors):
        lines += [f"{indent}q = first + p + {v * lanes}",
                  f"{indent}run = pairs[q]",
                  f"{indent}if paired and run >= {lanes}:"]
        for r in range(0, block_rows, 2):
            at = f"c_at + row_base[m0 + {r}] + pos_map[q]"
            lines += [f"{indent}    at = {at}",
                      f"{indent}    vector_store(c, at, vector_interleave(s{r}_{v}, "
                      f"s{r + 1}_{v}, 0))",
                      f"{indent}    vector_store(c, at + {lanes}, vector_interleave("
                      f"s{r}_{v}, s{r + 1}_{v}, 1))"]
        # Two runs: the first run's 2 * run values of the interleaved pair go from the
        # first run's place, the rest from the second's, each by the masked lanes.
        lines += [f"{indent}elif paired and pairs[q + run] >= {lanes} - run:",
                  f"{indent}    split = 2 * run"]
        for r in range(0, block_rows, 2):
            low, high = (f"vector_interleave(s{r}_{v}, s{r + 1}_{v}, {half})"
                         for half in (0, 1))
            lines += [f"{indent}    at = c_at + row_base[m0 + {r}]",
                      f"{indent}    later = at + pos_map[q + run] - split",
                      f"{indent}    at += pos_map[q]",
                      f"{indent}    vector_store_lanes(c, at, 0, split, {low})",
                      f"{indent}    vector_store_lanes(c, at + {lanes}, 0, split - {lanes}, "
                      f"{high})",
                      f"{indent}    vector_store_lanes(c, later, split, {lanes}, {low})",
                      f"{indent}    vector_store_lanes(c, later + {lanes}, split - {lanes}, "
                      f"{lanes}, {high})"]
        lines.append(f"{indent}else:")
        lines += [f"{indent}    {scatters[r * vectors + v]}" for r in range(block_rows)]
    return lines


def product_source(block_rows: int, vectors: int, lanes: int, spread: bool = False) -> str:
    """The kernel's source: units ``[start, stop)`` of (sample and group, chunk, row
    block).  Per chunk and pass of ``steps`` reduction steps, its panels are copied
    into ``scratch`` once per thread; then each row block runs through every panel in
    turn (its weights for the pass stay in L1, the panels in L2).  A panel with at most
    one vector of positions left runs a one-vector block, one with at most half a vector
    more runs the one-vector block and those positions along the rows in one loop
    (:func:`_tail_lines`), where the block's rows make that fewer multiply-adds than a
    second vector of positions: each row of a 7x7 image takes three vectors of
    positions and a tail, not four vectors.  The last ``block_rows * width`` values of
    ``scratch`` are a tile for blocks past ``M`` or ``P``.  ``spread``: the stores of
    :func:`_block_lines`'s spread form, from image ``image``'s ``c_at = image *
    image_size``."""
    width = vectors * lanes
    place = (f"image * image_size\n                m0 = block * {block_rows}" if spread
             else f"(image * rows + block * {block_rows}) * columns + first")
    tables = "row_base, pos_map, image_size, pairs, " if spread else ""
    # Whether the block's rows pair up, each even row's places one before the next's.
    pairing = (f"""
                paired = live == {block_rows}
                for r in range(0, {block_rows}, 2):
                    paired = paired and row_base[m0 + r + 1] == row_base[m0 + r] + 1"""
               if spread and block_rows % 2 == 0 else "")
    head = f"""\
def packed_product(packed, b, c, scratch, depth, steps, rows, columns, chunk, blocks, chunks,
                   groups, {tables}start, stop):
    panel_size = steps * {width}
    base = (64 - scratch.ctypes.data % 64) % 64 // scratch.itemsize  # aligned panels
    tile_at = base + (chunk + {width - 1}) // {width} * panel_size
    for part in range(start // blocks, (stop + blocks - 1) // blocks):
        image = part // chunks
        first = part % chunks * chunk
        count = min(chunk, columns - first)
        block_first = max(start, part * blocks) - part * blocks
        block_stop = min(stop, (part + 1) * blocks) - part * blocks
        whole = count - count % {lanes}
        for k0 in range(0, depth, steps):
            count_k = min(steps, depth - k0)
            b_at = (image * depth + k0) * columns + first
            for k in range(count_k):
                for j in range(0, whole, {lanes}):
                    vector_store(scratch, base + j // {width} * panel_size + k * {width}
                                 + j % {width}, vector_load(b, b_at + k * columns + j, {lanes}))
                for j in range(whole, (count + {width - 1}) // {width} * {width}):
                    at = base + j // {width} * panel_size + k * {width} + j % {width}
                    scratch[at] = b[b_at + k * columns + j] if j < count else 0.0
            for block in range(block_first, block_stop):
                a_at = (((image % groups) * blocks + block) * depth + k0) * {block_rows}
                c_at = {place}
                live = min({block_rows}, rows - block * {block_rows}){pairing}
                for p in range(0, count, {width}):
                    panel_at = base + p // {width} * panel_size
"""
    if vectors == 1:
        return head + _blocks_by_width(
            lambda count, indent: _block_lines(block_rows, 1, lanes, width, indent, spread),
            1, "", 20)
    tail = lanes // 2
    if tail * -(-block_rows // lanes) >= block_rows:  # a short block: a vector costs less
        return head + _blocks_by_width(
            lambda count, indent: _block_lines(block_rows, count, lanes, width, indent,
                                               spread),
            vectors, f"count - p > {lanes}", 20)
    indent = " " * 20
    body = [f"{indent}if count - p > {lanes + tail}:"]
    body += _block_lines(block_rows, vectors, lanes, width, indent + "    ", spread)
    body.append(f"{indent}elif count - p > {lanes}:")
    body += _block_lines(block_rows, 1, lanes, width, indent + "    ", spread, tail)
    body.append(f"{indent}else:")
    body += _block_lines(block_rows, 1, lanes, width, indent + "    ", spread)
    return head + "\n".join(body) + "\n"


def _blocks_by_width(block_lines, vectors: int, wider: str, indent: int) -> str:
    """The source that runs a block of ``vectors`` vectors where the condition ``wider``
    holds (more than one vector left), else a one-vector block, at ``indent`` spaces:
    ``block_lines(vectors, indent)`` gives a block's lines."""
    if vectors == 1:
        return "\n".join(block_lines(1, " " * indent)) + "\n"
    body = [" " * indent + f"if {wider}:"]
    body += block_lines(vectors, " " * (indent + 4))
    body.append(" " * indent + "else:")
    body += block_lines(1, " " * (indent + 4))
    return "\n".join(body) + "\n"


def _rows_block_lines(block_rows: int, vectors: int, lanes: int, width: int,
                      indent: str, spread: str = "") -> list[str]:
    """The channels-last micro-kernel over the whole reduction for the first ``vectors``
    vectors of a column block of ``width`` packed columns, then its store: straight
    into ``c`` at rows ``c{r}`` when the block is whole, else through the tile (rows
    past ``R`` read the block's first row again, and their sums are dropped).
    ``spread``: column ``m`` of row ``r`` goes to ``c[c{r} + columns_at[m]]`` (a scatter,
    or ``"runs"``, one store from the place of each vector's first column)."""
    lines = _sums_lines(block_rows, vectors, lanes, indent, "depth",
                        ("a", f"packed, a_at + k * {width}"),
                        ("x", lambda r: f"b, b{r} + k"))
    stored = vectors * lanes
    lines.append(f"{indent}if live == {block_rows} and first + {stored} <= columns:")
    if spread == "runs":
        lines += [f"{indent}    vector_store(c, c{r} + columns_at[inner + {v * lanes}], "
                  f"s{r}_{v})" for r in range(block_rows) for v in range(vectors)]
    elif spread:
        lines += [f"{indent}    vector_store_spread(c, c{r}, columns_at, inner + {v * lanes}, "
                  f"s{r}_{v})" for r in range(block_rows) for v in range(vectors)]
    else:
        lines += [f"{indent}    vector_store(c, c{r} + {v * lanes}, s{r}_{v})"
                  for r in range(block_rows) for v in range(vectors)]
    lines.append(f"{indent}else:")
    lines += [f"{indent}    vector_store(scratch, tile_at + {r * stored + v * lanes}, s{r}_{v})"
              for r in range(block_rows) for v in range(vectors)]
    place = ("c_rows[row + r] + columns_at[inner + j]" if spread else
             "(c_rows[row + r] if strided else (row + r) * c_step) + inner + j")
    lines += [f"{indent}    for r in range(live):",
              f"{indent}        for j in range(min({stored}, columns - first)):",
              f"{indent}            c[{place}] = scratch[tile_at + r * {stored} + j]"]
    return lines


def rows_source(block_rows: int, vectors: int, lanes: int, spread: str = "") -> str:
    """The channels-last kernel's source: units ``[start, stop)`` of (group, column
    block, row block), after this piece's share of the zero spans (elements in
    proportion to its units).  A column block with at most one vector of columns left
    runs a one-vector block (a filter of 3 output channels computes one vector per row,
    not two)."""
    width = vectors * lanes
    row_pointers = "\n".join(
        f"        b{r} = b_at + min({r}, live - 1) * b_step\n" + (
            f"        c{r} = c_rows[row + min({r}, live - 1)]" if spread else
            f"        c{r} = (c_rows[row + min({r}, live - 1)] if strided"
            f" else (row + {r}) * c_step) + inner") for r in range(block_rows))
    table = "columns_at, " if spread else ""
    head = f"""\
def packed_rows_product(packed, b, c, c_rows, zeros, scratch, rows, groups, depth, columns,
                        row_blocks, column_blocks, {table}start, stop):
    base = (64 - scratch.ctypes.data % 64) % 64 // scratch.itemsize
    tile_at = base
    b_step = groups * depth
    c_step = groups * columns
    strided = c_rows.shape[0] > 0
    units = groups * column_blocks * row_blocks
    spans = zeros.shape[0]
    if spans:
        total = 0
        for span in range(spans):
            total += zeros[span, 1]
        zero = vector_zero(packed, {lanes})
        first_zero = total * start // units
        stop_zero = total * stop // units
        done = 0
        for span in range(spans):
            length = zeros[span, 1]
            low = max(first_zero - done, 0)
            high = min(stop_zero - done, length)
            at = zeros[span, 0] + low
            vectors_end = at + max(high - low, 0) // {lanes} * {lanes}
            for j in range(at, vectors_end, {lanes}):
                vector_store(c, j, zero)
            for j in range(vectors_end, zeros[span, 0] + high):
                c[j] = 0.0
            done += length
            if done >= stop_zero:
                break
    for unit in range(start, stop):
        row_block = unit % row_blocks
        column_block = unit // row_blocks % column_blocks
        group = unit // (row_blocks * column_blocks)
        row = row_block * {block_rows}
        live = min({block_rows}, rows - row)
        first = column_block * {width}
        a_at = (group * column_blocks + column_block) * depth * {width}
        b_at = row * b_step + group * depth
        inner = group * columns + first
{row_pointers}
"""
    return head + _blocks_by_width(
        lambda count, indent: _rows_block_lines(block_rows, count, lanes, width, indent,
                                                spread),
        vectors, f"columns - first > {lanes}", 8)
