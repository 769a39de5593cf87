"""Hostile models read through the library: recursive and exponentially unfolding
functions, constant chains that fan out, block sizes that would allocate without
end, an XML of millions of elements, weights that overflow, and ONNX ``Cast`` to the
float8 types against onnx's reference implementation."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from pathlib import Path

import corpus
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("defusedxml")

from convtranspose.interop import ir, onnx_model  # noqa: E402
from convtranspose.interop._onnx_constants import fold  # noqa: E402
from convtranspose.interop._safety import InteropError  # noqa: E402

SOURCE = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.parametrize("make", [corpus._recursive, corpus._mutual], ids=["self", "mutual"])
def test_a_function_calling_itself_is_refused(tmp_path, make):
    make(tmp_path)
    with pytest.raises(InteropError, match="calls itself"):
        onnx_model.load(str(tmp_path / "model.onnx"))


def test_functions_unfolding_into_2_to_the_30_calls_are_refused_quickly(tmp_path):
    corpus._doubling(tmp_path)
    started = time.monotonic()
    with pytest.raises(InteropError, match="more than"):
        onnx_model.load(str(tmp_path / "model.onnx"))
    assert time.monotonic() - started < 10


def test_a_fanning_constant_chain_is_folded_once_per_tensor(tmp_path):
    """16 DequantizeLinear(d, d, d) stacked: each tensor is read and computed once (the
    unmemoised fold read ``d0`` 3**16 times); (d - d) * d is 0 whatever d is."""
    corpus._dequantize_chain(tmp_path)
    model = onnx_model.load(str(tmp_path / "model.onnx"))
    reads = []

    def read_tensor(tensor, what):
        reads.append(tensor.name)
        return onnx.numpy_helper.to_array(tensor)

    notes: list = []
    value = fold("W", model.main, read_tensor, model.max_bytes, "the weights", notes)
    np.testing.assert_array_equal(value, np.zeros((1, 1, 1), np.float32))
    assert sorted(reads) == ["d0", "shape"]
    assert len(notes) == 17  # 16 DequantizeLinear and the Reshape, each once


def _dequantize_model(tmp_path, block, scale_shape=(1, 1, 1)):
    from onnx import helper, numpy_helper

    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["W"], axis=2,
                              block_size=block)]
    q = np.arange(-3, 3, dtype=np.int8).reshape(1, 2, 3)
    s = np.array([0.5, 2.0], np.float32).reshape(1, 2, 1)[..., :scale_shape[2]]
    initializers = [numpy_helper.from_array(q, "q"), numpy_helper.from_array(s, "s")]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info(
        "W", onnx.TensorProto.FLOAT, None)], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.save(model, str(tmp_path / "model.onnx"))
    return model, q, s


def test_a_huge_block_size_allocates_nothing_extra(tmp_path):
    """block_size 2**62: one block along the axis; the scale is not repeated 2**62
    times.  The oracle is onnx's reference implementation with block_size 3, the axis's
    length: one block too (the reference repeats the scale, so 2**62 fails there)."""
    from onnx.reference import ReferenceEvaluator

    _dequantize_model(tmp_path, 2**62)
    loaded = onnx_model.load(str(tmp_path / "model.onnx"))
    value = loaded.constant("W", "the weights")
    model, q, s = _dequantize_model(tmp_path, 3)
    expected = ReferenceEvaluator(model).run(None, {})[0]
    np.testing.assert_array_equal(value, expected)
    np.testing.assert_array_equal(value, q.astype(np.float32) * s)


def test_a_negative_block_size_is_one_line(tmp_path):
    _dequantize_model(tmp_path, -2)
    loaded = onnx_model.load(str(tmp_path / "model.onnx"))
    with pytest.raises(InteropError, match="block_size must be a non-negative") as caught:
        loaded.constant("W", "the weights")
    assert "\n" not in str(caught.value)


FLOAT8 = ["FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"]


@pytest.mark.parametrize("saturate", [None, 1, 0])
@pytest.mark.parametrize("to", FLOAT8)
def test_cast_to_float8_follows_saturate_as_onnx_reference_does(tmp_path, to, saturate):
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    values = np.array([1e6, -1e6, 448.0, 500.0, 1.0, -0.3, 6e4, np.inf, -np.inf],
                      np.float32).reshape(1, 1, 9)
    extra = {} if saturate is None else {"saturate": saturate}
    nodes = [helper.make_node("Cast", ["w"], ["w8"], to=getattr(onnx.TensorProto, to), **extra),
             helper.make_node("Cast", ["w8"], ["W"], to=onnx.TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info(
        "W", onnx.TensorProto.FLOAT, None)], initializer=[numpy_helper.from_array(values, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.save(model, str(tmp_path / "model.onnx"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference's own cast may warn
        expected = ReferenceEvaluator(model).run(None, {})[0]
    value = onnx_model.load(str(tmp_path / "model.onnx")).constant("W", "the weights")
    np.testing.assert_array_equal(value, expected)  # NaNs where the reference has them
    if saturate != 0 and to == "FLOAT8E4M3FN":
        assert value[0, 0, 0] == 448.0  # the documented example: 1e6 saturates to 448


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_an_xml_of_millions_of_elements_is_refused_before_it_is_built(tmp_path):
    """3 000 000 empty elements under a 64 MiB limit: refused once the count passes
    the limit's share, so the parse stays far below the 290 MB the whole tree takes."""
    corpus._many_elements(tmp_path)
    script = (
        "import sys\n"
        "from convtranspose.interop import ir\n"
        f"try:\n    ir.load({str(tmp_path / 'model.xml')!r}, max_bytes=64 * 2**20)\n"
        "except ir.InteropError as error:\n    print('refused', 'XML elements' in str(error))\n"
        # VmHWM, not getrusage: a forked child's ru_maxrss starts at its parent's.
        "print(next(int(line.split()[1]) for line in open('/proc/self/status')\n"
        "           if line.startswith('VmHWM')) // 1024)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": SOURCE, "PATH": "/usr/bin:/bin"})
    refused, peak_mib = done.stdout.split("\n")[:2]
    assert refused == "refused True", done.stdout + done.stderr
    assert int(peak_mib) < 160, peak_mib


def test_weights_that_overflow_name_their_layer_and_warn_nothing(tmp_path):
    corpus._ir_overflow(tmp_path)
    model = ir.load(str(tmp_path / "model.xml"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a raw RuntimeWarning would be an error here
        with pytest.raises(InteropError, match="'scaled'.*overflows"):
            model.run(model.layer("up"), np.ones((1, 1, 4), np.float32))


def test_a_dump_variable_naming_a_file_is_a_library_error(tmp_path, monkeypatch):
    from convtranspose import ConvTransposeError
    from convtranspose._runtime import config

    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    monkeypatch.setenv(config.DUMP_ENV, str(taken))
    with pytest.raises(ConvTransposeError, match=config.DUMP_ENV):
        config.dump_source("kernel-0123", "def kernel():\n    pass\n")
    assert taken.read_text() == "not a folder"
    monkeypatch.setenv(config.DUMP_ENV, str(tmp_path / "made"))
    config.dump_source("kernel-0123", "def kernel():\n    pass\n")
    assert (tmp_path / "made" / "kernel-0123.py").read_text().startswith("def kernel")


def test_a_generated_kernel_with_a_dump_variable_naming_a_file_raises_it(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    from convtranspose import ConvTransposeError
    from convtranspose._kernels._numba import codegen

    (tmp_path / "taken").write_text("not a folder")
    monkeypatch.setenv("CONVTRANSPOSE_DUMP_KERNELS", str(tmp_path / "taken"))
    with pytest.raises(ConvTransposeError, match="CONVTRANSPOSE_DUMP_KERNELS"):
        codegen.compile_source("def doubled(x):\n    return 2 * x\n", "doubled")


def test_a_convert_over_the_limit_is_refused_before_it_allocates(tmp_path):
    """f16 weights of 3600 bytes read under a 5000-byte limit; their f32 conversion
    (7200 bytes) is refused, naming the Convert layer."""
    from cli_support import write_ir

    weights = np.ones((20, 10, 3, 3), np.float32)
    xml = write_ir(tmp_path, data_shape=(1, 20, 4, 4), weights=weights, declared=(1, 10, 6, 6),
                   compress_weights=True)
    model = ir.load(str(xml), max_bytes=5000)
    with pytest.raises(InteropError, match="weights_decompressed.*over the limit"):
        model.constant(model.layer("upsampling_node"), 1)
