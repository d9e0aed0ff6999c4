"""bertlab.models.bigbird: BigBird opens from transformers and saves for it. original_full equals
transformers' (logits, hidden states, maps, gradients); block_sparse equals transformers' eval mode at
every length (short inputs read with full attention, as transformers switches to; long ones block-sparse,
block 0 counted 1 + num_random_blocks times), and differs from full attention there; in training mode each
head's random blocks are transformers', so gradients are equal there too; fill-mask works on a BigBird
folder; what it cannot open is refused with a CheckpointError.

Tiny random configs built by transformers; the WordPiece vocabulary is conftest's."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from bertlab.errors import CheckpointError
from bertlab.inference import load_model
from bertlab.models.bigbird import BigBirdForPreTraining, config_from_hf, expected_shapes
from bertlab.storage.checkpoint import export_state_dict, save_checkpoint

transformers = pytest.importorskip("transformers")

BLOCK, RANDOM = 4, 2  # block-sparse from (5 + 2 * 2) * 4 + 1 = 37 tokens
SHORT, LONG = (5, 19, 30), (61, 37, 50)  # read with full attention / block-sparse (no multiples of the block)


def _hf_config(vocab_size: int, attention_type: str = "block_sparse", **kw) -> transformers.BigBirdConfig:
    settings = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        attention_type=attention_type,
        block_size=BLOCK,
        num_random_blocks=RANDOM,
    )
    return transformers.BigBirdConfig(**(settings | kw))


def _theirs(vocab_size: int, attention_type: str = "block_sparse", seed: int = 0, **kw):
    """A fresh transformers model for each input: it switches itself to full attention for good after a short one."""
    torch.manual_seed(seed)
    return transformers.BigBirdForMaskedLM(_hf_config(vocab_size, attention_type, **kw)).eval()


def _ours_from(theirs) -> BigBirdForPreTraining:
    ours = BigBirdForPreTraining(config_from_hf(theirs.config.to_dict(), "test")).eval()
    ours.load_state_dict(export_state_dict(theirs), strict=False)
    ours.tie_weights()
    return ours


def _batch(lengths: tuple[int, ...], vocab_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tokens (ids 5 and up) right-padded with [PAD] (0) to the longest row."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(5, vocab_size, (n,), generator=g)
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


# --------------------------------------------------------------------------------------
# original_full: BERT-shaped, BigBird's embeddings, GELU and pooler
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "settings",
    [{}, {"hidden_act": "gelu", "rescale_embeddings": True, "use_bias": False}],
    ids=["defaults", "exact-gelu-rescaled-no-bias"],
)
def test_original_full_opens_with_load_model_and_equals_transformers(tmp_path, tokenizer, settings):
    theirs = _theirs(len(tokenizer), "original_full", **settings)
    theirs.save_pretrained(tmp_path)
    tokenizer.save(tmp_path)
    lm = load_model(tmp_path)
    assert isinstance(lm.model, BigBirdForPreTraining) and lm.info["family"] == "BigBird"
    assert lm.heads == ("mlm",) and lm.info["missing"] == [] and lm.model.config.attention_pattern == "full"
    for lengths in (SHORT, LONG):
        batch = _batch(lengths, len(tokenizer))
        keep = batch["attention_mask"].bool()
        with torch.no_grad():
            ref = theirs(**batch, output_hidden_states=True, output_attentions=True)
            ours = lm.model(**batch, output_hidden_states=True, output_attentions=True)
            fast = lm.model(**batch)
        assert_close(ours.mlm_logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
        assert_close(fast.mlm_logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
        for a, b in zip(ours.encoder.hidden_states, ref.hidden_states, strict=True):
            assert_close(a[keep], b[keep], atol=1e-5, rtol=1e-5)
        for a, b in zip(ours.encoder.attentions, ref.attentions, strict=True):
            assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert lm.fill_mask("the cat sat on the [MASK] .", top_k=3).masks[0].candidates


# --------------------------------------------------------------------------------------
# block_sparse: transformers' eval-mode layout
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("lengths", [SHORT, LONG, (100,), (64, 8)], ids=["short", "long", "long-one-row", "multiple"])
def test_block_sparse_equals_transformers_in_eval_mode(tokenizer, lengths):
    theirs = _theirs(len(tokenizer))
    ours = _ours_from(theirs)
    batch = _batch(lengths, len(tokenizer), seed=1)
    keep = batch["attention_mask"].bool()
    with torch.no_grad():
        ref = theirs(**batch).logits
        got = ours(**batch).mlm_logits
    assert_close(got[keep], ref[keep], atol=1e-5, rtol=1e-5)
    sparse = max(lengths) >= ours.config.sparse_from
    assert theirs.bert.attention_type == ("block_sparse" if sparse else "original_full")
    if sparse:  # and it is not full attention: the same weights read fully answer otherwise
        full = BigBirdForPreTraining(ours.config.replace(attention_pattern="full")).eval()
        full.load_state_dict(ours.state_dict())
        with torch.no_grad():
            assert (full(**batch).mlm_logits[keep] - ref[keep]).abs().max() > 1e-4


@pytest.mark.parametrize(
    "attention_type, mode, lengths, block",
    [
        ("original_full", "train", LONG, BLOCK),
        ("block_sparse", "eval", LONG, BLOCK),
        ("block_sparse", "train", LONG, BLOCK),  # each head's random blocks, drawn as transformers draws them
        ("block_sparse", "train", (1024, 1000), 32),  # padded to 1,024: the paper's random-block procedure
    ],
)
def test_gradients_match_transformers(tokenizer, attention_type, mode, lengths, block):
    """Dropout off: the masked-LM loss and every parameter's gradient equal transformers'."""
    off = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=1024)
    theirs = _theirs(len(tokenizer), attention_type, seed=2, block_size=block, **off)
    ours = _ours_from(theirs)
    theirs.train(mode == "train"), ours.train(mode == "train")
    batch = _batch(lengths, len(tokenizer), seed=2)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2], labels[1, 4], labels[-1, 1], labels[0, 60], labels[-1, 36] = 7, 9, 11, 13, 15
    out = ours(**batch, mlm_positions=labels != -100)
    a = torch.nn.functional.cross_entropy(out.mlm_logits, labels[labels != -100])
    b = theirs(**batch, labels=labels)
    assert_close(a, b.loss, atol=1e-5, rtol=1e-5)
    a.backward()
    b.loss.backward()
    theirs_grads = {k: p.grad for k, p in theirs.named_parameters()}
    for k, p in ours.named_parameters():  # our names are transformers' names
        if p.grad is None:  # the pooler: the masked LM never reads it
            assert k.startswith("bert.pooler.") and theirs_grads[k] is None, k
            continue
        assert_close(p.grad, theirs_grads[k], atol=1e-5, rtol=1e-4, msg=k)
    assert len(list(ours.named_parameters())) == len(theirs_grads)


def test_ours_saved_with_save_checkpoint_opens_in_transformers_with_equal_logits(tmp_path, tokenizer):
    config = config_from_hf(_hf_config(len(tokenizer)).to_dict(), "test")
    torch.manual_seed(3)
    ours = BigBirdForPreTraining(config).eval()
    with torch.no_grad():
        ours.cls.predictions.bias.normal_()  # zero at init: a wrong name would go unseen
    save_checkpoint(tmp_path, ours, tokenizer)
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["model_type"] == "big_bird" and raw["architectures"] == ["BigBirdForMaskedLM"]
    assert (raw["attention_type"], raw["block_size"], raw["num_random_blocks"]) == ("block_sparse", BLOCK, RANDOM)
    assert set(export_state_dict(ours)) == set(expected_shapes(config)) - {"cls.predictions.decoder.weight"}
    for lengths in (LONG, SHORT):  # long first: transformers' model stays full after a short input
        theirs = transformers.BigBirdForMaskedLM.from_pretrained(tmp_path).eval()
        batch = _batch(lengths, len(tokenizer), seed=3)
        keep = batch["attention_mask"].bool()
        with torch.no_grad():
            assert_close(ours(**batch).mlm_logits[keep], theirs(**batch).logits[keep], atol=1e-5, rtol=1e-5)
    reopened = load_model(tmp_path)
    assert reopened.model.config == config
    long_text = " ".join(["the cat sat on the mat ."] * 8) + " the dog ran to the [MASK] ."
    answer = reopened.fill_mask(long_text, top_k=2)  # past sparse_from: the block-sparse path
    ids = torch.tensor([reopened.tokenizer.encode(long_text).ids])
    assert ids.shape[1] >= config.sparse_from
    theirs = transformers.BigBirdForMaskedLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        top = theirs(ids).logits[0, answer.masks[0].position].softmax(-1).topk(2)
    assert theirs.bert.attention_type == "block_sparse"
    assert [c.token_id for c in answer.masks[0].candidates] == top.indices.tolist()
    assert_close(torch.tensor([c.score for c in answer.masks[0].candidates]), top.values, atol=1e-6, rtol=1e-5)


def test_what_bigbird_cannot_open_is_refused(tmp_path, tokenizer):
    raw = _hf_config(len(tokenizer)).to_dict()
    for change, message in (
        ({"attention_type": "dense"}, "attention_type 'dense'"),
        ({"hidden_act": "relu"}, "hidden_act 'relu'"),
        ({"is_decoder": True}, "decoder"),
    ):
        with pytest.raises(CheckpointError, match=message):
            config_from_hf({**raw, **change}, "x")
    theirs = _theirs(len(tokenizer))
    theirs.save_pretrained(tmp_path)
    (tmp_path / "spiece.model").write_bytes(b"")  # Google's releases hold a SentencePiece model, no vocab.txt
    with pytest.raises(CheckpointError, match="SentencePiece"):
        load_model(tmp_path)
    ours = _ours_from(theirs)
    ids = torch.ones(1, 40, dtype=torch.long)
    with pytest.raises(ValueError, match="first and last blocks"):
        ours(ids, global_attention_mask=torch.ones_like(ids))
