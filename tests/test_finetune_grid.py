"""The paper's fine-tuning grid (bertlab.jobs.finetune_grid): 18 settings as queued jobs, the best on dev."""

from __future__ import annotations

import json

import pytest
from test_finetune_recipe import write_sst2

from bertlab.errors import InputError
from bertlab.jobs.finetune_grid import PAPER_GRID, grid_args, grid_rows, read_grid, settings, submit_grid
from bertlab.jobs.registry import JobRegistry


def test_the_grid_is_the_papers():
    assert PAPER_GRID == {"batch_size": (16, 32), "lr": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}
    assert len(settings()) == 18 and len(settings(restarts=3)) == 54
    with pytest.raises(InputError, match="restarts"):
        settings(0)


def test_grid_args_replace_the_users_own_settings():
    plan = grid_args(
        ["--task", "sst2", "--data", "D", "--lr", "1e-3", "--batch-size=8", "--seed", "7", "--epochs", "9"]
    )
    first, args = plan[0]
    assert args[:4] == ("--task", "sst2", "--data", "D")
    assert "1e-3" not in args and "--batch-size=8" not in args and "7" not in args and "9" not in args
    assert args[4:] == ("--batch-size", "16", "--lr", "5e-05", "--epochs", "2", "--seed", "0")
    assert {(s.batch_size, s.lr, s.epochs) for s, _ in plan} == {
        (b, lr, e) for b in (16, 32) for lr in (5e-5, 3e-5, 2e-5) for e in (2, 3, 4)
    }


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
        (run / "status.json").write_text(
            json.dumps({"state": "finished", "last_eval": {"eval_loss": 0.1, "accuracy": score}})
        )
    rows = grid_rows(record, registry)
    best = [r for r in rows if r["best"]]
    assert len(best) == 1 and best[0]["score"] == 0.8 and best[0]["metric"] == "accuracy"


def test_cli_grid_paper_submits_jobs_and_grid_status_shows_the_best(tmp_path, monkeypatch, capsys, tiny_checkpoint):
    """`bertlab finetune --grid paper --restarts 2` queues 36 jobs through the registry (launch
    faked) with the user's other arguments; `--grid-status FOLDER` prints the table and the best."""
    from bertlab.cli import main

    launched = []
    monkeypatch.setattr(JobRegistry, "_launch", lambda self, job, gpus: launched.append(job.id))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    write_sst2(tmp_path / "sst")  # relative --data: the jobs read it from the folder the grid was queued in
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "finetune",
            "--task",
            "sst2",
            "--data",
            "sst",
            "--model",
            str(tiny_checkpoint),
            "--grid",
            "paper",
            "--restarts",
            "2",
            "--lr",
            "1e-3",
            "--max-seq-length",
            "32",
            "--device",
            "cpu",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[0] == f"starting from {tiny_checkpoint}"
    folder = tmp_path / "runs" / "grids" / next(p.name for p in (tmp_path / "runs" / "grids").iterdir())
    assert f"grid folder: {folder}" in out and f"bertlab finetune --grid-status {folder}" in out
    record = read_grid(folder)
    assert len(record["runs"]) == 36 and {r["seed"] for r in record["runs"]} == {0, 1}
    registry = JobRegistry(tmp_path / "runs", gpus=0)
    job = json.loads((registry.root / record["runs"][0]["job"] / "job.json").read_text())
    args = job["args"]
    assert args[:2] == ["--task", "sst2"] and "--grid" not in args and "--restarts" not in args
    assert args[args.index("--data") + 1] == "sst" and args[args.index("--max-seq-length") + 1] == "32"
    assert "1e-3" not in args and "0.001" not in args  # the grid's learning rates replace the user's
    assert args[-8:] == ["--batch-size", "16", "--lr", "5e-05", "--epochs", "2", "--seed", "0"]
    assert job["device"] == "cpu" and len(launched) == 1  # one CPU slot: the rest wait in the queue

    code = main(["finetune", "--grid-status", str(folder)])
    out = capsys.readouterr().out
    assert code == 0 and "no setting has finished yet" in out and len(out.splitlines()) == 2 + 36 + 1
    for score, r in zip((0.6, 0.9, 0.7), record["runs"], strict=False):
        run = registry.root / r["job"]
        job = json.loads((run / "job.json").read_text())
        (run / "job.json").write_text(json.dumps({**job, "phase": "ended", "returncode": 0}))
        (run / "status.json").write_text(
            json.dumps({"state": "finished", "last_eval": {"eval_loss": 0.1, "accuracy": score}})
        )
    main(["finetune", "--grid-status", str(folder)])
    out = capsys.readouterr().out
    best = [line for line in out.splitlines() if line.startswith("*")]
    assert len(best) == 1 and "0.9000" in best[0] and record["runs"][1]["job"] in best[0]
    assert "best on dev so far" in out and "accuracy 0.9000" in out and "seed 1" in out


def test_cli_grid_refuses_what_does_not_fit(tmp_path, monkeypatch, capsys, tiny_checkpoint):
    from bertlab.cli import main

    monkeypatch.setattr(JobRegistry, "_launch", lambda self, job, gpus: None)
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    data = write_sst2(tmp_path / "sst")
    base = ["finetune", "--task", "sst2", "--data", str(data), "--model", str(tiny_checkpoint)]
    assert main([*base, "--restarts", "3"]) == 2
    assert "--restarts goes with --grid" in capsys.readouterr().err
    assert main([*base, "--grid", "paper", "--run-dir", str(tmp_path / "r")]) == 2
    assert "leave out --run-dir" in capsys.readouterr().err
    assert main(["finetune", "--task", "sst2", "--grid", "paper"]) == 2  # no --data: nothing queued
    assert "--data is required" in capsys.readouterr().err and not (tmp_path / "runs" / "grids").exists()
    assert main(["finetune", "--grid-status", str(tmp_path / "nowhere")]) == 2
    assert "grid.json" in capsys.readouterr().err
