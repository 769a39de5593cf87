"""The kernel of ``depthwise`` (:mod:`convtranspose._kernels._numba.depthwise`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block``, ``gather_row_taps``,
``np``, ``outputs``, ``width``.  Those are the block shape alone (``outputs`` along the
last axis, ``width`` channels): channel counts, taps, strides and sizes come at run
time, so that one compiled kernel serves every depthwise layer of its dtype.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True, inline="always")
def store_tile(out, tile, channels_last, line, n, y12, chunk, channels, lines, out3,
               valid):  # pragma: no cover - compiled
    # A line tile (out3 outputs of `width` channels) into the caller's layout: channels
    # last, an output's `valid` channels in order; channels first, a channel's outputs
    # along the line in order (the tile is read across, in L1).
    if channels_last:
        at = line * out3 * channels + chunk * width
        for y3 in range(out3):
            for lane in range(valid):
                out[at + y3 * channels + lane] = tile[y3 * width + lane]
        return
    for lane in range(valid):
        at = ((n * channels + chunk * width + lane) * lines + y12) * out3
        for y3 in range(out3):
            out[at + y3] = tile[y3 * width + lane]


@cached_njit(nogil=True)
def kernel(source, weights, out, tile, sizes, tap_k, tap_shift, tap_count, start,
           stop):  # pragma: no cover - compiled
    # Items are (sample, output line of the first two axes, chunk of channels), the
    # chunk fastest.  sizes: chunks, N, X1, X2, X3 padded, pad, Y1, Y2, Y3, channels,
    # taps, K2, K3, s1, s2, s3, channels_last.
    chunks, batch, size1, size2, length, pad = (sizes[0], sizes[1], sizes[2], sizes[3],
                                                sizes[4], sizes[5])
    out1, out2, out3, channels = sizes[6], sizes[7], sizes[8], sizes[9]
    taps_all, k2, k3 = sizes[10], sizes[11], sizes[12]
    s1, s2, s3, channels_last = sizes[13], sizes[14], sizes[15], sizes[16] != 0
    rows_most = max(1, tap_count[0].max()) * max(1, tap_count[1].max())
    found = np.empty((rows_most, 4), np.int64)
    reads = np.empty(rows_most * max(1, tap_count[2].max()), np.int64)
    taps = np.empty(rows_most * max(1, tap_count[2].max()), np.int64)
    for item in range(start, stop):
        chunk = item % chunks
        line = item // chunks
        y12 = line % (out1 * out2)
        n = line // (out1 * out2)
        y1, y2 = y12 // out2, y12 % out2
        p1, p2 = y1 % s1, y2 % s2
        rows = gather_row_taps(found, y1 // s1, y2 // s2, p1, p2, tap_shift, tap_count,
                               size1, size2)
        valid = min(width, channels - chunk * width)
        straight = channels_last and valid == width
        dest = out if straight else tile
        line_at = line * out3 * channels + chunk * width if straight else np.int64(0)
        step = channels if straight else np.int64(width)
        for p3 in range(min(s3, out3)):
            count = np.int64(0)  # not a literal: see templates/blocked.py
            for r in range(rows):
                row_at = ((((chunk * batch + n) * size1 + found[r, 0]) * size2 + found[r, 1])
                          * length + pad) * width
                k12 = (tap_k[0, p1, found[r, 2]] * k2 + tap_k[1, p2, found[r, 3]]) * k3
                for m3 in range(tap_count[2, p3]):
                    reads[count] = row_at + tap_shift[2, p3, m3] * width
                    taps[count] = (chunk * taps_all + k12 + tap_k[2, p3, m3]) * width
                    count += 1
            phase_outputs = (out3 - p3 + s3 - 1) // s3
            for j0 in range(0, phase_outputs, outputs):
                block(source, weights, dest, line_at + (p3 + j0 * s3) * step, s3 * step,
                      reads, taps, count, j0 * width, phase_outputs - j0)
        if not straight:
            store_tile(out, tile, channels_last, line, n, y12, chunk, channels,
                       out1 * out2, out3, valid)


@cached_njit(nogil=True)
def pad_copy(data, padded, sizes, start, stop):  # pragma: no cover - compiled
    # Rows (chunk, sample, x1, x2) of the padded, channel-blocked copy: zeros before and
    # after the input's last axis and in the lanes past the channels; lane l of chunk c
    # holds input channel (c * width + l) // multiplier.  sizes: chunks, N, X1, X2, X3,
    # length, pad, groups, multiplier, channels_last.
    batch, size1, size2, size3 = sizes[1], sizes[2], sizes[3], sizes[4]
    length, pad, groups, multiplier = sizes[5], sizes[6], sizes[7], sizes[8]
    channels_last = sizes[9] != 0
    channels = groups * multiplier
    zero = 0.0
    for item in range(start, stop):
        x12 = item % (size1 * size2)
        n = (item // (size1 * size2)) % batch
        chunk = item // (batch * size1 * size2)
        at = item * length * width
        for i in range(at, at + pad * width):
            padded[i] = zero
        for i in range(at + (pad + size3) * width, at + length * width):
            padded[i] = zero
        at += pad * width
        if channels_last:
            base = (n * size1 * size2 + x12) * size3 * groups
            for x3 in range(size3):
                for lane in range(width):
                    c = chunk * width + lane
                    padded[at + x3 * width + lane] = (
                        data[base + x3 * groups + c // multiplier] if c < channels else zero)
            continue
        for lane in range(width):
            c = chunk * width + lane
            base = ((n * groups + c // multiplier) * size1 * size2 + x12) * size3
            if c < channels:
                for x3 in range(size3):
                    padded[at + x3 * width + lane] = data[base + x3]
            else:
                for x3 in range(size3):
                    padded[at + x3 * width + lane] = zero
