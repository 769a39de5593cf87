"""Prepared layers: one dialect's layer with its weights and attributes bound once.

``layer = ct.prepare(ct.onnx_conv_transpose, W=w, strides=[2, 2])`` keeps a copy of the
weights and the attributes; ``layer(x)`` returns exactly what
``ct.onnx_conv_transpose(x, W=w, strides=[2, 2])`` returns.  What a call of the array
function does again every time (reading the weights and attributes, resolving the plan
through the plan cache, comparing the filter with the weights memo's copy) a prepared
layer does once per input shape: each shape binds a plan and the weights in that plan's
layout (:class:`_Binding`), kept while the layer lives, as XNNPACK's operators keep
their setup per input shape.  The weights are the layer's own read-only copy, so the
matrices derived from them are kept without comparing them with the caller's filter
(:func:`convtranspose._runtime.memo.own`).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._choose import planning as _planning
from .._errors import ConvTransposeError
from .._execute import array_api as _array_api
from .._execute.adjoints import kept_data_adjoint
from .._execute.rounded_calls import prepare_rounded_call
from .._execute.transposed import add_column, bias_column, preparable, prepare_call
from .._plan import dialects as _dialects
from .._runtime.memo import frozen, own
from .._runtime.memory import get_max_bytes
from .convolution import execute_convolution
from .explain import explain as _explain
from .frameworks import jax_planned_rhs
from .kept_calls import prepared_call
from .prepared_quantized import PreparedQuantizedLayer, checked_parameters
from .specs import as_array, canonical_weights, execute_plan, may_share_memory, resolve_plan

if TYPE_CHECKING:
    from .._choose.choice import Explanation
    from .explain import AdjointExplanation

__all__ = ["PreparedLayer", "PreparedQuantizedLayer", "prepare"]

#: Input shapes (with dtype) a layer keeps bound, the most recently used last: a model
#: called at a few batch sizes or image sizes binds each once.
BINDINGS_KEPT = 16


def _function_named(name: str):
    """The library's array function ``name`` (``convtranspose.<name>``)."""
    return getattr(importlib.import_module("convtranspose"), name)


def _dialect_of(function) -> _dialects.Dialect:
    """The dialect record of one of the library's array functions (or of its name)."""
    name = function if isinstance(function, str) else getattr(function, "__name__", None)
    record = _dialects.DIALECTS.get(name) if isinstance(name, str) else None
    if record is None or not (isinstance(function, str) or _function_named(name) is function):
        choices = ", ".join(f"ct.{dialect}" for dialect in _dialects.DIALECTS)
        raise TypeError(f"prepare takes one of the library's array functions ({choices}),"
                        f" or its name; got {function!r}")
    return record


def _owned(name: str, value: object) -> object:
    """The layer's own read-only copy of an operand, or another library's array as given
    (its calls run in that library: :mod:`convtranspose._execute.array_api`)."""
    if value is None or _array_api.is_foreign(value):
        return value
    return own(frozen(np.array(as_array(name, value), copy=True)))


_NO_FAST = (None, -1, None, None)


class _Binding:
    """One input shape and dtype of a layer: its plan and the weights in the plan's
    layout, called with data of that shape.

    A layer that :func:`~.specs.execute_plan` computes through a prepared call keeps
    that call after its first run and calls it directly while the planning generation
    holds: no checks of the operands against the plan, which the binding's shape and
    dtype already guarantee (half of a tiny layer's 8 us,
    ``benchmarks/results/prepared-calls-xeon.json``).  Nor is its memory counted again:
    it runs while the memory limit is at least the one its last checked run (without
    ``out``) passed under, since its footprint is the same; into an ``out`` it can
    write straight into (:meth:`takes_out`), while the limit is at least the least one
    any checked run passed under.  A layer with a bias keeps its own prepared call (the
    shared ones are bias-free) and adds the bias to its sums as
    :func:`~convtranspose._execute.transposed.transposed_convolution` does.
    """

    __slots__ = ("plan", "fast", "limit", "out_limit", "_run", "_generation", "_filter",
                 "_bias", "_forward")

    def __init__(self, layer: PreparedLayer, data_shape: tuple[int, ...]):
        record, arguments = layer._dialect, layer._arguments
        data_name, filter_name, bias_name = record.operands
        filter, bias = arguments[filter_name], arguments.get(bias_name) if bias_name else None
        rule_arguments = dict(layer._defaults, **arguments)
        rule_arguments[data_name] = data_shape
        rule_arguments[filter_name] = filter.shape
        if bias_name is not None:
            rule_arguments[bias_name] = None if bias is None else bias.shape
        self.plan = plan = resolve_plan(record.rule, **rule_arguments)
        #: The planning generation the prepared call (in :attr:`fast`) was sought in: -1
        #: none yet; generations count from 0.
        self._generation = -1
        #: ``(call, generation, filter, column)`` that :meth:`PreparedLayer.__call__`
        #: runs as ``call(data, filter, out)`` while the generation holds and the memory
        #: limit is at least :attr:`limit`, then adds the bias ``column``
        #: (:func:`~convtranspose._execute.transposed.bias_column`; None without a bias),
        #: or ``(None, -1, None, None)``: generations count from 0.
        self.fast: tuple = _NO_FAST
        #: The memory limit the last checked run without ``out`` passed under (none yet),
        #: and the least one any checked run passed under (a run into ``out`` allocates
        #: no result: less than one without).
        self.limit = self.out_limit = math.inf
        self._filter = self._bias = None
        self._forward = not record.transposed
        if self._forward:
            if type(filter) is np.ndarray:  # the view the data adjoint's call knows
                self._filter = filter.reshape(plan.canonical_filter_shape)
            self._run = lambda data, out: execute_convolution(plan, data, filter, out,
                                                              self._filter)
            return
        if record.name == "jax_conv_transpose":
            filter = jax_planned_rhs(plan, filter, rule_arguments["transpose_kernel"])
        if plan.axes:  # JAX's 0-D layers run on a plan with an axis added
            self._filter, self._bias = filter, bias
        names = (data_name, filter_name, bias_name or "bias")
        output_shape = arguments.get("output_shape")
        self._run = lambda data, out: execute_plan(plan, data, filter, bias, out, names=names,
                                                   output_shape=output_shape)

    def takes_out(self, out: object, data: np.ndarray) -> bool:
        """Whether the prepared call may write straight into ``out`` for ``data`` (of the
        binding's shape and dtype): what :func:`~.specs.direct_out` requires of it, a
        NumPy array of the result's shape and dtype, C-contiguous, writeable and apart
        from the data (the layer's filter is its own, read-only).  Any other ``out``
        goes through the checked run, which copies or refuses it."""
        if type(out) is not np.ndarray:
            return False
        flags = out.flags
        return (flags.c_contiguous and flags.writeable and out.dtype == data.dtype
                and out.shape == self.plan.output_shape
                and not may_share_memory(out, data))

    def general(self, data: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        """The layer through :func:`~.specs.execute_plan` (which may prepare its call),
        then the binding's prepared call kept for the next calls."""
        limit = get_max_bytes()
        result = self._run(data, out)
        if get_max_bytes() == limit:
            self.out_limit = min(self.out_limit, limit)
            if out is None:
                self.limit = limit
        if self._filter is not None and self._generation != _planning.generation:
            call, self._generation, column = self._prepared(data)
            self.fast = (_NO_FAST if call is None else
                         (call, self._generation, self._filter, column))
        return result

    def _prepared(self, data: np.ndarray) -> tuple:
        """``(prepared call or None, planning generation, bias column or None)`` after a
        run of the layer: the shared one of a bias-free layer where it was set up from
        this layer's filter, else one of its own; the column is the bias its sums get
        afterwards (a half-precision layer's call adds it before rounding)."""
        plan, filter, bias = self.plan, self._filter, self._bias
        if self._forward:
            return (*kept_data_adjoint(data, filter, plan.axes, False, data.dtype), None)
        if not preparable(data.dtype, data.dtype):  # float16, bfloat16 (other dtypes: None)
            call = prepare_rounded_call(data, filter, bias,
                                        lambda kept: canonical_weights(plan, kept), plan.axes,
                                        plan.channels_last)
            return call, _planning.generation, None
        call, generation = self._summing(data)
        # A prepared call's sums are in the data's dtype, as the layer's result.
        column = None if call is None or bias is None else bias_column(
            bias, data.dtype, plan.channels_last, len(plan.axes))
        return call, generation, column

    def _summing(self, data: np.ndarray) -> tuple:
        """``(prepared call or None, planning generation)`` of a float32 or float64 layer,
        its sums without the bias."""
        plan, filter = self.plan, self._filter
        shared = None
        if self._bias is None:
            shared, generation = prepared_call(plan, data, filter)
            if shared is None or shared.tells_by_identity(filter):
                return shared, generation
            # The shared call was set up from another caller's filter, which each call
            # would compare this layer's with, byte for byte (25 of a 110 us call with a
            # 512 KB filter): one of its own tells it by identity.
        call = prepare_call(data, filter, lambda kept: canonical_weights(plan, kept), plan.axes,
                            plan.channels_last)
        return (shared if call is None else call), _planning.generation


class PreparedLayer:
    """A transposed (or forward) convolution layer with its weights and attributes bound:
    :func:`prepare` makes one; calling it on data computes the layer.

    ``layer(data)`` returns exactly what the array function returns for ``data`` and
    the bound arguments.  The layer keeps its own read-only copy of the weights (and
    bias): editing the caller's arrays afterwards does not change it, and
    :meth:`set_weights` replaces them.  Arrays of another library (PyTorch, JAX, CuPy)
    are kept as given, and their calls run through the array function.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> w = np.array([[[1.0, 10.0, 100.0]]])            # C_IN=1, C_OUT=1, K=3
    >>> layer = ct.prepare(ct.onnx_conv_transpose, W=w, strides=[2])
    >>> layer(np.array([[[1.0, 2.0, 3.0]]]))
    array([[[  1.,  10., 102.,  20., 203.,  30., 300.]]])
    """

    __slots__ = ("_dialect", "_function", "_arguments", "_defaults", "_bindings", "_lock",
                 "__weakref__")

    def __init__(self, function: Callable[..., Any] | str, arguments: dict[str, Any]):
        self._dialect = record = _dialect_of(function)
        if record.quantized:  # its scales and zero points: PreparedQuantizedLayer
            raise TypeError(f"PreparedLayer takes the float dialects; ct.prepare makes a"
                            f" PreparedQuantizedLayer of ct.{record.name}")
        self._function = _function_named(record.name)
        parameters = checked_parameters(record, self._function, arguments)
        _, filter_name, bias_name = record.operands
        self._defaults = {name: parameter.default for name, parameter in parameters.items()
                          if parameter.default is not inspect.Parameter.empty
                          and name != "out"}
        self._arguments = {name: _owned(name, value) if name in (filter_name, bias_name)
                           else copy.deepcopy(value) for name, value in arguments.items()}
        self._bindings: dict = {}
        self._lock = threading.Lock()

    @property
    def function(self):
        """The array function this layer computes."""
        return self._function

    @property
    def arguments(self) -> dict[str, Any]:
        """The bound arguments, by the array function's names (the weights read-only)."""
        return dict(self._arguments)

    def __call__(self, data, out: np.ndarray | None = None):
        """The layer's result for ``data``: ``function(data, **arguments, out=out)``.

        Parameters
        ----------
        data : array_like
            The data operand, in the array function's layout.
        out : ndarray, optional
            As the array function's ``out``.
        """
        if type(data) is np.ndarray and data.dtype.isnative:
            key = (data.shape, data.dtype)
            binding = self._bindings.get(key)
            if binding is None:
                binding = self._bind(key, data)
            else:
                # The binding's prepared call, run here: a tiny layer's call takes 4 us,
                # a tenth of which would go to calling the binding.
                call, generation, filter, column = binding.fast
                if generation == _planning.generation and (
                        get_max_bytes() >= binding.limit if out is None else
                        get_max_bytes() >= binding.out_limit and binding.takes_out(out, data)):
                    result = call(data, filter, out)
                    if result is None:
                        return binding.general(data, out)
                    if column is not None:
                        add_column(result, column)
                    return result
            return binding.general(data, out)
        return self._function(**{self._dialect.operands[0]: data}, **self._arguments, out=out)

    def _bind(self, key, data: np.ndarray) -> _Binding:
        binding = _Binding(self, data.shape)  # errors are raised here, never kept
        with self._lock:
            self._bindings.pop(key, None)
            while len(self._bindings) >= BINDINGS_KEPT:
                del self._bindings[next(iter(self._bindings))]
            self._bindings[key] = binding
        return binding

    def set_weights(self, *operands, **named) -> None:
        """Replace the weights (and bias), by position (filter, bias) or by the array
        function's names; the layer copies them and binds every input shape again.

        Examples
        --------
        >>> import numpy as np, convtranspose as ct
        >>> layer = ct.prepare(ct.torch_conv_transpose, weight=np.ones((1, 1, 2)), stride=2)
        >>> layer.set_weights(np.full((1, 1, 2), 3.0), bias=np.array([1.0]))
        >>> layer(np.array([[[1.0, 2.0]]]))
        array([[[4., 4., 7., 7.]]])
        """
        names = tuple(name for name in self._dialect.operands[1:] if name is not None)
        if len(operands) > len(names):
            raise TypeError(f"set_weights takes at most {len(names)} operands"
                            f" ({', '.join(names)}), got {len(operands)}")
        given = dict(zip(names, operands))
        for name, value in named.items():
            if name not in names or name in given:
                raise TypeError(f"set_weights: {name!r} is not one of {', '.join(names)}"
                                if name not in names else f"set_weights: {name} given twice")
            given[name] = value
        with self._lock:
            arguments = dict(self._arguments)
            arguments.update((name, _owned(name, value)) for name, value in given.items())
            self._arguments, self._bindings = arguments, {}

    def explain(self, data_shape=None, dtype=None, *,
                measure: bool = False) -> Explanation | AdjointExplanation:
        """What computes this layer for ``data_shape`` and why (:func:`convtranspose.explain`;
        a forward convolution's runs as the data gradient of a transposed convolution).

        Parameters
        ----------
        data_shape : sequence of int, optional
            The data's shape; by default the shape of the most recent call.
        dtype : dtype, optional
            The data's dtype; by default that of the most recent call, else the weights'.
        measure : bool, optional
            As :func:`convtranspose.explain`'s.
        """
        recent = next(reversed(self._bindings.items()), None)
        if data_shape is None and recent is None:
            raise ConvTransposeError(
                "explain needs data_shape until the layer has been called once")
        filter = self._arguments[self._dialect.operands[1]]
        if data_shape is None:
            (data_shape, recent_dtype), binding = recent
            plan = binding.plan
        else:
            recent_dtype = None
            plan = _Binding(self, tuple(data_shape)).plan
        chosen = dtype if dtype is not None else recent_dtype or np.asarray(filter).dtype
        return _explain(plan, chosen, measure=measure)

    def __repr__(self) -> str:
        def shown(value):
            if hasattr(value, "shape") and hasattr(value, "dtype"):
                return f"{value.dtype}{list(value.shape)}"
            return repr(value)

        parts = [self._dialect.name] + [f"{name}={shown(value)}"
                                        for name, value in self._arguments.items()]
        bound = [f"{list(shape)} -> {list(binding.plan.output_shape)}"
                 for (shape, _), binding in list(self._bindings.items())]
        return (f"PreparedLayer({', '.join(parts)})"
                + (f"  # bound: {'; '.join(bound)}" if bound else ""))

    def __reduce__(self):
        # By the dialect's name: unpickling looks the function up in this library.
        return (_restore, (self._dialect.name, dict(self._arguments)))


def _restore(name: str, arguments: dict[str, Any]) -> PreparedLayer:
    return PreparedLayer(name, arguments)


def prepare(function: Callable[..., Any] | str, /,
            **arguments: Any) -> PreparedLayer | PreparedQuantizedLayer:
    """A layer of ``function`` with every argument but the data bound: its weights are
    copied and its per-input-shape work is done once.

    ``layer = prepare(function, **arguments)`` then ``layer(data, out=None)`` returns
    exactly ``function(data, **arguments, out=out)``, where ``function`` is any of the
    library's array functions (or its name) and ``arguments`` its own keyword
    arguments except the data operand.  Each new input shape or dtype is bound on its
    first call (the plan and the weights in its layout), so a layer called again on
    data of a shape it has seen resolves nothing.  The layer keeps its own read-only
    copy of the weights; :meth:`PreparedLayer.set_weights` replaces them.  Errors in
    the arguments that need the data's shape are raised by the first call of that shape.

    Parameters
    ----------
    function : callable or str
        One of the array functions (``ct.convolution_backprop_data``,
        ``ct.onnx_conv_transpose``, ``ct.torch_conv_transpose``, ..., ``ct.convolution``).
    **arguments
        Its arguments by name, without the data operand and ``out``.

    Returns
    -------
    PreparedLayer or PreparedQuantizedLayer
        Call it with the data (and optionally ``out``); ``.explain()`` tells what runs.
        A quantized dialect's layer (:class:`PreparedQuantizedLayer`) keeps its own
        read-only copy of the scales and zero points too.

    Raises
    ------
    TypeError
        ``function`` is not one of the library's array functions, an argument is
        unknown or missing, or the data operand or ``out`` is given.

    Examples
    --------
    >>> import numpy as np, convtranspose as ct
    >>> w = np.arange(8.0).reshape(2, 1, 2, 2)           # C_IN=2, C_OUT=1, 2x2
    >>> layer = ct.prepare(ct.convolution_backprop_data, filter=w, strides=2)
    >>> layer(np.ones((1, 2, 1, 1)))
    array([[[[ 4.,  6.],
             [ 8., 10.]]]])
    >>> layer(np.ones((3, 2, 2, 2))).shape                 # another shape binds once
    (3, 1, 4, 4)
    """
    record = _dialect_of(function)
    if record.quantized:
        return PreparedQuantizedLayer(record.name, arguments)
    return PreparedLayer(function, arguments)
