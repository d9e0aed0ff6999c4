"""The fine-tuning recipe: task data -> features -> shared trainer -> fine-tuned model + card.

`bertlab finetune --task sst2 --data PATH --model DIR ...` (see `add_args`). The loop itself is
bertlab.training.train (budgets, warm-up, mixed precision, atomic checkpoints, resume, metrics,
torchrun); this module supplies the `TrainTask` for a fine-tuning task and seeds the global RNGs
(head init, dropout). The run folder layout is bertlab.runfolder's, with the final model in
run_dir/model (and its model_card.json). `add_args` / `run` are the `bertlab finetune` CLI.

Imports the lower layers: checkpoint, config, hardware, runfolder, tokenizer, training, bertlab.finetune.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from bertlab.checkpoint import load_config, load_state, normalize_keys, read_weights, resolve, weights_file
from bertlab.config import dataclass_from_dict, preset
from bertlab.errors import CheckpointError, InputError
from bertlab.finetune.data import Example, SequenceExample, TaggingExample, load_task_data
from bertlab.finetune.encoding import Feature, collate, encode_qa, encode_sequences, encode_tagging
from bertlab.finetune.evaluation import decode, run_model, score
from bertlab.finetune.models import FEATURES_HELP, HeadConfig, build_task_model
from bertlab.finetune.predict import TaskSetup, save_finetuned
from bertlab.finetune.tasks import TASKS, TaskSpec, get_task
from bertlab.hardware import hardware_description
from bertlab.inference import default_model_path
from bertlab.runfolder import (
    CHECKPOINT_DIR,
    VOCAB_FILE,
    failure_recorded,
    mark_preparing,
    read_run_config,
    runs_root,
    write_run_config,
)
from bertlab.tokenizer import BertTokenizer
from bertlab.training import TrainConfig, TrainResult, train
from bertlab.training_runtime import process_rank

log = logging.getLogger(__name__)

SPLIT_SEED = 0  # --split-dev: one fixed split, whatever the training seed
SQUAD_MAX_SEQ_LENGTH = 384  # google-research/bert run_squad.py (doc_stride 128, max_query_length 64)


@dataclass(frozen=True)
class FinetuneConfig:
    """A whole fine-tuning run; saved in run_config.json."""

    task: str  # sst2 | cola | mrpc | rte | qnli | mnli | stsb | upos | ner | squad
    data: str  # a folder with the task's files, a file, or hf:[PATH[:CONFIG]]
    model: str | None = None  # pretrained checkpoint folder or Hub id; None = random init of `size`
    size: str = "tiny"  # preset for random init (the paper's "no pretraining" baseline)
    vocab: str | None = None  # vocab.txt for random init; None trains a WordPiece vocab on the train text
    vocab_size: int = 8000  # for a trained vocabulary
    train_file: str | None = None  # overrides the task's default file names inside `data`
    dev_file: str | None = None
    split_dev: float = 0.0  # DEMO ONLY: train on this fraction of the dev file, evaluate on the rest
    max_train_examples: int = 0  # 0 = all; a quick trial takes the first N
    max_eval_examples: int = 0  # 0 = all
    max_seq_length: int = 128  # tokens per input, specials included (the CLI uses 384 for SQuAD)
    doc_stride: int = 128  # QA: tokens between the starts of consecutive context windows
    max_query_length: int = 64  # QA: question pieces kept
    max_answer_length: int = 30  # QA: longest answer in pieces
    n_best: int = 20  # QA: start / end candidates per window
    mode: str = "finetune"  # finetune | feature (frozen encoder, paper Table 7)
    features: str = "last"  # FEATURES_HELP
    bilstm: bool = False  # BiLSTM between encoder and output layer ("+ BiLSTM" ablation)
    lstm_hidden: int = 0  # 0 = the encoder's hidden size
    lstm_layers: int = 2
    classifier_dropout: float | None = None
    epochs: float = 0.0  # when > 0, sets train.max_steps to this many passes over the train set
    eval_batch_size: int = 64
    train: TrainConfig = field(
        default_factory=lambda: TrainConfig(
            learning_rate=5e-5, warmup=0.1, batch_size=32, max_steps=1000, eval_every=0, save_every=0, log_every=20
        )
    )

    def __post_init__(self):
        get_task(self.task)
        if self.max_seq_length < 8:
            raise InputError("max_seq_length must be at least 8")

    @property
    def spec(self) -> TaskSpec:
        return get_task(self.task)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> FinetuneConfig:
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InputError(f"unknown finetune config keys {sorted(unknown)}; known: {sorted(known)}")
        if "train" in data and isinstance(data["train"], dict):
            data["train"] = dataclass_from_dict(TrainConfig, data["train"], "train")
        return cls(**data)


# --------------------------------------------------------------------------------------
# The task the trainer runs
# --------------------------------------------------------------------------------------
class FinetuneTask:
    """Batches of encoded train features; dev evaluation with the task's official metric."""

    def __init__(
        self,
        cfg: FinetuneConfig,
        setup: TaskSetup,
        tokenizer: BertTokenizer,
        train_features: list[Feature],
        dev_examples: list[Example],
        dev_features: list[Feature],
        micro_batch: int,
        card: dict,
    ):
        self.cfg, self.spec, self.setup, self.tokenizer = cfg, cfg.spec, setup, tokenizer
        self.train_features = train_features
        self.dev_examples, self.dev_features = dev_examples, dev_features
        self.micro_batch = micro_batch
        self.card = card

    # --- TrainTask -------------------------------------------------------------------------
    def _rank_indices(self, epoch: int, rank: int, world: int) -> list[int]:
        g = torch.Generator().manual_seed(self.cfg.train.seed * 1_000_003 + epoch)
        order = torch.randperm(len(self.train_features), generator=g).tolist()
        per_rank = len(order) // world if world > 1 else len(order)  # equal shares keep DDP in step
        return order[rank * per_rank : (rank + 1) * per_rank]

    def batches(self, epoch: int, start: int, rank: int, world: int) -> Iterator[dict]:
        idx = self._rank_indices(epoch, rank, world)
        for b in range(start, self.batches_per_epoch(world)):
            chunk = idx[b * self.micro_batch : (b + 1) * self.micro_batch]
            yield collate([self.train_features[i] for i in chunk], self.tokenizer.pad_id, self.spec.shape)

    def batches_per_epoch(self, world: int) -> int:
        n = len(self.train_features) // world if world > 1 else len(self.train_features)
        return math.ceil(n / self.micro_batch)

    def forward(self, model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        out = model(**batch)
        shape = self.spec.shape
        stats: dict[str, float] = {}
        if shape in ("single", "pair"):
            stats = {
                "correct": float((out.logits.argmax(-1) == batch["labels"]).sum()),
                "count": float(batch["labels"].numel()),
            }
        elif shape == "tagging":
            mask = batch["labels"] != -100
            stats = {
                "correct": float((out.logits.argmax(-1)[mask] == batch["labels"][mask]).sum()),
                "count": float(mask.sum()),
            }
        elif shape == "qa":
            hit = (out.start_logits.argmax(-1) == batch["start_positions"]) & (
                out.end_logits.argmax(-1) == batch["end_positions"]
            )
            stats = {"correct": float(hit.sum()), "count": float(hit.numel())}
        return out.loss, stats

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        if sums.get("count"):
            key = "span_acc" if self.spec.shape == "qa" else "acc"
            return {key: sums["correct"] / sums["count"]}
        return {}

    def evaluate(
        self, model: torch.nn.Module, device: torch.device, autocast: Callable[[], AbstractContextManager]
    ) -> dict[str, float]:
        return evaluate_model(
            model,
            self.setup,
            self.spec,
            self.tokenizer,
            self.dev_examples,
            self.dev_features,
            device,
            autocast,
            self.cfg.eval_batch_size,
        )

    def save_model(self, directory: Path, model: torch.nn.Module, extra: dict) -> None:
        card = dict(self.card)
        card.update(extra.get("card_updates", {}))
        save_finetuned(directory, model, self.tokenizer, self.setup, card)


def evaluate_model(
    model: torch.nn.Module,
    setup: TaskSetup,
    spec: TaskSpec,
    tokenizer: BertTokenizer,
    examples: list[Example],
    features: list[Feature],
    device: torch.device | str,
    autocast: Callable[[], AbstractContextManager] | None = None,
    batch_size: int = 64,
) -> dict[str, float]:
    """The official dev metrics of `model` on `examples`."""
    outputs = run_model(model, features, spec.shape, tokenizer.pad_id, device, batch_size, autocast)
    answers = decode(spec.shape, examples, features, outputs, setup.labels, setup.n_best, setup.max_answer_length)
    return score(spec, examples, answers)


# --------------------------------------------------------------------------------------
# Preparing model and data
# --------------------------------------------------------------------------------------
def task_labels(spec: TaskSpec, train: list[Example], dev: list[Example]) -> tuple[str, ...]:
    """The output classes: the task's fixed set, or (NER) O then B-/I- tags sorted by type."""
    if spec.shape == "regression":
        return ("score",)
    if spec.shape == "qa":
        return ()
    if spec.labels:
        return spec.labels
    tags = {t for ex in list(train) + list(dev) for t in ex.tags}
    return ("O",) + tuple(sorted(tags - {"O"}, key=lambda t: (t[2:], t[0])))


def _texts(examples: list[Example]) -> Iterator[str]:
    for ex in examples:
        if isinstance(ex, SequenceExample):
            yield ex.text_a
            if ex.text_b:
                yield ex.text_b
        elif isinstance(ex, TaggingExample):
            yield " ".join(ex.words)
        else:
            yield ex.question
            yield ex.context


def prepare_model(
    cfg: FinetuneConfig, run_dir: Path, head: HeadConfig, train_examples: list[Example]
) -> tuple[torch.nn.Module, BertTokenizer, str]:
    """(model, tokenizer, source note): encoder weights from `cfg.model` with a fresh head, or a
    random-init preset with the given / a newly trained vocabulary."""
    if cfg.model:
        directory = resolve(cfg.model)
        config, _ = load_config(directory)
        model = build_task_model(config, head)
        # only the encoder comes over: heads (MLM, NSP, another task's classifier) start fresh
        state = {k: v for k, v in normalize_keys(read_weights(directory)).items() if k.startswith("bert.")}
        missing = load_state(model, state, str(weights_file(directory)))
        if any(k.startswith("bert.pooler.") for k in missing):
            log.info("%s has no pooler weights; the pooler starts from random init", directory)
        tokenizer = BertTokenizer.from_dir(directory, config.max_position_embeddings)
        if len(tokenizer) > config.vocab_size:
            raise CheckpointError(f"{directory}/vocab.txt has more tokens than config.json's vocab_size")
        return model, tokenizer, str(directory)
    kept = run_dir / VOCAB_FILE
    if kept.is_file():
        tokenizer = BertTokenizer.from_vocab(kept)
    elif cfg.vocab:
        tokenizer = BertTokenizer.from_vocab(cfg.vocab)
    else:
        tokenizer = BertTokenizer.train(texts=_texts(train_examples), vocab_size=cfg.vocab_size, lowercase=True)
        log.info("trained a %d-token WordPiece vocabulary on the training text", len(tokenizer))
    run_dir.mkdir(parents=True, exist_ok=True)
    if not kept.is_file():
        tokenizer.save_vocab(kept)  # a resumed run must see the same vocabulary
    config = preset(cfg.size, vocab_size=len(tokenizer), max_position_embeddings=max(512, cfg.max_seq_length))
    return build_task_model(config, head), tokenizer, f"random init ({cfg.size})"


def encode(
    spec: TaskSpec, setup: TaskSetup, tokenizer: BertTokenizer, examples: list[Example], training: bool
) -> list[Feature]:
    """Model inputs for `examples` in the task's shape."""
    if spec.shape == "qa":
        return encode_qa(
            examples, tokenizer, setup.max_seq_length, setup.doc_stride, setup.max_query_length, with_answers=training
        )
    label_to_id = {name: i for i, name in enumerate(setup.labels)}
    if spec.shape == "tagging":
        return encode_tagging(examples, tokenizer, setup.max_seq_length, label_to_id)
    return encode_sequences(
        examples, tokenizer, setup.max_seq_length, None if spec.shape == "regression" else label_to_id
    )


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------
def run_finetuning(
    cfg: FinetuneConfig,
    run_dir: str | Path,
    resume: bool = False,
    dry_run: bool = False,
    progress_bar: bool = True,
    stop_after_steps: int | None = None,
    command: str | None = None,
) -> TrainResult:
    """Fine-tune (or resume fine-tuning)."""
    with failure_recorded(run_dir):
        return _run_finetuning(
            cfg,
            run_dir,
            resume=resume,
            dry_run=dry_run,
            progress_bar=progress_bar,
            stop_after_steps=stop_after_steps,
            command=command,
        )


def _run_finetuning(
    cfg: FinetuneConfig,
    run_dir: str | Path,
    resume: bool = False,
    dry_run: bool = False,
    progress_bar: bool = True,
    stop_after_steps: int | None = None,
    command: str | None = None,
) -> TrainResult:
    run_dir = Path(run_dir)
    if resume:
        saved = read_run_config(run_dir)
        if saved is None or saved.get("kind") != "finetune":
            raise InputError(f"{run_dir}: no fine-tuning run_config.json to resume")
        cfg = FinetuneConfig.from_dict(saved["config"])
    elif (run_dir / CHECKPOINT_DIR).exists() and not dry_run:
        raise InputError(f"{run_dir} already holds a run; use --resume to continue it or choose another --run-dir")
    if dry_run:
        cfg = dataclasses.replace(
            cfg,
            epochs=0.0,
            max_train_examples=cfg.max_train_examples or 64,
            max_eval_examples=cfg.max_eval_examples or 64,
            train=dataclasses.replace(cfg.train, max_steps=1, max_tokens=0, max_time_s=0, eval_every=0),
        )
    spec = cfg.spec
    run_dir.mkdir(parents=True, exist_ok=True)
    mark_preparing(run_dir, resume)
    t0 = time.time()
    # the split does not follow the training seed: runs with different seeds train and score on the same examples
    data = load_task_data(spec, cfg.data, cfg.train_file, cfg.dev_file, cfg.split_dev, SPLIT_SEED)
    train_examples = data.train[: cfg.max_train_examples] if cfg.max_train_examples else data.train
    dev_examples = data.dev[: cfg.max_eval_examples] if cfg.max_eval_examples else data.dev
    labels = task_labels(spec, data.train, data.dev)
    head = HeadConfig(
        shape=spec.shape,
        num_labels=2 if spec.shape == "qa" else len(labels),
        mode=cfg.mode,
        features=cfg.features,
        bilstm=cfg.bilstm,
        lstm_hidden=cfg.lstm_hidden,
        lstm_layers=cfg.lstm_layers,
        classifier_dropout=cfg.classifier_dropout,
    )
    torch.manual_seed(cfg.train.seed)
    model, tokenizer, model_source = prepare_model(cfg, run_dir, head, train_examples)
    max_len = cfg.max_seq_length
    if max_len > model.config.max_position_embeddings:
        max_len = model.config.max_position_embeddings
        log.warning(
            "max_seq_length %d is more than the model's %d positions; using %d", cfg.max_seq_length, max_len, max_len
        )
    setup = TaskSetup(
        spec.name,
        spec.shape,
        labels,
        head,
        max_len,
        cfg.doc_stride,
        cfg.max_query_length,
        cfg.max_answer_length,
        cfg.n_best,
    )
    train_features = encode(spec, setup, tokenizer, train_examples, training=True)
    dev_features = encode(spec, setup, tokenizer, dev_examples, training=False)
    micro = cfg.train.batch_size // cfg.train.grad_accum
    train_cfg = cfg.train
    if cfg.epochs > 0:
        steps = max(1, math.ceil(cfg.epochs * math.ceil(len(train_features) / micro) / cfg.train.grad_accum))
        train_cfg = dataclasses.replace(train_cfg, max_steps=steps)
    truncated = sum(f.truncated for f in train_features)
    prep_s = time.time() - t0
    log.info(
        "%s: %d train examples -> %d features (%d truncated or windowed), %d dev examples; "
        "%s, %.2fM trainable of %.2fM parameters; ready in %.1fs",
        spec.name,
        len(train_examples),
        len(train_features),
        truncated,
        len(dev_examples),
        model_source,
        model.num_parameters(True) / 1e6,
        model.num_parameters() / 1e6,
        prep_s,
    )
    command = command or " ".join(sys.argv)
    write_run_config(
        run_dir,
        {
            "kind": "finetune",
            "config": cfg.to_dict(),
            "effective_train": asdict(train_cfg),
            "task_setup": setup.to_dict(),
            "model_config": asdict(model.config),
            "command": command,
        },
    )
    card = {
        "task": spec.name,
        "task_description": spec.description,
        "task_shape": spec.shape,
        "labels": list(labels),
        "base_model": model_source,
        "mode": cfg.mode,
        "features": cfg.features,
        "bilstm": head.use_bilstm,
        "train_data": data.train_source,
        "dev_data": data.dev_source,
        "train_examples": len(train_examples),
        "dev_examples": len(dev_examples),
        "demo_split": bool(cfg.split_dev),
        "max_seq_length": max_len,
        "command": command,
        "hardware": hardware_description(train_cfg.num_threads),
        "train_config": asdict(train_cfg),
        "main_metric": spec.main_metric,
    }
    task = FinetuneTask(cfg, setup, tokenizer, train_features, dev_examples, dev_features, micro, card)
    seed = train_cfg.seed + process_rank()  # each torchrun process draws its own dropout masks
    torch.manual_seed(seed)
    random.seed(seed)
    return train(
        task,
        model,
        train_cfg,
        run_dir,
        resume=resume,
        progress_bar=progress_bar,
        stop_after_steps=stop_after_steps,
        extra_state={"task": spec.name},
    )


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of `bertlab finetune`."""
    task_or_status = p.add_mutually_exclusive_group(required=True)
    task_or_status.add_argument("--task", choices=sorted(TASKS), help="which task (its shape, reader and metric)")
    task_or_status.add_argument(
        "--grid-status",
        metavar="FOLDER",
        help="print a --grid's settings, states and dev scores, the best marked, and exit",
    )
    p.add_argument("--data", help="folder with the task's train/dev files, a file, or hf:[PATH[:CONFIG]]")
    p.add_argument("--train-file", help="train file (name inside --data, or a path)")
    p.add_argument("--dev-file", help="dev file (name inside --data, or a path)")
    p.add_argument(
        "--split-dev",
        type=float,
        default=0.0,
        metavar="F",
        help="DEMO ONLY: train on a fraction F of the dev file and evaluate on the rest "
        "(e.g. SQuAD, whose train set is not here); not comparable with published scores",
    )
    p.add_argument(
        "--model",
        help="pretrained checkpoint folder or Hub id (default: the shipped model, "
        "checkpoints/bertlab-mini, unless --size asks for random weights)",
    )
    p.add_argument(
        "--size",
        default=None,
        help="random init of this preset instead of a pretrained model (the paper's "
        "'no pretraining' baseline): tiny, mini, small, medium, base, large",
    )
    p.add_argument("--vocab", help="vocab.txt for random init (default: train one on the training text)")
    p.add_argument(
        "--mode",
        choices=("finetune", "feature"),
        default="finetune",
        help="finetune all weights, or feature-based: frozen encoder + small task model (Table 7)",
    )
    p.add_argument("--features", default="last", help=FEATURES_HELP)
    p.add_argument("--bilstm", action="store_true", help="BiLSTM between encoder and output layer (+ BiLSTM ablation)")
    p.add_argument("--max-steps", type=int, default=0, help="budget in optimizer steps")
    p.add_argument("--max-time-s", type=float, default=0.0, help="budget in seconds of training")
    p.add_argument(
        "--epochs",
        type=float,
        default=0.0,
        help="budget in passes over the train set (default 3 when no other budget is given)",
    )
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 5e-5; 1e-3 in feature mode)")
    p.add_argument("--batch-size", type=int, default=32, help="examples per optimizer step (default 32, the paper's)")
    p.add_argument(
        "--max-seq-length",
        type=int,
        default=None,
        help="tokens per input (default 128; 384 for SQuAD, as run_squad.py)",
    )
    p.add_argument(
        "--doc-stride",
        type=int,
        default=128,
        help="QA: tokens between the starts of a long context's windows (default 128, as run_squad.py)",
    )
    p.add_argument("--max-train-examples", type=int, default=0, help="use only the first N train examples")
    p.add_argument("--max-eval-examples", type=int, default=0, help="evaluate on the first N dev examples")
    p.add_argument("--eval-every", type=int, default=0, help="steps between dev evaluations (0 = at the end)")
    p.add_argument(
        "--save-every", type=int, default=0, help="steps between checkpoints (0 = every 10 min and at the end)"
    )
    p.add_argument("--warmup", type=float, default=0.1, help="warm-up: fraction of the budget, or steps if >= 1")
    p.add_argument("--seed", type=int, default=0, help="seed of the output layer's init, shuffling and dropout")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch's default)")
    p.add_argument("--precision", default="auto", help="auto | fp32 | bf16 | fp16")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument(
        "--run-dir", help="run folder (default: runs/finetune-<task>-<time> in $BERTLAB_RUNS or the repository)"
    )
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its last checkpoint")
    p.add_argument("--dry-run", action="store_true", help="run the whole pipeline for one step on a few examples")
    p.add_argument("--no-progress", action="store_true", help="no terminal progress bar")
    p.add_argument(
        "--grid",
        choices=("paper",),
        default=None,
        help="paper: the paper's fine-tuning grid as background jobs, one per setting (batch 16/32 x "
        "lr 5e-5/3e-5/2e-5 x epochs 2/3/4; they replace --batch-size, --lr, --epochs, --seed and the "
        "budgets); prints the grid folder; --grid-status FOLDER shows the best on dev",
    )
    p.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="with --grid: random restarts (seeds) per setting, the best kept on dev; the paper used "
        "several for small data sets (default 1)",
    )


# flags that are about the grid itself or the one run folder: never passed on to a grid's jobs
_NOT_FOR_GRID_JOBS = ("grid", "restarts", "grid_status", "run_dir", "resume", "help")


def _argv_of(args: argparse.Namespace) -> list[str]:
    """The `bertlab finetune` arguments `args` were parsed from, options at their default left out."""
    p = argparse.ArgumentParser(add_help=False)
    add_args(p)
    out: list[str] = []
    for action in p._actions:
        if not action.option_strings or action.dest in _NOT_FOR_GRID_JOBS:
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default or value is None:
            continue
        flag = max(action.option_strings, key=len)
        out += [flag] if isinstance(action, argparse._StoreTrueAction) else [flag, str(value)]
    return out


def _cli_grid(args: argparse.Namespace) -> int:
    """`bertlab finetune --grid paper ...`: queue the grid as jobs and say where to watch it."""
    from bertlab.finetune.grid import PAPER_GRID, settings, submit_grid

    if args.resume or args.run_dir:
        raise InputError(
            "--grid queues one job per setting, each in its own run folder: leave out --run-dir and --resume"
        )
    cfg = config_from_args(args)  # the user's mistakes (no --data, --model with --size) before anything is queued
    n = len(settings(args.restarts))
    print(
        f"starting from {cfg.model}"
        if cfg.model
        else f"starting from random weights (size {cfg.size}: no pretraining)",
        flush=True,
    )
    folder = submit_grid(
        _argv_of(args), restarts=args.restarts, cwd=Path.cwd(), device=args.device, name=f"{cfg.task}-grid"
    )
    grid = " x ".join(f"{k.replace('_', ' ')} {'/'.join(f'{v:g}' for v in vals)}" for k, vals in PAPER_GRID.items())
    print(
        f"queued the paper's fine-tuning grid: {n} jobs ({grid}"
        f"{f', {args.restarts} seeds each' if args.restarts > 1 else ''}); they run one at a time per slot"
    )
    print(f"grid folder: {folder}")
    print(f"watch it: bertlab finetune --grid-status {folder}   (each job: bertlab jobs list, bertlab jobs show ID)")
    return 0


def config_from_args(args: argparse.Namespace) -> FinetuneConfig:
    """The run's config from `bertlab finetune` arguments (defaults as the paper's, 384 tokens for SQuAD)."""
    if not args.data:
        raise InputError("--data is required: a folder with the task's files, a file, or hf:")
    epochs = args.epochs
    if not (args.max_steps or args.max_time_s or epochs):
        epochs = 3.0
    lr = args.lr if args.lr is not None else (1e-3 if args.mode == "feature" else 5e-5)
    train_cfg = TrainConfig(
        learning_rate=lr,
        warmup=args.warmup,
        batch_size=args.batch_size,
        max_steps=args.max_steps or (1 if epochs else 0),
        max_time_s=args.max_time_s,
        eval_every=args.eval_every,
        save_every=args.save_every,
        log_every=20,
        precision=args.precision,
        seed=args.seed,
        device=args.device,
        num_threads=args.threads,
    )
    if args.model and args.size:
        raise InputError("give --model (a pretrained checkpoint) or --size (random weights), not both")
    model = args.model or (None if args.size else str(default_model_path()))
    seq = args.max_seq_length or (SQUAD_MAX_SEQ_LENGTH if args.task == "squad" else 128)
    return FinetuneConfig(
        task=args.task,
        data=args.data,
        model=model,
        size=args.size or "tiny",
        vocab=args.vocab,
        train_file=args.train_file,
        dev_file=args.dev_file,
        split_dev=args.split_dev,
        max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        max_seq_length=seq,
        doc_stride=args.doc_stride,
        mode=args.mode,
        features=args.features,
        bilstm=args.bilstm,
        epochs=epochs if not args.max_steps else 0.0,
        train=train_cfg,
    )


def run(args: argparse.Namespace) -> int:
    """`bertlab finetune`: fine-tune (or resume) and print the result as one JSON line; or queue
    or report a --grid."""
    if args.grid_status:
        from bertlab.finetune.grid import grid_status

        print(grid_status(args.grid_status))
        return 0
    if args.grid:
        return _cli_grid(args)
    if args.restarts != 1:
        raise InputError("--restarts goes with --grid paper (restarts of every setting of the grid)")
    logging.getLogger("bertlab").setLevel(logging.INFO)
    if args.resume and not args.run_dir:
        raise InputError("--resume needs --run-dir")
    if args.resume:
        cfg = FinetuneConfig(task=args.task, data=args.data or ".")  # replaced by the saved config
    else:
        cfg = config_from_args(args)
    run_dir = (
        Path(args.run_dir) if args.run_dir else runs_root() / f"finetune-{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    command = "bertlab finetune " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "bertlab finetune"
    if not args.resume:
        print(
            f"starting from {cfg.model}"
            if cfg.model
            else f"starting from random weights (size {cfg.size}: no pretraining)",
            flush=True,
        )
    from bertlab.cli import run_log

    with run_log(run_dir, first_line=command, create=not args.resume):
        result = run_finetuning(
            cfg, run_dir, resume=args.resume, dry_run=args.dry_run, progress_bar=not args.no_progress, command=command
        )
    print(
        json.dumps(
            {
                "state": result.state,
                "run_dir": str(run_dir),
                "step": result.progress.step,
                "train_time_s": round(result.progress.train_time_s, 1),
                "eval": result.last_eval,
            }
        )
    )
    return 0 if result.state == "finished" else 3
