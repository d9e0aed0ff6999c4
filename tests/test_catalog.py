"""bertlab.storage.catalog: finding checkpoints (shipped, checkpoints/, runs/*/model), checking a typed choice, the model card."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from conftest import tiny_config

from bertlab.errors import CheckpointError
from bertlab.model import BertForPreTraining
from bertlab.storage import catalog as C


@pytest.mark.parametrize("use_nsp_head", [True, False])
def test_parameter_count_matches_the_model(use_nsp_head):
    config = tiny_config(97, use_nsp_head=use_nsp_head)
    assert C.parameter_count(config) == BertForPreTraining(config).num_parameters()


def test_human_count():
    assert C.human_count(110_000_000) == "110.0M" and C.human_count(4_400) == "4.4k" and C.human_count(12) == "12"


def test_runs_are_found_newest_first(tmp_path, tiny_checkpoint):
    runs = tmp_path / "runs"
    for name in ("old", "new"):
        shutil.copytree(tiny_checkpoint, runs / name / "model")
        time.sleep(0.01)
    os.utime(runs / "old" / "model" / "config.json", (1, 1))
    (runs / "unfinished").mkdir()  # a run with no model yet
    (runs / "broken" / "model").mkdir(parents=True)  # model folder without config.json
    found = C.find_run_checkpoints(runs)
    assert [e.label for e in found] == ["new (run)", "old (run)"]
    assert all(e.kind == C.RUN and e.exists for e in found)
    assert "L=2 H=32 A=4" in found[0].summary
    assert C.find_run_checkpoints(tmp_path / "no-runs-here") == []


def test_a_runs_snapshots_are_models_to_pick_in_step_order(tmp_path, tiny_checkpoint):
    """Compare models offered 'a snapshot of a run' but listed only runs' final models."""
    run = tmp_path / "runs" / "tiny"
    shutil.copytree(tiny_checkpoint, run / "model")
    for step in (30, 10, 200):
        shutil.copytree(tiny_checkpoint, run / "snapshots" / f"step-{step:07d}")
    (run / "snapshots" / "step-0000300").mkdir()  # being written: no config.json yet
    (entry,) = C.find_run_checkpoints(tmp_path / "runs")
    snaps = C.snapshot_entries(entry)
    assert [e.label for e in snaps] == ["tiny · step 10", "tiny · step 30", "tiny · step 200"]
    assert snaps[0].path == str(run / "snapshots" / "step-0000010") and "L=2 H=32 A=4" in snaps[0].summary
    shipped = C.CheckpointEntry("x", str(tiny_checkpoint), C.LOCAL, True, "")
    assert C.snapshot_entries(shipped) == []  # only runs keep snapshots


def test_runs_root_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path))
    assert C.runs_root() == tmp_path
    monkeypatch.delenv("BERTLAB_RUNS")
    assert C.runs_root() == C.REPO_ROOT / "runs"


def test_find_checkpoints_default_missing_then_present(monkeypatch, tmp_path, tiny_checkpoint):
    local = tmp_path / "checkpoints"
    shutil.copytree(tiny_checkpoint, local / "tiny-a")
    (local / "not-a-checkpoint").mkdir()
    runs = tmp_path / "runs"
    shutil.copytree(tiny_checkpoint, runs / "r1" / "model")

    monkeypatch.setenv("BERTLAB_MODEL", str(tmp_path / "bertlab-mini"))
    entries = C.find_checkpoints(local, runs)
    assert entries[0].kind == C.SHIPPED and not entries[0].exists
    assert "not built yet" in entries[0].summary
    assert [e.label for e in entries[1:]] == ["tiny-a", "r1 (run)"]

    monkeypatch.setenv("BERTLAB_MODEL", str(local / "tiny-a"))  # the default is also in checkpoints/: listed once
    entries = C.find_checkpoints(local, runs)
    assert entries[0].exists and entries[0].label == "tiny-a (default)"
    assert [e.label for e in entries] == ["tiny-a (default)", "r1 (run)"]


def test_check_choice(tmp_path, tiny_checkpoint):
    assert C.check_choice(f"  {tiny_checkpoint} ") == str(tiny_checkpoint)
    assert C.check_choice("google-bert/bert-base-uncased") == "google-bert/bert-base-uncased"
    with pytest.raises(CheckpointError, match="no model given"):
        C.check_choice("   ")
    with pytest.raises(CheckpointError, match="no such folder"):
        C.check_choice(str(tmp_path / "missing"))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(CheckpointError, match="is a file"):
        C.check_choice(str(tmp_path / "file.txt"))
    run = tmp_path / "run1"
    shutil.copytree(tiny_checkpoint, run / "model")
    with pytest.raises(CheckpointError, match="did you mean .*model"):
        C.check_choice(str(run))
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(tiny_checkpoint / "config.json", half / "config.json")
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        C.check_choice(str(half))


def test_classify():
    assert C.classify("bert-base-uncased") == C.HUB
    assert C.classify("google-bert/bert-base-uncased") == C.HUB
    assert C.classify("./checkpoints/x") == C.LOCAL
    assert C.classify("/abs/path") == C.LOCAL
    assert C.classify("a/b/c") == C.LOCAL


def test_read_config_and_card(tmp_path, tiny_checkpoint):
    assert C.read_config(tiny_checkpoint).num_layers == 2
    with pytest.raises(CheckpointError, match="no config.json"):
        C.read_config(tmp_path)
    (tmp_path / "config.json").write_text("{broken")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        C.read_config(tmp_path)
    assert "not valid JSON" in C.summarize(tmp_path)
    assert C.read_card(tiny_checkpoint) == {}
    (tmp_path / "model_card.json").write_text("[1, 2]")
    assert C.read_card(tmp_path) == {}
    (tmp_path / "model_card.json").write_text(json.dumps({"name": "x"}))
    assert C.read_card(tmp_path) == {"name": "x"}


def test_model_card_sections():
    config = tiny_config(97)
    card = C.model_card(
        config,
        {
            "name": "bertlab-mini",
            "description": "A small BERT.",
            "training_data": "WikiText-2",
            "steps": 20000,
            "training": {"peak_learning_rate": 1e-3},
            "metrics": {"mlm_accuracy": 0.4123, "nsp_accuracy": 0.9},
        },
        path="/x/bertlab-mini",
        vocab_size=97,
        lowercase=True,
        sample_tokens=["cat", "##s"],
    )
    assert card.title == "bertlab-mini" and card.description == "A small BERT."
    sizes = dict(card.sizes)
    assert sizes["Layers (L)"] == "2" and sizes["Attention heads (A)"] == "4 (each 8 wide)"
    assert sizes["Parameters"].startswith(f"{C.parameter_count(config):,}")
    vocab = dict(card.vocabulary)
    assert (
        vocab["WordPiece tokens"] == "97"
        and vocab["Casing"].startswith("uncased")
        and vocab["Some tokens"] == "cat ##s"
    )
    training = dict(card.training)
    assert training["Training data"] == "WikiText-2" and training["Steps"] == "20,000"
    assert training["Peak learning rate"] == "0.001" and training["Folder"] == "/x/bertlab-mini"
    assert dict(card.metrics) == {
        "Masked words guessed right": "41.2%",
        "Next sentence told right (chance: 50%)": "90.0%",
    }


def test_model_card_without_card_file():
    card = C.model_card(tiny_config(97, use_nsp_head=False), None, path="/x/plain", has_nsp=False)
    assert card.title == "plain"
    assert "not recorded" in dict(card.training)["Training data"]
    assert card.metrics == []
    assert dict(card.sizes)["Heads"].startswith("masked LM only")
    assert dict(card.sizes)["Longest input"] == f"{tiny_config(97).max_position_embeddings} tokens"  # not known


def test_longest_input_says_how_many_positions_pretraining_trained():
    config = tiny_config(97)
    card = C.model_card(config, {"data_config": {"max_seq_length": 16}}, path="/x/short")
    assert dict(card.sizes)["Longest input"] == (
        f"{config.max_position_embeddings} tokens (pretrained on up to 16: later positions never trained)"
    )


def test_model_card_from_the_pretrain_recipe():
    card = C.model_card(
        tiny_config(97),
        {
            "name": "bertlab-mini",
            "corpus": ["default", "wikitext"],
            "steps": 1000,
            "tokens": 123456,
            "train_time_s": 5400,
            "train_config": {"learning_rate": 5e-4, "batch_size": 64},
            "data_config": {"max_seq_length": 128, "masking": "static"},
            "metrics": {"mlm_acc": 0.31},
        },
    )
    training = dict(card.training)
    assert training["Text it learned from"] == "Wikipedia sample (default), wikitext"
    assert training["Training time"] == "1 h 30 min"
    assert training["Input tokens seen"] == "123,456" and training["Peak learning rate"] == "0.0005"
    assert training["Batch size"] == "64 sequences" and training["Sequence length"] == "128 tokens"


def test_model_card_of_continued_pretraining_shows_both_stages():
    card = C.model_card(
        tiny_config(97),
        {
            "steps": 100,
            "tokens": 1000,
            "train_time_s": 60,
            "init_from": "ckpt/a",
            "total_steps": 300,
            "total_tokens": 5000,
            "total_train_time_s": 5400,
            "pretrain_dropout": 0.0,
        },
    )
    training = dict(card.training)
    # the stage's own numbers say so beside the totals (the Home page read "Steps: 9,194" of 26,590)
    assert training["Continued from"] == "ckpt/a" and training["Steps (last stage)"] == "100"
    assert training["Input tokens seen (last stage)"] == "1,000" and "Steps" not in training
    assert training["Steps, all stages"] == "300" and training["Input tokens, all stages"] == "5,000"
    assert training["Training time, all stages"] == "1 h 30 min" and training["Dropout while pretraining"] == "0"


def test_read_readme(tmp_path):
    assert C.read_readme(tmp_path) == ""
    (tmp_path / "README.md").write_text("# card")
    assert C.read_readme(tmp_path) == "# card"


def test_find_checkpoints_can_leave_out_finetuned_runs(tmp_path, tiny_checkpoint):
    runs = tmp_path / "runs"
    for name in ("pre", "ft"):
        shutil.copytree(tiny_checkpoint, runs / name / "model")
    cfg_path = runs / "ft" / "model" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("bertlab", {})["finetune"] = {"task": "sst2"}
    cfg_path.write_text(json.dumps(cfg))
    assert C.is_finetuned(runs / "ft" / "model") and not C.is_finetuned(runs / "pre" / "model")
    assert {e.label for e in C.find_run_checkpoints(runs)} == {"pre (run)", "ft (run)"}
    assert [e.label for e in C.find_run_checkpoints(runs, include_finetuned=False)] == ["pre (run)"]
    labels = [e.label for e in C.find_checkpoints(tmp_path / "none", runs, include_finetuned=False)]
    assert "ft (run)" not in labels and "pre (run)" in labels
