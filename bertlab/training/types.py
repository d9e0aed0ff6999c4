"""What the trainer and its recipes share, below bertlab.training.trainer: `TrainConfig` (optimisation and
budget), `Progress` (where training stands, saved in every checkpoint) and `TrainTask` (what a
recipe supplies), plus the schedule names `TrainConfig` accepts.

bertlab.training.optimization and bertlab.training.runtime read these without importing the trainer, and
the recipes' configs (bertlab.training.pretrain_config, bertlab.finetune.cli) build a `TrainConfig` without
torch. Imports only the standard library and bertlab.errors (torch for type hints only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bertlab.errors import InputError

if TYPE_CHECKING:
    import torch

SCHEDULES = ("linear", "cosine", "constant", "wsd")  # the decays bertlab.training.optimization.lr_factor knows
# The largest budgets a run may ask for: far past any real run (BERT-large: 1M steps, 131B tokens)
BUDGET_LIMITS = {"max_steps": 10**10, "max_tokens": 10**15, "max_time_s": 10**9}

# torch.compile's cost and gain, read by the trainer's compile="auto" (bertlab.training.optimization) and by
# the estimates (bertlab.jobs.estimates.estimate). Cost: one-off seconds before the first step, most of it per
# traced layer: ~100 s for the 4-layer mini on a 2-core CPU (150-450 s on a busy AVX2-only one).
COMPILE_BASE_S = {"cpu": 40.0, "cuda": 20.0}
COMPILE_PER_LAYER_S = {"cpu": 15.0, "cuda": 5.0}
# Gain: eager step time / compiled step time of a mini pretraining step (batch 32, 128 tokens).
# CPU with bf16 instructions (AVX-512 BF16, under bf16 autocast; bench/results/train_step/): 0.76x
# and 0.82x at the shipped vocabulary (bench_train_step, one thread, the other core busy and then
# quiet), 0.87x at 30,522; the shipped model's 1.8 h stage 3 measured 1.03x on its own steps (an
# early measurement, 1.35x, was not reproduced). AVX2-only CPU (AMD EPYC, fp32): 0.9-1.0x. So on a
# CPU "auto" stays eager. CUDA: not measured here; 1.3x is an assumption, so "auto" compiles there
# only for long runs (and the trainer goes back to eager if its compiled steps are not faster).
COMPILE_SPEEDUP = {"cpu-bf16": 1.0, "cpu": 1.0, "cuda": 1.3}


def compile_seconds(num_layers: int, device: str) -> float:
    """Rough seconds torch.compile takes before the first step of a `num_layers` encoder."""
    kind = "cuda" if device == "cuda" else "cpu"
    return COMPILE_BASE_S[kind] + COMPILE_PER_LAYER_S[kind] * num_layers


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and budget (Devlin et al. 2018, appendix A.2 for the defaults)."""

    learning_rate: float = 1e-4  # peak LR after warm-up
    # fine-tuning: peak LR of the weights outside the pretrained encoder (`model.bert`): the task's output
    # layer, BiLSTM, layer mix, when they need a higher rate than the encoder; 0 = learning_rate
    head_lr: float = 0.0
    warmup: float = 0.01  # warm-up length: a fraction of the budget (<1) or a number of steps (>=1)
    schedule: str = "linear"  # decay after warm-up: linear (BERT) | cosine | constant | wsd (stable, then decay)
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    grad_clip: float = 1.0  # max global grad norm; 0 disables
    batch_size: int = 32  # sequences per optimizer step per process (before accumulation split)
    grad_accum: int = 1  # micro-batches per optimizer step; batch_size is split across them
    max_steps: int = 0  # budget in optimizer steps (0 = none)
    max_tokens: int = 0  # budget in input tokens (0 = none)
    max_time_s: float = 0.0  # budget in wall-clock seconds of training (0 = none)
    eval_every: int = 500  # steps between evaluations (0 = only at the end)
    save_every: int = 1000  # steps between checkpoints (0 = only at the end)
    save_every_s: float = 600.0  # also checkpoint at least this often in seconds (0 = never by time)
    log_every: int = 20  # steps between train metric lines
    # auto | fp32 | bf16 | fp16 ; auto = bf16 on CUDA (fp16 without bf16) and on a CPU with bf16
    # instructions (AVX-512 BF16, AMX), fp32 on other CPUs
    precision: str = "auto"
    # torch.compile the training step: True | False | "auto" (when the task's shapes are static and
    # the projected time saved pays for the compile; decided after a few eager steps)
    compile: bool | str = "auto"
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    num_threads: int = 0  # CPU threads for torch (0 = leave torch's default)
    snapshots: bool = False  # keep small (fp16) model snapshots at log-spaced steps (see snapshot_steps)

    def __post_init__(self):
        for name in ("max_steps", "max_tokens", "max_time_s", "eval_every", "save_every", "save_every_s"):
            if not _finite(getattr(self, name)) or getattr(self, name) < 0:
                raise InputError(f"{name} must be 0 (none) or more, not {getattr(self, name)}")
        for name in ("weight_decay", "adam_eps", "grad_clip"):  # nan passes every comparison
            if not _finite(getattr(self, name)):
                raise InputError(f"{name} must be a number, not {getattr(self, name)}")
        for name, most in BUDGET_LIMITS.items():  # a typo such as 1e30: not a run anyone means
            if getattr(self, name) > most:
                raise InputError(f"{name} {getattr(self, name):g} is beyond any run (at most {most:g})")
        if not math.isfinite(self.warmup) or self.warmup < 0:
            raise InputError(f"warmup must be a fraction of the budget (<1) or a number of steps, not {self.warmup}")
        if not (self.max_steps or self.max_tokens or self.max_time_s):
            raise InputError("give a training budget: max_steps, max_tokens or max_time_s")
        for name in ("batch_size", "grad_accum", "log_every"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be 1 or more, not {getattr(self, name)}")
        if self.num_threads < 0:
            raise InputError(f"num_threads must be 0 (torch's default) or more, not {self.num_threads}")
        if self.batch_size % self.grad_accum:
            raise InputError(f"batch_size {self.batch_size} must be divisible by grad_accum {self.grad_accum}")
        if self.compile not in (True, False, "auto"):
            raise InputError(f"compile must be true, false or auto, not {self.compile!r}")
        if self.precision not in ("auto", "fp32", "bf16", "fp16"):
            raise InputError(f"precision must be auto, fp32, bf16 or fp16, not {self.precision!r}")
        if not math.isfinite(self.learning_rate) or self.learning_rate <= 0:
            raise InputError(f"learning_rate must be a positive number, not {self.learning_rate}")
        if not math.isfinite(self.head_lr) or self.head_lr < 0:
            raise InputError(f"head_lr must be 0 (the learning rate) or a positive number, not {self.head_lr}")
        if self.grad_clip < 0:
            raise InputError(f"grad_clip must be 0 (no clipping) or more, not {self.grad_clip}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {SCHEDULES}, not {self.schedule!r}")


def _finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


class TrainTask(Protocol):
    """What the trainer needs from a recipe (pretraining, a fine-tuning task)."""

    # every training batch has the same shapes (a compiled step traces once): compile="auto" may compile
    static_shapes: bool

    def batches(self, epoch: int, start: int, rank: int, world: int) -> Iterator[dict[str, torch.Tensor]]:
        """Training batches of epoch `epoch`, skipping the first `start` batches (for exact resume).
        Each batch is a dict of tensors for the model, with `num_tokens` (int) allowed."""

    def batches_per_epoch(self, world: int) -> int: ...

    def phase_at(self, fraction: float) -> int:
        """The data phase for `fraction` of the budget spent: 0 for a task with one phase; pretraining
        may switch from short sequences to long ones (epoch counts restart in each phase)."""

    def set_phase(self, phase: int) -> None:
        """Serve phase `phase` from `batches` and `batches_per_epoch` (on start, resume and a switch)."""

    def forward(self, model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss and per-batch metric sums for logging (e.g. {"mlm_correct": 3, "mlm_count": 20})."""

    def evaluate(
        self, model: torch.nn.Module, device: torch.device, autocast: Callable[[], AbstractContextManager]
    ) -> dict[str, float]:
        """Held-out metrics; called on rank 0 only, model in eval mode."""

    def save_model(self, directory: Path, model: torch.nn.Module, extra: dict) -> None:
        """Write the model in its Hugging Face-compatible format (atomically); for the final model,
        `extra["card_updates"]` holds steps, tokens, epochs, time and metrics for its model card."""

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        """Turn summed batch metrics into rates (accuracy, ...) for a log line."""


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of `epoch` consumed
    tokens: int = 0  # input tokens seen (all processes)
    train_time_s: float = 0.0  # wall-clock seconds spent training (excludes eval/saving)
    phase: int = 0  # data phase (e.g. short sequences first, then long); epoch counts restart per phase
    skipped_steps: int = 0  # steps whose gradients were not finite: no update made (see Trainer.step)

    def fraction(self, cfg: TrainConfig) -> float:
        parts = []
        if cfg.max_steps:
            parts.append(self.step / cfg.max_steps)
        if cfg.max_tokens:
            parts.append(self.tokens / cfg.max_tokens)
        if cfg.max_time_s:
            parts.append(self.train_time_s / cfg.max_time_s)
        return min(1.0, max(parts))  # the last step may pass the budget (a batch's tokens): 100%, not 119%

    def done(self, cfg: TrainConfig) -> bool:
        return self.fraction(cfg) >= 1.0
