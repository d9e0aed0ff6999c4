"""bertlab/atomic.py: atomic JSON, text and directory writes, and the lock."""

import json
import os

import pytest

from bertlab.atomic import (
    atomic_dir,
    leftover_copies,
    locked,
    read_json,
    recover_dir,
    update_json,
    write_json_atomic,
    write_text_atomic,
)


def test_json_round_trip_and_defaults(tmp_path):
    path = tmp_path / "a.json"
    assert read_json(path, {"missing": True}) == {"missing": True}
    assert read_json(tmp_path / "not-a-dir.txt" / "x.json") is None
    write_json_atomic(path, {"x": 1, "p": tmp_path})  # values JSON lacks are written as str
    assert read_json(path) == {"x": 1, "p": str(tmp_path)}
    assert update_json(path, y=2) == {"x": 1, "p": str(tmp_path), "y": 2}
    path.write_text("{half")
    assert read_json(path, "default") == "default"
    path.write_bytes(b"\xff\xfe")
    assert read_json(path, "default") == "default"
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_read_json_does_not_hide_other_errors(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(IsADirectoryError):
        read_json(tmp_path / "dir.json")


def test_text_is_replaced_whole(tmp_path, monkeypatch):
    path = tmp_path / "t.txt"
    path.write_text("old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    monkeypatch.undo()
    write_text_atomic(path, "new")
    assert path.read_text() == "new"


def test_atomic_dir_replaces_on_success_and_keeps_the_old_on_error(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("1")
    assert (target / "a.txt").read_text() == "1"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("2")
        raise RuntimeError("killed mid-save")
    assert (target / "a.txt").read_text() == "1" and leftover_copies(target) == []


def test_recover_dir_puts_back_a_complete_copy(tmp_path):
    target = tmp_path / "ckpt"
    old = tmp_path / ".ckpt.old-123"  # a save killed between its two renames
    old.mkdir()
    (old / "done").write_text("yes")
    broken = tmp_path / ".ckpt.tmp-abc"
    broken.mkdir()
    assert leftover_copies(target)
    assert recover_dir(target, lambda p: (p / "done").is_file()) == old
    assert (target / "done").is_file() and leftover_copies(target) == []


def test_lock_is_reentrant_across_calls(tmp_path):
    with locked(tmp_path / "sub" / ".lock"):
        pass
    with locked(tmp_path / "sub" / ".lock"):
        assert (tmp_path / "sub" / ".lock").exists()
    assert json.dumps(str(tmp_path))
