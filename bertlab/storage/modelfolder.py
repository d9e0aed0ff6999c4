"""The model folder's file names and the checks on them, without loading anything.

A model folder (a checkpoint) holds `config.json`, one weights file (`model.safetensors`, or a
`transformers` folder's `pytorch_model.bin`) and a vocabulary. `bertlab.storage.checkpoint` reads and
writes it; this module owns the names and the cheap questions every other module asks of a folder
(does it hold a config, is it a whole model, when was it last written), so that the catalog, the
run folder, the hub cache, the snapshots and the pages ask them one way.

Imports only the standard library: the CLI and the pages ask these questions before torch loads.
"""

from __future__ import annotations

import json
from pathlib import Path

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
WEIGHTS_FILES = (SAFETENSORS_FILE, PYTORCH_FILE)  # in the order they are preferred
VOCAB_FILE = "vocab.txt"


def has_config(path: str | Path) -> bool:
    """True when the folder holds a `config.json` (a model, or one being written last-file-first)."""
    return (Path(path) / CONFIG_FILE).is_file()


def weights_path(path: str | Path) -> Path | None:
    """The folder's weights file, `model.safetensors` before `pytorch_model.bin`; None when it has neither."""
    return next((Path(path) / n for n in WEIGHTS_FILES if (Path(path) / n).is_file()), None)


def is_model_folder(path: str | Path) -> bool:
    """True when the folder holds `config.json` and a weights file (what loading needs first)."""
    return has_config(path) and weights_path(path) is not None


def folder_stamp(path: str | Path) -> float:
    """The newest modification time of the config and weights files (0.0 when there are none):
    it changes when the model is rewritten, so a cache keyed on it loads the new one."""
    p = Path(path).expanduser()
    times = [(p / n).stat().st_mtime for n in (CONFIG_FILE, *WEIGHTS_FILES) if (p / n).is_file()]
    return max(times) if times else 0.0


def hidden_width(path: str | Path) -> int | None:
    """The model's hidden size from its config.json (ours or transformers'), None when there is no
    readable one (a Hub id, a folder still to be written)."""
    try:
        width = json.loads((Path(path) / CONFIG_FILE).read_text(encoding="utf-8")).get("hidden_size")
    except (OSError, ValueError, AttributeError):
        return None
    return width if isinstance(width, int) and width > 0 else None
