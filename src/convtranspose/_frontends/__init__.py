"""Layer 6, arrays in: the public array functions, one thin frontend per dialect.

- :mod:`.specs`: the spec dialects (OpenVINO ConvolutionBackpropData and
  GroupConvolutionBackpropData, oneDNN Graph ConvTranspose, ONNX ConvTranspose) and
  what every frontend shares (the plan cache, operand checks, the canonical weights);
- :mod:`.frameworks`: PyTorch, JAX, TensorFlow, Keras, TFLite and TensorRT;
- :mod:`.repeated_calls`: the array functions' answers to a layer's repeated calls;
- :mod:`.convolution`: the forward convolution (OpenVINO Convolution-1 and
  GroupConvolution-1);
- :mod:`.translate`: ``ct.translate``, one layer of one dialect as another's;
- :mod:`.explain`: ``ct.explain``, the choice printed beside its measurements.

The gradients (:mod:`convtranspose.vjp`) and shape inference
(:mod:`convtranspose.shapes`) are public modules of this layer.
"""
