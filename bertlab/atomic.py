"""Atomic file writes and the reads that go with them: JSON and text files, whole directories, a lock.

A reader never sees half a file: a file is written beside its target under a hidden name and
renamed over it (`os.replace`), and a directory is filled as a hidden temporary copy and swapped
in with two renames. A save killed between those renames leaves the directory only as a hidden
copy; `recover_dir` puts it back. Contents are fsynced before a rename and the folder holding the
renamed entry after it, so a power cut leaves the old version or the new one, not an empty file.

Several processes may write one file (torchrun ranks, runs side by side sharing a data cache, nodes
sharing a run folder): each writes under its own temporary name (pid and a random token, so two
machines with the same pid differ too) and the rename is idempotent. `building` is the lock held
while a file is made, so a second process waits and then reads the finished file instead of
making it again.

Standard library only (no torch): the jobs CLI, the supervisor and the run folders use it, and so
does bertlab.storage.checkpoint.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# What reading a JSON file may meet that means "there is no usable value here": the file (or a
# folder on its path) is missing, or it holds something that is not UTF-8 JSON (a hand edit, a
# file from elsewhere). Other errors (permissions, a folder where the file should be) propagate.
_UNREADABLE = (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError)


def read_json(path: str | Path, default: Any = None) -> Any:
    """The JSON value in `path`, or `default` when the file is missing or does not hold UTF-8 JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except _UNREADABLE:
        return default


def fsync_dir(path: str | Path) -> None:
    """Flush a folder's entries (the names a rename changed) to disk; a no-op where the platform
    cannot open a folder for that."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a folder; the rename itself still happened
    finally:
        os.close(fd)


def temporary_name(path: str | Path) -> Path:
    """A hidden name beside `path` that no other writer uses: this pid plus a random token."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path beside `path` that is this writer's own; when the block ends without
    an error, what was written there is fsynced and renamed over `path` (a later writer's rename
    replaces it whole, so readers see one complete file whoever wins). On an error it is removed."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old content or the new, never a part."""
    with atomic_file(path) as tmp, open(tmp, "x", encoding="utf-8") as f:
        f.write(text)


def write_json_atomic(path: str | Path, data: Any, indent: int = 2) -> None:
    """Write `data` as JSON to `path` atomically (values JSON lacks are written as str)."""
    write_text_atomic(path, json.dumps(data, indent=indent, default=str))


def update_json(path: str | Path, **fields: Any) -> dict:
    """Merge `fields` into the JSON object in `path` (an empty one when missing) and write it atomically."""
    data = read_json(path, {}) or {}
    data.update(fields)
    write_json_atomic(path, data)
    return data


@contextlib.contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created if missing), released on exit."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def building(path: str | Path) -> Iterator[None]:
    """Held while `path` is made (a lock on `.NAME.lock` beside it), so that of several processes
    making the same file one makes it and the others wait, then find it made. Check for the file
    inside the block:

        with building(path):
            if not path.is_file():
                make(path)  # through atomic_file
        use(path)

    The lock file stays (removing it would let a third process lock a new file while the second
    still waits on the old one). It works across processes on one machine, and across machines on
    a shared file system that supports flock (NFSv4 does); where it does not, the unique temporary
    names still keep every writer's file whole, and the work is merely done twice.
    """
    path = Path(path)
    lock = path.with_name(f".{path.name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process to finish %s", path)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yields a temporary directory beside `target`; when the block ends without an error it
    replaces `target` (two renames, contents fsynced first). On an error the copy is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; a checkpoint is for everyone who can read the folder
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for f in tmp.rglob("*"):  # flush file contents and subfolder entries before the rename makes them visible
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        elif f.is_dir():
            fsync_dir(f)
    fsync_dir(tmp)
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        if old.exists():  # left by a save killed between the two renames
            shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(tmp, target)
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def leftover_copies(target: str | Path) -> list[Path]:
    """Copies `atomic_dir` leaves beside `target` when a process is killed mid-save
    (`.NAME.tmp-*` being written, `.NAME.old-*` between its two renames), newest first."""
    target = Path(target)
    found = [
        p
        for p in target.parent.glob(f".{target.name}.*")
        if p.is_dir() and (p.name.startswith(f".{target.name}.tmp-") or p.name.startswith(f".{target.name}.old-"))
    ]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def recover_dir(target: str | Path, is_complete: Callable[[Path], bool]) -> Path | None:
    """When `target` is missing (a save killed between the renames), put back the newest leftover
    copy that `is_complete(path)` accepts; then remove every other leftover. Returns what was
    recovered, or None."""
    target = Path(target)
    recovered = None
    if not target.exists():
        for copy in leftover_copies(target):
            if is_complete(copy):
                os.replace(copy, target)
                fsync_dir(target.parent)
                recovered = copy
                break
    for copy in leftover_copies(target):
        shutil.rmtree(copy, ignore_errors=True)
    return recovered
