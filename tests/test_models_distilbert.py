"""bertlab.models.distilbert: transformers' DistilBertForMaskedLM folders open with load_model (in
BERT's modules, renamed at load) and answer with transformers' logits, hidden states and attention
maps; fill-mask picks transformers' top token; saving as DistilBERT is refused with a message."""

from __future__ import annotations

import shutil

import pytest
import torch
from test_model import _inputs
from torch.testing import assert_close

from bertlab.errors import CheckpointError, InputError
from bertlab.inference import load_model
from bertlab.models import distilbert
from bertlab.storage.checkpoint import save_checkpoint

transformers = pytest.importorskip("transformers")


def _hf_folder(folder, vocab_file, vocab_size: int, seed: int = 3, **kw):
    """A tiny random DistilBertForMaskedLM saved by transformers, with a WordPiece vocab.txt."""
    config = transformers.DistilBertConfig(
        vocab_size=vocab_size, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, **kw
    )
    torch.manual_seed(seed)
    theirs = transformers.DistilBertForMaskedLM(config).eval()
    theirs.save_pretrained(folder)
    shutil.copy(vocab_file, folder / "vocab.txt")
    theirs.set_attn_implementation("eager")
    return theirs


@pytest.mark.parametrize("sinusoidal", [False, True])
def test_a_transformers_distilbert_opens_with_load_model_and_equal_logits(sinusoidal, tmp_path, vocab_file, tokenizer):
    theirs = _hf_folder(tmp_path, vocab_file, len(tokenizer), sinusoidal_pos_embds=sinusoidal)
    lm = load_model(tmp_path, device="cpu")
    assert lm.info["family"] == "DistilBERT" and lm.info["missing"] == [] and lm.heads == ("mlm",)
    assert (lm.config.hidden_size, lm.config.num_layers, lm.config.num_heads) == (32, 2, 4)
    ids, types, mask = _inputs(len(tokenizer))
    with torch.no_grad():
        a = lm.model(ids, types, mask, output_attentions=True, output_hidden_states=True)
        a_fast = lm.model(ids, types, mask)  # the SDPA path; segment ids read as DistilBERT reads them: not at all
        b = theirs(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    keep = mask.bool()
    assert_close(a.mlm_logits[keep], b.logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(a_fast.mlm_logits[keep], b.logits[keep], atol=1e-5, rtol=1e-5)
    assert a.nsp_logits is None and a.encoder.pooled_output is None
    for h1, h2 in zip(a.encoder.hidden_states, b.hidden_states, strict=True):
        assert_close(h1[keep], h2[keep], atol=1e-5, rtol=1e-5)
    for a1, a2 in zip(a.encoder.attentions, b.attentions, strict=True):
        assert_close(a1, a2, atol=1e-5, rtol=1e-5)

    enc = tokenizer.encode("the cat sat on the [MASK] .")
    with torch.no_grad():
        probs = theirs(input_ids=torch.tensor([enc.ids])).logits[0, enc.ids.index(tokenizer.mask_id)].softmax(-1)
    answer = lm.fill_mask("the cat sat on the [MASK] .", top_k=3)
    assert [c.token_id for c in answer.masks[0].candidates] == probs.topk(3).indices.tolist()
    assert answer.masks[0].candidates[0].score == pytest.approx(float(probs.max()), abs=1e-5)
    assert lm.inspect("the cat sat .", "it was big .").attentions.shape[:2] == (2, 4)  # a pair reads as one text
    with pytest.raises(InputError, match="no next-sentence head"):
        lm.next_sentence("the cat sat .", "it was big .")


def test_distilbert_opens_but_is_not_saved_or_pretrained(tmp_path, vocab_file, tokenizer):
    _hf_folder(tmp_path / "hf", vocab_file, len(tokenizer))
    lm = load_model(tmp_path / "hf", device="cpu")
    with pytest.raises(CheckpointError, match="does not save them as DistilBERT"):
        save_checkpoint(tmp_path / "again", lm.model, lm.tokenizer)
    bert_keys = lm.config.to_hf_dict()  # what a pretraining run hands the family
    with pytest.raises(CheckpointError, match="not a DistilBERT config.*pretrain model_type=bert"):
        distilbert.config_from_hf(bert_keys, "model_type=distilbert")
    shapes = {k: tuple(v.shape) for k, v in distilbert.build(lm.config).state_dict().items()}
    assert distilbert.expected_shapes(lm.config) == shapes
