"""One checkpoint format, compatible with Hugging Face `transformers`.

A checkpoint is a directory with `config.json` (BertConfig keys + a `bertlab` section),
`model.safetensors` (BERT's standard state-dict names), `vocab.txt` and tokenizer files; a pair
folder (ELECTRA's generator and discriminator) holds one such folder per half.
Directories written by `transformers` (`model.safetensors` or `pytorch_model.bin`) load too,
and a Hub id loads from the local Hugging Face cache, or is downloaded there (`bertlab.storage.hub.download`:
one weights file, safetensors first) when online. Nothing untrusted is unpickled:
safetensors, or `torch.load(weights_only=True)`. Writes are atomic: a temporary directory is
filled, then renamed into place (bertlab.atomic).

Also owns where the shipped default model lies (`default_model_path`). The folder's file names and
the cheap checks on it (`is_model_folder`, `folder_stamp`) live in the torch-free
`bertlab.storage.modelfolder`, re-exported here.

Imports torch, safetensors, bertlab.atomic, bertlab.config, bertlab.model, bertlab.tokenizer,
bertlab.errors, bertlab.hardware (pick_device), bertlab.storage.hub (Hub ids),
bertlab.storage.quantized (int8 folders), bertlab.storage.modelfolder and
bertlab.storage.runfolder (the repository root).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertlab.atomic import atomic_dir
from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, InputError
from bertlab.models import bert
from bertlab.models.bert import normalize_keys as normalize_keys  # BERT task models (finetune) read BERT weights
from bertlab.models.registry import FamilyImplementation, family_for
from bertlab.storage import hub, quantized
from bertlab.storage.modelfolder import (
    CONFIG_FILE,
    HALVES_KEY,
    PYTORCH_FILE,
    SAFETENSORS_FILE,
    halves,
    has_config,
    is_model_folder,
    weights_path,
)
from bertlab.storage.modelfolder import folder_stamp as folder_stamp  # re-exported: checkpoint owns the folder
from bertlab.storage.runfolder import REPO_ROOT
from bertlab.tokenizer import BertTokenizer

log = logging.getLogger(__name__)

WEIGHTS_NAME = SAFETENSORS_FILE
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
DEFAULT_MODEL_NAME = "bertlab-mini"


def default_model_path() -> Path:
    """The shipped default checkpoint (or `$BERTLAB_MODEL` when set)."""
    env = os.environ.get("BERTLAB_MODEL")
    return Path(env) if env else REPO_ROOT / "checkpoints" / DEFAULT_MODEL_NAME


is_checkpoint_dir = is_model_folder  # config.json and a weights file; the name callers know


def export_state_dict(model: torch.nn.Module, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The model's state dict with tied duplicates dropped, contiguous, optionally cast (floats only)."""
    out = {}
    tied = getattr(model, "tied_keys", ())
    for k, v in model.state_dict().items():
        if k in tied:
            continue
        v = v.detach()
        if dtype is not None and v.is_floating_point():
            v = v.to(dtype)
        out[k] = v.contiguous().cpu()
    return out


def save_checkpoint(
    directory: str | Path,
    model: torch.nn.Module,
    tokenizer: BertTokenizer | None,
    config: BertConfig | None = None,
    architecture: str | None = None,
    extra_config: dict | None = None,
    extra_files: dict[str, Any] | None = None,
    dtype: torch.dtype | None = None,
    weights: dict[str, torch.Tensor] | None = None,
    hf_config: dict | None = None,
) -> Path:
    """Write a checkpoint directory atomically (never half-written, even if killed mid-write).

    A model its family splits into halves (the family's optional `halves(model)`: ELECTRA's pair) is
    written as a pair folder: each half in its own subfolder, with its config, weights and vocabulary,
    as transformers opens it, and a config.json naming them (bertlab.storage.modelfolder.halves)
    beside the vocabulary and `extra_files`.

    Args:
        architecture: the transformers class name written in config.json; None asks the config's
            family (bertlab.models.registry), e.g. "BertForPreTraining".
        extra_config: merged into the `bertlab` section of config.json (task labels, ...).
        extra_files: name -> JSON-able object, or bytes, written beside the weights.
        dtype: e.g. torch.float16 for a smaller shipped file.
        weights: the tensors to save instead of the model's state dict (an int8 model's, whose
            layers hold packed weights: bertlab.storage.quantized).
        hf_config: merged into config.json's top level (an int8 folder's dtype and `quantization_config`).
    """
    directory = Path(directory)
    config = config or model.config
    family = family_for({"model_type": config.model_type}, type(config).__name__).load()
    architecture = architecture or family.architecture(config)
    split = getattr(family, "halves", None)  # optional: only a family whose model is several models has it
    parts = split(model) if split is not None else {}
    with atomic_dir(directory) as tmp:
        for name, part in parts.items():
            _write_model_files(
                tmp / name,
                part.config.to_hf_dict(family.architecture(part.config), extra_config),
                part,
                tokenizer,
                dtype,
            )
        cfg = config.to_hf_dict(architecture, extra_config) | (hf_config or {})
        if parts:
            cfg["bertlab"][HALVES_KEY] = list(parts)
        _write_model_files(tmp, cfg, None if parts else model, tokenizer, dtype, weights)
        for name, obj in (extra_files or {}).items():
            data = obj if isinstance(obj, bytes) else json.dumps(obj, indent=2).encode("utf-8")
            (tmp / name).write_bytes(data)
    return directory


def _write_model_files(
    folder: Path,
    cfg: dict,
    model: torch.nn.Module | None,
    tokenizer: BertTokenizer | None,
    dtype: torch.dtype | None,
    weights: dict[str, torch.Tensor] | None = None,
) -> None:
    """config.json, the weights (none for a pair folder's own) and the tokenizer's files, into `folder`."""
    folder.mkdir(exist_ok=True)
    if dtype is not None:
        cfg["torch_dtype"] = str(dtype).replace("torch.", "")
    (folder / CONFIG_FILE).write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    if model is not None:
        state = export_state_dict(model, dtype) if weights is None else weights
        save_file(state, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
        (folder / WEIGHTS_NAME).chmod(0o644)  # safetensors writes it private; the folder's readers need it
    if tokenizer is not None:
        config = getattr(model, "config", None)
        if config is not None:  # the tokenizer reads as far as the model does (a long model: 4,096 tokens)
            tokenizer = copy.copy(tokenizer)
            tokenizer.model_max_length = getattr(config, "max_length", config.max_position_embeddings)
        tokenizer.save(folder)


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------
def resolve(path_or_id: str | os.PathLike) -> Path:
    """A local checkpoint directory, or a Hub id: its folder in the local Hugging Face cache when
    complete there (no network), else downloaded into that cache with `bertlab.storage.hub.download`:
    config, vocabulary/tokenizer files and ONE weights file (model.safetensors when the repo has
    it, else pytorch_model.bin; never both)."""
    if isinstance(path_or_id, bytes | bytearray) or not isinstance(path_or_id, str | os.PathLike):
        raise InputError(
            f"the model must be a checkpoint folder (a str or pathlib.Path) or a Hub id (str), "
            f"got {type(path_or_id).__name__}"
        )
    p = Path(path_or_id).expanduser()
    if p.exists():
        if not p.is_dir():
            raise CheckpointError(f"{p}: is a file; give the checkpoint folder that holds config.json")
        if not has_config(p):
            raise CheckpointError(f"{p}: not a checkpoint folder (no {CONFIG_FILE})")
        return p
    text = str(path_or_id)
    parent = p.parent
    if (
        text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or not HUB_ID.match(text)
        or (parent != Path(".") and parent.is_dir())  # checkpoints/typo: a path, not a Hub owner/name
    ):
        raise CheckpointError(f"{text}: no such checkpoint folder" + _siblings_hint(parent))
    cached = hub.cached_snapshot(text)
    if cached is not None:
        return cached
    # huggingface_hub reads HF_HUB_OFFLINE once, at import; read it again so a later setting counts.
    if _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE"):
        raise CheckpointError(
            f"{text}: not a local folder, and HF_HUB_OFFLINE is set (offline mode) while the Hub id is not "
            f"in the local cache ({hub.hub_cache_dir()}). Give a local checkpoint folder, or unset "
            "HF_HUB_OFFLINE to download it."
        )
    return hub.download(text)


def _siblings_hint(parent: Path) -> str:
    """' (checkpoints/ holds: a, b)' naming the checkpoint folders beside a mistyped one, or ''."""
    try:
        found = sorted(d.name for d in parent.iterdir() if has_config(d))
    except OSError:
        return ""
    return f" ({parent}/ holds: {', '.join(found[:8])})" if found else ""


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE")


def read_config(directory: str | Path) -> dict:
    """config.json's content as a dict (any family).

    Raises:
        CheckpointError: missing, not JSON, or not a JSON object.
    """
    path = Path(directory) / CONFIG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path}: missing; a checkpoint folder needs config.json") from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); the file may be truncated") from exc
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: holds a JSON {type(raw).__name__}, not an object of config keys")
    return raw


def load_config(directory: str | Path) -> tuple[Any, dict]:
    """(the family's config object, config.json's content) for a checkpoint folder; the family is
    found from `model_type` (bertlab.models.registry).

    Raises:
        CheckpointError: config.json is missing or unreadable, or no family opens its model_type.
    """
    raw = read_config(directory)
    source = str(Path(directory) / CONFIG_FILE)
    return family_for(raw, source).load().config_from_hf(raw, source), raw


def weights_file(directory: str | Path) -> Path:
    """The weights file a checkpoint folder holds: `model.safetensors`, else `pytorch_model.bin`."""
    found = weights_path(directory)
    if found is None:
        raise CheckpointError(f"{Path(directory)}: no {WEIGHTS_NAME} or {PYTORCH_FILE}; the weights file is missing")
    return found


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Read `model.safetensors` (preferred) or `pytorch_model.bin` with weights_only=True.

    A pair folder's weights are its halves', each name under its half's (`generator.electra...`), as
    the pair's own state dict names them (a resumed ELECTRA run loads them so)."""
    pair = halves(directory) if weights_path(directory) is None else {}
    if pair:
        return {f"{name}.{k}": v for name, folder in pair.items() for k, v in read_weights(folder).items()}
    path = weights_file(directory)
    if path.name == WEIGHTS_NAME:
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: cannot be read ({exc}); the file may be truncated or corrupt") from exc
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights_only" not in str(exc):
            raise CheckpointError(f"{path}: cannot be read ({exc}); the file may be truncated or corrupt") from None
        # torch's own message advises weights_only=False, which would run whatever code the file holds
        raise CheckpointError(
            f"{path}: is not safe to load: it holds more than plain tensors and unpickling it may run code. "
            "If you trust where it came from, convert it once with trusted code: "
            "state = torch.load(path, weights_only=False); "
            "safetensors.torch.save_file({k: v.contiguous() for k, v in state.items()}, 'model.safetensors')"
        ) from None
    except Exception as exc:  # unpickling raises many types; all mean "unusable file"
        raise CheckpointError(
            f"{path}: cannot be read safely ({type(exc).__name__}: {exc}); truncated, corrupt, or not plain tensors"
        ) from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(
            f"{path}: is not a flat state dict of tensors (a training checkpoint?); save model.state_dict() instead"
        )
    return state


def load_state(
    model: torch.nn.Module,
    state: dict[str, torch.Tensor],
    source: str,
    required_prefixes: tuple[str, ...] = bert.ENCODER_PREFIXES,
    optional_prefixes: tuple[str, ...] = bert.OPTIONAL_PREFIXES,
) -> list[str]:
    """Load `state` into `model`, checking shapes; return the names of weights that were missing
    (left at their initial values). Raises CheckpointError on shape mismatches or a missing encoder.

    Weights under `optional_prefixes` (the pooler, which BertForMaskedLM checkpoints lack and only
    NSP uses) may be missing even when they fall under `required_prefixes`."""
    own = model.state_dict()
    for k in getattr(model, "tied_keys", ()):
        own.pop(k, None)
    _raise_on_shape_mismatch(state, {k: tuple(t.shape) for k, t in own.items()}, source, "model")
    missing = [k for k in own if k not in state]
    missing_core = [k for k in missing if k.startswith(required_prefixes) and not k.startswith(optional_prefixes)]
    if missing_core:
        raise CheckpointError(
            f"{source}: {len(missing_core)} encoder weights missing (e.g. {missing_core[0]}); "
            "the file is incomplete or not a checkpoint of this model family"
        )
    usable = {k: v for k, v in state.items() if k in own}
    model.load_state_dict(usable, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return missing


def check_shapes(config: Any, state: dict[str, torch.Tensor], source: str, family: FamilyImplementation = bert) -> None:
    """Compare config.json with the weights' shapes before any real model is allocated, so a
    config that disagrees (vocab_size: 10**12) is a one-line error, not an out-of-memory crash."""
    _raise_on_shape_mismatch(state, family.expected_shapes(config), source, "config")


def _raise_on_shape_mismatch(state: dict, own: dict[str, tuple[int, ...]], source: str, what: str) -> None:
    mismatched = [
        f"{k}: checkpoint {tuple(v.shape)} vs {what} {tuple(own[k])}"
        for k, v in state.items()
        if k in own and tuple(v.shape) != tuple(own[k])
    ]
    if mismatched:
        raise CheckpointError(f"{source}: weights do not match config.json: " + "; ".join(mismatched[:5]))


def load_pretraining_model(
    path_or_id: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    whole: bool = False,
) -> tuple[torch.nn.Module, BertTokenizer, dict]:
    """Load a pretraining model (+ tokenizer) of any registered family from a folder or Hub id,
    with the heads the folder holds. A pair folder (ELECTRA's) opens as its first half, the generator,
    or with `whole` as the pair it saved (what an export copies and a continued run starts from).

    Returns:
        (model in eval mode, tokenizer, info) where info has `path`, `raw_config`, `family` (its
        name), `heads` (the heads whose weights the folder holds: "mlm", "nsp", ...; a fine-tuned
        classifier's folder has none), `missing` (weights not in the checkpoint, left at their
        initial values), `card` (model_card.json content when present) and `halves` (a pair
        folder's halves, name -> folder, the opened one first; {} otherwise) and `quantization` (the
        scheme of an int8 folder, "int8-dynamic", which opens on the CPU in float32; else None).
    """
    given = resolve(path_or_id)
    pair = halves(given) if weights_path(given) is None else {}
    directory = given if whole else next(iter(pair.values()), given)
    config, raw = load_config(directory)
    family = family_for(raw, str(directory / CONFIG_FILE))
    impl = family.load()
    source = str(directory) if directory == given and pair else str(weights_file(directory))
    state = impl.normalize_keys(read_weights(directory))
    scheme = quantized.scheme_of(raw)
    if scheme not in (None, quantized.INT8_DYNAMIC):
        raise CheckpointError(f"{directory}: config.json names quantization {scheme!r}; BERT Lab opens 'int8-dynamic'")
    state, packed = quantized.split_int8(state) if scheme == quantized.INT8_DYNAMIC else (state, {})
    check_shapes(config, state, source, impl)
    model = impl.build(config)
    missing = load_state(model, state, source, impl.ENCODER_PREFIXES, impl.OPTIONAL_PREFIXES)
    heads = impl.heads_in(config, state)
    tokenizer = impl.load_tokenizer(directory, config)
    if len(tokenizer) > config.vocab_size:
        raise CheckpointError(
            f"{directory}/vocab.txt has {len(tokenizer)} tokens but config.json says vocab_size={config.vocab_size}"
        )
    if scheme == quantized.INT8_DYNAMIC:
        if dtype != torch.float32:
            raise InputError(
                f"{given}: holds a dynamic int8 model, which runs in float32 only; load it with dtype float32"
            )
        # int8 kernels (fbgemm) are CPU-only, so an int8 folder opens on the CPU whatever device was asked
        model = quantized.restore_int8(model.float().eval(), packed)
    else:
        model.to(device=device, dtype=dtype).eval()
    info = {
        "path": str(given),
        "raw_config": raw,
        "family": family.name,
        "heads": heads,
        "missing": missing,
        "card": read_card(given),
        "halves": {name: str(folder) for name, folder in pair.items()},
        "quantization": scheme,
    }
    return model, tokenizer, info


def read_card(directory: Path) -> dict:
    """model_card.json's content, or {} when absent or not valid JSON (logged)."""
    card_path = directory / "model_card.json"
    if not card_path.is_file():
        return {}
    try:
        return json.loads(card_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        log.warning("%s is not valid JSON; ignoring it", card_path)
        return {}
