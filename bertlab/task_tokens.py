"""How many tokens a fine-tuning job's steps really hold: its training rows encoded as the recipe
encodes them, with the tokenizer of the model it starts from, and padded batch by batch to the
longest row (dynamic padding). bertlab.estimates turns these counts into seconds.

Imports the standard library and bertlab.errors; the fine-tuning recipe, the checkpoint reader and
the tokenizer only inside the functions that read task data (deferred: they import torch, and the
jobs CLI starts without it).
"""

from __future__ import annotations

import contextlib
import functools
import random
from dataclasses import dataclass
from pathlib import Path

from bertlab.errors import BertLabError

# Token lengths (real, padded batch) of a task when its data cannot be read here (hf: sources).
TYPICAL_TOKENS = {
    "sst2": (13, 30),
    "cola": (11, 20),
    "mrpc": (53, 80),
    "rte": (70, 128),
    "qnli": (50, 100),
    "mnli": (40, 80),
    "stsb": (30, 55),
    "upos": (25, 60),
    "ner": (30, 70),
    "squad": (384, 384),
}
TOKEN_SAMPLE = 2000  # examples tokenized to learn a task's lengths


@dataclass(frozen=True)
class TaskTokens:
    """Token counts of a fine-tuning task's training inputs under the job's tokenizer."""

    real_per_row: float  # mean tokens of an input row, specials included, padding not
    padded_per_row: float  # mean length of a batch's rows after padding to its longest row
    longest: int  # the longest row (after truncation to max_seq_length)
    features: int  # training rows in all (more than examples where long inputs are windowed)
    source: str  # where the counts come from, in words


# --------------------------------------------------------------------------------------
def padded_length(lengths: list[int], rows: int, seed: int = 0) -> float:
    """Mean row length after padding each shuffled batch of `rows` to its longest row."""
    if not lengths:
        return 0.0
    order = list(lengths)
    random.Random(seed).shuffle(order)
    batches = [order[i : i + rows] for i in range(0, len(order), max(1, rows))]
    return sum(max(b) * len(b) for b in batches) / len(order)


def task_tokens(finetune_config, micro_batch: int) -> TaskTokens:
    """The real and padded token counts of a fine-tuning job's training rows: up to TOKEN_SAMPLE of
    its train examples, encoded as the recipe encodes them, with the tokenizer of the model it starts
    from. Falls back to TYPICAL_TOKENS when the data cannot be read here (a Hugging Face source)."""
    cfg = finetune_config
    text = str(cfg.data)
    stamp = None
    if not text.startswith("hf:"):
        with contextlib.suppress(OSError):
            root = Path(text).expanduser()
            stamp = max((p.stat().st_mtime for p in (root.iterdir() if root.is_dir() else [root])), default=0.0)
    if stamp is None:
        return typical_tokens(cfg.task, cfg.max_seq_length, "data not read here")
    return _task_tokens(cfg, micro_batch, stamp)


def typical_tokens(task: str, max_seq_length: int, why: str) -> TaskTokens:
    """TYPICAL_TOKENS of `task` when its own data cannot be counted (`why` says so)."""
    real, padded = TYPICAL_TOKENS.get(task, (64, 96))
    padded = min(padded, max_seq_length)
    return TaskTokens(min(real, padded), padded, padded, 0, f"typical lengths of {task} ({why})")


@functools.lru_cache(maxsize=32)  # keyed by the file's modification time: a changed file is read again
def _task_tokens(cfg, micro_batch: int, stamp: float) -> TaskTokens:
    from bertlab.finetune import recipe  # deferred: torch

    spec = cfg.spec
    data = recipe.load_task_data(spec, cfg.data, cfg.train_file, cfg.dev_file, cfg.split_dev, recipe.SPLIT_SEED)
    train = data.train[: cfg.max_train_examples] if cfg.max_train_examples else data.train
    sample = train if len(train) <= TOKEN_SAMPLE else random.Random(0).sample(train, TOKEN_SAMPLE)
    labels = recipe.task_labels(spec, data.train, data.dev)
    tokenizer, max_positions, whose, directory = _task_tokenizer(cfg)
    pretrained = recipe.trained_length(cfg, directory)
    setup = recipe.task_setup(cfg, labels, recipe.head_config(cfg, labels), max_positions, pretrained)
    features = recipe.encode(spec, setup, tokenizer, sample, training=True)
    lengths = [len(f.input_ids) for f in features]
    rows = max(1, len(features))
    return TaskTokens(
        real_per_row=sum(lengths) / rows,
        padded_per_row=padded_length(lengths, micro_batch),
        longest=max(lengths, default=0),
        features=round(len(train) * len(features) / max(1, len(sample))),
        source=f"{len(sample):,} of {len(train):,} train examples of {cfg.task}, tokenized with {whose}",
    )


def _task_tokenizer(cfg):
    """(tokenizer, max positions, whose it is, its folder or None) of the model a fine-tuning job starts
    from; for random weights with a vocabulary still to be trained, the shipped model's (about the same
    lengths)."""
    from bertlab.checkpoint import default_model_path, load_config, resolve  # deferred: torch
    from bertlab.tokenizer import BertTokenizer

    if cfg.model and Path(cfg.model).expanduser().is_dir():  # a Hub id is not downloaded for an estimate
        with contextlib.suppress(BertLabError, OSError):
            directory = resolve(cfg.model)
            config, _ = load_config(directory)
            return (
                BertTokenizer.from_dir(directory, config.max_position_embeddings),
                config.max_position_embeddings,
                f"{Path(directory).name}'s tokenizer",
                directory,
            )
    if cfg.vocab and Path(cfg.vocab).is_file():
        return BertTokenizer.from_vocab(cfg.vocab), 512, f"{cfg.vocab}", None
    shipped = default_model_path()
    return BertTokenizer.from_dir(shipped), 512, f"{shipped.name}'s tokenizer (the job trains its own vocabulary)", None
