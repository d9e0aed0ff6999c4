"""What a training run will cost before it starts: parameters, memory per process and time.

A labelled estimate, not a promise. Memory comes from the usual per-parameter and per-activation
formulas. Time is steps x seconds a step, where a step's tokens are the job's real token counts:
a fine-tuning batch is padded to its longest row (dynamic padding), so its length comes from the
task's own data run through the model's own tokenizer (`task_tokens`), not from max_seq_length.
Seconds a step come, in this order, from an earlier run of the same job shape on the same kind of
device, from timing a few training steps of the job's model on this machine now, in the precision
the job will train in (`measured_step_seconds`; a micro-batch too long to time whole is extended
along a line through two smaller ones, `_micro_batch_seconds`), or, for a model too big to time
here, from a tabulated FLOP/s (`TABULATED_FLOPS`). Compiling the model (`torch.compile`) adds
`compile_s` in front.

Imports the standard library and bertlab.config / errors / formatting / hardware / jobs.spec / modelfolder /
task_tokens (a job's real token counts) / train_types (the compile cost) /
runfolder / runs; torch, the model classes and the fine-tuning recipe only inside the functions
that build models or read task data (deferred so the jobs CLI starts without torch).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bertlab import train_types
from bertlab.config import BertConfig, preset
from bertlab.corpus import NAMED_SOURCES
from bertlab.errors import BertLabError, CheckpointError
from bertlab.formatting import format_duration
from bertlab.hardware import default_threads, gpu_stats
from bertlab.jobs.runs import run_dirs
from bertlab.jobs.spec import JobError, JobSpec, parse_recipe_args, pretrain_config, validate
from bertlab.modelfolder import CONFIG_FILE
from bertlab.runfolder import read_metrics, read_run_config, read_status, runs_root
from bertlab.task_tokens import TaskTokens, pretraining_tokens, task_tokens, typical_tokens

if TYPE_CHECKING:  # annotations only: the head's module imports torch
    from collections.abc import Callable

    import torch

    from bertlab.data_config import DataConfig
    from bertlab.finetune.models import HeadConfig
    from bertlab.pretrain_config import PretrainConfig

log = logging.getLogger(__name__)

# Effective training throughput in FLOP/s, used only for models too big to time here (see
# `estimate`): what PyTorch reaches on BERT-sized matmuls, not the datasheet peak. GPUs: ~35-40%
# of the bf16 dense peak, a usual model-FLOPs utilisation for BERT-base at sequence length 128.
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
MEASURE_MAX_PARAMETERS = 60_000_000  # larger models are not built here just to time them (memory, minutes)
MEASURE_MAX_STEP_S = 0.5  # a step the table expects to take longer is timed on fewer rows and scaled up
MEASURE_WHOLE_MAX_STEP_S = 1.0  # ...unless the smaller steps' line puts the whole one under this: then it is timed


LONG_RUN_S = 24 * 3600  # a training run over a day gets a warning beside its estimate
LONG_RUN_MARK = "this run takes over a day"
WARNING_MARKS = ("needs ~", "next to nothing", LONG_RUN_MARK)  # the notes `Estimate.warnings` returns


@dataclass(frozen=True)
class Estimate:
    """What a run will cost, before it starts. Rough: see `estimate` for the formulas."""

    parameters: int  # all weights of the model (embeddings included)
    trainable_parameters: int
    weights_gb: float  # fp32 weights (plus a bf16 copy under mixed precision)
    optimizer_gb: float  # gradients + AdamW's two moments, fp32
    activations_gb: float  # saved for the backward pass, one micro-batch of the longest rows
    overhead_gb: float  # CUDA context / framework
    total_gb: float  # per process (per GPU)
    device: str  # cpu | cuda
    device_name: str
    device_memory_gb: float | None  # what the device has, when known
    tokens_per_step: int  # real (not padding) tokens, all processes together
    steps: int | None  # the budget in steps (derived from the time budget when that is given)
    seconds: float | None  # training time, excluding compiling, data preparation and start-up
    tokens_per_s: float  # real tokens a second, as the run's metrics will report them
    throughput_source: str  # "measured in run X", "timed here now (...)" or "tabulated for <device>"
    notes: tuple[str, ...] = ()
    padded_tokens_per_step: int = 0  # what the model computes on: rows x each batch's longest row
    lengths_source: str = ""  # where the token counts come from
    compile_s: float = 0.0  # seconds spent in torch.compile before the first step (0: not compiling)
    problem: str = ""  # why the job as given will fail (its data cannot be read); "" when none is seen

    @property
    def warnings(self) -> tuple[str, ...]:
        """The notes a user should not miss before launching (shown as warnings, the rest as captions)."""
        return tuple(n for n in self.notes if any(mark in n for mark in WARNING_MARKS))

    @property
    def fits(self) -> bool | None:
        return None if self.device_memory_gb is None else self.total_gb <= self.device_memory_gb

    @property
    def total_s(self) -> float | None:
        """Training time plus compiling: how long until the last step is done."""
        return None if self.seconds is None else self.seconds + self.compile_s

    def summary(self) -> str:
        time_text = format_duration(self.total_s) if self.total_s is not None else "?"
        compiling = f", {format_duration(self.compile_s)} of it compiling" if self.compile_s else ""
        return (
            f"{self.parameters / 1e6:.1f}M parameters; ~{self.total_gb:.2f} GB per process; "
            f"~{time_text} for {self.steps or '?'} steps{compiling} at ~{self.tokens_per_s:,.0f} tokens/s "
            f"(estimate, {self.throughput_source})"
        )


@functools.lru_cache(maxsize=64)  # a page asks again on every rerun; configs are frozen (hashable)
def count_parameters(
    config: BertConfig,
    pretraining_heads: bool = True,
    num_labels: int = 2,
    head: HeadConfig | None = None,
    trainable_only: bool = False,
) -> int:
    """Weights of BertForPreTraining (tied decoder counted once), or of the task model `head` describes
    (default: a sentence classifier with `num_labels` classes; a BiLSTM's weights count), only those
    training updates with `trainable_only` (a frozen encoder's do not): the real model's count, built on
    the meta device (shapes only, no memory)."""
    import torch

    with torch.device("meta"):
        if pretraining_heads:
            from bertlab.model import BertForPreTraining  # deferred: torch

            return BertForPreTraining(config).num_parameters()
        from bertlab.finetune.models import HeadConfig, build_task_model  # deferred: torch

        model = build_task_model(config, head or HeadConfig(shape="single", num_labels=num_labels))
        return model.num_parameters(trainable_only=trainable_only)


def compile_seconds(config: BertConfig, device: str) -> float:
    """Rough seconds torch.compile takes before the first step (bertlab.train_types owns the figures)."""
    return train_types.compile_seconds(config.num_layers, device)


def _device_info(device: str) -> tuple[str, float | None, float, str]:
    """(name, memory GB or None, effective FLOP/s, table key) of the first device of this kind."""
    if device == "cpu":
        cores = os.cpu_count() or 1
        mem = None
        with contextlib.suppress(OSError, ValueError):
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        return f"CPU, {cores} cores", mem, TABULATED_FLOPS["cpu_per_core"] * cores, "cpu"
    stats = gpu_stats()
    name = stats[0].name if stats else "CUDA GPU"
    mem = stats[0].memory_total_gb if stats else None
    key = next((k for k in TABULATED_FLOPS if k not in ("cpu_per_core", "cuda") and k in name), "cuda")
    return name, mem, TABULATED_FLOPS[key], key


# --------------------------------------------------------------------------------------
# Seconds a step: an earlier run, timed here now, or tabulated
# --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)  # an estimate times up to ~log2(rows) + 3 shapes
def measured_step_seconds(
    config: BertConfig,
    rows: int,
    length: int,
    device: str = "cpu",
    pretraining: bool = True,
    max_predictions: int = 20,
    frozen_encoder: bool = False,
    threads: int = 0,
    head: HeadConfig | None = None,
    precision: str = "auto",
    real_length: float = 0.0,
    trial: int = 0,
) -> float:
    """Seconds of a training step (forward, backward, AdamW) of the real model on one micro-batch of
    `rows` x `length` random tokens: the faster of two steps after an untimed one (the faster one
    is the less disturbed by other work on the machine). Cached per shape and `trial`: another
    `trial` times the same shape again (`_micro_batch_seconds` keeps the faster of two, another shape timed
    between them).

    `real_length`: the mean real (unpadded) tokens of a row, for a head whose cost follows the real
    tokens rather than the padded batch (`_real_tokens_row`): the timed batch is padded as the job's are
    (one row `length` long, the others shorter, `real_length` on average). 0: every row `length` tokens.

    `precision`: the job's, resolved as the trainer resolves it (`optimization.resolve_precision`):
    bf16 autocast on a GPU or a CPU with bf16 instructions, where a step takes ~0.6x fp32's.

    `head`: a fine-tuning job's real output layer and what feeds it (a BiLSTM, the layers it reads,
    a tagging or span head); None times a sentence classifier.

    `threads` > 0 times with that many CPU threads, as a job with --threads runs; 0 with those a job
    gets by default (`default_threads`); torch's thread count is put back afterwards."""
    import torch

    from bertlab.finetune.models import HeadConfig, build_task_model  # deferred: torch
    from bertlab.model import BertForPreTraining
    from bertlab.optimization import autocast_context  # deferred: torch

    g = torch.Generator().manual_seed(0)
    torch_device = torch.device(device)
    head = head or HeadConfig(shape="single", num_labels=2)
    model = (BertForPreTraining(config) if pretraining else build_task_model(config, head)).to(torch_device)
    model.train()
    if frozen_encoder:
        for p in model.bert.parameters():
            p.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(5, config.vocab_size, (rows, length), generator=g).to(torch_device)  # (B, T)
    mask = torch.ones_like(ids)
    if 0 < real_length < length:
        mask[1:, _other_rows_length(rows, length, real_length) :] = 0
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}
    if pretraining:
        labels = torch.full_like(ids, -100)
        labels[:, 1 : 1 + min(max_predictions, length - 1)] = ids[:, 1 : 1 + min(max_predictions, length - 1)]
        batch |= {"mlm_labels": labels, "nsp_labels": torch.zeros(rows, dtype=torch.long, device=torch_device)}
    elif head.shape == "qa":
        batch |= {
            "start_positions": torch.ones(rows, dtype=torch.long),
            "end_positions": torch.ones(rows, dtype=torch.long),
        }
    elif head.shape == "tagging":
        batch["labels"] = torch.zeros_like(ids)
    else:
        batch["labels"] = torch.zeros(rows, dtype=torch.float if head.num_labels == 1 else torch.long)
    batch = {k: v.to(torch_device) for k, v in batch.items()}
    amp = autocast_context(torch_device, _autocast_dtype(precision, torch_device))
    old_threads = torch.get_num_threads()
    if device == "cpu":  # the job's threads, not this process's (the app answers on fewer)
        torch.set_num_threads(threads or default_threads())
    try:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            with amp:
                loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old_threads)
    return min(times[1:])


def _real_tokens_row(real_row: float, padded_row: float, pretraining: bool, head: HeadConfig | None) -> float:
    """The real tokens a row to time a step on, where the job's cost follows them (a BiLSTM head runs on
    packed sequences); 0 where it follows the padded batch (every other model and head)."""
    bilstm = not pretraining and head is not None and head.use_bilstm
    return real_row if bilstm and real_row < padded_row else 0.0


def _other_rows_length(rows: int, length: int, real_length: float) -> int:
    """The length of every row but the first (which is `length` long, as a batch's longest row) for the
    rows to average `real_length` real tokens; at least 1."""
    if rows < 2:
        return length
    return max(1, min(length, round((rows * real_length - length) / (rows - 1))))


def _rows_for_real_length(length: int, real_length: float) -> int:
    """The fewest rows whose padded batch (`_other_rows_length`) averages `real_length` without cutting the
    short rows at one token: fewer would make a line through two timed steps see a row's cost as a token's."""
    return math.ceil((length - 1) / (real_length - 1)) if real_length > 1 else 1


def _run_seq_length(run_config: dict) -> int | None:
    """max_seq_length of a pretraining (config.data.max_seq_length) or fine-tuning run (the length it used,
    task_setup.max_seq_length, else config.max_seq_length)."""
    cfg = run_config.get("config")
    if not isinstance(cfg, dict):
        return None
    used = (run_config.get("task_setup") or {}).get("max_seq_length")
    if isinstance(used, int) and used > 0:
        return used
    data = cfg.get("data")
    value = data.get("max_seq_length") if isinstance(data, dict) else cfg.get("max_seq_length")
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _run_threads(run_config: dict) -> int:
    """The CPU threads a run trained on: its train.num_threads, else (0: torch's default) `default_threads`."""
    cfg = run_config.get("config")
    train = run_config.get("effective_train") or (cfg.get("train") if isinstance(cfg, dict) else None)
    n = train.get("num_threads") if isinstance(train, dict) else None
    return int(n) if isinstance(n, (int, float)) and n > 0 else default_threads()


_HEAD_KEYS = ("mode", "features", "bilstm", "lstm_hidden", "lstm_layers")


def _measured_in_run(
    config: BertConfig,
    seq_length: int,
    padded_per_row: float,
    batch_size: int,
    device: str,
    task: str | None,
    root,
    head: HeadConfig | None = None,
    max_seq_length: int = 0,
    threads: int = 0,
) -> tuple[float, str] | None:
    """(seconds a step, source) from the newest earlier run of the same job shape on the same kind
    of device: a pretraining run of the same model shape and about the same sequence length (its
    sequences/s times its length: the tokens it computed on), or a fine-tuning run of the same task,
    model shape, batch size, max_seq_length and head (mode, features, BiLSTM: its sequences/s,
    since its batches are padded as this job's will be). On a CPU the run must have trained on as many
    threads as this job will (`threads`, 0: `default_threads`): a step on 1 thread took ~1.4x one on 2."""
    root = Path(root) if root else runs_root()
    # the objective shows in the shape too: a left-to-right model predicts every token, not 15% of them
    keys = ("num_layers", "hidden_size", "num_heads", "intermediate_size", "attention_direction", "use_nsp_head")
    defaults = {"attention_direction": "bidirectional", "use_nsp_head": True}  # run folders from before those fields
    shape = tuple(getattr(config, k) for k in keys)
    for run in run_dirs(root)[:50]:
        try:
            rc = read_run_config(run) or {}
            mc = rc.get("model_config") or {}
            if tuple(mc.get(k, defaults.get(k)) for k in keys) != shape:
                continue
            if not str(read_status(run).get("device", "")).startswith(device):
                continue
            if device == "cpu" and _run_threads(rc) != (threads or default_threads()):
                continue
            run_seq = _run_seq_length(rc) or seq_length
            cfg = rc.get("config") or {}
            if task is None:
                if rc.get("kind", "pretrain") != "pretrain" or not (0.8 * seq_length <= run_seq <= 1.25 * seq_length):
                    continue
            elif rc.get("kind") != "finetune" or cfg.get("task") != task or run_seq != (max_seq_length or seq_length):
                continue
            elif ((rc.get("effective_train") or cfg.get("train") or {}).get("batch_size")) != batch_size:
                continue
            elif head is not None and any(cfg.get(k) != getattr(head, k) for k in _HEAD_KEYS):
                continue
            rates = sorted(
                float(r["seq_per_s"]) for r in read_metrics(run)[1:] if r.get("split") == "train" and r.get("seq_per_s")
            )
        except (AttributeError, TypeError, ValueError, OSError) as exc:  # a run folder from another version
            log.debug("skipping %s for throughput: %s", run, exc)
            continue
        if len(rates) >= 2:
            seq_per_s = rates[len(rates) // 2]
            if task is None:  # padded tokens a second, at this job's padded rows
                return batch_size * padded_per_row / (seq_per_s * run_seq), f"measured in run {run.name}"
            return batch_size / seq_per_s, f"measured in run {run.name}"
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
    tokens: TaskTokens | None = None,
    task: str | None = None,
    compile: bool = False,
    threads: int = 0,
    measure: bool = True,
    head: HeadConfig | None = None,
    max_seq_length: int = 0,
) -> Estimate:
    """Parameters, memory and time of a training run (a labelled estimate, not a promise).

    `seq_length` is the longest row (memory is sized for it); `tokens`, a fine-tuning task's real
    and padded row lengths (see `task_tokens`; without it every row is `seq_length` long, as in
    pretraining). `task` names the fine-tuning task (None: pretraining) to find earlier runs of the
    same job. `compile`: the job runs torch.compile, which adds `compile_seconds` up front.
    `head`: a fine-tuning job's output layer (a BiLSTM costs more than the encoder on CPU);
    `max_seq_length`: a fine-tuning job's own cap, which an earlier run of it must share (its
    `seq_length` is the longest row of the task; 0 = seq_length).

    Memory per process: see `_memory_bytes`. Seconds a step, the first of: an earlier run of the same job shape on this kind of device
    (`_measured_in_run`); a micro-batch of the job's padded length timed here now
    (`measured_step_seconds`, for models up to MEASURE_MAX_PARAMETERS on a device this machine
    has); else 6 * N_matmul * tokens + 12 * L * S * H * tokens FLOPs (Kaplan et al. 2020) over
    `TABULATED_FLOPS`, plus a fixed per-step overhead (a BiLSTM head's FLOPs on the real tokens only:
    it runs on packed sequences).
    """
    if device not in ("cpu", "cuda"):
        raise JobError(f"estimate needs device cpu or cuda, not {device!r}")
    if batch_size < 1 or seq_length < 1:
        raise JobError("batch size and sequence length must be positive")
    micro = max(1, batch_size // max(1, grad_accum))
    params, trainable, weights, optimizer, act, overhead = _memory_bytes(
        config, micro, seq_length, device, precision, pretraining, max_predictions, trainable_fraction, head
    )
    gb = 2**30
    total = (weights + optimizer + act + overhead) / gb

    name, mem, flops_rate, key = _device_info(device)
    gpus = max(1, num_gpus)
    padded_row = min(float(seq_length), tokens.padded_per_row) if tokens else float(seq_length)
    real_row = min(padded_row, tokens.real_per_row) if tokens else float(seq_length)
    step_s, source = _step_seconds(
        config, batch_size, micro, grad_accum, seq_length, padded_row, device, gpus, pretraining,
        max_predictions, trainable_fraction, runs_dir, task, threads, measure, flops_rate, key, name, head, max_seq_length,
        precision, real_row,
    )  # fmt: skip
    tokens_per_step = round(batch_size * real_row * gpus)
    steps, seconds, notes = _steps_and_seconds(max_steps, max_time_s, step_s)
    if mem is not None and total > mem:
        notes.append(f"needs ~{total:.1f} GB but the device has {mem:.1f} GB: lower the batch size or sequence length")
    if seconds is not None and seconds > LONG_RUN_S:  # Launch stays: a long run may be meant, but not unseen
        notes.append(
            f"{LONG_RUN_MARK} (~{format_duration(seconds)} on {name}): fewer steps, a smaller model or a GPU "
            "would make it a run you can watch end"
        )
    if source.startswith("timed here now") and device == "cpu" and (busy := _busy_note()):
        notes.append(busy)
    notes.append("data preparation and start-up come on top (seconds for a small corpus, minutes for a large one)")
    est = Estimate(
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
        tokens_per_s=tokens_per_step / step_s,
        throughput_source=source,
        notes=tuple(notes),
        padded_tokens_per_step=round(batch_size * padded_row * gpus),
        lengths_source=tokens.source if tokens else f"every row {seq_length} tokens (the data was not read)",
    )
    return with_compile(est, config) if compile else est


def _memory_bytes(
    config: BertConfig,
    micro: int,
    seq_length: int,
    device: str,
    precision: str,
    pretraining: bool,
    max_predictions: int,
    trainable_fraction: float,
    head: HeadConfig | None = None,
) -> tuple[int, int, float, float, float, float]:
    """(parameters, trainable parameters, and the bytes of weights, optimizer state, activations
    and overhead per process).

    In bytes (N = parameters, B = micro-batch, S = sequence, H = hidden, F = feed-forward width,
    A = heads, L = layers, V = vocabulary):
      weights     4N fp32 (+2N for the bf16 copies autocast makes on CUDA)
      optimizer   4N gradients + 8N AdamW moments (m, v), for the trainable share of N
      activations L * (B*S*(18H + 4F) + 5*A*S^2*B) bytes at 16 bits (Korthikanti et al. 2022,
                  generalised to F != 4H), doubled for fp32 on CPU; the 5AS^2B attention-score
                  term is dropped on CUDA, where SDPA's fused kernels do not keep the scores;
                  plus the MLM logits, 3 * B * P * V * 4 bytes for P predictions per sequence
      overhead    ~0.5 GB CUDA context or ~0.4 GB for torch on CPU
    A fine-tuning job's N and trainable share are its task model's as `head` builds it (a BiLSTM,
    a frozen encoder), else `trainable_fraction` of a sentence classifier's.
    """
    if pretraining or head is None:
        params = count_parameters(config, pretraining_heads=pretraining)
        trainable = int(params * trainable_fraction)
    else:  # the task model as it will be built: a BiLSTM's weights count, a frozen encoder's are not trained
        params = count_parameters(config, pretraining_heads=False, head=head)
        trainable = count_parameters(config, pretraining_heads=False, head=head, trainable_only=True)
    amp = device == "cuda" and precision != "fp32"
    weights = 4 * params + (2 * params if amp else 0)
    optimizer = 12 * trainable  # fp32 gradients (4) + AdamW m (4) + v (4)
    act = _activation_bytes(config, micro, seq_length, device, amp, trainable_fraction, pretraining, max_predictions)
    overhead = 0.5 * 2**30 if device == "cuda" else 0.4 * 2**30
    return params, trainable, weights, optimizer, act, overhead


def with_compile(est: Estimate, config: BertConfig) -> Estimate:
    """The estimate of the same run compiled with torch.compile: `compile_seconds` up front."""
    compile_s = compile_seconds(config, est.device)
    note = (
        f"torch.compile adds ~{format_duration(compile_s)} before the first step "
        "(the steps were timed without it; compiled steps can be faster on a GPU, on a CPU they measured slower)"
    )
    return dataclasses.replace(est, compile_s=compile_s, notes=(note, *est.notes))


def _step_seconds(
    config, batch_size, micro, grad_accum, seq_length, padded_row, device, gpus, pretraining,
    max_predictions, trainable_fraction, runs_dir, task, threads, measure, flops_rate, key, name, head=None,
    max_seq_length=0, precision="auto", real_row=0.0,
) -> tuple[float, str]:  # fmt: skip
    """(seconds an optimizer step, where that comes from): see `estimate`."""
    if gpus == 1:
        measured = _measured_in_run(
            config, seq_length, padded_row, batch_size, device, task, runs_dir, head, max_seq_length, threads
        )
        if measured:
            return measured
    # the encoder computes on every padded token; a BiLSTM (packed sequences) only on the real ones
    flops = _flops_per_token(config, seq_length, pretraining, max_predictions) * padded_row
    flops += _bilstm_flops_per_token(config, head) * (real_row or padded_row)
    rate = flops_rate * gpus * (MULTI_GPU_EFFICIENCY if gpus > 1 else 1.0)
    tabulated_s = flops * batch_size * gpus / rate + STEP_OVERHEAD_S[device] * max(1, grad_accum)
    if measure and _can_time_here(config, device):
        length = max(2, math.ceil(padded_row))
        real = _real_tokens_row(real_row, padded_row, pretraining, head)

        def timed(rows: int, trial: int = 0) -> float:
            return measured_step_seconds(
                config, rows, length, device, pretraining, max_predictions, trainable_fraction < 1.0, threads, head,
                precision, real, trial,
            )  # fmt: skip

        try:
            micro_s, rows = _micro_batch_seconds(
                timed, micro, tabulated_s / max(1, grad_accum), _rows_for_real_length(length, real)
            )
        except (RuntimeError, MemoryError) as exc:  # out of memory, a device in use: fall back to the table
            log.info("could not time a step here (%s); using the tabulated throughput", exc)
        else:
            step_s = micro_s * max(1, grad_accum)
            if gpus > 1:
                step_s /= MULTI_GPU_EFFICIENCY
            where = f"CPU, {threads} of {os.cpu_count() or 1} cores" if threads and device == "cpu" else name
            return (
                step_s,
                f"timed here now ({rows} x {length} tokens on {where}, {_precision_label(precision, device)})",
            )
    return tabulated_s, f"tabulated for {key if key != 'cpu' else name}"


def _micro_batch_seconds(
    timed: Callable[..., float], micro: int, tabulated_s: float, min_rows: int = 1
) -> tuple[float, str]:
    """Seconds of a `micro`-row step and the rows timed to find it. The whole micro-batch is timed where
    the table expects it to take under MEASURE_MAX_STEP_S. Otherwise steps of doubling row counts are
    timed (from the table's guess) while the next would stay under it, going by a line, a fixed cost plus a
    cost per row, through the last two (the last time scaled by its rows, while there is one). Both points
    of the line are then timed a second time (`timed(rows, 1)`, the other point timed in between), and each
    keeps its faster time: extending the line multiplies a disturbed point's error. Where the line puts the whole
    micro-batch under MEASURE_WHOLE_MAX_STEP_S it is timed whole after all: a step mostly fixed cost (a
    BiLSTM's, which follows the longest row) makes the line nearly flat, and a flat line extended 4-8x
    multiplies its noise (a frozen-feature UPOS job on a busy CPU: 0.8-3.5x its whole step). Otherwise
    the line is extended to `micro` rows: scaling one small step up would count its fixed cost once a row
    (mini under bf16 autocast on a CPU: 1 row 0.10 s, 32 rows 1.30 s, not 3.3 s).
    No step is timed on fewer than `min_rows` rows (or the whole micro-batch, when it is smaller)."""

    def predicted(points: list[tuple[int, float]], rows: int) -> float:
        if len(points) < 2:
            return points[-1][1] * rows / points[-1][0]
        (r1, t1), (r2, t2) = points[-2:]
        per_row = max((t2 - t1) / (r2 - r1), t2 / r2 / 4)  # noise can flatten the line: at least 1/4 the mean
        return max(0.0, t2 - per_row * r2) + per_row * rows

    floor = max(1, min(micro, min_rows))
    rows = max(floor, min(micro, math.floor(micro * MEASURE_MAX_STEP_S / max(tabulated_s, 1e-9))))
    points = [(rows, timed(rows))]
    while rows < micro and predicted(points, min(micro, 2 * rows)) <= MEASURE_MAX_STEP_S:
        rows = min(micro, 2 * rows)
        points.append((rows, timed(rows)))
    if rows == micro:
        return points[-1][1], str(micro)
    if len(points) == 1:  # the table's guess already took long: a second point for the line, smaller if it can be
        other = rows // 2 if rows // 2 >= floor else min(micro, 2 * rows)
        if other == micro:
            return timed(micro), str(micro)
        points.append((other, timed(other)))
    # both points again in the order first timed, so the other one is timed between a point's two timings
    points = sorted((r, min(t, timed(r, 1))) for r, t in points[-2:])
    if predicted(points, micro) <= MEASURE_WHOLE_MAX_STEP_S:
        return timed(micro), str(micro)
    return predicted(points, micro), f"{points[-2][0]} and {points[-1][0]}"


def _autocast_dtype(precision: str, torch_device: torch.device) -> torch.dtype | None:
    """The autocast dtype (None: fp32) a job asking for `precision` trains in on `torch_device`, resolved as the
    trainer resolves it."""
    from bertlab.optimization import resolve_precision  # deferred: torch

    return resolve_precision(train_types.TrainConfig(max_steps=1, precision=precision), torch_device)


def _precision_label(precision: str, device: str) -> str:
    """The precision the job's steps run in, as its log will say it ('bf16 autocast (CPU, AVX-512 BF16)')."""
    import torch

    from bertlab.optimization import precision_label  # deferred: torch

    torch_device = torch.device(device)
    return precision_label(_autocast_dtype(precision, torch_device), torch_device)


def _busy_note() -> str:
    """A note when other work keeps this machine's cores busy: steps timed now run slower than they
    will on a quiet machine (and as slow as the job will, if the machine stays this busy)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return ""
    cores = os.cpu_count() or 1
    if load < cores:
        return ""
    return (
        f"this machine is busy now (load average {load:.1f} on {cores} cores): the timed steps shared the CPU, "
        "so the time is what the job takes if the machine stays this busy, longer than on a quiet one"
    )


def _can_time_here(config: BertConfig, device: str) -> bool:
    if count_parameters(config) > MEASURE_MAX_PARAMETERS:
        return False
    if device == "cuda":
        import torch  # deferred: only when timing

        return torch.cuda.is_available()
    return True


TIME_BUDGET_NOTE = "the time budget ends training first"  # a run whose time is its budget, whatever its speed


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
            notes.append(TIME_BUDGET_NOTE)
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
    """Training FLOPs per input token of the model without a BiLSTM: 6 per matmul weight plus attention's
    12 L S H (see `estimate`)."""
    L, H, F, V = config.num_layers, config.hidden_size, config.intermediate_size, config.vocab_size  # noqa: N806
    n_matmul = L * (4 * H * H + 2 * H * F) + (
        H * H + H * V * min(1.0, max_predictions / seq_length) if pretraining else H
    )
    return 6 * n_matmul + 12 * L * seq_length * H


def _bilstm_flops_per_token(config: BertConfig, head: HeadConfig | None) -> float:
    """Training FLOPs per real token of a BiLSTM head: 6 per weight, 4 gates x (input + hidden) x hidden,
    both directions, each layer (0 without a BiLSTM)."""
    if head is None or not head.use_bilstm:
        return 0.0
    H = config.hidden_size  # noqa: N806
    width, size = head.lstm_hidden or H, H * (4 if head.features == "cat4" else 1)
    weights = sum(2 * 4 * ((size if layer == 0 else 2 * width) + width) * width for layer in range(head.lstm_layers))
    return 6.0 * weights


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
    from bertlab.optimization import compile_pays  # deferred: torch; the trainer's own rule

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
    else:
        model_cfg = _model_config(cwd, cfg.model, None) if cfg.model else preset(cfg.size, vocab_size=cfg.vocab_size)
    t = cfg.train
    micro = max(1, t.batch_size // max(1, t.grad_accum))
    # the recipe cuts inputs to the model's positions and to the length it was pretrained on
    pretrained = trained_length(cfg, cwd / Path(cfg.model).expanduser()) if cfg.model else 0
    cfg = dataclasses.replace(cfg, max_seq_length=input_length(cfg, model_cfg.max_position_embeddings, pretrained))
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
