"""bertlab/jobs/cli.py: `bertlab jobs ...` from a terminal."""

from __future__ import annotations

import json

from bertlab.jobs.registry import JobRegistry


def test_cli_submit_list_show_and_cancel_a_queued_job(runs, capsys, monkeypatch):
    from bertlab.cli import main

    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # keep the job queued: no process in this test
    assert (
        main(
            [
                "jobs",
                "submit",
                "--json",
                "--name",
                "cli",
                "pretrain",
                "--config",
                "configs/tiny.yaml",
                "train.max_steps=5",
            ]
        )
        == 0
    )
    submitted = json.loads(capsys.readouterr().out)
    assert submitted["state"] == "queued" and submitted["id"].startswith("cli-")
    assert main(["jobs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [j["id"] for j in listed] == [submitted["id"]]
    assert main(["jobs", "show", submitted["id"]]) == 0
    assert "train.max_steps=5" in capsys.readouterr().out
    assert main(["jobs", "cancel", "--json", submitted["id"]]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "cancelled"
    assert main(["jobs", "cancel", submitted["id"]]) == 2
    assert "nothing to cancel" in capsys.readouterr().err
    assert main(["jobs", "estimate", "--json", "pretrain", "--config", "configs/tiny.yaml", "train.max_steps=5"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5
    assert main(["jobs", "delete", submitted["id"]]) == 0
    assert main(["jobs", "list"]) == 0 and "no jobs" in capsys.readouterr().out


def test_cli_submit_with_nodes_prints_each_machines_line(runs, capsys):
    # (#24) `jobs submit --nodes 2 --master HOST:PORT` prints the torchrun lines; nothing is queued
    from bertlab.cli import main

    args = ["pretrain", "--config", "configs/tiny.yaml", "train.max_steps=5"]
    code = main(["jobs", "submit", "--nodes", "2", "--master", "10.0.0.1:29500", "--run-dir", "/shared/r", *args])
    out = capsys.readouterr().out
    assert code == 0 and "/shared/r the same shared" in out
    lines = [line for line in out.splitlines() if line.startswith("torchrun ")]
    assert (
        len(lines) == 3
        and lines[0] == lines[1]
        and lines[2] == lines[0].replace("--no-progress", "--resume --no-progress")
    )
    assert "--nnodes 2 " in lines[0] and "--rdzv-endpoint 10.0.0.1:29500 " in lines[0]
    assert main(["jobs", "submit", "--json", "--nodes", "2", "--master", "10.0.0.1:29500", *args]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [n["node"] for n in printed["nodes"]] == [0, 1] and printed["run_dir"].startswith(str(runs.resolve()))
    assert JobRegistry(runs).list() == []
    assert main(["jobs", "submit", "--nodes", "2", *args]) == 2
    assert "--master HOST:PORT" in capsys.readouterr().err
