"""The kernel of ``depthwise`` (:mod:`convtranspose._kernels._numba.depthwise`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block``, ``gather_row_taps``,
``lanes``, ``np``, ``outputs``, ``transpose``, ``vector_load``, ``vector_store``,
``width``.  Those are the block shape
alone (``outputs`` along the last axis, ``width`` channels, vectors of ``lanes``;
``transpose`` moves a ``lanes x lanes`` block between layouts in registers): channel counts, taps, strides and sizes come at run
time, so that one compiled kernel serves every depthwise layer of its dtype.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True, inline="always")
def store_tile(out, tile, channels_last, line, n, y12, chunk, channels, lines, out3,
               valid):  # pragma: no cover - compiled
    # A line tile (out3 outputs of `width` channels) into the caller's layout: channels
    # last, an output's `valid` channels in order; channels first, a channel's outputs
    # along the line, blocks of lanes x lanes transposed in registers, the rest one at
    # a time.
    if channels_last:
        at = line * out3 * channels + chunk * width
        for y3 in range(out3):
            for lane in range(valid):
                out[at + y3 * channels + lane] = tile[y3 * width + lane]
        return
    plane = lines * out3
    at = ((n * channels + chunk * width) * lines + y12) * out3
    whole = out3 // lanes * lanes if valid == width else np.int64(0)
    for v in range(width // lanes):
        for y3 in range(0, whole, lanes):
            transpose(tile, y3 * width + v * lanes, np.int64(width), out,
                      at + v * lanes * plane + y3, plane)
    for lane in range(valid):
        for y3 in range(whole, out3):
            out[at + lane * plane + y3] = tile[y3 * width + lane]


@cached_njit(nogil=True, inline="always")
def line_taps(found, rows, p1, p2, n, tap_k, tap_shift, tap_count, size1, size2, length,
              pad, step, k2, k3, phases, reads, taps, firsts):  # pragma: no cover - compiled
    # Every phase's taps of one line, for chunk 0 and the phase's first output: phase
    # p3's in [firsts[p3], firsts[p3 + 1]), each a read of the padded copy (positions
    # `step` apart) and a row of the packed weights (a chunk and an output add their
    # own offsets).
    count = np.int64(0)  # not a literal: see templates/blocked.py
    for p3 in range(phases):
        firsts[p3] = count
        for r in range(rows):
            row_at = (((n * size1 + found[r, 0]) * size2 + found[r, 1]) * length + pad) * step
            k12 = (tap_k[0, p1, found[r, 2]] * k2 + tap_k[1, p2, found[r, 3]]) * k3
            for m3 in range(tap_count[2, p3]):
                reads[count] = row_at + tap_shift[2, p3, m3] * step
                taps[count] = (k12 + tap_k[2, p3, m3]) * width
                count += 1
    firsts[phases] = count


@cached_njit(nogil=True)
def kernel(source, weights, out, tile, sizes, tap_k, tap_shift, tap_count, start,
           stop):  # pragma: no cover - compiled
    # Channels first, items are (sample, output line of the first two axes, chunk of
    # channels), the line fastest, so that consecutive items write on along the same
    # channel planes (chunk fastest wrote a few hundred bytes into each of every chunk's
    # planes in turn: 4-5x the kernel's time without its stores,
    # ``benchmarks/results/depthwise-xeon.json``).  Channels last, items are lines, and
    # a line's blocks run chunk fastest: consecutive blocks read and write on along the
    # same positions (a line per chunk in turn stored a vector into every position of
    # the line, and read as many rows: ``depthwise-zen3.json``).  sizes: chunks,
    # N, X1, X2, X3 padded, pad, Y1, Y2, Y3, channels, taps, K2, K3, s1, s2, s3,
    # channels_last, step (elements between the copy's positions), chunk step (between
    # its chunks).
    chunks, size1, size2, length, pad = sizes[0], sizes[2], sizes[3], sizes[4], sizes[5]
    out1, out2, out3, channels = sizes[6], sizes[7], sizes[8], sizes[9]
    taps_all, k2, k3 = sizes[10], sizes[11], sizes[12]
    s1, s2, s3, channels_last = sizes[13], sizes[14], sizes[15], sizes[16] != 0
    step, chunk_step = sizes[17], sizes[18]
    phases = min(s3, out3)
    rows_most = max(1, tap_count[0].max()) * max(1, tap_count[1].max())
    found = np.empty((rows_most, 4), np.int64)
    reads = np.empty(rows_most * max(1, tap_count[2].sum()), np.int64)
    taps = np.empty(rows_most * max(1, tap_count[2].sum()), np.int64)
    firsts = np.empty(phases + 1, np.int64)
    lines = out1 * out2
    whole = channels // width if channels_last else np.int64(0)
    for item in range(start, stop):
        if channels_last:
            line, chunk = item, whole
        else:
            chunk = (item // lines) % chunks
            line = item // (lines * chunks) * lines + item % lines
        y12 = line % lines
        n = line // lines
        y1, y2 = y12 // out2, y12 % out2
        p1, p2 = y1 % s1, y2 % s2
        rows = gather_row_taps(found, y1 // s1, y2 // s2, p1, p2, tap_shift, tap_count,
                               size1, size2)
        line_taps(found, rows, p1, p2, n, tap_k, tap_shift, tap_count, size1, size2,
                  length, pad, step, k2, k3, phases, reads, taps, firsts)
        line_at = line * out3 * channels
        for p3 in range(phases):  # channels last: the line's whole chunks, into `out`
            phase_outputs = (out3 - p3 + s3 - 1) // s3
            for j0 in range(0, phase_outputs, outputs):
                at = line_at + (p3 + j0 * s3) * channels
                for c in range(whole):
                    block(source, weights, out, at + c * width, s3 * channels, reads, taps,
                          firsts[p3], firsts[p3 + 1], c * chunk_step + j0 * step, step,
                          c * taps_all * width, phase_outputs - j0)
        if chunk == chunks:
            continue
        # The item's chunk (channels first) or the line's last, partial one, into the
        # tile.  (Two calls of `block` that name their array: an array chosen per
        # block would have its references counted at every block.)
        for p3 in range(phases):
            phase_outputs = (out3 - p3 + s3 - 1) // s3
            for j0 in range(0, phase_outputs, outputs):
                block(source, weights, tile, (p3 + j0 * s3) * width, s3 * width, reads,
                      taps, firsts[p3], firsts[p3 + 1], chunk * chunk_step + j0 * step,
                      step, chunk * taps_all * width, phase_outputs - j0)
        store_tile(out, tile, channels_last, line, n, y12, chunk, channels, lines, out3,
                   min(width, channels - chunk * width))


@cached_njit(nogil=True)
def pad_copy(data, padded, sizes, start, stop):  # pragma: no cover - compiled
    # Rows of the padded copy: zeros before and after the input's last axis and in the
    # lanes past the channels; lane l of chunk c holds input channel (c * width + l) //
    # multiplier.  Channels first, the copy is (chunks, N, X1, X2, length, width), its
    # rows (chunk, sample, x1, x2); channels last, (N, X1, X2, length, step) with chunk
    # c at lanes [c * width, (c + 1) * width) of a position, its rows (sample, x1, x2).
    # sizes: chunks, N, X1, X2, X3, length, pad, groups, multiplier, channels_last, step.
    batch, size1, size2, size3 = sizes[1], sizes[2], sizes[3], sizes[4]
    length, pad, groups, multiplier = sizes[5], sizes[6], sizes[7], sizes[8]
    channels_last, step = sizes[9] != 0, sizes[10]
    channels = groups * multiplier
    zero = 0.0
    for item in range(start, stop):
        at = item * length * step
        for i in range(at, at + pad * step):
            padded[i] = zero
        for i in range(at + (pad + size3) * step, at + length * step):
            padded[i] = zero
        at += pad * step
        if channels_last:
            base = item * size3 * groups
            done = channels // lanes * lanes if multiplier == 1 else np.int64(0)
            for x3 in range(size3):
                place, read = at + x3 * step, base + x3 * groups
                for c in range(0, done, lanes):
                    vector_store(padded, place + c, vector_load(data, read + c, lanes))
                for c in range(done, channels):
                    padded[place + c] = data[read + c // multiplier]
                for c in range(channels, step):
                    padded[place + c] = zero
            continue
        x12 = item % (size1 * size2)
        n = (item // (size1 * size2)) % batch
        chunk = item // (batch * size1 * size2)
        whole = multiplier == 1 and (chunk + 1) * width <= channels
        done = np.int64(0)
        if whole:  # blocks of lanes x lanes transposed in registers
            plane = size1 * size2 * size3
            done = size3 // lanes * lanes
            for v in range(width // lanes):
                base = ((n * groups + chunk * width + v * lanes) * size1 * size2 + x12) * size3
                for x3 in range(0, done, lanes):
                    transpose(data, base + x3, plane, padded, at + x3 * width + v * lanes,
                              np.int64(width))
        for lane in range(width):
            c = chunk * width + lane
            base = ((n * groups + c // multiplier) * size1 * size2 + x12) * size3
            if c < channels:
                for x3 in range(done, size3):
                    padded[at + x3 * width + lane] = data[base + x3]
            else:
                for x3 in range(size3):
                    padded[at + x3 * width + lane] = zero
