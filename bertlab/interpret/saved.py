"""Where interpretation results live beside a model, so a page shows them without recomputing.

Owns the folder `<model folder>/interpret/` and its file names: `probe-<task>.json` (layer
probes, `probing.ProbeResult`) and `heads-<task>.json` (head importance and pruning curve,
`heads.HeadStudy`). Every reader and writer goes through `result_path`, `write_result` and
`read_results`.

Imports bertlab.atomic and bertlab.errors only.
"""

from __future__ import annotations

import re
from pathlib import Path

from bertlab.atomic import read_json, write_json_atomic
from bertlab.errors import InputError

FOLDER = "interpret"
KINDS = ("probe", "heads")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def result_path(model_dir: str | Path, kind: str, task: str) -> Path:
    """`<model_dir>/interpret/<kind>-<task>.json`."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, not {kind!r}")
    if not _NAME.match(task):
        raise InputError(f"task name {task!r} must be lower-case letters, digits, '.', '_' or '-'")
    return Path(model_dir) / FOLDER / f"{kind}-{task}.json"


def write_result(model_dir: str | Path, kind: str, task: str, data: dict) -> Path:
    """Write one result atomically (the folder is made when missing) and return its path."""
    path = result_path(model_dir, kind, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)
    return path


def read_results(model_dir: str | Path, kind: str) -> dict[str, dict]:
    """task -> the saved result of that kind beside the model ({} when none; unreadable files skipped)."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, not {kind!r}")
    folder = Path(model_dir) / FOLDER
    out = {}
    for path in sorted(folder.glob(f"{kind}-*.json")) if folder.is_dir() else []:
        data = read_json(path)
        if isinstance(data, dict):
            out[path.stem.removeprefix(f"{kind}-")] = data
    return out
