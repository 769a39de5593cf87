"""Hostile and broken files: every one is refused with exit 2 and one clear line.

Each case runs the real console script with a short timeout (a billion-laughs
document that got expanded, or a huge allocation, would blow it), and checks
that nothing but the requested output file is ever written.
"""

import pickle

import numpy as np
import pytest

from cli_support import assert_one_line_error, run_cli, write_ir

pytest.importorskip("defusedxml")

QUICK = 20  # seconds; a refused file takes well under one


@pytest.fixture
def ir(tmp_path):
    """A valid IR (spec example 3: output_shape from a Const) and data for it."""
    weights = np.arange(20 * 10 * 3 * 3, dtype=np.float32).reshape(20, 10, 3, 3) / 1000
    xml = write_ir(tmp_path, data_shape=(1, 20, 4, 4), weights=weights, declared=(1, 10, 6, 6),
                   output_shape=(6, 6), attributes=dict(strides="1,1", auto_pad="valid"))
    np.save(tmp_path / "x.npy", np.ones((1, 20, 4, 4), np.float32))
    assert run_cli("ir", "check", xml).returncode == 0  # the unedited file is fine
    return xml


def _edit(xml, old, new):
    text = xml.read_text()
    assert old in text, old
    xml.write_text(text.replace(old, new, 1))


def _ir_run(xml, tmp_path, *extra):
    return run_cli("ir", "run", xml, "--layer", "upsampling_node", "--data", tmp_path / "x.npy",
                   "-o", tmp_path / "y.npy", *extra, timeout=QUICK)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE net [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<net name="&lol9;" version="11"><layers/><edges/></net>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE net [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<net name="&secret;" version="11"><layers/><edges/></net>
"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE net SYSTEM "http://127.0.0.1:9/evil.dtd">
<net name="x" version="11"><layers/><edges/></net>
"""


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY, EXTERNAL_DTD],
                         ids=["billion-laughs", "external-entity", "external-dtd"])
@pytest.mark.parametrize("command", ["check", "run"])
def test_xml_with_a_dtd_is_refused(tmp_path, text, command):
    xml = tmp_path / "evil.xml"
    xml.write_text(text)
    np.save(tmp_path / "x.npy", np.ones((1, 1, 1), np.float32))
    if command == "check":
        result = run_cli("ir", "check", xml, timeout=QUICK)
    else:
        result = _ir_run(xml, tmp_path)
    assert_one_line_error(result, "DOCTYPE", "entit")
    assert "root:" not in result.stdout + result.stderr
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("text,fragment", [
    ("<net><layers><layer", "not well-formed"),
    ('<?xml version="1.0"?><model/>', "not an OpenVINO IR"),
    ("", "not well-formed"),
    ('<net name="old" version="7"><layers/></net>', "IR version 7"),
])
def test_malformed_xml(tmp_path, text, fragment):
    xml = tmp_path / "bad.xml"
    xml.write_text(text)
    assert_one_line_error(run_cli("ir", "check", xml, timeout=QUICK), fragment)


def test_truncated_bin(ir, tmp_path):
    bin_path = ir.with_suffix(".bin")
    bin_path.write_bytes(bin_path.read_bytes()[:1000])
    assert_one_line_error(_ir_run(ir, tmp_path), "truncated", "weights")
    # check validates every Const's bounds too (without reading the weights).
    assert_one_line_error(run_cli("ir", "check", ir, timeout=QUICK), "truncated", "weights")


def test_missing_bin(ir, tmp_path):
    ir.with_suffix(".bin").unlink()
    assert_one_line_error(_ir_run(ir, tmp_path), "does not exist")


@pytest.mark.parametrize("old,new,fragment", [
    ('offset="0"', 'offset="99999999999999"', "outside"),
    ('offset="0"', 'offset="-8"', "negative offset"),
    ('size="7200"', 'size="7196"', "does not match"),
    ('shape="20, 10, 3, 3"', 'shape="20, 10, 3, x"', "not a comma-separated list"),
    ('shape="20, 10, 3, 3"', 'shape="99999999999, 99999999999, 99999999999, 3"', "overflows"),
    ('element_type="f32"', 'element_type="u4"', "not supported"),
])
def test_bad_const_is_refused(ir, tmp_path, old, new, fragment):
    text = ir.read_text()
    start = text.index('name="weights"')
    ir.write_text(text[:start] + text[start:].replace(old, new, 1))
    assert_one_line_error(_ir_run(ir, tmp_path), fragment)
    assert not (tmp_path / "y.npy").exists()
    assert_one_line_error(run_cli("ir", "check", ir, timeout=QUICK), fragment)


def test_const_over_the_memory_limit(tmp_path):
    """A Const over --max-bytes is refused from its declared size, before it is read."""
    weights = np.zeros((20, 10, 3, 3), np.float32)  # 7200 bytes
    xml = write_ir(tmp_path, data_shape=(1, 20, 4, 4), weights=weights, declared=(1, 10, 6, 6))
    np.save(tmp_path / "x.npy", np.ones((1, 20, 4, 4), np.float32))
    assert_one_line_error(_ir_run(xml, tmp_path, "--max-bytes", "4K"), "weights",
                          "over the limit", "--max-bytes")


@pytest.mark.parametrize("dims,fragment", [
    ("<dim>-5</dim>", "negative dimension -5"),
    ("<dim>x</dim>", "not an integer"),
    ("<dim>1000000000000000000000</dim>", "int64"),
])
def test_bad_port_dims(ir, dims, fragment):
    # The data port of the op: its second dim, 20, becomes the hostile value.
    text = ir.read_text()
    start = text.index('name="upsampling_node"')
    head, tail = text[:start], text[start:]
    tail = tail.replace("<dim>1</dim><dim>20</dim>", "<dim>1</dim>" + dims, 1)
    ir.write_text(head + tail)
    assert_one_line_error(run_cli("ir", "check", ir, timeout=QUICK), fragment)


def test_weights_computed_at_run_time_cannot_be_run(ir, tmp_path):
    _edit(ir, 'type="Const" version="opset1"><data element_type="f32"',
          'type="Parameter" version="opset1"><data element_type="f32"')
    assert_one_line_error(_ir_run(ir, tmp_path), "only constants")


def test_a_cycle_of_convert_layers_is_refused(tmp_path):
    weights = np.ones((20, 10, 3, 3), np.float32)
    xml = write_ir(tmp_path, data_shape=(1, 20, 4, 4), weights=weights, declared=(1, 10, 6, 6),
                   compress_weights=True)
    _edit(xml, '<edge from-layer="1" from-port="0" to-layer="2" to-port="0"/>',
          '<edge from-layer="2" from-port="1" to-layer="2" to-port="0"/>')
    np.save(tmp_path / "x.npy", np.ones((1, 20, 4, 4), np.float32))
    assert_one_line_error(_ir_run(xml, tmp_path), "deeper than")


class _Payload:
    """Unpickling this would create a file: proof that the pickle was executed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_pickled_npy_is_refused_and_never_executed(ir, tmp_path):
    marker = tmp_path / "pwned"
    array = np.array([_Payload(marker)], dtype=object)
    with open(tmp_path / "x.npy", "wb") as file:
        np.save(file, array, allow_pickle=True)
    assert_one_line_error(_ir_run(ir, tmp_path), "pickle")
    with open(tmp_path / "raw.npy", "wb") as file:
        pickle.dump(_Payload(marker), file)
    result = run_cli("run", "convolution_backprop_data", "--data", tmp_path / "raw.npy",
                     "--filter", tmp_path / "raw.npy", "-o", tmp_path / "y.npy", timeout=QUICK)
    assert_one_line_error(result, "not a .npy file")
    assert not marker.exists() and not (tmp_path / "y.npy").exists()


def test_truncated_and_oversized_npy(ir, tmp_path):
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(data[:-10])
    assert_one_line_error(_ir_run(ir, tmp_path), "truncated")
    # A 100-byte file whose header claims a 10**12-element array.
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)}
    with open(tmp_path / "x.npy", "wb") as file:
        np.lib.format.write_array_header_1_0(file, header)
        file.write(b"\0" * 64)
    assert_one_line_error(_ir_run(ir, tmp_path), "over the limit")


def test_max_bytes_limits_the_computation(ir, tmp_path):
    assert_one_line_error(_ir_run(ir, tmp_path, "--max-bytes", "2K"), "over the limit")
    assert not (tmp_path / "y.npy").exists()
    assert _ir_run(ir, tmp_path, "--max-bytes", "1M").returncode == 0
    assert_one_line_error(_ir_run(ir, tmp_path, "--max-bytes", "lots"), "byte count")


def test_unwritable_output(ir, tmp_path):
    result = run_cli("ir", "run", ir, "--layer", "upsampling_node", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "no" / "such" / "dir" / "y.npy", timeout=QUICK)
    assert_one_line_error(result, "cannot write")


def _empty_tensor(tensor_proto, name, dims):
    tensor = tensor_proto()
    tensor.name, tensor.data_type = name, tensor_proto.FLOAT
    tensor.dims.extend(dims)
    return tensor


def test_onnx_garbage_and_traversal(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xfe not a protobuf \x00" * 50)
    assert_one_line_error(run_cli("onnx", "check", garbage, timeout=QUICK), "not a readable ONNX")

    weights = _empty_tensor(TensorProto, "W", [1, 1, 3])
    weights.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "../../../../etc/passwd"), ("offset", "0"),
                       ("length", "12")):
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="ct")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 6])], initializer=[weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    path = tmp_path / "traversal.onnx"
    onnx.save(model, str(path))
    np.save(tmp_path / "x.npy", np.ones((1, 1, 4), np.float32))
    assert run_cli("onnx", "check", path, timeout=QUICK).returncode == 0  # shapes only
    result = run_cli("onnx", "run", path, "--node", "ct", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy", timeout=QUICK)
    assert_one_line_error(result, "outside the model's directory")

    huge = _empty_tensor(TensorProto, "W", [10**6, 10**6, 3])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 10**6, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=[huge])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), str(path))
    np.save(tmp_path / "x.npy", np.ones((1, 10**6, 4), np.float32)[:, :1])  # wrong shape
    result = run_cli("onnx", "run", path, "--node", "ct", "--data", tmp_path / "x.npy",
                     "-o", tmp_path / "y.npy", timeout=QUICK)
    assert_one_line_error(result, "declares its input")
    np.save(tmp_path / "x1.npy", np.ones((1, 1, 4), np.float32))
    graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), str(path))
    result = run_cli("onnx", "run", path, "--node", "ct", "--data", tmp_path / "x1.npy",
                     "-o", tmp_path / "y.npy", timeout=QUICK)
    assert_one_line_error(result, "over the limit")
    assert not (tmp_path / "y.npy").exists()


def test_device_files_are_not_read(ir, tmp_path):
    result = run_cli("ir", "run", ir, "--layer", "upsampling_node", "--data", "/dev/zero",
                     "-o", tmp_path / "y.npy", timeout=QUICK)
    assert_one_line_error(result, "not a regular file")
    assert_one_line_error(run_cli("ir", "check", "/dev/zero", timeout=QUICK), "not a regular file")
