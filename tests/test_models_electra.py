"""bertlab.models.electra: ELECTRA's discriminator and generator open from transformers and save for it
with equal logits and gradients (as tests/test_model.py does for BERT), the replaced-token detection
loss equals a hand computation, and a tiny ELECTRA pretrains through the recipe, resumes exactly, and
saves a pair folder whose halves load back here and in transformers."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import pytest
import torch
from conftest import tiny_config
from test_pretrain import _config
from torch.testing import assert_close

from bertlab.errors import InputError
from bertlab.inference import load_model
from bertlab.losses import (
    IGNORE,
    RTD_WEIGHT,
    masked_lm_score,
    replaced_token_detection,
    replaced_token_score,
    summarize,
)
from bertlab.models import electra
from bertlab.models.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining, ElectraPair
from bertlab.storage.checkpoint import load_config, load_pretraining_model, load_state, read_weights, save_checkpoint
from bertlab.storage.modelfolder import is_model_folder
from bertlab.storage.runfolder import read_metrics
from bertlab.training.export import export_run
from bertlab.training.pretrain import initialize_from, run_pretraining
from bertlab.training.pretrain_config import PretrainConfig

transformers = pytest.importorskip("transformers")

V = 100


def _config_of(role: str, embedding_size: int = 16, **kw) -> ElectraConfig:
    fields = dataclasses.asdict(tiny_config(kw.pop("vocab_size", V), **kw))
    return ElectraConfig(**fields, embedding_size=embedding_size, generator_size=0.5, role=role)


def _hf_config(config: ElectraConfig):
    keys = config.to_hf_dict()
    return transformers.ElectraConfig(**{k: v for k, v in keys.items() if k not in ("architectures", "bertlab")})


def _inputs(B=3, T=11, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, T // 2 :] = 1
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -3:] = 0  # padding in the last row
    return ids, types, mask


def _logits(out) -> torch.Tensor:
    """Ours: the generator's (B, T, V) or the discriminator's (B, T); transformers' .logits alike."""
    return out.mlm_logits if out.mlm_logits is not None else out.rtd_logits


def _assert_parity(ours, theirs, vocab_file=None):
    ids, types, mask = _inputs()
    with torch.no_grad():
        a = ours(ids, types, mask, output_attentions=True, output_hidden_states=True)
        a_fast = ours(ids, types, mask)  # the SDPA path
        b = theirs(
            input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True, output_hidden_states=True
        )
    keep = mask.bool()
    assert_close(_logits(a)[keep], b.logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(_logits(a_fast)[keep], b.logits[keep], atol=1e-5, rtol=1e-5)
    for h1, h2 in zip(a.encoder.hidden_states, b.hidden_states, strict=True):  # after the projection
        assert_close(h1[keep], h2[keep], atol=1e-5, rtol=1e-5)
    for a1, a2 in zip(a.encoder.attentions, b.attentions, strict=True):
        assert_close(a1, a2, atol=1e-5, rtol=1e-5)
    return (_logits(a)[keep] - b.logits[keep]).abs().max().item()


HALVES = [
    ("discriminator", transformers.ElectraForPreTraining, 16),  # E != H: the embeddings' projection
    ("generator", transformers.ElectraForMaskedLM, 32),
    ("generator", transformers.ElectraForMaskedLM, 16),
]


@pytest.mark.parametrize(("role", "hf_class", "embedding_size"), HALVES)
def test_expected_shapes_are_a_real_models(role, hf_class, embedding_size):
    for config in (_config_of(role, embedding_size), _config_of("pair", embedding_size)):
        real = {k: tuple(v.shape) for k, v in electra.build(config).state_dict().items()}
        assert electra.expected_shapes(config) == real


@pytest.mark.parametrize(("role", "hf_class", "embedding_size"), HALVES)
def test_a_transformers_half_opens_with_load_model_and_equal_logits(
    role, hf_class, embedding_size, tmp_path, vocab_file, tokenizer
):
    config = _config_of(role, embedding_size, vocab_size=len(tokenizer))
    torch.manual_seed(3)
    theirs = hf_class(_hf_config(config)).eval()
    theirs.save_pretrained(tmp_path)
    shutil.copy(vocab_file, tmp_path / "vocab.txt")
    theirs.set_attn_implementation("eager")
    lm = load_model(tmp_path, device="cpu")
    assert lm.info["family"] == "ELECTRA" and lm.info["missing"] == []
    assert lm.heads == (("mlm",) if role == "generator" else ("rtd",))
    assert lm.model.config.role == role and lm.model.config.embedding_size == embedding_size
    diff = _assert_parity(lm.model, theirs)
    assert diff < 1e-5
    if role == "generator":  # fill-mask answers with transformers' top token
        enc = tokenizer.encode("the cat sat on the [MASK] .")
        with torch.no_grad():
            probs = theirs(input_ids=torch.tensor([enc.ids])).logits[0, enc.ids.index(tokenizer.mask_id)].softmax(-1)
        answer = lm.fill_mask("the cat sat on the [MASK] .", top_k=1)
        assert answer.masks[0].candidates[0].token_id == int(probs.argmax())
        assert answer.masks[0].candidates[0].score == pytest.approx(float(probs.max()), abs=1e-5)
    else:
        with pytest.raises(InputError, match="masked-LM head"):
            lm.fill_mask("the [MASK] sat .")
        assert lm.inspect("the cat sat .").attentions.shape[0] == 2  # the encoder's pages still answer


@pytest.mark.parametrize(("role", "hf_class", "embedding_size"), HALVES[:2])
def test_ours_opens_in_transformers_with_equal_logits(role, hf_class, embedding_size, tmp_path, tokenizer):
    config = _config_of(role, embedding_size, vocab_size=len(tokenizer))
    torch.manual_seed(4)
    ours = electra.build(config).eval()
    save_checkpoint(tmp_path, ours, tokenizer)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [hf_class.__name__]
    theirs, loading = hf_class.from_pretrained(tmp_path, output_loading_info=True, attn_implementation="eager")
    assert not [k for k in loading["missing_keys"] if k != "generator_lm_head.weight"]  # tied: the embeddings
    assert not loading["unexpected_keys"] and not loading["mismatched_keys"]
    assert _assert_parity(ours, theirs.eval()) < 1e-5


def test_training_gradients_match_transformers():
    """In training mode (dropout off) each half's loss and every parameter's gradient equal transformers':
    the discriminator's replaced-token loss and the generator's masked-LM loss."""
    ids, types, mask = _inputs()
    replaced = torch.zeros_like(ids)
    replaced[0, 2], replaced[1, 4], replaced[2, 5], replaced[1, 9] = 1, 1, 1, 1
    labels = torch.full_like(ids, IGNORE)
    labels[0, 2], labels[1, 4], labels[2, 5], labels[1, 9] = 7, 9, 11, 13
    for role, hf_class in (
        ("discriminator", transformers.ElectraForPreTraining),
        ("generator", transformers.ElectraForMaskedLM),
    ):
        config = _config_of(role, 16, hidden_dropout=0.0, attention_dropout=0.0)
        torch.manual_seed(5)
        ours = electra.build(config).train()
        theirs = hf_class(_hf_config(config)).train()
        theirs.load_state_dict(ours.state_dict())
        if role == "discriminator":
            a = replaced_token_score(ours(ids, types, mask).rtd_logits, replaced.bool(), mask)[0]
            b = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=replaced).loss
        else:
            a = masked_lm_score(ours(ids, types, mask, mlm_positions=labels != IGNORE), labels)[0]
            b = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).loss
        assert_close(a, b, atol=1e-5, rtol=1e-5)
        a.backward()
        b.backward()
        theirs_grads = {k: p.grad for k, p in theirs.named_parameters()}
        for k, p in ours.named_parameters():  # our names are transformers' names
            assert_close(p.grad, theirs_grads[k], atol=1e-5, rtol=1e-4, msg=f"{role}: {k}")
        assert len(dict(ours.named_parameters())) == len(theirs_grads)


def test_the_pair_shares_embeddings_and_sizes_its_generator():
    pair = ElectraPair(_config_of("pair", 16))
    assert pair.generator.electra.embeddings is pair.discriminator.electra.embeddings
    assert pair.generator.generator_lm_head.weight is pair.discriminator.electra.embeddings.word_embeddings.weight
    g = pair.generator.config
    assert (g.hidden_size, g.num_heads, g.intermediate_size, g.embedding_size) == (16, 2, 32, 16)
    assert pair.bert is pair.discriminator.electra  # the encoder that fine-tunes
    # a released generator can be as wide as its discriminator: its size is read from its own config
    wide = electra.config_from_hf({**_config_of("generator", 16).to_hf_dict(), "hidden_size": 32}, "x")
    assert wide.role == "generator" and wide.hidden_size == 32


def test_the_rtd_loss_equals_a_hand_computation():
    """A generator made sure of one token (its output bias) samples it at every masked position; where
    the original is that token the sample counts as not replaced. Loss = MLM + 50 x BCE."""
    torch.manual_seed(6)
    pair = ElectraPair(_config_of("pair", 16, hidden_dropout=0.0, attention_dropout=0.0)).eval()
    sure = 42
    with torch.no_grad():
        pair.generator.generator_lm_head.bias[sure] = 1e4
    ids, types, mask = _inputs()
    labels = torch.full_like(ids, IGNORE)
    labels[0, 2], labels[1, 4], labels[2, 5] = sure, 9, 11  # row 0's original is what will be sampled
    ids[labels != IGNORE] = 4  # [MASK]
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "mlm_labels": labels}
    for cap in (None, 3):  # positions as (N, V), or in fixed slots as a compiled step has them
        got = replaced_token_detection(pair, batch, cap)

        corrupted = ids.clone()
        corrupted[labels != IGNORE] = sure
        original = torch.where(labels != IGNORE, labels, ids)
        replaced = (corrupted != original).float()
        assert replaced.sum() == 2  # the sample equal to its original is not replaced
        with torch.no_grad():
            gen_logits = pair.generator(ids, types, mask).mlm_logits[labels != IGNORE]  # (3, V)
            mlm = torch.nn.functional.cross_entropy(gen_logits, labels[labels != IGNORE])
            rtd_logits = pair.discriminator(corrupted, types, mask).rtd_logits
        per_token = -(replaced * torch.log(rtd_logits.sigmoid()) + (1 - replaced) * torch.log(1 - rtd_logits.sigmoid()))
        real = mask.bool()
        bce = per_token[real].mean()
        assert torch.equal(got.output.corrupted_ids, corrupted)
        assert_close(got.loss, mlm + 50 * bce, atol=1e-4, rtol=1e-5)
        assert RTD_WEIGHT == 50
        assert got.sums["rtd_count"] == real.sum() and got.sums["mlm_count"] == 3
        assert got.sums["rtd_loss_sum"] == pytest.approx(float(bce) * float(real.sum()), rel=1e-4)
        assert got.sums["rtd_correct"] == float((((rtd_logits > 0).float() == replaced) & real).sum())


def test_the_rtd_sums_give_the_rate_of_answering_original_everywhere():
    """rtd_trivial_acc is the accuracy of a discriminator that says "original" at every real token: a
    run's rtd_acc means detection only above it. A discriminator made to answer "original" everywhere
    (its output bias) scores exactly it."""
    torch.manual_seed(6)
    pair = ElectraPair(_config_of("pair", 16, hidden_dropout=0.0, attention_dropout=0.0)).eval()
    sure = 42
    with torch.no_grad():
        pair.generator.generator_lm_head.bias[sure] = 1e4
        pair.discriminator.discriminator_predictions.dense_prediction.bias.fill_(-1e4)  # "original" everywhere
    ids, types, mask = _inputs()
    labels = torch.full_like(ids, IGNORE)
    labels[0, 2], labels[1, 4], labels[2, 5], labels[2, 7] = sure, 9, 11, 12  # row 0's sample equals its original
    ids[labels != IGNORE] = 4  # [MASK]
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "mlm_labels": labels}
    real = int(mask.sum())
    for cap in (None, 3):
        sums = replaced_token_detection(pair, batch, cap).sums
        assert sums["rtd_trivial_count"] == sums["rtd_count"] == real
        assert sums["rtd_trivial_correct"] == real - 3  # three tokens replaced, padding not counted
        rates = summarize(sums)
        assert rates["rtd_trivial_acc"] == pytest.approx((real - 3) / real)
        assert rates["rtd_acc"] == rates["rtd_trivial_acc"]


def test_a_pair_saves_as_two_transformers_folders_and_opens_as_its_generator(tmp_path, tokenizer):
    torch.manual_seed(7)
    pair = ElectraPair(_config_of("pair", 16, vocab_size=len(tokenizer)))
    folder = save_checkpoint(tmp_path / "model", pair, tokenizer, extra_files={"model_card.json": {"name": "p"}})
    raw = json.loads((folder / "config.json").read_text())
    assert raw["architectures"] == ["ElectraPair"] and raw["bertlab"]["halves"] == ["generator", "discriminator"]
    assert is_model_folder(folder) and not (folder / "model.safetensors").exists()
    for name, cls in (("generator", ElectraForMaskedLM), ("discriminator", ElectraForPreTraining)):
        model, _, info = load_pretraining_model(folder / name)
        assert isinstance(model, cls) and info["missing"] == []
    assert load_config(folder)[0].role == "pair"

    lm = load_model(folder, device="cpu")
    assert isinstance(lm.model, ElectraForMaskedLM) and lm.has_mlm and lm.card == {"name": "p"}
    assert lm.halves == {"generator": str(folder / "generator"), "discriminator": str(folder / "discriminator")}
    assert load_model(lm.halves["discriminator"], device="cpu").heads == ("rtd",)

    again = ElectraPair(_config_of("pair", 16, vocab_size=len(tokenizer)))
    assert load_state(again, read_weights(folder), str(folder), required_prefixes=()) == []  # as resume reads it
    whole, _, info = load_pretraining_model(folder, whole=True)  # as export and a continued run read it
    assert isinstance(whole, ElectraPair) and info["missing"] == [] and info["heads"] == ("rtd",)
    continued = ElectraPair(_config_of("pair", 16, vocab_size=len(tokenizer)))
    initialize_from(continued, str(folder))
    for k, v in pair.state_dict().items():
        assert torch.equal(again.state_dict()[k], v), k
        assert torch.equal(whole.state_dict()[k], v) and torch.equal(continued.state_dict()[k], v), k


def test_the_objective_and_the_family_go_together():
    with pytest.raises(InputError, match="set model_type=electra"):
        PretrainConfig.from_dict({"data": {"objective": "electra"}})
    with pytest.raises(InputError, match="set data.objective=electra"):
        PretrainConfig.from_dict({"model_type": "electra", "data": {"objective": "mlm"}})
    cfg = PretrainConfig.from_dict(
        {"model_type": "electra", "data": {"objective": "electra"}, "model_overrides": {"generator_size": 0.5}}
    )
    assert cfg.family_overrides == {"generator_size": 0.5}


def _electra_run(tmp_path, vocab_file, **train):
    cfg = _config(tmp_path, vocab_file, **train)
    return dataclasses.replace(
        cfg,
        model_type="electra",
        model_overrides={**cfg.model_overrides, "embedding_size": 16, "generator_size": 0.5},
        data=dataclasses.replace(cfg.data, objective="electra"),
    )


def test_a_tiny_electra_pretrains_and_both_halves_load_back(tmp_path, vocab_file):
    result = run_pretraining(
        _electra_run(tmp_path, vocab_file, max_steps=2, eval_every=2), tmp_path / "run", progress_bar=False
    )
    assert result.state == "finished" and result.progress.step == 2
    assert {"mlm_acc", "mlm_loss", "rtd_acc", "rtd_loss", "rtd_trivial_acc"} <= set(result.last_eval)
    assert math.isfinite(result.last_eval["rtd_loss"])
    assert any("rtd_loss" in m for m in read_metrics(tmp_path / "run") if m["split"] == "train")

    folder = tmp_path / "run" / "model"
    raw = json.loads((folder / "config.json").read_text())
    assert raw["model_type"] == "electra" and raw["bertlab"]["objective"] == "electra"
    generator = json.loads((folder / "generator" / "config.json").read_text())
    assert (generator["hidden_size"], generator["embedding_size"]) == (16, 16)  # half the width, shared E
    lm = load_model(folder, device="cpu")
    assert lm.fill_mask("the [MASK] sat on the mat .").masks[0].candidates
    assert lm.card["objective"] == "electra"
    exported = export_run(tmp_path / "run", tmp_path / "shipped")  # both halves, in float16
    assert is_model_folder(exported / "generator") and is_model_folder(exported / "discriminator")
    assert load_model(exported, device="cpu").halves.keys() == {"generator", "discriminator"}

    disc = load_model(lm.halves["discriminator"], device="cpu")
    theirs = transformers.ElectraForPreTraining.from_pretrained(lm.halves["discriminator"], attn_implementation="eager")
    enc = disc.tokenizer.encode("the cat sat on the mat .", "it was big .")
    ids, types = torch.tensor([enc.ids]), torch.tensor([enc.type_ids])
    with torch.no_grad():
        assert_close(
            disc.model(ids, types).rtd_logits,
            theirs.eval()(input_ids=ids, token_type_ids=types).logits,
            atol=1e-5,
            rtol=1e-5,
        )


def test_a_resumed_electra_run_equals_an_uninterrupted_one(tmp_path, vocab_file):
    """The pair folder's weights load back into the pair, and the generator's samples follow the
    restored random state."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    run_pretraining(_electra_run(a, vocab_file, max_steps=4, log_every=1), a / "run", progress_bar=False)
    cfg_b = _electra_run(b, vocab_file, max_steps=4, log_every=1)
    assert run_pretraining(cfg_b, b / "run", progress_bar=False, stop_after_steps=2).progress.step == 2
    assert run_pretraining(cfg_b, b / "run", resume=True, progress_bar=False).progress.step == 4
    wa, wb = read_weights(a / "run" / "model"), read_weights(b / "run" / "model")
    assert wa.keys() == wb.keys() and any(k.startswith("generator.") for k in wa)
    for k in wa:
        assert_close(wa[k], wb[k], atol=1e-6, rtol=1e-5, msg=k)
    la = [m["loss"] for m in read_metrics(a / "run") if m["split"] == "train"]
    lb = [m["loss"] for m in read_metrics(b / "run") if m["split"] == "train"]
    assert la == pytest.approx(lb, rel=1e-5)
