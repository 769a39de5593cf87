"""The channels-first data's word kernels (:mod:`convtranspose._kernels._numba.int8`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``chunk``, ``halves``, ``lanes``,
``np``, ``step``, ``tile``.  Its kernels' decorator, ``cached_njit``
(:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True, inline="always")
def _word(source, at, pixels, shift, count):  # pragma: no cover - compiled
    # The word of `count` (1-4 bytes' or 1-2 halves') consecutive channel planes at
    # `at`, `pixels` apart.
    word = np.uint32(0)
    if halves:
        for i in range(count):
            word |= np.uint32(np.uint16(np.int16(source[at + i * pixels]))) << np.uint32(16 * i)
    else:
        for i in range(count):
            word |= np.uint32(np.uint8(source[at + i * pixels] + shift)) << np.uint32(8 * i)
    return word


@cached_njit(nogil=True, inline="always")
def _fill_plane(source, first, pixels, shift, channels, row, count):  # pragma: no cover
    # `row[:count]`: the words of one word plane, from the element `first` of
    # `source` on in each of its `channels` channel planes (1 to 4 bytes, 1 to 2
    # halves): a whole word's planes read and the words stored along the pixels, a
    # loop LLVM vectorizes; a partial word's one word at a time.
    if halves and channels == 2:
        low = source[first:first + count]
        high = source[first + pixels:first + pixels + count]
        for p in range(count):
            row[p] = (np.uint32(np.uint16(np.int16(low[p])))
                      | np.uint32(np.uint16(np.int16(high[p]))) << np.uint32(16))
    elif not halves and channels == 4:
        c0 = source[first:first + count]
        c1 = source[first + pixels:first + pixels + count]
        c2 = source[first + 2 * pixels:first + 2 * pixels + count]
        c3 = source[first + 3 * pixels:first + 3 * pixels + count]
        for p in range(count):
            row[p] = (np.uint32(np.uint8(c0[p] + shift))
                      | np.uint32(np.uint8(c1[p] + shift)) << np.uint32(8)
                      | np.uint32(np.uint8(c2[p] + shift)) << np.uint32(16)
                      | np.uint32(np.uint8(c3[p] + shift)) << np.uint32(24))
    else:
        for p in range(count):
            row[p] = _word(source, first + p, pixels, shift, channels)


@cached_njit(nogil=True)
def kernel(source, out, shift, groups, ci, words, pixels, start,
           stop):  # pragma: no cover - compiled
    # source: flat (N, G*Ci, P) integers; out: flat uint32 (N, P, G*words), word w of
    # group g holding channels (4w .. 4w + 3, or with `halves` 2w and 2w + 1) of the
    # group, zero past Ci.  Items (n, band of `lanes` words, chunk of `chunk` pixels)
    # with flat index in [start, stop): the band's word planes over the chunk made in
    # a scratch block (whole words along the pixels: vectorized), then transposed in
    # register blocks of lanes x lanes words, the edges one word at a time.
    per_word = 2 if halves else 4
    width = groups * words
    bands = (width + lanes - 1) // lanes
    chunks = (pixels + chunk - 1) // chunk
    scratch = np.empty(lanes * chunk, np.uint32)
    for item in range(start, stop):
        n, band, part = item // (bands * chunks), item // chunks % bands, item % chunks
        first_word, first_pixel = band * lanes, part * chunk
        rows = min(lanes, width - first_word)
        count = min(chunk, pixels - first_pixel)
        for r in range(rows):
            g, w = (first_word + r) // words, (first_word + r) % words
            plane = ((n * groups + g) * ci + per_word * w) * pixels + first_pixel
            _fill_plane(source, plane, pixels, shift, min(per_word, ci - per_word * w),
                        scratch[r * chunk:(r + 1) * chunk], count)
        at = (n * pixels + first_pixel) * width + first_word
        done = 0
        if rows == lanes:
            done = count - count % lanes
            for c in range(0, done, lanes):
                tile(scratch, np.uint64(c), step, out, np.uint64(at + c * width),
                     np.uint64(width))
        for c in range(done, count):
            for r in range(rows):
                out[at + c * width + r] = scratch[r * chunk + c]
