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
import math
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


# an int8 copy's per-channel scales and zero points beside each int8 weight (bertlab.storage.quantized's names):
# how the weights are stored, not parameters
_NOT_PARAMETERS = (".weight_scale", ".weight_zero_point")
_MAX_HEADER = 100_000_000  # bytes: a safetensors header is JSON of names and shapes, far smaller than this


def _safetensors_header(file: Path) -> dict | None:
    """A safetensors file's header (name -> dtype, shape, data_offsets), None when unreadable."""
    try:
        with open(file, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size < _MAX_HEADER:
                return None
            header = json.loads(f.read(size))
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def _tensor_bytes(file: Path, header: dict, name: str) -> bytes:
    start, end = header[name]["data_offsets"]
    with open(file, "rb") as f:
        f.seek(8 + int.from_bytes(f.read(8), "little") + start)
        return f.read(end - start)


def stored_parameter_count(path: str | Path) -> int | None:
    """The parameters a folder's weights hold, read from model.safetensors' header (names and shapes;
    nothing is loaded), so every family counts as it is built: ALBERT's shared layer once, ELECTRA's
    narrower embeddings, a tied output layer once (it is saved once). A pair folder counts its halves,
    a tensor both hold (same name, shape and bytes: ELECTRA's shared embeddings) once. An int8 copy counts its
    int8 weights, not their scales. None where a folder has no readable model.safetensors (a
    pytorch_model.bin is read only with torch)."""
    pair = halves(path) if weights_path(path) is None else {}
    if pair:
        files = [Path(folder) / SAFETENSORS_FILE for folder in pair.values()]
        headers = [_safetensors_header(f) for f in files]
        if any(h is None for h in headers):
            return None
        total = sum(_count(h) for h in headers)
        first, first_header = files[0], headers[0]
        for file, header in zip(files[1:], headers[1:], strict=True):
            for name, entry in header.items():
                theirs = first_header.get(name)
                if name == "__metadata__" or not isinstance(theirs, dict) or theirs.get("shape") != entry.get("shape"):
                    continue
                if _tensor_bytes(first, first_header, name) == _tensor_bytes(file, header, name):
                    total -= math.prod(entry["shape"])
        return total
    header = _safetensors_header(Path(path) / SAFETENSORS_FILE)
    return None if header is None else _count(header)


def _count(header: dict) -> int:
    return sum(
        math.prod(entry.get("shape") or ())
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict) and not name.endswith(_NOT_PARAMETERS)
    )
