"""The paper's fine-tuning grid (bertlab.finetune.grid): 18 settings as queued jobs, the best on dev."""

from __future__ import annotations

import json

import pytest
from test_finetune import write_sst2

from bertlab.errors import InputError
from bertlab.finetune.grid import PAPER_GRID, grid_args, grid_rows, read_grid, settings, submit_grid
from bertlab.jobs import JobRegistry


def test_the_grid_is_the_papers():
    assert PAPER_GRID == {"batch_size": (16, 32), "lr": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}
    assert len(settings()) == 18 and len(settings(restarts=3)) == 54
    with pytest.raises(InputError, match="restarts"):
        settings(0)


def test_grid_args_replace_the_users_own_settings():
    plan = grid_args(["--task", "sst2", "--data", "D", "--lr", "1e-3", "--batch-size=8", "--seed", "7", "--epochs", "9"])
    first, args = plan[0]
    assert args[:4] == ("--task", "sst2", "--data", "D")
    assert "1e-3" not in args and "--batch-size=8" not in args and "7" not in args and "9" not in args
    assert args[4:] == ("--batch-size", "16", "--lr", "5e-05", "--epochs", "2", "--seed", "0")
    assert {(s.batch_size, s.lr, s.epochs) for s, _ in plan} == {
        (b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)}


def test_submit_grid_queues_one_job_per_setting_and_picks_the_best(tmp_path, monkeypatch, tiny_checkpoint):
    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])
    data = write_sst2(tmp_path / "sst")
    registry = JobRegistry(tmp_path / "runs", gpus=0)
    folder = submit_grid(["--task", "sst2", "--data", str(data), "--model", str(tiny_checkpoint)], registry)
    record = read_grid(folder)
    assert len(record["runs"]) == 18
    rows = grid_rows(record, registry)
    assert {r["state"] for r in rows} == {"queued"} and not any(r["best"] for r in rows)
    for score, r in zip((0.6, 0.8, 0.7), record["runs"], strict=False):
        run = registry.root / r["job"]
        job = json.loads((run / "job.json").read_text())
        (run / "job.json").write_text(json.dumps({**job, "phase": "ended", "returncode": 0}))
        (run / "status.json").write_text(json.dumps({"state": "finished", "last_eval": {"eval_loss": 0.1, "accuracy": score}}))
    rows = grid_rows(record, registry)
    best = [r for r in rows if r["best"]]
    assert len(best) == 1 and best[0]["score"] == 0.8 and best[0]["metric"] == "accuracy"
