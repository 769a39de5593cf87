"""A corpus of hostile inputs for the command line: models, ``.npy`` files, wisdom
files and environments, one case per way a file or an environment can attack.

Each :class:`Case` writes its files into a folder of its own (:func:`build`) and names
the command to run there, the environment, the exit code the command line documents
for it (``docs/cli.md``: 0 ok, 1 mismatch, 2 bad input) and a fragment of the one line
it prints on stderr.  ``tests/hostile/test_corpus.py`` runs every case in a subprocess
under a time limit and an address-space limit; this module also writes the corpus out
for a look by hand::

    python tests/hostile/corpus.py OUT_DIR     # one folder per case, with its command

Cases marked ``slow`` run only with ``pytest --runslow``.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Case:
    """One hostile input: ``make(folder)`` writes its files; ``argv`` is the command
    line (``{dir}`` is the folder); ``writes`` the files the command may change when it
    succeeds (its ``-o``, a wisdom file the environment names)."""

    name: str
    make: Callable[[Path], None]
    argv: tuple[str, ...]
    exit_code: int
    stderr: str  # lowercase: in the error's one line, or in one line of a success's
    env: dict = field(default_factory=dict)
    writes: tuple[str, ...] = ()
    stdout_path: str | None = None  # stdout redirected to this file (e.g. /dev/full)
    slow: bool = False
    max_rss_mb: int | None = None  # the most resident memory the command may reach


# -- writers ---------------------------------------------------------------------------

def _onnx_model(folder: Path, nodes, functions=(), initializers=(), x_shape=(1, 1, 4),
                name: str = "model.onnx") -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        list(nodes), "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=list(initializers))
    opsets = [helper.make_opsetid("", 22), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, functions=list(functions), opset_imports=opsets)
    onnx.save(model, str(folder / name))


def _function(name: str, body_calls, domain: str = "local"):
    """A function ``Y = f(X)`` whose body calls each of ``body_calls`` in turn."""
    from onnx import helper

    nodes, previous = [], "X"
    for index, callee in enumerate(body_calls):
        output = f"t{index}"
        nodes.append(helper.make_node(callee, [previous], [output], domain=domain))
        previous = output
    nodes.append(helper.make_node("Identity", [previous], ["Y"]))
    return helper.make_function(domain, name, ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", 22)])


def _weights(shape=(1, 1, 3)):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.ones(shape, np.float32), "W")


def _conv_transpose(weights: str = "W", **attributes):
    from onnx import helper

    return helper.make_node("ConvTranspose", ["X", weights], ["Y"], name="ct", **attributes)


def _x(folder: Path, shape=(1, 1, 4)) -> None:
    np.save(folder / "x.npy", np.ones(shape, np.float32))


def _recursive(folder: Path) -> None:
    from onnx import helper

    _onnx_model(folder, [helper.make_node("f", ["X"], ["Y"], domain="local")],
                [_function("f", ["f"])])


def _mutual(folder: Path) -> None:
    from onnx import helper

    _onnx_model(folder, [helper.make_node("f", ["X"], ["Y"], domain="local")],
                [_function("f", ["g"]), _function("g", ["h"]), _function("h", ["f"])])


def _doubling(folder: Path) -> None:
    """30 functions, each calling the next twice: 2**30 calls unfolded."""
    from onnx import helper

    functions = [_function(f"f{i}", [f"f{i + 1}", f"f{i + 1}"]) for i in range(29)]
    functions.append(_function("f29", []))
    _onnx_model(folder, [helper.make_node("f0", ["X"], ["X1"], domain="local"),
                         _conv_transpose()], functions, [_weights()])


def _dequantize_chain(folder: Path) -> None:
    """W = Reshape(d16) with d_i = DequantizeLinear(d_(i-1), d_(i-1), d_(i-1)): each
    tensor feeds three inputs of the next, 3**16 paths."""
    from onnx import helper, numpy_helper

    nodes = []
    for i in range(1, 17):
        previous = f"d{i - 1}"
        nodes.append(helper.make_node("DequantizeLinear", [previous] * 3, [f"d{i}"]))
    nodes.append(helper.make_node("Reshape", ["d16", "shape"], ["W"]))
    nodes.append(_conv_transpose())
    initializers = [numpy_helper.from_array(np.array(2.0, np.float32), "d0"),
                    numpy_helper.from_array(np.array([1, 1, 1], np.int64), "shape")]
    _onnx_model(folder, nodes, initializers=initializers)
    _x(folder)


def _dequantize_block(block: int):
    def make(folder: Path) -> None:
        from onnx import helper, numpy_helper

        nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["W"], axis=2,
                                  block_size=block), _conv_transpose()]
        initializers = [numpy_helper.from_array(np.ones((1, 1, 3), np.int8), "q"),
                        numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "s")]
        _onnx_model(folder, nodes, initializers=initializers)
        _x(folder)
    return make


def _string_weights(scale: bool):
    """STRING-typed weights, or a STRING scale of the DequantizeLinear that makes them."""
    def make(folder: Path) -> None:
        from onnx import TensorProto, helper, numpy_helper

        text = helper.make_tensor("s" if scale else "W", TensorProto.STRING,
                                  [] if scale else [1, 1, 3], [b"1"] if scale else [b"1"] * 3)
        nodes = [_conv_transpose()]
        initializers = [text]
        if scale:
            nodes.insert(0, helper.make_node("DequantizeLinear", ["q", "s"], ["W"]))
            initializers.append(numpy_helper.from_array(np.ones((1, 1, 3), np.int8), "q"))
        _onnx_model(folder, nodes, initializers=initializers)
        _x(folder)
    return make


def _tensor_strides(folder: Path) -> None:
    from onnx import helper, numpy_helper

    node = _conv_transpose()
    node.attribute.append(helper.make_attribute(
        "strides", numpy_helper.from_array(np.array([2], np.int64))))
    _onnx_model(folder, [node], initializers=[_weights()])
    _x(folder)


def _many_nodes(folder: Path) -> None:
    """100 000 ConvTranspose nodes (a 3.9 MB file): walking and checking them took
    376 MB; ``--max-bytes 10M`` allows 10 000 nodes."""
    _onnx_model(folder, [_named_conv_transpose(index) for index in range(100_000)],
                initializers=[_weights()])


def _named_conv_transpose(index: int):
    from onnx import helper

    return helper.make_node("ConvTranspose", ["X", "W"], [f"Y{index}"], name=f"ct{index}")


def _long_dim(folder: Path) -> None:
    """An IR ``<dim>`` of 5000 digits (Python refuses to convert such an int)."""
    dims = "<dim>1</dim><dim>1</dim><dim>" + "9" * 5000 + "</dim>"
    (folder / "model.xml").write_text(
        '<?xml version="1.0"?>\n<net name="t" version="11"><layers>'
        '<layer id="0" name="data" type="Parameter" version="opset1"><data shape="1,1,4"'
        f' element_type="f32"/><output><port id="0" precision="FP32">{dims}</port></output>'
        '</layer></layers><edges/></net>\n')


def _nul_location(folder: Path) -> None:
    """Weights in external data whose location holds a NUL byte."""
    from onnx import TensorProto

    weights = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=(1, 1, 3))
    weights.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w\0.bin"), ("offset", "0"), ("length", "12")):
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    _onnx_model(folder, [_conv_transpose()], initializers=[weights])
    _x(folder)


def _many_elements(folder: Path) -> None:
    (folder / "model.xml").write_text('<net name="x" version="11"><layers>' + "<a/>" * 3_000_000
                                      + "</layers><edges/></net>")


def _ir_overflow(folder: Path) -> None:
    """Weights decompressed by a Multiply of two finite constants that overflows f32."""
    big = np.full((1, 1, 3), 1e30, np.float32)
    blob = big.tobytes() + big.tobytes()
    dims = "<dim>1</dim><dim>1</dim><dim>3</dim>"

    def const(layer_id, name, offset):
        return (f'<layer id="{layer_id}" name="{name}" type="Const" version="opset1">'
                f'<data element_type="f32" shape="1,1,3" offset="{offset}" size="12"/>'
                f'<output><port id="0" precision="FP32">{dims}</port></output></layer>')

    layers = [
        '<layer id="0" name="data" type="Parameter" version="opset1"><data shape="1,1,4"'
        ' element_type="f32"/><output><port id="0" precision="FP32"><dim>1</dim><dim>1</dim>'
        '<dim>4</dim></port></output></layer>',
        const(1, "a", 0), const(2, "b", 12),
        f'<layer id="3" name="scaled" type="Multiply" version="opset1"><input>'
        f'<port id="0">{dims}</port><port id="1">{dims}</port></input>'
        f'<output><port id="2" precision="FP32">{dims}</port></output></layer>',
        '<layer id="4" name="up" type="ConvolutionBackpropData" version="opset1">'
        '<data strides="1" pads_begin="0" pads_end="0" dilations="1"/><input>'
        '<port id="0"><dim>1</dim><dim>1</dim><dim>4</dim></port>'
        f'<port id="1">{dims}</port></input><output><port id="2" precision="FP32">'
        '<dim>1</dim><dim>1</dim><dim>6</dim></port></output></layer>',
    ]
    edges = [(0, 0, 4, 0), (1, 0, 3, 0), (2, 0, 3, 1), (3, 2, 4, 1)]
    xml = ('<?xml version="1.0"?>\n<net name="t" version="11"><layers>' + "".join(layers)
           + "</layers><edges>" + "".join(
               f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>'
               for a, b, c, d in edges) + "</edges></net>\n")
    (folder / "model.xml").write_text(xml)
    (folder / "model.bin").write_bytes(blob)
    _x(folder)


def _run_operands(folder: Path) -> None:
    np.save(folder / "x.npy", np.ones((1, 2, 4, 4), np.float32))
    np.save(folder / "w.npy", np.ones((2, 3, 3, 3), np.float32))


def _npy_header(text: str):
    def make(folder: Path) -> None:
        _run_operands(folder)
        header = text.encode("latin1")
        header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
        (folder / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
                                       + header + b"\0" * 64)
    return make


def _fifo_data(folder: Path) -> None:
    _run_operands(folder)
    (folder / "x.npy").unlink()
    os.mkfifo(folder / "x.npy")


def _fifo_model(folder: Path) -> None:
    _run_operands(folder)
    os.mkfifo(folder / "model.onnx")


def _device_data(folder: Path) -> None:
    _run_operands(folder)
    (folder / "x.npy").unlink()
    os.symlink("/dev/zero", folder / "x.npy")


def _linked_output(folder: Path) -> None:
    _run_operands(folder)
    os.link(folder / "x.npy", folder / "y.npy")


def _wisdom(kind: str):
    def make(folder: Path) -> None:
        _run_operands(folder)
        path = folder / "wisdom.json"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "nested":
            path.write_text("[" * 100_000 + "]" * 100_000)
        else:
            path.write_text(json.dumps({"version": 1, "choices": {"x": {"times_ns": "a"}}}))
    return make


def _dump_file(folder: Path) -> None:
    _run_operands(folder)
    (folder / "taken").write_text("a file where the kernel sources' folder should be")


def _shared_cache(folder: Path) -> None:
    _run_operands(folder)
    (folder / "cache").mkdir()
    os.chmod(folder / "cache", 0o777)


_RUN = ("run", "convolution_backprop_data", "--data", "{dir}/x.npy", "--filter",
        "{dir}/w.npy", "-o", "{dir}/y.npy")
_ONNX_RUN = ("onnx", "run", "{dir}/model.onnx", "--node", "ct", "--data", "{dir}/x.npy",
             "-o", "{dir}/y.npy")
_Y = ("y.npy",)
# The wisdom file the environment names is the library's to replace (with its lock).
_WISDOM = _Y + ("wisdom.json", "wisdom.json.lock")
_MEASURE = {"CONVTRANSPOSE_PLANNING": "measure", "CONVTRANSPOSE_WISDOM": "{dir}/wisdom.json"}

CASES = (
    # -- models: walking budgets, constant folding, attributes, XML size ---------------
    Case("onnx-recursive-function", _recursive, ("onnx", "check", "{dir}/model.onnx"), 2,
         "calls itself"),
    Case("onnx-mutual-recursion", _mutual, ("onnx", "check", "{dir}/model.onnx"), 2,
         "calls itself"),
    Case("onnx-doubling-functions", _doubling, ("onnx", "check", "{dir}/model.onnx"), 2,
         "more than"),
    Case("onnx-dequantize-chain", _dequantize_chain, _ONNX_RUN, 0, "", writes=_Y),
    Case("onnx-negative-block-size", _dequantize_block(-2), _ONNX_RUN, 2, "block_size"),
    Case("onnx-string-weights", _string_weights(False), _ONNX_RUN, 2, "holds strings"),
    Case("onnx-string-scale", _string_weights(True), _ONNX_RUN, 2, "holds strings"),
    Case("onnx-huge-block-size", _dequantize_block(2**62), _ONNX_RUN, 0, "", writes=_Y),
    Case("onnx-tensor-strides", _tensor_strides, _ONNX_RUN, 2, "must be of type ints"),
    Case("onnx-fifo-model", _fifo_model, ("onnx", "check", "{dir}/model.onnx"), 2,
         "not a regular file"),
    Case("onnx-100k-nodes", _many_nodes,
         ("onnx", "check", "{dir}/model.onnx", "--max-bytes", "10M"), 2, "10000 the limit",
         max_rss_mb=200),
    Case("onnx-nul-in-external-location", _nul_location, _ONNX_RUN, 2, "holds a nul byte"),
    Case("ir-5000-digit-dim", _long_dim, ("ir", "check", "{dir}/model.xml"), 2, "5000 digits does not fit in int64"),
    Case("ir-3m-elements", _many_elements,
         ("ir", "check", "{dir}/model.xml", "--max-bytes", "64M"), 2, "xml elements"),
    Case("ir-weights-overflow", _ir_overflow,
         ("ir", "run", "{dir}/model.xml", "--layer", "up", "--data", "{dir}/x.npy", "-o",
          "{dir}/y.npy"), 2, "overflows"),
    # -- .npy files ----------------------------------------------------------------------
    Case("npy-fifo", _fifo_data, _RUN, 2, "not a regular file"),
    Case("npy-device", _device_data, _RUN, 2, "not a regular file"),
    Case("npy-header-tokens", _npy_header("{'descr': '<f4', 'fortran_order': False, "
                                          "'shape': (1,2,"), _RUN, 2, "malformed .npy header"),
    Case("npy-header-quote", _npy_header("{'descr': '<f4, 'fortran_order': False, "
                                         "'shape': (2,)}"), _RUN, 2, "malformed .npy header"),
    Case("npy-header-keys", _npy_header("{'descr': '<f4', 'fortran_order': False}"), _RUN, 2,
         "malformed .npy header"),
    # -- outputs -------------------------------------------------------------------------
    Case("output-is-an-input", _linked_output, _RUN, 2, "overwrite an input"),
    Case("stdout-full", _run_operands, _RUN[:-1] + ("-",), 2, "no space left",
         stdout_path="/dev/full"),
    # -- arguments -----------------------------------------------------------------------
    Case("attr-nested-50000", lambda folder: None,
         ("translate", "onnx_conv_transpose", "torch_conv_transpose", "--data-shape", "1,1,3",
          "--filter-shape", "1,1,3", "--attr", "strides=" + "[" * 50_000 + "]" * 50_000), 2,
         "--attr: attribute 'strides' nests brackets more than 32 deep"),
    Case("demo-repeat-0", lambda folder: None, ("demo", "--repeat", "0"), 2, "at least 1"),
    # Refused before the benchmark runs (the whole run came first, then the error).
    Case("bench-out-under-a-file", _run_operands,
         ("bench", "--quick", "--out", "{dir}/x.npy/results"), 2,
         "cannot be made a folder for the results"),
    Case("demo-seed-negative", lambda folder: None, ("demo", "--seed", "-1"), 2, "at least 0"),
    # -- environments --------------------------------------------------------------------
    Case("env-algorithm-garbage", _run_operands, _RUN, 2, "convtranspose_algorithm",
         env={"CONVTRANSPOSE_ALGORITHM": "garbage"}),
    # A bad thread count is read at first use (its warning is the command line's one
    # line, not Python's two) and kept from numba, which refuses to import with it.
    Case("env-numba-threads-negative", _run_operands, _RUN, 0, "numba_num_threads='-1'",
         env={"NUMBA_NUM_THREADS": "-1", "CONVTRANSPOSE_ALGORITHM": "direct"}, writes=_Y),
    Case("env-omp-threads-huge", _run_operands, _RUN, 0, "over 1024 threads",
         env={"OMP_NUM_THREADS": "9" * 20}, writes=_Y),
    Case("env-dump-kernels-file", _dump_file, _RUN, 2, "convtranspose_dump_kernels",
         env={"CONVTRANSPOSE_DUMP_KERNELS": "{dir}/taken", "CONVTRANSPOSE_ALGORITHM": "direct"}),
    Case("env-wisdom-nested", _wisdom("nested"), _RUN, 0, "wisdom", env=_MEASURE,
         writes=_WISDOM, slow=True),
    Case("env-wisdom-fifo", _wisdom("fifo"), _RUN, 0, "wisdom", env=_MEASURE, writes=_Y,
         slow=True),  # the FIFO stays: a file renamed over it would replace it
    Case("env-wisdom-bad-entries", _wisdom("entries"), _RUN, 0, "wisdom", env=_MEASURE,
         writes=_WISDOM, slow=True),
    Case("env-shared-cache-folder", _shared_cache, _RUN, 0, "keeps no cache",
         env={"CONVTRANSPOSE_CACHE_DIR": "{dir}/cache"}, writes=_Y, slow=True),
)


def build(case: Case, folder: Path) -> tuple[list[str], dict]:
    """Write ``case``'s files into ``folder``; its argv and environment changes, with
    ``{dir}`` replaced by the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    case.make(folder)
    argv = [part.replace("{dir}", str(folder)) for part in case.argv]
    env = {key: value.replace("{dir}", str(folder)) for key, value in case.env.items()}
    return argv, env


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/hostile/corpus.py OUT_DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    for case in CASES:
        command, env = build(case, root / case.name)
        settings = " ".join(f"{key}={value}" for key, value in env.items())
        redirect = f" > {case.stdout_path}" if case.stdout_path else ""
        shown = " ".join(part if len(part) < 80 else part[:40] + "..." for part in command)
        (root / case.name / "COMMAND").write_text(
            f"{settings} convtranspose {shown}{redirect}\n# exit {case.exit_code}\n".lstrip())
        print(f"{case.name}: exit {case.exit_code}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
