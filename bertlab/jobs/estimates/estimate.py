"""What a training run will cost before it starts: the `Estimate` (parameters, memory per process, time) and
`estimate`, which puts one together for a model shape, a batch and a budget.

A labelled estimate, not a promise. Memory comes from the usual per-parameter and per-activation
formulas (bertlab.jobs.estimates.memory). Time is steps x seconds a step, where a step's tokens are the
job's real token counts: a fine-tuning batch is padded to its longest row (dynamic padding), so its length
comes from the task's own data run through the model's own tokenizer (`task_tokens`), not from
max_seq_length. Seconds a step come from an earlier run, from timing a few steps here now or from a table
(bertlab.jobs.estimates.step_time). Compiling the model (`torch.compile`) adds `compile_s` in front. A job
spec's estimate (its real model, data and phases) is bertlab.jobs.estimates.spec'.

Imports the standard library and bertlab.config / formatting / jobs.spec (JobError) /
training.memory_estimate / step_time / timed_step (a busy machine) / task_tokens / types (the compile
cost); never torch at import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bertlab.config import BertConfig
from bertlab.formatting import format_duration
from bertlab.jobs.estimates.memory import memory_use
from bertlab.jobs.estimates.step_time import device_info, step_seconds
from bertlab.jobs.estimates.task_tokens import TaskTokens
from bertlab.jobs.estimates.timed_step import PretrainingModel, busy_note
from bertlab.jobs.spec import JobError
from bertlab.training import types as train_types

if TYPE_CHECKING:  # annotations only: the head's module imports torch
    from bertlab.finetune.models import HeadConfig

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


def compile_seconds(config: BertConfig, device: str) -> float:
    """Rough seconds torch.compile takes before the first step (bertlab.training.types owns the figures)."""
    return train_types.compile_seconds(config.num_layers, device)


def with_compile(est: Estimate, config: BertConfig) -> Estimate:
    """The estimate of the same run compiled with torch.compile: `compile_seconds` up front."""
    compile_s = compile_seconds(config, est.device)
    note = (
        f"torch.compile adds ~{format_duration(compile_s)} before the first step "
        "(the steps were timed without it; compiled steps can be faster on a GPU, on a CPU they measured slower)"
    )
    return dataclasses.replace(est, compile_s=compile_s, notes=(note, *est.notes))


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
    family: PretrainingModel | None = None,
) -> Estimate:
    """Parameters, memory and time of a training run (a labelled estimate, not a promise).

    `seq_length` is the longest row (memory is sized for it); `tokens`, a fine-tuning task's real
    and padded row lengths (see `task_tokens`; without it every row is `seq_length` long, as in
    pretraining). `task` names the fine-tuning task (None: pretraining) to find earlier runs of the
    same job. `compile`: the job runs torch.compile, which adds `compile_seconds` up front.
    `head`: a fine-tuning job's output layer (a BiLSTM costs more than the encoder on CPU);
    `max_seq_length`: a fine-tuning job's own cap, which an earlier run of it must share (its
    `seq_length` is the longest row of the task; 0 = seq_length). `family`: a pretraining job's family,
    objective and family settings, so its step is timed on its own model (None: BERT, MLM + NSP).

    Memory per process: see `memory_estimate.memory_use`. Seconds a step: see `step_time.step_seconds` (an
    earlier run of the same job shape, steps timed here now, or tabulated FLOP/s).
    """
    if device not in ("cpu", "cuda"):
        raise JobError(f"estimate needs device cpu or cuda, not {device!r}")
    if batch_size < 1 or seq_length < 1:
        raise JobError("batch size and sequence length must be positive")
    micro = max(1, batch_size // max(1, grad_accum))
    memory = memory_use(
        config, micro, seq_length, device, precision, pretraining, max_predictions, trainable_fraction, head
    )
    gb = 2**30
    total = memory.total / gb

    name, mem, flops_rate, key = device_info(device)
    gpus = max(1, num_gpus)
    padded_row = min(float(seq_length), tokens.padded_per_row) if tokens else float(seq_length)
    real_row = min(padded_row, tokens.real_per_row) if tokens else float(seq_length)
    step_s, source = step_seconds(
        config, batch_size, micro, grad_accum, seq_length, padded_row, device, gpus, pretraining,
        max_predictions, trainable_fraction, runs_dir, task, threads, measure, flops_rate, key, name, head, max_seq_length,
        precision, real_row, family,
    )  # fmt: skip
    tokens_per_step = round(batch_size * real_row * gpus)
    steps, seconds, notes = _steps_and_seconds(max_steps, max_time_s, step_s)
    notes += _cost_notes(total, mem, seconds, name, source, device)
    est = Estimate(
        parameters=memory.parameters,
        trainable_parameters=memory.trainable_parameters,
        weights_gb=memory.weights / gb,
        optimizer_gb=memory.optimizer / gb,
        activations_gb=memory.activations / gb,
        overhead_gb=memory.overhead / gb,
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


def _cost_notes(
    total_gb: float, device_memory_gb: float | None, seconds: float | None, device_name: str, source: str, device: str
) -> list[str]:
    """What to say beside the numbers: memory past what the device has, a run of over a day, steps timed
    on a busy machine, and what the estimate leaves out."""
    notes = []
    if device_memory_gb is not None and total_gb > device_memory_gb:
        notes.append(
            f"needs ~{total_gb:.1f} GB but the device has {device_memory_gb:.1f} GB: lower the batch size or "
            "sequence length"
        )
    if seconds is not None and seconds > LONG_RUN_S:  # Launch stays: a long run may be meant, but not unseen
        notes.append(
            f"{LONG_RUN_MARK} (~{format_duration(seconds)} on {device_name}): fewer steps, a smaller model or a GPU "
            "would make it a run you can watch end"
        )
    if source.startswith("timed here now") and device == "cpu" and (busy := busy_note()):
        notes.append(busy)
    notes.append("data preparation and start-up come on top (seconds for a small corpus, minutes for a large one)")
    return notes
