"""TensorFlow ``tf.nn.conv_transpose``, Keras 3 ``Conv{1,2,3}DTranspose`` and TFLite /
LiteRT ``TRANSPOSE_CONV``: their arguments, layouts and rules, as canonical plans.

All three are the gradient of TensorFlow's forward convolution.  The output size ``Y``
is given (``output_shape``; Keras computes it), and the forward convolution of a
``Y``-element input must give back the ``X`` elements of the data, or the op refuses::

    VALID     X = (Y - K' + s) // s                  offset = 0
    SAME      X = ceil(Y / s)                        offset = max((X-1)*s + K' - Y, 0) // 2
    explicit  X = (Y + a + b - K' + s) // s          offset = a   (tf.nn, 2-D only)

so the odd pad of SAME goes at the end, and ``Y`` past the full result ``F`` is zeros.
The quotient is C++'s (toward zero) and must not be negative.  TensorFlow and Keras take
an input with an empty spatial axis (``X = 0``) and give zeros (an output size of 0 is
then allowed); LiteRT refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .rules import (
    ConvTransposePlan,
    as_index,
    as_sequence,
    as_shape,
    build_plan,
    check_spatial,
    checked_axis,
    per_axis,
)

if TYPE_CHECKING:
    from typing import Any

    from .._typing import PerAxis, ShapeLike

__all__ = ["keras_conv_transpose", "tf_conv_transpose", "tflite_transpose_conv"]

_TF_FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def _truncated(numerator: int, divisor: int) -> int:
    """C++ integer division (toward zero), as TensorFlow's kernels compute it."""
    quotient = abs(numerator) // divisor
    return quotient if numerator >= 0 else -quotient


def tf_axes(op, data, kernel, strides, dilations, sizes, modes, spatial):
    """Per axis ``(AxisPlan, formula)``, ``pads_begin``, ``pads_end`` and the output
    padding for output sizes ``sizes`` under TensorFlow's forward-convolution rule.

    ``modes[i]`` is ``"SAME"``, ``"VALID"`` or an explicit ``(a, b)`` pair.
    """
    axes, begins, ends, extras = [], [], [], []
    for i, (x, k, s, d, y, mode) in enumerate(zip(spatial, kernel, strides, dilations, sizes,
                                                   modes)):
        dilated = (k - 1) * d + 1
        full = (x - 1) * s + dilated
        if mode == "SAME":
            computed = -(-y // s)
            total = max((computed - 1) * s + dilated - y, 0)
            a, b = total // 2, total - total // 2
            rule = f"SAME: X = ceil(Y/s) = ceil({y}/{s})"
        elif mode == "VALID":
            computed, a, b = _truncated(y - dilated + s, s), 0, 0
            rule = f"VALID: X = (Y - K' + s) // s = ({y} - {dilated} + {s}) // {s}"
        else:
            a, b = mode
            computed = _truncated(y + a + b - dilated + s, s)
            rule = (f"explicit ({a}, {b}): X = (Y + a + b - K' + s) // s = ({y} + {a} + {b}"
                    f" - {dilated} + {s}) // {s}")
        if computed < 0:
            raise ConvTransposeError(
                f"{op}: output_shape {list(sizes)} is too small along spatial axis {i}: the"
                f" forward convolution of {y} elements would have a negative size,"
                f" {computed} ({rule}; TensorFlow: \"Computed output size would be"
                f" negative\"); for {x} the output size must lie in"
                f" {_valid_range(x, dilated, s, mode)}")
        if computed != x:
            raise ConvTransposeError(
                f"{op}: output_shape {list(sizes)} does not match the input along spatial"
                f" axis {i}: the forward convolution of {y} elements gives {computed}"
                f" ({rule}) but the input has {x} (input shape {data}); for {x} the output"
                f" size must lie in {_valid_range(x, dilated, s, mode)}")
        axes.append(checked_axis(i, x, k, s, d, a, y, f"{rule} = {x}; offset = {a}", empty=True))
        begins.append(a)
        ends.append(b)
        extras.append(y - full + a + b)
    return axes, begins, ends, extras


def _valid_range(x, dilated, s, mode) -> str:
    """The output sizes whose forward convolution gives ``x`` elements (the quotient
    truncated toward zero, so ``x = 0`` also takes the numerators in ``(-s, 0)``)."""
    if mode == "SAME":
        return f"[{max((x - 1) * s + 1, 0)}, {x * s}]"
    a, b = (0, 0) if mode == "VALID" else mode
    high = (x - 1) * s + dilated - a - b + s - 1
    low = max((x - 1) * s + dilated - a - b - (s - 1 if x == 0 else 0), 0)
    return f"[{low}, {high}]" if low <= high else "no size at all"


def _tf_sequence(name, value, rank, channels_last) -> tuple[int, ...]:
    """TensorFlow's int-or-list of length 1, N or N+2 (batch and channel entries 1).

    In 1-D, ``conv1d_transpose`` runs the 2-D op on a size-1 axis that it inserts
    before the spatial one, and a list of 3 becomes the 2-D op's ``[1] + list``: the
    entry that lands on the inserted axis (the first in NWC, the second in NCW) strides
    a kernel of one tap over one element, so any positive value does the same, and the
    one that lands on the depth (the last in NWC, the first in NCW) must be 1.
    """
    if value is None:
        return (1,) * rank
    items = [value] if isinstance(value, int) else as_sequence(name, value)
    if len(items) == rank + 2 and rank == 1:
        depth, inserted, spatial = (2, 0, 1) if channels_last else (0, 1, 2)
        if as_index(name, items[depth]) != 1:
            raise ConvTransposeError(
                f"{name} {list(items)}: TensorFlow does not support {name} in the batch and"
                f" depth dimensions: in 1-D the entry at index {depth} is the depth's (the"
                f" 2-D op it runs takes [1] + {name}) and must be 1")
        if as_index(name, items[inserted]) <= 0:
            raise ConvTransposeError(
                f"{name} {list(items)}: the entry at index {inserted} applies to the size-1"
                f" axis TensorFlow's 1-D op inserts and must be positive (it has no other"
                f" effect)")
        items = [items[spatial]]
    elif len(items) == rank + 2:
        outer = (items[0], items[-1]) if channels_last else tuple(items[:2])
        if any(as_index(name, v) != 1 for v in outer):
            raise ConvTransposeError(
                f"{name} {list(items)}: TensorFlow does not support {name} in the batch and"
                f" depth dimensions (they must be 1)")
        items = items[1:-1] if channels_last else items[2:]
    elif len(items) == 1:
        items = items * rank
    elif len(items) != rank:
        raise ConvTransposeError(
            f"{name} should be of length 1, {rank} or {rank + 2}; got {name}={value!r}")
    return per_axis(name, items, rank, 1, 1)


def _tf_padding(padding, rank, channels_last):
    """Per spatial axis "SAME", "VALID" or an explicit ``(a, b)`` pair."""
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise ConvTransposeError(
                f"padding must be 'SAME', 'VALID' or a list of explicit pairs, got {padding!r}")
        return (padding,) * rank
    items = as_sequence("padding", padding)
    if rank != 2:
        raise ConvTransposeError(
            f"explicit padding is only supported by tf.nn.conv2d_transpose (2 spatial axes);"
            f" this layer has {rank}: use 'SAME' or 'VALID'")
    if len(items) != rank + 2:
        raise ConvTransposeError(
            f"When padding is a list, it must be of size {rank + 2} (one pair per dimension"
            f" of the data, in data_format order); got padding={padding!r}")
    pairs = []
    for i, item in enumerate(items):
        pair = as_sequence(f"padding[{i}]", item)
        if len(pair) != 2:
            raise ConvTransposeError(f"padding[{i}] must be a (before, after) pair, got {item!r}")
        pairs.append(tuple(as_index(f"padding[{i}]", v) for v in pair))
    if any(v < 0 for pair in pairs for v in pair):
        raise ConvTransposeError(
            f"padding {pairs}: all elements of explicit paddings must be nonnegative")
    outer = (pairs[0], pairs[-1]) if channels_last else tuple(pairs[:2])
    if any(pair != (0, 0) for pair in outer):
        raise ConvTransposeError(
            f"padding {pairs}: nonzero explicit padding in the batch or depth dimensions is"
            f" not supported")
    return tuple(pairs[1:-1] if channels_last else pairs[2:])


def _channels(op, data, filter_, output, channels_last):
    """Check batch and channel counts against a ``(K..., C_out, C_in)`` filter."""
    c_in = data[-1] if channels_last else data[1]
    c_out = output[-1] if channels_last else output[1]
    if c_in != filter_[-1]:
        raise ConvTransposeError(
            f"{op}: the input has {c_in} channels but the filter of shape {filter_} has"
            f" {filter_[-1]} input channels (the filter is (K..., C_out, C_in))")
    if c_out != filter_[-2]:
        raise ConvTransposeError(
            f"{op}: output_shape {output} has {c_out} channels but the filter of shape"
            f" {filter_} has {filter_[-2]} output channels (the filter is (K..., C_out, C_in))")
    if output[0] != data[0]:
        raise ConvTransposeError(
            f"{op}: output_shape {output} has batch {output[0]} but the input has {data[0]}")


def _tf_plan(op, data, filter_, output, strides, dilations, modes, channels_last, mode_name,
             layout="XOI", empty_input=True) -> ConvTransposePlan:
    rank = len(data) - 2
    spatial = data[1:-1] if channels_last else data[2:]
    sizes = output[1:-1] if channels_last else output[2:]
    kernel = filter_[:rank] if layout == "XOI" else filter_[1:-1]
    if not empty_input:
        check_spatial("input", data, spatial)
    check_spatial("filter", filter_, kernel)
    axes, begins, ends, extras = tf_axes(op, data, kernel, strides, dilations, sizes, modes,
                                         spatial)
    return build_plan(op, data, filter_, output, strides, dilations, begins, ends, tuple(extras),
                      mode_name, 1, "NXC" if channels_last else "NCX", layout, axes)


def tf_conv_transpose(input: ShapeLike, filters: ShapeLike, output_shape: ShapeLike,
                      strides: PerAxis, padding: Any = "SAME", data_format: str | None = None,
                      dilations: PerAxis = None) -> ConvTransposePlan:
    """Plan TensorFlow's ``tf.nn.conv_transpose`` from shapes.

    Takes the shapes of ``input`` and ``filters`` ``(K..., C_out, C_in)`` and the same
    arguments as :func:`convtranspose.tf_conv_transpose`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.tf_conv_transpose((1, 5, 5, 4), (3, 3, 2, 4), [1, 10, 10, 2], 2)
    >>> plan.output_shape, plan.offset, plan.pads_begin, plan.pads_end
    ((1, 10, 10, 2), (0, 0), (0, 0), (1, 1))
    """
    op = "tf_conv_transpose"
    if output_shape is None:
        raise ConvTransposeError(f"{op}: output_shape is required (the whole output shape)")
    output = as_shape("output_shape", output_shape)
    rank = len(output) - 2
    if not 1 <= rank <= 3:
        raise ConvTransposeError(
            f"output_shape must be of length 3, 4 or 5, got {list(output)} of length"
            f" {len(output)}")
    data, filter_ = as_shape("input shape", input), as_shape("filters shape", filters)
    if len(data) != rank + 2 or len(filter_) != rank + 2:
        raise ConvTransposeError(
            f"{op}: output_shape {list(output)} has {rank} spatial axes, so input (shape"
            f" {data}) and filters (shape {filter_}) must both have rank {rank + 2}")
    formats = _TF_FORMATS[rank]
    if data_format is not None and data_format not in formats:
        raise ConvTransposeError(
            f"data_format must be {formats[0]!r} or {formats[1]!r} for {rank} spatial axes,"
            f" got {data_format!r}")
    channels_last = data_format in (None, formats[0])
    strides = _tf_sequence("strides", strides, rank, channels_last)
    dilations = _tf_sequence("dilations", dilations, rank, channels_last)
    modes = _tf_padding(padding, rank, channels_last)
    _channels(op, data, filter_, output, channels_last)
    mode_name = padding.lower() if isinstance(padding, str) else "explicit"
    return _tf_plan(op, data, filter_, output, strides, dilations, modes, channels_last,
                    mode_name)


def keras_output_size(x, k, s, d, padding, output_padding) -> int:
    """Keras 3's ``Conv*DTranspose`` output size (``compute_conv_transpose_output_shape``)."""
    dilated = (k - 1) * d + 1
    if padding == "valid":
        extra = max(dilated, s) - dilated if output_padding is None else output_padding
        return (x - 1) * s + dilated + extra
    if output_padding is None:
        return x * s
    return (x - 1) * s + dilated % 2 + output_padding


def _keras_tuple(name, value, rank, allow_zero=False) -> tuple[int, ...]:
    """Keras' ``standardize_tuple``: an int for every axis, or exactly ``rank`` values (a
    one-element tuple only in 1-D)."""
    items = [value] * rank if isinstance(value, int) and not isinstance(value, bool) else \
        as_sequence(name, value)
    if len(items) != rank:
        raise ConvTransposeError(
            f"The `{name}` argument must be a tuple of {rank} integers; got {name}={value!r}")
    return per_axis(name, items, rank, 0, 0 if allow_zero else 1)


def keras_conv_transpose(inputs: ShapeLike, kernel: ShapeLike, bias: ShapeLike | None = None, *,
                         strides: PerAxis = 1, padding: str = "valid",
                         output_padding: PerAxis = None, data_format: str = "channels_last",
                         dilation_rate: PerAxis = 1) -> ConvTransposePlan:
    """Plan Keras 3's ``Conv1DTranspose``/``Conv2DTranspose``/``Conv3DTranspose`` from shapes.

    Takes the shapes of ``inputs``, ``kernel`` ``(K..., filters, C_in)`` and optionally
    ``bias`` ``(filters,)``, and the same arguments as
    :func:`convtranspose.keras_conv_transpose`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> shapes.keras_conv_transpose((1, 3, 1), (1, 1, 1), strides=3).output_shape
    (1, 9, 1)
    """
    op = "keras_conv_transpose"
    data, filter_ = as_shape("inputs shape", inputs), as_shape("kernel shape", kernel)
    rank = len(filter_) - 2
    if not 1 <= rank <= 3 or len(data) != rank + 2:
        raise ConvTransposeError(
            f"{op}: kernel shape {filter_} must have rank 3 to 5 ((K..., filters, C_in)) and"
            f" inputs (shape {data}) the same rank")
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ConvTransposeError(
            f"The `padding` argument must be one of 'valid', 'same'; got {padding!r}")
    padding = padding.lower()
    form = "channels_last" if data_format is None else str(data_format).lower()
    if form not in ("channels_first", "channels_last"):
        raise ConvTransposeError(
            f"The `data_format` argument must be one of 'channels_first', 'channels_last';"
            f" got {data_format!r}")
    strides = _keras_tuple("strides", strides, rank)
    dilations = _keras_tuple("dilation_rate", dilation_rate, rank)
    extra = None if output_padding is None else _keras_tuple(
        "output_padding", output_padding, rank, allow_zero=True)
    for i, s in enumerate(strides):
        if extra is not None and extra[i] >= s:
            raise ConvTransposeError(
                f"`output_padding` must be strictly less than `strides` for all dimensions;"
                f" at dimension {i}, `output_padding` is {extra[i]} but `strides` is {s}")
    if max(strides) > 1 and max(dilations) > 1:
        raise ConvTransposeError(
            f"`strides > 1` not supported in conjunction with `dilation_rate > 1`; got"
            f" strides={strides} and dilation_rate={dilations}")
    channels_last = form == "channels_last"
    spatial = data[1:-1] if channels_last else data[2:]
    sizes = tuple(keras_output_size(x, k, s, d, padding, None if extra is None else extra[i])
                  for i, (x, k, s, d) in enumerate(zip(spatial, filter_[:rank], strides,
                                                       dilations)))
    negative = [size for size in sizes if size < 0]
    if negative:
        raise ConvTransposeError(
            f"{op}: Keras computes the output size {list(sizes)} for inputs of shape {data}"
            f" ((X-1)*s + max(K', s) for 'valid', (X-1)*s + K' % 2 + output_padding for"
            f" 'same' with output_padding) and TensorFlow refuses the negative size"
            f" {negative[0]} (\"Dimension {negative[0]} must be >= 0\")")
    output = ((data[0],) + sizes + (filter_[-2],) if channels_last
              else (data[0], filter_[-2]) + sizes)
    if bias is not None and as_shape("bias shape", bias) != (filter_[-2],):
        raise ConvTransposeError(
            f"bias has shape {as_shape('bias shape', bias)} but must be ({filter_[-2]},), one"
            f" value per filter")
    _channels(op, data, filter_, output, channels_last)
    try:
        return _tf_plan(op, data, filter_, output, strides, dilations,
                        (padding.upper(),) * rank, channels_last, padding)
    except ConvTransposeError as error:
        raise ConvTransposeError(
            f"Keras computes the output size {list(sizes)} ((X-1)*s + K' % 2 + output_padding"
            f" for 'same' with output_padding) and TensorFlow refuses it: {error}") from None


def tflite_transpose_conv(output_shape: ShapeLike, weights: ShapeLike, input: ShapeLike,
                          bias: ShapeLike | None = None, *, padding: str = "SAME",
                          stride_h: int = 1, stride_w: int = 1) -> ConvTransposePlan:
    """Plan TFLite / LiteRT ``TRANSPOSE_CONV`` from shapes.

    Takes ``output_shape`` (the op's input 0, ``[N, H, W, C_out]``), the shapes of
    ``weights`` ``(C_out, KH, KW, C_in)`` (OHWI), ``input`` (NHWC) and optionally
    ``bias`` ``(C_out,)``, and the same options as
    :func:`convtranspose.tflite_transpose_conv`.

    Examples
    --------
    >>> from convtranspose import shapes
    >>> plan = shapes.tflite_transpose_conv([1, 1, 5, 1], (1, 1, 3, 1), (1, 1, 3, 1),
    ...                                     stride_w=2)
    >>> plan.output_shape, plan.offset
    ((1, 1, 5, 1), (0, 1))
    """
    op = "tflite_transpose_conv"
    output = as_shape("output_shape", output_shape)
    data, filter_ = as_shape("input shape", input), as_shape("weights shape", weights)
    if len(output) != 4 or len(data) != 4 or len(filter_) != 4:
        raise ConvTransposeError(
            f"{op}: output_shape {list(output)}, weights (shape {filter_}) and input (shape"
            f" {data}) must all have 4 dimensions (NHWC, OHWI)")
    if padding not in ("SAME", "VALID"):
        raise ConvTransposeError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    strides = (as_index("stride_h", stride_h), as_index("stride_w", stride_w))
    for name, s in zip(("stride_h", "stride_w"), strides):
        if s <= 0:
            raise ConvTransposeError(f"{name} is {s} but must be positive")
    if data[-1] != filter_[-1]:
        raise ConvTransposeError(
            f"{op}: the input has {data[-1]} channels but the weights of shape {filter_} have"
            f" {filter_[-1]} input channels (the weights are OHWI)")
    if output[-1] != filter_[0]:
        raise ConvTransposeError(
            f"{op}: output_shape {list(output)} has {output[-1]} channels but the weights of"
            f" shape {filter_} have {filter_[0]} output channels (the weights are OHWI)")
    if output[0] != data[0]:
        raise ConvTransposeError(
            f"{op}: output_shape {list(output)} has batch {output[0]} but the input has"
            f" {data[0]}")
    if bias is not None and as_shape("bias shape", bias) != (filter_[0],):
        raise ConvTransposeError(
            f"bias has shape {as_shape('bias shape', bias)} but must be ({filter_[0]},)")
    if data[-1] == 0:
        raise ConvTransposeError(
            f"{op}: the input of shape {data} has no channels; LiteRT refuses an empty"
            f" input axis (\"SizeOfDimension(input, 3) > 0 was not true\")")
    return _tf_plan(op, data, filter_, output, strides, (1, 1), (padding,) * 2, True,
                    padding.lower(), layout="OXI", empty_input=False)
