"""Long inputs (#56): a short model's positions copied to fill a longer table, then pretrained on with a window."""

import dataclasses
import json

import torch
from test_pretrain import _config

from bertlab.storage.checkpoint import load_pretraining_model
from bertlab.training.export import export_run
from bertlab.training.pretrain import initialize_from, run_pretraining


def test_a_short_model_continues_long_with_its_positions_copied_and_a_window(tmp_path, vocab_file):
    first = run_pretraining(_config(tmp_path, vocab_file, max_steps=4), tmp_path / "one", progress_bar=False)
    assert first.state == "finished"
    base = export_run(tmp_path / "one", tmp_path / "base", fp16=False)  # 64 positions, full attention
    cfg = _config(tmp_path, vocab_file, max_steps=3)
    overrides = dict(cfg.model_overrides, max_position_embeddings=160, attention_pattern="window", attention_window=16)
    cfg = dataclasses.replace(
        cfg,
        vocab=None,
        init_from=str(base),
        model_overrides=overrides,
        data=dataclasses.replace(cfg.data, max_seq_length=150),
    )
    parent, tok, _ = load_pretraining_model(base)
    from bertlab.model import BertForPreTraining

    fresh = BertForPreTraining(cfg.model_config(len(tok)))
    info = initialize_from(fresh, cfg.init_from)
    assert info["positions_copied"] == "64 learned positions copied to fill 160"
    old = parent.bert.embeddings.position_embeddings.weight
    new = fresh.bert.embeddings.position_embeddings.weight
    assert torch.equal(new[:64], old) and torch.equal(new[64:128], old) and torch.equal(new[128:], old[:32])

    # a model that saw only 16-token inputs: its first 16 positions fill the table, even at the same length
    same = BertForPreTraining(_config(tmp_path, vocab_file, max_steps=1).model_config(len(tok)))
    assert initialize_from(same, str(base), copy_positions=16)["positions_copied"] == (
        "16 learned positions copied to fill 64"
    )
    tiled = same.bert.embeddings.position_embeddings.weight
    assert torch.equal(tiled[16:32], old[:16]) and torch.equal(tiled[48:], old[:16])

    long = run_pretraining(cfg, tmp_path / "two", progress_bar=False)
    assert long.state == "finished"
    config = json.loads((tmp_path / "two" / "model" / "config.json").read_text())
    assert config["max_position_embeddings"] == 160
    assert config["bertlab"]["attention_pattern"] == "window" and config["bertlab"]["attention_window"] == 16
    card = json.loads((tmp_path / "two" / "model" / "model_card.json").read_text())
    assert "64 learned positions copied to fill 160" in json.dumps(card)
    from bertlab.storage.model_card import model_card_markdown

    readme = model_card_markdown(card)
    assert "- Attention: sliding window: 8 tokens on each side plus [CLS]" in readme
    assert "- Position table: 64 learned positions copied to fill 160 (Longformer's initialisation)." in readme
    model, tok, _ = load_pretraining_model(tmp_path / "two" / "model")
    assert model.config.sparse and tok.model_max_length == 160


def _tiny_window_checkpoint(tmp_path, tokenizer, **kw):
    from conftest import tiny_config

    from bertlab.model import BertForPreTraining
    from bertlab.storage.checkpoint import save_checkpoint

    torch.manual_seed(0)
    cfg = tiny_config(len(tokenizer), max_position_embeddings=1024, attention_pattern="window", attention_window=16)
    model = BertForPreTraining(cfg.replace(**kw))
    return save_checkpoint(tmp_path / "long", model, tokenizer) or tmp_path / "long"


def test_a_pattern_picture_counts_the_pairs_it_computes():
    import numpy as np

    from bertlab.config import BertConfig
    from bertlab.patterns.describe import pattern_picture

    shape = dict(hidden_size=16, num_heads=2, num_layers=3, intermediate_size=8)
    i = np.arange(40)
    band = np.abs(i[:, None] - i[None]) <= 4
    pic = pattern_picture(BertConfig(**shape, attention_pattern="window", attention_window=8, global_tokens="none"), 40)
    assert pic.pairs == band.sum() and (pic.density == band).all()
    band[0, :] = band[:, 0] = True  # [CLS] global
    pic = pattern_picture(BertConfig(**shape, attention_pattern="window", attention_window=8), 40, pool=4)
    assert pic.pairs == band.sum()
    assert np.allclose(pic.density, band.reshape(10, 4, 10, 4).mean((1, 3)))
    assert pic.map_bytes(BertConfig(**shape)) == (band.sum() * 2 * 3 * 4, 1600 * 2 * 3 * 4)
    full = pattern_picture(BertConfig(**shape), 4096)
    assert full.share == 1.0 and full.density.shape == (256, 256) and full.pool == 16
    big = pattern_picture(BertConfig(**shape, attention_pattern="bigbird", attention_block=64), 4096)
    assert 0.05 < big.share < 0.25  # own, 2 neighbours, 3 random, first and last of 64 blocks: about 8/64


def test_long_attention_pools_a_windowed_models_maps(tmp_path, tokenizer):
    from bertlab.attention import long_attention
    from bertlab.inference import load_model

    lm = load_model(_tiny_window_checkpoint(tmp_path, tokenizer))
    text = " ".join(["the cat sat on the mat ."] * 100)  # about 700 tokens
    att = long_attention(lm, text, pool=8)
    n = -(-att.length // 8)
    assert att.length > 600 and att.maps.shape == (2, 4, n, n)
    torch.testing.assert_close(torch.tensor(att.maps[..., : n - 1, :].sum(-1)), torch.ones(2, 4, n - 1))
    far = att.maps[0, 0, 40, :]  # a middle tile reads its band (8 +- 1 tiles) and [CLS]'s tile only
    assert set(far.nonzero()[0].tolist()) <= {0, 39, 40, 41}
    assert att.picture.share < 0.1
    # pooling by hand from the dense maps gives the same numbers
    full_maps = lm.model(torch.tensor([lm.tokenizer.encode(text).ids]), output_attentions=True).encoder.attentions
    dense = full_maps[1][0].detach()
    T = dense.shape[-1]
    padded = torch.nn.functional.pad(dense, (0, n * 8 - T, 0, n * 8 - T))
    torch.testing.assert_close(torch.tensor(att.maps[1]), padded.view(4, n, 8, n, 8).sum(-1).sum(-2) / 8)


def test_the_long_inputs_page_draws_the_pattern_and_a_long_models_attention(tmp_path, tokenizer, monkeypatch):
    from test_app import REPO, assert_clean, open_page, plotly_charts

    from bertlab.app_pages import page_titled

    folder = _tiny_window_checkpoint(tmp_path, tokenizer)
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(folder))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    at = open_page(page_titled("Long inputs").file)
    assert_clean(at)
    assert "1,024 tokens" in " ".join(m.value for m in at.markdown)
    before = len(plotly_charts(at))
    at.radio(key="li_pattern").set_value("bigbird").run()
    assert_clean(at)
    at.button(key="li_go").click().run()
    assert_clean(at)
    assert len(plotly_charts(at)) == before + 1  # the model's own attention
    assert any("full attention's would be" in c.value for c in at.caption)


def test_the_attention_page_draws_a_long_text_as_its_pattern(tmp_path, tokenizer, monkeypatch):
    from test_app import REPO, assert_clean, open_page, plotly_charts

    from bertlab.app_pages import page_titled

    folder = _tiny_window_checkpoint(tmp_path, tokenizer, max_position_embeddings=2048)
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    for k, v in (("BERTLAB_MODEL", str(folder)), ("BERTLAB_RUNS", str(tmp_path / "r")), ("HF_HUB_OFFLINE", "1")):
        monkeypatch.setenv(k, v)
    at = open_page(page_titled("Attention").file)
    assert_clean(at)
    at.text_area(key="att_a").set_value(" ".join(["the cat sat on the mat ."] * 200)).run()  # ~1,400 tokens
    assert_clean(at)
    assert any("averaged over tiles" in i.value for i in at.info)
    assert len(plotly_charts(at)) == 1
    assert any("full attention's" in c.value for c in at.caption)


def test_a_windowed_model_fine_tunes_on_long_inputs_and_predicts(tmp_path, tokenizer):
    from bertlab import finetune
    from bertlab.finetune.predict import load_finetuned
    from bertlab.training.trainer import TrainConfig

    folder = _tiny_window_checkpoint(tmp_path, tokenizer, max_position_embeddings=512)
    d = tmp_path / "sst2"
    d.mkdir()
    long_pos = " ".join(["the cat sat on the mat ."] * 30)  # ~200 tokens: past the 16-token window
    rows = [f"{long_pos}\t1", "the dog ran to the park\t0", f"a big red bird sang {long_pos}\t1", "the lazy fox\t0"]
    for name in ("train.tsv", "dev.tsv"):
        (d / name).write_text("sentence\tlabel\n" + "\n".join(rows * 2) + "\n")
    cfg = finetune.FinetuneConfig(
        task="sst2",
        data=str(d),
        model=str(folder),
        max_seq_length=256,
        train=TrainConfig(max_steps=3, batch_size=4, eval_every=0, save_every=0, log_every=1),
    )
    assert finetune.run_finetuning(cfg, tmp_path / "ft", progress_bar=False).state == "finished"
    model = load_finetuned(tmp_path / "ft" / "model")
    assert model.model.config.attention_pattern == "window" and model.model.config.attention_window == 16
    assert model.predict(long_pos).label in ("0", "1", "negative", "positive")


def test_rollout_states_its_limit_and_integrated_gradients_reads_a_long_input(tmp_path, tokenizer):
    import pytest

    from bertlab.errors import InputError
    from bertlab.inference import load_model
    from bertlab.interpret.attribution import attribute
    from bertlab.interpret.rollout import attention_maps

    lm = load_model(_tiny_window_checkpoint(tmp_path, tokenizer, max_position_embeddings=2048))
    long = " ".join(["the cat sat on the mat ."] * 200)  # ~1,400 tokens
    with pytest.raises(InputError, match="up to 1,024 tokens"):
        attention_maps(lm, long)
    text = " ".join(["the cat sat on the mat ."] * 90) + " the [MASK] sat ."  # ~640 tokens, past 512
    result = attribute(lm, text, steps=8, max_steps=8)
    assert len(result.tokens) > 600 and result.steps == 8


def test_the_shipped_long_model_reads_4096_tokens_with_a_window():
    from pathlib import Path

    from bertlab.inference import load_model

    lm = load_model(Path(__file__).resolve().parent.parent / "checkpoints" / "bertlab-mini-long")
    c = lm.config
    assert (c.attention_pattern, c.attention_window, c.max_position_embeddings, lm.max_length) == (
        "window",
        128,
        4096,
        4096,
    )
    story = "The lighthouse keeper wrote in his log every evening, and he noted the wind and the waves. " * 60
    result = lm.fill_mask(story + "At night he lit the [MASK] and went to sleep.")
    assert result.masks[0].position > 1000  # read in one pass, far past 512 tokens
    assert result.masks[0].candidates[0].token.isalpha()
    card = lm.card
    assert "128 learned positions copied to fill 4096" in card.get("positions_copied", "")
