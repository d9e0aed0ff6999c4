"""bertlab/jobs/cli.py: `bertlab jobs ...` from a terminal."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys

from conftest import dead_pid, fake_launched_job

from bertlab.jobs import cli as jobs_cli
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


def test_cli_show_log_0_shows_no_log_and_a_negative_count_is_refused(runs, capsys):
    from bertlab.cli import main

    fake_launched_job(runs, "logged", dead_pid(), state="finished", log="line one\nline two\nline three\n")
    assert main(["jobs", "show", "logged", "--log", "2"]) == 0
    out = capsys.readouterr().out
    assert "line three" in out and "line two" in out and "line one" not in out
    assert main(["jobs", "show", "logged", "--log", "0"]) == 0
    out = capsys.readouterr().out
    assert "--- log ---" not in out and "line" not in out
    assert main(["jobs", "show", "logged", "--log", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["log_tail"] == ""
    assert main(["jobs", "show", "logged", "--log", "-5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "--log -5" in err and "0 (none) or more" in err


def test_cli_json_after_the_recipe_name_is_jobs_own(runs, capsys, monkeypatch):
    from bertlab.cli import main

    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # keep the job queued: no process in this test
    args = ["pretrain", "--config", "configs/tiny.yaml", "train.max_steps=5"]
    assert main(["jobs", "estimate", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5
    assert main(["jobs", "submit", "--name", "after", *args, "--json"]) == 0
    submitted = json.loads(capsys.readouterr().out)
    assert submitted["state"] == "queued" and "--json" not in submitted["command"]


def test_cli_estimate_refuses_a_budget_no_run_would_finish(runs, capsys, monkeypatch):
    from bertlab.cli import main

    real = jobs_cli.estimate_spec

    def huge(*args, **kwargs):  # an --epochs 1e12 fine-tuning budget, without reading GLUE here
        return dataclasses.replace(real(*args, **kwargs), steps=2 * 10**15, seconds=4e17)

    monkeypatch.setattr(jobs_cli, "estimate_spec", huge)
    assert main(["jobs", "estimate", "pretrain", "--config", "configs/tiny.yaml", "train.max_steps=5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "beyond any run" in err and "years" in err


def test_cli_cancel_says_a_cancel_was_requested(runs, capsys):
    from bertlab.cli import main

    # a trainer busy saving its checkpoint: SIGTERM does not stop it at once
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,  # its own process group, as the supervisor starts a trainer
    )
    try:
        stubborn.stdout.readline()  # its SIGTERM handler is set
        fake_launched_job(runs, "busy", stubborn.pid)
        assert main(["jobs", "cancel", "busy", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["cancel_requested"] is True and data["alive"] is True
        assert main(["jobs", "cancel", "busy"]) == 0
        out = capsys.readouterr().out
        assert "cancel requested: busy stops" in out and "--wait" in out
    finally:
        stubborn.send_signal(signal.SIGKILL)
        stubborn.wait()
