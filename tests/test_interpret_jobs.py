"""Interpretation studies as jobs (bertlab.interpret.cli run through bertlab.jobs): a probe queued
through the registry runs to finished, its result lands beside the model where the page reads it
and is linked from the run folder; a bad path fails plainly; `bertlab jobs list` shows it.

Real jobs (a supervisor and `python -m bertlab interpret` each), so one probe job serves several
tests. Tiny model, CPU, offline, a runs folder of the tests' own."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import REPO, log_of, wait_for
from streamlit.testing.v1 import AppTest

from bertlab.app_pages import page_titled
from bertlab.cli import main as bertlab_main
from bertlab.interpret.args import probe_args
from bertlab.interpret.saved import read_results, result_path
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobError, JobSpec
from bertlab.jobs.states import expects_metrics, result_link_params, result_page
from bertlab.storage.runfolder import read_status, result_link

TAG_OF = {"cat": "NOUN", "dog": "NOUN", "park": "NOUN", "the": "DET", "a": "DET", "sat": "VERB", "ran": "VERB"}


def write_conllu(path, n: int = 12) -> str:
    words = list(TAG_OF)
    lines = []
    for k in range(n):
        ws = [words[(k + i * 3) % len(words)] for i in range(5)]
        lines.append(f"# sent_id = {k}")
        lines += [f"{i + 1}\t{w}\t{w}\t{TAG_OF[w]}\t_\t_\t0\t_\t_\t_" for i, w in enumerate(ws)]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(path)


def finished(reg: JobRegistry, job_id: str):
    return wait_for(lambda: (j := reg.get(job_id)).is_final and not j.alive and j, timeout=240, what=f"{job_id} to end")


@pytest.fixture(scope="module")
def probe_job(tmp_path_factory, tiny_checkpoint):
    """One probe job on a copy of the tiny checkpoint, submitted and run to its end."""
    d = tmp_path_factory.mktemp("interpret-job")
    model = d / "model"
    shutil.copytree(tiny_checkpoint, model)
    conllu = write_conllu(d / "train.conllu")
    root = d / "runs"
    old_env, old_cwd = os.environ.get("BERTLAB_RUNS"), os.getcwd()
    os.environ["BERTLAB_RUNS"] = str(root)
    os.chdir(REPO)
    reg = JobRegistry(root, cpu_slots=1)
    try:
        job = reg.submit(JobSpec("interpret", probe_args(str(model), "upos", conllu, conllu), device="cpu"))
        yield reg, finished(reg, job.id), model
    finally:
        for j in reg.list(start_queued=False):  # never leave a process behind
            if j.alive:
                reg.cancel(j.id, wait=True, timeout_s=10)
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("BERTLAB_RUNS", None)
        else:
            os.environ["BERTLAB_RUNS"] = old_env


def test_a_probe_job_runs_to_finished_and_saves_beside_the_model(probe_job):
    _, job, model = probe_job
    assert job.state == "finished", (job.error, log_of(job))
    assert job.kind == "interpret" and job.managed and job.id.startswith("interpret-probe-upos-")
    saved = read_results(model, "probe")["upos"]  # where the What each layer knows page reads it
    assert len(saved["accuracy"]) == 3  # the embeddings and the tiny model's two layers
    assert result_link(job.run_dir) == result_path(model, "probe", "upos").resolve()
    status = read_status(job.run_dir)
    assert status["result"] == str(result_path(model, "probe", "upos"))
    assert (job.step, job.total_steps, job.progress) == (3, 3, 1.0)  # progress per layer probed
    assert "probe upos layer 2" in log_of(job)
    assert not expects_metrics(job)  # no training curve to wait for
    assert result_page(job) == "What each layer knows"  # the Jobs page links there,
    assert result_link_params(job) == {"tab": "probing"}  # to the tab that shows it


def test_bertlab_jobs_list_shows_the_probe_job(probe_job, capsys):
    reg, job, _ = probe_job
    assert bertlab_main(["jobs", "--runs", str(reg.root), "list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(job.id))
    assert line.split()[1:3] == ["interpret", "finished"]
    assert bertlab_main(["jobs", "--runs", str(reg.root), "list", "--json"]) == 0
    listed = {j["id"]: j for j in json.loads(capsys.readouterr().out)}
    assert listed[job.id]["kind"] == "interpret" and listed[job.id]["state"] == "finished"


def test_a_missing_path_is_refused_before_it_is_queued(runs, tiny_checkpoint, tmp_path):
    conllu = write_conllu(tmp_path / "train.conllu")
    reg = JobRegistry(runs)
    args = probe_args(str(tiny_checkpoint), "upos", str(tmp_path / "missing.conllu"), conllu)
    with pytest.raises(JobError, match=r"--train .*missing.conllu not found"):
        reg.submit(JobSpec("interpret", args, device="cpu"))
    with pytest.raises(JobError, match="invalid choice"):
        reg.submit(JobSpec("interpret", ("probe", "--model", str(tiny_checkpoint), "--task", "pos"), device="cpu"))
    assert not reg.list()


def test_a_file_that_is_not_conllu_fails_plainly(runs, tiny_checkpoint, tmp_path):
    (tmp_path / "empty.conllu").write_text("\n", encoding="utf-8")
    reg = JobRegistry(runs, cpu_slots=1)
    empty = str(tmp_path / "empty.conllu")
    job = reg.submit(JobSpec("interpret", probe_args(str(tiny_checkpoint), "upos", empty, empty), device="cpu"))
    done = finished(reg, job.id)
    assert done.state == "failed" and done.job["returncode"] == 2
    assert "empty.conllu: no sentences" in done.error and "Traceback" not in done.error, done.error
    assert "bertlab interpret: error: " in log_of(done)
    assert not (tiny_checkpoint / "interpret").exists()


def open_page(title: str, model) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(page_titled(title).file).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_jobs_page_shows_the_probe_job_without_a_curve(probe_job, monkeypatch):
    _, job, model = probe_job
    monkeypatch.setenv("BERTLAB_MODEL", str(model))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = open_page("Jobs", model)
    assert at.selectbox(key="jobs_pick").value == job.id
    assert not at.get("plotly_chart")  # no training curve, and no complaint about one
    assert "No metrics written yet." not in [c.value for c in at.caption]
    assert any("result.json" in c.value for c in at.caption)


def test_page_11_runs_a_probe_as_a_job(runs, tiny_checkpoint, tmp_path, monkeypatch):
    model = tmp_path / "model"
    shutil.copytree(tiny_checkpoint, model)
    conllu = write_conllu(tmp_path / "train.conllu")
    monkeypatch.setenv("BERTLAB_MODEL", str(model))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # queued only: no process starts here
    at = open_page("What each layer knows", model)
    at.session_state["layers_tab"] = "Probing classifiers"  # only the open tab is computed
    at.run()
    at.text_input(key="probe_job_train").set_value(conllu)
    at.text_input(key="probe_job_eval").set_value(conllu).run()
    at.button(key="probe_job_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (job,) = JobRegistry(runs).list(start_queued=False)
    assert job.kind == "interpret" and job.state == "queued"
    assert job.job["args"] == list(probe_args(str(model), "upos", conllu, conllu))
