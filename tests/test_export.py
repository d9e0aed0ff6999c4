"""bertlab/training/export.py: `bertlab export` turns a finished tiny pretraining run into a float16
checkpoint folder with its model card (learning curve, stop/resume history, the note)."""

import json

import torch
from test_pretrain import _config

from bertlab.cli import main
from bertlab.storage.checkpoint import read_weights
from bertlab.training.export import learning_curve
from bertlab.training.pretrain import run_pretraining


def test_export_writes_a_float16_checkpoint_with_its_card(tmp_path, vocab_file, capsys):
    run_dir, out_dir = tmp_path / "run", tmp_path / "shipped"
    run_pretraining(_config(tmp_path, vocab_file, max_steps=6, eval_every=3), run_dir, progress_bar=False)
    curve = learning_curve(run_dir)
    assert [p["step"] for p in curve][-2:] == [3, 6] and all("mlm_acc" in p and p["tokens"] > 0 for p in curve)
    capsys.readouterr()
    argv = ["export", str(run_dir), str(out_dir), "--note", "A tiny test model.", "--history", "step 3: stopped"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out_dir} (")
    weights = read_weights(out_dir)
    assert {w.dtype for w in weights.values() if w.is_floating_point()} == {torch.float16}
    card = json.loads((out_dir / "model_card.json").read_text())
    assert card["learning_curve"] == curve and card["history"] == ["step 3: stopped"]
    assert "A tiny test model." in (out_dir / "README.md").read_text()
    # the note is kept in the card, so a card rendered again (e.g. after scoring unseen English) keeps it
    from bertlab.storage.model_card import model_card_markdown

    assert card["metrics_note"] == "A tiny test model." and "A tiny test model." in model_card_markdown(card)
    (tmp_path / "unfinished").mkdir()
    assert main(["export", str(tmp_path / "unfinished"), str(tmp_path / "x")]) == 2
    assert "no finished model in it" in capsys.readouterr().err and not (tmp_path / "x").exists()
    # the export replaces its folder whole: it refuses anything it would destroy (it deleted a folder of
    # notes, replaced the run itself, and turned a file into a model folder)
    (tmp_path / "other-run" / "model").mkdir(parents=True)
    (tmp_path / "other-run" / "status.json").write_text('{"state": "finished"}')
    notes = tmp_path / "important"
    notes.mkdir()
    (notes / "notes.txt").write_text("precious")
    a_file = tmp_path / "corpus.txt"
    a_file.write_text("text")
    for target, message in (
        (notes, "already holds files and is not a model folder"),
        (run_dir, "is the run"),
        (run_dir / "inside", "is the run"),
        (tmp_path / "other-run" / "model", "lies inside the run folder"),  # another run's final model
        (a_file, "is a file"),
        ("", "give the folder"),
    ):
        assert main(["export", str(run_dir), str(target)]) == 2
        assert message in capsys.readouterr().err
    assert (notes / "notes.txt").read_text() == "precious" and a_file.read_text() == "text"
    assert (run_dir / "model").is_dir()
    (out_dir / "interpret").mkdir()  # an earlier export is replaced, and the user is told what went with it
    assert main(["export", str(run_dir), str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "replacing the model that was there" in out and "interpret studies" in out
