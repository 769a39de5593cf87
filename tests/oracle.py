"""A slow, obviously correct transposed convolution: the test oracle.

Written straight from the canonical definition in ``shared/SEMANTICS.md``, with
no code shared with the library: a Python loop over kernel taps, exact
accumulation (float64 for floats, Python-int-exact int64 wrap for integers).

    full[n, g*Co + co, x*s + k*d] += data[n, g*Ci + ci, x] * filter[g, ci, co, k]
    out[..., o] = full[..., o + offset]  (0 outside [0, F))
"""

import itertools

import numpy as np


def full_transposed_convolution(data, filter_gcok, strides, dilations):
    """The uncropped result for NCX data and a (G, Ci, Co, K...) filter, in float64 or int64."""
    data = np.asarray(data)
    filter_gcok = np.asarray(filter_gcok)
    acc = np.int64 if data.dtype.kind in "iu" else np.float64
    data = data.astype(acc)
    weights = filter_gcok.astype(acc)
    groups, ci, co = weights.shape[:3]
    kernel = weights.shape[3:]
    n, spatial = data.shape[0], data.shape[2:]
    full_shape = tuple((x - 1) * s + (k - 1) * d + 1
                       for x, k, s, d in zip(spatial, kernel, strides, dilations))
    full = np.zeros((n, groups * co) + full_shape, acc)
    with np.errstate(over="ignore"):
        for g in range(groups):
            x_g = data[:, g * ci:(g + 1) * ci]
            for tap in itertools.product(*(range(k) for k in kernel)):
                w = weights[(g, slice(None), slice(None)) + tap]  # (ci, co)
                contribution = np.einsum("nc...,co->no...", x_g, w)
                target = tuple(slice(k * d, k * d + (x - 1) * s + 1, s)
                               for k, d, x, s in zip(tap, dilations, spatial, strides))
                full[(slice(None), slice(g * co, (g + 1) * co)) + target] += contribution
    return full


def crop(full, offsets, sizes):
    """``out[..., o] = full[..., o + offset]`` for o in [0, size), zeros outside the full result."""
    out = np.zeros(full.shape[:2] + tuple(sizes), full.dtype)
    src, dst = [], []
    for f, offset, size in zip(full.shape[2:], offsets, sizes):
        lo, hi = max(offset, 0), min(offset + size, f)
        if lo >= hi:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - offset, hi - offset))
    out[(Ellipsis,) + tuple(dst)] = full[(Ellipsis,) + tuple(src)]
    return out
