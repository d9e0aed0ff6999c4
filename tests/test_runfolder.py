"""bertlab/storage/runfolder.py: the run folder's file names, states, status and metric files, and the
log.txt of runs started from the command line."""

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bertlab.storage import runfolder as rf
from bertlab.storage.runfolder import run_log

REPO = Path(__file__).resolve().parent.parent


def test_status_and_metrics_files(tmp_path):
    rf.update_status(tmp_path, state="running", step=3)
    s = rf.update_status(tmp_path, step=4)
    assert s["state"] == "running" and s["step"] == 4 and s["updated"] <= time.time()
    assert rf.read_status(tmp_path) == s
    (tmp_path / "metrics.jsonl").write_text('{"split": "train", "step": 1}\n{"split": "tr')  # half-written line
    assert rf.read_metrics(tmp_path) == [{"split": "train", "step": 1}]


def test_reads_of_missing_or_broken_files_are_empty(tmp_path):
    assert rf.read_status(tmp_path) == {} and rf.read_metrics(tmp_path) == [] and rf.read_job_file(tmp_path) == {}
    assert rf.read_run_config(tmp_path) is None
    (tmp_path / rf.STATUS_FILE).write_bytes(b"\xff\xfe not json")
    (tmp_path / rf.JOB_FILE).write_text("[1, 2]")  # JSON, but not an object
    assert rf.read_status(tmp_path) == {} and rf.read_job_file(tmp_path) == {}


def test_metrics_are_appended_truncated_and_set_aside(tmp_path):
    for step in (1, 2, 3):
        rf.append_metrics(tmp_path, {"split": "train", "step": step})
    with open(tmp_path / rf.METRICS_FILE, "a") as f:
        f.write('{"split": "tr')  # a line cut off by a kill
    rf.truncate_metrics(tmp_path, 2)
    assert [r["step"] for r in rf.read_metrics(tmp_path)] == [1, 2]
    rf.set_metrics_aside(tmp_path)
    assert rf.read_metrics(tmp_path) == [] and len(list(tmp_path.glob("metrics.attempt-*.jsonl"))) == 1


def test_job_file_updates_merge(tmp_path):
    rf.write_job_file(tmp_path, {"kind": "pretrain", "phase": "queued"})
    assert rf.update_job_file(tmp_path, phase="launched", pid=7) == {"kind": "pretrain", "phase": "launched", "pid": 7}
    assert rf.read_job_file(tmp_path)["phase"] == "launched"


def test_folders_and_what_a_run_has(tmp_path):
    run = tmp_path / "run-1"
    run.mkdir()
    assert not rf.is_run_dir(run) and not rf.has_checkpoint(run) and not rf.has_model(run)
    rf.write_run_config(run, {"kind": "pretrain"})
    assert rf.is_run_dir(run) and rf.read_run_config(run) == {"kind": "pretrain"}
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / rf.STATUS_FILE).write_text("{}")
    assert not rf.is_run_dir(tmp_path / ".hidden")
    (rf.checkpoint_dir(run) / rf.MODEL_DIR).mkdir(parents=True)
    (rf.checkpoint_dir(run) / rf.TRAINER_STATE_FILE).write_bytes(b"x")
    rf.model_dir(run).mkdir()
    (rf.model_dir(run) / "config.json").write_text("{}")
    assert rf.has_checkpoint(run) and rf.has_model(run)
    assert rf.snapshot_dir(run, 70) == run / "snapshots" / "step-0000070"


def test_states_are_one_set():
    assert set(rf.STATES) == {"queued", *rf.ACTIVE_STATES, *rf.FINAL_STATES}
    assert not set(rf.ACTIVE_STATES) & set(rf.FINAL_STATES)


def test_runs_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path))
    assert rf.runs_root() == tmp_path
    monkeypatch.delenv("BERTLAB_RUNS")
    assert rf.runs_root() == rf.REPO_ROOT / "runs"


def test_failure_before_training_marks_a_preparing_run_failed(tmp_path):
    rf.update_status(tmp_path, state="preparing")
    with pytest.raises(ValueError), rf.failure_recorded(tmp_path):
        raise ValueError("no corpus")
    status = rf.read_status(tmp_path)
    assert status["state"] == "failed" and status["error"] == "ValueError: no corpus"
    rf.update_status(tmp_path, state="running")  # another process's run: the trainer records its own failures
    with pytest.raises(KeyError), rf.failure_recorded(tmp_path):
        raise KeyError("x")
    assert rf.read_status(tmp_path)["state"] == "running"
    # marked running by this process, then an error before the trainer's loop (no batch at all): failed
    rf.update_status(tmp_path, state="running", pid=os.getpid())
    with pytest.raises(ZeroDivisionError), rf.failure_recorded(tmp_path):
        raise ZeroDivisionError("division by zero")
    status = rf.read_status(tmp_path)
    assert status["state"] == "failed" and "ZeroDivisionError" in status["error"]


def test_log_tail_keeps_the_last_non_blank_lines(tmp_path):
    (tmp_path / rf.LOG_FILE).write_text("one\n\ntwo\rthree\nfour\n")
    assert rf.log_tail(tmp_path, lines=2) == "three\nfour"
    assert rf.log_tail(tmp_path / "missing") == ""
    assert json.loads(json.dumps(rf.log_tail(tmp_path)))  # plain text


def test_run_log_appends_the_runs_log_lines_to_its_folder(tmp_path):
    logger = logging.getLogger("bertlab.test_run_log")
    logger.setLevel(logging.INFO)
    with run_log(tmp_path / "run", first_line="bertlab pretrain --dry-run"):
        logger.info("step 1: loss 9.9")
    logger.info("after the run")  # the handler is gone with the run
    with pytest.raises(RuntimeError), run_log(tmp_path / "run"):
        raise RuntimeError("out of memory")
    lines = (tmp_path / "run" / "log.txt").read_text().splitlines()
    assert len(lines) == 3
    assert lines[0].endswith("bertlab pretrain --dry-run") and lines[1].endswith("step 1: loss 9.9")
    assert "stopped: RuntimeError: out of memory" in lines[2]
    with run_log(tmp_path / "missing", create=False):  # a resume of a folder that is not there
        logger.info("nothing to write to")
    assert not (tmp_path / "missing").exists()


def test_run_log_adds_nothing_where_stderr_already_is_the_log(tmp_path):
    """A job's output already goes to log.txt (the registry's redirect): no line twice."""
    script = textwrap.dedent("""
        import logging, sys
        from bertlab.storage.runfolder import run_log
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        with run_log(sys.argv[1], first_line="command"):
            logging.getLogger("bertlab.x").info("one line")
    """)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with open(run_dir / "log.txt", "ab") as log_file:
        subprocess.run(
            [sys.executable, "-c", script, str(run_dir)],
            stderr=log_file,
            check=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    assert (run_dir / "log.txt").read_text().splitlines() == ["one line"]
