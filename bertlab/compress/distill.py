"""`bertlab compress distill`: a student of N of the teacher's layers, trained on a corpus to match the
teacher (DistilBERT, Sanh et al. 2019), then measured beside it (compression.json).

The run is a pretraining run of the student: the pretraining recipe's corpus, data, held-out split and
instance cache (bertlab.training.pretrain), the shared trainer (run folder, status.json progress,
checkpoints, exact resume), with `DistillTask`, a `PretrainTask` whose training loss is the distillation
loss (bertlab.compress.distill_loss) and whose held-out evaluation stays the masked-LM (+NSP) one, so the
student's curve reads like any pretraining run's. The teacher is frozen, in eval mode, inside the task.

Imports torch, bertlab.compress (distill_loss, student, measure), bertlab.training (pretrain, its config,
the trainer), bertlab.storage (checkpoint, model card, run folder), bertlab.inference and bertlab.errors.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bertlab.atomic import write_json_atomic, write_text_atomic
from bertlab.compress.distill_classifier import distil_classifier_from_args
from bertlab.compress.distill_loss import DistillWeights, distillation_loss, layer_pairs
from bertlab.compress.measure import (
    RECORD_FILE,
    CompressionRecord,
    check_output_folder,
    measure,
    read_held_out,
    source_weights_bytes,
    stored_dtype,
    weights_bytes,
)
from bertlab.compress.student import make_student, pick_layers
from bertlab.data.corpus import load_corpus
from bertlab.errors import InputError
from bertlab.inference import LoadedModel, load_model
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import export_state_dict, load_pretraining_model, save_checkpoint, weights_file
from bertlab.storage.model_card import model_card_markdown
from bertlab.storage.runfolder import (
    failure_recorded,
    mark_preparing,
    model_dir,
    run_log,
    runs_root,
    write_run_config,
)
from bertlab.training.pretrain import PretrainTask, card_of_run, prepare_data, settings_for_run, split_documents
from bertlab.training.pretrain_config import PretrainConfig, load_config_file
from bertlab.training.trainer import TrainResult, train

log = logging.getLogger(__name__)

HELD_OUT_FILE = "heldout.txt"  # the run's held-out documents, a sentence a line: the record's accuracy
THREADS = (1, 2)  # fill-mask latency is timed at these thread counts, as quantize and prune do
HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class DistillSettings:
    """What a distillation run distils, saved in its run_config.json (`distill`)."""

    teacher: str  # the teacher's folder or Hub id
    layers: int  # N, the student's layers
    weights: DistillWeights = DistillWeights()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DistillSettings:
        return cls(data["teacher"], int(data["layers"]), DistillWeights(**data.get("weights", {})))


@dataclass(frozen=True)
class Teacher:
    """The loaded teacher: the model (frozen, eval mode), its tokenizer and what its folder says."""

    model: BertForPreTraining
    tokenizer: object
    info: dict

    @property
    def has_nsp(self) -> bool:
        return "nsp" in self.info["heads"]


def load_teacher(path: str) -> Teacher:
    """The teacher as distillation needs it: a BERT with its masked-LM head, frozen.

    Raises:
        InputError: it has no masked-LM head (a fine-tuned classifier), is not a BERT, or is int8.
    """
    model, tokenizer, info = load_pretraining_model(path)
    if info.get("quantization"):
        raise InputError(f"--teacher {path} is quantized ({info['quantization']}); distil from its float source")
    if type(model) is not BertForPreTraining or model.config.model_type != "bert":
        raise InputError(f"--teacher {path} is a {info['family']} model; distillation makes students of BERTs only")
    if "mlm" not in info["heads"]:
        raise InputError(
            f"--teacher {path} has no masked-LM head (a fine-tuned classifier?); masked-LM distillation needs a "
            "pretraining folder, e.g. checkpoints/bertlab-mini"
        )
    model.requires_grad_(False)
    return Teacher(model.float().eval(), tokenizer, info)


class DistillTask(PretrainTask):
    """Pretraining's task with DistilBERT's loss; held-out evaluation is the student's masked LM (+NSP)."""

    def __init__(self, *args, teacher: BertForPreTraining, weights: DistillWeights, kept: tuple[int, ...], **kw):
        super().__init__(*args, **kw)
        self.teacher, self.weights = teacher, weights
        self.pairs = layer_pairs(kept, weights.cosine_layers)

    @property
    def static_shapes(self) -> bool:
        """The loss reads hidden states at every position and logits at the masked ones: data-dependent shapes."""
        return False

    def forward(self, model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        device = batch["input_ids"].device
        if next(self.teacher.parameters()).device != device:
            self.teacher.to(device)
        out = distillation_loss(model, self.teacher, batch, self.weights, self.pairs)
        return out.loss, out.sums


def distil_config(cfg: PretrainConfig, teacher: Teacher) -> PretrainConfig:
    """The pretraining config a student trains with: the teacher's vocabulary and lowercasing, and the
    objective its heads allow (masked LM + NSP with an NSP head, masked LM alone without)."""
    objective = "mlm_nsp" if teacher.has_nsp else "mlm"
    vocab = Path(teacher.info["path"]) / "vocab.txt"
    return dataclasses.replace(
        cfg,
        vocab=str(vocab) if vocab.is_file() else cfg.vocab,
        lowercase=getattr(teacher.tokenizer, "lowercase", cfg.lowercase),
        data=dataclasses.replace(cfg.data, objective=objective),
    )


def run_distillation(
    cfg: PretrainConfig,
    settings: DistillSettings | None,
    run_dir: str | Path,
    resume: bool = False,
    dry_run: bool = False,
    progress_bar: bool = True,
    stop_after_steps: int | None = None,
    command: str | None = None,
    teacher: Teacher | None = None,
) -> tuple[TrainResult, Teacher, dict]:
    """Train (or resume) a student in `run_dir`; returns (the result, the teacher, the run config).
    On resume `cfg` and `settings` are read from the run folder; `teacher`: the teacher, already loaded."""
    with failure_recorded(run_dir):
        run_dir = Path(run_dir)
        cfg, saved = settings_for_run(cfg, run_dir, resume, dry_run)
        if resume:
            settings = DistillSettings.from_dict(saved["distill"])
        command = saved.get("command") or command or " ".join(sys.argv)
        run_dir.mkdir(parents=True, exist_ok=True)
        mark_preparing(run_dir, resume)
        teacher = teacher or load_teacher(settings.teacher)
        cfg = distil_config(cfg, teacher)
        student, kept = make_student(teacher.model, settings.layers)
        if cfg.dropout is not None:
            student.set_dropout(cfg.dropout)
        corpus = load_corpus(cfg.corpus, cfg.corpus_format)
        train_stores, eval_store, data_stats = prepare_data(cfg, corpus, teacher.tokenizer)
        held_out = run_dir / HELD_OUT_FILE
        if not held_out.is_file():  # the documents every model here is scored on, none of them trained on
            sentences = [s for doc in split_documents(cfg, corpus).heldout for s in doc]
            write_text_atomic(held_out, "\n".join(sentences) + "\n")
        card = card_of_run(cfg, student.config, corpus, train_stores[0], command) | _card_fields(
            teacher, settings, kept
        )
        micro = cfg.train.batch_size // cfg.train.grad_accum
        task = DistillTask(
            cfg,
            teacher.tokenizer,
            student.config,
            train_stores,
            eval_store,
            micro,
            card,
            teacher=teacher.model,
            weights=settings.weights,
            kept=kept,
        )
        teacher_eval = saved.get("teacher_eval") or _fp32_eval(task, teacher.model)
        run_config = {
            "kind": "distill",
            "config": cfg.to_dict(),
            "distill": settings.to_dict(),
            "kept_layers": list(kept),
            "model_config": asdict(student.config),
            "command": command,
            "data_stats": data_stats or saved.get("data_stats", {}),
            "teacher_eval": teacher_eval,
        }
        write_run_config(run_dir, run_config)
        task.card["teacher_eval"] = teacher_eval
        log.info(
            "student: layers %s of %s's %d, %.2fM parameters (teacher %.2fM); teacher held-out %s",
            list(kept),
            settings.teacher,
            teacher.model.config.num_layers,
            student.num_parameters() / 1e6,
            teacher.model.num_parameters() / 1e6,
            " ".join(f"{k}={v:.4g}" for k, v in teacher_eval.items()),
        )
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        result = train(
            task,
            student,
            cfg.train,
            run_dir,
            resume=resume,
            progress_bar=progress_bar,
            stop_after_steps=stop_after_steps,
        )
        if result.state == "finished":
            run_config["student_eval"] = _fp32_eval(task, student.float().eval())
            write_run_config(run_dir, run_config)
        return result, teacher, run_config


def _fp32_eval(task: DistillTask, model: torch.nn.Module) -> dict[str, float]:
    """A model's held-out metrics on the run's held-out instances, in float32 on the CPU."""
    model.to("cpu")
    with torch.no_grad():
        metrics = task.evaluate(model, torch.device("cpu"), contextlib.nullcontext)
    return {k: round(v, 4) for k, v in metrics.items()}


def _card_fields(teacher: Teacher, settings: DistillSettings, kept: tuple[int, ...]) -> dict:
    """What a student's model card adds to a pretraining card: its teacher (and the teacher's own story)."""
    c = teacher.model.config
    parent = teacher.info.get("card", {})
    w = settings.weights
    return {
        "name": f"{Path(settings.teacher).name}-L{settings.layers}-distilled",
        "size": f"L{settings.layers}-H{c.hidden_size}-A{c.num_heads} student",
        "summary": (
            f"Distilled from {settings.teacher} (L={c.num_layers}) as DistilBERT was (Sanh et al. 2019): the "
            f"student keeps the teacher's layers {', '.join(map(str, kept))} (0-based), its embeddings (segment "
            f"embeddings too), pooler and heads, and learned from the teacher's masked-LM answers at temperature "
            f"{w.temperature:g}: loss = {w.alpha_ce:g} x T² x soft cross-entropy + {w.alpha_mlm:g} x masked LM + "
            f"{w.alpha_cos:g} x (1 - cos) of hidden states ({w.cosine_layers} copied layers)"
            + (f" + {w.alpha_nsp:g} x NSP." if w.alpha_nsp and teacher.has_nsp else ".")
        ),
        "distillation": {
            "teacher": settings.teacher,
            "teacher_layers": c.num_layers,
            "kept_layers": list(kept),
            **asdict(w),
        },
        "teacher_card": {
            k: parent.get(k)
            for k in (
                "name",
                "command",
                "steps",
                "tokens",
                "total_steps",
                "total_tokens",
                "total_train_time_s",
                "metrics",
            )
            if k in parent
        }
        | ({"init_command": parent["init_card"].get("command")} if parent.get("init_card") else {}),
    }


# --------------------------------------------------------------------------------------
# The output folder and its record
# --------------------------------------------------------------------------------------
def write_student(run_dir: Path, out: Path, teacher: Teacher, run_config: dict, held_out: str | None, repeats: int):
    """The finished run's student saved in the teacher's dtype into `out`, measured beside its teacher;
    compression.json, model_card.json and README.md beside its weights. Returns the record."""
    final, _, final_info = load_pretraining_model(model_dir(run_dir))
    raw = teacher.info["raw_config"]
    dtype = stored_dtype(raw)
    card = dict(final_info["card"]) | {"student_eval": run_config.get("student_eval")}
    save_checkpoint(
        out,
        final,
        teacher.tokenizer,
        extra_config={"objective": run_config["config"]["data"]["objective"], "distilled_from": teacher.info["path"]},
        extra_files={"model_card.json": card},
        dtype=HALF.get(dtype),
    )
    lines = read_held_out(held_out or run_dir / HELD_OUT_FILE)
    source = LoadedModel(teacher.model.float().eval().to("cpu"), teacher.tokenizer, teacher.info)
    student = load_model(out, device="cpu")
    record = CompressionRecord(
        method="distill",
        scheme=f"{len(run_config['kept_layers'])} of {teacher.model.config.num_layers} layers",
        source=teacher.info["path"],
        before=measure(source, source_weights_bytes(source), dtype, THREADS, repeats, lines),
        after=measure(student, weights_file(out).stat().st_size, dtype, THREADS, repeats, lines),
        fp32_weights_bytes=weights_bytes(export_state_dict(teacher.model)),
        held_out=str(held_out or run_dir / HELD_OUT_FILE),
        notes=[
            "fill-mask latency and masked-LM accuracy of both models in float32 on the CPU, as the pages run them; "
            "sizes as stored (the student in the teacher's dtype)",
            "held-out metrics (details): the run's held-out instances (documents neither model trained on here), "
            "in float32",
        ],
        details={
            "kept_layers": run_config["kept_layers"],
            "weights": run_config["distill"]["weights"],
            "steps": card.get("steps"),
            "tokens": card.get("tokens"),
            "train_time_s": card.get("train_time_s"),
            "teacher_held_out": run_config.get("teacher_eval"),
            "student_held_out": run_config.get("student_eval"),
            "run_dir": str(run_dir),
        },
    )
    write_json_atomic(out / RECORD_FILE, asdict(record))
    card["compression"] = asdict(record)
    write_json_atomic(out / "model_card.json", card)
    write_text_atomic(out / "README.md", student_card_markdown(card))
    return record


def student_card_markdown(card: dict) -> str:
    """The model card (bertlab.storage.model_card) with a section on the teacher and what was measured."""
    d, parent = card.get("distillation", {}), card.get("teacher_card", {})
    pm = parent.get("metrics", {})
    lines = [
        model_card_markdown(card).rstrip(),
        "",
        "## Distillation: the teacher and what was kept",
        "",
        f"- Teacher: `{d.get('teacher')}` ({d.get('teacher_layers')} layers): "
        f"{parent.get('total_steps', parent.get('steps', 0)):,} steps and "
        f"{parent.get('total_tokens', parent.get('tokens', 0)):,} input tokens over all its stages; held-out MLM "
        f"accuracy {pm.get('mlm_acc', float('nan')):.1%} by its own card, which lists each stage.",
        f"- Stages: the teacher's (its last: `{parent.get('command', '?')}`"
        + (f"; before it: `{parent['init_command']}`" if parent.get("init_command") else "")
        + f"), then this distillation ({card.get('steps', 0):,} steps, {card.get('tokens', 0):,} input tokens, "
        f"{card.get('train_time_s', 0) / 3600:.2f} h on {card.get('hardware', '?')}).",
        f"- Kept layers (0-based): {d.get('kept_layers')}; loss weights ce {d.get('alpha_ce')}, mlm "
        f"{d.get('alpha_mlm')}, cos {d.get('alpha_cos')} ({d.get('cosine_layers')}), nsp {d.get('alpha_nsp')}; "
        f"temperature {d.get('temperature')}.",
    ]
    te, se = card.get("teacher_eval") or {}, card.get("student_eval") or {}
    if te and se:
        lines += [
            f"- On this run's held-out instances (float32): masked-LM accuracy teacher {te.get('mlm_acc', 0):.1%}, "
            f"student {se.get('mlm_acc', 0):.1%}"
            + (f"; NSP {te['nsp_acc']:.1%} vs {se['nsp_acc']:.1%}." if "nsp_acc" in te and "nsp_acc" in se else ".")
        ]
    rec = card.get("compression")
    if rec:
        b, a = rec["before"], rec["after"]
        lines += [
            f"- Parameters {b['parameters']:,} -> {a['parameters']:,}; weights on disk {b['weights_bytes'] / 2**20:.2f} "
            f"-> {a['weights_bytes'] / 2**20:.2f} MiB ({a['dtype']}).",
        ]
        for lb, la in zip(b["latency"], a["latency"], strict=True):
            lines.append(
                f"- Fill-mask p50 at {lb['threads']} thread(s): {lb['p50_ms']:.2f} -> {la['p50_ms']:.2f} ms "
                f"({lb['p50_ms'] / la['p50_ms']:.2f}x the speed)."
            )
    lines += [f"- {note}" for note in card.get("evaluations", [])]  # added later, e.g. a fine-tuning's dev score
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def settings_from_args(args: argparse.Namespace) -> tuple[PretrainConfig, DistillSettings | None]:
    """The pretraining config and distillation settings the arguments give (placeholders on --resume,
    where the run folder's own are read).

    Raises:
        InputError: --teacher or --layers missing for a new run, or a weight out of range.
    """
    weights = DistillWeights(
        args.temperature, args.alpha_ce, args.alpha_mlm, args.alpha_cos, args.alpha_nsp, args.cosine_layers
    )
    if args.resume:
        if not args.run_dir:
            raise InputError("--resume needs --run-dir")
        return load_config_file(None, ["train.max_steps=1"]), None
    if not args.teacher or args.layers is None:
        raise InputError("give --teacher MODEL and --layers N (or --resume --run-dir DIR to continue a run)")
    overrides = list(args.overrides) + ([f"train.device={args.device}"] if args.device else [])
    cfg = load_config_file(args.config, overrides)
    return cfg, DistillSettings(args.teacher, args.layers, weights)


def distil_from_args(args: argparse.Namespace) -> tuple[CompressionRecord | None, Path, TrainResult]:
    """`bertlab compress distill`: train (or resume) the student, then write and measure it. Returns (the
    record, or None when the run stopped before its end; the student's folder; the training result)."""
    logging.getLogger("bertlab").setLevel(logging.INFO)
    if args.task:
        return distil_classifier_from_args(args)
    cfg, settings = settings_from_args(args)
    out = check_output_folder(args.out, args.teacher) if args.out else None
    teacher = None
    if settings is not None:  # a bad teacher or layer count fails here, before a run folder is made
        teacher = load_teacher(settings.teacher)
        pick_layers(teacher.model.config.num_layers, settings.layers)
    name = f"{Path(settings.teacher).name}-L{settings.layers}-distill" if settings else "distill"
    run_dir = Path(args.run_dir) if args.run_dir else runs_root() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    command = "bertlab compress " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "bertlab compress distill"
    with run_log(run_dir, first_line=command, create=not args.resume):
        result, teacher, run_config = run_distillation(
            cfg,
            settings,
            run_dir,
            resume=args.resume,
            dry_run=args.dry_run,
            progress_bar=not args.no_progress,
            command=command,
            teacher=teacher,
        )
        out = out or model_dir(run_dir)
        if result.state != "finished":
            return None, out, result
        return write_student(run_dir, out, teacher, run_config, args.held_out, args.repeats), out, result
