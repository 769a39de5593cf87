"""Files the environment names are never replaced when they are not regular files: a
wisdom path naming a FIFO or a device keeps it (renaming the new wisdom over
``/dev/null`` replaced the device for every program on the machine, when run as root),
and no lock file is made beside it."""

from __future__ import annotations

import os
import stat

import pytest

from convtranspose._choose import wisdom
from convtranspose._runtime import cache

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs are POSIX")


def test_atomic_write_refuses_to_replace_a_fifo(tmp_path):
    fifo = tmp_path / "results.md"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        cache.atomic_write(str(fifo), "text")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results.md"]


def test_atomic_write_replaces_a_regular_file_and_a_link_itself(tmp_path):
    (tmp_path / "old.json").write_text("old")
    cache.atomic_write(str(tmp_path / "old.json"), "new")
    assert (tmp_path / "old.json").read_text() == "new"
    os.symlink(tmp_path / "old.json", tmp_path / "link.json")
    cache.atomic_write(str(tmp_path / "link.json"), "newer")
    assert not (tmp_path / "link.json").is_symlink()
    assert (tmp_path / "old.json").read_text() == "new"


def test_a_wisdom_path_naming_a_fifo_is_kept_and_gets_no_lock(tmp_path, monkeypatch):
    fifo = tmp_path / "wisdom.json"
    os.mkfifo(fifo)
    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", str(fifo))
    store = wisdom.WisdomStore()
    store._write(str(fifo), {"figures": {}, "choices": {}})  # what each batch does
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["wisdom.json"]


def test_atomic_writes_keep_cache_files_private_and_results_as_open_makes_them(tmp_path):
    from convtranspose._runtime.cache import atomic_write

    mask = os.umask(0o022)
    try:
        atomic_write(str(tmp_path / "cache.json"), "{}")
        atomic_write(str(tmp_path / "results.md"), "table", private=False)
        (tmp_path / "kept.md").write_text("old")
        os.chmod(tmp_path / "kept.md", 0o640)
        atomic_write(str(tmp_path / "kept.md"), "new", private=False)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "cache.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "results.md").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "kept.md").st_mode) == 0o640
    assert (tmp_path / "kept.md").read_text() == "new"
