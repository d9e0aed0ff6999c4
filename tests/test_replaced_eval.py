"""ELECTRA's discriminator scored against the rate it must beat (bertlab.training.replaced_eval)."""

from __future__ import annotations

import pytest
import torch

from bertlab.errors import InputError
from bertlab.training.replaced_eval import auc


def test_auc_is_the_chance_a_positive_outranks_a_negative():
    assert auc(torch.tensor([0.9, 0.8]), torch.tensor([0.1, 0.2, 0.3])) == 1.0
    assert auc(torch.tensor([0.1]), torch.tensor([0.9])) == 0.0
    assert auc(torch.tensor([0.5, 0.5]), torch.tensor([0.5, 0.5])) == 0.5  # a constant answer: no signal
    # 0.6 beats 0.5 and ties 0.6: (1 + 0.5) / 2; 0.4 beats neither
    assert auc(torch.tensor([0.6, 0.4]), torch.tensor([0.5, 0.6])) == pytest.approx((1.5 + 0) / 4)
    with pytest.raises(InputError, match="both kinds"):
        auc(torch.tensor([0.5]), torch.tensor([]))


def test_a_discriminator_stuck_at_the_prior_scores_the_trivial_rate_and_no_signal(tokenizer):
    """A pair whose discriminator gives every token the same logit: accuracy = answering 'original', AUC 0.5."""
    from conftest import SAMPLE_TEXT

    from bertlab.data.data_config import DataConfig
    from bertlab.data.pretraining_data import create_instances, tokenize_documents
    from bertlab.models.electra import ElectraConfig, ElectraPair
    from bertlab.training.replaced_eval import score_replaced_detection

    config = ElectraConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
        max_position_embeddings=64, generator_size=0.5,
    )  # fmt: skip
    pair = ElectraPair(config).eval()
    head = pair.discriminator.discriminator_predictions
    with torch.no_grad():
        for p in head.parameters():
            p.zero_()
        head.dense_prediction.bias.fill_(-1.5)  # P(replaced) = 0.18 everywhere
    data = DataConfig(objective="electra", max_seq_length=32, max_predictions_per_seq=5)
    docs = [[s for s in SAMPLE_TEXT[i : i + 4]] for i in range(0, len(SAMPLE_TEXT) - 4, 4)]
    instances = create_instances(tokenize_documents(docs, tokenizer), tokenizer, data, seed=0)[:40]
    s = score_replaced_detection(pair, instances, data, tokenizer.pad_id)
    assert s.accuracy == pytest.approx(s.trivial) and s.auc == 0.5 and 0 < s.replaced < s.tokens
    assert score_replaced_detection(pair, instances, data, tokenizer.pad_id) == s  # the generator's samples repeat
