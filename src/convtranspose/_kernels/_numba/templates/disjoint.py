"""The kernel of ``disjoint``: channels-first layers whose taps reach disjoint outputs
(:mod:`convtranspose._kernels._numba.disjoint`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals: ``lanes`` (elements per vector), ``ENTRIES`` (line vectors per block),
``block`` (the register block, generated: ``disjoint.block_source``), ``np``,
``vector_load``, ``vector_store_first``.  Sizes,
strides, dilations, offsets and the tables come at run time, so one compiled kernel per
vector width (numba adds the dtype) serves every such layer.  Its kernels' decorator,
``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def kernel(source, weights, out, scratch, sizes, rows0, taps0, reads2, band_first,
           band_x0, band_rows, group_first, group_weights, entry_reads, entry_places,
           entry_columns, start, stop):  # pragma: no cover - compiled
    # Items are (sample, group, band of rows y0 of the first axis, chunk of output
    # channels).  Each output takes at most one tap per axis, so a vector of an output
    # line (y0, y1) is, per input channel, a vector of the input line (x0, x1) repeated
    # along it times a weight vector whose lanes hold the tap each output meets.  The
    # item first copies the input lines its band reads into its scratch (``band_rows``
    # rows x0 from ``band_x0``; bands are as long as keeps them within half of L2),
    # each input at every output it reaches (``reads2``; zero where none).  The line
    # vectors of a row y0 come in groups that share their weight vectors (one tap of
    # the second axis, one pattern of lanes), and blocks of ENTRIES of them times 4
    # output channels are summed in registers over the input channels into a tile of
    # the 4 channels' rows y0 (lines no tap reaches stay zero there), then copied out.
    # Each of the 4 planes is written once, row y0 after row y0 of the band, in whole
    # cache lines.  Storing the blocks straight into the output, or a row y0 of every
    # channel before the next row, took twice as long (each cache line written partly,
    # or a few hundred streams at once, missing on its own).
    ci, co, groups = sizes[0], sizes[1], sizes[2]
    x0n, x1n, x2n = sizes[3], sizes[4], sizes[5]
    y0n, y1n, y2n = sizes[6], sizes[7], sizes[8]
    k0, line, chunks, chunk = sizes[9], sizes[10], sizes[11], sizes[12]
    vectors_k0 = sizes[13]  # weight vectors per input channel and tap of the first axis
    bands, band_most = sizes[14], sizes[15]  # bands of rows y0, input rows of the longest
    plane_in = x0n * x1n * x2n
    plane_out = y0n * y1n * y2n
    row_out = y1n * y2n
    e_row = x1n * line
    e_channel = band_most * e_row
    w_channel = k0 * vectors_k0 * ci * lanes  # from one output channel's to the next
    base = (-(scratch.ctypes.data // scratch.itemsize)) % lanes
    tile = base + ci * e_channel
    tile_channel = -(-row_out // lanes) * lanes
    for j in range(4 * tile_channel):
        scratch[tile + j] = 0.0  # the lines no tap reaches, which no block writes
    for item in range(start, stop):
        c = item % chunks
        band = (item // chunks) % bands
        image = item // chunks // bands  # sample * groups + group
        g = image % groups
        x0_first = band_x0[band]
        o_first = c * chunk
        o_stop = min(co, o_first + chunk)
        read = image * ci * plane_in + x0_first * x1n * x2n
        for i in range(ci):
            for x in range(band_rows[band] * x1n):
                row = read + i * plane_in + x * x2n
                e = base + i * e_channel + x * line
                for p in range(line):
                    r = reads2[p]
                    scratch[e + p] = source[row + r] if r >= 0 else 0.0
        for o in range(o_first, o_stop, 4):
            count = min(4, o_stop - o)
            # Channels past ``count`` read the last one's weights and are not stored.
            w1 = min(1, count - 1) * w_channel
            w2 = min(2, count - 1) * w_channel
            w3 = min(3, count - 1) * w_channel
            w_o = (g * co + o) * k0 * vectors_k0
            at = image * co * plane_out + o * plane_out
            for y0 in range(band_first[band], band_first[band + 1]):
                x0 = rows0[y0]
                if x0 < 0:  # no tap reaches this row of the planes
                    for q in range(count):
                        for j in range(row_out):
                            out[at + q * plane_out + y0 * row_out + j] = 0.0
                    continue
                w_row = w_o + taps0[y0] * vectors_k0
                for k in range(len(group_weights)):
                    w = (w_row + group_weights[k]) * ci * lanes
                    for first in range(group_first[k], group_first[k + 1], ENTRIES):
                        valid = min(ENTRIES, group_first[k + 1] - first)
                        block(scratch, weights, scratch, ci, e_channel, w, w1, w2, w3,
                              count, entry_reads, entry_places, entry_columns, first, valid,
                              base + (x0 - x0_first) * e_row, tile, tile_channel)
                for q in range(count):
                    t = tile + q * tile_channel
                    p = at + q * plane_out + y0 * row_out
                    for j in range(0, row_out, lanes):
                        vector_store_first(out, p + j, min(lanes, row_out - j),
                                           vector_load(scratch, t + j, lanes))
