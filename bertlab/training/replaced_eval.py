"""ELECTRA's discriminator scored on a run's held-out instances, against the rate it must beat: accuracy,
the accuracy of answering "original" everywhere, and the AUC of P(replaced) between replaced and original
tokens (the chance that a replaced token scores above an original one; 0.5: no signal). Accuracy alone
hides a discriminator stuck at the prior, which gives every token the base rate of replacement.

The corruption is the pair's own: the generator samples the masked positions (seeded here, so two calls
agree), as the run's evaluation does. Imports torch and bertlab.data (batches), bertlab.errors, bertlab.losses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bertlab.data.data_config import DataConfig
from bertlab.data.pretraining_data import Instance, collate
from bertlab.errors import InputError
from bertlab.losses import IGNORE


@dataclass(frozen=True)
class ReplacedScore:
    """A discriminator on held-out tokens (real tokens, [CLS] and [SEP] included, as its loss counts them)."""

    accuracy: float
    trivial: float  # answering "original" everywhere
    auc: float  # P(replaced) ranks a replaced token above an original one this often (ties count half)
    tokens: int
    replaced: int


def auc(positive: torch.Tensor, negative: torch.Tensor) -> float:
    """The Mann-Whitney AUC: P(a positive's score > a negative's), ties counted half."""
    if not len(positive) or not len(negative):
        raise InputError("AUC needs scores of both kinds (some replaced tokens and some original ones)")
    scores = torch.cat([positive, negative]).double()
    # ranks 1..n in sorted order, ties sharing their mean rank: a value seen c times ending at rank e has e - (c-1)/2
    _, which, counts = scores.unique(sorted=True, return_inverse=True, return_counts=True)
    ranks = (counts.cumsum(0) - (counts - 1) / 2).double()[which]
    n_pos, n_neg = len(positive), len(negative)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def score_replaced_detection(
    pair: torch.nn.Module,
    instances: Sequence[Instance],
    data: DataConfig,
    pad_id: int,
    seed: int = 0,
    batch_size: int = 64,
) -> ReplacedScore:
    """`pair` (an ELECTRA pair in eval mode: its output has `corrupted_ids` and `rtd_logits`) on `instances`.

    Raises:
        InputError: no instances, or a model that is not an ELECTRA pair.
    """
    if not instances:
        raise InputError("no held-out instances to score")
    replaced_p, original_p, correct = [], [], 0
    with torch.random.fork_rng(devices=[]), torch.inference_mode():  # the caller's random state is left as it was
        torch.default_generator.manual_seed(seed)  # the generator's samples, repeatable (the CPU generator)
        for start in range(0, len(instances), batch_size):
            b = collate(instances[start : start + batch_size], data, pad_id)
            labels = b["mlm_labels"]
            out = pair(b["input_ids"], b["token_type_ids"], b["attention_mask"], mlm_positions=labels != IGNORE)
            if getattr(out, "rtd_logits", None) is None or getattr(out, "corrupted_ids", None) is None:
                raise InputError("this model is not an ELECTRA pair (no replaced-token detection on corrupted input)")
            original = torch.where(labels != IGNORE, labels, b["input_ids"])
            replaced = out.corrupted_ids != original  # (B, T)
            real = b["attention_mask"].bool()
            p = torch.sigmoid(out.rtd_logits.float())
            correct += int((((p > 0.5) == replaced) & real).sum())
            replaced_p.append(p[replaced & real])
            original_p.append(p[~replaced & real])
    pos, neg = torch.cat(replaced_p), torch.cat(original_p)
    tokens = len(pos) + len(neg)
    return ReplacedScore(correct / tokens, len(neg) / tokens, auc(pos, neg), tokens, len(pos))
