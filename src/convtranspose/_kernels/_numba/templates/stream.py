"""The product of ``stream`` (:mod:`convtranspose._kernels.stream`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``block`` (a register block of
``positions`` rows by ``chunk`` columns that adds to what ``dest`` holds), ``tail``
(the same block for the last ``tail_positions`` rows; never called where that is 0),
``chunk``, ``lanes`` (a vector's; ``chunk`` is a whole number of them), ``positions``,
``tail_positions``, ``row_block``, ``prefetch_rows`` (how far ahead a panel row's copy
asks for the filter's lines; 0: not at all), ``line`` (elements per cache line), ``np``
and the intrinsics ``vector_load``, ``vector_store`` and ``prefetch``.
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True)
def pieces(source, matrix, dest, table, rows, panel_width, start,
           stop):  # pragma: no cover - compiled
    # The products of the pieces [start, stop) of `table`, a row each: the offsets
    # of its inputs in `source`, its filter rows in `matrix` and its sums in `dest`,
    # then `dest_step`, `row_width`, `ci`, `m_start` and `m_stop` of `product`.
    for k in range(start, stop):
        product(source[table[k, 0]:], matrix[table[k, 1]:], dest[table[k, 2]:],
                table[k, 3], table[k, 4], table[k, 5], rows, table[k, 6], table[k, 7],
                panel_width)


@cached_njit(nogil=True)
def product(source, matrix, dest, dest_step, row_width, ci, rows, m_start, m_stop,
            panel_width):  # pragma: no cover - compiled
    # dest[p * dest_step + m] += sum_i source[i * rows + p] * matrix[i * row_width + m]
    # for p < rows and m in [m_start, m_stop) (whole chunks).  The filter's rows are
    # taken `row_block` at a time: within a block, every chunk of columns and every
    # block of positions, so the block's rows (a few hundred pages of a large filter)
    # stay in the TLB while all their columns are used.  Column by column over all
    # rows, a chunk reads 256 bytes from each of Ci pages: a TLB miss each.  Each
    # block's rows are copied, `panel_width` columns at a time (whole chunks), into a
    # contiguous panel that every block of positions then reads: rows of a large
    # filter lie a multiple of 4 KiB apart, so their pieces at one column fall into
    # one set of every L1 (and of a 512 KiB L2) and evict each other before the next
    # block of positions reads them again.
    reads = np.zeros(1, np.int64)
    taps = np.empty(1, np.int64)
    panel = np.empty(row_block * panel_width, matrix.dtype)
    whole = rows - tail_positions
    for r0 in range(0, ci, row_block):
        count = min(row_block, ci - r0)
        for c0 in range(m_start, m_stop, panel_width):
            width = min(panel_width, m_stop - c0)
            for i in range(count):
                # In explicit vectors: numba compiles a slice assignment, or a loop
                # of elements (the two arrays may overlap), to scalar copies, which
                # took most of a 32 MiB filter's time (``benchmarks/results/
                # stream-zen3.json``, panel_copy).
                at, to = (r0 + i) * row_width + c0, i * width
                for j in range(0, width, lanes):
                    vector_store(panel, to + j, vector_load(matrix, at + j, lanes))
                if prefetch_rows:
                    ahead = at + prefetch_rows * row_width
                    for j in range(0, width, line):
                        prefetch(matrix, ahead + j)
            for m0 in range(0, width, chunk):
                taps[0] = m0
                for p0 in range(0, whole, positions):
                    block(source, panel, dest, p0 * dest_step + c0 + m0, dest_step, reads,
                          taps, 1, r0 * rows + p0, 1, rows, count, 0, width)
                if tail_positions:
                    tail(source, panel, dest, whole * dest_step + c0 + m0, dest_step, reads,
                         taps, 1, r0 * rows + whole, 1, rows, count, 0, width)
