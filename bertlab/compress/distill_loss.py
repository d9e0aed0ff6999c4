"""DistilBERT's training loss (Sanh et al. 2019, §3), and its parts as functions that tests check by hand.

    loss = alpha_ce * T² * soft_CE(student / T, teacher / T)   on the masked-LM logits at the masked positions
         + alpha_mlm * masked-LM cross-entropy                   against the true tokens
         + alpha_cos * (1 - cos(student hidden, teacher hidden)) over the real (not padding) tokens
         + alpha_nsp * next-sentence cross-entropy               ours: the student keeps BERT's NSP head

DistilBERT's weights were 5.0, 2.0 and 1.0 (its training script's alpha_ce, alpha_mlm, alpha_cos) and
its temperature 2.0; it had no NSP. Scaling the soft term by T² keeps its gradients the size they have
at T = 1 (Hinton et al. 2015). The soft cross-entropy is the KL divergence plus the teacher's entropy,
which does not depend on the student, so its gradient is KL's (DistilBERT's KLDivLoss).

The cosine term compares hidden states of the same tokens: DistilBERT's, the last layer's only
(`cosine_layers="last"`), or each student layer with the teacher layer it was copied from ("all").

Imports torch and bertlab.losses (the masked-LM and sentence-pair scores, the metric sums' names).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.errors import InputError
from bertlab.losses import IGNORE, ObjectiveOutput, masked_lm_score, sentence_pair_score

COSINE_LAYERS = ("all", "last")


@dataclass(frozen=True)
class DistillWeights:
    """The loss's weights and temperature (defaults: DistilBERT's, plus our NSP term)."""

    temperature: float = 2.0  # T: the soft targets are softmax(teacher logits / T)
    alpha_ce: float = 5.0  # the soft cross-entropy with the teacher (times T²)
    alpha_mlm: float = 2.0  # the masked-LM loss against the true tokens
    alpha_cos: float = 1.0  # the cosine loss between hidden states
    alpha_nsp: float = 1.0  # next sentence prediction (not in DistilBERT, which dropped NSP); 0 leaves it out
    cosine_layers: str = "all"  # "all": every student layer against its teacher layer; "last": DistilBERT's

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise InputError(f"--temperature must be above 0, not {self.temperature}")
        for name in ("alpha_ce", "alpha_mlm", "alpha_cos", "alpha_nsp"):
            if not getattr(self, name) >= 0:
                raise InputError(f"--{name.replace('_', '-')} must be 0 or more, not {getattr(self, name)}")
        if not (self.alpha_ce or self.alpha_mlm or self.alpha_cos):
            raise InputError("every loss weight is 0: give --alpha-ce, --alpha-mlm or --alpha-cos above 0")
        if self.cosine_layers not in COSINE_LAYERS:
            raise InputError(f"--cosine-layers must be one of {', '.join(COSINE_LAYERS)}, not {self.cosine_layers!r}")


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over rows of -Σ_v p_teacher(v) log p_student(v), both softmaxes at `temperature`, times T².

    Args:
        student_logits, teacher_logits: (N, V) the same N positions; computed in float32.
    Returns:
        a scalar; 0 rows give 0.
    """
    if student_logits.shape[0] == 0:
        return student_logits.sum() * 0
    t = temperature
    target = F.softmax(teacher_logits.float() / t, dim=-1)
    log_q = F.log_softmax(student_logits.float() / t, dim=-1)
    return -(target * log_q).sum(-1).mean() * t * t


def soft_entropy(teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The teacher's entropy at `temperature` times T², mean over rows: the soft cross-entropy's floor, which
    the logs subtract to show the KL divergence (with 8,192 words at T = 2 the entropy is most of the CE)."""
    if teacher_logits.shape[0] == 0:
        return teacher_logits.sum() * 0
    log_p = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    return -(log_p.exp() * log_p).sum(-1).mean() * temperature * temperature


def hidden_cosine_loss(
    student_hidden: tuple[torch.Tensor, ...],
    teacher_hidden: tuple[torch.Tensor, ...],
    pairs: tuple[tuple[int, int], ...],
    attention_mask: torch.Tensor | None,
) -> torch.Tensor:
    """Mean of 1 - cos(student, teacher) over the real tokens of each (student, teacher) layer pair.

    Args:
        student_hidden, teacher_hidden: the encoders' `hidden_states` (embeddings, then each layer), (B, T, H).
        pairs: (student index, teacher index) into those tuples.
        attention_mask: (B, T) 1 for real tokens; None: all real.
    """
    losses = []
    for s, t in pairs:
        cos = F.cosine_similarity(student_hidden[s].float(), teacher_hidden[t].float(), dim=-1)  # (B, T)
        if attention_mask is None:
            losses.append((1 - cos).mean())
        else:
            real = attention_mask.bool()
            losses.append((1 - cos)[real].mean())
    return torch.stack(losses).mean()


def layer_pairs(kept: tuple[int, ...], cosine_layers: str) -> tuple[tuple[int, int], ...]:
    """(student, teacher) indices into `hidden_states` (0 = embeddings) the cosine loss compares."""
    pairs = tuple((i + 1, t + 1) for i, t in enumerate(kept))
    return pairs if cosine_layers == "all" else pairs[-1:]


def distillation_loss(
    student: nn.Module,
    teacher: nn.Module,
    batch: dict[str, torch.Tensor],
    weights: DistillWeights,
    pairs: tuple[tuple[int, int], ...],
) -> ObjectiveOutput:
    """The weighted loss on one masked-LM (+NSP) batch, and its parts' sums for the logs
    (`ce_loss`, `kl_loss` = ce_loss minus the teacher's entropy, `cos_loss` beside the masked-LM and NSP accuracies, per bertlab.losses.summarize).

    Args:
        batch: the pretraining batch (input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels).
        pairs: `layer_pairs`' (student, teacher) hidden-state indices.
    """
    labels = batch["mlm_labels"]
    select = labels != IGNORE  # (B, T)
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in batch}
    with torch.no_grad():
        t_out = teacher(**inputs, mlm_positions=select, output_hidden_states=True)
    s_out = student(**inputs, mlm_positions=select, output_hidden_states=True)
    mlm, correct, count = masked_lm_score(s_out, labels)
    ce = soft_cross_entropy(s_out.mlm_logits, t_out.mlm_logits, weights.temperature)
    cos = hidden_cosine_loss(
        s_out.encoder.hidden_states, t_out.encoder.hidden_states, pairs, batch.get("attention_mask")
    )
    loss = weights.alpha_ce * ce + weights.alpha_mlm * mlm + weights.alpha_cos * cos
    n = float(count)
    sums = {
        "mlm_correct": float(correct),
        "mlm_count": n,
        "mlm_loss_sum": float(mlm.detach()) * n,
        "ce_count": n,
        "ce_loss_sum": float(ce.detach()) * n,
        "kl_count": n,
        "kl_loss_sum": float(ce.detach() - soft_entropy(t_out.mlm_logits, weights.temperature)) * n,
        "cos_count": 1.0,
        "cos_loss_sum": float(cos.detach()),
    }
    nsp_labels = batch.get("nsp_labels")
    if weights.alpha_nsp and nsp_labels is not None and s_out.nsp_logits is not None:
        nsp, nsp_correct = sentence_pair_score(s_out.nsp_logits, nsp_labels)
        loss = loss + weights.alpha_nsp * nsp
        sums.update(nsp_correct=float(nsp_correct), nsp_count=float(nsp_labels.numel()))
    return ObjectiveOutput(loss, sums, s_out)
