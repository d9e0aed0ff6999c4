"""bertlab.models.longformer: Longformer opens from transformers and saves for it (equal logits, hidden
states and attention maps both ways, equal gradients), on inputs shorter and longer than the window and
no multiple of it, padded in a batch, with and without global tokens; per-layer windows; fill-mask with
the [MASK] a user types.

Tiny random configs built by transformers; the BPE is trained here on the conftest sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import SAMPLE_TEXT
from torch.testing import assert_close

from bertlab.errors import CheckpointError
from bertlab.finetune.models import HeadConfig
from bertlab.finetune.predict import TaskSetup, save_finetuned
from bertlab.finetune.recipe import pretrained_task_model
from bertlab.inference import load_model
from bertlab.losses import masked_lm
from bertlab.models.longformer import LongformerForMaskedLM, config_from_hf, expected_shapes
from bertlab.models.roberta_tokenizer import RobertaTokenizer
from bertlab.storage.checkpoint import export_state_dict, load_pretraining_model, save_checkpoint

transformers = pytest.importorskip("transformers")

WINDOW = 8  # the whole window: 4 tokens each side
LENGTHS = [(5, 19, 37), (61,), (8, 16)]  # shorter and longer than the window, no multiple of it; two that are


@pytest.fixture(scope="module")
def bpe() -> RobertaTokenizer:
    return RobertaTokenizer.train(texts=SAMPLE_TEXT * 20, vocab_size=320)


def _hf_config(vocab_size: int = 320, **kw) -> transformers.LongformerConfig:
    settings = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=66,  # 64 tokens after the padding offset
        type_vocab_size=1,
        pad_token_id=1,
        layer_norm_eps=1e-5,
        attention_window=WINDOW,
        attn_implementation="eager",
    )
    return transformers.LongformerConfig(**(settings | kw))


def _batch(lengths: tuple[int, ...], seed: int = 0) -> dict[str, torch.Tensor]:
    """<s> random tokens </s>, right-padded with <pad> (1) to the longest row."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), 1)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(4, 300, (n,), generator=g)
        ids[b, 0], ids[b, n - 1] = 0, 2
    return {"input_ids": ids, "attention_mask": (ids != 1).long()}


def _globals(kind: str, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """None (no global tokens), <s> in every row, or a few tokens per row (and one on a pad, ignored)."""
    if kind == "none":
        return None
    ids = batch["input_ids"]
    glob = torch.zeros_like(ids)
    glob[:, 0] = 1
    if kind == "few":
        glob[:, [2, ids.shape[1] - 1]] = 1  # the last column is a pad in every row but the longest
        glob[0, 4] = 1  # rows with different numbers of global tokens
    return glob


def _dense_maps(
    local: torch.Tensor, glob_probs: torch.Tensor | None, glob: torch.Tensor | None, mask: torch.Tensor
) -> torch.Tensor:
    """transformers' Longformer maps as one (B, nh, T, T) matrix: `local` (B, nh, T', G + WINDOW + 1) holds
    each query's global keys then its band (key i - WINDOW/2 + j); the global tokens' (`glob`, (B, T))
    rows come from `glob_probs` (B, nh, T', G), their attention to every key."""
    B, nh, T = local.shape[0], local.shape[1], mask.shape[1]
    w = WINDOW // 2
    positions = [row.nonzero().flatten().tolist() for row in (glob.bool() & mask.bool())] if glob is not None else []
    G = max((len(p) for p in positions), default=0)
    dense = torch.zeros(B, nh, T, T)
    for i in range(T):
        for j in range(2 * w + 1):
            if 0 <= i - w + j < T:
                dense[:, :, i, i - w + j] = local[:, :, i, G + j]
    for b, pos in enumerate(positions):
        for k, p in enumerate(pos):
            dense[b, :, :, p] += local[b, :, :T, k]
            dense[b, :, p, :] = glob_probs[b, :, :T, k]
    return dense


def _longformer_folder(tmp_path, bpe, **kw):
    torch.manual_seed(0)
    theirs = transformers.LongformerForMaskedLM(_hf_config(len(bpe), **kw)).eval()
    theirs.save_pretrained(tmp_path)
    bpe.save(tmp_path)
    return theirs


# --------------------------------------------------------------------------------------
# Parity with transformers
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair(tmp_path_factory, bpe):
    folder = tmp_path_factory.mktemp("longformer")
    theirs = _longformer_folder(folder, bpe)
    return theirs, load_model(folder)


def test_a_transformers_longformer_opens_with_load_model(pair):
    theirs, lm = pair
    assert isinstance(lm.model, LongformerForMaskedLM) and lm.info["family"] == "Longformer"
    assert lm.heads == ("mlm",) and lm.info["missing"] == [] and lm.max_length == 64
    config = lm.model.config
    assert (config.attention_pattern, config.attention_window, config.global_tokens) == ("window", WINDOW, "none")
    assert theirs.config.attention_window == [WINDOW, WINDOW]  # transformers writes one per layer


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("glob", ["none", "cls", "few"])
def test_logits_hidden_states_and_maps_equal_transformers(pair, lengths, glob):
    theirs, lm = pair
    batch = _batch(lengths)
    gmask = _globals(glob, batch)
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        ref = theirs(**batch, global_attention_mask=gmask, output_hidden_states=True, output_attentions=True)
        ours = lm.model(**batch, global_attention_mask=gmask, output_hidden_states=True, output_attentions=True)
        fast = lm.model(**batch, global_attention_mask=gmask)
    assert_close(ours.mlm_logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(fast.mlm_logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
    for a, b in zip(ours.encoder.hidden_states, ref.hidden_states, strict=True):
        assert_close(a[keep], b[keep], atol=1e-5, rtol=1e-5)
    real = keep[:, None, :, None] & keep[:, None, None, :]  # padded queries and keys are not compared
    for n, (a, b) in enumerate(zip(ours.encoder.attentions, ref.attentions, strict=True)):
        glob_probs = None if gmask is None else ref.global_attentions[n]
        theirs_dense = _dense_maps(b, glob_probs, gmask, batch["attention_mask"])
        assert_close(a * real, theirs_dense * real, atol=1e-6, rtol=1e-5)


def test_per_layer_windows_load_match_and_save_back(tmp_path, bpe):
    """transformers' list of windows: equal values are one window; unequal ones are kept per layer."""
    theirs = _longformer_folder(tmp_path / "theirs", bpe, attention_window=[4, 12])
    model, _, _ = load_pretraining_model(tmp_path / "theirs")
    assert model.config.layer_windows == (4, 12) and [model.config.window_of(n) for n in range(2)] == [4, 12]
    batch = _batch((5, 19, 37), seed=1)
    keep = batch["attention_mask"].bool()
    gmask = _globals("few", batch)
    with torch.no_grad():
        assert_close(
            model(**batch, global_attention_mask=gmask).mlm_logits[keep],
            theirs(**batch, global_attention_mask=gmask).logits[keep],
            atol=1e-5,
            rtol=1e-5,
        )
    save_checkpoint(tmp_path / "ours", model, bpe)
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["attention_window"] == [4, 12]
    again = transformers.LongformerForMaskedLM.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    with torch.no_grad():
        assert_close(model(**batch).mlm_logits[keep], again(**batch).logits[keep], atol=1e-5, rtol=1e-5)
    assert config_from_hf({**_hf_config().to_dict(), "attention_window": [6, 6]}, "x").attention_window == 6


def test_ours_saved_with_save_checkpoint_opens_in_transformers_with_equal_logits(tmp_path, bpe):
    config = config_from_hf(_hf_config(len(bpe)).to_dict(), "test")
    torch.manual_seed(1)
    ours = LongformerForMaskedLM(config).eval()
    with torch.no_grad():
        ours.lm_head.bias.normal_()  # zero at init: a wrong name would go unseen
    save_checkpoint(tmp_path / "ours", ours, bpe)
    raw = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert raw["model_type"] == "longformer" and raw["architectures"] == ["LongformerForMaskedLM"]
    assert (raw["attention_window"], raw["pad_token_id"], raw["max_position_embeddings"]) == (WINDOW, 1, 66)
    assert set(export_state_dict(ours)) == set(expected_shapes(config)) - {"lm_head.decoder.weight"}
    theirs = transformers.LongformerForMaskedLM.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    for lengths in LENGTHS:
        batch = _batch(lengths, seed=2)
        keep = batch["attention_mask"].bool()
        for glob in ("none", "few"):
            gmask = _globals(glob, batch)
            with torch.no_grad():
                a = ours(**batch, global_attention_mask=gmask).mlm_logits[keep]
                b = theirs(**batch, global_attention_mask=gmask).logits[keep]
            assert_close(a, b, atol=1e-5, rtol=1e-5)
    reopened = load_model(tmp_path / "ours").model.config
    assert (reopened.attention_window, reopened.global_tokens, reopened.layer_windows) == (WINDOW, "none", ())


@pytest.mark.parametrize("glob", ["none", "few"])
def test_training_gradients_match_transformers(bpe, glob):
    """Dropout off: the masked-LM loss and every parameter's gradient equal transformers' (the global
    projections' too, when there are global tokens)."""
    hf_config = _hf_config(len(bpe), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(2)
    ours = LongformerForMaskedLM(config_from_hf(hf_config.to_dict(), "test")).train()
    theirs = transformers.LongformerForMaskedLM(hf_config).train()
    theirs.load_state_dict(export_state_dict(ours), strict=False)
    theirs.tie_weights()
    batch = _batch((5, 19, 37), seed=3)
    gmask = _globals(glob, batch)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2], labels[1, 4], labels[2, 1], labels[2, 30], labels[1, 12] = 7, 9, 11, 13, 15
    if glob == "none":  # the pretraining objective (bertlab.losses), which scores the labelled positions only
        a = masked_lm(ours, {**batch, "mlm_labels": labels}).loss
    else:
        out = ours(**batch, global_attention_mask=gmask, mlm_positions=labels != -100)
        a = torch.nn.functional.cross_entropy(out.mlm_logits, labels[labels != -100])
    b = theirs(**batch, global_attention_mask=gmask, labels=labels)
    assert_close(a, b.loss, atol=1e-5, rtol=1e-5)
    a.backward()
    b.loss.backward()
    theirs_grads = {k: p.grad for k, p in theirs.named_parameters()}
    for k, p in ours.named_parameters():  # our names are transformers' names
        if p.grad is None:  # the global projections when no token is global: transformers never runs them
            assert glob == "none" and "_global" in k and theirs_grads[k] is None, k
            continue
        assert_close(p.grad, theirs_grads[k], atol=1e-5, rtol=1e-4, msg=k)
    assert len(list(ours.named_parameters())) == len(theirs_grads)


def test_fill_mask_reads_the_typed_mask_as_longformer_s_and_answers_as_transformers(pair):
    theirs, lm = pair
    text = "The cat sat on the mat. The dog ran to the park. Paris is the capital of [MASK]. It is big."
    answer = lm.fill_mask(text, top_k=3)
    assert "<mask>" in answer.tokens and len(answer.masks) == 1 and len(answer.tokens) > 3 * WINDOW
    position = answer.masks[0].position
    assert position == answer.tokens.index("<mask>")
    ids = torch.tensor([lm.tokenizer.encode(text).ids])
    with torch.no_grad():
        probs = theirs(ids).logits[0, position].softmax(-1)
    top = probs.topk(3)
    assert [c.token_id for c in answer.masks[0].candidates] == top.indices.tolist()
    assert_close(torch.tensor([c.score for c in answer.masks[0].candidates]), top.values, atol=1e-6, rtol=1e-5)


def test_a_fine_tuned_classifier_reads_with_cls_global_as_transformers_does(tmp_path, pair, bpe):
    """LongformerForSequenceClassification makes <s> global when given no global_attention_mask; ours too."""
    head = HeadConfig("single", 2)
    torch.manual_seed(5)
    model, tokenizer, _ = pretrained_task_model(Path(pair[1].info["path"]), head)
    assert model.config.global_tokens == "cls"
    save_finetuned(tmp_path, model.eval(), tokenizer, TaskSetup("custom", "single", ("0", "1"), head, 32))
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path, attn_implementation="eager")
    assert type(theirs).__name__ == "LongformerForSequenceClassification"
    batch = _batch((5, 19, 37), seed=5)
    with torch.no_grad():
        assert_close(model(**batch).logits, theirs.eval()(**batch).logits, atol=1e-5, rtol=1e-5)


def test_bad_windows_are_refused_with_a_checkpoint_error():
    raw = _hf_config().to_dict()
    for window, message in ((7, "even number"), ([8, 8, 8], "3 windows for 2 layers"), ("wide", "whole number")):
        with pytest.raises(CheckpointError, match=message):
            config_from_hf({**raw, "attention_window": window}, "x")
    with pytest.raises(CheckpointError, match="even number"):
        config_from_hf({**raw, "attention_window": [8, 5]}, "x")
