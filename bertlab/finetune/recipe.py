"""The fine-tuning recipe: task data -> features -> shared trainer -> fine-tuned model + card.

`run_finetuning(FinetuneConfig(...), run_dir)` does one run in named steps (the config for this
run, the head, the task setup, the budget in steps, the card). The loop itself is
bertlab.training.trainer.train (budgets, warm-up, mixed precision, atomic checkpoints, resume, metrics,
torchrun); this module supplies the `TrainTask` for a fine-tuning task and seeds the global RNGs
(head init, dropout). The run folder layout is bertlab.storage.runfolder's, with the final model in
run_dir/model (and its model_card.json). The `bertlab finetune` command line is
bertlab.finetune.cli.

Imports the lower layers: atomic, checkpoint, config, hardware, model_card (the length a checkpoint was
pretrained on), runfolder, tokenizer, training, bertlab.finetune.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from bertlab.atomic import building
from bertlab.config import dataclass_from_dict, preset
from bertlab.errors import CheckpointError, InputError
from bertlab.finetune.data import Example, SequenceExample, TaggingExample, TaskData, load_task_data
from bertlab.finetune.encoding import Feature, collate, encode_qa, encode_sequences, encode_tagging
from bertlab.finetune.evaluation import decode, run_model, score
from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import TaskSetup, save_finetuned
from bertlab.finetune.tasks import TaskSpec, get_task
from bertlab.hardware import hardware_description
from bertlab.models.registry import family_for, family_of
from bertlab.storage.checkpoint import load_config, load_state, read_config, read_weights, resolve, weights_file
from bertlab.storage.model_card import pretrained_length, read_card
from bertlab.storage.modelfolder import halves, weights_path
from bertlab.storage.runfolder import (
    CHECKPOINT_DIR,
    RUN_CONFIG_FILE,
    VOCAB_FILE,
    failure_recorded,
    mark_preparing,
    read_run_config,
    write_run_config,
)
from bertlab.tokenizer import BertTokenizer
from bertlab.training.runtime import process_rank
from bertlab.training.trainer import TrainConfig, TrainResult, train

log = logging.getLogger(__name__)

SPLIT_SEED = 0  # --split-dev: one fixed split, whatever the training seed


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
    # by default inputs are cut to the longest sequence the checkpoint was pretrained on (its card says; SQuAD's
    # 384 on a model pretrained on 128-token sequences would meet 256 position vectors never trained); True keeps them
    untrained_positions: bool = False
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

    static_shapes = False  # batches are padded to their longest example: compile="auto" stays eager

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

    def phase_at(self, fraction: float) -> int:
        return 0  # one data phase

    def set_phase(self, phase: int) -> None:
        pass

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
        return pretrained_task_model(resolve(cfg.model), head)
    kept = run_dir / VOCAB_FILE  # a resumed run must see the same vocabulary
    run_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = None
    with building(kept):  # under torchrun one rank makes it, the others wait and read it
        if not kept.is_file():
            if cfg.vocab:
                tokenizer = BertTokenizer.from_vocab(cfg.vocab)
            else:
                tokenizer = BertTokenizer.train(texts=_texts(train_examples), vocab_size=cfg.vocab_size, lowercase=True)
                log.info("trained a %d-token WordPiece vocabulary on the training text", len(tokenizer))
            tokenizer.save_vocab(kept)
    if tokenizer is None:  # made by an earlier run of this folder, or by another rank
        tokenizer = BertTokenizer.from_vocab(kept)
    config = preset(cfg.size, vocab_size=len(tokenizer), max_position_embeddings=max(512, cfg.max_seq_length))
    return build_task_model(config, head), tokenizer, f"random init ({cfg.size})"


def encoder_folder(directory: Path) -> Path:
    """The folder whose encoder fine-tunes: `directory`, or the half of a pair folder that its family
    fine-tunes (an ELECTRA run's `discriminator/`, as in the paper).

    Raises:
        CheckpointError: a pair folder of a family that names no half to fine-tune.
    """
    pair = halves(directory) if weights_path(directory) is None else {}
    if not pair:
        return directory
    family = family_for(read_config(directory), str(directory / "config.json"))
    if family.finetune_half not in pair:
        raise CheckpointError(
            f"{directory}: a pair folder ({', '.join(pair)}) and {family.name} names no half to fine-tune; "
            "give one half's folder"
        )
    return pair[family.finetune_half]


def pretrained_task_model(directory: Path, head: HeadConfig) -> tuple[torch.nn.Module, BertTokenizer, str]:
    """(model, tokenizer, source note): the encoder of the model in `directory` (any family; a pair folder's
    half that fine-tunes) with a fresh `head`, and the folder's tokenizer. Only the encoder comes over: the
    pretraining heads (MLM, NSP, SOP, replaced-token detection) and another task's classifier start fresh."""
    directory = encoder_folder(directory)
    pretrained, raw = load_config(directory)
    source_family = family_for(raw, str(directory / "config.json")).load()
    config = source_family.task_config(pretrained)  # ELECTRA's discriminator; a DistilBERT as BERT
    model = build_task_model(config, head)
    family = family_of(config).load()
    state = source_family.normalize_keys(read_weights(directory))
    state = {k: v for k, v in state.items() if k.startswith(family.ENCODER_PREFIXES)}
    missing = load_state(model, state, str(weights_file(directory)), family.ENCODER_PREFIXES, family.OPTIONAL_PREFIXES)
    if any(k.startswith(family.OPTIONAL_PREFIXES) for k in missing):
        log.info("%s has no pooler weights; the pooler starts from random init", directory)
    tokenizer = source_family.load_tokenizer(directory, pretrained)
    if len(tokenizer) > config.vocab_size:
        raise CheckpointError(f"{directory}: its vocabulary has more tokens than config.json's vocab_size")
    return model, tokenizer, str(directory)


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
    cfg = settings_for_run(cfg, run_dir, resume, dry_run)
    spec = cfg.spec
    run_dir.mkdir(parents=True, exist_ok=True)
    mark_preparing(run_dir, resume)
    t0 = time.time()
    # the split does not follow the training seed: runs with different seeds train and score on the same examples
    data = load_task_data(spec, cfg.data, cfg.train_file, cfg.dev_file, cfg.split_dev, SPLIT_SEED)
    train_examples = data.train[: cfg.max_train_examples] if cfg.max_train_examples else data.train
    dev_examples = data.dev[: cfg.max_eval_examples] if cfg.max_eval_examples else data.dev
    labels = task_labels(spec, data.train, data.dev)
    head = head_config(cfg, labels)
    torch.manual_seed(cfg.train.seed)
    model, tokenizer, model_source = prepare_model(cfg, run_dir, head, train_examples)
    # the longest input: the position table's, or less where the tokenizer says (RoBERTa's 514 rows hold 512 tokens)
    max_positions = min(model.config.max_position_embeddings, tokenizer.model_max_length)
    setup = task_setup(cfg, labels, head, max_positions, trained_length(cfg, model_source))
    train_features = encode(spec, setup, tokenizer, train_examples, training=True)
    dev_features = encode(spec, setup, tokenizer, dev_examples, training=False)
    micro = cfg.train.batch_size // cfg.train.grad_accum
    train_cfg = budget_in_steps(cfg, len(train_features), micro)
    log.info(
        "%s: %d train examples -> %d features (%d truncated or windowed), %d dev examples; "
        "%s, %.2fM trainable of %.2fM parameters; ready in %.1fs",
        spec.name,
        len(train_examples),
        len(train_features),
        sum(f.truncated for f in train_features),
        len(dev_examples),
        model_source,
        model.num_parameters(True) / 1e6,
        model.num_parameters() / 1e6,
        time.time() - t0,
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
            "cwd": str(Path.cwd()),  # where relative paths in the command start
            "dev_majority": majority_share(dev_examples) if spec.shape in ("single", "pair") else None,
        },
    )
    card = card_of_run(cfg, setup, data, len(train_examples), len(dev_examples), model_source, train_cfg, command)
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


def settings_for_run(cfg: FinetuneConfig, run_dir: Path, resume: bool, dry_run: bool) -> FinetuneConfig:
    """The config the run uses: the saved one on resume (a folder that holds a run needs --resume), with
    the input length and stride it began with, or a one-step trial on a few examples for a dry run."""
    if resume and dry_run:  # a dry run's one-step budget would mark the resumed run finished
        raise InputError("--dry-run makes a new one-step run; leave out --resume (or --dry-run)")
    if resume:
        saved = read_run_config(run_dir)
        if saved is None or saved.get("kind") != "finetune":
            raise InputError(f"{run_dir}: no fine-tuning {RUN_CONFIG_FILE} to resume")
        cfg = FinetuneConfig.from_dict(saved["config"])
        if setup := saved.get("task_setup"):  # the inputs it began with, whatever the model card says now
            cfg = dataclasses.replace(
                cfg,
                max_seq_length=int(setup.get("max_seq_length", cfg.max_seq_length)),
                doc_stride=int(setup.get("doc_stride", cfg.doc_stride)),
                untrained_positions=True,
            )
    elif (run_dir / CHECKPOINT_DIR).exists():  # a dry run too: it would write its one step over the run
        raise InputError(f"{run_dir} already holds a run; use --resume to continue it or choose another --run-dir")
    if not dry_run:
        return cfg
    return dataclasses.replace(
        cfg,
        epochs=0.0,
        max_train_examples=cfg.max_train_examples or 64,
        max_eval_examples=cfg.max_eval_examples or 64,
        train=dataclasses.replace(cfg.train, max_steps=1, max_tokens=0, max_time_s=0, eval_every=0),
    )


def head_config(cfg: FinetuneConfig, labels: tuple[str, ...]) -> HeadConfig:
    """The task model's head: one output per class (start and end for QA) in the config's mode."""
    return HeadConfig(
        shape=cfg.spec.shape,
        num_labels=2 if cfg.spec.shape == "qa" else len(labels),
        mode=cfg.mode,
        features=cfg.features,
        bilstm=cfg.bilstm,
        lstm_hidden=cfg.lstm_hidden,
        lstm_layers=cfg.lstm_layers,
        classifier_dropout=cfg.classifier_dropout,
    )


def trained_length(cfg: FinetuneConfig, directory: str | Path | None) -> int:
    """The longest input the checkpoint in `directory` was pretrained on (its model card), 0 when unknown
    or when `cfg.untrained_positions` asks for the task's own length whatever the pretraining."""
    if not cfg.model or directory is None or cfg.untrained_positions:
        return 0
    # a pair folder's half (ELECTRA's discriminator/) keeps no card of its own: the pair's is beside it
    parent = Path(directory).parent
    pair_card = read_card(parent) if Path(directory) in halves(parent).values() else {}
    return pretrained_length(read_card(directory) or pair_card)


def input_length(cfg: FinetuneConfig, max_positions: int, pretrained: int = 0) -> int:
    """The tokens per input a run uses: `cfg.max_seq_length`, cut to the model's `max_positions` and to the
    `pretrained` length when known (see `trained_length`)."""
    return min(cfg.max_seq_length, max_positions, pretrained or max_positions)


def majority_share(examples: Sequence) -> float | None:
    """The share of the most frequent label among classification examples: what always answering it
    scores (SST-2 dev: 444 of 872 positive, 50.9%); None without labels."""
    labels = Counter(e.label for e in examples if getattr(e, "label", None) is not None)
    return max(labels.values()) / sum(labels.values()) if labels else None


def task_setup(
    cfg: FinetuneConfig, labels: tuple[str, ...], head: HeadConfig, max_positions: int, pretrained: int = 0
) -> TaskSetup:
    """What the saved model needs besides its weights; inputs are `input_length` long (a cut is logged), and
    a long context's windows start at most half an input apart, so they overlap."""
    max_len = input_length(cfg, max_positions, pretrained)
    stride = min(cfg.doc_stride, max(1, max_len // 2))
    if max_len < cfg.max_seq_length:
        why = (
            f"this model was pretrained on sequences of at most {max_len} tokens, so positions past them were "
            "never trained (pass --untrained-positions to keep them)"
            if max_len == pretrained
            else f"the model has {max_positions} positions"
        )
        log.warning("max_seq_length %d: %s; using %d (doc stride %d)", cfg.max_seq_length, why, max_len, stride)
    return TaskSetup(
        cfg.spec.name,
        cfg.spec.shape,
        labels,
        head,
        max_len,
        stride,
        cfg.max_query_length,
        cfg.max_answer_length,
        cfg.n_best,
    )


def budget_in_steps(cfg: FinetuneConfig, num_features: int, micro_batch: int) -> TrainConfig:
    """The trainer's config; a budget in epochs becomes optimizer steps over `num_features`."""
    if cfg.epochs <= 0:
        return cfg.train
    per_epoch = math.ceil(num_features / micro_batch)
    steps = max(1, math.ceil(cfg.epochs * per_epoch / cfg.train.grad_accum))
    return dataclasses.replace(cfg.train, max_steps=steps)


def card_of_run(
    cfg: FinetuneConfig,
    setup: TaskSetup,
    data: TaskData,
    train_examples: int,
    dev_examples: int,
    model_source: str,
    train_cfg: TrainConfig,
    command: str,
) -> dict:
    """The fine-tuned model's card: task, starting model, data, settings and how it was run."""
    spec = cfg.spec
    return {
        "task": spec.name,
        "task_description": spec.description,
        "task_shape": spec.shape,
        "labels": list(setup.labels),
        "base_model": model_source,
        "mode": cfg.mode,
        "features": cfg.features,
        "bilstm": setup.head.use_bilstm,
        "train_data": data.train_source,
        "dev_data": data.dev_source,
        "train_examples": train_examples,
        "dev_examples": dev_examples,
        "demo_split": bool(cfg.split_dev),
        "max_seq_length": setup.max_seq_length,
        "command": command,
        "hardware": hardware_description(train_cfg.num_threads, train_cfg.device),
        "train_config": asdict(train_cfg),
        "main_metric": spec.main_metric,
    }
