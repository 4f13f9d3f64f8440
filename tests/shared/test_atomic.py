import json
import os
from pathlib import Path

import pytest

from gnnbench import atomic
from gnnbench.atomic import write_bytes_atomic, write_json_atomic


def test_write_bytes_creates_parents_and_replaces(tmp_path):
    target = tmp_path / "a" / "b" / "file.bin"
    write_bytes_atomic(target, b"first")
    assert target.read_bytes() == b"first"
    write_bytes_atomic(str(target), b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"], "no temporary file left behind"


def test_write_json_matches_indent_1_and_str_default(tmp_path):
    target = tmp_path / "out.json"
    obj = {"path": Path("/x/y"), "n": [1, 2]}
    write_json_atomic(target, obj)
    assert target.read_text() == json.dumps(obj, indent=1, default=str)
    assert json.loads(target.read_text()) == {"path": "/x/y", "n": [1, 2]}


def test_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "keep.json"
    target.write_text("old")

    def failing_replace(src, dst):
        assert Path(src).name == f".keep.json.tmp-{os.getpid()}"
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_json_atomic(target, {"new": True})
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]
