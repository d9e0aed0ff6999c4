"""bertlab/atomic.py: atomic JSON, text and directory writes, and the lock."""

import json
import os

import pytest

from bertlab.atomic import (
    atomic_dir,
    atomic_file,
    building,
    leftover_copies,
    locked,
    read_json,
    recover_dir,
    temporary_name,
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


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names an fd's file through /proc")
def test_renames_are_made_durable(tmp_path, monkeypatch):
    # (#14) a power cut after a rename must find the new contents and the new name on disk:
    # contents are fsynced before each rename, the folder holding the renamed entry after it
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))
    )
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(b))), real_replace(a, b)))

    write_text_atomic(tmp_path / "t.txt", "new")
    assert events[-1] == ("fsync", str(tmp_path)) and events[-2] == ("replace", str(tmp_path / "t.txt"))
    assert events[0][0] == "fsync" and events[0][1].endswith(".tmp")  # the contents, before the rename

    events.clear()
    with atomic_dir(tmp_path / "ckpt") as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "w.bin").write_bytes(b"123")
    synced_before = [p for kind, p in events[: events.index(("replace", str(tmp_path / "ckpt")))] if kind == "fsync"]
    assert any(p.endswith("w.bin") for p in synced_before) and any(p.endswith("sub") for p in synced_before)
    assert events[-1] == ("fsync", str(tmp_path))

    events.clear()
    (tmp_path / ".gone.old-1").mkdir()
    recover_dir(tmp_path / "gone", lambda p: True)
    assert events == [("replace", str(tmp_path / "gone")), ("fsync", str(tmp_path))]


def test_each_writer_has_its_own_temporary_name_and_building_waits(tmp_path):
    # (#24) two writers of one file never share a temporary name; a second maker of a file waits
    # for the first and then finds it made
    import threading

    target = tmp_path / "cache.npz"
    assert temporary_name(target) != temporary_name(target)
    with atomic_file(target) as first, atomic_file(target) as second:  # second renames, then first
        assert first != second
        first.write_text("1")
        second.write_text("2")
    assert target.read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["cache.npz"]

    made, entered = [], threading.Event()

    def make_once():
        with building(tmp_path / "vocab.txt"):
            if not (tmp_path / "vocab.txt").is_file():
                made.append(threading.current_thread().name)
                write_text_atomic(tmp_path / "vocab.txt", "x\n")

    with building(tmp_path / "vocab.txt"):
        other = threading.Thread(target=lambda: (entered.set(), make_once()), name="second")
        other.start()
        entered.wait()
        other.join(timeout=0.3)
        assert other.is_alive()  # waits on the lock
        made.append("first")
        write_text_atomic(tmp_path / "vocab.txt", "x\n")
    other.join(timeout=10)
    assert made == ["first"] and not other.is_alive()
