"""The kernel of ``depthwise`` on channels-first data with stride 1 on both of two axes
(:mod:`convtranspose._kernels._numba.depthwise_lines`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals: ``lanes`` (elements per vector), ``np``, ``vector_fma``, ``vector_load``,
``vector_load_first``, ``vector_splat_at``, ``vector_store``, ``vector_store_first``,
``vector_zero``.  Sizes, taps, dilations and offsets come at run time, so one compiled
kernel serves every such layer of its dtype.  Its kernels' decorator, ``cached_njit``
(:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def kernel(source, weights, out, scratch, sizes, start, stop):  # pragma: no cover - compiled
    # Items are planes (sample, channel).  Output row y1 sums, over taps (t1, t2), input
    # row y1 + offset1 - t1 * d1 shifted by offset2 - t2 * d2 along the line.  Each
    # plane's rows are first copied, a vector at a time, into a zero-bordered stage
    # row (masked loads: nothing past a row is read); each tap of the last axis then
    # gets its own copy of the window, shifted so that every load of the multiply-adds
    # is aligned (loads across two cache lines took 1.7x as long:
    # ``benchmarks/results/depthwise-lines-xeon.json``).  A plane is staged one item
    # ahead of its copies, so that those loads never wait on the stores just made.
    # Blocks of 8 output rows x one vector along the line are summed in registers.
    # sizes: groups, multiplier, X1, X2, Y1, Y2, K1, K2, offset1, offset2, d1, d2, then
    # the window's rows, the stage's line, its margin and the aligned start (derived).
    groups, multiplier, size1, size2 = sizes[0], sizes[1], sizes[2], sizes[3]
    out1, out2, k1, k2 = sizes[4], sizes[5], sizes[6], sizes[7]
    offset1, offset2, d1, d2 = sizes[8], sizes[9], sizes[10], sizes[11]
    window_rows, stage_line, margin = sizes[12], sizes[13], sizes[14]
    line = (out2 + lanes - 1) // lanes * lanes
    copies = k2 * window_rows * line
    stage = size1 * stage_line
    base = (-(scratch.ctypes.data // scratch.itemsize)) % lanes
    scratch[:] = 0.0  # the borders no plane writes
    for item in range(start - 1, stop):
        ahead = item + 1
        if ahead < stop:
            staged = base + copies + (ahead % 2) * stage + margin
            read = ahead * size1 * size2
            for x1 in range(size1):
                for x2 in range(0, size2, lanes):
                    vector_store(scratch, staged + x1 * stage_line + x2, vector_load_first(
                        source, read + x1 * size2 + x2, min(lanes, size2 - x2), lanes))
        if item < start:
            continue
        staged = base + copies + (item % 2) * stage + margin
        for x1 in range(size1):
            r = x1 + (k1 - 1) * d1 - offset1
            if 0 <= r < window_rows:
                for t2 in range(k2):
                    read = staged + x1 * stage_line + offset2 - t2 * d2
                    write = base + (t2 * window_rows + r) * line
                    for x2 in range(0, line, lanes):
                        vector_store(scratch, write + x2, vector_load(scratch, read + x2, lanes))
        n, g = item // groups, item % groups
        for m in range(multiplier):
            channel = g * multiplier + m
            rows(scratch, weights, out, base, channel * k1 * k2,
                 (n * groups * multiplier + channel) * out1 * out2, out1, out2, k1, k2, d1,
                 window_rows, line)


@cached_njit(nogil=True, inline="always")
def rows(scratch, weights, out, base, taps_at, out_at, out1, out2, k1, k2, d1, window_rows,
         line):  # pragma: no cover - compiled
    # One output plane from the window copies: blocks of 8 rows x one vector.
    for y0 in range(0, out1, 8):
        valid = min(8, out1 - y0)
        for x2 in range(0, line, lanes):
            a0 = vector_zero(scratch, lanes)
            a1 = vector_zero(scratch, lanes)
            a2 = vector_zero(scratch, lanes)
            a3 = vector_zero(scratch, lanes)
            a4 = vector_zero(scratch, lanes)
            a5 = vector_zero(scratch, lanes)
            a6 = vector_zero(scratch, lanes)
            a7 = vector_zero(scratch, lanes)
            for t1 in range(k1):
                row = base + (y0 + (k1 - 1 - t1) * d1) * line + x2
                for t2 in range(k2):
                    w = vector_splat_at(weights, taps_at + t1 * k2 + t2, lanes)
                    p = row + t2 * window_rows * line
                    a0 = vector_fma(vector_load(scratch, p, lanes), w, a0)
                    a1 = vector_fma(vector_load(scratch, p + line, lanes), w, a1)
                    a2 = vector_fma(vector_load(scratch, p + 2 * line, lanes), w, a2)
                    a3 = vector_fma(vector_load(scratch, p + 3 * line, lanes), w, a3)
                    a4 = vector_fma(vector_load(scratch, p + 4 * line, lanes), w, a4)
                    a5 = vector_fma(vector_load(scratch, p + 5 * line, lanes), w, a5)
                    a6 = vector_fma(vector_load(scratch, p + 6 * line, lanes), w, a6)
                    a7 = vector_fma(vector_load(scratch, p + 7 * line, lanes), w, a7)
            count = min(lanes, out2 - x2)
            at = out_at + y0 * out2 + x2
            vector_store_first(out, at, count, a0)
            if valid > 1:
                vector_store_first(out, at + out2, count, a1)
            if valid > 2:
                vector_store_first(out, at + 2 * out2, count, a2)
            if valid > 3:
                vector_store_first(out, at + 3 * out2, count, a3)
            if valid > 4:
                vector_store_first(out, at + 4 * out2, count, a4)
            if valid > 5:
                vector_store_first(out, at + 5 * out2, count, a5)
            if valid > 6:
                vector_store_first(out, at + 6 * out2, count, a6)
            if valid > 7:
                vector_store_first(out, at + 7 * out2, count, a7)
