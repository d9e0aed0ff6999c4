"""Long inputs (#56): a short model's positions copied to fill a longer table, then pretrained on with a window."""

import dataclasses
import json

import torch

from bertlab.storage.checkpoint import load_pretraining_model
from bertlab.training.export import export_run
from bertlab.training.pretrain import initialize_from, run_pretraining
from test_pretrain import _config


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

    long = run_pretraining(cfg, tmp_path / "two", progress_bar=False)
    assert long.state == "finished"
    config = json.loads((tmp_path / "two" / "model" / "config.json").read_text())
    assert config["max_position_embeddings"] == 160
    assert config["bertlab"]["attention_pattern"] == "window" and config["bertlab"]["attention_window"] == 16
    card = json.loads((tmp_path / "two" / "model" / "model_card.json").read_text())
    assert "64 learned positions copied to fill 160" in json.dumps(card)
    model, tok, _ = load_pretraining_model(tmp_path / "two" / "model")
    assert model.config.sparse and tok.model_max_length == 160
