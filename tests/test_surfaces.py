"""Every surface has exactly the dialects the one record of dialects says it has.

``convtranspose._plan.dialects.DIALECTS`` lists each dialect once, with the surfaces it
is missing from and why; here each surface is read as a user meets it (the module's
``__all__``, the command line's choices, the API reference's directives) and compared
with the record, so a claim such as "every dialect has gradients" is true or the record
says otherwise.
"""

from __future__ import annotations

import inspect
import pathlib
import re

import numpy as np
import pytest

import convtranspose as ct
from convtranspose import shapes, vjp
from convtranspose._cli.parser import build_parser
from convtranspose._plan.dialects import DIALECTS, SURFACES, Dialect, dialects_on
from convtranspose.cli import HANDLERS

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _functions(module) -> set[str]:
    """The dialect-like functions a public module exports."""
    return {name for name in module.__all__
            if inspect.isfunction(getattr(module, name)) and name in DIALECTS}


def test_every_surface_is_named_and_every_gap_explained():
    for record in DIALECTS.values():
        assert record.has("ct") and record.has("shapes"), record.name
        assert all(reason.strip() for reason in record.missing.values()), record.name
    with pytest.raises(ValueError, match="unknown surfaces"):
        Dialect("x", "x", len, ("a", "b", None), missing={"nowhere": "because"})


def test_the_array_functions_and_their_shape_twins():
    assert _functions(ct) == set(dialects_on("ct")) == set(DIALECTS)
    assert _functions(shapes) == set(dialects_on("shapes"))
    for name in DIALECTS:  # the twin takes the same arguments, shapes for arrays
        array_parameters = list(inspect.signature(getattr(ct, name)).parameters)
        shape_parameters = list(inspect.signature(getattr(shapes, name)).parameters)
        assert [p for p in array_parameters if p != "out"] == shape_parameters, name


def test_the_operand_names_are_the_array_functions_own():
    for record in DIALECTS.values():
        parameters = inspect.signature(getattr(ct, record.name)).parameters
        assert {name for name in record.operands if name} <= set(parameters), record.name


def test_gradients():
    assert _functions(vjp) == set(dialects_on("vjp"))


def test_dask():
    ctd = pytest.importorskip("convtranspose.dask")
    assert _functions(ctd) == set(dialects_on("dask"))


def _layer_name(dialect: str) -> str:
    """The ``nn.Module`` class of a dialect: its name in CamelCase."""
    return "".join(part.capitalize() for part in dialect.split("_"))


def test_torch():
    ctt = pytest.importorskip("convtranspose.torch")
    torch = pytest.importorskip("torch")
    assert _functions(ctt) == set(dialects_on("torch"))
    # the surface is a differentiable function and an nn.Module layer of each dialect
    layers = {name: getattr(ctt, name) for name in ctt.__all__
              if isinstance(getattr(ctt, name), type)}
    assert set(layers) == {_layer_name(name) for name in dialects_on("torch")}
    for name, layer in layers.items():
        assert issubclass(layer, torch.nn.Module) and _layer_name(layer.dialect) == name


def test_the_command_line_shape_and_run():
    parser = build_parser(HANDLERS)
    commands = next(action for action in parser._actions if action.choices
                    and "shape" in action.choices).choices
    for command in ("shape", "run"):
        ops = next(action for action in commands[command]._actions
                   if action.dest == "op").choices
        assert set(ops) == set(dialects_on("cli")), command


def test_translate():
    plan = ct.shapes.convolution_backprop_data((1, 2, 4, 4), (2, 3, 3, 3), strides=2)
    assert plan.output_shape == (1, 3, 9, 9)
    quantization = dict(x_scale=np.float32(0.5), x_zero_point=np.uint8(10),
                        w_scale=np.float32(0.25), w_zero_point=np.int8(0),
                        y_scale=np.float32(0.125), y_zero_point=np.uint8(100))
    for name in DIALECTS:
        if DIALECTS[name].has("translate") and DIALECTS[name].quantized:
            with pytest.raises(ct.ConvTransposeError, match="is a float dialect"):
                ct.translate("convolution_backprop_data", name, (1, 2, 4, 4), (2, 3, 3, 3))
            translation = ct.translate("qlinear_conv_transpose", name, (1, 2, 4, 4),
                                       (2, 3, 3, 3), strides=[2, 2], **quantization)
            assert translation.target == name
        elif DIALECTS[name].has("translate"):
            translation = ct.translate("convolution_backprop_data", name, (1, 2, 4, 4),
                                       (2, 3, 3, 3), strides=2)
            assert translation.target == name
        else:
            with pytest.raises(ct.ConvTransposeError, match=name):
                ct.translate("convolution_backprop_data", name, (1, 2, 4, 4), (2, 3, 3, 3))


def test_the_api_reference():
    text = (ROOT / "docs" / "api.rst").read_text(encoding="utf-8")
    documented = re.findall(r"^\.\. autofunction:: (?:convtranspose\.)?([\w.]+)$", text,
                            flags=re.MULTILINE)
    by_module: dict[str, set[str]] = {}
    for entry in documented:
        module, _, name = entry.rpartition(".")
        by_module.setdefault(module, set()).add(name)
    expected = {"": "ct", "shapes": "shapes", "vjp": "vjp", "dask": "dask", "torch": "torch"}
    for module, surface in expected.items():
        names = by_module.get(module, set()) & set(DIALECTS)
        assert names == set(dialects_on(surface)) & set(dialects_on("docs")), module
    classes = set(re.findall(r"^\.\. autoclass:: convtranspose\.torch\.(\w+)$", text,
                             flags=re.MULTILINE))
    assert classes == {_layer_name(name) for name in dialects_on("torch")
                       if DIALECTS[name].has("docs")}
    assert ".. dialect-table::" in text  # the generated table of this record


#: Sentences that claim a surface for every dialect, and the surface each claims.
CLAIMS = {"gradients of every dialect": "vjp", "every dialect as a differentiable": "torch",
          "every dialect on dask": "dask"}


@pytest.mark.parametrize("path", ["README.md", *sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))])
def test_claims_follow_the_record(path):
    text = " ".join((ROOT / path).read_text(encoding="utf-8").split()).lower()
    for claim, surface in CLAIMS.items():
        if claim in text:
            transposed = {name for name, d in DIALECTS.items() if d.transposed}
            assert transposed <= set(dialects_on(surface)), (path, claim)


def test_surfaces_are_the_known_ones():
    assert SURFACES == ("ct", "shapes", "vjp", "dask", "torch", "cli", "translate", "docs")
