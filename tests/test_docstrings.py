"""The examples in the public docstrings run and print what they claim.

Their expected values come from the specs (the XML examples' shapes) and the worked
example of ``docs/semantics.md``, not from running the code.
"""

import doctest
import importlib

import pytest

MODULES = ["convtranspose", "convtranspose._frontends.specs", "convtranspose._choose.planning", "convtranspose._plan.openvino",
           "convtranspose._plan.onednn", "convtranspose._plan.onnx",
           "convtranspose.shapes", "convtranspose._choose.choice", "convtranspose._runtime.target",
           "convtranspose._frontends.convolution", "convtranspose.vjp", "convtranspose._plan.convolution",
           "convtranspose._frontends.frameworks", "convtranspose._plan.tensorflow",
           "convtranspose._plan.tensorrt"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0
