"""Exact transposed convolutions of 8-bit integers with AVX512-VNNI products.

For the quantized dialects' exact sums (:func:`convtranspose._frontends.quantized.exact_sum`):
the data's values (zero point already subtracted) shifted by a constant into ``[0,
255]``, the weights in ``[-128, 127]``, so that every product is one of ``vpdpbusd``'s
unsigned-times-signed byte products (:mod:`._numba.int8`).  Per group, one product of
the input pixels ``(M, Ci)`` with the weights ``(Ci, Co * K)`` gives every (pixel, output
channel, tap) sum in int32 (every group's in one pass over the threads), the shift's
share ``shift * sum_ci w`` is subtracted from each column, and each tap's column block
is added into the outputs it reaches (col2im, with ``col2im-nxc``'s compiled scatter,
every group in one pass).  Exact: the products' sums stay within int32, and
the outputs are summed in int32 where the bound allows, else int64.

The packed weights and their column sums are kept in the weights memo
(:func:`convtranspose._runtime.memo.derived_from`): a layer called again with the same
weights packs nothing (packing a DCGAN 256->128 4x4 filter takes about 1.5 ms, comparing
it with the kept copy 0.15 ms, of a call of about 4 ms on an Intel Xeon).
"""

from __future__ import annotations

import math

import numpy as np

from .._plan.geometry import taps_per_output
from .._runtime.memo import derived_from, frozen

__all__ = ["u8s8_transposed"]

#: The largest magnitude an int32 holds.
_INT32_MAX = 2 ** 31 - 1


def _packed_weights(weights: np.ndarray) -> tuple | None:
    """Per group, the weights ``(Ci, Co * K)`` (columns: tap, output channel) packed for
    the products, with their column sums (int64) for the shift's share; None where a
    weight lies outside int8.  Kept in the weights memo, which compares the filter value
    by value, so weights edited in place are packed again."""
    derived = derived_from(weights, "u8s8")
    packed = derived.get("u8s8 packed")
    if packed is None:
        from ._numba.int8 import pack_signed

        if int(weights.min(initial=0)) < -128 or int(weights.max(initial=0)) > 127:
            packed = ()  # not bytes: the caller sums another way
        else:
            groups, ci = weights.shape[:2]
            kept = []
            for g in range(groups):
                matrix = np.moveaxis(weights[g], 1, -1).reshape(ci, -1).astype(np.int8)
                words, k4, width = pack_signed(matrix)
                sums = matrix.sum(axis=0, dtype=np.int64)
                kept.append((frozen(words), k4, width, frozen(sums)))
            packed = tuple(kept)
        derived["u8s8 packed"] = packed
    return packed or None


def _shifted_rows(data: np.ndarray, channels_last: bool, groups: int, ci: int, k4: int,
                  shift: int) -> np.ndarray:
    """``data + shift`` as bytes ``(G, M, k4 * 4)``: each group's input pixels as rows of
    its ``Ci`` channels, zero past them; one cast pass over the data, whatever its
    layout and integer type."""
    rank = data.ndim - 2
    # (N, X..., G*Ci); transposes rather than np.moveaxis, a tenth of a small call.
    pixels = data if channels_last else data.transpose((0,) + tuple(range(2, rank + 2)) + (1,))
    rows = math.prod(pixels.shape[:-1])
    shifted = np.empty((groups, rows, k4 * 4), np.uint8)
    if k4 * 4 > ci:
        shifted[:, :, ci:] = 0
    source = pixels.reshape(pixels.shape[:-1] + (groups, ci)).transpose(
        (rank + 1,) + tuple(range(rank + 1)) + (rank + 2,))  # (G, N, X..., Ci)
    target = shifted[:, :, :ci].reshape(source.shape)
    if shift:
        np.add(source, shift, out=target, casting="unsafe")
    else:
        np.copyto(target, source, casting="unsafe")
    return shifted


def u8s8_transposed(data: np.ndarray, weights: np.ndarray, axes, channels_last: bool,
                    target) -> np.ndarray | None:
    """The exact transposed convolution of integer ``data`` ``(N, G*Ci, X...)`` (or
    channels last) with integer ``weights`` ``(G, Ci, Co, K...)``, as int32 or int64;
    None where the data span more than 256 values, a weight lies outside int8 or the
    layer has more than three spatial axes (the caller sums another way).  Needs numba and AVX512-VNNI (the caller checks);
    ``target``: the machine (its threads).  The channels-first result is a view of a
    channels-last array."""
    if not 1 <= len(axes) <= 3:  # the compiled scatter's ranks
        return None
    low, high = int(data.min(initial=0)), int(data.max(initial=0))
    if high - low > 255:
        return None
    packed = _packed_weights(weights)
    if packed is None:
        return None
    from ._numba.int8 import group_products
    from ._numba.scatter import col2im_scatter

    groups, ci, co = weights.shape[:3]
    kernel = weights.shape[3:]
    shift = -low  # data + shift is in [0, 255]
    k4, width = packed[0][1], packed[0][2]  # every group's: one Ci, one Co * K
    shifted = _shifted_rows(data, channels_last, groups, ci, k4, shift)
    batch = data.shape[0]
    inputs = data.shape[1:-1] if channels_last else data.shape[2:]
    bound = ci * taps_per_output(axes) * 255 * 128
    out = np.zeros((batch,) + tuple(a.output_size for a in axes) + (groups, co),
                   np.int32 if bound <= _INT32_MAX else np.int64)
    # Columns (group, pixel, tap, output channel), every group's in one pass: each tap's
    # sums are rows of Co contiguous values.  The padded columns are skipped by the
    # scatter's strides, not copied away.
    columns = co * math.prod(kernel)
    flat = group_products(shifted, [p[0] for p in packed], k4, width, target.threads)
    cols = flat.reshape(groups, -1, width)[:, :, :columns]
    if cols.dtype != out.dtype:
        cols = cols.astype(out.dtype)
    if shift:
        cols -= (shift * np.stack([p[3] for p in packed]))[:, None, :].astype(out.dtype)
    # col2im: each tap's sums into the outputs it reaches, every group in one compiled pass.
    region = out.transpose((out.ndim - 2,) + tuple(range(out.ndim - 2)) + (out.ndim - 1,))
    col2im_scatter(cols.reshape((groups, batch) + inputs + kernel + (co,)), out, region, axes,
                   target)
    result = out.reshape(out.shape[:-2] + (groups * co,))
    return result if channels_last else result.transpose(
        (0, result.ndim - 1) + tuple(range(1, result.ndim - 1)))
