"""The layout copy kernel (:mod:`convtranspose._kernels._numba.transpose`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``lanes``, ``np``, ``step``, ``tile``,
``partial_tile``, ``masked_tiles`` (whether a last band of fewer rows goes through
``partial_tile``'s masked stores, or element by element).
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True)
def kernel(src, dst, rows, cols, start, stop):  # pragma: no cover - compiled
    # (B, rows, cols) into (B, cols, rows), flat C-order buffers: the bands of `lanes`
    # rows with flat index (b, band) in [start, stop), whole blocks of lanes x lanes
    # transposed in registers by `tile` (`partial_tile` for a last band of fewer rows),
    # the columns past them one element at a time.
    height, width = np.uint64(rows), np.uint64(cols)
    bands = (rows + lanes - 1) // lanes
    whole = width - width % step
    for item in range(start, stop):
        base = np.uint64(item // bands) * height * width
        first = np.uint64((item % bands) * lanes)
        last = min(first + step, height)
        done = np.uint64(0)
        if last - first == step:
            for c in range(np.uint64(0), whole, step):
                tile(src, base + first * width + c, width, dst, base + c * height + first,
                     height)
            done = whole
        elif whole and masked_tiles:  # fewer rows (3 channels): zero rows, stored masked
            for c in range(np.uint64(0), whole, step):
                partial_tile(src, base + first * width + c, width, last - first, dst,
                             base + c * height + first, height)
            done = whole
        for c in range(done, width):
            for r in range(first, last):
                dst[base + c * height + r] = src[base + r * width + c]
