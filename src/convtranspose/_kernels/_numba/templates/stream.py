"""The product of ``stream`` (:mod:`convtranspose._kernels.stream`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block`` (a register block of
``positions`` rows by ``chunk`` columns that adds to what ``dest`` holds), ``tail``
(the same block for the last ``tail_positions`` rows; never called where that is 0),
``chunk``, ``lanes`` (a vector's; ``chunk`` is a whole number of them), ``positions``,
``tail_positions``, ``row_block``, ``prefetch_chunks`` (how far along a row, in chunks,
a panel row's copy asks for the filter's lines), ``line`` (elements per cache line), ``np``
and the intrinsics ``vector_load``, ``vector_store`` and ``prefetch``.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True)
def pieces(source, matrix, dest, table, rows, start, stop):  # pragma: no cover - compiled
    # The products of the pieces [start, stop) of `table`, a row each: the offsets
    # of its inputs in `source`, its filter rows in `matrix` and its sums in `dest`,
    # then `dest_step`, `row_width`, `ci`, `m_start` and `m_stop` of `product`.
    for k in range(start, stop):
        product(source[table[k, 0]:], matrix[table[k, 1]:], dest[table[k, 2]:],
                table[k, 3], table[k, 4], table[k, 5], rows, table[k, 6], table[k, 7])


@cached_njit(nogil=True)
def product(source, matrix, dest, dest_step, row_width, ci, rows, m_start,
            m_stop):  # pragma: no cover - compiled
    # dest[p * dest_step + m] += sum_i source[i * rows + p] * matrix[i * row_width + m]
    # for p < rows and m in [m_start, m_stop) (whole chunks).  The filter's rows are
    # taken `row_block` at a time and, within a block, a chunk of columns at a time:
    # each block row's chunk is copied into a contiguous panel that every block of
    # positions then reads.  Rows of a large filter lie a multiple of 4 KiB apart, so
    # their pieces at one column fall into one set of L1 and would evict each other
    # before the next block of positions reads them again.  Each row is read as a
    # stream along its columns, and as a row's chunk is copied, the same row's chunk
    # `prefetch_chunks` further on (past the piece's end: the next row block's) is
    # asked for.
    reads = np.zeros(1, np.int64)
    taps = np.zeros(1, np.int64)
    panel = np.empty(row_block * chunk, matrix.dtype)
    whole = rows - tail_positions
    for r0 in range(0, ci, row_block):
        count = min(row_block, ci - r0)
        for c0 in range(m_start, m_stop, chunk):
            ahead, ahead_row = c0 + prefetch_chunks * chunk, r0
            if ahead >= m_stop:
                ahead, ahead_row = m_start + ahead - m_stop, r0 + row_block
            for i in range(count):
                # In explicit vectors: numba compiles a slice assignment, or a loop
                # of elements (the two arrays may overlap), to scalar copies, which
                # took most of a 32 MiB filter's time (``benchmarks/results/
                # stream-zen3.json``, panel_copy).
                at, to = (r0 + i) * row_width + c0, i * chunk
                for j in range(0, chunk, lanes):
                    vector_store(panel, to + j, vector_load(matrix, at + j, lanes))
                if ahead_row + i < ci:
                    for j in range(0, chunk, line):
                        prefetch(matrix, (ahead_row + i) * row_width + ahead + j)
            for p0 in range(0, whole, positions):
                block(source, panel, dest, p0 * dest_step + c0, dest_step, reads, taps, 1,
                      r0 * rows + p0, 1, rows, count, 0, chunk)
            if tail_positions:
                tail(source, panel, dest, whole * dest_step + c0, dest_step, reads, taps, 1,
                     r0 * rows + whole, 1, rows, count, 0, chunk)
