"""bertlab.finetune.cli: `bertlab finetune` end to end on a tiny model (a dry run keeps log.txt,
a missing file is one error line and exit 2), and the defaults its arguments make."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_finetune_recipe import write_sst2

from bertlab.errors import InputError


def test_cli_dry_run_and_errors(tmp_path, capsys, tiny_checkpoint, monkeypatch):
    from bertlab.cli import main

    data = write_sst2(tmp_path / "data", 16)
    code = main(
        [
            "finetune",
            "--task",
            "sst2",
            "--data",
            str(data),
            "--model",
            str(tiny_checkpoint),
            "--dry-run",
            "--run-dir",
            str(tmp_path / "run"),
            "--device",
            "cpu",
            "--no-progress",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[0] == f"starting from {tiny_checkpoint}"  # the first line says which model
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["state"] == "finished" and summary["step"] == 1 and "accuracy" in summary["eval"]
    assert (tmp_path / "run" / "model" / "config.json").is_file()
    log_lines = (tmp_path / "run" / "log.txt").read_text().splitlines()  # a CLI run keeps a log, as a job does
    assert len(log_lines) > 1 and "bertlab finetune" in log_lines[0], log_lines

    # the command is recorded as typed, words with spaces quoted, bertlab's own options left out, with the
    # folder its relative paths start from (bertlab.ablations.adopt reads both back)
    spaced = tmp_path / "my data"
    data.rename(spaced)
    argv = ["finetune", "--task", "sst2", "--data", str(spaced), "--model", str(tiny_checkpoint), "--dry-run"]
    argv += ["--run-dir", str(tmp_path / "run1"), "--device", "cpu", "--no-progress"]
    monkeypatch.setattr(sys, "argv", ["bertlab", "-v", *argv])
    assert main(["-v", *argv]) == 0
    recorded = json.loads((tmp_path / "run1" / "run_config.json").read_text())
    assert shlex.split(recorded["command"]) == ["bertlab", *argv] and recorded["cwd"] == os.getcwd()
    spaced.rename(data)
    capsys.readouterr()

    (data / "train.tsv").unlink()
    code = main(
        [
            "finetune",
            "--task",
            "sst2",
            "--data",
            str(data),
            "--model",
            str(tiny_checkpoint),
            "--run-dir",
            str(tmp_path / "run2"),
            "--device",
            "cpu",
            "--no-progress",
            "--max-steps",
            "1",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2 and "train file not found" in err and "--split-dev" in err
    assert "Traceback" not in err
    assert "train file not found" in (tmp_path / "run2" / "log.txt").read_text()  # the error that ended it


def test_a_head_learning_rate_trains_the_added_layers_at_their_own_rate(tmp_path, tiny_checkpoint):
    """`--head-lr`: the run's log shows both rates at every point of the schedule, the added layers' ten
    times the encoder's here, and the run config keeps it."""
    from bertlab.cli import main

    data = write_sst2(tmp_path / "data", 16)
    run = tmp_path / "run"
    argv = ["finetune", "--task", "sst2", "--data", str(data), "--model", str(tiny_checkpoint), "--max-steps", "3"]
    argv += ["--lr", "1e-3", "--head-lr", "1e-2", "--run-dir", str(run), "--device", "cpu", "--no-progress"]
    assert main([*argv, "--batch-size", "4"]) == 0
    train = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in line]
    assert train and all(r["head_lr"] == pytest.approx(10 * r["lr"]) and r["lr"] > 0 for r in train)
    assert json.loads((run / "run_config.json").read_text())["config"]["train"]["head_lr"] == 1e-2


def test_cli_defaults_follow_the_paper_and_start_from_the_shipped_model():
    import argparse

    from bertlab.finetune.args import add_args
    from bertlab.finetune.cli import config_from_args
    from bertlab.storage.checkpoint import default_model_path

    p = argparse.ArgumentParser()
    add_args(p)
    cfg = config_from_args(p.parse_args(["--task", "sst2", "--data", "/d"]))
    assert cfg.model == str(default_model_path()) and cfg.max_seq_length == 128
    squad = config_from_args(p.parse_args(["--task", "squad", "--data", "/d"]))
    assert squad.max_seq_length == 384 and squad.doc_stride == 128  # run_squad.py's defaults
    random_init = config_from_args(p.parse_args(["--task", "sst2", "--data", "/d", "--size", "mini"]))
    assert random_init.model is None and random_init.size == "mini"
    with pytest.raises(InputError, match="not both"):
        config_from_args(p.parse_args(["--task", "sst2", "--data", "/d", "--size", "mini", "--model", "/m"]))
    assert cfg.epochs == 3.0  # no budget given: three epochs
    assert cfg.train.head_lr == 0.0  # one rate for every weight unless --head-lr gives the task's layers theirs
    head = config_from_args(p.parse_args(["--task", "sst2", "--data", "/d", "--lr", "5e-4", "--head-lr", "1e-2"]))
    assert (head.train.learning_rate, head.train.head_lr) == (5e-4, 1e-2)
    # a budget given as 0 or less is refused, not read as 'none given' (--epochs 0 ran 3 epochs)
    for bad, message in (
        (["--epochs", "0"], "--epochs must be more than 0"),
        (["--epochs", "-1"], "--epochs must be more than 0"),
        (["--epochs", "1e12"], "at most 10000"),  # estimated at 10^11 hours
        (["--max-steps", "-2"], "max_steps must be 0"),
        (["--batch-size", "0"], "batch_size must be 1 or more"),
        (["--max-train-examples", "-5"], "--max-train-examples must be 0"),
        (["--head-lr", "-0.001"], "head_lr must be 0"),
    ):
        with pytest.raises(InputError, match=message):
            config_from_args(p.parse_args(["--task", "sst2", "--data", "/d", *bad]))


def test_two_nodes_finetune_from_random_init(tmp_path):
    # (#24) `jobs submit --nodes 2`'s lines for `bertlab finetune`, two torchrun agents on 127.0.0.1
    # (gloo, c10d): the vocabulary is trained once, in the shared run folder, and the run finishes
    from bertlab.jobs.spec import JobSpec, node_commands

    data = write_sst2(tmp_path / "data", 48)
    args = ("--task", "sst2", "--data", str(data), "--size", "tiny", "--max-steps", "4", "--batch-size", "8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master = f"127.0.0.1:{s.getsockname()[1]}"
    launcher = (sys.executable, "-m", "torch.distributed.run")
    lines = node_commands(JobSpec("finetune", args, device="cpu"), tmp_path / "run", 2, master, launcher=launcher)
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", OMP_NUM_THREADS="1")
    logs = [tmp_path / f"node{line.node}.txt" for line in lines]
    procs = [
        subprocess.Popen(line.argv, env=env, cwd=repo, stdout=log.open("w"), stderr=subprocess.STDOUT)
        for line, log in zip(lines, logs, strict=True)
    ]
    for p in procs:
        p.wait(timeout=300)
    outputs = [log.read_text() for log in logs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "finished" and status["world_size"] == 2 and status["step"] == 4
    assert sum("trained a" in o and "WordPiece vocabulary" in o for o in outputs) == 1
