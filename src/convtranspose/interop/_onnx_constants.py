"""The value of a constant ONNX tensor, following the nodes that compute it from constants.

``onnx run`` needs the weights ``W`` and bias ``B`` of a node.  Exported models hold
them as initializers or ``Constant`` nodes, and quantized or compressed ones compute
them from such constants: ``DequantizeLinear`` (int8/uint8/int4... weights with their
scales), ``Cast`` (float16 weights to float32), ``Reshape`` (a flat tensor to the
filter's shape) and ``Identity``.  Those are followed here, as the ONNX operators
define them; any other producer means the value is only known at run time.

Every array computed is checked against the byte limit before it is made.
"""

from __future__ import annotations

import numpy as np

from ._safety import InteropError, check_bytes, element_count

__all__ = ["FOLLOWED", "fold"]

#: The producing operators followed, besides initializers and ``Constant``.
FOLLOWED = ("Constant", "DequantizeLinear", "Cast", "Reshape", "Identity")
_MAX_DEPTH = 16  # a chain of producers longer than this is not a constant's


def fold(name: str, scope, read_tensor, max_bytes: int, purpose: str, notes: list,
         depth: int = 0) -> np.ndarray:
    """The value of tensor ``name`` in ``scope`` (:class:`~._onnx_graphs.Scope`).

    ``read_tensor(tensor_proto, what)`` decodes an initializer or a ``Constant``'s
    tensor, bounded; ``notes`` receives one line per operator followed.
    """
    if name in scope.initializers:
        return read_tensor(scope.initializers[name], f"initializer {name!r}")
    if name in scope.arguments and name not in scope.producers:  # a function's input
        outer, caller = scope.arguments[name]
        return fold(outer, caller, read_tensor, max_bytes, purpose, notes, depth + 1)
    node = scope.producers.get(name)
    if node is None or depth > _MAX_DEPTH or node.op_type not in FOLLOWED or node.domain not in (
            "", "ai.onnx"):
        how = (f"computed by {node.op_type} node {node.name or name!r}" if node is not None
               else "a graph input")
        raise InteropError(
            f"{purpose} is {name!r}, {how}: its value is only known at run time (followed:"
            f" initializers and {', '.join(FOLLOWED)} of constants)")
    if node.op_type == "Constant":
        return _constant(node, name, read_tensor)

    def operand(index: int, what: str):
        if index >= len(node.input) or not node.input[index]:
            return None
        return fold(node.input[index], scope, read_tensor, max_bytes,
                    f"{what} of {node.op_type} node {node.name or name!r}", notes, depth + 1)

    attributes = _attributes(node, scope)
    value = operand(0, "the input")
    if value is None:
        raise InteropError(f"{node.op_type} node {node.name or name!r} has no input")
    if node.op_type == "Identity":
        return value
    if node.op_type == "Cast":
        return _cast(value, attributes, node, name, max_bytes, notes)
    if node.op_type == "Reshape":
        shape = operand(1, "the shape")
        return _reshape(value, shape, attributes, node, name, notes)
    scale, zero_point = operand(1, "the scale"), operand(2, "the zero point")
    return _dequantize(value, scale, zero_point, attributes, node, name, max_bytes, notes)


def _attributes(node, scope) -> dict:
    """``node``'s attributes by name; a function's ``ref_attr_name`` reads the call's."""
    import onnx

    values = {}
    for attribute in node.attribute:
        source = attribute
        if attribute.ref_attr_name:
            source = scope.call_attributes.get(attribute.ref_attr_name)
            if source is None:
                continue  # not given by the call: the operator's default
        values[attribute.name] = onnx.helper.get_attribute_value(source)
    return values


def _constant(node, name: str, read_tensor) -> np.ndarray:
    import onnx

    for attribute in node.attribute:
        if attribute.name == "value":
            return read_tensor(attribute.t, f"Constant {name!r}")
    for attribute in node.attribute:
        if attribute.name in ("value_float", "value_floats", "value_int", "value_ints"):
            value = onnx.helper.get_attribute_value(attribute)
            return np.asarray(value, np.float32 if "float" in attribute.name else np.int64)
    raise InteropError(f"Constant {name!r} holds no tensor, float or int value")


def _onnx_dtype(code: int, what: str) -> np.dtype:
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code))
    except (KeyError, ValueError, TypeError):
        raise InteropError(f"{what}: unsupported ONNX data type {code}") from None


def _cast(value, attributes, node, name, max_bytes, notes) -> np.ndarray:
    if "to" not in attributes:
        raise InteropError(f"Cast node {node.name or name!r} has no 'to' attribute")
    dtype = _onnx_dtype(attributes["to"], f"Cast node {node.name or name!r}")
    check_bytes(f"Cast node {node.name or name!r}", value.size * dtype.itemsize, max_bytes)
    notes.append(f"{name!r}: Cast from {value.dtype} to {dtype}")
    return value.astype(dtype)


def _reshape(value, shape, attributes, node, name, notes) -> np.ndarray:
    """ONNX Reshape: a 0 copies the input's dim (unless ``allowzero``), one -1 is inferred."""
    label = f"Reshape node {node.name or name!r}"
    if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise InteropError(f"{label}: its shape input must be a 1-D integer constant")
    target = [int(dim) for dim in shape]
    if not attributes.get("allowzero", 0):
        for axis, dim in enumerate(target):
            if dim == 0:
                if axis >= value.ndim:
                    raise InteropError(f"{label}: shape {target} copies dim {axis} of an input"
                                       f" of rank {value.ndim}")
                target[axis] = value.shape[axis]
    if target.count(-1) > 1 or any(dim < -1 for dim in target):
        raise InteropError(f"{label}: shape {target} has more than one -1 or a negative dim")
    known = element_count(f"{label} shape", [dim for dim in target if dim != -1])
    if -1 in target:
        if known == 0 or value.size % known:
            raise InteropError(f"{label}: {value.size} elements cannot take shape {target}")
        target[target.index(-1)] = value.size // known
    if element_count(f"{label} shape", target) != value.size:
        raise InteropError(f"{label}: {value.size} elements cannot take shape {target}")
    notes.append(f"{name!r}: Reshape from {list(value.shape)} to {target}")
    return value.reshape(target)


def _dequantize(value, scale, zero_point, attributes, node, name, max_bytes,
                notes) -> np.ndarray:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale``, per tensor (a scalar scale),
    per axis (a 1-D scale along ``axis``, default 1) or per block (``block_size``: the
    scale has ``x``'s rank, one value per block of ``axis``)."""
    label = f"DequantizeLinear node {node.name or name!r}"
    if scale is None:
        raise InteropError(f"{label} has no scale")
    if zero_point is None:
        zero_point = np.zeros(scale.shape, np.int64)
    if zero_point.shape != scale.shape:
        raise InteropError(f"{label}: zero point of shape {zero_point.shape} does not match"
                           f" the scale's {scale.shape}")
    dtype = (_onnx_dtype(attributes["output_dtype"], label) if attributes.get("output_dtype")
             else scale.dtype)
    count = value.size
    check_bytes(label, count * (8 + max(dtype.itemsize, scale.dtype.itemsize)), max_bytes)
    axis = attributes.get("axis", 1)
    block = attributes.get("block_size", 0)
    if scale.ndim == 0 or scale.size == 1 and block == 0:
        scale, zero_point = scale.reshape(()), zero_point.reshape(())
    else:
        if not -value.ndim <= axis < value.ndim:
            raise InteropError(f"{label}: axis {axis} is outside the input's rank {value.ndim}")
        axis %= value.ndim
        scale, zero_point = (_along_axis(array, value.shape, axis, block, label)
                             for array in (scale, zero_point))
    if value.dtype.kind in "iu":
        wide = np.int64
        difference = value.astype(wide) - zero_point.astype(wide)
    else:  # float8 quantization: the zero point is a float of the same type
        difference = value.astype(np.float32) - zero_point.astype(np.float32)
    notes.append(f"{name!r}: DequantizeLinear of {value.dtype} {list(value.shape)}")
    return (difference.astype(np.float32) * scale.astype(np.float32)).astype(dtype)


def _along_axis(array, shape, axis: int, block: int, label: str) -> np.ndarray:
    """A per-axis (1-D) or per-block (full-rank) scale or zero point, broadcastable to
    ``shape``."""
    if block == 0:
        if array.ndim != 1 or array.size != shape[axis]:
            raise InteropError(f"{label}: a per-axis scale needs {shape[axis]} values along"
                               f" axis {axis}, got shape {array.shape}")
        return array.reshape([-1 if i == axis else 1 for i in range(len(shape))])
    blocks = -(-shape[axis] // block)
    expected = tuple(blocks if i == axis else dim for i, dim in enumerate(shape))
    if array.shape != expected:
        raise InteropError(f"{label}: a scale with block_size {block} must have shape"
                           f" {expected}, got {array.shape}")
    return np.repeat(array, block, axis=axis).take(range(shape[axis]), axis=axis)
