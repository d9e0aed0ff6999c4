"""bench/bench_time_to_quality.py: its one scorer, the time-to-quality arithmetic and HF's training blocks.

No training, no network, no ../shared: a tiny checkpoint and held-out instances made here.
"""

from __future__ import annotations

import pytest
import torch
from conftest import SAMPLE_TEXT

from bertlab.data.corpus import split_sentences
from bertlab.data.pretraining_data import DataConfig, InstanceStore, collate, create_instances, pack, tokenize_documents
from bertlab.losses import masked_lm_nsp
from bertlab.storage.checkpoint import load_pretraining_model
from bertlab.tokenizer import BertTokenizer

pytest.importorskip("transformers")
from bench.bench_time_to_quality import BLOCK, SHIPPED, compare, hf_blocks, score, time_to_reach  # noqa: E402


def heldout(tokenizer) -> tuple[DataConfig, InstanceStore]:
    data = DataConfig(max_seq_length=32, max_predictions_per_seq=5, masking="static")
    docs = tokenize_documents([split_sentences(t) for t in SAMPLE_TEXT], tokenizer)
    return data, InstanceStore(pack(create_instances(docs, tokenizer, data, seed=0, dupe_factor=3)))


def test_score_matches_bertlab_own_masked_lm_numbers(tiny_checkpoint, tokenizer):
    data, store = heldout(tokenizer)
    ours = score(tiny_checkpoint, store, data, n=len(store), token_types=True, pad_id=tokenizer.pad_id, batch_size=4)
    model, _, _ = load_pretraining_model(tiny_checkpoint)
    batch = collate([store[i] for i in range(len(store))], data, tokenizer.pad_id)
    batch.pop("num_tokens")
    with torch.no_grad():
        out = masked_lm_nsp(model, batch)
    assert ours["mlm_acc"] == pytest.approx(out.sums["mlm_correct"] / out.sums["mlm_count"])
    assert ours["mlm_loss"] == pytest.approx(out.sums["mlm_loss_sum"] / out.sums["mlm_count"], rel=1e-4)


def test_time_to_quality_interpolates_and_bounds_what_is_never_reached():
    ours = [
        {"train_s": 10, "mlm_acc": 0.1},
        {"train_s": 20, "mlm_acc": 0.3},
        {"train_s": 40, "mlm_acc": 0.5},
        {"train_s": 100, "mlm_acc": 0.5},
    ]
    theirs = [{"train_s": 50, "mlm_acc": 0.1}, {"train_s": 100, "mlm_acc": 0.2}]
    assert time_to_reach(ours, 0.2) == pytest.approx(15.0)
    assert time_to_reach(ours, 0.05) == 10  # the first scored point: an upper bound
    assert time_to_reach(theirs, 0.3) is None
    lines, numbers = compare(ours, theirs, "hf-paper")
    assert numbers["bertlab_to_hf-paper_final"]["factor"] == pytest.approx(100 / 15, abs=0.01)
    never = numbers["hf-paper_to_bertlab_final"]
    assert never["seconds"] is None and never["bertlab_factor_at_least"] == pytest.approx(100 / 40)
    assert "6.7x faster" in lines[0] and "never reaches" in lines[1] and ">= 2.5x" in lines[1]


def test_hf_blocks_are_cls_text_sep_in_the_shipped_vocabulary():
    docs = [split_sentences(t) for t in SAMPLE_TEXT] * 20
    blocks = hf_blocks(docs)
    tok = BertTokenizer.from_vocab(SHIPPED / "vocab.txt")
    flat = [t for s in tok.tokenize_batch([s for d in docs for s in d]) for t in s]
    assert blocks.shape == (len(flat) // (BLOCK - 2), BLOCK)
    assert (blocks[:, 0] == tok.cls_id).all() and (blocks[:, -1] == tok.sep_id).all()
    assert blocks[:, 1:-1].ravel().tolist() == flat[: blocks.size - 2 * len(blocks)]
