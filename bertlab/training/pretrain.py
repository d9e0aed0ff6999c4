"""The pretraining recipe: corpus -> tokenizer -> instances -> trainer -> checkpoint + model card.

`bertlab pretrain --config configs/mini.yaml [section.key=value ...] [--resume] [--dry-run]`.
Its settings are a `PretrainConfig`, read and checked by bertlab.training.pretrain_config. A run folder
holds the config, the tokenizer (trained once and kept as vocab.txt), metrics, checkpoints and
the final model (bertlab.storage.runfolder owns the layout). The recipe seeds the global
RNGs (model init, dropout); the trainer does not. The CLI entry points are `add_args` / `run`
(`bertlab pretrain`); `bertlab export` (a finished run as a shipped checkpoint) is bertlab.training.export.

Imports the lower layers: atomic, pretrain_config, corpus, tokenizer (and models.roberta_tokenizer, RoBERTa's
byte-level BPE), pretraining_data, model, checkpoint,
hardware, runfolder, training, and history and model_card for the story of the model a run continues (its
curve and history are carried on when the run is exported).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.atomic import building
from bertlab.config import BertConfig
from bertlab.data.corpus import CORPUS_CREDIT, DEFAULT_CORPUS, Corpus, Document, load_corpus
from bertlab.data.pretraining_data import (
    DataConfig,
    InstanceStore,
    PretrainingBatches,
    collate,
    create_instances,
    data_cache_key,
    pack,
    split_heldout,
    tokenize_documents,
)
from bertlab.errors import InputError
from bertlab.hardware import hardware_description
from bertlab.losses import get_loss, summarize
from bertlab.model import BertForPreTraining
from bertlab.models.registry import build_model as new_model_of_family
from bertlab.models.registry import family_for
from bertlab.models.roberta_tokenizer import RobertaTokenizer
from bertlab.storage.catalog import attention_words
from bertlab.storage.checkpoint import load_pretraining_model, save_checkpoint
from bertlab.storage.model_card import recipe_deviations
from bertlab.storage.runfolder import (
    BPE_VOCAB_FILE,
    CHECKPOINT_DIR,
    EARLIER_HISTORY_FILE,
    RUN_CONFIG_FILE,
    VOCAB_FILE,
    failure_recorded,
    mark_preparing,
    read_run_config,
    run_log,
    runs_root,
    write_run_config,
)
from bertlab.tokenizer import BertTokenizer
from bertlab.training.history import history_for, save_history
from bertlab.training.pretrain_config import PretrainConfig, load_config_file
from bertlab.training.pretrain_config import add_args as add_args  # `bertlab pretrain`'s arguments, torch-free there
from bertlab.training.runtime import process_rank
from bertlab.training.trainer import TrainConfig, TrainResult, train

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# The task the trainer runs
# --------------------------------------------------------------------------------------
class PretrainTask:
    """MLM (+NSP) or left-to-right LM on prepared instances."""

    def __init__(
        self,
        cfg: PretrainConfig,
        tokenizer: BertTokenizer,
        model_config: BertConfig,
        train_stores: list[InstanceStore],
        eval_store: InstanceStore,
        micro_batch: int,
        card: dict,
    ):
        self.cfg, self.tokenizer, self.model_config = cfg, tokenizer, model_config
        self.phases = [
            PretrainingBatches(store, data, tokenizer, micro_batch, cfg.train.seed)
            for store, data in zip(train_stores, cfg.phase_data(), strict=True)
        ]
        self.phase = 0
        self.eval_data = cfg.heldout_data()
        self.eval_store = eval_store
        self.card = card
        self.loss = get_loss(cfg.data.objective_spec.loss)  # the objective owns its loss

    @property
    def static_shapes(self) -> bool:
        """Batches are padded to the phase's length and the masked positions to their cap (the
        left-to-right LM scores every position: its shapes follow the data)."""
        return self.cfg.data.objective_spec.static_shapes

    def phase_at(self, fraction: float) -> int:
        return 1 if len(self.phases) > 1 and fraction >= self.cfg.phase2_at else 0

    def set_phase(self, phase: int) -> None:
        self.phase = phase

    def batches(self, epoch: int, start: int, rank: int, world: int) -> Iterator[dict[str, torch.Tensor]]:
        return self.phases[self.phase](epoch, start, rank, world)

    def batches_per_epoch(self, world: int) -> int:
        return self.phases[self.phase].num_batches(world)

    def forward(self, model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        # the masker never chooses more than max_predictions_per_seq positions in a row: a bound
        # known before the data, which keeps a compiled step's shapes static
        cap = self.phases[self.phase].config.max_predictions_per_seq
        out = self.loss(model, batch, cap)
        return out.loss, out.sums

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        return summarize(sums)

    def evaluate(
        self, model: torch.nn.Module, device: torch.device, autocast: Callable[[], AbstractContextManager]
    ) -> dict[str, float]:
        n = min(len(self.eval_store), self.cfg.eval_instances)
        sums: dict[str, float] = {}
        bs = 64
        for s in range(0, n, bs):
            items = [self.eval_store[i] for i in range(s, min(n, s + bs))]
            batch = collate(items, self.eval_data, self.tokenizer.pad_id)
            batch.pop("num_tokens")
            batch = {k: v.to(device) for k, v in batch.items()}
            with autocast():
                out = self.loss(model, batch, None)
            for key, value in out.sums.items():
                sums[key] = sums.get(key, 0.0) + value
        metrics = self.summarize(sums)
        if "mlm_loss" in metrics:
            metrics["mlm_perplexity"] = math.exp(min(50.0, metrics["mlm_loss"]))
        return metrics

    def save_model(self, directory: Path, model: torch.nn.Module, extra: dict) -> None:
        card = dict(self.card)
        card.update(extra.get("card_updates", {}))
        parent = card.get("init_card")
        if parent:  # continued pretraining: totals over the whole lineage
            for k in ("steps", "tokens", "train_time_s"):
                card[f"total_{k}"] = parent.get(f"total_{k}", parent.get(k, 0)) + card.get(k, 0)
        save_checkpoint(
            directory,
            model,
            self.tokenizer,
            self.model_config,
            extra_config={"objective": self.cfg.data.objective},
            extra_files={"model_card.json": card},
            dtype=torch.float16 if extra.get("snapshot") else None,
        )


# --------------------------------------------------------------------------------------
# Preparing data
# --------------------------------------------------------------------------------------
def prepare_tokenizer(cfg: PretrainConfig, run_dir: Path, documents: Sequence[Document]) -> BertTokenizer:
    """A given vocabulary, the run's own (trained once and kept: vocab.txt, or with `tokenizer: bpe`
    vocab.json + merges.txt), or a newly trained one. Under torchrun one rank trains it while the
    others wait on a lock, then all read the kept file."""
    kind, kept_name = _TOKENIZERS[cfg.tokenizer]
    kept = run_dir / kept_name
    run_dir.mkdir(parents=True, exist_ok=True)
    with building(kept):
        if not kept.is_file():
            _tokenizer_of_run(cfg, documents).save_vocab(kept)
    return kind.from_vocab(kept, lowercase=cfg.lowercase)


# each `PretrainConfig.tokenizer`: its class and the file a run keeps it by (BPE's merges.txt lies beside)
_TOKENIZERS: dict[str, tuple[type[BertTokenizer], str]] = {
    "wordpiece": (BertTokenizer, VOCAB_FILE),
    "bpe": (RobertaTokenizer, BPE_VOCAB_FILE),
}


def _tokenizer_of_run(cfg: PretrainConfig, documents: Sequence[Document]) -> BertTokenizer:
    """The vocabulary `cfg` names (its own, or the one of the model it continues), or one trained now."""
    kind, kept_name = _TOKENIZERS[cfg.tokenizer]
    vocab = cfg.vocab or (str(Path(cfg.init_from) / kept_name) if cfg.init_from else None)
    if vocab:
        if not Path(vocab).is_file():
            raise InputError(f"{vocab}: vocabulary file not found")
        return kind.from_vocab(vocab, lowercase=cfg.lowercase)
    t0 = time.time()
    tok = kind.train(texts=(s for d in documents for s in d), vocab_size=cfg.vocab_size, lowercase=cfg.lowercase)
    log.info("trained a %d-token %s vocabulary in %.1fs", len(tok), cfg.tokenizer, time.time() - t0)
    return tok


def prepare_data(
    cfg: PretrainConfig, corpus: Corpus, tokenizer: BertTokenizer
) -> tuple[list[InstanceStore], InstanceStore, dict]:
    """Train instance stores (one per data phase) and the held-out store (made like the last
    phase), built once and cached under a hash of their inputs. Every phase holds out the same
    documents (the split depends on the seed, `heldout_fraction` and `heldout_corpus` only)."""
    phases = cfg.phase_data()
    stats: dict[str, Any] = {}
    docs = split_documents(cfg, corpus)
    train = []
    for i, data in enumerate(phases):
        store, st = _prepare_split(cfg, data, docs, tokenizer, "train")
        train.append(store)
        stats.update({(f"train_phase{i + 1}" if i else "train"): st} if st else {})
    held, st = _prepare_split(cfg, cfg.heldout_data(), docs, tokenizer, "heldout")
    stats.update({"heldout": st} if st else {})
    if any(len(s) == 0 for s in train):
        raise InputError("the corpus produced no training instances; give more text")
    return train, held, stats


@dataclass(frozen=True)
class SplitDocuments:
    """The documents a run trains on and those it holds out, with a fingerprint of what chose them."""

    train: list[Document]
    heldout: list[Document]
    fingerprint: str  # the corpus's, or the corpus's and the held-out corpus's


def split_documents(cfg: PretrainConfig, corpus: Corpus) -> SplitDocuments:
    """Train and held-out documents: a seeded split of `corpus`, or with `heldout_corpus` that
    corpus's held-out split and every document of `corpus` that is not one of them.

    Raises:
        InputError: `heldout_corpus` leaves no document to train on.
    """
    if not cfg.heldout_corpus:
        train_idx, held_idx = split_heldout(len(corpus.documents), cfg.data, cfg.train.seed)
        docs = corpus.documents
        return SplitDocuments([docs[i] for i in train_idx], [docs[i] for i in held_idx], corpus.fingerprint)
    other = load_corpus(cfg.heldout_corpus, cfg.corpus_format)
    _, held_idx = split_heldout(len(other.documents), cfg.data, cfg.train.seed)
    held = [other.documents[i] for i in held_idx]
    keys = {tuple(d) for d in held}
    train = [d for d in corpus.documents if tuple(d) not in keys]
    if not train:
        raise InputError("heldout_corpus holds out every document of the corpus: nothing is left to train on")
    log.info(
        "held-out documents from %s: %d; %d training documents", ", ".join(cfg.heldout_corpus), len(held), len(train)
    )
    return SplitDocuments(train, held, f"{corpus.fingerprint}|heldout:{other.fingerprint}")


def _prepare_split(
    cfg: PretrainConfig, data: DataConfig, split_docs: SplitDocuments, tokenizer: BertTokenizer, split: str
) -> tuple[InstanceStore, dict]:
    """One split's instances made with `data`, from the cache when it has them; returns stats
    only when the instances were made now.

    Several processes may want the same cache file at once: the ranks of a torchrun job (before
    the trainer creates the process group, so a lock rather than a barrier), or runs with the
    same data settings side by side. One builds it under `building`'s lock; the others wait and
    load it."""
    cache = Path(os.path.expanduser(cfg.cache_dir))
    key = data_cache_key(split_docs.fingerprint, tokenizer, data, cfg.train.seed, split)
    path = cache / f"{split}-{key}.npz"
    with building(path):
        if path.is_file():
            store = InstanceStore.load(path)
            log.info("%s data: %d instances from cache %s", split, len(store), path)
            return store, {}
        store, stats = _make_split(cfg, data, split_docs, tokenizer, split)
        store.save(path)
    return store, stats


def _make_split(
    cfg: PretrainConfig, data: DataConfig, split_docs: SplitDocuments, tokenizer: BertTokenizer, split: str
) -> tuple[InstanceStore, dict]:
    """One split's instances, made now: (store, stats of the making)."""
    docs, dupe = (split_docs.train, None) if split == "train" else (split_docs.heldout, 1)
    t0 = time.time()
    token_docs = tokenize_documents(docs, tokenizer)
    t_tok = time.time() - t0
    n_tok = sum(len(s) for d in token_docs for s in d)
    dynamic = data.masking == "dynamic"
    instances = create_instances(
        token_docs,
        tokenizer,
        data,
        cfg.train.seed + (split == "heldout"),
        dupe_factor=1 if dynamic else dupe,
        mask=not dynamic or split == "heldout",
    )
    store = InstanceStore(pack(instances))
    elapsed = time.time() - t0
    log.info(
        "%s data: %d docs, %d tokens tokenized at %.0f tok/s, %d instances in %.1fs (max_seq_length %d)",
        split,
        len(docs),
        n_tok,
        n_tok / max(t_tok, 1e-9),
        len(store),
        elapsed,
        data.max_seq_length,
    )
    return store, {
        "documents": len(docs),
        "corpus_tokens": n_tok,
        "instances": len(store),
        "tokenize_tokens_per_s": n_tok / max(t_tok, 1e-9),
        "prepare_s": elapsed,
    }


def initialize_from(model: BertForPreTraining, path: str, copy_positions: int = 0) -> dict:
    """Copy a checkpoint's weights into `model` (continued pretraining); returns card fields about it.

    The checkpoint must have the same shapes (size, vocabulary, NSP head), but for a longer position
    table (extend_positions); a run that resumes loads its own checkpoint over these weights afterwards.
    copy_positions: fill the table with copies of the checkpoint's first N positions (0: all of its own).
    """
    source, _, info = load_pretraining_model(path, whole=True)  # a pair folder: the pair, both halves
    theirs = source.state_dict()
    copied = extend_positions(theirs, model, copy_positions)
    mismatched = [
        f"{k} {tuple(v.shape)} vs {tuple(theirs[k].shape)}"
        for k, v in model.state_dict().items()
        if k in theirs and theirs[k].shape != v.shape
    ]
    missing = [k for k in model.state_dict() if k not in theirs]
    if mismatched or missing:
        raise InputError(
            f"init_from={path}: the checkpoint does not fit this model's configuration "
            f"({'; '.join(mismatched[:3] or missing[:3])}); use the same size, vocabulary and objective"
        )
    model.load_state_dict(theirs)
    parent = info.get("card", {})
    log.info(
        "initialized from %s (%s steps, %s tokens before)",
        path,
        parent.get("total_steps", parent.get("steps")),
        parent.get("total_tokens", parent.get("tokens")),
    )
    return {
        "init_from": str(path),
        "init_card": {
            k: parent.get(k)
            for k in (
                "name",
                "steps",
                "tokens",
                "train_time_s",
                "total_steps",
                "total_tokens",
                "total_train_time_s",
                "metrics",
                "command",
                "learning_curve",  # carried on in this run's exported card, before its own points
            )
            if k in parent
        }
        | {"deviations": recipe_deviations(parent)},
    } | ({"positions_copied": copied} if copied else {})


def extend_positions(theirs: dict, model: torch.nn.Module, learned: int = 0) -> str | None:
    """Fill a longer position table from a shorter checkpoint's, as Longformer did (Beltagy et al. 2020,
    section 5): the learned rows copied again and again, so that every position starts as one the model
    knows (a RoBERTa-style table keeps its padding offset's rows once). `learned` > 0 copies only the
    first `learned` rows, for a model that saw only inputs that long (its other rows are untrained), even
    into a table of the same length. Changes `theirs` in place; says what it did, or None if nothing."""
    said = None
    for key, ours in model.state_dict().items():
        if not key.endswith("embeddings.position_embeddings.weight") or key not in theirs:
            continue
        old = theirs[key]
        if (old.shape[0] >= ours.shape[0] and not learned) or old.shape[1:] != ours.shape[1:]:
            continue
        offset = ours.shape[0] - getattr(model.config, "max_length", ours.shape[0])  # RoBERTa: pad_token_id + 1
        rows = old[offset : offset + learned] if learned else old[offset:]
        reps = -(-(ours.shape[0] - offset) // rows.shape[0])
        theirs[key] = torch.cat([old[:offset], rows.repeat(reps, 1)])[: ours.shape[0]].clone()
        said = f"{rows.shape[0]} learned positions copied to fill {ours.shape[0] - offset}"
        log.info("%s: %s", key, said)
    return said


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------
def run_pretraining(
    cfg: PretrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    dry_run: bool = False,
    progress_bar: bool = True,
    stop_after_steps: int | None = None,
    command: str | None = None,
) -> TrainResult:
    """Run (or resume) a pretraining run."""
    with failure_recorded(run_dir):
        return _run_pretraining(
            cfg,
            run_dir,
            resume=resume,
            dry_run=dry_run,
            progress_bar=progress_bar,
            stop_after_steps=stop_after_steps,
            command=command,
        )


def _run_pretraining(
    cfg: PretrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    dry_run: bool = False,
    progress_bar: bool = True,
    stop_after_steps: int | None = None,
    command: str | None = None,
) -> TrainResult:
    run_dir = Path(run_dir)
    cfg, saved = settings_for_run(cfg, run_dir, resume, dry_run)
    command = saved.get("command") or command or " ".join(sys.argv)  # the card names the command that started the run
    run_dir.mkdir(parents=True, exist_ok=True)
    mark_preparing(run_dir, resume)
    t0 = time.time()
    corpus = load_corpus(cfg.corpus, cfg.corpus_format)
    tokenizer = prepare_tokenizer(cfg, run_dir, corpus.documents)
    train_stores, eval_store, data_stats = prepare_data(cfg, corpus, tokenizer)
    train_store = train_stores[0]
    model_config = family_config(cfg, len(tokenizer), tokenizer.pad_id)
    model, init_info = build_model(cfg, model_config, run_dir, saved)
    write_run_config(
        run_dir,
        {
            "kind": "pretrain",
            "config": cfg.to_dict(),
            "model_config": asdict(model_config),
            "command": command,
            "data_stats": data_stats,
            "init": init_info,
        },
    )
    card = card_of_run(cfg, model_config, corpus, train_store, command) | (init_info or {})
    micro = cfg.train.batch_size // cfg.train.grad_accum
    task = PretrainTask(cfg, tokenizer, model_config, train_stores, eval_store, micro, card)
    log.info(
        "model: %s, %.1fM parameters; %d training instances; data ready in %.1fs",
        cfg.size,
        model.num_parameters() / 1e6,
        len(train_store),
        time.time() - t0,
    )
    seed = cfg.train.seed + process_rank()  # each torchrun process draws its own dropout masks
    torch.manual_seed(seed)
    random.seed(seed)
    return train(
        task, model, cfg.train, run_dir, resume=resume, progress_bar=progress_bar, stop_after_steps=stop_after_steps
    )


def settings_for_run(cfg: PretrainConfig, run_dir: Path, resume: bool, dry_run: bool) -> tuple[PretrainConfig, dict]:
    """(the config the run uses, its saved run_config or {}): the saved config on resume (a folder
    that holds a run needs --resume), or one step for a dry run."""
    saved: dict = {}
    if resume and dry_run:  # a dry run's one-step budget would mark the resumed run finished
        raise InputError("--dry-run makes a new one-step run; leave out --resume (or --dry-run)")
    if resume:
        saved = read_run_config(run_dir)
        if saved is None:
            raise InputError(f"{run_dir}: no {RUN_CONFIG_FILE} to resume")
        cfg = PretrainConfig.from_dict(saved["config"])
    elif (run_dir / CHECKPOINT_DIR).exists():  # a dry run too: it would write its one step over the run
        raise InputError(f"{run_dir} already holds a run; use --resume to continue it or choose another --run-dir")
    if dry_run:
        cfg = dataclasses.replace(
            cfg,
            train=dataclasses.replace(cfg.train, max_steps=1, max_tokens=0, max_time_s=0, eval_every=0),
            eval_instances=64,
        )
    return cfg, saved


def family_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int = 0) -> BertConfig:
    """The model config of the run's family: the size preset and the objective's heads
    (`PretrainConfig.model_config`) with the family's own `model_overrides` keys (its config_keys),
    read by the family (bertlab.models.registry) as from config.json, so a family can add its own fields."""
    shared = cfg.model_config(vocab_size)
    source = f"model_type={cfg.model_type}"
    return (
        family_for({"model_type": cfg.model_type}, source)
        .load()
        .config_from_hf(
            {
                # the sentence-order head, for a family that has one (ALBERT), when the objective trains it
                **shared.to_hf_dict(extra={"use_sop_head": cfg.data.objective_spec.pair_head == "sop"}),
                **cfg.family_overrides,
                "model_type": cfg.model_type,
                # the tokenizer's <pad>: the row the embeddings keep at zero (RoBERTa also counts positions from it)
                "pad_token_id": pad_token_id,
            },
            source,
        )
    )


def build_model(
    cfg: PretrainConfig, model_config: BertConfig, run_dir: Path, saved: dict
) -> tuple[BertForPreTraining, dict | None]:
    """The model at its seeded init, or continuing `cfg.init_from` (then also what it started from,
    for the card, and that model's learning history, kept to carry on when the run is exported)."""
    torch.manual_seed(cfg.train.seed)
    model = new_model_of_family(model_config)
    if cfg.dropout is not None:
        model.set_dropout(cfg.dropout)
    if not cfg.init_from:
        return model, None
    # a resumed run loads its own checkpoint over these weights; it keeps the first start's record
    init_info = saved.get("init") or initialize_from(model, cfg.init_from, cfg.copy_positions)
    if not saved.get("init") and (earlier := history_for(cfg.init_from)) is not None:
        save_history(earlier, run_dir / EARLIER_HISTORY_FILE)
    return model, init_info


def card_of_run(
    cfg: PretrainConfig, model_config: BertConfig, corpus: Corpus, train_store: InstanceStore, command: str
) -> dict:
    """The pretrained model's card: objective, size, corpus and its credit, data and training settings."""
    return {
        "name": cfg.name,
        "objective": cfg.data.objective,
        "size": cfg.size,
        "corpus": list(cfg.corpus),
        "corpus_credit": CORPUS_CREDIT if DEFAULT_CORPUS in cfg.corpus else None,
        "corpus_documents": len(corpus.documents),
        "corpus_sentences": corpus.num_sentences,
        "train_instances": len(train_store),
        "train_instance_tokens": train_store.num_tokens,
        "command": command,
        "hardware": hardware_description(cfg.train.num_threads, cfg.train.device),
        "data_config": asdict(cfg.data),
        "phase2": dict(cfg.phase2) or None,
        "eval_data": asdict(cfg.heldout_data()),
        "train_config": asdict(cfg.train),
        "pretrain_dropout": cfg.dropout if cfg.dropout is not None else model_config.hidden_dropout,
    } | ({"attention": attention_words(model_config)} if model_config.sparse else {})


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    """`bertlab pretrain`: train (or resume) and print the result as one JSON line."""
    logging.getLogger("bertlab").setLevel(logging.INFO)
    if args.resume and not args.run_dir:
        raise InputError("--resume needs --run-dir")
    cfg = (
        load_config_file(args.config, args.overrides)
        if not args.resume
        else PretrainConfig(train=TrainConfig(max_steps=1))
    )
    run_dir = Path(args.run_dir) if args.run_dir else runs_root() / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    command = "bertlab pretrain " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "bertlab pretrain"
    with run_log(run_dir, first_line=command, create=not args.resume):
        result = run_pretraining(
            cfg, run_dir, resume=args.resume, dry_run=args.dry_run, progress_bar=not args.no_progress, command=command
        )
    print(
        json.dumps(
            {"state": result.state, "run_dir": str(run_dir), "step": result.progress.step, "eval": result.last_eval}
        )
    )
    return 0 if result.state == "finished" else 3
