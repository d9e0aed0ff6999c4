"""The model folder's file names and the checks on them, without loading anything.

A model folder (a checkpoint) holds `config.json`, one weights file (`model.safetensors`, or a
`transformers` folder's `pytorch_model.bin`) and a vocabulary. A pair folder (ELECTRA's generator and
discriminator, trained together) holds instead one model folder per half, which its config.json names
under `bertlab.halves` (`halves`); the first named is the one it opens as. `bertlab.storage.checkpoint` reads and
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
HALVES_KEY = "halves"  # config.json's `bertlab` key naming a pair folder's halves


def has_config(path: str | Path) -> bool:
    """True when the folder holds a `config.json` (a model, or one being written last-file-first)."""
    return (Path(path) / CONFIG_FILE).is_file()


def weights_path(path: str | Path) -> Path | None:
    """The folder's weights file, `model.safetensors` before `pytorch_model.bin`; None when it has neither."""
    return next((Path(path) / n for n in WEIGHTS_FILES if (Path(path) / n).is_file()), None)


def halves(path: str | Path) -> dict[str, Path]:
    """A pair folder's halves, name -> folder, in the order its config.json's `bertlab.halves` lists
    them (the first is what the pair opens as); {} for a folder of one model, or no readable config."""
    try:
        raw = json.loads((Path(path) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    section = raw.get("bertlab") if isinstance(raw, dict) else None
    names = section.get(HALVES_KEY) if isinstance(section, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) and n and Path(n).name == n for n in names):
        return {}
    return {name: Path(path) / name for name in names}


def is_model_folder(path: str | Path) -> bool:
    """True when the folder holds `config.json` and a weights file (what loading needs first), or is
    a pair folder whose every half does."""
    if not has_config(path):
        return False
    if weights_path(path) is not None:
        return True
    pair = halves(path)
    return bool(pair) and all(has_config(p) and weights_path(p) is not None for p in pair.values())


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
