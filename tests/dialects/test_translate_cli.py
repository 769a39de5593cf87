"""``convtranspose translate``: text, ``--json`` whose attributes really compute the
source layer, and one-line refusals."""

from __future__ import annotations

import json

import numpy as np

import convtranspose as ct
import oracle
from cli_support import assert_one_line_error, run_cli


def test_json_attributes_compute_the_source_layer():
    result = run_cli("translate", "onnx_conv_transpose", "conv_transpose", "--data-shape",
                     "1,2,3,4", "--filter-shape", "2,3,2,2", "--strides", "2",
                     "--pads", "0,1,2,0", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["exact"] and record["notes"] == []
    rng = np.random.default_rng(0)
    x, w = rng.integers(-3, 4, (1, 2, 3, 4)).astype(float), rng.integers(-3, 4, (2, 3, 2, 2))
    w = w.astype(float)
    ours = ct.conv_transpose(x, w, **record["attributes"])
    expected = oracle.onnx_conv_transpose(x, w, strides=[2, 2], pads=[0, 1, 2, 0])
    np.testing.assert_array_equal(ours, expected)


def test_text_names_the_crop_torch_needs():
    result = run_cli("translate", "onnx_conv_transpose", "torch_conv_transpose",
                     "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2",
                     "--pads", "1,2")
    assert result.returncode == 0, result.stderr
    assert "padding=[1]" in result.stdout and "drop the last 1" in result.stdout


def test_exact_refuses_in_one_line_naming_the_workaround():
    result = run_cli("translate", "onnx_conv_transpose", "torch_conv_transpose",
                     "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2",
                     "--pads", "1,2", "--exact")
    assert_one_line_error(result, "pads symmetrically", "drop the last 1")


def test_a_flag_of_another_dialect_is_refused():
    result = run_cli("translate", "torch_conv_transpose", "onnx_conv_transpose",
                     "--data-shape", "1,1,3", "--filter-shape", "1,1,3", "--strides", "2")
    assert_one_line_error(result, "--strides is not an argument of torch_conv_transpose")


def _arrays(data_shape, filter_shape):
    rng = np.random.default_rng(1)
    return (rng.integers(-3, 4, data_shape).astype(float),
            rng.integers(-3, 4, filter_shape).astype(float))


def test_tensorflow_source_with_its_own_flags_to_tflite():
    result = run_cli("translate", "tf_conv_transpose", "tflite_transpose_conv",
                     "--data-shape", "1,3,3,1", "--filter-shape", "3,3,2,1",
                     "--output-shape", "1,6,5,2", "--strides", "2", "--padding", "SAME",
                     "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["exact"] and record["target_filter_shape"] == [2, 3, 3, 1]
    x, w = _arrays((1, 3, 3, 1), (3, 3, 2, 1))
    attributes = dict(record["attributes"])
    ours = ct.tflite_transpose_conv(attributes.pop("output_shape"), w.transpose(2, 0, 1, 3), x,
                                    **attributes)
    expected = ct.tf_conv_transpose(x, w, [1, 6, 5, 2], 2, "SAME")
    np.testing.assert_array_equal(ours, expected)


def test_attr_gives_any_source_argument_as_json():
    # JAX, correlation kernel HIO: the Keras kernel is its flip with I and O swapped
    result = run_cli("translate", "jax_conv_transpose", "keras_conv_transpose",
                     "--data-shape", "1,3,1", "--filter-shape", "3,1,2", "--attr", "strides=[2]",
                     "--attr", "padding=[[1, 1]]", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["exact"] and record["filter_steps"] == [["transpose", [0, 2, 1]],
                                                           ["flip", [0]]]
    x, w = _arrays((1, 3, 1), (3, 1, 2))
    ours = ct.keras_conv_transpose(x, w[::-1].transpose(0, 2, 1), **record["attributes"])
    expected = ct.jax_conv_transpose(x, w, (2,), [(1, 1)])
    np.testing.assert_array_equal(ours, expected)


def test_attr_string_values_and_text_output():
    result = run_cli("translate", "tensorrt_deconvolution", "keras_conv_transpose",
                     "--data-shape", "1,1,3,3", "--filter-shape", "1,1,3,3",
                     "--attr", "stride_nd=[2,2]", "--attr", "padding_mode=SAME_UPPER")
    assert result.returncode == 0, result.stderr
    assert "padding=same" in result.stdout and "data_format=channels_last" in result.stdout
    assert "data: transpose(0, 2, 3, 1)" in result.stdout  # TensorFlow's CPU kernels: NHWC


def test_attr_errors_are_one_line():
    args = ("translate", "jax_conv_transpose", "onnx_conv_transpose", "--data-shape", "1,3,1",
            "--filter-shape", "3,1,1")
    assert_one_line_error(run_cli(*args, "--attr", "strides"), "--attr takes NAME=VALUE")
    assert_one_line_error(run_cli(*args, "--attr", "stride=[2]"),
                          "--attr stride is not an argument of jax_conv_transpose", "--strides")
    assert_one_line_error(run_cli(*args, "--strides", "2", "--attr", "strides=[2]"),
                          "strides is given twice")


def _apply_filter_steps(w, steps):
    """The JSON filter steps applied by hand (a user's converter, not the library)."""
    for step, value in steps:
        if step == "transpose":
            w = w.transpose(value)
        elif step == "reshape":
            w = w.reshape(value)
        elif step == "flip":
            w = np.flip(w, value)
        elif step == "dilate":
            spread = np.zeros([(n - 1) * d + 1 for n, d in zip(w.shape, value)], w.dtype)
            spread[tuple(slice(None, None, d) for d in value)] = w
            w = spread
        else:
            assert step == "split_groups" and value == [w.shape[0]]
    return w


def test_json_describes_a_group_split_and_a_dilated_kernel_a_user_can_apply():
    result = run_cli("translate", "torch_conv_transpose", "tflite_transpose_conv",
                     "--data-shape", "2,4,3,2", "--filter-shape", "4,3,2,3", "--bias-shape",
                     "6", "--stride", "2,1", "--groups", "2", "--dilation", "1,2", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    split = record["split_groups"]
    assert split == {"groups": 2, "axis": 3, "data_channels": [[0, 2], [2, 4]],
                     "output_channels": [[0, 3], [3, 6]]}
    assert [step for step, _ in record["filter_steps"]] == ["reshape", "transpose", "dilate",
                                                            "split_groups"]
    assert not record["exact"] and record["target_filter_shape"] == [3, 2, 5, 2]
    x, w = _arrays((2, 4, 3, 2), (4, 3, 2, 3))
    b = np.arange(6.0)
    data = x.transpose(record["data_transpose"])
    filters = _apply_filter_steps(w, record["filter_steps"])
    attributes = dict(record["attributes"])
    output_shape = attributes.pop("output_shape")
    outputs = [ct.tflite_transpose_conv(output_shape, filters[g],
                                        np.ascontiguousarray(data[..., begin:end]),
                                        b[low:high], **attributes)
               for g, ((begin, end), (low, high)) in enumerate(zip(
                   split["data_channels"], split["output_channels"]))]
    ours = np.concatenate(outputs, axis=split["axis"])
    assert record["crop"] == [[0, 0], [0, 0]] and not record["bias_after"]
    ours = ours.transpose(record["output_transpose"])
    expected = ct.torch_conv_transpose(x, w, b, stride=(2, 1), groups=2, dilation=(1, 2))
    np.testing.assert_array_equal(ours, expected)
    text = run_cli("translate", "torch_conv_transpose", "tflite_transpose_conv",
                   "--data-shape", "2,4,3,2", "--filter-shape", "4,3,2,3", "--stride", "2,1",
                   "--groups", "2", "--dilation", "1,2", "--exact")
    assert_one_line_error(text, "tflite_transpose_conv has no groups",
                          "workaround: 2 layers")
