"""The public API is annotated, and mypy checks calls against the annotations.

``make test`` runs mypy on the public modules and on ``tests/typing/public_api.py``;
here every public function is checked for complete hints, and mypy is shown to reject
calls that break them (so that its success in ``make test`` means something).
"""

import inspect

import pytest

import convtranspose as ct
from convtranspose import shapes, vjp

# Public functions whose signatures carry no hints yet (the forward convolution, the
# framework dialects, translate, and the VJPs); each is to be annotated and taken off
# this list.  Any other public function without hints fails the test below.
NOT_YET_ANNOTATED: set = set()


def _public(module) -> list:
    return [(f"{module.__name__}.{name}", getattr(module, name)) for name in module.__all__
            if inspect.isfunction(getattr(module, name))]


EVERY = _public(ct) + _public(shapes) + _public(vjp)
PUBLIC = [function for name, function in EVERY if name not in NOT_YET_ANNOTATED]


@pytest.mark.parametrize("function", PUBLIC, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_every_public_function_has_complete_hints(function):
    signature = inspect.signature(function)
    missing = [name for name, parameter in signature.parameters.items()
               if parameter.annotation is inspect.Parameter.empty]
    assert not missing, f"{function.__name__}: parameters without hints: {missing}"
    assert signature.return_annotation is not inspect.Signature.empty, function.__name__


def test_the_list_of_functions_without_hints_only_shrinks():
    names = {name for name, _ in EVERY}
    assert NOT_YET_ANNOTATED <= names, NOT_YET_ANNOTATED - names
    annotated = [name for name, function in EVERY if name in NOT_YET_ANNOTATED and all(
        p.annotation is not inspect.Parameter.empty
        for p in inspect.signature(function).parameters.values())]
    assert not annotated, f"annotated now, take them off NOT_YET_ANNOTATED: {annotated}"


def test_public_functions_are_counted():
    names = {function.__name__ for function in PUBLIC}
    assert {"convolution_backprop_data", "onnx_conv_transpose", "explain", "set_num_threads",
            "import_wisdom", "use_target"} <= names and len(PUBLIC) >= 20


WRONG_CALLS = [
    ("ct.convolution_backprop_data(x, x, strides='2')", 'incompatible type "str"'),
    ("ct.conv_transpose(x, x, groups='1')", 'incompatible type "str"'),
    ("n: str = ct.get_num_threads()", "Incompatible types in assignment"),
    ("ct.shapes.onnx_conv_transpose((1, 1, 3), (1, 1, 3), group=1.5)",
     'incompatible type "float"'),
    ("ct.convolution_backprop_data(x, x, pads_begin=[0], strides=2)", None),  # a right call
]


def test_mypy_rejects_calls_that_break_the_hints(tmp_path):
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "calls.py"
    header = "import numpy as np\nimport convtranspose as ct\nx = np.zeros((1, 1, 3))\n"
    source.write_text(header + "".join(call + "\n" for call, _ in WRONG_CALLS))
    stdout, _, status = api.run([str(source), "--no-incremental", "--follow-imports=silent",
                                 "--ignore-missing-imports", "--python-version=3.10"])
    assert status == 1, stdout
    errors = {}
    for line in stdout.splitlines():
        if "calls.py:" in line and ": error:" in line:
            errors.setdefault(int(line.split("calls.py:")[1].split(":")[0]), []).append(line)
    for number, (call, complaint) in enumerate(WRONG_CALLS, start=4):
        if complaint is None:
            assert number not in errors, errors[number]
        else:
            assert any(complaint in line for line in errors.get(number, [])), (call, stdout)
