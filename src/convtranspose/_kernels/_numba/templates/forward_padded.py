"""The register-blocked forward convolution over a zero-padded source
(:mod:`convtranspose._kernels._numba.forward`, ``padded``).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block``, ``block_on`` (blocks of
outputs anywhere, :func:`..block_sources.cross_block_source`), ``single``,
``chunk_width``, ``np``, ``pixels``, ``store_first`` (the channels-first store,
:func:`..transpose.first_store_kernel`).  Those are the block shape alone: channel counts, taps,
strides and sizes come at run time.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def kernel(source, weights, out, first_out, local, sizes, reads, rows, start,
           stop):  # pragma: no cover
    # source flat (N, Y1', Y2', Y3', G*Co), channels last and padded with zeros so that
    # every tap of every output reads inside; out flat (N, X1, X2, X3, G, width);
    # weights (width / chunk_width, G, K1, K2, K3, Co, chunk_width); with a
    # channels-first result (sizes[16]) the sums go to this thread's `local` rows, (a
    # run's outputs, chunk_width), instead of `out`, and from there into first_out
    # (N, G*Ci, X1, X2, X3): they never leave the core's cache.  Output pixel
    # (n, x1, x2, x3) of group g reads source pixel (n, x1*S1, x2*S2, x3*S3) plus
    # reads[m] for its tap entry m, `entry` source values in a row against as many
    # weight rows from rows[m] of the group's panel (an entry is one tap's Co channels,
    # or the Co channels of K3 taps side by side).  sizes = (N, G, Co, width, X1, X2, X3,
    # Y1', Y2', Y3', entries, S1, S2, S3, channel_block, Ci, channels-first result?,
    # blocks per run, entry).
    # Every output of a group is one run of pixels, flat over (n, x1, x2, x3): whole
    # blocks of `pixels` of them (across lines and images: no block at a line's end
    # recomputes its neighbour's outputs, no output goes alone), the last fewer one at
    # a time.  The flat index (chunk, g, run) in [start, stop) is chunk-major, so that
    # a thread's runs reuse one chunk's weight panel from L2; within a run the source
    # channels go `channel_block` at a time (all of them unless the panel leaves half
    # of L2: a block's rows then stay there while every block of the run adds them;
    # the later ones add into the sums stored by the first).
    batch, groups, co, width = sizes[0], sizes[1], sizes[2], sizes[3]
    x1, x2, x3, y1, y2, y3 = sizes[4], sizes[5], sizes[6], sizes[7], sizes[8], sizes[9]
    count, s1, s2, s3 = sizes[10], sizes[11], sizes[12], sizes[13]
    channel_block, ci, run, entry = sizes[14], sizes[15], sizes[17], sizes[18]
    in_3 = groups * co
    in_2 = y3 * in_3
    in_1 = y2 * in_2
    in_n = y1 * in_1
    out_3 = groups * width
    panel = groups * count * entry * chunk_width
    plane = x1 * x2 * x3
    total = batch * plane
    blocks = total // pixels
    runs = max(1, -(-blocks // run))
    # (the last run holds up to `pixels - 1` outputs past its whole blocks)
    dests = np.empty((run + 1) * pixels, np.int64)
    bases = np.empty((run + 1) * pixels, np.int64)
    for flat in range(start, stop):
        column = flat // (groups * runs) * chunk_width
        g = flat // runs % groups
        first = flat % runs * run * pixels
        last = min(blocks * pixels, first + run * pixels)
        if flat % runs == runs - 1:
            last = total  # the last run takes the outputs past the last whole block
        # each output's place in `out` (or `local`) and its source pixel (of this
        # group's channels)
        n, o1, o2, o3 = first // plane, first // (x2 * x3) % x1, first // x3 % x2, first % x3
        for q in range(last - first):
            dests[q] = q * chunk_width if sizes[16] else (first + q) * out_3 + g * width
            bases[q] = n * in_n + o1 * s1 * in_1 + o2 * s2 * in_2 + o3 * s3 * in_3 + g * co
            o3 += 1
            if o3 == x3:
                o3, o2 = 0, o2 + 1
                if o2 == x2:
                    o2, o1 = 0, o1 + 1
                    if o1 == x1:
                        o1, n = 0, n + 1
        panel_at = column // chunk_width * panel + g * count * entry * chunk_width
        whole = (min(last, blocks * pixels) - first) // pixels * pixels
        sums = local if sizes[16] else out
        at = 0 if sizes[16] else column
        for c0 in range(0, entry, channel_block):
            channels = min(channel_block, entry - c0)
            for q in range(0, whole, pixels):
                if c0 == 0:
                    block(source, weights, sums, at, dests[q:], bases[q:], reads, rows,
                          count, 0, 1, channels, panel_at, chunk_width)
                else:
                    block_on(source, weights, sums, at, dests[q:], bases[q:], reads, rows,
                             count, c0, 1, channels, panel_at + c0 * chunk_width, chunk_width)
        for q in range(whole, last - first):
            single(source, weights, sums, dests[q] + at, reads, rows, count, bases[q], 1,
                   entry, panel_at, chunk_width)
        if sizes[16]:
            # channels first, image by image: an image's outputs are a run of its plane
            q = first
            while q < last:
                n = q // plane
                end = min(last, (n + 1) * plane)
                store_first(local, (q - first) * chunk_width, chunk_width, first_out,
                            ((n * groups + g) * ci + column) * plane + q - n * plane, plane,
                            end - q, min(chunk_width, ci - column))
                q = end
