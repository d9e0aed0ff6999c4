"""The estimate of a job spec before it runs: the model the job will really run, its real token counts
(a pretraining corpus's instances, a task's data through the model's tokenizer), its phases, whether it
compiles, and what it will not do (a corpus or task data it cannot read, a run of a few steps).
`estimate_spec` is what the Train page, the jobs CLI and the ablation suites call.

Imports the standard library and bertlab.config / data.corpus (named corpora) / errors / formatting /
jobs.spec / storage.modelfolder / training.estimates / task_tokens; the fine-tuning recipe and the
trainer's compile rule only inside the functions that use them (deferred: they import torch).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bertlab.config import BertConfig, parameter_count, preset
from bertlab.data.corpus import NAMED_SOURCES
from bertlab.errors import BertLabError, CheckpointError
from bertlab.formatting import format_duration
from bertlab.jobs.estimates.estimate import Estimate, estimate, with_compile
from bertlab.jobs.estimates.task_tokens import pretraining_tokens, task_tokens, typical_tokens
from bertlab.jobs.estimates.timed_step import PretrainingModel
from bertlab.jobs.spec import JobError, JobSpec, parse_recipe_args, pretrain_config, validate
from bertlab.models.registry import family_for
from bertlab.storage.modelfolder import CONFIG_FILE, has_config

if TYPE_CHECKING:  # annotations only
    from bertlab.data.data_config import DataConfig
    from bertlab.training.pretrain_config import PretrainConfig


def estimate_spec(
    spec: JobSpec,
    cwd: str | Path | None = None,
    runs_dir: str | Path | None = None,
    measure: bool = True,
    model_config: BertConfig | None = None,
    gpus: int | None = None,
) -> Estimate:
    """The estimate of a job spec (validated first; raises JobError when it would not run): the
    model the job will really run (a fine-tuning job without --model starts from the shipped
    model), its real token counts, and whether it compiles.

    `model_config`: the shape of a fine-tuning job's starting model when an earlier job has yet to
    write it (an ablation suite's pretrained variant). `gpus`: the GPUs to plan for (None: this
    machine's). A pretraining budget in tokens (train.max_tokens) is steps of batch x the real
    (unpadded) tokens of a row, as the trainer counts them, from instances made of a sample of the
    corpus (`pretraining_tokens`; full rows when the corpus cannot be read)."""
    cwd = Path(cwd or os.getcwd())
    spec = validate(spec, cwd, gpus)
    ns = parse_recipe_args(spec.kind, spec.args)
    if spec.kind == "pretrain":
        return _pretraining_estimate(spec, _paths_from(pretrain_config(ns, cwd), cwd), runs_dir, measure)
    if spec.kind == "distill":
        return _distill_estimate(spec, ns, cwd, runs_dir, measure)
    return _finetune_estimate(spec, ns, cwd, runs_dir, measure, model_config)


def _paths_from(cfg: PretrainConfig, cwd: Path) -> PretrainConfig:
    """`cfg` with its corpus, vocab and init_from paths read from `cwd`, the folder the job runs in
    (named corpora, hf: sources and Hub ids as they are)."""

    def here(path: str | None) -> str | None:
        if not path or str(path) in NAMED_SOURCES or str(path).startswith("hf:"):
            return path
        p = Path(path).expanduser()
        return str(p if p.is_absolute() or not (cwd / p).exists() else cwd / p)

    return dataclasses.replace(
        cfg, corpus=tuple(here(c) for c in cfg.corpus), vocab=here(cfg.vocab), init_from=here(cfg.init_from)
    )


def _pretraining_estimate(spec: JobSpec, cfg: PretrainConfig, runs_dir, measure: bool) -> Estimate:
    """A pretraining job's estimate, phase by phase (`phase2` switches to longer sequences at a share of
    the budget: its steps cost more and hold more tokens), summed into one."""
    t = cfg.train
    model_cfg = cfg.model_config(cfg.vocab_size)
    micro = max(1, t.batch_size // max(1, t.grad_accum))
    phases = cfg.phase_data()
    shares = [cfg.phase2_at, 1 - cfg.phase2_at] if len(phases) > 1 else [1.0]
    parts, unread = [], ""
    for data, share in zip(phases, shares, strict=True):
        try:
            tokens = pretraining_tokens(dataclasses.replace(cfg, data=data), micro)
        except (BertLabError, OSError) as exc:  # the job will say so too; the estimate goes on with full rows
            tokens, unread = None, f"the corpus cannot be read to count its tokens: {exc}"
        real_row = tokens.real_per_row if tokens else data.max_seq_length
        # the phase lasts `share` of whichever budget ends first, as the trainer's fraction of the budget;
        # in steps it switches at the first step at or past phase2.at: ceil(at x steps) in phase 1
        first = math.ceil(cfg.phase2_at * t.max_steps) if len(phases) > 1 else t.max_steps
        steps = (first if data is phases[0] else t.max_steps - first) if t.max_steps else 0
        if t.max_tokens:  # the trainer counts real tokens (not padding) against the budget
            token_steps = math.ceil(share * t.max_tokens / (t.batch_size * real_row * max(1, spec.num_gpus)))
            steps = min(steps, token_steps) if steps else token_steps
        if t.max_steps and not steps and not t.max_time_s:  # a budget too short to reach this phase
            continue
        est = estimate(
            model_cfg,
            batch_size=t.batch_size,
            seq_length=data.max_seq_length,
            max_steps=steps,
            max_time_s=share * t.max_time_s,
            device=spec.device,
            num_gpus=spec.num_gpus,
            grad_accum=t.grad_accum,
            precision=t.precision,
            pretraining=True,
            max_predictions=data.max_predictions_per_seq,
            runs_dir=runs_dir,
            threads=t.num_threads,
            measure=measure,
            tokens=tokens,
            family=PretrainingModel(cfg.model_type, cfg.data.objective, tuple(sorted(cfg.family_overrides.items()))),
        )
        parts.append((data, est))
    est = _with_few_steps_note(parts[0][1] if len(parts) == 1 else _phases_together(parts))
    if unread:
        est = dataclasses.replace(est, notes=(unread, *est.notes), problem=unread)
    if _compiles(t.compile, est, static_shapes=True):
        est = with_compile(est, model_cfg)
    return est


FEW_STEPS = 10  # fewer steps than this: the run is a check of the pipeline, not training


def _with_few_steps_note(est: Estimate) -> Estimate:
    """Say that a run of a few steps learns next to nothing: the learning rate warms up from 0, so the
    first step changes no weight (one step trained a classifier to chance, and the page said nothing)."""
    if est.steps is None or est.steps >= FEW_STEPS:
        return est
    note = (
        f"a run of {est.steps} step{'s' if est.steps != 1 else ''} checks that the job works but teaches the model "
        "next to nothing: the learning rate warms up from 0, so the first step changes no weight"
    )
    return dataclasses.replace(est, notes=(note, *est.notes))


def _phases_together(parts: list[tuple[DataConfig, Estimate]]) -> Estimate:
    """One estimate of a run in phases: steps and seconds summed, tokens a step averaged over the steps,
    memory that of the hungriest phase."""
    (first_data, first), (last_data, last) = parts[0], parts[-1]
    ests = [e for _, e in parts]
    if any(e.steps is None or e.seconds is None for e in ests):  # no budget to split: not a run (validated)
        raise JobError("a pretraining estimate needs a budget in steps, tokens or seconds")
    steps = sum(e.steps for e in ests)
    seconds = sum(e.seconds for e in ests)
    tokens = sum(e.tokens_per_step * e.steps for e in ests)
    padded = sum(e.padded_tokens_per_step * e.steps for e in ests)
    hungriest = max(ests, key=lambda e: e.total_gb)
    phase_note = (
        f"two phases: {first.steps:,} steps of {first_data.max_seq_length}-token sequences "
        f"({format_duration(first.seconds)}), then {last.steps:,} of {last_data.max_seq_length} "
        f"({format_duration(last.seconds)})"
    )
    notes = tuple(dict.fromkeys((phase_note, *first.notes, *last.notes)))
    return dataclasses.replace(
        hungriest,
        steps=steps,
        seconds=seconds,
        tokens_per_step=round(tokens / max(1, steps)),
        padded_tokens_per_step=round(padded / max(1, steps)),
        tokens_per_s=tokens / seconds if seconds and tokens else hungriest.tokens_per_s,
        notes=notes,
        throughput_source=last.throughput_source,
        lengths_source=f"{first.lengths_source}; each phase's own sequence length",
    )


def _compiles(setting: object, est: Estimate, static_shapes: bool) -> bool:
    """Whether the trainer will compile this run: compile=True always; 'auto' when every batch has
    the same shapes and the trainer's own rule (`compile_pays`) says the training time pays for it."""
    if setting is True:
        return True
    if setting != "auto" or not static_shapes or est.seconds is None:
        return False
    from bertlab.training.optimization import compile_pays  # deferred: torch; the trainer's own rule

    return compile_pays(est.seconds, est.device)[0]


def _finetune_estimate(
    spec: JobSpec, ns, cwd: Path, runs_dir, measure: bool, model_config: BertConfig | None = None
) -> Estimate:
    from bertlab.finetune.cli import config_from_args  # deferred: the recipe imports torch
    from bertlab.finetune.recipe import head_config, input_length, trained_length  # deferred: imports torch

    cfg = config_from_args(ns)
    # relative paths in a job's arguments are relative to the folder it runs in
    if cfg.model and not Path(cfg.model).expanduser().is_absolute() and (cwd / cfg.model).exists():
        cfg = dataclasses.replace(cfg, model=str(cwd / cfg.model))
    if not str(cfg.data).startswith("hf:") and not Path(cfg.data).expanduser().is_absolute():
        cfg = dataclasses.replace(cfg, data=str(cwd / cfg.data))
    if model_config is not None:
        model_cfg = model_config
    elif cfg.model and has_config(cwd / Path(cfg.model).expanduser()):
        model_cfg = _task_model_config(cwd / Path(cfg.model).expanduser())
    else:
        model_cfg = _model_config(cwd, cfg.model, None) if cfg.model else preset(cfg.size, vocab_size=cfg.vocab_size)
    t = cfg.train
    micro = max(1, t.batch_size // max(1, t.grad_accum))
    # the recipe cuts inputs to the model's positions and to the length it was pretrained on
    pretrained = trained_length(cfg, cwd / Path(cfg.model).expanduser()) if cfg.model else 0
    # the longest input its position table holds: RoBERTa's rows start after the padding index (514 hold 512)
    positions = getattr(model_cfg, "max_length", model_cfg.max_position_embeddings)
    cfg = dataclasses.replace(cfg, max_seq_length=input_length(cfg, positions, pretrained))
    unread = ""
    try:
        tokens = task_tokens(cfg, micro)
    except (BertLabError, OSError) as exc:  # the job will say so too; the estimate goes on with typical lengths
        unread = f"the task's data cannot be read to count its tokens: {exc}"
        tokens = typical_tokens(cfg.task, cfg.max_seq_length, "its data could not be read")
    steps = 0 if cfg.epochs else t.max_steps  # an epoch budget's max_steps is the CLI's placeholder: unknown
    if cfg.epochs and tokens.features:
        steps = max(1, math.ceil(cfg.epochs * math.ceil(tokens.features / micro) / max(1, t.grad_accum)))
    est = estimate(
        model_cfg,
        batch_size=t.batch_size,
        seq_length=max(8, min(cfg.max_seq_length, tokens.longest or cfg.max_seq_length)),
        max_steps=steps,
        max_time_s=t.max_time_s,
        device=spec.device,
        num_gpus=spec.num_gpus,
        grad_accum=t.grad_accum,
        precision=t.precision,
        pretraining=False,
        trainable_fraction=0.01 if cfg.mode == "feature" else 1.0,
        runs_dir=runs_dir,
        tokens=tokens,
        task=cfg.task,
        threads=t.num_threads,
        measure=measure,
        max_seq_length=cfg.max_seq_length,
        head=head_config(cfg, ("0", "1")),  # the output layer's width costs next to nothing; its kind counts
    )
    if unread:
        est = dataclasses.replace(est, notes=(unread, *est.notes), problem=unread)
    if not (cfg.epochs and not tokens.features):  # an epoch budget over data not read: its steps are not known
        est = _with_few_steps_note(est)
    # a fine-tuning batch is padded to its longest row: shapes change, so 'auto' stays eager
    return with_compile(est, model_cfg) if _compiles(t.compile, est, static_shapes=False) else est


def _distill_estimate(spec: JobSpec, ns, cwd: Path, runs_dir, measure: bool) -> Estimate:
    """A distillation's estimate: the student's pretraining step (N of the teacher's layers, its width,
    vocabulary and heads) on the job's corpus and budget, made slower by the teacher's forward pass. A
    forward pass costs about a third of a training step (backward about twice forward), so a step costs
    (3N + L) / 3N of the student's: an assumption, not a measurement. The teacher's fp32 weights add to memory."""
    teacher = _model_config(cwd, ns.teacher, None)
    n, depth = ns.layers, teacher.num_layers
    shape = {
        k: getattr(teacher, k) for k in ("hidden_size", "num_heads", "intermediate_size", "max_position_embeddings")
    }
    cfg = _paths_from(pretrain_config(ns, cwd), cwd)
    objective = "mlm_nsp" if teacher.use_nsp_head else "mlm"
    cfg = dataclasses.replace(
        cfg,
        vocab_size=teacher.vocab_size,
        model_overrides=shape | {"num_layers": n},
        data=dataclasses.replace(cfg.data, objective=objective),
    )
    est = _pretraining_estimate(spec, cfg, runs_dir, measure)
    slower = (3 * n + depth) / (3 * n)
    teacher_gb = parameter_count(teacher) * 4 / 1e9
    steps, seconds = est.steps, est.seconds
    if cfg.train.max_time_s and steps:
        steps = max(1, int(steps / slower))
    elif seconds is not None:
        seconds *= slower
    return dataclasses.replace(
        est,
        weights_gb=est.weights_gb + teacher_gb,
        total_gb=est.total_gb + teacher_gb,
        steps=steps,
        seconds=seconds,
        tokens_per_s=est.tokens_per_s / slower,
        notes=(
            f"a step of the {n}-layer student plus the {depth}-layer teacher's forward pass: timed as the student's "
            f"pretraining step x {slower:.2f} ((3N + L) / 3N, an assumption)",
            *est.notes,
        ),
    )


def _task_model_config(folder: Path) -> BertConfig:
    """The config a fine-tuning job builds its model with from a local folder, in the folder's family
    (bertlab.finetune.recipe: an ALBERT's, a RoBERTa's; a pair folder's discriminator), so a step is timed
    on the family's encoder and classifier."""
    from bertlab.finetune.recipe import encoder_folder  # deferred: the recipe imports torch
    from bertlab.storage.checkpoint import load_config  # deferred: imports torch

    try:
        config, raw = load_config(encoder_folder(folder))
    except CheckpointError as exc:
        raise JobError(
            f"{folder / CONFIG_FILE} cannot be read as a model config ({exc}); point the model at a checkpoint "
            "folder whose config.json `bertlab export` or transformers wrote"
        ) from exc
    return family_for(raw, str(folder / CONFIG_FILE)).load().task_config(config)


def _model_config(cwd: Path, model: str | None, size: str | None) -> BertConfig:
    """The config of a fine-tuning job's starting model: its config.json when the folder is here,
    else (a Hub id, or a model an earlier job will write) the preset `size` or mini."""
    path = cwd / Path(model).expanduser() / CONFIG_FILE if model else None
    if path is None or not path.is_file():
        return preset(size or "mini")
    try:
        return BertConfig.from_hf_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, CheckpointError) as exc:
        raise JobError(
            f"{path} cannot be read as a BERT config ({exc}); point the model at a checkpoint folder "
            "whose config.json `bertlab export` or transformers wrote"
        ) from exc
