"""The product of ``stream`` (:mod:`convtranspose._kernels.stream`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block`` (a register block of
``positions`` rows by ``chunk`` columns that adds to what ``dest`` holds), ``tail``
(the same block for the last ``tail_positions`` rows; never called where that is 0),
``chunk``, ``positions``, ``tail_positions``, ``row_block``, ``np``.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True)
def product(source, matrix, dest, dest_step, row_width, ci, rows, m_start,
            m_stop):  # pragma: no cover - compiled
    # dest[p * dest_step + m] += sum_i source[p * ci + i] * matrix[i * row_width + m]
    # for p < rows and m in [m_start, m_stop) (whole chunks).  The filter's rows are
    # taken `row_block` at a time: within a block, every chunk of columns and every
    # block of positions, so the block's rows (a few hundred pages of a large filter)
    # stay in the TLB and caches while all their columns are used.  Column by column
    # over all rows, a chunk reads 256 bytes from each of Ci pages: a TLB miss each.
    reads = np.zeros(1, np.int64)
    taps = np.empty(1, np.int64)
    whole = rows - tail_positions
    for r0 in range(0, ci, row_block):
        count = min(row_block, ci - r0)
        for m0 in range(m_start, m_stop, chunk):
            taps[0] = m0 + r0 * row_width
            for p0 in range(0, whole, positions):
                block(source, matrix, dest, p0 * dest_step + m0, dest_step, reads, taps, 1,
                      p0 * ci + r0, ci, 1, count, 0, row_width)
            if tail_positions:
                tail(source, matrix, dest, whole * dest_step + m0, dest_step, reads, taps, 1,
                     whole * ci + r0, ci, 1, count, 0, row_width)
