"""What a training run will cost before it starts: parameters, memory per process and time.

A labelled estimate, not a promise: memory from the usual per-parameter and per-activation
formulas, time from FLOPs over a throughput measured in an earlier run of the same model shape on
the same kind of device, else a tabulated one (see `estimate`).

Imports the standard library and bertlab.config / errors / formatting / hardware / jobspec /
runfolder / runs; torch (and the model classes) only inside `count_parameters`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bertlab.config import BertConfig, preset
from bertlab.errors import CheckpointError
from bertlab.formatting import format_duration
from bertlab.hardware import gpu_stats
from bertlab.jobspec import JobError, JobSpec, parse_recipe_args, pretrain_config, validate
from bertlab.runfolder import read_metrics, read_run_config, read_status, runs_root
from bertlab.runs import run_dirs

log = logging.getLogger(__name__)

# Effective training throughput in FLOP/s (what PyTorch reaches on BERT-sized matmuls, not the
# datasheet peak). CPU: measured on this project's 2-core machine (mini: ~650 tokens/s = 1.4e10
# FLOP/s), scaled per core. GPUs: ~35-40% of the bf16 dense peak, a usual model-FLOPs utilisation
# for BERT-base at sequence length 128. Per-step overhead (Python, optimizer, data) is added on top.
TABULATED_FLOPS = {
    "cpu_per_core": 7e9,
    "H100": 3.5e14,
    "H200": 3.8e14,
    "A100": 1.1e14,
    "L4": 4.5e13,
    "T4": 1.5e13,
    "V100": 3.5e13,
    "cuda": 5e13,
}
STEP_OVERHEAD_S = {"cpu": 0.01, "cuda": 0.03}
MULTI_GPU_EFFICIENCY = 0.9  # DDP all-reduce costs ~10% at this scale


@dataclass(frozen=True)
class Estimate:
    """What a run will cost, before it starts. Rough: see `estimate` for the formulas."""

    parameters: int  # all weights of the model (embeddings included)
    trainable_parameters: int
    weights_gb: float  # fp32 weights (plus a bf16 copy under mixed precision)
    optimizer_gb: float  # gradients + AdamW's two moments, fp32
    activations_gb: float  # saved for the backward pass, one micro-batch
    overhead_gb: float  # CUDA context / framework
    total_gb: float  # per process (per GPU)
    device: str  # cpu | cuda
    device_name: str
    device_memory_gb: float | None  # what the device has, when known
    tokens_per_step: int  # all processes together
    steps: int | None  # the budget in steps (derived from the time budget when that is given)
    seconds: float | None  # training time, excluding data preparation and start-up
    tokens_per_s: float
    throughput_source: str  # "measured in run X" or "tabulated for <device>"
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool | None:
        return None if self.device_memory_gb is None else self.total_gb <= self.device_memory_gb

    def summary(self) -> str:
        time_text = format_duration(self.seconds) if self.seconds is not None else "?"
        return (
            f"{self.parameters / 1e6:.1f}M parameters; ~{self.total_gb:.2f} GB per process; "
            f"~{time_text} for {self.steps or '?'} steps at ~{self.tokens_per_s:,.0f} tokens/s (estimate, {self.throughput_source})"
        )


@functools.lru_cache(maxsize=64)  # a page asks again on every rerun; configs are frozen (hashable)
def count_parameters(config: BertConfig, pretraining_heads: bool = True, num_labels: int = 2) -> int:
    """Weights of BertForPreTraining (tied decoder counted once), or of a sentence classifier with
    `num_labels` classes: the real model's count, built on the meta device (shapes only, no memory)."""
    import torch

    with torch.device("meta"):
        if pretraining_heads:
            from bertlab.model import BertForPreTraining

            return BertForPreTraining(config).num_parameters()
        from bertlab.finetune.models import HeadConfig, build_task_model

        return build_task_model(config, HeadConfig(shape="single", num_labels=num_labels)).num_parameters()


def _device_info(device: str) -> tuple[str, float | None, float, str]:
    """(name, memory GB or None, effective FLOP/s, table key) of the first device of this kind."""
    if device == "cpu":
        cores = os.cpu_count() or 1
        mem = None
        with contextlib.suppress(OSError, ValueError):
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        return f"CPU ({cores} cores)", mem, TABULATED_FLOPS["cpu_per_core"] * cores, "cpu"
    stats = gpu_stats()
    name = stats[0].name if stats else "CUDA GPU"
    mem = stats[0].memory_total_gb if stats else None
    key = next((k for k in TABULATED_FLOPS if k not in ("cpu_per_core", "cuda") and k in name), "cuda")
    return name, mem, TABULATED_FLOPS[key], key


def _run_seq_length(run_config: dict) -> int | None:
    """max_seq_length of a pretraining (config.data.max_seq_length) or fine-tuning (config.max_seq_length) run."""
    cfg = run_config.get("config")
    if not isinstance(cfg, dict):
        return None
    data = cfg.get("data")
    value = data.get("max_seq_length") if isinstance(data, dict) else cfg.get("max_seq_length")
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _measured_tokens_per_s(
    config: BertConfig, seq_length: int, device: str, root: Path | None
) -> tuple[float, str] | None:
    """Median training throughput of the newest earlier run of the same model shape on the same kind of device."""
    root = Path(root) if root else runs_root()
    shape = (config.num_layers, config.hidden_size, config.num_heads, config.intermediate_size)
    for run in run_dirs(root)[:50]:
        try:
            rc = read_run_config(run) or {}
            mc = rc.get("model_config") or {}
            status = read_status(run)
            if (mc.get("num_layers"), mc.get("hidden_size"), mc.get("num_heads"), mc.get("intermediate_size")) != shape:
                continue
            if not str(status.get("device", "")).startswith(device):
                continue
            run_seq = _run_seq_length(rc) or seq_length
            if not (seq_length / 2 <= run_seq <= seq_length * 2):
                continue
            # Sequences/s times that run's sequence length: the padded tokens the model computed on,
            # not only the real ones (tokens_per_s), which a corpus of short documents makes few.
            rates = sorted(
                float(r["seq_per_s"]) * run_seq
                for r in read_metrics(run)[1:]
                if r.get("split") == "train" and r.get("seq_per_s")
            )
        except (AttributeError, TypeError, ValueError, OSError) as exc:  # a run folder from another version
            log.debug("skipping %s for throughput: %s", run, exc)
            continue
        if len(rates) >= 2:
            return rates[len(rates) // 2], f"measured in run {run.name}"
    return None


def estimate(
    config: BertConfig,
    batch_size: int = 32,
    seq_length: int = 128,
    max_steps: int = 0,
    max_time_s: float = 0.0,
    device: str = "cpu",
    num_gpus: int = 1,
    grad_accum: int = 1,
    precision: str = "auto",
    pretraining: bool = True,
    max_predictions: int = 20,
    trainable_fraction: float = 1.0,
    runs_dir: str | Path | None = None,
) -> Estimate:
    """Parameters, memory and time of a training run (a labelled estimate, not a promise).

    Memory per process, in bytes (N = parameters, B = micro-batch, S = sequence, H = hidden,
    F = feed-forward width, A = heads, L = layers, V = vocabulary):
      weights     4N fp32 (+2N for the bf16 copies autocast makes on CUDA)
      optimizer   4N gradients + 8N AdamW moments (m, v), for the trainable share of N
      activations L * (B*S*(18H + 4F) + 5*A*S^2*B) bytes at 16 bits (Korthikanti et al. 2022,
                  generalised to F != 4H), doubled for fp32 on CPU; the 5AS^2B attention-score
                  term is dropped on CUDA, where SDPA's fused kernels do not keep the scores;
                  plus the MLM logits, 3 * B * P * V * 4 bytes for P predictions per sequence
      overhead    ~0.5 GB CUDA context or ~0.4 GB for torch on CPU
    Time per step = 6 * N_matmul * tokens + 12 * L * S * H * tokens FLOPs (Kaplan et al. 2020)
    over an effective FLOP/s, plus a fixed per-step overhead. The FLOP/s comes from an earlier run
    of the same model shape on the same kind of device when there is one (measured), otherwise
    from `TABULATED_FLOPS`.
    """
    if device not in ("cpu", "cuda"):
        raise JobError(f"estimate needs device cpu or cuda, not {device!r}")
    if batch_size < 1 or seq_length < 1:
        raise JobError("batch size and sequence length must be positive")
    params = count_parameters(config, pretraining_heads=pretraining)
    trainable = int(params * trainable_fraction)
    micro = max(1, batch_size // max(1, grad_accum))
    amp = device == "cuda" and precision != "fp32"
    weights = 4 * params + (2 * params if amp else 0)
    optimizer = 12 * trainable  # fp32 gradients (4) + AdamW m (4) + v (4)
    act = _activation_bytes(config, micro, seq_length, device, amp, trainable_fraction, pretraining, max_predictions)
    overhead = 0.5 * 2**30 if device == "cuda" else 0.4 * 2**30
    gb = 2**30
    total = (weights + optimizer + act + overhead) / gb

    name, mem, flops_rate, key = _device_info(device)
    tokens_per_step = batch_size * seq_length * max(1, num_gpus)
    flops_per_token = _flops_per_token(config, seq_length, pretraining, max_predictions)
    gpus = max(1, num_gpus)
    rate = flops_rate * gpus * (MULTI_GPU_EFFICIENCY if gpus > 1 else 1.0)
    step_s = flops_per_token * tokens_per_step / rate + STEP_OVERHEAD_S[device] * max(1, grad_accum)
    tokens_per_s = tokens_per_step / step_s
    source = f"tabulated for {key if key != 'cpu' else name}"
    measured = _measured_tokens_per_s(config, seq_length, device, runs_dir)
    if measured and gpus == 1:
        tokens_per_s, source = measured
        step_s = tokens_per_step / tokens_per_s
    steps, seconds, notes = _steps_and_seconds(max_steps, max_time_s, step_s)
    if mem is not None and total > mem:
        notes.append(f"needs ~{total:.1f} GB but the device has {mem:.1f} GB: lower the batch size or sequence length")
    notes.append("data preparation and start-up come on top (seconds for a small corpus, minutes for a large one)")
    return Estimate(
        parameters=params,
        trainable_parameters=trainable,
        weights_gb=weights / gb,
        optimizer_gb=optimizer / gb,
        activations_gb=act / gb,
        overhead_gb=overhead / gb,
        total_gb=total,
        device=device,
        device_name=name,
        device_memory_gb=mem,
        tokens_per_step=tokens_per_step,
        steps=steps,
        seconds=seconds,
        tokens_per_s=tokens_per_s,
        throughput_source=source,
        notes=tuple(notes),
    )


def _steps_and_seconds(max_steps: int, max_time_s: float, step_s: float) -> tuple[int | None, float | None, list[str]]:
    """(steps, seconds, notes) of a run at `step_s` a step: its step budget, or fewer steps when its
    time budget ends training first (then said in the notes); None for a budget not given."""
    notes = []
    steps = int(max_steps) if max_steps else None
    seconds = steps * step_s if steps else None
    if max_time_s:
        budget_steps = int(max_time_s / step_s)
        if steps is None or budget_steps < steps:
            steps, seconds = budget_steps, float(max_time_s)
            notes.append("the time budget ends training first")
    return steps, seconds, notes


def _activation_bytes(
    config: BertConfig,
    micro: int,
    seq_length: int,
    device: str,
    amp: bool,
    trainable_fraction: float,
    pretraining: bool,
    max_predictions: int,
) -> float:
    """Bytes saved for the backward pass of one micro-batch (see `estimate`)."""
    L, H, F, A, V = config.num_layers, config.hidden_size, config.intermediate_size, config.num_heads, config.vocab_size  # noqa: N806
    score_term = 0 if device == "cuda" else 5 * A * seq_length**2 * micro
    act = L * (micro * seq_length * (18 * H + 4 * F) + score_term)
    act = act * (1 if amp else 2)
    if trainable_fraction < 1.0:
        act = act * trainable_fraction  # a frozen encoder keeps (almost) nothing for backward
    if pretraining:
        act += 3 * micro * min(max_predictions, seq_length) * V * 4
    return act


def _flops_per_token(config: BertConfig, seq_length: int, pretraining: bool, max_predictions: int) -> float:
    """Training FLOPs per input token: 6 per matmul weight plus attention's 12 L S H (see `estimate`)."""
    L, H, F, V = config.num_layers, config.hidden_size, config.intermediate_size, config.vocab_size  # noqa: N806
    n_matmul = L * (4 * H * H + 2 * H * F) + (
        H * H + H * V * min(1.0, max_predictions / seq_length) if pretraining else H
    )
    return 6 * n_matmul + 12 * L * seq_length * H


def estimate_spec(spec: JobSpec, cwd: str | Path | None = None, runs_dir: str | Path | None = None) -> Estimate:
    """The estimate of a job spec (validated first; raises JobError when it would not run)."""
    cwd = Path(cwd or os.getcwd())
    spec = validate(spec, cwd)
    ns = parse_recipe_args(spec.kind, spec.args)
    if spec.kind == "pretrain":
        cfg = pretrain_config(ns, cwd)
        t = cfg.train
        return estimate(
            cfg.model_config(cfg.vocab_size),
            batch_size=t.batch_size,
            seq_length=cfg.data.max_seq_length,
            max_steps=t.max_steps,
            max_time_s=t.max_time_s,
            device=spec.device,
            num_gpus=spec.num_gpus,
            grad_accum=t.grad_accum,
            precision=t.precision,
            pretraining=True,
            max_predictions=cfg.data.max_predictions_per_seq,
            runs_dir=runs_dir,
        )
    model_cfg = _model_config(cwd, getattr(ns, "model", None), getattr(ns, "size", None))
    feature = getattr(ns, "mode", "finetune") == "feature"
    return estimate(
        model_cfg,
        batch_size=getattr(ns, "batch_size", None) or 32,
        seq_length=getattr(ns, "max_seq_length", None) or (384 if getattr(ns, "task", "") == "squad" else 128),
        max_steps=getattr(ns, "max_steps", None) or 0,
        max_time_s=getattr(ns, "max_time_s", None) or 0,
        device=spec.device,
        num_gpus=spec.num_gpus,
        pretraining=False,
        trainable_fraction=0.01 if feature else 1.0,
        runs_dir=runs_dir,
    )


def _model_config(cwd: Path, model: str | None, size: str | None) -> BertConfig:
    """The config of a fine-tuning job's starting model: its config.json when the folder is here,
    else (a Hub id, or a model an earlier job will write) the preset `size` or mini."""
    path = cwd / Path(model).expanduser() / "config.json" if model else None
    if path is None or not path.is_file():
        return preset(size or "mini")
    try:
        return BertConfig.from_hf_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError, CheckpointError) as exc:
        raise JobError(
            f"{path} cannot be read as a BERT config ({exc}); point the model at a checkpoint folder "
            "whose config.json `bertlab export` or transformers wrote"
        ) from exc
