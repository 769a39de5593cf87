"""One memory check for every array function (convtranspose._execute.footprint): it counts at
least what a call allocates, and refuses at once what cannot fit.

A call's peak is measured with tracemalloc (NumPy's allocations and numba's, which
its runtime makes with ``PyMem_RawMalloc``);
under a limit one byte below that peak the call must be refused before it allocates.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

import convtranspose as ct
import oracle
from convtranspose._execute import adjoints as _backward
from convtranspose._frontends import specs as _api
from convtranspose._runtime import memo


def _peak(call) -> int:
    """tracemalloc's peak of ``call()`` (results included), after a first call that
    compiles its kernels, with the filters' derived matrices forgotten."""
    call()
    memo.forget_derived()
    _api.prepared_calls.clear()
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _operands(shapes, dtype):
    rng = np.random.default_rng(5)
    return [oracle.random_array(rng, shape, dtype) for shape in shapes]


def _calls(dtype):
    """Name -> call of every function the check serves, on operands of a few MiB: the
    forward convolution computed by the adjoint algorithms (stride 2) and as a
    transposed convolution (stride 1), depthwise, and the gradients with channels-first
    and channels-last layouts, a filter layout to transpose back and a bias."""
    x, w = _operands([(4, 32, 48, 48), (16, 32, 3, 3)], dtype)
    d, g = _operands([(4, 64, 40, 40), (64, 1, 1, 3, 3)], dtype)
    data, filter, grad = _operands([(2, 32, 40, 40), (32, 16, 4, 4), (2, 16, 80, 80)], dtype)
    nxc, xio, grad_nxc, bias = _operands([(2, 40, 40, 32), (4, 4, 32, 16), (2, 79, 79, 16),
                                          (16,)], dtype)
    return {
        "convolution-stride-2": lambda: ct.convolution(x, w, strides=2, pads_begin=1),
        "convolution-stride-1": lambda: ct.convolution(x, w, pads_begin=1, pads_end=1),
        "depthwise": lambda: ct.group_convolution(d, g, strides=2),
        "gradients": lambda: ct.vjp.convolution_backprop_data(data, filter, grad, strides=2,
                                                             pads_begin=1, pads_end=1),
        "gradients-nxc": lambda: ct.vjp.conv_transpose(nxc, xio, grad_nxc, bias, strides=2,
                                                       pads_begin=2, pads_end=1),
        "transposed": lambda: ct.convolution_backprop_data(data, filter, strides=2,
                                                           pads_begin=1, pads_end=1),
    }


CALLS = list(_calls("float32"))


@pytest.mark.parametrize("algorithm", ["", "im2col", "taps"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
@pytest.mark.parametrize("name", CALLS)
def test_the_check_counts_at_least_what_a_call_allocates(name, dtype, algorithm, monkeypatch):
    monkeypatch.setenv(_backward.BACKWARD_ALGORITHM_ENV, algorithm)
    call = _calls(dtype)[name]
    peak = _peak(call)
    with ct.limit_memory(peak - 1), pytest.raises(ct.ResultTooLargeError) as raised:
        call()
    error = raised.value
    assert error.limit == peak - 1 and error.nbytes >= peak
    assert str(error.nbytes) in str(error) and error.argument in str(error)


def _huge(shape, dtype=np.float64):
    """An operand of ``shape`` that takes no memory (every element the same)."""
    return np.broadcast_to(np.ones((), dtype), shape)


@pytest.mark.parametrize("call, argument", [
    (lambda: ct.convolution(np.ones((1, 1, 3)), np.ones((1, 1, 1)), pads_begin=10**12,
                            pads_end=10**12), "pads_begin and pads_end"),
    (lambda: ct.group_convolution(np.ones((2, 4, 8, 8)), _huge((4, 10**8, 1, 1, 1))),
     "filter"),
    (lambda: ct.convolution(_huge((10**6, 1, 10**6), np.float16),
                            np.ones((1, 1, 1), np.float16)), "data"),
], ids=["pads", "channels", "data"])
def test_a_convolution_beyond_memory_fails_at_once(call, argument):
    """Refused in well under a second, naming the argument, the bytes and the limit,
    however long its algorithms' estimates would take (results of 10**10 elements or
    more)."""
    start = time.perf_counter()
    with pytest.raises(ct.ResultTooLargeError) as raised:
        call()
    assert time.perf_counter() - start < 0.5
    error = raised.value
    assert error.argument == argument and error.nbytes > error.limit == ct.get_max_bytes()
