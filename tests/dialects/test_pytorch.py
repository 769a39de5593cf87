"""``ct.torch_conv_transpose`` against torch 2.13's ``conv_transpose{1,2,3}d`` and
``nn.ConvTranspose{1,2,3}d.forward(input, output_size)``: random layers, equal shapes
and values, and the same refusals (ours a ``ConvTransposeError`` naming the rule)."""

from __future__ import annotations

import numpy as np
import pytest

import convtranspose as ct

from ._cases import assert_same, integer_array

torch = pytest.importorskip("torch", reason="torch is installed by the test extra")

pytestmark = pytest.mark.peers

#: torch's message -> a word our message must contain for the same refusal.
REASONS = {
    "output padding must be smaller": "output_padding",
    "Output size is too small": "output size",
    "requested an output size": "output_size",
}


def random_layer(rng: np.random.Generator) -> dict:
    rank = int(rng.integers(1, 4))
    groups = int(rng.integers(1, 4))
    c_in, c_out = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(1, 4, rank))
    layer = dict(
        input=(int(rng.integers(1, 3)), c_in) + tuple(int(x) for x in rng.integers(1, 6, rank)),
        weight=(c_in, c_out // groups) + kernel,
        bias=(c_out,) if rng.random() < 0.5 else None,
        stride=tuple(int(s) for s in rng.integers(1, 4, rank)),
        padding=tuple(int(p) for p in rng.integers(0, 3, rank)),
        groups=groups,
        dilation=tuple(int(d) for d in rng.integers(1, 3, rank)),
        output_size=None,
    )
    # below max(stride, dilation), except on one axis of one layer in six (refused)
    limits = [max(s, d) for s, d in zip(layer["stride"], layer["dilation"])]
    padding = [int(rng.integers(0, limit)) for limit in limits]
    if rng.random() < 1 / 6:
        axis = int(rng.integers(rank))
        padding[axis] = limits[axis]
    layer["output_padding"] = tuple(padding)
    if rng.random() < 0.3:  # the module's output_size: in range, or just outside on one axis
        sizes = [(x - 1) * s - 2 * p + (k - 1) * d + 1 + int(rng.integers(0, s))
                 for x, k, s, p, d in zip(layer["input"][2:], kernel, layer["stride"],
                                          layer["padding"], layer["dilation"])]
        if rng.random() < 0.3:
            axis = int(rng.integers(rank))
            sizes[axis] += layer["stride"][axis] if rng.random() < 0.5 else -1
        layer["output_size"] = sizes
    return layer


def run_torch(layer, arrays):
    """torch's output, or the first line of its error."""
    rank = len(layer["input"]) - 2
    x, w, b = (None if a is None else torch.from_numpy(a) for a in arrays)
    try:
        with torch.inference_mode():
            if layer["output_size"] is None:
                function = getattr(torch.nn.functional, f"conv_transpose{rank}d")
                return function(x, w, b, stride=layer["stride"], padding=layer["padding"],
                                output_padding=layer["output_padding"],
                                groups=layer["groups"], dilation=layer["dilation"]).numpy()
            module = getattr(torch.nn, f"ConvTranspose{rank}d")(
                layer["input"][1], layer["weight"][1] * layer["groups"],
                layer["weight"][2:], stride=layer["stride"], padding=layer["padding"],
                output_padding=layer["output_padding"], groups=layer["groups"],
                bias=b is not None, dilation=layer["dilation"], dtype=torch.float64)
            module.weight.copy_(w)
            if b is not None:
                module.bias.copy_(b)
            return module(x, output_size=layer["output_size"]).numpy()
    except (RuntimeError, ValueError) as error:
        return str(error).splitlines()[0]


def test_random_layers_match_torch():
    rng = np.random.default_rng(33)
    torch.set_num_threads(1)
    compared = refused = 0
    for _ in range(400):
        layer = random_layer(rng)
        arrays = [None if layer[k] is None else integer_array(rng, layer[k])
                  for k in ("input", "weight", "bias")]
        expected = run_torch(layer, arrays)
        attributes = {k: v for k, v in layer.items() if k not in ("input", "weight", "bias")}
        if isinstance(expected, str):
            words = [ours for theirs, ours in REASONS.items() if theirs in expected]
            assert words, f"torch refused {layer} with an unexpected reason: {expected}"
            with pytest.raises(ct.ConvTransposeError, match=words[0]):
                ct.torch_conv_transpose(*arrays, **attributes)
            with pytest.raises(ct.ConvTransposeError, match=words[0]):
                ct.shapes.torch_conv_transpose(layer["input"], layer["weight"], layer["bias"],
                                               **attributes)
            refused += 1
            continue
        ours = ct.torch_conv_transpose(*arrays, **attributes)
        assert_same(ours, expected, layer)
        plan = ct.shapes.torch_conv_transpose(layer["input"], layer["weight"], layer["bias"],
                                              **attributes)
        assert plan.output_shape == expected.shape
        compared += 1
    assert compared > 200 and refused > 30, (compared, refused)


@pytest.mark.parametrize("arguments, torch_message, ours", [
    (dict(padding=-1), "negative padding is not supported", "padding"),
    (dict(stride=0), "non-positive stride", "stride"),
    (dict(dilation=0), "dilation should be greater than zero", "dilation"),
    (dict(output_padding=-1), "negative output_padding", "output_padding"),
    (dict(groups=3), "expected weight to be divisible by 3", "groups=3"),
    (dict(groups=0), "non-positive groups", "groups"),
    (dict(stride=[2, 2, 2]), "a list of 2 values", "stride"),
    (dict(stride=2, output_padding=2), "output padding must be smaller", "output_padding"),
])
def test_refusals_match_torch(arguments, torch_message, ours):
    x, w = np.ones((1, 4, 5, 5)), np.ones((4, 3, 3, 3))
    with pytest.raises(RuntimeError, match=torch_message):
        torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                             **arguments)
    with pytest.raises(ct.ConvTransposeError, match=ours):
        ct.torch_conv_transpose(x, w, **arguments)


def test_one_element_lists_apply_to_every_axis_as_in_torch():
    rng = np.random.default_rng(1)
    x, w = integer_array(rng, (1, 2, 4, 3)), integer_array(rng, (2, 3, 2, 2))
    expected = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(x), torch.from_numpy(w), stride=[2], dilation=[2]).numpy()
    assert_same(ct.torch_conv_transpose(x, w, stride=[2], dilation=[2]), expected, "lists")


def test_output_padding_may_reach_the_stride_when_smaller_than_the_dilation():
    # torch's rule is "smaller than either stride or dilation"; oneDNN's is the stride only.
    rng = np.random.default_rng(2)
    x, w = integer_array(rng, (1, 1, 4)), integer_array(rng, (1, 1, 3))
    expected = torch.nn.functional.conv_transpose1d(
        torch.from_numpy(x), torch.from_numpy(w), stride=1, dilation=3,
        output_padding=2).numpy()
    assert_same(ct.torch_conv_transpose(x, w, stride=1, dilation=3, output_padding=2),
                expected, "output_padding 2 with stride 1, dilation 3")


def test_unbatched_input_is_refused_with_the_workaround():
    with pytest.raises(ct.ConvTransposeError, match=r"input\[None\]"):
        ct.torch_conv_transpose(np.ones((4, 5, 5)), np.ones((4, 3, 3, 3)))


def test_output_size_overrides_output_padding_as_the_module_does():
    # nn.ConvTranspose1d(output_padding=1)(x, output_size=min) uses output_padding 0.
    x, w = np.ones((1, 1, 3)), np.ones((1, 1, 3))
    module = torch.nn.ConvTranspose1d(1, 1, 3, stride=2, output_padding=1, bias=False,
                                      dtype=torch.float64)
    with torch.no_grad():
        module.weight.fill_(1.0)
        expected = module(torch.from_numpy(x), output_size=[7]).numpy()
    assert_same(ct.torch_conv_transpose(x, w, stride=2, output_padding=1, output_size=[7]),
                expected, "output_size 7")


def _torch_or_error(x, w, **arguments):
    try:
        return torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                                    **arguments).numpy()
    except RuntimeError as error:
        return str(error).splitlines()[0]


@pytest.mark.parametrize("data_shape, weight_shape, arguments", [
    ((1, 2, 0, 3), (2, 3, 2, 2), {}), ((0, 2, 0, 3), (2, 3, 1, 2), {}),
    ((0, 2, 0, 3), (2, 3, 3, 2), dict(stride=2)),
    ((0, 2, 0, 3), (2, 3, 3, 2), dict(stride=2, output_padding=1)),
    ((0, 2, 0, 3), (2, 3, 4, 2), {}), ((0, 2, 3, 3), (2, 3, 2, 2), {}),
    ((0, 2, 1, 3), (2, 3, 2, 2), dict(padding=1)),
    ((1, 2, 3, 3), (2, 0, 2, 2), {}), ((1, 0, 3, 3), (0, 3, 2, 2), {}),
])
def test_empty_axes_match_torch(data_shape, weight_shape, arguments):
    # An empty spatial axis (and an output size of 0) only with an empty batch; an
    # empty weight never.
    x, w = np.zeros(data_shape), np.ones(weight_shape)
    expected = _torch_or_error(x, w, **arguments)
    if isinstance(expected, str):
        assert any(words in expected for words in (
            "Only zero batch", "non-empty", "at least 1 at dimension 0")), expected
        with pytest.raises(ct.ConvTransposeError, match="empty"):
            ct.torch_conv_transpose(x, w, **arguments)
        return
    assert_same(ct.torch_conv_transpose(x, w, **arguments), expected, (data_shape, arguments))
    assert ct.shapes.torch_conv_transpose(data_shape, weight_shape, **arguments).output_shape \
        == expected.shape


def test_the_grouped_path_returns_an_empty_output_the_ungrouped_one_refuses():
    # docs/semantics.md: torch's grouped float32 path gives (1, 3, 6, 0) where the
    # ungrouped one (and the grouped float64 one) raises "Output size is too small"; this
    # library refuses all three.
    arguments = dict(stride=[3, 1], padding=[2, 3], dilation=[2, 1], output_padding=[2, 0])
    x, ones = np.ones((1, 3, 2, 4), np.float32), np.ones
    grouped = _torch_or_error(x, ones((3, 1, 3, 3), np.float32), groups=3, **arguments)
    assert grouped.shape == (1, 3, 6, 0)
    for data, weight, groups in [(x, ones((3, 3, 3, 3), np.float32), 1),
                                 (x.astype(np.float64), ones((3, 1, 3, 3)), 3)]:
        assert "Output size is too small" in _torch_or_error(data, weight, groups=groups,
                                                             **arguments)
    with pytest.raises(ct.ConvTransposeError, match="output size"):
        ct.torch_conv_transpose(np.ones((1, 3, 2, 4)), np.ones((3, 1, 3, 3)), groups=3,
                                **arguments)


def test_torch_suite_conv_transpose2d_output_size():
    # pytorch/pytorch test/nn/test_convolution.py test_ConvTranspose2d_output_size:
    # nn.ConvTranspose2d(3, 4, 3, 3, 0, 2) on (2, 3, 6, 6) takes output sizes 18 to 20.
    for h in range(15, 22):
        for w in range(15, 22):
            arguments = dict(stride=3, padding=0, output_padding=2, output_size=(h, w))
            if 18 <= h <= 20 and 18 <= w <= 20:
                plan = ct.shapes.torch_conv_transpose((2, 3, 6, 6), (3, 4, 3, 3), **arguments)
                assert plan.output_shape[2:] == (h, w)
            else:
                with pytest.raises(ct.ConvTransposeError, match="output_size"):
                    ct.shapes.torch_conv_transpose((2, 3, 6, 6), (3, 4, 3, 3), **arguments)
