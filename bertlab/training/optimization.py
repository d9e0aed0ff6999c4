"""The optimisation pieces of the trainer: AdamW with weight decay on weight matrices only (not
biases, not LayerNorm), the learning-rate schedule (linear warm-up over a fraction of the budget or
a number of steps, then linear, cosine or constant), and mixed precision (which autocast dtype a
device gets, and its context).

Imports torch, bertlab.errors, bertlab.hardware (which CPU instructions exist) and
bertlab.training.types (`TrainConfig`; its `SCHEDULES` names the decays `lr_factor` knows). The loop
that uses these is bertlab.training.trainer.
"""

from __future__ import annotations

import contextlib
import logging
import math
from contextlib import AbstractContextManager

import torch

from bertlab.errors import InputError
from bertlab.hardware import cpu_bf16_instructions
from bertlab.training.types import COMPILE_SPEEDUP, TrainConfig, compile_seconds

log = logging.getLogger(__name__)


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with weight decay on weight matrices only (not biases, not LayerNorm). With `cfg.head_lr`,
    the weights outside the model's pretrained encoder (`model.bert`) form their own groups, whose
    `lr_scale` (head_lr / learning_rate) the schedule multiplies in (see `group_lr`)."""
    encoder = getattr(model, "bert", None) if cfg.head_lr else None
    in_encoder = {id(p) for p in encoder.parameters()} if isinstance(encoder, torch.nn.Module) else None
    body: tuple[list, list] = ([], [])  # (decay, no decay)
    head: tuple[list, list] = ([], [])
    seen = set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        part = body if in_encoder is None or id(p) in in_encoder else head
        part[1 if name.endswith("bias") or "LayerNorm" in name or p.ndim < 2 else 0].append(p)
    groups = [
        {"params": body[0], "weight_decay": cfg.weight_decay},
        {"params": body[1], "weight_decay": 0.0},
    ]
    if head[0] or head[1]:
        scale = cfg.head_lr / cfg.learning_rate
        groups += [
            {"params": params, "weight_decay": wd, "lr_scale": scale, "lr": cfg.learning_rate * scale}
            for params, wd in ((head[0], cfg.weight_decay), (head[1], 0.0))
            if params
        ]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=cfg.adam_betas, eps=cfg.adam_eps)


def group_lr(group: dict, peak: float, factor: float) -> float:
    """A parameter group's learning rate at a point of the schedule: the peak rate, times the group's own
    scale (a fine-tuning head's, from build_optimizer), times the schedule's factor."""
    return peak * group.get("lr_scale", 1.0) * factor


WSD_DECAY = 0.2  # the "wsd" schedule decays over the last fifth of the budget


def lr_factor(progress: float, warmup_fraction: float, schedule: str = "linear") -> float:
    """Linear warm-up to 1 over `warmup_fraction` of the budget, then `schedule` down to 0:
    linear (BERT's), cosine (half a cosine wave), constant (no decay) or wsd (warm-up, stable, decay:
    constant until the last WSD_DECAY of the budget, then linear to 0, so the learning rate stays high
    while a small model is still on the masked-LM plateau)."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup_fraction > 0 and progress < warmup_fraction:
        return progress / warmup_fraction
    rest = (progress - warmup_fraction) / max(1e-12, 1.0 - warmup_fraction)  # 0 -> 1 after warm-up
    if schedule == "constant":
        return 1.0
    if schedule == "wsd":
        decay = min(WSD_DECAY, 1.0 - warmup_fraction)
        return 1.0 if progress < 1.0 - decay else max(0.0, (1.0 - progress) / max(1e-12, decay))
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
    """The autocast dtype, or None for fp32.

    CUDA: `auto` is bf16 where the GPU has it, else fp16. CPU: `auto` and `bf16` are bf16 autocast
    only on a CPU with bf16 instructions (AVX-512 BF16 or AMX: matrix products 2.6-3.3x fp32's);
    elsewhere torch emulates bf16 far slower than fp32, so the run trains in fp32 and says so.
    fp16 on a CPU trains in fp32. `fp32` is always fp32."""
    if cfg.precision == "fp32":
        return None
    if device.type != "cuda":
        if cfg.precision == "fp16":
            log.warning("precision fp16 asked for on CPU; training in fp32 (fp16 autocast is for GPUs)")
            return None
        if cpu_bf16_instructions():
            return torch.bfloat16
        if cfg.precision == "bf16":
            log.warning("precision bf16 asked for on a CPU without bf16 instructions (it would run slower); fp32")
        return None
    if cfg.precision == "fp16":
        return torch.float16
    if cfg.precision == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def precision_label(dtype: torch.dtype | None, device: torch.device) -> str:
    """How a run's precision reads in its log, status and card: 'bf16 autocast (CPU, AMX)', 'fp32'."""
    if dtype is None:
        return "fp32"
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))
    where = "GPU" if device.type == "cuda" else f"CPU, {cpu_bf16_instructions() or 'emulated'}"
    return f"{name} autocast ({where})"


def autocast_context(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


COMPILE_PROBE_STEPS = 5  # eager steps timed before compile="auto" decides


def compile_plan(
    cfg: TrainConfig,
    static_shapes: bool,
    world: int,
    trained_s: float = 0.0,
    device_type: str = "cpu",
    num_layers: int = 4,
) -> str:
    """What the trainer does about torch.compile at the start: 'now', 'no', or 'decide' (compile='auto'
    on one process: time a few eager steps, then `compile_pays` decides). Several processes decide
    at the start (DDP wraps the compiled module), from a time budget only, on the device they run on."""
    if cfg.compile is True:
        return "now"
    if cfg.compile is False or not static_shapes:
        return "no"
    if world > 1:
        remaining = cfg.max_time_s - trained_s
        return "now" if cfg.max_time_s and compile_pays(remaining, device_type, num_layers)[0] else "no"
    return "decide"


def compile_pays(remaining_s: float, device_type: str, num_layers: int = 4) -> tuple[bool, str]:
    """Whether compiling now pays for itself over the `remaining_s` seconds the run has left
    (the time saved must exceed 1.5x the compile time of a `num_layers` encoder), and the reason
    in words. Costs and gains: bertlab.training.types (COMPILE_*)."""
    cost = compile_seconds(num_layers, device_type)
    kind = "cpu-bf16" if device_type == "cpu" and cpu_bf16_instructions() else device_type
    speedup = COMPILE_SPEEDUP.get(kind, COMPILE_SPEEDUP["cpu"])
    saved = remaining_s * (1 - 1 / speedup)
    pays = saved > 1.5 * cost
    verdict = "compiling" if pays else "staying eager"
    if speedup <= 1.0:
        return False, f"compiled steps measured no faster on a {kind.upper()} (bertlab.training.types): staying eager"
    return pays, (
        f"~{remaining_s:.0f} s of training left would save ~{saved:.0f} s compiled "
        f"({speedup:.2f}x) against ~{cost:.0f} s to compile: {verdict}"
    )
