"""Transposed convolution on Dask arrays, tile by tile, with no seams.

The transposed-convolution dialect functions of :mod:`convtranspose` (the spec dialects
and the frameworks'), with the same names and keywords, take a Dask array as data (chunked along batch and any spatial axes) and return a lazy
Dask array whose every element equals the single-machine NumPy result.  Needs the
``dask`` extra (``pip install '.[dask]'`` in a checkout of the repository; ``distributed``
for clusters);
``import convtranspose`` never imports Dask.

Each output tile is computed by exactly one task, from its input chunk plus the halo of
neighbouring inputs it needs (per axis, derived from the kernel, stride, dilation and
crop offset; it can be one-sided), by the same canonical kernels as the single-machine
call, on the tile's own per-axis plan; ``docs/scaling.md`` has the rule, a diagram and
measurements.

Result chunks (``chunks=None``): along each spatial axis, input chunk ``[a, b)`` gives
the outputs ``[a*stride, b*stride)``, clamped to the output (outputs beyond
``X*stride``, from an ``output_shape`` larger than natural, continue in chunks of the last
one's size), so regular input chunks give regular output chunks (as Zarr needs) with
every edge at a multiple of the stride; batch chunks are the input's; channels are one
chunk.  Chunks larger than Dask's ``array.chunk-size`` (128 MiB by default) are split
further at stride multiples.  ``chunks=`` overrides this with any chunking
:func:`dask.array.core.normalize_chunks` accepts for the output shape (a dict names only
the axes to change); the output channel axis must stay one chunk.

>>> import numpy as np, dask.array as da, convtranspose.dask as ctd
>>> data = da.ones((1, 4, 64, 64), chunks=(1, 4, 16, 16), dtype=np.float32)
>>> filter = np.ones((4, 2, 3, 3), np.float32)
>>> y = ctd.convolution_backprop_data(data, filter, strides=2, pads_begin=1, pads_end=1)
>>> y.shape, y.chunks[2]
((1, 2, 127, 127), (32, 32, 32, 31))
"""

from __future__ import annotations

import inspect
import math
import operator
import warnings

from .._errors import install_hint

try:
    import dask.array as da
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        "convtranspose.dask needs Dask: " + install_hint("dask")
        + " (and 'distributed' for clusters)") from error
from dask.array.core import PerformanceWarning, normalize_chunks

from .. import shapes
from .._dtypes import check_dtypes
from .._errors import ConvTransposeError
from .._frontends import frameworks as _frameworks
from .._frontends.specs import as_array
from .._plan.dialects import DIALECTS
from ._graph import axes_of, default_output_chunks, tiled

__all__ = [
    "conv_transpose",
    "convolution_backprop_data",
    "group_convolution_backprop_data",
    "jax_conv_transpose",
    "keras_conv_transpose",
    "onnx_conv_transpose",
    "tensorrt_deconvolution",
    "tf_conv_transpose",
    "tflite_transpose_conv",
    "torch_conv_transpose",
]

_EXTRA = """
    chunks : int, tuple, dict or str, optional
        The result's chunks (see the module docstring); by default ``stride`` times
        the input's along each spatial axis.
    threads_per_task : int, optional
        Threads each task computes on (default 1: Dask's workers supply the
        parallelism)."""


def _as_dask(name: str, value) -> da.Array:
    """``value`` as a Dask array with known chunk sizes."""
    if not isinstance(value, da.Array):
        value = da.asarray(as_array(name, value))
    if any(math.isnan(size) for sizes in value.chunks for size in sizes):
        raise ConvTransposeError(
            f"{name} has unknown chunk sizes {value.chunks}; call {name}.compute_chunk_sizes()"
            f" first: the tiles are planned from the chunk sizes")
    return value


def _single_chunk(name: str, value) -> da.Array:
    """A filter or bias as a one-chunk Dask array: one node of the graph, whatever the
    number of tiles (a NumPy operand is put into the graph once)."""
    if isinstance(value, da.Array):
        return _as_dask(name, value).rechunk(value.shape)
    array = as_array(name, value)
    return da.from_array(array, chunks=array.shape if array.ndim else ())


def _threads(value) -> int:
    try:
        threads = operator.index(value)
    except TypeError:
        threads = None
    if isinstance(value, bool) or threads is None or threads < 1:
        raise ConvTransposeError(f"threads_per_task must be an integer >= 1, got {value!r}")
    return threads


def _out_chunks(plan, data: da.Array, chunks) -> tuple[tuple[int, ...], ...]:
    default = default_output_chunks(plan, data.chunks, data.dtype.itemsize)
    if chunks is None:
        return default
    if isinstance(chunks, dict):
        chunks = tuple(chunks.get(i, default[i]) for i in range(len(default)))
    try:
        normalized = normalize_chunks(chunks, shape=plan.output_shape, dtype=data.dtype)
    except (ValueError, TypeError) as error:
        raise ConvTransposeError(
            f"chunks={chunks!r} is not a chunking of the result's shape"
            f" {plan.output_shape}: {error}") from None
    channel, _ = axes_of(plan, data.ndim)
    if len(normalized[channel]) != 1:
        raise ConvTransposeError(
            f"chunks={chunks!r} splits the output channel axis {channel} into"
            f" {normalized[channel]}; every tile computes all output channels, so that axis"
            f" must be one chunk ({plan.out_channels})")
    return normalized


def _lazy(plan, data: da.Array, filter, bias, names, out, chunks, threads_per_task):
    """The tiled result of ``plan`` (checked and resolved by the caller's dialect)."""
    if out is not None:
        raise TypeError(
            "out is not supported for Dask arrays: the result is lazy; write it with"
            " dask.array.store(result, out) or result.to_zarr(...)")
    threads = _threads(threads_per_task)
    operands = {names[0]: data, names[1]: filter}
    if bias is not None:
        operands[names[2]] = bias
    check_dtypes(**operands)
    channel, _ = axes_of(plan, data.ndim)
    if len(data.chunks[channel]) > 1:
        warnings.warn(
            f"{names[0]} is chunked along its channel axis {channel} {data.chunks[channel]};"
            f" it is rechunked to one chunk there (every tile reads all input channels)",
            PerformanceWarning, stacklevel=3)
        data = data.rechunk({channel: -1})
    return tiled(plan, data, filter, bias, _out_chunks(plan, data, chunks), threads)


def convolution_backprop_data(data, filter, output_shape=None, *, strides=None, pads_begin=None,
                              pads_end=None, dilations=None, auto_pad="explicit",
                              output_padding=None, out=None, chunks=None, threads_per_task=1):
    """OpenVINO ConvolutionBackpropData-1 on a Dask array (lazy, tiled, exact).

    Parameters
    ----------
    data : dask.array.Array or array_like
        ``[N, C_IN, X1, ..., XD]``, chunked along any axes (a channel axis in several
        chunks is rechunked, with a ``PerformanceWarning``).
    filter : array_like or dask.array.Array
        ``[C_IN, C_OUT, K1, ..., KD]``, the dtype of ``data``.
    output_shape, strides, pads_begin, pads_end, dilations, auto_pad, output_padding
        As in :func:`convtranspose.convolution_backprop_data`.
    out : None
        Not supported (the result is lazy): store it with :func:`dask.array.store`.
    {extra}

    Returns
    -------
    dask.array.Array
        Lazy; its computed value equals ``convtranspose.convolution_backprop_data`` on
        the computed data, element for element.

    Raises
    ------
    ConvTransposeError
        An invalid shape or attribute, ``chunks`` or ``threads_per_task``, or data with
        unknown chunk sizes (raised at once, before anything is computed).
    TypeError
        Mismatched or unsupported dtypes; ``out`` given.

    Examples
    --------
    >>> import numpy as np, dask.array as da, convtranspose.dask as ctd
    >>> data = da.from_array(np.array([[[1.0, 2.0, 3.0]]]), chunks=(1, 1, 2))
    >>> filter = np.array([[[1.0, 10.0, 100.0]]])
    >>> ctd.convolution_backprop_data(data, filter, strides=2).compute()
    array([[[  1.,  10., 102.,  20., 203.,  30., 300.]]])
    """
    data, filter = _as_dask("data", data), _single_chunk("filter", filter)
    plan = shapes.convolution_backprop_data(
        data.shape, filter.shape, output_shape, strides=strides, pads_begin=pads_begin,
        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad, output_padding=output_padding)
    return _lazy(plan, data, filter, None, ("data", "filter"), out, chunks, threads_per_task)


def group_convolution_backprop_data(data, filter, output_shape=None, *, strides=None,
                                    pads_begin=None, pads_end=None, dilations=None,
                                    auto_pad="explicit", output_padding=None, out=None,
                                    chunks=None, threads_per_task=1):
    """OpenVINO GroupConvolutionBackpropData-1 on a Dask array (lazy, tiled, exact).

    Parameters
    ----------
    data : dask.array.Array or array_like
        ``[N, G * C_IN, X1, ..., XD]``.
    filter : array_like or dask.array.Array
        ``[G, C_IN, C_OUT, K1, ..., KD]``.
    output_shape, strides, pads_begin, pads_end, dilations, auto_pad, output_padding, out
        As in :func:`convolution_backprop_data`.
    {extra}

    Returns
    -------
    dask.array.Array
        Equal to ``convtranspose.group_convolution_backprop_data`` on the same data.

    Raises
    ------
    ConvTransposeError, TypeError
        As in :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, dask.array as da, convtranspose.dask as ctd
    >>> data = da.ones((2, 4, 5, 5), chunks=(1, 4, 3, 5), dtype=np.float32)
    >>> filter = np.ones((2, 2, 3, 3, 3), np.float32)
    >>> ctd.group_convolution_backprop_data(data, filter, strides=2).shape
    (2, 6, 11, 11)
    """
    data, filter = _as_dask("data", data), _single_chunk("filter", filter)
    plan = shapes.group_convolution_backprop_data(
        data.shape, filter.shape, output_shape, strides=strides, pads_begin=pads_begin,
        pads_end=pads_end, dilations=dilations, auto_pad=auto_pad, output_padding=output_padding)
    return _lazy(plan, data, filter, None, ("data", "filter"), out, chunks, threads_per_task)


def conv_transpose(input, filter, bias=None, *, strides=None, pads_begin=None, pads_end=None,
                   dilations=None, auto_pad="none", output_padding=None, groups=1,
                   data_format="NXC", filter_format="XIO", weights_format=None,
                   output_shape=None, out=None, chunks=None, threads_per_task=1):
    """oneDNN Graph ConvTranspose-1 on a Dask array (lazy, tiled, exact).

    Parameters
    ----------
    input : dask.array.Array or array_like
        ``(N, X1, ..., XD, I)`` for ``data_format="NXC"`` (the default) or
        ``(N, I, X1, ..., XD)`` for ``"NCX"``.
    filter, bias : array_like or dask.array.Array
        As in :func:`convtranspose.conv_transpose`.
    strides, pads_begin, pads_end, dilations, auto_pad, output_padding, groups
        As in :func:`convtranspose.conv_transpose`.
    data_format, filter_format, weights_format, output_shape
        As in :func:`convtranspose.conv_transpose`.
    out : None
        As in :func:`convolution_backprop_data`.
    {extra}

    Returns
    -------
    dask.array.Array
        Equal to ``convtranspose.conv_transpose`` on the same data.

    Raises
    ------
    ConvTransposeError, TypeError
        As in :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, dask.array as da, convtranspose.dask as ctd
    >>> x = da.ones((1, 8, 8, 16), chunks=(1, 4, 4, 16), dtype=np.float32)   # NXC
    >>> w = np.ones((4, 4, 16, 3), np.float32)                               # XIO
    >>> y = ctd.conv_transpose(x, w, strides=2, pads_begin=1, pads_end=1)
    >>> y.shape, y.chunks[1]
    ((1, 16, 16, 3), (8, 8))
    """
    input, filter = _as_dask("input", input), _single_chunk("filter", filter)
    bias = None if bias is None else _single_chunk("bias", bias)
    plan = shapes.conv_transpose(
        input.shape, filter.shape, None if bias is None else bias.shape, strides=strides,
        pads_begin=pads_begin, pads_end=pads_end, dilations=dilations, auto_pad=auto_pad,
        output_padding=output_padding, groups=groups, data_format=data_format,
        filter_format=filter_format, weights_format=weights_format, output_shape=output_shape)
    return _lazy(plan, input, filter, bias, ("input", "filter", "bias"), out, chunks,
                 threads_per_task)


def onnx_conv_transpose(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1,
                        kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                        strides=None, out=None, chunks=None, threads_per_task=1):
    """ONNX ConvTranspose on a Dask array (lazy, tiled, exact).

    Parameters
    ----------
    X : dask.array.Array or array_like
        ``(N, C, D1, ..., Dn)``.
    W, B : array_like or dask.array.Array
        As in :func:`convtranspose.onnx_conv_transpose`.
    auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides
        As in :func:`convtranspose.onnx_conv_transpose`.
    out : None
        As in :func:`convolution_backprop_data`.
    {extra}

    Returns
    -------
    dask.array.Array
        Equal to ``convtranspose.onnx_conv_transpose`` on the same data.

    Raises
    ------
    ConvTransposeError, TypeError
        As in :func:`convolution_backprop_data`.

    Examples
    --------
    >>> import numpy as np, dask.array as da, convtranspose.dask as ctd
    >>> X = da.arange(9, dtype=np.float32).reshape(1, 1, 3, 3).rechunk((1, 1, 2, 2))
    >>> W = np.ones((1, 2, 3, 3), np.float32)
    >>> ctd.onnx_conv_transpose(X, W, strides=[3, 2], output_shape=[10, 8]).shape
    (1, 2, 10, 8)
    """
    X, W = _as_dask("X", X), _single_chunk("W", W)
    B = None if B is None else _single_chunk("B", B)
    plan = shapes.onnx_conv_transpose(
        X.shape, W.shape, None if B is None else B.shape, auto_pad=auto_pad,
        dilations=dilations, group=group, kernel_shape=kernel_shape,
        output_padding=output_padding, output_shape=output_shape, pads=pads, strides=strides)
    return _lazy(plan, X, W, B, ("X", "W", "B"), out, chunks, threads_per_task)


for _function in (convolution_backprop_data, group_convolution_backprop_data, conv_transpose,
                  onnx_conv_transpose):
    _function.__doc__ = _function.__doc__.replace("    {extra}", _EXTRA.strip("\n"))
del _function


# ---------------------------------------------------------------------------
# The frameworks' dialects: one builder, driven by the record of each dialect

#: Per dialect, how its filter operand (a one-chunk Dask array) becomes the plan's
#: filter, where it is not as given: ``(plan, arguments, filter) -> filter``.
_PLANNED_FILTER = {
    "jax_conv_transpose": lambda plan, arguments, rhs: _frameworks.jax_planned_rhs(
        plan, rhs, arguments["transpose_kernel"], flip=da.flip),
}

#: Per dialect, the docstring's example (shapes from the dialect's documented rule).
_EXAMPLES = {
    "torch_conv_transpose": """\
    >>> x = da.ones((1, 4, 8, 8), chunks=(1, 4, 4, 4), dtype=np.float32)
    >>> y = ctd.torch_conv_transpose(x, np.ones((4, 2, 3, 3), np.float32), stride=2,
    ...                              padding=1, output_padding=1)
    >>> y.shape, y.chunks[2]
    ((1, 2, 16, 16), (8, 8))""",
    "tensorrt_deconvolution": """\
    >>> x = da.ones((1, 4, 8, 8), chunks=(1, 4, 4, 4), dtype=np.float32)
    >>> ctd.tensorrt_deconvolution(x, np.ones((4, 2, 3, 3), np.float32), stride_nd=2,
    ...                            padding_mode="SAME_UPPER").shape
    (1, 2, 16, 16)""",
    "tf_conv_transpose": """\
    >>> x = da.ones((1, 8, 8, 4), chunks=(1, 4, 4, 4), dtype=np.float32)
    >>> ctd.tf_conv_transpose(x, np.ones((3, 3, 2, 4), np.float32), [1, 16, 16, 2], 2).shape
    (1, 16, 16, 2)""",
    "keras_conv_transpose": """\
    >>> x = da.ones((1, 8, 8, 4), chunks=(1, 4, 4, 4), dtype=np.float32)
    >>> ctd.keras_conv_transpose(x, np.ones((3, 3, 2, 4), np.float32), strides=2,
    ...                          padding="same").shape
    (1, 16, 16, 2)""",
    "tflite_transpose_conv": """\
    >>> x = da.ones((1, 8, 8, 4), chunks=(1, 4, 4, 4), dtype=np.float32)
    >>> ctd.tflite_transpose_conv([1, 16, 16, 2], np.ones((2, 3, 3, 4), np.float32), x,
    ...                           stride_h=2, stride_w=2).shape
    (1, 16, 16, 2)""",
    "jax_conv_transpose": """\
    >>> x = da.ones((1, 8, 8, 4), chunks=(1, 4, 4, 4), dtype=np.float32)
    >>> ctd.jax_conv_transpose(x, np.ones((3, 3, 4, 2), np.float32), (2, 2), "SAME").shape
    (1, 16, 16, 2)""",
}

_DOCSTRING = """{owner} on a Dask array (lazy, tiled, exact).

Parameters
----------
{data} : dask.array.Array or array_like
    As in :func:`convtranspose.{name}`, chunked along any axes (a channel axis in
    several chunks is rechunked, with a ``PerformanceWarning``).
{others}
    As in :func:`convtranspose.{name}`; the {operands} may be Dask arrays too.
out : None
    As in :func:`convolution_backprop_data`.
{extra}

Returns
-------
dask.array.Array
    Equal to ``convtranspose.{name}`` on the same data.

Raises
------
ConvTransposeError, TypeError
    As in :func:`convolution_backprop_data`.

Examples
--------
>>> import numpy as np, dask.array as da, convtranspose.dask as ctd
{example}
"""


def _framework(name: str):
    """The Dask function of the frameworks' dialect ``name``: the array function's
    parameters and ``chunks``, ``threads_per_task``; its data chunked, its filter and
    bias one chunk each, tiled on the dialect's plan."""
    record = DIALECTS[name]
    data_name, filter_name, bias_name = record.operands
    names = record.operands if bias_name else (data_name, filter_name)
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = list(inspect.signature(getattr(_frameworks, name)).parameters.values()) + [
        inspect.Parameter("chunks", keyword, default=None),
        inspect.Parameter("threads_per_task", keyword, default=1)]
    signature = inspect.Signature(parameters)
    planned = _PLANNED_FILTER.get(name)

    def function(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        out, chunks = arguments.pop("out"), arguments.pop("chunks")
        threads_per_task = arguments.pop("threads_per_task")
        data = _as_dask(data_name, arguments[data_name])
        filter = _single_chunk(filter_name, arguments[filter_name])
        bias = None if bias_name is None or arguments[bias_name] is None else _single_chunk(
            bias_name, arguments[bias_name])
        shapes = {data_name: data.shape, filter_name: filter.shape}
        if bias_name is not None:
            shapes[bias_name] = None if bias is None else bias.shape
        plan = record.rule(**{**arguments, **shapes})
        if planned is not None:
            filter = planned(plan, arguments, filter)
        return _lazy(plan, data, filter, bias, names, out, chunks, threads_per_task)

    function.__name__ = function.__qualname__ = name
    function.__signature__ = signature  # type: ignore[attr-defined]
    others = [p.name for p in parameters if p.name not in (data_name, "out", "chunks",
                                                            "threads_per_task")]
    function.__doc__ = _DOCSTRING.format(
        owner=record.owner, name=name, data=data_name, others=", ".join(others),
        operands=" and ".join(f"``{n}``" for n in record.operands[1:] if n),
        extra=inspect.cleandoc(_EXTRA), example=inspect.cleandoc("\n" + _EXAMPLES[name]))
    return function


torch_conv_transpose = _framework("torch_conv_transpose")
tensorrt_deconvolution = _framework("tensorrt_deconvolution")
tf_conv_transpose = _framework("tf_conv_transpose")
keras_conv_transpose = _framework("keras_conv_transpose")
tflite_transpose_conv = _framework("tflite_transpose_conv")
jax_conv_transpose = _framework("jax_conv_transpose")
