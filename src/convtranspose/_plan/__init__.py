"""Layer 2, attributes -> plan: pure integer rules, no NumPy.

Each dialect's attributes, with its spec's own names and defaults, become one frozen
:class:`~convtranspose._plan.rules.ConvTransposePlan` (or a
:class:`~convtranspose._plan.convolution.ConvolutionPlan` for the forward convolution):
the dialect's view (whole output shape, resolved pads, layouts) and one canonical
:class:`~convtranspose._plan.rules.AxisPlan` per spatial axis.

- :mod:`.rules`: the plan records and the validation every dialect shares.
- :mod:`.dialects`: the dialects' rule functions, one name each.
- one module per published specification: :mod:`.openvino`, :mod:`.onednn`,
  :mod:`.onnx`, :mod:`.pytorch`, :mod:`.tensorflow` (TensorFlow, Keras, TFLite),
  :mod:`.jax`, :mod:`.tensorrt`, :mod:`.convolution` (the forward convolution);
- :mod:`.geometry`: the stride-phase decomposition of one axis, which the kernels and
  the estimates share;
- :mod:`.translation`, :mod:`.translation_tf`: each dialect's attributes for a
  canonical ``(offset, Y)`` per axis, the rules behind ``ct.translate``.
"""
