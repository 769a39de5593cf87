"""Read the transposed convolutions inside real models, safely.

- :mod:`convtranspose.interop.ir`: OpenVINO IR (``.xml`` + ``.bin``), parsed with
  ``defusedxml``; ConvolutionBackpropData-1 and GroupConvolutionBackpropData-1 layers.
- :mod:`convtranspose.interop.onnx_model`: ONNX ``ConvTranspose`` nodes (needs ``onnx``),
  in the main graph, in ``If``/``Loop``/``Scan`` subgraphs and in model-local functions
  (``_onnx_graphs``), with weights followed through ``DequantizeLinear``, ``Cast`` and
  ``Reshape`` of constants (``_onnx_constants``); quantized layers, the QDQ pattern
  around a ``ConvTranspose`` and ``com.microsoft.QLinearConvTranspose``, computed by
  ``qlinear_conv_transpose`` (``_onnx_quantized``).
- :mod:`convtranspose.interop.compare`: a whole model run in its runtime (onnxruntime,
  OpenVINO) and every transposed convolution compared with the library's result
  (``onnx compare`` / ``ir compare``; the runtimes' capture in ``_onnx_runtime`` and
  ``_openvino_runtime``).
- :mod:`convtranspose.interop._arrays`: the command line's ``.npy`` files (bfloat16 both
  ways, ``-`` for stdout).
- :mod:`convtranspose.interop._safety`: the limits every reader enforces (bounded
  file reads, no pickles, no shapes that overflow or exceed a memory limit).

Both readers offer the same two things (``compare`` builds on them): ``check`` (recompute every layer's output
shape from its inputs and attributes and compare with what the model declares) and
``run`` (execute one layer on given data with the model's own weights).  Nothing here
is imported by ``import convtranspose``; the optional dependencies are imported only
when a model is read, and their absence raises :class:`MissingDependencyError`.
"""

from ._safety import DEFAULT_MAX_BYTES, InteropError, MissingDependencyError

__all__ = ["DEFAULT_MAX_BYTES", "InteropError", "MissingDependencyError"]
