"""Prepared layers of the quantized dialects: the weights, scales, zero points, bias
and attributes of ``ct.qlinear_conv_transpose``, ``ct.tflite_quantized_transpose_conv``,
``ct.torch_quantized_conv_transpose``, ``ct.onednn_quantized_conv_transpose`` and the
FakeQuantize dialects bound once.

``layer = ct.prepare(ct.qlinear_conv_transpose, w=w, x_scale=..., ...)`` keeps its own
read-only copy of every array argument; ``layer(x)`` returns exactly what
``ct.qlinear_conv_transpose(x, w=w, x_scale=..., ...)`` returns, because it is that call
on the layer's copies.  What a prepared layer saves is the weights' preparation: the
filter is the layer's own (:func:`convtranspose._runtime.memo.own`), so the weights as
the exact sum takes them (centred, widened) and their packed bytes are found in the
weights memo without comparing the filter's bytes on each call
(:func:`convtranspose._frontends.quantized.kept_weights`).

A layer of ONNX's, TFLite's, torch's or oneDNN's quantized dialect also keeps, per
input shape and dtype of ndarray data (after one call of the function), a prepared
call (:func:`convtranspose._frontends.qlinear.prepare_qlinear`,
:func:`convtranspose._frontends.tflite_quantized.prepare_tflite`,
:func:`convtranspose._frontends.torch_quantized.prepare_torch`,
:func:`convtranspose._frontends.onednn_quantized.prepare_onednn`): operands checked,
plan resolved, requantization constants made and integer kernel set up once, so a
repeated call sums and requantizes the data and little else.  Its sums are exact, so
its bytes are the function's; where its kernels decline the data, the function runs.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import threading
from typing import Any

import numpy as np

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .._runtime.memo import frozen, own
from .._runtime.target import host
from .onednn_quantized import prepare_onednn
from .qlinear import prepare_qlinear
from .repeated_quantized import records_use
from .tflite_quantized import prepare_tflite
from .torch_quantized import prepare_torch

__all__ = ["PreparedQuantizedLayer"]

#: Input shapes whose output shapes and prepared calls a layer keeps.
_SHAPES_KEPT = 16

#: The dialects with a prepared call: ``prepare(arguments, data) -> call(data) or None``
#: (the module's docstring); the FakeQuantize dialects run their array function on
#: every call.
_PREPARERS = {"qlinear_conv_transpose": prepare_qlinear,
              "tflite_quantized_transpose_conv": prepare_tflite,
              "torch_quantized_conv_transpose": prepare_torch,
              "onednn_quantized_conv_transpose": prepare_onednn}


def _is_torch_tensor(value: object) -> bool:
    return type(value).__module__.partition(".")[0] == "torch" and hasattr(value, "clone")


def _kept(value: object, owned: bool = False) -> object:
    """The layer's own copy of an argument: a NumPy array copied read-only (and, for the
    filter, ``owned`` by the layer: nothing else can write it, so the weights memo need
    not compare it), a torch tensor cloned, a sequence or mapping copied item by item,
    anything else deep-copied.  Python scalars stay Python scalars: the functions give
    a Python ``int`` zero point a meaning of its own (qlinear's ``y_zero_point``)."""
    if type(value) is np.ndarray:
        copied = frozen(np.array(value, copy=True))
        return own(copied) if owned and copied.dtype.isnative else copied
    if _is_torch_tensor(value):
        return value.detach().clone()  # type: ignore[attr-defined]
    if isinstance(value, (list, tuple)):
        return type(value)(_kept(item) for item in value)
    if isinstance(value, dict):
        return {key: _kept(item) for key, item in value.items()}
    return copy.deepcopy(value)



def checked_parameters(record: _dialects.Dialect, function, arguments: dict[str, Any]):
    """``function``'s parameters, after checking that ``arguments`` (what ``ct.prepare``
    binds) leave out the data operand and ``out``, name only parameters of ``function``
    and give every parameter without a default; a TypeError names the first that does
    not."""
    parameters = inspect.signature(function).parameters
    data_name = record.operands[0]
    where = f"prepare({record.name})"
    if data_name in arguments or "out" in arguments:
        given = data_name if data_name in arguments else "out"
        raise TypeError(f"{where}: {given} is given to each call of the layer, not to"
                        f" prepare, which binds the other arguments")
    unknown = sorted(set(arguments) - set(parameters))
    if unknown:
        known = ", ".join(name for name in parameters if name not in (data_name, "out"))
        raise TypeError(f"{where}: unknown argument {unknown[0]!r}; its arguments are"
                        f" {known}")
    missing = [name for name, parameter in parameters.items()
               if parameter.default is inspect.Parameter.empty
               and name not in arguments and name != data_name]
    if missing:
        raise TypeError(f"{where}: missing the argument {missing[0]!r}")
    return parameters

class PreparedQuantizedLayer:
    """A quantized transposed convolution layer with every argument but the data bound:
    :func:`convtranspose.prepare` makes one for a quantized dialect.

    ``layer(data)`` returns exactly what the array function returns for ``data`` and the
    bound arguments (it is that call on the layer's copies).  The layer keeps its own
    read-only copy of every array argument (weights, scales, zero points, bias, the
    FakeQuantize ranges): editing the caller's arrays afterwards does not change it, and
    :meth:`set_weights` replaces the weights and bias.  A torch quantized tensor is
    cloned.  The filter being the layer's own, the weights as the exact sum takes them
    and their packed bytes are kept with it and found without comparing its bytes on
    each call.  Errors of the arguments that need the data (dtypes, shapes, ranges) are
    raised by each call, as the function raises them.

    Parameters
    ----------
    name : str
        The quantized dialect's name (``"qlinear_conv_transpose"``, ...).
    arguments : dict
        Its arguments by name, without the data operand and ``out``.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> w = np.array([[[1, 2, 3]]], np.int8)
    >>> layer = ct.prepare(ct.qlinear_conv_transpose, x_scale=0.5, x_zero_point=10, w=w,
    ...                    w_scale=0.25, w_zero_point=np.int8(0), y_scale=0.125,
    ...                    y_zero_point=100, strides=2)
    >>> layer(np.array([[[10, 20, 30]]], np.uint8))
    array([[[100, 100, 110, 120, 150, 140, 160]]], dtype=uint8)
    """

    __slots__ = ("_dialect", "_function", "_arguments", "_lock", "_shapes", "_calls",
                 "__weakref__")

    def __init__(self, name: str, arguments: dict[str, Any]):
        self._dialect = record = _dialects.DIALECTS[name]
        if not record.quantized:
            raise TypeError(f"PreparedQuantizedLayer takes a quantized dialect; ct.{name}"
                            f" is prepared by ct.prepare as a PreparedLayer")
        self._function = getattr(importlib.import_module("convtranspose"), name)
        checked_parameters(record, self._function, arguments)
        self._arguments = {key: _kept(value, owned=key == record.operands[1])
                           for key, value in arguments.items()}
        self._lock = threading.Lock()
        self._shapes: dict = {}  # input shape -> output shape, the most recent last
        #: (shape, dtype, target) of ndarray data -> (the arguments it was set up from,
        #: the dialect's prepared call or None), the most recent last.
        self._calls: dict = {}

    @property
    def function(self):
        """The array function this layer computes."""
        return self._function

    @property
    def arguments(self) -> dict[str, Any]:
        """The bound arguments, by the array function's names (arrays read-only)."""
        return dict(self._arguments)

    def __call__(self, data, out: np.ndarray | None = None):
        """The layer's result for ``data``: ``function(data, **arguments, out=out)``.

        Parameters
        ----------
        data : array_like
            The data operand (``x``, ``input`` or ``data``), in the function's layout
            and integer (or, for FakeQuantize, float) type.
        out : ndarray, optional
            As the array function's ``out``.
        """
        arguments = self._arguments  # one read: set_weights may replace it meanwhile
        prepare = _PREPARERS.get(self._dialect.name)
        fast = out is None and prepare is not None and type(data) is np.ndarray
        if fast:
            key = (data.shape, data.dtype, host())
            kept = self._calls.get(key)
            if kept is not None and kept[0] is arguments and kept[1] is not None:
                result = kept[1](data)
                if result is not None:
                    return result
        result = self._function(**{self._dialect.operands[0]: data}, **arguments, out=out)
        shape = tuple(getattr(data, "shape", ()))
        with self._lock:
            if shape not in self._shapes:
                while len(self._shapes) >= _SHAPES_KEPT:
                    del self._shapes[next(iter(self._shapes))]
                self._shapes[shape] = tuple(result.shape)
        if fast and (kept is None or kept[0] is not arguments):
            # Set up from the arguments this call ran with (checked by it), for the next.
            call = prepare(arguments, data)
            with self._lock:
                while len(self._calls) >= _SHAPES_KEPT:
                    del self._calls[next(iter(self._calls))]
                self._calls[key] = (arguments, call)
        return result

    def set_weights(self, *operands, **named) -> None:
        """Replace the weights (and bias), by position (filter, bias) or by the array
        function's names; the layer copies them.  The scales and zero points stay bound:
        a layer of other scales is another ``ct.prepare``.

        Examples
        --------
        >>> import numpy as np, convtranspose as ct
        >>> layer = ct.prepare(ct.torch_quantized_conv_transpose,
        ...     weight=np.ones((1, 1, 2), np.int8), stride=2, input_scale=1.0,
        ...     input_zero_point=0, weight_scale=1.0, weight_zero_point=0,
        ...     output_scale=1.0, output_zero_point=0, engine="fbgemm")
        >>> layer.set_weights(np.full((1, 1, 2), 3, np.int8), bias=np.array([1.0]))
        >>> layer(np.array([[[1, 2]]], np.uint8))
        array([[[4, 4, 7, 7]]], dtype=uint8)
        """
        names = tuple(n for n in self._dialect.operands[1:] if n is not None)
        if len(operands) > len(names):
            raise TypeError(f"set_weights takes at most {len(names)} operands"
                            f" ({', '.join(names)}), got {len(operands)}")
        given = dict(zip(names, operands))
        for key, value in named.items():
            if key not in names or key in given:
                raise TypeError(f"set_weights: {key!r} is not one of {', '.join(names)}"
                                if key not in names else f"set_weights: {key} given twice")
            given[key] = value
        with self._lock:
            arguments = dict(self._arguments)
            arguments.update((key, _kept(value, owned=key == names[0]))
                             for key, value in given.items())
            self._arguments = arguments
            self._calls = {}  # set up from the old weights

    def explain(self, data_shape=None, dtype=None, *, measure: bool = False):
        """Not for the quantized dialects: :func:`convtranspose.explain` tells which float
        algorithm a layer gets, while a quantized layer sums exactly in integers (byte
        products with AVX512-VNNI, else exact float32 passes; docs/quantization.md) and
        then requantizes as its owner does.

        Raises
        ------
        ConvTransposeError
            Always, saying so; ``repr(layer)`` shows the bound arguments and the input
            shapes called with their result shapes.
        """
        raise ConvTransposeError(
            f"explain covers the float dialects' algorithm choice; {self._dialect.name} sums"
            f" exactly in integers and requantizes (docs/quantization.md); repr(layer)"
            f" shows its arguments and the shapes it has computed")

    def __repr__(self) -> str:
        def shown(value):
            if hasattr(value, "shape") and hasattr(value, "dtype"):
                return f"{value.dtype}{list(value.shape)}"
            return repr(value)

        parts = [self._dialect.name] + [f"{key}={shown(value)}"
                                        for key, value in self._arguments.items()]
        calls = [f"{list(shape)} -> {list(result)}"
                 for shape, result in list(self._shapes.items())]
        return (f"PreparedQuantizedLayer({', '.join(parts)})"
                + (f"  # called: {'; '.join(calls)}" if calls else ""))

    def __reduce__(self):
        # By the dialect's name: unpickling looks the function up in this library.
        return (PreparedQuantizedLayer, (self._dialect.name, dict(self._arguments)))


# The array functions' records of repeated calls run layers of this class.
records_use(PreparedQuantizedLayer)
