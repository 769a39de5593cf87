"""Arrays of other libraries: computed with their own namespace, returned in their type.

Which path a call takes (``docs/arrays.md``):

- Every operand a NumPy array (or anything else ``numpy.asarray`` takes, such as a
  list): the NumPy path, untouched (the frontends test ``type(x) is np.ndarray`` and
  come here only otherwise).
- Any operand an array of another library (PyTorch, CuPy, JAX, Dask, array_api_strict,
  anything with ``__array_namespace__``): every array operand of the call must come
  from that one library and sit on one device, else ``TypeError`` naming the operand;
  NumPy arrays, lists and scalars are not converted beside it (converting would choose
  a device and a dtype behind the caller's back).  ``out=`` is NumPy's only.
- PyTorch CPU tensors that no gradient is being recorded for are read through
  zero-copy NumPy views by the NumPy kernels and the results come back as tensors
  (``torch.from_numpy``, no copy): faster on every measured layer
  (``benchmarks/results/array-api-torch.json``).
- Otherwise the computation below, written only with array-API standard functions
  (through ``array-api-compat``): per kernel tap a slice and a ``matmul``, zeros added
  by ``concat``, stride phases interleaved by ``stack`` and ``reshape``; nothing is ever
  written in place, so immutable arrays (JAX) work and torch records every operation
  for autograd.  Products are taken on the boxes a tap reads inside its operands and
  then padded, so no zero of the algorithm ever multiplies an infinity or a NaN.

Sums accumulate as on the NumPy path: float64 in float64, other floats in float32,
integers in int64 (wrapping), converted once to the operands' dtype.  No backend is
imported here: a library is only ever used through the namespace of its own arrays.
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np

from .._errors import ConvTransposeError, install_hint
from .._plan.geometry import axis_taps

__all__ = ["convolution", "flip", "gradients", "is_foreign", "transposed"]

#: Libraries whose array types are recognised by their module even without
#: ``__array_namespace__`` (torch tensors have none).
_LIBRARIES = frozenset({"torch", "cupy", "jax", "jaxlib", "dask", "sparse", "ndonnx", "dpnp",
                        "array_api_strict"})


def is_foreign(value: object) -> bool:
    """Whether ``value`` is an array of a library other than NumPy."""
    if isinstance(value, (np.ndarray, np.generic)):
        return False
    kind = type(value)
    return (hasattr(kind, "__array_namespace__")
            or kind.__module__.partition(".")[0] in _LIBRARIES)


def flip(array, axes: tuple[int, ...]):
    """``array`` reversed along ``axes``, by its own library (a view by ``np.flip`` for
    NumPy arrays)."""
    if not is_foreign(array):
        return np.flip(array, axes)
    return _compat().array_namespace(array).flip(array, axis=axes)


def _describe(value: object) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _compat():
    try:
        import array_api_compat
    except ImportError:
        raise TypeError(
            "arrays of libraries other than NumPy are computed through array-api-compat,"
            " which is not installed: " + install_hint("array-api")) from None
    return array_api_compat


def _namespace(operands: dict):
    """The namespace of the call's foreign operands (name -> value, None for absent
    ones), or None when there are none; a TypeError for a mix of libraries or devices."""
    foreign = [(name, value) for name, value in operands.items()
               if value is not None and is_foreign(value)]
    if not foreign:
        return None
    compat = _compat()
    first_name, first = foreign[0]
    xp = compat.array_namespace(first)
    device = compat.device(first)
    for name, value in operands.items():
        if value is None or value is first:
            continue
        if not is_foreign(value) or compat.array_namespace(value) is not xp:
            raise TypeError(
                f"{name} is a {_describe(value)} but {first_name} is a {_describe(first)};"
                f" every array operand of a call must come from the same library (convert"
                f" {name} to the type of {first_name} first)")
        # a JAX tracer has no device (None): it is placed where the traced call runs
        other = compat.device(value)
        if device is not None and other is not None and other != device:
            raise TypeError(
                f"{name} is on device {other} but {first_name} is on device"
                f" {device}; every operand of a call must be on the same device")
    return xp


def _refuse_out(out) -> None:
    if out is not None:
        raise TypeError(
            f"out must be a numpy.ndarray with NumPy operands; with arrays of another library"
            f" the result is a new array of that library (got out of type {_describe(out)})")


# ---------------------------------------------------------------------------
# The zero-copy route for PyTorch CPU tensors


#: Whether torch CPU tensors take the zero-copy route (tests and the benchmark turn it
#: off to check and time the generic computation on the same tensors).
ZERO_COPY = True


def _numpy_views(operands):
    """Zero-copy NumPy views of torch CPU tensors no gradient is recorded for, or None."""
    torch = sys.modules.get("torch")
    if not ZERO_COPY or torch is None or not isinstance(operands[0], torch.Tensor):
        return None
    recording = torch.is_grad_enabled()
    views = []
    for value in operands:
        if value is None:
            views.append(None)
            continue
        if value.device.type != "cpu" or (recording and value.requires_grad):
            return None
        try:  # bfloat16, conjugate or negative views and tensor subclasses have no view
            views.append(value.detach().numpy())
        except (RuntimeError, TypeError):
            return None
    return views


def _as_tensors(result):
    """The NumPy path's result (an array or a tuple of arrays and Nones) as tensors."""
    from_numpy = sys.modules["torch"].from_numpy
    if isinstance(result, tuple):
        return tuple(None if r is None else from_numpy(r) for r in result)
    return from_numpy(result)


# ---------------------------------------------------------------------------
# The entry points: NotImplemented when every operand is NumPy's


def _dispatched(named: dict, operands, out, numpy_path, generic):
    """NotImplemented when every operand is NumPy's; ``numpy_path`` on zero-copy NumPy
    views where the operands allow them; else ``generic(xp, dtype)`` in their namespace."""
    xp = _namespace(named)
    if xp is None:
        return NotImplemented
    _refuse_out(out)
    views = _numpy_views(operands)
    if views is not None:
        return _as_tensors(numpy_path(*views))
    return generic(xp, _common_dtype(xp, named))


def transposed(plan, names, operands, out, numpy_path):
    """A transposed convolution of ``plan`` on ``(data, filter, bias or None)``."""
    data, filter, bias = operands

    def generic(xp, dtype):
        accumulate = _accumulation(xp, dtype)
        weights = _canonical_weights(xp, plan, filter)
        result = _scatter(xp, xp.astype(_channels_first(xp, data, plan.channels_last),
                                        accumulate),
                          xp.astype(weights, accumulate), plan.axes)
        if bias is not None:
            result = result + xp.reshape(xp.astype(bias, accumulate),
                                         (1, -1) + (1,) * len(plan.axes))
        return _channels_back(xp, xp.astype(result, dtype), plan.channels_last)

    return _dispatched(dict(zip(names, operands)), operands, out, numpy_path, generic)


def convolution(plan, operands, out, numpy_path):
    """A forward convolution of a ``ConvolutionPlan`` on ``(data, filter)``."""
    data, filter = operands

    def generic(xp, dtype):
        accumulate = _accumulation(xp, dtype)
        weights = xp.reshape(filter, plan.canonical_filter_shape)
        result = _gather(xp, xp.astype(data, accumulate), xp.astype(weights, accumulate),
                         plan.axes)
        return xp.astype(result, dtype)

    return _dispatched(dict(zip(("data", "filter"), operands)), operands, out, numpy_path,
                       generic)


def gradients(plan, names, operands, numpy_path):
    """The VJP of a transposed convolution: ``operands`` is ``(data, filter, grad_output,
    bias or None)``; ``(grad_data, grad_filter)``, plus the bias's when ``names`` has
    three names."""
    data, filter, grad_output, bias = operands
    named = {names[0]: data, names[1]: filter, "grad_output": grad_output}
    if len(names) == 3:
        named[names[2]] = bias

    def generic(xp, dtype):
        if tuple(grad_output.shape) != plan.output_shape:
            raise ConvTransposeError(
                f"grad_output has shape {tuple(grad_output.shape)}, but the {plan.op} result"
                f" has shape {plan.output_shape}; grad_output must have exactly the result's"
                f" shape")
        accumulate = _accumulation(xp, dtype)
        last = plan.channels_last
        grad = xp.astype(_channels_first(xp, grad_output, last), accumulate)
        weights = xp.astype(_canonical_weights(xp, plan, filter), accumulate)
        grad_data = _gather(xp, grad, weights, plan.axes)
        grad_filter = _correlate(xp, xp.astype(_channels_first(xp, data, last), accumulate),
                                 grad, plan.axes, plan.groups)
        grad_data = _channels_back(xp, xp.astype(grad_data, dtype), last)
        grad_filter = _dialect_filter(xp, plan, xp.astype(grad_filter, dtype))
        if len(names) == 2:
            return grad_data, grad_filter
        if bias is None:
            return grad_data, grad_filter, None
        reduced = tuple(i for i in range(grad.ndim) if i != 1)
        return grad_data, grad_filter, xp.astype(xp.sum(grad, axis=reduced), dtype)

    return _dispatched(named, operands, None, numpy_path, generic)


# ---------------------------------------------------------------------------
# Element types and layouts


def _common_dtype(xp, named: dict):
    """The operands' one dtype (as ``check_dtypes``), a real float or an integer."""
    items = [(name, value) for name, value in named.items() if value is not None]
    first_name, first = items[0]
    for name, value in items[1:]:
        if value.dtype != first.dtype:
            raise TypeError(
                f"{first_name} has dtype {first.dtype} but {name} has dtype {value.dtype}; all"
                f" inputs must have the same element type (cast one of them first)")
    if not xp.isdtype(first.dtype, ("real floating", "integral")):
        listed = ", ".join(name for name, _ in items)
        raise TypeError(f"{listed} have dtype {first.dtype}, which is not supported; use a"
                        f" real floating or an integer dtype")
    return first.dtype


def _accumulation(xp, dtype):
    """float64 sums in float64, other floats in float32, integers in int64."""
    if xp.isdtype(dtype, "integral"):
        return xp.int64
    return xp.float64 if dtype == xp.float64 else xp.float32


def _channels_first(xp, array, channels_last: bool):
    if not channels_last:
        return array
    rank = array.ndim
    return xp.permute_dims(array, (0, rank - 1) + tuple(range(1, rank - 1)))


def _channels_back(xp, array, channels_last: bool):
    if not channels_last:
        return array
    rank = array.ndim
    return xp.permute_dims(array, (0,) + tuple(range(2, rank)) + (1,))


def _canonical_weights(xp, plan, filter):
    """The dialect's filter as ``(G, Ci, Co, K...)``."""
    if plan.filter_layout == "GIOX":
        return filter
    return xp.reshape(xp.permute_dims(filter, plan._filter_to_canonical),
                      plan.canonical_filter_shape)


def _dialect_filter(xp, plan, canonical):
    """A canonical ``(G, Ci, Co, K...)`` array in the dialect's filter layout."""
    if plan.filter_layout == "GIOX":
        return canonical
    order = plan._filter_to_canonical
    transposed = xp.reshape(canonical, tuple(plan.filter_shape[axis] for axis in order))
    return xp.permute_dims(transposed, tuple(int(i) for i in np.argsort(order)))


# ---------------------------------------------------------------------------
# The computations, on channels-first operands in the accumulation dtype


def _pad(xp, array, first_axis: int, pads):
    """``array`` with ``pads[i] = (before, after)`` zeros around axis ``first_axis + i``."""
    for i, (before, after) in enumerate(pads):
        axis = first_axis + i
        parts = []
        for count in (before, None, after):
            if count is None:
                parts.append(array)
            elif count:
                shape = array.shape[:axis] + (count,) + array.shape[axis + 1:]
                parts.append(xp.zeros(shape, dtype=array.dtype, device=_device(array)))
        if len(parts) > 1:
            array = xp.concat(parts, axis=axis)
    return array


def _device(array):
    return _compat().device(array)


def _product(xp, matrix, values):
    """``sum over c of matrix[g, e, c] * values[n, g, c, box...]``: ``(N, G, E, box...)``."""
    n, groups, channels = values.shape[:3]
    box = tuple(values.shape[3:])
    flat = xp.reshape(values, (n, groups, channels, math.prod(box)))
    return xp.reshape(xp.matmul(matrix, flat), (n, groups, matrix.shape[1]) + box)


def _grouped(xp, array, groups: int):
    n, channels = array.shape[:2]
    return xp.reshape(array, (n, groups, channels // groups) + tuple(array.shape[2:]))


def _finite(xp, array) -> bool:
    """Whether every value of ``array`` is finite; False for a traced array (JAX under
    ``jit``), which has no values yet: the caller then takes its exact form."""
    try:
        return bool(xp.all(xp.isfinite(array)))
    except (TypeError, RuntimeError):
        return False


def _per_tap(xp, weights, order):
    """``weights`` ``(G, Ci, Co, K...)`` as one contiguous matrix per tap, ``(T, G, a, b)``
    with ``(a, b)`` the channel axes ``order`` names (``(2, 1)``: ``(Co, Ci)``): BLAS
    takes a strided matrix at a small fraction of its rate (15x slower with torch)."""
    rank = weights.ndim - 3
    moved = xp.permute_dims(weights, tuple(range(3, 3 + rank)) + (0,) + order)
    return xp.reshape(moved, (math.prod(weights.shape[3:]), weights.shape[0])
                      + tuple(weights.shape[i] for i in order))


def _flat_tap(tap, kernel) -> int:
    index = 0
    for k, size in zip(tap, kernel):
        index = index * size + k
    return index


def _phases(axis, padded: bool):
    """The stride phases of one axis of the transposed convolution.

    With ``t = o + offset = m*s + p`` (``p`` the phase), a tap ``k`` with
    ``k*d = a*s + p`` adds ``data[m - a] * w[k]``; ``m`` runs over ``[low, low + M)``,
    which covers every ``t`` of the output.  Returns ``(low, M, (before, after),
    phases)``: per phase the taps that read inside the data, each as ``(k, slice,
    (zeros before, zeros after))``.  Exact form (``padded`` False): the slice is the
    ``x = m - a`` inside the data and the zeros pad the product to ``M``.  Padded form:
    the data gets ``before`` and ``after`` zeros once and every slice has length ``M``.
    """
    s, size = axis.stride, axis.output_size
    low, high = axis.offset // s, -(-(axis.offset + size) // s)
    taps = []
    for k in range(axis.kernel_size):
        a, p = divmod(k * axis.dilation, s)
        first, last = max(low, a), min(high, a + axis.input_size)
        if first < last:
            taps.append((k, a, p, first, last))
    before = max([0] + [a - low for _, a, _, _, _ in taps]) if padded else 0
    after = max([0] + [high - a - axis.input_size for _, a, _, _, _ in taps]) if padded else 0
    phases = [[] for _ in range(s)]
    for k, a, p, first, last in taps:
        if padded:
            start = low - a + before
            phases[p].append((k, slice(start, start + high - low), (0, 0)))
        else:
            phases[p].append((k, slice(first - a, last - a), (first - low, high - last)))
    return low, high - low, (before, after), phases


def _scatter(xp, data, weights, axes):
    """The canonical transposed convolution ``(N, G*Co, Y...)``, one stride phase at a
    time (so that no product is taken with inserted zeros), phases then interleaved."""
    groups, _, co = weights.shape[:3]
    n, rank = data.shape[0], len(axes)
    kernel = tuple(axis.kernel_size for axis in axes)
    padded = _finite(xp, weights)  # else no zero of ours may multiply a weight
    info = [_phases(axis, padded) for axis in axes]
    data_g = _pad(xp, _grouped(xp, data, groups), 3, [pads for _, _, pads, _ in info])
    matrices = _per_tap(xp, weights, (2, 1))
    counts = tuple(m for _, m, _, _ in info)
    results = []
    for phase in itertools.product(*(phases for _, _, _, phases in info)):
        total = None
        for taps in itertools.product(*phase):
            values = data_g[(slice(None),) * 3 + tuple(t[1] for t in taps)]
            product = _product(xp, matrices[_flat_tap(tuple(t[0] for t in taps), kernel), ...],
                               values)
            padded_product = _pad(xp, product, 3, [t[2] for t in taps])
            total = padded_product if total is None else total + padded_product
        if total is None:
            total = xp.zeros((n, groups, co) + counts, dtype=data.dtype, device=_device(data))
        results.append(xp.reshape(total, (n, groups * co) + counts))
    strides = tuple(axis.stride for axis in axes)
    stacked = xp.reshape(xp.stack(results), strides + (n, groups * co) + counts)
    # (s..., N, C, M...) -> (N, C, M1, s1, M2, s2, ...) -> (N, C, M1*s1, ...)
    order = (rank, rank + 1) + tuple(j for i in range(rank) for j in (rank + 2 + i, i))
    interleaved = xp.reshape(xp.permute_dims(stacked, order),
                             (n, groups * co) + tuple(m * s for m, s in zip(counts, strides)))
    crop = tuple(slice(axis.offset - low * axis.stride,
                       axis.offset - low * axis.stride + axis.output_size)
                 for axis, (low, _, _, _) in zip(axes, info))
    return interleaved[(slice(None), slice(None)) + crop]


def _boxes(axis, padded: bool = False):
    """Per tap ``k`` of one axis of the adjoint, which reads ``grad[x*s + k*d - offset]``:
    ``((before, after), [(k, x slice, grad slice, (zeros before, zeros after)), ...])``
    for the taps that read inside ``grad``.  Exact form: the ``x`` whose reads fall
    inside ``grad`` and the zeros that pad the product to ``X``.  Padded form: ``grad``
    gets ``before`` and ``after`` zeros once and every tap reads for every ``x``."""
    s, size, x = axis.stride, axis.output_size, axis.input_size
    taps = axis_taps(axis)
    before = max([0] + [-shift for _, shift, _, _ in taps]) if padded else 0
    after = max([0] + [(x - 1) * s + shift - (size - 1) for _, shift, _, _ in taps]) \
        if padded else 0
    options = []
    for k, shift, low, high in taps:
        if padded:
            low, high = 0, x
        start = low * s + shift + before
        options.append((k, slice(low, high), slice(start, start + (high - low - 1) * s + 1, s),
                        (low, x - high)))
    return (before, after), options


def _gather(xp, grad, weights, axes):
    """The adjoint with respect to the data (every forward convolution):
    ``(N, G*Ci, X...)`` from ``grad`` ``(N, G*Co, Y...)`` and weights ``(G, Ci, Co, K...)``."""
    groups, ci = weights.shape[:2]
    n = grad.shape[0]
    sizes = tuple(axis.input_size for axis in axes)
    kernel = tuple(axis.kernel_size for axis in axes)
    padded = _finite(xp, weights)  # else no zero of ours may multiply a weight
    info = [_boxes(axis, padded) for axis in axes]
    grad_g = _pad(xp, _grouped(xp, grad, groups), 3, [pads for pads, _ in info])
    matrices = _per_tap(xp, weights, (1, 2))
    total = None
    for choice in itertools.product(*(options for _, options in info)):
        window = grad_g[(slice(None),) * 3 + tuple(c[2] for c in choice)]
        product = _product(xp, matrices[_flat_tap(tuple(c[0] for c in choice), kernel), ...],
                           window)
        padded_product = _pad(xp, product, 3, [c[3] for c in choice])
        total = padded_product if total is None else total + padded_product
    if total is None:
        return xp.zeros((n, groups * ci) + sizes, dtype=grad.dtype, device=_device(grad))
    return xp.reshape(total, (n, groups * ci) + sizes)


def _correlate(xp, data, grad, axes, groups: int):
    """The adjoint with respect to the weights: ``(G, Ci, Co, K...)``."""
    data_g, grad_g = _grouped(xp, data, groups), _grouped(xp, grad, groups)
    ci, co = data_g.shape[2], grad_g.shape[2]
    kernel = tuple(axis.kernel_size for axis in axes)
    boxes = [{k: (inside, read) for k, inside, read, _ in _boxes(axis)[1]} for axis in axes]
    per_tap = []
    for tap in itertools.product(*(range(k) for k in kernel)):
        if not all(k in options for k, options in zip(tap, boxes)):
            per_tap.append(xp.zeros((groups, ci, co), dtype=data.dtype, device=_device(data)))
            continue
        inside = tuple(options[k][0] for k, options in zip(tap, boxes))
        read = tuple(options[k][1] for k, options in zip(tap, boxes))
        values = data_g[(slice(None),) * 3 + inside]  # (N, G, Ci, box...)
        window = grad_g[(slice(None),) * 3 + read]  # (N, G, Co, box...)
        rest = tuple(range(3, values.ndim))
        count = values.shape[0] * math.prod(values.shape[3:])  # N * box
        values = xp.reshape(xp.permute_dims(values, (1, 2, 0) + rest), (groups, ci, count))
        window = xp.reshape(xp.permute_dims(window, (1, 0) + rest + (2,)), (groups, count, co))
        per_tap.append(xp.matmul(values, window))
    stacked = xp.reshape(xp.stack(per_tap), kernel + (groups, ci, co))
    rank = len(kernel)
    return xp.permute_dims(stacked, (rank, rank + 1, rank + 2) + tuple(range(rank)))
