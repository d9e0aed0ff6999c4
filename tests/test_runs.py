"""bertlab/runs.py: runs as read from disk, dead processes and broken files included."""

from __future__ import annotations

import json
import os
import time

import pytest
from conftest import dead_pid, fake_launched_job

from bertlab.hardware import process_start_time
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobError


def test_dead_process_is_reported_failed_with_its_log(runs):
    run_dir = fake_launched_job(runs, "crashed", dead_pid(), log="step 7\nRuntimeError: CUDA out of memory\n")
    job = JobRegistry(runs).get("crashed")
    assert job.state == "failed" and not job.alive
    assert "is gone without finishing" in job.error and "CUDA out of memory" in job.error
    # read-only detection: status.json is left as the trainer wrote it
    assert json.loads((run_dir / "status.json").read_text())["state"] == "running"
    # a cancel that was asked for before the process died reads as cancelled, not failed
    job_json = json.loads((run_dir / "job.json").read_text())
    (run_dir / "job.json").write_text(json.dumps(job_json | {"cancel_requested": time.time()}))
    assert JobRegistry(runs).get("crashed").state == "cancelled"


def test_run_started_outside_the_registry_is_listed_read_only(runs):
    run_dir = runs / "by-hand"
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 3, "pid": dead_pid()}))
    (run_dir / "run_config.json").write_text(json.dumps({"kind": "pretrain", "command": "bertlab pretrain ..."}))
    live = runs / "live-by-hand"
    live.mkdir()
    (live / "status.json").write_text(json.dumps({"state": "running", "step": 3, "pid": os.getpid()}))
    reg = JobRegistry(runs)
    jobs = {j.id: j for j in reg.list()}
    assert jobs["by-hand"].state == "failed" and not jobs["by-hand"].managed
    assert jobs["live-by-hand"].state == "running" and jobs["live-by-hand"].alive
    with pytest.raises(JobError, match="outside the job registry"):
        reg.cancel("live-by-hand")
    with pytest.raises(JobError, match="cancel it first"):
        reg.delete("live-by-hand")
    # (#13) a run by hand that is not alive is not 'started outside the registry' to cancel: it ended; delete it
    with pytest.raises(JobError, match="has already failed; nothing to cancel"):
        reg.cancel("by-hand")
    reg.delete("by-hand")
    assert not run_dir.exists()


@pytest.mark.parametrize("state", ["failed", "finished", "cancelled"])
def test_a_run_by_hand_in_a_final_state_can_be_deleted_while_its_process_lives_on(runs, state):
    # (#13) a run that failed early in a process that goes on (a notebook; `bertlab.cli.main` called
    # in-process) read as alive: 'jobs cancel' said nothing to cancel, 'jobs delete' said cancel it first
    run_dir = runs / f"by-hand-{state}"
    run_dir.mkdir(parents=True)
    me = {"pid": os.getpid(), "pid_start": process_start_time(os.getpid())}
    (run_dir / "status.json").write_text(json.dumps({"state": state, "step": 0, **me}))
    reg = JobRegistry(runs)
    job = reg.get(run_dir.name)
    assert job.state == state and not job.alive
    reg.delete(run_dir.name)
    assert not run_dir.exists()
    (run_dir.parent / "live").mkdir()
    (run_dir.parent / "live" / "status.json").write_text(json.dumps({"state": "preparing", **me}))
    assert reg.get("live").alive  # still being made: kept
    with pytest.raises(JobError, match="cancel it first"):
        reg.delete("live")


@pytest.mark.parametrize(
    "status, job_extra",
    [
        ("[1, 2]", {}),
        ('"hello"', {}),
        ('{"state": "running", "step": "abc", "progress": "x", "eta_s": [1]}', {}),
        ('{"state": "finished", "step": 3', {}),  # truncated
        ('{"state": ["odd"]}', {"submitted": "yesterday", "num_gpus": "two"}),
    ],
)
def test_one_bad_run_folder_never_takes_the_list_down(runs, status, job_extra, capsys, monkeypatch):
    good = fake_launched_job(runs, "good", dead_pid())
    bad = fake_launched_job(runs, "bad", dead_pid())
    (bad / "status.json").write_text(status)
    if job_extra:
        job = json.loads((bad / "job.json").read_text())
        (bad / "job.json").write_text(json.dumps(job | job_extra))
    reg = JobRegistry(runs)
    jobs = {j.id: j for j in reg.list(start_queued=False)}
    assert set(jobs) == {"good", "bad"} and jobs["good"].state == "failed"
    b = jobs["bad"]
    assert isinstance(b.step, int) and isinstance(b.submitted, float) and b.num_gpus >= 1
    assert b.state in ("failed", "cancelled", "finished") and b.error
    from bertlab.jobs.view import jobs_table

    assert jobs_table(list(jobs.values()))  # the Jobs page's table is drawn
    assert good.exists()
    if not status.startswith('{"state": "running"') and not job_extra:  # status.json unreadable or not an object
        (bad / "model").mkdir()
        (bad / "model" / "config.json").write_text("{}")
        finished = JobRegistry(runs).get("bad")
        assert finished.state == "finished"  # its final model is there: it ended well
        # what cannot be read, and nothing about a process gone without finishing
        assert len(finished.error.splitlines()) == 1 and "status.json" in finished.error
        from bertlab.jobs.cli import _job_line

        assert finished.error in _job_line(finished)  # `jobs list` says why beside the run
    # the queue goes on: another job is submitted, started and listed beside the bad folder
    from bertlab.cli import main

    launched: list[str] = []  # the queue's choice, without starting a process in this test
    monkeypatch.setattr(JobRegistry, "_launch", lambda self, job, gpus: launched.append(job.id))
    capsys.readouterr()
    assert (
        main(
            [
                "jobs",
                "submit",
                "--json",
                "--name",
                "next",
                "pretrain",
                "--config",
                "configs/tiny.yaml",
                "train.max_steps=5",
            ]
        )
        == 0
    )
    submitted = json.loads(capsys.readouterr().out)
    assert launched == [submitted["id"]] and submitted["id"].startswith("next-")
    assert main(["jobs", "list"]) == 0
    listed = capsys.readouterr().out
    assert "bad " in listed and "good " in listed and "next-" in listed


def test_plain_run_whose_pid_was_reused_reads_as_failed(runs):
    # (#14) a 'bertlab pretrain' killed with kill -9 stayed 'running' while another process
    # held its pid: the trainer now records pid_start and the run list compares it
    run_dir = runs / "killed-by-hand"
    run_dir.mkdir(parents=True)
    start = process_start_time(os.getpid())
    (run_dir / "status.json").write_text(
        json.dumps({"state": "running", "step": 3, "pid": os.getpid(), "pid_start": start - 1})
    )
    job = JobRegistry(runs).get("killed-by-hand")
    assert job.state == "failed" and not job.alive
    assert "stopped without finishing (killed?)" in job.error
    (run_dir / "status.json").write_text(
        json.dumps({"state": "running", "step": 3, "pid": os.getpid(), "pid_start": start})
    )
    assert JobRegistry(runs).get("killed-by-hand").state == "running"


def test_run_dirs_lists_run_folders_newest_first(tmp_path):
    from bertlab.jobs.runs import run_dirs

    assert run_dirs(tmp_path / "missing") == []
    for i, name in enumerate(("old", "new")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "status.json").write_text("{}")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    (tmp_path / "not-a-run").mkdir()
    assert [p.name for p in run_dirs(tmp_path)] == ["new", "old"]
