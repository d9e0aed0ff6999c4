"""`bertlab compress distill --task T --data D`: distillation's second use, a fine-tuned classifier made
smaller. The teacher is a fine-tuned sentence or pair classifier (a `bertlab finetune` folder); the student
keeps N of its layers (bertlab.compress.student) with its embeddings, pooler and classifier, and trains on the
task's training data with the fine-tuning recipe's data, encoding, trainer and run folder
(bertlab.finetune.recipe), its loss

    alpha_ce * T² * soft_CE(student class logits / T, teacher class logits / T) + alpha_mlm * hard-label CE

(the masked-LM weight stands for the hard labels' here; no cosine or NSP term). Dev accuracy, parameters,
size and one classification's latency of both are recorded with the compression lab's measurements
(bertlab.compress.source).

Imports torch, bertlab.compress (distill_loss, student, measure, source), bertlab.finetune (recipe, data,
models, predict), bertlab.storage, bertlab.training.trainer and bertlab.errors.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from bertlab.atomic import write_json_atomic
from bertlab.compress.distill_loss import DistillWeights, soft_cross_entropy
from bertlab.compress.measure import RECORD_FILE, CompressionRecord, check_output_folder, stored_dtype, weights_bytes
from bertlab.compress.source import CLASSIFIER, open_source
from bertlab.compress.student import pick_layers, student_config, student_state
from bertlab.errors import InputError
from bertlab.finetune.data import load_task_data
from bertlab.finetune.models import build_task_model
from bertlab.finetune.predict import load_finetuned, load_task_model
from bertlab.finetune.recipe import (
    SPLIT_SEED,
    FinetuneConfig,
    FinetuneTask,
    budget_in_steps,
    card_of_run,
    encode,
    settings_for_run,
)
from bertlab.model import BertModel
from bertlab.storage.checkpoint import export_state_dict, weights_file
from bertlab.storage.runfolder import failure_recorded, mark_preparing, model_dir, run_log, runs_root, write_run_config
from bertlab.training.trainer import TrainResult, train

log = logging.getLogger(__name__)
THREADS = (1, 2)


class ClassifierDistillTask(FinetuneTask):
    """The fine-tuning task with the teacher's soft class probabilities beside the hard labels."""

    def __init__(self, *args, teacher: torch.nn.Module, weights: DistillWeights, **kw):
        super().__init__(*args, **kw)
        self.teacher, self.weights = teacher, weights

    def forward(self, model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        out = model(**batch)  # its loss: cross-entropy on the hard labels
        if next(self.teacher.parameters()).device != out.logits.device:
            self.teacher.to(out.logits.device)
        with torch.no_grad():
            teacher_logits = self.teacher(**batch).logits
        soft = soft_cross_entropy(out.logits, teacher_logits, self.weights.temperature)
        n = float(batch["labels"].numel())
        stats = {
            "correct": float((out.logits.argmax(-1) == batch["labels"]).sum()),
            "count": n,
            "ce_loss_sum": float(soft.detach()) * n,
            "agree": float((out.logits.argmax(-1) == teacher_logits.argmax(-1)).sum()),
        }
        return self.weights.alpha_ce * soft + self.weights.alpha_mlm * out.loss, stats

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        out = super().summarize(sums)
        if sums.get("count"):
            out |= {"ce_loss": sums["ce_loss_sum"] / sums["count"], "teacher_agreement": sums["agree"] / sums["count"]}
        return out


def load_teacher_classifier(path: str) -> tuple[torch.nn.Module, object, object, dict]:
    """(model, tokenizer, task setup, card) of a fine-tuned BERT sentence or pair classifier, frozen.

    Raises:
        InputError: not a classifier (a tagger, QA or regression model), not a BERT, or its task layer
            reads more than the last layer (the student would not have those layers).
    """
    model, tokenizer, setup, card = load_task_model(path)
    if setup.shape not in ("single", "pair") or not setup.labels:
        raise InputError(
            f"--teacher {path} is a {setup.shape} model; classifier distillation takes a sentence or "
            "pair classifier (e.g. SST-2, MRPC)"
        )
    if not isinstance(getattr(model, "bert", None), BertModel) or model.config.model_type != "bert":
        raise InputError(f"--teacher {path} is not a BERT classifier; distillation makes students of BERTs only")
    if not setup.head.is_hf_equivalent:
        raise InputError(
            f"--teacher {path} reads features '{setup.head.features}'; distil a classifier on the last layer"
        )
    model.requires_grad_(False)
    return model.float().eval(), tokenizer, setup, card


def make_student_classifier(teacher: torch.nn.Module, setup, layers: int) -> tuple[torch.nn.Module, tuple[int, ...]]:
    """A classifier of `layers` of the teacher's layers (evenly spaced), its embeddings, pooler and classifier."""
    kept = pick_layers(teacher.config.num_layers, layers)
    student = build_task_model(student_config(teacher.config, kept), setup.head)
    student.load_state_dict(student_state(teacher.state_dict(), kept))
    return student.float().train(), kept


def finetune_config(args: argparse.Namespace, setup) -> FinetuneConfig:
    """The fine-tuning settings of a classifier distillation: the task, data and teacher from the flags,
    the teacher's input length, and `key=value` overrides of FinetuneConfig (`train.key=value` for its
    TrainConfig), e.g. max_train_examples=8000 epochs=2 train.learning_rate=2e-4 train.num_threads=1."""
    import yaml  # deferred, as bertlab.training.pretrain_config reads overrides: only when there are some

    data: dict = {"task": args.task, "data": args.data, "model": args.teacher, "max_seq_length": setup.max_seq_length}
    train: dict = {"learning_rate": 5e-5, "warmup": 0.1, "batch_size": 32, "max_steps": 1000, "eval_every": 0}
    train |= {"save_every": 0, "log_every": 20} | ({"device": args.device} if args.device else {})
    for item in args.overrides:
        if "=" not in item:
            raise InputError(f"override {item!r} must look like key=value (e.g. epochs=2 or train.learning_rate=2e-4)")
        key, value = item.split("=", 1)
        (train if key.startswith("train.") else data)[key.removeprefix("train.")] = yaml.safe_load(value)
    return FinetuneConfig.from_dict(data | {"train": train})


def run_classifier_distillation(
    cfg: FinetuneConfig,
    teacher_path: str,
    layers: int,
    weights: DistillWeights,
    run_dir: Path,
    resume: bool = False,
    progress_bar: bool = True,
    command: str = "",
) -> TrainResult:
    """Train (or resume) a student classifier in `run_dir` on the task's training data."""
    with failure_recorded(run_dir):
        cfg = settings_for_run(cfg, run_dir, resume, dry_run=False)
        mark_preparing(run_dir, resume)
        teacher, tokenizer, setup, _ = load_teacher_classifier(teacher_path)
        student, kept = make_student_classifier(teacher, setup, layers)
        spec = cfg.spec
        data = load_task_data(spec, cfg.data, cfg.train_file, cfg.dev_file, cfg.split_dev, SPLIT_SEED)
        train_examples = data.train[: cfg.max_train_examples] if cfg.max_train_examples else data.train
        dev_examples = data.dev[: cfg.max_eval_examples] if cfg.max_eval_examples else data.dev
        train_features = encode(spec, setup, tokenizer, train_examples, training=True)
        dev_features = encode(spec, setup, tokenizer, dev_examples, training=False)
        micro = cfg.train.batch_size // cfg.train.grad_accum
        train_cfg = budget_in_steps(cfg, len(train_features), micro)
        distill = {"teacher": teacher_path, "layers": layers, "kept_layers": list(kept), "weights": asdict(weights)}
        write_run_config(
            run_dir,
            {
                "kind": "distill",
                "config": cfg.to_dict(),
                "distill": distill,
                "effective_train": asdict(train_cfg),
                "task_setup": setup.to_dict(),
                "model_config": asdict(student.config),
                "command": command,
            },
        )
        card = card_of_run(cfg, setup, data, len(train_examples), len(dev_examples), teacher_path, train_cfg, command)
        card["distillation"] = distill
        task = ClassifierDistillTask(
            cfg,
            setup,
            tokenizer,
            train_features,
            dev_examples,
            dev_features,
            micro,
            card,
            teacher=teacher,
            weights=weights,
        )
        torch.manual_seed(train_cfg.seed)
        random.seed(train_cfg.seed)
        return train(task, student, train_cfg, run_dir, resume=resume, progress_bar=progress_bar)


def distil_classifier_from_args(args: argparse.Namespace) -> tuple[CompressionRecord | None, Path, TrainResult]:
    """`bertlab compress distill --task T --data D --teacher FINETUNED --layers N`: train, then measure
    teacher and student on the task's dev file (dev accuracy, parameters, size, one classification's latency)."""
    weights = DistillWeights(args.temperature, args.alpha_ce, args.alpha_mlm, args.alpha_cos, args.alpha_nsp)
    if not args.teacher or args.layers is None or not args.data:
        raise InputError("classifier distillation needs --teacher FINETUNED_FOLDER, --layers N, --task and --data")
    out = check_output_folder(args.out, args.teacher) if args.out else None
    teacher, _, setup, _ = load_teacher_classifier(args.teacher)
    pick_layers(teacher.config.num_layers, args.layers)
    cfg = finetune_config(args, setup)
    name = f"{Path(args.teacher).parent.name or 'classifier'}-L{args.layers}-distill"
    run_dir = Path(args.run_dir) if args.run_dir else runs_root() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    command = "bertlab compress " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "bertlab compress distill"
    with run_log(run_dir, first_line=command, create=not args.resume):
        result = run_classifier_distillation(
            cfg, args.teacher, args.layers, weights, run_dir, args.resume, not args.no_progress, command
        )
        out = out or model_dir(run_dir)
        if result.state != "finished":
            return None, out, result
        return _measure(args.teacher, model_dir(run_dir), out, cfg, args.repeats), out, result


def _measure(teacher: str, trained: Path, out: Path, cfg: FinetuneConfig, repeats: int) -> CompressionRecord:
    """The student saved in the teacher's dtype into `out`, both measured on the dev file; compression.json."""
    source = open_source(teacher)
    dtype = stored_dtype(source.raw_config)
    student = load_finetuned(trained, device="cpu")
    half = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(dtype)
    source.save(out, student.model, {"distilled_from": teacher}, {}, dtype=half, config=student.model.config)
    stored = load_finetuned(out, device="cpu")
    dev = Path(cfg.data) / (cfg.dev_file or cfg.spec.dev_file) if Path(cfg.data).is_dir() else Path(cfg.data)
    record = CompressionRecord(
        method="distill",
        scheme=f"{stored.model.config.num_layers} of {source.module.config.num_layers} layers",
        source=source.path,
        before=source.measure(source.loaded, source.stored_bytes, dtype, THREADS, repeats, dev=dev),
        after=source.measure(stored, weights_file(out).stat().st_size, dtype, THREADS, repeats, dev=dev),
        fp32_weights_bytes=weights_bytes(export_state_dict(source.module)),
        notes=["a classifier distilled on its task's training data: soft class probabilities at T plus the labels"],
        kind=CLASSIFIER,
        dev=str(dev),
    )
    write_json_atomic(out / RECORD_FILE, asdict(record))
    return record
