"""bertlab.data.maskers: SpanBERT's span masking (Google's Masker is pinned in test_pretraining_data.py)."""

from __future__ import annotations

import dataclasses
import random
import statistics

import pytest
from test_pretrain import _config

from bertlab.data.data_config import DataConfig
from bertlab.data.maskers import KIND_MASK, MASKERS, SPAN_GEOMETRIC_P, SPAN_MAX_WORDS, SpanMasker, num_to_predict
from bertlab.training.pretrain import run_pretraining

TEXT = "the quick brown fox jumped over the lazy dog while the unbelievably sleepy cat watched from the windowsill"


def _spans(positions: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for p in positions:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def test_span_lengths_follow_the_clipped_geometric():
    rng = random.Random(0)
    lengths = [SpanMasker.span_length(rng) for _ in range(20_000)]
    p, n = SPAN_GEOMETRIC_P, SPAN_MAX_WORDS
    expected = sum(k * p * (1 - p) ** (k - 1) for k in range(1, n)) + n * (1 - p) ** (n - 1)  # 3.8 (the paper)
    assert statistics.mean(lengths) == pytest.approx(expected, abs=0.06)
    assert min(lengths) == 1 and max(lengths) == SPAN_MAX_WORDS


def test_spans_are_whole_words_inside_the_budget_and_share_one_choice(tokenizer):
    config = DataConfig(objective="span", max_seq_length=64, max_predictions_per_seq=10, masked_lm_prob=0.3)
    masker = MASKERS["span"](tokenizer, config)
    enc = tokenizer.encode(TEXT, TEXT)
    ids = enc.ids
    rng = random.Random(1)
    for _ in range(200):
        out, positions, labels, kinds = masker(ids, rng)
        assert 0 < len(positions) <= num_to_predict(len(ids), config)
        assert all(ids[p] not in (tokenizer.cls_id, tokenizer.sep_id) for p in positions)
        assert labels == [ids[p] for p in positions]
        for p in positions:  # whole words: no WordPiece of a chosen word is left out
            if p + 1 < len(ids) and enc.tokens[p + 1].startswith("##"):
                assert p + 1 in positions
            if enc.tokens[p].startswith("##"):
                assert p - 1 in positions
        by_position = dict(zip(positions, kinds, strict=True))
        for run in _spans(positions):
            if all(by_position[p] == KIND_MASK for p in run):
                assert all(out[p] == tokenizer.mask_id for p in run)


def test_the_span_objective_pretrains(tmp_path, vocab_file):
    cfg = _config(tmp_path, vocab_file, max_steps=2)
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, objective="span"))
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished"
    assert result.last_eval.get("mlm_acc") is not None and "nsp_acc" not in result.last_eval
