"""Exact transposed convolutions of 8-bit integers with AVX512-VNNI products.

For the quantized dialects' exact sums (:func:`convtranspose._frontends.quantized.exact_sum`):
the data's values (zero point already subtracted) shifted by a constant into ``[0,
255]``, the weights in ``[-128, 127]``, so that every product is one of ``vpdpbusd``'s
unsigned-times-signed byte products (:mod:`._numba.int8`).  Per group, one product of
the input pixels ``(M, Ci)`` with the weights ``(Ci, Co * K)`` gives every (pixel, output
channel, tap) sum in int32, the shift's share ``shift * sum_ci w`` is subtracted from
each column, and each tap's column block is added into the outputs it reaches
(col2im, with ``col2im-nxc``'s compiled scatter).  Exact: the products' sums stay within int32, and
the outputs are summed in int32 where the bound allows, else int64.
"""

from __future__ import annotations

import numpy as np

from .._plan.geometry import taps_per_output

__all__ = ["u8s8_transposed"]

#: The largest magnitude an int32 holds.
_INT32_MAX = 2 ** 31 - 1


def u8s8_transposed(data: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                    target) -> np.ndarray | None:
    """The exact transposed convolution of integer ``data`` ``(N, G*Ci, X...)`` (or
    channels last) with integer ``weights`` ``(G, Ci, Co, K...)``, as int32 or int64;
    None where the data span more than 256 values, a weight lies outside int8 or the
    layer has more than three spatial axes (the caller sums another way).  Needs numba and AVX512-VNNI (the caller checks);
    ``target``: the machine (its threads)."""
    if not 1 <= len(axes) <= 3:  # the compiled scatter's ranks
        return None
    low, high = int(data.min(initial=0)), int(data.max(initial=0))
    if high - low > 255 or int(weights.min(initial=0)) < -128 or int(
            weights.max(initial=0)) > 127:
        return None
    from ._numba.int8 import pack_signed, u8s8_products
    from ._numba.scatter import col2im_scatter

    groups, ci, co = weights.shape[:3]
    kernel = weights.shape[3:]
    shift = -low  # data + shift is in [0, 255]
    pixels = data if channels_last else np.moveaxis(data, 1, -1)  # (N, X..., G*Ci)
    batch, inputs = pixels.shape[0], pixels.shape[1:-1]
    rows = pixels.reshape(-1, groups, ci)
    bound = ci * taps_per_output(axes) * 255 * 128
    out = np.zeros((batch,) + tuple(a.output_size for a in axes) + (groups, co),
                   np.int32 if bound <= _INT32_MAX else np.int64)
    for g in range(groups):
        # Columns (tap, output channel): each tap's sums are rows of Co contiguous values.
        matrix = np.ascontiguousarray(np.moveaxis(weights[g], 1, -1).reshape(ci, -1), np.int8)
        packed, k4, width = pack_signed(matrix)
        shifted = np.zeros((rows.shape[0], k4 * 4), np.uint8)
        np.add(rows[:, g], shift, out=shifted[:, :ci], casting="unsafe")
        # (A copy only where the columns were padded, or the sums need int64.)
        cols = np.ascontiguousarray(
            u8s8_products(shifted, packed, k4, width, target.threads)[:, :matrix.shape[1]],
            out.dtype)
        if shift:
            cols -= (shift * matrix.sum(axis=0, dtype=np.int64)).astype(out.dtype)
        # col2im: each tap's sums into the outputs it reaches, in one compiled pass.
        col2im_scatter(cols.reshape((1, batch) + inputs + kernel + (co,)), out,
                       out[..., g, :][None], axes, target)
    result = out.reshape(out.shape[:-2] + (groups * co,))
    return result if channels_last else np.moveaxis(result, -1, 1)
