"""The register-blocked kernel of ``direct-blocked`` (:mod:`convtranspose._kernels._numba.blocked`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``_GROUP_MAX_LINES``, ``KEEP``,
``_phase_taps``, ``_rounded_line``, ``gather_row_taps``, ``block``, ``cross``, ``cross_on``, ``chunk_width``,
``lanes``, ``np``, ``pixels``, ``single``, ``store``, ``transpose``.  Those are the
block shape, the machine's vectors and the store mode alone (``store``: ``KEEP`` writes
``out``, the sums' dtype, ``FLOAT16``/``BFLOAT16`` round into ``bits``; the other is an
empty placeholder of its type; a sums kernel never compiles the rounding): channel counts, the width of the weight rows, taps,
strides and sizes come at run time, so that one compiled kernel serves every layer
of its dtype and block shape.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

# Every argument of a call to another kernel is a run-time int64 or a C-contiguous 1-D
# array, and counters start at np.int64(0), not at a literal: numba compiles a called
# kernel once per argument type it sees, and a literal (even one that type inference
# later widens) is a type of its own, so each would compile the callee again.
# phase_ends and store_line are inlined into `kernel`, where each is called once: a
# kernel of its own is optimised and compiled to machine code again inside every
# kernel that calls it (numba links and re-optimises callees), as each level of calls
# costs another second or two.

@cached_njit(nogil=True, inline="always")
def phase_ends(source, weights, dest, reads, taps, shifts, count, first, last, j_first,
               j_stop, p3, line_at, step, s3, lines, line_step, read_step, in_3, in_c, ci,
               size3, width, panel, edge_reads, edge_taps, blocked, group_step,
               co_g):  # pragma: no cover - compiled
    # The outputs j * s3 + p3, j in [j_first, j_stop), of `lines` lines that the
    # lines' blocks leave: those with taps outside the input's last axis.  (A block
    # across groups reads each chunk's first group `column // co_g * group_step` on,
    # and its later groups `group_step` apart.)  Line k
    # reads at reads + k * read_step and is written at line_at + k * line_step;
    # outputs hold `width` channels, taken `chunk_width` at a time.  Each such output
    # is a column across the lines with the same taps: blocks take `pixels` lines at
    # a time (its weights loaded once per block, not once per output), and fewer
    # lines than a block go one output at a time.  `blocked`: phase_blocks took the
    # outputs [first, last) of every line.
    for jj in range(j_first, j_stop):
        if blocked and first <= jj < last:
            continue
        edges = np.int64(0)
        for m in range(count):
            if 0 <= jj + shifts[m] < size3:
                edge_reads[edges] = reads[m]
                edge_taps[edges] = taps[m]
                edges += 1
        at = line_at + (jj * s3 + p3) * step
        if lines < pixels:
            for k in range(lines):
                for column in range(0, width, chunk_width):
                    single(source, weights, dest, at + k * line_step + column, edge_reads,
                           edge_taps, edges,
                           jj * in_3 + k * read_step + column // co_g * group_step, in_c,
                           ci, column // chunk_width * panel, chunk_width, group_step)
            continue
        k = np.int64(0)
        while k < lines:
            k = min(k, lines - pixels)  # the last block overlaps its predecessor
            for column in range(0, width, chunk_width):
                block(source, weights, dest, at + k * line_step + column, line_step,
                      edge_reads, edge_taps, edges,
                      jj * in_3 + k * read_step + column // co_g * group_step, read_step,
                      in_c, ci, column // chunk_width * panel, chunk_width, group_step)
            k += pixels

@cached_njit(nogil=True, inline="always")
def block_places(bases, dests, k, j, first, last, p3, s3, step, line_step, read_step,
                 in_3):  # pragma: no cover - compiled
    # The places of a block's outputs from output j of line k on, along the lines'
    # runs [first, last): each one's read (bases) and store (dests) offsets.  Returns
    # the output after the block's last.  (No division per output: a block of few
    # channels costs about as much as two dozen divisions.)
    for p in range(pixels):
        bases[p] = j * in_3 + k * read_step
        dests[p] = k * line_step + (j * s3 + p3) * step
        j += 1
        if j == last:
            k, j = k + 1, first
    return k, j

@cached_njit(nogil=True, inline="always")
def phase_blocks(source, weights, dest, reads, taps, count, first, last, p3, line_at, step,
                 s3, lines, line_step, read_step, in_3, in_c, ci, ci_block, width, panel,
                 bases, dests, group_step, co_g):  # pragma: no cover - compiled
    # The outputs j * s3 + p3, j in [first, last), of `lines` lines with the same taps
    # (line k reads at reads + k * read_step and is written at line_at + k *
    # line_step), whose taps all read inside the input, in blocks of `pixels` taken
    # across the lines (output q is j = first + q % run of line q // run), so that
    # no line's end leaves a short block; the last block overlaps its predecessor (a
    # few outputs computed twice).  Returns whether it took them (else phase_ends
    # does: fewer of them than a block).  Per chunk of channels, the input channels
    # go in blocks whose weights stay in L1 while every whole block adds them; the
    # overlapping block then takes every input channel at once: adding a channel
    # block to an output twice would count it twice.
    run = last - first
    total = lines * run
    if run <= 0 or total < pixels:
        return False
    whole = total // pixels * pixels
    step_c = ci_block if whole >= 2 * pixels else ci
    # In channel blocks, about a line's outputs at a time (whole blocks): their partial
    # sums, reloaded for every channel block, stay in L1 (all of a group's lines' did
    # not, and DCGAN 256->128 channels first ran 1.3x slower on one thread).
    span = max(pixels, run // pixels * pixels) if step_c < ci else whole
    for q_first in range(0, whole, span):
        q_stop = min(whole, q_first + span)
        for column in range(0, width, chunk_width):
            panel_at = column // chunk_width * panel
            group_at = column // co_g * group_step  # as in phase_ends
            for c0 in range(0, ci, step_c):
                channels = min(step_c, ci - c0)
                k, j = q_first // run, first + q_first % run  # the next block's first
                for q0 in range(q_first, q_stop, pixels):
                    k, j = block_places(bases, dests, k, j, first, last, p3, s3, step,
                                        line_step, read_step, in_3)
                    if c0 == 0:
                        cross(source, weights, dest, line_at + column, dests, bases, reads,
                              taps, count, group_at, in_c, channels, panel_at, chunk_width,
                              group_step)
                    else:
                        cross_on(source, weights, dest, line_at + column, dests, bases,
                                 reads, taps, count, group_at + c0 * in_c, in_c, channels,
                                 panel_at + c0 * chunk_width, chunk_width, group_step)
    if whole < total:
        block_places(bases, dests, (total - pixels) // run, first + (total - pixels) % run,
                     first, last, p3, s3, step, line_step, read_step, in_3)
        for column in range(0, width, chunk_width):
            cross(source, weights, dest, line_at + column, dests, bases, reads, taps, count,
                  column // co_g * group_step, in_c, ci, column // chunk_width * panel,
                  chunk_width, group_step)
    return True

@cached_njit(nogil=True, inline="always")
def store_line(out, bits, bias, tile, tile_at, line, out_3, out_c, co, y_first, y_stop,
               g, width):  # pragma: no cover - compiled
    # A line's outputs [y_first, y_stop) from the tile (`width` sums per output, output
    # y3 at tile_at + y3 * width) into the output: rounded, or channels last, or
    # channels first.
    if store != KEEP:
        _rounded_line(bits, tile, bias, store, line, out_3, out_c, co, width, tile_at,
                      y_first, y_stop, g * co)
    elif out_c == 1:
        for y3 in range(y_first, y_stop):
            for o in range(co):
                out[line + y3 * out_3 + o] = tile[tile_at + y3 * width + o]
    else:
        # Channels first: blocks of lanes x lanes transposed in registers, the
        # channels and outputs past the last whole block one at a time.
        y_whole = y_first + (y_stop - y_first) // lanes * lanes if out_3 == 1 else y_first
        o_whole = co - co % lanes
        for y3 in range(y_first, y_whole, lanes):
            for o in range(0, o_whole, lanes):
                transpose(tile, tile_at + y3 * width + o, width, out, line + o * out_c + y3,
                          out_c)
        for o in range(co):
            for y3 in range(y_whole if o < o_whole else y_first, y_stop):
                out[line + o * out_c + y3 * out_3] = tile[tile_at + y3 * width + o]

@cached_njit(nogil=True)
def kernel(source, weights, out, bits, bias, sizes, in_steps, out_steps, line_order,
           tap_k, tap_shift, tap_count, segments, start, stop):  # pragma: no cover
    # Flat buffers in any layout: element (n, x1, x2, x3, channel) of the source is at
    # n*in_steps[0] + x1*in_steps[1] + x2*in_steps[2] + x3*in_steps[3] +
    # channel*in_steps[4], the output likewise with out_steps; weights (width /
    # chunk_width, G, K1, K2, K3, Ci, chunk_width), zero beyond Co; bias (G*Co,) or empty, added by rounding stores only.
    # sizes = (N, G, Ci, Co, X1, X2, X3, Y1, Y2, Y3, K2,
    # K3, K, S1, S2, S3, width, tile, ci_block, span_ci, co_g): `width` channels per
    # output in the weights and the tile (Co rounded up to whole chunks), `tile` the
    # most sums a group's tile holds, `ci_block` the input channels a block adds at a
    # time; `span_ci` the input channels of each group of a layer whose groups this
    # pass takes side by side (blocks across groups: G is 1, Ci a group's and Co
    # theirs together, each group's `co_g` output channels reading its own inputs),
    # else 0 (and `co_g` any positive number).  Computes the output lines (g, n, y1, y2) (the group's Co
    # channels), each cut into `segments` runs of Y3 (so that a layer of fewer
    # lines than threads keeps every thread busy), with flat index (line, segment)
    # in [start, stop), in groups of consecutive lines with the same taps (a segment
    # is a group of its own): per phase of the last axis, the group's outputs whose
    # taps all read inside the input in blocks of `pixels` across its lines
    # (phase_blocks), then the remaining outputs with their own taps (phase_ends).
    # Every output element is written (those of overlapping blocks twice, with equal
    # values).
    batch, ci, co = sizes[0], sizes[2], sizes[3]
    size1, size2, size3 = sizes[4], sizes[5], sizes[6]
    out1, out2, out3 = sizes[7], sizes[8], sizes[9]
    k2_count, k3_count, k_volume = sizes[10], sizes[11], sizes[12]
    s1, s2, s3 = sizes[13], sizes[14], sizes[15]
    width, tile_most, ci_block = sizes[16], sizes[17], sizes[18]
    co_g = sizes[20]
    in_n, in_1, in_2, in_3, in_c = (in_steps[0], in_steps[1], in_steps[2], in_steps[3],
                                    in_steps[4])
    out_n, out_1, out_2, out_3, out_c = (out_steps[0], out_steps[1], out_steps[2],
                                         out_steps[3], out_steps[4])
    group_step = sizes[19] * in_c
    direct = out_c == 1 and co == width and store == KEEP
    # A line reads at most one tap per axis of its phase's, so its tap lists hold at
    # most the product of each axis's most taps per phase (not the widest axis's count
    # cubed: a 1-D filter of 601 taps would reserve 8.5 GB); _kernels/scratch.py counts
    # these lists and the tile.
    # (Loops, not ndarray.max: its compiled code costs more than the kernel's.)
    axis_most = np.ones(3, np.int64)
    for a in range(3):
        for p in range(tap_count.shape[1]):
            axis_most[a] = max(axis_most[a], tap_count[a, p])
    rows_most = axis_most[0] * axis_most[1]
    most = rows_most * axis_most[2]
    found = np.empty((rows_most, 4), np.int64)
    row_reads = np.empty(rows_most, np.int64)
    row_taps = np.empty(rows_most, np.int64)
    reads = np.empty(most, np.int64)
    taps = np.empty(most, np.int64)
    shifts = np.empty(most, np.int64)
    edge_reads = np.empty(most, np.int64)
    edge_taps = np.empty(most, np.int64)
    # Weights packed per chunk of output channels: (chunks, G, K1, K2, K3, Ci,
    # chunk_width), so that a block's weight rows follow one another in memory.
    tap_size = ci * chunk_width
    panel = sizes[1] * k_volume * tap_size
    # Whole lines (not segments): consecutive lines of one phase (along the second
    # axis, or the first where the second is a unit axis, as in 2-D layers) whose
    # reads differ by whole input rows wait for their group's end and go together
    # (phase_blocks, phase_ends).  Lines not written straight into the output are
    # kept in the tile until then: up to `tile_most` sums of it.
    grouped = segments == 1
    tile_line = out3 * width
    capacity = _GROUP_MAX_LINES
    if direct:
        tile_size = 0  # unused
    elif grouped:
        capacity = max(1, min(capacity, tile_most // tile_line))
        tile_size = capacity * tile_line
    else:  # a segment's tile holds that segment alone, its first output at 0
        tile_size = -(-out3 // segments) * width
    tile = np.empty(tile_size, weights.dtype)
    dest = out if direct else tile
    line_step = s2 * out_2 if out2 > 1 else s1 * out_1
    read_step = in_2 if out2 > 1 else in_1
    group_reads = np.empty(rows_most, np.int64)
    bases = np.empty(pixels, np.int64)
    dests = np.empty(pixels, np.int64)
    group_taps = np.empty(rows_most, np.int64)
    zero, one = np.int64(0), np.int64(1)
    # The pending group: `group_lines` lines from `group_line`, outputs [group_first,
    # group_stop) of the last axis (a segment, or whole lines), of group `group_g`.
    # A line that does not join it closes it first: its line ends, then (kept in the
    # tile, line k at k * tile_line, output y3 of a segment at (y3 - group_first) *
    # width) its lines stored.  A segment is a group of its own.  The round after
    # the last line closes the last group, so that the closing code is inlined once.
    group_rows, group_line, group_lines = zero, zero, zero
    group_g, group_first, group_stop = zero, zero, zero
    for item in range(start, stop + 1):
        more = item < stop
        joins = False
        if more:
            flat, segment = item // segments, item % segments
            y_first = out3 * segment // segments
            y_stop = out3 * (segment + 1) // segments
            # Lines in phase order: consecutive lines use the same taps (weights stay
            # in L1).
            y2 = line_order[out1 + flat % out2]
            y1 = line_order[(flat // out2) % out1]
            n = (flat // (out1 * out2)) % batch
            g = flat // (batch * out1 * out2)
            p1, j1 = y1 % s1, y1 // s1
            p2, j2 = y2 % s2, y2 // s2
            rows = gather_row_taps(found, j1, j2, p1, p2, tap_shift, tap_count, size1, size2)
            for r in range(rows):
                x1, x2, m1, m2 = found[r, 0], found[r, 1], found[r, 2], found[r, 3]
                row_reads[r] = n * in_n + x1 * in_1 + x2 * in_2 + g * ci * in_c
                row_taps[r] = g * k_volume + (tap_k[0, p1, m1] * k2_count
                                              + tap_k[1, p2, m2]) * k3_count
            line = n * out_n + y1 * out_1 + y2 * out_2 + g * co * out_c
            joins = grouped and 0 < group_lines < capacity and rows == group_rows and (
                line == group_line + group_lines * line_step)
            for r in range(rows if joins else 0):
                if (row_taps[r] != group_taps[r]
                        or row_reads[r] != group_reads[r] + group_lines * read_step):
                    joins = False
                    break
        if group_lines and not joins:
            ends_at, ends_step, ends_line_step = group_line, out_3, line_step
            if not direct:
                ends_at, ends_step, ends_line_step = -group_first * width, width, tile_line
            for p3 in range(min(s3, out3)):
                j_first = max(0, group_first - p3 + s3 - 1) // s3
                j_stop = max(0, group_stop - p3 + s3 - 1) // s3
                count, first, last = _phase_taps(group_reads, group_taps, group_rows, p3,
                                                 j_first, j_stop, size3, in_3, tap_k,
                                                 tap_shift, tap_count, tap_size, reads,
                                                 taps, shifts)
                blocked = phase_blocks(source, weights, dest, reads, taps, count, first,
                                       last, p3, ends_at, ends_step, s3, group_lines,
                                       ends_line_step, read_step, in_3, in_c, ci, ci_block,
                                       width, panel, bases, dests, group_step, co_g)
                phase_ends(source, weights, dest, reads, taps, shifts, count, first, last,
                           j_first, j_stop, p3, ends_at, ends_step, s3, group_lines,
                           ends_line_step, read_step, in_3, in_c, ci, size3, width,
                           panel, edge_reads, edge_taps, blocked, group_step, co_g)
            for k in range(zero if direct else group_lines):
                store_line(out, bits, bias, tile, k * tile_line - group_first * width,
                           group_line + k * line_step, out_3, out_c, co, group_first,
                           group_stop, group_g, width)
            group_lines = zero
        if not more:
            break
        if joins:
            group_lines += 1
        else:
            group_rows, group_line, group_lines = rows, line, one
            group_g, group_first, group_stop = g, y_first, y_stop
            # (A loop, not a slice assignment: that compiles its shape-mismatch
            # message, seconds of string formatting code.)
            for r in range(rows):
                group_reads[r] = row_reads[r]
                group_taps[r] = row_taps[r]
