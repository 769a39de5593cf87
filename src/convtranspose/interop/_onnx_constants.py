"""The value of a constant ONNX tensor, following the nodes that compute it from constants.

``onnx run`` needs the weights ``W`` and bias ``B`` of a node.  Exported models hold
them as initializers or ``Constant`` nodes, and quantized or compressed ones compute
them from such constants: ``DequantizeLinear`` (int8/uint8/int4... weights with their
scales), ``Cast`` (float16 weights to float32), ``Reshape`` (a flat tensor to the
filter's shape) and ``Identity``.  Those are followed here, as the ONNX operators
define them; any other producer means the value is only known at run time.

Every array computed is checked against the byte limit before it is made, and each
tensor is computed once per :func:`fold` (a tensor feeding several inputs, as in
16 ``DequantizeLinear(t, t, t)`` stacked, would otherwise be computed 3**16 times).
"""

from __future__ import annotations

import numpy as np

from ._safety import InteropError, check_bytes, element_count

__all__ = ["FOLLOWED", "fold", "node_attributes"]

#: The producing operators followed, besides initializers and ``Constant``.
FOLLOWED = ("Constant", "DequantizeLinear", "Cast", "Reshape", "Identity")
_MAX_DEPTH = 16  # a chain of producers longer than this is not a constant's


def fold(name: str, scope, read_tensor, max_bytes: int, purpose: str, notes: list,
         depth: int = 0, memo: dict | None = None) -> np.ndarray:
    """The value of tensor ``name`` in ``scope`` (:class:`~._onnx_graphs.Scope`).

    ``read_tensor(tensor_proto, what)`` decodes an initializer or a ``Constant``'s
    tensor, bounded; ``notes`` receives one line per operator followed.  ``memo``
    holds the tensors computed so far by this fold, by scope and name.
    """
    memo = {} if memo is None else memo
    key = (id(scope), name)
    if key not in memo:
        memo[key] = _fold(name, scope, read_tensor, max_bytes, purpose, notes, depth, memo)
    return memo[key]


def _fold(name: str, scope, read_tensor, max_bytes: int, purpose: str, notes: list,
          depth: int, memo: dict) -> np.ndarray:
    """:func:`fold` of a tensor not in ``memo`` yet."""
    if name in scope.initializers:
        return read_tensor(scope.initializers[name], f"initializer {name!r}")
    if name in scope.arguments and name not in scope.producers:  # a function's input
        outer, caller = scope.arguments[name]
        return fold(outer, caller, read_tensor, max_bytes, purpose, notes, depth + 1, memo)
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
                    f"{what} of {node.op_type} node {node.name or name!r}", notes, depth + 1,
                    memo)

    attributes = node_attributes(node, scope)
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


def node_attributes(node, scope) -> dict:
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
    """ONNX Cast.  To a float8 type with ``saturate`` (the default, 1), a value beyond
    the type's range becomes its largest finite value of that sign (an infinity too), as
    the operator defines; with ``saturate=0`` it overflows as NumPy's cast does."""
    import onnx

    if "to" not in attributes:
        raise InteropError(f"Cast node {node.name or name!r} has no 'to' attribute")
    dtype = _onnx_dtype(attributes["to"], f"Cast node {node.name or name!r}")
    saturating = attributes["to"] in (
        onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT8E4M3FNUZ,
        onnx.TensorProto.FLOAT8E5M2, onnx.TensorProto.FLOAT8E5M2FNUZ,
    ) and attributes.get("saturate", 1)
    # The clipped copy is float64 at most: counted with the result.
    itemsize = dtype.itemsize + (8 if saturating else 0)
    check_bytes(f"Cast node {node.name or name!r}", value.size * itemsize, max_bytes)
    notes.append(f"{name!r}: Cast from {value.dtype} to {dtype}"
                 + (" (saturating)" if saturating else ""))
    with np.errstate(all="ignore"):  # overflow to inf is what the cast means here
        if saturating:
            import ml_dtypes

            info = ml_dtypes.finfo(dtype)
            return np.clip(value, float(info.min), float(info.max)).astype(dtype)
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
    # Per element: the int64 difference and its float32 copy, the scale and zero point
    # spread over the input with their float32 copies, the product and the result.
    count = value.size
    check_bytes(label, count * (8 + 4 + 2 * (8 + 4) + 4 + dtype.itemsize), max_bytes)
    axis = attributes.get("axis", 1)
    block = attributes.get("block_size", 0)
    if not isinstance(block, int) or block < 0:
        raise InteropError(f"{label}: block_size must be a non-negative integer, got {block!r}")
    if scale.ndim == 0 or scale.size == 1 and block == 0:
        scale, zero_point = scale.reshape(()), zero_point.reshape(())
    else:
        if not -value.ndim <= axis < value.ndim:
            raise InteropError(f"{label}: axis {axis} is outside the input's rank {value.ndim}")
        axis %= value.ndim
        scale, zero_point = (_along_axis(array, value.shape, axis, block, label)
                             for array in (scale, zero_point))
    with np.errstate(all="ignore"):  # an overflow is refused below, naming the node
        if value.dtype.kind in "iu":
            wide = np.int64
            difference = value.astype(wide) - zero_point.astype(wide)
        else:  # float8 quantization: the zero point is a float of the same type
            difference = value.astype(np.float32) - zero_point.astype(np.float32)
        result = (difference.astype(np.float32) * scale.astype(np.float32)).astype(dtype)
    if not np.isfinite(result.astype(np.float32)).all() and all(
            np.isfinite(array.astype(np.float32)).all() for array in (value, scale, zero_point)):
        raise InteropError(f"{label}: the dequantized values overflow {dtype}")
    notes.append(f"{name!r}: DequantizeLinear of {value.dtype} {list(value.shape)}")
    return result


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
    # Element i of the axis takes block i // block: an index per element of the axis,
    # never ``array`` repeated ``block`` times (block_size may be huge).
    return array.take(np.arange(shape[axis]) // block, axis=axis)
