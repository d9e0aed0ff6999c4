"""Find and describe checkpoints: the shipped default, local folders, and finished runs.

Owns: where checkpoints live (`checkpoints/`, the final models of run folders and their snapshots), a cheap
description of each one read from `config.json` alone (no weights loaded), and the model card
shown in the app and the CLI. Imports the standard library, bertlab.config, bertlab.storage.checkpoint
and bertlab.storage.modelfolder (the folder format and the default path), bertlab.errors, bertlab.storage.model_card (the plain words of card
keys) and bertlab.storage.runfolder (where runs live); loads no weights, never imports streamlit.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from bertlab.config import BertConfig, parameter_count
from bertlab.errors import CheckpointError
from bertlab.storage.checkpoint import HUB_ID, default_model_path, is_checkpoint_dir, load_config
from bertlab.storage.model_card import metric_rows, plain_value, pretrained_length, training_rows
from bertlab.storage.model_card import read_card as read_card  # public here too (bertlab.storage.catalog.read_card)
from bertlab.storage.modelfolder import CONFIG_FILE, has_config, stored_parameter_count
from bertlab.storage.runfolder import (
    CHECKPOINT_DIR,
    MODEL_DIR,
    REPO_ROOT,
    has_model,
    list_snapshots,
    model_dir,
    runs_root,
)

log = logging.getLogger(__name__)

SHIPPED = "shipped"
LOCAL = "local"
RUN = "run"
HUB = "hub"


def shipped_model_path() -> Path:
    """The default checkpoint: `$BERTLAB_MODEL` when set, else `checkpoints/bertlab-mini`."""
    return default_model_path().expanduser()


def checkpoints_root() -> Path:
    return REPO_ROOT / "checkpoints"


@dataclass
class CheckpointEntry:
    """One model a user can pick.

    Attributes:
        label: what the picker shows, e.g. "bertlab-mini (shipped)".
        path: folder path (or Hub id for `kind == "hub"`), as given to `load_model`.
        kind: "shipped", "local", "run" or "hub".
        exists: False for the shipped default while it has not been built yet.
        summary: one line, e.g. "L=4 H=256 A=4 · 11.2M parameters · vocab 30,522".
    """

    label: str
    path: str
    kind: str
    exists: bool = True
    summary: str = ""


def human_count(n: int) -> str:
    """12_345_678 -> '12.3M'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def read_config(directory: str | Path) -> BertConfig:
    """The BertConfig in a folder's `config.json`, without loading weights.

    Raises:
        CheckpointError: no config.json, or not a BERT config.
    """
    if not has_config(directory):
        raise CheckpointError(f"{directory}: not a checkpoint folder (no {CONFIG_FILE})")
    return load_config(directory)[0]


def summarize(directory: str | Path) -> str:
    """One line about a checkpoint folder; the reason when it cannot be read."""
    try:
        c = read_config(directory)
    except CheckpointError as exc:
        return str(exc)
    # the weights' own count (any family: ALBERT's shared layers, an ELECTRA pair's two halves); BERT's
    # formula only for a folder without model.safetensors
    params = stored_parameter_count(directory)
    params = parameter_count(c) if params is None else params
    return f"L={c.num_layers} H={c.hidden_size} A={c.num_heads} · {human_count(params)} parameters · vocab {c.vocab_size:,}"


def _finetune_section(directory: str | Path) -> dict | None:
    """The `bertlab.finetune` section of a model folder's config.json, or None."""
    try:
        config = json.loads((Path(directory) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    section = config.get("bertlab") if isinstance(config, dict) else None
    finetune = section.get("finetune") if isinstance(section, dict) else None
    return finetune if isinstance(finetune, dict) else None


def is_finetuned(directory: str | Path) -> bool:
    """True for a fine-tuned task model (its config.json has a `bertlab.finetune` section): it has
    a task head instead of the masked-LM and NSP heads, so the probing pages cannot use it."""
    return _finetune_section(directory) is not None


def finetuned_task(directory: str | Path) -> str | None:
    """The task a fine-tuned model was trained on (`bertlab.finetune.task` in its config.json), or None."""
    task = (_finetune_section(directory) or {}).get("task")
    return task if isinstance(task, str) else None


def find_run_checkpoints(root: str | Path | None = None, include_finetuned: bool = True) -> list[CheckpointEntry]:
    """Checkpoints of finished runs: `<root>/<run_id>/model/` holding a config.json, newest first.

    Args:
        root: runs root (default `$BERTLAB_RUNS` or `runs/`).
        include_finetuned: False leaves out fine-tuned task models (see `is_finetuned`).
    """
    root = Path(root) if root is not None else runs_root()
    if not root.is_dir():
        return []
    found = []
    for run_dir in root.iterdir():
        if has_model(run_dir) and (include_finetuned or not is_finetuned(model_dir(run_dir))):
            found.append(model_dir(run_dir))
    found.sort(key=lambda p: (p / CONFIG_FILE).stat().st_mtime, reverse=True)
    return [CheckpointEntry(f"{p.parent.name} (run)", str(p), RUN, True, summarize(p)) for p in found]


def snapshot_entries(entry: CheckpointEntry) -> list[CheckpointEntry]:
    """A run's snapshots (its model at earlier steps, kept with `train.snapshots: true`) as entries to
    pick, in step order, labelled "<run> · step N"; none for a model that is not a run's."""
    if entry.kind != RUN:
        return []
    found = list_snapshots(Path(entry.path).parent)
    run = Path(entry.path).parent.name
    return [
        CheckpointEntry(f"{run} · step {int(p.name.removeprefix('step-')):,}", str(p), RUN, True, summarize(p))
        for p in found
    ]


def find_local_checkpoints(root: str | Path | None = None) -> list[CheckpointEntry]:
    """Checkpoint folders directly under `checkpoints/` (or `root`), by name."""
    root = Path(root) if root is not None else checkpoints_root()
    if not root.is_dir():
        return []
    return [
        CheckpointEntry(f"{p.name}", str(p), LOCAL, True, summarize(p))
        for p in sorted(root.iterdir())
        if not p.name.startswith(".") and is_checkpoint_dir(p)
    ]


def find_checkpoints(
    checkpoints_dir: str | Path | None = None, runs_dir: str | Path | None = None, include_finetuned: bool = True
) -> list[CheckpointEntry]:
    """Every model a user can pick, the shipped default first (marked missing if not built yet).

    Args:
        checkpoints_dir: folder of local checkpoints (default `checkpoints/`).
        runs_dir: runs root (default `$BERTLAB_RUNS` or `runs/`).
        include_finetuned: False leaves out fine-tuned runs' task models, which have no masked-LM head.
    """
    shipped = shipped_model_path()
    exists = is_checkpoint_dir(shipped)
    name = shipped.name if shipped.name != MODEL_DIR else f"{shipped.parent.name}/model"
    entries = [
        CheckpointEntry(
            f"{name} (default)",
            str(shipped),
            SHIPPED,
            exists,
            summarize(shipped) if exists else "not built yet: pick another model or train one",
        )
    ]
    seen = {_same(shipped)}
    for e in find_local_checkpoints(checkpoints_dir) + find_run_checkpoints(runs_dir, include_finetuned):
        key = _same(e.path)
        if key not in seen:
            seen.add(key)
            entries.append(e)
    return entries


def _same(path: str | Path) -> str:
    try:
        return str(Path(path).expanduser().resolve())
    except OSError:
        return str(path)


def classify(text: str) -> str:
    """'local' for an existing folder or anything path-like, 'hub' for an `owner/name` Hub id."""
    text = text.strip()
    p = Path(text).expanduser()
    if p.exists() or text.startswith((".", "/", "~")) or text.count("/") > 1:
        return LOCAL
    return HUB if HUB_ID.match(text) else LOCAL


def check_choice(text: str) -> str:
    """Validate what a user typed as a model before trying to load it.

    Returns the cleaned text (a folder path or a Hub id).

    Raises:
        CheckpointError: empty, a file, a folder without config.json, or a folder with no weights,
            each with how to fix it.
    """
    text = (text or "").strip()
    if not text:
        raise CheckpointError("no model given; type a checkpoint folder (with config.json) or a Hub id")
    if classify(text) == HUB:
        return text
    p = Path(text).expanduser()
    if not p.exists():
        raise CheckpointError(f"{text}: no such folder; give a checkpoint folder that holds config.json")
    if not p.is_dir():
        raise CheckpointError(f"{text}: is a file; give the checkpoint folder that holds config.json")
    if not has_config(p):
        inner = [c for c in (MODEL_DIR, CHECKPOINT_DIR) if is_checkpoint_dir(p / c)]
        hint = f" (did you mean {p / inner[0]}?)" if inner else ""
        raise CheckpointError(f"{text}: not a checkpoint folder: no config.json{hint}")
    if not is_checkpoint_dir(p):
        raise CheckpointError(f"{text}: has config.json but no model.safetensors or pytorch_model.bin")
    return str(p)


# --------------------------------------------------------------------------------------
# The model card
# --------------------------------------------------------------------------------------
@dataclass
class ModelCard:
    """What the home page shows about a loaded model, as (label, value) rows per section."""

    title: str
    description: str
    sizes: list[tuple[str, str]] = field(default_factory=list)
    vocabulary: list[tuple[str, str]] = field(default_factory=list)
    training: list[tuple[str, str]] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)


def read_readme(directory: str | Path) -> str:
    """The checkpoint's README.md (the long model card) or '' when there is none."""
    path = Path(directory) / "README.md"
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return ""


def model_card(
    config: BertConfig,
    card: dict | None,
    path: str = "",
    num_parameters: int | None = None,
    vocab_size: int | None = None,
    lowercase: bool | None = None,
    has_nsp: bool = True,
    sample_tokens: list[str] | None = None,
) -> ModelCard:
    """Everything the home page says about a model: sizes, parameters, vocabulary, training, metrics.

    Args:
        config: the model's BertConfig.
        card: the checkpoint's `model_card.json` content (may be empty).
        num_parameters: the loaded model's count; computed from `config` when None.
        vocab_size / lowercase / sample_tokens: from the tokenizer, when loaded.
    """
    card = dict(card or {})
    c = config
    params = num_parameters if num_parameters is not None else parameter_count(c)
    title = str(card.get("name") or Path(path).name or "BERT model")
    description = str(card.get("description") or "")
    sizes = [
        ("Layers (L)", str(c.num_layers)),
        ("Hidden size (H)", str(c.hidden_size)),
        ("Attention heads (A)", f"{c.num_heads} (each {c.head_size} wide)"),
        ("Feed-forward size", str(c.intermediate_size)),
        ("Longest input", _longest_input(c.max_position_embeddings, pretrained_length(card))),
        ("Parameters", f"{params:,} ({human_count(params)})"),
        ("Attention", attention_words(c)),
        ("Heads", "masked LM + next sentence" if has_nsp else "masked LM only (no NSP head)"),
    ]
    vocab = [("WordPiece tokens", f"{vocab_size if vocab_size is not None else c.vocab_size:,}")]
    if lowercase is not None:
        vocab.append(("Casing", "uncased (lower-cased)" if lowercase else "cased"))
    if sample_tokens:
        vocab.append(("Some tokens", " ".join(sample_tokens)))
    training = training_rows(card)
    extra = card.get("training")
    if isinstance(extra, dict):
        for k, v in extra.items():
            training.append((k.replace("_", " ").capitalize(), plain_value(v)))
    elif extra:
        training.append(("Training", plain_value(extra)))
    if not training:
        training.append(("Training data", "not recorded (no model_card.json in the checkpoint)"))
    metrics = metric_rows(card["metrics"]) if isinstance(card.get("metrics"), dict) else []
    if path:
        training.append(("Folder", path))
    return ModelCard(title, description, sizes, vocab, training, metrics)


def _longest_input(positions: int, pretrained: int) -> str:
    """The model's position vectors, and how many of them pretraining trained (its card says)."""
    if pretrained and pretrained < positions:
        return f"{positions} tokens (pretrained on up to {pretrained}: later positions never trained)"
    return f"{positions} tokens"


def attention_words(c: BertConfig) -> str:
    """Which keys each token reads, in words: every one, the earlier ones, or a sparse pattern's."""
    if c.attention_direction != "bidirectional":
        return "left-to-right (causal)"
    if c.attention_pattern == "window":
        glob = " plus [CLS], which reads and is read by every token" if c.global_tokens == "cls" else ""
        return f"sliding window: {c.attention_window // 2} tokens on each side{glob} (time and memory linear in length)"
    if c.attention_pattern == "bigbird":
        return (
            f"BigBird blocks of {c.attention_block}: its own and neighbouring blocks, {c.random_blocks} random "
            "blocks and the first and last block, which read and are read by all (linear in length)"
        )
    return "bidirectional, every token reads every token (cost quadratic in length)"
