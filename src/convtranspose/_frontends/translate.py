"""``ct.translate``: one layer of one dialect as another dialect's attributes.

Every dialect computes the same full result and crops it at ``offset`` to ``Y``
elements per axis (``docs/semantics.md``), so a translation is: the canonical
``(offset, Y)`` of the source layer, then the target's attributes that give the same
pair, the data and filter transforms between the two layouts, and, where the target
cannot express a pair, the nearest attributes it can, with a crop or zero pad of its
output (and the bias added afterwards) that restores the source's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._errors import ConvTransposeError
from .._plan import dialects as _dialects
from .._plan.dialects import DIALECTS as _DIALECTS
from .._plan.dialects import dialects_on
from .._plan.rules import ConvTransposePlan

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .._typing import ShapeLike

__all__ = ["DIALECTS", "QUANTIZED_DIALECTS", "Translation", "translate"]

#: Every float dialect a layer can be translated from and to.
DIALECTS = tuple(name for name in dialects_on("translate") if not _DIALECTS[name].quantized)

#: Every quantized dialect a layer can be translated from and to (to each other).
QUANTIZED_DIALECTS = tuple(name for name in dialects_on("translate")
                           if _DIALECTS[name].quantized)

#: The data, filter and bias argument names of each dialect.
NAMES = {name: _DIALECTS[name].operands for name in DIALECTS + QUANTIZED_DIALECTS}


@dataclass(frozen=True)
class Translation:
    """A layer of one dialect, expressed in another.

    Attributes
    ----------
    source, target : str
        The dialect names (``ct`` function names).
    source_plan, target_plan : ConvTransposePlan
    attributes : dict
        The target function's keyword arguments.
    data_axes : tuple of int or None
        ``data.transpose(data_axes)`` gives the target's data (None: unchanged).
    filter_steps : tuple
        The steps taking the source filter to the target's: ``("transpose", axes)``,
        ``("reshape", shape)``, ``("flip", axes)`` (needed exactly when one side is JAX
        without ``transpose_kernel``, a correlation kernel), ``("dilate", factors)``
        (``d - 1`` zeros between the taps along each axis, for a target that cannot
        take the dilation) and ``("split_groups", (G,))`` (layer ``g`` of a group
        split takes ``filter[g]``).
    bias_after : bool
        The source's bias is added after the target op (the target has none, or a pad
        adds positions the target never saw).
    crop : tuple of (int, int)
        Per spatial axis, elements to drop from the beginning and the end of the
        target's output (negative: zeros to add there).
    output_axes : tuple of int or None
        ``result.transpose(output_axes)`` gives the source's layout (None: unchanged).
    notes : tuple of str
        What the target cannot express and the workaround used; empty when the target
        op alone computes the source's output.
    split_groups : int
        The number of target layers: a grouped layer to a target without groups is one
        layer per group (:attr:`group_channels`), whose outputs are concatenated along
        :attr:`channel_axis`; :attr:`attributes` and :attr:`target_plan` are each
        layer's.  1 when the target takes the layer whole.
    has_bias : bool
        The source layer has a bias (``bias_shape`` was given).
    """

    source: str
    target: str
    source_plan: ConvTransposePlan
    target_plan: ConvTransposePlan
    attributes: dict
    data_axes: tuple | None
    filter_steps: tuple
    bias_after: bool
    crop: tuple
    output_axes: tuple | None
    notes: tuple = field(default=())
    split_groups: int = 1
    has_bias: bool = False

    @property
    def exact(self) -> bool:
        """Whether the target op alone computes the source's output."""
        return not self.notes

    @property
    def channel_axis(self) -> int:
        """The channel axis of the target's data and output (where a group split slices
        the data and concatenates the outputs)."""
        return self.target_plan.spatial_rank + 1 if self.target_plan.channels_last else 1

    @property
    def group_channels(self) -> tuple:
        """Per target layer ``((begin, end), (begin, end))``: the data channels it takes
        and the output (and bias) channels it gives, along :attr:`channel_axis`."""
        ci, co = self.target_plan.in_channels, self.target_plan.out_channels
        return tuple(((g * ci, (g + 1) * ci), (g * co, (g + 1) * co))
                     for g in range(self.split_groups))

    def filter(self, filter):
        """The source's filter array in the target's layout (with a group split, one
        filter per layer stacked along a first axis: layer ``g`` takes ``[g]``)."""
        import numpy as np

        result = np.asarray(filter)
        for step, value in self.filter_steps:
            if step == "flip":
                result = np.flip(result, value)
            elif step == "dilate":
                result = _dilate(result, value)
            elif step in ("transpose", "reshape"):
                result = result.transpose(value) if step == "transpose" else \
                    result.reshape(value)
        return np.array(result, order="C")  # a copy: no negative strides after a flip

    def layers(self, data, filter, bias=None) -> list:
        """Each target layer's operands ``(data, filter, bias)`` in the target's layouts:
        one layer, or one per group for a group split (bias None where the target has
        none or the bias is added after it)."""
        import numpy as np

        data = np.asarray(data)
        if self.data_axes is not None:
            data = data.transpose(self.data_axes)
        weights = self.filter(filter)
        bias = None if bias is None or self.bias_after else np.asarray(bias)
        if self.split_groups == 1:
            return [(np.ascontiguousarray(data), weights, bias)]
        result = []
        for g, ((begin, end), (low, high)) in enumerate(self.group_channels):
            index = [slice(None)] * data.ndim
            index[self.channel_axis] = slice(begin, end)
            result.append((np.ascontiguousarray(data[tuple(index)]),
                           np.ascontiguousarray(weights[g]),
                           None if bias is None else bias[low:high]))
        return result

    def run(self, data, filter, bias=None):
        """The source layer's output, computed by the target's function of this library.

        Calls the target with :attr:`attributes` on each of :meth:`layers`, then
        :meth:`finish` (concatenation, crop or pad, bias, the source's layout).
        """
        from . import frameworks as _api_frameworks
        from . import specs as _api

        function = getattr(_api, self.target, None) or getattr(_api_frameworks, self.target)
        outputs = []
        for layer_data, layer_filter, layer_bias in self.layers(data, filter, bias):
            arguments = [layer_data, layer_filter]
            attributes = dict(self.attributes)
            if self.target in ("convolution_backprop_data", "group_convolution_backprop_data"):
                arguments.append(attributes.pop("output_shape", None))
            elif NAMES[self.target][2] is not None:
                arguments.append(layer_bias)
            if self.target == "tflite_transpose_conv":  # the op's order: output shape first
                arguments = [attributes.pop("output_shape"), arguments[1], arguments[0],
                             arguments[2]]
            outputs.append(function(*arguments, **attributes))
        return self.finish(outputs, bias)

    def python(self) -> str:
        """The translation as Python code that runs it in the target framework.

        The code reads ``x``, ``w`` (and ``b`` for a layer with a bias), NumPy arrays in
        the source layer's layouts, and leaves the source layer's output in ``y``: the
        layout transposes, filter steps, group split, crop or pad and bias add in NumPy,
        the op itself in the target framework (``torch``, ``tf.nn.conv_transpose``, a
        Keras layer, a LiteRT model converted by ``tf.lite.TFLiteConverter``,
        ``jax.lax.conv_transpose``, a one-node ONNX model run by onnxruntime, a
        one-node OpenVINO model; this library's function for oneDNN and TensorRT).

        Returns
        -------
        str
            The code, its first comment lines stating the inputs and the output.

        Examples
        --------
        >>> import convtranspose as ct
        >>> t = ct.translate("onnx_conv_transpose", "conv_transpose", (1, 1, 3),
        ...                  (1, 1, 3), strides=[2])
        >>> print(t.python().splitlines()[0])
        # onnx_conv_transpose -> conv_transpose, computed by convtranspose.conv_transpose (this library's model of the dialect)
        >>> namespace = {"x": [[[1.0, 2.0, 3.0]]], "w": [[[1.0, 1.0, 1.0]]]}
        >>> exec(t.python(), namespace)
        >>> namespace["y"].tolist()
        [[[1.0, 1.0, 3.0, 2.0, 5.0, 3.0, 3.0]]]
        """
        from .emit import python_code

        return python_code(self)

    def finish(self, result, bias=None):
        """The target's output (in the target's layout; a list of each layer's for a
        group split) turned into the source's output."""
        import numpy as np

        if isinstance(result, (list, tuple)):
            result = np.concatenate([np.asarray(r) for r in result], axis=self.channel_axis)
        channels_last = self.target_plan.channels_last
        spatial = range(1, result.ndim - 1) if channels_last else range(2, result.ndim)
        shape, source, destination = list(result.shape), [slice(None)] * result.ndim, \
            [slice(None)] * result.ndim
        for axis, (begin, end) in zip(spatial, self.crop):
            # out[i] = result[i + begin] for i in [0, size); zeros where that is outside
            size = result.shape[axis] - begin - end
            low, high = max(begin, 0), min(result.shape[axis], begin + size)
            high = max(high, low)
            shape[axis] = size
            source[axis] = slice(low, high)
            destination[axis] = slice(low - begin, high - begin)
        if any(pair != (0, 0) for pair in self.crop):
            cropped = np.zeros(shape, result.dtype)
            cropped[tuple(destination)] = result[tuple(source)]
            result = cropped
        if bias is not None and self.bias_after:
            bias = np.asarray(bias, result.dtype)
            shape = [1] * result.ndim
            shape[-1 if channels_last else 1] = bias.size
            result = result + bias.reshape(shape)
        return result if self.output_axes is None else result.transpose(self.output_axes)

    def __str__(self) -> str:
        lines = [f"{self.source} -> {self.target}" + ("" if self.exact else " (with workarounds)")]
        each = " (each layer)" if self.split_groups > 1 else ""
        lines.append(f"  attributes{each}: " + ", ".join(f"{k}={_show(v)}"
                                                         for k, v in self.attributes.items()))
        if self.data_axes is not None:
            lines.append(f"  data: transpose{self.data_axes}")
        steps = " then ".join(_step(step, value) for step, value in self.filter_steps)
        lines.append(f"  filter: {steps or 'unchanged'}")
        if self.split_groups > 1:
            from .._plan.translation import channel_range

            plan, axis = self.target_plan, self.channel_axis
            bias = "" if NAMES[self.target][2] is None or self.bias_after else " (and bias)"
            lines.append(
                f"  groups: {self.split_groups} {self.target} layers; layer g takes data"
                f" channels {channel_range(plan.in_channels)} and filter[g], gives output"
                f"{bias} channels {channel_range(plan.out_channels)}; the outputs are"
                f" concatenated along axis {axis}")
        if any(pair != (0, 0) for pair in self.crop):
            lines.append(f"  output crop (begin, end) per axis, negative = zero pad: "
                         f"{list(self.crop)}")
        if self.bias_after:
            lines.append("  bias: added after the target op")
        if self.output_axes is not None:
            lines.append(f"  output: transpose{self.output_axes}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def _step(step: str, value: tuple) -> str:
    if step == "split_groups":
        return f"split_groups({value[0]}: layer g takes filter[g])"
    return f"{step}{tuple(value)}"


def _dilate(array, factors):
    """``array`` with ``d - 1`` zeros between its elements along each axis of factor d."""
    import numpy as np

    shape = tuple((n - 1) * d + 1 if n else 0 for n, d in zip(array.shape, factors))
    result = np.zeros(shape, array.dtype)
    result[tuple(slice(None, None, d) for d in factors)] = array
    return result


def _show(value):
    return list(value) if isinstance(value, tuple) else value


def translate(source: str, target: str, data_shape: ShapeLike, filter_shape: ShapeLike,
              bias_shape: ShapeLike | None = None, *, workarounds: bool = True,
              dtypes: Sequence[Any] | None = None, target_engine: str | None = None,
              **attributes: Any) -> Any:
    """Express one transposed-convolution layer of one dialect in another.

    Parameters
    ----------
    source, target : str
        Dialects, by their function names: ``"convolution_backprop_data"``,
        ``"group_convolution_backprop_data"``, ``"conv_transpose"``,
        ``"onnx_conv_transpose"``, ``"torch_conv_transpose"``,
        ``"tensorrt_deconvolution"``, ``"tf_conv_transpose"``,
        ``"keras_conv_transpose"``, ``"tflite_transpose_conv"``, ``"jax_conv_transpose"``.
        TensorFlow, Keras and TFLite targets tie the output size to the input: the
        translation solves for their padding mode (or 2-D explicit pairs),
        ``output_shape`` or ``output_padding``; JAX targets take explicit pairs.
        A grouped layer goes to TensorFlow, Keras, TFLite and JAX (no groups) as one
        layer per group (:attr:`Translation.split_groups`), and a dilation TFLite
        cannot take (Keras: with strides > 1) as a kernel dilated with zeros.
    data_shape, filter_shape : sequence of int
        The source layer's shapes, in its own layouts.
    bias_shape : sequence of int, optional
        The source's bias shape (dialects with a bias only).
    workarounds : bool, optional
        Default True: when the target cannot express the layer, use its nearest
        attributes with a crop, zero pad or bias add of the output, one layer per
        group or a zero-dilated kernel (listed in ``notes``).  False: raise instead,
        naming what the target cannot express and that workaround.
    dtypes, target_engine : optional
        Quantized dialects only (``qlinear_conv_transpose``,
        ``tflite_quantized_transpose_conv``, ``torch_quantized_conv_transpose``, to each
        other): the source's (data, filter, output) types where its zero points are not
        NumPy-typed, and torch's engine as a target (default ``"fbgemm"``).  Their
        quantization parameters go in ``attributes``; the result is then a
        :class:`QuantizedTranslation`.
    **attributes
        The source layer's attributes, with the source dialect's names (OpenVINO,
        TensorFlow and TFLite sources take ``output_shape`` here too).

    Returns
    -------
    Translation or QuantizedTranslation
        ``.attributes`` for the target function; ``.filter(w)``, ``.layers(x, w, b)``
        (each target layer's operands), ``.finish(outputs, b)`` and ``.run(x, w, b)``
        apply it; ``str()`` describes it.

    Raises
    ------
    ConvTransposeError
        An invalid source layer, an unknown dialect, a target that cannot hold the
        layer at all (groups in ``convolution_backprop_data``, a rank TFLite or
        TensorRT cannot take), or, with
        ``workarounds=False``, any layer the target cannot express exactly.

    Examples
    --------
    >>> import convtranspose as ct
    >>> t = ct.translate("onnx_conv_transpose", "torch_conv_transpose", (1, 1, 3),
    ...                  (1, 1, 3), strides=[2], pads=[1, 2])
    >>> t.attributes["padding"], t.crop                 # torch pads symmetrically
    ((1,), ((0, 1),))
    >>> t = ct.translate("torch_conv_transpose", "tflite_transpose_conv", (1, 4, 3, 3),
    ...                  (4, 3, 3, 3), stride=2, groups=2, dilation=(2, 1))
    >>> t.split_groups, t.group_channels                # (data, output) channels per layer
    (2, (((0, 2), (0, 3)), ((2, 4), (3, 6))))
    >>> t.filter_steps[-2:], t.target_plan.filter_shape
    ((('dilate', (1, 1, 2, 1, 1)), ('split_groups', (2,))), (3, 5, 3, 2))
    """
    if any(name in _DIALECTS and _DIALECTS[name].quantized for name in (source, target)):
        from .translate_quantized import translate_quantized

        return translate_quantized(source, target, data_shape, filter_shape, bias_shape,
                                   workarounds, dtypes, target_engine, attributes, translate)
    if dtypes is not None or target_engine is not None:
        raise ConvTransposeError("dtypes and target_engine are for quantized dialects; this"
                                 f" is a float translation ({source} -> {target})")
    return _float_translation(source, target, data_shape, filter_shape, bias_shape,
                              workarounds, attributes)


def _float_translation(source, target, data_shape, filter_shape, bias_shape, workarounds,
                       attributes) -> Translation:
    from .._plan import translation as rules

    for name, value in (("source", source), ("target", target)):
        if value not in DIALECTS:
            raise ConvTransposeError(f"{name} must be one of"
                                     f" {', '.join(DIALECTS + QUANTIZED_DIALECTS)}; got {value!r}")
    flip = (source == "jax_conv_transpose" and not attributes.get("transpose_kernel", False)) \
        != (target == "jax_conv_transpose")
    plan = _source_plan(source, data_shape, filter_shape, bias_shape, attributes)
    has_bias = bias_shape is not None
    solved = rules.solve(target, plan, has_bias)
    if solved.notes and not workarounds:
        raise ConvTransposeError(
            f"{target} cannot express this {source} layer exactly: " + "; ".join(solved.notes))
    steps = rules.filter_steps(plan, solved.plan, flip, solved.split, solved.kernel_dilations)
    return Translation(source, target, plan, solved.plan, solved.attributes,
                       rules.data_axes(plan, solved.plan), steps, solved.bias_after,
                       solved.crop, rules.output_axes(plan, solved.plan), solved.notes,
                       solved.split, has_bias)


def _source_plan(source, data_shape, filter_shape, bias_shape, attributes) -> ConvTransposePlan:
    """The source layer's plan, which must have a spatial axis."""
    plan = _resolved_source(source, data_shape, filter_shape, bias_shape, attributes)
    if not plan.axes:
        raise ConvTransposeError(
            f"this {source} layer has no spatial axis (data {plan.data_shape}, filter"
            f" {plan.filter_shape}: a matrix product), which translations do not take; add a"
            f" spatial axis of size 1 to the data and the filter (kernel 1, stride 1)")
    return plan


def _resolved_source(source, data_shape, filter_shape, bias_shape, attributes):
    resolver = getattr(_dialects, source)
    if source == "tflite_transpose_conv":  # the op's input order: output shape first
        return resolver(attributes.pop("output_shape", None), filter_shape, data_shape,
                        bias_shape, **attributes)
    if source == "jax_conv_transpose":
        if bias_shape is not None:
            raise ConvTransposeError(f"{source} has no bias; got bias_shape {bias_shape!r}")
        return resolver(data_shape, filter_shape, **attributes)
    if NAMES[source][2] is None:
        if bias_shape is not None:
            raise ConvTransposeError(f"{source} has no bias; got bias_shape {bias_shape!r}")
        output_shape = attributes.pop("output_shape", None)
        return resolver(data_shape, filter_shape, output_shape, **attributes)
    return resolver(data_shape, filter_shape, bias_shape, **attributes)
