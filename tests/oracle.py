"""A slow, obviously correct transposed convolution: the test oracle.

Written straight from the canonical definition in ``docs/semantics.md``, with
no code shared with the library: a Python loop over kernel taps, exact
accumulation (float64 for floats, Python-int-exact int64 wrap for integers).

    full[n, g*Co + co, x*s + k*d] += data[n, g*Ci + ci, x] * filter[g, ci, co, k]
    out[..., o] = full[..., o + offset]  (0 outside [0, F))

Below it, one oracle per dialect (``openvino_cbpd``, ``openvino_group_cbpd``,
``onednn_conv_transpose``, ``onnx_conv_transpose`` and their ``*_case`` forms)
derives (offset, Y) per axis by transcribing the tables of docs/semantics.md (it never
imports ``convtranspose``), and ``assert_matches`` compares a result with a case
under the documented error bound.
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


def integer_scatter_sum(x, x_zp, w, w_zps, strides, pads_begin, sizes, groups, dilations):
    """``sum (x - x_zp)(w - w_zp)`` by scattering each input element through the
    kernel, in Python integers: ``x`` ``(N, C, X...)``, ``w`` ``(C, O, K...)`` (IOX,
    ``O`` per group), ``w_zps`` one zero point per weight column ``j < O``; input ``x``
    of tap ``k`` reaches output ``x * s - pads_begin + k * d`` of the output ``sizes``."""
    n, c_in = x.shape[:2]
    per_group, rank = w.shape[1], w.ndim - 2
    acc = np.zeros((n, per_group * groups, *sizes), dtype=object)
    for b, c in itertools.product(range(n), range(c_in)):
        g = c // (c_in // groups)
        for pos in itertools.product(*(range(s) for s in x.shape[2:])):
            value = int(x[(b, c, *pos)]) - x_zp
            for j in range(per_group):
                for tap in itertools.product(*(range(k) for k in w.shape[2:])):
                    out = [pos[a] * strides[a] - pads_begin[a] + tap[a] * dilations[a]
                           for a in range(rank)]
                    if all(0 <= o < s for o, s in zip(out, sizes)):
                        acc[(b, g * per_group + j, *out)] += value * (
                            int(w[(c, j, *tap)]) - w_zps[j])
    return acc


def integer_tap_sums(x, x_zp, w, w_zps, strides, pads_begin, sizes, groups, dilations):
    """:func:`integer_scatter_sum` by taps in NumPy int64 (each tap's products added at
    its output places, then cropped): the same sums, fast enough for layers of
    thousands of outputs per channel."""
    per_group, kernel = w.shape[1], w.shape[2:]
    centred = w.astype(np.int64) - np.asarray(w_zps, np.int64).reshape((1, -1) + (1,) * len(kernel))
    gcok = centred.reshape((groups, -1, per_group) + kernel)
    full = full_transposed_convolution(x.astype(np.int64) - x_zp, gcok, strides, dilations)
    return crop(full, pads_begin, sizes)


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


def windowed_transposed_convolution(data, filter_gcok, strides, dilations, offsets, sizes):
    """``crop(full_transposed_convolution(...), offsets, sizes)`` without the full result.

    Only the output window ``[offset, offset + Y)`` of each axis is kept, and every
    position ``x*s + k*d - offset`` is a Python integer: strides, dilations and pads of
    any size (far past 2**63) give the exact answer, as long as the window fits.
    """
    data = np.asarray(data)
    filter_gcok = np.asarray(filter_gcok)
    acc = np.int64 if data.dtype.kind in "iu" else np.float64
    data = data.astype(acc)
    weights = filter_gcok.astype(acc)
    groups, ci, co = weights.shape[:3]
    kernel, spatial = weights.shape[3:], data.shape[2:]
    n = data.shape[0]
    out = np.zeros((n, groups * co) + tuple(sizes), acc)
    # Per axis and tap k: the inputs x that land in the window, as (input, output) slices.
    reach = []
    for x_size, k_size, s, d, offset, y in zip(spatial, kernel, strides, dilations, offsets,
                                                sizes):
        per_tap = []
        for k in range(k_size):
            xs = [x for x in range(x_size) if 0 <= x * s + k * d - offset < y]
            if not xs:
                per_tap.append(None)
                continue
            first = xs[0] * s + k * d - offset
            step = s if len(xs) > 1 else 1
            per_tap.append((slice(xs[0], xs[-1] + 1), slice(first, first + (len(xs) - 1) * s + 1,
                                                            step)))
        reach.append(per_tap)
    with np.errstate(over="ignore"):
        for g in range(groups):
            x_g = data[:, g * ci:(g + 1) * ci]
            for tap in itertools.product(*(range(k) for k in kernel)):
                windows = [reach[a][k] for a, k in enumerate(tap)]
                if any(w is None for w in windows):
                    continue
                w = weights[(g, slice(None), slice(None)) + tap]  # (ci, co)
                source = x_g[(slice(None), slice(None)) + tuple(w_[0] for w_ in windows)]
                contribution = np.einsum("nc...,co->no...", source, w)
                target = (slice(None), slice(g * co, (g + 1) * co)) + tuple(w_[1] for w_ in windows)
                out[target] += contribution
    return out


def canonical_result(data_ncx, weights, axes):
    """The canonical transposed convolution of ``data_ncx`` ``(N, G*Ci, X...)`` and
    ``weights`` ``(G, Ci, Co, K...)`` over ``axes`` (AxisPlans): the full result, cropped."""
    full = full_transposed_convolution(data_ncx, weights, [a.stride for a in axes],
                                       [a.dilation for a in axes])
    return crop(full, [a.offset for a in axes], [a.output_size for a in axes])


def forward_convolution(x, w_gcok, strides, dilations, offsets, out_sizes):
    """Grouped N-D cross-correlation, the forward op whose adjoint is convT.

    ``x``: (N, G*Co, Y...) — the transposed op's OUTPUT shape; ``w_gcok``: the transposed
    op's (G, Ci, Co, K...) filter; the result has the transposed op's INPUT shape
    (N, G*Ci, X...), ``out_sizes`` = X.  Gathers from a zero-padded copy of ``x``.
    """
    groups, ci, co = w_gcok.shape[:3]
    kernel = w_gcok.shape[3:]
    n = x.shape[0]
    sizes = x.shape[2:]
    pad_lo, pad_hi = [], []
    for size, k, s, d, p, out in zip(sizes, kernel, strides, dilations, offsets, out_sizes):
        lowest = -p                                  # index read by o=0, k=0
        highest = (out - 1) * s + (k - 1) * d - p    # index read by the last o, last k
        pad_lo.append(max(0, -lowest))
        pad_hi.append(max(0, highest - (size - 1)))
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(pad_lo, pad_hi)))
    y = np.zeros((n, groups * ci) + tuple(out_sizes), x.dtype)
    for g in range(groups):
        xg = padded[:, g * co:(g + 1) * co]
        for tap in itertools.product(*(range(k) for k in kernel)):
            window = tuple(
                slice(lo + t * d - p, lo + t * d - p + (out - 1) * s + 1, s)
                for lo, t, d, p, s, out in zip(pad_lo, tap, dilations, offsets, strides,
                                               out_sizes))
            gathered = xg[(slice(None), slice(None)) + window]          # (N, Co, X...)
            weight = w_gcok[(g, slice(None), slice(None)) + tap]        # (Ci, Co)
            y[:, g * ci:(g + 1) * ci] += np.einsum("no...,co->nc...", gathered, weight)
    return y


def filter_gradient(data, grad, groups, kernel, strides, dilations, offsets):
    """The filter gradient ``(G, Ci, Co, K...)`` of the canonical transposed convolution of
    ``data`` (N, G*Ci, X...), element by element from its definition: the sum over n and
    x of ``data[n, g*Ci+ci, x] * grad[n, g*Co+co, x*s + k*d - offset]``, with ``grad``
    (N, G*Co, Y...) read as 0 outside its extent (float64)."""
    data = np.asarray(data, np.float64)
    grad = np.asarray(grad, np.float64)
    ci, co = data.shape[1] // groups, grad.shape[1] // groups
    sizes, limits = data.shape[2:], grad.shape[2:]
    result = np.zeros((groups, ci, co) + tuple(kernel))
    for tap in itertools.product(*(range(k) for k in kernel)):
        for x in itertools.product(*(range(size) for size in sizes)):
            t = [xi * s + k * d - p for xi, k, s, d, p in zip(x, tap, strides, dilations, offsets)]
            if all(0 <= ti < limit for ti, limit in zip(t, limits)):
                for g in range(groups):
                    values = data[(slice(None), slice(g * ci, (g + 1) * ci)) + x]      # (N, Ci)
                    grads = grad[(slice(None), slice(g * co, (g + 1) * co)) + tuple(t)]  # (N, Co)
                    result[(g, slice(None), slice(None)) + tap] += values.T @ grads
    return result


# ---------------------------------------------------------------------------
# Per-dialect oracles.
#
# Each dialect is written straight from the tables of ``docs/semantics.md``
# (not from ``convtranspose._plan.rules``): per spatial axis it picks (offset, Y) and
# the pads the owning runtime reports, then the canonical computation above does
# the arithmetic.  A configuration the dialect refuses raises ``Rejected``.


class Rejected(Exception):
    """The configuration is invalid for the dialect (the library must raise)."""


def _listify(value, rank, default):
    if value is None:
        return [default] * rank
    if isinstance(value, (int, np.integer)):
        return [int(value)] * rank
    value = [int(v) for v in value]
    return value if value else [default] * rank


def _full_size(x, k, s, d):
    return (x - 1) * s + (k - 1) * d + 1


class Case:
    """One oracle evaluation: canonical operands plus the dialect's (offset, Y) per axis.

    ``rounded()`` is the answer in the element type (exact sum, bias added, one
    final rounding or integer wrap); ``exact()`` is the same before that final
    cast; ``magnitude()`` is the sum of |terms| per output element, the scale of
    any correct floating-point accumulation's error; ``terms`` bounds the number
    of terms per output element.
    """

    def __init__(self, data_ncx, filter_gcok, strides, dilations, axes, bias, dtype,
                 channels_last=False):
        self.data = np.asarray(data_ncx)
        self.weights = np.asarray(filter_gcok)
        self.strides, self.dilations = list(strides), list(dilations)
        self.axes = axes
        self.offsets = [a[0] for a in axes]
        self.sizes = [a[1] for a in axes]
        self.pads_begin = tuple(a[2] for a in axes)
        self.pads_end = tuple(a[3] for a in axes)
        self.bias = None if bias is None else np.asarray(bias)
        self.dtype = np.dtype(dtype)
        self.channels_last = channels_last
        self.terms = int(np.prod(self.weights.shape[3:], dtype=np.int64)) * self.weights.shape[1] + 1

    def _layout(self, out):
        return np.moveaxis(out, 1, -1) if self.channels_last else out

    @property
    def output_shape(self):
        n = self.data.shape[0]
        c = self.weights.shape[0] * self.weights.shape[2]
        shape = (n, c) + tuple(self.sizes)
        return (n,) + tuple(self.sizes) + (c,) if self.channels_last else shape

    def exact(self):
        out = windowed_transposed_convolution(self.data, self.weights, self.strides,
                                              self.dilations, self.offsets, self.sizes)
        if self.bias is not None:
            with np.errstate(over="ignore"):
                out = out + self.bias.astype(out.dtype).reshape((-1,) + (1,) * (out.ndim - 2))
        return self._layout(out)

    def rounded(self):
        with np.errstate(over="ignore", invalid="ignore"):
            return self.exact().astype(self.dtype)

    def magnitude(self):
        data = np.abs(self.data.astype(np.float64))
        weights = np.abs(self.weights.astype(np.float64))
        out = windowed_transposed_convolution(data, weights, self.strides, self.dilations,
                                              self.offsets, self.sizes)
        if self.bias is not None:
            out = out + np.abs(self.bias.astype(np.float64)).reshape((-1,) + (1,) * (out.ndim - 2))
        return self._layout(out)


def assert_matches(actual, case):
    """``actual`` equals the oracle: bit-exact for integers; for floats within the
    error any accumulation order can make, plus the one final rounding.

    With u the unit roundoff of the accumulation type (float64 for float64, float32
    otherwise) and n the number of terms per output element, a correct sum lies
    within n*u*sum|terms| of the exact value (the standard gamma_n bound); rounding
    once to the element type adds at most one ulp of the element type (we allow a
    whole ulp because rounding the approximate sum can land on the other side of a
    tie).  Any real bug (a misplaced tap, a wrong offset) is of the order of the
    terms themselves, orders of magnitude beyond this.
    """
    actual = np.asarray(actual)
    assert actual.dtype == case.dtype, (actual.dtype, case.dtype)
    assert actual.shape == case.output_shape, (actual.shape, case.output_shape)
    if case.dtype.kind in "iu":
        expected = case.rounded()
        mismatch = np.argwhere(actual != expected)
        assert mismatch.size == 0, (
            f"{len(mismatch)} integer mismatches, first at {tuple(mismatch[0])}:"
            f" got {actual[tuple(mismatch[0])]}, expected {expected[tuple(mismatch[0])]}")
        return
    exact = case.exact().astype(np.float64)
    finfo = ml_finfo(case.dtype)
    acc_eps = np.finfo(np.float64 if case.dtype == np.float64 else np.float32).eps
    bound = (2.0 * case.terms * acc_eps * case.magnitude()
             + float(finfo.eps) * np.abs(exact)
             + float(finfo.smallest_subnormal))
    error = np.abs(actual.astype(np.float64) - exact)
    bad = np.argwhere(~(error <= bound))
    assert bad.size == 0, (
        f"{len(bad)} mismatches, first at {tuple(bad[0])}: got"
        f" {actual.astype(np.float64)[tuple(bad[0])]!r}, exact {exact[tuple(bad[0])]!r},"
        f" allowed error {bound[tuple(bad[0])]!r}")


def ml_finfo(dtype):
    """``finfo`` that also knows bfloat16 (through ml_dtypes)."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


# OpenVINO ConvolutionBackpropData-1 / GroupConvolutionBackpropData-1 ------------

def openvino_geometry(spatial, kernel, strides=None, pads_begin=None, pads_end=None,
                      dilations=None, auto_pad="explicit", output_padding=None,
                      output_shape=None):
    """Per axis ``(offset, Y, reported_pads_begin, reported_pads_end)`` (docs/semantics.md's table)."""
    rank = len(spatial)
    s = _listify(strides, rank, 1)
    d = _listify(dilations, rank, 1)
    pb = _listify(pads_begin, rank, 0)
    pe = _listify(pads_end, rank, 0)
    op = _listify(output_padding, rank, 0)
    mode = "explicit" if auto_pad is None else auto_pad.lower()
    if mode == "notset":
        mode = "explicit"
    axes = []
    for i in range(rank):
        f = _full_size(spatial[i], kernel[i], s[i], d[i])
        if output_shape is None:
            if mode == "explicit":
                axes.append((pb[i], f + op[i] - pb[i] - pe[i], pb[i], pe[i]))
            else:  # same_upper, same_lower, valid: no pads
                axes.append((0, f + op[i], 0, 0))
        else:
            y = int(output_shape[i])
            total = max(f + op[i] - y, 0)
            if mode == "same_upper":
                offset = total - total // 2
                axes.append((offset, y, offset, total - offset))
            elif mode == "same_lower":
                offset = total // 2
                axes.append((offset, y, offset, total - offset))
            elif mode == "valid":
                axes.append((0, y, 0, 0))
            else:  # explicit: pads_end is unused
                axes.append((pb[i], y, pb[i], pe[i]))
    if any(y <= 0 for _, y, _, _ in axes):
        raise Rejected("output size <= 0")
    return axes


def openvino_cbpd_case(data, filter, output_shape=None, **attributes):
    """ConvolutionBackpropData-1: data [N, C_IN, X...], filter [C_IN, C_OUT, K...]."""
    return openvino_group_cbpd_case(data, np.asarray(filter)[None], output_shape, **attributes)


def openvino_group_cbpd_case(data, filter, output_shape=None, *, strides=None,
                             pads_begin=None, pads_end=None, dilations=None,
                             auto_pad="explicit", output_padding=None):
    """GroupConvolutionBackpropData-1: data [N, G*C_IN, X...], filter [G, C_IN, C_OUT, K...]."""
    data, filter = np.asarray(data), np.asarray(filter)
    rank = data.ndim - 2
    axes = openvino_geometry(data.shape[2:], filter.shape[3:], strides, pads_begin, pads_end,
                             dilations, auto_pad, output_padding, output_shape)
    return Case(data, filter, _listify(strides, rank, 1), _listify(dilations, rank, 1), axes,
                None, data.dtype)


def openvino_cbpd(data, filter, output_shape=None, **attributes):
    return openvino_cbpd_case(data, filter, output_shape, **attributes).rounded()


def openvino_group_cbpd(data, filter, output_shape=None, **attributes):
    return openvino_group_cbpd_case(data, filter, output_shape, **attributes).rounded()


# oneDNN Graph ConvTranspose-1 ----------------------------------------------------

def onednn_geometry(spatial, kernel, strides=None, pads_begin=None, pads_end=None,
                    dilations=None, auto_pad="none", output_padding=None, output_shape=None):
    """Per axis ``(offset, Y, reported_pads_begin, reported_pads_end)`` (docs/semantics.md, oneDNN)."""
    rank = len(spatial)
    s = _listify(strides, rank, 1)
    d = _listify(dilations, rank, 1)
    pb = _listify(pads_begin, rank, 0)
    pe = _listify(pads_end, rank, 0)
    op = _listify(output_padding, rank, 0)
    mode = "none" if auto_pad is None else auto_pad.lower()
    if any(o >= st for o, st in zip(op, s)):
        raise Rejected("output_padding >= stride")
    axes = []
    for i in range(rank):
        f = _full_size(spatial[i], kernel[i], s[i], d[i])
        dilated = (kernel[i] - 1) * d[i] + 1
        if output_shape is not None:
            y = int(output_shape[i])
            total = max(f + op[i] - y, 0)
            if mode == "same_upper":
                begin = total // 2           # odd extra pad at the END
            elif mode == "valid":
                begin = 0
            else:                            # none, same_lower
                begin = total - total // 2
            end = 0 if mode == "valid" else total - begin
            axes.append((begin, y, begin, end))
        elif mode == "none":
            axes.append((pb[i], f + op[i] - pb[i] - pe[i], pb[i], pe[i]))
        elif mode == "valid":
            axes.append((0, f + op[i], 0, 0))
        else:
            total = max(dilated - s[i], 0)
            begin = total // 2 if mode == "same_upper" else total - total // 2
            axes.append((begin, f + op[i] - total, begin, total - begin))
    if any(y <= 0 for _, y, _, _ in axes):
        raise Rejected("output size <= 0")
    return axes


def to_iox(filter, filter_format, rank):
    """A oneDNN-style filter in ``(I, O, K...)`` (I = all input channels, O per group)."""
    filter = np.asarray(filter)
    layout = filter_format.upper()
    if layout == "IOX":
        return filter
    if layout == "OIX":
        return np.swapaxes(filter, 0, 1)
    if layout == "XIO":   # (K..., I, O)
        return np.moveaxis(filter, (rank, rank + 1), (0, 1))
    if layout == "XOI":   # (K..., O, I)
        return np.moveaxis(filter, (rank + 1, rank), (0, 1))
    raise ValueError(layout)


def iox_to_gcok(filter_iox, groups):
    """(I, O, K...) -> (G, I/G, O, K...): group g reads input channels [g*I/G, (g+1)*I/G)."""
    i, o = filter_iox.shape[:2]
    return filter_iox.reshape((groups, i // groups, o) + filter_iox.shape[2:])


def onednn_conv_transpose_case(input, filter, bias=None, *, strides=None, pads_begin=None,
                               pads_end=None, dilations=None, auto_pad="none",
                               output_padding=None, groups=1, data_format="NXC",
                               filter_format="XIO", weights_format=None, output_shape=None):
    """oneDNN Graph ConvTranspose-1 (its specification and docs/semantics.md)."""
    data = np.asarray(input)
    rank = data.ndim - 2
    channels_last = data_format.upper() == "NXC"
    data_ncx = np.moveaxis(data, -1, 1) if channels_last else data
    layout = weights_format if weights_format is not None else filter_format
    weights = iox_to_gcok(to_iox(filter, layout, rank), groups)
    axes = onednn_geometry(data_ncx.shape[2:], weights.shape[3:], strides, pads_begin, pads_end,
                           dilations, auto_pad, output_padding, output_shape)
    return Case(data_ncx, weights, _listify(strides, rank, 1), _listify(dilations, rank, 1),
                axes, bias, data.dtype, channels_last=channels_last)


def onednn_conv_transpose(input, filter, bias=None, **attributes):
    return onednn_conv_transpose_case(input, filter, bias, **attributes).rounded()


# ONNX ConvTranspose (opset 11+) --------------------------------------------------

def onnx_geometry(spatial, kernel, strides=None, pads=None, dilations=None, auto_pad="NOTSET",
                  output_padding=None, output_shape=None):
    """Per axis ``(offset, Y, reported_pads_begin, reported_pads_end)`` (docs/semantics.md, ONNX)."""
    rank = len(spatial)
    s = _listify(strides, rank, 1)
    d = _listify(dilations, rank, 1)
    op = _listify(output_padding, rank, 0)
    pads = [0] * (2 * rank) if pads is None else [int(p) for p in pads]
    mode = "NOTSET" if auto_pad is None else auto_pad.upper()
    if output_shape is not None and len(output_shape) == rank + 2:
        output_shape = list(output_shape)[2:]
    axes = []
    for i in range(rank):
        f = _full_size(spatial[i], kernel[i], s[i], d[i])
        if mode == "VALID" and output_shape is None:
            axes.append((0, f + op[i], 0, 0))
        # VALID with output_shape derives pads like NOTSET: the ONNX spec's "else" branch,
        # confirmed by onnxruntime and onnx shape inference (docs/semantics.md, D12).
        elif mode == "NOTSET" and output_shape is None:
            b, e = pads[i], pads[rank + i]
            axes.append((b, f + op[i] - b - e, b, e))
        else:
            y = int(output_shape[i]) if output_shape is not None else spatial[i] * s[i]
            total = f + op[i] - y            # may be negative: no clamping in ONNX
            begin = total // 2 if mode == "SAME_UPPER" else total - total // 2
            axes.append((begin, y, begin, total - begin))
    if any(y <= 0 for _, y, _, _ in axes):
        raise Rejected("output size <= 0")
    return axes


def onnx_conv_transpose_case(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1,
                             kernel_shape=None, output_padding=None, output_shape=None,
                             pads=None, strides=None):
    """ONNX ConvTranspose: X (N, C, D...), W (C, M/group, K...), B (M,)."""
    X = np.asarray(X)
    rank = X.ndim - 2
    weights = iox_to_gcok(np.asarray(W), group)
    axes = onnx_geometry(X.shape[2:], weights.shape[3:], strides, pads, dilations, auto_pad,
                         output_padding, output_shape)
    return Case(X, weights, _listify(strides, rank, 1), _listify(dilations, rank, 1), axes, B,
                X.dtype)


def onnx_conv_transpose(X, W, B=None, **attributes):
    return onnx_conv_transpose_case(X, W, B, **attributes).rounded()


# ---------------------------------------------------------------------------
# Test data

def all_dtypes():
    """Every element type the library accepts, bfloat16 included (needs ml_dtypes)."""
    import ml_dtypes
    return [np.dtype(t) for t in (np.float64, np.float32, np.float16, ml_dtypes.bfloat16,
                                  np.int8, np.int16, np.int32, np.int64,
                                  np.uint8, np.uint16, np.uint32, np.uint64)]


def random_array(rng, shape, dtype):
    """Random values of ``dtype``: the whole range for integers (so sums wrap), N(0, 1)
    for floats (rounded to the element type)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)
