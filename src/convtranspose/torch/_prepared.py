"""The layers' forward calls through prepared layers (:func:`convtranspose.prepare`).

A layer's ``forward`` whose result needs no autograd graph (under ``torch.no_grad()`` or
``torch.inference_mode()``, or with no operand requiring a gradient) on CPU tensors
runs a prepared layer of its weights: the custom operator's dispatch, the attribute
checks and the plan lookup of every call are done once.  The prepared layer holds a
copy of the weights, so it is made again when they change, as torch tells it: the
weight's (and bias's) identity, version counter (bumped by every in-place operation
torch records: ``optimizer.step()``, ``load_state_dict``, ``w.add_(1)`` under
``torch.no_grad()``), storage pointer, shape, dtype or device, or an attribute of the
layer.  Writes torch does not count (through ``.data`` or a NumPy view of the
weight) are not seen: :meth:`repack` after them.

Everything else (gradients recorded, ``torch.compile`` tracing, another device, a dtype
NumPy lacks, an error) takes the custom operator as before, which computes the same
NumPy result (:func:`convtranspose.prepare` returns what the array function returns).
"""

from __future__ import annotations

import copy
import weakref

import torch

from .._errors import ConvTransposeError
from .._frontends.prepared import PreparedLayer, prepare
from .._plan.dialects import DIALECTS
from . import _ops

__all__ = ["PREPARED_KEPT", "PreparedForward", "layer_forward"]

#: Per layer, the prepared layers kept for distinct per-call arguments (``output_shape``,
#: ``output_size``), the most recently used last; each binds its own input shapes.
PREPARED_KEPT = 4


def _state(tensor) -> tuple | None:
    """What torch says about a weight's contents without reading them."""
    if tensor is None:
        return None
    return tensor._version, tensor.data_ptr(), tensor.shape, tensor.dtype, tensor.device


def _same(kept, given) -> bool:
    try:
        return bool(kept == given)
    except (TypeError, ValueError):  # attributes that compare elementwise (arrays)
        return False


class PreparedForward:
    """One layer's prepared layers and the weights' state they were made from.

    Pickled and copied empty (``torch.save``, ``copy.deepcopy``): a copy prepares its
    own weights on its first call.
    """

    __slots__ = ("_weights", "_state", "_entries")

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        """Forget the prepared layers: the next call prepares the weights again."""
        self._weights: tuple = (None, None)
        self._state: tuple | None = None
        self._entries: list[tuple[dict, PreparedLayer]] = []

    def __reduce__(self):
        return (PreparedForward, ())

    def _current(self, weight, bias) -> bool:
        """Whether the kept layers hold these weights (else forget them)."""
        kept_weight, kept_bias = self._weights
        state = (_state(weight), _state(bias))
        if (kept_weight is not None and kept_weight() is weight and state == self._state
                and (bias is None if kept_bias is None else kept_bias() is bias)):
            return True
        self._entries = []
        self._weights = (weakref.ref(weight), None if bias is None else weakref.ref(bias))
        self._state = state
        return False

    def layer(self, module, arguments: dict) -> PreparedLayer:
        """The prepared layer of ``module``'s weights with ``arguments`` (its attributes
        and per-call arguments), made on a miss."""
        weight, bias = module.weight, module.bias
        if self._current(weight, bias):
            for index, (kept, layer) in enumerate(self._entries):
                if _same(kept, arguments):
                    if index != len(self._entries) - 1:
                        self._entries.append(self._entries.pop(index))
                    return layer
        _, filter_name, bias_name = DIALECTS[module.dialect].operands
        bound = _ops.library_arguments(arguments)
        bound[filter_name] = weight.detach().numpy()
        if bias_name is not None:
            bound[bias_name] = None if bias is None else bias.detach().numpy()
        layer = prepare(module.dialect, **bound)
        while len(self._entries) >= PREPARED_KEPT:
            del self._entries[0]
        self._entries.append((copy.deepcopy(arguments), layer))
        return layer


def _prepared_result(module, data, arguments: dict, prepared: PreparedForward):
    """The result through ``module``'s prepared layer, or None where the custom operator
    computes it (see the module docstring)."""
    if torch.compiler.is_compiling() or type(data) is not torch.Tensor:
        return None
    weight, bias = module.weight, module.bias
    if torch.is_grad_enabled() and (data.requires_grad or weight.requires_grad
                                    or bias is not None and bias.requires_grad):
        return None
    if data.device.type != "cpu" or weight.device.type != "cpu":
        return None
    try:
        values = data.detach().numpy()
        layer = prepared.layer(module, arguments)
        result = layer(values)
    except (ConvTransposeError, TypeError, ValueError, RuntimeError):
        # The custom operator computes what has no prepared layer: bfloat16 and tensor
        # subclasses (no NumPy view), weights made under inference mode (no version
        # counter, so no way to tell a change), and calls in error, for which it raises
        # the library's own error.
        return None
    return torch.from_numpy(result).contiguous()


def layer_forward(module, data, attributes: dict, per_call: dict, prepared: PreparedForward):
    """``module``'s result for ``data``, its attributes and per-call arguments: through
    ``prepared`` (the layer's) where no gradient is recorded, else through the
    differentiable function of its dialect."""
    result = _prepared_result(module, data, {**attributes, **per_call}, prepared)
    if result is not None:
        return result
    data_name, filter_name, bias_name = DIALECTS[module.dialect].operands
    operands = {data_name: data, filter_name: module.weight}
    if bias_name is not None:
        operands[bias_name] = module.bias
    return getattr(_ops, module.dialect)(**operands, **per_call, **attributes)
