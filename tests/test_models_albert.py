"""bertlab.models.albert: ALBERT opens from transformers and saves for it with equal masked-LM and
sentence-order logits and gradients (as tests/test_model.py does for BERT), its sharing modes share
what they say, and a tiny ALBERT pretrains with sentence-order prediction (data.objective=mlm_sop)
through the recipe and opens here and in transformers."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch
from conftest import tiny_config
from test_model import _inputs
from test_pretrain import _config as pretrain_config
from torch.testing import assert_close

from bertlab.data.objectives import get_objective
from bertlab.errors import CheckpointError, InputError
from bertlab.inference import load_model
from bertlab.losses import masked_lm_sop
from bertlab.models import albert
from bertlab.models.albert import AlbertConfig, AlbertForPreTraining
from bertlab.storage.checkpoint import export_state_dict, load_pretraining_model, save_checkpoint
from bertlab.storage.runfolder import read_metrics
from bertlab.training.pretrain import run_pretraining
from bertlab.training.pretrain_config import PretrainConfig

transformers = pytest.importorskip("transformers")

V = 100


def _config(sharing: str = "all", vocab_size: int = V, **kw) -> AlbertConfig:
    fields = dataclasses.asdict(tiny_config(vocab_size, **kw)) | {"use_nsp_head": False}
    return AlbertConfig(**fields, embedding_size=16, parameter_sharing=sharing)


def _hf_config(config: AlbertConfig):
    keys = config.to_hf_dict()
    return transformers.AlbertConfig(**{k: v for k, v in keys.items() if k not in ("architectures", "bertlab")})


def _assert_parity(ours, theirs) -> tuple[float, float]:
    """Masked-LM and SOP logits, every hidden state and attention map equal; returns the max abs
    differences of the MLM and SOP logits."""
    ids, types, mask = _inputs(V)
    with torch.no_grad():
        a = ours(ids, types, mask, output_attentions=True, output_hidden_states=True)
        a_fast = ours(ids, types, mask)  # the SDPA path
        b = theirs(
            input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True, output_hidden_states=True
        )
    keep = mask.bool()
    assert a.nsp_logits is None  # ALBERT's sentence-pair head is sentence order
    assert_close(a.mlm_logits[keep], b.prediction_logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(a_fast.mlm_logits[keep], b.prediction_logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(a.sop_logits, b.sop_logits, atol=1e-5, rtol=1e-5)
    assert_close(a_fast.sop_logits, b.sop_logits, atol=1e-5, rtol=1e-5)
    assert len(a.encoder.hidden_states) == len(b.hidden_states) == ours.config.num_layers + 1
    for h1, h2 in zip(a.encoder.hidden_states, b.hidden_states, strict=True):  # after the E -> H projection
        assert_close(h1[keep], h2[keep], atol=1e-5, rtol=1e-5)
    for a1, a2 in zip(a.encoder.attentions, b.attentions, strict=True):
        assert_close(a1, a2, atol=1e-5, rtol=1e-5)
    mlm = (a.mlm_logits[keep] - b.prediction_logits[keep]).abs().max().item()
    return mlm, (a.sop_logits - b.sop_logits).abs().max().item()


@pytest.mark.parametrize("sharing", albert.SHARING)
def test_expected_shapes_are_a_real_models(sharing):
    for config in (_config(sharing), _config(sharing, num_layers=3).replace(use_sop_head=False)):
        real = {k: tuple(v.shape) for k, v in albert.build(config).state_dict().items()}
        assert albert.expected_shapes(config) == real


def test_the_sharing_modes_share_what_they_say():
    """all: one layer run L times; attention / ffn: that block is one module in every layer, saved
    once; none: L layers of their own. Parameters fall as more is shared."""
    models = {s: AlbertForPreTraining(_config(s, num_layers=3)) for s in albert.SHARING}
    layers = {s: m.albert.encoder.layer for s, m in models.items()}
    assert all(len(ls) == 3 for ls in layers.values())
    assert layers["all"][0] is layers["all"][2]
    assert layers["attention"][0].attention is layers["attention"][2].attention
    assert layers["attention"][0].ffn is not layers["attention"][2].ffn
    assert layers["ffn"][0].ffn_output is layers["ffn"][2].ffn_output
    assert layers["ffn"][0].attention is not layers["ffn"][2].attention
    assert layers["none"][0].attention is not layers["none"][1].attention
    n = {s: m.num_parameters() for s, m in models.items()}
    assert n["all"] < n["attention"] < n["none"] and n["all"] < n["ffn"] < n["none"]
    for s, m in models.items():  # what is saved is what is trained: each shared tensor once
        assert sum(v.numel() for v in export_state_dict(m).values()) == n[s], s
    # the factorised embeddings: V x E + E x H instead of V x H
    assert models["all"].albert.embeddings.word_embeddings.weight.shape == (V, 16)
    assert models["all"].predictions.decoder.weight is models["all"].albert.embeddings.word_embeddings.weight


def test_head_mask_and_attentions_on_both_paths():
    torch.manual_seed(0)
    model = AlbertForPreTraining(_config()).eval()
    ids, types, mask = _inputs(V)
    hm = torch.ones(2, 4)
    hm[0, 1] = 0
    with torch.no_grad():
        base = model(ids, types, mask).mlm_logits
        fast = model(ids, types, mask, head_mask=hm)
        slow = model(ids, types, mask, head_mask=hm, output_attentions=True)
        select = torch.zeros_like(ids, dtype=torch.bool)
        select[0, 2], select[2, 5] = True, True
        scored = model(ids, types, mask, mlm_positions=select, prediction_cap=2)  # the last-layer shortcut
    assert_close(fast.mlm_logits, slow.mlm_logits, atol=1e-5, rtol=1e-5)
    assert_close(fast.sop_logits, slow.sop_logits, atol=1e-5, rtol=1e-5)
    assert slow.encoder.attentions[0][:, 1].abs().max() == 0 and slow.encoder.attentions[0].shape == (3, 4, 11, 11)
    assert (fast.mlm_logits - base).abs().max() > 1e-4
    _, used = scored.mlm_slots
    assert_close(scored.mlm_logits[used], torch.stack([base[0, 2], base[2, 5]]), atol=1e-5, rtol=1e-5)


def test_a_transformers_albert_opens_with_load_model_and_equal_logits(tmp_path, vocab_file, tokenizer):
    """AlbertForPreTraining saved by transformers, in both of its layouts: one shared layer group
    (ALBERT) and a group per layer (no sharing)."""
    for sharing in albert.HF_SHARING:
        folder = tmp_path / sharing
        config = _config(sharing, vocab_size=len(tokenizer))
        torch.manual_seed(3)
        theirs = transformers.AlbertForPreTraining(_hf_config(config)).eval()
        theirs.save_pretrained(folder)
        shutil.copy(vocab_file, folder / "vocab.txt")
        theirs.set_attn_implementation("eager")
        lm = load_model(folder, device="cpu")
        assert lm.info["family"] == "ALBERT" and lm.info["missing"] == [] and lm.heads == ("mlm", "sop")
        assert lm.model.config.parameter_sharing == sharing and lm.model.config.embedding_size == 16
        mlm_diff, sop_diff = _assert_parity(lm.model, theirs)
        assert mlm_diff < 1e-5 and sop_diff < 1e-5
        enc = tokenizer.encode("the cat sat on the [MASK] .")
        with torch.no_grad():
            logits = theirs(input_ids=torch.tensor([enc.ids])).prediction_logits
        probs = logits[0, enc.ids.index(tokenizer.mask_id)].softmax(-1)
        answer = lm.fill_mask("the cat sat on the [MASK] .", top_k=1)  # fill-mask answers as transformers
        assert answer.masks[0].candidates[0].token_id == int(probs.argmax())
        assert answer.masks[0].candidates[0].score == pytest.approx(float(probs.max()), abs=1e-5)
        layers = lm.layer_predictions("the cat sat on the [MASK] .", top_k=1)
        assert len(layers) == 3 and layers[-1].candidates[0].token_id == int(probs.argmax())


@pytest.mark.parametrize("sharing", albert.HF_SHARING)
def test_ours_opens_in_transformers_with_equal_logits(sharing, tmp_path, tokenizer):
    config = _config(sharing, vocab_size=len(tokenizer))
    torch.manual_seed(4)
    ours = albert.build(config).eval()
    save_checkpoint(tmp_path, ours, tokenizer)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["AlbertForPreTraining"]
    theirs, loading = transformers.AlbertForPreTraining.from_pretrained(
        tmp_path, output_loading_info=True, attn_implementation="eager"
    )
    assert not loading["missing_keys"] and not loading["unexpected_keys"] and not loading["mismatched_keys"]
    assert theirs.config.num_hidden_groups == config.num_layer_groups
    mlm_diff, sop_diff = _assert_parity(ours, theirs.eval())
    assert mlm_diff < 1e-5 and sop_diff < 1e-5


def test_training_gradients_match_transformers():
    """In training mode (dropout off) the loss (masked LM + sentence order) and every parameter's
    gradient equal transformers'."""
    config = _config(hidden_dropout=0.0, attention_dropout=0.0).replace(classifier_dropout=0.0)
    torch.manual_seed(5)
    ours = albert.build(config).train()
    theirs = transformers.AlbertForPreTraining(_hf_config(config)).train()
    theirs.load_state_dict(export_state_dict(ours), strict=False)
    theirs.tie_weights()
    ids, types, mask = _inputs(V)
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 4], labels[2, 5], labels[1, 9] = 7, 9, 11, 13
    order = torch.tensor([0, 1, 0])
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "mlm_labels": labels}
    a = masked_lm_sop(ours, batch | {"sop_labels": order})  # ALBERT's objective: its loss, outside the model
    b = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, sentence_order_label=order)
    assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    a.loss.backward()
    b.loss.backward()
    theirs_grads = {k: p.grad for k, p in theirs.named_parameters()}
    for k, p in ours.named_parameters():  # our names are transformers' names
        assert_close(p.grad, theirs_grads[k], atol=1e-5, rtol=1e-4, msg=k)
    assert len(dict(ours.named_parameters())) == len(theirs_grads)


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_attention_or_ffn_sharing_saves_and_loads_in_our_layout(sharing, tmp_path, tokenizer):
    config = _config(sharing, vocab_size=len(tokenizer), num_layers=3)
    torch.manual_seed(6)
    ours = albert.build(config).eval()
    save_checkpoint(tmp_path, ours, tokenizer)
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["architectures"] == ["BertLabAlbertForPreTraining"] and raw["parameter_sharing"] == sharing
    assert raw["num_hidden_groups"] == 3
    lm = load_model(tmp_path, device="cpu")
    assert lm.info["missing"] == [] and lm.model.config.parameter_sharing == sharing
    assert lm.model.num_parameters() == ours.num_parameters()  # still shared after loading
    ids, types, mask = _inputs(V)
    with torch.no_grad():
        a, b = ours(ids, types, mask), lm.model(ids, types, mask)
    assert torch.equal(a.mlm_logits, b.mlm_logits) and torch.equal(a.sop_logits, b.sop_logits)


def test_config_errors_say_how_to_fix_them(tmp_path):
    raw = _config().to_hf_dict()
    with pytest.raises(CheckpointError, match="no next-sentence head.*mlm_sop"):
        albert.config_from_hf({**raw, "bertlab": {"use_nsp_head": True}}, "x")
    with pytest.raises(CheckpointError, match="num_hidden_groups 3 is not supported"):
        albert.config_from_hf({**raw, "num_hidden_layers": 6, "num_hidden_groups": 3, "parameter_sharing": None}, "x")
    with pytest.raises(CheckpointError, match="inner_group_num 2"):
        albert.config_from_hf({**raw, "inner_group_num": 2}, "x")
    (tmp_path / "spiece.model").write_bytes(b"")
    with pytest.raises(CheckpointError, match="SentencePiece"):
        albert.load_tokenizer(tmp_path, _config())


def test_sentence_order_and_the_family_s_heads_go_together():
    sop = get_objective("mlm_sop")
    assert sop.paired and not sop.nsp and sop.segment_b == "swap" and sop.pair_head == "sop"
    assert get_objective("mlm_nsp").pair_head == "nsp" and get_objective("mlm").pair_head is None
    with pytest.raises(InputError, match="next sentence prediction head, and ALBERT has none.*e.g. mlm"):
        PretrainConfig.from_dict({"model_type": "albert"})  # the default objective is mlm_nsp
    with pytest.raises(InputError, match="sentence order prediction head, and BERT has none"):
        PretrainConfig.from_dict({"data": {"objective": "mlm_sop"}})
    cfg = PretrainConfig.from_dict(
        {
            "model_type": "albert",
            "data": {"objective": "mlm_sop"},
            "model_overrides": {"embedding_size": 16, "parameter_sharing": "ffn"},
        }
    )
    assert cfg.family_overrides == {"embedding_size": 16, "parameter_sharing": "ffn"}


def _albert_run(tmp_path, vocab_file, objective="mlm_sop", **train):
    cfg = pretrain_config(tmp_path, vocab_file, **train)
    return dataclasses.replace(
        cfg,
        model_type="albert",
        model_overrides={**cfg.model_overrides, "embedding_size": 16},
        data=dataclasses.replace(cfg.data, objective=objective),
    )


def test_a_tiny_albert_pretrains_with_sentence_order_and_loads_back(tmp_path, vocab_file):
    result = run_pretraining(
        _albert_run(tmp_path, vocab_file, max_steps=2, eval_every=2), tmp_path / "run", progress_bar=False
    )
    assert result.state == "finished" and result.progress.step == 2
    assert {"mlm_acc", "mlm_loss", "sop_acc"} <= set(result.last_eval) and "nsp_acc" not in result.last_eval
    assert any("sop_acc" in m for m in read_metrics(tmp_path / "run") if m["split"] == "train")
    folder = tmp_path / "run" / "model"
    raw = json.loads((folder / "config.json").read_text())
    assert raw["model_type"] == "albert" and raw["architectures"] == ["AlbertForPreTraining"]
    assert raw["embedding_size"] == 16 and raw["bertlab"]["objective"] == "mlm_sop"
    model, _, info = load_pretraining_model(folder)
    assert isinstance(model, AlbertForPreTraining) and info["heads"] == ("mlm", "sop") and info["missing"] == []
    lm = load_model(folder, device="cpu")
    assert lm.heads == ("mlm", "sop") and lm.card["objective"] == "mlm_sop"
    assert lm.fill_mask("the [MASK] sat on the mat .").masks[0].candidates
    theirs = transformers.AlbertForPreTraining.from_pretrained(folder, attn_implementation="eager").eval()
    assert _assert_parity(lm.model, theirs)[1] < 1e-5  # the trained SOP head, as transformers reads it


def test_albert_without_sentence_order_saves_no_sop_head(tmp_path, vocab_file):
    run_pretraining(
        _albert_run(tmp_path, vocab_file, objective="mlm", max_steps=1), tmp_path / "run", progress_bar=False
    )
    lm = load_model(tmp_path / "run" / "model", device="cpu")
    assert lm.heads == ("mlm",) and lm.model.sop_classifier is None
