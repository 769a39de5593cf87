"""The channels-first plane kernel (:mod:`convtranspose._kernels._numba.planes`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``_CHUNK_WINDOW_ELEMENTS``,
``block``, ``block_length``, ``block_rows``, ``co_block``, ``halves``,
``interleave_vectors``, ``lanes``, ``load``, ``low``, ``new_windows``, ``np``, ``put``,
``row_blocks``, ``segments``, ``shift``, ``vector_interleave``, ``vector_load``,
``vector_run``, ``vector_store``.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True)
def kernel(source, weights, out, bias, sizes, geometry, counts, tap_k, tap_offset,
           tap_count, band, channels_last, start, stop):  # pragma: no cover
    # Flat C-order buffers: source (N, G, Ci, X1, X2, X3), weights as _blocked_weights
    # lays them out, out (N, G, Co, Y1, Y2, Y3), or source (N, X1, X2, X3, G, Ci) and
    # out (N, Y1, Y2, Y3, G, Co) when channels_last (for few channels: strided window
    # fills and stores); source holds uint16 bits when `pairs` or `load_mode` says
    # so, out when rounding (`mode`); bias (G * Co, or empty) has the sums' dtype and
    # is added only when rounding; sizes = (G, Ci, Co, X, Y, K) with X, Y, K the spatial
    # volumes.  Each (n, g) plane is cut into bands of `band` output blocks of the
    # first axis (so that window and accumulator stay in cache); computes the (n,
    # band, g) items with flat index in [start, stop) (groups innermost: neighbouring
    # channels close in time).  The compiled kernel keeps _CHUNK_WINDOW_ELEMENTS.
    # Windows, weights and chunks count input channel units: one channel, or a
    # pair of bfloat16 channels when `pairs`.
    #
    # Each input plane is copied into a zero-bordered window (per axis: size
    # geometry[a, 0], starting at input index geometry[a, 1]) in which every tap of
    # every phase reads in range.  Flattened, one tap of one phase is then a single
    # multiply-add `acc[f] += w * window[f + offset]` over all output positions of
    # the phase at once (the window's border columns give junk that is never
    # stored): long contiguous runs, taken in register blocks of `block_length`
    # positions of `co_block` output channels.  The accumulator rows are padded to
    # whole blocks (`pitch`) and the windows by one block, so the last block of a
    # run reads and writes in range.  Indices are computed on flat arrays: views
    # created in inner loops cost more than the work.
    #
    # Row blocks (2-D, `segments`): the accumulator keeps `segments` vectors per
    # output row (`acc_row`; no border columns) and a block covers `block_rows`
    # rows, each read from its own window row; the windows are padded by as many
    # rows, so the last block of a band reads in range.
    groups, ci_count, co_count = sizes[0], sizes[1], sizes[2]
    x_volume, y_volume, k_volume = sizes[3], sizes[4], sizes[5]
    out1, out2, out3 = sizes[6], sizes[7], sizes[8]
    size1, size2, size3 = sizes[9], sizes[10], sizes[11]
    # Channels first: elements between consecutive channels of the data and of the
    # output (the volumes, or a line segment's whole line).
    in_channel_step, out_channel_step = sizes[12], sizes[13]
    w1, w2, w3 = geometry[0, 0], geometry[1, 0], geometry[2, 0]
    lo1, lo2, lo3 = geometry[0, 1], geometry[1, 1], geometry[2, 1]
    s1, s2, s3 = geometry[0, 2], geometry[1, 2], geometry[2, 2]
    plane = w2 * w3
    blocks1 = geometry[0, 3]
    bands = (blocks1 + band - 1) // band
    span1 = w1 - blocks1  # window rows beyond the band's own blocks
    window_volume = (min(band, blocks1) + span1) * plane
    tail = (geometry[1, 3] - 1) * w3 + geometry[2, 3]
    longest = (min(band, blocks1) - 1) * plane + tail
    # Accumulator positions per output row (of the last axis) and per block of the
    # first axis: the window's, or whole vectors per row.
    acc_row = segments * lanes if row_blocks else w3
    acc_plane = acc_row if row_blocks else plane
    if row_blocks:
        longest = min(band, blocks1) * acc_row
    units = (ci_count + halves - 1) // halves
    ci_chunk = max(1, min(units, _CHUNK_WINDOW_ELEMENTS // window_volume))
    pitch = (longest + block_length - 1) // block_length * block_length
    channel_pitch = min(s3, out3) * pitch  # one run per phase that has outputs
    fill, windows = new_windows(units * window_volume + block_length + block_rows * plane,
                                bias)
    acc = np.empty(co_block * channel_pitch, bias.dtype)
    biased = bias.size > 0
    # A phase's taps: at most the product of each axis's most taps per phase (not the
    # widest axis's count cubed, gigabytes for a long 1-D filter).  The windows, the
    # accumulators and these lists are counted by _kernels/scratch.py.
    # (Loops, not ndarray.max: its compiled code costs a second of compile time.)
    most = 1
    for a in range(3):
        axis_most = 1
        for p in range(tap_count.shape[1]):
            axis_most = max(axis_most, tap_count[a, p])
        most *= axis_most
    reads = np.empty(most, np.int64)
    starts = np.empty(most, np.int64)
    co_blocks = (co_count + co_block - 1) // co_block
    first2, last2 = max(0, lo2), min(size2, lo2 + w2)
    first3, last3 = max(0, lo3), min(size3, lo3 + w3)
    # Unsigned indices in the copy loops: NumPy's negative-index wrap-around check
    # keeps LLVM from vectorising loops over signed flat indices (5x slower).
    run3 = np.uint64(max(0, last3 - first3))
    half = np.uint64(out3 // 2)
    one = np.uint64(1)
    row_length = np.uint64(out3)
    in_step = np.uint64(groups * ci_count if channels_last else 1)
    phase_pitch = np.uint64(pitch)
    out_step = np.uint64(groups * co_count if channels_last else 1)
    out_stride3 = np.uint64(s3) * out_step  # between outputs of one phase
    for item in range(start, stop):
        g = item % groups
        n = item // (groups * bands)
        flat = n * groups + g
        band_first = ((item // groups) % bands) * band
        band_blocks = min(band, blocks1 - band_first)
        length = band_blocks * acc_row if row_blocks else (band_blocks - 1) * plane + tail
        origin1 = lo1 + band_first  # input index of the window's first row
        first1, last1 = max(0, origin1), min(size1, origin1 + band_blocks + span1)
        # The window's interior is overwritten for every item; the rows outside the
        # input are zeroed (another band may have filled them), other borders stay zero.
        for unit in range(units):
            for r in range(band_blocks + span1):
                if origin1 + r < first1 or origin1 + r >= last1:
                    row_at = np.uint64(unit * window_volume + r * plane)
                    for t in range(np.uint64(plane)):
                        windows[row_at + t] = 0
        for x1 in range(first1, last1):
            for x2 in range(first2, last2):
                pixel = (x1 * size2 + x2) * size3 + first3
                dst = np.uint64((x1 - origin1) * plane + (x2 - lo2) * w3 + first3 - lo3)
                if channels_last:
                    # Each pixel's channels are contiguous: read them in order (the
                    # windows, in cache, take the scattered writes).
                    src = np.uint64((n * x_volume + pixel) * groups * ci_count
                                    + g * ci_count)
                    for t in range(run3):
                        for ci in range(np.uint64(ci_count)):
                            fill[((ci >> shift) * np.uint64(window_volume) + dst + t) * halves
                                 + (ci & low)] = load(source[src + t * in_step + ci])
                else:
                    for ci in range(ci_count):
                        src = np.uint64((flat * ci_count + ci) * in_channel_step + pixel)
                        unit = np.uint64(ci)
                        at = ((unit >> shift) * np.uint64(window_volume) + dst) * halves + (
                            unit & low)
                        for t in range(run3):
                            fill[at + t * halves] = load(source[src + t])
        for block_index in range(co_blocks):
            co0 = block_index * co_block
            block_channels = min(co_block, co_count - co0)
            weights_at = (g * co_blocks + block_index) * k_volume * units * co_block
            for p1 in range(min(s1, out1)):
                for p2 in range(min(s2, out2)):
                    for p3 in range(min(s3, out3)):
                        # Not a literal 0: numba would compile `block` once more for
                        # a first guess of the count's type, Literal[int](0).
                        count = np.int64(0)
                        for m1 in range(tap_count[0, p1]):
                            for m2 in range(tap_count[1, p2]):
                                for m3 in range(tap_count[2, p3]):
                                    k = tap_k[0, p1, m1] + tap_k[1, p2, m2] + tap_k[2, p3, m3]
                                    reads[count] = (tap_offset[0, p1, m1] + tap_offset[1, p2, m2]
                                                    + tap_offset[2, p3, m3])
                                    starts[count] = weights_at + k * units * co_block
                                    count += 1
                        # Input channels in chunks whose windows' pages stay in the
                        # TLB while every block of the run reads them.
                        for ci0 in range(0, units, ci_chunk):
                            chunk = min(ci_chunk, units - ci0)
                            for f0 in range(0, length, block_length):
                                read_at = f0 // acc_row * plane if row_blocks else f0
                                block(windows, weights, acc, p3 * pitch + f0, channel_pitch,
                                      reads, starts, count, chunk, window_volume,
                                      read_at + ci0 * window_volume, ci0 * co_block, ci0 > 0,
                                      plane)
                    # Interleave the phases of the last axis into whole output rows:
                    # each phase's run of the accumulator goes to every s3-th output.
                    for c in range(block_channels):
                        if channels_last:
                            out_at = n * y_volume * groups * co_count + g * co_count + co0 + c
                        else:
                            out_at = (flat * co_count + co0 + c) * out_channel_step
                        channel_bias = (bias[g * co_count + co0 + c] if biased
                                        else bias.dtype.type(0))
                        for j1 in range(band_first, min(counts[0, p1], band_first + band_blocks)):
                            for j2 in range(counts[1, p2]):
                                row = np.uint64(out_at) + np.uint64(
                                    ((j1 * s1 + p1) * out2 + j2 * s2 + p2) * out3) * out_step
                                at = np.uint64(c * channel_pitch + (j1 - band_first) * acc_plane
                                               + j2 * w3)
                                if s3 == 1 and not channels_last:
                                    for t in range(row_length):
                                        put(out, row + t, acc[at + t], channel_bias, biased)
                                elif s3 == 2 and not channels_last:
                                    odd = at + phase_pitch
                                    if interleave_vectors and half >= vector_run:
                                        # Whole vectors, the last one overlapping
                                        # its predecessor (the same values again):
                                        # a scalar tail would store most of a
                                        # 28-output row one element at a time.
                                        t = np.uint64(0)
                                        while True:
                                            t = min(t, half - vector_run)
                                            even_v = vector_load(acc, at + t, lanes)
                                            odd_v = vector_load(acc, odd + t, lanes)
                                            vector_store(out, row + t + t, vector_interleave(
                                                even_v, odd_v, 0))
                                            vector_store(out, row + t + t + vector_run,
                                                         vector_interleave(even_v, odd_v, 1))
                                            t += vector_run
                                            if t >= half:
                                                break
                                    else:
                                        for t in range(half):
                                            put(out, row + t + t, acc[at + t], channel_bias,
                                                biased)
                                            put(out, row + t + t + one, acc[odd + t],
                                                channel_bias, biased)
                                    if out3 % 2:
                                        put(out, row + half + half, acc[at + half],
                                            channel_bias, biased)
                                else:
                                    for p3 in range(min(s3, out3)):
                                        into = row + np.uint64(p3) * out_step
                                        run = at + np.uint64(p3) * phase_pitch
                                        for t in range(np.uint64(counts[2, p3])):
                                            put(out, into + t * out_stride3, acc[run + t],
                                                channel_bias, biased)
