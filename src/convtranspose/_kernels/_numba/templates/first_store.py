"""Sums stored channels first (:func:`convtranspose._kernels._numba.transpose.first_store_kernel`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``lanes``, ``tile``, ``partial_tile``
(the layout copies' register-block transposes, :mod:`..transpose`).
Its kernels' decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)


@cached_njit(nogil=True)
def store_first(out, at, out_step, first_out, first_at, plane, pixels_count,
                channels):  # pragma: no cover
    # The sums of `pixels_count` pixels (rows `out_step` apart from `at`) and their
    # first `channels` channels as `channels` rows of pixels (`plane` apart from
    # `first_at`): blocks of lanes x lanes transposed in registers (`partial_tile` for
    # a last band of fewer pixels), the channels past them one at a time.
    whole = channels - channels % lanes if channels > 0 else 0
    for p0 in range(0, pixels_count, lanes):
        rows = min(lanes, pixels_count - p0)
        for c0 in range(0, whole, lanes):
            if rows == lanes:
                tile(out, at + p0 * out_step + c0, out_step, first_out,
                     first_at + c0 * plane + p0, plane)
            else:
                partial_tile(out, at + p0 * out_step + c0, out_step, rows, first_out,
                             first_at + c0 * plane + p0, plane)
        for c in range(whole, channels):
            for p in range(p0, p0 + rows):
                first_out[first_at + c * plane + p] = out[at + p * out_step + c]
