"""bertlab.models.roberta: RoBERTa opens from transformers and saves for it (equal logits both ways,
equal gradients), answers fill-mask with the [MASK] a user types, and pretrains with RoBERTa's recipe
(FULL-SENTENCES packing, dynamic masking, byte-level BPE) through the real recipe and trainer.

Tiny random configs built by transformers; the BPE is trained here on the conftest sentences."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import torch
from conftest import SAMPLE_TEXT
from test_pretrain import _config
from torch.testing import assert_close

from bertlab.data.explain import explain_text
from bertlab.data.pretraining_data import (
    DataConfig,
    create_full_sentence_instances,
    create_instances,
)
from bertlab.errors import InputError
from bertlab.inference import load_model
from bertlab.losses import masked_lm
from bertlab.models.roberta import RobertaConfig, RobertaForMaskedLM, config_from_hf, expected_shapes
from bertlab.models.roberta_tokenizer import RobertaTokenizer
from bertlab.storage.checkpoint import export_state_dict, load_pretraining_model, save_checkpoint
from bertlab.training.pretrain import run_pretraining
from bertlab.training.pretrain_config import PretrainConfig

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def bpe() -> RobertaTokenizer:
    return RobertaTokenizer.train(texts=SAMPLE_TEXT * 20, vocab_size=320)


def _hf_config(vocab_size: int, **kw) -> transformers.RobertaConfig:
    settings = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,  # 38 tokens after the padding offset
        type_vocab_size=1,
        pad_token_id=1,
        layer_norm_eps=1e-5,
        attn_implementation="eager",
    )
    return transformers.RobertaConfig(**(settings | kw))


def _inputs(tokenizer: RobertaTokenizer) -> dict[str, torch.Tensor]:
    """Three rows of different lengths, padded with <pad> (1): positions count from padding_idx + 1."""
    encs = tokenizer.encode_batch(["The cat sat on the mat.", "Paris is the capital of France. It is big.", "A dog."])
    width = max(len(e.ids) for e in encs)
    ids = torch.full((3, width), tokenizer.pad_id)
    for b, e in enumerate(encs):
        ids[b, : len(e.ids)] = torch.tensor(e.ids)
    return {"input_ids": ids, "attention_mask": (ids != tokenizer.pad_id).long()}


def _roberta_folder(tmp_path, bpe, **kw):
    torch.manual_seed(0)
    theirs = transformers.RobertaForMaskedLM(_hf_config(len(bpe), **kw)).eval()
    theirs.save_pretrained(tmp_path)
    bpe.save(tmp_path)
    return theirs


# --------------------------------------------------------------------------------------
# Parity with transformers
# --------------------------------------------------------------------------------------
def test_a_transformers_roberta_opens_with_load_model_and_gives_its_logits(tmp_path, bpe):
    theirs = _roberta_folder(tmp_path, bpe)
    lm = load_model(tmp_path)
    assert isinstance(lm.model, RobertaForMaskedLM) and lm.info["family"] == "RoBERTa"
    assert lm.heads == ("mlm",) and lm.info["missing"] == [] and lm.max_length == 38
    batch = _inputs(lm.tokenizer)
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        ref = theirs(**batch, output_hidden_states=True, output_attentions=True)
        explicit = lm.model(**batch, output_hidden_states=True, output_attentions=True)
        fast = lm.model(**batch)  # the SDPA path
    assert_close(explicit.mlm_logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(fast.mlm_logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
    for ours, hf in zip(explicit.encoder.hidden_states, ref.hidden_states, strict=True):
        assert_close(ours[keep], hf[keep], atol=1e-5, rtol=1e-5)
    for ours, hf in zip(explicit.encoder.attentions, ref.attentions, strict=True):
        assert_close(ours, hf, atol=1e-5, rtol=1e-5)
    assert explicit.encoder.pooled_output is None and explicit.nsp_logits is None  # no pooler, no NSP


def test_ours_saved_with_save_checkpoint_opens_in_transformers_with_equal_logits(tmp_path, bpe):
    config = config_from_hf(_hf_config(len(bpe)).to_dict(), "test")
    torch.manual_seed(1)
    ours = RobertaForMaskedLM(config).eval()
    with torch.no_grad():
        ours.lm_head.bias.normal_()  # zero at init: a wrong name would go unseen
    save_checkpoint(tmp_path / "ours", ours, bpe)
    raw = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert raw["model_type"] == "roberta" and raw["architectures"] == ["RobertaForMaskedLM"]
    assert (raw["type_vocab_size"], raw["pad_token_id"], raw["max_position_embeddings"]) == (1, 1, 40)
    assert set(export_state_dict(ours)) == set(expected_shapes(config)) - {"lm_head.decoder.weight"}
    theirs = transformers.RobertaForMaskedLM.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    batch = _inputs(bpe)
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        assert_close(ours(**batch).mlm_logits[keep], theirs(**batch).logits[keep], atol=1e-5, rtol=1e-5)


def test_training_gradients_match_transformers(bpe):
    """Dropout off: the masked-LM loss and every parameter's gradient equal transformers'."""
    hf_config = _hf_config(len(bpe), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(2)
    ours = RobertaForMaskedLM(config_from_hf(hf_config.to_dict(), "test")).train()
    theirs = transformers.RobertaForMaskedLM(hf_config).train()
    theirs.load_state_dict(export_state_dict(ours), strict=False)
    theirs.tie_weights()
    batch = _inputs(bpe)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2], labels[1, 4], labels[2, 1], labels[1, 7] = 7, 9, 11, 13
    a = masked_lm(ours, {**batch, "mlm_labels": labels})  # RoBERTa's objective: its loss, outside the model
    b = theirs(**batch, labels=labels)
    assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    a.loss.backward()
    b.loss.backward()
    theirs_grads = {k: p.grad for k, p in theirs.named_parameters()}
    for k, p in ours.named_parameters():  # our names are transformers' names
        assert_close(p.grad, theirs_grads[k], atol=1e-5, rtol=1e-4, msg=k)
    assert len(list(ours.named_parameters())) == len(theirs_grads)


def test_fill_mask_reads_the_typed_mask_as_roberta_s(tmp_path, bpe):
    _roberta_folder(tmp_path, bpe)
    lm = load_model(tmp_path)
    answer = lm.fill_mask("The cat sat on the [MASK].", top_k=3)
    assert "<mask>" in answer.tokens and len(answer.masks) == 1
    assert len(answer.masks[0].candidates) == 3
    assert answer.masks[0].position == answer.tokens.index("<mask>")


def test_a_config_asking_for_nsp_or_too_few_positions_is_refused():
    raw = _hf_config(50).to_dict()
    with pytest.raises(Exception, match="no next-sentence head"):
        config_from_hf({**raw, "bertlab": {"use_nsp_head": True}}, "x")
    with pytest.raises(ValueError, match="no position"):
        RobertaConfig(vocab_size=50, hidden_size=8, num_heads=2, max_position_embeddings=2, pad_token_id=1)


# --------------------------------------------------------------------------------------
# RoBERTa's recipe: FULL-SENTENCES packing, and a tiny RoBERTa pretrained with the BPE
# --------------------------------------------------------------------------------------
CLS, SEP = 0, 2


def _documents(seed: int) -> list[list[list[int]]]:
    """Documents of sentences of distinct token ids (10 and up), so every token says where it came from."""
    rng = random.Random(seed)
    docs, next_id = [], 10
    for _ in range(12):
        doc = []
        for _ in range(rng.randint(1, 5)):
            n = rng.choice([1, 3, 7, 12, 40])  # 40: longer than an instance, cut into pieces
            doc.append(list(range(next_id, next_id + n)))
            next_id += n
        docs.append(doc)
    return docs


@pytest.mark.parametrize("seed", range(3))
def test_full_sentences_pack_whole_sentences_across_documents_with_a_separator(seed):
    docs = _documents(seed)
    config = DataConfig(max_seq_length=24, objective="roberta")
    instances = create_full_sentence_instances(docs, config, CLS, SEP)
    assert all(len(i.input_ids) <= 24 and i.input_ids[0] == CLS and i.input_ids[-1] == SEP for i in instances)
    doc_of = {t: d for d, doc in enumerate(docs) for s in doc for t in s}
    read = [t for i in instances for t in i.input_ids[1:-1] if t != SEP]
    assert read == [t for doc in docs for s in doc for t in s]  # every token once, in order
    crossing = [i for i in instances if i.doc_b != i.doc_a]
    assert crossing, "some instance goes on into the next document"
    for inst in crossing:
        body = inst.input_ids[1:-1]
        for k, sep in enumerate(body):
            if sep == SEP:  # the extra separator stands exactly where one document ends and the next begins
                assert doc_of[body[k - 1]] < doc_of[body[k + 1]]
        assert [doc_of[t] for t in body if t != SEP] == sorted(doc_of[t] for t in body if t != SEP)
        assert body.count(SEP) == len({doc_of[t] for t in body if t != SEP}) - 1
    # whole sentences (a sentence longer than an instance in 22-token pieces), and an instance closes only
    # where the next piece would not fit beside it and a separator
    piece_length = {s[k]: len(s[k : k + 22]) for doc in docs for s in doc for k in range(0, len(s), 22)}
    assert all(i.input_ids[1] in piece_length for i in instances)
    for inst, following in zip(instances[:-1], instances[1:], strict=True):
        assert len(inst.input_ids) - 2 + 1 + piece_length[following.input_ids[1]] > 22


def test_the_roberta_objective_packs_full_sentences_in_create_instances(bpe):
    token_docs = [[bpe.tokenize_batch([s])[0] for s in text.split(". ")] for text in SAMPLE_TEXT]
    config = DataConfig(max_seq_length=40, objective="roberta", masking="dynamic")
    instances = create_instances(token_docs, bpe, config, seed=0, dupe_factor=1, mask=False)
    assert any(i.doc_a != i.doc_b and bpe.sep_id in i.input_ids[1:-1] for i in instances)
    assert all(len(i.input_ids) <= 40 and not i.masked_positions for i in instances)
    shown = explain_text("\n\n".join(SAMPLE_TEXT), bpe, config)  # the Pretraining data page's view
    assert any("on into your second document" in e.reason and "</s>" in e.tokens[1:-1] for e in shown)


def test_a_tiny_roberta_pretrains_with_the_bpe_and_opens_in_transformers(tmp_path, vocab_file):
    cfg = _config(tmp_path, vocab_file, max_steps=2, eval_every=2)
    cfg = dataclasses.replace(
        cfg,
        model_type="roberta",
        tokenizer="bpe",
        lowercase=False,
        vocab=None,
        vocab_size=300,
        data=dataclasses.replace(cfg.data, objective="roberta", masking="dynamic"),
    )
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished" and result.progress.step == 2
    assert 0 <= result.last_eval["mlm_acc"] <= 1 and "nsp_acc" not in result.last_eval
    assert (tmp_path / "run" / "vocab.json").is_file() and (tmp_path / "run" / "merges.txt").is_file()

    folder = tmp_path / "run" / "model"
    raw = json.loads((folder / "config.json").read_text())
    assert raw["model_type"] == "roberta" and raw["architectures"] == ["RobertaForMaskedLM"]
    assert (raw["type_vocab_size"], raw["pad_token_id"], raw["max_position_embeddings"]) == (1, 1, 64 + 2)
    model, tokenizer, info = load_pretraining_model(folder)
    assert isinstance(model, RobertaForMaskedLM) and isinstance(tokenizer, RobertaTokenizer)
    assert info["heads"] == ("mlm",) and info["missing"] == []
    assert load_model(folder).fill_mask("The cat sat on the [MASK].").masks

    theirs = transformers.RobertaForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    for their_tokenizer in (
        transformers.RobertaTokenizer.from_pretrained(folder),
        transformers.AutoTokenizer.from_pretrained(folder),
    ):
        assert (
            their_tokenizer("The cat sat on the <mask>.")["input_ids"]
            == tokenizer.encode("The cat sat on the [MASK].").ids
        )
    batch = _inputs(tokenizer)
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        assert_close(model(**batch).mlm_logits[keep], theirs(**batch).logits[keep], atol=1e-5, rtol=1e-5)


def test_the_pretrain_config_picks_the_bpe_which_is_cased():
    assert PretrainConfig.from_dict({}).tokenizer == "wordpiece"
    assert PretrainConfig.from_dict({"tokenizer": "bpe"}).lowercase is False  # WordPiece's default is uncased
    with pytest.raises(InputError, match="cased"):
        PretrainConfig.from_dict({"tokenizer": "bpe", "lowercase": True})
    with pytest.raises(InputError, match="tokenizer must be one of wordpiece, bpe"):
        PretrainConfig.from_dict({"tokenizer": "sentencepiece"})
