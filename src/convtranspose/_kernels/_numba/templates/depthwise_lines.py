"""The kernel of ``depthwise`` along the lines of channels-first planes of two axes
(:mod:`convtranspose._kernels._numba.depthwise_lines`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals: ``lanes`` (elements per vector), ``np``, ``UNROLLED`` (the layer's
``LinesPlan.unrolled_taps``: a constant, so that each form of the kernel holds only its
own code), ``unrolled_rows`` (the blocks unrolled over ``UNROLLED`` row taps, generated:
``depthwise_lines.unrolled_rows_source``; None where ``UNROLLED`` is 0),
``vector_fma``, ``vector_interleave``, ``vector_load``, ``vector_load_first``,
``vector_load_spread``, ``vector_store``, ``vector_store_first``, ``vector_zero``.  Sizes,
taps, strides, dilations and offsets come at run time, so one compiled kernel of each
form serves every such layer of its dtype.  Its kernels' decorator, ``cached_njit``
(:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def kernel(source, weights, out, scratch, sizes, row_first, row_taps, row_shifts, reads,
           start, stop):  # pragma: no cover - compiled
    # Items are planes (sample, channel); the tables are the layer's LinesPlan
    # (depthwise_schedule.py), which says what each output sums.  Each plane's rows are
    # first copied, a vector at a time, into zero-bordered stage rows (masked loads:
    # nothing past a row is read).  Where the plan unrolls the blocks over the row taps
    # (UNROLLED, the line's stride is 1), the blocks read the stage, which then holds
    # the whole window, each tap of the line at its shift.  Otherwise each window copy
    # holds, at every output of the line, the input its phase's m-th tap reads (aligned
    # loads of the multiply-adds: loads across two cache lines took 1.6x as long,
    # ``benchmarks/results/depthwise-lines-xeon.json``): with stride 1 on the line a
    # shifted copy, else gathered through ``reads``.  A plane is staged one item ahead
    # of its reads, so that those loads never wait on the stores just made.  Blocks of
    # 8 output rows of one phase x one vector along the line are summed in registers.
    groups, multiplier, size1, size2 = sizes[0], sizes[1], sizes[2], sizes[3]
    out1, out2, k1, taps = sizes[4], sizes[5], sizes[6], sizes[7]
    window_rows, line, stage_line, margin = sizes[8], sizes[9], sizes[10], sizes[11]
    row_base, s2, phases, s1 = sizes[12], sizes[13], sizes[14], sizes[15]
    copies = 0 if UNROLLED else taps * window_rows * line
    stage = (window_rows if UNROLLED else size1) * stage_line
    first_staged = margin - row_base * stage_line if UNROLLED else margin
    staged_rows = min(size1, window_rows + row_base) if UNROLLED else size1
    # Each phase's (row tap, window copy) pairs as one list of steps (the window offset
    # of the step's first row, its weight vectors' offset): the block runs one loop over
    # them, not a loop over the copies inside one over the row taps.
    steps_first = np.empty(phases + 1, np.int64)
    step_rows = np.empty(max(1, (row_first[phases] - row_first[0]) * taps), np.int64)
    step_weights = np.empty_like(step_rows)
    steps = np.int64(0)
    for p1 in range(phases):
        steps_first[p1] = steps
        for e in range(row_first[p1], row_first[p1 + 1]):
            for m in range(taps):
                step_rows[steps] = (row_shifts[e] + m * window_rows) * line
                step_weights[steps] = (row_taps[e] * taps + m) * lanes
                steps += 1
    steps_first[phases] = steps
    base = (-(scratch.ctypes.data // scratch.itemsize)) % lanes
    scratch[:] = 0.0  # the borders no plane writes
    for item in range(start - 1, stop):
        ahead = item + 1
        if ahead < stop:
            staged = base + copies + (ahead % 2) * stage + first_staged
            read = ahead * size1 * size2
            for x1 in range(staged_rows):
                for x2 in range(0, size2, lanes):
                    vector_store(scratch, staged + x1 * stage_line + x2, vector_load_first(
                        source, read + x1 * size2 + x2, min(lanes, size2 - x2), lanes))
        if item < start:
            continue
        staged = base + copies + (item % 2) * stage
        for x1 in range(0 if UNROLLED else size1):
            r = x1 - row_base
            if r < window_rows:
                stage_row = staged + x1 * stage_line
                for m in range(taps):
                    write = base + (m * window_rows + r) * line
                    if s2 == 1:  # the m-th tap of every output, a shift of the line
                        shifted = stage_row + reads[m * lanes]
                        for x2 in range(0, line, lanes):
                            vector_store(scratch, write + x2,
                                         vector_load(scratch, shifted + x2, lanes))
                    else:
                        for v in range(line // lanes):
                            vector_store(scratch, write + v * lanes, phases_gathered(
                                scratch, stage_row, reads, (v * taps + m) * lanes, s2))
        n, g = item // groups, item % groups
        for c in range(multiplier):
            channel = g * multiplier + c
            weights_at = channel * k1 * taps * lanes
            out_at = (n * groups * multiplier + channel) * out1 * out2
            for p1 in range(phases):
                count = (out1 - p1 + s1 - 1) // s1
                if UNROLLED:  # every phase has UNROLLED row taps
                    unrolled_rows(scratch, weights, out, staged, stage_line, reads,
                                  weights_at, row_taps, row_shifts, row_first[p1], taps,
                                  out_at, p1, s1, count, out2, line)
                else:
                    rows(scratch, weights, out, base, weights_at, out_at, p1, s1, count,
                         out2, line, steps_first, step_rows, step_weights)


@cached_njit(nogil=True, inline="always")
def phases_gathered(scratch, stage_row, reads, at, s2):  # pragma: no cover - compiled
    # The lanes of one window copy's vector, lane l from phase l % s2: with 2 or 4
    # phases, each phase's inputs are consecutive, so a vector of each (read from
    # reads[at + phase], which points into the zero margin for a phase with fewer taps)
    # interleaved with the others; else a gather.
    if s2 == 2:
        return vector_interleave(vector_load(scratch, stage_row + reads[at], lanes),
                                 vector_load(scratch, stage_row + reads[at + 1], lanes), 0)
    if s2 == 4:
        return vector_interleave(
            vector_interleave(vector_load(scratch, stage_row + reads[at], lanes),
                              vector_load(scratch, stage_row + reads[at + 2], lanes), 0),
            vector_interleave(vector_load(scratch, stage_row + reads[at + 1], lanes),
                              vector_load(scratch, stage_row + reads[at + 3], lanes), 0), 0)
    return vector_load_spread(scratch, stage_row, reads, at, lanes)


@cached_njit(nogil=True, inline="always")
def rows(scratch, weights, out, base, weights_at, out_at, p1, s1, count, out2, line,
         steps_first, step_rows, step_weights):  # pragma: no cover - compiled
    # The `count` output rows p1 + q * s1 of one plane, from the window copies: blocks
    # of 8 rows x one vector, over the phase's steps, every row tap with every window
    # copy (the weight vectors hold each lane's tap, zeros where its phase has fewer).
    for q0 in range(0, count, 8):
        valid = min(8, count - q0)
        for x2 in range(0, line, lanes):
            a0 = vector_zero(scratch, lanes)
            a1 = vector_zero(scratch, lanes)
            a2 = vector_zero(scratch, lanes)
            a3 = vector_zero(scratch, lanes)
            a4 = vector_zero(scratch, lanes)
            a5 = vector_zero(scratch, lanes)
            a6 = vector_zero(scratch, lanes)
            a7 = vector_zero(scratch, lanes)
            row = base + q0 * line + x2
            for k in range(steps_first[p1], steps_first[p1 + 1]):
                w = vector_load(weights, weights_at + step_weights[k], lanes)
                p = row + step_rows[k]
                a0 = vector_fma(vector_load(scratch, p, lanes), w, a0)
                a1 = vector_fma(vector_load(scratch, p + line, lanes), w, a1)
                a2 = vector_fma(vector_load(scratch, p + 2 * line, lanes), w, a2)
                a3 = vector_fma(vector_load(scratch, p + 3 * line, lanes), w, a3)
                a4 = vector_fma(vector_load(scratch, p + 4 * line, lanes), w, a4)
                a5 = vector_fma(vector_load(scratch, p + 5 * line, lanes), w, a5)
                a6 = vector_fma(vector_load(scratch, p + 6 * line, lanes), w, a6)
                a7 = vector_fma(vector_load(scratch, p + 7 * line, lanes), w, a7)
            columns = min(lanes, out2 - x2)
            at = out_at + (p1 + q0 * s1) * out2 + x2
            step = s1 * out2
            vector_store_first(out, at, columns, a0)
            if valid > 1:
                vector_store_first(out, at + step, columns, a1)
            if valid > 2:
                vector_store_first(out, at + 2 * step, columns, a2)
            if valid > 3:
                vector_store_first(out, at + 3 * step, columns, a3)
            if valid > 4:
                vector_store_first(out, at + 4 * step, columns, a4)
            if valid > 5:
                vector_store_first(out, at + 5 * step, columns, a5)
            if valid > 6:
                vector_store_first(out, at + 6 * step, columns, a6)
            if valid > 7:
                vector_store_first(out, at + 7 * step, columns, a7)
