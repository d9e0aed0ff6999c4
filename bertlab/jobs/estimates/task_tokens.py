"""How many tokens a training job's steps really hold: a fine-tuning job's training rows encoded as
the recipe encodes them, with the tokenizer of the model it starts from, and padded batch by batch to
the longest row (dynamic padding); a pretraining job's instances made as its run makes them from a
sample of its corpus. bertlab.jobs.estimates.estimate turns these counts into steps and seconds.

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
    from bertlab.models.registry import family_of  # deferred with the two below: read only for an estimate
    from bertlab.storage.checkpoint import default_model_path, load_config, resolve  # deferred: torch
    from bertlab.tokenizer import BertTokenizer

    if cfg.model and Path(cfg.model).expanduser().is_dir():  # a Hub id is not downloaded for an estimate
        with contextlib.suppress(BertLabError, OSError):
            directory = resolve(cfg.model)
            config, _ = load_config(directory)
            positions = getattr(config, "max_length", config.max_position_embeddings)  # RoBERTa's: 2 fewer
            return (
                family_of(config).load().load_tokenizer(directory, config),  # RoBERTa's byte-level BPE, ...
                positions,
                f"{Path(directory).name}'s tokenizer",
                directory,
            )
    if cfg.vocab and Path(cfg.vocab).is_file():
        return BertTokenizer.from_vocab(cfg.vocab), 512, f"{cfg.vocab}", None
    shipped = default_model_path()
    return BertTokenizer.from_dir(shipped), 512, f"{shipped.name}'s tokenizer (the job trains its own vocabulary)", None


# --------------------------------------------------------------------------------------
# Pretraining: instances made as the run makes them, from a sample of its corpus
# --------------------------------------------------------------------------------------
PRETRAIN_DOC_SAMPLE = 300  # documents read to learn a corpus's instance lengths
PRETRAIN_DOC_SENTENCES = 400  # of each, at most this many sentences (a whole book would take seconds)
PRETRAIN_LONGEST = 50  # of them, the corpus's longest documents


def pretraining_tokens(cfg, micro_batch: int) -> TaskTokens:
    """The real and padded row lengths of a pretraining job's first phase: instances made as the run
    makes them (Google's `create_instances`: a document's last instance and 10% of the others are
    short) from up to PRETRAIN_DOC_SAMPLE of its corpus's documents, each document's instances
    weighted by how much of it was read (a long book is mostly full rows). `features` is the
    instances of one pass over the corpus. Raises BertLabError/OSError when the corpus cannot be read."""
    stamps = []
    for source in cfg.corpus:  # a folder by its newest file, so an edited file is read again
        path = Path(str(source)).expanduser()
        files = [path] + (list(path.rglob("*")) if path.is_dir() else [])
        stamps.append(max((f.stat().st_mtime for f in files if f.exists()), default=0.0))  # 'default', hf:: 0
    vocab = cfg.vocab or (str(Path(cfg.init_from) / "vocab.txt") if cfg.init_from else None)
    return _pretraining_tokens(
        tuple(str(s) for s in cfg.corpus), cfg.corpus_format, cfg.data, vocab, cfg.lowercase, micro_batch, tuple(stamps)
    )


@functools.lru_cache(maxsize=4)  # keyed by the sources' modification times, as `_task_tokens`
def _corpus_sample(corpus, fmt, stamps) -> tuple[list, list[float], int]:
    """(sampled documents cut to PRETRAIN_DOC_SENTENCES, each one's weight: the documents it stands
    for x its sentences / those kept, the corpus's documents in all)."""
    from bertlab.data.corpus import load_corpus  # deferred: reading a corpus imports what its source needs

    documents = load_corpus(corpus, fmt).documents
    # the longest documents always (a book makes thousands of rows: left to chance it swings the mean),
    # a random sample of the rest, each standing for its share of them
    by_length = sorted(range(len(documents)), key=lambda i: -len(documents[i]))
    longest, rest = by_length[:PRETRAIN_LONGEST], by_length[PRETRAIN_LONGEST:]
    drawn = random.Random(0).sample(rest, min(PRETRAIN_DOC_SAMPLE - len(longest), len(rest)))
    share = {i: 1.0 for i in longest} | {i: len(rest) / max(1, len(drawn)) for i in drawn}
    picked = sorted(share)
    sample = [documents[i][:PRETRAIN_DOC_SENTENCES] for i in picked]
    weights = [share[i] * len(documents[i]) / max(1, len(s)) for i, s in zip(picked, sample, strict=True)]
    return sample, weights, len(documents)


@functools.lru_cache(maxsize=32)
def _pretraining_tokens(corpus, fmt, data, vocab, lowercase, micro_batch, stamps) -> TaskTokens:
    from bertlab.data.pretraining_data import create_instances, tokenize_documents  # deferred: torch
    from bertlab.storage.checkpoint import default_model_path  # deferred: torch
    from bertlab.tokenizer import BertTokenizer  # deferred: tokenizers, only when a corpus is read

    sample, weights, n_documents = _corpus_sample(corpus, fmt, stamps)
    if vocab and Path(vocab).is_file():
        tokenizer = BertTokenizer.from_vocab(vocab, lowercase=lowercase)
        whose = f"{Path(vocab).parent.name}'s vocabulary"
    else:  # a vocabulary still to be trained, or one not here (a Hub model's): about the same lengths
        shipped = default_model_path()
        why = "the job's own is not here" if vocab else "the job trains its own vocabulary"
        tokenizer, whose = BertTokenizer.from_dir(shipped), f"{shipped.name}'s vocabulary ({why})"
    token_docs, kept = [], []  # documents with text, and the weight of each
    for doc, weight in zip(sample, weights, strict=True):
        for ids in tokenize_documents([doc], tokenizer):
            token_docs.append(ids)
            kept.append(weight)
    if len(token_docs) < 2:
        raise BertLabError("the corpus has fewer than two documents with text; next sentence prediction needs two")
    instances = create_instances(token_docs, tokenizer, data, seed=0, dupe_factor=1, mask=False)
    if not instances:
        raise BertLabError("the corpus makes no pretraining instance")
    lengths = [len(x.input_ids) for x in instances]
    weight = [kept[x.doc_a] for x in instances]
    total = sum(weight)
    return TaskTokens(
        real_per_row=sum(n * w for n, w in zip(lengths, weight, strict=True)) / total,
        padded_per_row=float(data.max_seq_length),  # every batch is padded to the phase's length (one shape)
        longest=max(lengths),
        features=round(total),
        source=(
            f"pretraining instances made from {len(token_docs):,} of the corpus's {n_documents:,} documents (its "
            f"{PRETRAIN_LONGEST} longest and a random sample of the rest, "
            if len(token_docs) < n_documents
            else f"pretraining instances made from all {n_documents:,} of the corpus's documents ("
        )
        + f"up to {PRETRAIN_DOC_SENTENCES} sentences each), tokenized with {whose}",
    )
