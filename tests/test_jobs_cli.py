"""bertlab/jobs_cli.py: `bertlab jobs ...` from a terminal."""

from __future__ import annotations

import json

from bertlab.jobs import JobRegistry


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
