"""The channels-last copy with zeros around it (:func:`convtranspose._kernels._numba
.transpose.padded_channels_last_copy`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``lanes``, ``tile``,
``partial_tile`` (the layout copies' register-block transposes), ``masked_tiles``
(whether a band of fewer than ``lanes`` channels goes through ``partial_tile``'s masked
stores, or element by element).
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def kernel(src, dst, sizes, start, stop):  # pragma: no cover - compiled
    # src flat (N, C, Y1, Y2, Y3); dst flat (N, Y1', Y2', Y3', C), zeros where nothing
    # is copied; sizes = (N, C, Y1, Y2, Y3, Y1', Y2', Y3', B1, B2, B3): source pixel
    # (y1, y2, y3) goes to (B1 + y1, B2 + y2, B3 + y3).  The flat index (n, y1, y2,
    # band) in [start, stop): a band of `lanes` channels of one source line, whole
    # blocks of lanes x lanes transposed in registers (`partial_tile` for a last band
    # of fewer channels where `masked_tiles`, else element by element), the pixels past
    # them one element at a time.
    channels, y1s, y2s, y3s = sizes[1], sizes[2], sizes[3], sizes[4]
    padded1, padded2, padded3 = sizes[5], sizes[6], sizes[7]
    plane = y1s * y2s * y3s
    bands = (channels + lanes - 1) // lanes
    whole = y3s - y3s % lanes
    for item in range(start, stop):
        c0 = item % bands * lanes
        line = item // bands
        y2 = line % y2s
        y1 = line // y2s % y1s
        n = line // (y2s * y1s)
        rows = min(lanes, channels - c0)
        src_at = (n * channels + c0) * plane + (y1 * y2s + y2) * y3s
        dst_at = (((n * padded1 + sizes[8] + y1) * padded2 + sizes[9] + y2) * padded3
                  + sizes[10]) * channels + c0
        tiled = whole if rows == lanes or masked_tiles else 0
        for x in range(0, tiled, lanes):
            if rows == lanes:
                tile(src, src_at + x, plane, dst, dst_at + x * channels, channels)
            else:
                partial_tile(src, src_at + x, plane, rows, dst, dst_at + x * channels,
                             channels)
        for x in range(tiled, y3s):
            for c in range(rows):
                dst[dst_at + x * channels + c] = src[src_at + c * plane + x]
