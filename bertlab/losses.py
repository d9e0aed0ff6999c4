"""The pretraining objectives' losses: one function per loss, registered by name in `LOSSES`.

An objective's torch-free spec (bertlab.data.objectives.Objective) names its loss (`Objective.loss`);
the pretraining recipe looks it up here and calls it on the model and a batch. A loss runs the model
(which returns head outputs, not a loss) and returns an `ObjectiveOutput`: the scalar to minimise and
the metric sums the trainer logs. The sums follow one naming rule that `summarize` reads for every
objective: `<part>_correct` and `<part>_count` give `<part>_acc`, `<part>_loss_sum` and
`<part>_count` give `<part>_loss`.

A new objective (sentence order, replaced-token detection, distillation) is one function here,
registered with `register_loss`, plus one `Objective` entry naming it.

Imports torch, bertlab.model (its output type) and bertlab.errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.errors import InputError
from bertlab.model import PreTrainingOutput

IGNORE = -100  # the label of positions that are not predicted


@dataclass
class ObjectiveOutput:
    """What a loss returns.

    Attributes:
        loss: the scalar (fp32) that backward() takes.
        sums: metric sums over the batch for the logs, e.g. {"mlm_correct": 3.0, "mlm_count": 20.0,
            "mlm_loss_sum": 141.2, "nsp_correct": 5.0, "nsp_count": 8.0}.
        output: the model's own output, for callers that want the logits too.
    """

    loss: torch.Tensor
    sums: dict[str, float] = field(default_factory=dict)
    output: Any = None


ObjectiveLoss = Callable[[nn.Module, dict[str, torch.Tensor], "int | None"], ObjectiveOutput]
LOSSES: dict[str, ObjectiveLoss] = {}


def register_loss(name: str) -> Callable[[ObjectiveLoss], ObjectiveLoss]:
    """Decorator: register `fn(model, batch, prediction_cap) -> ObjectiveOutput` under `name`."""

    def add(fn: ObjectiveLoss) -> ObjectiveLoss:
        LOSSES[name] = fn
        return fn

    return add


def get_loss(name: str) -> ObjectiveLoss:
    """The registered loss called `name`.

    Raises:
        InputError: no loss has that name.
    """
    try:
        return LOSSES[name]
    except KeyError:
        raise InputError(f"no pretraining loss is called {name!r}; known: {', '.join(LOSSES)}") from None


def summarize(sums: dict[str, float]) -> dict[str, float]:
    """Rates from summed metrics: `<part>_acc` and `<part>_loss` for every `<part>_count`."""
    out = {}
    for key, count in sums.items():
        if not key.endswith("_count") or not count:
            continue
        part = key.removesuffix("_count")
        if f"{part}_correct" in sums:
            out[f"{part}_acc"] = sums[f"{part}_correct"] / count
        if f"{part}_loss_sum" in sums:
            out[f"{part}_loss"] = sums[f"{part}_loss_sum"] / count
    return out


# --------------------------------------------------------------------------------------
# Scores of one head
# --------------------------------------------------------------------------------------
def masked_lm_score(
    out: PreTrainingOutput, labels: torch.Tensor, logits: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Masked-LM (or next-token) cross-entropy, mean over the predicted positions, in fp32, with the
    number of correct top-1 predictions and of predicted positions.

    Args:
        out: the model's output, scored at `labels != IGNORE` (mlm_logits (N, V), or (B, K, V) slots).
        labels: (B, T) long, the token to predict at each predicted position and IGNORE elsewhere.
        logits: another head's logits at the same rows or slots as out.mlm_logits (the span-boundary
            head's `sbo_logits`), scored instead; None: out.mlm_logits.
    """
    logits = out.mlm_logits if logits is None else logits
    if out.mlm_slots is not None:
        # fixed slots: no data-dependent shape; unused slots get the ignore label
        positions, slot_used = out.mlm_slots
        targets = labels.gather(1, positions).masked_fill(~slot_used, IGNORE)  # (B, K)
        count = slot_used.sum()
        loss_sum = F.cross_entropy(
            logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        correct = ((logits.argmax(-1) == targets) & slot_used).sum()
        return loss_sum / count.clamp(min=1), correct, count
    targets = labels[labels != IGNORE]  # (N,)
    loss = F.cross_entropy(logits.float(), targets) if targets.numel() else logits.sum() * 0
    correct = (logits.argmax(-1) == targets).sum()
    return loss, correct, torch.tensor(targets.numel(), device=targets.device)


def span_boundaries(selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each selected position's span, read from the selection: a span is a run of consecutive selected
    positions, so this is exact when no two spans touch (maskers.SpanBoundaryMasker keeps a gap).

    Args:
        selected: (B, T) bool, the masked positions (`labels != IGNORE`).

    Returns:
        (left, right, relative), each (B, T) long: at a selected position i of the span s..e, the
        positions s-1 and e+1 of its boundary tokens (clamped into 0..T-1: a span never holds [CLS] or
        [SEP], so they are real tokens) and i - s, its place in the span; at other positions i, i and 0.
    """
    T = selected.shape[1]  # noqa: N806
    index = torch.arange(T, device=selected.device).expand_as(selected)  # (B, T)
    before = F.pad(selected[:, :-1], (1, 0), value=False)  # (B, T): the position before is selected
    after = F.pad(selected[:, 1:], (0, 1), value=False)
    first = torch.where(selected & ~before, index, 0).cummax(dim=1).values  # (B, T): the latest span start <= i
    # the earliest span end >= i: a running max over the flipped row, in flipped positions (T-1-i)
    last = (T - 1) - torch.where((selected & ~after).flip(1), index, 0).cummax(dim=1).values.flip(1)  # (B, T)
    left = torch.where(selected, (first - 1).clamp(min=0), index)
    right = torch.where(selected, (last + 1).clamp(max=T - 1), index)
    relative = torch.where(selected, index - first, 0)
    return left, right, relative


def sentence_pair_score(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy (fp32) and correct count of a two-way sentence-pair head (NSP; sentence order)."""
    return F.cross_entropy(logits.float(), labels), (logits.argmax(-1) == labels).sum()


def replaced_token_score(
    logits: torch.Tensor, replaced: torch.Tensor, attention_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Replaced-token detection: binary cross-entropy (fp32) of P(replaced), mean over the real tokens
    ([CLS] and [SEP] too, as ELECTRA's code and transformers' ElectraForPreTraining count them), with
    the number of tokens judged right and of tokens judged.

    Args:
        logits: (B, T) the discriminator's logit of P(replaced).
        replaced: (B, T) bool, whether the token it read differs from the original.
        attention_mask: (B, T) 1 for real tokens, 0 for padding; None: all real.
    """
    real = torch.ones_like(replaced) if attention_mask is None else attention_mask.bool()
    per_token = F.binary_cross_entropy_with_logits(logits.float(), replaced.float(), reduction="none")  # (B, T)
    count = real.sum()
    loss = (per_token * real).sum() / count.clamp(min=1)
    correct = (((logits > 0) == replaced) & real).sum()
    return loss, correct, count


def _mlm_sums(loss: torch.Tensor, correct: torch.Tensor, count: torch.Tensor) -> dict[str, float]:
    return {
        "mlm_correct": float(correct),
        "mlm_count": float(count),
        "mlm_loss_sum": float(loss.detach()) * float(count),
    }


def _encoder_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in batch}


# --------------------------------------------------------------------------------------
# The paper's objectives
# --------------------------------------------------------------------------------------
@register_loss("masked_lm")
def masked_lm(model: nn.Module, batch: dict[str, torch.Tensor], prediction_cap: int | None = None) -> ObjectiveOutput:
    """Cross-entropy at the labelled positions: the masked LM (No NSP) or, with every position
    labelled with its next token and causal attention, the left-to-right LM."""
    labels = batch["mlm_labels"]
    out = model(**_encoder_inputs(batch), mlm_positions=labels != IGNORE, prediction_cap=prediction_cap)
    loss, correct, count = masked_lm_score(out, labels)
    return ObjectiveOutput(loss, _mlm_sums(loss, correct, count), out)


@register_loss("masked_lm_nsp")
def masked_lm_nsp(
    model: nn.Module, batch: dict[str, torch.Tensor], prediction_cap: int | None = None
) -> ObjectiveOutput:
    """BERT's pretraining loss: masked LM + next sentence prediction (Devlin et al. 2018, §3.1),
    the sum of the two means. NSP label 0 = IsNext, as in Google's checkpoints."""
    labels, nsp_labels = batch["mlm_labels"], batch.get("nsp_labels")
    out = model(**_encoder_inputs(batch), mlm_positions=labels != IGNORE, prediction_cap=prediction_cap)
    loss, correct, count = masked_lm_score(out, labels)
    sums = _mlm_sums(loss, correct, count)
    if nsp_labels is not None and out.nsp_logits is not None:
        nsp_loss, nsp_correct = sentence_pair_score(out.nsp_logits, nsp_labels)
        loss = loss + nsp_loss
        sums.update(nsp_correct=float(nsp_correct), nsp_count=float(nsp_labels.numel()))
    return ObjectiveOutput(loss, sums, out)


@register_loss("masked_lm_sop")
def masked_lm_sop(
    model: nn.Module, batch: dict[str, torch.Tensor], prediction_cap: int | None = None
) -> ObjectiveOutput:
    """ALBERT's pretraining loss: masked LM + sentence-order prediction (Lan et al. 2019, §3.2), the
    sum of the two means. SOP label 0 = A then B in order, 1 = swapped, as transformers'
    `sentence_order_label`; the model returns the SOP head's logits as `sop_logits`
    (bertlab.models.albert.AlbertPreTrainingOutput)."""
    labels, order = batch["mlm_labels"], batch["sop_labels"]
    out = model(**_encoder_inputs(batch), mlm_positions=labels != IGNORE, prediction_cap=prediction_cap)
    mlm_loss, correct, count = masked_lm_score(out, labels)
    sop_loss, sop_correct = sentence_pair_score(out.sop_logits, order)
    sums = _mlm_sums(mlm_loss, correct, count) | {"sop_correct": float(sop_correct), "sop_count": float(order.numel())}
    return ObjectiveOutput(mlm_loss + sop_loss, sums, out)


@register_loss("masked_lm_sbo")
def masked_lm_sbo(
    model: nn.Module, batch: dict[str, torch.Tensor], prediction_cap: int | None = None
) -> ObjectiveOutput:
    """SpanBERT's pretraining loss (Joshi et al. 2019, §3.2): masked LM + span-boundary objective, the
    sum of the two means over the masked tokens. The spans are read back from the labels
    (`span_boundaries`); the model's span-boundary head scores each masked token from its span's two
    boundary tokens and its place in the span (bertlab.model.BertSpanBoundaryHead)."""
    labels = batch["mlm_labels"]
    selected = labels != IGNORE
    out = model(
        **_encoder_inputs(batch),
        mlm_positions=selected,
        prediction_cap=prediction_cap,
        span_boundaries=span_boundaries(selected),
    )
    mlm_loss, correct, count = masked_lm_score(out, labels)
    sbo_loss, sbo_correct, sbo_count = masked_lm_score(out, labels, out.sbo_logits)
    sums = _mlm_sums(mlm_loss, correct, count)
    sums.update(
        sbo_correct=float(sbo_correct),
        sbo_count=float(sbo_count),
        sbo_loss_sum=float(sbo_loss.detach()) * float(sbo_count),
    )
    return ObjectiveOutput(mlm_loss + sbo_loss, sums, out)


RTD_WEIGHT = 50.0  # λ: the discriminator's loss weighs 50 times the generator's (Clark et al. 2020, §2)


@register_loss("replaced_token_detection")
def replaced_token_detection(
    model: nn.Module, batch: dict[str, torch.Tensor], prediction_cap: int | None = None
) -> ObjectiveOutput:
    """ELECTRA's loss (Clark et al. 2020): the generator's masked-LM loss + λ x the discriminator's
    replaced-token loss, λ = 50. The model (bertlab.models.electra.ElectraPair) fills the masked
    positions with the generator's samples and returns what the discriminator read (`corrupted_ids`)
    and judged (`rtd_logits`); a token counts as replaced where it differs from the original, so a
    sample equal to the original counts as not replaced, as in the paper.

    Beside `rtd_acc` the sums give `rtd_trivial_acc`, the accuracy of answering "original" at every
    token (the share of real tokens not replaced, ~85% at 15% masking): a discriminator that outputs
    the base rate everywhere scores exactly that, so only rtd_acc above it shows that it detects."""
    labels = batch["mlm_labels"]
    out = model(**_encoder_inputs(batch), mlm_positions=labels != IGNORE, prediction_cap=prediction_cap)
    mlm_loss, correct, count = masked_lm_score(out, labels)
    original = torch.where(labels != IGNORE, labels, batch["input_ids"])  # (B, T)
    replaced = out.corrupted_ids != original
    attention_mask = batch.get("attention_mask")
    rtd_loss, rtd_correct, rtd_count = replaced_token_score(out.rtd_logits, replaced, attention_mask)
    real = torch.ones_like(replaced) if attention_mask is None else attention_mask.bool()
    sums = _mlm_sums(mlm_loss, correct, count)
    sums.update(
        rtd_correct=float(rtd_correct),
        rtd_count=float(rtd_count),
        rtd_loss_sum=float(rtd_loss.detach()) * float(rtd_count),
        rtd_trivial_correct=float((~replaced & real).sum()),
        rtd_trivial_count=float(rtd_count),
    )
    return ObjectiveOutput(mlm_loss + RTD_WEIGHT * rtd_loss, sums, out)
