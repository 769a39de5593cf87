"""The register-blocked forward convolution (:mod:`convtranspose._kernels._numba.forward`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block``, ``block_on``, ``single``,
``chunk_width``, ``np``, ``pixels``, ``store_first`` (the channels-first store,
:func:`..transpose.first_store_kernel`).  Those are the block shape
alone: channel counts, taps, strides and sizes come at run time, so that one compiled
kernel serves every layer of its dtype and block shape.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def kernel(source, weights, out, first_out, sizes, taps, counts, start,
           stop):  # pragma: no cover
    # source flat (N, Y1, Y2, Y3, G*Co) (channels last), or (N, G*Co, Y1, Y2, Y3)
    # where `sizes[19]` is 1 (its planes read in place); out flat (N, X1, X2, X3, G,
    # width); weights (width / chunk_width, G, K1, K2, K3, Co, chunk_width), zero beyond
    # Ci.  Output x of an axis reads source index x*s + shift for each of the axis's
    # taps (k, shift) in taps[a, :counts[a]] (with its K the kernel size).  sizes =
    # (N, G, Co, width, X1, X2, X3, Y1, Y2, Y3, K1, K2, K3, S3, S1, S2, channel_block,
    # Ci, channels-first result?, channels-first source?).
    # Computes one
    # chunk of output channels of the output lines (n, x1, x2, g) for the flat index
    # (chunk, line) in [start, stop), chunk-major, so that a thread's lines reuse one
    # chunk's weight panel from L2: the outputs whose taps all read inside the source in
    # blocks of `pixels` (each source pixel `S3` apart), the others one at a time with
    # the taps they have.  Where `sizes[18]` is 1, each item then stores its sums
    # channels first too, into first_out flat (N, G*Ci, X1, X2, X3): from `out` while
    # they are still in this core's cache, rather than in a pass of their own over the
    # whole result later.
    batch, groups, co, width = sizes[0], sizes[1], sizes[2], sizes[3]
    x1, x2, x3, y1, y2, y3 = sizes[4], sizes[5], sizes[6], sizes[7], sizes[8], sizes[9]
    k1, k2, k3, s3 = sizes[10], sizes[11], sizes[12], sizes[13]
    channel_block = sizes[16]
    if sizes[19]:  # a source channel's pixels side by side, its planes apart
        in_c, in_3 = y1 * y2 * y3, np.int64(1)
        in_g, in_n = co * in_c, groups * co * in_c
    else:  # a source pixel's channels side by side
        in_c, in_3 = np.int64(1), groups * co
        in_g, in_n = co, y1 * y2 * y3 * in_3
    in_2, in_1 = y3 * in_3, y2 * y3 * in_3
    out_3 = groups * width
    tap_size = co * chunk_width
    panel = groups * k1 * k2 * k3 * tap_size
    most = counts[0] * counts[1] * counts[2]
    reads = np.empty(most, np.int64)
    rows = np.empty(most, np.int64)
    edge_reads = np.empty(most, np.int64)
    edge_taps = np.empty(most, np.int64)
    lines = batch * x1 * x2 * groups
    for flat in range(start, stop):
        column, item = flat // lines * chunk_width, flat % lines
        g = item % groups
        o2 = item // groups % x2
        o1 = item // (groups * x2) % x1
        n = item // (groups * x2 * x1)
        # The line's taps of the first two axes that read inside the source, with
        # every tap of the last axis: their reads (at output 0) and weight rows.
        count = np.int64(0)
        for m1 in range(counts[0]):
            i1 = o1 * sizes[14] + taps[0, m1, 1]
            if not 0 <= i1 < y1:
                continue
            for m2 in range(counts[1]):
                i2 = o2 * sizes[15] + taps[1, m2, 1]
                if not 0 <= i2 < y2:
                    continue
                for m3 in range(counts[2]):
                    reads[count] = (n * in_n + i1 * in_1 + i2 * in_2
                                    + taps[2, m3, 1] * in_3 + g * in_g)
                    rows[count] = ((g * k1 + taps[0, m1, 0]) * k2 * k3 + taps[1, m2, 0] * k3
                                   + taps[2, m3, 0]) * tap_size
                    count += 1
        line = ((n * x1 + o1) * x2 + o2) * x3 * out_3 + g * width
        # Outputs whose every tap of the last axis reads inside: [first, last).
        first, last = np.int64(0), x3
        for m3 in range(counts[2]):
            shift = taps[2, m3, 1]
            first = max(first, (-shift + s3 - 1) // s3)
            last = min(last, (y3 - 1 - shift) // s3 + 1)
        first = min(first, x3)
        last = max(first, last)
        # Whole blocks take the source channels `channel_block` at a time (their weight
        # rows stay in L1 while every block of the line adds them; the later ones add
        # into the sums stored by the first); the last block, which overlaps its
        # predecessor, takes every channel at once (a channel block added to an output
        # twice would count twice).
        panel_at = column // chunk_width * panel
        whole = (last - first) // pixels * pixels
        for c0 in range(0, co if whole else 0, channel_block):
            channels = min(channel_block, co - c0)
            for o3 in range(first, first + whole, pixels):
                at = line + o3 * out_3 + column
                if c0 == 0:
                    block(source, weights, out, at, out_3, reads, rows, count,
                          o3 * s3 * in_3, s3 * in_3, in_c, channels, panel_at, chunk_width)
                else:
                    block_on(source, weights, out, at, out_3, reads, rows, count,
                             o3 * s3 * in_3 + c0 * in_c, s3 * in_3, in_c, channels,
                             panel_at + c0 * chunk_width, chunk_width)
        if whole and first + whole < last:
            o3 = last - pixels
            block(source, weights, out, line + o3 * out_3 + column, out_3, reads, rows,
                  count, o3 * s3 * in_3, s3 * in_3, in_c, co, panel_at, chunk_width)
        for o3 in range(x3):
            if whole and first <= o3 < last:
                continue
            edges = np.int64(0)
            for m in range(count):
                i3 = o3 * s3 + taps[2, m % counts[2], 1]
                if 0 <= i3 < y3:
                    edge_reads[edges] = reads[m]
                    edge_taps[edges] = rows[m]
                    edges += 1
            single(source, weights, out, line + o3 * out_3 + column, edge_reads, edge_taps,
                   edges, o3 * s3 * in_3, in_c, co, column // chunk_width * panel,
                   chunk_width)
        if sizes[18]:
            plane = x1 * x2 * x3
            store_first(out, line + column, out_3, first_out,
                        ((n * groups + g) * sizes[17] + column) * plane + (o1 * x2 + o2) * x3,
                        plane, x3, min(chunk_width, sizes[17] - column))

