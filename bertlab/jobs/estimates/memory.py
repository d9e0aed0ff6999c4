"""What a training run holds in memory before it starts: its parameters and the bytes per process of its
weights, optimizer state, activations and overhead, from the usual per-parameter and per-activation formulas.

Imports the standard library and bertlab.config; torch and the model classes only inside
`count_parameters` (deferred so the jobs CLI starts without torch).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bertlab.config import BertConfig

if TYPE_CHECKING:  # annotations only: the head's module imports torch
    from bertlab.finetune.models import HeadConfig


@dataclass(frozen=True)
class MemoryUse:
    """What one process of a run holds (see `memory_use` for the formulas)."""

    parameters: int  # all weights of the model (embeddings included)
    trainable_parameters: int
    weights: float  # bytes
    optimizer: float  # bytes: gradients + AdamW's two moments
    activations: float  # bytes: saved for the backward pass, one micro-batch
    overhead: float  # bytes: CUDA context / framework

    @property
    def total(self) -> float:
        """Bytes per process, all together."""
        return self.weights + self.optimizer + self.activations + self.overhead


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


def memory_use(
    config: BertConfig,
    micro: int,
    seq_length: int,
    device: str,
    precision: str,
    pretraining: bool,
    max_predictions: int,
    trainable_fraction: float,
    head: HeadConfig | None = None,
) -> MemoryUse:
    """The parameters, trainable parameters, and the bytes of weights, optimizer state, activations
    and overhead per process.

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
    return MemoryUse(params, trainable, weights, optimizer, act, overhead)


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
    """Bytes saved for the backward pass of one micro-batch (see `memory_use`)."""
    L, H, F, A, V = config.num_layers, config.hidden_size, config.intermediate_size, config.num_heads, config.vocab_size  # noqa: N806
    score_term = 0 if device == "cuda" else 5 * A * seq_length**2 * micro
    act = L * (micro * seq_length * (18 * H + 4 * F) + score_term)
    act = act * (1 if amp else 2)
    if trainable_fraction < 1.0:
        act = act * trainable_fraction  # a frozen encoder keeps (almost) nothing for backward
    if pretraining:
        act += 3 * micro * min(max_predictions, seq_length) * V * 4
    return act
