"""The optimisation pieces of the trainer: AdamW with weight decay on weight matrices only (not
biases, not LayerNorm), the learning-rate schedule (linear warm-up over a fraction of the budget or
a number of steps, then linear, cosine or constant), and mixed precision (which autocast dtype a
device gets, and its context).

Imports torch and bertlab.errors; `TrainConfig` (bertlab.training) for its type only. The loop
that uses these is bertlab.training.
"""

from __future__ import annotations

import contextlib
import logging
import math
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import torch

from bertlab.errors import InputError

if TYPE_CHECKING:
    from bertlab.training import TrainConfig

log = logging.getLogger(__name__)

SCHEDULES = ("linear", "cosine", "constant")  # the decays `lr_factor` knows


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with weight decay on weight matrices only (not biases, not LayerNorm)."""
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if name.endswith("bias") or "LayerNorm" in name or p.ndim < 2 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=cfg.adam_betas, eps=cfg.adam_eps)


def lr_factor(progress: float, warmup_fraction: float, schedule: str = "linear") -> float:
    """Linear warm-up to 1 over `warmup_fraction` of the budget, then `schedule` down to 0:
    linear (BERT's), cosine (half a cosine wave) or constant (no decay)."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup_fraction > 0 and progress < warmup_fraction:
        return progress / warmup_fraction
    rest = (progress - warmup_fraction) / max(1e-12, 1.0 - warmup_fraction)  # 0 -> 1 after warm-up
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, rest)))
    return max(0.0, 1.0 - rest)


def warmup_fraction(cfg: TrainConfig) -> float:
    if cfg.warmup >= 1:
        if not cfg.max_steps:
            raise InputError("warmup given in steps needs a max_steps budget; give warmup as a fraction (< 1) instead")
        return min(1.0, cfg.warmup / cfg.max_steps)
    return cfg.warmup


def resolve_precision(cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for fp32."""
    if device.type != "cuda":
        if cfg.precision in ("bf16", "fp16"):
            log.warning("precision %s asked for on CPU; training in fp32", cfg.precision)
        return None
    if cfg.precision == "fp32":
        return None
    if cfg.precision == "fp16":
        return torch.float16
    if cfg.precision == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def autocast_context(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
