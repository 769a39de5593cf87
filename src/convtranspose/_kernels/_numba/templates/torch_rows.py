"""The row loop of torch's requantization for one engine
(:func:`convtranspose._kernels._numba.requantize.torch_rows`).

A template: compiled by ``codegen.compile_template`` with these names bound as its
globals (numba freezes them into the compiled code): ``np``, ``value`` (the engine's
rounded float32 of an int32 sum), ``wrap32`` and ``x86_store``.  Its kernels'
decorator, ``cached_njit`` (:mod:`..kernel_cache`), is bound too.  One loop per engine,
the channel index chosen per row: with the engine chosen inside one loop, and the
channel index too, LLVM kept the loop scalar (8x the time of these vectorized loops on
an Intel Xeon, ``benchmarks/results/quantized-calls-xeon.json``).
"""
# ruff: noqa: F821  (the names above are bound when the template is compiled)

@cached_njit(nogil=True)
def rows(acc, share, factor, per_row, scale, offset, integer_bias, destination, zero, out,
         starts, run):  # pragma: no cover - compiled
    # Rows [start, start + run) for each of starts of out = the x86 store of
    # value(wrap32(acc - factor * share)), channel r % M of a row where per_row, else
    # channel i of an element.
    channels, places = scale.shape[0], share.shape[0]
    for start in starts:
        for r in range(start, start + run):
            place = r % places
            if per_row:
                m = r % channels
                multiplier, shift, addend = scale[m], offset[m], integer_bias[m]
                for i in range(acc.shape[1]):
                    whole = wrap32(np.int64(acc[r, i]) - factor * np.int64(share[place, i]))
                    out[r, i] = x86_store(value(whole, multiplier, shift, addend,
                                                destination, zero), zero)
            else:
                for i in range(acc.shape[1]):
                    whole = wrap32(np.int64(acc[r, i]) - factor * np.int64(share[place, i]))
                    out[r, i] = x86_store(value(whole, scale[i], offset[i], integer_bias[i],
                                                destination, zero), zero)
