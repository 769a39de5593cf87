"""The command line's last lines of defence, in process: any exception is one line and
exit 2, a warning is one line, a result replaces its ``-o`` file whole or not at all,
and a bfloat16 result reads back as it was written."""

from __future__ import annotations

import errno
import os
import stat
import warnings

import numpy as np
import pytest

from convtranspose import cli
from convtranspose.interop._arrays import save_array
from oracle import full_transposed_convolution


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_unexpected_exception_is_one_line_with_its_type(monkeypatch, capsys):
    def boom(args):
        raise KeyError("first line\nsecond line\nthird line")

    monkeypatch.setitem(cli.HANDLERS, "demo", boom)
    assert cli.main(["demo"]) == 2
    line = _one_line(capsys)
    assert line.startswith("convtranspose: error: KeyError: ") and "first line" in line


def test_a_multi_line_library_error_is_folded_to_one_line(monkeypatch, capsys):
    from convtranspose import ConvTransposeError

    def fail(args):
        raise ConvTransposeError("strides must be ints, got dims: 2\ndata_type: 7\nraw: x")

    monkeypatch.setitem(cli.HANDLERS, "demo", fail)
    assert cli.main(["demo"]) == 2
    assert _one_line(capsys) == ("convtranspose: error: strides must be ints, got dims: 2"
                                 " data_type: 7 raw: x")


def test_a_warning_is_one_line(monkeypatch, capsys):
    def noisy(args):
        warnings.warn("overflow encountered\nin multiply", RuntimeWarning, stacklevel=1)
        return 0

    monkeypatch.setitem(cli.HANDLERS, "demo", noisy)
    assert cli.main(["demo"]) == 0
    assert _one_line(capsys) == "convtranspose: warning: overflow encountered in multiply"


def _operands(folder):
    rng = np.random.default_rng(2)
    data = rng.integers(-3, 4, (1, 2, 4, 3)).astype(np.float32)
    weights = rng.integers(-3, 4, (2, 2, 2, 2)).astype(np.float32)
    np.save(folder / "x.npy", data)
    np.save(folder / "w.npy", weights)
    return data, weights


def _run(folder, output, *extra):
    return cli.main(["run", "convolution_backprop_data", "--data", str(folder / "x.npy"),
                     "--filter", str(folder / "w.npy"), "--strides", "2", "-o", str(output),
                     *extra])


def test_a_failed_write_leaves_the_old_output_and_no_temporary(tmp_path, monkeypatch, capsys):
    _operands(tmp_path)
    old = tmp_path / "y.npy"
    old.write_bytes(b"the previous result")

    def full_disk(file, array, allow_pickle=False):
        file.write(b"\x93NUMPY half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full_disk)
    assert _run(tmp_path, old) == 2
    assert "no space left" in _one_line(capsys).lower()
    assert old.read_bytes() == b"the previous result"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["w.npy", "x.npy", "y.npy"]


def test_a_result_replaces_its_file_through_a_link_with_its_mode(tmp_path, capsys):
    data, weights = _operands(tmp_path)
    target = tmp_path / "results" / "y.npy"
    target.parent.mkdir()
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    os.symlink(target, tmp_path / "link.npy")
    assert _run(tmp_path, tmp_path / "link.npy") == 0
    assert (tmp_path / "link.npy").is_symlink()  # the link stays, its target is replaced
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    expected = full_transposed_convolution(data.astype(np.float64),
                                           weights.astype(np.float64)[None], (2, 2), (1, 1))
    np.testing.assert_array_equal(np.load(target), expected)
    assert sorted(path.name for path in target.parent.iterdir()) == ["y.npy"]


@pytest.mark.skipif(os.name != "posix", reason="FIFOs are POSIX")
def test_a_fifo_output_is_written_through_not_replaced(tmp_path, capsys):
    """A name that is not a regular file (a FIFO here, /dev/null in use) is written
    directly: renaming a file over it would replace the FIFO or the device itself."""
    import io

    data, weights = _operands(tmp_path)
    fifo = tmp_path / "y.npy"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the result fits the pipe
    try:
        assert _run(tmp_path, fifo) == 0
        written = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    expected = full_transposed_convolution(data.astype(np.float64),
                                           weights.astype(np.float64)[None], (2, 2), (1, 1))
    np.testing.assert_array_equal(np.load(io.BytesIO(written)), expected)


def test_an_output_naming_an_input_is_refused(tmp_path, capsys):
    _operands(tmp_path)
    before = (tmp_path / "w.npy").read_bytes()
    os.symlink(tmp_path / "w.npy", tmp_path / "alias.npy")
    assert _run(tmp_path, tmp_path / "alias.npy") == 2
    assert "overwrite an input" in _one_line(capsys)
    assert (tmp_path / "w.npy").read_bytes() == before


def test_a_bfloat16_result_reads_back_without_dtype(tmp_path, capsys):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data, weights = _operands(tmp_path)
    np.save(tmp_path / "x.npy", data.astype(ml_dtypes.bfloat16))
    np.save(tmp_path / "w.npy", weights.astype(ml_dtypes.bfloat16))
    assert _run(tmp_path, tmp_path / "y.npy", "--dtype", "bfloat16") == 0
    os.replace(tmp_path / "y.npy", tmp_path / "x.npy")  # the result is the next data
    save_array(str(tmp_path / "w.npy"), np.ones((2, 1, 1, 1), ml_dtypes.bfloat16))
    capsys.readouterr()
    # The header names bfloat16 (docs/cli.md): no --dtype needed to read it back.
    assert cli.main(["run", "convolution_backprop_data", "--data", str(tmp_path / "x.npy"),
                     "--filter", str(tmp_path / "w.npy"), "-o", str(tmp_path / "z.npy")]) == 0
    full = full_transposed_convolution(data.astype(np.float64), weights.astype(np.float64)[None],
                                       (2, 2), (1, 1))
    second = np.load(tmp_path / "z.npy")
    assert second.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(second, full.sum(axis=1, keepdims=True).astype(
        ml_dtypes.bfloat16))


def test_a_json_value_is_read_with_its_nesting_bounded():
    import argparse
    import json

    from convtranspose._cli.parser import MAX_NESTING, json_value

    deepest = "[" * MAX_NESTING + "]" * MAX_NESTING
    assert json_value(deepest, "x") == json.loads(deepest)  # Python's reader, the oracle
    text = '["' + "[" * 1000 + '", {"a": "]]"}]'  # brackets inside strings are text
    assert json_value(text, "x") == ["[" * 1000, {"a": "]]"}]
    with pytest.raises(argparse.ArgumentTypeError, match=f"'s' nests brackets more than {MAX_NESTING}"):
        json_value("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "attribute 's'")
    with pytest.raises(json.JSONDecodeError):
        json_value("[1, 2", "x")
