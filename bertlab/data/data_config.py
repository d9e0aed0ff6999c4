"""How pretraining instances are made, as a frozen `DataConfig` (defaults = the paper / Google's
`create_pretraining_data.py`), and the prediction cap a sequence length and masking share call for
(`max_predictions_for`). The config's checks live here, so the Train page's forms and a queued
job (bertlab.jobs.spec) check the same way the data pipeline does, without importing it.

Imports bertlab.errors and bertlab.data.objectives; no torch (bertlab.data.pretraining_data, which makes
the instances, re-exports both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bertlab.data.objectives import Objective, get_objective
from bertlab.errors import InputError


@dataclass(frozen=True)
class DataConfig:
    """How instances are made (defaults = the paper / Google's script)."""

    max_seq_length: int = 128  # tokens per instance, [CLS]/[SEP] included
    short_seq_prob: float = 0.1  # chance of a shorter target length, so the model sees short inputs
    masked_lm_prob: float = 0.15  # share of tokens chosen for prediction
    max_predictions_per_seq: int = 20  # cap on chosen tokens per instance
    mask_token_prob: float = 0.8  # of the chosen: replaced by [MASK]
    # of the chosen: replaced by a random token (the rest stay unchanged). Drawn uniformly from the
    # vocabulary minus the special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]); Google's script draws from
    # the whole vocabulary. A deliberate choice: a random [SEP]/[CLS]/[MASK] mid-sentence would fake a
    # segment boundary or a mask; with 5 specials in thousands of tokens the difference is negligible.
    random_token_prob: float = 0.1
    whole_word_mask: bool = False  # choose whole words (all their ## pieces) at once
    dupe_factor: int = 5  # static masking: copies of the data, each with different masks
    masking: str = "static"  # static | dynamic (fresh masks every epoch, RoBERTa-style)
    objective: str = (
        "mlm_nsp"  # bertlab.data.objectives: mlm_nsp | mlm (No NSP ablation) | ltr (left-to-right LM, no NSP)
    )
    random_next_prob: float = 0.5  # share of NotNext pairs
    heldout_fraction: float = 0.02  # documents kept out of training for evaluation
    min_heldout_documents: int = 2

    def __post_init__(self):
        get_objective(self.objective)  # InputError naming the known objectives
        if self.masking not in ("static", "dynamic"):
            raise InputError(f"masking must be static or dynamic, not {self.masking!r}")
        check_masked_lm_prob(self.masked_lm_prob)
        if self.mask_token_prob < 0 or self.random_token_prob < 0 or self.mask_token_prob + self.random_token_prob > 1:
            raise InputError("mask_token_prob and random_token_prob must be >= 0 and add up to at most 1")
        if self.max_seq_length < 8:
            raise InputError("max_seq_length must be at least 8")

    @property
    def keep_token_prob(self) -> float:
        return 1.0 - self.mask_token_prob - self.random_token_prob

    @property
    def objective_spec(self) -> Objective:
        return get_objective(self.objective)


def check_masked_lm_prob(masked_lm_prob: float) -> None:
    """The share of tokens chosen for prediction must lie strictly between 0 and 1.

    Raises:
        InputError: it does not.
    """
    if not 0 < masked_lm_prob < 1:
        raise InputError(f"masked_lm_prob (the masked share) must be between 0 and 1, got {masked_lm_prob}")


def max_predictions_for(max_seq_length: int, masked_lm_prob: float) -> int:
    """`max_predictions_per_seq` that lets `masked_lm_prob` of a full sequence be chosen, as Google's
    README says (max_seq_length x masked_lm_prob, rounded up): 20 for 128 x 0.15, 77 for 512 x 0.15.
    A fixed 20 at 512 tokens would mask about 4% of them."""
    return max(1, math.ceil(int(max_seq_length) * float(masked_lm_prob) - 1e-9))
