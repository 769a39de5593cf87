"""``ct.convolution`` / ``ct.group_convolution``: values against the gather loop of
tests/oracle.py, the adjoint identity with the transposed ops, dtypes, ``out=`` and
errors.  (OpenVINO and torch: tests/peers/test_convolution_openvino.py,
tests/peers/test_gradients_torch.py.)
"""

import numpy as np
import pytest
from hypothesis import given, settings

import convtranspose as ct
import dialect_cases
import oracle


def layers():
    return dialect_cases.convolution_layers(largest_dilation=3, largest_sizes={1: 9, 2: 6, 3: 4},
                                            largest_stride=4, largest_pad=3)


def _functions(layer):
    if layer["grouped"]:
        return ct.group_convolution, ct.shapes.group_convolution, ct.group_convolution_backprop_data
    return ct.convolution, ct.shapes.convolution, ct.convolution_backprop_data


def _arrays(layer, dtype=np.float64):
    rng = np.random.default_rng(layer["seed"])
    return [rng.integers(-4, 5, layer[k]).astype(dtype) for k in ("data_shape", "filter_shape")]


def _expected(layer, plan, data, filter):
    canonical = filter.reshape(plan.canonical_filter_shape)
    return oracle.forward_convolution(data, canonical, plan.strides, plan.dilations,
                                      plan.pads_begin, plan.output_shape[2:])


def check_values_and_adjoint(layer):
    function, shapes, transposed = _functions(layer)
    data, filter = _arrays(layer)
    plan = shapes(layer["data_shape"], layer["filter_shape"], **layer["attrs"])
    result = function(data, filter, **layer["attrs"])
    assert result.shape == plan.output_shape
    np.testing.assert_array_equal(result, _expected(layer, plan, data, filter))
    # <conv(x), y> == <x, convT(y)> with the transposed op cropped at pads_begin to X
    y = np.random.default_rng(layer["seed"] + 1).integers(-4, 5, result.shape).astype(float)
    back = transposed(y, filter, layer["data_shape"][2:], strides=plan.strides,
                      dilations=plan.dilations, pads_begin=plan.pads_begin)
    assert np.sum(result * y) == np.sum(data * back)


def test_convolution_values_and_adjoint(examples):
    settings(max_examples=examples)(given(layers())(check_values_and_adjoint))()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "uint32"])
def test_convolution_dtypes(dtype):
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(3)
    data = oracle.random_array(rng, (2, 6, 7, 5), dtype)
    filter = oracle.random_array(rng, (3, 2, 2, 3, 2), dtype)
    attrs = dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[2, 1], dilations=[1, 2])
    plan = ct.shapes.group_convolution(data.shape, filter.shape, **attrs)
    result = ct.group_convolution(data, filter, **attrs)
    assert result.dtype == dtype
    wide = np.int64 if dtype.kind in "iu" else np.float64
    canonical = filter.astype(wide).reshape(plan.canonical_filter_shape)
    with np.errstate(over="ignore"):
        exact = oracle.forward_convolution(data.astype(wide), canonical, plan.strides,
                                           plan.dilations, plan.pads_begin,
                                           plan.output_shape[2:])
    if dtype.kind in "iu":
        np.testing.assert_array_equal(result, exact.astype(dtype))
    else:
        tolerance = 4 * float(oracle.ml_finfo(dtype).eps)
        np.testing.assert_allclose(result.astype(np.float64), exact, rtol=tolerance,
                                   atol=tolerance * float(np.abs(exact).max()))


def test_convolution_out_and_inputs_untouched():
    rng = np.random.default_rng(1)
    data, filter = rng.random((1, 3, 8, 8)), rng.random((4, 3, 3, 3))
    copies = data.copy(), filter.copy()
    out = np.full((1, 4, 4, 4), np.nan)
    returned = ct.convolution(data, filter, strides=2, auto_pad="same_lower", out=out)
    assert returned is out
    np.testing.assert_array_equal(out, ct.convolution(data, filter, strides=2,
                                                      auto_pad="same_lower"))
    np.testing.assert_array_equal(data, copies[0])
    np.testing.assert_array_equal(filter, copies[1])


@pytest.mark.parametrize("call, message", [
    (lambda: ct.convolution(np.ones((1, 2, 3)), np.ones((4, 2, 5))), "dilated kernel"),
    (lambda: ct.convolution(np.ones((1, 2, 3)), np.ones((4, 3, 2))), "data has 2 channels"),
    (lambda: ct.convolution(np.ones((1, 2, 3)), np.ones((4, 2, 2)), pads_begin=-1),
     r"pads_begin\[0\] is -1"),
    (lambda: ct.convolution(np.ones((1, 2, 3)), np.ones((4, 2, 2)), auto_pad="same"),
     "auto_pad must be one of"),
    (lambda: ct.group_convolution(np.ones((1, 4, 3)), np.ones((2, 1, 3, 2))),
     "2 groups \\* 3 input channels"),
    (lambda: ct.convolution(np.ones((1, 2, 3)), np.ones((4, 2, 2, 2))), "rank"),
])
def test_convolution_errors_name_the_rule(call, message):
    with pytest.raises(ct.ConvTransposeError, match=message):
        call()


def test_convolution_dtype_mismatch_is_a_type_error():
    with pytest.raises(TypeError, match="filter has dtype float32"):
        ct.convolution(np.ones((1, 2, 3)), np.ones((4, 2, 2), np.float32))


def test_convolution_plan_prints_its_formulas():
    plan = ct.shapes.convolution((1, 3, 224, 224), (64, 3, 7, 7), strides=2,
                                 auto_pad="same_upper")
    assert plan.output_shape == (1, 64, 112, 112)
    assert plan.pads_begin == (2, 2) and plan.pads_end == (3, 3)
    assert "ceil(224 / 2) = 112" in str(plan)


def test_requests_beyond_memory_fail_before_allocating():
    """Pads of 10**12 ask for an output of 2 * 10**12 elements: refused at once, naming the
    pads, with the bytes it would need; under a limit, a modest request is refused too."""
    with pytest.raises(ct.ResultTooLargeError, match="pads_begin and pads_end") as error:
        ct.convolution(np.ones((1, 1, 3)), np.ones((1, 1, 1)), pads_begin=10**12,
                       pads_end=10**12)
    assert error.value.nbytes > 16 * 10**12
    with ct.limit_memory(1 << 20), pytest.raises(MemoryError):
        ct.convolution(np.ones((1, 8, 256, 256)), np.ones((8, 8, 1, 1)))
    with ct.limit_memory(1 << 20), pytest.raises(ct.ResultTooLargeError, match="data"):
        ct.vjp.convolution_backprop_data(np.ones((1, 8, 256, 256)), np.ones((8, 8, 1, 1)),
                                         np.ones((1, 8, 256, 256)))


@pytest.mark.parametrize("data, filter, attributes, argument", [
    ((1, 1, 3), (1, 1, 1), {"pads_begin": 2**61, "pads_end": 2**61}, "pads_begin and pads_end"),
    ((2**31, 1, 2**31), (1, 1, 1), {}, "data"),
    ((1, 2, 2**40), (2**30, 2, 1), {}, "filter"),
], ids=["pads", "data", "filter"])
def test_an_output_past_2_60_elements_is_too_large_for_the_plan(data, filter, attributes,
                                                               argument):
    """The forward convolution's shape rules refuse it as the transposed convolution's do:
    a ResultTooLargeError (a ConvTransposeError and a MemoryError) naming the argument and
    the bytes at 8 bytes an element."""
    with pytest.raises(ct.ResultTooLargeError, match=argument) as raised:
        ct.shapes.convolution(data, filter, **attributes)
    error = raised.value
    assert isinstance(error, ct.ConvTransposeError) and isinstance(error, MemoryError)
    assert error.argument == argument and error.limit is None
    assert error.nbytes // 8 > 2**60 and str(error.nbytes) in str(error)
    if argument == "pads_begin and pads_end":  # the array functions too
        with pytest.raises(ct.ResultTooLargeError, match=argument):
            ct.convolution(np.ones(data), np.ones(filter), **attributes)
        with pytest.raises(ct.ResultTooLargeError, match=argument):
            ct.group_convolution(np.ones(data), np.ones((1,) + filter), **attributes)


@pytest.mark.parametrize("grouped", [False, True], ids=["dense", "depthwise"])
def test_repeated_stride_one_convolution_runs_its_prepared_call(monkeypatch, grouped):
    """A stride-1 forward convolution is a transposed convolution of the flipped filter;
    called again with the same layer it runs the prepared call kept after its first
    call (no new transposed convolution), and still gives the definition's result on
    new data, on a filter edited in place between calls and on data holding an
    infinity."""
    from convtranspose._execute import adjoints as execute_adjoints

    made = execute_adjoints.transposed_convolution
    general = []

    def spy(*args, **kwargs):
        general.append(args[1].shape)
        return made(*args, **kwargs)

    monkeypatch.setattr(execute_adjoints, "transposed_convolution", spy)
    # algorithms with a prepared call, whatever planning would pick on this CPU
    monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", "depthwise" if grouped else "direct")
    ct.clear_caches()
    rng = np.random.default_rng(21)
    channels = 6
    if grouped:
        function = ct.group_convolution
        filter = rng.integers(-3, 4, (channels, 1, 1, 3, 3)).astype(np.float32)
    else:
        function = ct.convolution
        filter = rng.integers(-3, 4, (5, channels, 3, 3)).astype(np.float32)
    attributes = dict(strides=1, pads_begin=1, pads_end=1)
    plan = (ct.shapes.group_convolution if grouped else ct.shapes.convolution)(
        (2, channels, 9, 11), filter.shape, **attributes)

    def check(data):
        expected = oracle.forward_convolution(
            data.astype(np.float64), filter.reshape(plan.canonical_filter_shape).astype(
                np.float64), [1, 1], [1, 1], [1, 1], [9, 11])
        np.testing.assert_array_equal(function(data, filter, **attributes), expected)

    for _ in range(3):
        check(rng.integers(-3, 4, (2, channels, 9, 11)).astype(np.float32))
    assert len(general) == 1  # the first call only
    filter.flat[4] += 5  # edited in place: prepared again, from the new bits
    check(rng.integers(-3, 4, (2, channels, 9, 11)).astype(np.float32))
    data = rng.integers(-3, 4, (2, channels, 9, 11)).astype(np.float32)
    data[1, 2, 4, 4] = np.inf
    with np.errstate(invalid="ignore"):
        check(data)


def _strided_layer(rng, grouped: bool, strides=(2, 3)):
    """A 2-D forward convolution (dense or grouped) of ``strides``, its float32 filter
    and attributes, and a function giving the definition's result for data."""
    if grouped:
        function = ct.group_convolution
        filter = rng.integers(-3, 4, (2, 3, 4, 3, 3)).astype(np.float32)
    else:
        function = ct.convolution
        filter = rng.integers(-3, 4, (5, 8, 3, 3)).astype(np.float32)
    attributes = dict(strides=list(strides), pads_begin=[1, 0], pads_end=[1, 2])
    plan = (ct.shapes.group_convolution if grouped else ct.shapes.convolution)(
        (2, 8, 9, 11), filter.shape, **attributes)

    def expected(data, weights=filter):
        return oracle.forward_convolution(
            data.astype(np.float64), weights.reshape(plan.canonical_filter_shape).astype(
                np.float64), plan.strides, [1, 1], plan.pads_begin, plan.output_shape[2:])

    return function, filter, attributes, expected


@pytest.mark.parametrize("algorithm", ["blocked", "blocked-planes", "im2col", "taps"])
@pytest.mark.parametrize("grouped", [False, True], ids=["dense", "grouped"])
def test_repeated_strided_convolution_runs_its_prepared_call(monkeypatch, grouped, algorithm):
    """A strided forward convolution called again with the same layer runs the data
    adjoint's prepared call kept after its first call (nothing is chosen or set up
    again), and still gives the definition's result on new data, on data of another
    layout, on a filter edited in place between calls and on data holding an
    infinity."""
    from convtranspose._execute import adjoints as execute_adjoints

    candidates = execute_adjoints.adjoint_candidates
    general = []

    def spy(*args, **kwargs):  # the general path lists the candidates once
        general.append(args[0])
        return candidates(*args, **kwargs)

    monkeypatch.setattr(execute_adjoints, "adjoint_candidates", spy)
    monkeypatch.setenv("CONVTRANSPOSE_BACKWARD_ALGORITHM", algorithm)
    ct.clear_caches()
    rng = np.random.default_rng(22)
    function, filter, attributes, expected = _strided_layer(rng, grouped)

    def check(data):
        np.testing.assert_array_equal(function(data, filter, **attributes), expected(data))

    for _ in range(3):
        check(rng.integers(-3, 4, (2, 8, 9, 11)).astype(np.float32))
    assert len(general) == 1  # the first call only
    filter.flat[4] += 5  # edited in place: the same call would sum the old weights
    check(rng.integers(-3, 4, (2, 8, 9, 11)).astype(np.float32))
    channels_last = rng.integers(-3, 4, (2, 9, 11, 8)).astype(np.float32)
    check(np.moveaxis(channels_last, -1, 1))  # other strides: another key
    data = rng.integers(-3, 4, (2, 8, 9, 11)).astype(np.float32)
    data[1, 2, 4, 4] = np.inf
    with np.errstate(invalid="ignore"):
        check(data)


@pytest.mark.parametrize("strides", [1, 2], ids=["stride-1", "strided"])
@pytest.mark.parametrize("grouped", [False, True], ids=["dense", "grouped"])
def test_prepared_convolution_layer_runs_its_adjoints_prepared_call(grouped, strides):
    """A prepared forward convolution gives the definition's result on repeated calls,
    into ``out``, on data of any layout, and keeps its own weights when the caller
    edits theirs; after its first call it runs the prepared call without choosing or
    setting anything up again."""
    rng = np.random.default_rng(23)
    function, filter, attributes, expected = _strided_layer(rng, grouped, (strides, strides))
    ct.clear_caches()
    layer = ct.prepare(function, filter=filter, **attributes)
    own = filter.copy()

    def check(data, **kwargs):
        np.testing.assert_array_equal(layer(data, **kwargs), expected(data, own))

    data = rng.integers(-3, 4, (2, 8, 9, 11)).astype(np.float32)
    check(data)
    call = next(iter(layer._bindings.values())).fast[0]
    assert call is not None  # the next calls run it
    filter.flat[:] = 7  # the caller's array: not the layer's
    for _ in range(2):
        check(rng.integers(-3, 4, (2, 8, 9, 11)).astype(np.float32))
    out = np.full(expected(data).shape, np.nan, np.float32)
    assert layer(data, out=out) is out
    np.testing.assert_array_equal(out, expected(data, own))
    check(np.moveaxis(rng.integers(-3, 4, (2, 9, 11, 8)).astype(np.float32), -1, 1))
    check(rng.integers(-3, 4, (2, 8, 9, 22)).astype(np.float32)[..., ::2])
