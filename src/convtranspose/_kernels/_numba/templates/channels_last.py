"""The per-position kernel of numba ``direct`` (:mod:`convtranspose._kernels._numba.channels_last`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``gather_row_taps``, ``ci_constant``,
``co_constant``, ``constant``, ``depthwise``, ``lanes``, ``np``, ``one``, ``step``,
``vector_fma``, ``vector_load``, ``vector_store``, ``vector_zero``.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

# Passes of four taps over a position's channels, then single taps: the first
# pass stores its sums, later ones add to them (separate loops: choosing inside
# the loop is about 1.4x slower).  Explicit vectors with the taps' offsets as plain
# values, faster than the loops LLVM vectorises itself
# (benchmarks/results/per-position-kernel-zen4.json).
@cached_njit(nogil=True, inline="always")
def plus_four(total, source, weights, r0, w0, r1, w1, r2, w2, r3, w3, c):
    # total + four taps at channel c (a vector).  Their offsets come as values, not
    # from the arrays, which LLVM cannot tell from the output (it may reload them).
    total = vector_fma(vector_load(source, r0 + c, lanes), vector_load(weights, w0 + c, lanes),
                       total)
    total = vector_fma(vector_load(source, r1 + c, lanes), vector_load(weights, w1 + c, lanes),
                       total)
    total = vector_fma(vector_load(source, r2 + c, lanes), vector_load(weights, w2 + c, lanes),
                       total)
    return vector_fma(vector_load(source, r3 + c, lanes), vector_load(weights, w3 + c, lanes),
                      total)

@cached_njit(nogil=True, inline="always")
def four_taps(source, weights, out, reads, taps, done, dest, vector_end, width):
    r0, w0 = reads[done], taps[done]
    r1, w1 = reads[done + 1], taps[done + 1]
    r2, w2 = reads[done + 2], taps[done + 2]
    r3, w3 = reads[done + 3], taps[done + 3]
    if done == 0:
        for c in range(np.uint64(0), vector_end, step):
            vector_store(out, dest + c, plus_four(vector_zero(out, lanes), source, weights,
                                                  r0, w0, r1, w1, r2, w2, r3, w3, c))
    else:
        for c in range(np.uint64(0), vector_end, step):
            vector_store(out, dest + c, plus_four(vector_load(out, dest + c, lanes), source,
                                                  weights, r0, w0, r1, w1, r2, w2, r3, w3, c))
    for c in range(vector_end, width):
        total = (weights[w0 + c] * source[r0 + c] + weights[w1 + c] * source[r1 + c]
                 + weights[w2 + c] * source[r2 + c] + weights[w3 + c] * source[r3 + c])
        out[dest + c] = total if done == 0 else out[dest + c] + total

@cached_njit(nogil=True, inline="always")
def last_tap(source, weights, out, read, tap, first, dest, vector_end, width):
    # A single tap: one of the up to three left after the passes of four.
    if first:
        for c in range(np.uint64(0), vector_end, step):
            vector_store(out, dest + c, vector_fma(
                vector_load(source, read + c, lanes), vector_load(weights, tap + c, lanes),
                vector_zero(out, lanes)))
        for c in range(vector_end, width):
            out[dest + c] = weights[tap + c] * source[read + c]
    else:
        for c in range(np.uint64(0), vector_end, step):
            vector_store(out, dest + c, vector_fma(
                vector_load(source, read + c, lanes), vector_load(weights, tap + c, lanes),
                vector_load(out, dest + c, lanes)))
        for c in range(vector_end, width):
            out[dest + c] += weights[tap + c] * source[read + c]

@cached_njit(nogil=True)
def kernel(source, weights, out, sizes, strides, tap_k, tap_shift, tap_count, start,
           stop):  # pragma: no cover
    # Flat C-order buffers: source (N, X1, X2, X3, G*Ci), weights (K1, K2, K3, Ci, Co, G),
    # out (N, Y1, Y2, Y3, G*Co); sizes = (G, Ci, Co, X1, X2, X3, Y1, Y2, Y3).  Computes the
    # output rows (n, y1, y2) with flat index in [start, stop): every output position
    # sums the taps of its phase, each one multiply-add over the channel vector
    # (contiguous when Ci = Co = 1), written straight into the output.
    groups = sizes[0]
    size1, size2, size3 = sizes[3], sizes[4], sizes[5]
    out1, out2, out3 = sizes[6], sizes[7], sizes[8]
    s1, s2, s3 = strides[0], strides[1], strides[2]
    # Unsigned indices in the vector loops (see planes_kernel).
    group_count = np.uint64(groups)
    vector_end = group_count - group_count % step
    ci_stride = ci_constant if constant else np.uint64(sizes[1])
    co_stride = co_constant if constant else np.uint64(sizes[2])
    width_in = group_count * ci_stride
    width_out = group_count * co_stride
    # The taps of the first two axes are the same along a whole output row.  At most
    # one tap per axis of the position's phase: the lists hold the product of each
    # axis's most taps per phase (_kernels/scratch.py counts them).
    rows_most = max(1, tap_count[0].max()) * max(1, tap_count[1].max())
    most = rows_most * max(1, tap_count[2].max())
    found = np.empty((rows_most, 4), np.int64)
    row_reads = np.empty(rows_most, np.uint64)
    row_taps = np.empty(rows_most, np.uint64)
    reads = np.empty(most, np.uint64)
    taps = np.empty(most, np.uint64)
    for flat in range(start, stop):
        y2 = flat % out2
        y1 = (flat // out2) % out1
        n = flat // (out1 * out2)
        p1, j1 = y1 % s1, y1 // s1
        p2, j2 = y2 % s2, y2 // s2
        rows = gather_row_taps(found, j1, j2, p1, p2, tap_shift, tap_count, size1, size2)
        for r in range(rows):
            x1, x2, m1, m2 = found[r, 0], found[r, 1], found[r, 2], found[r, 3]
            row_reads[r] = np.uint64((n * size1 + x1) * size2 + x2) * np.uint64(
                size3) * width_in
            row_taps[r] = tap_k[0, p1, m1] + tap_k[1, p2, m2]
        for y3 in range(out3):
            p3, j3 = y3 % s3, y3 // s3
            dest = np.uint64(flat * out3 + y3) * width_out
            count = 0
            for m3 in range(tap_count[2, p3]):
                x3 = j3 + tap_shift[2, p3, m3]
                if x3 < 0 or x3 >= size3:
                    continue
                read, tap = np.uint64(x3) * width_in, tap_k[2, p3, m3]
                for row in range(rows):
                    reads[count] = row_reads[row] + read
                    taps[count] = row_taps[row] + tap
                    count += 1
            if count == 0 or not depthwise:
                for c in range(width_out):
                    out[dest + c] = 0
            if depthwise:
                done = 0
                while count - done >= 4:
                    four_taps(source, weights, out, reads, taps, done, dest, vector_end,
                              group_count)
                    done += 4
                while done < count:
                    last_tap(source, weights, out, reads[done], taps[done], done == 0, dest,
                             vector_end, group_count)
                    done += 1
                continue
            for m in range(count):
                read, w_at = reads[m], taps[m]
                for g in range(group_count):
                    for o in range(co_stride):
                        total = (weights[w_at + o * group_count + g]
                                 * source[read + g * ci_stride])
                        for i in range(one, ci_stride):
                            total += (weights[w_at + (i * co_stride + o) * group_count + g]
                                      * source[read + g * ci_stride + i])
                        out[dest + g * co_stride + o] += total
