"""The examples in the public docstrings run and print what they claim.

Their expected values come from the specs (the XML examples' shapes) and the worked
example of ``docs/semantics.md``, not from running the code.
"""

import doctest
import importlib

import pytest

MODULES = ["convtranspose", "convtranspose._api", "convtranspose.planning", "convtranspose._dialects.openvino",
           "convtranspose._dialects.onednn", "convtranspose._dialects.onnx",
           "convtranspose.shapes", "convtranspose.dispatch", "convtranspose._runtime.target",
           "convtranspose._convolution", "convtranspose.vjp", "convtranspose._dialects.convolution",
           "convtranspose._api_frameworks", "convtranspose._dialects.tensorflow",
           "convtranspose._dialects.tensorrt"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0
